"""Two runs side by side, step by step: the A/B a user runs after changing a prompt or a model.

Alignment is deliberately simple and predictable: steps pair by number (step 3 of A with step 3
of B; a step only one run has is shown alone), and within a pair, tool calls pair by tool name
and order (the second ``search`` call of A with the second ``search`` call of B), so a reordered
or extra call shows as such instead of shifting every later pair. What differs is marked: a
step's model text, a call's arguments, result or outcome, a step only one side has, and the
deltas of tokens, time and cost (B minus A; an unknown count gives an unknown delta, never 0).
A run whose usage is incomplete (a step cut by a Stop before its usage arrived) has token and
cost totals that are only the known part, a lower bound: their deltas are unknown too, never a
definite number, and ``usage_note`` says why (the HTML shows such a total as "≥ n").

A fork and the run it forks (``nbagent.fork``: one's ``forked_from_run_id`` is the other) share
their steps before the fork's step ``k``: those are paired as one shared step (``StepPair.shared``:
shown once, no differences, no deltas), and the run-level deltas compare the two *paths* from
step ``k`` (the original's steps from ``k`` on, its time from step ``k``'s start, against the
fork's own), since a fork's totals are its own steps only.

``compare`` returns a ``Comparison`` that Jupyter shows as HTML, each side drawn with the run
view's own step panels (``nbagent.view.html.step_html``); ``compare_frame`` gives the same
numbers as a DataFrame, for two runs or for many against the first.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field, replace
from itertools import zip_longest
from typing import TYPE_CHECKING, Any

from nbagent.records import RunRecord, StepRecord, ToolCallRecord

if TYPE_CHECKING:
    import pandas as pd

    from nbagent.analytics.store import RunStore

__all__ = ["CallPair", "Comparison", "StepPair", "compare", "compare_frame"]


def _delta(a: float | None, b: float | None) -> float | None:
    return None if a is None or b is None else b - a


USAGE_MEASURES = ("input_tokens", "output_tokens", "total_tokens", "cost_usd")
"""Measures summed from the steps' usage: only a lower bound when a step's usage is unknown."""


def _why_unknown(step: StepRecord) -> str:
    if step.interrupted:
        return "cut by a Stop"
    if step.error is not None:
        return "the step failed"
    return "not reported"


def missing_usage(record: RunRecord, side: str | None = None) -> str | None:
    """Why ``record``'s token and cost totals are partial (``None``: they are complete)."""
    unknown = [s for s in record.steps if not s.usage_known]
    if not unknown:
        return None
    steps = ", ".join(f"step {s.number} ({_why_unknown(s)})" for s in unknown[:5])
    if len(unknown) > 5:
        steps += f" and {len(unknown) - 5} more"
    whose = f"{side}'s" if side else "the"
    return f"{whose} token counts are partial: usage unknown for {steps}"


@dataclass
class CallPair:
    """The ``n``-th call of one tool in a step of each run (either may be missing)."""

    tool: str
    a: ToolCallRecord | None
    b: ToolCallRecord | None

    @property
    def differences(self) -> list[str]:
        if self.a is None or self.b is None:
            return [f"{self.tool}: only in {'B' if self.a is None else 'A'}"]
        found = []
        if self.a.arguments != self.b.arguments:
            found.append(f"{self.tool}: arguments differ")
        if self.a.status != self.b.status:
            found.append(f"{self.tool}: {self.a.status} vs {self.b.status}")
        elif self.a.result != self.b.result:
            found.append(f"{self.tool}: results differ")
        return found


def pair_calls(a: list[ToolCallRecord], b: list[ToolCallRecord]) -> list[CallPair]:
    """Calls paired by tool name and order, in the order they first appear (A's, then B's)."""
    by_tool: dict[str, tuple[list[ToolCallRecord], list[ToolCallRecord]]] = {}
    for side, calls in ((0, a), (1, b)):
        for call in calls:
            by_tool.setdefault(call.tool, ([], []))[side].append(call)
    return [
        CallPair(tool, left, right)
        for tool, (lefts, rights) in by_tool.items()
        for left, right in zip_longest(lefts, rights)
    ]


