"""capture.zipread against zipfile (the reference): same bytes, same refusals."""

import importlib.util
import zipfile
import zlib

import pytest

from latscope.capture.files import zipread


def _archive(path, payload):
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED, compresslevel=1) as z:
        z.writestr("logic-1-1", payload)
        z.writestr("version", b"2", compress_type=zipfile.ZIP_STORED)


def _read_all(handle, block):
    parts = []
    while True:
        data = handle.read(block)
        parts.append(data)
        if len(data) < block:
            return b"".join(parts)


def test_same_bytes_as_zipfile(tmp_path):
    payload = bytes(range(256)) * 4000 + b"\x00" * 300_000
    path = tmp_path / "a.sr"
    _archive(path, payload)
    with zipfile.ZipFile(path) as z:
        for block in (1, 7, 4099, 4096, len(payload), len(payload) + 1, 1 << 20):
            with zipread.open_member(z, "logic-1-1") as h:
                assert _read_all(h, block) == payload
        with zipread.open_member(z, "version") as h:       # stored: zipfile's own reader
            assert h.read(10) == b"2"


@pytest.mark.skipif(importlib.util.find_spec("zlib_ng") is None,
                    reason="zlib-ng not installed: zipfile is used")
def test_damage_is_refused_like_zipfile(tmp_path):
    payload = bytes(range(256)) * 2000
    path = tmp_path / "a.sr"
    _archive(path, payload)
    raw = bytearray(path.read_bytes())
    with zipfile.ZipFile(path) as z:
        info = z.getinfo("logic-1-1")
    # a wrong CRC in the central directory: the data inflates, the check fails at the end
    bad_crc = raw.replace(info.CRC.to_bytes(4, "little"), (info.CRC ^ 1).to_bytes(4, "little"))
    (tmp_path / "crc.sr").write_bytes(bytes(bad_crc))
    with zipfile.ZipFile(tmp_path / "crc.sr") as z:
        with pytest.raises(zipfile.BadZipFile, match="Bad CRC-32"):
            _read_all(z.open("logic-1-1"), len(payload))          # the reference refuses too
        with pytest.raises(zipfile.BadZipFile, match="Bad CRC-32"):
            with zipread.open_member(z, "logic-1-1") as h:
                _read_all(h, len(payload))
    # garbage in the compressed stream: an inflate error (or a CRC error), never wrong data
    start = 30 + len("logic-1-1")
    broken = bytearray(raw)
    broken[start + 10:start + 40] = b"\xff" * 30
    (tmp_path / "bits.sr").write_bytes(bytes(broken))
    with zipfile.ZipFile(tmp_path / "bits.sr") as z:
        with pytest.raises((zlib.error, zipfile.BadZipFile, EOFError)):
            with zipread.open_member(z, "logic-1-1") as h:
                _read_all(h, 1 << 16)
