"""What a conformance case came to (`CaseResult`), shared by the Volcano and Kueue runners."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import asdict, dataclass


@dataclass(frozen=True)
class CaseResult:
    """Outcome of one case: ``reason`` is the diff when it failed, why when it was skipped."""

    id: str
    passed: bool
    skipped: bool = False
    reason: str = ""

    def as_dict(self) -> dict:
        """The JSON form `labkit conformance --json` prints."""
        return asdict(self)


def skip_reason(case: Mapping) -> str | None:
    """Cases whose id says UNVERIFIED record design intent, not tested behaviour."""
    if "UNVERIFIED" in str(case.get("id", "")):
        note = " ".join(str(case.get("notes", "")).split())
        return note.split(". ")[0] if note else "marked UNVERIFIED in the case file"
    return None
