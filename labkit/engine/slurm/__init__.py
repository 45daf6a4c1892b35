"""Slurm's slurmctld: the reference engine and the numba core."""
