"""Where a config's outputs lie: one folder per config (<home>/<config name>) and, in it, every
folder that one stage writes and another stage or a command reads, named once. The assets reach
it through their pipeline resource (``pipeline.outputs()``), the commands through the config
(``Outputs.of(cfg)``): both mean the same folders."""

from __future__ import annotations

import ctypes
import errno
import fcntl
import functools
import json
import os
import secrets
import shutil
import stat
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from saber_assets.config import PipelineConfig, data_home


@dataclass(frozen=True)
class Outputs:
    root: Path

    @classmethod
    def of(cls, cfg: PipelineConfig, home: Path | None = None) -> Outputs:
        """A config's outputs under ``home`` (default: $SABER_HOME, else .saber/)."""
        home = Path(home or data_home())
        return cls(inside(home, cfg.name))

    @property
    def parquet(self) -> Path:
        """The IO manager's tables (one Parquet file, or folder of partitions, per asset)."""
        return self.root / "parquet"

    @property
    def warehouse(self) -> Path:
        return self.root / "warehouse.duckdb"

    @property
    def stores(self) -> Path:
        """The DuckDB stores (LLM cache, judgments, embeddings) when they are not PostgreSQL."""
        return self.root / "stores.duckdb"

    @property
    def signals(self) -> Path:
        return self.root / "signals"

    @property
    def benchmark(self) -> Path:
        """The exported benchmark (exchange format)."""
        return self.root / "benchmark"

    @property
    def evaluation_benchmark(self) -> Path:
        """The benchmark the retrievers are scored on: the export, or a pulled one."""
        return self.root / "evaluation_benchmark"

    def scored_benchmark(self) -> Path:
        """The evaluation benchmark where it was made, else the export."""
        built = self.evaluation_benchmark
        return built if built.exists() else self.benchmark

    def benchmark_folder(self, given: str | os.PathLike | None, scored: bool = True) -> Path:
        """The benchmark a command reads: the folder given, else this build's (``scored``: the one
        the leaderboard scores, ``scored_benchmark``; else the export people label). A folder
        without a benchmark is refused by name."""
        path = Path(given) if given else (self.scored_benchmark() if scored else self.benchmark)
        if not (path / "queries.parquet").exists():
            raise FileNotFoundError(
                f"no benchmark at {path}: build it first (saber build) or pass --benchmark DIR"
            )
        return path

    @property
    def runs(self) -> Path:
        """Per retriever: one Parquet run per domain and TREC files per setting."""
        return self.root / "runs"

    def index(self, retriever: str) -> Path:
        return inside(self.root / "indexes", retriever)

    @property
    def token_tables(self) -> Path:
        """Document token tables every retriever of a tokenizer reads (beside the retrievers'
        folders: no retriever name starts with a dot)."""
        return self.root / "indexes" / ".tokens"

    @property
    def contamination(self) -> Path:
        """The contamination audit's files: one folder per training corpus, and the benchmark's
        own-candidate matches."""
        return self.root / "contamination"

    @property
    def leaderboard(self) -> Path:
        return self.root / "leaderboard"

    @property
    def human_study(self) -> Path:
        return self.root / "human_study"

    @property
    def report(self) -> Path:
        """The analyses' HTML report (``index.html`` and its figures)."""
        return self.root / "report"

    @property
    def explorer(self) -> Path:
        """The benchmark explorer: a static site (``index.html``, a page per query)."""
        return self.root / "explorer"

    @property
    def builds(self) -> Path:
        """Snapshots of the last builds the explorer showed (``site/build_diff.py``): what
        its "What changed" page compares the current build with."""
        return self.root / "builds"


def inside(base: Path, name: str) -> Path:
    """``base / name``, refused unless it resolves to a folder strictly under ``base``: a name from
    a config or a registry never reaches outside the home (``..``, an absolute path, a link)."""
    path = (base / name).resolve()
    if not name or path == base.resolve() or not path.is_relative_to(base.resolve()):
        raise ValueError(f"{name!r} would write outside {base}: refused")
    return base / name


def unique_sibling(path: Path, kind: str) -> Path:
    """A name beside ``path`` that no other writer picks: ``<name>.<pid>.<random>.<kind>``."""
    return path.with_name(f"{path.name}.{os.getpid()}.{secrets.token_hex(6)}.{kind}")


