"""Real servers on 127.0.0.1 for the storage tests: moto's S3 server and a ranged HTTP server."""

from __future__ import annotations

import email.utils
import hashlib
import logging
import os
import re
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

moto_server = pytest.importorskip("moto.server")
s3fs = pytest.importorskip("s3fs")

_LINE = re.compile(r'"(?P<method>[A-Z]+) (?P<path>\S+) HTTP/[\d.]+" (?P<status>\d+)')


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class RequestLog(logging.Handler):
    """Every request the moto server answered (werkzeug's access log), parsed."""

    def __init__(self) -> None:
        super().__init__(logging.INFO)
        self.requests: list[tuple[str, str, int]] = []
        self._lock2 = threading.Lock()

    def emit(self, record: logging.LogRecord) -> None:
        match = _LINE.search(record.getMessage())
        if match:
            with self._lock2:
                self.requests.append(
                    (match["method"], match["path"], int(match["status"]))
                )

    def count(self, method: str, path: str, status: int | None = None) -> int:
        with self._lock2:
            return sum(
                1
                for m, p, s in self.requests
                if m == method and p.split("?")[0] == path and (status is None or s == status)
            )

    def clear(self) -> None:
        with self._lock2:
            self.requests.clear()


class _S3:
    """What both S3 servers share: options reaching them, buckets and uploads."""

    port: int
    fs: Any

    @property
    def endpoint(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def options(self, *, fast: bool = True) -> dict[str, Any]:
        """storage_options for s3fs; ``fast``: fail in about a second when the server is down."""
        options: dict[str, Any] = {
            "key": "testing",
            "secret": "testing",
            "client_kwargs": {"endpoint_url": self.endpoint, "region_name": "us-east-1"},
        }
        if fast:
            options["config_kwargs"] = {
                "retries": {"max_attempts": 1},
                "connect_timeout": 1,
                "read_timeout": 5,
            }
        return options

    def bucket(self, name: str) -> str:
        self.fs.call_s3("create_bucket", Bucket=name)
        return name

    def upload(self, local: Path, url: str) -> str:
        """Copy every file of a local directory (clutter included) under ``url``; return it."""
        for path in sorted(local.iterdir()):
            if path.is_file():
                self.fs.put_file(str(path), f"{url.rstrip('/')}/{path.name}")
        self.fs.invalidate_cache()
        return url.rstrip("/") + "/"


class S3Server(_S3):
    """moto's standalone S3 server in a thread on 127.0.0.1; stop() and start() keep the data."""

    def __init__(self) -> None:
        self.port = free_port()
        self.log = RequestLog()
        logger = logging.getLogger("werkzeug")
        logger.setLevel(logging.INFO)
        logger.addHandler(self.log)
        self._server: Any = None
        self.start()
        self.fs = s3fs.S3FileSystem(skip_instance_cache=True, **self.options())

    def start(self) -> None:
        # on the same port: clients keep their endpoint; moto's in-process state survives
        deadline = time.monotonic() + 10
        while True:
            try:
                self._server = moto_server.ThreadedMotoServer(
                    ip_address="127.0.0.1", port=self.port, verbose=False
                )
                self._server.start()
                return
            except OSError:
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.1)

    def stop(self) -> None:
        self._server.stop()

    def close(self) -> None:
        self.stop()
        logging.getLogger("werkzeug").removeHandler(self.log)

    def gets(self, url: str, status: int | None = 200) -> int:
        """GET requests for one object (status 200: whole-object downloads)."""
        return self.log.count("GET", "/" + url.split("://", 1)[1], status)


class S3ChildServer(_S3):
    """moto's S3 server in a child process: its own objects, apart from :class:`S3Server`'s.

    Servers started in one process share moto's in-memory state (one bucket and key hold one
    object on every port); a child process holds its own.
    """

    def __init__(self) -> None:
        self.port = free_port()
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "moto.server", "-H", "127.0.0.1", "-p", str(self.port)],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
        )
        deadline = time.monotonic() + 60
        while True:  # until it answers (a start-up wait, nothing timed)
            try:
                with socket.create_connection(("127.0.0.1", self.port), timeout=1):
                    break
            except OSError:
                if time.monotonic() > deadline or self.proc.poll() is not None:
                    self.close()
                    raise RuntimeError("moto's server did not start") from None
                time.sleep(0.1)
        self.fs = s3fs.S3FileSystem(skip_instance_cache=True, **self.options())

    def close(self) -> None:
        self.proc.terminate()
        self.proc.wait(30)


# --------------------------------------------------------------------------- HTTP


