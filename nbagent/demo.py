"""The embedded default: an offline demo agent with real tools and a rule-based scripted model.

``demo_agent()`` needs no network and no API key. Its model reads the task, calls the calculator
for arithmetic, checks primality of what it computed, looks up facts from a small bundled table,
and then answers, streaming every reply at a human pace (steps take about a second) so the live
view and the Stop button can be tried by hand.
"""

from __future__ import annotations

import ast
import asyncio
import json
import math
import operator
import re
from functools import cache
from importlib import resources
from typing import Any

from nbagent.agent import Agent
from nbagent.models.base import Message, ToolCall
from nbagent.models.scripted import Reply, ScriptedModel
from nbagent.tools import tool

_OPERATORS: dict[type, Any] = {
    ast.Add: operator.add,
    ast.Sub: operator.sub,
    ast.Mult: operator.mul,
    ast.Div: operator.truediv,
    ast.FloorDiv: operator.floordiv,
    ast.Mod: operator.mod,
    ast.Pow: operator.pow,
    ast.USub: operator.neg,
    ast.UAdd: operator.pos,
}


def _evaluate(node: ast.AST) -> float | int:
    if isinstance(node, ast.Expression):
        return _evaluate(node.body)
    if (
        isinstance(node, ast.Constant)
        and isinstance(node.value, (int, float))
        and not isinstance(node.value, bool)
    ):
        return node.value
    if isinstance(node, ast.BinOp) and type(node.op) in _OPERATORS:
        left, right = _evaluate(node.left), _evaluate(node.right)
        if isinstance(node.op, ast.Pow) and abs(right) > 100:
            raise ValueError("exponent too large")
        return _OPERATORS[type(node.op)](left, right)
    if isinstance(node, ast.UnaryOp) and type(node.op) in _OPERATORS:
        return _OPERATORS[type(node.op)](_evaluate(node.operand))
    raise ValueError(f"unsupported expression: {ast.dump(node)[:60]}")


@tool
def calculator(expression: str) -> float | int:
    """Evaluate an arithmetic expression.

    Args:
        expression: numbers with + - * / // % ** and parentheses, e.g. "17 * 23".
    """
    return _evaluate(ast.parse(expression, mode="eval"))


@tool
def is_prime(n: int) -> bool:
    """Tell whether an integer is prime.

    Args:
        n: the integer to test.
    """
    if n < 2:
        return False
    return all(n % d for d in range(2, math.isqrt(n) + 1))


@cache
def _facts() -> dict[str, str]:
    return json.loads(resources.files("nbagent").joinpath("data/facts.json").read_text("utf-8"))


@tool
async def lookup_fact(topic: str) -> str:
    """Look a topic up in a small offline encyclopedia (stands in for a web search).

    Args:
        topic: what to look up, e.g. "speed of light".
    """
    await asyncio.sleep(0.8)  # the latency of a real search, so Stop can land mid-tool
    found = find_fact(topic)
    if found is not None:
        return _facts()[found]
    return f"No entry for {topic!r}. Known topics: {', '.join(sorted(_facts()))}."


def _words(text: str) -> str:
    """``text`` as lower-case words separated by single spaces, padded so that a phrase can be
    matched on whole words only (" pi " is not in " capital of france ")."""
    return " " + " ".join(re.findall(r"\w+", text.lower())) + " "


def topics_in(text: str) -> list[str]:
    """The encyclopedia topics named in ``text`` as whole words, longest first."""
    words = _words(text)
    return sorted((name for name in _facts() if _words(name) in words), key=len, reverse=True)


def find_fact(topic: str) -> str | None:
    """The encyclopedia entry for ``topic``: the longest entry named in it as whole words, or the
    entry whose name contains ``topic`` as whole words ("everest"), else ``None``."""
    named = topics_in(topic)
    if named:
        return named[0]
    words = _words(topic)
    if len(words.strip()) >= 3:  # "of" alone names nothing
        return next((name for name in _facts() if words in _words(name)), None)
    return None


_EXPRESSION = re.compile(r"(?<![\w.])(?:\d+(?:\.\d+)?\s*(?:\*\*|//|[-+*/%x×])\s*)+\d+(?:\.\d+)?")


def _tool_results(messages: list[Message]) -> dict[str, str]:
    """The latest result of each tool in the conversation (a continued run keeps earlier ones)."""
    names: dict[str, str] = {}
    results: dict[str, str] = {}
    for message in messages:
        for call in message.get("tool_calls") or ():
            names[call["id"]] = call["function"]["name"]
        if message["role"] == "tool" and not str(message["content"]).startswith("Interrupted"):
            results[names.get(message["tool_call_id"], "?")] = str(message["content"])
    return results


def demo_policy(messages: list[Message]) -> Reply:
    """Decide the next reply from the conversation so far (the demo model's whole "mind").

    It reads every user turn, so "go on" after a Stop continues the earlier task where it stopped.
    """
    task = " ".join(str(m["content"]) for m in messages if m["role"] == "user")
    done = _tool_results(messages)
    expression = _EXPRESSION.search(task)
    wants_prime = "prime" in task.lower()
    topics = [name for name in topics_in(task) if name != "prime"]
    if expression and "calculator" not in done:
        expr = expression.group(0).replace("x", "*").replace("×", "*")
        return Reply(
            f"I'll work this out step by step. First, the arithmetic: {expr}.",
            [ToolCall("calculator", {"expression": expr})],
        )
    value = done.get("calculator")
    if wants_prime and value is not None and "is_prime" not in done:
        try:
            n = int(float(value))
        except ValueError:
            n = 0
        return Reply(
            f"The calculator says {value}. Now I check whether {n} is prime.",
            [ToolCall("is_prime", {"n": n})],
        )
    if topics and "lookup_fact" not in done:
        return Reply(
            f"Let me look up {topics[0]!r} in the encyclopedia.",
            [ToolCall("lookup_fact", {"topic": topics[0]})],
        )
    parts = []
    if value is not None:
        parts.append(f"{expression.group(0) if expression else 'The expression'} = {value}.")
    if "is_prime" in done:
        parts.append(f"It is {'a prime' if done['is_prime'] == 'true' else 'not a prime'} number.")
    if "lookup_fact" in done:
        parts.append(done["lookup_fact"])
    if not parts:
        parts.append(
            "I am the offline demo model: I can do arithmetic, test primes and look up a few facts "
            f"({', '.join(sorted(_facts()))}). Try: 'What is 17 * 23, and is the result prime?'"
        )
    return Reply("Final answer: " + " ".join(parts))


DEMO_TASK = "What is 17 * 23, and is the result prime? Also, what is the speed of light?"


def demo_agent(tokens_per_s: float = 25.0, first_token_s: float = 0.35, max_steps: int = 8) -> Agent:
    """An offline agent (no network, no API key) whose steps take about a second each."""
    model = ScriptedModel(
        demo_policy, tokens_per_s=tokens_per_s, first_token_s=first_token_s, name="demo-scripted"
    )
    return Agent(
        model,
        tools=[calculator, is_prime, lookup_fact],
        instructions="You are a careful assistant. Use the tools for arithmetic and facts.",
        max_steps=max_steps,
        name="demo",
    )
