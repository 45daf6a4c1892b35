"""The README's two fresh-machine commands stay true: CI runs exactly its test command."""

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def readme_commands() -> list[str]:
    return re.findall(r"```bash\n(python3 -m pip install[^\n]*)\n```", (ROOT / "README.md").read_text())


def test_readme_opens_with_setup_main_and_test_commands():
    main, tests = readme_commands()[:2]
    assert "labkit " in main and "pytest" in tests


def test_ci_runs_the_readme_test_command():
    ci = (ROOT / ".ci" / "run").read_text()
    assert readme_commands()[1] in ci.splitlines()
