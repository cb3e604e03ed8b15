"""Reading one member of a zip archive (a sigrok ``.sr`` chunk) faster than :mod:`zipfile`.

``zipfile`` inflates with zlib and checks the CRC-32 with zlib's ``crc32``; on a 20,000-packet
capture (190 MB of samples) the CRC alone took a third of ``latscope import``. zlib-ng (PyPI
``zlib-ng``) inflates the same DEFLATE streams slightly faster and computes the CRC-32 about five
times faster. This reader gives the same bytes and the same checks as ``zipfile``: the member's
CRC-32 and size are verified at its end, a mismatch raises :class:`zipfile.BadZipFile`, and a
corrupt stream raises :class:`zlib.error`. Members that are not DEFLATE-compressed, and every
member when zlib-ng is not installed, go through ``zipfile`` itself.
"""

import struct
import zipfile
import zlib

try:
    from zlib_ng import zlib_ng as _fast
except ImportError:                  # optional: the standard library reads the same files
    _fast = None

__all__ = ["open_member"]

_LOCAL_HEADER = struct.Struct("<4s5HL2L2H")     # PK\3\4 ... name length, extra length
_PIECE = 1 << 20


class _DeflateMember:
    """A read-only stream of one DEFLATE member's bytes, CRC and size checked at the end."""

    def __init__(self, path, info):
        self._file = open(path, "rb")
        self._file.seek(info.header_offset)
        header = self._file.read(_LOCAL_HEADER.size)
        if len(header) != _LOCAL_HEADER.size or header[:4] != b"PK\x03\x04":
            self._file.close()
            raise zipfile.BadZipFile(f"bad local file header for {info.filename!r}")
        name_length, extra_length = _LOCAL_HEADER.unpack(header)[-2:]
        self._file.seek(name_length + extra_length, 1)
        self._left = info.compress_size
        self._info = info
        self._inflate = _fast.decompressobj(-15)
        self._pending = b""
        self._surplus = b""          # inflated past a read's ``n`` (flush has no length limit)
        self._crc = 0
        self._size = 0

    def read(self, n):
        """Up to ``n`` bytes (fewer only at the end of the member)."""
        out, have = [], 0
        if self._surplus:
            out.append(self._surplus[:n])
            have = len(out[0])
            self._surplus = self._surplus[n:]
        try:
            while have < n:
                if self._pending:
                    piece = self._inflate.decompress(self._pending, n - have)
                    self._pending = self._inflate.unconsumed_tail
                elif self._left:
                    data = self._file.read(min(_PIECE, self._left))
                    if not data:
                        raise EOFError(f"{self._info.filename!r} ends before its compressed "
                                       f"size")
                    self._left -= len(data)
                    piece = self._inflate.decompress(data, n - have)
                    self._pending = self._inflate.unconsumed_tail
                else:
                    piece = self._inflate.flush()
                    if not piece:
                        break
                    if len(piece) > n - have:
                        self._surplus = piece[n - have:]
                        piece = piece[:n - have]
                if piece:
                    out.append(piece)
                    have += len(piece)
        except _fast.error as error:
            raise zlib.error(str(error)) from None
        data = b"".join(out)
        self._crc = _fast.crc32(data, self._crc)
        self._size += len(data)
        if have < n or self._size >= self._info.file_size:     # the end: check as zipfile does
            self._check()
        return data

    def _check(self):
        if self._size != self._info.file_size:
            raise zipfile.BadZipFile(f"{self._info.filename!r}: {self._size} bytes, the "
                                     f"directory says {self._info.file_size}")
        if self._crc != self._info.CRC:
            raise zipfile.BadZipFile(f"Bad CRC-32 for file {self._info.filename!r}")

    def close(self):
        self._file.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


def open_member(archive, name):
    """A readable stream of member ``name`` of the open :class:`zipfile.ZipFile` ``archive``
    (opened from a path): zlib-ng for DEFLATE members when installed, else ``archive.open``."""
    info = archive.getinfo(name)
    path = getattr(archive, "filename", None)
    if _fast is None or info.compress_type != zipfile.ZIP_DEFLATED or not path or \
            info.flag_bits & 0x1:                     # encrypted: zipfile says so
        return archive.open(name)
    return _DeflateMember(path, info)
