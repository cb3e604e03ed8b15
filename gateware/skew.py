"""Per-channel input path delays: what nextpnr-ecp5 times, and what its timing database holds for
the paths it does not time (``docs/boards.md``, "Channel-to-channel skew").

At 1.25 ns ticks what moves a channel's timestamps is the delay from its pin to the instant its
input cell samples it: pad -> input buffer (``PAD -> PADDI`` of the programmable I/O cell) ->
dedicated wire -> ``IDDRX2F``/``IDDRX1F`` data input, sampled by the edge clock (``ECLK``) or, at
x1, the capture clock. nextpnr-ecp5 0.11.1 does not time any part of that path:

* ``ecp5/arch.cc`` ``getPortTimingClass``: an ``IOLOGIC``'s ``PADDI`` input (where the packer puts
  the ``IDDRX*F`` ``D`` input, ``ecp5/pack.cc`` ``pack_iologic``: ``movePortTo(id_D, iol,
  id_PADDI)``) is ``TMG_IGNORE``, so the pad's net has no timed sink;
* ``getCellDelay`` has no arcs for ``TRELLIS_IO`` or ``IOLOGIC`` cells, and ``getPortClockingInfo``
  gives every ``IOLOGIC`` port the clock ``CLK`` with fixed numbers (0.5 ns clock-to-out, 0.1 ns
  setup, 0 hold): the ``ECLK`` that samples an ``IDDRX2F`` is never a timing reference, so its
  arrival at each I/O logic is not analysed either.

nextpnr's chip database does carry the cell numbers (``ecp5/trellis_import.py`` imports every cell
of prjtrellis-db ``ECP5/timing/speed_*/cells.json``), per I/O type and cell mode, not per site:
:data:`PAD_TO_PADDI_PS` and :data:`SAMPLE_SETUP_HOLD_PS` below. They are the same for every channel
(all channels share one I/O type and cell mode), so nextpnr's model holds **no** per-channel
difference on the pin-to-sample path. :func:`channel_paths` checks that from the report of each
build (no timed net from a channel's pad) and reports, per channel, the database's pad-to-input-cell
delay, the sampling cell's setup/hold and what the report does list: the delays from the I/O
logic's outputs (``RXDATA0..3``, one per lane) to the first fabric flip-flop. Those include the
capture clock's arrival at that I/O logic (nextpnr adds the clock route delay to a register's launch
time), nextpnr's fixed 0.5 ns clock-to-out and the route; they are paths of the capture domain,
checked against its period, and do not move a timestamp. What is outside the model (board traces,
silicon differences between pads) the self-test calibration measures
(``capture/link/calibration.py``).
"""

import re

__all__ = ["PAD_TO_PADDI_PS", "SAMPLE_SETUP_HOLD_PS", "channel_paths", "pin_to_sample_skew_ps"]

#: ``PIO`` ``PAD -> PADDI`` (input buffer) delay, ps, ``(min, typ, max)``, per speed grade and I/O
#: type, from prjtrellis-db ``ECP5/timing/speed_8_5G/cells.json`` (commit 4dda149, the database
#: nextpnr-ecp5's chip database is generated from), entry ``PIO:IOTYPE=LVCMOS33``. Rising and
#: falling are equal there.
PAD_TO_PADDI_PS = {("8_5G", "LVCMOS33"): (921, 945, 970)}

#: Setup and hold of the input cell's data (``DI``) against its sampling clock, ps, and that clock,
#: per speed grade and cell mode (same file: ``IOLOGIC:MODE=IDDRX2F``, ``IOLOGIC:MODE=IDDRX1F``).
SAMPLE_SETUP_HOLD_PS = {("8_5G", "IDDRX2F"): (236, 81, "ECLK"),
                        ("8_5G", "IDDRX1F"): (254, 164, "CLK")}

_IOL = re.compile(r"^(?P<buf>.*?buf)(?P<bit>\d+)\$IOL$")


def channel_paths(report, *, cell_prefix="ch_", speed=None, io_type=None, cell_mode=None):
    """Per channel (by the bit of the channel buffer): what nextpnr times and what it does not.

    Parameters
    ----------
    report : dict
        nextpnr's ``--report`` JSON made with ``--detailed-timing-report``.
    cell_prefix : str
        Prefix of the channel input cells (``ch_x2`` for the 2:1 build, ``ch_ddr`` for x1).
    speed, io_type, cell_mode : str, optional
        Speed-grade key (``"8_5G"``), I/O type (``"LVCMOS33"``) and input cell (``"IDDRX2F"``)
        to look the untimed pad path up in :data:`PAD_TO_PADDI_PS` / :data:`SAMPLE_SETUP_HOLD_PS`.

    Returns
    -------
    dict
        ``{channel: {...}}``, empty when the report has no detailed net timings. Keys per channel:
        ``lane_ns`` (I/O-logic output to fabric flip-flop per lane, from the report, ns),
        ``max_ns``; ``pad_timed`` (whether the report times any net from the channel's pad or
        into its I/O logic's ``PADDI``: false on every build so far); ``pad_ns`` (the database's
        ``PAD -> PADDI`` ``[min, typ, max]``, ns, or None if not tabulated); ``sample_setup_ns``,
        ``sample_hold_ns``, ``sample_clock`` (the input cell's, from the database, or None).
    """
    nets = report.get("detailed_net_timings") or []
    out = {}
    for net in nets:
        m = _IOL.match(net.get("driver", ""))
        port = net.get("port", "")
        if not m or not net["driver"].startswith(cell_prefix) or not port.startswith("RXDATA"):
            continue
        ch = int(m.group("bit"))
        lane = int(port[len("RXDATA"):])
        delay = max(max(e["delay"]) for e in net["endpoints"]) if net["endpoints"] else 0.0
        entry = out.setdefault(ch, {"lane_ns": {}, "pad": m.group("buf") + m.group("bit")})
        entry["lane_ns"][lane] = round(float(delay), 3)
    pad_ps = PAD_TO_PADDI_PS.get((speed, io_type))
    sample = SAMPLE_SETUP_HOLD_PS.get((speed, cell_mode))
    for entry in out.values():
        lanes = entry["lane_ns"]
        entry["lane_ns"] = [lanes.get(j) for j in range(max(lanes) + 1)]
        entry["max_ns"] = max(v for v in entry["lane_ns"] if v is not None)
        pad = entry.pop("pad")                       # the TRELLIS_IO cell; its I/O logic:
        iol = pad + "$IOL"
        entry["pad_timed"] = any(
            n.get("driver") == pad
            or any(e.get("cell") == iol and e.get("port") == "PADDI" for e in n["endpoints"])
            for n in nets)
        entry["pad_ns"] = None if pad_ps is None else [v / 1000 for v in pad_ps]
        entry["sample_setup_ns"] = None if sample is None else sample[0] / 1000
        entry["sample_hold_ns"] = None if sample is None else sample[1] / 1000
        entry["sample_clock"] = None if sample is None else sample[2]
    return dict(sorted(out.items()))


def pin_to_sample_skew_ps(paths):
    """Worst channel-to-channel difference of the pin-to-sample delay in nextpnr's model, ps.

    That model has one term per channel, the database's typical ``PAD -> PADDI`` delay (the
    dedicated wire, the input cell and the edge-clock arrival are not timed); returns None when a
    channel lacks it or when some channel's pad path *is* timed (then the report, not this
    function, holds the answer).
    """
    if not paths or any(p["pad_ns"] is None or p["pad_timed"] for p in paths.values()):
        return None
    typ = [p["pad_ns"][1] for p in paths.values()]
    return round((max(typ) - min(typ)) * 1000)
