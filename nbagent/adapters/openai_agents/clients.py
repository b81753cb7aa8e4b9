"""An Agents SDK run under nbagent gets an OpenAI client of its own, so plain and nbagent runs of
one agent can be mixed in a kernel.

Why. An async HTTP client's connections belong to the event loop that opened them. The SDK sends
every model named by a string (``Agent(model="gpt-4.1")``) through one process-wide client (the
one ``set_default_openai_client`` set, or one on the SDK's shared HTTP client). A user who ran
``Runner.run`` in a notebook cell used it on the kernel's loop; nbagent runs on its own loop,
where it fails ("... is bound to a different event loop"), and the other way round.

What nbagent does. A run whose ``run_config`` keeps the SDK's default model provider gets, for
that run only, a ``MultiProvider`` (the SDK's default) whose OpenAI client is the one the SDK
would use, copied with its own ``copy(http_client=...)`` onto a new HTTP client that is closed
when the run ends. The user's agents, clients and the SDK's defaults are never changed. A model
given as an object (``OpenAIResponsesModel(openai_client=...)``) or a ``model_provider`` of the
user's own is used as it is: its client is the user's to give.
"""

from __future__ import annotations

import contextlib
import dataclasses
from collections.abc import AsyncIterator
from typing import Any


@contextlib.asynccontextmanager
async def own_client(run_config: Any) -> AsyncIterator[Any]:
    """Yield the ``run_config`` this run should use: the given one, or (see the module) a copy
    whose model provider has an OpenAI client for this run, closed on exit."""
    from agents import RunConfig
    from agents.models.multi_provider import MultiProvider
    from agents.models.openai_provider import OpenAIProvider
    from openai import DefaultAsyncHttpx2Client, OpenAIError

    if isinstance(run_config, dict):  # a mapping of RunConfig's fields: the SDK reads it as given
        yield run_config
        return
    config = run_config if run_config is not None else RunConfig()
    if not _default_provider(config.model_provider):
        yield run_config
        return
    try:
        default = OpenAIProvider()._get_client()  # the client the SDK would send through
    except OpenAIError:  # no API key: only a run of models given as objects works, as in the SDK
        yield run_config
        return
    fresh = DefaultAsyncHttpx2Client()
    client = default.copy(http_client=fresh)
    try:
        yield dataclasses.replace(config, model_provider=MultiProvider(openai_client=client))
    finally:
        await fresh.aclose()


def _default_provider(provider: Any) -> bool:
    """True for a ``MultiProvider`` as ``RunConfig()`` makes it: no options of the user's."""
    from agents.models.multi_provider import MultiProvider

    if type(provider) is not MultiProvider:
        return False
    return _options(provider) == _options(MultiProvider())


def _options(provider: Any) -> tuple[Any, ...]:
    """A ``MultiProvider``'s settings, its OpenAI provider's included (what it made lazily aside)."""
    made_lazily = ("_client", "_ws_model_cache_by_loop")
    openai = {k: v for k, v in vars(getattr(provider, "openai_provider", None) or object()).items()}
    return (
        getattr(provider, "provider_map", None),
        getattr(provider, "_openai_prefix_mode", None),
        getattr(provider, "_unknown_prefix_mode", None),
        {k: v for k, v in openai.items() if k not in made_lazily},
    )
