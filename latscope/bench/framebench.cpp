// latscope: Verilator harness of the frame line-rate bench (latscope/bench/framebench.py).
//
// The frame-capture core (LatscopeCore with sniffer="mii"|"rmii", the ECPIX-5's parameters) in its
// four clock domains, each with its own period: capture, sync (link), phy_rx and phy_tx (on RMII
// both from one REF_CLK). A frame generator in C++ puts frames on both directions' pins, one
// symbol (MII nibble or RMII dibit) per PHY clock: preamble, SFD, the frame bytes, the FCS
// (CRC-32 computed here for every frame, so every frame differs from the last in its sequence
// number and FCS), then the inter-frame gap. The same RX_DV/CRS_DV and TX_EN levels reach the
// capture channels as lane samples (4 ticks per capture clock on the ECPIX-5). Python would
// cost ~10^5 times more per PHY clock; this way every clock of every domain is evaluated and
// nothing is skipped.
//
// stdin, all little-endian, read once at the start:
//   u32 magic 0x4C534642 ("BFSL"), u32 version 2
//   u32 period_ps[4]     capture, sync, phy_rx, phy_tx
//   u8  interface        0 MII, 1 RMII
//   u8  lanes, u8 channels, u8 rx_channel, u8 tx_channel   capture channels of RX_DV/CRS_DV, TX_EN
//   u32 throttle         sync cycles per transfer the link takes (1: every cycle)
//   u32 per_byte         1: `throttle` cycles for each byte of a transfer (the UART)
//   u32 reset_ps         reset held from time 0
//   u32 start_ps         time the generators start (commands are answered before)
//   u32 gap_symbols      PHY clocks with DV low after each frame (24 MII / 48 RMII: 96 bit times)
//   u64 tail_ps          simulated time after the last frame ends
//   u16 n_cmd, n_cmd bytes    host bytes for the core's rx stream (commands), sent at once
//   per direction (rx, then tx):
//     u64 frames, u32 seq_base, u32 n_templates, then per template:
//       u16 length (with FCS), i16 seq_pos (byte offset of the big-endian u32, -1: none),
//       u8 carrier_early (RMII: nibbles before the end where CRS_DV toggles), length bytes
// Frame i of a direction is template i % n_templates with seq_base + i at seq_pos and its FCS
// (last 4 bytes) computed here; a template without seq_pos goes out exactly as given (so a
// test can send runts and bad FCSs).
// stdout: every byte the core sends on tx. stderr: a statistics line at the end.
// With FRAMEBENCH_PINS=<path> in the environment, the pins driven on each PHY clock edge of
// both directions are written there too, one byte per edge per direction (rx then tx, when
// that direction's clock rose): dv | data << 2 | direction << 7, so a test can check the
// serialisation itself with an independent parser.
// With FRAMEBENCH_EDGES=<path>, every change of the RX_DV/CRS_DV and TX_EN levels the capture
// channels see is written there as 10 bytes: u64 time in ps from which the new level holds,
// u8 direction (0 rx, 1 tx), u8 new level; in time order per direction. The edge check
// (framebench.py) turns these into the capture ticks the front end must report.

// (After the shared part, twoclock.h: set-up reading, the tx link, the clocks.)

#include <cstring>

using namespace twoclock;

namespace {

Vtop *top;
uint32_t crc_table[256];

void crc_init() {
    for (uint32_t i = 0; i < 256; i++) {
        uint32_t c = i;
        for (int k = 0; k < 8; k++) c = c & 1 ? 0xEDB88320u ^ (c >> 1) : c >> 1;
        crc_table[i] = c;
    }
}

uint32_t crc32(const uint8_t *p, size_t n) {     // zlib.crc32
    uint32_t c = 0xFFFFFFFFu;
    for (size_t i = 0; i < n; i++) c = crc_table[(c ^ p[i]) & 0xFF] ^ (c >> 8);
    return c ^ 0xFFFFFFFFu;
}

struct Template {
    std::vector<uint8_t> bytes;
    int seq_pos;
    unsigned carrier_early;
};

struct Generator {
    bool rmii = false;
    bool toggles = false;         // CRS_DV end-of-frame toggling (receive direction of RMII)
    uint64_t frames = 0, sent = 0;
    uint32_t seq_base = 0;
    std::vector<Template> templates;
    uint32_t gap = 24;
    std::vector<uint8_t> sym, dv;  // the current frame's symbols (gap included)
    size_t pos = 0;
    uint8_t pin_dv = 0, pin_data = 0;
    uint64_t symbols = 0;          // PHY clocks driven

