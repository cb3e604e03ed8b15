"""latscope: measures how long an embedded Ethernet node takes to move a frame between the wire and
its software. The parts import as ``latscope.gateware``, ``latscope.capture`` and
``latscope.analysis``; the ``latscope`` command (:mod:`latscope.cli`) serves users."""

__version__ = "0.1.0"


class Terminated(BaseException):
    """SIGTERM arrived while a command was not in a section that handles it itself (the CLI
    turns it into one line and exit status 143, as KeyboardInterrupt into 130)."""


class LatscopeError(Exception):
    """An error the user can act on. The CLI prints its message and exits with status 2, without a
    traceback. Raise it (or a subclass) for bad input, a missing tool or an incompatible device."""
