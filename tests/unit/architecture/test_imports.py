"""The import rule of DESIGN.md ("Layout"), checked on the source with ``ast``.

* ``_core`` imports nothing outside ``_core``; ``_redfish`` and ``_host`` import only ``_core``; ``_fleet`` imports
  ``_core`` and ``_redfish``; a stage package imports those four and itself, never another stage.
* No import cycle between module_utils files (function-local imports count).
* A function-local import of the collection's own code is a hidden dependency: it is allowed only where it is
  listed in ``LOCAL_IMPORTS`` with the reason.
* No module_utils file is over 500 lines.
* Modules and plugins import module_utils packages only through the same rule as a stage (they sit on top).
"""

import ast
import pathlib

ROOT = pathlib.Path(__file__).resolve().parents[3]
MU = ROOT / "plugins" / "module_utils"
PFX = "ansible_collections.symphony.cluster.plugins.module_utils"

BASE = {"_core", "_redfish", "_fleet", "_host"}
STAGES = {"_predeploy", "_provision", "_burnin", "_fabric", "_validation", "_fleet_audit"}
ALLOWED = {
    "_core": {"_core"},
    "_redfish": {"_core", "_redfish"},
    "_host": {"_core", "_host"},
    "_fleet": {"_core", "_redfish", "_fleet"},
}
ALLOWED.update({s: BASE | {s} for s in STAGES})

# (importing file relative to module_utils, imported dotted module) -> why it is imported inside a function.
LOCAL_IMPORTS: dict = {}

MAX_LINES = 500


def _files():
    return sorted(p for p in MU.rglob("*.py"))


def _dotted(path):
    rel = path.relative_to(MU).with_suffix("")
    parts = list(rel.parts)
    if parts[-1] == "__init__":
        parts = parts[:-1]
    return ".".join(parts)


def _resolve(path, node):
    """Dotted module_utils names (without PFX) an ImportFrom/Import node refers to, or []."""
    here = _dotted(path).split(".")
    is_pkg = path.name == "__init__.py"
    out = []
    if isinstance(node, ast.Import):
        for alias in node.names:
            if alias.name.startswith(PFX + "."):
                out.append(alias.name[len(PFX) + 1:])
        return out
    if node.level:
        base = here if is_pkg else here[:-1]
        base = base[: len(base) - (node.level - 1)] if node.level > 1 else base
        mod = ".".join(base + ([node.module] if node.module else []))
    elif node.module and (node.module == PFX or node.module.startswith(PFX + ".")):
        mod = node.module[len(PFX) + 1:] if node.module != PFX else ""
    else:
        return out
    for alias in node.names:
        cand = (mod + "." + alias.name) if mod else alias.name
        sub = MU.joinpath(*cand.split("."))
        out.append(cand if (sub.with_suffix(".py").exists() or sub.is_dir()) else mod)
    return [o for o in out if o]


def _imports(path):
    tree = ast.parse(path.read_text(), str(path))
    top = set(id(n) for n in tree.body)
    found = []
    for node in ast.walk(tree):
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            local = id(node) not in top and not _in_toplevel_block(tree, node)
            for mod in _resolve(path, node):
                found.append((mod, local, node.lineno))
    return found


def _in_toplevel_block(tree, target):
    """True when ``target`` sits in a module-level try/if (optional-dependency guards), not in a def."""
    for node in tree.body:
        if isinstance(node, (ast.Try, ast.If)):
            for sub in ast.walk(node):
                if sub is target:
                    return True
    return False


def _package(dotted):
    return dotted.split(".")[0]


def violations(files=None):
    files = files or _files()
    errors = []
    graph = {}
    for path in files:
        me = _dotted(path)
        pkg = _package(me) if me else ""
        rel = str(path.relative_to(MU))
        graph.setdefault(me, set())
        for mod, local, line in _imports(path):
            graph[me].add(mod)
            target = _package(mod)
            if pkg in ALLOWED and target not in ALLOWED[pkg]:
                errors.append("%s:%d imports %s (%s may import only %s)" % (rel, line, mod, pkg, sorted(ALLOWED[pkg])))
            if pkg and pkg not in ALLOWED:
                errors.append("%s: package %s is not in the layout of DESIGN.md" % (rel, pkg))
            if local and (rel, mod) not in LOCAL_IMPORTS:
                errors.append("%s:%d imports %s inside a function (undeclared; move it to the top)" % (rel, line, mod))
    # cycles (module level and local alike)
    state = {}

    def visit(node, stack):
        state[node] = 1
        for nxt in sorted(graph.get(node, ())):
            if nxt == node or nxt not in graph:
                continue
            if state.get(nxt) == 1:
                cycle = stack[stack.index(nxt):] + [nxt] if nxt in stack else [node, nxt]
                errors.append("import cycle: " + " -> ".join(cycle))
            elif not state.get(nxt):
                visit(nxt, stack + [nxt])
        state[node] = 2

    for node in sorted(graph):
        if not state.get(node):
            visit(node, [node])
    return errors


def test_import_rule_holds():
    errors = violations()
    assert errors == [], "\n".join(errors)


def test_no_module_utils_file_over_500_lines():
    long = ["%s: %d lines" % (p.relative_to(MU), n) for p in _files()
            for n in [len(p.read_text().splitlines())] if n > MAX_LINES]
    assert long == [], "\n".join(long)


def test_rule_catches_a_stage_importing_another(tmp_path, monkeypatch):
    """The checker itself: a fake tree where _provision imports _predeploy and _core imports a stage."""
    fake = tmp_path / "module_utils"
    for d in ("_core", "_predeploy", "_provision"):
        (fake / d).mkdir(parents=True)
        (fake / d / "__init__.py").write_text("")
    (fake / "_core" / "gate.py").write_text("from .._predeploy import stage\n")
    (fake / "_predeploy" / "stage.py").write_text("from .._core import gate\n")
    (fake / "_provision" / "stage.py").write_text(
        "from .._predeploy.stage import x\n\ndef f():\n    from .._core import gate\n")
    monkeypatch.setattr(__import__(__name__, fromlist=["MU"]), "MU", fake)
    errors = violations(sorted(fake.rglob("*.py")))
    text = "\n".join(errors)
    assert "_provision/stage.py:1 imports _predeploy.stage" in text
    assert "_core/gate.py:1 imports _predeploy.stage" in text
    assert "inside a function" in text
    assert any(e.startswith("import cycle") for e in errors)
