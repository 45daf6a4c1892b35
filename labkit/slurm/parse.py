"""Readers of what Slurm's client commands print: `scontrol -o show job`, `sinfo`, `squeue`, hostlists."""

from __future__ import annotations

import math
import re
from datetime import datetime

_KEY = re.compile(r" (?=[A-Za-z][A-Za-z0-9:/_]*=)")
_HOSTLIST = re.compile(r"([^,\[]+)(?:\[([^\]]+)\])?(?:,|$)")


def jobs(text: str) -> dict[int, dict[str, str]]:
    """`scontrol -o show job`: one `Key=Value ...` line per job -> {JobId: {Key: Value}}.

    A value may hold `=` (`TRES=cpu=3,node=3`) but no space, so a record splits at every space that
    starts a new `Key=`. "No jobs in the system" is no job.
    """
    out: dict[int, dict[str, str]] = {}
    for line in text.splitlines():
        if not line.startswith("JobId="):
            continue
        record: dict[str, str] = {}
        for item in _KEY.split(line.strip()):
            key, _, value = item.partition("=")
            record.setdefault(key, value)
        out[int(record["JobId"])] = record
    return out


def nodes(text: str) -> dict[str, str]:
    """`sinfo -h -N -o '%N %T'` -> {node: state}; a node in several partitions is listed once."""
    out: dict[str, str] = {}
    for line in text.splitlines():
        if line.strip():
            name, state = line.split()[:2]
            out[name] = state
    return out


def queue(text: str) -> list[int]:
    """`squeue -h -o %i` -> the job ids still in the queue (pending, running, completing)."""
    return [int(line.split("_")[0]) for line in text.split() if line.strip()]


def hostnames(expression: str) -> list[str]:
    """A Slurm hostlist (`n-[0-1,3],m-2`) as node names, zero padding kept (`n-[00-02]`)."""
    if expression in ("", "(null)", "None"):
        return []
    out = []
    for prefix, ranges in _HOSTLIST.findall(expression):
        if not ranges:
            out.append(prefix)
            continue
        for part in ranges.split(","):
            low, _, high = part.partition("-")
            width = len(low)
            out += [f"{prefix}{i:0{width}d}" for i in range(int(low), int(high or low) + 1)]
    return out


def timestamp(value: str | None) -> float:
    """A Slurm time (`2026-12-02T11:03:43`, local time) as Unix seconds; NaN for Unknown/None/N/A."""
    if not value or not value[0].isdigit():
        return math.nan
    return datetime.fromisoformat(value).timestamp()
