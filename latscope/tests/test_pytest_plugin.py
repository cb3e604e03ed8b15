"""The pytest plugin, run as CI runs it: pytest in a child process on a test that uses the
``latscope_run`` fixture, three sessions against one store (first run stored, same DUT gated
and passing, a slower DUT gated and failing), and the session's JUnit file parsed."""

import importlib.metadata
import os
import subprocess
import sys
import xml.etree.ElementTree as ET

import numpy as np
import pytest

from latscope import LatscopeError

pytest.importorskip("duckdb", reason="the results store needs duckdb")

MEASURED_TEST = '''
import numpy as np
import pytest

from latscope import LatscopeError

@pytest.mark.latscope(packets=1500, measures=["rx.udp"])
def test_echo(latscope_run):
    pass       # on the bench the DUT model runs; on hardware the test would send traffic here
'''


def _plugin_args():
    """``-p latscope.pytest_plugin`` unless the installed entry point already loads it."""
    names = {ep.value for ep in importlib.metadata.entry_points(group="pytest11")}
    return [] if "latscope.pytest_plugin" in names else ["-p", "latscope.pytest_plugin"]


def _pytest(folder, *args):
    env = dict(os.environ, PYTHONDONTWRITEBYTECODE="1")
    # each child its own --basetemp: children sharing the default one would prune this test's
    _pytest.calls = getattr(_pytest, "calls", 0) + 1
    basetemp = folder / f"basetemp-{_pytest.calls}"
    return subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider",
                           "-W", "error", *_plugin_args(), "--rootdir", str(folder),
                           "--basetemp", str(basetemp),
                           "-c", os.devnull, str(folder / "test_measured.py"), *args],
                          capture_output=True, text=True, env=env, cwd=folder, timeout=300)


def test_latency_run_stores_and_gates_in_process(tmp_path):
    from latscope.analysis import store
    from latscope.pytest_plugin import LatencyRun, SimulatedSource

    def measured(commit, profile, seed):
        run = LatencyRun("test_echo", SimulatedSource(profile, 1500, seed), str(tmp_path),
                         store=str(tmp_path / "store"), labels={"commit": commit},
                         baseline="commit='a'", measures=["rx.udp"])
        run.start()
        return run.finish()
    first = measured("a", "el-dm-64", 0)
    assert first.gate is None and "no baseline run matches" in first.text
    same = measured("b", "el-dm-64", 1)
    assert same.verdict == "pass" and same.run_id
    slower = measured("c", "gem-64", 0)
    assert slower.verdict == "regression"
    rows = store.runs(tmp_path / "store")
    assert [r["commit"] for r in rows] == ["a", "b", "c"]
    assert {r["test"] for r in rows} == {"test_echo"} and all(r["simulated"] for r in rows)


@pytest.mark.slow
def test_fixture_captures_stores_and_gates(tmp_path):
    (tmp_path / "test_measured.py").write_text(MEASURED_TEST)
    store_dir, junit = tmp_path / "store", tmp_path / "latscope.xml"
    # the baseline: the simulated bench's fastest MAC model; the candidate: a slower one
    first = _pytest(tmp_path, "--latscope-store", str(store_dir), "--latscope-label",
                    "commit=a", "--latscope-baseline", "commit='a'", "--latscope-sim",
                    "el-dm-64")
    assert first.returncode == 0, first.stdout + first.stderr
    same = _pytest(tmp_path, "--latscope-store", str(store_dir), "--latscope-label", "commit=b",
                   "--latscope-baseline", "commit='a'", "--latscope-seed", "1",
                   "--latscope-sim", "el-dm-64", "--latscope-junit", str(junit))
    assert same.returncode == 0, same.stdout + same.stderr
    root = ET.parse(junit).getroot()
    assert root.get("failures") == "0" and int(root.get("tests")) == 2   # +5 % at p50, p99
    slower = _pytest(tmp_path, "--latscope-store", str(store_dir), "--latscope-label",
                     "commit=c", "--latscope-baseline", "commit='a'", "--latscope-sim",
                     "gem-64", "--latscope-junit", str(junit))
    assert slower.returncode == 1, slower.stdout + slower.stderr
    assert "latency regression" in slower.stdout and "FAIL rx.udp" in slower.stdout
    assert int(ET.parse(junit).getroot().get("failures")) >= 1


@pytest.mark.slow
def test_live_source_runs_latscope_capture_for_the_tests_length(tmp_path):
    """The instrument path: ``latscope capture --port`` on the simulated bench's pseudo-terminal
    (reference-model engine), stopped with SIGINT once every simulated event has arrived."""
    import time

    from latscope.analysis import api
    from latscope.capture.files import capfile
    from latscope.capture.sim.ptyserve import PtyServer
    from latscope.capture.sim.simbench import open_engine, simulate
    from latscope.pytest_plugin import LiveSource

    run = simulate("gem-64", 500, seed=3)
    config = tmp_path / "capture.toml"
    config.write_text("[markers]\n" + "".join(f'{k} = "{v}"\n'
                                              for k, v in run.meta["markers"].items()))
    path = str(tmp_path / "live.lsc")
    with PtyServer(open_engine(run, "model")) as server:
        source = LiveSource(server.path, str(config))
        source.start(path)
        deadline = time.monotonic() + 120
        events = 0
        while events < run.n_events and time.monotonic() < deadline:
            time.sleep(0.5)
            if os.path.exists(path):
                try:
                    with capfile.open_capture(path) as cap:
                        events = cap.n_events
                except (LatscopeError, OSError):      # the header may not be written yet
                    events = 0
        assert source.stop() == path
    a = api.analyze_file(path, packets=True)
    assert a.stats["rx.udp"].n == 500
    truth = np.sort(run.truth["ticks/rx.udp"]) * (1e9 / run.meta["tick_hz"])
    assert np.array_equal(np.sort(a.latencies_ns("rx.udp")), truth)
