"""One writing command per home at a time: ``saber build``, ``saber warehouse`` and
``saber registry adopt`` hold the home's lock while they run.

Two builds on one home share its Dagster instance (SQLite run and event storage) and its
outputs: they raced, one dying with a raw SQLite error, or both running the same step in the
same second. The lock is an OS file lock (``filelock``), so a killed holder frees it; beside it
a small file says who holds it, for the message the second command prints.
"""

from __future__ import annotations

import json
import os
import socket
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from datetime import UTC, datetime
from pathlib import Path

from filelock import FileLock, Timeout

from saber_assets.outputs import written_whole

LOCK_FILE = ".saber.lock"
HOLDER_FILE = ".saber.lock.json"


class HomeBusy(ValueError):
    """Another command holds the home; the message says which, since when, and what to do."""


def holder(home: Path) -> str:
    """Who holds ``home``'s lock, in words (as its holder wrote it)."""
    try:
        h = json.loads((home / HOLDER_FILE).read_text())
        return f"`{h['command']}` (pid {h['pid']} on {h['host']}, since {h['since']})"
    except (OSError, ValueError, KeyError, TypeError):
        return "another saber command"


@contextmanager
def holding_home(
    home: Path, command: str, wait: bool = False, say: Callable[[str], None] | None = None
) -> Iterator[None]:
    """Hold ``home`` for ``command`` for the block. Held elsewhere: ``HomeBusy`` at once, or
    with ``wait`` a message and a wait until it is free."""
    home.mkdir(parents=True, exist_ok=True)
    lock = FileLock(str(home / LOCK_FILE))
    try:
        lock.acquire(timeout=0)
    except Timeout:
        who = holder(home)
        say = say or (lambda message: print(message, file=sys.stderr))
        if not wait:
            raise HomeBusy(
                f"{home} is in use by {who}: one build per home at a time. Wait for it to end, "
                "run again with --wait, or give this one its own SABER_HOME"
            ) from None
        say(f"saber: waiting for {who} to finish with {home}")
        t0 = time.monotonic()
        lock.acquire()
        say(f"saber: {home} is free after {time.monotonic() - t0:.0f} s")
    try:
        info = {
            "command": command,
            "pid": os.getpid(),
            "host": socket.gethostname(),
            "since": datetime.now(UTC).isoformat(timespec="seconds"),
        }
        with written_whole(home / HOLDER_FILE) as tmp:
            tmp.write_text(json.dumps(info))
        yield
    finally:
        (home / HOLDER_FILE).unlink(missing_ok=True)
        lock.release()
