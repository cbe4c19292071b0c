"""A running Label Studio, through its REST API (httpx): projects, task import, the JSON export.

Label Studio is not a dependency: it runs as the server it is, in its own environment. The key
is a legacy API token (``Authorization: Token``) or a personal access token (a JWT refresh
token, exchanged at ``/api/token/refresh`` for a short-lived access token); it comes from the
environment and is never logged, printed or put in an error message."""

from __future__ import annotations

import os
from collections.abc import Sequence

import httpx

URL_ENV, KEY_ENV = "LABEL_STUDIO_URL", "LABEL_STUDIO_API_KEY"


class LabelStudioError(RuntimeError):
    pass


class LabelStudio:
    def __init__(self, url: str, key: str, timeout_s: float = 60.0) -> None:
        if not url or not key:
            raise LabelStudioError(f"Label Studio needs {URL_ENV} and {KEY_ENV} in the environment")
        self.url = url.rstrip("/")
        self.http = httpx.Client(base_url=self.url, timeout=timeout_s)
        self.http.headers["Authorization"] = self._authorization(key)

    @classmethod
    def from_env(cls) -> LabelStudio:
        return cls(os.environ.get(URL_ENV, ""), os.environ.get(KEY_ENV, ""))

    def _authorization(self, key: str) -> str:
        if key.count(".") == 2:  # a personal access token (JWT): trade it for an access token
            r = self.http.post("/api/token/refresh", json={"refresh": key})
            if r.status_code != 200:
                raise LabelStudioError(
                    f"{self.url}: the personal access token was refused ({r.status_code})"
                )
            return f"Bearer {r.json()['access']}"
        return f"Token {key}"

    def request(self, method: str, path: str, **kw) -> httpx.Response:
        try:
            r = self.http.request(method, path, **kw)
        except httpx.HTTPError as exc:
            raise LabelStudioError(f"{self.url}{path}: {type(exc).__name__} {exc}") from exc
        if r.status_code >= 400:
            raise LabelStudioError(
                f"{method} {self.url}{path}: HTTP {r.status_code} {r.text[:300]}"
            )
        return r

    def version(self) -> str:
        return self.request("GET", "/api/version").json().get("release", "?")

    def find_project(self, title: str) -> dict | None:
        """The project with this title (Label Studio allows several: the newest is taken)."""
        found = [p for p in self.pages("/api/projects", "results") if p.get("title") == title]
        return max(found, key=lambda p: p["id"]) if found else None

    def pages(self, path: str, key: str, params: dict | None = None) -> list[dict]:
        out, page = [], 1
        while True:
            body = self.request(
                "GET", path, params={**(params or {}), "page": page, "page_size": 100}
            ).json()
            if not isinstance(body, dict):  # an unpaginated list
                return body
            rows = body.get(key) or []
            out += rows
            total = body.get("total", body.get("count"))  # tasks say total, projects count
            if not rows or (len(out) >= total if total is not None else not body.get("next")):
                return out
            page += 1

    def upsert_project(self, title: str, label_config: str, instructions: str) -> tuple[dict, bool]:
        """(project, created): the project with this title made to carry this config and these
        instructions, created when there is none."""
        fields = {"title": title, "label_config": label_config,
                  "expert_instruction": instructions, "show_instruction": True,
                  "show_skip_button": True, "enable_empty_annotation": False}  # fmt: skip
        # no maximum_annotations: a project-wide overlap would overwrite the tasks' own
        project = self.find_project(title)
        if project is None:
            return self.request("POST", "/api/projects", json=fields).json(), True
        pid = project["id"]
        return self.request("PATCH", f"/api/projects/{pid}", json=fields).json(), False

    def tasks(self, project: int) -> list[dict]:
        return self.pages("/api/tasks", "tasks", {"project": project})

    def import_tasks(self, project: int, tasks: Sequence[dict]) -> list[int]:
        """Label Studio's ids of the imported tasks, in order; each task's ``overlap`` (how many
        annotators it asks for) set after the import, which takes data only."""
        if not tasks:
            return []
        body = [{"data": t["data"]} for t in tasks]
        r = self.request(
            "POST", f"/api/projects/{project}/import", params={"return_task_ids": "true"},
            json=body,
        )  # fmt: skip
        ids = r.json().get("task_ids") or []
        if len(ids) != len(tasks):
            raise LabelStudioError(
                f"imported {len(tasks)} tasks, Label Studio returned {len(ids)} ids"
            )
        for tid, task in zip(ids, tasks, strict=True):
            if task.get("overlap", 1) != 1:
                self.request("PATCH", f"/api/tasks/{tid}", json={"overlap": task["overlap"]})
        return ids

    def export(self, project: int) -> list[dict]:
        """Every task with its annotations, as Label Studio's JSON export."""
        return self.request(
            "GET", f"/api/projects/{project}/export", params={"exportType": "JSON"}
        ).json()

    def user_emails(self) -> dict[int, str]:
        """User id -> e-mail, where the key may list the organisation's users (else empty)."""
        try:
            return {u["id"]: u.get("email") for u in self.pages("/api/users", "results")}
        except LabelStudioError:
            return {}
