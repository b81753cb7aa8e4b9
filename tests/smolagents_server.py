"""A real local HTTP server for the smolagents Stop tests and benchmark: does a Stop free the server?

``ChatServer`` speaks OpenAI's chat completions, streaming (server-sent events) and not (one JSON
body), on 127.0.0.1 with HTTP/1.1 keep-alive, as the real services and llama.cpp do. Each request
plays the next scripted ``Reply``: it "generates" for ``seconds`` (streamed in ``chunks`` pieces,
or all at once at the end), then finishes. ``GET /slow?seconds=N`` answers after N seconds, for a
tool that calls a slow web service.

While it generates, the server waits on the socket with ``select``: a client that goes away (EOF or
reset) is seen at once, not at the next write. Every request records when it started, finished and
when its client went away (``time.perf_counter()``), and which connection carried it.
"""

from __future__ import annotations

import json
import select
import socket
import time
from collections import deque
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qs, urlparse

from local_http import LocalHTTPServer, TrackedHandler


@dataclass(frozen=True)
class Reply:
    """One scripted completion: ``text`` and/or ``tool_calls`` ((name, arguments) pairs)."""

    text: str = ""
    tool_calls: tuple[tuple[str, dict[str, Any]], ...] = ()
    seconds: float = 0.0
    """How long generating takes (a stream spreads it over its chunks)."""
    chunks: int = 8
    usage: tuple[int, int] = (20, 10)


def answer_call(value: Any, seconds: float = 0.0) -> Reply:
    """A ToolCallingAgent's final answer."""
    return Reply(tool_calls=(("final_answer", {"answer": value}),), seconds=seconds)


def code_reply(source: str, seconds: float = 0.0) -> Reply:
    """A CodeAgent's reply running ``source``."""
    return Reply(text=f"Thought: go.\n<code>\n{source}\n</code>", seconds=seconds)


@dataclass
class Request:
    number: int
    connection: int
    path: str
    stream: bool
    body: dict[str, Any]
    started: float
    finished: float | None = None
    disconnected: float | None = None


class _Gone(Exception):
    """The client went away."""


class _Server(ThreadingHTTPServer):
    daemon_threads = True

    def handle_error(self, request: Any, client_address: Any) -> None:
        pass  # a client that resets an idle keep-alive connection is no error here