    void next_frame() {
        Template &t = templates[sent % templates.size()];
        std::vector<uint8_t> f = t.bytes;
        if (t.seq_pos >= 0) {
            uint32_t s = seq_base + static_cast<uint32_t>(sent);
            for (int k = 0; k < 4; k++) f[t.seq_pos + k] = static_cast<uint8_t>(s >> (24 - 8 * k));
            uint32_t fcs = crc32(f.data(), f.size() - 4);
            for (int k = 0; k < 4; k++) f[f.size() - 4 + k] = static_cast<uint8_t>(fcs >> (8 * k));
        }
        sym.clear();
        dv.clear();
        if (!rmii) {
            for (int k = 0; k < 15; k++) sym.push_back(0x5);
            sym.push_back(0xD);
            for (uint8_t b : f) { sym.push_back(b & 15); sym.push_back(b >> 4); }
            dv.assign(sym.size(), 1);
        } else {
            for (int k = 0; k < 31; k++) sym.push_back(0x1);
            sym.push_back(0x3);
            for (uint8_t b : f)
                for (int s = 0; s < 8; s += 2) sym.push_back((b >> s) & 3);
            dv.assign(sym.size(), 1);
            if (toggles && t.carrier_early) {
                // RMII 1.2 §5.3.2: carrier lost before the data ends: CRS_DV low on the first
                // dibit of each remaining nibble, high on the second
                size_t first = sym.size() - 2 * t.carrier_early;
                for (size_t i = first; i < sym.size(); i += 2) dv[i] = 0;
            }
        }
        for (uint32_t k = 0; k < gap; k++) { sym.push_back(0); dv.push_back(0); }
        pos = 0;
        sent++;
    }

    // The pins for the next PHY clock edge; false once every frame is out.
    bool step() {
        if (pos == sym.size()) {
            if (sent == frames) { pin_dv = 0; pin_data = 0; return false; }
            next_frame();
        }
        pin_dv = dv[pos];
        pin_data = sym[pos];
        pos++;
        symbols++;
        return true;
    }
};

// A level history of one capture channel: the level changes at PHY clock edges.
struct Level {
    uint64_t changed_at = 0;
    uint8_t old_level = 0, level = 0;
    void set(uint8_t v, uint64_t t) {
        if (v != level) { old_level = level; level = v; changed_at = t; }
    }
    uint8_t at(uint64_t t) const { return t >= changed_at ? level : old_level; }
};

}  // namespace

