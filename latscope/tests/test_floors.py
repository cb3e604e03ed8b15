"""The floors follow the data: gateware < capture < analysis < commands.

Every module's imports are read from its syntax tree, at any depth (inside functions too), with
relative imports resolved and ``importlib.import_module("...")`` calls with a literal name
counted, so a floor cannot reach upwards by hiding an import in a function. The rules are those
of ``docs/architecture.md`` ("Floors"):

1. ``latscope.gateware`` imports no host part: nothing from capture, analysis or the command floor.
2. ``latscope.capture`` imports nothing from analysis or the command floor.
3. ``latscope.analysis`` imports from capture only what every layer hands on
   (``capture.events``) and the file readers (``capture.files``), never the link, the simulated
   bench or the recorder; nothing from the command floor.
4. Only the command floor (``latscope.cli``, ``latscope.commands``, ``latscope.bench`` and the
   pytest plugin) imports the command floor.
The root package (``latscope``: errors, version) and ``latscope.userio`` are the basement every
floor may use.

The same syntax trees, tests and fixtures included, show the house rule on private names: no
module uses another latscope module's ``_name`` (one leading underscore; dunders are the
language's). A helper two modules share is public in a small module where it belongs. Found are
``from latscope.x import _name``, ``module._name`` on a name imported from latscope, and the
string form ``setattr(module, "_name", ...)`` (``monkeypatch.setattr`` too); a module's own
private names, and a test's own helpers and fixtures, are its business.
"""

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]

#: Folder of each installed part (pyproject.toml's package-dir).
PARTS = {"latscope.gateware": ROOT / "gateware", "latscope.capture": ROOT / "capture",
         "latscope.analysis": ROOT / "analysis", "latscope": ROOT / "latscope"}

COMMAND_FLOOR = ("latscope.cli", "latscope.commands", "latscope.bench", "latscope.pytest_plugin",
                 "latscope.__main__")

#: What the analysis floor may take from capture.
ANALYSIS_MAY_USE = ("latscope.capture.events", "latscope.capture.files")


def _modules(*, tests=False):
    """(module name, path) of every library and command module; with ``tests``, the parts' tests
    too, and the root conftest and the fixtures' scripts."""
    for package, folder in PARTS.items():
        for path in sorted(folder.rglob("*.py")):
            rel = path.relative_to(folder)
            if (not tests and "tests" in rel.parts) or (package == "latscope" and rel.parts[0] in (
                    "gateware", "capture", "analysis")):
                continue
            parts = list(rel.with_suffix("").parts)
            if parts[-1] == "__init__":
                parts.pop()
            yield ".".join([package, *parts]), path
    if tests:
        yield "conftest", ROOT / "conftest.py"
        for path in sorted((ROOT / "fixtures").rglob("*.py")):
            rel = path.relative_to(ROOT / "fixtures").with_suffix("")
            yield ".".join(["fixtures", *rel.parts]), path


def _imported_from(module, is_package, node):
    """The absolute module name an ``ImportFrom`` node reads from."""
    if not node.level:
        return node.module or ""
    base = module.split(".")
    base = base[:len(base) - node.level + (1 if is_package else 0)]
    return ".".join(base + ([node.module] if node.module else []))


