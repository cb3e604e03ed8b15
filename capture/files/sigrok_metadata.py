"""Reading a sigrok session file's ``metadata`` the way libsigrok reads it.

# Ref: libsigrok 0.5.2 ``src/session_file.c`` (``sr_session_load``) and ``src/strutil.c``
# (``sr_parse_sizestring``); checked against sigrok-cli 0.7.2 on the 1,015 files of
# sigrokproject/sigrok-dumps (``docs/sigrok.md``).

What libsigrok 0.5.2 does, and so what this module does:

- The ``[device N]`` group is read by key *name*: ``capturefile`` and ``total analog`` are looked
  up before the keys are walked, so their position does not matter (version-1 files, written by
  sigrok 0.1-0.2, begin with ``driver = ...``). Walking the keys in file order, ``probeN`` names a
  channel that ``total probes`` created, so a ``probeN`` before ``total probes`` fails to load.
  Keys it does not know (``driver``, ``triggerN``) are ignored.
- A group without ``capturefile`` has no logic data (analog-only files hold ``total analog`` and
  ``analog-1-K-N`` members).
- ``samplerate`` goes through ``sr_parse_sizestring``: an integer, an optional fraction, then one
  prefix letter of ``kKmMgGtTpPeE`` in which ``m`` is *mega* (``"2 mHz"`` is 2 MHz), then nothing
  or ``Hz`` in any case. :func:`sigrok_samplerate` reproduces it, quirks included.
- ``unitsize`` may be larger than the probes need (``unitsize=2`` for 8 probes); it may also be
  *smaller* (``unitsize=1`` with ``total probes=32``, as the OLS driver wrote): the probes beyond
  ``8 * unitsize`` then have no bits in the samples. latscope reads those files and treats such
  probes as holding no data.

latscope adds one check libsigrok lacks: the sample rate must lie in :data:`SAMPLERATE_RANGE`.
"""

import dataclasses
import re

from latscope import LatscopeError

__all__ = ["SAMPLERATE_RANGE", "SigrokFileError", "NoLogicDataError", "DeviceMetadata",
           "sigrok_samplerate", "check_samplerate", "parse_keyfile", "read_device"]

#: Sample rates (Hz) latscope accepts, inclusive. sigrok's rate is a whole number of Hz, so 1 Hz is
#: the smallest it can state; 10^12 Hz (one sample per picosecond) is above every real-time
#: sampler built (the fastest oscilloscopes sample at about 2.6e11 Hz; logic analyzers at
#: 1e10 Hz and below). Outside it a rate is a corrupt or mistyped file, and analysis arithmetic
#: (int64 ticks, per-millisecond windows) would be meaningless.
SAMPLERATE_RANGE = (1, 10**12)

_UINT64 = 1 << 64
_PREFIXES = {"k": 10**3, "m": 10**6, "g": 10**9, "t": 10**12, "p": 10**15, "e": 10**18}
_LEADING_INTEGER = re.compile(r"[ \t\n\v\f\r]*([-+]?)([0-9]+)")
_FRACTION = re.compile(r"\.[0-9]*(?:[eE][-+]?[0-9]+)?")
_PROBE_KEY = re.compile(r"probe([0-9]+)")
_SAFE_CAPTUREFILE = re.compile(r"[A-Za-z0-9_.-]{1,64}")


class SigrokFileError(LatscopeError):
    """A file is not a sigrok session file, is damaged, or is hostile (zip bomb, path traversal,
    inconsistent metadata). The message names the file and the broken rule."""


class NoLogicDataError(SigrokFileError):
    """The session file is valid but holds no logic channels (an analog-only capture)."""


