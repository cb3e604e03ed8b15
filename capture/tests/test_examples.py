"""Example captures: fixtures from the source tree, else simulated now."""

from latscope.capture.files.capfile import open_capture, truth_path
from latscope.capture.sim import examples


def test_fixture_from_the_source_tree():
    paths, provenance = examples.example_captures(["gem-64"])
    assert provenance == {"gem-64": "fixture"}
    assert paths[0].endswith("fixtures/bench/gem-64.lsc")


def test_simulated_now_without_fixtures(tmp_path, monkeypatch):
    monkeypatch.setattr(examples, "fixture_directory", lambda: None)
    paths, provenance = examples.example_captures(["el-dm-64"], packets=40, directory=tmp_path)
    assert provenance == {"el-dm-64": "simulated now"}
    assert paths == [str(tmp_path / "el-dm-64.lsc")]
    with open_capture(paths[0]) as cap:
        assert cap.metadata["label"] == "el-dm-64"
        assert cap.metadata["simbench"]["profile"] == "el-dm-64"
        assert cap.n_events > 0
    assert (tmp_path / "el-dm-64.lsc.truth.npz").is_file()
    assert truth_path(paths[0]) == str(tmp_path / "el-dm-64.lsc.truth.npz")
