"""``RunRecord.raise_for_status()`` raises the typed error of the run's end with the record's own
message, read once: ``ModelError: the server said no``, never ``ModelError: ModelError: ...``."""

from __future__ import annotations

import traceback

import pytest

import nbagent
from nbagent.errors import AgentError, ModelError
from nbagent.models.base import Model


class RefusingModel(Model):
    """A model whose server refuses every request."""

    name = "refuser"

    async def stream(self, messages, tools):
        raise ModelError("the server said no", status_code=403)
        yield  # pragma: no cover (makes this an async generator)


def test_raise_for_status_names_the_error_type_once():
    record = nbagent.run(nbagent.Agent(RefusingModel()), "hi", display=False)
    assert record.status == "error" and record.error_type == "ModelError"
    assert record.error.startswith("ModelError: ")
    with pytest.raises(ModelError) as raised:
        record.raise_for_status()
    assert raised.value.record is record
    line = traceback.format_exception_only(raised.value)[-1].strip()
    assert line == f"nbagent.errors.ModelError: {record.error.removeprefix('ModelError: ')}"
    assert "ModelError: ModelError" not in line and line.endswith("the server said no")


def test_raise_for_status_keeps_a_foreign_error_type_in_the_message():
    class Broken(Model):
        name = "broken"

        async def stream(self, messages, tools):
            raise ValueError("bad reply")
            yield  # pragma: no cover

    record = nbagent.run(nbagent.Agent(Broken()), "hi", display=False)
    with pytest.raises(AgentError) as raised:
        record.raise_for_status()
    assert "ValueError: bad reply" in str(raised.value)
