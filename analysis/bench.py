"""Analysis benchmark (``latscope bench --only analysis``): pairing plus statistics throughput,
peak memory against capture length, and a sigrok ``.sr`` file to statistics against sigrok-cli's
``jitter`` decoder on the same file (which must agree packet for packet).

Streams come from :mod:`latscope.analysis.synth` (10 events per packet: RX_DV, three markers,
TX_EN; rx.isr, rx.udp and tx.wire measured). Each size runs in a fresh interpreter so its peak
resident memory is its own; generating the events is timed apart from analysing them. Times are
CPU times (this process, or sigrok-cli's as a child), so other load on a shared machine does not
distort the figures or the ratio.
"""

import json
import os
import resource
import subprocess
import sys
import tempfile
import time

import numpy as np

SECTION = "analysis: pairing, statistics, sigrok comparison"

_CHILD = r"""
import json, resource, sys, time
from latscope.analysis.engine import Analyzer
from latscope.analysis.synth import synthetic_chunks
n = int(sys.argv[1])
an = Analyzer(tick_hz=320_000_000, markers={"m0": "rx.isr", "m2": "rx.udp", "m4": "tx.send"})
spent = 0.0
for time_, channel, rising in synthetic_chunks(n, chunk_events=1 << 20, seed=1):
    t = time.process_time()
    an.feed(time_, channel, rising)
    spent += time.process_time() - t
t = time.process_time()
r = an.finish()
spent += time.process_time() - t
def peak_kib():
    # VmHWM is this process image's own peak: ru_maxrss carries the parent's over fork + exec,
    # so a bench process that has grown would inflate it.
    try:
        with open("/proc/self/status") as status:
            for line in status:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1])
    except OSError:
        pass
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
print(json.dumps({"seconds": spent, "rss": peak_kib(),
                  "n": {k: s.n for k, s in r.stats.items()},
                  "method": {k: s.method for k, s in r.stats.items()}}))
"""


def _child(n):
    out = subprocess.run([sys.executable, "-c", _CHILD, str(n)], check=True,
                         capture_output=True, text=True).stdout
    return json.loads(out.strip().splitlines()[-1])


def _sigrok_rows(packets):
    from latscope.analysis import api
    from latscope.analysis.sigrokref import have_sigrok_cli, sigrok_jitter, write_sr
    from latscope.analysis.synth import SyntheticSpec, synthetic_chunks
    spec = SyntheticSpec(gap=2000)
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "bench.sr")
        samplerate = 100_000_000        # one sample per tick: latencies are in samples
        samples = write_sr(path, synthetic_chunks(packets * 10, spec=spec, seed=2),
                           samplerate=samplerate,
                           probes={0: "rx_dv", 1: "tx_en", 3: "m_isr", 5: "m_udp", 7: "m_send"})
        size_mb = os.path.getsize(path) / 1e6
        t = time.process_time()
        a = api.analyze_file(path, measures=["rx.udp"], packets=True)
        ours = time.process_time() - t
        lat = a.result.packets[0].latency["rx.udp"]
        start = a.result.packets[0].start
        note = f"{samples:,} samples at 100 MHz, {packets:,} packets, {size_mb:.1f} MB .sr"
        rows.append(("sigrok .sr -> rx.udp statistics, latscope", ours, "s", note))
        rows.append(("  sample rate processed", samples / ours / 1e6, "M samples/s", ""))
        if not have_sigrok_cli():
            rows.append(("sigrok-cli jitter decoder", float("nan"), "s", "sigrok-cli not found"))
            return rows
        before = resource.getrusage(resource.RUSAGE_CHILDREN)
        s_start, s_stop = sigrok_jitter(path, "rx_dv", "m_udp")
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
        theirs = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
        same = (len(s_start) == len(start) and np.array_equal(s_start, start)
                and np.array_equal(s_stop - s_start, lat))
        rows.append(("sigrok-cli jitter decoder, same latencies", theirs, "s",
                     f"latscope {theirs / ours:.1f}x faster; per-packet latencies "
                     f"{'identical' if same else 'DIFFER'} ({len(s_start):,} vs {len(lat):,})"))
    return rows


def run(quick):
    """Benchmark rows ``(figure, value, unit, note)``."""
    sizes = (10**6, 10**7) if quick else (10**7, 10**8)
    rows, results = [], {}
    for n in sizes:
        r = _child(n)
        results[n] = r
        rate = n / r["seconds"] / 1e6
        rows.append((f"pairing + statistics, {n:.0e} events", rate, "M events/s",
                     f"one core, {r['seconds']:.2f} s, {sum(r['n'].values()):,} latencies "
                     f"({'/'.join(sorted(set(r['method'].values())))}); target >= 20"))
    small, big = sizes
    ratio = results[big]["rss"] / results[small]["rss"]
    rows.append((f"peak memory, {big:.0e} events", results[big]["rss"] / 1024, "MB",
                 f"{ratio:.2f}x the {small:.0e}-event run: independent of capture length"))
    rows += _sigrok_rows(2_000 if quick else 20_000)
    return rows


if __name__ == "__main__":
    for row in run(quick="--quick" in sys.argv):
        print(row)
