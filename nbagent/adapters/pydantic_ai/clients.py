"""A pydantic-ai run under nbagent gets an HTTP client of its own, so plain and nbagent runs of
one agent can be mixed in a kernel.

Why. An async HTTP client's connections belong to the event loop that opened them. A user who ran
``await agent.run(...)`` in a notebook cell used the provider's client on the kernel's loop;
nbagent runs on its own loop, where that client fails ("... is bound to a different event
loop"), and the other way round once nbagent had used it first. pydantic-ai replaces a provider's
own client when a run moves to another loop only once the old loop has stopped (a run still going
there may be using it), and neither the kernel's loop nor nbagent's ever stops.

What nbagent does. When the provider made its own client (``_http_client_factory``) and that
client is not already this loop's, the run gets a copy of the model, for that run only
(``agent.iter(model=...)``, pydantic-ai's own run option), on a copy of its provider with a new
client from the provider's own factory, closed when the run ends. The user's model, provider and
client are never changed or used on nbagent's loop, so plain runs on the kernel's loop go on
using them.

The copy reads the provider's private fields (pydantic-ai 2.7x: ``_own_http_client``,
``_http_client_factory``, ``_own_client_loop``, ``_client``) and copies the SDK client with its own
``copy(http_client=...)``; a model that lacks them (a wrapper, a provider given its own
``http_client=``, an SDK client without ``copy``) is used as it is, and mixing then fails as
pydantic-ai alone would.
"""

from __future__ import annotations

import asyncio
import contextlib
import copy
from collections.abc import AsyncIterator
from typing import Any


@contextlib.asynccontextmanager
async def own_client(model: Any) -> AsyncIterator[Any]:
    """Yield the model this run should use: ``model`` itself, or (see the module) a copy of it
    with an HTTP client for the running loop, closed on exit."""
    provider = getattr(model, "provider", None)
    if not _held_elsewhere(provider):
        yield model
        return
    fresh = provider._http_client_factory()
    mine = copy.copy(provider)
    mine.__dict__.pop("_enter_lock", None)  # a lock bound to the other loop: made again on use
    # The SDK's own copy (OpenAI's, Anthropic's ``copy(http_client=...)``): a shallow copy would
    # share its cached resources (``client.chat``), which send through the original's client.
    mine._client = provider._client.copy(http_client=fresh)
    mine._own_http_client = fresh
    mine._own_client_loop = asyncio.get_running_loop()
    for_run = copy.copy(model)
    for_run._provider = mine
    try:
        yield for_run
    finally:
        await fresh.aclose()


def _held_elsewhere(provider: Any) -> bool:
    """True when ``provider`` made its own client and it is not the running loop's (it was used on
    another loop, or not yet: nbagent then leaves it to the user's plain runs)."""
    if provider is None or getattr(provider, "_http_client_factory", None) is None:
        return False
    if not callable(getattr(getattr(provider, "_client", None), "copy", None)):
        return False
    if getattr(provider, "_own_http_client", None) is None or getattr(provider, "_entered_count", 0):
        return False
    return getattr(provider, "_own_client_loop", None) is not asyncio.get_running_loop()
