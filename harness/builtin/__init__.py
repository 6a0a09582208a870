"""The built-in room: our own data, models, loss and training loop, written as any researcher's code is.

Owns: data.py (digits, synthetic and CIFAR-10 datasets; each loaded once per process), models.py
(the small CNN and ResNet18), losses.py (cross-entropy with label smoothing and the extra loss
terms), loop.py (the training function ``train.fn`` names by default). May import: the public API a
researcher uses (``harness.Run``, ``harness.instantiate`` and what else ``harness`` exports), the
Run's own room (training/) and harness.results; tests/test_layout.py fails on any other harness
import, so our own loop has no door a researcher's lacks.
"""