def sigrok_samplerate(text):
    """A ``samplerate`` value as libsigrok 0.5.2's ``sr_parse_sizestring`` reads it.

    Parameters
    ----------
    text : str

    Returns
    -------
    int
        Hz, with libsigrok's arithmetic: unsigned 64-bit wrap-around for the integer part times
        the prefix, then the fraction times the prefix added in double precision and truncated
        (an integer part too large for strtoull saturates and then comes out as 0).

    Raises
    ------
    ValueError
        Where libsigrok returns ``SR_ERR`` (text left over that is not ``Hz``).

    Examples
    --------
    >>> sigrok_samplerate("1 MHz"), sigrok_samplerate("2 mHz"), sigrok_samplerate("12.5 kHz")
    (1000000, 2000000, 12500)
    >>> sigrok_samplerate("100000000"), sigrok_samplerate("1.515151 MHz")
    (100000000, 1515151)
    """
    text = str(text)
    match = _LEADING_INTEGER.match(text)
    if match:                                   # strtoull(text, &s, 10): saturates at 2^64 - 1
        size = min(int(match.group(2)), _UINT64 - 1)
        if match.group(1) == "-":
            size = (-size) % _UINT64
        pos = match.end()
    else:                                       # no digits: 0, and s stays at the start
        size, pos = 0, 0
    multiplier, fraction, done = 0, 0.0, False
    while pos < len(text) and multiplier == 0 and not done:
        char = text[pos]
        if char == ".":
            # g_ascii_strtod from the '.', then the loop's s++ skips one more character (so
            # "1.5MHz" loses its 'M' in libsigrok and reads as 1 Hz)
            number = _FRACTION.match(text, pos)
            if number and len(number.group()) > 1 and number.group()[1:2] not in ("e", "E"):
                fraction = float("0" + number.group())
                pos = number.end()
                if pos == len(text):
                    # s++ then steps over the terminating NUL and libsigrok reads past the string
                    # (undefined behaviour; it usually meets another NUL and accepts): accept
                    break
        elif char.lower() in _PREFIXES:
            multiplier = _PREFIXES[char.lower()]
        elif char != " ":
            done = True
            pos -= 1
        pos += 1
    # "*size *= multiplier; *size += frac_part * multiplier;" (or "*size += frac_part"): the sum
    # is a double converted back to uint64, so 2^53 and above round, and 2^64 and above (undefined
    # in C) come out as 0 with x86-64 compilers
    if multiplier:
        size = (size * multiplier) % _UINT64
    total = float(size) + fraction * (multiplier or 1)
    size = int(total) if total < _UINT64 else 0
    rest = text[pos:]
    if rest and rest.lower() != "hz":
        raise ValueError(f"not a sample rate: {text!r} (sigrok reads e.g. 100000000 or "
                         f"'100 MHz')")
    return size


def check_samplerate(hz, what="the sample rate is"):
    """Return ``hz`` if it lies in :data:`SAMPLERATE_RANGE`, else raise ``ValueError`` saying
    why.

    >>> check_samplerate(10**13, "--samplerate is")      # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ValueError: --samplerate is 10,000,000,000,000 Hz, outside the range latscope accepts (1 Hz ...
    """
    low, high = SAMPLERATE_RANGE
    if not low <= hz <= high:
        raise ValueError(f"{what} {hz:,} Hz, outside the range latscope accepts ({low} Hz to "
                         f"10^{len(str(high)) - 1} Hz, one sample per picosecond)")
    return hz


def parse_keyfile(path, text):
    """Parse GKeyFile text into ``[(group, [(key, value), ...]), ...]`` in file order, refusing
    duplicate groups, duplicate keys and lines that are neither. Leading whitespace is ignored,
    as GKeyFile does (version-1 files indent ``trigger`` keys)."""
    groups = []
    seen_groups = set()
    keys = None
    for number, raw in enumerate(text.splitlines(), 1):
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        if line.startswith("[") and line.endswith("]"):
            name = line[1:-1]
            if name in seen_groups:
                raise SigrokFileError(f"{path}: metadata line {number}: group [{name}] appears "
                                      f"twice")
            seen_groups.add(name)
            keys = []
            groups.append((name, keys))
            continue
        if "=" not in line:
            raise SigrokFileError(f"{path}: metadata line {number}: {raw!r} is neither "
                                  f"'key=value' nor '[group]'")
        if keys is None:
            raise SigrokFileError(f"{path}: metadata line {number}: key before any [group]")
        key, _, value = line.partition("=")
        key, value = key.strip(), value.strip()
        if any(k == key for k, _ in keys):
            raise SigrokFileError(f"{path}: metadata line {number}: key {key!r} appears twice in "
                                  f"[{groups[-1][0]}]")
        keys.append((key, value))
    return groups