@dataclass
class StepPair:
    """Step ``number`` of each run (either may be missing) and what differs between them."""

    number: int
    a: StepRecord | None
    b: StepRecord | None
    calls: list[CallPair] = field(default_factory=list)
    shared: bool = False
    """The step is the prefix a fork shares with the run it forks: one step (``a`` is ``b``),
    made once, by the original."""

    @property
    def differences(self) -> list[str]:
        if self.shared:
            return []
        if self.a is None or self.b is None:
            return [f"only in {'B' if self.a is None else 'A'}"]
        found = []
        if self.a.kind != self.b.kind:
            found.append(f"kind {self.a.kind} vs {self.b.kind}")
        if self.a.model_output != self.b.model_output:
            found.append("model output differs")
        if self.a.interrupted != self.b.interrupted:
            found.append(f"cut in {'A' if self.a.interrupted else 'B'}")
        if (self.a.error is None) != (self.b.error is None):
            found.append(f"error in {'A' if self.a.error else 'B'}")
        for call in self.calls:
            found.extend(call.differences)
        return found

    def delta(self, name: str) -> float | None:
        """B minus A of a step measure (``input_tokens``, ``output_tokens``, ``duration_s``);
        ``None`` when either side is unknown, or for a token count, only partly known, and for a
        shared step (it was made once)."""
        if self.a is None or self.b is None or self.shared:
            return None
        if name in USAGE_MEASURES and not self.usage_complete:
            return None
        return _delta(getattr(self.a, name), getattr(self.b, name))

    @property
    def usage_complete(self) -> bool:
        """Both steps exist and both know their whole usage (so token deltas are definite)."""
        return self.a is not None and self.b is not None and self.a.usage_known and self.b.usage_known

    @property
    def usage_note(self) -> str | None:
        """Why the step's token deltas are unknown (``None`` when they are known or a side is missing)."""
        if self.a is None or self.b is None:
            return None
        notes = [
            f"usage of {side} unknown ({_why_unknown(step)})"
            for side, step in (("A", self.a), ("B", self.b))
            if not step.usage_known
        ]
        return "; ".join(notes) or None


def fork_step(a: RunRecord, b: RunRecord) -> int | None:
    """The step one run forks the other at (``None``: neither is a fork of the other)."""
    if b.forked_from_run_id == a.run_id and b.forked_at_step is not None:
        return b.forked_at_step
    if a.forked_from_run_id == b.run_id and a.forked_at_step is not None:
        return a.forked_at_step
    return None


def pair_steps(a: RunRecord, b: RunRecord) -> list[StepPair]:
    """The steps of both runs paired by number, in number order; a fork's prefix (the steps
    before its step, the original's) paired as shared steps."""
    steps_a = {s.number: s for s in a.steps}
    steps_b = {s.number: s for s in b.steps}
    at = fork_step(a, b)
    pairs = []
    for number in sorted(steps_a.keys() | steps_b.keys()):
        left, right = steps_a.get(number), steps_b.get(number)
        if at is not None and number < at:
            step = left if left is not None else right
            pairs.append(StepPair(number, step, step, shared=True))
            continue
        calls = pair_calls(left.tool_calls if left else [], right.tool_calls if right else [])
        pairs.append(StepPair(number, left, right, calls))
    return pairs


RUN_MEASURES = ("input_tokens", "output_tokens", "total_tokens", "duration_s", "cost_usd")


@dataclass
class Comparison:
    """Two runs aligned step by step. Shown as HTML in Jupyter; ``frame()`` gives the numbers."""

    a: RunRecord
    b: RunRecord
    steps: list[StepPair]

    @property
    def at_step(self) -> int | None:
        """The step one run forks the other at (``None``: they are not fork and original)."""
        return fork_step(self.a, self.b)

    @property
    def prefix(self) -> list[StepPair]:
        """The steps a fork shares with the run it forks (before ``at_step``), made once."""
        return [pair for pair in self.steps if pair.shared]

    def path(self, side: str) -> RunRecord:
        """Run ``side`` (``"a"`` or ``"b"``) as its path from the fork's step: a fork is its own
        steps already; the original keeps its steps from ``at_step`` on, its time from that
        step's start and its cost unknown (a part of a run has no price of its own). Any run,
        when the two are not fork and original."""
        record, other = (self.a, self.b) if side == "a" else (self.b, self.a)
        at = self.at_step
        if at is None or record.forked_from_run_id == other.run_id:  # no fork, or the fork itself
            return record
        steps = [s for s in record.steps if s.number >= at]
        duration = record.duration_s
        if duration is not None:
            duration = max(0.0, duration - steps[0].start_s) if steps else 0.0
        return replace(record, steps=steps, duration_s=duration, cost_usd=None)

    def delta(self, name: str) -> float | None:
        """B minus A of a run measure (``RUN_MEASURES``, or ``n_steps``). ``None`` (unknown) when
        either side is unknown, and for tokens and cost when either run's usage is incomplete:
        a partial sum is a lower bound, and the difference of two is no definite number. For a
        fork and its original, of their paths from the fork's step (``path``)."""
        a, b = self.path("a"), self.path("b")
        if name == "n_steps":
            return len(b.steps) - len(a.steps)
        if name in USAGE_MEASURES and not self.usage_complete:
            return None
        return _delta(getattr(a, name), getattr(b, name))

    @property
    def usage_complete(self) -> bool:
        """Both runs know the usage of every step, so their token and cost deltas are definite."""
        return self.path("a").usage_complete and self.path("b").usage_complete

    @property
    def usage_note(self) -> str | None:
        """Why the token and cost deltas are unknown (``None`` when they are known)."""
        notes = [missing_usage(self.path("a"), "A"), missing_usage(self.path("b"), "B")]
        return "; ".join(n for n in notes if n) or None

    @property
    def differences(self) -> list[str]:
        """Every difference, run-level first, then ``step N: ...``."""
        found = []
        if self.a.status != self.b.status:
            found.append(f"status {self.a.status} vs {self.b.status}")
        if self.a.output != self.b.output:
            found.append("outputs differ")
        for pair in self.steps:
            found.extend(f"step {pair.number}: {d}" for d in pair.differences)
        return found

    def frame(self) -> pd.DataFrame:
        return compare_frame([self.a, self.b])

    def _repr_html_(self) -> str:
        from nbagent.explore.comparison_html import comparison_html

        return comparison_html(self)

    def __repr__(self) -> str:
        return (
            f"<Comparison A={self.a.run_id} B={self.b.run_id} steps {len(self.a.steps)} vs "
            f"{len(self.b.steps)}, {len(self.differences)} differences>"
        )


