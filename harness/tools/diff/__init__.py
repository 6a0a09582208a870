"""Where two runs part, ``python -m harness.diff``. Owns: diff.py (the comparison, step by step),
diff_words.py (what diff says), ops.py (diff --ops: the first aten op whose bits differ),
module_stack.py (which module runs an op; audit uses it too), butterfly.py (diff's plot)."""
