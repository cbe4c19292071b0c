"""Numba does not check indices: a kernel that reads or writes one slot past an array corrupts
memory silently (a histogram one bin short, a difference array one column short). The signal,
threshold and stored-pair tests are run once more with Numba's bounds checking on, so such a
slip fails as an IndexError instead."""

import os
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent


@pytest.mark.e2e  # every kernel compiled afresh, with bounds checks
def test_signal_kernels_and_thresholds_stay_in_bounds(tmp_path):
    # a cache of its own: Numba's cache key ignores the bounds-check flag, so a cached unchecked
    # compile would be reused
    env = {**os.environ, "NUMBA_BOUNDSCHECK": "1", "NUMBA_CACHE_DIR": str(tmp_path / "numba")}
    args = ["-n", "0", "-p", "no:logging", "tests/test_signals.py", "tests/test_pairs.py",
            "tests/test_summaries.py"]  # fmt: skip
    # the Dagster tests and builds add nothing here (a build under bounds checks takes
    # minutes); the thread-split test repeats the block kernel
    args += ["-k", "not dagster and not threads", "-m", "not e2e"]
    run = subprocess.run(
        [sys.executable, "-m", "pytest", *args],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        timeout=1200,
    )
    assert run.returncode == 0, run.stdout[-4000:] + run.stderr[-2000:]
    assert " passed" in run.stdout and "deselected" in run.stdout
