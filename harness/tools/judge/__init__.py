"""The judge for research loops: one keep / discard / undecided decision on a code change, as JSON.

Owns: cli.py (``python -m harness.judge``: the arguments, the run, the JSON and exit code), baseline.py
(the results folder of a baseline revision and config, whose baseline units later judgements reuse),
kept.py (a kept WORKTREE candidate's units, reused as its commit's baseline units when the commit holds
the judged files), verdict.py (the sequential decision read as keep / discard / undecided), online.py (the judgement's
test level from the ledger's online FDR, and its settlement).
"""

from harness.tools.judge.cli import main, parser  # noqa: F401 - the tool's door, as harness.tools.<tool> for the others
