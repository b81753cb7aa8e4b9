"""Compatibility: a smolagents agent run through nbagent behaves exactly as under ``agent.run``.

Each scenario is modelled on one of smolagents' own agent tests (its tests/test_agents.py: tool
calling, code, additional_args, reset, max steps, function persistence, final-answer checks,
generation errors, planning, interrupt, step callbacks, custom final-answer tools, images, managed
agents, parallel tool calls, code errors, streaming). It builds two identical agents on the same
scripted model and runs one plainly and one through ``nbagent.run``, then compares:

- the output (``agent.run``'s return value against the record's ``output``) and the end state
  (returned / max steps / which exception, against the record's status and error type);
- the memory, step by step (kind, step number, error type and message, model output,
  observations, tool calls, token usage, final-answer flag, action output), and the step count of
  the record; the token totals (memory sums against the record's totals); each step's error;
- what the agent is left with: its task, state, step number, interrupt switch and, for a
  ``CodeAgent``, the variables its code defined.

Then, for each agent type, Stop-and-continue: a run stopped through nbagent in the middle of step 2,
continued with ``reset=False``, against smolagents' own way to stop between steps and continue.
"""

from __future__ import annotations

import dataclasses
import hashlib
import re
from collections.abc import Callable
from typing import Any

import pytest
from PIL import Image
from smolagents import CodeAgent, FinalAnswerTool, Tool, ToolCallingAgent, tool
from smolagents.memory import ActionStep, FinalAnswerStep, PlanningStep, TaskStep
from smolagents.models import Model
from smolagents.monitoring import LogLevel
from smolagents.utils import AgentError, AgentMaxStepsError
from smolagents_fakes import (
    HOLD_S,
    ScriptedSmolModel,
    SlowTool,
    StreamingScriptedSmolModel,
    Turn,
    answer,
    call,
    code,
    fails,
    plan,
)
from support import wait_until

import nbagent
from nbagent.adapters.smolagents import source as adapter

pytestmark = pytest.mark.needs("smolagents")


@tool
def multiply(a: float, b: float) -> float:
    """Multiplies two numbers.

    Args:
        a: the first.
        b: the second.
    """
    return a * b


@tool
def paint(colour: str) -> Image.Image:
    """Paints a small picture.

    Args:
        colour: its colour.
    """
    return Image.new("RGB", (8, 8), colour)


@tool
def describe_image(image: Any) -> str:
    """Describes an image.

    Args:
        image: the image.
    """
    return "a red square"


class PairFinalAnswer(FinalAnswerTool):
    inputs = {  # noqa: RUF012
        "answer1": {"type": "string", "description": "First part."},
        "answer2": {"type": "string", "description": "Second part."},
    }

    def forward(self, answer1: str, answer2: str) -> str:
        return answer1 + "CUSTOM" + answer2


class Doubler(Tool):
    name = "doubler"
    description = "Doubles a number."
    inputs = {"x": {"type": "number", "description": "the number"}}  # noqa: RUF012
    output_type = "number"

    def forward(self, x: float) -> float:
        return 2 * x


@dataclasses.dataclass
class Scenario:
    """Runs of one agent: ``make(model)`` builds the agent; ``runs`` are (task, run() options)."""

    make: Callable[[Model], Any]
    turns: list[Turn]
    runs: list[tuple[str, dict[str, Any]]] = dataclasses.field(default_factory=lambda: [("Solve it.", {})])
    stream: bool = False


def quiet(**options: Any) -> dict[str, Any]:
    return {"verbosity_level": LogLevel.OFF, **options}


def code_agent(**options: Any) -> Callable[[Model], Any]:
    return lambda model: CodeAgent(model=model, **quiet(**{"tools": [], **options}))


def tool_agent(**options: Any) -> Callable[[Model], Any]:
    return lambda model: ToolCallingAgent(model=model, **quiet(**{"tools": [], **options}))


def counting_callbacks(model: Model) -> Any:
    counts = {"ActionStep": 0, "PlanningStep": 0, "FinalAnswerStep": 0}

    def count(step: Any, agent: Any) -> None:
        counts[type(step).__name__] += 1
        agent.state["callback_counts"] = dict(counts)

    callbacks = {ActionStep: count, PlanningStep: count, FinalAnswerStep: count}
    return ToolCallingAgent(
        model=model, tools=[multiply], planning_interval=2, step_callbacks=callbacks, **quiet()
    )


def checked_answer(answer: Any, memory: Any, agent: Any) -> bool:
    assert isinstance(agent.model, Model) and all(isinstance(t, Tool) for t in agent.tools.values())
    return answer == 7.2904


def stop_after_first_step(step: Any, agent: Any) -> None:
    agent.interrupt()


