"""The remaining error of per-class marker stages under interrupt coalescing, against the
simulated bench's ground truth (issue 10, review s5r finding 3).

``analysis.frames`` takes a request's ``rx.isr`` as the first ISR marker rise at or after the
request's end, which may serve several frames; each request whose interrupt also serves another
frame *with a record* is counted as ``coalesced`` (here the background is only counted, so the
sharing is not visible). With coalescing (``bg60-coalesce``:
one interrupt per 16 frames or 20 us after the first), an interrupt raised for a batch of
*earlier* frames can enter just after the request ends; the request's own interrupt comes
later. Nothing in a capture says which frames an interrupt serves (no rule on edges alone is
right in general: the minimum interrupt latency that would rule such rises out is the DUT's,
not the capture's), so the error is stated here rather than hidden: such samples are always
*shorter* than the truth and every other stage is exact. docs/analysis.md says the same.
Expected values: ``sim_load.simulate_load`` with the same seed (``truth["stage/..."]``).
"""

import numpy as np
import pytest

from latscope.analysis import api
from latscope.capture.sim import sim_load
from latscope.cli import main

PACKETS = 200
SEED = 5
#: Each edge is rounded to a 1.25 ns tick, so a difference is off by at most one tick.
TICK_NS = 1.25


@pytest.mark.slow
def test_rx_isr_under_coalescing_states_its_remaining_error(tmp_path):
    path = tmp_path / "co.lsc"
    assert main(["capture", "--sim", "el-dm-64", "--sim-load", "bg60-coalesce", "--sim-engine",
                 "model", "--packets", str(PACKETS), "--sim-seed", str(SEED), "-o", str(path),
                 "--quiet"]) == 0
    run = sim_load.simulate_load("el-dm-64", PACKETS, "bg60-coalesce", seed=SEED)
    a = api.analyze_file(str(path))
    hp = a.result.frames.classes[1]
    for stage in ("node.e2e", "rx.copy", "rx.udp"):          # exact: each chained from its frame
        got = hp.samples[stage][1] * 1e9 / a.result.tick_hz
        want = run.truth[f"stage/{stage}"]
        want = want[~np.isnan(want)]
        assert len(got) == len(want) and np.max(np.abs(got - want)) <= TICK_NS, stage
    got = hp.samples["rx.isr"][1] * 1e9 / a.result.tick_hz
    want = run.truth["stage/rx.isr"]
    want = want[~np.isnan(want)]
    assert len(got) == len(want)
    wrong = np.abs(got - want) > TICK_NS
    # the remaining error: a few requests (16 of 200 at this seed when written) take an earlier
    # batch's interrupt, always shorter than the truth by most of the 20 us coalescing timer
    assert 0 < np.count_nonzero(wrong) <= 0.1 * PACKETS
    assert np.all(got[wrong] < want[wrong])
