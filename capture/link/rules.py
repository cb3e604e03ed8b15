"""Frame classes from the capture config: the ``[frames]`` table, its rule tables and the commands
that load them into the instrument (opcodes 0x10..0x13, ``gateware/classify.py``).

The TOML (``docs/capture-format.md`` §"Frame classes" is the user's reference)::

    [frames]
    classes = ["other", "hp", "bg"]   # class 0, 1, 2 ...: class 0 takes frames no rule matches
    record = ["hp"]                   # recorded frame by frame; the others are counted only
    counter_period = 20               # COUNTERS records every 2**20 link cycles (0: never)
    seq_offset = 4                    # sequence number's byte offset in the UDP payload

    [[frames.rx]]                     # receive rules, first match wins (up to the design's count)
    class = "hp"
    dst_port = [5000, 5009]           # a UDP port or an inclusive range; or src_port / port
    [[frames.rx]]
    class = "bg"
    ethertype = 0x0800                # also: pcp = 0..7, ip_proto = 0..255

    [[frames.tx]]                     # transmit rules, same keys
    class = "hp"
    src_port = [5000, 5009]

A rule's conditions all have to hold; ``port`` matches either UDP port. The class names are stored
in the capture's metadata (``frames.classes``) so the analysis prints ``hp`` and ``bg``, not
numbers. Every mistake is one :class:`~latscope.LatscopeError` line naming the key.
"""

import dataclasses

from latscope import LatscopeError
from latscope.capture.files.metadata import class_names
from latscope.gateware.codec import rule_command
from latscope.gateware.protocol import NUM_CLASSES, TRAFFIC_SEQ_OFFSET, Opcode

__all__ = ["FrameRules", "rules_from_dict", "DEFAULT_COUNTER_PERIOD", "class_names",
           "frames_toml"]

#: COUNTERS every 2**20 link cycles (~22 ms at the ECPIX-5's 48 MHz link clock) unless the config
#: says otherwise: often enough that a rate is visible, rare enough to cost nothing on the UART.
DEFAULT_COUNTER_PERIOD = 20
#: Rules per direction the shipped frame-capture build holds (``FrameClassifier(rules=4)``).
DEFAULT_RULES = 4
_RULE_KEYS = ("class", "ethertype", "pcp", "ip_proto", "port", "src_port", "dst_port")


@dataclasses.dataclass
class FrameRules:
    """A parsed ``[frames]`` table. ``rules`` maps direction (0 RX, 1 TX) to a list of
    ``ClassRule`` field dicts, in priority order."""
    classes: list
    record: set
    rules: dict
    counter_period: int = DEFAULT_COUNTER_PERIOD
    seq_offset: int = TRAFFIC_SEQ_OFFSET

    def commands(self):
        """``(opcode, args)`` pairs that load this table into the instrument: every rule of both
        directions, disabled ones clearing the rest of the table, the record masks, the
        sequence-number offset and the counter period."""
        out = []
        for direction in (0, 1):
            rules = self.rules.get(direction, [])
            for index in range(max(DEFAULT_RULES, len(rules))):
                rule = rules[index] if index < len(rules) else {"enable": 0}
                out.append(rule_command(direction, index, **rule))
            out.append((Opcode.SET_CLASS_MODE, bytes([direction, self.record_mask])))
        out.append((Opcode.SET_SEQ_OFFSET, self.seq_offset.to_bytes(2, "little")))
        out.append((Opcode.SET_COUNTER_PERIOD, bytes([self.counter_period])))
        return out

    @property
    def record_mask(self):
        return sum(1 << self.classes.index(name) for name in self.record)

    def metadata(self):
        """JSON-ready description for the capture's metadata (``frames`` table)."""
        return {"classes": {str(i): name for i, name in enumerate(self.classes)},
                "record": sorted(self.record, key=self.classes.index),
                "rules": {name: list(self.rules.get(d, [])) for d, name in ((0, "rx"), (1, "tx"))},
                "counter_period": self.counter_period, "seq_offset": self.seq_offset}


def _int(value, lo, hi, where):
    if isinstance(value, bool) or not isinstance(value, int) or not lo <= value <= hi:
        raise LatscopeError(f"{where} must be an integer {lo}..{hi}, not {value!r}")
    return value


def _port_range(value, where):
    if isinstance(value, list):
        if len(value) != 2:
            raise LatscopeError(f"{where} must be a port or a [low, high] range, not {value!r}")
        lo, hi = (_int(v, 0, 65535, where) for v in value)
        if lo > hi:
            raise LatscopeError(f"{where}: range [{lo}, {hi}] is empty (low above high)")
        return lo, hi
    port = _int(value, 0, 65535, where)
    return port, port


