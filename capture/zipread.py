"""Reading one member of a zip archive (a sigrok ``.sr`` chunk) faster than :mod:`zipfile`.

``zipfile`` inflates with zlib and checks the CRC-32 with zlib's ``crc32``; on a 20,000-packet
capture (190 MB of samples) the CRC alone took a third of ``latscope import``. zlib-ng (PyPI
``zlib-ng``) inflates the same DEFLATE streams slightly faster and computes the CRC-32 about five
times faster. libdeflate (PyPI ``deflate``) inflates a whole member in one call about five times
faster again on sigrok's long runs of equal samples (0.03 s instead of 0.18 s of CPU for those
190 MB); it needs the member in memory, so only members up to ``_WHOLE_LIMIT`` (sigrok writes
chunks of a few MB) take that path and larger ones stream through zlib-ng. This reader gives the
same bytes and the same checks as ``zipfile``: the member's CRC-32 and size are verified (before
the first byte when inflated whole, at its end when streamed), a mismatch raises
:class:`zipfile.BadZipFile`, and a corrupt stream raises :class:`zlib.error`. Members that are not
DEFLATE-compressed, and every member when neither library is installed, go through ``zipfile``.
"""

import struct
import zipfile
import zlib

try:
    from zlib_ng import zlib_ng as _fast
except ImportError:                  # optional: the standard library reads the same files
    _fast = None
try:
    import deflate as _whole  # libdeflate: inflates a whole member ~5x faster than zlib-ng
except ImportError:                  # optional, as zlib-ng
    _whole = None

__all__ = ["open_member"]

_LOCAL_HEADER = struct.Struct("<4s5HL2L2H")     # PK\3\4 ... name length, extra length
_PIECE = 1 << 20
# Members up to this size are inflated in one call by libdeflate (the buffer is the member);
# larger ones stream through zlib-ng so memory stays bounded whatever a file holds.
_WHOLE_LIMIT = 32 << 20


def _data_offset(file, info):
    """Seek ``file`` to the first compressed byte of member ``info``."""
    file.seek(info.header_offset)
    header = file.read(_LOCAL_HEADER.size)
    if len(header) != _LOCAL_HEADER.size or header[:4] != b"PK\x03\x04":
        raise zipfile.BadZipFile(f"bad local file header for {info.filename!r}")
    name_length, extra_length = _LOCAL_HEADER.unpack(header)[-2:]
    file.seek(name_length + extra_length, 1)


class _WholeMember:
    """One DEFLATE member inflated at once by libdeflate, size and CRC-32 checked before the
    first byte is handed out; ``read`` returns zero-copy :class:`memoryview` slices."""

    def __init__(self, path, info):
        with open(path, "rb") as file:
            _data_offset(file, info)
            compressed = file.read(info.compress_size)
        if len(compressed) != info.compress_size:
            raise EOFError(f"{info.filename!r} ends before its compressed size")
        try:
            # room for one byte more than declared, so a longer stream is caught, not cut
            data = _whole.deflate_decompress(compressed, info.file_size + 1)
        except _whole.DeflateError as error:
            raise zlib.error(f"{info.filename!r}: {error} (corrupt, or longer than the "
                             f"directory's {info.file_size} bytes)") from None
        if len(data) != info.file_size:
            raise zipfile.BadZipFile(f"{info.filename!r}: {len(data)} bytes, the directory "
                                     f"says {info.file_size}")
        if _whole.crc32(data) != info.CRC:
            raise zipfile.BadZipFile(f"Bad CRC-32 for file {info.filename!r}")
        self._view = memoryview(data)
        self._at = 0

    def read(self, n):
        """Up to ``n`` bytes (fewer only at the end of the member), as a memoryview."""
        piece = self._view[self._at:self._at + n]
        self._at += len(piece)
        return piece

    def close(self):
        self._view.release()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


class _DeflateMember:
    """A read-only stream of one DEFLATE member's bytes, CRC and size checked at the end."""

    def __init__(self, path, info):
        self._file = open(path, "rb")
        try:
            _data_offset(self._file, info)
        except BaseException:
            self._file.close()
            raise
        self._left = info.compress_size
        self._info = info
        self._inflate = _fast.decompressobj(-15)
        self._pending = b""
        self._crc = 0
        self._size = 0

    def read(self, n):
        """Up to ``n`` bytes (fewer only at the end of the member)."""
        out, have = [], 0
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
    (opened from a path): DEFLATE members through libdeflate (whole, up to ``_WHOLE_LIMIT``
    bytes) or zlib-ng (streamed) when installed, else ``archive.open``."""
    info = archive.getinfo(name)
    path = getattr(archive, "filename", None)
    if info.compress_type != zipfile.ZIP_DEFLATED or not path or \
            info.flag_bits & 0x1:                     # encrypted: zipfile says so
        return archive.open(name)
    if _whole is not None and info.file_size <= _WHOLE_LIMIT:
        return _WholeMember(path, info)
    if _fast is not None:
        return _DeflateMember(path, info)
    return archive.open(name)
