// latscope: Verilator harness for the simulated instrument (LatscopeCore exported to Verilog).
//
// Built by gateware/verilator.py around the wrapper module `harness_top` it generates, whose ports
// have fixed names and widths: clk, rst, samples[31:0], selftest_out[3:0], tx_data[7:0], tx_valid,
// tx_ready, rx_data[7:0], rx_valid, rx_ready, ff_skip[63:0], quiescent, ff_limit[63:0], phy[31:0],
// link_clk, link_quiet, window_skip[7:0], gclk0..gclk15, gate_quiet[15:0]. The wrapper
// registers rst once before the core's reset ports, on each domain's own clock (rst_q on clk,
// rst_link_clk_q on link_clk, ...); no clock is left still during a reset, so all of them hold
// the same value.
//
// Link clock gate: where the core has a `link_quiet` output (a link-domain edge now would change
// nothing that matters), the wrapper clocks the core's link domain from link_clk, and a cycle in
// which link_quiet is 1 leaves link_clk still, so only the capture domain is evaluated. Like the
// fast-forward, the gate is on while FASTFWD allows it and never during a reset.
//
// Clock gates: where the core has them (each channel's glitch filter), gate_quiet bit k says
// that an edge of gate k's clock would change none of its registers, and the wrapper clocks gate
// k's registers from gclk<k>, which a cycle with bit k set leaves still. Same rules as the link
// clock gate.
//
// Window skip: where the core has one (`window_skip` nonzero: an edge has just entered its glitch
// filter's window, and everything else is settled), a tick with ff_skip = w for 1 <= w <=
// window_skip advances the core by w + 1 cycles at once, if the samples stay the same so long.
//
// stdin: a binary command stream (little-endian), one opcode byte then its arguments:
//   0x01 SAMPLES  u32 word, u64 hold   set the sample word (bit lane*channels+ch), run hold cycles
//   0x02 RUN      u64 cycles           run with the current sample word
//   0x03 RX       u16 n, n bytes       queue bytes for the core's rx stream (one per ready cycle)
//   0x04 FASTFWD  u8 allowed           skip quiescent stretches with ff_skip (default 1)
//   0x05 THROTTLE u32 n                accept at most one tx byte per n cycles (0: none, 1: all)
//   0x06 DRAIN    u64 max, u32 quiet   run until the core is quiescent, no tx byte is waiting, the
//                                      rx queue is empty and quiet cycles passed since the last tx
//                                      byte, then on past the core's next ff_limit (its next
//                                      heartbeat, which sends a partly filled frame) and until all
//                                      that holds again; at most max cycles
//   0x07 STATS                         write a statistics line to stderr
//   0x08 RESET    u32 cycles           hold rst for that many cycles (time starts again at 0)
//   0x09 CABLE    u8 channels, u8 lanes, u16 mask, 16 x u16 delay
//                                      a simulated fan-out cable: from now on channel ch of mask
//                                      sees the self-test output pin delayed by delay[ch] ticks
//                                      (a tick is one lane), in place of its sample-word bits;
//                                      mask 0 removes the cable. Delays are at most 1023 ticks.
//   0x0A PHY      u32 word             set the MII/RMII pin word (a frame-capture core's PHY
//                                      clocks and data; see verilator.py PHY_BITS) and evaluate,
//                                      between two capture clock cycles
//   0x0B EVALMODE u8 flags             bit 0: leave the link and gate clocks still while quiet;
//                                      bit 1: one eval() per cycle where the model allows;
//                                      bit 2: the logic of the inputs only after an input
//                                      changed; bit 3: take the core's window skips while
//                                      fast-forward is allowed (default 15; the bytes are the
//                                      same either way, only the CPU differs)
// stdout: every byte the core sends on tx, as it is accepted. Output is flushed whenever the
// harness waits for input, so an interactive driver sees replies without closing stdin.
// At end of input the harness writes a final statistics line to stderr and exits with status 0;
// a malformed command exits with status 3.

#include <cerrno>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <deque>
#include <type_traits>
#include <utility>
#include <unistd.h>

#include "Vtop.h"
#include "Vtop___024root.h"
#include "verilated.h"

// Verilator's generated evaluation function and two of its phases (see evaluate() below).
void Vtop___024root___eval(Vtop___024root *vlSelf) __attribute__((weak));
bool Vtop___024root___eval_phase__act(Vtop___024root *vlSelf) __attribute__((weak));
bool Vtop___024root___eval_phase__nba(Vtop___024root *vlSelf) __attribute__((weak));