@dataclass
class ChatServer(LocalHTTPServer):
    """The server, on an ephemeral port; a context manager. ``default`` answers once the script ends."""

    replies: Iterable[Reply] = ()
    default: Reply | None = None
    requests: list[Request] = field(default_factory=list)

    def __post_init__(self) -> None:
        self._script: deque[Reply] = deque(self.replies)
        self._serve(_Server(("127.0.0.1", 0), self._handler()), "chat-test-server")

    def push(self, *replies: Reply) -> None:
        with self._cond:
            self._script.extend(replies)

    def __enter__(self) -> ChatServer:
        return self

    def _next_reply(self) -> Reply | None:
        with self._cond:
            return self._script.popleft() if self._script else self.default

    def _handler(self) -> type[BaseHTTPRequestHandler]:
        server = self

        class Handler(TrackedHandler):
            owner = server

            def _track(self, path: str, stream: bool, body: dict[str, Any]) -> Request:
                with server._cond:
                    request = Request(
                        len(server.requests) + 1, self.serial, path, stream, body, time.perf_counter()
                    )
                    server.requests.append(request)
                    server._cond.notify_all()
                return request

            def _serve(self, request: Request, send: Callable[[], None]) -> None:
                try:
                    send()
                    server._changed(lambda: setattr(request, "finished", time.perf_counter()))
                except (_Gone, OSError):
                    self.close_connection = True
                    server._changed(lambda: setattr(request, "disconnected", time.perf_counter()))

            def do_GET(self) -> None:
                url = urlparse(self.path)
                seconds = float(parse_qs(url.query).get("seconds", ["0"])[0])
                request = self._track(url.path, False, {})

                def send() -> None:
                    self._wait(seconds)
                    payload = b"slow answer"
                    self.send_response(200)
                    self.send_header("Content-Type", "text/plain")
                    self.send_header("Content-Length", str(len(payload)))
                    self.end_headers()
                    self.wfile.write(payload)

                self._serve(request, send)

            def do_POST(self) -> None:
                raw = self.rfile.read(int(self.headers.get("Content-Length") or 0))
                body = json.loads(raw) if raw else {}
                request = self._track(self.path, bool(body.get("stream")), body)
                reply = server._next_reply()
                if reply is None:
                    reply = Reply(text="(no scripted reply left)")
                if request.stream:
                    self._serve(request, lambda: self._stream(body, reply))
                else:
                    self._serve(request, lambda: self._whole(body, reply))

            def _wait(self, seconds: float) -> None:
                """Sleep ``seconds``, but notice at once if the client goes away."""
                deadline = time.perf_counter() + seconds
                while (remaining := deadline - time.perf_counter()) > 0:
                    readable, _, _ = select.select([self.connection], [], [], remaining)
                    if readable:
                        try:
                            peeked = self.connection.recv(1, socket.MSG_PEEK)
                        except OSError:
                            raise _Gone() from None
                        if not peeked:
                            raise _Gone()
                        time.sleep(min(remaining, 0.005))

            def _message(self, reply: Reply) -> dict[str, Any]:
                calls = [
                    {
                        "id": f"call_{index}",
                        "type": "function",
                        "function": {"name": name, "arguments": json.dumps(arguments)},
                    }
                    for index, (name, arguments) in enumerate(reply.tool_calls)
                ]
                return {
                    "role": "assistant",
                    "content": reply.text or None,
                    **({"tool_calls": calls} if calls else {}),
                }

            def _usage(self, reply: Reply) -> dict[str, int]:
                p, c = reply.usage
                return {"prompt_tokens": p, "completion_tokens": c, "total_tokens": p + c}

            def _whole(self, body: dict[str, Any], reply: Reply) -> None:
                self._wait(reply.seconds)
                payload = json.dumps(
                    {
                        "id": "chatcmpl-test",
                        "object": "chat.completion",
                        "created": int(time.time()),
                        "model": body.get("model", "test-model"),
                        "choices": [
                            {
                                "index": 0,
                                "message": self._message(reply),
                                "finish_reason": "tool_calls" if reply.tool_calls else "stop",
                            }
                        ],
                        "usage": self._usage(reply),
                    }
                ).encode()
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(payload)))
                self.end_headers()
                self.wfile.write(payload)

            def _event(self, data: dict[str, Any] | str) -> None:
                text = data if isinstance(data, str) else json.dumps(data)
                chunk = f"data: {text}\n\n".encode()
                self.wfile.write(b"%x\r\n%s\r\n" % (len(chunk), chunk))

            def _stream(self, body: dict[str, Any], reply: Reply) -> None:
                base = {"id": "chatcmpl-test", "object": "chat.completion.chunk", "created": int(time.time())}
                base["model"] = body.get("model", "test-model")

                def delta(content: dict[str, Any], finish: str | None = None) -> dict[str, Any]:
                    return {**base, "choices": [{"index": 0, "delta": content, "finish_reason": finish}]}

                self.send_response(200)
                self.send_header("Content-Type", "text/event-stream")
                self.send_header("Transfer-Encoding", "chunked")
                self.end_headers()
                self._event(delta({"role": "assistant", "content": ""}))
                size = max(1, -(-len(reply.text) // reply.chunks))
                for index in range(reply.chunks):
                    self._wait(reply.seconds / reply.chunks)
                    piece = reply.text[index * size : (index + 1) * size]
                    if piece:
                        self._event(delta({"content": piece}))
                message = self._message(reply)
                for index, call in enumerate(message.get("tool_calls", [])):
                    self._event(delta({"tool_calls": [{"index": index, **call}]}))
                self._event(delta({}, "tool_calls" if reply.tool_calls else "stop"))
                if (body.get("stream_options") or {}).get("include_usage"):
                    self._event({**base, "choices": [], "usage": self._usage(reply)})
                self._event("[DONE]")
                self.wfile.write(b"0\r\n\r\n")

        return Handler
