"""What the local test HTTP servers share: a server on 127.0.0.1 with a thread of its own, a
condition over its state that tests wait on, and a close that wakes idle keep-alive handlers."""

from __future__ import annotations

import contextlib
import itertools
import socket
import threading
import time
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


class LocalHTTPServer:
    """Mixin for a test server: ``_serve`` it with a ``ThreadingHTTPServer`` whose handler is a
    ``TrackedHandler``. ``connections_opened`` and ``open_connections`` count its connections."""

    _httpd: ThreadingHTTPServer
    _thread: threading.Thread

    def _serve(self, httpd: ThreadingHTTPServer, name: str) -> None:
        self._cond = threading.Condition()
        self._sockets: set[socket.socket] = set()
        self._serials = itertools.count(1)
        self.connections_opened = 0
        self.open_connections = 0
        self._httpd = httpd
        self._thread = threading.Thread(
            target=httpd.serve_forever, kwargs={"poll_interval": 0.05}, name=name, daemon=True
        )
        self._thread.start()

    @property
    def root_url(self) -> str:
        host, port = self._httpd.server_address[:2]
        return f"http://{host}:{port}"

    @property
    def base_url(self) -> str:
        return f"{self.root_url}/v1"

    def wait_until(self, condition: Callable[[], object], timeout: float = 20.0) -> None:
        """Wait until ``condition()`` (evaluated under the server's lock) is true, or fail."""
        deadline = time.monotonic() + timeout
        with self._cond:
            while not condition():
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    raise AssertionError(f"server condition not met within {timeout} s")
                self._cond.wait(min(remaining, 0.05))

    def _changed(self, update: Callable[[], None]) -> None:
        with self._cond:
            update()
            self._cond.notify_all()

    def close(self) -> None:
        self._httpd.shutdown()
        with self._cond:
            sockets = list(self._sockets)
        for sock in sockets:  # wake handlers parked on idle keep-alive connections
            with contextlib.suppress(OSError):
                sock.shutdown(socket.SHUT_RDWR)
        self._httpd.server_close()
        self._thread.join(5)

    def __exit__(self, *exc: object) -> None:
        self.close()


class TrackedHandler(BaseHTTPRequestHandler):
    """A keep-alive handler that registers its connection with its server (``owner``), so tests
    can count connections and ``close`` can wake it; ``serial`` numbers the connection."""

    protocol_version = "HTTP/1.1"
    owner: LocalHTTPServer

    def setup(self) -> None:
        super().setup()
        owner = self.owner
        self.serial = next(owner._serials)

        def opened() -> None:
            owner.connections_opened += 1
            owner.open_connections += 1
            owner._sockets.add(self.connection)

        owner._changed(opened)

    def finish(self) -> None:
        with contextlib.suppress(OSError):
            super().finish()
        owner = self.owner

        def closed() -> None:
            owner.open_connections -= 1
            owner._sockets.discard(self.connection)

        owner._changed(closed)

    def log_message(self, format: str, *args: Any) -> None:
        pass
