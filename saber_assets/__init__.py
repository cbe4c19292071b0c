"""saber: a Dagster code location that builds SABER-Math-style math-IR benchmarks."""

import os
from pathlib import Path

# Numba-compiled code (signal kernels, ranx) is cached in the checkout so it compiles once.
os.environ.setdefault(
    "NUMBA_CACHE_DIR", str(Path(__file__).resolve().parent.parent / ".cache" / "numba")
)
