"""The home: where a checkout's outputs, stores and Dagster instance live ($SABER_HOME, else
``.saber/`` in the checkout), and the secrets saber keeps there for itself.

``home_secret(name)`` is a random key made once per home and kept in it (readable by its owner
alone): the key of the prompts' fences (``templates``), which no document can know, yet the same
on every rerun in the home, so a fenced prompt's cache key is too. A copied home keeps its keys;
a new one starts with new keys, and re-asks what it has not cached itself."""

from __future__ import annotations

import os
import secrets
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parent.parent
SECRETS = ".secrets"


def data_home() -> Path:
    """Where outputs go: $SABER_HOME, else `.saber/` in the checkout (git-ignored)."""
    return Path(os.environ.get("SABER_HOME", REPO_ROOT / ".saber")).resolve()


def home_secret(name: str, home: Path | None = None) -> bytes:
    """The home's key ``name`` (32 random bytes), made on first use: written whole to a file of
    its own, then linked into place, so two processes making it at once agree on one key. Read
    once per process and home: every prompt asks for it."""
    path = (home or data_home()) / SECRETS / name
    if path not in _KEYS:
        _KEYS[path] = _made_key(path)
    return _KEYS[path]


_KEYS: dict[Path, bytes] = {}


def _made_key(path: Path) -> bytes:
    try:
        return _read_key(path)
    except FileNotFoundError:
        pass
    folder = path.parent
    folder.mkdir(parents=True, exist_ok=True, mode=0o700)
    tmp = folder / f".{path.name}.{os.getpid()}.{secrets.token_hex(6)}"
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(secrets.token_bytes(32))
        try:
            os.link(tmp, path)  # refuses to replace: the first maker's key stays
        except FileExistsError:
            pass
    finally:
        tmp.unlink(missing_ok=True)
    return _read_key(path)


def _read_key(path: Path) -> bytes:
    key = path.read_bytes()
    if len(key) != 32:
        raise ValueError(f"{path}: a home key is 32 bytes, this one is {len(key)}: remove it")
    return key