def imports_of(module, path):
    """Every absolute module name ``module`` imports, with the line it does so on."""
    tree = ast.parse(path.read_text(), filename=str(path))
    is_package = path.name == "__init__.py"
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found += [(alias.name, node.lineno) for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            name = _imported_from(module, is_package, node)
            # ``from latscope.capture.link import stream`` imports the submodule ``stream``
            submodules = [f"{name}.{alias.name}" for alias in node.names
                          if _is_module(f"{name}.{alias.name}")]
            found += [(sub, node.lineno) for sub in submodules] or [(name, node.lineno)]
        elif (isinstance(node, ast.Call) and node.args
              and isinstance(node.args[0], ast.Constant) and isinstance(node.args[0].value, str)
              and ((isinstance(node.func, ast.Attribute) and node.func.attr == "import_module")
                   or (isinstance(node.func, ast.Name) and node.func.id == "import_module"))):
            found.append((node.args[0].value, node.lineno))
    return found


def _is_module(name):
    """Whether ``name`` is one of latscope's modules or packages (not a name inside one)."""
    for package, folder in sorted(PARTS.items(), key=lambda item: -len(item[0])):
        if name == package or name.startswith(package + "."):
            rest = name[len(package):].lstrip(".").split(".") if name != package else []
            path = folder.joinpath(*rest) if rest else folder
            return path.with_suffix(".py").is_file() or (path / "__init__.py").is_file()
    return False


def _within(name, prefixes):
    return any(name == p or name.startswith(p + ".") for p in prefixes)


def floor_violations(module, path):
    """The imports of ``module`` that reach a floor above it, as ``"path:line: what"`` lines."""
    bad = []
    for name, line in imports_of(module, path):
        if not name.startswith("latscope"):
            continue
        where = f"{path.relative_to(ROOT)}:{line}: imports {name}"
        if _within(module, COMMAND_FLOOR):
            continue
        if _within(name, COMMAND_FLOOR):
            bad.append(f"{where} (the command floor)")
        elif module.startswith("latscope.gateware") and _within(
                name, ("latscope.capture", "latscope.analysis")):
            bad.append(f"{where} (gateware imports no host part)")
        elif module.startswith("latscope.capture") and _within(name, ("latscope.analysis",)):
            bad.append(f"{where} (capture is below analysis)")
        elif (module.startswith("latscope.analysis") and _within(name, ("latscope.capture",))
              and not _within(name, ANALYSIS_MAY_USE) and name != "latscope.capture"):
            bad.append(f"{where} (analysis uses only capture.events and capture.files)")
    return bad


def test_every_module_is_found():
    names = {name for name, _ in _modules()}
    assert {"latscope.gateware.protocol", "latscope.cli"} <= names
    assert not any(".tests" in name for name in names)
    with_tests = {name for name, _ in _modules(tests=True)}
    assert names < with_tests and {"latscope.analysis.tests.test_pairing", "conftest"} <= with_tests


@pytest.mark.parametrize("part", ["gateware", "capture", "analysis", "latscope"])
def test_no_module_imports_a_floor_above_it(part):
    prefix = "latscope" if part == "latscope" else f"latscope.{part}"
    bad = [line for name, path in _modules()
           if name == prefix or name.startswith(prefix + ".")
           if part != "latscope" or not name.startswith(("latscope.gateware", "latscope.capture",
                                                         "latscope.analysis"))
           for line in floor_violations(name, path)]
    assert bad == [], "\n".join(bad)


def _example(tmp_path, *lines):
    """A module file of these lines, to show a checker."""
    source = tmp_path / "example.py"
    source.write_text("".join(line + "\n" for line in lines))
    return source


def test_the_checker_sees_imports_hidden_in_functions(tmp_path):
    source = _example(tmp_path, "def f():", "    from latscope.analysis import api",
                      "def g():", "    import importlib",
                      "    importlib.import_module('latscope.cli')", "from .. import stream")
    names = [name for name, _ in imports_of("latscope.capture.link.hidden", source)]
    assert names[:2] == ["latscope.analysis.api", "latscope.cli"] or \
        set(names) >= {"latscope.analysis.api", "latscope.cli"}
    assert "latscope.capture" in names or "latscope.capture.link.stream" in names


# --- Private names ------------------------------------------------------------------------------

ATTRIBUTE_CALLS = ("setattr", "getattr", "hasattr", "delattr")


def is_private(name):
    """One leading underscore, and not a dunder."""
    return name.startswith("_") and not (name.startswith("__") and name.endswith("__"))


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


def test_no_module_uses_another_modules_private_names():
    bad = [f"{path.relative_to(ROOT)}:{line}: {use}"
           for module, path in _modules(tests=True)
           for line, use in private_uses(module, path)]
    assert bad == [], "\n".join(bad)


def test_the_private_name_checker_sees_every_kind_of_use(tmp_path):
    source = _example(tmp_path, "import os", "from latscope.capture.sim import sim_dut as dut",
                      "from . import _helper, public",
                      "import latscope.gateware.model_capture as mc",
                      "def f(monkeypatch):",
                      "    dut._draw(mc.pipeline, os._exit, dut.__name__, _local)",
                      "    monkeypatch.setattr(public, '_cache', None)",
                      "    return mc.Entry._private")
    uses = [use for _, use in private_uses("latscope.capture.sim.user", source)]
    assert sorted(uses) == sorted(["from latscope.capture.sim import _helper", "dut._draw",
                                   "public._cache", "mc.Entry._private"])