def _rule(table, classes, where):
    if not isinstance(table, dict):
        raise LatscopeError(f"{where} must be a table of conditions and a class")
    unknown = sorted(set(table) - set(_RULE_KEYS))
    if unknown:
        raise LatscopeError(f"{where}: unknown key {unknown[0]!r}; a rule has "
                            f"{', '.join(_RULE_KEYS)}")
    if "class" not in table:
        raise LatscopeError(f"{where}: missing class (one of {', '.join(classes)})")
    name = table["class"]
    if name not in classes:
        raise LatscopeError(f"{where}: class {name!r} is not in [frames] classes "
                            f"({', '.join(classes)})")
    rule = {"enable": 1, "cls": classes.index(name)}
    if "ethertype" in table:
        rule.update(match_ethertype=1,
                    ethertype=_int(table["ethertype"], 0, 0xFFFF, f"{where}: ethertype"))
    if "pcp" in table:
        rule.update(match_pcp=1, pcp=_int(table["pcp"], 0, 7, f"{where}: pcp"))
    if "ip_proto" in table:
        rule.update(match_ip_proto=1, ip_proto=_int(table["ip_proto"], 0, 255,
                                                    f"{where}: ip_proto"))
    ports = [k for k in ("port", "src_port", "dst_port") if k in table]
    if ports:
        ranges = {_port_range(table[k], f"{where}: {k}") for k in ports}
        if len(ranges) > 1:
            raise LatscopeError(f"{where}: one port range per rule (the gateware compares one); "
                                f"give the same range or use two rules")
        lo, hi = ranges.pop()
        rule.update(match_port=1, port_lo=lo, port_hi=hi,
                    port_src=int("port" in ports or "src_port" in ports),
                    port_dst=int("port" in ports or "dst_port" in ports))
    return rule


def rules_from_dict(table, where="config", *, max_rules=DEFAULT_RULES):
    """Parse a capture config's ``[frames]`` table into :class:`FrameRules`.

    >>> r = rules_from_dict({"classes": ["other", "hp"], "record": ["hp"],
    ...                      "rx": [{"class": "hp", "dst_port": [5000, 5009]}]})
    >>> r.rules[0][0]["port_lo"], r.rules[0][0]["port_dst"], r.record_mask
    (5000, 1, 2)
    """
    where = f"{where}: [frames]"
    if not isinstance(table, dict):
        raise LatscopeError(f"{where} must be a table")
    table = dict(table)
    classes = table.pop("classes", ["other"])
    if (not isinstance(classes, list) or not classes
            or not all(isinstance(c, str) and c for c in classes)):
        raise LatscopeError(f"{where}: classes must be a list of names, class 0 first")
    if len(classes) > NUM_CLASSES:
        raise LatscopeError(f"{where}: {len(classes)} classes; the gateware has {NUM_CLASSES}")
    if len(set(classes)) != len(classes):
        raise LatscopeError(f"{where}: classes names a class twice")
    record = table.pop("record", list(classes))
    if not isinstance(record, list) or any(r not in classes for r in record):
        raise LatscopeError(f"{where}: record must list class names from classes "
                            f"({', '.join(classes)}), not {record!r}")
    period = _int(table.pop("counter_period", DEFAULT_COUNTER_PERIOD), 0, 40,
                  f"{where}: counter_period")
    offset = _int(table.pop("seq_offset", TRAFFIC_SEQ_OFFSET), 0, 1468, f"{where}: seq_offset")
    rules = {}
    for direction, key in ((0, "rx"), (1, "tx")):
        entries = table.pop(key, [])
        if not isinstance(entries, list):
            raise LatscopeError(f"{where}: {key} must be an array of tables ([[frames.{key}]])")
        if len(entries) > max_rules:
            raise LatscopeError(f"{where}: {len(entries)} {key} rules; the instrument holds "
                                f"{max_rules} per direction")
        rules[direction] = [_rule(e, classes, f"{where} {key} rule {i + 1}")
                            for i, e in enumerate(entries)]
    if table:
        raise LatscopeError(f"{where}: unknown key {sorted(table)[0]!r}; [frames] has classes, "
                            f"record, counter_period, seq_offset, rx, tx")
    return FrameRules(classes, set(record), rules, period, offset)


def _toml_value(value):
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, str):
        return '"' + value.replace("\\", "\\\\").replace('"', '\\"') + '"'
    if isinstance(value, list):
        return "[" + ", ".join(_toml_value(v) for v in value) + "]"
    raise LatscopeError(f"[frames]: {value!r} is not a string, integer or list")


def frames_toml(table, where="experiment"):
    """Capture-config TOML text of a ``[frames]`` table given as parsed TOML (for ``latscope
    run``, which passes an experiment's ``[frames]`` to every capture). Checked first.

    >>> print(frames_toml({"classes": ["other", "hp"], "rx": [{"class": "hp", "port": 7}]}))
    [frames]
    classes = ["other", "hp"]
    <BLANKLINE>
    [[frames.rx]]
    class = "hp"
    port = 7
    <BLANKLINE>
    """
    rules_from_dict(table, where)
    lines = ["[frames]"]
    lines += [f"{k} = {_toml_value(v)}" for k, v in table.items() if k not in ("rx", "tx")]
    for key in ("rx", "tx"):
        for rule in table.get(key, []):
            lines += ["", f"[[frames.{key}]]"]
            lines += [f"{k} = {_toml_value(v)}" for k, v in rule.items()]
    return "\n".join(lines) + "\n"
