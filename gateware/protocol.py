"""The latscope wire protocol: the one definition of every byte between the gateware and the host.

Everything the instrument sends or accepts is defined here as Amaranth ``data.Struct`` layouts
and constants. The gateware builds its records from these layouts; the host decoder in
``latscope.capture.stream`` derives its NumPy dtypes and bit masks from them;
``docs/stream-format.md`` is the prose specification, and ``gateware/tests/test_protocol.py`` ties
the three together.

Byte order: every multi-byte field is little-endian, and a ``data.Struct`` is serialised with its
bit 0 as bit 0 of the first byte (so the first field listed occupies the lowest bits of the first
bytes).

Version rule: :data:`PROTOCOL_VERSION` is bumped for any change a host built against the
previous version would misread (a field moved or resized, a token's meaning changed). Adding a new
frame type, command or reply status with a value the old host does not know is *not* a version
bump: hosts must skip frames of unknown type (they still pass the CRC) and report unknown
replies as errors.
"""

import enum

from amaranth.lib import data

__all__ = [
    "PROTOCOL_VERSION", "SYNC", "SYNC_WORD", "MAX_PAYLOAD", "CRC_BYTES",
    "FrameType", "FrameHeader", "EventsHeader", "Heartbeat", "HeartbeatStatus",
    "Opcode", "Status", "CommandHeader", "ReplyHeader", "IdentifyReply",
    "Token", "EVENT_FIRST_BITS", "CONT_BITS", "EVENT_MAX_CONT", "TIME_FIRST_BITS",
    "TIME_MAX_CONT", "OVERFLOW_CONT", "Overflow",
    "EntryKind", "capture_entry_layout", "NUM_CHANNELS",
]

#: Version of this protocol. See the module docstring for when it changes.
PROTOCOL_VERSION = 1

#: The two bytes that begin every frame, in wire order. Chosen to be rare in token streams: 0xE7
#: is a reserved token lead byte and 0x1A is an event for channel 1 with a 2-bit delta.
SYNC = b"\xE7\x1A"
#: :data:`SYNC` as the little-endian 16-bit value of ``FrameHeader.sync``.
SYNC_WORD = int.from_bytes(SYNC, "little")

#: Largest payload the gateware emits in one frame, in bytes. Hosts accept up to
#: :data:`MAX_PAYLOAD_ACCEPTED` so that a gateware built with larger buffers stays readable.
MAX_PAYLOAD = 1024
MAX_PAYLOAD_ACCEPTED = 4096

#: Every frame ends with CRC-32/ISO-HDLC (the Ethernet/zlib CRC, ``zlib.crc32``) over the frame from
#: the first byte after the sync word to the last payload byte, sent little-endian.
CRC_BYTES = 4

#: Channels the event token can name (3 bits). A design with more channels needs a new version.
NUM_CHANNELS = 8


class FrameType(enum.IntEnum):
    """Kinds of frame. Values 0 and 15 are never used, so a zeroed or all-ones header is invalid."""
    EVENTS    = 1   # device -> host: EventsHeader, then tokens
    HEARTBEAT = 2   # device -> host: Heartbeat
    REPLY     = 3   # device -> host: ReplyHeader, then reply data
    COMMAND   = 4   # host -> device: CommandHeader, then arguments


class FrameHeader(data.Struct):
    """The 6 bytes that start every frame. ``seq`` counts frames of each direction modulo 256;
    the device numbers all frames it sends from one counter, so a gap shows lost frames."""
    sync:    16     # SYNC_WORD
    type:    4      # FrameType
    version: 4      # PROTOCOL_VERSION
    seq:     8
    length:  16     # payload bytes that follow this header, before the CRC


class EventsHeader(data.Struct):
    """First 12 bytes of an EVENTS payload; tokens follow. Each EVENTS frame can be decoded on its
    own: ``base_time`` is the reference for the first token's delta and ``event_index`` lets the
    host count exactly the events held by frames it lost."""
    base_time:   64  # ticks: time of the last event emitted before this frame (0 after reset)
    event_index: 32  # events emitted before this frame since the last timestamp reset, mod 2**32


class HeartbeatStatus(data.Struct):
    armed:            1
    selftest:         1
    overflow_active:  1   # the capture FIFO is dropping events right now
    reserved:         5


class Heartbeat(data.Struct):
    """Payload of a HEARTBEAT frame, sent every ``2**heartbeat_shift`` capture cycles in the same
    order as events, so its ``time`` is a checkpoint of the reconstructed time base."""
    time:            64  # ticks at the heartbeat
    events:          64  # events emitted since the last timestamp reset
    lost:            64  # events dropped by FIFO overflow since the last timestamp reset
    fifo_high_water: 16  # largest FIFO level seen since the last heartbeat, entries
    status:          HeartbeatStatus
    epoch:           8   # timestamp resets since power-on, mod 256


