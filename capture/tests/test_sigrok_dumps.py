"""sigrok files in every form the real ones take, read as sigrok reads them
(``latscope.capture.files.sigrok_metadata`` and the importer on the forms of
sigrokproject/sigrok-dumps).

Expected values come from tools nobody here wrote:

- ``fixtures/sigrok/dumps-golden.json``: what sigrok-cli 0.7.2 (libsigrok 0.5.2) reports for every
  ``.sr`` of the collection (``--show``: sample rate, channels, unitsize, sample count; ``-O
  binary``: the SHA-256 of the raw samples and, for files up to 2^22 samples, each probe's initial
  level and rising/falling edge counts from a plain NumPy ``np.diff`` of sigrok's bytes). Made by
  ``fixtures/sigrok/make_fixtures.py --dumps``; never edited by hand.
- sigrok-cli run live (the same reading, ``make_fixtures.sigrok_cli_reading``) on the synthetic
  files of ``fixtures/sigrok/quirks/``: one per quirk of real sigrok-dumps files, metadata in the
  same form as the real file it mimics, samples of our own (``make_fixtures.py``, ``QUIRKS``).
- libsigrok's own ``sr_parse_sizestring``, called through ctypes, for the sample-rate parser.

Every comparison is exact (``==``): samples, counts and rates are integers. The synthetic quirk
files run whenever sigrok-cli is installed; the whole collection runs when
``LATSCOPE_SIGROK_DUMPS`` names a checkout of sigrok-dumps, or one sits beside the project as
``../sigrok-dumps`` (marked slow).
"""

import collections
import ctypes
import ctypes.util
import functools
import hashlib
import importlib.util
import json
import os
import re
import shutil
import zipfile

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from latscope.capture.files.capfile import open_capture
from latscope.capture.files.sigrok import SrReader, parse_channel_map
from latscope.capture.files.sigrok_metadata import SAMPLERATE_RANGE, sigrok_samplerate
from latscope.cli import main

HERE = os.path.dirname(os.path.abspath(__file__))
FIXTURES = os.path.join(HERE, "..", "..", "fixtures", "sigrok")
QUIRKS_DIR = os.path.join(FIXTURES, "quirks")
DUMPS_ENV = "LATSCOPE_SIGROK_DUMPS"
#: Where the whole-collection test also looks: a checkout beside the project's directory.
BESIDE = os.path.normpath(os.path.join(HERE, "..", "..", "..", "sigrok-dumps"))

with open(os.path.join(FIXTURES, "dumps-golden.json")) as _handle:
    GOLDEN = json.load(_handle)["files"]

_spec = importlib.util.spec_from_file_location("sigrok_make_fixtures",
                                               os.path.join(FIXTURES, "make_fixtures.py"))
MAKE_FIXTURES = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(MAKE_FIXTURES)
#: synthetic file in fixtures/sigrok/quirks/ -> (the sigrok-dumps file whose form it has, quirk)
QUIRKS = MAKE_FIXTURES.QUIRKS
QUIRK_FILES = sorted(QUIRKS)

needs_sigrok_cli = pytest.mark.skipif(
    shutil.which("sigrok-cli") is None,
    reason="sigrok-cli is not installed (apt-get install sigrok-cli): the synthetic quirk files "
           "are compared with its live reading")


@functools.cache
def sigrok_cli_reads(name):
    """sigrok-cli's reading of ``quirks/NAME``, run now: an entry as in dumps-golden.json."""
    return MAKE_FIXTURES.sigrok_cli_reading(os.path.join(QUIRKS_DIR, name))

#: Rate given to files that have none (any rate in range does; sigrok-cli reports 0).
FALLBACK_RATE = 1_000_000


def _libsigrok():
    name = ctypes.util.find_library("sigrok") or "libsigrok.so.4"
    try:
        library = ctypes.CDLL(name)
    except OSError:
        return None
    function = library.sr_parse_sizestring
    function.argtypes = [ctypes.c_char_p, ctypes.POINTER(ctypes.c_uint64)]
    function.restype = ctypes.c_int
    return function


SR_PARSE_SIZESTRING = _libsigrok()
needs_libsigrok = pytest.mark.skipif(SR_PARSE_SIZESTRING is None,
                                     reason="libsigrok is not installed (apt-get install "
                                            "sigrok-cli brings libsigrok4)")


