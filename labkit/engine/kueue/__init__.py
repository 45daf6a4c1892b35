"""Kueue: the reference engine (quota tree, admission, preemption) and the numba core."""
