"""pytest plugin: measure latency around a test, store the run, gate it (``docs/ci.md``).

Registered through the ``pytest11`` entry point, so any project that installs latscope has the
fixture ``latscope_run``. It starts a capture when the test starts and stops it when the test
ends, analyses the capture, appends it to a results store (``--latscope-store DIR``) with the
session's labels (``--latscope-label commit=abc``), and gates it against the runs a baseline
condition selects (``--latscope-baseline "commit='main'"``) with a budget
(``--latscope-budget FILE.toml``). A regression fails the test; an undecidable gate fails it
only with ``--latscope-strict``. ``--latscope-junit FILE`` writes every gate's checks as JUnit
XML, one file for the session (under pytest-xdist one per worker, ``FILE.gw0.xml`` ...).

The capture comes from a live instrument (``--latscope-port DEVICE``: ``latscope capture`` runs
in a child process for the length of the test and is stopped with SIGINT, which finalises its
file) or, by default, from the simulated bench (``--latscope-sim PROFILE``, ``gem-64``).
A test picks its own with the marker ``@pytest.mark.latscope(profile=..., packets=...,
measures=[...], labels={...})``. The test may also finish early and assert on the result::

    def test_echo_latency(latscope_run):
        send_udp_echoes()                       # the DUT works while the capture runs
        result = latscope_run.finish()          # stop, analyse, store, gate
        assert result.verdict != "regression", result.text

Nothing here runs unless a test asks for the fixture: the plugin's import is light and its
options do nothing by themselves.
"""

import dataclasses
import os
import signal
import subprocess
import sys
import xml.etree.ElementTree as ET

import pytest

from latscope import LatscopeError

__all__ = ["LatencyRun", "RunOutcome", "SimulatedSource", "LiveSource", "latscope_run"]

_OUTCOMES = pytest.StashKey()


def pytest_addoption(parser):
    group = parser.getgroup("latscope", "latency measurement around tests (latscope)")
    group.addoption("--latscope-store", metavar="DIR",
                    help="results store to append each measured test's run to")
    group.addoption("--latscope-label", action="append", default=[], metavar="KEY=VALUE",
                    help="label of every run this session stores (repeatable), e.g. commit=abc")
    group.addoption("--latscope-baseline", metavar="COND",
                    help="gate each run against the store's runs matching this SQL condition "
                         "(and the same test), e.g. \"commit='main'\"")
    group.addoption("--latscope-budget", metavar="FILE.toml",
                    help="gate budget (docs/gate.md); default +5 %% at p50 and p99")
    group.addoption("--latscope-junit", metavar="FILE.xml",
                    help="write every gate's checks as JUnit XML")
    group.addoption("--latscope-strict", action="store_true",
                    help="fail a test whose gate is undecidable (too few packets)")
    group.addoption("--latscope-port", metavar="DEVICE",
                    help="capture from this instrument (default: the simulated bench)")
    group.addoption("--latscope-config", metavar="FILE.toml",
                    help="capture config for --latscope-port")
    group.addoption("--latscope-sim", default="gem-64", metavar="PROFILE",
                    help="simulated-bench profile when no port is given (default gem-64)")
    group.addoption("--latscope-seed", type=int, default=0, metavar="N",
                    help="simulated-bench seed (default 0)")


def pytest_configure(config):
    config.addinivalue_line(
        "markers", "latscope(profile=None, packets=2000, measures=None, labels=None, seed=None): "
                   "how the latscope_run fixture measures this test")
    config.stash[_OUTCOMES] = []


def pytest_sessionfinish(session):
    path = session.config.getoption("--latscope-junit")
    outcomes = session.config.stash.get(_OUTCOMES, [])
    worker = getattr(session.config, "workerinput", {}).get("workerid")
    if path and worker:         # pytest-xdist: one file per worker, never one overwriting another
        stem, ext = os.path.splitext(path)
        path = f"{stem}.{worker}{ext}"
    if path and outcomes:
        write_junit(outcomes, path)


@dataclasses.dataclass
class RunOutcome:
    """What one measured test gave: the capture, the stored run (if stored), the gate result
    (if gated), and the gate's one-screen text."""
    test: str
    capture: str
    run_id: str | None = None
    gate: object = None
    text: str = ""

    @property
    def verdict(self):
        return self.gate.verdict if self.gate is not None else "not gated"


class SimulatedSource:
    """Capture from the simulated bench's DUT model (no gateware): ``stop`` writes the capture
    of ``packets`` packets of ``profile``."""

    def __init__(self, profile, packets, seed=0):
        self.profile, self.packets, self.seed = profile, packets, seed

    def start(self, path):
        self.path = path

    def stop(self):
        from latscope.capture.files import capfile
        from latscope.capture.sim import simbench  # the simulator: only when a test asks
        run = simbench.simulate(self.profile, self.packets, seed=self.seed)
        t = run.truth
        meta = {"tick_hz": run.meta["tick_hz"], "label": self.profile,
                "channels": {str(k): v for k, v in enumerate(simbench.CHANNEL_ROLES)},
                "markers": run.meta["markers"], "frame_bytes": run.meta["frame_bytes"],
                "instrument": {"simulated": True, "board": "simulated"},
                "simbench": dict(run.meta, engine="none (events from the DUT model)")}
        with capfile.CaptureWriter(self.path, meta, fsync=False, overwrite=True) as writer:
            writer.append_events(t["time"], t["channel"], t["rising"])
        return self.path


