"""The one output policy: how every latscope command and library writer creates a file or folder.

Every writer goes through this module, so the rules hold everywhere and read the same:

1. An output that is the same file as an input (the same path, a symbolic link to it or a hard
   link of it: same ``st_dev`` and ``st_ino``) is refused, with or without ``force``.
2. An existing output is refused without ``force``, with one message (:func:`exists_message`).
3. A regular file is written under a temporary name in its own folder and renamed into place
   when complete (:func:`replacing`, :func:`open_output`): a failed or interrupted writer
   (an exception, Ctrl-C, SIGTERM through :class:`latscope.Terminated`) leaves the previous file
   or nothing, never a truncated file, and never a temporary file. A symbolic link named as the
   output stays a link: its target is replaced.
4. An output that is not a regular file (``"-"`` for standard output, ``/dev/stdout``, a FIFO, a
   device) is written directly and never replaced.
5. A folder of results (:func:`output_folder`) may be new or empty; one that holds files is
   refused without ``force``. A new folder is built under a temporary name and renamed into
   place when complete.

Captures (``.lsc`` written by the capture loop) are the one exception to rule 3: their chunked
format stays readable whatever stops the writer, so they are written in place and finalised
(:class:`latscope.capture.files.capfile.CaptureWriter`); they still obey rules 1 and 2 through
:func:`check_output`.

Errors the user can act on raise :class:`latscope.LatscopeError` with one line.

Examples
--------
>>> import os, pathlib, tempfile
>>> folder = tempfile.mkdtemp()
>>> path = os.path.join(folder, "out.txt")
>>> with open_output(path) as handle:
...     _ = handle.write("complete\\n")
>>> pathlib.Path(path).read_text(), sorted(os.listdir(folder))
('complete\\n', ['out.txt'])
>>> try:
...     with open_output(path, force=True) as handle:
...         _ = handle.write("half")
...         raise RuntimeError("stopped")
... except RuntimeError:
...     pass
>>> pathlib.Path(path).read_text(), sorted(os.listdir(folder))
('complete\\n', ['out.txt'])
"""

import contextlib
import errno
import os
import shutil
import stat
import sys

from latscope import LatscopeError

__all__ = ["STDOUT", "same_file", "is_direct", "exists_message", "check_output",
           "check_output_folder", "replacing", "open_output", "output_folder",
           "temporary_name", "PendingOutput", "TEMP_SUFFIX"]

#: The output name that means standard output.
STDOUT = "-"
#: Names of a process's own open files (``/dev/stdout`` resolves into ``/proc/self/fd``, which may
#: point at the regular file a shell redirected standard output to: that file must be written
#: through the open descriptor, never replaced).
_DIRECT_NAMES = ("/dev/stdout", "/dev/stderr", "/dev/fd/", "/proc/")
#: Write errors that name no file: raised by a write to the output itself.
_FULL = (errno.ENOSPC, errno.EFBIG, errno.EDQUOT, errno.EIO)
#: Suffix of every temporary name this module makes (a leading dot hides it from ``ls``).
TEMP_SUFFIX = ".tmp"


def _stat(path):
    """``os.stat`` of ``path`` (following links), or ``None`` when it does not resolve."""
    try:
        return os.stat(path)
    except (OSError, ValueError):
        return None


def same_file(a, b):
    """True when ``a`` and ``b`` name one file: the same resolved path, or the same device and
    inode (a symbolic or hard link). ``"-"`` names standard output.

    >>> here, name = os.path.split(__file__)
    >>> same_file(__file__, os.path.join(here, ".", name)), same_file(__file__, here)
    (True, False)
    """
    first = os.fstat(1) if a == STDOUT else _stat(a)
    second = os.fstat(1) if b == STDOUT else _stat(b)
    if first is not None and second is not None:
        return (first.st_dev, first.st_ino) == (second.st_dev, second.st_ino)
    if STDOUT in (a, b):
        return False
    return os.path.realpath(a) == os.path.realpath(b)


def is_direct(path):
    """True when ``path`` is written directly, never replaced: ``"-"``, ``/dev/stdout``,
    ``/dev/stderr``, ``/dev/fd/N``, anything under ``/proc/``, or an existing file that is not a
    regular file (a FIFO, a device, a socket)."""
    if path == STDOUT:
        return True
    absolute = os.path.abspath(path)
    if absolute in _DIRECT_NAMES[:2] or absolute.startswith(_DIRECT_NAMES[2:]):
        return True
    info = _stat(path)
    return info is not None and not stat.S_ISREG(info.st_mode) and not stat.S_ISDIR(info.st_mode)


def exists_message(path):
    """The one message for an existing output written without ``force``."""
    return f"{path} exists; choose another name or use --force"


