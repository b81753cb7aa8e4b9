"""The registry of sources (``nbagent.adapters.registry``): detection is cheap and open to more."""

from __future__ import annotations

import subprocess
import sys
from typing import Any

import pytest

import nbagent
from nbagent.adapters import registry
from nbagent.runtime.source import Source


def test_telling_a_plain_object_apart_imports_no_adapter_and_no_framework():
    code = (
        "import sys, nbagent\n"
        "from nbagent.adapters import source_for\n"
        "assert source_for(object()) is None and source_for(nbagent.demo_agent()) is None\n"
        "loaded = [m for m in sys.modules if m.startswith(('nbagent.adapters.', 'smolagents', "
        "'pydantic_ai', 'agents', 'langgraph'))]\n"
        "assert loaded == ['nbagent.adapters.registry'], loaded\n"
    )
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr


class Robot:
    """An agent of a framework nbagent does not know (its class comes from this test module)."""


class RobotSource(Source):
    model_name = "robot-1"

    def __init__(self, robot: Robot) -> None:
        self.agent = robot
        self.name = "robot"

    async def drive(self, task: str, ctx: Any, reset: bool = True) -> str:
        ctx.start_step("action")
        ctx.finish_step(model_output="beep", kind="final")
        return "beep"


def is_robot(obj: Any) -> bool:
    return isinstance(obj, Robot)


@pytest.fixture
def robots(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(registry, "ADAPTERS", list(registry.ADAPTERS))
    package = __name__.partition(".")[0]
    registry.register(
        registry.Adapter(
            "Robots", extra="robots", packages=(package,),
            detects=f"{__name__}:is_robot", source=f"{__name__}:RobotSource",
        )
    )  # fmt: skip


def test_a_registered_framework_runs_under_nbagent_as_the_built_in_ones_do(robots):
    robot = Robot()
    record = nbagent.run(robot, "speak", display=False)
    assert (record.status, record.output, record.agent, record.model) == (
        "success",
        "beep",
        "robot",
        "robot-1",
    )


def test_an_agent_of_no_known_framework_is_refused_with_the_frameworks_that_run(robots):
    with pytest.raises(TypeError, match=r"nbagent cannot run object: .*LangGraph, Google ADK or Robots"):
        nbagent.start(object(), "go")


def test_register_takes_an_adapter_only():
    with pytest.raises(TypeError, match=r"takes an nbagent\.adapters\.Adapter"):
        registry.register("smolagents")  # type: ignore[arg-type]
