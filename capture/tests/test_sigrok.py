"""The sigrok session reader, writer and importer (``latscope.capture.files.sigrok``).

Expected values come from three independent places: ``fixtures/sigrok/expected.json`` (what
sigrok-cli 0.7.2 reads from each fixture, recorded by ``make_fixtures.py``), sigrok-cli run live
when installed, and straightforward NumPy references (``np.diff`` of unpacked bits) written in this
file. Every comparison is exact (``==``): samples and edges are integers.
"""

import hashlib
import json
import os
import shutil
import struct
import subprocess
import sys
import zipfile
from fractions import Fraction

import numpy as np
import pytest

from latscope import LatscopeError
from latscope.capture.files.sigrok import (
    SigrokFileError,
    SrLimits,
    SrReader,
    changed_indices,
    parse_channel_map,
    parse_samplerate,
)
from latscope.capture.files.sigrok_import import import_sr
from latscope.capture.files.sigrok_write import SrWriter, make_sparse_sr, sample_index

HERE = os.path.dirname(os.path.abspath(__file__))
FIXTURES = os.path.join(HERE, "..", "..", "fixtures", "sigrok")
VALID = ("counter.sr", "wide16.sr", "key_order.sr", "demo.sr")

with open(os.path.join(FIXTURES, "expected.json")) as _handle:
    EXPECTED = json.load(_handle)

needs_sigrok = pytest.mark.skipif(shutil.which("sigrok-cli") is None,
                                  reason="sigrok-cli is not installed (apt-get install sigrok-cli)")


def write_session(path, probes, samples, *, unitsize, samplerate="1 MHz", chunk=None):
    """A session file written without latscope's writer (plain zipfile), for the reader tests."""
    data = b"".join(int(s).to_bytes(unitsize, "little") for s in samples)
    chunk = chunk or len(data) or 1
    meta = ["[global]", "sigrok version=0.5.2", "[device 1]", "capturefile=logic-1",
            f"total probes={len(probes)}", f"samplerate={samplerate}", "total analog=0"]
    meta += [f"probe{k + 1}={name}" for k, name in enumerate(probes)] + [f"unitsize={unitsize}"]
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as archive:
        archive.writestr("version", b"2")
        archive.writestr("metadata", "\n".join(meta) + "\n")
        for n, start in enumerate(range(0, len(data), chunk), 1):
            archive.writestr(f"logic-1-{n}", data[start:start + chunk])
    return path


def reference_edges(samples, bits):
    """Edges by brute force: unpack each bit, ``np.diff``, merge sorted by (time, channel)."""
    samples = np.asarray(samples, dtype=np.uint64)
    times, channels, rising = [], [], []
    for channel, bit in enumerate(bits):
        level = ((samples >> np.uint64(bit)) & np.uint64(1)).astype(np.int8)
        where = np.flatnonzero(np.diff(level)) + 1
        times.append(where)
        channels.append(np.full(len(where), channel))
        rising.append(level[where] == 1)
    time, channel, rise = (np.concatenate(x) for x in (times, channels, rising))
    order = np.lexsort((channel, time))
    return time[order].tolist(), channel[order].tolist(), rise[order].tolist()


def collect(reader, bits, block):
    parts = list(reader.iter_edges(bits, block_samples=block))
    if not parts:
        return [], [], []
    return tuple(np.concatenate(column).tolist() for column in zip(*parts, strict=True))


# --- parsing -------------------------------------------------------------------------------------
def test_parse_samplerate_accepts_what_sigrok_writes():
    # sigrok writes "200 kHz" (sr_samplerate_string) and accepts plain numbers (FIELD.md §6)
    assert parse_samplerate("200 kHz") == 200_000
    assert parse_samplerate("100000000") == 100_000_000
    assert parse_samplerate("1.5 MHz") == 1_500_000
    assert parse_samplerate("1GHz") == 1_000_000_000
    assert parse_samplerate("100 MHz") == 100_000_000


@pytest.mark.parametrize("text, message", [
    ("fast", "not a sample rate: 'fast'"),
    ("0", "is not a positive whole number of Hz"),
    ("1.5", "is not a positive whole number of Hz"),
])
def test_parse_samplerate_refuses(text, message):
    with pytest.raises(ValueError, match=message):
        parse_samplerate(text)


def test_limits_are_checked():
    with pytest.raises(ValueError, match="SrLimits.max_ratio must be a positive integer, not 0"):
        SrLimits(max_ratio=0)


