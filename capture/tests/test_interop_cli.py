"""``latscope import`` and ``latscope export`` through ``latscope.cli.main``: hostile inputs give a
clear message and exit status 2; exports read back by sigrok-cli (an independent reader) show
exactly the captured edges; capture -> .sr -> capture is the identity.

Expected values: edge positions are computed here from the events written (``t - start`` at the
tick rate, ``ceil((t - start) * rate / tick_hz)`` with Fractions otherwise); comparisons are exact.
"""

import json
import os
import re
import shutil
import subprocess
import zipfile
from fractions import Fraction

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import latscope
from latscope.capture.files.capfile import CaptureWriter, open_capture
from latscope.cli import main

HERE = os.path.dirname(os.path.abspath(__file__))
FIXTURES = os.path.join(HERE, "..", "..", "fixtures", "sigrok")
HOSTILE = os.path.join(FIXTURES, "hostile")

needs_sigrok = pytest.mark.skipif(shutil.which("sigrok-cli") is None,
                                  reason="sigrok-cli is not installed (apt-get install sigrok-cli)")

ROLES = {"0": "rx_dv", "1": "tx_en", "2": "m_isr", "3": "m_tx", "5": "m_app"}


def random_capture(path, tick_hz=200_000_000, *, n=500, seed=3, first=1000, gaps=(1, 40)):
    """Alternating edges per channel at non-decreasing times (several channels may share a tick,
    never one channel twice), sorted by (time, channel). Channel 4 has no role on purpose."""
    rng = np.random.default_rng(seed)
    channels = [0, 1, 2, 3, 4, 5]
    time, channel = [], []
    t = first
    while len(time) < n:
        t += int(rng.integers(*gaps))
        chosen = sorted(rng.choice(channels, size=int(rng.integers(1, 3)), replace=False))
        for c in chosen:
            time.append(t)
            channel.append(int(c))
    time, channel = np.array(time[:n]), np.array(channel[:n], np.uint8)
    rising = np.zeros(len(time), bool)
    level = {}
    for i, c in enumerate(channel.tolist()):
        level[c] = 1 - level.get(c, 0)
        rising[i] = bool(level[c])
    with CaptureWriter(path, {"tick_hz": tick_hz, "channels": ROLES}, fsync=False) as writer:
        writer.append_events(time[: n // 2], channel[: n // 2], rising[: n // 2])
        writer.flush()
        writer.append_events(time[n // 2:], channel[n // 2:], rising[n // 2:])
    return time, channel, rising


def sigrok_samples(path):
    """Samples as sigrok-cli reads them (``-O binary``: raw logic data) and the unitsize."""
    raw = subprocess.run(["sigrok-cli", "-i", str(path), "-O", "binary"], check=True,
                         capture_output=True).stdout
    return raw


def edges_of(samples, k):
    level = ((samples >> k) & 1).astype(np.int8)
    where = np.flatnonzero(np.diff(level)) + 1
    return where.tolist(), (level[where] == 1).tolist(), int(level[0])


# --- hostile input -------------------------------------------------------------------------------
HOSTILE_CASES = {
    "not_zip.sr": "not a sigrok session file: not a readable zip archive",
    "truncated_zip.sr": "not a readable zip archive, or cut short",
    "no_version.sr": "the zip archive has no 'version' member",
    "version3.sr": "sigrok session format version 3 is not supported",
    "no_metadata.sr": "no 'metadata' member",
    "probe_before_total.sr": "has 'probe1' before 'total probes'",
    "no_unitsize.sr": "has no 'unitsize' key",
    "duplicate_key.sr": "key 'unitsize' appears twice in \\[device 1\\]",
    "two_devices.sr": "metadata describes 2 devices",
    "bad_samplerate.sr": "samplerate: not a sample rate: 'fast'",
    "samplerate_1e30.sr": "samplerate '1000000000000000000000000000000' reads as 0 Hz, outside "
                          "the range latscope accepts \\(1 Hz to 10\\^12 Hz.*--samplerate",
    "samplerate_10THz.sr": "samplerate '10 THz' reads as 10,000,000,000,000 Hz, outside the "
                           "range",
    "traversal.sr": "unsafe member name '../../etc/latscope-owned'",
    "absolute.sr": "unsafe member name '/tmp/latscope-owned'",
    "chunk_gap.sr": "chunk logic-1-2 is missing but logic-1-3 exists",
    "truncated_chunk.sr": "chunk 'logic-1-1' is 9 bytes, not a whole number of 2-byte samples",
    "truncated_last.sr": "chunk 'logic-1-2' is 9 bytes.*--allow-truncated",
    "bomb_ratio.sr": "claims 4294967040 bytes from .* compressed bytes .*zip bomb",
    "bomb_overlap.sr": "zip members 'logic-1-1' and 'logic-1-2' overlap",
    "corrupt_chunk.sr": "chunk 'logic-1-1' is damaged",
}


def test_every_hostile_fixture_has_a_case():
    assert sorted(os.listdir(HOSTILE)) == sorted(HOSTILE_CASES)


@pytest.mark.parametrize("name", sorted(HOSTILE_CASES))
def test_hostile_input_is_refused(tmp_path, capsys, name):
    out = tmp_path / "out.lsc"
    code = main(["import", os.path.join(HOSTILE, name), "-o", str(out)])
    err = capsys.readouterr().err
    assert code == 2
    assert err.startswith("latscope import: error: ")
    assert name in err
    assert re.search(HOSTILE_CASES[name], err), err
    assert "Traceback" not in err
    assert not out.exists()          # nothing half-written is left behind
    assert not os.path.exists("/tmp/latscope-owned")


def test_truncated_last_sample_imports_with_flag(tmp_path, capsys):
    out = tmp_path / "out.lsc"
    code = main(["import", os.path.join(HOSTILE, "truncated_last.sr"), "-o", str(out),
                 "--allow-truncated", "--json"])
    captured = capsys.readouterr()
    assert code == 0
    assert "warning: chunk 'logic-1-2' ends with a partial sample (1 of 2 bytes)" in captured.err
    assert json.loads(captured.out)["samples"] == 5 + 4


def test_max_bytes_option(tmp_path, capsys):
    code = main(["import", os.path.join(FIXTURES, "counter.sr"), "-o", str(tmp_path / "o.lsc"),
                 "--max-bytes", "1000"])
    assert code == 2
    assert "hold 5000 bytes uncompressed, above the limit of 1000 (raise it with --max-bytes" \
        in capsys.readouterr().err


def test_import_refuses_existing_output_and_bad_map(tmp_path, capsys):
    out = tmp_path / "o.lsc"
    out.write_bytes(b"keep")
    assert main(["import", os.path.join(FIXTURES, "counter.sr"), "-o", str(out)]) == 2
    assert "exists; choose another name" in capsys.readouterr().err
    assert out.read_bytes() == b"keep"
    assert main(["import", os.path.join(FIXTURES, "counter.sr"), "-o", str(tmp_path / "p.lsc"),
                 "--map", "rx_dv=D9"]) == 2
    assert "no probe named 'D9'" in capsys.readouterr().err


# --- import of real sigrok files -----------------------------------------------------------------
def test_import_demo_file_with_map(tmp_path, capsys):
    """demo.sr was written by sigrok-cli's demo driver; expected.json holds sigrok-cli's reading."""
    with open(os.path.join(FIXTURES, "expected.json")) as handle:
        expected = json.load(handle)["demo.sr"]["edges"]
    out = tmp_path / "demo.lsc"
    assert main(["import", os.path.join(FIXTURES, "demo.sr"), "--map", "rx_dv=D0,m_isr=3",
                 "-o", str(out), "--json"]) == 0
    summary = json.loads(capsys.readouterr().out)
    assert summary["channels"] == {"0": "rx_dv", "1": "m_isr"}
    with open_capture(out) as capture:
        events = capture.events()
        assert capture.tick_hz == 1_000_000
        for channel, probe in enumerate(["D0", "D3"]):
            rising = events.rising[events.channel == channel]
            assert int(rising.sum()) == expected[probe]["rising"]
            assert int((~rising).sum()) == expected[probe]["falling"]
        assert capture.note["initial_levels"] == {"rx_dv": bool(expected["D0"]["initial"]),
                                                  "m_isr": bool(expected["D3"]["initial"])}


# --- export --------------------------------------------------------------------------------------
def test_round_trip_capture_sr_capture_is_identity(tmp_path, capsys):
    time, channel, rising = random_capture(tmp_path / "a.lsc")
    assert main(["export", str(tmp_path / "a.lsc"), "--format", "sr",
                 "-o", str(tmp_path / "a.sr")]) == 0
    assert main(["import", str(tmp_path / "a.sr"), "-o", str(tmp_path / "b.lsc")]) == 0
    capsys.readouterr()
    with open_capture(tmp_path / "b.lsc") as capture:
        events = capture.events()
        names = capture.channel_names
        assert capture.tick_hz == 200_000_000
    # channel 4 has no role: it is exported as "ch4"; import numbers channels in probe order
    assert names == {0: "rx_dv", 1: "tx_en", 2: "m_isr", 3: "m_tx", 4: "ch4", 5: "m_app"}
    assert events.time.tolist() == time.tolist()
    assert events.channel.tolist() == channel.tolist()
    assert events.rising.tolist() == rising.tolist()


@needs_sigrok
def test_exported_sr_read_by_sigrok_cli_has_exact_edges(tmp_path, capsys):
    time, channel, rising = random_capture(tmp_path / "a.lsc")
    assert main(["export", str(tmp_path / "a.lsc"), "-o", str(tmp_path / "a.sr"),
                 "--channels", "m_isr,rx_dv,4"]) == 0
    assert "3 channel(s) m_isr, rx_dv, ch4" in capsys.readouterr().out
    samples = np.frombuffer(sigrok_samples(tmp_path / "a.sr"), np.uint8)
    start = int(time[0]) - 1                       # default window: a tick before the first edge
    assert len(samples) == int(time[-1]) + 1 - start
    for k, ch in enumerate([2, 0, 4]):
        where, up, initial = edges_of(samples, k)
        assert where == (time[channel == ch] - start).tolist()
        assert up == rising[channel == ch].tolist()
        assert initial == 0


@needs_sigrok
def test_exported_sr_at_lower_rate_puts_edges_on_the_next_sample(tmp_path, capsys):
    tick_hz, rate = 200_000_000, 48_000_000           # 4.1666 ticks per sample
    time, channel, rising = random_capture(tmp_path / "a.lsc", tick_hz, gaps=(30, 90), n=200)
    assert main(["export", str(tmp_path / "a.lsc"), "-o", str(tmp_path / "a.sr"),
                 "--samplerate", "48MHz", "--from", "4us", "--to", "60us"]) == 0
    capsys.readouterr()
    start, stop = 800, 12_000                          # 4 us and 60 us at 200 MHz
    samples = np.frombuffer(sigrok_samples(tmp_path / "a.sr"), np.uint8)
    for k, ch in enumerate([0, 1, 2, 3, 4, 5]):
        inside = (channel == ch) & (time > start) & (time < stop)
        expected = [-((-(t - start) * rate) // tick_hz) for t in time[inside].tolist()]
        where, up, _ = edges_of(samples, k)
        assert where == expected
        assert up == rising[inside].tolist()


def test_export_window_initial_levels(tmp_path, capsys):
    path = tmp_path / "w.lsc"
    with CaptureWriter(path, {"tick_hz": 1_000_000_000, "channels": {"0": "a", "1": "b"}},
                       fsync=False) as writer:
        writer.append_events([100, 150, 200, 300], [0, 1, 0, 1], [1, 1, 0, 0])
    assert main(["export", str(path), "-o", str(tmp_path / "w.sr"), "--from", "120ns",
                 "--to", "250ns", "--json"]) == 0
    summary = json.loads(capsys.readouterr().out)
    assert (summary["start_tick"], summary["stop_tick"], summary["samples"]) == (120, 250, 130)
    from latscope.capture.files.sigrok import SrReader
    with SrReader(tmp_path / "w.sr") as reader:
        assert reader.info.sample_offset == 120
        samples = np.concatenate([s for _, s in reader.iter_samples()])
    # a is high from 100 (before the window) and falls at 200; b rises at 150
    assert edges_of(samples, 0) == ([80], [False], 1)
    assert edges_of(samples, 1) == ([30], [True], 0)


def test_export_csv(tmp_path, capsys):
    path = tmp_path / "c.lsc"
    with CaptureWriter(path, {"tick_hz": 320_000_000, "channels": {"0": "rx_dv", "1": "m_isr"}},
                       fsync=False) as writer:
        writer.append_events([0, 1, 7, 320_000_001], [0, 1, 0, 1], [1, 1, 0, 0])
    assert main(["export", str(path), "--format", "csv", "-o", "-"]) == 0
    out = capsys.readouterr().out
    # 320 MHz: a tick is 3.125 ns exactly; the first line describes the capture (tick rate,
    # roles, marker meanings) so an import or analysis of the CSV measures the same things, and
    # where its events came from (provenance: a measured capture of this latscope, exported once)
    first, *rest = out.splitlines()
    tool = f"latscope {latscope.__version__}"
    assert json.loads(first.removeprefix("# latscope ")) == {
        "channels": {"0": "rx_dv", "1": "m_isr"}, "label": None, "markers": {},
        "source_file": "c.lsc", "tick_hz": 320_000_000,
        "provenance": {"data": "measured", "simulated": False, "tool": tool,
                       "command": "capture", "profile": None, "seed": None, "engine": None,
                       "label": None, "dut": None, "scenario": None, "start_time": None,
                       "source_file": None,
                       "history": [{"step": "export csv", "from": "c.lsc", "tool": tool}]}}
    assert rest == ["time_ns,channel,edge", "0.000,rx_dv,rising",
                                "3.125,m_isr,rising", "21.875,rx_dv,falling",
                                "1000000003.125,m_isr,falling"]
    assert main(["export", str(path), "-o", str(tmp_path / "c.csv"), "--from", "1ns"]) == 0
    assert (tmp_path / "c.csv").read_text().splitlines()[2] == "3.125,m_isr,rising"


def test_export_vcd_default_name(tmp_path, capsys):
    random_capture(tmp_path / "v.lsc", n=20)
    assert main(["export", str(tmp_path / "v.lsc"), "--format", "vcd"]) == 0
    assert "wrote " + str(tmp_path / "v.vcd") in capsys.readouterr().out
    assert "$timescale 1ns $end" in (tmp_path / "v.vcd").read_text()


@pytest.mark.parametrize("args, message", [
    (["-o", "x.txt"], "give --format sr, vcd, csv or pcapng"),
    (["--format", "vcd", "--samplerate", "1MHz"], "--samplerate applies to --format sr only"),
    (["--format", "sr", "-o", "-"], "--format sr cannot be written to standard output"),
    (["--format", "sr", "--max-samples", "100"], "the window needs .* samples at 200,000,000 Hz, "
                                                 "above --max-samples 100"),
    (["--format", "sr", "--from", "1s", "--to", "0.5s"], "the window is empty"),
    (["--format", "sr", "--channels", "nope"], "--channels: no channel 'nope'; the capture has "
                                               "0=rx_dv"),
    (["--format", "csv", "-o", "-", "--json"], "--json cannot be combined with -o -"),
])
def test_export_usage_errors(tmp_path, capsys, monkeypatch, args, message):
    random_capture(tmp_path / "e.lsc", n=50)
    monkeypatch.chdir(tmp_path)
    assert main(["export", str(tmp_path / "e.lsc"), *args]) == 2
    err = capsys.readouterr().err
    assert re.search(message, err), err
    assert err.startswith("latscope export: error: ")


def test_export_non_integer_tick_rate_needs_samplerate(tmp_path, capsys):
    path = tmp_path / "f.lsc"
    with CaptureWriter(path, {"tick_hz": 1e9 / 3, "channels": {"0": "a"}}, fsync=False) as w:
        w.append_events([10, 20], [0, 0], [1, 0])
    assert main(["export", str(path), "-o", str(tmp_path / "f.sr")]) == 2
    assert "is not a whole number of Hz; give --samplerate" in capsys.readouterr().err
    assert main(["export", str(path), "-o", str(tmp_path / "f.sr"), "--samplerate", "1GHz"]) == 0
    from latscope.capture.files.sigrok import SrReader
    with SrReader(tmp_path / "f.sr") as reader:
        samples = np.concatenate([s for _, s in reader.iter_samples()])
    # window [9, 21): edges 1 and 11 ticks after the start. The metadata float 333333333.3333333
    # (its shortest decimal form, which the exporter uses) is a tick of just over 3 ns, so the
    # edges land on the samples after 3 and 33 ns: ceil(1 * 1e9 / tick_hz) = 4, and 34
    tick_hz = Fraction(repr(1e9 / 3))
    expected = [-(-(d * 10**9) // tick_hz) for d in (1, 11)]
    assert expected == [4, 34]
    assert edges_of(samples, 0)[:2] == (expected, [True, False])


def test_export_reports_hidden_edges(tmp_path, capsys):
    path = tmp_path / "h.lsc"
    with CaptureWriter(path, {"tick_hz": 100, "channels": {"0": "a"}}, fsync=False) as w:
        # rising-only capture: the second and third rising edges cannot be seen as levels
        w.append_events([10, 20, 30], [0, 0, 0], [1, 1, 1])
    assert main(["export", str(path), "-o", str(tmp_path / "h.sr")]) == 0
    err = capsys.readouterr().err
    assert "warning: 2 edge(s) cannot be shown at 100 Hz" in err


def test_help_explains_units(capsys):
    with pytest.raises(SystemExit):
        main(["export", "--help"])
    text = capsys.readouterr().out
    assert "1.5ms" in text and "seconds" in text and "default" in text
    with pytest.raises(SystemExit):
        main(["import", "--help"])
    text = capsys.readouterr().out
    assert "rx_dv=D0" in text and "probe1" in text


@settings(max_examples=25, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(seed=st.integers(0, 2**32 - 1), cut=st.tuples(st.floats(0, 1), st.floats(0, 1)))
def test_round_trip_of_any_window_is_exact(tmp_path_factory, seed, cut):
    """Any window [a, b) at the tick rate: importing the export gives exactly the events with
    a < t < b (an event at a only sets the initial level; see docs/sigrok.md)."""
    from latscope.capture.files.interop import make_window
    from latscope.capture.files.sigrok_import import import_sr
    from latscope.capture.files.sigrok_write import export_sr
    tmp = tmp_path_factory.mktemp("rt")
    time, channel, rising = random_capture(tmp / "a.lsc", n=120, seed=seed, first=0)
    lo, hi = sorted(cut)
    # the window starts within the capture (a later start is refused), and may end after it
    a = int(lo * int(time[-1]))
    b = max(a + 1, int(hi * (int(time[-1]) + 2)))
    with open_capture(tmp / "a.lsc") as capture:
        export_sr(make_window(capture, a, b), tmp / "a.sr", 200_000_000)
    import_sr(tmp / "a.sr", tmp / "b.lsc")
    with open_capture(tmp / "b.lsc") as capture:
        events = capture.events()
        names = capture.channel_names
    inside = (time > a) & (time < b)
    # import numbers the exported channels 0.. in order; map back through the role names
    index_of = {"rx_dv": 0, "tx_en": 1, "m_isr": 2, "m_tx": 3, "ch4": 4, "m_app": 5}
    back = [index_of[names[c]] for c in events.channel.tolist()]
    assert events.time.tolist() == time[inside].tolist()
    assert back == channel[inside].tolist()
    assert events.rising.tolist() == rising[inside].tolist()


def _levels_file(path):
    """probe1 'idle' high throughout (no edge at all), probe2 'drops' high then falling at 100,
    probe3 'rises' low then rising at 50, probe4 'low' low throughout; 1 MHz, 200 samples."""
    samples = np.zeros(200, np.uint8)
    samples[:] |= 1
    samples[:100] |= 2
    samples[50:] |= 4
    meta = ("[global]\nsigrok version=0.5.2\n[device 1]\ncapturefile=logic-1\ntotal probes=4\n"
            "samplerate=1 MHz\ntotal analog=0\nprobe1=idle\nprobe2=drops\nprobe3=rises\n"
            "probe4=low\nunitsize=1\n")
    with zipfile.ZipFile(path, "w") as archive:
        archive.writestr("version", b"2")
        archive.writestr("metadata", meta)
        archive.writestr("logic-1-1", samples.tobytes())
    return samples


@pytest.mark.parametrize("window", [[], ["--from", "10us", "--to", "150us"]])
def test_export_keeps_each_channels_initial_level(tmp_path, capsys, window):
    """A channel without edges keeps its recorded level (before, an idle-high line came back
    low), whatever the window; read back by latscope's reader and, when installed, by
    sigrok-cli (an independent reader)."""
    original = _levels_file(tmp_path / "in.sr")
    assert main(["import", str(tmp_path / "in.sr"), "-o", str(tmp_path / "a.lsc")]) == 0
    assert main(["export", str(tmp_path / "a.lsc"), "-o", str(tmp_path / "out.sr"),
                 *window]) == 0
    assert main(["import", str(tmp_path / "out.sr"), "-o", str(tmp_path / "b.lsc")]) == 0
    capsys.readouterr()
    with open_capture(tmp_path / "a.lsc") as a, open_capture(tmp_path / "b.lsc") as b:
        assert a.note["initial_levels"] == {"idle": True, "drops": True, "rises": False,
                                            "low": False}
        if not window:
            assert b.note["initial_levels"] == a.note["initial_levels"]
            assert b.events().time.tolist() == a.events().time.tolist()
    from latscope.capture.files.sigrok import SrReader
    with SrReader(tmp_path / "out.sr") as reader:
        samples = np.concatenate([s for _, s in reader.iter_samples()])
    start = 10 if window else 49           # default window: a tick before the first edge
    assert samples.tolist() == original[start:start + len(samples)].tolist()
    if shutil.which("sigrok-cli"):
        assert np.frombuffer(sigrok_samples(tmp_path / "out.sr"), np.uint8).tolist() == \
            samples.tolist()
