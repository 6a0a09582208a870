"""The house: rooms by concern, imports that run one way, no circles, a module owns one concern.

Read from the code's own imports (a lazy import inside a function counts: it is still a dependency
of one concern on another). The rooms, from the entry points down:

    entry (harness/*.py)  ->  tools  ->  experiment  ->  analysis, tracking  ->  ledger  ->  config  ->  integrations  ->  training  ->  results
                                                          stats (pure, imports nothing of ours)

builtin is a user of the public API (harness.Run, harness.instantiate), like a researcher's code.

A module owns one concern: its docstring opens with one sentence that states it, it stays under a
generous size (past it, look for the second concern), and no room holds more modules side by side
than a reader takes in; the bounds are the ones ``../shared/tools/layout_check.py . harness 14 600``
checks.
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
MAX_SIDE_BY_SIDE, MAX_LINES = 14, 600
MAX_CONCERN = 400  # characters in a docstring's first sentence: one concern, stated, not a list of them
# Rooms still over MAX_SIDE_BY_SIDE while they are being split, with their counts today: a count may
# only go down, and a room leaves this list once it is under the bound
STILL_CROWDED: dict[str, int] = {}


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


def _first_sentence(doc: str) -> str:
    """The docstring's first sentence: up to the first full stop, question mark or blank line."""
    paragraph = " ".join(doc.split("\n\n")[0].split())
    return re.split(r"(?<=[.?!])\s", paragraph, maxsplit=1)[0]


def test_each_module_opens_by_stating_its_one_concern():
    silent, rambling = [], []
    for module, path in sorted(_modules().items()):
        doc = ast.get_docstring(ast.parse(path.read_text())) or ""
        first = _first_sentence(doc)
        if not first.strip():
            silent.append(module)
        elif len(first) > MAX_CONCERN:
            rambling.append(f"{module} ({len(first)} characters)")
    assert not silent, f"modules whose docstring does not say what they own: {silent}"
    assert not rambling, (f"modules whose first sentence runs past {MAX_CONCERN} characters (one concern, "
                          f"stated; the rest belongs in the paragraphs after it): {rambling}")


def test_no_module_outgrows_its_concern():
    long = {str(p.relative_to(REPO)): n for p in _modules().values() if (n := len(p.read_text().splitlines())) > MAX_LINES}
    assert not long, f"modules over {MAX_LINES} lines (look for a second concern and split by it): {long}"


def _side_by_side() -> dict[str, int]:
    """folder -> its modules side by side, as layout_check counts them (no __init__ or __main__)."""
    rooms: dict[str, int] = {}
    for path in _modules().values():
        if path.name not in ("__init__.py", "__main__.py"):
            room = path.parent.relative_to(REPO).as_posix()
            rooms[room] = rooms.get(room, 0) + 1
    return rooms


def test_no_room_holds_more_modules_side_by_side_than_a_reader_takes_in():
    crowded = {room: n for room, n in _side_by_side().items()
               if n > MAX_SIDE_BY_SIDE and n > STILL_CROWDED.get(room, 0)}
    assert not crowded, (f"rooms over {MAX_SIDE_BY_SIDE} modules side by side (group them into sub-rooms by "
                         f"concern): {crowded}")
    split = sorted(room for room in STILL_CROWDED if _side_by_side().get(room, 0) <= MAX_SIDE_BY_SIDE)
    assert not split, f"{split} now hold at most {MAX_SIDE_BY_SIDE} modules: take them off STILL_CROWDED"


# Public doors that are modules, not packages: they name what their room defines
FACADES = {"harness.lightning", "harness.hf"}
# Names still taken from a module that only imports them, while the rooms that hold them are being
# rearranged: none may be added, and one leaves this list once its importers use the defining module
STILL_REEXPORTED = {
    "harness.experiment.resume.lock_timeout_problem", "harness.experiment.adaptive.sequential.IdentityWatch",
    "harness.experiment.adaptive.sequential.identity_stop",
}


def _defined(path: Path) -> set[str]:
    """The names a module defines at its top level (functions, classes, assignments, also under if/try)."""
    names = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            names.add(node.name)
        elif isinstance(node, (ast.Assign, ast.AnnAssign, ast.AugAssign)):
            for target in node.targets if isinstance(node, ast.Assign) else [node.target]:
                names |= {n.id for n in ast.walk(target) if isinstance(n, ast.Name)}
    return names


def test_one_import_path_per_name():
    """A name is imported from the module that defines it, or from its room's door (an __init__, a
    facade): never from a module that only imports it too."""
    modules = _modules()
    defined = {m: _defined(p) for m, p in modules.items() if p.name != "__init__.py" and m not in FACADES}
    found = set()
    for folder in ("harness", "hydra_plugins", "scripts", "tests"):
        for path in (REPO / folder).rglob("*.py"):
            for node in ast.walk(ast.parse(path.read_text())):
                if isinstance(node, ast.ImportFrom) and not node.level and node.module in defined:
                    found |= {f"{node.module}.{a.name}" for a in node.names
                              if a.name not in defined[node.module] and f"{node.module}.{a.name}" not in modules}
    new = sorted(found - STILL_REEXPORTED)
    assert not new, f"names imported from a module that does not define them (use the defining module): {new}"
    gone = sorted(STILL_REEXPORTED - found)
    assert not gone, f"{gone} are imported from their own modules now: take them off STILL_REEXPORTED"


def test_the_tool_commands_are_entry_points_without_logic():
    for tool in ("analyze", "diff", "golden", "noise_audit", "audit"):
        tree = ast.parse((PACKAGE / f"{tool}.py").read_text())
        defined = [n.name for n in tree.body if isinstance(n, (ast.FunctionDef, ast.ClassDef))]
        assert defined == [], f"harness/{tool}.py defines {defined}: its logic belongs in harness/tools/{tool}.py"
