"""Kubernetes quantities and durations, parsed the way users write them.

Quantities follow `k8s.io/apimachinery/pkg/api/resource`: a decimal number with an optional binary
(Ki, Mi, Gi, Ti, Pi, Ei) or decimal (n, u, m, k, M, G, T, P, E) suffix or an exponent. They are kept
as written in the Scenario (so a dump gives back `256Gi`) and converted to numbers only by the
compiler. Durations are seconds, or strings such as `90s`, `15m`, `1h30m`, `2d`, `1w`.

Numbers are read strictly: ASCII digits only (no full-width `１２`), no booleans, nothing
non-finite, and bounded: a quantity at most 2^63-1 in magnitude (apimachinery's limit: "no quantity
may represent a number greater than 2^63-1 in magnitude"), a duration at most `MAX_SECONDS`.
"""

from __future__ import annotations

import math
import re

MAX_QUANTITY = float(2**63 - 1)
MAX_SECONDS = 100 * 365.25 * 86400.0
"""Longest duration or time accepted (100 years): far beyond any lab, small enough that a time plus
a run time stays exact to the millisecond in float64 (1e300 s would make waits of -1e308)."""

_QUANTITY = re.compile(r"^([+-]?(?:\d+(?:\.\d*)?|\.\d+))(?:([eE][+-]?\d{1,4})|(Ki|Mi|Gi|Ti|Pi|Ei|n|u|m|k|M|G|T|P|E))?$",
                       re.ASCII)
_SUFFIX = {
    "": 1.0, "n": 1e-9, "u": 1e-6, "m": 1e-3, "k": 1e3, "M": 1e6, "G": 1e9, "T": 1e12, "P": 1e15, "E": 1e18,
    "Ki": 2.0**10, "Mi": 2.0**20, "Gi": 2.0**30, "Ti": 2.0**40, "Pi": 2.0**50, "Ei": 2.0**60,
}
_DURATION_PART = re.compile(r"(\d+(?:\.\d*)?|\.\d+)(ms|s|m|h|d|w)", re.ASCII)
_NUMBER = re.compile(r"^[+-]?(?:\d+(?:\.\d*)?|\.\d+)(?:[eE][+-]?\d{1,4})?$", re.ASCII)
_DURATION_UNIT = {"ms": 1e-3, "s": 1.0, "m": 60.0, "h": 3600.0, "d": 86400.0, "w": 604800.0}


def parse_quantity(value: object) -> float:
    """Return the quantity in base units (cores for cpu, bytes for memory, count otherwise).

    Raises ValueError with a message fit for the user (no traceback reaches them).
    """
    if isinstance(value, bool):
        raise ValueError(f"not a quantity: {value!r} (e.g. 8, 500m, 64Gi)")
    if isinstance(value, (int, float)):
        number = _finite(value)
    elif isinstance(value, str):
        m = _QUANTITY.match(value.strip())
        if not m:
            raise ValueError(f"not a quantity: {_short(value)} (e.g. 8, 500m, 64Gi)")
        number = _finite(m.group(1))
        if m.group(2):
            exponent = int(m.group(2)[1:])
            number *= 10.0 ** exponent if abs(exponent) <= 300 else (math.inf if exponent > 0 else 0.0)
        else:
            number *= _SUFFIX[m.group(3) or ""]
    else:
        raise ValueError(f"not a quantity: {_short(value)} (e.g. 8, 500m, 64Gi)")
    if not abs(number) <= MAX_QUANTITY:
        raise ValueError(f"{_short(value)} is out of range (a quantity is at most 2^63-1 in magnitude)")
    return number


def _finite(value: float | str) -> float:
    """float(value), with numbers too large for a float (a 400-digit int) becoming inf, not OverflowError."""
    try:
        return float(value)
    except OverflowError:
        return math.inf


def _short(value: object) -> str:
    """The value as the user wrote it, cut to fit one line."""
    text = repr(value)
    return text if len(text) <= 40 else text[:37] + "..."


def parse_duration(value: object) -> float:
    """Return a duration in seconds from a number of seconds or a string like `1h30m`."""
    if isinstance(value, bool):
        raise ValueError(f"not a duration: {value!r} (e.g. 90, 15m, 1h30m, 2d)")
    if isinstance(value, (int, float)):
        seconds = _finite(value)
    elif isinstance(value, str):
        text = value.strip()
        pos, seconds = 0, 0.0
        for m in _DURATION_PART.finditer(text):
            if m.start() != pos:
                break
            seconds += _finite(m.group(1)) * _DURATION_UNIT[m.group(2)]
            pos = m.end()
        if pos != len(text) or not text:
            if not _NUMBER.match(text):
                raise ValueError(f"not a duration: {_short(value)} (e.g. 90, 15m, 1h30m, 2d)")
            seconds = _finite(text)
    else:
        raise ValueError(f"not a duration: {_short(value)} (e.g. 90, 15m, 1h30m, 2d)")
    if not abs(seconds) <= MAX_SECONDS:
        raise ValueError(f"{_short(value)} is out of range (at most {MAX_SECONDS:.0f} s, 100 years)")
    return seconds


def format_duration(seconds: float) -> str:
    """A short human form of a duration, e.g. `2d3h`, `45m`, `12.5s`."""
    if seconds < 60:
        return f"{seconds:g}s"
    parts = []
    rest = seconds
    for unit, size in (("d", 86400), ("h", 3600), ("m", 60)):
        n = int(rest // size)
        if n:
            parts.append(f"{n}{unit}")
            rest -= n * size
    if rest >= 0.5:
        parts.append(f"{rest:.0f}s")
    return "".join(parts)
