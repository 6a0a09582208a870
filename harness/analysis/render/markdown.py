"""report.md: the verdict screen, the figure, every section of the report, then every seed's values.

The same sections as the terminal (report.py), written as markdown.
"""

from __future__ import annotations

from harness.analysis.render.report import Section, headline, sections
from harness.analysis.render.summary import Fmt, title as _title
from harness.results import atomic_write


# -- markdown -----------------------------------------------------------------------------------


def markdown(analysis: dict, figure: str | None = "analysis.png") -> str:
    """report.md: the verdict screen, the figure, every section, then every seed's values."""
    from harness.analysis.render.summary import lines as screen

    lines = [f"# Analysis: {analysis.get('experiment')}", "", "```text", *screen(analysis), "```", "",
             headline(analysis), ""]
    if figure:
        lines += [f"![{_cell(_title(analysis))}]({figure})", ""]
    for s in [*sections(analysis), per_seed(analysis)]:
        lines += [f"## {s.title}", ""]
        if s.rows:
            header = s.columns if s.show_header else [""] * len(s.columns)
            lines.append("| " + " | ".join(_cell(c) for c in header) + " |")
            lines.append("|" + "---|" * len(header))
            lines += ["| " + " | ".join(_cell(c) for c in row) + " |" for row in s.rows]
            lines.append("")
        for note in s.notes:
            lines += [f"**{note}**" if note.startswith("verdict") else note, ""]
    return "\n".join(lines)


def per_seed(analysis: dict) -> Section:
    """Every seed's value per arm and its difference with the baseline."""
    f = Fmt(analysis)
    base = analysis["baseline"]
    arms = analysis["arms"]
    by_arm = {name: dict(zip(map(str, a.get("seeds", [])), a.get("values", []))) for name, a in arms.items()}
    others = [name for name in arms if name != base]
    seeds = []
    for a in arms.values():
        seeds += [str(x) for x in a.get("seeds", []) if str(x) not in seeds]
    s = Section("Per seed", ["seed", *arms, *[f"{o} - {base}" for o in others]])
    for seed in seeds:
        row = [seed] + [f.value(by_arm[name].get(seed)) for name in arms]
        for o in others:
            a, b = by_arm[base].get(seed), by_arm[o].get(seed)
            row.append(f.signed(b - a) if a is not None and b is not None else "—")
        s.rows.append(row)
    return s


def _cell(text: str) -> str:
    return str(text).replace("|", "\\|").replace("\n", " ")


def write_markdown(analysis: dict, path) -> None:
    text = markdown(analysis)
    atomic_write(path, lambda f: f.write(text.encode()))
