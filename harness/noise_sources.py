"""``python -m harness.noise_sources``: the command; the tool lives in harness/tools/noise/noise_sources.py."""

import sys

from harness.tools.noise.noise_sources import main

if __name__ == "__main__":
    sys.exit(main())
