"""``python -m harness.ledger`` where every tool is found (harness.tools.<tool>: parser, main); the
command itself lives with the ledger it reads (harness/ledger/cli.py)."""

from harness.ledger.cli import main, parser  # noqa: F401 - the tool's door
