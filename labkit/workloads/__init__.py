"""Workloads: synthetic generators (and, later, trace loaders) that produce scenario jobs."""

from .synthetic import expand, generate, sample

__all__ = ["expand", "generate", "sample"]
