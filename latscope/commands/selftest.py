"""``latscope selftest``: check and calibrate the instrument with its internal pattern, no
device under test needed (:mod:`latscope.capture.selftest`)."""

import json
import sys

from latscope import LatscopeError
from latscope.capture.link.transport import DEFAULT_BAUD
from latscope.capture.selftest import DEFAULT_EDGES, DEFAULT_HIGH, DEFAULT_LOW, calibrate, selftest
from latscope.gateware import protocol

EPILOG = """\
exit status: 0 pass; 1 fail (the table says which channel and why); 2 error (bad option, port,
incompatible instrument). Times are in ticks of the instrument (1 / (capture_hz * lanes): 1.25 ns
on the ECPIX-5, 3.125 ns on its x1 build, 10.417 ns on the iCEBreaker). On 4-lane instruments
--high and --low must be at least 4 ticks. Documentation: docs/selftest.md."""


def channel_list(text):
    """``0-3,5`` to ``[0, 1, 2, 3, 5]`` (checked against the instrument's channel count)."""
    out = set()
    for part in text.split(","):
        part = part.strip()
        lo, sep, hi = part.partition("-")
        try:
            values = range(int(lo), int(hi) + 1) if sep else [int(lo)]
        except ValueError:
            raise LatscopeError(f"--channels takes numbers and ranges such as 0-3,5, not "
                                f"{text!r}") from None
        for v in values:
            if not 0 <= v < protocol.NUM_CHANNELS:
                raise LatscopeError(f"--channels: channel {v} is outside "
                                    f"0..{protocol.NUM_CHANNELS - 1}")
            out.add(v)
    if not out:
        raise LatscopeError("--channels names no channel")
    return sorted(out)


def add_arguments(p):
    p.description = ("Run the instrument's self-test pattern generator (high TICKS, low TICKS, "
                     "repeating) on the selected channels and check that every channel saw only "
                     "the pattern's edges, exactly spaced, all channels at the same tick, with "
                     "nothing lost. With --loopback, also drive the self-test output pin and "
                     "measure the pattern coming back through a cable: pin-to-pin delay, "
                     "high/low durations and the DDR lane order.")
    p.epilog = EPILOG
    src = p.add_mutually_exclusive_group(required=True)
    src.add_argument("--port", metavar="DEVICE",
                     help="serial device of the instrument, e.g. /dev/ttyUSB1, or "
                          "udp://HOST[:PORT] for the ECPIX-5's Ethernet link")
    src.add_argument("--sim", action="store_true",
                     help="the simulated instrument: the real gateware compiled by Verilator, "
                          "with idle pins (no DUT traffic) and no loop-back cable; with "
                          "--calibrate --sub-tick the delay-line bench instead (the gateware's "
                          "command and link models with DELAYF and sampling timing models, "
                          "docs/selftest.md)")
    p.add_argument("--sim-engine", choices=("auto", "verilator"), default="auto",
                   help="simulator for --sim (default auto = verilator; the reference-model "
                        "engine does not model the self-test generator)")
    p.add_argument("--baud", type=int, default=DEFAULT_BAUD,
                   help="serial rate in bit/s (default 12000000; ignored by ptys)")
    p.add_argument("--channels", default=None, metavar="LIST",
                   help="channels that take the internal pattern, e.g. 0-3,6 (default: all; "
                        "with --loopback, all but the loop-back channel)")
    p.add_argument("--high", type=int, default=DEFAULT_HIGH, metavar="TICKS",
                   help=f"pattern high time in ticks, 2..65535 (default {DEFAULT_HIGH})")
    p.add_argument("--low", type=int, default=DEFAULT_LOW, metavar="TICKS",
                   help=f"pattern low time in ticks, 2..65535 (default {DEFAULT_LOW}); keep at "
                        "least one of --high/--low odd so edges fall on both DDR lanes")
    limit = p.add_mutually_exclusive_group()
    limit.add_argument("--edges", type=int, metavar="N",
                       help=f"check N edges per channel (default {DEFAULT_EDGES})")
    limit.add_argument("--duration", type=float, metavar="S",
                       help="run for S seconds of host wall time instead")
    p.add_argument("--timeout", type=float, default=30.0, metavar="S",
                   help="give up waiting for --edges after S seconds (default 30)")
    p.add_argument("--loopback", type=int, metavar="CHANNEL",
                   help="drive the self-test output pin and measure it on CHANNEL, wired to it "
                        "by a short cable (docs/selftest.md)")
    p.add_argument("--reference", type=int, metavar="CHANNEL",
                   help="channel whose internal pattern the loop-back delay is measured against "
                        "(default: the lowest pattern channel)")
    p.add_argument("--calibrate", metavar="FILE",
                   help="measure per-channel timing offsets with the self-test output pin wired "
                        "to every --channels input at once (equal-length fan-out cable) and write "
                        "them to FILE for `latscope capture --calibration FILE`")
    p.add_argument("--sim-skew", metavar="TICKS,...",
                   help="with --sim --calibrate: the simulated fan-out cable's extra delay per "
                        "channel of --channels, in ticks (0..1000, default all 0), to emulate "
                        "channel skew")
    p.add_argument("--sub-tick", action="store_true",
                   help="with --calibrate: first align the channels below one tick with the input "
                        "delay lines (the default ecpix5 build; 128 taps of ~25 ps, "
                        "measured against the tick) and report each channel's skew before and "
                        "after in ps; the file holds the settings, which `latscope capture "
                        "--calibration` sets again")
    p.add_argument("--sim-skew-ps", metavar="PS,...",
                   help="with --sim --calibrate --sub-tick: the simulated fan-out cable's delay "
                        "per channel of --channels, in ps (0..100000, default all 0)")
    p.add_argument("--sim-tap-ps", type=float, default=protocol.DELAY_TAP_PS, metavar="PS",
                   help="with --sim --calibrate --sub-tick: the simulated delay cells' step, ps "
                        f"(5..60, default {protocol.DELAY_TAP_PS}, Lattice's model; the "
                        "calibration measures it)")
    p.add_argument("--force", action="store_true",
                   help="with --calibrate: replace an existing calibration file")
    p.add_argument("--json", action="store_true", help="print the result as JSON on stdout")


