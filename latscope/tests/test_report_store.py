"""``latscope report --store``: every capture the report analyses becomes one stored run."""

from pathlib import Path

from latscope.analysis import store
from latscope.cli import main

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures" / "bench"


def test_report_stores_one_labelled_run_per_capture(tmp_path):
    files = [str(FIXTURES / "gem-64.lsc"), str(FIXTURES / "el-dm-64.lsc")]
    assert main(["report", *files, "-o", str(tmp_path / "report"), "--store",
                 str(tmp_path / "store"), "--label", "commit=abc", "--explain", "0"]) == 0
    with store.connect(tmp_path / "store") as con:
        runs = con.execute("SELECT commit, source FROM runs ORDER BY source").fetchall()
        packets = con.execute("SELECT count(DISTINCT run_id) FROM packets "
                              "WHERE measure = 'rx.udp'").fetchone()[0]
    assert [r[0] for r in runs] == ["abc", "abc"]
    assert sorted(Path(r[1]).name for r in runs) == ["el-dm-64.lsc", "gem-64.lsc"]
    assert packets == 2


def test_report_label_without_store_is_one_line(tmp_path, capsys):
    assert main(["report", str(FIXTURES / "gem-64.lsc"), "-o", str(tmp_path / "r"),
                 "--label", "commit=abc"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err[-1].endswith("--label labels stored runs: give --store DIR too")
    assert not (tmp_path / "r").exists()