def compare(a: Any, b: Any, store: RunStore | None = None) -> Comparison:
    """Compare two runs (records, ``Run`` handles or run ids, looked up as ``show`` does)."""
    from nbagent.explore.lookup import find_record

    left, right = find_record(a, store), find_record(b, store)
    return Comparison(left, right, pair_steps(left, right))


def compare_frame(records: Iterable[Any], store: RunStore | None = None) -> pd.DataFrame:
    """The deltas of ``compare`` as a DataFrame, for two runs or for each run against the first.

    One row per run and ``level="run"`` (``step`` is ``<NA>``), then one row per step number of
    either run (``level="step"``). Columns: ``baseline_run_id``, ``run_id``, ``level``, ``step``,
    ``in_baseline``, ``in_run`` (the step exists there), ``shared`` (a step of the prefix a fork
    shares with the run it forks: made once, no deltas), ``at_step`` (run level: the step one run
    forks the other at; its run deltas are of the two paths from there), each measure of the run or step
    (``input_tokens``, ``output_tokens``, ``duration_s``; at run level also ``total_tokens``,
    ``cost_usd``, ``n_steps``, ``status``), its ``*_delta`` (run minus baseline, ``<NA>`` when
    either side is unknown, and for tokens and cost when either side's usage is incomplete),
    ``usage_complete`` (this run's or step's usage is known in full: its token counts are not
    just a lower bound), ``usage_note`` (why token and cost deltas are ``<NA>``: whose usage is
    unknown, in which step, and why) and ``differences`` (the marked differences, ``"; "``-joined).
    The baseline's own rows compare it with itself."""
    import pandas as pd

    from nbagent.explore.lookup import find_record

    runs = [find_record(r, store) for r in records]
    if not runs:
        raise ValueError("compare_frame needs at least one run")
    base = runs[0]
    rows: list[dict[str, Any]] = []
    for run in runs:
        comparison = Comparison(base, run, pair_steps(base, run))
        row: dict[str, Any] = {
            "baseline_run_id": base.run_id,
            "run_id": run.run_id,
            "level": "run",
            "step": None,
            "in_baseline": True,
            "in_run": True,
            "shared": False,
            "at_step": comparison.at_step,
            "status": run.status,
            "n_steps": len(run.steps),
            "n_steps_delta": comparison.delta("n_steps"),
            "usage_complete": run.usage_complete,
            "usage_note": comparison.usage_note,
        }
        for name in RUN_MEASURES:
            row[name] = getattr(run, name)
            row[f"{name}_delta"] = comparison.delta(name)
        row["differences"] = "; ".join(d for d in comparison.differences if not d.startswith("step "))
        rows.append(row)
        for pair in comparison.steps:
            step = pair.b
            row = {
                "baseline_run_id": base.run_id,
                "run_id": run.run_id,
                "level": "step",
                "step": pair.number,
                "in_baseline": pair.a is not None,
                "in_run": pair.b is not None,
                "shared": pair.shared,
            }
            for name in ("input_tokens", "output_tokens", "duration_s"):
                row[name] = None if step is None else getattr(step, name)
                row[f"{name}_delta"] = pair.delta(name)
            row["usage_complete"] = None if step is None else step.usage_known
            row["usage_note"] = pair.usage_note
            row["differences"] = "; ".join(pair.differences)
            rows.append(row)
    frame = pd.DataFrame(rows)
    dtypes = {
        "baseline_run_id": "string",
        "run_id": "string",
        "level": "string",
        "step": "Int64",
        "in_baseline": "boolean",
        "in_run": "boolean",
        "shared": "boolean",
        "at_step": "Int64",
        "status": "string",
        "n_steps": "Int64",
        "n_steps_delta": "Int64",
        "input_tokens": "Int64",
        "input_tokens_delta": "Int64",
        "output_tokens": "Int64",
        "output_tokens_delta": "Int64",
        "total_tokens": "Int64",
        "total_tokens_delta": "Int64",
        "duration_s": "Float64",
        "duration_s_delta": "Float64",
        "cost_usd": "Float64",
        "cost_usd_delta": "Float64",
        "usage_complete": "boolean",
        "usage_note": "string",
        "differences": "string",
    }
    for name, dtype in dtypes.items():
        frame[name] = pd.array([None if pd.isna(v) else v for v in frame[name]], dtype=dtype)
    return frame[list(dtypes)]
