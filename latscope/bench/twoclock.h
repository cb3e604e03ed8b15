// latscope: what the Verilator harnesses of the multi-clock benches share (latscope/bench/
// twoclock.py puts this text in front of linkclocks.cpp or framebench.cpp).
//
// - reading the set-up from stdin (read_all, get<T>);
// - the core's tx stream to stdout (TxLink): a transfer is one byte, or with the two-byte link
//   path a word (tx_data[15:0], the second byte valid when tx_data[16]); the link takes one
//   transfer per `throttle` sync cycles, or with `per_byte` one per `throttle` cycles for each
//   of its bytes (the UART behind the link multiplexer, which takes a word and sends its bytes
//   one at a time);
// - the clocks (Clocks<N>): each domain on its own period, every rising edge of every domain
//   evaluated, a clock that rises again without an evaluation since its last edge seen low
//   first (only rising edges clock the design; inputs settle before the edge).

#include <cerrno>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <deque>
#include <unistd.h>
#include <vector>

#include "Vtop.h"
#include "verilated.h"

namespace twoclock {

const char *harness_name = "harness";

void read_all(void *dst, size_t n) {
    auto *p = static_cast<unsigned char *>(dst);
    while (n) {
        ssize_t r = read(0, p, n);
        if (r < 0 && errno == EINTR) continue;
        if (r <= 0) {
            fprintf(stderr, "%s: truncated setup\n", harness_name);
            exit(3);
        }
        p += r;
        n -= static_cast<size_t>(r);
    }
}

template <typename T> T get() {
    T v;
    read_all(&v, sizeof(v));
    return v;
}

using harness_out::put;

// The link taking the core's tx transfers (sync domain).
struct TxLink {
    uint32_t throttle = 1;
    bool per_byte = false;
    uint64_t since = UINT64_MAX / 2, need = 1, bytes = 0;

    bool ready() const { return since >= need; }

    // After a sync edge: `fire` when the transfer `word` was taken at it.
    void edge(bool fire, uint32_t word) {
        since++;
        if (!fire) return;
        unsigned n = (word >> 16) & 1 ? 2 : 1;
        put(static_cast<uint8_t>(word));
        if (n == 2) put(static_cast<uint8_t>(word >> 8));
        bytes += n;
        since = 1;
        need = static_cast<uint64_t>(throttle) * (per_byte ? n : 1);
    }
};

// The host's bytes into the core's rx stream (sync domain), all queued at the start.
struct RxHost {
    std::deque<uint8_t> queue;

    void read_setup() {
        for (uint16_t n = get<uint16_t>(); n; n--) queue.push_back(get<uint8_t>());
    }
};

// N clocks, each on its own period from time 0.
template <int N> struct Clocks {
    uint64_t period[N] = {}, next[N] = {}, edges[N] = {};
    bool high[N] = {}, rise[N] = {};
    uint64_t evaluated = 0, low_evals = 0;

    // The time of the next edge, and which clocks rise at it.
    uint64_t step() {
        uint64_t t = next[0];
        for (int c = 1; c < N; c++) if (next[c] < t) t = next[c];
        for (int c = 0; c < N; c++) rise[c] = next[c] == t;
        return t;
    }

    bool need_low() const {
        for (int c = 0; c < N; c++) if (rise[c] && high[c]) return true;
        return false;
    }

    // After the evaluation with this edge's clocks high.
    void advance() {
        for (int c = 0; c < N; c++) {
            high[c] = rise[c];
            if (rise[c]) { next[c] += period[c]; edges[c]++; }
        }
        evaluated++;
    }
};

// The core's byte/word stream and command handshakes of one sync edge, before it is evaluated
// (from the registered outputs of the last evaluation).
struct LinkEdge {
    bool tx_fire = false, rx_fire = false;
    uint32_t tx_word = 0;
};

template <typename Top> LinkEdge link_inputs(Top *top, TxLink &tx, RxHost &rx, bool sync_rise) {
    top->tx_ready = tx.ready();
    top->rx_valid = !rx.queue.empty() && !top->rst;
    top->rx_data = rx.queue.empty() ? 0 : rx.queue.front();
    LinkEdge e;
    e.tx_fire = sync_rise && top->tx_valid && top->tx_ready;
    e.rx_fire = sync_rise && top->rx_valid && top->rx_ready;
    e.tx_word = top->tx_data;
    return e;
}

void link_outputs(const LinkEdge &e, TxLink &tx, RxHost &rx) {
    tx.edge(e.tx_fire, e.tx_word);
    if (e.rx_fire) rx.queue.pop_front();
}

double seconds_since(std::chrono::steady_clock::time_point t0) {
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

}  // namespace twoclock
