"""What runs cost, in US dollars, from their token usage and a maintained price library.

Prices come from genai-prices (the optional ``cost`` extra: ``pip install 'nbagent[cost]'``),
which tracks providers' published prices, including past ones: each step is priced at the time it
ran. nbagent keeps no price table of its own.

The rules, so a number is never made up:

- A step is priced from its *known* token counts; a run costs the sum over its steps with known
  usage, and ``None`` (NA in the frames) when no step's usage is known. ``RunRecord.usage_complete``
  says whether that sum is the whole truth.
- A model genai-prices does not know costs ``None``, never 0.
- A local model costs ``None`` too, unless you give it a price. A model counts as local when its
  name looks like one (an Ollama tag such as ``qwen3:8b``, or a prefix such as ``ollama/``,
  ``lm_studio/``, ``hosted_vllm/``) or you said so with ``mark_local``; that keeps a local
  ``gpt-oss-20b`` from being billed at a hosted provider's rate.
- ``set_price(model, input_per_mtok=..., output_per_mtok=...)`` wins over everything.

Functions here may be called from any thread.
"""

from __future__ import annotations

import functools
import re
import threading
from dataclasses import dataclass
from datetime import date, datetime, timezone
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from .records import RunRecord

EXTRA_HINT = "pip install 'nbagent[cost]'"

_LOCAL_PREFIXES = (
    "ollama/",
    "ollama_chat/",
    "lm_studio/",
    "hosted_vllm/",
    "vllm/",
    "llamafile/",
    "llamacpp/",
    "local/",
)
_OLLAMA_TAG = re.compile(r"^[^:\s]+:(latest|\d+(\.\d+)?[bm](\b.*)?)$", re.IGNORECASE)


@dataclass(frozen=True)
class Price:
    """A user-given price, in US dollars per million tokens."""

    input_per_mtok: float
    output_per_mtok: float


_lock = threading.Lock()
_prices: dict[str, Price] = {}
_local: set[str] = set()


def set_price(model: str, *, input_per_mtok: float, output_per_mtok: float) -> None:
    """Price ``model`` yourself (US dollars per million input / output tokens).

    Use it for local models (what your hardware costs you) or to override genai-prices.
    """
    if input_per_mtok < 0 or output_per_mtok < 0:
        raise ValueError("prices cannot be negative")
    with _lock:
        _prices[model] = Price(float(input_per_mtok), float(output_per_mtok))
    _library_cost.cache_clear()


def mark_local(model: str) -> None:
    """Say that ``model`` runs locally: it costs NA unless you ``set_price`` it."""
    with _lock:
        _local.add(model)


def clear_prices() -> None:
    """Forget every ``set_price`` and ``mark_local``."""
    with _lock:
        _prices.clear()
        _local.clear()


def is_local(model: str) -> bool:
    """True when ``model`` was marked local or its name looks like a local runtime's."""
    with _lock:
        if model in _local:
            return True
    return model.lower().startswith(_LOCAL_PREFIXES) or _OLLAMA_TAG.match(model) is not None


def _genai_prices() -> Any:
    try:
        import genai_prices
    except ImportError as exc:
        raise ImportError(f"pricing runs needs genai-prices, the 'cost' extra: {EXTRA_HINT}") from exc
    return genai_prices


@functools.lru_cache(maxsize=65536)
def _library_cost(model: str, input_tokens: int | None, output_tokens: int | None, day: date) -> float | None:
    prices = _genai_prices()
    usage = {"input_tokens": input_tokens, "output_tokens": output_tokens}
    # "provider/model" names (LiteLLM's style, used by smolagents) name their provider first.
    options = {"provider_id": "litellm"} if "/" in model else {}
    at = datetime(day.year, day.month, day.day, 12, tzinfo=timezone.utc)
    try:
        result = prices.calc_price(
            prices.Usage(**{k: v for k, v in usage.items() if v is not None}),
            model,
            genai_request_timestamp=at,
            **options,
        )
    except (LookupError, ValueError):  # a model it does not know, or usage it cannot price
        return None
    return float(result.total_price)


def step_cost(
    model: str, input_tokens: int | None, output_tokens: int | None, at: datetime | None = None
) -> float | None:
    """The cost of one step's tokens at time ``at`` (default: now); ``None`` when it is not known.

    Raises ``ImportError`` (naming the ``cost`` extra) when the model has no user price and
    genai-prices is not installed.
    """
    if input_tokens is None and output_tokens is None:
        return None
    with _lock:
        price = _prices.get(model)
    if price is not None:
        return (
            (input_tokens or 0) * price.input_per_mtok + (output_tokens or 0) * price.output_per_mtok
        ) / 1e6
    if is_local(model):
        return None
    day = (at or datetime.now(timezone.utc)).astimezone(timezone.utc).date()
    return _library_cost(model, input_tokens, output_tokens, day)


def has_price(model: str) -> bool:
    """True when ``model`` has a user price, or is not local and genai-prices knows it."""
    with _lock:
        if model in _prices:
            return True
    return not is_local(model) and _library_cost(model, 1, 1, datetime.now(timezone.utc).date()) is not None


def run_cost(record: RunRecord) -> float | None:
    """The cost of a run: the sum over its steps with known usage; ``None`` when nothing is known."""
    if not has_price(record.model):
        return None
    costs = [step_cost(record.model, s.input_tokens, s.output_tokens, s.started_at) for s in record.steps]
    known = [c for c in costs if c is not None]
    return sum(known) if known else None


def record_cost(record: RunRecord) -> float | None:
    """The record's own ``cost_usd`` when set; else ``run_cost`` if it can be known without the
    missing extra; else ``None``. This is what the frames show."""
    if record.cost_usd is not None:
        return record.cost_usd
    try:
        return run_cost(record)
    except ImportError:
        return None
