"""``harness.lightning``: the Lightning way in (``pip install "harness[lightning]"``).

``harness.lightning.Callback()`` in a Trainer's callbacks records the fit through the unit's Run
(harness/integrations/lightning.py says what it records); ``train.fn=harness.lightning.fit`` runs a
LightningModule and a DataModule given as ``_target_`` nodes in train.kwargs, with no script.
"""

from harness.integrations.lightning import Callback, HarnessLightningError, fit, print_once  # noqa: F401

__all__ = ["Callback", "HarnessLightningError", "fit", "print_once"]
