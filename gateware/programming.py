"""Loading a bitstream into a board: openFPGALoader board names, the ECPIX-5 revision, the UART.

openFPGALoader knows the boards by name (``-b``): ``ecpix5`` is the early ECPIX-5 with an FTDI
FT2232H (USB ``0403:6010``), ``ecpix5_r03`` the R03 revision with an FT4232H (``0403:6011``),
``icebreaker`` the iCEBreaker (FT2232H, ``0403:6010``). :func:`detect_ecpix5_revision` tells the
two ECPIX-5 revisions apart from the USB IDs of the attached FTDI chips (pyserial's port list), or
the user says ``--revision``. :func:`uart_port` finds the serial device of the instrument's UART
on the same chip: the FTDI's last interface (interface 1 of the FT2232H, interface 3 of the
FT4232H; ``docs/boards.md``).
"""

import os
import shutil
from dataclasses import dataclass

from latscope import LatscopeError
from latscope.gateware.boards import get_board

__all__ = ["FTDI_VID", "USB_IDS", "REVISIONS", "UsbSerial", "list_usb_serial",
           "detect_ecpix5_revision", "openfpgaloader_board", "uart_port", "programmer_command"]

FTDI_VID = 0x0403
#: FTDI chip by USB product ID: (name, number of interfaces).
USB_IDS = {0x6010: ("FT2232H", 2), 0x6011: ("FT4232H", 4)}
#: ECPIX-5 revisions: revision name -> (openFPGALoader board, FTDI product ID).
REVISIONS = {"early": ("ecpix5", 0x6010), "r03": ("ecpix5_r03", 0x6011)}
#: openFPGALoader board name of the boards with one revision.
_LOADER_BOARD = {"icebreaker": "icebreaker"}


@dataclass(frozen=True)
class UsbSerial:
    """One USB serial device: its path, USB IDs and interface number (None when unknown)."""
    device: str
    vid: int
    pid: int
    interface: int | None
    serial_number: str | None = None


def _interface(location):
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
        out.append(UsbSerial(port.device, port.vid, port.pid, _interface(port.location),
                             port.serial_number))
    return out


def detect_ecpix5_revision(ports):
    """``"early"`` or ``"r03"`` from the attached FTDI chips (:func:`list_usb_serial`).

    Raises
    ------
    LatscopeError
        No ECPIX-5 FTDI chip is attached, or chips of both revisions are (say ``--revision``).
    """
    found = {rev for rev, (_, pid) in REVISIONS.items()
             if any(p.vid == FTDI_VID and p.pid == pid for p in ports)}
    if len(found) == 1:
        return found.pop()
    if not found:
        raise LatscopeError("No ECPIX-5 found: no FTDI FT2232H (0403:6010, early boards) or "
                            "FT4232H (0403:6011, R03) is attached; check the USB cable to the "
                            "board's FTDI port, or give --revision early|r03")
    raise LatscopeError("Both an FT2232H (0403:6010) and an FT4232H (0403:6011) are attached, "
                        "so the ECPIX-5 revision is ambiguous; give --revision early|r03")


def openfpgaloader_board(board, revision=None):
    """The openFPGALoader ``-b`` name of ``board`` (``revision`` for the ECPIX-5)."""
    board = get_board(board) if isinstance(board, str) else board
    if board.name == "ecpix5":
        if revision not in REVISIONS:
            raise LatscopeError(f"ECPIX-5 revision must be one of {', '.join(REVISIONS)}, not "
                                f"{revision!r}")
        return REVISIONS[revision][0]
    try:
        return _LOADER_BOARD[board.name]
    except KeyError:
        raise LatscopeError(f"No openFPGALoader board name known for {board.name}") from None


def uart_port(board, ports, revision=None):
    """The serial device of the instrument's UART on ``board``'s FTDI chip, or None.

    The UART is the chip's last interface: interface 1 of an FT2232H (ECPIX-5 early, iCEBreaker),
    interface 3 of the FT4232H (ECPIX-5 R03).
    """
    board = get_board(board) if isinstance(board, str) else board
    pid = REVISIONS[revision][1] if board.name == "ecpix5" else 0x6010
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
