"""A real OpenAI-compatible chat-completions server for tests and benchmarks, on 127.0.0.1.

Why a real server: the things that matter for a Stop button (the connection is dropped, the
server sees the client go, the pool does not leak) only exist on a real socket. This is plain
stdlib (``http.server``), HTTP/1.1 with keep-alive and chunked server-sent events, like the real
services. Each request plays the next scripted reply:

- ``Stream``: text at ``tokens_per_s``, tool calls with their arguments split over several
  deltas, a final usage chunk (when the client asked for it), and failure modes: a malformed
  chunk, a disconnect mid-stream, a stall (for timeouts), usage in every chunk.
- ``Status``: an error status with an OpenAI-style JSON body and headers (429 + Retry-After...).

``/chat/completions`` answers as chat-completion chunks; ``/responses`` plays the same script as
the Responses API's typed events (``response.created`` ... ``response.completed``, which always
carries the usage, as the real service does), for clients such as the OpenAI Agents SDK.

The server records every request (its path, query and headers as they arrived on the wire), and
the moment it saw the client go away: between two tokens
it waits on the socket with ``select``, so a client that closes the connection is seen at once
(EOF or reset), not at the next write. ``wait_until`` waits on a condition with a deadline.
"""

from __future__ import annotations

import base64
import json
import re
import select
import socket
import time
from collections import deque
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qs, urlsplit

from local_http import LocalHTTPServer, TrackedHandler

_TOKEN = re.compile(r"\s*\S+|\s+")


@dataclass(frozen=True)
class StreamedCall:
    """A tool call the server streams: ``arguments`` (JSON text) goes out in ``pieces`` deltas."""

    name: str
    arguments: str
    id: str = ""
    pieces: int = 3


@dataclass(frozen=True)
class Stream:
    """A streamed 200 reply."""

    text: str = ""
    tokens_per_s: float = 1000.0
    headers_after_s: float = 0.0
    """A server slow to start: wait this long before even the response headers."""
    first_token_s: float = 0.0
    tool_calls: Sequence[StreamedCall] = ()
    usage: tuple[int, int] | None = None
    """(prompt, completion) tokens; default: words of the prompt, pieces sent."""
    usage_every_chunk: bool = False
    """Send running usage on every chunk (vLLM's continuous usage stats), then the final one."""
    malformed_after: int | None = None
    """Send the ``malformed`` event after this many text tokens."""
    malformed: str = '{"id": "broken", "choices": [{"delta": {"content": "oops"'
    """The data of that event; by default, JSON cut in the middle."""
    disconnect_after: int | None = None
    """Drop the connection (no end of body) after this many text tokens."""
    stall_after: int | None = None
    """Send nothing more after this many text tokens, until the client goes away."""


@dataclass(frozen=True)
class Status:
    """An error reply: ``code`` with an OpenAI-style error body."""

    code: int
    message: str = "error"
    type: str = "server_error"
    error_code: str | None = None
    headers: dict[str, str] = field(default_factory=dict)


Reply = Stream | Status


@dataclass
class Request:
    """One request as the server saw it; times are ``time.perf_counter()`` readings."""

    number: int
    connection: int
    path: str
    """The request target as sent: the path and its query string."""
    headers: dict[str, str]
    """Lower-case names."""
    body: dict[str, Any]
    reply: Reply | None
    started: float
    route: str = ""
    """The path without its query string."""
    query: dict[str, list[str]] = field(default_factory=dict)
    """The query string, decoded."""
    tokens_sent: int = 0
    finished: float | None = None
    """The whole reply was sent."""
    disconnected: float | None = None
    """The client went away before the reply ended."""


class _Gone(Exception):
    """The client closed the connection."""


class _Cut(Exception):
    """The script told the server to drop the connection."""


