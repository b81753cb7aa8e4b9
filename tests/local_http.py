"""What the local test HTTP servers share: a server on 127.0.0.1 with a thread of its own, a
condition over its state that tests wait on, and a close that wakes idle keep-alive handlers."""

from __future__ import annotations

import contextlib
import socket
import threading
import time
from collections.abc import Callable
from http.server import ThreadingHTTPServer


class LocalHTTPServer:
    """Mixin for a test server. Subclasses set ``_cond`` and ``_sockets`` (the connections open
    now) and call ``_serve`` with their ``ThreadingHTTPServer``."""

    _cond: threading.Condition
    _sockets: set[socket.socket]
    _httpd: ThreadingHTTPServer
    _thread: threading.Thread

    def _serve(self, httpd: ThreadingHTTPServer, name: str) -> None:
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