def libsigrok_reads(text):
    """``(ok, value)`` from libsigrok's own parser."""
    value = ctypes.c_uint64(0)
    ok = SR_PARSE_SIZESTRING(text.encode(), ctypes.byref(value)) == 0
    return ok, value.value


def latscope_reads(text):
    try:
        return True, sigrok_samplerate(text)
    except ValueError:
        return False, None


# --- the sample-rate parser against libsigrok ----------------------------------------------------
#: (text, Hz) read from sr_parse_sizestring's source (libsigrok 0.5.2 src/strutil.c) and confirmed
#: by the ctypes call below: every spelling in sigrok-dumps, and the quirks.
SAMPLERATES = [
    ("1 MHz", 10**6), ("500 kHz", 500_000), ("1 GHz", 10**9), ("5 Hz", 5), ("1MHz", 10**6),
    ("2 mHz", 2 * 10**6),                   # 'm' is mega: sigrok-dumps spi/adxl345
    ("2.4 MHz", 2_400_000), ("12.500000 MHz", 12_500_000), ("1.515151 MHz", 1_515_151),
    ("3.125000 MHz", 3_125_000), ("100000000", 10**8), ("100hz", 100), ("1 THz", 10**12),
    ("1.5MHz", 1),                          # the fraction's parser swallows the 'M'
    ("MHz", 0),                             # no digits: 0
    ("1" + "0" * 30, 0),                    # strtoull saturates; the double conversion gives 0
]


@pytest.mark.parametrize("text, hz", SAMPLERATES)
def test_sigrok_samplerate_table(text, hz):
    assert sigrok_samplerate(text) == hz


@pytest.mark.parametrize("text", ["fast", "2 M Hz", "1e6", "10 MHz x", "1 kHzz"])
def test_sigrok_samplerate_refuses_what_libsigrok_refuses(text):
    with pytest.raises(ValueError, match="not a sample rate"):
        sigrok_samplerate(text)


@needs_libsigrok
@pytest.mark.parametrize("text, hz", SAMPLERATES)
def test_table_agrees_with_libsigrok(text, hz):
    assert libsigrok_reads(text) == (True, hz)


def _defined_in_c(text):
    """False where libsigrok's behaviour may be undefined: text ending in a fraction (if the
    parser reaches it, its ``s++`` after ``g_ascii_strtod`` steps over the terminating NUL and
    reads beyond; the verdict then depends on the memory there). Conservative: some such texts
    are in fact defined."""
    return not re.search(r"\.[0-9]+(?:[eE][-+]?[0-9]+)?$", text)


@needs_libsigrok
@settings(max_examples=1000, deadline=None)
@given(st.one_of(
    st.text(alphabet="0123456789 .kKmMgGtTpPeEHhzZx-+", max_size=14),
    st.builds(lambda n, f, sp, p, u: f"{n}{f}{sp}{p}{u}",
              st.integers(0, 10**22), st.sampled_from(["", ".5", ".125", ".0", ".9999"]),
              st.sampled_from(["", " ", "  "]), st.sampled_from(["", "k", "M", "m", "G", "T"]),
              st.sampled_from(["", "Hz", "hz", "HZ", " Hz"]))))
def test_parser_equals_libsigrok_on_random_text(text):
    """Random spellings (hypothesis), compared with libsigrok's own function called through
    ctypes: the same verdict and the same value."""
    if "\x00" in text or not _defined_in_c(text):
        return
    mine = latscope_reads(text)
    theirs = libsigrok_reads(text)
    assert mine[0] == theirs[0], text
    if mine[0]:
        assert mine[1] == theirs[1], text


