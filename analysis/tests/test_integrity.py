"""Damaged and unfinished inputs are named next to the figures made from them (issue 9 item 2):
``analyze``, ``compare`` and ``report`` warn, and the JSON and the API carry the facts."""

import json
import os

import pytest

from latscope.analysis import api
from latscope.cli import main

DAMAGED = os.path.join(os.path.dirname(__file__), "..", "..", "fixtures", "damaged")


def _fixture(name):
    path = os.path.join(DAMAGED, name)
    if not os.path.exists(path):
        pytest.skip(f"{path} absent (fixtures/damaged is part of the source tree)")
    return path


def test_integrity_facts_and_note():
    intact = api.analyze_file(_fixture("intact.lsc"))
    assert intact.integrity["damaged"] is False and intact.integrity["finalised"] is True
    assert api.integrity_note(intact) == ""
    bitflip = api.analyze_file(_fixture("bitflip.lsc"))
    assert bitflip.integrity["damaged"] and bitflip.integrity["finalised"]
    assert bitflip.integrity["regions"] == 1 and bitflip.integrity["skipped_bytes"] == 10024
    assert "input damaged: 1 damaged region(s)" in api.integrity_note(bitflip)
    unfinished = api.analyze_file(_fixture("unfinished.lsc"))
    assert api.integrity_note(unfinished).startswith(f"{unfinished.label}: input not finalised")
    # a damaged region is a loss like any other: the analysis never pairs across it
    assert len(bitflip.result.losses) == len(intact.result.losses) + 1


def test_compare_and_report_warn(tmp_path, capsys):
    assert main(["compare", _fixture("intact.lsc"), _fixture("bitflip.lsc"),
                 _fixture("killed.lsc")]) == 0
    err = [line for line in capsys.readouterr().err.splitlines() if "warning" in line]
    assert len(err) == 2
    assert err[0].startswith("latscope compare: warning: ") and "bitflip.lsc" in err[0]
    assert "killed.lsc" in err[1] and "truncated" in err[1] and "not finalised" in err[1]
    assert main(["compare", _fixture("intact.lsc"), _fixture("bitflip.lsc"), "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert [i["integrity"]["damaged"] for i in out["inputs"]] == [False, True]
    assert main(["report", _fixture("unfinished.lsc"), "-o", str(tmp_path / "r")]) == 0
    err = capsys.readouterr().err
    assert "latscope report: warning: " in err and "input not finalised" in err
    # the report says so at the top and next to that capture's figures, in both forms
    md = (tmp_path / "r" / "report.md").read_text()
    html = (tmp_path / "r" / "report.html").read_text()
    for text in (md, html):     # once in the inputs' warnings, then beside every figure
        assert text.count("fixture: input not finalised") == 1
        assert text.count("Made from capture(s) with warnings: fixture") >= 2
    assert main(["analyze", _fixture("bitflip.lsc"), "--json"]) == 0
    captured = capsys.readouterr()
    assert json.loads(captured.out)["integrity"]["regions"] == 1
    assert "latscope analyze: warning: " in captured.err
