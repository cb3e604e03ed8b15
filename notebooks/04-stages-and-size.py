# %% [markdown]
# # Stage breakdown and the packet-size regression
#
# Each packet carries several stage times (interrupt entry, copy into a stack buffer, UDP
# delivery). Differences on the same packet split the receive path into stages, e.g. the IP/UDP
# cost = rx.udp − rx.copy. Across frame sizes, a regression splits each latency into a fixed cost
# and a per-byte cost; the per-byte cost is the effective bandwidth of the MAC and memory path,
# the paper's main finding. Captures: `fixtures/bench/*.lsc` (simulated now if missing).

# %%
from IPython.display import Image, display

from latscope.analysis import api, report
from latscope.capture.sim.examples import example_captures

profiles = [f"{fam}-{size}" for fam in ("gem", "el-dm", "el-so") for size in (64, 256, 1024)]
paths, provenance = example_captures(profiles)
analyses = [api.load(p) for p in paths]
print(set(provenance.values()))

# %% [markdown]
# ## Stages of the receive path (64-byte frames)

# %%
small = [a for a in analyses if a.size == 64]
print(report.stage_table(small))
display(Image(report.plot_waterfall(small)))

# %% [markdown]
# ## Fixed cost and per-byte cost
# Least squares over every packet of every size; intervals at 95 %. The per-byte cost of rx.copy
# is the cost of moving the frame into memory: its inverse is the effective bandwidth in MB/s.

# %%
fits = report.size_fits(analyses)
print(report.size_table(fits))
display(Image(report.plot_size(analyses, fits)))