# --- importing files, compared with sigrok-cli's reading -----------------------------------------
def _import(path, out, capsys, *extra):
    code = main(["import", path, "-o", str(out), "--force", "--json", *extra])
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def check_against_sigrok(path, entry, out, capsys):
    """Import ``path`` with ``latscope import`` and compare it with sigrok-cli's reading
    ``entry`` (from dumps-golden.json, or run live). Returns the outcome: ``"imported"``,
    ``"needs rate"`` (imported once ``--samplerate`` was given) or ``"no logic"``."""
    assert entry["opens"], path
    if not entry["logic"]:
        code, _, err = _import(path, out, capsys)
        assert code == 2, err
        assert f"holds no logic data, only {len(entry['analog'])} analog channel(s)" in err, err
        assert "Traceback" not in err
        return "no logic"
    outcome = "imported"
    extra = []
    if not entry["samplerate"]:
        code, _, err = _import(path, out, capsys)
        assert code == 2 and "has no samplerate; give one with --samplerate" in err, err
        outcome, extra = "needs rate", ["--samplerate", str(FALLBACK_RATE)]
    code, stdout, err = _import(path, out, capsys, *extra)
    assert code == 0, err
    summary = json.loads(stdout)
    rate = entry["samplerate"] or FALLBACK_RATE
    assert summary["samplerate"] == rate
    assert summary["samples"] == entry["samples"]
    with SrReader(path, samplerate=rate) as reader:
        info = reader.info
        assert info.unitsize == entry["unitsize"]
        # every probe the file names carries sigrok's name for it (sigrok names the others by
        # their index)
        for k, name in enumerate(info.probes):
            assert (name or str(k)) == entry["logic"][k]
        if "binary_sha256" in entry:        # sample for sample: our stream == sigrok-cli -O binary
            digest, count = hashlib.sha256(), 0
            for _, samples in reader.iter_samples(1 << 20):
                raw = samples.view(np.uint8).reshape(len(samples), -1)[:, :info.unitsize]
                digest.update(raw.tobytes())
                count += len(samples)
            assert count * info.unitsize == entry["binary_bytes"]
            assert digest.hexdigest() == entry["binary_sha256"]
        pairs = parse_channel_map(None, info)       # the default map: [(role, bit), ...]
    with open_capture(out) as capture:
        assert capture.metadata["tick_hz"] == rate
        assert capture.metadata["channels"] == {str(i): role for i, (role, _) in enumerate(pairs)}
        if "edges" in entry:
            rising, falling = np.zeros(256, np.int64), np.zeros(256, np.int64)
            for chunk in capture.iter_chunks():
                up = np.asarray(chunk.rising, bool)
                rising += np.bincount(chunk.channel[up], minlength=256)
                falling += np.bincount(chunk.channel[~up], minlength=256)
            initial = capture.note["initial_levels"]
            for channel, (role, bit) in enumerate(pairs):
                level, ups, downs = entry["edges"][str(bit)]
                assert (rising[channel], falling[channel]) == (ups, downs), (path, role)
                if len(set(role for role, _ in pairs)) == len(pairs):
                    assert int(initial[role]) == level, (path, role)
    return outcome


@needs_sigrok_cli
@pytest.mark.parametrize("name", QUIRK_FILES)
def test_quirk_files_read_as_sigrok_reads_them(tmp_path, capsys, name):
    check_against_sigrok(os.path.join(QUIRKS_DIR, name), sigrok_cli_reads(name),
                         tmp_path / "out.lsc", capsys)


@needs_sigrok_cli
@pytest.mark.parametrize("name", QUIRK_FILES)
def test_quirk_file_has_the_form_of_its_sigrok_dumps_file(name):
    """sigrok-cli sees in each synthetic file what it saw in the real file it mimics
    (dumps-golden.json): the same sample rate, channels and unitsize; only the samples differ."""
    real = GOLDEN[QUIRKS[name][0]]
    mine = sigrok_cli_reads(name)
    for key in ("opens", "samplerate", "logic", "analog", "unitsize"):
        assert mine[key] == real[key], (name, key)


def test_quirk_files_are_what_the_script_makes(tmp_path):
    """The committed quirks/ files are byte for byte what ``make_fixtures.py`` writes."""
    MAKE_FIXTURES.make_quirks(str(tmp_path))
    assert sorted(os.listdir(tmp_path)) == sorted(
        f for f in os.listdir(QUIRKS_DIR) if f.endswith(".sr")) == QUIRK_FILES
    for name in QUIRK_FILES:
        with open(tmp_path / name, "rb") as made, \
                open(os.path.join(QUIRKS_DIR, name), "rb") as committed:
            assert made.read() == committed.read(), name


def _metadata(name):
    with zipfile.ZipFile(os.path.join(QUIRKS_DIR, name)) as archive:
        return archive.read("version"), archive.read("metadata").decode()


