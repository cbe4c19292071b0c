"""How a long-running command (`saber report --serve`, `saber ui`) stops when asked."""

from __future__ import annotations

import signal

STOP_SIGNALS = (signal.SIGTERM, signal.SIGINT)


def interrupt_on_stop_signals() -> None:
    """Make SIGTERM and SIGINT raise ``KeyboardInterrupt`` in the main thread, at once.

    A process inherits ignored and blocked signals from whoever started it: a shell's background
    job ignores SIGINT, and a parent that blocked SIGTERM in its thread passes the mask on, so a
    server relying on the defaults may never hear a stop. SIGTERM's default also skips the
    ``finally`` blocks that close a listening socket."""
    signal.pthread_sigmask(signal.SIG_UNBLOCK, STOP_SIGNALS)
    for sig in STOP_SIGNALS:
        signal.signal(sig, signal.default_int_handler)
