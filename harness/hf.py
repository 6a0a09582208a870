"""``harness.hf``: the Hugging Face way in (``pip install "harness[hf]"``).

``harness.hf.Callback()`` in a Trainer's callbacks records the training through the unit's Run
(harness/integrations/hf.py says what it records); ``train.fn=harness.hf.fit`` runs a model, datasets
and TrainingArguments given in train.kwargs, with no script.
"""

from harness.integrations.hf import Callback, HarnessHFError, fit  # noqa: F401

__all__ = ["Callback", "HarnessHFError", "fit"]
