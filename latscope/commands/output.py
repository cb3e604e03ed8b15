"""What ``latscope import`` and ``latscope export`` print: a summary (or its JSON record),
warnings, and a percentage while they run."""

import json
import sys
import time


class FractionProgress:
    """``done / total`` as a percentage on stderr, when stderr is a terminal, 4 times a second."""

    def __init__(self, label):
        self.label = label
        self.enabled = sys.stderr.isatty()
        self.last = 0.0
        self.drawn = False

    def __call__(self, done, total):
        now = time.monotonic()
        if not self.enabled or now - self.last < 0.25 or not total:
            return
        self.last = now
        sys.stderr.write(f"\r\x1b[K{self.label}: {100 * done / total:5.1f} % "
                         f"({done:,} of {total:,})")
        sys.stderr.flush()
        self.drawn = True

    def done(self):
        if self.drawn:
            sys.stderr.write("\r\x1b[K")
            sys.stderr.flush()


def print_summary(command, as_json, record, lines, warnings):
    """Print ``lines`` (or ``record`` as JSON) on stdout and each warning on stderr."""
    if as_json:
        print(json.dumps(record, sort_keys=True, default=str))
    else:
        for line in lines:
            print(line)
    for warning in warnings:
        print(f"latscope {command}: warning: {warning}", file=sys.stderr)
