"""Credentials of an OpenAI-compatible endpoint: kept in one holder, sent as requests leave, never shown.

``scrub`` (``nbagent.secrets.scrub``) removes anything that looks like a credential from a text;
``Credentials.scrub`` also removes the endpoint's own secrets, plain and URL-encoded.
``Credentials`` holds the key, the header values and the user info and query taken from
``base_url``, and prints as
``<credentials hidden>``; ``SendCredentials`` is the HTTP transport that adds them to a request
as it leaves for the endpoint's own origin, so the client's request objects, its errors and the
HTTP library's log lines only ever hold the public URL.
"""

from __future__ import annotations

import base64
import urllib.parse
import urllib.request
from collections.abc import Mapping
from typing import Any

from nbagent.secrets import scrub

__all__ = ["Credentials", "SendCredentials", "environment_proxy", "scrub", "split_base_url"]


def split_base_url(url: str) -> tuple[str, str | None, str | None, str]:
    """(the URL without user info, query or fragment; the user; the password; the raw query)."""
    parts = urllib.parse.urlsplit(url)
    userinfo, at, host = parts.netloc.rpartition("@")
    user = password = None
    if at:
        name, colon, secret = userinfo.partition(":")
        user = urllib.parse.unquote(name)
        password = urllib.parse.unquote(secret) if colon else None
    public = urllib.parse.urlunsplit((parts.scheme, host, parts.path, "", "")).rstrip("/")
    return public, user, password, parts.query


class Credentials:
    """What a model sends but never shows: its API key, its headers' values, its extra query
    parameters, and the user info and query string its base URL carried.

    It prints as ``<credentials hidden>``, so ``vars(model)``, a debugger and a traceback's locals
    show none of it, and ``scrub`` takes every one of them out of a text, as given and URL-encoded.
    """

    __slots__ = ("_exact", "api_key", "authorization", "extra_query", "headers", "query")

    def __init__(
        self,
        api_key: str | None,
        base_url: str,
        headers: Mapping[str, str] | None = None,
        extra_query: Mapping[str, Any] | None = None,
    ) -> None:
        _, user, password, query = split_base_url(base_url)
        self.api_key = api_key
        self.headers = dict(headers) if headers else None
        self.extra_query = dict(extra_query) if extra_query else None
        self.query = query
        """The base URL's raw query string."""
        self.authorization: str | None = None
        """``Basic ...`` from the base URL's user info, sent in place of the bearer key."""
        secrets = {api_key, password, *(self.headers or {}).values()}
        if user and password is None:
            secrets.add(user)  # a token given as the user name: https://TOKEN@host/v1
        if user:
            token = base64.b64encode(f"{user}:{password or ''}".encode()).decode()
            self.authorization = f"Basic {token}"
            secrets.add(token)
        wire_query = self.wire_query
        secrets.update(value for _, value in urllib.parse.parse_qsl(wire_query, keep_blank_values=True))
        secrets.update(pair.partition("=")[2] for pair in wire_query.split("&"))  # still encoded
        forms = {
            form
            for secret in secrets
            if secret and len(secret) >= 4  # shorter "secrets" would blank out ordinary words
            for form in (secret, urllib.parse.quote(secret, safe=""), urllib.parse.quote_plus(secret))
        }
        self._exact = sorted(forms, key=len, reverse=True)  # a secret before any part of it

    @property
    def wire_query(self) -> str:
        """The query string each request of our own client carries: the base URL's, then
        ``extra_query``'s."""
        extra = urllib.parse.urlencode(self.extra_query, doseq=True) if self.extra_query else ""
        return "&".join(part for part in (self.query, extra) if part)

    @property
    def on_the_wire(self) -> bool:
        """True when our own client needs ``SendCredentials`` to add a query or Basic auth."""
        return bool(self.authorization or self.query or self.extra_query)

    def scrub(self, text: str) -> str:
        return scrub(text, self._exact)

    def __repr__(self) -> str:
        return "<credentials hidden>"

    __str__ = __repr__


class SendCredentials:
    """An HTTP transport that adds the base URL's query and user info to each request as it leaves.

    The client, its request objects, its errors and httpx's own log line (``HTTP Request: POST
    <url>``) only ever hold the public URL; the credentials exist only in the copy of the request
    handed to the connection. A request to another origin (a redirect) gets none of them.
    """

    def __init__(
        self, inner: Any, request_class: Any, origin: tuple[Any, ...], query: str, authorization: str | None
    ) -> None:
        self._inner = inner
        self._request_class = request_class
        self._origin = origin
        self._query = urllib.parse.quote(query, safe="=&;%+/:?@!$'()*,").encode("ascii")
        self._authorization = authorization

    async def handle_async_request(self, request: Any) -> Any:
        url = request.url
        if (url.scheme, url.host, url.port) != self._origin:
            return await self._inner.handle_async_request(request)
        raw_path = url.raw_path
        if self._query:
            raw_path += (b"&" if b"?" in raw_path else b"?") + self._query
        headers = request.headers.copy()
        if self._authorization:
            headers["Authorization"] = self._authorization
        wire = self._request_class(
            request.method,
            url.copy_with(raw_path=raw_path),
            headers=headers,
            stream=request.stream,
            extensions=request.extensions,
        )
        return await self._inner.handle_async_request(wire)

    async def aclose(self) -> None:
        await self._inner.aclose()

    async def __aenter__(self) -> SendCredentials:
        await self._inner.__aenter__()
        return self

    async def __aexit__(self, *exc: Any) -> None:
        await self._inner.__aexit__(*exc)


def environment_proxy(url: str) -> str | None:
    """The proxy HTTPS_PROXY / HTTP_PROXY / ALL_PROXY name for ``url`` (NO_PROXY honoured), as httpx
    would pick it for a client of its own."""
    parts = urllib.parse.urlsplit(url)
    proxies = urllib.request.getproxies_environment()
    if urllib.request.proxy_bypass_environment(parts.hostname or "", proxies):
        return None
    proxy = proxies.get(parts.scheme) or proxies.get("all")
    return proxy if not proxy or "://" in proxy else f"http://{proxy}"
