"""``python -m harness.diff``: the command; the tool lives in harness/tools/diff/diff.py."""

import sys

from harness.tools.diff.diff import main

if __name__ == "__main__":
    sys.exit(main())
