"""Workloads: synthetic generators and trace loaders that produce scenario jobs."""

from . import traces
from .synthetic import expand, generate, sample

__all__ = ["expand", "generate", "sample", "traces"]
