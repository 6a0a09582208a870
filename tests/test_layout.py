"""The house: rooms by concern, imports that run one way, no circles, no module past ~400 lines.

Read from the code's own imports (a lazy import inside a function counts: it is still a dependency
of one concern on another). The rooms, from the entry points down:

    entry (harness/*.py)  ->  tools  ->  experiment  ->  analysis, tracking  ->  ledger  ->  config  ->  integrations  ->  training  ->  results
                                                          stats (pure, imports nothing of ours)

builtin is a user of the public API (harness.Run, harness.instantiate), like a researcher's code.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

from .conftest import REPO

PACKAGE = REPO / "harness"
RANK = {"entry": 7, "tools": 6, "experiment": 5, "analysis": 4, "tracking": 4, "ledger": 3.5, "config": 3,
        "integrations": 2.5, "training": 2, "stats": 1, "results": 0}
ROOMS = ("config", "integrations", "training", "experiment", "analysis", "stats", "tracking", "tools", "builtin", "ledger")
MAX_TOP_LEVEL, MAX_LINES = 12, 400


def _modules() -> dict[str, Path]:
    out = {}
    for path in PACKAGE.rglob("*.py"):
        rel = path.relative_to(REPO).with_suffix("")
        if "conf" in rel.parts:
            continue
        parts = rel.parts[:-1] if rel.name == "__init__" else rel.parts
        out[".".join(parts)] = path
    return out


def _room(module: str) -> str:
    parts = module.split(".")
    if len(parts) == 1:
        return "facade"  # harness/__init__.py: sets the environment, names the public API lazily
    if parts[1] in ROOMS:
        return parts[1]
    return "results" if parts[1] == "results" else "entry"


def _imports(modules) -> dict[str, set[str]]:
    """module -> the harness modules it imports (``from harness import x`` names module harness.x)."""
    def resolve(name):
        while name and name not in modules:
            name = name.rpartition(".")[0]
        return name or None

    edges = {}
    for module, path in modules.items():
        found = set()
        package = module if path.name == "__init__.py" else module.rpartition(".")[0]
        for node in ast.walk(ast.parse(path.read_text())):
            names = []
            if isinstance(node, ast.Import):
                names = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom):
                base = node.module or ""
                if node.level:
                    up = package.split(".")[: len(package.split(".")) - (node.level - 1)]
                    base = ".".join(up + ([node.module] if node.module else []))
                names = [f"{base}.{a.name}" if f"{base}.{a.name}" in modules else base for a in node.names]
            for name in names:
                target = resolve(name) if name.startswith("harness") else None
                if target and target != module:
                    found.add(target)
        edges[module] = found
    return edges


def test_imports_run_one_way_from_the_entry_points_down():
    modules = _modules()
    upward = []
    for module, targets in _imports(modules).items():
        room = _room(module)
        for target in targets:
            other = _room(target)
            if other == "facade" or other == room:
                continue
            if room == "builtin":  # a user of the public API: the facade only, or the Run's room
                ok = other in ("training", "results")
            else:
                ok = other != "builtin" and RANK[other] < RANK[room]
            if not ok:
                upward.append(f"{module} ({room}) imports {target} ({other})")
    assert not upward, "imports that run up or across the rooms:\n" + "\n".join(sorted(upward))


def test_no_import_circle():
    edges = _imports(_modules())
    index, low, stack, on, circles = {}, {}, [], set(), []

    def strong(v, counter=[0]):  # Tarjan's strongly connected components
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on.add(v)
        for w in edges[v]:
            if w not in index:
                strong(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                circles.append(sorted(component))

    for v in edges:
        if v not in index:
            strong(v)
    assert not circles, f"import circles: {circles}"


def test_rooms_say_what_they_own_and_modules_stay_short():
    top = [p.name for p in PACKAGE.glob("*.py")]
    assert len(top) <= MAX_TOP_LEVEL, f"{len(top)} modules side by side in harness/: {sorted(top)}"
    for room in ROOMS:
        doc = ast.get_docstring(ast.parse((PACKAGE / room / "__init__.py").read_text())) or ""
        assert "Owns:" in doc or room == "stats", f"harness/{room}/__init__.py says nothing of what it owns"
        named = set(re.findall(r"(?<![\w.])(\w+\.py)\b", doc))  # plan.py is not named by sequential_plan.py
        unnamed = [p.name for p in (PACKAGE / room).glob("*.py") if p.name != "__init__.py" and p.name not in named]
        assert not unnamed, f"harness/{room}/__init__.py does not say what {unnamed} own"
    long = {str(p.relative_to(REPO)): n for p in PACKAGE.rglob("*.py")
            if (n := len(p.read_text().splitlines())) > MAX_LINES}
    assert not long, f"modules over {MAX_LINES} lines: {long}"


def test_the_tool_commands_are_entry_points_without_logic():
    for tool in ("analyze", "diff", "golden", "noise_audit", "audit"):
        tree = ast.parse((PACKAGE / f"{tool}.py").read_text())
        defined = [n.name for n in tree.body if isinstance(n, (ast.FunctionDef, ast.ClassDef))]
        assert defined == [], f"harness/{tool}.py defines {defined}: its logic belongs in harness/tools/{tool}.py"
