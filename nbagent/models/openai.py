"""``OpenAIChatModel``: any OpenAI-compatible chat-completions server, streamed, stoppable.

OpenAI itself, Ollama, vLLM, llama.cpp's server and LM Studio all speak this protocol; only the
``base_url`` differs. The official ``openai`` async client does the HTTP, the SSE parsing and the
typed errors; this module adds what a notebook needs on top:

- **Stop closes the stream.** ``stream`` is an async generator. A cancelled run raises
  ``CancelledError`` inside it (or ``aclose()`` throws ``GeneratorExit`` at a ``yield``); either
  way its ``finally`` closes the HTTP response. A response closed before its end cannot go back to
  the pool, so the client closes that connection and the server sees the client go at once; a
  response read to its end returns its connection to the pool. Nothing leaks, however many Stops.
- **Retries we can show.** The client's own retries happen inside one ``await`` where no one can
  see them, so it runs with ``max_retries=0`` and this module retries instead: on 429, 408, 409,
  5xx and connection failures, honouring ``Retry-After`` (and ``retry-after-ms``, and
  ``x-should-retry``), otherwise with exponential backoff, at most ``max_retries`` times. Before
  each wait it yields a ``ModelRetry`` (the live view shows "retrying in 2 s"), and the wait is an
  ``asyncio.sleep``, so a Stop during a backoff ends it at once. Only a reply that has not yet
  produced text is retried: once text reached the user, a retry would say it twice.
- **Tool-call arguments stream** as ``ToolCallDelta`` pieces while the complete calls wait for
  the end of the reply, so a token budget cuts a reply of arguments as it cuts text.
- **Usage is reported.** ``stream_options.include_usage`` asks for the usage chunk; when a server
  sends usage early or on every chunk (running totals), the last one counts. A stream cut by a
  Stop has no usage, and the step's usage stays unknown: never a guess dressed as a count.
- **Readable errors, no secrets** (``nbagent.models.credentials``). Failures become
  ``ModelError`` with a message that says what to do (401: check the key; 404: check the model
  name and base URL) and ``status_code`` / ``retryable`` set. Every credential (the key, header
  values, the user info and query string of ``base_url``) lives in one holder that prints as
  ``<credentials hidden>``. Text taken from a server or an exception is scrubbed of them, and of
  anything shaped like one (bearer and Basic credentials, ``sk-...`` keys, ``user:password@``,
  ``api-key=``), *before* it is shortened, because some servers echo the key back. Credentials in
  ``base_url`` are added to each request by the HTTP transport as it leaves, so the client's
  request objects, its errors and the HTTP library's log lines only ever hold the public URL.

``openai`` is an optional extra, imported when a model is created.
"""

from __future__ import annotations

import asyncio
import contextlib
import email.utils
import json
import os
import random
import sys
import threading
import time
import weakref
from collections.abc import AsyncIterator, Mapping
from dataclasses import dataclass
from typing import Any

from nbagent.errors import ModelError
from nbagent.extras import install_hint
from nbagent.models.base import (
    Message,
    Model,
    ModelPart,
    ModelRetry,
    ModelUsage,
    ToolSpec,
)
from nbagent.models.credentials import Credentials, SendCredentials, environment_proxy, split_base_url
from nbagent.models.openai_reply import MalformedChunk, ReplyAssembly, characters

OPENAI_BASE_URL = "https://api.openai.com/v1"

_RETRY_STATUSES = frozenset({408, 409, 429})
_BACKOFF_FIRST_S = 0.5
_BACKOFF_MAX_S = 8.0
_CLOSE_TIMEOUT_S = 1.0


def _import_openai() -> Any:
    try:
        import openai
    except ImportError as exc:
        raise ImportError(f"OpenAIChatModel needs the openai package: {install_hint('openai')}") from exc
    return openai


@dataclass
class _Failure:
    error: ModelError
    reason: str
    """Short, for the live view: "rate limited (429)"."""
    delay_s: float | None = None
    """How long the server asks us to wait, if it said."""


def _retry_after(headers: Any) -> float | None:
    """Seconds from ``retry-after-ms`` or ``retry-after`` (seconds or an HTTP date)."""
    if headers is None:
        return None
    value = headers.get("retry-after-ms")
    if value:
        try:
            return max(0.0, float(value) / 1000)
        except ValueError:
            pass
    value = headers.get("retry-after")
    if not value:
        return None
    try:
        return max(0.0, float(value))
    except ValueError:
        pass
    try:
        when = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    return max(0.0, when.timestamp() - time.time())