def test_quirk_files_keep_the_metadata_forms():
    """The spellings and key orders that make these files quirky, as the real files have them."""
    version, meta = _metadata("v1_ols_unitsize1_32probes.sr")
    assert version == b"1"
    assert "[device 1]\ndriver = ols\ncapturefile = logic-1\nunitsize = 1\ntotal probes = 32\n" \
           "samplerate = 200 kHz\n" in meta and meta.endswith("\n trigger2 = 0\n")
    version, meta = _metadata("v1_no_samplerate.sr")
    assert version == b"1" and "samplerate" not in meta and "driver = ols" in meta
    assert "samplerate=2 mHz\n" in _metadata("samplerate_2mHz.sr")[1]
    assert "capturefile" not in _metadata("analog_only.sr")[1]


@needs_sigrok_cli
def test_quirk_files_cover_every_quirk():
    """One synthetic file per quirk the collection shows (see fixtures/sigrok/README.md), as
    sigrok-cli reads them."""
    outcomes = {name: sigrok_cli_reads(name) for name in QUIRK_FILES}
    assert any(not e["logic"] for e in outcomes.values())                   # analog only
    assert any(e["logic"] and e["analog"] for e in outcomes.values())       # mixed
    assert any(e["logic"] and not e["samplerate"] for e in outcomes.values())
    assert {e["unitsize"] for e in outcomes.values() if e["logic"]} >= {1, 2, 4, 5}
    assert any(e["unitsize"] and 8 * e["unitsize"] < len(e["logic"]) for e in outcomes.values())


def test_2_mhz_is_read_as_libsigrok_reads_it_and_said(tmp_path, capsys):
    code, stdout, err = _import(os.path.join(QUIRKS_DIR, "samplerate_2mHz.sr"),
                                tmp_path / "o.lsc", capsys)
    assert code == 0
    assert json.loads(stdout)["samplerate"] == 2_000_000
    assert "warning: samplerate '2 mHz' read as 2,000,000 Hz, as libsigrok reads it" in err


def test_probe_beyond_the_sample_width_holds_no_data(tmp_path, capsys):
    """v1_ols_unitsize1_32probes.sr (the form of sigrok-dumps rtc_ds1307_200khz.sr) declares 32
    probes in 1-byte samples: probes 8..31 have no bits."""
    path = os.path.join(QUIRKS_DIR, "v1_ols_unitsize1_32probes.sr")
    code, _, err = _import(path, tmp_path / "o.lsc", capsys, "--map", "a=SCL,b=12")
    assert code == 2
    assert "probe '12' (index 12) holds no data: the file's 1-byte samples carry probes 0 to 7" \
        in err


@pytest.mark.slow
def test_whole_collection_reads_as_sigrok_cli_reads_it(tmp_path, capsys):
    """Every .sr of a sigrok-dumps checkout (``LATSCOPE_SIGROK_DUMPS``, else ``../sigrok-dumps``
    beside the project) that sigrok-cli opens imports, or says it holds no logic data; each
    compared with sigrok-cli's reading."""
    root = os.environ.get(DUMPS_ENV)
    if root and not os.path.isdir(root):
        pytest.fail(f"{DUMPS_ENV}={root!r} is not a directory")
    if not root and os.path.isdir(BESIDE):
        root = BESIDE
    if not root:
        pytest.skip(f"no sigrok-dumps checkout: set {DUMPS_ENV} to one, or clone "
                    f"sigrokproject/sigrok-dumps beside the project as {BESIDE} "
                    f"(docs/sigrok.md says how)")
    files = sorted(os.path.relpath(os.path.join(d, f), root)
                   for d, _, names in os.walk(root) for f in names if f.endswith(".sr"))
    known = [name for name in files if name in GOLDEN]
    assert len(known) >= 0.95 * len(GOLDEN), "the checkout lacks most of the recorded files"
    outcomes = collections.Counter()
    for name in known:
        outcomes[check_against_sigrok(os.path.join(root, name), GOLDEN[name],
                                      tmp_path / "out.lsc", capsys)] += 1
    print(f"sigrok-dumps: {len(known)} files: {dict(outcomes)}")
    assert sum(outcomes.values()) == len(known)


