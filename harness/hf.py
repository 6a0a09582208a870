"""``harness.hf``: the Hugging Face way in (``pip install "harness[hf]"``).

``harness.hf.Callback()`` in a Trainer's callbacks records the training through the unit's Run
(harness/integrations/hf.py says what it records).
"""

from harness.integrations.hf import Callback  # noqa: F401

__all__ = ["Callback"]
