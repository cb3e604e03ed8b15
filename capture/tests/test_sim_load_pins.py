"""A run under load as pins (``sim_load.write_pins_vcd``): read back by the VCD reader, the data
pins sampled mid-bit inside each valid window reassemble every frame of the wire (preamble, SFD,
frame with its FCS), and the capture channels hold exactly the truth's edges. Played through the
real gateware in Verilator with the MII or RMII sniffers (``latscope replay-pins``,
``capture/sim/replay.py``), the same file gives the FRAME records the model engine sends."""

import zlib

import numpy as np
import pytest

from latscope.capture.files.capfile import open_capture
from latscope.capture.files.reimport import read_vcd
from latscope.capture.link.stream import StreamDecoder
from latscope.capture.sim import replay, sim_load
from latscope.capture.sim.sim_engines import FrameRecords
from latscope.gateware import model_stream

SCENARIO = sim_load.LoadScenario(name="short", load=0.6, probe_rate_pps=50_000.0,
                                 drop_probability=0.0)


def _run():
    return sim_load.simulate_load("el-dm-64", 4, SCENARIO, seed=2)


def test_pins_vcd_reassembles_every_frame(tmp_path):
    run = _run()
    path = sim_load.write_pins_vcd(run, tmp_path / "pins.vcd")
    ev = read_vcd(str(path), tick_hz=10**12)             # ps
    names = {v: k for k, v in ev.channel_names.items()}

    def edges(role, rising):
        sel = (ev.channel == names[role]) & (ev.rising == rising)
        return np.asarray(ev.time[sel], np.int64)

    def level(role, at_ps):
        sel = ev.channel == names[role]
        t, r = np.asarray(ev.time[sel], np.int64), ev.rising[sel]
        k = np.searchsorted(t, at_ps, side="right") - 1
        return np.where(k >= 0, r[np.maximum(k, 0)], False).astype(int)

    offset = None
    for d, dv, prefix in ((0, "rx_dv", "rxd"), (1, "tx_en", "txd")):
        rise, fall = edges(dv, True), edges(dv, False)
        frames = run.wire[d]["frames"]
        assert len(rise) == len(fall) == len(frames)
        for a, b, frame in zip(rise, fall, frames, strict=True):
            n = int(round((b - a) / 40_000))
            assert n == 2 * (8 + len(frame))
            mid = a + 20_000 + 40_000 * np.arange(n)
            nib = sum(level(f"{prefix}{i}", mid) << i for i in range(4))
            raw = bytes((nib[0::2] | nib[1::2] << 4).tolist())
            assert raw[:8] == b"\x55" * 7 + b"\xd5" and raw[8:] == frame
            assert zlib.crc32(raw[8:-4]).to_bytes(4, "little") == raw[-4:]
        # the reader counts from the file's first change; the truth from tick 0
        t0 = np.rint(run.wire[d]["start_ns"] * 1000).astype(np.int64)
        offset = rise[0] - t0[0] if offset is None else offset
        assert np.array_equal(rise - offset, t0)
    for ch in range(3, 8):
        role = f"m{ch - 3}"
        if role not in names:
            continue
        sel = run.truth["channel"] == ch
        want = np.rint(run.truth["time_ns"][sel & run.truth["rising"]] * 1000).astype(np.int64)
        assert np.array_equal(edges(role, True) - offset, want)


@pytest.mark.slow
@pytest.mark.parametrize("interface, options", [("mii", {}), ("rmii", {"carrier_early": 2})])
def test_pins_through_replay_pins_give_the_model_engines_records(tmp_path, interface, options):
    run = _run()
    vcd = sim_load.write_pins_vcd(run, tmp_path / "pins.vcd", interface=interface, **options)
    out = tmp_path / "replayed.lsc"
    result = replay.replay_pins(str(vcd), str(out), frames=interface, board="ecpix5")
    assert result["exit_status"] == 0
    with open_capture(str(out)) as cap:
        got, _ = cap.frames()
    model = FrameRecords(run, lanes=4)          # replay-pins loads no rules: all class 0
    model.start(0)
    model.add(run)                  # the run is one block: its frames
    want = StreamDecoder().feed(b"".join(
        model_stream.frame(t, i, p)
        for i, (t, p) in enumerate(model.until(0, final=True)))).frames
    assert len(got) == len(want) == sum(len(run.wire[d]["frames"]) for d in (0, 1))
    # the two directions' records interleave by when each frame ended: compare per direction
    got = got[np.lexsort((got["frame_index"], got["direction"]))]
    want = want[np.lexsort((want["frame_index"], want["direction"]))]
    for field in ("direction", "frame_index", "cls", "length", "flags", "seq", "src_port",
                  "dst_port", "ethertype"):
        assert got[field].tolist() == want[field].tolist(), field


def test_rmii_pins_vcd_toggles_crs_dv_and_reassembles(tmp_path):
    run = _run()
    path = sim_load.write_pins_vcd(run, tmp_path / "rmii.vcd", interface="rmii", carrier_early=2)
    ev = read_vcd(str(path), tick_hz=10**12)
    names = {v: k for k, v in ev.channel_names.items()}
    assert "rx_dv" not in names and {"crs_dv", "rxd0", "rxd1", "txd0", "txd1"} <= set(names)
    sel = ev.channel == names["crs_dv"]
    t, r = np.asarray(ev.time[sel], np.int64), ev.rising[sel]
    frames = run.wire[0]["frames"]
    # per frame: one rise at the start, then (RMII 1.2 §5.3.2) 2 nibbles of toggling: low on the
    # first dibit, high on the second, 20 ns each, then low
    assert np.count_nonzero(r) == 3 * len(frames) and np.count_nonzero(~r) == 3 * len(frames)
    rises = t[r].reshape(-1, 3)
    falls = t[~r].reshape(-1, 3)
    assert np.all(rises[:, 2] - rises[:, 1] == 40_000)                  # a 40 ns toggle period
    assert np.all(rises[:, 1:] - falls[:, :2] == 20_000)                 # 20 ns low
    assert np.all(falls[:, 1:] - rises[:, 1:] == 20_000)                 # 20 ns high
    # the data end where the last toggle ends: (8 + len) bytes of 4 dibits of 20 ns
    lengths = np.array([len(f) for f in frames])
    assert np.array_equal(falls[:, 2] - rises[:, 0], (8 + lengths) * 4 * 20_000)

    def level(role, at_ps):
        s = ev.channel == names[role]
        tt, rr = np.asarray(ev.time[s], np.int64), ev.rising[s]
        k = np.searchsorted(tt, at_ps, side="right") - 1
        return np.where(k >= 0, rr[np.maximum(k, 0)], False).astype(int)
    for a, frame in zip(rises[:, 0], frames, strict=True):
        mid = a + 10_000 + 20_000 * np.arange(4 * (8 + len(frame)))
        dib = level("rxd0", mid) | level("rxd1", mid) << 1
        raw = bytes((dib[0::4] | dib[1::4] << 2 | dib[2::4] << 4 | dib[3::4] << 6).tolist())
        assert raw == b"\x55" * 7 + b"\xd5" + frame
    with pytest.raises(Exception, match="mii or rmii"):
        sim_load.write_pins_vcd(run, tmp_path / "x.vcd", interface="gmii")
