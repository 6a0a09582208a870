"""Which results may be compared. Owns: comparability.py (one identity per comparison, or what
differs), run_identity.py (a run's identity read from its result), math_identity.py (the math modes
as identity parts), copies.py (one run per (seed, arm) and the digest of the runs used),
seed_reach.py (whether the seed reached the training), certificate.py (whether certificate.json
belongs to the results analysed), differing_values.py (differing values shown cut around where they
part, for the messages)."""