def own_folder(path: Path, kind: str) -> Path:
    """A new, empty folder beside ``path`` (``unique_sibling``), created by this call alone."""
    path.parent.mkdir(parents=True, exist_ok=True)
    while True:
        folder = unique_sibling(path, kind)
        try:
            folder.mkdir()
            return folder
        except FileExistsError:
            continue


@contextmanager
def written_whole(path: Path) -> Iterator[Path]:
    """Where to write ``path``'s new content: a file beside it, renamed into place when the block
    ends without an error. A reader never sees half a file, and a build killed or stopped by a
    full disk leaves the old file as it was, never a partial one."""
    # created exclusively (O_EXCL) under a name of its own: writers in one process (threads) or
    # with one pid (the run pods, each PID 1, on one shared volume) never share a file
    while True:
        tmp = unique_sibling(path, "tmp")
        try:
            os.close(os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o666))
            break
        except FileExistsError:
            continue
    try:
        yield tmp
        os.replace(tmp, path)
    finally:
        tmp.unlink(missing_ok=True)


RENAME_NOREPLACE, RENAME_EXCHANGE = 1, 2  # linux/fs.h


@functools.cache
def _renameat2():
    libc = ctypes.CDLL(None, use_errno=True)
    return getattr(libc, "renameat2", None)


def rename_atomically(src: Path, dest: Path, flags: int) -> bool:
    """``renameat2(src, dest, flags)``; False where the system or the file system has no such
    call (not Linux, an old libc, a file system without the flag), OSError on any other error."""
    call = _renameat2()
    if call is None:
        return False
    at_fdcwd = -100
    if call(at_fdcwd, os.fsencode(src), at_fdcwd, os.fsencode(dest), flags) == 0:
        return True
    err = ctypes.get_errno()
    if err in (errno.ENOSYS, errno.EINVAL, errno.ENOTSUP):
        return False
    raise OSError(err, os.strerror(err), str(src), None, str(dest))


