"""A minimal local stand-in for the Hugging Face hub's HTTP API, serving folders from this machine.

It answers the calls `huggingface_hub.snapshot_download` makes (repo info, tree listing, file
resolve with HEAD and GET), so prefetch runs through the real download code with HF_ENDPOINT
pointing here: the tests' hub, and the hub of a rehearsal (`plmclaims rehearse` serves its
stand-ins with it). Loopback only; it serves only the folders it is given.
"""
from __future__ import annotations

import functools
import hashlib
import json
import shutil
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from urllib.parse import unquote, urlparse

COMMIT = "0123456789abcdef0123456789abcdef01234567"  # what 'main' points to


def _commit(rev: str | None) -> str:
    """Asked for a commit, the hub answers with that commit; asked for a branch, with the commit it points to."""
    return rev if rev and len(rev) == 40 and all(c in "0123456789abcdef" for c in rev) else COMMIT


@functools.lru_cache(maxsize=None)
def _digest(path: Path, size: int, mtime: int, kind: str) -> str:
    """A file's digest, hashed once per content state (the hub is asked for each file's HEAD and GET)."""
    h = hashlib.new(kind)
    with path.open("rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def _sha256(path: Path) -> str:
    st = path.stat()
    return _digest(path, st.st_size, st.st_mtime_ns, "sha256")


def _git_oid(path: Path) -> str:
    """The tree listing's oid for a file (a sha1 of its bytes; the download code only compares it)."""
    st = path.stat()
    return _digest(path, st.st_size, st.st_mtime_ns, "sha1")


class FakeHub:
    def __init__(self, repos: dict[tuple[str, str], Path]):
        self.repos = {k: Path(v) for k, v in repos.items()}  # (repo_type, repo_id) -> folder
        self.requests: list[str] = []
        hub = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args):  # keep test output quiet
                pass

            def do_HEAD(self):
                hub._serve(self, body=False)

            def do_GET(self):
                hub._serve(self, body=True)

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    def __enter__(self):
        self.thread.start()
        return self

    def __exit__(self, *exc):
        self.server.shutdown()
        self.server.server_close()

    def _files(self, folder: Path) -> list[Path]:
        return sorted(p for p in folder.rglob("*") if p.is_file() and ".cache" not in p.parts)

    def _find(self, repo_type: str, rest: list[str]) -> tuple[str, Path, list[str]] | None:
        for (rtype, repo_id), folder in self.repos.items():
            parts = repo_id.split("/")
            if rtype == repo_type and rest[:len(parts)] == parts:
                return repo_id, folder, rest[len(parts):]
        return None

    def _serve(self, h: BaseHTTPRequestHandler, body: bool) -> None:
        path = unquote(urlparse(h.path).path)
        self.requests.append(f"{h.command} {path}")
        parts = [p for p in path.split("/") if p]
        if parts[:1] == ["api"]:
            repo_type = {"models": "model", "datasets": "dataset"}.get(parts[1] if len(parts) > 1 else "")
            found = self._find(repo_type, parts[2:]) if repo_type else None
            if not found:
                return self._send(h, 404, b'{"error": "Repository not found"}', body, {"X-Error-Code": "RepoNotFound"})
            repo_id, folder, tail = found
            files = self._files(folder)
            if tail[:1] == ["tree"]:
                data = [{"type": "file", "path": str(p.relative_to(folder)), "size": p.stat().st_size,
                         "oid": _git_oid(p)} for p in files]
            else:  # repo info, with or without /revision/<rev>
                rev = tail[1] if tail[:1] == ["revision"] and len(tail) > 1 else None
                data = {"id": repo_id, "sha": _commit(rev), "private": False,
                        "siblings": [{"rfilename": str(p.relative_to(folder))} for p in files]}
            return self._send(h, 200, json.dumps(data).encode(), body, {"Content-Type": "application/json"})
        repo_type = "dataset" if parts[:1] == ["datasets"] else "model"
        found = self._find(repo_type, parts[1:] if repo_type == "dataset" else parts)
        if not found or found[2][:1] != ["resolve"] or len(found[2]) < 3:
            return self._send(h, 404, b"not found", body, {"X-Error-Code": "EntryNotFound"})
        _, folder, tail = found
        file = folder.joinpath(*tail[2:])
        if not file.is_file():
            return self._send(h, 404, b"not found", body, {"X-Error-Code": "EntryNotFound"})
        etag = _sha256(file)
        h.send_response(200)
        for k, v in {"X-Repo-Commit": _commit(tail[1]), "ETag": f'"{etag}"', "Content-Type": "application/octet-stream",
                     "Content-Length": str(file.stat().st_size)}.items():
            h.send_header(k, v)
        h.end_headers()
        if body:  # streamed: a real-shape stand-in's weights are gigabytes
            with file.open("rb") as f:
                shutil.copyfileobj(f, h.wfile, 1 << 20)

    @staticmethod
    def _send(h, status: int, data: bytes, body: bool, headers: dict) -> None:
        h.send_response(status)
        for k, v in headers.items():
            h.send_header(k, v)
        h.send_header("Content-Length", str(len(data)))
        h.end_headers()
        if body:
            h.wfile.write(data)
