"""Every cold numba core compiles in the test process (``labkit.engine.core.WHEN_COLD``): no test
depends on whether a background compile or the reference engine finishes first. The tests of that
race (test_cold.py) run it in subprocesses of their own."""

import os

os.environ["LABKIT_COMPILE"] = "foreground"
