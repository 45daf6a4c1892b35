"""Errors that reach the user as one line, never as a traceback.

`SpecError` names the field path of the scenario that is wrong (`jobs[3].tasks[0].resources.cpu`),
so the CLI can print `<path>: <message>` and exit 2.
"""

import warnings


class LabkitError(Exception):
    """Any error labkit reports to the user as one line (exit 2 from the CLI)."""


class SpecError(LabkitError):
    """Bad input in a scenario, a policy or a case file; `path` names the field."""

    def __init__(self, path: str, message: str):
        self.path = path
        self.message = message
        super().__init__(f"{path}: {message}" if path else message)


class LabkitWarning(UserWarning):
    """Something the user should know that does not stop the run (e.g. the slower engine runs)."""


def _format_warning(message, category, filename, lineno, line=None) -> str:
    """labkit's warnings as one `labkit: note:` line, with no file or line of labkit's own (the same on
    every install, so a notebook's stored output does not depend on where labkit lives); the others
    as Python formats them."""
    if issubclass(category, LabkitWarning):
        return f"labkit: note: {message}\n"
    return _python_format_warning(message, category, filename, lineno, line)


_python_format_warning = warnings.formatwarning
warnings.formatwarning = _format_warning


EXIT_BAD_INPUT, EXIT_INTERRUPTED, EXIT_INTERNAL = 2, 130, 3


def one_line(err: BaseException) -> tuple[str, int]:
    """The one line (without the `labkit: ` prefix) and the exit code for any error that ends a
    command: bad input is exit 2 naming the field, Ctrl-C 130, an internal fault 3 (no traceback
    unless LABKIT_TRACEBACK=1). The only place where errors become what the user reads."""
    if isinstance(err, KeyboardInterrupt):
        return "interrupted", EXIT_INTERRUPTED
    if isinstance(err, LabkitError):
        return f"error: {_first_line(str(err))}", EXIT_BAD_INPUT
    if isinstance(err, MemoryError):
        return ("error: out of memory: the scenario is too large for this machine "
                "(fewer jobs or nodes, or a horizon)"), EXIT_BAD_INPUT
    if isinstance(err, RecursionError):
        return "error: input nested too deeply", EXIT_BAD_INPUT
    if isinstance(err, OSError):
        where = f"{err.filename}: " if err.filename else ""
        return f"error: {where}{err.strerror or err.__class__.__name__}", EXIT_BAD_INPUT
    return (f"internal error: {err.__class__.__name__}: {_first_line(str(err))} (please report it; "
            "LABKIT_TRACEBACK=1 shows the traceback)"), EXIT_INTERNAL


def _first_line(text: str, width: int = 400) -> str:
    line = " ".join(text.split()) if text else ""
    return line if len(line) <= width else line[: width - 3] + "..."