def _server_message(exc: Any) -> str:
    body = getattr(exc, "body", None)
    if isinstance(body, Mapping):
        error = body.get("error", body)
        message = error.get("message") if isinstance(error, Mapping) else error
        if isinstance(message, str) and message:
            return message
    if isinstance(body, str) and body:
        return body
    return str(getattr(exc, "message", "") or exc)


def _shorten(text: str, limit: int = 300) -> str:
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _transport_errors() -> tuple[tuple[type[BaseException], ...], tuple[type[BaseException], ...]]:
    """(timeouts, other transport errors) of the HTTP libraries the client may use.

    openai 1.x lets httpx errors out of a stream unwrapped; newer clients wrap them (httpx2).
    """
    timeouts: list[type[BaseException]] = []
    others: list[type[BaseException]] = []
    for name in ("httpx", "httpx2"):
        module = sys.modules.get(name)
        if module is not None:
            timeouts.append(module.TimeoutException)
            others.append(module.TransportError)
    return tuple(timeouts), tuple(others)


class OpenAIChatModel(Model):
    """A model served over the OpenAI chat-completions API (OpenAI, Ollama, vLLM, llama.cpp, LM Studio).

    Args:
        model: the model id the server knows (``"gpt-4.1-mini"``, ``"qwen3:8b"``); also ``.name``.
        base_url: the server's ``/v1`` URL; default ``OPENAI_BASE_URL`` or OpenAI's.
        api_key: default ``OPENAI_API_KEY``; local servers need none.
        max_retries: retries after a 429, 408, 409, 5xx or connection failure (0 turns them off).
        max_retry_wait_s: the longest ``Retry-After`` worth waiting for; a longer one is an error.
        timeout: seconds to wait to connect and between two pieces of the stream.
        extra_body: extra JSON fields for servers with their own options (vLLM, Ollama...).
        stream_usage: ask for the usage chunk (``stream_options``); turn off for servers that
            reject the option.
        client: an ``openai.AsyncOpenAI`` to use (its pool, key and URL); retries stay this model's.
        default_headers: headers sent with every request (their values are kept as secrets).
        **params: any other chat-completions parameter, sent with every call
            (``temperature=0``, ``max_tokens=512``, ``seed=1``...).

    Credentials in ``base_url`` work and stay hidden: ``https://user:password@host/v1`` sends HTTP
    Basic auth (in place of the bearer key: a request has one ``Authorization``), and a query
    string (``.../v1?api-key=...``) goes with every request, after the path
    (``.../v1/chat/completions?api-key=...``). ``.base_url``, ``repr``, errors and the HTTP
    library's log lines show the URL without them.
    """

    def __init__(
        self,
        model: str,
        *,
        base_url: str | None = None,
        api_key: str | None = None,
        max_retries: int = 3,
        max_retry_wait_s: float = 60.0,
        timeout: float = 120.0,
        extra_body: Mapping[str, Any] | None = None,
        stream_usage: bool = True,
        client: Any = None,
        default_headers: Mapping[str, str] | None = None,
        **params: Any,
    ) -> None:
        if max_retries < 0:
            raise ValueError("max_retries must be 0 or more")
        self._openai = _import_openai()
        self.name = model
        self.max_retries = max_retries
        self.max_retry_wait_s = max_retry_wait_s
        self.timeout = timeout
        self.extra_body = dict(extra_body) if extra_body else None
        self.stream_usage = stream_usage
        # Credentials often travel in these two: they go with the others, out of sight.
        extra_headers, extra_query = params.pop("extra_headers", None), params.pop("extra_query", None)
        self.params = params
        # A given client keeps its pool and settings; the retries become ours, like everywhere else.
        self._given_client = client.with_options(max_retries=0) if client is not None else None
        self._clients: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, Any] = weakref.WeakKeyDictionary()
        self._lock = threading.Lock()
        if client is not None:
            given_url, key = str(client.base_url), getattr(client, "api_key", None)
            key = key if isinstance(key, str) else None
            self._credentials = Credentials(key, given_url, extra_headers, extra_query)
            self.base_url = split_base_url(given_url)[0]
            return
        url = base_url or os.environ.get("OPENAI_BASE_URL") or OPENAI_BASE_URL
        key = api_key or os.environ.get("OPENAI_API_KEY")
        headers = {**(default_headers or {}), **(extra_headers or {})}
        self._credentials = Credentials(key, url, headers, extra_query)
        self.base_url = split_base_url(url)[0]  # the credentials it carried are sent, never shown
        if not key and self.base_url == OPENAI_BASE_URL:
            raise ModelError(
                f"OpenAIChatModel({model!r}): no API key. Pass api_key=... or set OPENAI_API_KEY "
                "(for a local server, pass its base_url)."
            )

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.name!r}, base_url={self.base_url!r})"

    # -- the client ------------------------------------------------------------------------

    def _client(self) -> Any:
        """The client for the running loop (an HTTP pool belongs to one loop)."""
        if self._given_client is not None:
            return self._given_client
        loop = asyncio.get_running_loop()
        with self._lock:
            client = self._clients.get(loop)
            if client is None:
                credentials = self._credentials
                client = self._openai.AsyncOpenAI(
                    # Local servers (Ollama, llama.cpp, LM Studio) ignore the key; the client wants one.
                    api_key=credentials.api_key or "no-key",
                    base_url=self.base_url,
                    timeout=self.timeout,
                    max_retries=0,  # retries are ours, so they can be shown and stopped
                    default_headers=credentials.headers,
                    http_client=self._http_client() if credentials.on_the_wire else None,
                )
                self._clients[loop] = client
        return client

    def _http_client(self) -> Any:
        """The openai client's own kind of HTTP client, whose transport adds the base URL's
        credentials to each request as it leaves (``SendCredentials``)."""
        openai = self._openai
        client_class = openai.DefaultAsyncHttpxClient
        library = next(c for c in client_class.__mro__ if c.__name__ == "AsyncClient").__module__
        http = sys.modules[library.split(".")[0]]  # httpx, or httpx2 for newer openai clients
        base = http.URL(self.base_url)
        proxy = environment_proxy(self.base_url)
        inner = http.AsyncHTTPTransport(
            limits=openai.DEFAULT_CONNECTION_LIMITS, proxy=http.Proxy(proxy) if proxy else None
        )
        credentials = self._credentials
        transport = SendCredentials(
            inner,
            http.Request,
            (base.scheme, base.host, base.port),
            credentials.wire_query,
            credentials.authorization,
        )
        return client_class(transport=transport)

    async def aclose(self) -> None:
        """Close the HTTP connections this model holds on the running loop."""
        loop = asyncio.get_running_loop()
        with self._lock:
            client = self._clients.pop(loop, None)
        if client is not None:
            await client.close()

    def _request(self, messages: list[Message], tools: list[ToolSpec]) -> dict[str, Any]:
        request: dict[str, Any] = {**self.params, "model": self.name, "messages": messages, "stream": True}
        if tools:
            request["tools"] = tools
        if self.stream_usage:
            request["stream_options"] = {"include_usage": True}
        if self.extra_body:
            request["extra_body"] = self.extra_body
        if self._given_client is not None:  # our own client sends these with every request already
            credentials = self._credentials
            if credentials.headers:
                request["extra_headers"] = credentials.headers
            if credentials.extra_query:
                request["extra_query"] = credentials.extra_query
        return request

    # -- streaming -------------------------------------------------------------------------

    async def stream(self, messages: list[Message], tools: list[ToolSpec]) -> AsyncIterator[ModelPart]:
        client = self._client()
        request = self._request(messages, tools)
        retries = 0
        while True:
            reply = ReplyAssembly()
            failure: _Failure | None = None
            response: Any = None
            try:
                response = await client.chat.completions.create(**request)
                async for chunk in response:
                    try:
                        parts = reply.feed(chunk)
                    except MalformedChunk:
                        raise
                    except (AttributeError, TypeError, ValueError, KeyError) as exc:
                        raise MalformedChunk(str(exc)) from None
                    for part in parts:
                        yield part
            except Exception as exc:
                failure = self._failure(exc, reply, streaming=response is not None)
            finally:
                if response is not None:
                    # Cut short, the connection is closed (the server sees us go); read to the
                    # end, it goes back to the pool. Bounded, and never an error of its own: a
                    # close that hangs or fails must not delay a Stop or hide why we stopped.
                    with contextlib.suppress(Exception):
                        await asyncio.wait_for(response.close(), _CLOSE_TIMEOUT_S)
            if failure is None:
                break
            if reply.chars or not failure.error.retryable or retries >= self.max_retries:
                error = failure.error
                if retries and error.retryable and not reply.chars:
                    error = ModelError(
                        f"{error} (gave up after {retries} {'retry' if retries == 1 else 'retries'})",
                        status_code=error.status_code,
                        retryable=True,
                    )
                raise error
            retries += 1
            delay = self._backoff(retries) if failure.delay_s is None else failure.delay_s
            yield ModelRetry(retries, delay, failure.reason)
            await asyncio.sleep(delay)
        for call in reply.tool_calls():
            yield call
        if reply.usage is not None:
            yield ModelUsage(reply.usage[0], reply.usage[1], "reported")

    @staticmethod
    def _backoff(retry: int) -> float:
        return min(_BACKOFF_MAX_S, _BACKOFF_FIRST_S * 2 ** (retry - 1)) * random.uniform(0.75, 1.0)

    # -- errors ----------------------------------------------------------------------------

    def _quote(self, text: str, limit: int = 300) -> str:
        """Text from outside (a server's message, an exception's), fit for an error message:
        scrubbed first, then shortened, so a key near the cut cannot survive as a fragment."""
        return _shorten(self._credentials.scrub(text), limit)

    def _error(self, message: str, *, status_code: int | None = None, retryable: bool = False) -> ModelError:
        where = f"{self.name} at {self.base_url}"
        scrubbed = self._credentials.scrub(f"{where}: {message}")
        return ModelError(scrubbed, status_code=status_code, retryable=retryable)

    def _failure(self, exc: Exception, reply: ReplyAssembly, *, streaming: bool) -> _Failure:
        """What ``exc`` means for the user, and whether and when to try again."""
        openai = self._openai
        timeouts, transport_errors = _transport_errors()
        so_far = characters(reply.chars)
        if isinstance(exc, openai.APIStatusError):
            return self._status_failure(exc)
        if isinstance(exc, (openai.APITimeoutError, *timeouts)):
            cause = exc.__cause__ if isinstance(exc, openai.APITimeoutError) else exc
            connecting = type(cause).__name__ in ("ConnectTimeout", "PoolTimeout")
            phase = "connecting" if connecting else "mid-stream" if streaming else "waiting for the reply"
            message = (
                f"timed out {phase}: no data for {self.timeout:g} s{so_far} (a slow model? raise timeout=)"
            )
            return _Failure(self._error(message, retryable=connecting), "timed out connecting")
        if isinstance(exc, (openai.APIConnectionError, *transport_errors)):
            cause = exc.__cause__ or exc
            detail = self._quote(str(cause)) or type(cause).__name__
            if streaming:
                message = f"the server closed the connection mid-stream{so_far} ({detail})"
                return _Failure(self._error(message, retryable=True), "connection lost")
            message = f"cannot reach the server ({detail}); is it running, and is base_url right?"
            return _Failure(self._error(message, retryable=True), "cannot connect")
        if isinstance(exc, (json.JSONDecodeError, MalformedChunk)):
            what = (
                f"not JSON: {self._quote(exc.doc, 120)!r}" if isinstance(exc, json.JSONDecodeError) else exc
            )
            return _Failure(
                self._error(f"malformed chunk from the server ({what}){so_far}"), "malformed chunk"
            )
        if isinstance(exc, openai.APIError):  # an error event inside the stream
            message = f"the server reported an error mid-stream{so_far}: {self._quote(_server_message(exc))}"
            return _Failure(self._error(message), "error")
        return _Failure(self._error(f"{type(exc).__name__}: {self._quote(str(exc))}"), type(exc).__name__)

    def _status_failure(self, exc: Any) -> _Failure:
        status = int(exc.status_code)
        headers = getattr(getattr(exc, "response", None), "headers", None)
        body = getattr(exc, "body", None)
        error = body.get("error", body) if isinstance(body, Mapping) else None
        code = error.get("code") if isinstance(error, Mapping) else None
        retryable = (status in _RETRY_STATUSES or status >= 500) and code != "insufficient_quota"
        should_retry = headers.get("x-should-retry") if headers is not None else None
        if should_retry in ("true", "false"):
            retryable = should_retry == "true"
        delay = _retry_after(headers)
        reason = _STATUS_REASONS.get(status) or (f"server error ({status})" if status >= 500 else None)
        reason = reason or f"request rejected ({status})"
        message = reason + _STATUS_ADVICE.get(status, "")
        if retryable and delay is not None and delay > self.max_retry_wait_s:
            retryable = False
            message += (
                f"; the server asks to retry in {delay:g} s, over max_retry_wait_s={self.max_retry_wait_s:g}"
            )
        message += f". Server said: {self._quote(_server_message(exc))}"
        return _Failure(self._error(message, status_code=status, retryable=retryable), reason, delay)


_STATUS_REASONS = {
    401: "the server rejected the API key (401 Unauthorized)",
    403: "access denied (403 Forbidden)",
    404: "model not found (404)",
    408: "request timeout (408)",
    409: "conflict (409)",
    429: "rate limited (429 Too Many Requests)",
}
_STATUS_ADVICE = {
    401: "; check api_key= or OPENAI_API_KEY",
    404: "; check the model name and base_url",
}
