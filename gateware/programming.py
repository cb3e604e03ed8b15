"""Loading a bitstream into a board: openFPGALoader board names, the ECPIX-5 revision, the UART.

Everything here is keyed by a board's platform (:attr:`~latscope.gateware.boards.Board.
platform_path`), not by the build's name, so every build of one board (``ecpix5`` and
``ecpix5-x1`` on the ECPIX-5) is programmed the same way. openFPGALoader knows the boards by name
(``-b``): ``ecpix5`` is the early ECPIX-5 with an FTDI FT2232H (USB ``0403:6010``), ``ecpix5_r03``
the R03 revision with an FT4232H (``0403:6011``), ``icebreaker`` the iCEBreaker (FT2232H,
``0403:6010``). :func:`resolve_revision` tells the two ECPIX-5 revisions apart from the USB IDs
of the attached FTDI chips (pyserial's port list), or takes the revision the user names.
:func:`uart_port` finds the serial device of the instrument's UART on the same chip: the FTDI's
last interface (interface 1 of the FT2232H, interface 3 of the FT4232H; ``docs/boards.md``).
"""

import os
import shutil
from dataclasses import dataclass

from latscope import LatscopeError
from latscope.gateware.boards import get_board

__all__ = ["FTDI_VID", "USB_IDS", "PlatformLoader", "LOADER_BOARDS", "REVISIONS", "UsbSerial",
           "list_usb_serial", "board_revisions", "detect_revision", "detect_ecpix5_revision",
           "resolve_revision", "openfpgaloader_board", "uart_port", "programmer_command",
           "usb_interface"]

FTDI_VID = 0x0403
#: FTDI chip by USB product ID: (name, number of interfaces).
USB_IDS = {0x6010: ("FT2232H", 2), 0x6011: ("FT4232H", 4)}
_ECPIX5 = "amaranth_boards.ecpix5:ECPIX585Platform"


@dataclass(frozen=True)
class PlatformLoader:
    """How one board (one amaranth-boards platform) is programmed."""
    title: str            # the board, whatever build it runs
    revisions: dict       # revision -> (openFPGALoader board name, FTDI product ID of its bridge);
                          # the key None names the only revision of a board that has one


#: By amaranth-boards platform (``Board.platform_path``).
LOADER_BOARDS = {
    _ECPIX5: PlatformLoader("LambdaConcept ECPIX-5", {"early": ("ecpix5", 0x6010),
                                                      "r03": ("ecpix5_r03", 0x6011)}),
    "amaranth_boards.icebreaker:ICEBreakerPlatform": PlatformLoader(
        "1BitSquared iCEBreaker", {None: ("icebreaker", 0x6010)}),
}
#: ECPIX-5 revisions: revision name -> (openFPGALoader board, FTDI product ID).
REVISIONS = LOADER_BOARDS[_ECPIX5].revisions


def _loader(board):
    """``board`` (a :class:`Board` or build name) and its :class:`PlatformLoader`."""
    board = get_board(board) if isinstance(board, str) else board
    try:
        return board, LOADER_BOARDS[board.platform_path]
    except KeyError:
        raise LatscopeError(f"No openFPGALoader board name known for {board.title} (platform "
                            f"{board.platform_path})") from None


def board_revisions(board):
    """The revision names of ``board``'s platform that need telling apart (``("early", "r03")``
    for the ECPIX-5); empty for a board with one revision."""
    _, loader = _loader(board)
    return tuple(r for r in loader.revisions if r is not None)


@dataclass(frozen=True)
class UsbSerial:
    """One USB serial device: its path, USB IDs and interface number (None when unknown)."""
    device: str
    vid: int
    pid: int
    interface: int | None
    serial_number: str | None = None


def usb_interface(location):
    """The interface number at the end of a pyserial ``location`` (``1-1.2:1.3`` -> 3)."""
    if not location or ":" not in location:
        return None
    tail = location.rsplit(":", 1)[1]
    try:
        return int(tail.split(".")[-1])
    except ValueError:
        return None


def list_usb_serial():
    """The USB serial devices pyserial sees (empty without pyserial)."""
    try:
        from serial.tools import list_ports
    except ImportError:      # pragma: no cover - pyserial is a dependency
        return []
    out = []
    for port in list_ports.comports():
        if port.vid is None or port.pid is None:
            continue
        out.append(UsbSerial(port.device, port.vid, port.pid, usb_interface(port.location),
                             port.serial_number))
    return out


