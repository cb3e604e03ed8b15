"""``latscope replay-pins``: pin activity from independent writers through the real gateware.

Stimulus: scapy-built UDP frames (``latscope traffic``'s payload layout) serialised on MII pins by
this file's own serialiser (preamble, SFD, low nibble first, 25 MHz clocks running throughout,
data launched 8 ns after each rising edge), plus marker pulses at integer-ns times that are not
on the 1.25 ns tick grid; written as a VCD by pyvcd, and converted to a sigrok ``.sr`` by
sigrok-cli. Expected values come from the stimulus alone: each capture-channel edge at the
nearest 1.25 ns tick counted from the recording's first edge (the documented resampling; checked
exactly, tolerance 0 ticks, on differences between edges since the instrument adds one fixed
pipeline delay to every channel), and one FRAME record per frame with the stimulus's length,
sequence number, ports and FCS verdict (``zlib.crc32``).
The round trip (export VCD -> replay-pins -> analyze) must reproduce a bench capture's figures
exactly at the same tick rate.
"""

import json
import shutil
import subprocess
import sys
import zlib

import pytest

from latscope import LatscopeError
from latscope.capture.sim import replay

scapy_all = pytest.importorskip("scapy.all", reason="scapy builds the test frames (pip: scapy)")
pyvcd = pytest.importorskip("vcd", reason="pyvcd writes the test VCD (pip: pyvcd)")

TICK_HZ = 800_000_000                     # ECPIX-5 default build: 200 MHz x 4 lanes
MII_NS, TCO_NS = 40, 8
SEQS = [41_337, 41_338, 41_339, 7]
SPACING_NS = 20_000


def _frame(seq, *, reply, bad_fcs=False):
    a, b = ("02:00:00:00:00:01", "02:00:5e:00:53:32")
    src, dst = (b, a) if reply else (a, b)
    payload = b"LT\x00\x01" + seq.to_bytes(4, "big") + bytes(10)
    pkt = (scapy_all.Ether(src=src, dst=dst) / scapy_all.IP(src="192.0.2.1", dst="192.0.2.2")
           / scapy_all.UDP(sport=4242 if reply else 50000, dport=50000 if reply else 4242)
           / payload)
    raw = bytes(pkt)
    raw += bytes(max(0, 60 - len(raw)))
    fcs = zlib.crc32(raw) ^ (0xFF if bad_fcs else 0)
    return raw + fcs.to_bytes(4, "little")


