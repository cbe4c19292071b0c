"""The explorer served on localhost (`saber report --serve`): the site and its downloads, nothing
else of the outputs folder.

The outputs folder also holds the stores (the LLM cache, the judgments, the human labels with
annotators' e-mails), the study's raw exports and the warehouse, so the server answers only:

- ``/explorer/…``: the site's own files;
- the downloads the board links (``DOWNLOADS``), each TREC run file, and ``/runs/``, a page
  listing those run files (the board's "folder per retriever");
- ``/``: a redirect to the board.

Anything else is 404, directories included (never a listing); a path through a symbolic link is
404 (a link inside the folder cannot lead out of it); a request whose ``Host`` is not this
server's own loopback name is 403, so a page on another site cannot read the explorer through a
DNS name that it points at 127.0.0.1 (DNS rebinding).
"""

from __future__ import annotations

import html
import http.server
import mimetypes
import os
import re
import stat
from pathlib import Path
from urllib.parse import unquote, urlsplit

from saber_assets.site.explorer import DOWNLOADS, RUNS_PAGE

SITE = "explorer"
START = f"{SITE}/index.html"
RUN_FILE = re.compile(r"runs/[^/]+/[^/]+\.trec")
LOOPBACK_NAMES = ("127.0.0.1", "localhost")


def regular_file(root: Path, rel: str) -> Path | None:
    """``root/rel`` if it is a regular file of one name (no hard link: the same bytes as a file
    elsewhere, the stores say) reached through no symbolic link, else None."""
    path, st = root, None
    for part in rel.split("/"):
        path = path / part
        try:
            st = os.lstat(path)
        except OSError:
            return None
        if stat.S_ISLNK(st.st_mode):
            return None
    return path if st and stat.S_ISREG(st.st_mode) and st.st_nlink == 1 else None


def served_file(root: Path, url: str) -> Path | None:
    """The file of the outputs folder ``root`` that URL path ``url`` serves, or None (404)."""
    rel = unquote(urlsplit(url).path).removeprefix("/")
    parts = rel.split("/")
    if any(p in ("", ".", "..") for p in parts) or "\\" in rel or "\x00" in rel:
        return None  # an empty part is a directory ("…/") or a doubled slash
    allowed = parts[0] == SITE or rel in DOWNLOADS.values() or RUN_FILE.fullmatch(rel)
    return regular_file(root, rel) if allowed else None


def run_files(root: Path) -> list[str]:
    """The TREC run files under ``root/runs`` that the server serves, sorted."""
    runs = root / "runs"
    if not runs.is_dir() or runs.is_symlink():
        return []
    return sorted(
        rel
        for rel in (p.relative_to(root).as_posix() for p in runs.glob("*/*.trec"))
        if RUN_FILE.fullmatch(rel) and regular_file(root, rel) is not None
    )


def runs_page(root: Path) -> str:
    items = "".join(
        f'<li><a href="/{html.escape(rel)}">{html.escape(rel.removeprefix("runs/"))}</a></li>'
        for rel in run_files(root)
    )
    return (
        "<!doctype html><meta charset=utf-8><title>TREC runs</title>"
        f'<p><a href="/{START}">Leaderboard</a></p><h1>TREC runs</h1>'
        f"<ul>{items or '<li>none yet</li>'}</ul>"
    )


class ExplorerHandler(http.server.BaseHTTPRequestHandler):
    """GET and HEAD of the site and its downloads only (module docstring)."""

    root: Path  # set on the subclass ``explorer_server`` makes
    server_version = "saber-explorer"

    def do_GET(self) -> None:  # noqa: N802 (the stdlib's name)
        self.answer(body=True)

    def do_HEAD(self) -> None:  # noqa: N802
        self.answer(body=False)

    def host_allowed(self) -> bool:
        port = self.server.server_address[1]
        return self.headers.get("Host", "") in {f"{n}:{port}" for n in LOOPBACK_NAMES}

    def answer(self, body: bool) -> None:
        if not self.host_allowed():
            return self.send_text(403, "this server answers only to its own loopback address", body)
        path = urlsplit(self.path).path
        if path == "/":
            self.send_response(302)
            self.send_header("Location", f"/{START}")
            self.send_header("Content-Length", "0")
            self.end_headers()
            return None
        if path == f"/{RUNS_PAGE}":
            return self.send_bytes(
                200, runs_page(self.root).encode(), "text/html; charset=utf-8", body
            )
        file = served_file(self.root, self.path)
        if file is None:
            return self.send_text(404, "not part of the explorer", body)
        try:
            fd = os.open(file, os.O_RDONLY | os.O_NOFOLLOW)
        except OSError:
            return self.send_text(404, "not part of the explorer", body)
        with os.fdopen(fd, "rb") as f:
            data = f.read()
        kind = mimetypes.guess_type(file.name)[0] or "application/octet-stream"
        if kind.startswith("text/") or kind.endswith("javascript"):
            kind += "; charset=utf-8"
        self.send_bytes(200, data, kind, body)
        return None

    def send_text(self, code: int, message: str, body: bool = True) -> None:
        self.send_bytes(code, f"{code}: {message}\n".encode(), "text/plain; charset=utf-8", body)

    def send_bytes(self, code: int, data: bytes, kind: str, body: bool) -> None:
        self.send_response(code)
        self.send_header("Content-Type", kind)
        self.send_header("Content-Length", str(len(data)))
        self.send_header("X-Content-Type-Options", "nosniff")
        self.end_headers()
        if body:
            self.wfile.write(data)


def explorer_server(root: Path, port: int) -> http.server.ThreadingHTTPServer:
    """A server of the outputs folder ``root``'s explorer on 127.0.0.1:``port`` (0: any free
    port), not yet serving; never on another interface."""
    handler = type("Handler", (ExplorerHandler,), {"root": Path(root)})
    return http.server.ThreadingHTTPServer(("127.0.0.1", port), handler)