class _Files:
    """What the ranged HTTP server serves, and a gate that can stall a transfer midway."""

    def __init__(self) -> None:
        self.files: dict[str, bytes] = {}
        self.stall = threading.Event()  # set: GETs of whole objects stop after half the bytes
        self.release = threading.Event()
        self.requests: list[tuple[str, str, str | None]] = []
        #: False: the server ignores Range headers and sends the whole object (as Python's
        #: http.server does), without Accept-Ranges.
        self.ranges = True
        #: False: the server sends neither ETag nor Last-Modified (objects have no version).
        self.versions = True
        #: A date: the server sends it as every object's Last-Modified and no ETag (as
        #: Python's http.server does; one second's resolution).
        self.last_modified: str | None = None
        #: Per method ("HEAD"; "GET": a GET without a Range header, as fsspec's info()
        #: sends after a failed HEAD), statuses to answer the next requests with, in turn
        #: (an empty body), before serving as usual again.
        self.failing: dict[str, list[int]] = {}
        #: Range requests still to answer short: half the bytes, with an honest
        #: Content-Length and Content-Range.
        self.short = 0


class _Handler(BaseHTTPRequestHandler):
    server: _Server

    def log_message(self, format: str, *args: Any) -> None:
        pass

    def _body(self) -> bytes | None:
        failing = self.server.state.failing.get(self.command)
        if failing and "Range" not in self.headers:
            self.send_response(failing.pop(0))
            self.send_header("Content-Length", "0")
            self.end_headers()
            return None
        data = self.server.state.files.get(self.path)
        if data is None:
            self.send_response(404)
            self.send_header("Content-Length", "0")
            self.end_headers()
        return data

    def _headers(self, data: bytes, status: int, length: int) -> None:
        self.send_response(status)
        self.send_header("Content-Length", str(length))
        if self.server.state.ranges:
            self.send_header("Accept-Ranges", "bytes")
        if self.server.state.last_modified is not None:
            self.send_header("Last-Modified", self.server.state.last_modified)
        elif self.server.state.versions:
            self.send_header("ETag", '"' + hashlib.md5(data).hexdigest() + '"')
            self.send_header("Last-Modified", email.utils.formatdate(usegmt=True))

    def do_HEAD(self) -> None:
        self.server.state.requests.append(("HEAD", self.path, None))
        data = self._body()
        if data is not None:
            self._headers(data, 200, len(data))
            self.end_headers()

    def do_GET(self) -> None:
        rng = self.headers.get("Range")
        self.server.state.requests.append(("GET", self.path, rng))
        data = self._body()
        if data is None:
            return
        match = re.match(r"bytes=(\d*)-(\d*)$", rng or "")
        if match and self.server.state.ranges:
            start = int(match[1]) if match[1] else len(data) - int(match[2])
            stop = int(match[2]) + 1 if match[1] and match[2] else len(data)
            part = data[start:stop]
            if self.server.state.short > 0:
                self.server.state.short -= 1
                part = part[: max(1, len(part) // 2)]
            self._headers(data, 206, len(part))
            self.send_header("Content-Range", f"bytes {start}-{start + len(part) - 1}/{len(data)}")
            self.end_headers()
            self.wfile.write(part)
            return
        self._headers(data, 200, len(data))
        self.end_headers()
        state = self.server.state
        if state.stall.is_set():
            self.wfile.write(data[: len(data) // 2])
            self.wfile.flush()
            state.release.wait(60)
            return  # the connection closes short: the client sees a cut transfer
        self.wfile.write(data)


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    state: _Files


class HTTPServer:
    """A threaded HTTP server with HEAD, ETag and byte ranges, serving files from memory."""

    def __init__(self) -> None:
        self.state = _Files()
        self._server = _Server(("127.0.0.1", 0), _Handler)
        self._server.state = self.state
        self.port = self._server.server_address[1]
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)
        self._thread.start()

    def url(self, name: str) -> str:
        return f"http://127.0.0.1:{self.port}/{name}"

    def put(self, name: str, data: bytes) -> str:
        self.state.files["/" + name] = data
        return self.url(name)

    def close(self) -> None:
        self.state.release.set()
        self._server.shutdown()
        self._server.server_close()


def serve_directory(server: HTTPServer, local: Path, prefix: str) -> list[str]:
    """Serve each Parquet file of a directory; return their URLs in name order."""
    return [
        server.put(f"{prefix}/{p.name}", p.read_bytes())
        for p in sorted(local.iterdir())
        if p.suffix == ".parquet" and not p.name.startswith((".", "_"))
    ]


def cached_files(directory: Path) -> Iterator[Path]:
    """The trusted shard copies in a cache directory (not lock or part files).

    A directory given as ``cache_dir=`` that held other files keeps the copies in our own
    folder inside it (core/runtime/cachedir.py): that folder is listed then.
    """
    if (directory / "undertale_duck-cache").is_dir():
        directory = directory / "undertale_duck-cache"
    if not directory.exists():
        return iter(())
    return (p for p in sorted(directory.iterdir()) if p.name.endswith(".parquet"))


def child_env() -> dict[str, str]:
    """Environment for child processes: the worktree and tests on the path."""
    env = dict(os.environ)
    root = Path(__file__).resolve().parents[2]
    env["PYTHONPATH"] = os.pathsep.join([str(root), str(root / "tests"), env.get("PYTHONPATH", "")])
    return env
