"""Per-channel input path delays from nextpnr's detailed timing report (``--report`` with
``--detailed-timing-report``), for ``docs/boards.md`` ("Channel-to-channel skew").

At 1.25 ns ticks what moves a channel's timestamps is the delay from its pin to the instant its
input cell samples it. On ECP5 the pad reaches the ``IDDRX1F``/``IDDRX2F`` in the I/O logic through
a dedicated wire of the programmable I/O cell, and the edge/capture clock through dedicated clock
trees: nextpnr-ecp5 lists neither in its net timings, so its model gives every channel the same
pad-to-sample delay (0 ps of skew from the FPGA's modelled paths). The per-channel delays it does
report are from the I/O logic's outputs (``RXDATA0..3``, one per lane) to the first fabric flip-flop
(the synchroniser): those are paths of the capture clock domain, checked against its period by the
timing analysis, and do not move a timestamp. The remaining skew (board traces, input buffers,
wire lengths) is outside nextpnr's model: the self-test calibration measures it
(``capture/calibration.py``).
"""

import re

__all__ = ["channel_paths"]

_IOL = re.compile(r"^(?P<buf>.*?buf)(?P<bit>\d+)\$IOL$")


def channel_paths(report, *, cell_prefix="ch_"):
    """Per channel (by the bit of the channel buffer): the I/O-logic-to-fabric delays per lane.

    Parameters
    ----------
    report : dict
        nextpnr's ``--report`` JSON made with ``--detailed-timing-report``.
    cell_prefix : str
        Prefix of the channel input cells (``ch_x2`` for the 2:1 build, ``ch_ddr`` for x1).

    Returns
    -------
    dict
        ``{channel: {"lane_ns": [max delay per output port, ns], "max_ns": ..., "pad_ns":
        None}}`` (``pad_ns`` is None: the pad-to-input-cell wire is not in the report), empty
        when the report has no detailed net timings.
    """
    out = {}
    for net in report.get("detailed_net_timings") or []:
        m = _IOL.match(net.get("driver", ""))
        port = net.get("port", "")
        if not m or not net["driver"].startswith(cell_prefix) or not port.startswith("RXDATA"):
            continue
        ch = int(m.group("bit"))
        lane = int(port[len("RXDATA"):])
        delay = max(max(e["delay"]) for e in net["endpoints"]) if net["endpoints"] else 0.0
        entry = out.setdefault(ch, {"lane_ns": {}, "pad_ns": None})
        entry["lane_ns"][lane] = round(float(delay), 3)
    for entry in out.values():
        lanes = entry["lane_ns"]
        entry["lane_ns"] = [lanes.get(j) for j in range(max(lanes) + 1)]
        entry["max_ns"] = max(v for v in entry["lane_ns"] if v is not None)
    return dict(sorted(out.items()))
