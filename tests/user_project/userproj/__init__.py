"""A researcher's project as the tests see one: not harness code, not examples/own_code."""