class OpenAIServer(LocalHTTPServer):
    """A scriptable chat-completions server on an ephemeral port; use as a context manager.

    Args:
        replies: the scripted replies, one per request, in order.
        default: the reply once the script is used up (None: answer 400 "no scripted reply").
        api_key: when set, other keys get a 401 that echoes the key back (some servers do).
        key_param: look for ``api_key`` in this query parameter (Azure's ``api-key``) instead of
            the ``Authorization: Bearer`` header.
        basic_auth: (user, password) the server wants as HTTP Basic auth; other credentials get a
            401 that echoes the ``Authorization`` header back.
        models: when set, other model names get a 404.
    """

    def __init__(
        self,
        replies: Iterable[Reply] = (),
        *,
        default: Reply | None = None,
        api_key: str | None = None,
        key_param: str | None = None,
        basic_auth: tuple[str, str] | None = None,
        models: Iterable[str] | None = None,
    ) -> None:
        self._replies: deque[Reply] = deque(replies)
        self.default = default
        self.api_key = api_key
        self.key_param = key_param
        self.basic_auth = basic_auth
        self.models = set(models) if models is not None else None
        self.requests: list[Request] = []
        httpd = ThreadingHTTPServer(("127.0.0.1", 0), self._handler_class())
        httpd.daemon_threads = True
        self._serve(httpd, "openai-test-server")

    def push(self, *replies: Reply) -> None:
        """Script more replies."""
        with self._cond:
            self._replies.extend(replies)

    def __enter__(self) -> OpenAIServer:
        return self

    # -- the server side -------------------------------------------------------------------

    def _next_reply(
        self, body: dict[str, Any], headers: dict[str, str], query: dict[str, list[str]]
    ) -> Reply | None:
        if self.basic_auth is not None:
            user, password = self.basic_auth
            wanted = "Basic " + base64.b64encode(f"{user}:{password}".encode()).decode()
            given = headers.get("authorization", "")
            if given != wanted:
                return Status(401, f"Bad credentials in Authorization: {given}", "invalid_request_error")
        if self.api_key is not None:
            if self.key_param is not None:
                given = (query.get(self.key_param) or [""])[0]
            else:
                given = headers.get("authorization", "").removeprefix("Bearer ")
            if given != self.api_key:
                return Status(
                    401, f"Incorrect API key provided: {given}.", "invalid_request_error", "invalid_api_key"
                )
        if self.models is not None and body.get("model") not in self.models:
            return Status(
                404,
                f"The model `{body.get('model')}` does not exist or you do not have access to it.",
                "invalid_request_error",
                "model_not_found",
            )
        with self._cond:
            if self._replies:
                return self._replies.popleft()
        return self.default

    def _handler_class(self) -> type[BaseHTTPRequestHandler]:
        server = self

        class Handler(TrackedHandler):
            owner = server

            def do_POST(self) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                raw = self.rfile.read(length)
                try:
                    body = json.loads(raw) if raw else {}
                except json.JSONDecodeError:
                    body = {"_raw": raw.decode(errors="replace")}
                headers = {k.lower(): v for k, v in self.headers.items()}
                target = urlsplit(self.path)
                route, query = target.path, parse_qs(target.query, keep_blank_values=True)
                chat = route.endswith(("/chat/completions", "/responses"))
                reply = server._next_reply(body, headers, query) if chat else None
                if reply is None and chat:
                    reply = Status(400, "test server: no scripted reply left", "invalid_request_error")
                with server._cond:
                    request = Request(
                        len(server.requests) + 1,
                        self.serial,
                        self.path,
                        headers,
                        body,
                        reply,
                        time.perf_counter(),
                        route,
                        query,
                    )
                    server.requests.append(request)
                    server._cond.notify_all()
                try:
                    if reply is None:
                        self._send_status(
                            request, Status(404, f"no route {self.path}", "invalid_request_error")
                        )
                    elif isinstance(reply, Status):
                        self._send_status(request, reply)
                    elif route.endswith("/responses"):
                        self._send_responses_stream(request, reply)
                    else:
                        self._send_stream(request, reply)
                except _Cut:
                    self.close_connection = True
                except (_Gone, OSError):
                    self.close_connection = True
                    server._changed(lambda: setattr(request, "disconnected", time.perf_counter()))

            # -- replies -------------------------------------------------------------------

            def _send_status(self, request: Request, reply: Status) -> None:
                payload = json.dumps(
                    {
                        "error": {
                            "message": reply.message,
                            "type": reply.type,
                            "param": None,
                            "code": reply.error_code,
                        }
                    }
                ).encode()
                self.send_response(reply.code)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(payload)))
                for name, value in reply.headers.items():
                    self.send_header(name, value)
                self.end_headers()
                self.wfile.write(payload)
                server._changed(lambda: setattr(request, "finished", time.perf_counter()))

            def _wait(self, seconds: float) -> None:
                """Sleep ``seconds``, but notice at once if the client closes the connection."""
                deadline = time.perf_counter() + seconds
                while True:
                    remaining = deadline - time.perf_counter()
                    if remaining <= 0:
                        return
                    readable, _, _ = select.select([self.connection], [], [], remaining)
                    if readable:
                        try:
                            peeked = self.connection.recv(1, socket.MSG_PEEK)
                        except OSError:
                            raise _Gone() from None
                        if not peeked:
                            raise _Gone()
                        time.sleep(min(remaining, 0.005))  # unexpected bytes: keep waiting, gently

            def _event(self, data: str) -> None:
                chunk = f"data: {data}\n\n".encode()
                self.wfile.write(b"%x\r\n%s\r\n" % (len(chunk), chunk))

            def _send_stream(self, request: Request, reply: Stream) -> None:
                body = request.body
                want_usage = bool((body.get("stream_options") or {}).get("include_usage"))
                model = body.get("model", "test-model")
                created = int(time.time())

                def chunk(delta: dict[str, Any] | None, finish: str | None = None, **extra: Any) -> str:
                    choices = [] if delta is None else [{"index": 0, "delta": delta, "finish_reason": finish}]
                    data = {
                        "id": f"chatcmpl-{request.number}",
                        "object": "chat.completion.chunk",
                        "created": created,
                        "model": model,
                        "choices": choices,
                        **extra,
                    }
                    return json.dumps(data)

                prompt = sum(
                    len(_TOKEN.findall(str(m.get("content") or ""))) + 4 for m in body.get("messages", [])
                )
                sent = 0

                def usage(completion: int | None = None) -> dict[str, int]:
                    p, c = reply.usage if reply.usage is not None else (prompt, sent)
                    c = c if completion is None else completion
                    return {"prompt_tokens": p, "completion_tokens": c, "total_tokens": p + c}

                def running() -> dict[str, Any]:
                    return {"usage": usage(sent)} if reply.usage_every_chunk and want_usage else {}

                self._wait(reply.headers_after_s)
                self.send_response(200)
                self.send_header("Content-Type", "text/event-stream")
                self.send_header("Cache-Control", "no-cache")
                self.send_header("Transfer-Encoding", "chunked")
                self.end_headers()
                delay = 1.0 / reply.tokens_per_s
                self._wait(reply.first_token_s)
                self._event(chunk({"role": "assistant", "content": ""}, **running()))
                for token in _TOKEN.findall(reply.text):
                    if reply.disconnect_after is not None and sent >= reply.disconnect_after:
                        self.connection.shutdown(socket.SHUT_RDWR)
                        raise _Cut()
                    if reply.malformed_after is not None and sent == reply.malformed_after:
                        self._event(reply.malformed)
                    if reply.stall_after is not None and sent >= reply.stall_after:
                        self._wait(3600)
                    sent += 1
                    self._event(chunk({"content": token}, **running()))
                    server._changed(lambda count=sent: setattr(request, "tokens_sent", count))
                    self._wait(delay)
                for index, call in enumerate(reply.tool_calls):
                    call_id = call.id or f"call_{request.number}_{index}"
                    first = {
                        "index": index,
                        "id": call_id,
                        "type": "function",
                        "function": {"name": call.name, "arguments": ""},
                    }
                    self._event(chunk({"tool_calls": [first]}, **running()))
                    size = max(1, -(-len(call.arguments) // max(1, call.pieces)))
                    for start in range(0, len(call.arguments), size):
                        piece = call.arguments[start : start + size]
                        delta = {"tool_calls": [{"index": index, "function": {"arguments": piece}}]}
                        self._event(chunk(delta, **running()))
                        self._wait(delay)
                    sent += 1
                finish = "tool_calls" if reply.tool_calls else "stop"
                self._event(chunk({}, finish, **running()))
                if want_usage:
                    self._event(chunk(None, usage=usage()))
                self._event("[DONE]")
                self.wfile.write(b"0\r\n\r\n")
                server._changed(lambda: setattr(request, "finished", time.perf_counter()))

            def _send_responses_stream(self, request: Request, reply: Stream) -> None:
                """The Responses API's server-sent events for ``reply``: a message item whose text
                streams, then one function-call item per tool call, then ``response.completed``."""
                body = request.body
                number = request.number
                items = body.get("input")
                items = [{"content": items}] if isinstance(items, str) else list(items or [])
                prompt = sum(
                    len(_TOKEN.findall(str(i.get("content") or i.get("output") or ""))) + 4
                    for i in items
                    if isinstance(i, dict)
                )
                sequence = 0
                sent = 0

                def event(kind: str, **data: Any) -> None:
                    nonlocal sequence
                    sequence += 1
                    payload = json.dumps({"type": kind, "sequence_number": sequence, **data})
                    chunk = f"event: {kind}\ndata: {payload}\n\n".encode()
                    self.wfile.write(b"%x\r\n%s\r\n" % (len(chunk), chunk))

                def response(status: str, output: list[dict[str, Any]], usage: Any = None) -> dict[str, Any]:
                    return {
                        "id": f"resp_{number}", "object": "response", "created_at": int(time.time()),
                        "model": body.get("model", "test-model"), "status": status, "output": output,
                        "parallel_tool_calls": True, "tool_choice": "auto", "tools": [], "usage": usage,
                        "error": None, "incomplete_details": None, "instructions": None, "metadata": {},
                    }  # fmt: skip

                self._wait(reply.headers_after_s)
                self.send_response(200)
                self.send_header("Content-Type", "text/event-stream")
                self.send_header("Cache-Control", "no-cache")
                self.send_header("Transfer-Encoding", "chunked")
                self.end_headers()
                event("response.created", response=response("in_progress", []))
                self._wait(reply.first_token_s)
                output: list[dict[str, Any]] = []
                delay = 1.0 / reply.tokens_per_s
                if reply.text:
                    message_id = f"msg_{number}"
                    message = {"id": message_id, "type": "message", "role": "assistant",
                               "status": "in_progress", "content": []}  # fmt: skip
                    event("response.output_item.added", output_index=0, item=message)
                    part = {"type": "output_text", "text": "", "annotations": [], "logprobs": []}
                    event("response.content_part.added", item_id=message_id, output_index=0,
                          content_index=0, part=part)  # fmt: skip
                    text = ""
                    for token in _TOKEN.findall(reply.text):
                        if reply.disconnect_after is not None and sent >= reply.disconnect_after:
                            self.connection.shutdown(socket.SHUT_RDWR)
                            raise _Cut()
                        if reply.stall_after is not None and sent >= reply.stall_after:
                            self._wait(3600)
                        sent += 1
                        text += token
                        event("response.output_text.delta", item_id=message_id, output_index=0,
                              content_index=0, delta=token, logprobs=[])  # fmt: skip
                        server._changed(lambda count=sent: setattr(request, "tokens_sent", count))
                        self._wait(delay)
                    part = {**part, "text": text}
                    event("response.output_text.done", item_id=message_id, output_index=0,
                          content_index=0, text=text, logprobs=[])  # fmt: skip
                    event("response.content_part.done", item_id=message_id, output_index=0,
                          content_index=0, part=part)  # fmt: skip
                    message = {**message, "status": "completed", "content": [part]}
                    event("response.output_item.done", output_index=0, item=message)
                    output.append(message)
                for index, call in enumerate(reply.tool_calls):
                    position = len(output)
                    item = {"id": f"fc_{number}_{index}", "type": "function_call", "status": "in_progress",
                            "call_id": call.id or f"call_{number}_{index}", "name": call.name,
                            "arguments": ""}  # fmt: skip
                    event("response.output_item.added", output_index=position, item=item)
                    size = max(1, -(-len(call.arguments) // max(1, call.pieces)))
                    for start in range(0, len(call.arguments), size):
                        event("response.function_call_arguments.delta", item_id=item["id"],
                              output_index=position, delta=call.arguments[start : start + size])  # fmt: skip
                        self._wait(delay)
                    item = {**item, "status": "completed", "arguments": call.arguments}
                    event("response.function_call_arguments.done", item_id=item["id"],
                          output_index=position, arguments=call.arguments)  # fmt: skip
                    event("response.output_item.done", output_index=position, item=item)
                    output.append(item)
                    sent += 1
                tokens_in, tokens_out = reply.usage if reply.usage is not None else (prompt, sent)
                usage = {"input_tokens": tokens_in, "output_tokens": tokens_out,
                         "total_tokens": tokens_in + tokens_out, "input_tokens_details": {"cached_tokens": 0},
                         "output_tokens_details": {"reasoning_tokens": 0}}  # fmt: skip
                event("response.completed", response=response("completed", output, usage))
                self.wfile.write(b"0\r\n\r\n")
                server._changed(lambda: setattr(request, "finished", time.perf_counter()))

        return Handler
