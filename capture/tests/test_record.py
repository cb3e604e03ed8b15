"""``capture.record.record``: one call records a capture from a port or the simulated bench,
with explicit parameters (the ``capture`` command, ``run`` and the demo all use it)."""

import numpy as np
import pytest

from latscope import LatscopeError
from latscope.capture.files import capfile
from latscope.capture.link import session
from latscope.capture.link.transport import EmulatedInstrument, PtyDevice
from latscope.capture.record import record
from latscope.capture.sim import simbench
from latscope.capture.sim.sim_port import SimulatedSource

ROLES = ("rx_dv", "tx_en", "crs_dv", "m0", "m1", "m2", "m3", "m4")


def test_simulated_source_records_every_event_of_its_own_simulation(tmp_path):
    """The capture holds exactly the simulated packets' events (no packet limit cuts the last
    echo), the run it recorded is the source's, and its ground truth matches the capture with
    no error (expected: compare_to_truth's ok and a zero max_error, events equal to the run's
    n_events)."""
    out = tmp_path / "sim.lsc"
    source = SimulatedSource("gem-64", packets=30, engine="model")
    outcome = record(source, str(out), limits=session.Limits(packets=30))
    assert outcome.exit_status == 0 and outcome.events == source.port.run.n_events
    with capfile.open_capture(out) as cap:
        events = cap.events()
        assert cap.metadata["label"] == "gem-64"
        assert cap.markers == simbench.load_profile("gem-64").markers
        assert cap.metadata["instrument"]["simulated"] is True
        truth = cap.truth()["simbench"]
    check = simbench.compare_to_truth(events.time, events.channel, events.rising, truth)
    assert check["ok"] and check["max_error"] == 0, check


def test_config_label_wins_over_the_simulated_bench(tmp_path):
    out = tmp_path / "sim.lsc"
    config = session.CaptureConfig()
    config.label = "mine"
    record(SimulatedSource("el-so-64", packets=5, engine="model"), str(out), config=config)
    with capfile.open_capture(out) as cap:
        assert cap.metadata["label"] == "mine"


def test_existing_output_is_refused_before_the_simulation_starts(tmp_path):
    out = tmp_path / "taken.lsc"
    out.write_bytes(b"keep")
    source = SimulatedSource("gem-64", packets=5, engine="model")
    with pytest.raises(LatscopeError, match="taken.lsc"):
        record(source, str(out))
    assert source.port is None and out.read_bytes() == b"keep"


def test_port_source_stops_when_asked(tmp_path):
    """A pty instrument that never runs out of events: the ``stop`` callable ends the capture,
    whose file is finalised with that reason."""
    n = 10 ** 6
    base = np.arange(n, dtype=np.int64) * 2000
    dev = PtyDevice(EmulatedInstrument(np.stack([base, base + 100], 1).ravel(),
                                       np.zeros(2 * n, np.uint8),
                                       np.tile(np.array([True, False]), n), channels=ROLES),
                    frames_per_second=200).start()
    seen = []

    def stop():
        seen.append(1)
        return "stopped by the test" if len(seen) > 3 else None
    try:
        out = tmp_path / "port.lsc"
        outcome = record(dev.path, str(out), stop=stop)
    finally:
        dev.close()
    assert outcome.reason == "stopped by the test" and outcome.exit_status == 0
    with capfile.open_capture(out) as cap:
        assert cap.note["reason"] == "stopped by the test"
