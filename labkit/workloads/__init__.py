"""Workloads: synthetic generators and trace loaders that produce scenario jobs."""

from . import traces
from .synthetic import draw, expand, generate, multi_tenant
from .table import JobTable, job_table, table_key

__all__ = ["JobTable", "draw", "expand", "generate", "job_table", "multi_tenant", "table_key", "traces"]
