"""The paper's published figures the report shows (analysis/report/paper.py) against the simulated
bench's shipped profiles (capture/sim/profiles/*.toml), which model the same cells: they must agree
exactly, so the report's "paper's Table I next to ours" shows what the profiles simulate."""

import pytest

from latscope.analysis.report import paper
from latscope.capture.sim import simbench


@pytest.mark.parametrize("name", simbench.list_profiles())
def test_reference_equals_profile(name):
    profile = simbench.load_profile(name)
    from_profile = {stage: (spec.mean_us, spec.three_sigma_us)
                    for stage, spec in profile.stages.items()
                    if not spec.source.startswith("assumption")}
    reference = paper.REFERENCES[name]
    # same measurements in the same order (the table's rows follow it), same numbers (exact:
    # both are the paper's two-decimal figures)
    assert list(reference.stages.items()) == list(from_profile.items())
    assert reference.tails == tuple((t.name, t.probability, t.min_us, t.mean_extra_us)
                                    for t in profile.tails)


def test_every_reference_is_a_shipped_profile():
    assert set(paper.REFERENCES) == set(simbench.list_profiles())


def test_table_one_cell_as_printed():
    """Table I, Rx UDP, GEM, 64 B reads "7.48 0.35" (seed 002, line "Rx UDP 64 B")."""
    assert paper.TABLE_ONE["rx.udp"][64]["GEM"] == (7.48, 0.35)
