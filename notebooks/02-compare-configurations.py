# %% [markdown]
# # Comparing MAC and memory configurations: Table I, then what it leaves out
#
# The 2018 paper's Table I gives, per MAC configuration and packet size, the mean and 3σ of 512
# latency samples. Here the same structure is rebuilt from simulated-bench captures of the paper's
# configurations (GEM hard MAC; Ethernet Lite with device memory, "EL DM"; Ethernet Lite
# strong-ordered, "EL SO"; the fast track), then extended with percentiles, confidence intervals
# and rank tests. Captures: `fixtures/bench/*.lsc` (simulated now if missing).

# %%
from latscope.analysis import api, report
from latscope.analysis.stats import n_required, quantile_ci_ranks
from latscope.capture.sim.examples import example_captures

profiles = [f"{fam}-{size}" for fam in ("gem", "el-dm", "el-so", "fast-track")
            for size in (64, 256, 1024)]
paths, provenance = example_captures(profiles)
print(set(provenance.values()))
analyses = [api.load(p) for p in paths]

# %% [markdown]
# ## Table I, rebuilt (µs, mean ± 3σ)
# The paper reports Rx UDP 64 B as GEM 7.48 ± 0.35, EL DM 2.95 ± 0.20, EL SO 4.53 ± 0.23 µs.

# %%
print(report.table_one(analyses, ["rx.copy", "rx.udp", "rx.fast", "tx.xmit", "tx.wire"]))

# %% [markdown]
# ## What percentiles add
# Mean ± 3σ describes a Gaussian. Latencies are skewed with rare long tails (interrupts,
# scheduling); the percentiles show them, and their intervals say how well the sample pins them.

# %%
print(report.percentile_table([a for a in analyses if a.size == 64], "rx.udp"))

# %% [markdown]
# ## How many packets a tail percentile needs
# The tables' two-sided 95 % interval of the p99.9 gets a finite upper bound from 3,688 packets
# (36,887 for p99.99); the often-quoted 2,995 is the one-sided figure. With the paper's 512
# samples the p99.9 has no finite upper bound at all.

# %%
print("n for p99.9:", n_required(0.999), " n for p99.99:", n_required(0.9999),
      " (one-sided:", n_required(0.999, two_sided=False), ")")
print("ranks of the p99.9 interval at n = 512:", quantile_ci_ranks(512, 0.999)[1:],
      "(513 = beyond the sample: no upper bound)")

# %% [markdown]
# ## Differences with intervals and rank tests
# Each 64-byte configuration against GEM: difference of means (Welch), of percentiles
# (distribution-free), the Mann-Whitney test and its effect sizes.

# %%
small = [a for a in analyses if a.size == 64]
print(report.comparison_table(report.compare_analyses(small), small[0].label))
