"""``python -m harness.noise_audit``: the command; the tool lives in harness/tools/noise/noise_audit.py."""

import sys

from harness.tools.noise.noise_audit import main

if __name__ == "__main__":
    sys.exit(main())
