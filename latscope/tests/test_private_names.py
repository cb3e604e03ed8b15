"""No module uses another module's ``_private`` names (docs/architecture.md's house rules).

A helper two modules share is public in a small module where it belongs. Every Python file of
the four parts, tests and fixtures included, is read as a syntax tree, and three kinds of use of a
latscope name that starts with one underscore (dunder names are the language's, not private) are
found:

* ``from latscope.x import _name`` (relative imports resolved);
* ``module._name`` where ``module`` was imported from latscope;
* ``setattr(module, "_name", ...)`` and its kin (``monkeypatch.setattr`` too), the string form.

A module's own private names, and a test's own ``_helper`` functions and fixtures, are its
business and are not looked at.
"""

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]

#: Folder of each installed part (pyproject.toml's package-dir).
PARTS = {"latscope.gateware": ROOT / "gateware", "latscope.capture": ROOT / "capture",
         "latscope.analysis": ROOT / "analysis", "latscope": ROOT / "latscope"}

#: Uses not mended yet, in modules being reworked on other branches: ``(file, use)``. Delete a
#: line when its use is gone; add none.
PENDING = {
    ("analysis/tests/test_report.py", "figures._step_path"),
    ("capture/tests/test_demo.py", "demo._run_all"),
    ("capture/tests/test_demo.py", "demo._verilator_binary"),
    ("gateware/tests/test_capture.py", "mc._selftest_pattern"),
    ("gateware/tests/test_capture.py", "mc._timeline"),
    ("gateware/tests/test_verilator.py", "vl._wrapper"),
    ("gateware/tests/test_verilator.py", "vl._compile_jobs"),
    ("latscope/tests/test_framebench.py", "fb._classes"),
    ("latscope/tests/test_framebench.py", "fb._Checker"),
    ("latscope/tests/test_framebench.py", "fb._account"),
}

ATTRIBUTE_CALLS = ("setattr", "getattr", "hasattr", "delattr")


def _files():
    """(dotted name, path) of every Python file of the parts, the root conftest and fixtures."""
    for package, folder in PARTS.items():
        for path in sorted(folder.rglob("*.py")):
            rel = path.relative_to(folder)
            if package == "latscope" and rel.parts[0] in ("gateware", "capture", "analysis"):
                continue
            parts = list(rel.with_suffix("").parts)
            if parts[-1] == "__init__":
                parts.pop()
            yield ".".join([package, *parts]), path
    yield "conftest", ROOT / "conftest.py"
    for path in sorted((ROOT / "fixtures").rglob("*.py")):
        rel = path.relative_to(ROOT / "fixtures").with_suffix("")
        yield ".".join(["fixtures", *rel.parts]), path


def is_private(name):
    """One leading underscore, and not a dunder."""
    return name.startswith("_") and not (name.startswith("__") and name.endswith("__"))


def _imported_from(module, is_package, node):
    """The absolute module name an ``ImportFrom`` node reads from."""
    if not node.level:
        return node.module or ""
    base = module.split(".")
    base = base[:len(base) - node.level + (1 if is_package else 0)]
    return ".".join(base + ([node.module] if node.module else []))


def private_uses(module, path):
    """Every use of another latscope module's private name in ``path``, as ``(line, use)``."""
    tree = ast.parse(path.read_text(), filename=str(path))
    is_package = path.name == "__init__.py"
    bound = set()                   # local names bound to something imported from latscope
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom):
            source = _imported_from(module, is_package, node)
            if source == "latscope" or source.startswith("latscope."):
                for alias in node.names:
                    if is_private(alias.name):
                        found.append((node.lineno, f"from {source} import {alias.name}"))
                    bound.add(alias.asname or alias.name)
        elif isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name == "latscope" or alias.name.startswith("latscope."):
                    if any(is_private(part) for part in alias.name.split(".")):
                        found.append((node.lineno, f"import {alias.name}"))
                    bound.add(alias.asname or alias.name.split(".")[0])
    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute) and is_private(node.attr):
            base = node.value
            while isinstance(base, ast.Attribute):
                base = base.value
            if isinstance(base, ast.Name) and base.id in bound:
                found.append((node.lineno, ast.unparse(node)))
        elif (isinstance(node, ast.Call) and len(node.args) >= 2
              and (getattr(node.func, "attr", None) in ATTRIBUTE_CALLS
                   or getattr(node.func, "id", None) in ATTRIBUTE_CALLS)
              and isinstance(node.args[0], ast.Name) and node.args[0].id in bound
              and isinstance(node.args[1], ast.Constant) and isinstance(node.args[1].value, str)
              and is_private(node.args[1].value)):
            found.append((node.lineno, f"{node.args[0].id}.{node.args[1].value}"))
    return found


def test_every_part_is_read():
    names = {name for name, _ in _files()}
    assert {"latscope.gateware.protocol", "latscope.capture.sim.sim_dut",
            "latscope.analysis.tests.test_pairing", "latscope.tests.test_private_names"} <= names


def test_no_module_uses_another_modules_private_names():
    bad = [f"{path.relative_to(ROOT)}:{line}: {use}"
           for module, path in _files()
           for line, use in private_uses(module, path)
           if (str(path.relative_to(ROOT)), use) not in PENDING]
    assert bad == [], "\n".join(bad)


def test_the_checker_sees_every_kind_of_use(tmp_path):
    source = tmp_path / "user.py"
    source.write_text("import os\n"
                      "from latscope.capture.sim import sim_dut as dut\n"
                      "from . import _helper, public\n"
                      "import latscope.gateware.model_capture as mc\n"
                      "def f(monkeypatch):\n"
                      "    dut._draw(mc.pipeline, os._exit, dut.__name__, _local)\n"
                      "    monkeypatch.setattr(public, '_cache', None)\n"
                      "    return mc.Entry._private\n")
    uses = [use for _, use in private_uses("latscope.capture.sim.user", source)]
    assert sorted(uses) == sorted(["from latscope.capture.sim import _helper", "dut._draw",
                                   "public._cache", "mc.Entry._private"])