def _plan(args):
    """Validated (pattern channels, loop-back channel, reference) from the options."""
    for name in ("high", "low"):
        value = getattr(args, name)
        if not 2 <= value <= 0xFFFF:
            raise LatscopeError(f"--{name} must be 2..65535 ticks, not {value}")
    if args.high % 2 == 0 and args.low % 2 == 0:
        print("latscope selftest: warning: --high and --low are both even, so every edge falls "
              "on one DDR lane and a lane swap would not show", file=sys.stderr)
    if args.edges is not None and args.edges < 4:
        raise LatscopeError(f"--edges must be at least 4, not {args.edges}")
    if args.duration is not None and not args.duration > 0:
        raise LatscopeError(f"--duration must be positive, not {args.duration}")
    loop = args.loopback
    if loop is not None and not 0 <= loop < protocol.NUM_CHANNELS:
        raise LatscopeError(f"--loopback: channel {loop} is outside 0..{protocol.NUM_CHANNELS - 1}")
    chans = channel_list(args.channels) if args.channels else list(range(protocol.NUM_CHANNELS))
    if loop is not None:
        if args.channels and loop in chans:
            raise LatscopeError(f"--loopback channel {loop} must not be in --channels: it takes "
                                f"its pin, not the internal pattern")
        chans = [c for c in chans if c != loop]
    reference = args.reference
    if reference is not None:
        if loop is None:
            raise LatscopeError("--reference needs --loopback")
        if reference not in chans:
            raise LatscopeError(f"--reference {reference} must be one of the pattern channels "
                                f"{chans}")
    elif loop is not None and chans:
        reference = chans[0]
    if not chans:
        raise LatscopeError("no channel left for the internal pattern")
    return chans, loop, reference


#: The simulated fan-out cable's options by unit: (option, type of one delay, what the list
#: holds, largest delay).
_SIM_CABLE_OPTIONS = {
    "ticks": ("--sim-skew", int, "tick counts", 1000),
    "ps": ("--sim-skew-ps", float, "delays in ps", 100_000),
}


def _sim_cable(text, chans, unit):
    """The simulated cable for ``--sim-skew`` (``unit="ticks"``) or ``--sim-skew-ps``
    (``unit="ps"``): channel -> delay over ``chans``, all 0 without the option."""
    option, number, what, largest = _SIM_CABLE_OPTIONS[unit]
    if text is None:
        return dict.fromkeys(chans, number(0))
    try:
        delays = [number(part) for part in text.split(",")]
    except ValueError:
        raise LatscopeError(f"{option} must be comma-separated {what}, not {text!r}") from None
    if len(delays) != len(chans):
        raise LatscopeError(f"{option} lists {len(delays)} delays for {len(chans)} channels "
                            f"{chans}")
    if any(not 0 <= d <= largest for d in delays):
        raise LatscopeError(f"{option} delays must be 0..{largest} {unit}, not {text!r}")
    return dict(zip(chans, delays, strict=True))


