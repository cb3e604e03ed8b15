"""A capture and its sigrok round trip give identical results; sigrok-cli's jitter decoder agrees
packet for packet."""

import numpy as np
import pytest

from latscope.analysis import api
from latscope.analysis.sigrokref import have_sigrok_cli, sigrok_jitter, write_sr

simbench = pytest.importorskip("latscope.capture.sim.simbench")
sigrok = pytest.importorskip("latscope.capture.files.sigrok")
sigrok_import = pytest.importorskip("latscope.capture.files.sigrok_import")

# gem profile (capture/sim/profiles/gem.toml): m0 rx.isr, m1 rx.copy, m2 rx.udp, m3 tx.xmit,
# m4 tx.send
PROBES = {0: "rx_dv", 1: "tx_en", 3: "m_isr", 4: "m_copy", 5: "m_udp", 6: "m_xmit", 7: "m_send"}


@pytest.fixture(scope="module")
def gem(tmp_path_factory):
    run = simbench.simulate("gem-64", 300, seed=8)
    t = run.truth
    path = str(tmp_path_factory.mktemp("sr") / "gem.sr")
    write_sr(path, [(t["time"], t["channel"], t["rising"])], samplerate=int(run.meta["tick_hz"]),
             probes=PROBES)
    direct = api.from_events(t["time"], t["channel"], t["rising"], tick_hz=run.meta["tick_hz"],
                             markers=run.meta["markers"])
    return run, path, direct


def _packets(analysis):
    return {name: lat for table in analysis.result.packets for name, lat in table.latency.items()}


def test_sr_analysed_directly_is_identical(gem):
    run, path, direct = gem
    via_sr = api.load(path)          # probes are named by role, so no --map is needed
    assert via_sr.result.tick_hz == direct.result.tick_hz
    a, b = _packets(direct), _packets(via_sr)
    assert a.keys() == b.keys() == set(run.meta["stages"])
    for name in a:
        assert np.array_equal(a[name], b[name])
    assert via_sr.to_dict()["measurements"] == direct.to_dict()["measurements"]


def test_sr_import_with_map_is_identical(gem, tmp_path):
    """The same .sr with anonymous probe names, imported with --map, then analysed."""
    run, path, direct = gem
    anon = str(tmp_path / "anon.sr")
    t = run.truth
    write_sr(anon, [(t["time"], t["channel"], t["rising"])], samplerate=int(run.meta["tick_hz"]),
             probes={ch: f"D{k}" for k, ch in enumerate(PROBES)})
    mapping = ",".join(f"{role}=D{k}" for k, role in enumerate(PROBES.values()))
    lsc = str(tmp_path / "anon.lsc")
    sigrok_import.import_sr(anon, lsc, mapping)
    imported = api.load(lsc)
    assert imported.to_dict()["measurements"] == direct.to_dict()["measurements"]
    also = api.load(anon, mapping=mapping)
    assert also.to_dict()["measurements"] == direct.to_dict()["measurements"]


@pytest.mark.needs_tool("sigrok-cli")
@pytest.mark.skipif(not have_sigrok_cli(), reason="sigrok-cli is not installed")
def test_sigrok_cli_jitter_agrees_packet_for_packet(gem):
    run, path, direct = gem
    start, stop = sigrok_jitter(path, "rx_dv", "m_udp")
    ours = direct.result.packets[0]
    assert len(start) == len(ours.start) == 300
    assert np.array_equal(start, ours.start)
    assert np.array_equal(stop - start, ours.latency["rx.udp"])
    start, stop = sigrok_jitter(path, "m_send", "tx_en", clk_polarity="rising")
    tx = next(p for p in direct.result.packets if "tx.wire" in p.latency)
    assert np.array_equal(stop - start, tx.latency["tx.wire"])


@pytest.mark.parametrize("name", ["counter.sr", "wide16.sr", "demo.sr"])
@pytest.mark.parametrize("bits", [[0, 1, 2, 3, 4, 5, 6, 7], [1, 3], [0]])
def test_fast_edges_equal_reader_edges(name, bits):
    """edges_from_samples gives exactly SrReader.iter_edges' edges (reference: the capture
    part's reader), whatever the block sizes."""
    from latscope.analysis.api import repository_root
    from latscope.analysis.sigrokref import edges_from_samples
    path = f"{repository_root()}/fixtures/sigrok/{name}"
    with sigrok.SrReader(path) as r:
        ref = [np.concatenate(c) for c in zip(*r.iter_edges(bits, block_samples=1000),
                                                strict=True)]
    with sigrok.SrReader(path) as r:
        got = [np.concatenate(c) for c in zip(*edges_from_samples(
            r.iter_samples(block_samples=777), bits), strict=True)]
    assert len(ref[0]) > 0
    for a, b in zip(ref, got, strict=True):
        assert np.array_equal(a, b)


def test_fast_edges_random_blocks():
    from latscope.analysis.sigrokref import edges_from_samples
    rng = np.random.default_rng(4)
    samples = rng.integers(0, 4, 10_000, dtype=np.uint8) * (rng.random(10_000) < 0.05)
    blocks = [(0, samples[:3]), (3, samples[3:4000]), (4000, samples[4000:])]
    got = [np.concatenate(c) for c in zip(*edges_from_samples(blocks, [0, 1]), strict=True)]
    # reference by hand: every sample whose bit differs from the previous sample's
    t_ref, c_ref, r_ref = [], [], []
    for i in range(1, len(samples)):
        for ch in (0, 1):
            a, b = (samples[i - 1] >> ch) & 1, (samples[i] >> ch) & 1
            if a != b:
                t_ref.append(i), c_ref.append(ch), r_ref.append(bool(b))
    assert got[0].tolist() == t_ref and got[1].tolist() == c_ref and got[2].tolist() == r_ref
