"""``python -m harness.analyze``: the command; the tool lives in harness/tools/analyze.py."""

import sys

from harness.tools.analyze import main

if __name__ == "__main__":
    sys.exit(main())
