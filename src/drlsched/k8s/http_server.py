"""The extender's HTTP/1.1 server: one event loop reads requests, a bounded pool of threads answers them.

Built to keep its shape under hostile or unlucky clients (issue 17), not for features:
- A connection costs a coroutine and its buffer, never a thread: a client that stalls mid-request holds no
  worker. The request line, headers and body must all arrive within `header_timeout_s`; a kept-alive
  connection may idle `idle_timeout_s` before its next request; a response the client does not read is
  dropped after `header_timeout_s`. At `max_connections` open connections, the one idle longest is closed to
  make room for a new one; when none is idle, the new one gets 503.
- The listen backlog is `backlog` (the kernel caps it at net.core.somaxconn), not socketserver's 5.
- Bodies are framed by Content-Length only and refused on the header when over `max_body`. A body over
  `big_body` waits for its turn before it is read: one such body is in memory and being decoded at a time.
- `GET /healthz` is answered on the event loop itself, so it is served while every worker is busy; other GETs
  (readiness, metrics, which may wait for the cache's lock) run in a thread of their own, POSTs in `workers`
  threads.
- TLS (`tls_context`): the client certificate is verified when presented; `Request.authenticated` says
  whether one was. The handler decides what needs it.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import socket
import ssl
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from http import HTTPStatus
from pathlib import Path
from typing import Protocol

log = logging.getLogger("drlsched.k8s")
MAX_HEADERS = 100
MAX_LINE = 16 << 10  # request line or one header line
HEALTH_PATH = "/healthz"  # answered on the event loop: it says the loop is alive


@dataclass(frozen=True, slots=True)
class Limits:
    max_body: int = 32 << 20
    header_timeout_s: float = 10.0
    idle_timeout_s: float = 120.0
    workers: int = 4  # the policy is CPU-bound Python: more threads would only queue for the GIL
    max_connections: int = 1024
    backlog: int = 1024
    big_body: int = 1 << 20


@dataclass(frozen=True, slots=True)
class Request:
    method: str
    path: str
    body: bytes
    authenticated: bool  # a client certificate was presented and verified


@dataclass(frozen=True, slots=True)
class Response:
    status: int
    body: bytes
    content_type: str = "application/json"
    close: bool = False


class Handler(Protocol):
    def get(self, request: Request) -> Response:
        """Runs in the GET thread, or for /healthz on the event loop: must not block for long."""

    def post(self, request: Request) -> Response:
        """Runs in a worker thread."""

    def refuse(self, request: Request, status: int, kind: str, message: str) -> Response:
        """The answer to a request refused before its handler (too large, unframed, malformed)."""


def tls_context(cert: Path, key: Path, client_ca: Path | None) -> ssl.SSLContext:
    """A server context: our certificate, and with `client_ca` the clients' certificates verified against it."""
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    context.minimum_version = ssl.TLSVersion.TLSv1_2
    context.load_cert_chain(cert, key)
    if client_ca is not None:
        context.load_verify_locations(client_ca)
        # Optional at the handshake so that kubelet's HTTPS probes (which present none) reach /healthz; the
        # handler refuses what needs a certificate.
        context.verify_mode = ssl.CERT_OPTIONAL
    return context


class _Refused(Exception):
    def __init__(self, status: int, kind: str, message: str, method: str = "", path: str = "") -> None:
        super().__init__(message)
        self.status, self.kind, self.method, self.path = status, kind, method, path


