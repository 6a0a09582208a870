"""The result file: the contract users' scripts and every room of the harness read results by.

Owns: schema.py (the file's name, versions and keys: where a run's file lives, writing and reading
one, its per-step fingerprints and metrics), atomic_io.py (atomic JSON I/O: no reader sees half a
file), tree.py (loading a directory tree of results), identity.py (a run's identity: which config
keys count, config_digest), examples.py (the per-example records, one bit per test example). The
keys are listed in docs/result-format.md.

The names below are the contract; importers take them from here.
"""

from harness.results.atomic_io import (  # noqa: F401
    FileRefused, atomic_write, key_bytes, read_json, save_weights, unreadable_reason, write_json)
from harness.results.examples import (  # noqa: F401
    SET_ASIDE_KEY, example_correctness, example_record, example_records, pack_example_records, pack_examples,
    set_aside_note, set_aside_records, unpack_examples)
from harness.results.identity import (  # noqa: F401
    CHANGES_NO_BIT, NOT_IN_IDENTITY, REPRO_NOT_IN_IDENTITY, config_digest, differences, flatten)
from harness.results.schema import (  # noqa: F401
    MAX_RESULT_BYTES, NON_FINITE_KEY, READABLE_SCHEMAS, RESULT_NAME, SCHEMA, SCHEMA_V1, STEPS_FORMAT, digests_version,
    diverged, load_steps, metric_value, pack_steps, read_result, run_dir, write_result)
from harness.results.tree import (  # noqa: F401
    LoadedResults, ResultsError, find_result_files, gc_paused, load_tree)