def _edges(args):
    """Edges per channel: ``--edges``, the default, or ``None`` with ``--duration``."""
    if args.duration is not None:
        return None
    return args.edges if args.edges is not None else DEFAULT_EDGES


def _warn(message):
    print(f"latscope selftest: warning: {message}", file=sys.stderr)


def run_selftest_command(args):
    """The result dict of :func:`~latscope.capture.selftest.selftest` or
    :func:`~latscope.capture.selftest.calibrate` for ``args``."""
    if args.calibrate:
        if args.loopback is not None:
            raise LatscopeError("--calibrate and --loopback are separate runs: use one of them")
        chans = channel_list(args.channels) if args.channels else \
            list(range(protocol.NUM_CHANNELS))
        if args.sim_skew is not None and not args.sim:
            raise LatscopeError("--sim-skew needs --sim")
        if (args.sim_skew_ps is not None or args.sim_tap_ps != protocol.DELAY_TAP_PS) and not (
                args.sim and args.sub_tick):
            raise LatscopeError("--sim-skew-ps and --sim-tap-ps need --sim --calibrate --sub-tick")
        if args.sub_tick and args.sim_skew is not None:
            raise LatscopeError("--sub-tick simulates the cable in ps: use --sim-skew-ps, not "
                                "--sim-skew")
        if not 5 <= args.sim_tap_ps <= 60:
            raise LatscopeError(f"--sim-tap-ps must be 5..60 ps, not {args.sim_tap_ps!r}")
        if args.sub_tick and len(chans) < 2:
            raise LatscopeError(f"--sub-tick needs at least 2 channels, not {chans}")
        cable = _sim_cable(args.sim_skew, chans, "ticks") if args.sim and not args.sub_tick \
            else None
        cable_ps = _sim_cable(args.sim_skew_ps, chans, "ps") if args.sim and args.sub_tick \
            else None
        return calibrate(args.calibrate, args.port, simulated=args.sim, engine=args.sim_engine,
                         cable=cable, baud=args.baud, channels=chans, high_ticks=args.high,
                         low_ticks=args.low, edges=_edges(args), duration=args.duration,
                         timeout=args.timeout, force=args.force, sub_tick=args.sub_tick,
                         cable_ps=cable_ps, sim_tap_ps=args.sim_tap_ps)
    if args.sim_skew is not None:
        raise LatscopeError("--sim-skew needs --sim --calibrate")
    if args.sub_tick or args.sim_skew_ps is not None:
        raise LatscopeError("--sub-tick and --sim-skew-ps need --calibrate")
    chans, loop, reference = _plan(args)
    return selftest(args.port, simulated=args.sim, engine=args.sim_engine, baud=args.baud,
                    channels=chans, high_ticks=args.high, low_ticks=args.low, loopback=loop,
                    reference=reference, edges=_edges(args), duration=args.duration,
                    timeout=args.timeout, warn=_warn)


def _range(lo, hi):
    if lo is None:
        return "-"
    return f"{lo}" if lo == hi else f"{lo}..{hi}"


def _sub_tick_lines(s):
    """The sub-tick alignment's part of the calibration report."""
    bound = max(s["tap_ps"])
    lines = ["sub-tick alignment (input delay lines; skew against the median channel, ps; "
             "whole ticks included before, removed by the offsets after):",
             f"  {'channel':>7}  {'tap ps':>7}  {'taps':>4}  {'before ps':>10}  {'after ps':>9}"]
    for ch, tap, measured, taps, before, after in zip(
            s["channels"], s["tap_ps"], s["tap_measured"], s["taps"], s["skew_before_ps"],
            s["skew_after_ps"], strict=True):
        lines.append(f"  {ch:>7}  {tap:>6.1f}{' ' if measured else '*'}  {taps:>4}  "
                     f"{before:>+10.1f}  {after:>+9.1f}")
    if not all(s["tap_measured"]):
        lines.append("  * tap not measured on this channel (second step out of reach): the "
                     "others' mean")
    lines.append(f"  channel-to-channel skew: {s['spread_before_ps']:.0f} ps before, below "
                 f"{bound:.0f} ps (one tap) after; measured {s['spread_after_ps']:.0f} ps "
                 f"(resolution one tap)")
    if "model" in s:
        lines.append(f"  simulated: fan-out cable {s['model']['cable_ps']} ps, delay cells "
                     f"{s['model']['tap_ps']:g} ps per tap (gateware/model_delay.py)")
    return lines


