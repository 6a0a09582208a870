"""What a pairing fingerprint must have covered to prove anything, torch-free (the analysis reads it).

A fingerprint of nothing is not a proof: the data_order digest of zero batches is the hash of zero
bytes whatever the data, and a black-box command watches no parameters. Such a fingerprint is
recorded as missing (``None``, with the reason under ``fingerprints.missing``), and the analysis
reports it missing with what to call to fill it, never as equal.
"""

from __future__ import annotations

# The data_order digest of zero batches (blake2b-64 of no bytes): what results written before
# missing fingerprints were recorded as None hold when no batch went through the Run.
EMPTY_DIGESTS = {"data_order": "e4a6a0577479b2b4"}

# What to call to fill each fingerprint (the report repeats it where the fingerprint is missing).
HOW_TO_FILL = {
    "data_order": ("draw the batches through run.loader(dataset, batch_size) or run.sampler(n, batch_size) "
                   "(shuffled), or wrap batches that must keep their order in run.ordered(batches)"),
    "init": "call run.watch(model) after building the model inside `with run.init():`",
}

BLACK_BOX = "by seed only (a command is a black box)"


def missing_reason(key: str, fingerprints: dict) -> str | None:
    """Why ``fingerprints[key]`` proves nothing, or None when it covers something."""
    missing = fingerprints.get("missing") or {}
    if isinstance(missing, dict) and missing.get(key):
        return str(missing[key])
    value = fingerprints.get(key)
    if value is None:
        return f"not recorded: {HOW_TO_FILL.get(key, 'record it')}"
    if EMPTY_DIGESTS.get(key) == value:
        return f"covered nothing (zero batches drawn through the Run): {HOW_TO_FILL[key]}"
    return None


# -- coverage: how much of the training a record's proofs cover ----------------------------------


def steps_recorded(fingerprints: dict) -> int | None:
    """The number of per-step fingerprints a record holds (packed or as lists), None when unknown."""
    steps = fingerprints.get("steps") if isinstance(fingerprints, dict) else None
    if not isinstance(steps, dict):
        return None
    if isinstance(steps.get("n"), int):  # packed (results.pack_steps)
        return steps["n"]
    loss = steps.get("loss")
    return len(loss) if isinstance(loss, list) else None


def steps_trained(fingerprints: dict) -> int | None:
    """The optimizer steps the trainer itself counted (``run.trained``), None when nothing said it."""
    n = fingerprints.get("steps_trained") if isinstance(fingerprints, dict) else None
    return n if isinstance(n, int) and not isinstance(n, bool) else None


def uncovered(fingerprints: dict) -> tuple[int, int] | None:
    """(recorded, trained) when the record covers fewer steps than the trainer took, else None."""
    n, trained = steps_recorded(fingerprints), steps_trained(fingerprints)
    return (n, trained) if n is not None and trained is not None and n < trained else None


def steps_words(recorded: int, trained: int | None) -> str:
    """How many steps a whole proof covers, said against the trainer's own count where it is known."""
    if trained is None:
        return f"{recorded} steps as recorded by run.step"
    if recorded == trained:
        return f"{recorded} of {trained} steps"
    return f"{recorded} steps recorded, {trained} counted by the trainer"
