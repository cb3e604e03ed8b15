"""Files a user names: one mapping from OS errors to one clear line, one TOML reader for every
text input (definitions, configs, experiments), and one check of input paths. Outputs follow
one policy, :mod:`latscope.capture.files.outputs`. ``latscope.cli.main`` turns any ``OSError``
that still escapes a command into :func:`os_error_message`, so no command prints a traceback
for a bad path."""

import errno
import os

from latscope import LatscopeError

__all__ = ["os_error_message", "read_toml", "check_input"]

#: errno -> words, for the errors a user's path can cause.
_REASONS = {
    errno.ENOENT: "no such file or directory",
    errno.EACCES: "permission denied",
    errno.EPERM: "permission denied",
    errno.EISDIR: "is a directory",
    errno.ENOTDIR: "a part of the path is not a directory",
    errno.EEXIST: "exists; choose another name or use --force",
    errno.ENOSPC: "no space left on the device",
    errno.EROFS: "read-only file system",
    errno.ENAMETOOLONG: "file name too long",
    errno.ELOOP: "too many symbolic links",
    errno.EBUSY: "device or resource busy",
    errno.ENXIO: "no such device",
    errno.ENODEV: "no such device",
    errno.EIO: "input/output error",
}


def os_error_message(error):
    """One line for an ``OSError``: ``"PATH: reason"`` (or just the reason without a path).

    >>> os_error_message(FileNotFoundError(2, "No such file or directory", "/x/y.lsc"))
    '/x/y.lsc: no such file or directory'
    >>> os_error_message(OSError(28, "No space left on device"))
    'no space left on the device'
    """
    reason = _REASONS.get(error.errno) or (error.strerror or str(error) or type(error).__name__)
    path = error.filename
    if path is None:
        return reason
    return f"{os.fsdecode(path)}: {reason}"


def read_toml(path, what):
    """Read a TOML file the user named as ``what`` (e.g. ``"definitions"``); every failure is a
    :class:`LatscopeError` with one line: missing, a directory, unreadable, binary data, not
    TOML."""
    try:
        with open(path, "rb") as file:
            data = file.read()
    except OSError as error:
        raise LatscopeError(f"cannot read {what} {os_error_message(error)}") from None
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as error:
        raise LatscopeError(f"{what} {path} is not a text file (byte {error.start} is not "
                            f"UTF-8); expected TOML") from None
    if "\x00" in text:
        raise LatscopeError(f"{what} {path} is not a text file (it holds NUL bytes); expected "
                            f"TOML")
    import tomllib  # here: its regular expressions cost ~3 ms to compile, import needs none
    try:
        return tomllib.loads(text)
    except tomllib.TOMLDecodeError as error:
        raise LatscopeError(f"{what} {path} is not valid TOML: {error}") from None


def check_input(path, what="file"):
    """Refuse a missing input or a directory where a file is expected, in one line."""
    if not os.path.exists(path):
        raise LatscopeError(f"{path}: no such file (expected a {what})")
    if os.path.isdir(path):
        raise LatscopeError(f"{path}: is a directory, not a {what}")
