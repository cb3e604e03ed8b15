// latscope: Verilator harness of the two-clock links bench (latscope/bench/linkclocks.py), after
// the shared part (twoclock.h).
//
// The board's LatscopeCore (asynchronous capture FIFO) with its two clocks, each on its own
// period: capture and sync (the link clock of the encoder and framer). Every clock edge of both
// domains is evaluated; nothing is skipped. The capture channels follow a list of sample words,
// each held from its capture cycle on; the link takes the core's tx transfers at the rate
// twoclock.h's TxLink is given (the UART's byte time, or every cycle for the Ethernet
// streamer's FIFO, which is read faster than the link clock fills it).
//
// stdin, all little-endian, read once at the start:
//   u32 magic 0x4B4C534C ("LSLK"), u32 version 2
//   u32 period_ps[2]     capture, sync
//   u32 throttle         sync cycles per transfer the link takes (1: every cycle)
//   u32 per_byte         1: `throttle` cycles for each byte of a transfer (the UART)
//   u32 reset_ps         reset held from time 0
//   u64 tail_ps          simulated time after the last sample word
//   u16 n_cmd, n_cmd bytes    host bytes for the core's rx stream (commands), sent at once
//   u64 n_words, then n_words of (u64 capture_cycle, u32 word): the samples input from the
//       rising edge numbered capture_cycle (0: the first edge at time 0) on; cycles increase
// stdout: every byte the core sends on tx. stderr: a statistics line at the end.

using namespace twoclock;

int main(int argc, char **argv) {
    Verilated::commandArgs(argc, argv);
    harness_name = "linkclocks";
    if (get<uint32_t>() != 0x4B4C534Cu || get<uint32_t>() != 2) {
        fprintf(stderr, "linkclocks: bad setup header\n");
        return 3;
    }
    Clocks<2> clk;
    for (auto &p : clk.period) p = get<uint32_t>();
    TxLink tx;
    tx.throttle = get<uint32_t>();
    tx.per_byte = get<uint32_t>() != 0;
    uint64_t reset_ps = get<uint32_t>();
    uint64_t tail_ps = get<uint64_t>();
    RxHost rx;
    rx.read_setup();
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
    if (tx.throttle == 0 || clk.period[0] == 0 || clk.period[1] == 0) {
        fprintf(stderr, "linkclocks: bad parameters\n");
        return 3;
    }
    uint64_t last_cycle = n_words ? cycles[n_words - 1] : 0;
    uint64_t end_ps = last_cycle * clk.period[0] + tail_ps;

    Vtop *top = new Vtop;
    size_t word_pos = 0;
    auto wall0 = std::chrono::steady_clock::now();
    top->rst = 1;
    top->samples = 0;

    for (;;) {
        uint64_t t = clk.step();
        if (t >= end_ps) break;
        if (t >= reset_ps) top->rst = 0;
        if (clk.rise[0]) {
            while (word_pos < n_words && cycles[word_pos] <= clk.edges[0])
                top->samples = words[word_pos++];
        }
        LinkEdge link = link_inputs(top, tx, rx, clk.rise[1]);
        if (clk.need_low()) {
            top->capture_clk = 0;
            top->sync_clk = 0;
            top->eval();
            clk.low_evals++;
        }
        top->capture_clk = clk.rise[0];
        top->sync_clk = clk.rise[1];
        top->eval();
        if (clk.rise[1]) link_outputs(link, tx, rx);
        clk.advance();
    }
    harness_out::flush();
    fprintf(stderr,
            "linkclocks-stats sim_ps=%llu evaluated=%llu capture_cycles=%llu sync_cycles=%llu "
            "tx_bytes=%llu wall_s=%.6f\n",
            (unsigned long long)end_ps, (unsigned long long)clk.evaluated,
            (unsigned long long)clk.edges[0], (unsigned long long)clk.edges[1],
            (unsigned long long)tx.bytes, seconds_since(wall0));
    top->final();
    delete top;
    return 0;
}