def format_report(result):
    """The human-readable report of a :func:`~latscope.capture.selftest.selftest` (or
    ``calibrate``) result."""
    ident = result["instrument"]
    if "calibration" in result:
        c = result["calibration"]
        tick_ns = 1e9 / ident["tick_hz"]
        lines = [f"calibration {c['edges']} edges per channel; offsets (ticks late against the "
                 f"median channel; {tick_ns:.3f} ns each):"]
        for ch, off, spread in zip(c["channels"], c["offsets_ticks"], c["spread_ticks"],
                                   strict=True):
            lines.append(f"  channel {ch}: {off:+d} ticks (spread {spread})")
        if "sub_tick" in result:
            lines += _sub_tick_lines(result["sub_tick"])
        lines.append(f"written to {result['file']}")
        return "\n".join(lines)
    pat = result["pattern"]
    tick_ns = 1e9 / ident["tick_hz"]
    names = ident.get("channel_names") or []
    high, low = pat["high_ticks"], pat["low_ticks"]
    lines = [
        f"instrument  {ident.get('board', '?')}{' (simulated)' if result['simulated'] else ''}, "
        f"tick {tick_ns:.3f} ns, protocol {ident.get('protocol_version', '?')}",
        f"pattern     {high} ticks high ({high * tick_ns / 1e3:.3f} µs), {low} ticks low "
        f"({low * tick_ns / 1e3:.3f} µs); stopped: {result['stopped']}",
        "",
        f"{'channel':>7}  {'role':<7} {'edges':>6}  {'high':>13}  {'low':>13}  {'errors':>6}  "
        f"verdict",
    ]
    for c in pat["channels"]:
        role = names[c["channel"]] if c["channel"] < len(names) else ""
        lines.append(f"{c['channel']:>7}  {role:<7} {c['edges']:>6}  "
                     f"{_range(c['high_min'], c['high_max']):>13}  "
                     f"{_range(c['low_min'], c['low_max']):>13}  {c['errors']:>6}  "
                     f"{'PASS' if c['ok'] else 'FAIL: ' + '; '.join(c['problems'])}")
    lost = ", ".join(f"{x['lost']} {x['cause']}" for x in pat["losses"]) or "none"
    lines.append(f"\nlost        {lost}")
    for problem in pat["problems"]:
        lines.append(f"FAIL        {problem}")
    lb = result.get("loopback")
    if lb:
        lo = lb["lane_order"]
        if lb["delay_ticks"] is not None:
            delay = f"{lb['delay_ticks']} ticks ({lb['delay_ticks'] * tick_ns:.3f} ns)"
        elif lb["delay_rising"] is None and lb["delay_falling"] is None:
            delay = "not measured"
        else:
            delay = (f"not constant: rising {_range(*(lb['delay_rising'] or (None, None)))}, "
                     f"falling {_range(*(lb['delay_falling'] or (None, None)))} ticks")
        lines += [
            "",
            f"loop-back   channel {lb['channel']}, {lb['edges']} edges"
            + (f", delay vs channel {lb['reference']}: {delay} (modulo the {high + low}-tick "
               f"period)" if lb["reference"] is not None else ""),
            f"            high {_range(lb['high_min'], lb['high_max'])} ticks, low "
            f"{_range(lb['low_min'], lb['low_max'])} ticks, {lb['exact']:.0%} exact",
            f"lane order  {lo['order']}: {lo['reason']} (edges per lane "
            f"{'/'.join(str(n) for n in lo['edges_per_lane'])})",
        ]
        for problem in lb["problems"]:
            lines.append(f"FAIL        {problem}")
    lines.append("")
    lines.append("PASS" if result["ok"] else "FAIL")
    return "\n".join(lines)


def run(args):
    """0 pass, 1 fail."""
    result = run_selftest_command(args)
    if args.json:
        print(json.dumps(result, sort_keys=True, default=str))
    else:
        print(format_report(result))
    return 0 if result["ok"] else 1
