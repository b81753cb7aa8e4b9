"""Tools for the native ``Agent``: ``@tool`` turns a typed, documented function into one.

The JSON schema comes from the type hints, the descriptions from the docstring (its first
paragraph describes the tool, an ``Args:`` section describes the parameters). Async tools run on
the run's loop and are cancelled like any await. Sync tools run on a daemon thread of their own:
on a Stop the agent waits a short grace period for the tool to notice (``check_interrupt()``) and
then abandons it, so a tool that ignores cancellation never holds a run hostage. A tool that
returns within that grace did its work (the email went out): its result is kept and recorded
``"ok"`` (``ToolFinishedWhileStopping``), and the run stops after it.
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import inspect
import re
import threading
import types
import typing
import warnings
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Literal, Protocol, Union, get_args, get_origin, overload, runtime_checkable

from nbagent.errors import NbagentError, ToolError, describe
from nbagent.runtime.tasks import spawn_contained, stop_within

_VALID_NAME = re.compile(r"^[A-Za-z0-9_-]{1,64}$")
"""What OpenAI-style APIs accept as a function name."""

_SCALARS: dict[Any, str] = {str: "string", int: "integer", float: "number", bool: "boolean"}


def json_schema(annotation: Any) -> dict[str, Any]:
    """The JSON schema of a type hint (the subset tool arguments use)."""
    if annotation in _SCALARS:
        return {"type": _SCALARS[annotation]}
    if annotation in (inspect.Parameter.empty, Any):
        return {}
    origin, args = get_origin(annotation), get_args(annotation)
    if origin is Literal:
        return {"enum": list(args)}
    if origin in (Union, types.UnionType):
        options = [json_schema(a) for a in args if a is not type(None)]
        schema = options[0] if len(options) == 1 else {"anyOf": options}
        if type(None) in args:
            schema = {"anyOf": [schema, {"type": "null"}]}
        return schema
    if annotation in (list, tuple, set) or origin in (list, tuple, set, frozenset):
        return {"type": "array", "items": json_schema(args[0]) if args else {}}
    if annotation is dict or origin is dict:
        return {"type": "object"}
    raise TypeError(f"cannot describe the type {annotation!r} as a tool argument")


_SECTION = re.compile(r"^(\w[\w ]*):\s*$")
_ARG_LINE = re.compile(r"^(\s*)(\w+)\s*(?:\([^)]*\))?\s*:\s*(.*)$")


def parse_docstring(doc: str | None) -> tuple[str, dict[str, str]]:
    """The description (first paragraph) and the ``Args:`` entries of a Google-style docstring."""
    if not doc:
        return "", {}
    description: list[str] = []
    params: dict[str, str] = {}
    in_sections = in_args = False
    current: str | None = None
    arg_indent = -1
    for line in inspect.cleandoc(doc).splitlines():
        header = _SECTION.match(line)
        if header:
            in_sections, current = True, None
            in_args = header.group(1) in ("Args", "Arguments", "Parameters")
            continue
        if not in_sections:
            description.append(line)
        elif in_args and line.strip():
            match = _ARG_LINE.match(line)
            indent = len(line) - len(line.lstrip())
            if match and (current is None or indent <= arg_indent):
                current, arg_indent = match.group(2), indent
                params[current] = match.group(3).strip()
            elif current is not None:
                params[current] += " " + line.strip()
    return "\n".join(description).strip().split("\n\n")[0].strip(), params


@dataclass
class Tool:
    """A function the agent may call. Build one with ``@tool``."""

    fn: Callable[..., Any]
    name: str
    description: str
    parameters: dict[str, Any]
    timeout_s: float | None = None
    requires_approval: bool = False
    """The call waits for a person to approve it (Approve / Deny, or ``run.approve``)."""
    grace_s: float = 0.02
    """How long a cancelled tool (sync, or async that ignores its cancel) gets to stop by itself
    before it is abandoned."""
    is_async: bool = field(init=False)

    def __post_init__(self) -> None:
        self.is_async = inspect.iscoroutinefunction(self.fn)

    @property
    def spec(self) -> dict[str, Any]:
        """The tool in the OpenAI function-calling format."""
        return {
            "type": "function",
            "function": {"name": self.name, "description": self.description, "parameters": self.parameters},
        }

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        return self.fn(*args, **kwargs)

    def validate(self, arguments: dict[str, Any]) -> None:
        """Raise ``ToolError`` for missing or unexpected arguments (types are the tool's business)."""
        props = self.parameters.get("properties", {})
        missing = [n for n in self.parameters.get("required", []) if n not in arguments]
        unknown = [n for n in arguments if n not in props]
        problems = []
        if missing:
            problems.append("missing " + ", ".join(missing))
        if unknown:
            problems.append("unexpected " + ", ".join(unknown))
        if problems:
            raise ToolError(f"bad arguments for {self.name}: {'; '.join(problems)}", tool=self.name)

    async def acall(self, arguments: dict[str, Any]) -> Any:
        """Run the tool with ``arguments`` on the current loop, honouring its timeout.

        The timeout is enforced here, not with ``asyncio.wait_for``: on Python 3.11 ``wait_for``
        can swallow a cancel that lands as the tool returns, and would report a timed-out sync
        tool as cancelled.
        """
        self.validate(arguments)
        if self.is_async:
            return await _run_on_loop(self.fn(**arguments), self.timeout_s, self.grace_s, self.name)
        return await _run_on_thread(self.fn, arguments, self.grace_s, self.timeout_s, self.name)


@runtime_checkable
class Toolset(Protocol):
    """Tools listed when a run starts rather than when the agent is built: an MCP server
    (``nbagent.mcp.MCPServer``). ``tools()`` runs on the run's loop; what it raises fails the run."""

    async def tools(self) -> list[Tool]: ...


class ToolAbandoned(NbagentError):
    """A cancelled sync tool did not stop within its grace period; its thread was left to finish."""


class ToolFinishedWhileStopping(NbagentError):
    """A cancelled tool returned within its grace period: the run stops, but the tool did its work,
    so its ``result`` is real and belongs in the record (raised instead of the cancel)."""

    def __init__(self, result: Any) -> None:
        super().__init__("the tool finished while the run was stopping")
        self.result = result


def _raised(name: str, exc: BaseException) -> ToolError:
    """A tool's ``SystemExit``, ``KeyboardInterrupt`` and the like, as the tool error they become."""
    return ToolError(f"{name} raised {describe(exc)}", tool=name)


def _timed_out(name: str, timeout_s: float, detail: str = "") -> ToolError:
    return ToolError(f"{name} timed out after {timeout_s:g} s{detail}", tool=name)


class _CancelledElsewhere(ToolError):
    """The tool's task was cancelled by something other than a Stop or its timeout."""


async def _run_on_loop(coro: Any, timeout_s: float | None, grace_s: float, name: str) -> Any:
    """Await an async tool as a task of its own, so a timeout can cancel it and a Stop always wins.

    A tool that swallows its cancellation (a bare ``except:`` that retries) gets ``grace_s`` to
    end, as a sync tool does, and is then abandoned: the run stops, the task is left behind.
    """
    # SystemExit and the like become a ToolError, as they do for a sync tool.
    task = spawn_contained(coro, lambda exc: _raised(name, exc), name=f"tool {name}")
    try:
        done, _ = await asyncio.wait({task}, timeout=timeout_s)
    except asyncio.CancelledError:
        if not await stop_within(task, grace_s):
            raise ToolAbandoned() from None
        if not task.cancelled() and task.exception() is None:  # it returned all the same
            raise ToolFinishedWhileStopping(task.result()) from None
        raise
    if not done:
        ended = await stop_within(task, grace_s)
        detail = "" if ended else "; it ignored the cancel and was left running"
        raise _timed_out(name, timeout_s or 0.0, detail)
    if task.cancelled():
        raise _CancelledElsewhere(
            f"{name} was cancelled from inside the tool (something it awaited was cancelled), not by a Stop",
            tool=name,
        )
    return task.result()


async def _run_on_thread(
    fn: Callable[..., Any], arguments: dict[str, Any], grace_s: float, timeout_s: float | None, name: str
) -> Any:
    """Run a sync function on its own daemon thread.

    A cancel gives the function ``grace_s`` to stop by itself (``check_interrupt``), then leaves
    it; a timeout leaves it at once, and a result later than that is discarded. A result that
    arrives within the grace is kept (``ToolFinishedWhileStopping``).
    """
    loop = asyncio.get_running_loop()
    future: asyncio.Future[Any] = loop.create_future()
    context = contextvars.copy_context()  # carries the run's cancel scope for check_interrupt()

    def deliver(ok: bool, value: Any) -> None:
        if future.done():
            return  # abandoned: the late result is discarded
        if ok:
            future.set_result(value)
        else:
            future.set_exception(value)

    def work() -> None:
        try:
            value, ok = context.run(fn, **arguments), True
        except Exception as exc:  # delivered to the awaiting coroutine, not lost on this thread
            value, ok = exc, False
        except BaseException as exc:  # SystemExit and the like must not reach the runner's loop
            value, ok = _raised(name, exc), False
        with contextlib.suppress(RuntimeError):  # the loop is gone; nobody waits for this result
            loop.call_soon_threadsafe(deliver, ok, value)

    threading.Thread(target=work, name=f"nbagent-tool-{name}", daemon=True).start()
    try:
        done, _ = await asyncio.wait({future}, timeout=timeout_s)
    except asyncio.CancelledError:
        done, _ = await asyncio.wait({future}, timeout=grace_s)
        if not done:
            future.cancel()
            raise ToolAbandoned() from None
        if future.exception() is None:  # it returned: its side effect happened, keep its result
            raise ToolFinishedWhileStopping(future.result()) from None
        raise  # it raised (its own AgentInterrupted, say): cancelled, and that is not news
    if not done:
        future.cancel()
        raise _timed_out(name, timeout_s or 0.0, "; its thread was left to finish")
    return future.result()


@overload
def tool(fn: Callable[..., Any], /) -> Tool: ...
@overload
def tool(
    *,
    name: str | None = None,
    description: str | None = None,
    timeout_s: float | None = None,
    requires_approval: bool = False,
) -> Callable[[Callable[..., Any]], Tool]: ...


def tool(
    fn: Callable[..., Any] | None = None,
    /,
    *,
    name: str | None = None,
    description: str | None = None,
    timeout_s: float | None = None,
    requires_approval: bool = False,
) -> Tool | Callable[[Callable[..., Any]], Tool]:
    """Make a ``Tool`` from a function with type hints and a docstring.

    Use bare (``@tool``) or with options (``@tool(timeout_s=5)``). ``requires_approval=True``
    makes every call wait for a person's decision before it runs.
    """
    if not isinstance(requires_approval, bool):
        raise TypeError(f"requires_approval must be True or False, not {requires_approval!r}")

    def build(f: Callable[..., Any]) -> Tool:
        if not callable(f):
            raise TypeError(f"a tool must be a function, not {type(f).__name__}")
        tool_name = name or getattr(f, "__name__", "")
        if not _VALID_NAME.match(tool_name):
            raise ValueError(
                f"{tool_name or type(f).__name__!r} is not a valid tool name (letters, digits, _ and -, "
                "at most 64): give a lambda or a callable object a name with @nbagent.tool(name=...)"
            )
        doc, arg_docs = parse_docstring(f.__doc__)
        if not (description or doc):
            warnings.warn(
                f"tool {tool_name} has no docstring: the model sees no description of it "
                "(add one, or @nbagent.tool(description=...))",
                UserWarning,
                stacklevel=3,
            )
        try:
            hints = typing.get_type_hints(f)
        except NameError as exc:
            raise TypeError(
                f"tool {tool_name}: a type hint names something undefined ({exc}); "
                "import it, or quote a type that exists"
            ) from None
        properties: dict[str, Any] = {}
        required: list[str] = []
        untyped: list[str] = []
        for pname, param in inspect.signature(f).parameters.items():
            if param.kind in (param.VAR_POSITIONAL, param.VAR_KEYWORD):
                raise TypeError(f"tool {tool_name}: *args and **kwargs cannot be described to a model")
            if pname not in hints and param.annotation is param.empty:
                untyped.append(pname)
            schema = json_schema(hints.get(pname, param.annotation))
            if pname in arg_docs:
                schema["description"] = arg_docs[pname]
            if param.default is param.empty:
                required.append(pname)
            else:
                schema["default"] = param.default
            properties[pname] = schema
        if untyped:
            warnings.warn(
                f"tool {tool_name}: no type hint for {', '.join(untyped)}; the model is not told "
                "what to pass",
                UserWarning,
                stacklevel=3,
            )
        parameters = {"type": "object", "properties": properties, "required": required}
        return Tool(
            fn=f,
            name=tool_name,
            description=description or doc or f.__name__,
            parameters=parameters,
            timeout_s=timeout_s,
            requires_approval=requires_approval,
        )

    return build(fn) if fn is not None else build
