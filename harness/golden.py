"""``python -m harness.golden``: the command; the tool lives in harness/tools/golden/golden.py."""

import sys

from harness.tools.golden.golden import main

if __name__ == "__main__":
    sys.exit(main())
