"""A train.fn unit that spans processes: ``train.nproc: N`` starts the unit as N ranks.

Files: spec.py (the key: its value, its refusal, the processes a unit takes), launch.py (the
harness's side: start the ranks through torch's elastic launcher, make their records one), rank.py
(one rank: the process group, the unit's rank-aware Run, the training function).
"""