def _input_list(inputs):
    if inputs is None:
        return []
    if isinstance(inputs, (str, bytes, os.PathLike)):
        return [os.fspath(inputs)]
    return [os.fspath(p) for p in inputs]


def _refuse_inputs(output, inputs):
    for source in _input_list(inputs):
        if same_file(output, source):
            raise LatscopeError(f"output {os.fspath(output)} is the input {source}; choose "
                                f"another name (--force never replaces an input)")


def check_output(output, inputs=(), *, force=False, allow_stdout=True):
    """Check, before any work starts, that ``output`` may be written as a file.

    Parameters
    ----------
    output : str or os.PathLike
        The file to write; ``"-"`` is standard output.
    inputs : str, os.PathLike or iterable of them
        Files the command reads. An output that is one of them is refused even with ``force``.
    force : bool
        An existing output may be replaced.
    allow_stdout : bool
        ``"-"`` may stand for standard output (false for formats that are no stream, such as a
        capture file or a zip archive).

    Raises
    ------
    LatscopeError
        The output is an input; it exists and ``force`` is false; it is a folder; its folder is
        missing, is not a folder or cannot be written.
    """
    output = os.fspath(output)
    if output == STDOUT and not allow_stdout:
        raise LatscopeError("this format cannot be written to standard output ('-'); give a "
                            "file name")
    _refuse_inputs(output, inputs)
    if is_direct(output):
        return
    if os.path.isdir(output):
        raise LatscopeError(f"{output} is a folder; give a file name")
    if os.path.lexists(output) and not force:
        raise LatscopeError(exists_message(output))
    folder = os.path.dirname(os.path.abspath(output))
    if not os.path.isdir(folder):
        raise LatscopeError(f"{output}: folder {folder} does not exist")
    # the only reliable test (root, read-only mounts, ACLs): create and remove a file there
    _discard(_create_temporary(output))


def temporary_name(path):
    """A fresh name for a temporary file beside ``path`` (same folder, so the final rename is
    atomic): ``.NAME.RANDOM.tmp``."""
    folder, name = os.path.split(os.path.abspath(path))
    return os.path.join(folder, f".{name}.{os.urandom(4).hex()}{TEMP_SUFFIX}")


def _create_temporary(target):
    """Create and close an empty temporary file beside ``target``; return its name. Made with
    mode 0666 less the umask, as a plain ``open`` would make the output itself."""
    for _ in range(100):
        temp = temporary_name(target)
        try:
            os.close(os.open(temp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o666))
        except FileExistsError:
            continue
        except OSError as error:
            raise LatscopeError(f"cannot write into {os.path.dirname(temp)}: "
                                f"{error.strerror}") from None
        return temp
    raise LatscopeError(f"cannot find a free temporary name beside {target}")


def _discard(path):
    try:
        os.unlink(path)
    except FileNotFoundError:
        pass


class PendingOutput:
    """An output being written under a temporary name, for writers whose lifetime is not one
    ``with`` block (:class:`~latscope.capture.files.sigrok_write.SrWriter`): write to :attr:`path`,
    then :meth:`commit` or :meth:`discard`. :func:`replacing` is the ``with`` form.

    Parameters
    ----------
    output, inputs, force, allow_stdout
        As for :func:`check_output`, which runs first.

    Attributes
    ----------
    output : str
        The name the user gave.
    path : str
        Where to write: a temporary file (created empty) beside the output, or the output itself
        when it is written directly (:func:`is_direct`; ``"-"`` stays ``"-"``).
    direct : bool
    """

    def __init__(self, output, inputs=(), *, force=False, allow_stdout=True):
        self.output = os.fspath(output)
        self.force = force
        check_output(self.output, inputs, force=force, allow_stdout=allow_stdout)
        self.direct = is_direct(self.output)
        self.done = False
        if self.direct:
            self.path = self._target = self.output
            return
        # a symbolic link named as the output stays a link; its target is what gets replaced
        self._target = os.path.realpath(self.output) if os.path.islink(self.output) \
            else self.output
        self.path = _create_temporary(self._target)

    def commit(self):
        """Rename the complete file into place (nothing to do for a direct output)."""
        if self.done:
            return
        if self.direct:
            self.done = True
            return
        try:
            if not self.force and os.path.lexists(self._target):   # appeared while writing
                raise LatscopeError(exists_message(self.output))
            try:
                os.replace(self.path, self._target)
            except OSError as error:
                raise LatscopeError(f"cannot write {self.output}: {error.strerror}") from None
        except BaseException:
            self.discard()
            raise
        self.done = True

    def discard(self):
        """Remove the temporary file; the output stays as it was (a direct output keeps what
        was written to it)."""
        if not self.done and not self.direct:
            _discard(self.path)
        self.done = True


