"""Progress lines for long work inside a step: items done of total, rate, time left.

Where ``saber build`` turned them on: on a terminal (``SABER_PROGRESS=1``) tqdm draws them on
stderr for work still running after ``DELAY_S`` seconds, and clears a line when its work ends,
so a finished step leaves its one summary line; into a log (``SABER_PROGRESS=log``: its stderr
is no terminal) a plain line is written once work has run ``LOG_EVERY_S`` seconds and then at
most once every ``LOG_EVERY_S``, so a long stage says where it is without flooding the log.
In tests and the UI's runs nothing is written.
"""

from __future__ import annotations

import os
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager

ENV = "SABER_PROGRESS"
DELAY_S = 3.0
REDRAW_S = 0.5  # at most two redraws a second: a log captured from a terminal stays short
LOG_EVERY_S = 30.0  # a log's line for long work: after this long, then at most this often


def enabled() -> bool:
    return os.environ.get(ENV) == "1"


def logged() -> bool:
    return os.environ.get(ENV) == "log"


class LogLines:
    """A plain line on stderr for work that has run ``LOG_EVERY_S``, then at most once every
    ``LOG_EVERY_S``: done of total, the rate and the time left."""

    def __init__(self, description: str, total: int | None, unit: str) -> None:
        self.description, self.total, self.unit = description, total, unit
        self.done = 0
        self.started = self.last = time.monotonic()

    def update(self, n: int) -> None:
        self.done += n
        now = time.monotonic()
        if now - self.last < LOG_EVERY_S:
            return
        self.last = now
        rate = self.done / max(now - self.started, 1e-9)
        of = f"/{self.total:,}" if self.total else ""
        left = (
            f", ~{(self.total - self.done) / rate:,.0f} s left" if self.total and rate > 0 else ""
        )
        print(f"  {self.description}: {self.done:,}{of} {self.unit} ({rate:,.1f}/s{left})",
              file=sys.stderr, flush=True)  # fmt: skip


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
    if total is not None and total <= 0:
        yield Progress()
        return
    if logged():
        yield Progress(LogLines(description, total, unit))
        return
    if not enabled():
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
