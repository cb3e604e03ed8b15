# %% [markdown]
# # Analysing a capture from a generic sigrok logic analyzer
#
# Any logic analyzer sigrok supports can record `RX_DV` and the markers into a session file
# (`.sr`). latscope reads it directly (one tick per sample) with a channel map naming which probe
# carries which role, and applies the same measurement definitions. Here a `.sr` file is made from
# a simulated-bench capture (as a logic analyzer sampling at 320 MHz would record it, probes named
# D0...), analysed with `--map`, and checked against the original capture and against sigrok-cli's
# own `jitter` decoder.

# %%
import os
import tempfile

import numpy as np

from latscope.analysis import api
from latscope.analysis.sigrokref import have_sigrok_cli, sigrok_jitter, write_sr
from latscope.capture.files.capfile import open_capture
from latscope.capture.sim.examples import example_captures

paths, provenance = example_captures(["el-dm-64"])
print(provenance)
with open_capture(paths[0]) as cap:
    ev = cap.events()
    time, channel, rising = (np.array(x) for x in ev)
    tick_hz = int(cap.tick_hz)
roles = {0: "rx_dv", 1: "tx_en", 3: "m_isr", 4: "m_copy", 5: "m_udp", 6: "m_xmit", 7: "m_send"}
probes = {ch: f"D{k}" for k, ch in enumerate(roles)}
sr = os.path.join(tempfile.mkdtemp(), "el-dm-64.sr")
write_sr(sr, [(time - time[0] + 100, channel, rising)], samplerate=tick_hz, probes=probes)
mapping = ",".join(f"{roles[ch]}=D{k}" for k, ch in enumerate(roles))
print(mapping)

# %% [markdown]
# ## The same definitions, the same numbers
# (`latscope analyze FILE.sr --map rx_dv=D0,...` does the same from the command line.)

# %%
from_sr = api.load(sr, mapping=mapping)
original = api.load(paths[0])
print(from_sr.summary()[["n", "mean_ns", "p50_ns", "p99_ns", "max_ns"]])
same = all(
    np.array_equal(x.latency[k], y.latency[k])
    for x, y in zip(from_sr.result.packets, original.result.packets, strict=True)
    for k in x.latency)
print("per-packet latencies identical to the original capture:", same)

# %% [markdown]
# ## sigrok-cli's jitter decoder agrees packet for packet

# %%
if have_sigrok_cli():
    start, stop = sigrok_jitter(sr, "D0", "D4")          # rx_dv falling -> m_udp rising
    ours = from_sr.result.packets[0]
    print(len(start), "pairs; identical:",
          np.array_equal(stop - start, ours.latency["rx.udp"]))
else:
    print("sigrok-cli is not installed; skipped")
