"""A real git smart-HTTP server for tests: Debian's ``git http-backend`` (found from
``git --exec-path``) behind a small threaded HTTP server speaking CGI, with basic auth when a
token is given. Repositories are bare ones under ``root``, served at ``/<name>.git``."""

from __future__ import annotations

import base64
import hashlib
import os
import subprocess
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path


def http_backend() -> Path:
    """git's CGI program, where this git keeps its helpers."""
    exec_path = subprocess.run(
        ["git", "--exec-path"], capture_output=True, text=True, check=True
    ).stdout.strip()
    backend = Path(exec_path) / "git-http-backend"
    assert backend.is_file(), f"git has no http-backend at {backend}"
    return backend


@dataclass
class GitServer:
    """A running server: ``url(name)`` of a repository, ``requests`` seen (with headers)."""

    port: int
    root: Path
    requests: list[dict[str, str]]

    def url(self, name: str) -> str:
        """The repository's URL."""
        return f"http://127.0.0.1:{self.port}/{name}.git"

    def bare(self, name: str) -> Path:
        """Create an empty bare repository (accepting pushes over HTTP) and return its path."""
        path = self.root / f"{name}.git"
        git(self.root, "init", "--quiet", "--bare", "--initial-branch=main", str(path))
        git(path, "config", "http.receivepack", "true")
        return path


def git(cwd: Path, *args: str) -> str:
    """Run git as a person would (no kiln isolation), its stdout; fails the test on error."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("GIT_")}
    env |= {"GIT_CONFIG_NOSYSTEM": "1", "GIT_CONFIG_GLOBAL": os.devnull}
    env |= {"GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@t", "GIT_COMMITTER_NAME": "t"}
    env |= {"GIT_COMMITTER_EMAIL": "t@t", "GIT_TERMINAL_PROMPT": "0"}
    done = subprocess.run(["git", "-C", str(cwd), *args], capture_output=True, env=env)
    assert done.returncode == 0, done.stderr.decode()
    return done.stdout.decode()


def basic_auth(token: str) -> str:
    """``git -c`` setting that sends ``token`` as basic auth (as a person's git would)."""
    encoded = base64.b64encode(f"me:{token}".encode()).decode()
    return f"http.extraHeader=Authorization: Basic {encoded}"


def sha256s(files: dict[str, bytes]) -> dict[str, str]:
    """``path -> sha256`` of each file."""
    return {path: hashlib.sha256(content).hexdigest() for path, content in files.items()}


def cloned_versions(
    url: str, where: Path, branch: str = "main", token: str = ""
) -> list[dict[str, str]]:
    """``git clone`` of ``branch`` as anyone would (with ``token`` as basic auth); each
    commit's files (sha256), oldest first."""
    auth = ["-c", basic_auth(token)] if token else []
    git(where.parent, *auth, "clone", "--quiet", "--branch", branch, url, str(where))
    out = []
    for commit in git(where, "rev-list", "--reverse", "HEAD").split():
        git(where, "checkout", "--quiet", commit)
        files = {
            str(path.relative_to(where)): path.read_bytes()
            for path in where.rglob("*")
            if path.is_file() and ".git" not in path.relative_to(where).parts
        }
        out.append(sha256s(files))
    return out


@contextmanager
def git_server(root: Path, token: str = "") -> Iterator[GitServer]:
    """Serve the bare repositories under ``root``; with ``token``, every request must carry
    basic auth whose password is it (401 otherwise)."""
    backend = http_backend()
    requests: list[dict[str, str]] = []

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            self._cgi()

        def do_POST(self) -> None:
            self._cgi()

        def log_message(self, format: str, *args: object) -> None:
            pass

        def _cgi(self) -> None:
            requests.append({"path": self.path, **{k.lower(): v for k, v in self.headers.items()}})
            if token and not self._authorised():
                self.send_response(401)
                self.send_header("WWW-Authenticate", 'Basic realm="git"')
                self.send_header("Content-Length", "0")
                self.end_headers()
                return
            path, _, query = self.path.partition("?")
            env = {
                "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
                "GIT_PROJECT_ROOT": str(root),
                "GIT_HTTP_EXPORT_ALL": "1",
                "GIT_CONFIG_NOSYSTEM": "1",
                "GIT_CONFIG_GLOBAL": os.devnull,
                "REQUEST_METHOD": self.command,
                "PATH_INFO": path,
                "QUERY_STRING": query,
                "CONTENT_TYPE": self.headers.get("Content-Type", ""),
                "REMOTE_USER": "tester",
                "REMOTE_ADDR": "127.0.0.1",
            }
            if self.headers.get("Content-Encoding"):
                env["HTTP_CONTENT_ENCODING"] = self.headers["Content-Encoding"]
            if self.headers.get("Git-Protocol"):
                env["GIT_PROTOCOL"] = self.headers["Git-Protocol"]
            body = self._body()
            env["CONTENT_LENGTH"] = str(len(body))
            done = subprocess.run([str(backend)], input=body, capture_output=True, env=env)
            head, _, payload = done.stdout.partition(b"\r\n\r\n")
            status, headers = 200, []
            for line in head.decode("latin-1").split("\r\n"):
                name, _, value = line.partition(":")
                if name.lower() == "status":
                    status = int(value.split()[0])
                elif name:
                    headers.append((name, value.strip()))
            self.send_response(status)
            for name, value in headers:
                self.send_header(name, value)
            self.send_header("Content-Length", str(len(payload)))
            self.end_headers()
            self.wfile.write(payload)

        def _authorised(self) -> bool:
            given = self.headers.get("Authorization", "")
            if not given.startswith("Basic "):
                return False
            _user, _, password = base64.b64decode(given[6:]).decode().partition(":")
            return password == token

        def _body(self) -> bytes:
            if self.headers.get("Transfer-Encoding", "").lower() == "chunked":
                parts = []
                while size := int(self.rfile.readline().strip() or b"0", 16):
                    parts.append(self.rfile.read(size))
                    self.rfile.readline()
                self.rfile.readline()
                return b"".join(parts)
            return self.rfile.read(int(self.headers.get("Content-Length") or 0))

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield GitServer(server.server_address[1], root, requests)
    finally:
        server.shutdown()
        server.server_close()
        thread.join()
