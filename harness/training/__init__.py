"""The training room: what a training function stands on, for ONE (seed, arm).

Owns: run.py (the ``Run``: seeded streams, the loader and sampler, logs, per-example records, the
run's record), steps.py (the watched model: init fingerprint, per-step recording, the non-finite
check, and the exceptions a Run raises), record.py (what the Run returns for a run it did not watch itself: a black
box, or a script's record adopted from harness.attach()), batches.py (the shuffled order, tensors read a batch at a time, data nodes
built once per process), fingerprint.py (bit-exact digests and the per-step recorder), host_digest.py (XXH3 of tensors in host memory: the digest version a run records), fingerprint_coverage.py (what a pairing fingerprint must
have covered to prove anything, and what fills a missing one; torch-free, the analysis reads it), rng.py (one generator per purpose),
determinism.py (deterministic mode and pinned threads), math_modes.py (TF32 and float32 matmul
precision: pinned per unit, recorded, restored), threads.py (how many: the rule behind
determinism.threads=auto and workers=auto, torch-free), gpu_memory.py (what a CUDA run used of its
device's memory, which workers=auto on a GPU widens by), gpus.py (the GPUs CUDA will see, found without
a context; one per side-by-side worker), components.py (the ``_target_`` door every
model, dataset, loss and optimizer goes through, ours and a researcher's alike).

May import: harness.results only. Imports neither Hydra nor wandb and knows nothing of arms: a
notebook can build a Run directly.
"""
