"""`python -m labkit ...`: the `labkit` command, for an environment without its console script."""

import sys

from .cli import main

sys.exit(main())