class LiveSource:
    """Capture from an instrument: ``latscope capture --port DEVICE`` in a child process from
    ``start`` to ``stop`` (SIGINT: the command finalises its file and exits 0)."""

    def __init__(self, port, config=None, timeout=30.0):
        self.port, self.config, self.timeout = port, config, timeout
        self.process = None

    def start(self, path):
        self.path = path
        argv = [sys.executable, "-m", "latscope", "capture", "--port", self.port, "-o", path,
                "--force", "--quiet"]
        if self.config:
            argv += ["--config", self.config]
        self.process = subprocess.Popen(argv, stderr=subprocess.PIPE, text=True)

    def stop(self):
        self.process.send_signal(signal.SIGINT)
        try:
            _, err = self.process.communicate(timeout=self.timeout)
        except subprocess.TimeoutExpired:
            self.process.kill()
            raise LatscopeError(f"latscope capture on {self.port} did not stop within "
                                f"{self.timeout:g} s of SIGINT") from None
        if self.process.returncode != 0:
            raise LatscopeError(f"latscope capture on {self.port} failed (exit "
                                f"{self.process.returncode}): {err.strip()[-300:]}")
        return self.path


class LatencyRun:
    """The ``latscope_run`` fixture's object: a capture running for the test's length."""

    def __init__(self, test, source, folder, *, store=None, labels=None, baseline=None,
                 budget=None, measures=None):
        self.test, self.source, self.folder = test, source, folder
        self.store, self.labels, self.baseline = store, dict(labels or {}), baseline
        self.budget, self.measures = budget, measures
        self.outcome = None

    def start(self):
        name = "".join(c if c.isalnum() or c in "-_." else "_" for c in self.test)[-80:]
        self.source.start(os.path.join(self.folder, f"{name}.lsc"))

    def finish(self):
        """Stop the capture, analyse, store and gate (once); returns a :class:`RunOutcome`."""
        if self.outcome is not None:
            return self.outcome
        from latscope.analysis import api, gate, store  # analysis: only when a test measures
        path = self.source.stop()
        analysis = api.analyze_file(path, measures=self.measures, packets=True)
        outcome = RunOutcome(self.test, path)
        labels = {**self.labels, "test": self.test}
        if self.store:
            outcome.run_id = store.store_analysis(self.store, analysis, labels=labels).run_id
        if self.baseline and not self.store:
            raise LatscopeError("--latscope-baseline selects runs of a store: give "
                                "--latscope-store DIR")
        test = self.test.replace("'", "''")
        where = f"({self.baseline}) AND test = '{test}' AND run_id <> '{outcome.run_id}'"
        if self.baseline and not store.runs(self.store, where):
            outcome.text = f"no baseline run matches {self.baseline!r} yet: stored, not gated"
        elif self.baseline:
            budget = gate.load_budget(self.budget) if self.budget else gate.DEFAULT_BUDGET
            base = store.select(self.store, where=where, measures=self.measures)
            cand = store.analysis_latencies(analysis)
            if self.measures:
                cand = {k: v for k, v in cand.items() if k in self.measures}
            outcome.gate = gate.gate(base.latencies, cand, budget,
                                     baseline_label=self.baseline,
                                     candidate_label=outcome.run_id or path)
            outcome.text = gate.render_text(outcome.gate)
        self.outcome = outcome
        return outcome


def write_junit(outcomes, path):
    """One JUnit file for the session: every gated test's checks as test cases."""
    from latscope.analysis import gate  # analysis: only when a test measured
    root = ET.Element("testsuites", name="latscope")
    for o in outcomes:
        if o.gate is None:
            continue
        suite = ET.fromstring(gate.render_junit(o.gate, suite=f"latscope.{o.test}")
                              .split("\n", 1)[1])
        for ts in suite.findall("testsuite"):
            root.append(ts)
    for key in ("tests", "failures", "skipped", "errors"):
        root.set(key, str(sum(int(ts.get(key, 0)) for ts in root.findall("testsuite"))))
    ET.indent(root)
    with open(path, "w", encoding="utf-8") as f:
        f.write('<?xml version="1.0" encoding="UTF-8"?>\n' + ET.tostring(root, encoding="unicode"))


@pytest.fixture
def latscope_run(request, tmp_path):
    """A capture around the test; at its end the run is stored and gated (see the module)."""
    from latscope.analysis.store import parse_labels  # numpy: not in every pytest session
    config = request.config
    marker = request.node.get_closest_marker("latscope")
    spec = dict(marker.kwargs) if marker else {}
    port = config.getoption("--latscope-port")
    if port:
        source = LiveSource(port, config.getoption("--latscope-config"))
    else:
        seed = spec.get("seed", config.getoption("--latscope-seed"))
        source = SimulatedSource(spec.get("profile") or config.getoption("--latscope-sim"),
                                 int(spec.get("packets", 2000)), seed)
    labels = {**parse_labels(config.getoption("--latscope-label")), **spec.get("labels", {})}
    run = LatencyRun(request.node.name, source, str(tmp_path),
                     store=config.getoption("--latscope-store"), labels=labels,
                     baseline=config.getoption("--latscope-baseline"),
                     budget=config.getoption("--latscope-budget"),
                     measures=spec.get("measures"))
    run.start()
    yield run
    outcome = run.finish()
    config.stash[_OUTCOMES].append(outcome)
    if outcome.verdict == "regression":
        pytest.fail(f"latency regression\n{outcome.text}", pytrace=False)
    if outcome.verdict == "undecidable" and config.getoption("--latscope-strict"):
        pytest.fail(f"latency gate undecidable\n{outcome.text}", pytrace=False)