def swap_folder_in(staging: Path, path: Path) -> Path | None:
    """Put folder ``staging`` at ``path`` in one step; returns the folder that holds what it
    replaced (for the caller to remove), or None. Concurrent writers of one folder never fail and a
    reader never sees ``path`` missing or mixed: an exchange of the two names where ``path``
    exists, a rename that refuses to replace where it does not (each atomic, ``renameat2``);
    where the file system has neither, the two renames under a lock file beside ``path``."""
    while True:
        try:
            if rename_atomically(staging, path, RENAME_EXCHANGE):
                return staging
        except FileNotFoundError:  # no folder at path yet (or another writer's is moving)
            try:
                if rename_atomically(staging, path, RENAME_NOREPLACE):
                    return None
            except FileExistsError:
                continue  # another writer put its folder there first: exchange with it
            else:
                break
        else:
            break
    with open(path.with_name(f".{path.name}.lock"), "a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        old = None
        if path.exists():
            old = own_folder(path, "old")
            path.rename(old / "was")
        staging.rename(path)
        return old


@contextmanager
def folder_written_whole(path: Path) -> Iterator[Path]:
    """Where to write folder ``path``'s new content: a sibling folder that replaces it when the
    block ends without an error (the old one is removed only then), so a killed build leaves the
    old folder whole, never a mix of two; two writers at once each put a whole folder in place
    (``swap_folder_in``), the last one stays."""
    # this writer's own folder (mkdir creates exclusively), so a second writer of the same
    # folder, even with the same pid, never removes or fills the first one's
    staging = own_folder(path, "new")
    old = None
    try:
        yield staging
        old = swap_folder_in(staging, path)
    finally:
        if old is not None:
            shutil.rmtree(old, ignore_errors=True)
        shutil.rmtree(staging, ignore_errors=True)


MAX_SITE_BYTES = 4 * 2**30  # a published site: the explorer of 1,000 queries is ~0.2 GB
MAX_SITE_FILES = 200_000
MAX_SITE_DEPTH = 16


def regular_tree(root: Path, max_bytes: int = MAX_SITE_BYTES) -> list[tuple[str, int]]:
    """Every regular file under folder ``root`` as (relative path, size), refused by name where
    anything in it is not a folder or a regular file of one name (a symbolic link at any depth,
    the root included; a hard link; a socket, a device, a pipe), or where it holds more than ``max_bytes``,
    ``MAX_SITE_FILES`` files or folders deeper than ``MAX_SITE_DEPTH``. Nothing is followed."""
    try:
        mode = os.lstat(root).st_mode
    except OSError as exc:
        raise ValueError(f"{root}: cannot be read ({exc.strerror})") from None
    if not stat.S_ISDIR(mode):
        raise ValueError(f"{root}: not a folder (a link or a file): refused")
    files, total, folders = [], 0, [("", 0)]
    while folders:
        rel, depth = folders.pop()
        if depth > MAX_SITE_DEPTH:
            raise ValueError(f"{root}/{rel}: folders deeper than {MAX_SITE_DEPTH}: refused")
        with os.scandir(root / rel if rel else root) as entries:
            for entry in entries:
                name = f"{rel}/{entry.name}" if rel else entry.name
                mode = entry.stat(follow_symlinks=False).st_mode
                if stat.S_ISLNK(mode):
                    raise ValueError(f"{root}: {name} is a link: a published site holds none")
                if stat.S_ISDIR(mode):
                    folders.append((name, depth + 1))
                elif stat.S_ISREG(mode):
                    st = entry.stat(follow_symlinks=False)
                    if st.st_nlink > 1:  # a hard link: the same bytes as a file elsewhere
                        raise ValueError(
                            f"{root}: {name} has {st.st_nlink} names (a hard link): refused"
                        )
                    size = st.st_size
                    files.append((name, size))
                    total += size
                    if total > max_bytes or len(files) > MAX_SITE_FILES:
                        raise ValueError(
                            f"{root}: over {max_bytes:,} bytes or {MAX_SITE_FILES:,} files: refused"
                        )
                else:
                    raise ValueError(f"{root}: {name} is not a regular file: refused")
    return sorted(files)


def copy_regular_tree(src: Path, dest: Path, max_bytes: int = MAX_SITE_BYTES) -> int:
    """Copy folder ``src`` to ``dest`` (which must not exist) as ``regular_tree`` lists it, each
    file opened without following a link and read no further than its listed size allows, so a
    file swapped for a link or grown after the listing is refused, not copied; returns bytes."""
    listed = regular_tree(src, max_bytes)
    dest.mkdir(parents=True)
    copied = 0
    for rel, size in listed:
        target = dest / rel
        target.parent.mkdir(parents=True, exist_ok=True)
        try:
            fd = os.open(src / rel, os.O_RDONLY | os.O_NOFOLLOW)
        except OSError as exc:
            raise ValueError(f"{src}: {rel} changed while it was copied: refused") from exc
        with os.fdopen(fd, "rb") as f, open(target, "xb") as out:
            st = os.fstat(f.fileno())
            if not stat.S_ISREG(st.st_mode) or st.st_nlink != 1:  # swapped since the listing
                raise ValueError(f"{src}: {rel} is not a regular file of one name: refused")
            left = size + 1  # one byte more than listed tells a file that grew
            while left and (chunk := f.read(min(left, 1 << 20))):
                out.write(chunk)
                left -= len(chunk)
        if left != 1:
            raise ValueError(f"{src}: {rel} changed while it was copied: refused")
        copied += size
    return copied


def write_whole(path: Path, data) -> Path:
    """``data`` into ``path`` through ``written_whole``: text (UTF-8), bytes, a numpy array
    (``.npy``), a dict of arrays (``.npz``) or a polars frame (Parquet, or CSV for a ``.csv``
    path). The project's one way to write an output file."""
    with written_whole(path) as tmp:
        if isinstance(data, str):
            tmp.write_text(data, encoding="utf-8")
        elif isinstance(data, bytes | bytearray):
            tmp.write_bytes(data)
        elif isinstance(data, np.ndarray):
            with open(tmp, "wb") as f:  # a file object: numpy adds no suffix to it
                np.save(f, data)
        elif isinstance(data, dict):
            with open(tmp, "wb") as f:
                np.savez(f, **data)
        elif path.suffix == ".csv":
            data.write_csv(tmp)
        else:
            data.write_parquet(tmp)
    return path


def read_json_or_none(path: Path) -> dict | None:
    """A JSON object a stage wrote for itself (a manifest), or None when it is missing or cannot
    be read (truncated, not an object): the caller starts afresh instead of failing every later
    build on it."""
    try:
        value = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return value if isinstance(value, dict) else None