@contextlib.contextmanager
def replacing(output, inputs=(), *, force=False, allow_stdout=True):
    """Write a file under a temporary name and rename it into place when the block completes.

    Yields the path to write to: a temporary file (created empty) beside ``output``, or
    ``output`` itself when it is written directly (:func:`is_direct`; ``"-"`` yields ``"-"``).
    When the block raises anything (including ``KeyboardInterrupt`` and
    :class:`latscope.Terminated`) the temporary file is removed and ``output`` is untouched.

    Parameters
    ----------
    output, inputs, force, allow_stdout
        As for :func:`check_output`, which runs first.
    """
    pending = PendingOutput(output, inputs, force=force, allow_stdout=allow_stdout)
    try:
        yield pending.path
    except BaseException:
        pending.discard()
        raise
    pending.commit()


@contextlib.contextmanager
def open_output(output, inputs=(), *, force=False, mode="w", encoding=None, newline=None):
    """Open ``output`` for writing under the policy (see :func:`replacing`): yields a file
    object; ``"-"`` yields standard output (not closed). ``mode`` is ``"w"`` or ``"wb"``."""
    if mode not in ("w", "wb"):
        raise ValueError(f"Output mode must be 'w' or 'wb', not {mode!r}")
    binary = mode == "wb"
    with replacing(output, inputs, force=force) as path:
        if path == STDOUT:
            yield sys.stdout.buffer if binary else sys.stdout
            (sys.stdout.buffer if binary else sys.stdout).flush()
            return
        try:
            handle = open(path, mode, encoding=None if binary else (encoding or "utf-8"),
                          newline=None if binary else newline)
        except OSError as error:
            raise LatscopeError(f"cannot write {output}: {error.strerror}") from None
        try:
            try:
                yield handle
            except OSError as error:
                if error.filename is None and error.errno in _FULL:   # the output's own write
                    raise LatscopeError(f"cannot write {output}: {error.strerror}") from None
                raise
            try:
                handle.flush()
                if not is_direct(path):
                    os.fsync(handle.fileno())
            except OSError as error:          # a full disk shows here at the latest
                raise LatscopeError(f"cannot write {output}: {error.strerror}") from None
        finally:
            try:
                handle.close()
            except OSError:
                pass                          # only after a failed write, already raised


def check_output_folder(folder, inputs=(), *, force=False):
    """Check that a folder of results may be written: it is new (its parent exists) or empty,
    or ``force`` is true. An input inside ``folder`` is not refused here; each file written
    into it is checked against the inputs by :func:`replacing`.

    Raises
    ------
    LatscopeError
        ``folder`` is a file, is an input, holds files and ``force`` is false, its parent
        folder is missing, or it (or, for a new folder, its parent) cannot be written.
    """
    folder = os.fspath(folder)
    _refuse_inputs(folder, inputs)
    if os.path.lexists(folder) and not os.path.isdir(folder):
        raise LatscopeError(f"{folder} exists and is not a folder")
    if os.path.isdir(folder):
        if os.listdir(folder) and not force:
            raise LatscopeError(f"{folder} holds files; choose another folder or use --force")
        _discard(_create_temporary(os.path.join(folder, "probe")))
        return
    parent = os.path.dirname(os.path.abspath(folder))
    if not os.path.isdir(parent):
        raise LatscopeError(f"{folder}: folder {parent} does not exist")
    _discard(_create_temporary(folder))


@contextlib.contextmanager
def output_folder(folder, inputs=(), *, force=False):
    """Write a folder of results under the policy; yields the folder to write into.

    A new folder is built under a temporary name beside it and renamed into place when the
    block completes; if the block raises, the temporary folder is removed and nothing is left.
    An existing folder (empty, or any with ``force``) is written into in place: write each file
    in it with :func:`replacing` or :func:`open_output` so none is left half written.
    """
    folder = os.fspath(folder)
    check_output_folder(folder, inputs, force=force)
    if os.path.isdir(folder):
        yield folder
        return
    temp = temporary_name(folder)
    try:
        os.mkdir(temp)
    except OSError as error:
        raise LatscopeError(f"cannot create {folder}: {error.strerror}") from None
    try:
        yield temp
        try:
            os.rename(temp, folder)         # refuses a folder that appeared meanwhile
        except OSError as error:
            if os.path.isdir(folder) and os.listdir(folder):
                raise LatscopeError(f"{folder} holds files; choose another folder or use "
                                    f"--force") from None
            raise LatscopeError(f"cannot create {folder}: {error.strerror}") from None
    except BaseException:
        shutil.rmtree(temp, ignore_errors=True)
        raise
