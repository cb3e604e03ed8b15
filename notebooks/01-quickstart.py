# %% [markdown]
# # Quickstart: from a capture file to latencies with honest uncertainty
#
# A latscope capture (`.lsc`) holds every timestamped edge the instrument saw: the MII `RX_DV` and
# `TX_EN` lines and the device's GPIO markers. This notebook loads one, pairs the edges into
# per-packet latencies with the standard measurement definitions, and reads the statistics.
#
# The capture is `fixtures/bench/gem-64.lsc`: the simulated bench's model of the 2018 paper's
# Zynq GEM configuration, 64-byte UDP echoes (see `fixtures/bench/README.md`). If the fixture is
# missing (an installed copy without the source tree), the same profile is simulated now.

# %%
from latscope.analysis import api, report
from latscope.analysis.definitions import default_definitions
from latscope.capture.sim.examples import example_captures

paths, provenance = example_captures(["gem-64"])
print(paths[0], "-", provenance["gem-64"])

# %% [markdown]
# ## The measurement definitions
# Each latency is a start edge and a stop edge. The capture's marker table says which marker
# carries which meaning (here `m0` = `rx.isr`, ...). Definitions are data: a TOML file can replace
# them (`latscope analyze --definitions FILE.toml`).

# %%
for m in default_definitions().measurements:
    print(m)

# %% [markdown]
# ## Load and summarise
# `api.load` analyses the capture chunk by chunk and keeps the per-packet records for pandas;
# `ns_histograms=True` also keeps each latency in whole nanoseconds for the `.hlog` export below.

# %%
a = api.load(paths[0], ns_histograms=True)
a.summary()[["n", "mean_ns", "three_sigma_ns", "min_ns", "p50_ns", "p99_ns", "p999_ns",
             "max_ns", "missed", "spurious"]]

# %% [markdown]
# Every figure comes with the instrument's resolution: one tick of the 320 MHz time base
# (160 MHz capture clock, DDR inputs), 3.125 ns. A latency is the difference of two timestamps,
# so each is exact to within one tick.

# %%
print(f"resolution: {a.result.resolution_ns} ns per tick")
print(report.stats_table(a.stats))

# %% [markdown]
# ## Percentiles with confidence intervals
# Percentiles are order statistics; their 95 % intervals come from the binomial distribution and
# assume nothing about the shape of the latency distribution. With 1,200 packets the p99.9 has a
# lower bound but no finite upper bound: the sample is too small to bound it from above.

# %%
udp = a.stats["rx.udp"]
for p, q in udp.quantiles.items():
    print(f"p{p:<6g} {q.value_ns:9.1f} ns   95 % CI [{q.lower_ns}, {q.upper_ns}]")

# %% [markdown]
# ## Per-packet records
# One row per packet and start edge; a latency is NaN unless its pair is valid (status `ok`).

# %%
packets = a.packets()
packets[packets.group == "rx_dv falling"].head()

# %% [markdown]
# ## Export the histogram for other tools
# Each measurement's log-linear histogram (HdrHistogram layout, 3 significant digits) can be
# written in HdrHistogram's `.hlog` format, readable by HdrHistogram's tools.

# %%
import os
import tempfile

from latscope.analysis.hdr import read_hlog, write_hlog_for

hlog = os.path.join(tempfile.mkdtemp(), "gem-64.hlog")
write_hlog_for(a, hlog)
back = {h.get_tag(): h for h in read_hlog(hlog)}
print({tag: h.get_value_at_percentile(50) for tag, h in back.items()})
