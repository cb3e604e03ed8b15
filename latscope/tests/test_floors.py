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


def _modules():
    """(module name, path) of every library and command module, tests excluded."""
    for package, folder in PARTS.items():
        for path in sorted(folder.rglob("*.py")):
            rel = path.relative_to(folder)
            if "tests" in rel.parts or (package == "latscope" and rel.parts[0] in (
                    "gateware", "capture", "analysis")):
                continue
            parts = list(rel.with_suffix("").parts)
            if parts[-1] == "__init__":
                parts.pop()
            yield ".".join([package, *parts]), path


def imports_of(module, path):
    """Every absolute module name ``module`` imports, with the line it does so on."""
    tree = ast.parse(path.read_text(), filename=str(path))
    is_package = path.name == "__init__.py"
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found += [(alias.name, node.lineno) for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = module.split(".")
                base = base[:len(base) - node.level + (1 if is_package else 0)]
                name = ".".join(base + ([node.module] if node.module else []))
            else:
                name = node.module
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


@pytest.mark.parametrize("part", ["gateware", "capture", "analysis", "latscope"])
def test_no_module_imports_a_floor_above_it(part):
    prefix = "latscope" if part == "latscope" else f"latscope.{part}"
    bad = [line for name, path in _modules()
           if name == prefix or name.startswith(prefix + ".")
           if part != "latscope" or not name.startswith(("latscope.gateware", "latscope.capture",
                                                         "latscope.analysis"))
           for line in floor_violations(name, path)]
    assert bad == [], "\n".join(bad)


def test_the_checker_sees_imports_hidden_in_functions(tmp_path):
    source = tmp_path / "hidden.py"
    source.write_text("def f():\n    from latscope.analysis import api\n"
                      "def g():\n    import importlib\n"
                      "    importlib.import_module('latscope.cli')\n"
                      "from .. import stream\n")
    names = [name for name, _ in imports_of("latscope.capture.link.hidden", source)]
    assert names[:2] == ["latscope.analysis.api", "latscope.cli"] or \
        set(names) >= {"latscope.analysis.api", "latscope.cli"}
    assert "latscope.capture" in names or "latscope.capture.link.stream" in names
