"""Code versions for ``ab.factor=code``: a revision's files read out of git (git.py) and a unit run from them (snapshot.py).

experiment/code_arms.py decides which revisions an experiment compares and where their snapshots
live; this room reads a commit's or the working tree's files (submodules included) into a folder
and digests them (git.py), and runs a unit's imports or command from such a folder (snapshot.py).
"""