def manager_with_researcher(kind: str, summary: bool) -> Callable[[Model], Any]:
    def make(model: Model) -> Any:
        researcher = ToolCallingAgent(
            tools=[],
            model=ScriptedSmolModel([answer("Paris is in France.")]),
            name="researcher",
            description="Finds facts.",
            provide_run_summary=summary,
            **quiet(),
        )
        cls = CodeAgent if kind == "code" else ToolCallingAgent
        return cls(tools=[], model=model, managed_agents=[researcher], **quiet())

    return make


NEVER_ENDS = [code("print('again')")] * 5 + [Turn(text="I give up.")]

SCENARIOS: dict[str, Scenario] = {
    "toolcalling-computes-then-answers": Scenario(
        tool_agent(tools=[multiply]), [call("multiply", a=2, b=3.6452), answer("7.2904")]
    ),
    "code-agent-returns-a-float": Scenario(
        code_agent(), [code("x = 2 * 3.6452\nprint(x)"), code("final_answer(7.2904)")]
    ),
    "additional-args-reach-the-task-and-the-code": Scenario(
        code_agent(),
        [code("final_answer(instruction.upper())")],
        [("Shout it.", {"additional_args": {"instruction": "remember this"}})],
    ),
    "reset-and-continue-conversations": Scenario(
        code_agent(),
        [code("final_answer(1)"), code("final_answer(2)"), code("final_answer(3)")],
        [("One.", {"reset": True}), ("Two.", {"reset": False}), ("Three.", {"reset": True})],
    ),
    "max-steps-forces-an-answer": Scenario(code_agent(max_steps=5), NEVER_ENDS),
    "max-steps-per-run": Scenario(
        code_agent(max_steps=5), NEVER_ENDS[:3] + NEVER_ENDS[-1:], [("Go.", {"max_steps": 3})]
    ),
    "function-persistence-across-steps": Scenario(
        code_agent(), [code("def half(x):\n    return x / 2\nprint('ok')"), code("final_answer([half(1)])")]
    ),
    "nontrivial-final-answer": Scenario(
        code_agent(), [code("def nested():\n    final_answer('Correct!')\nnested()")]
    ),
    "final-answer-checks-fail-then-pass": Scenario(
        code_agent(final_answer_checks=[checked_answer]),
        [code("final_answer(1)"), code("final_answer(7.2904)")],
    ),
    "generation-errors-are-raised": Scenario(code_agent(), [fails(ValueError("Generation failed"))]),
    "planning-steps": Scenario(
        tool_agent(tools=[multiply], planning_interval=2),
        [plan(), call("multiply", a=2, b=3), call("multiply", a=3, b=4), plan("Then answer."), answer("12")],
    ),
    "interrupt-from-a-step-callback": Scenario(
        code_agent(step_callbacks=[stop_after_first_step]), [code("print(1)"), code("final_answer(2)")]
    ),
    "step-callbacks-by-type": Scenario(
        counting_callbacks,
        [plan(), call("multiply", a=1, b=2), call("multiply", a=2, b=2), plan(), answer("4")],
    ),
    "custom-final-answer-with-custom-inputs-tools": Scenario(
        tool_agent(tools=[PairFinalAnswer()]), [call("final_answer", answer1="1", answer2="2")]
    ),
    "custom-final-answer-with-custom-inputs-code": Scenario(
        code_agent(tools=[PairFinalAnswer()]), [code("final_answer(answer1='1', answer2='2')")]
    ),
    "toolcalling-image-tool-output": Scenario(
        tool_agent(tools=[paint]), [call("paint", colour="red"), answer("image.png")]
    ),
    "code-agent-image-output": Scenario(
        code_agent(tools=[paint]), [code("final_answer(paint(colour='red'))")]
    ),
    "image-inputs": Scenario(
        tool_agent(tools=[describe_image]),
        [call("describe_image", image="image"), answer("a red square")],
        [("Caption this image.", {"images": [Image.new("RGB", (4, 4), "red")]})],
    ),
    "managed-agent-called-by-a-tool-calling-manager": Scenario(
        manager_with_researcher("tool", summary=True),
        [call("researcher", task="Where is Paris?"), answer("France")],
    ),
    "managed-agent-called-from-code": Scenario(
        manager_with_researcher("code", summary=False),
        [code("print(researcher(task='Where is Paris?'))"), code("final_answer('France')")],
    ),
    "a-tool-error-is-observed-and-the-run-goes-on": Scenario(
        tool_agent(tools=[SlowTool(fail=True)]), [call("lookup", query="x"), answer("no luck")]
    ),
    "parallel-tool-calls": Scenario(
        tool_agent(tools=[multiply, Doubler()]),
        [Turn(tool_calls=(("multiply", {"a": 2, "b": 3}), ("doubler", {"x": 4}))), answer("6 and 8")],
    ),
    "final-answer-with-other-calls-is-refused": Scenario(
        tool_agent(tools=[multiply]),
        [Turn(tool_calls=(("multiply", {"a": 2, "b": 3}), ("final_answer", {"answer": "6"}))), answer("6")],
    ),
    "unknown-tool": Scenario(tool_agent(), [call("nowhere", x=1), answer("sorry")]),
    "code-errors-show-the-offending-line": Scenario(
        code_agent(), [code("secret = 3\n['1', '2'][secret]"), code("final_answer('fixed')")]
    ),
    "tools-changed-after-init": Scenario(
        lambda model: _with_extra_tool(CodeAgent(tools=[], model=model, **quiet())),
        [code("final_answer(doubler(x=21))")],
    ),
    "streaming-tool-calls": Scenario(
        tool_agent(tools=[multiply]), [call("multiply", a=2, b=3), answer("6")], stream=True
    ),
    "streaming-code": Scenario(code_agent(), [code("print(2 * 3)"), code("final_answer(6)")], stream=True),
    "streaming-planning": Scenario(
        code_agent(planning_interval=1), [plan(), code("final_answer(6)")], stream=True
    ),
}


