"""python -m harness.ledger: see harness/ledger/cli.py."""

import sys

from harness.ledger.cli import main

sys.exit(main())
