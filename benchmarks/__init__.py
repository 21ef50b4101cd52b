"""Benchmarks of gptlib against the libraries a learner would reach for next (see run.py)."""
