"""``latscope traffic``: paced UDP test frames to the DUT, and the record of their echoes."""

import json
import sys

from latscope import LatscopeError
from latscope.capture.files import outputs
from latscope.capture.traffic import parse_sizes, parse_target, run_traffic, write_jsonl


def add_arguments(p):
    p.description = ("Send UDP datagrams carrying a sequence number and their intended send time "
                     "to the DUT's echo port, paced by intended time (coordinated-omission safe) "
                     "or one in flight, and record intended/actual send and echo receive times "
                     "(ns, host monotonic clock) as JSON lines.")
    p.add_argument("--target", required=True, metavar="HOST:PORT",
                   help="DUT address and echo port, e.g. 192.0.2.1:4242 (socket path)")
    p.add_argument("--sizes", default="64", metavar="LIST",
                   help="comma-separated sizes, used in turn (default 64)")
    p.add_argument("--size-kind", choices=("frame", "payload"), default="frame",
                   help="frame: Ethernet frame bytes incl. FCS, 64..1518 (default); "
                        "payload: UDP payload bytes, 16..1472")
    mode = p.add_mutually_exclusive_group(required=True)
    mode.add_argument("--rate", type=float, metavar="PPS", help="packets per second, paced")
    mode.add_argument("--one-in-flight", action="store_true",
                      help="send the next packet after the echo (or timeout)")
    p.add_argument("--count", type=int, default=100, help="packets to send (default 100)")
    p.add_argument("--duration", type=float, metavar="S",
                   help="stop sending after S seconds (default: no limit)")
    p.add_argument("--timeout", type=float, default=0.5, metavar="S",
                   help="wait for echoes, seconds (default 0.5)")
    p.add_argument("-o", "--output", metavar="FILE.jsonl",
                   help="record of every packet ('-' for standard output)")
    p.add_argument("--force", action="store_true", help="replace an existing output file")
    p.add_argument("--json", action="store_true", help="print the summary as JSON")


def run(args):
    if args.output:      # before sending: the records must have somewhere to go
        outputs.check_output(args.output, force=args.force)
    if args.output == outputs.STDOUT and args.json:
        raise LatscopeError("--json cannot be combined with -o - (both use standard output)")
    target = parse_target(args.target)
    sizes = parse_sizes(args.sizes, args.size_kind)
    result = run_traffic(target, sizes, args.count, rate=args.rate,
                         one_in_flight=args.one_in_flight, timeout=args.timeout,
                         duration=args.duration)
    if args.output:
        write_jsonl(result, args.output, {"target": args.target, "payload_sizes": sizes,
                                          "rate_pps": args.rate,
                                          "one_in_flight": args.one_in_flight},
                    force=args.force)
    s = result.summary()
    if args.json:
        print(json.dumps(s))
    else:
        p50 = "-" if s["rtt_p50_ns"] is None else f"{s['rtt_p50_ns'] / 1e3:.1f}"
        print(f"sent {s['sent']}, echoed {s['received']}, lost {s['lost']}, "
              f"round trip p50 {p50} µs (from intended send time)",
              file=sys.stderr if args.output == outputs.STDOUT else sys.stdout)
    return 0 if s["received"] == s["sent"] else 1
