"""The commands the docs show, read out of their fenced blocks and code spans (for
tests/test_docs_commands.py).

A command is a line of a fenced block that starts with ``python -m harness`` (after an optional
``$ `` prompt, ``VAR=value`` assignments and ``pip install -e . &&``), or an inline code span that
does and gives arguments (a bare ``python -m harness.analyze`` names the tool); a trailing ``\\``
continues a line on the next, and ``# ...`` ends it. In a block that uses ``$ `` prompts, only the
prompted lines are commands (the rest is their output). A line with a placeholder (``...``,
``<overrides>``, ``[--repeats K]``, ``OVERRIDE``) is a synopsis, not a command.

What a block promises is declared in the doc, on the line before its fence, visibly in the source:

    <!-- doc-test: e2e expect="verdict:" -->   run the block's first command at a tiny size; its
                                               output must contain the text (exit status 0, or exit=N)
    <!-- doc-test: gpu -->                     needs a GPU: checked here on the CPU (device=cpu),
                                               never run; each line says "GPU" where a reader sees it
Every other command is composed and passes the checks made before training (no training).
"""

from __future__ import annotations

import re
import shlex
from dataclasses import dataclass, field
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
MARKER = re.compile(r"<!--\s*doc-test:\s*(?P<body>.*?)\s*-->")
START = re.compile(r"^(?:pip install -e \. && )?(?P<env>(?:[A-Z_]+=\S+ )*)python -m (?P<module>harness[\w.]*)(?P<rest>.*)$")
INLINE = re.compile(r"`(python -m harness[^`]*)`")
PLACEHOLDER = re.compile(r"\.\.\.|…|(^|\s)(<[^>]*>|\[--?[\w-]+[^\]]*\]|OVERRIDES?|\[OVERRIDE)(\s|$)")


@dataclass
class DocCommand:
    path: str  # relative to the repository root
    line: int
    module: str  # harness, harness.analyze, ...
    args: list[str]
    env: dict[str, str] = field(default_factory=dict)
    marks: dict[str, str] = field(default_factory=dict)  # the block's doc-test marker
    first_in_block: bool = False
    raw: str = ""  # the line as the doc shows it, its comment included

    @property
    def id(self) -> str:
        return f"{self.path}:{self.line}"

    @property
    def text(self) -> str:
        return " ".join([*(f"{k}={v}" for k, v in self.env.items()), "python -m", self.module, *map(shlex.quote, self.args)])


def doc_files() -> list[Path]:
    return [REPO / "README.md", *sorted((REPO / "docs").glob("*.md")), *sorted((REPO / "examples").glob("*/README.md"))]


def parse_marks(body: str) -> dict[str, str]:
    """``e2e expect="verdict:" exit=0`` -> {"e2e": "", "expect": "verdict:", "exit": "0"}."""
    marks = {}
    for token in shlex.split(body):
        key, _, value = token.partition("=")
        marks[key] = value
    return marks


def _logical_lines(lines: list[tuple[int, str]]):
    """(first line number, text) with ``\\`` continuations joined."""
    out, start, buf = [], None, ""
    for number, text in lines:
        if start is None:
            start = number
        if text.rstrip().endswith("\\"):
            buf += text.rstrip()[:-1] + " "
            continue
        out.append((start, buf + text))
        start, buf = None, ""
    if buf:
        out.append((start, buf))
    return out


def commands_in(path: Path) -> list[DocCommand]:
    rel = str(path.relative_to(REPO))
    found, block, fence, marks, pending = [], None, None, {}, {}
    for number, raw in enumerate(path.read_text().splitlines(), 1):
        stripped = raw.strip()
        if block is None:
            m = MARKER.search(stripped)
            if m:
                pending = parse_marks(m.group("body"))
                continue
            if stripped.startswith(("```", "~~~")):
                block, fence, marks, pending = [], stripped[:3], pending, {}
            elif stripped:
                pending = {}  # a marker belongs to the fence right after it
                spans = [(number, span) for span in INLINE.findall(raw)]
                found += [c for c in _block_commands(rel, spans, {}) if c.args]  # a bare name is a mention
            continue
        if stripped.startswith(fence):
            found += _block_commands(rel, block, marks)
            block = None
            continue
        block.append((number, raw))
    return found


def _block_commands(rel: str, block, marks) -> list[DocCommand]:
    prompted = any(text.lstrip().startswith("$ ") for _, text in block)
    out = []
    for number, text in _logical_lines(block):
        text = text.strip()
        if prompted:
            if not text.startswith("$ "):
                continue
            text = text[2:]
        m = START.match(text)
        if not m:
            continue
        rest = shlex.split(m.group("rest"), comments=True)
        if PLACEHOLDER.search(" ".join(rest)):
            continue  # a synopsis
        env = dict(kv.split("=", 1) for kv in m.group("env").split())
        out.append(DocCommand(rel, number, m.group("module"), rest, env, marks, first_in_block=not out, raw=text))
    return out


def all_commands() -> list[DocCommand]:
    return [c for path in doc_files() for c in commands_in(path)]
