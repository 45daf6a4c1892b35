"""Every cold numba core compiles in the process that needs it (``labkit.engine.core.WHEN_COLD``),
in the tests and in the kernels nbval starts for the notebooks (they inherit this environment): no
test and no stored notebook output depends on whether a background compile or the reference engine
finishes first. The tests of that race (tests/test_cold.py) run it in subprocesses of their own."""

import os

os.environ["LABKIT_COMPILE"] = "foreground"
