"""Run every notebook top to bottom (``make test``); a cell that raises fails the test. Each
``.ipynb`` is paired with a jupytext ``.py`` (percent format) for review: they must agree."""

import pathlib

import nbformat
import pytest

HERE = pathlib.Path(__file__).parent
NOTEBOOKS = sorted(HERE.glob("*.ipynb"))


def test_every_notebook_found():
    assert [p.stem for p in NOTEBOOKS] == ["01-quickstart", "02-compare-configurations",
                                           "03-jitter-and-tails", "04-stages-and-size",
                                           "05-sigrok", "06-frames-under-load"]


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.stem)
def test_paired_text_agrees(path):
    jupytext = pytest.importorskip("jupytext")
    text = jupytext.read(path.with_suffix(".py"))
    nb = nbformat.read(path, as_version=4)
    assert [(c.cell_type, c.source) for c in text.cells] == \
        [(c.cell_type, c.source) for c in nb.cells], \
        f"{path.name} and {path.with_suffix('.py').name} differ: run jupytext --to ipynb " \
        f"--update on the .py (docs/analysis.md, Notebooks)"


@pytest.mark.slow
@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.stem)
def test_notebook_runs(path):
    from nbclient import NotebookClient
    nb = nbformat.read(path, as_version=4)
    client = NotebookClient(nb, timeout=120, kernel_name="python3",
                            resources={"metadata": {"path": str(HERE)}})
    client.execute()       # raises CellExecutionError on the first failing cell
    errors = [o for c in nb.cells if c.cell_type == "code" for o in c.get("outputs", [])
              if o.get("output_type") == "error"]
    assert not errors
    assert any(c.get("outputs") for c in nb.cells if c.cell_type == "code")