def _with_extra_tool(agent: Any) -> Any:
    agent.tools["doubler"] = Doubler()
    return agent


# -- the harness -----------------------------------------------------------------------------


_ADDRESS = re.compile(r" at 0x[0-9a-fA-F]+")


def comparable(value: Any) -> Any:
    """A value as it can be compared across two runs (images by their pixels)."""
    if isinstance(value, Image.Image):
        return ("image", type(value).__name__, value.size, hashlib.sha1(value.tobytes()).hexdigest())
    if isinstance(value, str):
        return (type(value).__name__, _ADDRESS.sub(" at 0x?", str(value)))
    if isinstance(value, dict):
        return {k: comparable(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [comparable(v) for v in value]
    if callable(value):
        return ("callable", getattr(value, "__name__", type(value).__name__))
    return value


def usage(step: Any) -> tuple[int, int] | None:
    tokens = getattr(step, "token_usage", None)
    return None if tokens is None else (tokens.input_tokens, tokens.output_tokens)


def memory_of(agent: Any) -> list[tuple[Any, ...]]:
    """The agent's memory, step by step, in comparable form."""
    steps: list[tuple[Any, ...]] = []
    for step in agent.memory.steps:
        if isinstance(step, TaskStep):
            steps.append(("task", step.task, len(step.task_images or [])))
        elif isinstance(step, PlanningStep):
            steps.append(("planning", step.plan, usage(step)))
        elif isinstance(step, ActionStep):
            error = step.error
            steps.append(
                (
                    "action",
                    step.step_number,
                    None if error is None else (type(error).__name__, str(error)),
                    step.model_output,
                    comparable(step.observations),
                    [(c.name, comparable(c.arguments)) for c in step.tool_calls or ()],
                    usage(step),
                    step.is_final_answer,
                    comparable(step.action_output),
                )
            )
    return steps


def left_with(agent: Any) -> dict[str, Any]:
    """What the agent keeps after its runs, besides its memory."""
    kept = {
        "task": agent.task,
        "state": comparable(agent.state),
        "step_number": agent.step_number,
        "interrupt_switch": agent.interrupt_switch,
    }
    executor = getattr(agent, "python_executor", None)
    if executor is not None:
        kept["variables"] = comparable({k: v for k, v in executor.state.items() if not k.startswith("_")})
    return kept


def run_plainly(agent: Any, task: str, options: dict[str, Any]) -> tuple[str, Any]:
    """``agent.run``: ("returned", output), ("max_steps", output) or ("raised", the exception type)."""
    try:
        output = agent.run(task, **options)
    except AgentError as exc:
        return "raised", type(exc).__name__
    last = agent.memory.steps[-1]
    return (
        "max_steps" if isinstance(getattr(last, "error", None), AgentMaxStepsError) else "returned"
    ), output


EXPECTED_STATUS = {"returned": "success", "max_steps": "max_steps"}
RAISED_AS = {"AgentGenerationError": ("error", "ModelError"), "AgentError": ("interrupted", None)}


def assert_same_run(plain: tuple[str, Any], record: nbagent.RunRecord, agent: Any, since: int) -> None:
    how, value = plain
    if how == "raised":
        assert (record.status, record.error_type) == RAISED_AS[value], record.error
    else:
        assert record.status == EXPECTED_STATUS[how], record.error
        assert comparable(record.output) == comparable(value)
        assert type(record.output) is type(value)
    steps = [s for s in agent.memory.steps[since:] if isinstance(s, (ActionStep, PlanningStep))]
    assert len(record.steps) == len(steps)
    known = [usage(s) for s in steps if usage(s) not in (None, (0, 0))]
    assert record.input_tokens == (sum(u[0] for u in known) if known else None)
    assert record.output_tokens == (sum(u[1] for u in known) if known else None)
    for number, (step_record, step) in enumerate(zip(record.steps, steps, strict=True), start=1):
        error = getattr(step, "error", None)
        if error is not None and not isinstance(error, AgentMaxStepsError):
            assert step_record.error is not None and str(error).strip() in step_record.error
        elif how == "raised" and number == len(steps) and record.status == "error":
            assert step_record.error == record.error  # the step the run's error ended
        else:
            assert step_record.error is None


def build(scenario: Scenario) -> Any:
    model_class = StreamingScriptedSmolModel if scenario.stream else ScriptedSmolModel
    agent = scenario.make(model_class(scenario.turns))
    if scenario.stream:
        agent.stream_outputs = True
    return agent


@pytest.mark.parametrize("name", list(SCENARIOS))
def test_nbagent_runs_it_as_smolagents_does(name):
    scenario = SCENARIOS[name]
    plain, through = build(scenario), build(scenario)
    for task, options in scenario.runs:
        options = dict(options)
        reset = options.pop("reset", True)
        expected = run_plainly(plain, task, {**options, "reset": reset})
        since = 0 if reset else len(through.memory.steps)
        record = nbagent.run(through, task, reset=reset, **options)
        assert adapter.wait_idle(through, timeout=20)
        assert_same_run(expected, record, through, since + 1)
    assert memory_of(through) == memory_of(plain)
    assert left_with(through) == left_with(plain)


def test_an_agent_that_ran_under_nbagent_then_runs_plainly_as_if_it_never_had():
    scenario = SCENARIOS["function-persistence-across-steps"]
    plain, through = build(scenario), build(scenario)
    turns = [code("final_answer(half(8))")]
    plain.run("Define it.")
    nbagent.run(through, "Define it.")
    for agent in (plain, through):
        agent.model.turns += turns
    assert plain.run("Use it.", reset=False) == through.run("Use it.", reset=False) == 4
    assert memory_of(through) == memory_of(plain)
    assert left_with(through) == left_with(plain)


# -- Stop, then continue ----------------------------------------------------------------------


def continued_plainly(kind: str, turns: list[Turn], tools: list[Any]) -> tuple[Any, Any]:
    """smolagents' own stop (``interrupt()`` after step 1) and continuation: the reference."""
    make = CodeAgent if kind == "code" else ToolCallingAgent
    agent = make(
        tools=tools, model=ScriptedSmolModel(turns), step_callbacks=[stop_after_first_step], **quiet()
    )
    with pytest.raises(AgentError):
        agent.run("Start.")
    agent.step_callbacks._callbacks[ActionStep].remove(stop_after_first_step)
    return agent, agent.run("Go on.", reset=False)


@pytest.mark.parametrize("kind", ["code", "tool"])
def test_stop_and_continue_gives_what_smolagents_gives(kind):
    if kind == "code":
        first = code("def helper(x):\n    return lookup(query=x)\nseen = helper('a')\nprint(seen)")
        last = code("final_answer(helper('b') + ' / ' + seen)")
    else:
        first, last = call("lookup", query="a"), answer("done with a")
    held = dataclasses.replace(last, delay_s=HOLD_S)

    plain, plain_output = continued_plainly(kind, [first, last], [SlowTool()])

    model = ScriptedSmolModel([first, held, last])
    make = CodeAgent if kind == "code" else ToolCallingAgent
    agent = make(tools=[SlowTool()], model=model, **quiet())
    run = nbagent.start(agent, "Start.")
    assert model.wait_for_call(2)  # step 2's model call is in flight
    assert run.interrupt()
    stopped = run.wait(timeout=30)
    assert stopped.status == "interrupted" and [s.interrupted for s in stopped.steps] == [False, True]
    model.release()
    record = nbagent.run(agent, "Go on.", reset=False)

    assert record.status == "success"
    assert comparable(record.output) == comparable(plain_output)
    assert len(record.steps) == 1
    continued = memory_of(agent)[-1]
    reference = memory_of(plain)[-1]
    assert continued[2:] == reference[2:]  # the same last step (its number counts the cut step)
    assert record.input_tokens == 100 and record.output_tokens == 10
    wait_until(lambda: adapter.wait_idle(agent, timeout=0))
    if kind == "code":
        assert left_with(agent)["variables"] == left_with(plain)["variables"]
    # nbagent's memory also keeps the cut step, so the model is told it was interrupted
    cut = [s for s in agent.memory.steps if isinstance(s, ActionStep)][1]
    assert "Interrupted by the user" in str(cut.error)