def detect_revision(board, ports):
    """The revision of ``board`` from the attached FTDI chips (:func:`list_usb_serial`); None for
    a board with one revision.

    Raises
    ------
    LatscopeError
        No FTDI chip of any revision is attached, or chips of several are (say ``--revision``).
    """
    _, loader = _loader(board)
    revisions = loader.revisions
    if None in revisions:
        return None
    found = {rev for rev, (_, pid) in revisions.items()
             if any(p.vid == FTDI_VID and p.pid == pid for p in ports)}
    if len(found) == 1:
        return found.pop()
    chips = " or ".join(f"FTDI {USB_IDS[pid][0]} ({FTDI_VID:04x}:{pid:04x}, {rev})"
                        for rev, (_, pid) in revisions.items())
    options = "|".join(revisions)
    if not found:
        raise LatscopeError(f"No {loader.title} found: no {chips} is attached; "
                            f"check the USB cable to the board's FTDI port, or give "
                            f"--revision {options}")
    raise LatscopeError(f"Chips of several revisions are attached ({', '.join(sorted(found))}), "
                        f"so the {loader.title} revision is ambiguous; give "
                        f"--revision {options}")


def detect_ecpix5_revision(ports):
    """``"early"`` or ``"r03"`` from the attached FTDI chips (:func:`detect_revision` of the
    ECPIX-5)."""
    return detect_revision("ecpix5", ports)


def resolve_revision(board, revision, ports):
    """The revision to program: ``revision`` when named, detected from ``ports`` when it is
    ``None`` or ``"auto"`` (:func:`detect_revision`); always None for a board with one revision.

    Raises
    ------
    LatscopeError
        ``revision`` is not one of the board's, or detection fails.
    """
    board, loader = _loader(board)
    if revision in (None, "auto"):
        return detect_revision(board, ports)
    named = board_revisions(board)
    if revision not in named:
        allowed = ", ".join(("auto", *named)) if named else "auto (it has one revision)"
        raise LatscopeError(f"Revision of the {loader.title} must be {allowed}, not "
                            f"{revision!r}")
    return revision


def openfpgaloader_board(board, revision=None):
    """The openFPGALoader ``-b`` name of ``board`` (``revision`` for a board with several,
    :func:`board_revisions`)."""
    _, loader = _loader(board)
    revisions = loader.revisions
    if None in revisions:
        return revisions[None][0]
    if revision not in revisions:
        raise LatscopeError(f"{loader.title} revision must be one of "
                            f"{', '.join(revisions)}, not {revision!r}")
    return revisions[revision][0]


def uart_port(board, ports, revision=None):
    """The serial device of the instrument's UART on ``board``'s FTDI chip, or None.

    The UART is the chip's last interface: interface 1 of an FT2232H (ECPIX-5 early, iCEBreaker),
    interface 3 of the FT4232H (ECPIX-5 R03).
    """
    board, loader = _loader(board)
    openfpgaloader_board(board, revision)                 # the revision is checked
    pid = loader.revisions[None if None in loader.revisions else revision][1]
    want = USB_IDS[pid][1] - 1
    for p in ports:
        if p.vid == FTDI_VID and p.pid == pid and p.interface == want:
            return p.device
    return None


def programmer_command(board, bitstream, *, flash=False, revision=None, which=shutil.which):
    """The command line that loads ``bitstream`` into ``board`` (openFPGALoader; ``iceprog`` for
    the iCEBreaker when openFPGALoader is missing).

    Raises :class:`LatscopeError` naming the tools to install when none is found.
    """
    board = get_board(board) if isinstance(board, str) else board
    loader = os.environ.get("OPENFPGALOADER", "openFPGALoader")
    iceprog = os.environ.get("ICEPROG", "iceprog")
    if which(loader):
        name = openfpgaloader_board(board, revision)
        return [which(loader), "-b", name, *(["-f"] if flash else ["-m"]), str(bitstream)]
    if board.family == "ice40" and which(iceprog):
        return [which(iceprog), *([] if flash else ["-S"]), str(bitstream)]
    tools = "openFPGALoader (https://github.com/trabucayre/openFPGALoader, or your "\
            "distribution's package 'openfpgaloader')"
    if board.family == "ice40":
        tools += " or iceprog (package 'fpga-icestorm')"
    raise LatscopeError(f"No programmer for {board.title} found in PATH: install {tools}, or "
                        f"set OPENFPGALOADER/ICEPROG to its path")