class HttpServer:
    def __init__(self, address: tuple[str, int], handler: Handler, limits: Limits | None = None,
                 tls: ssl.SSLContext | None = None) -> None:
        """Binds at once (an address in use raises OSError here); `serve_forever` then serves."""
        self.handler = handler
        self.limits = limits or Limits()
        self.tls = tls
        family = socket.AF_INET6 if ":" in address[0] else socket.AF_INET
        self.socket = socket.create_server(address, family=family, backlog=self.limits.backlog)
        self.server_address = self.socket.getsockname()
        self._pool = ThreadPoolExecutor(self.limits.workers, thread_name_prefix="http")
        self._gets = ThreadPoolExecutor(1, thread_name_prefix="http-get")
        self._loop: asyncio.AbstractEventLoop | None = None
        self._stop: asyncio.Event | None = None
        self._grace_s = 0.0
        self._closing = threading.Event()
        self._done = threading.Event()
        self._connections: dict[asyncio.Task[None], float | None] = {}  # task -> idle since (None: busy)
        self._big: asyncio.Semaphore | None = None

    @property
    def url(self) -> str:
        host, port = self.server_address[:2]
        host = f"[{host}]" if ":" in str(host) else host
        return f"{'https' if self.tls else 'http'}://{host}:{port}"

    def serve_forever(self) -> None:
        try:
            if not self._closing.is_set():
                asyncio.run(self._serve())
        finally:
            self.socket.close()
            self._pool.shutdown(wait=False, cancel_futures=True)
            self._gets.shutdown(wait=False, cancel_futures=True)
            self._done.set()

    def stop(self, grace_s: float = 5.0) -> bool:
        """Stops accepting, closes idle connections, and gives requests being handled `grace_s` to finish
        (kube-scheduler keeps one connection open for every call). False when some were abandoned."""
        self._grace_s = grace_s
        self._closing.set()
        loop, stop = self._loop, self._stop
        if loop is None or stop is None:
            self.socket.close()
            return True
        with contextlib.suppress(RuntimeError):  # the loop already ended
            loop.call_soon_threadsafe(stop.set)
        self._done.wait(grace_s + 5.0)
        return not self._connections

    shutdown = stop

    # --- the event loop ---------------------------------------------------------------------------------------

    async def _serve(self) -> None:
        self._loop = asyncio.get_running_loop()
        # Failed TLS handshakes and resets are the clients' business: not logged as errors of ours.
        self._loop.set_exception_handler(lambda _, context: log.debug("http: %s", context.get("message")))
        self._stop = asyncio.Event()
        self._big = asyncio.Semaphore(1)
        handshake = {"ssl": self.tls, "ssl_handshake_timeout": self.limits.header_timeout_s} if self.tls else {}
        server = await asyncio.start_server(self._accept, sock=self.socket, limit=MAX_LINE, **handshake)
        if self._closing.is_set():
            self._stop.set()
        await self._stop.wait()
        server.close()
        for task, idle_since in list(self._connections.items()):
            if idle_since is not None:
                task.cancel()
        if self._connections:
            await asyncio.wait(list(self._connections), timeout=self._grace_s)

    async def _accept(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        task = asyncio.current_task()
        assert task is not None
        if len(self._connections) >= self.limits.max_connections and not self._evict_idle():
            await self._write(writer, Response(HTTPStatus.SERVICE_UNAVAILABLE, b"too many connections\n",
                                               "text/plain", close=True))
            writer.close()
            return
        self._connections[task] = time.monotonic()
        try:
            authenticated = bool(writer.get_extra_info("peercert"))
            while not self._closing.is_set():
                if not await self._one(task, reader, writer, authenticated):
                    break
        except (TimeoutError, ConnectionError, asyncio.IncompleteReadError, ssl.SSLError, OSError):
            pass  # the client went away or stalled: nothing to answer
        except asyncio.CancelledError:
            pass  # stopping, or evicted: an idle kept-alive connection
        finally:
            self._connections.pop(task, None)
            writer.close()

    def _evict_idle(self) -> bool:
        """Closes the connection idle the longest, to make room for a new one; False when all are busy."""
        idle = [(since, task) for task, since in self._connections.items() if since is not None]
        if not idle:
            return False
        _, task = min(idle, key=lambda item: item[0])
        self._connections.pop(task)
        task.cancel()
        return True

    async def _one(self, task: asyncio.Task[None], reader: asyncio.StreamReader, writer: asyncio.StreamWriter,
                   authenticated: bool) -> bool:
        """Reads, handles and answers one request; False when the connection is to be closed."""
        try:  # idle until the first byte; from then on the whole request must come within header_timeout_s
            first = await asyncio.wait_for(reader.read(1), self.limits.idle_timeout_s)
        except TimeoutError:
            return False
        if not first:
            return False
        self._connections[task] = None
        big = False
        try:
            try:
                async with asyncio.timeout(self.limits.header_timeout_s):
                    request, keep = await self._read(first, reader, writer, authenticated)
                    big = len(request.body) > self.limits.big_body  # holds `_big` until answered
            except _Refused as refused:
                bare = Request(refused.method, refused.path, b"", authenticated)
                response = self.handler.refuse(bare, refused.status, refused.kind, str(refused))
                await self._write(writer, Response(response.status, response.body, response.content_type, True))
                return False
            loop = asyncio.get_running_loop()
            if request.method == "POST":
                response = await loop.run_in_executor(self._pool, self.handler.post, request)
            elif request.path == HEALTH_PATH:
                response = self.handler.get(request)
            else:
                response = await loop.run_in_executor(self._gets, self.handler.get, request)
            if big:
                self._big_release()
                big = False
            keep = keep and not response.close and not self._closing.is_set()
            await self._write(writer, Response(response.status, response.body, response.content_type, not keep))
            return keep
        finally:
            if big:
                self._big_release()
            if task in self._connections:
                self._connections[task] = time.monotonic()

    def _big_release(self) -> None:
        assert self._big is not None
        self._big.release()

    async def _read(self, first: bytes, reader: asyncio.StreamReader, writer: asyncio.StreamWriter,
                    authenticated: bool) -> tuple[Request, bool]:
        try:
            line = first + await reader.readline()
        except ValueError:  # over MAX_LINE
            raise _Refused(HTTPStatus.REQUEST_URI_TOO_LONG, "bad_request", "request line too long") from None
        try:
            method, target, version = line.decode("ascii").split()
        except (UnicodeDecodeError, ValueError):
            raise _Refused(HTTPStatus.BAD_REQUEST, "bad_request", "malformed request line") from None
        path = target.split("?", 1)[0]
        if not version.startswith("HTTP/1."):
            raise _Refused(HTTPStatus.HTTP_VERSION_NOT_SUPPORTED, "bad_request", "HTTP/1.x only", method, path)
        headers = await self._headers(reader, method, path)
        keep = version == "HTTP/1.1" and headers.get("connection", "").lower() != "close"
        if method == "GET":
            if headers.get("content-length", "0") != "0" or "transfer-encoding" in headers:
                raise _Refused(HTTPStatus.BAD_REQUEST, "bad_request", "GET takes no body", method, path)
            return Request(method, path, b"", authenticated), keep
        if method != "POST":
            raise _Refused(HTTPStatus.METHOD_NOT_ALLOWED, "bad_request", "GET or POST only", method, path)
        length = self._length(headers, method, path)
        if headers.get("expect", "").lower() == "100-continue":
            writer.write(b"HTTP/1.1 100 Continue\r\n\r\n")
        if length <= self.limits.big_body:
            return Request(method, path, await reader.readexactly(length), authenticated), keep
        assert self._big is not None
        await self._big.acquire()  # released by `_one` once the request is answered
        try:
            return Request(method, path, await reader.readexactly(length), authenticated), keep
        except BaseException:
            self._big.release()
            raise

    async def _headers(self, reader: asyncio.StreamReader, method: str, path: str) -> dict[str, str]:
        headers: dict[str, str] = {}
        for _ in range(MAX_HEADERS + 1):
            try:
                line = await reader.readline()
            except ValueError:  # over MAX_LINE
                raise _Refused(HTTPStatus.REQUEST_HEADER_FIELDS_TOO_LARGE, "bad_request", "header line too long",
                               method, path) from None
            if line in (b"\r\n", b"\n"):
                return headers
            if not line.endswith(b"\n"):
                raise asyncio.IncompleteReadError(line, None)
            name, sep, value = line.decode("latin-1").partition(":")
            if not sep:
                raise _Refused(HTTPStatus.BAD_REQUEST, "bad_request", "malformed header line", method, path)
            key, value = name.strip().lower(), value.strip()
            if key in headers and key == "content-length" and headers[key] != value:
                raise _Refused(HTTPStatus.BAD_REQUEST, "bad_request", "conflicting Content-Length", method, path)
            headers[key] = value
        raise _Refused(HTTPStatus.REQUEST_HEADER_FIELDS_TOO_LARGE, "bad_request", "too many headers", method, path)

    def _length(self, headers: dict[str, str], method: str, path: str) -> int:
        if "transfer-encoding" in headers or "content-length" not in headers:
            raise _Refused(HTTPStatus.LENGTH_REQUIRED, "unframed", "a Content-Length body is required", method, path)
        text = headers["content-length"]
        if not text.isdigit() or len(text) > 18:
            raise _Refused(HTTPStatus.BAD_REQUEST, "bad_request", "Content-Length is not a number", method, path)
        length = int(text)
        if length > self.limits.max_body:
            raise _Refused(HTTPStatus.REQUEST_ENTITY_TOO_LARGE, "too_large",
                           f"body of {length} bytes exceeds the limit of {self.limits.max_body}", method, path)
        return length

    async def _write(self, writer: asyncio.StreamWriter, response: Response) -> None:
        phrase = HTTPStatus(response.status).phrase
        close = "Connection: close\r\n" if response.close else ""
        head = (f"HTTP/1.1 {response.status} {phrase}\r\nContent-Type: {response.content_type}\r\n"
                f"Content-Length: {len(response.body)}\r\n{close}\r\n")
        writer.write(head.encode("latin-1") + response.body)
        await asyncio.wait_for(writer.drain(), self.limits.header_timeout_s)

