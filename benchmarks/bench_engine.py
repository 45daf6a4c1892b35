"""Engine benchmark: the numba core against the reference engine on the case-study week.

    python benchmarks/bench_engine.py [--quick] [--repeat N] [--json]

The same measurement as `labkit bench` (labkit/bench.py): the reference/numba ratio (target
>= 100x), the median re-simulation after warm-up (target <= 35 ms) and `import labkit` plus the
first simulate in a fresh process with a warm numba cache (target < 2 s), each printed with its
target and `ok` or `MISSED`. Not a timed test: these machines are shared and noisy.
"""

import sys

from labkit.bench import main

if __name__ == "__main__":
    sys.exit(main())
