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