def _stimulus():
    """Per signal: [(time_ns, level)] changes, and the frames of each direction."""
    changes = {n: [] for n in ("rx_clk", "tx_clk", "rx_dv", "tx_en", "m0", "m4")
               + tuple(f"rxd{i}" for i in range(4)) + tuple(f"txd{i}" for i in range(4))}
    frames = {"rx": [], "tx": []}
    t_end = 1_000 + SPACING_NS * (len(SEQS) + 1)
    for clk in ("rx_clk", "tx_clk"):              # free-running 25 MHz clocks
        for t in range(MII_NS, t_end, MII_NS // 2):        # first edge: rising at 40 ns
            changes[clk].append((t, int(t % MII_NS == 0)))

    def serialise(side, start, frame):
        dv, d = ("rx_dv", "rxd") if side == "rx" else ("tx_en", "txd")
        nibbles = []
        for byte in b"\x55" * 7 + b"\xd5" + frame:
            nibbles += [byte & 15, byte >> 4]
        for k, nib in enumerate(nibbles):
            t = start + k * MII_NS + TCO_NS
            for i in range(4):
                changes[f"{d}{i}"].append((t, (nib >> i) & 1))
        changes[dv] += [(start + TCO_NS, 1), (start + len(nibbles) * MII_NS + TCO_NS, 0)]
        for i in range(4):
            changes[f"{d}{i}"].append((start + len(nibbles) * MII_NS + TCO_NS, 0))
        return start + len(nibbles) * MII_NS + TCO_NS          # DV falls

    for k, seq in enumerate(SEQS):
        start = 1_000 + k * SPACING_NS
        rx = _frame(seq, reply=False, bad_fcs=(k == 2))
        end = serialise("rx", start, rx)
        frames["rx"].append((seq, rx))
        changes["m0"] += [(end + 1_233 + k, 1), (end + 1_333 + 2 * k, 0)]  # off the tick grid
        tx_start = end + 3_001 + k * MII_NS - (end + 3_001) % MII_NS     # on a TX_CLK edge
        changes["m4"] += [(tx_start - 501, 1), (tx_start - 401, 0)]
        if k != 2:                              # the bad frame is not echoed
            tx = _frame(seq, reply=True)
            serialise("tx", tx_start, tx)
            frames["tx"].append((seq, tx))
    return changes, frames, t_end


def write_vcd(path):
    changes, frames, t_end = _stimulus()
    events = sorted((t, name, v) for name, lst in changes.items() for t, v in lst)
    with open(path, "w") as f, pyvcd.VCDWriter(f, timescale="1 ns", date="today") as w:
        var = {n: w.register_var("dut", n, "wire", size=1, init=0) for n in changes}
        for t, name, v in events:
            w.change(var[name], t, v)
    return changes, frames


def expected_edges(changes):
    """(tick relative to the first edge, role, rising) of every capture-channel edge."""
    origin = min(t for lst in changes.values() for t, _ in lst)
    rows = []
    for role in ("rx_dv", "tx_en", "m0", "m4"):
        level = 0
        for t, v in sorted(changes[role]):
            if v != level:
                rows.append((((t - origin) * 2 * TICK_HZ + 10**9) // (2 * 10**9), role, v))
                level = v
    rows.sort()
    return rows


def _check_edges(lsc, changes):
    from latscope.capture.files import capfile
    cap = capfile.open_capture(lsc)
    time, channel, rising = cap.events()
    want = expected_edges(changes)
    assert len(time) == len(want)
    names = cap.channel_names
    got_roles = [names[int(c)] for c in channel]
    order = sorted(range(len(want)), key=lambda i: (want[i][0], want[i][1]))
    want = [want[i] for i in order]
    got = sorted(zip((time - time[0]).tolist(), got_roles, rising.astype(int).tolist(),
                     strict=True))
    base = want[0][0]
    assert [(t - base, r, v) for t, r, v in want] == got        # exact: 0 ticks tolerance
    return cap


def _check_frames(cap, frames):
    records, _ = cap.frames()
    for direction, side in ((0, "rx"), (1, "tx")):
        rec = records[records["direction"] == direction]
        want = frames[side]
        assert rec["frame_index"].tolist() == list(range(len(want)))
        assert rec["length"].tolist() == [len(f) for _, f in want]
        assert rec["seq"].tolist() == [s for s, _ in want]
        fcs_ok = (rec["flags"] & 1).astype(bool).tolist()
        assert fcs_ok == [zlib.crc32(f[:-4]) == int.from_bytes(f[-4:], "little")
                          for _, f in want]
        assert rec["dst_port"].tolist() == [int.from_bytes(f[36:38], "big") for _, f in want]


# --- errors: no simulator needed ---
def test_map_errors(tmp_path):
    path = tmp_path / "pins.vcd"
    write_vcd(path)
    with pytest.raises(LatscopeError, match="unknown role 'rx_xx'"):
        replay.read_recording(path, "rx_xx=rx_dv")
    with pytest.raises(LatscopeError, match="no 1-bit signal 'nope'"):
        replay.read_recording(path, "rx_dv=nope")
    with pytest.raises(LatscopeError, match="not ROLE=SIGNAL"):
        replay.read_recording(path, "rx_dv")
    rec = replay.read_recording(path, "rx_clk=rx_clk")
    with pytest.raises(LatscopeError, match="nothing to capture"):
        replay.build_stimulus(rec, tick_hz=TICK_HZ, lanes=4)
    rec = replay.read_recording(path, "rx_dv=rx_dv,rxd0=rxd0")
    with pytest.raises(LatscopeError, match="rxd1, rxd2, rxd3 are not"):
        replay.build_stimulus(rec, tick_hz=TICK_HZ, lanes=4, frames="mii")


def test_empty_window_and_bad_files(tmp_path):
    path = tmp_path / "flat.vcd"
    with open(path, "w") as f, pyvcd.VCDWriter(f, timescale="1 ns") as w:
        v = w.register_var("dut", "m0", "wire", size=1, init=0)
        c = w.register_var("dut", "rx_clk", "wire", size=1, init=0)
        w.change(c, 10, 1)
        w.change(v, 20, 0)
    rec = replay.read_recording(path)
    with pytest.raises(LatscopeError, match="never change"):
        replay.build_stimulus(rec, tick_hz=TICK_HZ, lanes=4)
    (tmp_path / "x.txt").write_text("hello")
    with pytest.raises(LatscopeError, match="reads .vcd or .sr"):
        replay.read_recording(tmp_path / "x.txt")


def test_resampling_is_nearest_tick_and_drops_collapsed_pulses(tmp_path):
    """Stimulus ticks: nearest 1.25 ns tick from the first edge; a 0.3 ns pulse is dropped."""
    path = tmp_path / "p.vcd"
    with open(path, "w") as f, pyvcd.VCDWriter(f, timescale="1 ps") as w:
        m0 = w.register_var("dut", "m0", "wire", size=1, init=0)
        m1 = w.register_var("dut", "m1", "wire", size=1, init=0)
        # m0: 2874 ps is 1.4992 ticks after 1000 ps, 2876 ps 1.5008; m1: 0.3 ns, 3.2 and 3.44 ticks
        for t, var, v in sorted([(1000, 0, 1), (2874, 0, 0), (2876, 0, 1), (10_000, 0, 0),
                                 (5000, 1, 1), (5300, 1, 0)]):
            w.change((m0, m1)[var], t, v)
    rec = replay.read_recording(path)
    stim = replay.build_stimulus(rec, tick_hz=TICK_HZ, lanes=4)
    # m0 (channel 3): 0, 1.4992 -> 1, 1.5008 -> 2, 7.2 -> 7 ticks after the first edge
    lead = replay.LEAD_TICKS
    assert stim.ticks.tolist() == [lead, lead + 1, lead + 2, lead + 7]
    assert [(v >> 3) & 1 for v in stim.values.tolist()] == [1, 0, 1, 0]
    assert stim.dropped_pulses == 1
    assert not any((v >> 4) & 1 for v in stim.values.tolist())


def test_cli_errors_are_one_line(tmp_path):
    path = tmp_path / "pins.vcd"
    write_vcd(path)
    for args, text in ((["--map", "bogus=rx_dv"], "unknown role 'bogus'"),
                       (["--map", "rx_dv=zz"], "no 1-bit signal 'zz'"),
                       (["--board", "icebreaker", "--frames", "mii"], "edges only"),
                       (["--samplerate", "0"], "--samplerate: sample rate '0' is not a positive "
                                               "whole number of Hz")):
        r = subprocess.run([sys.executable, "-m", "latscope", "replay-pins", str(path), "-o",
                            str(tmp_path / "o.lsc"), *args], capture_output=True, text=True)
        assert r.returncode == 2, r.stderr
        assert len(r.stderr.strip().splitlines()) == 1 and text in r.stderr, r.stderr
        assert not (tmp_path / "o.lsc").exists()
    for name, text in (("x.lsc", "reads .vcd or .sr files, not .lsc files"),
                       ("noext", "reads .vcd or .sr files, not a file without a suffix")):
        (tmp_path / name).write_bytes(b"LSC")
        r = subprocess.run([sys.executable, "-m", "latscope", "replay-pins",
                            str(tmp_path / name), "-o", str(tmp_path / "o.lsc")],
                           capture_output=True, text=True)
        assert r.returncode == 2 and r.stderr.strip().endswith(text), r.stderr


# --- through the gateware ---
@pytest.mark.slow
def test_vcd_and_sr_replay_exact_edges_and_frames(tmp_path):
    vcd_path = tmp_path / "pins.vcd"
    changes, frames = write_vcd(vcd_path)
    out = tmp_path / "vcd.lsc"
    result = replay.replay_pins(vcd_path, out, frames="mii")
    assert result["exit_status"] == 0 and result["reason"] == "replay complete"
    assert result["phy_clock"] == {"rx": "recorded rx_clk", "tx": "recorded tx_clk"}
    cap = _check_edges(out, changes)
    _check_frames(cap, frames)
    if shutil.which("sigrok-cli") is None:
        pytest.skip("sigrok-cli is not installed: the .sr half is not checked")
    sr_path = tmp_path / "pins.sr"
    subprocess.run(["sigrok-cli", "-I", "vcd:skip=0", "-i", str(vcd_path), "-O", "srzip", "-o",
                    str(sr_path)], check=True, capture_output=True)
    out2 = tmp_path / "sr.lsc"
    result = replay.replay_pins(sr_path, out2, frames="mii")
    assert result["exit_status"] == 0
    cap2 = _check_edges(out2, changes)
    _check_frames(cap2, frames)


@pytest.mark.slow
def test_header_bytes_reach_pcapng(tmp_path, capsys):
    """replay-pins --frames mii --header-bytes 50 (the sniffers keep each frame's first 50 bytes,
    as a `gateware build --header-bytes 50` bitstream does: Ethernet 14 + IPv4 20 + UDP 8, then
    the payload's magic, run id and sequence number; 32 would stop inside the IPv4 destination
    address), then export --format pcapng: scapy and tshark see exactly the stimulus frames'
    first 50 bytes, their Ethernet/IP/UDP fields and each frame's original length."""
    from latscope.capture.files import capfile
    from latscope.cli import main

    vcd_path = tmp_path / "pins.vcd"
    _, frames = write_vcd(vcd_path)
    out, pcap = tmp_path / "h.lsc", tmp_path / "h.pcapng"
    assert main(["replay-pins", str(vcd_path), "-o", str(out), "--frames", "mii",
                 "--header-bytes", "50"]) == 0
    capsys.readouterr()
    with capfile.open_capture(out) as cap:
        records, headers = cap.frames()
        assert cap.metadata["replay"]["header_bytes"] == 50
    assert records["header_len"].tolist() == [50] * len(records)
    assert main(["export", str(out), "-o", str(pcap), "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["packets"] == len(records) == 7
    # pcapng is in time order: the stimulus alternates request, reply (the bad one unechoed)
    want = []
    for seq, rx in frames["rx"]:
        want.append(rx)
        want += [tx for s, tx in frames["tx"] if s == seq]
    packets = scapy_all.rdpcap(str(pcap))
    assert [bytes(p) for p in packets] == [f[:50] for f in want]
    assert [p.wirelen for p in packets] == [len(f) for f in want]
    assert [p[scapy_all.UDP].dport for p in packets] == \
        [int.from_bytes(f[36:38], "big") for f in want]
    assert [bytes(p[scapy_all.UDP].payload)[4:8] for p in packets] == [f[46:50] for f in want]
    if shutil.which("tshark") is None:
        pytest.skip("tshark not installed (apt-get install tshark): scapy check done")
    rows = subprocess.run(["tshark", "-r", str(pcap), "-T", "fields", "-E", "separator=;",
                           "-e", "frame.cap_len", "-e", "eth.src", "-e", "ip.dst", "-e",
                           "udp.srcport", "-e", "udp.dstport"],
                          capture_output=True, text=True, check=True).stdout.splitlines()
    assert rows == [f"50;{':'.join(f'{b:02x}' for b in f[6:12])};192.0.2.2;"
                    f"{int.from_bytes(f[34:36], 'big')};{int.from_bytes(f[36:38], 'big')}"
                    for f in want]


def test_header_bytes_option_errors(tmp_path):
    """--header-bytes without --frames, or outside 0..64: one line, exit 2, nothing written
    (the build's own check, gateware.build.frame_build_options)."""
    path = tmp_path / "pins.vcd"
    write_vcd(path)
    for args, text in ((["--header-bytes", "32"], "--header-bytes needs --frames"),
                       (["--frames", "mii", "--header-bytes", "65"], "must be 0 to 64, not 65")):
        r = subprocess.run([sys.executable, "-m", "latscope", "replay-pins", str(path), "-o",
                            str(tmp_path / "o.lsc"), *args], capture_output=True, text=True)
        assert r.returncode == 2, r.stderr
        assert len(r.stderr.strip().splitlines()) == 1 and text in r.stderr, r.stderr
        assert not (tmp_path / "o.lsc").exists()


@pytest.mark.slow
def test_generated_phy_clock_when_only_data_is_recorded(tmp_path):
    """Without rx_clk/tx_clk the clocks are generated at 25 MHz, mid-bit: same frames."""
    vcd_path = tmp_path / "pins.vcd"
    changes, frames = write_vcd(vcd_path)
    roles = ["rx_dv", "tx_en", "m0", "m4"] + [f"{d}{i}" for d in ("rxd", "txd") for i in range(4)]
    out = tmp_path / "gen.lsc"
    result = replay.replay_pins(vcd_path, out, ",".join(f"{r}={r}" for r in roles),
                                frames="mii")
    assert result["phy_clock"] == {"rx": "generated 25 MHz", "tx": "generated 25 MHz"}
    changes = {k: v for k, v in changes.items() if not k.endswith("clk")}
    cap = _check_edges(out, changes)
    _check_frames(cap, frames)


@pytest.mark.slow
def test_export_replay_round_trip_same_analysis(tmp_path, capsys):
    """A bench capture (3.125 ns) exported as VCD and replayed through the ecpix5-x1 build gives
    the same per-stage figures as the exported window itself: exact (same tick rate, so the
    nearest-tick resampling is the identity)."""
    from latscope.capture.files import capfile
    from latscope.cli import main

    src = "fixtures/bench/el-dm-64.lsc"
    time = capfile.open_capture(src).events()[0]
    tick_hz = capfile.open_capture(src).tick_hz
    end_ns = int((time[0] + (time[-1] - time[0]) // 8) * 1e9 / tick_hz)    # ~150 packets
    window, vcd_path, out = tmp_path / "w.lsc", tmp_path / "w.vcd", tmp_path / "replayed.lsc"
    assert main(["export", src, "--format", "vcd", "-o", str(vcd_path), "--to",
                 f"{end_ns}ns"]) == 0
    assert main(["import", str(vcd_path), "-o", str(window)]) == 0
    assert main(["replay-pins", str(vcd_path), "-o", str(out), "--board", "ecpix5-x1"]) == 0
    capsys.readouterr()
    docs = []
    for path in (window, out):
        assert main(["analyze", str(path), "--json"]) == 0
        docs.append(json.loads(capsys.readouterr().out))
    a, b = docs
    assert a["measurements"]["rx.isr"]["n"] > 100
    assert a["tick_hz"] == b["tick_hz"] == 320_000_000
    assert a["marker_map"]["markers"] == b["marker_map"]["markers"]
    assert a["measurements"].keys() == b["measurements"].keys()
    assert a["stages"].keys() == b["stages"].keys()
    pairs = [(a["measurements"][k], b["measurements"][k], k) for k in a["measurements"]] + \
        [(a["stages"][k], b["stages"][k], k) for k in a["stages"]]
    for ma, mb, name in pairs:
        # every figure exactly, but the replay's time origin is its own: the worst packets are
        # the same latencies at other absolute times, and the drift slope (fitted over absolute
        # times) agrees to floating-point rounding
        assert {k: v for k, v in ma.items() if k not in ("worst", "drift")} == \
            {k: v for k, v in mb.items() if k not in ("worst", "drift")}, name
        assert [w["latency_ns"] for w in ma["worst"]] == [w["latency_ns"] for w in mb["worst"]]
        for key, value in ma.get("drift", {}).items():
            assert mb["drift"][key] == pytest.approx(value, rel=1e-9, abs=1e-6), (name, key)


def test_time_conversions_are_exact():
    """Nearest-tick and sample-to-ps rounding against Fraction arithmetic (exact, halves up),
    at the builds' tick rates and over recordings of hours (no int64 overflow)."""
    from fractions import Fraction
    from math import floor

    import numpy as np

    rng = np.random.default_rng(1)
    for rate in (800_000_000, 320_000_000, 96_000_000, 1_000_000_000):
        t = rng.integers(0, 10**16, 500)                          # up to ~2.8 h in ps
        origin = int(rng.integers(0, 10**6))
        want = [floor(Fraction(int(x) - origin) * rate / 10**12 + Fraction(1, 2)) for x in t]
        assert replay.nearest_ticks(t, rate, origin).tolist() == want, rate
    for samplerate in (10**9, 3, 24_000_000, 10**12, 12_345_678):
        index = rng.integers(0, min(10**12, 9 * 10**18 // 10**12 * samplerate // 2), 500)
        want = [floor(Fraction(int(i)) * 10**12 / samplerate + Fraction(1, 2)) for i in index]
        assert replay.ps_from_samples(index, samplerate).tolist() == want, samplerate


RMII_NS = 20


def write_rmii_vcd(path):
    """Requests on CRS_DV/RXD0-1 and echoes on TX_EN/TXD0-1, REF_CLK 50 MHz throughout, data
    launched 4 ns after each rising edge, dibits least significant first (RMII 1.2 §5)."""
    changes = {n: [] for n in ("ref_clk", "crs_dv", "tx_en", "rxd0", "rxd1", "txd0", "txd1",
                               "m0")}
    frames = {"rx": [], "tx": []}
    t_end = 1_000 + SPACING_NS * (len(SEQS) + 1)
    for t in range(RMII_NS, t_end, RMII_NS // 2):
        changes["ref_clk"].append((t, int(t % RMII_NS == 0)))

    def serialise(valid, d, start, frame):
        dibits = []
        for byte in b"\x55" * 7 + b"\xd5" + frame:
            dibits += [(byte >> s) & 3 for s in (0, 2, 4, 6)]
        for k, dibit in enumerate(dibits + [0]):
            for i in range(2):
                changes[f"{d}{i}"].append((start + k * RMII_NS + 4, (dibit >> i) & 1))
        end = start + len(dibits) * RMII_NS + 4
        changes[valid] += [(start + 4, 1), (end, 0)]
        return end

    for k, seq in enumerate(SEQS):
        start = 1_000 + k * SPACING_NS
        rx = _frame(seq, reply=False, bad_fcs=(k == 2))
        end = serialise("crs_dv", "rxd", start, rx)
        frames["rx"].append((seq, rx))
        changes["m0"] += [(end + 1_233, 1), (end + 1_333, 0)]
        tx = _frame(seq, reply=True)
        serialise("tx_en", "txd", start + 10_000, tx)
        frames["tx"].append((seq, tx))
    events = sorted((t, name, v) for name, lst in changes.items() for t, v in lst)
    with open(path, "w") as f, pyvcd.VCDWriter(f, timescale="1 ns") as w:
        var = {n: w.register_var("dut", n, "wire", size=1, init=0) for n in changes}
        for t, name, v in events:
            w.change(var[name], t, v)
    return changes, frames


@pytest.mark.slow
def test_rmii_replay_frames_and_edges(tmp_path):
    """RMII: one REF_CLK for both sides, CRS_DV as the receive valid (no end-of-frame carrier
    toggling here: the capture channel would count each toggle's rising edge as a frame)."""
    path = tmp_path / "rmii.vcd"
    changes, frames = write_rmii_vcd(path)
    out = tmp_path / "rmii.lsc"
    result = replay.replay_pins(path, out, frames="rmii")
    assert result["phy_clock"] == {"rx": "recorded ref_clk", "tx": "recorded ref_clk"}
    from latscope.capture.files import capfile
    cap = capfile.open_capture(out)
    time, channel, rising = cap.events()
    origin = min(t for lst in changes.values() for t, _ in lst)
    want = sorted((((t - origin) * 2 * TICK_HZ + 10**9) // (2 * 10**9), role, v)
                  for role in ("crs_dv", "tx_en", "m0") for t, v in changes[role])
    got = sorted(zip((time - time[0]).tolist(), [cap.channel_names[int(c)] for c in channel],
                     rising.astype(int).tolist(), strict=True))
    assert [(t - want[0][0], r, v) for t, r, v in want] == got
    _check_frames(cap, frames)


@pytest.mark.slow
def test_icebreaker_markers_at_nearest_10_4_ns_tick(tmp_path):
    """The iCEBreaker build (48 MHz DDR: 96 MHz ticks, 10.42 ns): marker edges off the tick grid
    land on the nearest tick (exact), a 3 ns pulse is dropped and counted."""
    path = tmp_path / "m.vcd"
    import random

    import numpy as np

    rng = random.Random(5)
    times, t = [], 1_000
    for _ in range(40):
        t += rng.randrange(25, 400)                 # >= 25 ns: at least two ticks apart
        times.append(t)
    with open(path, "w") as f, pyvcd.VCDWriter(f, timescale="1 ns") as w:
        m0 = w.register_var("dut", "m0", "wire", size=1, init=0)
        m1 = w.register_var("dut", "m1", "wire", size=1, init=0)
        events = [(x, 0, (k + 1) % 2) for k, x in enumerate(times)] + [(1_500, 1, 1),
                                                                        (1_503, 1, 0)]
        for x, var, v in sorted(events):
            w.change((m0, m1)[var], x, v)
    out = tmp_path / "ice.lsc"
    result = replay.replay_pins(path, out, board="icebreaker")
    from latscope.capture.files import capfile
    cap = capfile.open_capture(out)
    assert cap.tick_hz == 96_000_000
    time, channel, rising = cap.events()
    origin = times[0]

    def nearest(x):
        return ((x - origin) * 2 * 96_000_000 + 10**9) // (2 * 10**9)
    collapsed = nearest(1_500) == nearest(1_503)
    assert result["dropped_pulses"] == int(collapsed)
    assert np.count_nonzero(channel == 4) == (0 if collapsed else 2)
    want = [nearest(x) for x in times]
    got = time[channel == 3]
    assert (got - got[0]).tolist() == want
    assert rising[channel == 3].astype(int).tolist() == [(k + 1) % 2 for k in range(40)]