int main(int argc, char **argv) {
    Verilated::commandArgs(argc, argv);
    harness_name = "framebench";
    crc_init();
    if (get<uint32_t>() != 0x4C534642u || get<uint32_t>() != 2) {
        fprintf(stderr, "framebench: bad setup header\n");
        return 3;
    }
    Clocks<4> clk;
    uint64_t *period = clk.period;
    for (int c = 0; c < 4; c++) period[c] = get<uint32_t>();
    bool rmii = get<uint8_t>() != 0;
    unsigned lanes = get<uint8_t>(), channels = get<uint8_t>();
    unsigned rx_ch = get<uint8_t>(), tx_ch = get<uint8_t>();
    TxLink tx;
    tx.throttle = get<uint32_t>();
    tx.per_byte = get<uint32_t>() != 0;
    uint64_t reset_ps = get<uint32_t>(), start_ps = get<uint32_t>();
    uint32_t gap = get<uint32_t>();
    uint64_t tail_ps = get<uint64_t>();
    RxHost rx;
    rx.read_setup();
    Generator gen[2];
    for (int d = 0; d < 2; d++) {
        Generator &g = gen[d];
        g.rmii = rmii;
        g.toggles = rmii && d == 0;
        g.gap = gap;
        g.frames = get<uint64_t>();
        g.seq_base = get<uint32_t>();
        for (uint32_t n = get<uint32_t>(); n; n--) {
            Template t;
            uint16_t len = get<uint16_t>();
            t.seq_pos = get<int16_t>();
            t.carrier_early = get<uint8_t>();
            t.bytes.resize(len);
            read_all(t.bytes.data(), len);
            if (len < 1 || (t.seq_pos >= 0 && t.seq_pos + 4 > static_cast<int>(len) - 4)
                || 2u * t.carrier_early > len * 4u) {
                fprintf(stderr, "framebench: bad template\n");
                return 3;
            }
            g.templates.push_back(t);
        }
        if (g.frames && g.templates.empty()) {
            fprintf(stderr, "framebench: frames without templates\n");
            return 3;
        }
    }
    if (lanes * channels > 32 || rx_ch >= channels || tx_ch >= channels || tx.throttle == 0) {
        fprintf(stderr, "framebench: bad parameters\n");
        return 3;
    }

    FILE *pins_out = nullptr;
    if (const char *path = getenv("FRAMEBENCH_PINS")) {
        pins_out = fopen(path, "wb");
        if (!pins_out) {
            fprintf(stderr, "framebench: cannot write %s\n", path);
            return 3;
        }
    }
    FILE *edges_out = nullptr;
    if (const char *path = getenv("FRAMEBENCH_EDGES")) {
        edges_out = fopen(path, "wb");
        if (!edges_out) {
            fprintf(stderr, "framebench: cannot write %s\n", path);
            return 3;
        }
    }
    top = new Vtop;
    if (rmii) period[3] = period[2];          // one REF_CLK for both directions
    Level level[2];
    bool running[2] = {false, false};
    bool started = false;
    uint64_t end_ps = UINT64_MAX;
    const bool *rise = clk.rise;
    auto wall0 = std::chrono::steady_clock::now();
    top->rst = 1;
    top->samples = 0;
    top->phy_rx = 0;
    top->phy_tx = 0;

    for (;;) {
        uint64_t t = clk.step();
        if (t >= end_ps) break;
        if (t >= reset_ps) top->rst = 0;
        if (!started && t >= start_ps) {
            started = true;
            running[0] = gen[0].frames > 0;
            running[1] = gen[1].frames > 0;
            if (!running[0] && !running[1]) end_ps = t + tail_ps;
        }
        // Inputs before the edge: lane samples of the capture channels over the last capture
        // period (lane 0 earliest), the link's ready, the host's next byte.
        if (rise[0]) {
            uint32_t word = 0;
            for (unsigned lane = 0; lane < lanes; lane++) {
                uint64_t tick = t - period[0] + (period[0] * lane + period[0] / 2) / lanes;
                if (t < period[0]) tick = 0;
                word |= static_cast<uint32_t>(level[0].at(tick)) << (lane * channels + rx_ch);
                word |= static_cast<uint32_t>(level[1].at(tick)) << (lane * channels + tx_ch);
            }
            top->samples = word;
        }
        LinkEdge link = link_inputs(top, tx, rx, rise[1]);
        if (clk.need_low()) {
            top->capture_clk = 0;
            top->sync_clk = 0;
            top->phy_rx_clk = 0;
            top->phy_tx_clk = 0;
            top->eval();
            clk.low_evals++;
        }
        top->capture_clk = rise[0];
        top->sync_clk = rise[1];
        top->phy_rx_clk = rise[2];
        top->phy_tx_clk = rise[3];
        top->eval();
        if (rise[1]) link_outputs(link, tx, rx);
        clk.advance();
        // The PHY (receive) and the MAC (transmit) change their outputs after the rising edge.
        for (int d = 0; d < 2; d++) {
            if (!rise[2 + d] || !running[d]) continue;
            Generator &g = gen[d];
            if (!g.step()) {
                running[d] = false;
                if (!running[0] && !running[1]) end_ps = t + tail_ps;
            }
            uint32_t pins = g.pin_dv | (g.pin_data << 2);     // dv, er (0), data
            if (d == 0) top->phy_rx = pins; else top->phy_tx = pins;
            if (pins_out) fputc(static_cast<int>(pins | (d << 7)), pins_out);
            if (edges_out && g.pin_dv != level[d].level) {
                unsigned char rec[10];
                uint64_t at = t + 1;
                for (int k = 0; k < 8; k++) rec[k] = static_cast<unsigned char>(at >> (8 * k));
                rec[8] = static_cast<unsigned char>(d);
                rec[9] = g.pin_dv;
                fwrite(rec, 1, sizeof(rec), edges_out);
            }
            level[d].set(g.pin_dv, t + 1);
        }
    }
    harness_out::flush();
    if (pins_out) fclose(pins_out);
    if (edges_out) fclose(edges_out);
    double wall = seconds_since(wall0);
    fprintf(stderr,
            "framebench-stats sim_ps=%llu evaluated=%llu low_evals=%llu capture_cycles=%llu sync_cycles=%llu "
            "phy_rx_cycles=%llu phy_tx_cycles=%llu rx_frames=%llu tx_frames=%llu "
            "rx_symbols=%llu tx_symbols=%llu tx_bytes=%llu wall_s=%.6f\n",
            (unsigned long long)end_ps, (unsigned long long)clk.evaluated,
            (unsigned long long)clk.low_evals,
            (unsigned long long)clk.edges[0], (unsigned long long)clk.edges[1],
            (unsigned long long)clk.edges[2], (unsigned long long)clk.edges[3],
            (unsigned long long)gen[0].sent, (unsigned long long)gen[1].sent,
            (unsigned long long)gen[0].symbols, (unsigned long long)gen[1].symbols,
            (unsigned long long)tx.bytes, wall);
    top->final();
    delete top;
    return 0;
}
