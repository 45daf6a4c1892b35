"""Volcano: the reference engine (its actions and plugins on the shared framework) and the numba core."""
