"""Errors that reach the user as one line, never as a traceback.

`SpecError` names the field path of the scenario that is wrong (`jobs[3].tasks[0].resources.cpu`),
so the CLI can print `<path>: <message>` and exit 2.
"""


class LabkitError(Exception):
    """Any error labkit reports to the user as one line (exit 2 from the CLI)."""


class SpecError(LabkitError):
    """Bad input in a scenario, a policy or a case file; `path` names the field."""

    def __init__(self, path: str, message: str):
        self.path = path
        self.message = message
        super().__init__(f"{path}: {message}" if path else message)