def test_channel_map_by_name_index_and_default(tmp_path):
    path = write_session(tmp_path / "m.sr", ["rx", "0", "D2", "D2b"], [0, 1], unitsize=1)
    with SrReader(path) as reader:
        info = reader.info
        assert parse_channel_map("a=rx,b=2", info) == [("a", 0), ("b", 2)]
        # a probe literally named "0" wins over index 0
        assert parse_channel_map("z=0", info) == [("z", 1)]
        assert parse_channel_map(None, info) == [("rx", 0), ("0", 1), ("D2", 2), ("D2b", 3)]
        with pytest.raises(LatscopeError, match="no probe named 'D9'; the file has: rx, 0, D2"):
            parse_channel_map("a=D9", info)
        with pytest.raises(LatscopeError, match="probe index 7 is out of range; the file has 4"):
            parse_channel_map("a=7", info)
        with pytest.raises(LatscopeError, match="names role 'a' twice"):
            parse_channel_map("a=rx,a=D2", info)
        with pytest.raises(LatscopeError, match="is not ROLE=PROBE"):
            parse_channel_map("rx", info)
        with pytest.raises(LatscopeError, match="must be an identifier"):
            parse_channel_map("a b=rx", info)


def test_ambiguous_probe_name_must_be_mapped_by_index(tmp_path):
    path = write_session(tmp_path / "dup.sr", ["D0", "D0"], [0, 3], unitsize=1)
    with SrReader(path) as reader:
        with pytest.raises(SigrokFileError, match="'D0' is used by probes 0, 1; map it by index"):
            parse_channel_map("a=D0", reader.info)


# --- reading the fixtures ------------------------------------------------------------------------
@pytest.mark.parametrize("name", VALID)
def test_fixture_samples_match_sigrok_golden(name):
    """Our sample stream equals what sigrok-cli read from the same file (expected.json)."""
    expected = EXPECTED[name]
    with SrReader(os.path.join(FIXTURES, name)) as reader:
        assert reader.info.unitsize == expected["unitsize"]
        assert [p for p in reader.info.probes if p] == expected["probes"]
        digest = hashlib.sha256()
        count = 0
        for _, samples in reader.iter_samples(block_samples=1000):
            digest.update(samples.astype(f"<u{expected['unitsize']}").tobytes())
            count += len(samples)
        assert count == reader.info.num_samples == expected["samples"]
        assert digest.hexdigest() == expected["sha256"]


@pytest.mark.parametrize("name", VALID)
def test_fixture_edges_match_sigrok_golden(name):
    expected = EXPECTED[name]
    with SrReader(os.path.join(FIXTURES, name)) as reader:
        bits = list(range(len(expected["probes"])))
        time, channel, rising = collect(reader, bits, 777)
        for k, probe in enumerate(expected["probes"]):
            mine = [r for c, r in zip(channel, rising, strict=True) if c == k]
            assert sum(mine) == expected["edges"][probe]["rising"], probe
            assert len(mine) - sum(mine) == expected["edges"][probe]["falling"], probe
            assert int(reader.initial_levels[k]) == expected["edges"][probe]["initial"], probe
        assert time == sorted(time)


@needs_sigrok
@pytest.mark.parametrize("name", VALID)
def test_fixture_samples_match_live_sigrok_cli(name):
    path = os.path.join(FIXTURES, name)
    raw = subprocess.run(["sigrok-cli", "-i", path, "-O", "binary"], check=True,
                         capture_output=True).stdout
    with SrReader(path) as reader:
        dtype = f"<u{reader.info.unitsize}"
        mine = b"".join(s.astype(dtype).tobytes() for _, s in reader.iter_samples(4096))
    assert mine == raw


def test_demo_file_analog_chunks_are_ignored():
    """demo_analog.sr was recorded by the demo driver with one analog channel; its logic samples
    are the demo pattern, identical to demo.sr's (whose reading sigrok-cli confirmed)."""
    with SrReader(os.path.join(FIXTURES, "demo_analog.sr")) as reader:
        assert reader.info.total_analog == 1
        assert reader.info.chunks == ("logic-1-1",)
        assert reader.info.samplerate == 1_000_000      # written as "1 MHz" by sigrok-cli
        raw = b"".join(s.tobytes() for _, s in reader.iter_samples(1000))
    assert hashlib.sha256(raw).hexdigest() == EXPECTED["demo.sr"]["sha256"]


