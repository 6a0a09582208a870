"""Our own data, models, loss and training loop: users of the public API (harness.Run, harness.instantiate) like any researcher's code."""
