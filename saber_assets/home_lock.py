"""One writing command per home at a time: ``saber build``, ``warehouse``, ``registry adopt``,
``study``, ``evaluate`` and ``export`` hold the home's lock while they run, and
``saber ui`` for as long as the UI is up (the runs it and its sensors launch are its children;
another command is refused with the way to launch through the UI instead), and ``saber pull``
into the home.

Two builds on one home share its Dagster instance (SQLite run and event storage) and its
outputs: they raced, one dying with a raw SQLite error, or both running the same step in the
same second. The lock is an OS file lock (``flock``), so a killed holder frees it; beside it
a small file says who holds it, for the message the second command prints.

A holder that starts a process tree (``saber ui``: ``dagster dev``, its daemon, its run workers)
runs it through ``run_group``: the tree is a process group of its own, watched by a guard
process that holds the lock's descriptor too. When the holder ends, even by ``kill -9``, the
guard stops the whole group and lets the lock go only once no process of it is left, so no
second command writes the home beside an orphaned daemon.
"""

from __future__ import annotations

import fcntl
import json
import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

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


def take_lock(path: Path, wait: bool) -> int | None:
    """A descriptor holding an exclusive ``flock`` on ``path``, or None where it is held and
    ``wait`` is false."""
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | (0 if wait else fcntl.LOCK_NB))
    except BlockingIOError:
        os.close(fd)
        return None
    except BaseException:
        os.close(fd)
        raise
    return fd


@dataclass
class HeldHome:
    """A held home: ``fd`` is the lock's descriptor, for a process that must hold it too."""

    fd: int


@contextmanager
def holding_home(
    home: Path,
    command: str,
    wait: bool = False,
    say: Callable[[str], None] | None = None,
    advice: str = "",
) -> Iterator[HeldHome]:
    """Hold ``home`` for ``command`` for the block. Held elsewhere: ``HomeBusy`` at once, or
    with ``wait`` a message and a wait until it is free. ``advice`` is what a second command is
    told to do instead (the UI's: launch through it)."""
    home.mkdir(parents=True, exist_ok=True)
    fd = take_lock(home / LOCK_FILE, wait=False)
    if fd is None:
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
        fd = take_lock(home / LOCK_FILE, wait=True)
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
        yield HeldHome(fd)
    finally:
        (home / HOLDER_FILE).unlink(missing_ok=True)
        os.close(fd)


@dataclass
class Group:
    """A process group started by ``run_group``: ``proc`` its first process, ``guard`` the
    process that stops the group and holds the lock when this one ends."""

    proc: subprocess.Popen
    guard: subprocess.Popen
    pipe: int  # this process's end: the guard reads end-of-file once it is closed

    def stop(self, patience_s: float = 60.0) -> None:
        stop_group(self.proc.pid, patience_s, reap=self.proc.poll)
        self.proc.wait()

    def close(self) -> None:
        """Let the guard go (it stops what is left of the group) and wait for it."""
        os.close(self.pipe)
        self.guard.wait()


def run_group(held: HeldHome, cmd: list[str], **popen) -> Group:
    """Start ``cmd`` as a process group of its own under a guard that holds ``held``'s lock:
    the lock outlives this process while any process of the group does (module docstring).
    The caller waits for ``proc`` (or ``stop``s the group), then ``close``s."""
    proc = subprocess.Popen(cmd, start_new_session=True, pass_fds=(held.fd,), **popen)
    read_end, write_end = os.pipe()
    guard = [sys.executable, "-m", "saber_assets.home_lock", str(proc.pid), str(read_end)]
    try:
        watcher = subprocess.Popen(guard, pass_fds=(held.fd, read_end), stdin=subprocess.DEVNULL)
    except BaseException:
        stop_group(proc.pid, 10.0, reap=proc.poll)
        raise
    finally:
        os.close(read_end)
    return Group(proc, watcher, write_end)


def stop_group(
    pgid: int, patience_s: float = 60.0, reap: Callable[[], object] | None = None
) -> None:
    """SIGINT to every process of group ``pgid`` (Dagster stops its runs and daemon on it), then
    SIGTERM and at last SIGKILL to whatever is still there; returns when none is left.
    ``reap``: the caller's non-blocking wait on the group's leader where it is the caller's
    child. A leader that has exited stays in its group as a zombie until its parent reaps it:
    unreaped, the group looked alive through every grace period, and `saber ui` took 80 s to
    stop after `dagster dev` had stopped in one."""
    for sig, wait_s in (
        (signal.SIGINT, patience_s),
        (signal.SIGTERM, 10.0),
        (signal.SIGKILL, 10.0),
    ):
        try:
            os.killpg(pgid, sig)
        except ProcessLookupError:
            return
        deadline = time.monotonic() + wait_s
        while time.monotonic() < deadline:
            if reap is not None:
                reap()
            if not group_alive(pgid):
                return
            time.sleep(0.1)


def group_alive(pgid: int) -> bool:
    try:
        os.killpg(pgid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def guard(pgid: int, pipe_fd: int) -> None:
    """The guard's life (``run_group``): wait for the holder's end of the pipe to close, stop the
    group, and return (freeing the inherited lock) once no process of it is left."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # a Ctrl-C is the holder's to act on
    with os.fdopen(pipe_fd, "rb") as pipe:
        pipe.read()
    stop_group(pgid, patience_s=30.0)
    while group_alive(pgid):
        time.sleep(0.2)


if __name__ == "__main__":
    guard(int(sys.argv[1]), int(sys.argv[2]))
