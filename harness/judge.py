"""``python -m harness.judge``: the command; the tool lives in harness/tools/judge/cli.py."""

import sys

from harness.tools.judge.cli import main

if __name__ == "__main__":
    sys.exit(main())