namespace {

// One eval() per clock cycle instead of two. Verilator detects a rising clock edge by comparing
// the clock input with the value it saw at the previous eval(), which it keeps in a member of the
// model's root (named as below by Verilator 5). Setting that member to 0 arms the edge without an
// eval() with the clock low, which would evaluate all logic of the inputs a second time. Where
// the generated model has no such member, tick() evaluates with the clock low as usual. The
// outputs the harness reads before the edge (tx_valid, tx_data, rx_ready, selftest_out,
// quiescent, ff_limit, link_quiet) come from registers of the core, so the previous eval()
// left them correct for this cycle whatever the new inputs.
template <typename R, typename = void> struct HasClkPrev : std::false_type {};
template <typename R>
struct HasClkPrev<R, std::void_t<decltype(std::declval<R &>().__Vtrigprevexpr___TOP__clk__0)>>
    : std::true_type {};
template <typename R, typename = void> struct HasLinkClkPrev : std::false_type {};
template <typename R>
struct HasLinkClkPrev<
    R, std::void_t<decltype(std::declval<R &>().__Vtrigprevexpr___TOP__link_clk__0)>>
    : std::true_type {};

#ifdef LATSCOPE_LINK_CLOCK
constexpr bool kLinkClock = true;      // the wrapper drives the link domain from link_clk
#else
constexpr bool kLinkClock = false;
#endif
constexpr bool kOneEval = HasClkPrev<Vtop___024root>::value
                          && (!kLinkClock || HasLinkClkPrev<Vtop___024root>::value);

// The gate clocks gclk0..gclk15: a trait per input, true where the model has its edge member
// (Verilator drops an input that clocks nothing, and its member with it).
#define LATSCOPE_GCLK_TRAIT(N)                                                                  \
    template <typename R, typename = void> struct HasGclkPrev##N : std::false_type {};          \
    template <typename R>                                                                       \
    struct HasGclkPrev##N<                                                                      \
        R, std::void_t<decltype(std::declval<R &>().__Vtrigprevexpr___TOP__gclk##N##__0)>>      \
        : std::true_type {};
#define LATSCOPE_GCLKS(X) X(0) X(1) X(2) X(3) X(4) X(5) X(6) X(7) X(8) X(9) X(10) X(11) X(12) \
    X(13) X(14) X(15)
LATSCOPE_GCLKS(LATSCOPE_GCLK_TRAIT)

// evaluate() calls the model's evaluation proper (declared above the namespace). Vtop::eval()
// calls it and then hands over the messages and deletions other threads queued, which takes a
// mutex at every call; this harness has no other threads, so after the first eval() (which
// initialises the model) it is called directly. Where a Verilator version names it otherwise,
// the weak declaration leaves it null and evaluate() calls eval().
//
// The evaluation begins with the logic of the inputs (Verilator's "ico" phase: everything
// combinational that reads an input, about a tenth of a cycle's work here), at every call, as
// Verilator cannot know whether an input changed. The harness can: it keeps the inputs' values
// at the last evaluation, and where none differs, it runs only the phases after it: the clock
// triggers, then the clocked logic and the logic of the registers that changed. The logic of
// the inputs then holds the values the last evaluation left, which are those of these inputs,
// as any register it reads that changed since had that logic evaluated again after it changed.
// Verilator's own evaluation would then look for triggers once more, to find none: every
// trigger of this model is a rising edge of a clock input of harness_top (core_wrapper gives
// each domain's clock one; the domains' resets are synchronous), which only the harness sets,
// so the clocked logic cannot make another. (The engine tests compare the bytes with those of
// Verilator's own evaluation, EVALMODE 0.)
struct Inputs {
    uint32_t samples, phy;
    uint64_t ff_skip;
    uint8_t rst, tx_ready, rx_valid, rx_data;
    bool operator==(const Inputs &o) const {
        return samples == o.samples && phy == o.phy && ff_skip == o.ff_skip && rst == o.rst
               && tx_ready == o.tx_ready && rx_valid == o.rx_valid && rx_data == o.rx_data;
    }
};
Inputs inputs_of(const Vtop *t) {
    return Inputs{t->samples, t->phy, t->ff_skip, t->rst, t->tx_ready, t->rx_valid, t->rx_data};
}
Inputs last_inputs{};             // as at the first eval() (main), then at each evaluate()
bool skip_input_logic = true;     // EVALMODE bit 2

void evaluate(Vtop *t) {
    Inputs now = inputs_of(t);
    bool same = now == last_inputs;
    last_inputs = now;
    if (same && skip_input_logic && Vtop___024root___eval_phase__act != nullptr
        && Vtop___024root___eval_phase__nba != nullptr) {
        Vtop___024root___eval_phase__act(t->rootp);
        Vtop___024root___eval_phase__nba(t->rootp);
    } else if (Vtop___024root___eval != nullptr) {
        Vtop___024root___eval(t->rootp);
    } else {
        t->eval();
    }
}

template <typename R> void arm_edges(R *root) {
    if constexpr (HasClkPrev<R>::value) root->__Vtrigprevexpr___TOP__clk__0 = 0;
    if constexpr (HasLinkClkPrev<R>::value) root->__Vtrigprevexpr___TOP__link_clk__0 = 0;
#define LATSCOPE_ARM_GCLK(N) \
    if constexpr (HasGclkPrev##N<R>::value) root->__Vtrigprevexpr___TOP__gclk##N##__0 = 0;
    LATSCOPE_GCLKS(LATSCOPE_ARM_GCLK)
#undef LATSCOPE_ARM_GCLK
}

// Ones in a word (without the library call a compiler makes of __builtin_popcount by default).
unsigned bit_count(uint32_t v) {
    v = v - ((v >> 1) & 0x55555555u);
    v = (v & 0x33333333u) + ((v >> 2) & 0x33333333u);
    return (((v + (v >> 4)) & 0x0F0F0F0Fu) * 0x01010101u) >> 24;
}

// Set the gate clock inputs the model uses: bit N of `bits` to gclkN.
void set_gate_clocks(Vtop *t, uint32_t bits) {
#define LATSCOPE_SET_GCLK(N) \
    if constexpr (HasGclkPrev##N<Vtop___024root>::value) t->gclk##N = (bits >> N) & 1;
    LATSCOPE_GCLKS(LATSCOPE_SET_GCLK)
#undef LATSCOPE_SET_GCLK
}

Vtop *top;
uint64_t cycles = 0;          // cycles since the last reset release, including skipped ones
uint64_t total_cycles = 0;    // all cycles ever, including skipped ones
uint64_t skipped = 0;         // cycles advanced by fast-forward instead of evaluation
uint64_t evaluated = 0;       // clock cycles really evaluated
uint64_t link_gated = 0;      // evaluated cycles in which the link clock stayed still
uint64_t gates_still = 0;     // evaluated cycles times gate clocks that stayed still
uint64_t window_skips = 0;    // window skips taken (each carried an edge through the filter)
bool in_reset = false;
bool window_allowed = true;    // EVALMODE bit 3
bool gate_allowed = true;      // EVALMODE bit 0
bool one_eval = kOneEval;      // EVALMODE bit 1, where the model allows it
uint64_t tx_bytes = 0;
uint64_t since_tx = UINT64_MAX / 2;   // cycles since the last accepted tx byte
uint32_t throttle = 1;
bool ff_allowed = true;
std::deque<uint8_t> rx_queue;

// The fan-out cable (CABLE): a history of the self-test pin per tick, newest at cable_pos.
constexpr unsigned CABLE_HISTORY = 1024;
uint16_t cable_mask = 0;
unsigned cable_channels = 0, cable_lanes = 0;
uint16_t cable_delay[16];
uint8_t cable_hist[CABLE_HISTORY];
unsigned cable_pos = 0;
unsigned cable_ones = 0;       // ones in cable_hist: 0 means no edge is still on its way
uint32_t base_samples = 0;     // the sample word SAMPLES set (the cable overrides its channels)
auto started = std::chrono::steady_clock::now();

unsigned char in_buf[1 << 16];
size_t in_pos = 0, in_len = 0;
using harness_out::flush;
using harness_out::put;

// Read exactly n bytes; false at a clean end of input before the first byte.
bool read_exact(void *dst, size_t n, bool eof_ok) {
    auto *p = static_cast<unsigned char *>(dst);
    size_t got = 0;
    while (got < n) {
        if (in_pos == in_len) {
            flush();
            ssize_t r = read(0, in_buf, sizeof(in_buf));
            if (r < 0 && errno == EINTR) continue;
            if (r <= 0) {
                if (got == 0 && eof_ok) return false;
                fprintf(stderr, "harness: truncated command\n");
                exit(3);
            }
            in_pos = 0;
            in_len = static_cast<size_t>(r);
        }
        size_t take = in_len - in_pos < n - got ? in_len - in_pos : n - got;
        memcpy(p + got, in_buf + in_pos, take);
        in_pos += take;
        got += take;
    }
    return true;
}

template <typename T> T get() {
    T value;
    read_exact(&value, sizeof(value), false);   // x86/ARM hosts are little-endian, like the stream
    return value;
}

void stats(const char *when) {
    double wall = std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
    fprintf(stderr,
            "harness-stats when=%s cycles=%llu total_cycles=%llu evaluated=%llu skipped=%llu "
            "link_gated=%llu gates_still=%llu window_skips=%llu tx_bytes=%llu wall_s=%.6f\n",
            when, (unsigned long long)cycles, (unsigned long long)total_cycles,
            (unsigned long long)evaluated, (unsigned long long)skipped,
            (unsigned long long)link_gated, (unsigned long long)gates_still,
            (unsigned long long)window_skips, (unsigned long long)tx_bytes, wall);
    fflush(stderr);
}

// The cable: push this cycle's self-test pin (one bit per lane, lane 0 earliest) into the history
// and present each cabled channel's delayed level in its sample-word bits. The pin comes from
// registers only (no path from samples), so the value after the last eval() is this cycle's.
void apply_cable() {
    uint32_t pin = top->selftest_out;
    for (unsigned lane = 0; lane < cable_lanes; lane++) {
        cable_pos = (cable_pos + 1) % CABLE_HISTORY;
        cable_ones -= cable_hist[cable_pos];
        cable_hist[cable_pos] = (pin >> lane) & 1;
        cable_ones += cable_hist[cable_pos];
    }
    uint32_t word = base_samples;
    for (unsigned ch = 0; ch < cable_channels; ch++) {
        if (!((cable_mask >> ch) & 1)) continue;
        for (unsigned lane = 0; lane < cable_lanes; lane++) {
            // tick `lane` of this cycle is (cable_lanes - 1 - lane) ticks before the newest
            unsigned back = cable_delay[ch] + (cable_lanes - 1 - lane);
            unsigned bit = lane * cable_channels + ch;
            uint32_t level = cable_hist[(cable_pos + CABLE_HISTORY - back) % CABLE_HISTORY];
            word = (word & ~(1u << bit)) | (level << bit);
        }
    }
    top->samples = word;
}

// One clock cycle; with skip > 0 the core advances skip + 1 cycles (fast-forward).
void tick(uint64_t skip = 0) {
    top->ff_skip = skip;
    top->tx_ready = throttle != 0 && since_tx >= throttle;
    top->rx_valid = !rx_queue.empty();
    top->rx_data = rx_queue.empty() ? 0 : rx_queue.front();
    bool may_gate = !in_reset && ff_allowed && gate_allowed;
    // link_quiet also needs the rx input idle; with one eval() it was computed for the old one
    bool link = !may_gate || !top->link_quiet || top->rx_valid;
    // gate_quiet comes from registers (and the configuration, a register of the link side)
    uint32_t still = may_gate ? top->gate_quiet : 0;
    if (one_eval) {
        arm_edges(top->rootp);
    } else {
        top->clk = 0;
        top->link_clk = 0;
        set_gate_clocks(top, 0);
        evaluate(top);
    }
    if (cable_mask) apply_cable();
    bool tx_fire = top->tx_valid && top->tx_ready;
    uint8_t tx_byte = top->tx_data;
    bool rx_fire = top->rx_valid && top->rx_ready;
    top->clk = 1;
    top->link_clk = link;
    set_gate_clocks(top, ~still);
    evaluate(top);
    evaluated++;
    if (!link) link_gated++;
    gates_still += bit_count(still);
    cycles += skip + 1;
    total_cycles += skip + 1;
    skipped += skip;
    since_tx += skip + 1;
    if (tx_fire) {
        put(tx_byte);
        tx_bytes++;
        since_tx = skip + 1;
    }
    if (rx_fire) rx_queue.pop_front();
    top->ff_skip = 0;
}

// Settle combinational outputs for the current inputs without a clock edge.
void settle() {
    top->ff_skip = 0;
    top->tx_ready = throttle != 0 && since_tx >= throttle;
    top->rx_valid = !rx_queue.empty();
    top->rx_data = rx_queue.empty() ? 0 : rx_queue.front();
    top->clk = 0;
    top->link_clk = 0;
    set_gate_clocks(top, 0);
    evaluate(top);
}

void run(uint64_t n) {
    // The outputs after a clock edge describe the next cycle as long as the inputs stay the same,
    // so the quiescence check costs no extra evaluation; settle once for a new sample word.
    settle();
    while (n > 0) {
        // Skip only with the rx stream and tx idle and, with a cable, no self-test edge in it
        // (the pin idles low).
        bool may_skip = ff_allowed && n > 1 && rx_queue.empty() && !top->tx_valid
                        && (!cable_mask || (cable_ones == 0 && top->selftest_out == 0));
        // Quiescent: up to the core's ff_limit. Else a window skip, which carries an edge just
        // sampled through the glitch filter's window in one cycle: k + 1 cycles (k at most
        // window_skip) in all of which the samples must be the same (they are, to the end of
        // this run). Either way at most the n - 1 cycles left after this one.
        uint64_t k = !may_skip ? 0
                     : top->quiescent ? top->ff_limit
                     : window_allowed ? top->window_skip : 0;
        if (k > n - 1) k = n - 1;
        if (k > 0) {
            window_skips += !top->quiescent;
            tick(k);
            n -= k + 1;
            continue;
        }
        tick();
        n--;
    }
}

// Quiescence does not mean that everything was sent: the core may hold a partly filled frame,
// which only its next heartbeat closes. So once quiet, run on through the core's next
// fast-forward limit (for LatscopeCore the next heartbeat; skipped when allowed, as in run()),
// evaluate that cycle, and wait until the core is quiet again.
void drain(uint64_t max, uint32_t quiet) {
    bool crossed = false;
    uint64_t done = 0;
    while (done < max) {
        settle();
        if (rx_queue.empty() && top->quiescent && !top->tx_valid && since_tx >= quiet) {
            if (crossed) return;
            crossed = true;
            uint64_t n = static_cast<uint64_t>(top->ff_limit) + 2;
            if (n > max - done) n = max - done;
            uint64_t before = total_cycles;
            run(n);
            done += total_cycles - before;
            continue;
        }
        tick();
        done++;
    }
}

// The core sees rst one cycle late (the wrapper's rst_q): one more cycle after rst falls ends its
// reset, so time 0 is the same cycle as with rst wired straight through.
void reset(uint32_t n) {
    in_reset = true;
    top->rst = 1;
    for (uint32_t i = 0; i < n; i++) tick();
    top->rst = 0;
    tick();
    in_reset = false;
    cycles = 0;
}

}  // namespace

int main(int argc, char **argv) {
    Verilated::commandArgs(argc, argv);
    top = new Vtop;
    top->samples = 0;
    top->phy = 0;
    top->ff_skip = 0;
    top->link_clk = 0;
    set_gate_clocks(top, 0);
    top->eval();                  // initialises the model (evaluate() may bypass eval() later)
    last_inputs = inputs_of(top);
    reset(4);
    for (;;) {
        uint8_t op;
        if (!read_exact(&op, 1, true)) break;
        switch (op) {
        case 0x01: {
            uint32_t word = get<uint32_t>();
            uint64_t hold = get<uint64_t>();
            top->samples = base_samples = word;
            run(hold);
            break;
        }
        case 0x02: run(get<uint64_t>()); break;
        case 0x03: {
            uint16_t n = get<uint16_t>();
            for (uint16_t i = 0; i < n; i++) rx_queue.push_back(get<uint8_t>());
            break;
        }
        case 0x04: ff_allowed = get<uint8_t>() != 0; break;
        case 0x05: throttle = get<uint32_t>(); break;
        case 0x06: {
            uint64_t max = get<uint64_t>();
            uint32_t quiet = get<uint32_t>();
            drain(max, quiet);
            break;
        }
        case 0x07: flush(); stats("request"); break;
        case 0x08: reset(get<uint32_t>()); break;
        case 0x09: {
            cable_channels = get<uint8_t>();
            cable_lanes = get<uint8_t>();
            cable_mask = get<uint16_t>();
            for (auto &d : cable_delay) d = get<uint16_t>();
            bool bad = cable_channels > 16 || cable_lanes < 1 || cable_lanes > 4
                       || cable_channels * cable_lanes > 32;
            for (unsigned ch = 0; ch < 16; ch++)
                if (((cable_mask >> ch) & 1) && cable_delay[ch] + cable_lanes >= CABLE_HISTORY)
                    bad = true;
            if (bad) {
                flush();
                fprintf(stderr, "harness: bad CABLE command\n");
                return 3;
            }
            memset(cable_hist, 0, sizeof(cable_hist));
            cable_ones = 0;
            top->samples = base_samples;
            break;
        }
        case 0x0A:
            top->phy = get<uint32_t>();
            evaluate(top);
            break;
        case 0x0B: {
            uint8_t flags = get<uint8_t>();
            gate_allowed = flags & 1;
            one_eval = kOneEval && (flags & 2);
            skip_input_logic = flags & 4;
            window_allowed = flags & 8;
            break;
        }
        default:
            flush();
            fprintf(stderr, "harness: unknown command 0x%02x after %llu cycles\n", op,
                    (unsigned long long)cycles);
            return 3;
        }
    }
    flush();
    stats("end");
    top->final();
    delete top;
    return 0;
}
