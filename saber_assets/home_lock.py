"""One writing command per home at a time: ``saber build``, ``warehouse``, ``registry adopt``,
``study``, ``evaluate`` and ``export`` hold the home's lock while they run, and
``saber ui`` for as long as the UI is up (the runs it and its sensors launch are its children;
another command is refused with the way to launch through the UI instead).

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


def holder(home: Path, patience_s: float = 2.0) -> tuple[str, str]:
    """Who holds ``home``'s lock, in words (as its holder wrote it), and its advice to a second
    command (empty where it gave none). A holder writes its file just after taking the lock: a
    command started at the same moment waits up to ``patience_s`` for it."""
    deadline = time.monotonic() + patience_s
    while True:
        try:
            h = json.loads((home / HOLDER_FILE).read_text())
            who = f"`{h['command']}` (pid {h['pid']} on {h['host']}, since {h['since']})"
            return who, str(h.get("advice") or "")
        except (OSError, ValueError, KeyError, TypeError):
            if time.monotonic() >= deadline:
                return "another saber command", ""
            time.sleep(0.05)


@contextmanager
def holding_home(
    home: Path,
    command: str,
    wait: bool = False,
    say: Callable[[str], None] | None = None,
    advice: str = "",
) -> Iterator[None]:
    """Hold ``home`` for ``command`` for the block. Held elsewhere: ``HomeBusy`` at once, or
    with ``wait`` a message and a wait until it is free. ``advice`` is what a second command is
    told to do instead (the UI's: launch through it)."""
    home.mkdir(parents=True, exist_ok=True)
    lock = FileLock(str(home / LOCK_FILE))
    try:
        lock.acquire(timeout=0)
    except Timeout:
        who, their_advice = holder(home)
        say = say or (lambda message: print(message, file=sys.stderr))
        if not wait:
            raise HomeBusy(
                f"{home} is in use by {who}: one build per home at a time. "
                + (
                    f"{their_advice}, or "
                    if their_advice
                    else "Wait for it to end, run again with --wait (where the command has it), or "
                )
                + "give this one its own SABER_HOME"
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
            "advice": advice,
        }
        with written_whole(home / HOLDER_FILE) as tmp:
            tmp.write_text(json.dumps(info))
        yield
    finally:
        (home / HOLDER_FILE).unlink(missing_ok=True)
        lock.release()