class Opcode(enum.IntEnum):
    """Commands, host -> device, first byte of a COMMAND payload."""
    IDENTIFY   = 0x01  # no arguments; reply data: IdentifyReply then UTF-8 names
    ARM        = 0x02  # u8: 1 arm, 0 disarm
    SET_EDGES  = 0x03  # u16 rising-edge enable mask, u16 falling-edge enable mask (bit k = ch k)
    SET_GLITCH = 0x04  # u8 channel, u8 minimum pulse width in capture cycles (0 = filter off)
    RESET_TIME = 0x05  # no arguments: timestamp counter, event index and lost count to zero
    SELFTEST   = 0x06  # u8 flags (bit0 on, bit1 drive output pin), u16 channel mask,
                       # u16 high ticks, u16 low ticks (both >= 2)
    STATUS     = 0x07  # no arguments; reply data: Heartbeat layout with current values
    SET_NET    = 0x20  # Ethernet boards only: 6-byte MAC, 4-byte IPv4 (both network order),
                       # u16 UDP port; unicast MAC and port != 0, else BAD_ARGUMENT


class Status(enum.IntEnum):
    """Reply status, third byte of a REPLY payload."""
    OK             = 0
    BAD_FRAME      = 1  # a COMMAND frame failed its CRC or had a bad header; opcode/seq = 0
    UNKNOWN_OPCODE = 2
    BAD_LENGTH     = 3  # argument bytes do not match the opcode
    BAD_ARGUMENT   = 4  # e.g. channel out of range, glitch width above the maximum


class CommandHeader(data.Struct):
    opcode: 8


class ReplyHeader(data.Struct):
    command_seq: 8   # FrameHeader.seq of the command answered
    opcode:      8
    status:      8   # Status


class IdentifyReply(data.Struct):
    """Reply data of IDENTIFY; followed by UTF-8 text ``board=<name>;channels=<n0>,<n1>,...``."""
    protocol_version: 8
    gateware_major:   8
    gateware_minor:   8
    lanes:            8    # samples per capture clock (2 with DDR input)
    source_hash:      64   # first 16 hex digits of the gateware source tree's git hash
    capture_hz:       32   # capture clock frequency
    channels:         8
    counter_width:    8    # bits of the capture-cycle counter before it wraps
    max_glitch:       8    # largest SET_GLITCH width accepted, capture cycles
    heartbeat_shift:  8    # heartbeat period is 2**heartbeat_shift capture cycles
    fifo_depth:       32   # capture FIFO entries


# --- Tokens inside EVENTS payloads ---------------------------------------------------------------
# Tokens are self-delimiting in the manner of UTF-8: a continuation byte is 0b10xxxxxx and carries
# six bits; every other byte starts a token. So token boundaries are found without sequential
# parsing (the host decoder vectorises on this), and a token never spans two frames.
#
#   EVENT     0 ccc e ddd  [10 dddddd]{0..3}    channel c, edge e (1 = rising), delta d:
#                                               3 bits in the lead byte, then 6 per continuation,
#                                               least significant first. time = previous + delta.
#   TIME      1100 dddd    [10 dddddd]{1..10}   time += d (4 + 6k bits), no event. Emitted before
#                                               an event whose delta does not fit in 21 bits.
#   OVERFLOW  1101 0000    [10 xxxxxx]{28}      168 bits: Overflow layout. Does not move time.
#   all other lead bytes (1101 0001 .. 1111 1111) are reserved: a frame holding one is a
#   protocol error.

class Token(enum.IntEnum):
    EVENT_MASK = 0x80; EVENT = 0x00
    CONT_MASK = 0xC0; CONT = 0x80
    TIME_MASK = 0xF0; TIME = 0xC0
    OVERFLOW = 0xD0


EVENT_FIRST_BITS = 3
CONT_BITS = 6
EVENT_MAX_CONT = 3          # so an event delta has at most 3 + 3*6 = 21 bits
TIME_FIRST_BITS = 4
TIME_MAX_CONT = 10          # 4 + 60 bits: any 64-bit advance
OVERFLOW_CONT = 28          # 168 bits / 6


class Overflow(data.Struct):
    """Carried by an OVERFLOW token: events were dropped because the capture FIFO was full."""
    lost:       40   # events dropped, exact
    first_time: 64   # ticks: capture cycle of the first dropped event, lane 0
    span:       64   # ticks from first_time to the end of the cycle of the last dropped event


# --- The capture FIFO entry (inside the gateware, capture domain -> link domain) -----------------

class EntryKind(enum.IntEnum):
    EVENTS   = 0   # one or more edges in one capture cycle
    TICK     = 1   # the cycle counter crossed a multiple of 2**heartbeat_shift
    OVERFLOW = 2   # events were dropped; first lost cycle in ``cycle``
    RESET    = 3   # written by the top level after RESET_TIME: the time base restarts at 0


def capture_entry_layout(*, channels, lanes, counter_width):
    """Layout of one capture FIFO entry for a design with the given parameters.

    ``edges`` and ``levels`` are ``lanes * channels`` bits, lane-major: bit ``lane*channels + ch``.
    ``levels`` is the sampled level of each channel at each lane, ``edges`` marks the lanes where
    that level differs from the previous sample (and the edge is enabled). For OVERFLOW entries the
    ``lost`` view replaces them: ``count`` events dropped, ``span`` capture cycles from the first to
    the last dropped one.
    """
    bits = lanes * channels
    return data.StructLayout({
        "kind":  2,
        "cycle": counter_width,
        "payload": data.UnionLayout({
            "edges": data.StructLayout({"edges": bits, "levels": bits}),
            "lost":  data.StructLayout({"count": 40, "span": counter_width}),
        }),
    })
