"""``latscope info``: describe a capture file."""

import json

from latscope.capture.files.info import info_dict
from latscope.capture.files.provenance import describe


def add_arguments(p):
    p.description = ("Print a capture file's metadata, event count, duration and losses.")
    p.add_argument("file", metavar="FILE")
    p.add_argument("--json", action="store_true", help="machine-readable output")


def run(args):
    info = info_dict(args.file)
    if args.json:
        print(json.dumps(info, sort_keys=True, default=str))
        return 0
    meta = info["metadata"]
    instrument = meta.get("instrument") or {}
    lines = [
        f"file        {info['path']} (format {info['format']})",
        f"instrument  {instrument.get('board', '?')}, tick {1e9 / info['tick_hz']:.3f} ns "
        f"({info['tick_hz'] / 1e6:g} MHz), protocol {instrument.get('protocol_version', '?')}",
        f"label       {meta.get('label') or '-'}   DUT {meta.get('dut') or '-'}   "
        f"scenario {meta.get('scenario') or '-'}",
        f"started     {meta.get('start_time', '?')}",
        f"data        {describe(info['provenance'])}",
        "channels    " + (", ".join(f"{k}={v}" for k, v in info["channels"].items()) or "-"),
        "markers     " + (", ".join(f"{k}={v}" for k, v in info["markers"].items()) or "-"),
        f"events      {info['events']} over {info['duration_s']:.6f} s",
        f"lost        overflow {info['lost']['overflow']}, link {info['lost']['link']} "
        f"in {info['losses']} records",
        f"stopped     {info['stop_reason'] or 'not finalised (killed or crashed)'}",
    ]
    frames = info["frames"]
    if frames:
        label = frames["labels"]
        lines.append(f"frames      {frames['records']} recorded ("
                     + (", ".join(f"{label[k]}: {v}" for k, v in frames["by_class"].items())
                        or "-") + ")")
        if frames["counted"]:
            lines.append("  counted on the FPGA (every frame of the class, recorded or not):")
        for key, c in frames["counted"].items():
            lines.append(f"  {label[key]:<24} {c['frames']} frames, {c['octets']} bytes, "
                         f"{c['fcs_errors']} FCS errors, {c['dropped']} not recorded (link busy)")
    if info["metadata_from"] != "META":
        lines.append(f"metadata    read from its copy in the {info['metadata_from']} chunk (META "
                     f"is damaged; latscope repair writes a clean file)")
    if info["problems"]:
        lines.append("damage      " + "; ".join(info["problems"]) +
                     " (run latscope verify)")
    print("\n".join(lines))
    return 0
