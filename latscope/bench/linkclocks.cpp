// latscope: Verilator harness of the two-clock links bench (latscope/bench/linkclocks.py).
//
// The board's LatscopeCore (asynchronous capture FIFO) with its two clocks, each on its own
// period: capture and sync (the link clock of the encoder and framer). Every clock edge of both
// domains is evaluated; nothing is skipped. The capture channels follow a list of sample words,
// each held from its capture cycle on; the link accepts at most one tx byte per `throttle` sync
// cycles (the UART's byte time, or 1 for the Ethernet streamer, which takes bytes faster than
// the link clock offers them).
//
// stdin, all little-endian, read once at the start:
//   u32 magic 0x4B4C534C ("LSLK"), u32 version 1
//   u32 period_ps[2]     capture, sync
//   u32 throttle         sync cycles per accepted tx byte (1: every cycle)
//   u32 reset_ps         reset held from time 0
//   u64 tail_ps          simulated time after the last sample word
//   u16 n_cmd, n_cmd bytes    host bytes for the core's rx stream (commands), sent at once
//   u64 n_words, then n_words of (u64 capture_cycle, u32 word): the samples input from the
//       rising edge numbered capture_cycle (0: the first edge at time 0) on; cycles increase
// stdout: every byte the core sends on tx. stderr: a statistics line at the end.

#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <deque>
#include <unistd.h>
#include <vector>

#include "Vtop.h"
#include "verilated.h"

namespace {

void read_all(void *dst, size_t n) {
    auto *p = static_cast<unsigned char *>(dst);
    while (n) {
        ssize_t r = read(0, p, n);
        if (r <= 0) {
            fprintf(stderr, "linkclocks: truncated setup\n");
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

unsigned char out_buf[1 << 16];
size_t out_len = 0;

void flush_out() {
    size_t done = 0;
    while (done < out_len) {
        ssize_t n = write(1, out_buf + done, out_len - done);
        if (n < 0) _exit(0);
        done += static_cast<size_t>(n);
    }
    out_len = 0;
}

}  // namespace

int main(int argc, char **argv) {
    Verilated::commandArgs(argc, argv);
    if (get<uint32_t>() != 0x4B4C534Cu || get<uint32_t>() != 1) {
        fprintf(stderr, "linkclocks: bad setup header\n");
        return 3;
    }
    uint64_t period[2];
    for (auto &p : period) p = get<uint32_t>();
    uint32_t throttle = get<uint32_t>();
    uint64_t reset_ps = get<uint32_t>();
    uint64_t tail_ps = get<uint64_t>();
    std::deque<uint8_t> rx_queue;
    for (uint16_t n = get<uint16_t>(); n; n--) rx_queue.push_back(get<uint8_t>());
    uint64_t n_words = get<uint64_t>();
    std::vector<uint64_t> cycles(n_words);
    std::vector<uint32_t> words(n_words);
    for (uint64_t i = 0; i < n_words; i++) {
        cycles[i] = get<uint64_t>();
        words[i] = get<uint32_t>();
        if (i && cycles[i] <= cycles[i - 1]) {
            fprintf(stderr, "linkclocks: sample cycles must increase\n");
            return 3;
        }
    }
    if (throttle == 0 || period[0] == 0 || period[1] == 0) {
        fprintf(stderr, "linkclocks: bad parameters\n");
        return 3;
    }
    uint64_t last_cycle = n_words ? cycles[n_words - 1] : 0;
    uint64_t end_ps = last_cycle * period[0] + tail_ps;

    Vtop *top = new Vtop;
    uint64_t next[2] = {0, 0};
    bool high[2] = {false, false};
    uint64_t evaluated = 0, edges[2] = {0, 0}, tx_bytes = 0, since_tx = UINT64_MAX / 2;
    size_t word_pos = 0;
    auto wall0 = std::chrono::steady_clock::now();
    top->rst = 1;
    top->samples = 0;

    for (;;) {
        uint64_t t = next[0] < next[1] ? next[0] : next[1];
        if (t >= end_ps) break;
        bool rise[2] = {next[0] == t, next[1] == t};
        if (t >= reset_ps) top->rst = 0;
        if (rise[0]) {
            while (word_pos < n_words && cycles[word_pos] <= edges[0])
                top->samples = words[word_pos++];
        }
        top->tx_ready = since_tx >= throttle;
        top->rx_valid = !rx_queue.empty() && !top->rst;
        top->rx_data = rx_queue.empty() ? 0 : rx_queue.front();
        // The byte handshakes of this edge, from the registered outputs of the last evaluation.
        bool tx_fire = rise[1] && top->tx_valid && top->tx_ready;
        bool rx_fire = rise[1] && top->rx_valid && top->rx_ready;
        uint8_t tx_byte = top->tx_data;
        // A clock rising again without an evaluation since its last edge is seen low first.
        if ((rise[0] && high[0]) || (rise[1] && high[1])) {
            top->capture_clk = 0;
            top->sync_clk = 0;
            top->eval();
        }
        top->capture_clk = rise[0];
        top->sync_clk = rise[1];
        top->eval();
        high[0] = rise[0];
        high[1] = rise[1];
        evaluated++;
        for (int c = 0; c < 2; c++) if (rise[c]) { next[c] += period[c]; edges[c]++; }
        if (rise[1]) {
            since_tx++;
            if (tx_fire) {
                if (out_len == sizeof(out_buf)) flush_out();
                out_buf[out_len++] = tx_byte;
                tx_bytes++;
                since_tx = 1;
            }
            if (rx_fire) rx_queue.pop_front();
        }
    }
    flush_out();
    double wall = std::chrono::duration<double>(std::chrono::steady_clock::now() - wall0).count();
    fprintf(stderr,
            "linkclocks-stats sim_ps=%llu evaluated=%llu capture_cycles=%llu sync_cycles=%llu "
            "tx_bytes=%llu wall_s=%.6f\n",
            (unsigned long long)end_ps, (unsigned long long)evaluated,
            (unsigned long long)edges[0], (unsigned long long)edges[1],
            (unsigned long long)tx_bytes, wall);
    top->final();
    delete top;
    return 0;
}
