"""``python -m harness.audit``: the command; the tool lives in harness/tools/audit.py."""

import sys

from harness.tools.audit import main

if __name__ == "__main__":
    sys.exit(main())
