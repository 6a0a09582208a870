"""``harness.lightning``: the Lightning way in (``pip install "harness[lightning]"``).

``harness.lightning.Callback()`` in a Trainer's callbacks records the fit through the unit's Run
(harness/integrations/lightning.py says what it records).
"""

from harness.integrations.lightning import Callback, HarnessLightningError, print_once  # noqa: F401

__all__ = ["Callback", "HarnessLightningError", "print_once"]
