"""The latscope wire protocol: the one definition of every byte between the gateware and the host.

Everything the instrument sends or accepts is defined here as Amaranth ``data.Struct`` layouts
and constants. The gateware builds its records from these layouts; the host's view of them (NumPy
dtypes, command encoding, reply and record parsing) is derived from them in
:mod:`latscope.gateware.codec`; ``docs/stream-format.md`` is the prose specification, and
``gateware/tests/test_protocol.py`` and ``test_codec.py`` tie the three together.

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
    "FrameType", "FrameHeader", "EventsHeader", "Heartbeat", "HeartbeatStatus", "EthSpeed",
    "Opcode", "Status", "CommandHeader", "ReplyHeader", "IdentifyReply",
    "Token", "EVENT_FIRST_BITS", "CONT_BITS", "EVENT_MAX_CONT", "TIME_FIRST_BITS",
    "TIME_MAX_CONT", "OVERFLOW_CONT", "Overflow", "DELAY_TAPS", "DELAY_TAP_PS",
    "EntryKind", "capture_entry_layout", "NUM_CHANNELS",
    "FrameFlags", "FrameRecord", "CounterRecord", "ClassRule", "Direction", "NUM_CLASSES",
    "TRAFFIC_MAGIC", "TRAFFIC_HEADER_BYTES", "TRAFFIC_SEQ_OFFSET", "RUNT_BYTES", "OVERSIZE_BYTES",
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

#: Settings of a channel's input delay line (SET_DELAY): the ECP5 ``DELAYF``'s 7-bit tap counter.
DELAY_TAPS = 128
#: Nominal delay of one ``DELAYF`` tap, ps: Lattice's simulation model of the cell (``delta =
#: 0.025`` ns per step of its 7-bit counter). The silicon's step varies with process, voltage and
#: temperature, so the host measures it (``latscope selftest --calibrate --sub-tick``).
DELAY_TAP_PS = 25


class FrameType(enum.IntEnum):
    """Kinds of frame. Values 0 and 15 are never used, so a zeroed or all-ones header is invalid."""
    EVENTS    = 1   # device -> host: EventsHeader, then tokens
    HEARTBEAT = 2   # device -> host: Heartbeat
    REPLY     = 3   # device -> host: ReplyHeader, then reply data
    COMMAND   = 4   # host -> device: CommandHeader, then arguments
    FRAME     = 5   # device -> host: one FrameRecord, then the frame's first captured bytes
    COUNTERS  = 6   # device -> host: one CounterRecord


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
    eth_present:      1   # the gateware has the Gigabit Ethernet link: the next fields report it
    eth_link:         1   # its PHY reports a link (RGMII in-band status; 0 while no receive clock)
    eth_speed:        2   # EthSpeed of that link
    eth_full_duplex:  1   # the link is full duplex


class EthSpeed(enum.IntEnum):
    """``HeartbeatStatus.eth_speed``: the RGMII in-band status's speed code. The link carries
    datagrams only at 1000 Mb/s (full duplex); the host refuses the others."""
    MBPS_10   = 0
    MBPS_100  = 1
    MBPS_1000 = 2


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
                       # u16 high ticks, u16 low ticks (both >= 2 and >= lanes)
    STATUS     = 0x07  # no arguments; reply data: Heartbeat layout with current values
    SET_DELAY  = 0x08  # u8 channel, u8 taps (0..DELAY_TAPS-1): the channel's input delay line;
                       # builds with input delay lines only (ECP5 DELAYF), else UNKNOWN_OPCODE
    # frame-aware capture (gateware/sniffer.py); a design without sniffers answers UNKNOWN_OPCODE
    SET_RULE           = 0x10  # u8 direction << 7 | rule index, then ClassRule (9 bytes)
    SET_CLASS_MODE     = 0x11  # u8 direction, u8 record mask (bit c set: record every frame of
                               # class c; clear: count it only)
    SET_SEQ_OFFSET     = 0x12  # u16 byte offset of the big-endian u32 sequence number in the UDP
                               # payload (default TRAFFIC_SEQ_OFFSET)
    SET_COUNTER_PERIOD = 0x13  # u8 shift: COUNTERS records every 2**shift link cycles (0 = off)
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
    lanes:            8    # samples per capture clock (2 with DDR input, 4 with 2:1 gearing)
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


# --- Frame-aware capture: FRAME and COUNTERS records (gateware/sniffer.py) ----------------------

#: The default test payload, at the start of every UDP payload `latscope traffic` sends and the DUT
#: echoes unchanged (``capture/traffic.py``; ``zephyr-app/lib/latscope_core/include/latscope_core/
#: traffic.h``), big-endian: u16 magic, u16 run id, u32 sequence number, u64 intended send time.
#: The sniffers read the sequence number at ``TRAFFIC_SEQ_OFFSET`` unless SET_SEQ_OFFSET moves it.
TRAFFIC_MAGIC = 0x4C54
TRAFFIC_HEADER_BYTES = 16
TRAFFIC_SEQ_OFFSET = 4

#: Classes a rule can assign (3 bits). Class 0 is where frames no enabled rule matches go.
NUM_CLASSES = 8
#: Frames shorter than this (destination MAC through FCS) are runts (IEEE 802.3 minimum frame).
RUNT_BYTES = 64
#: Frames longer than this are oversize (1518 plus one 802.1Q tag).
OVERSIZE_BYTES = 1522


class Direction(enum.IntEnum):
    RX = 0   # the DUT receives: the wire into the DUT's PHY (RX_DV / CRS_DV)
    TX = 1   # the DUT transmits (TX_EN)


class FrameFlags(data.Struct):
    """What the sniffer found in one frame. Parsed fields of the record are zero where the flag
    that introduces them is clear."""
    fcs_ok:     1   # the last 4 bytes are the CRC-32 of the rest (IEEE 802.3 clause 3.2.9)
    rx_er:      1   # RX_ER was high during the frame (MII only; never on TX)
    runt:       1   # fewer than RUNT_BYTES bytes
    oversize:   1   # more than OVERSIZE_BYTES bytes (counting stops at 65,535)
    vlan:       1   # one 802.1Q tag (TPID 0x8100): vid, dei, pcp valid
    ipv4:       1   # EtherType 0x0800 and version 4: ip_proto, src_ip, dst_ip valid
    ipv6:       1   # EtherType 0x86DD and version 6: ip_proto = next header
    ip_csum_ok: 1   # IPv4 header checksum verifies (RFC 1071)
    udp:        1   # ip_proto 17 and the 8-byte UDP header present: ports valid
    seq_valid:  1   # the UDP payload holds the 4 sequence-number bytes: seq valid
    odd_nibble: 1   # the frame ended on half a byte (MII) or a partial byte (RMII): dribble
    traffic_magic: 1  # udp and the UDP payload begins with TRAFFIC_MAGIC (big-endian), whatever
                      # the sequence offset: latscope's own traffic, the frames pairing may use
    reserved:   4


class FrameRecord(data.Struct):
    """Payload of a FRAME frame: one frame seen on one direction's data pins, followed by the
    frame's first bytes from the destination MAC on if the design keeps header bytes (all the
    FRAME payload holds after these 30 bytes; zero past ``length``). ``frame_index`` counts the
    frames of this direction since the last timestamp reset (every frame, recorded or counted):
    frame ``k`` is the ``k``-th rising edge of the direction's RX_DV / CRS_DV / TX_EN channel
    since that reset, counting from 0, so a record finds its start and end edges, and their
    timestamps, by index."""
    frame_index: 32
    length:      16  # bytes from the destination MAC through the FCS (no preamble, no SFD)
    flags:       FrameFlags
    direction:   1   # Direction
    cls:         3   # class from the direction's rule table
    reserved:    4
    ip_proto:    8   # IPv4 protocol or IPv6 next header
    ethertype:   16  # after the VLAN tag if there is one
    vid:         12  # 802.1Q tag control information, as on the wire
    dei:         1
    pcp:         3
    src_port:    16
    dst_port:    16
    seq:         32  # big-endian u32 at the sequence offset of the UDP payload
    src_ip:      32  # IPv4 addresses as numbers (192.0.2.1 = 0xC0000201)
    dst_ip:      32


class CounterRecord(data.Struct):
    """Payload of a COUNTERS frame: running totals of one class of one direction since the last
    timestamp reset, every frame of the class counted whether recorded or not. Totals, not
    increments, so a lost COUNTERS frame loses nothing. ``frames_seen`` is the direction's frame
    index at the moment of the snapshot: the totals include exactly the frames with a lower index,
    which places the record among the FRAME records."""
    direction:   1
    cls:         3
    reserved:    12
    frames_seen: 32  # frames of this direction (all classes) so far, mod 2**32
    frames:      32  # frames of this class, mod 2**32
    fcs_errors:  32  # of which with a bad FCS or RX_ER, mod 2**32
    dropped:     32  # of which to be recorded but not sent: the record queue was full, mod 2**32
    octets:      48  # their bytes (destination MAC through FCS), mod 2**48


class ClassRule(data.Struct):
    """Argument of SET_RULE: one entry of a direction's rule table. The first enabled rule (lowest
    index) whose selected conditions all hold assigns its class; a frame no rule takes gets class
    0. The port condition holds if a selected port (``port_dst``, ``port_src``) of a UDP frame lies
    in ``port_lo..port_hi`` inclusive; the others compare the frame's field with the rule's."""
    enable:          1
    cls:             3
    match_ethertype: 1
    match_pcp:       1   # frames without a tag have PCP 0
    match_ip_proto:  1
    match_port:      1
    ethertype:       16
    pcp:             3
    port_dst:        1
    port_src:        1
    reserved:        3
    ip_proto:        8
    port_lo:         16
    port_hi:         16