# --- the accepted sample-rate range ---------------------------------------------------------------
def _two_probe_file(path, samplerate):
    """rx_dv high for 200 samples, m_isr rising 150 samples after each rx_dv falling edge, ten
    times: at rate R every rx.isr latency is 150 / R seconds by construction."""
    samples = np.zeros(20_000, np.uint8)
    for k in range(10):
        start = 1000 + k * 1800
        samples[start:start + 200] |= 1
        samples[start + 350:start + 600] |= 2
    meta = ("[global]\nsigrok version=0.5.2\n[device 1]\ncapturefile=logic-1\n"
            f"total probes=2\nsamplerate={samplerate}\ntotal analog=0\nprobe1=rx_dv\n"
            "probe2=m_isr\nunitsize=1\n")
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as archive:
        archive.writestr("version", b"2")
        archive.writestr("metadata", meta)
        archive.writestr("logic-1-1", samples.tobytes())
    return str(path)


@pytest.mark.parametrize("samplerate, reads_as", [
    ("1" + "0" * 30, "0 Hz"), ("10 THz", "10,000,000,000,000 Hz"), ("0", "0 Hz"),
    ("1000000000001", "1,000,000,000,001 Hz"),
])
@pytest.mark.parametrize("command", ["import", "analyze"])
def test_out_of_range_samplerate_is_refused(tmp_path, capsys, samplerate, reads_as, command):
    """Before, 10^30 Hz imported and analyze then crashed; now both refuse with one line."""
    path = _two_probe_file(tmp_path / "r.sr", samplerate)
    args = [command, path] + (["-o", str(tmp_path / "o.lsc")] if command == "import" else [])
    assert main(args) == 2
    err = capsys.readouterr().err
    assert f"reads as {reads_as}, outside the range latscope accepts (1 Hz to 10^12 Hz" in err
    assert "Traceback" not in err and err.count("\n") == 1
    assert not (tmp_path / "o.lsc").exists()


def test_out_of_range_samplerate_option_is_refused(tmp_path, capsys):
    path = _two_probe_file(tmp_path / "r.sr", "1 MHz")
    assert main(["import", path, "-o", str(tmp_path / "o.lsc"), "--samplerate", "1e30"]) == 2
    assert "--samplerate is 1,000,000,000,000,000,000,000,000,000,000 Hz, outside the range" \
        in capsys.readouterr().err


@pytest.mark.parametrize("samplerate, hz", [("1 THz", 10**12), ("1 Hz", 1)])
def test_range_ends_import_and_analyze(tmp_path, capsys, samplerate, hz):
    """Both ends of the range go through analyze: rx.isr is 150 samples by construction, 0.15 ns
    at 1 THz; at 1 Hz that is 150 s, beyond the standard 1 ms window (analysis/definitions.py),
    so all ten packets are counted missed."""
    path = _two_probe_file(tmp_path / "r.sr", samplerate)
    assert main(["analyze", path, "--json"]) == 0
    result = json.loads(capsys.readouterr().out)
    assert result["tick_hz"] == hz
    isr = result["measurements"]["rx.isr"]
    assert isr["counts"]["packets"] == 10
    if hz == 10**12:
        assert isr["n"] == 10
        assert isr["min_ns"] == isr["max_ns"] == pytest.approx(0.15, rel=1e-12)
    else:
        assert isr["n"] == 0 and isr["counts"]["missed"] == 10


def test_samplerate_range_is_what_the_docs_say():
    with open(os.path.join(HERE, "..", "..", "docs", "sigrok.md")) as handle:
        docs = handle.read()
    assert SAMPLERATE_RANGE == (1, 10**12)
    assert "1 Hz to 10^12 Hz" in docs


def test_probes_sharing_a_name_are_pointed_out(tmp_path, capsys):
    """sigrok-dumps led/hub75/hub75.sr names three probes 'NC'; the default map keeps each under
    that name and the import says so."""
    path = tmp_path / "nc.sr"
    meta = ("[global]\nsigrok version=0.5.2\n[device 1]\ncapturefile=logic-1\ntotal probes=3\n"
            "samplerate=1 MHz\ntotal analog=0\nprobe1=NC\nprobe2=CLK\nprobe3=NC\nunitsize=1\n")
    with zipfile.ZipFile(path, "w") as archive:
        archive.writestr("version", b"2")
        archive.writestr("metadata", meta)
        archive.writestr("logic-1-1", bytes([0, 7, 0]))
    code, _, err = _import(str(path), tmp_path / "o.lsc", capsys)
    assert code == 0
    assert "warning: probes 0, 2 are all named 'NC': their channels share that name; --map them " \
        "by index to tell them apart" in err
