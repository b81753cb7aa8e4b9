"""The error tree (``nbagent.errors``): what one module raises and another catches is an NbagentError."""

from __future__ import annotations

import importlib

import pytest

from nbagent.errors import NbagentError

CAUGHT_ACROSS_MODULES = [
    ("nbagent.tools", "ToolAbandoned"),
    ("nbagent.tools", "ToolFinishedWhileStopping"),
    ("nbagent.models.openai_reply", "MalformedChunk"),
    ("nbagent.batches.ray_run", "RemoteFailure"),
    ("nbagent.batches.ray_run", "NotAccepted"),
    ("nbagent.analytics.store.file", "StoreError"),
    ("nbagent.analytics.store.leases", "LeaseHeldError"),
    ("nbagent.adapters.langgraph.threads", "ThreadPausedError"),
]


@pytest.mark.parametrize(("module", "name"), CAUGHT_ACROSS_MODULES)
def test_an_exception_caught_outside_its_module_is_an_nbagent_error(module: str, name: str) -> None:
    cls = getattr(importlib.import_module(module), name)
    assert issubclass(cls, NbagentError)
    assert name in importlib.import_module("nbagent.errors").__doc__  # and the tree names it


def test_a_paused_thread_is_still_a_value_error_for_code_that_caught_one() -> None:
    from nbagent.adapters.langgraph.threads import ThreadPausedError

    assert issubclass(ThreadPausedError, ValueError)