def _int_value(path, group, key, value, low, high):
    if not re.fullmatch(r"[0-9]+", value or ""):
        raise SigrokFileError(f"{path}: metadata [{group}] {key}={value!r} is not a whole number")
    number = int(value)
    if not low <= number <= high:
        raise SigrokFileError(f"{path}: metadata [{group}] {key}={number} is out of range "
                              f"({low} to {high})")
    return number


@dataclasses.dataclass(frozen=True)
class DeviceMetadata:
    """The logic device of a session file, as libsigrok reads its ``[device N]`` group."""
    group: str
    capturefile: str
    total_probes: int
    probes: tuple
    unitsize: int
    total_analog: int
    samplerate: int | None
    samplerate_text: str | None


def read_device(path, groups, samplerate_override=None):
    """Interpret the ``[device N]`` group of parsed metadata (see the module docstring).

    Raises
    ------
    NoLogicDataError
        The file holds only analog channels (or no channels at all).
    SigrokFileError
        Inconsistent or unreadable metadata.
    """
    devices = [(name, keys) for name, keys in groups if name.startswith("device ")]
    if not devices:
        raise SigrokFileError(f"{path}: metadata has no [device N] group")
    if len(devices) > 1:
        raise SigrokFileError(f"{path}: metadata describes {len(devices)} devices; latscope "
                              f"imports files with one logic device")
    group, keys = devices[0]
    values = dict(keys)
    total_analog = 0
    if "total analog" in values:
        total_analog = _int_value(path, group, "total analog", values["total analog"], 0, 4096)
    if "capturefile" not in values:
        analog = [v for k, v in keys if re.fullmatch(r"analog[0-9]+", k)]
        what = (f"only {total_analog} analog channel(s)"
                + (f" ({', '.join(analog)})" if analog else "")) if total_analog else \
            "no channels"
        raise NoLogicDataError(f"{path}: holds no logic data, {what}; latscope imports logic "
                               f"channels only")
    for required in ("total probes", "unitsize"):
        if required not in values:
            raise SigrokFileError(f"{path}: metadata [{group}] has no {required!r} key "
                                  f"(sigrok would load the file as empty)")
    total_probes = _int_value(path, group, "total probes", values["total probes"], 1, 64)
    unitsize = _int_value(path, group, "unitsize", values["unitsize"], 1, 8)
    probes = [None] * total_probes
    seen_total = False
    for key, value in keys:
        if key == "total probes":
            seen_total = True
        match = _PROBE_KEY.fullmatch(key)
        if not match:
            continue
        if not seen_total:
            raise SigrokFileError(f"{path}: metadata [{group}] has {key!r} before "
                                  f"'total probes' (sigrok fails to load such a file)")
        number = int(match.group(1))
        if not 1 <= number <= total_probes:
            raise SigrokFileError(f"{path}: metadata [{group}] {key} is outside probe1.."
                                  f"probe{total_probes}")
        if not value:
            raise SigrokFileError(f"{path}: metadata [{group}] {key} has an empty name")
        probes[number - 1] = value
    text = values.get("samplerate")
    if samplerate_override is not None:
        samplerate = int(samplerate_override)
        what = "--samplerate is"
    elif text is not None:
        try:
            samplerate = sigrok_samplerate(text)
        except ValueError as error:
            raise SigrokFileError(f"{path}: metadata [{group}] samplerate: {error}") from None
        what = f"samplerate {text!r} reads as"
    else:
        samplerate = None
    if samplerate is not None:
        try:
            check_samplerate(samplerate, what)
        except ValueError as error:
            hint = "" if samplerate_override is not None else \
                "; 'latscope import --samplerate' can supply the true rate"
            raise SigrokFileError(f"{path}: {error}{hint}") from None
    capturefile = values["capturefile"]
    if not _SAFE_CAPTUREFILE.fullmatch(capturefile):
        raise SigrokFileError(f"{path}: metadata capturefile={capturefile!r} is not a plain "
                              f"member name")
    return DeviceMetadata(group=group, capturefile=capturefile, total_probes=total_probes,
                          probes=tuple(probes), unitsize=unitsize, total_analog=total_analog,
                          samplerate=samplerate, samplerate_text=text)