# --- streaming edges -----------------------------------------------------------------------------
@pytest.mark.parametrize("unitsize, probes", [(1, 8), (2, 12), (3, 20), (4, 32), (8, 64)])
@pytest.mark.parametrize("block", [1, 7, 64, 100_000])
def test_edges_equal_reference_across_blocks_and_chunks(tmp_path, unitsize, probes, block):
    rng = np.random.default_rng(unitsize * 1000 + block)
    n = 300
    width = 8 * unitsize
    samples = [int(x) for x in rng.integers(0, 2**min(probes, 62), size=n, dtype=np.int64)]
    # make some runs so there are stretches without edges
    samples = [samples[i // 5 * 5] if i % 3 else samples[i] for i in range(n)]
    path = write_session(tmp_path / "r.sr", [f"D{k}" for k in range(probes)], samples,
                         unitsize=unitsize, chunk=unitsize * 37)
    bits = sorted(rng.choice(min(probes, width), size=min(5, probes), replace=False).tolist())
    with SrReader(path) as reader:
        assert len(reader.info.chunks) == -(-n // 37)
        got = collect(reader, bits, block)
        assert reader.initial_levels == [bool((samples[0] >> b) & 1) for b in bits]
    assert got == reference_edges(samples, bits)


@pytest.mark.parametrize("block", [7, 640, 100_000])
def test_sparse_edges_with_busy_unmapped_probes_equal_reference(tmp_path, block):
    """Long runs (the raw-sample pass that keeps only changes of mapped probes) and a stretch
    where an unmapped probe toggles every sample (the masked pass); the reference is the
    brute-force unpacking above. Blocks of 7 take the masked pass throughout."""
    rng = np.random.default_rng(block)
    runs = rng.integers(1, 200, size=400)
    values = rng.integers(0, 256, size=400)
    samples = np.repeat(values, runs)
    busy = slice(len(samples) // 3, len(samples) // 3 + 3000)
    samples[busy] ^= (np.arange(3000) & 1) << 6         # probe 6 (unmapped) every sample
    samples = samples.tolist()
    path = write_session(tmp_path / "s.sr", [f"D{k}" for k in range(8)], samples, unitsize=1,
                         chunk=4099)
    bits = [5, 0, 3]
    with SrReader(path) as reader:
        got = collect(reader, bits, block)
    assert got == reference_edges(samples, bits)
    assert len(got[0]) > 500


def test_truncated_last_chunk_can_be_dropped_with_warning(tmp_path):
    path = tmp_path / "t.sr"
    with zipfile.ZipFile(path, "w") as archive:
        archive.writestr("version", b"2")
        archive.writestr("metadata", "[device 1]\ncapturefile=logic-1\ntotal probes=2\n"
                                     "samplerate=1000\nprobe1=a\nprobe2=b\nunitsize=2\n")
        archive.writestr("logic-1-1", bytes([1, 0, 3, 0, 2]))     # 2.5 samples
    with pytest.raises(SigrokFileError, match="is 5 bytes, not a whole number of 2-byte samples"):
        SrReader(path)
    with SrReader(path, allow_truncated=True) as reader:
        assert reader.info.num_samples == 2
        assert reader.warnings == ["chunk 'logic-1-1' ends with a partial sample (1 of 2 bytes); "
                                   "it was dropped"]
        assert collect(reader, [0, 1], 10) == ([1], [1], [True])


def test_version_1_single_member_file(tmp_path):
    path = tmp_path / "v1.sr"
    with zipfile.ZipFile(path, "w") as archive:
        archive.writestr("version", b"1")
        archive.writestr("metadata", "[device 1]\ncapturefile=logic-1\ntotal probes=1\n"
                                     "samplerate=10 kHz\nprobe1=x\nunitsize=1\n")
        archive.writestr("logic-1", bytes([0, 0, 1, 1, 0]))
    with SrReader(path) as reader:
        assert reader.info.version == 1 and reader.info.chunks == ("logic-1",)
        assert collect(reader, [0], 2) == ([2, 4], [0, 0], [True, False])


def test_total_size_limit(tmp_path):
    path = write_session(tmp_path / "big.sr", ["a"], [0] * 2000, unitsize=1)
    with pytest.raises(SigrokFileError, match="hold 2000 bytes uncompressed, above the limit of "
                                              "1000"):
        SrReader(path, limits=SrLimits(max_total_bytes=1000))


def test_member_count_limit(tmp_path):
    path = write_session(tmp_path / "many.sr", ["a"], [0] * 20, unitsize=1, chunk=1)
    with pytest.raises(SigrokFileError, match="22 zip members exceed the limit of 10"):
        SrReader(path, limits=SrLimits(max_members=10))


# --- writer --------------------------------------------------------------------------------------
@pytest.mark.parametrize("kwargs, message", [
    ({"probe_names": []}, "A session file holds 1 to 64 probes, not 0"),
    ({"probe_names": ["a\nb"]}, "Probe name 'a\\\\nb' cannot be stored"),
    ({"probe_names": [" a"]}, "Probe name ' a' cannot be stored"),
    ({"samplerate": 1.5}, "Sample rate must be a positive integer \\(Hz\\), not 1.5"),
    ({"chunk_samples": 0}, "chunk_samples must be a positive integer, not 0"),
])
def test_writer_validates(tmp_path, kwargs, message):
    args = {"samplerate": 1000, "probe_names": ["a"], **kwargs}
    with pytest.raises(ValueError, match=message):
        SrWriter(tmp_path / "w.sr", args.pop("samplerate"), args.pop("probe_names"), **args)


def test_writer_refuses_to_overwrite(tmp_path):
    (tmp_path / "w.sr").write_bytes(b"keep")
    with pytest.raises(LatscopeError, match="exists; choose another name or use --force"):
        SrWriter(tmp_path / "w.sr", 1000, ["a"])
    assert (tmp_path / "w.sr").read_bytes() == b"keep"


def test_writer_output_reads_back_with_metadata_in_sigrok_order(tmp_path):
    samples = np.arange(1000, dtype=np.uint16) * 7
    with SrWriter(tmp_path / "w.sr", 123_456, [f"p{k}" for k in range(9)], chunk_samples=300,
                  sample_offset=42) as writer:
        writer.append(samples[:10])
        writer.append(samples[10:])
    with zipfile.ZipFile(tmp_path / "w.sr") as archive:
        meta = archive.read("metadata").decode()
        assert archive.read("version") == b"2"
        names = archive.namelist()
    keys = [line.split("=")[0] for line in meta.splitlines() if "=" in line]
    # FIELD.md §6: capturefile, total probes, samplerate, total analog, probe1..N, unitsize
    assert keys[1:] == ["capturefile", "total probes", "samplerate", "total analog"] + \
        [f"probe{k}" for k in range(1, 10)] + ["unitsize", "sample offset"]
    assert names == ["version", "metadata", "logic-1-1", "logic-1-2", "logic-1-3", "logic-1-4"]
    with SrReader(tmp_path / "w.sr") as reader:
        assert reader.info.unitsize == 2 and reader.info.sample_offset == 42
        back = np.concatenate([s for _, s in reader.iter_samples(256)])
    assert back.tolist() == samples.tolist()


def test_sample_index_is_exact_ceiling():
    # reference: Fraction arithmetic, one value at a time
    rng = np.random.default_rng(5)
    delta = rng.integers(0, 10**12, size=2000)
    for samplerate, tick_hz in [(100_000_000, Fraction(192_000_000)),
                                (3, Fraction(7)), (1_000_000_007, Fraction(200_000_000)),
                                (200_000_000, Fraction(200_000_000))]:
        got = sample_index(delta, samplerate, tick_hz).tolist()
        ratio = Fraction(samplerate) / tick_hz
        assert got == [-((-d * ratio.numerator) // ratio.denominator) for d in delta.tolist()]


# --- import --------------------------------------------------------------------------------------
def test_import_writes_capture_with_metadata(tmp_path):
    from latscope.capture.files.capfile import open_capture
    out = tmp_path / "c.lsc"
    summary = import_sr(os.path.join(FIXTURES, "wide16.sr"), out, "rx_dv=rx_dv,isr=m0,x=11")
    with open_capture(out) as capture:
        assert capture.tick_hz == 100_000_000
        assert capture.channel_names == {0: "rx_dv", 1: "isr", 2: "x"}
        assert capture.metadata["source"] == "sigrok"
        assert capture.metadata["source_file"] == "wide16.sr"
        assert capture.metadata["sigrok"]["map"] == {"rx_dv": "rx_dv", "isr": "m0", "x": "D11"}
        events = capture.events()
        assert capture.n_events == summary.events
        counts = EXPECTED["wide16.sr"]["edges"]
        for channel, probe in enumerate(["rx_dv", "m0", "D11"]):
            assert np.count_nonzero(events.channel == channel) == \
                counts[probe]["rising"] + counts[probe]["falling"]


@pytest.mark.slow
def test_import_of_1e9_samples_in_bounded_memory(tmp_path):
    """10^9 samples (1 GB of sample data) import with a peak RSS under 200 MB (the interpreter
    with NumPy alone is about 40 MB); the edge count is exact: probe 0 toggles every 100 000
    samples, restarting with every 2^24-sample chunk (make_sparse_sr)."""
    samples = 10**9
    sr_path, lsc_path = tmp_path / "big.sr", tmp_path / "big.lsc"
    make_sparse_sr(sr_path, samples)
    # VmHWM (peak RSS of this process image; ru_maxrss would carry the parent's over exec)
    code = ("from latscope.capture.files.sigrok_import import import_sr\n"
            "from latscope.capture.files.sigrok_write import peak_rss\n"
            f"s = import_sr({str(sr_path)!r}, {str(lsc_path)!r}, 'a=D0')\n"
            "print(s.events, s.samples, peak_rss())")
    out = subprocess.run([sys.executable, "-c", code], check=True, capture_output=True,
                         text=True).stdout.split()
    events, seen, rss = int(out[0]), int(out[1]), int(out[2])
    chunk = 1 << 24
    # edges of probe 0 within each chunk (level = (n // 100000) & 1, n restarts per chunk), plus
    # the falling edge at every chunk start where the previous chunk ended high
    per_chunk = lambda length: (length - 1) // 100_000
    full, rest = divmod(samples, chunk)
    ends_high = ((chunk - 1) // 100_000) & 1
    expected = full * per_chunk(chunk) + (per_chunk(rest) if rest else 0) + \
        (full - (0 if rest else 1)) * ends_high
    assert seen == samples
    assert events == expected
    assert rss < 200 * 2**20, f"peak RSS {rss / 2**20:.0f} MiB"


def _patch_sizes(path, name, size):
    """Rewrite the uncompressed size of ``name`` in the local header and the central directory."""
    with open(path, "rb") as handle:
        data = bytearray(handle.read())
    with zipfile.ZipFile(path) as archive:
        local = archive.getinfo(name).header_offset
    struct.pack_into("<I", data, local + 22, size)
    pos = data.find(b"PK\x01\x02")
    while pos >= 0:
        n = struct.unpack_from("<H", data, pos + 28)[0]
        if data[pos + 46:pos + 46 + n] == name.encode():
            struct.pack_into("<I", data, pos + 24, size)
        pos = data.find(b"PK\x01\x02", pos + 46)
    with open(path, "wb") as handle:
        handle.write(bytes(data))


@pytest.mark.parametrize("declared", [100, 3000])
def test_directory_size_lies_are_caught(tmp_path, declared):
    """The real chunk is 1000 bytes. Declared smaller: zipfile stops at the declared size and the
    CRC fails. Declared larger: the deflate stream ends early. Both are 'damaged', neither
    produces more data than declared."""
    rng = np.random.default_rng(0)
    path = write_session(tmp_path / "lie.sr", ["a"], rng.integers(0, 2, 1000).tolist(),
                         unitsize=1)
    _patch_sizes(path, "logic-1-1", declared)
    with SrReader(path) as reader:
        assert reader.info.num_samples == declared
        with pytest.raises(SigrokFileError, match="chunk 'logic-1-1' is damaged"):
            for _ in reader.iter_samples(64):
                pass


def test_duplicate_member_names_are_refused(tmp_path):
    path = write_session(tmp_path / "dup.sr", ["a"], [0, 1], unitsize=1)
    with pytest.warns(UserWarning, match="Duplicate name"):
        with zipfile.ZipFile(path, "a") as archive:
            archive.writestr("logic-1-1", b"\x00")
    with pytest.raises(SigrokFileError, match="member 'logic-1-1' appears twice"):
        SrReader(path)


@pytest.mark.parametrize("dtype", [np.uint8, np.uint16, np.uint32, np.uint64])
def test_changes_word_search_equals_neighbour_comparison(dtype):
    """changed_indices searches the change flags as 64-bit words; the reference compares every
    sample with the one before it (``np.flatnonzero(s[1:] != s[:-1]) + 1``). Lengths around
    multiples of 8, sparse and dense changes, one scratch array reused across calls as the readers
    do."""
    rng = np.random.default_rng(7)
    flags = np.zeros(5000 + 7, bool)
    for n in [0, 1, 2, 7, 8, 9, 15, 16, 17, 63, 64, 65, 1000, 4999, 5000]:
        for p_change in (0.0, 0.001, 0.05, 0.5, 1.0):
            steps = rng.random(n) < p_change
            samples = (np.cumsum(steps) % 3).astype(dtype) * dtype(0x81)
            expected = np.flatnonzero(samples[1:] != samples[:-1]) + 1
            got = changed_indices(samples, flags)
            assert got.tolist() == expected.tolist(), (n, p_change)
