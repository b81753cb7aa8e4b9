"""What runs cost, in US dollars, from their token usage and a maintained price library.

Prices come from genai-prices (the optional ``cost`` extra), which tracks providers' published
prices, including past ones: each step is priced at the time it ran. nbagent keeps no price table
of its own.

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

Pricing on the runner's loop never waits. Importing genai-prices and loading its price data (a
1.5 MB module it reads on first use) takes a few hundred milliseconds, seconds on a busy machine,
and the loop prices every run as it ends, where a wait would hold the record and any Stop. So
``warm_up`` does both on a daemon thread, once per process (the runner calls it when it starts its
loop), and ``record_cost_if_ready`` prices only what needs no import: a record's own cost, a
``set_price`` price, a local model; anything else waits for the warm-up and is ``None`` until then
(the frames price such a record later, on the caller's thread, with ``record_cost``). After the
warm-up a run's cost is in-memory work: one ``calc_price`` per step (about 0.2 ms), cached.

Functions here may be called from any thread.
"""

from __future__ import annotations

import atexit
import contextlib
import functools
import logging
import math
import re
import threading
from dataclasses import dataclass
from datetime import date, datetime, timezone
from typing import TYPE_CHECKING, Any

from nbagent.extras import install_hint

if TYPE_CHECKING:
    from nbagent.records import RunRecord

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

_ready = threading.Event()
"""Set once genai-prices is imported and its price data loaded: pricing is in-memory work."""
_load_lock = threading.Lock()
_warm_up_lock = threading.Lock()
_warm_up_started = False
_warm_up_done = threading.Event()
WARM_UP_EXIT_WAIT_S = 30.0
"""How long interpreter exit waits for a warm-up still going. Not waiting aborted 2 in 120 short
scripts ("FATAL: exception not rethrown"): a daemon thread inside genai-prices' compiled (pydantic-
core) code when the interpreter finalizes is ended with ``pthread_exit``, which that code cannot
unwind through."""

logger = logging.getLogger("nbagent")


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
    """genai-prices with its price data loaded; imports and loads it on the calling thread if needed."""
    try:
        import genai_prices
    except ImportError as exc:
        raise ImportError(
            f"pricing runs needs genai-prices, the 'cost' extra: {install_hint('cost')}"
        ) from exc
    if not _ready.is_set():
        with _load_lock:
            if not _ready.is_set():
                # Its price data is a module of its own, imported by the first calculation.
                with contextlib.suppress(LookupError, ValueError):
                    genai_prices.calc_price(genai_prices.Usage(input_tokens=1, output_tokens=1), "gpt-4o")
                _ready.set()
    return genai_prices


def _warm_up() -> None:
    try:
        _genai_prices()
    except ImportError:
        pass  # no cost extra: runs stay unpriced, and the frames say which extra would price them
    except Exception as exc:  # a broken install must not kill a thread noisily; pricing stays off
        logger.warning("nbagent: could not load genai-prices: %s: %s", type(exc).__name__, exc)
    finally:
        _warm_up_done.set()


def warm_up(wait: float = 0.0) -> bool:
    """Import genai-prices and load its price data on a daemon thread, once per process.

    Returns at once and touches no disk on the calling thread (the runner calls it when it starts
    its loop); until the warm-up ends, ``record_cost_if_ready`` leaves runs that need the library
    unpriced. With ``wait``, waits up to that many seconds for the warm-up to end (a script that
    wants its very first run priced; never on the runner's loop). Returns whether genai-prices is
    loaded. Idempotent; may be called from any thread.
    """
    global _warm_up_started
    with _warm_up_lock:
        start = not (_warm_up_started or _ready.is_set())
        _warm_up_started = True
    if start:
        threading.Thread(target=_warm_up, name="nbagent-warmup", daemon=True).start()
        atexit.register(_warm_up_done.wait, WARM_UP_EXIT_WAIT_S)
    if wait > 0 and not _ready.is_set():
        _warm_up_done.wait(wait)
    return _ready.is_set()


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


def _user_cost(price: Price, input_tokens: int | None, output_tokens: int | None) -> float | None:
    if input_tokens is None and output_tokens is None:
        return None
    return ((input_tokens or 0) * price.input_per_mtok + (output_tokens or 0) * price.output_per_mtok) / 1e6


def _sum_known(costs: list[float | None]) -> float | None:
    known = [c for c in costs if c is not None]
    return sum(known) if known else None


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
        return _user_cost(price, input_tokens, output_tokens)
    if is_local(model):
        return None
    day = (at or datetime.now(timezone.utc)).astimezone(timezone.utc).date()
    return _library_cost(model, input_tokens, output_tokens, day)


def dollars(value: float) -> str:
    """``value`` US dollars as text that never reads as zero unless it is: four decimals, as every
    cost nbagent shows ("$0.1004", a budget of "$0.1000"), and below a hundredth of a cent as many
    as its first two significant digits need ("$0.000032")."""
    if value == 0 or not math.isfinite(value) or abs(value) >= 0.0001:
        return f"${value:,.4f}"
    return f"${value:,.{1 - math.floor(math.log10(abs(value)))}f}"


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
    return _sum_known(
        [step_cost(record.model, s.input_tokens, s.output_tokens, s.started_at) for s in record.steps]
    )


def record_cost(record: RunRecord) -> float | None:
    """The record's own ``cost_usd`` when set; else ``run_cost`` if it can be known without the
    missing extra; else ``None``. This is what the frames show."""
    if record.cost_usd is not None:
        return record.cost_usd
    try:
        return run_cost(record)
    except ImportError:
        return None


def record_cost_if_ready(record: RunRecord) -> float | None:
    """``record_cost`` that never waits: no import, no disk, on the calling thread (the runner's loop).

    A record's own cost, a model priced with ``set_price`` and a local model are answered at once,
    with no library at all. Any other model needs genai-prices: once ``warm_up`` has loaded it,
    this is ``record_cost``; before that it is ``None``, and the warm-up is started if it was not.
    """
    if record.cost_usd is not None:
        return record.cost_usd
    with _lock:
        price = _prices.get(record.model)
    if price is not None:  # the library is never asked
        return _sum_known([_user_cost(price, s.input_tokens, s.output_tokens) for s in record.steps])
    if is_local(record.model):
        return None
    if not _ready.is_set():
        warm_up()
        return None
    return record_cost(record)
