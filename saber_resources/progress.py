"""Progress lines for long work inside a step: items done of total, rate, time left.

tqdm draws them on stderr, only where ``saber build`` turned them on (``SABER_PROGRESS=1``: it
does so when its stderr is a terminal) and only for work still running after ``DELAY_S``
seconds; a line is cleared when its work ends, so a finished step leaves its one summary line.
In tests, the UI's runs and piped output nothing is drawn.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Iterator
from contextlib import contextmanager

ENV = "SABER_PROGRESS"
DELAY_S = 3.0
REDRAW_S = 0.5  # at most two redraws a second: a log captured from a terminal stays short


def enabled() -> bool:
    return os.environ.get(ENV) == "1"


class Progress:
    """What a piece of work reports: ``advance(n)`` after each n items."""

    def __init__(self, bar=None) -> None:
        self._bar = bar

    def advance(self, n: int = 1) -> None:
        if self._bar is not None:
            self._bar.update(n)


@contextmanager
def progress(description: str, total: int | None, unit: str = "item") -> Iterator[Progress]:
    """A progress line for ``total`` items (None: count without a total), drawn once the work
    has run ``DELAY_S`` seconds, where enabled; a no-op otherwise."""
    if not enabled() or (total is not None and total <= 0):
        yield Progress()
        return
    from tqdm import tqdm

    bar = tqdm(
        total=total,
        desc=f"  {description}",
        unit=unit,
        delay=DELAY_S,
        mininterval=REDRAW_S,
        miniters=1,
        leave=False,
        file=sys.stderr,
        dynamic_ncols=True,
        disable=False,  # the build sets TQDM_DISABLE for datatrove's bars, not for these
    )
    try:
        yield Progress(bar)
    finally:
        bar.close()
