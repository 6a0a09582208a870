"""A training function whose code swallows a Ctrl-C (tests/test_interrupts.py): at seed 0 in the arm
with shift 0 it sends its own process SIGINT, catches the KeyboardInterrupt and goes on, as a
library's ``except BaseException`` or an object's finalizer would."""

from __future__ import annotations

import os
import signal

from tests.sequential_fns import paired_metric


def swallows_ctrl_c(cfg, run, shift: float = 0.0) -> dict:
    if run.seed == 0 and shift == 0.0:
        try:
            os.kill(os.getpid(), signal.SIGINT)  # Python raises it at the next instruction
            sum(range(10))
        except KeyboardInterrupt:
            pass
    return paired_metric(cfg, run, shift=shift)
