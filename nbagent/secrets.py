"""Credentials out of every text nbagent keeps or shows: one table of the shapes they take, one scrub.

``SHAPES`` is the table: each row names a kind of credential (an OpenAI key, a JWT, a PEM private
key, a ``"password"`` field...), the pattern that finds it, what it becomes, and the few lower-case
words (``triggers``) every match contains. ``scrub`` replaces each credential in a text with
``***`` (keeping a field's or a header's name, so the text still reads), and also the values of
credential-named environment variables (``environment_secrets``) and any exact secrets a caller
holds (a model's own key).

Where it runs, so that no copy of a run keeps a key:

- ``nbagent.events``: every text an event carries (errors, tool arguments and results, the
  answer, the conversation...) is scrubbed as the event is made, before the recorder, a view, the
  store or a span sees it. Model text streamed in pieces (``TextDelta``) is not, one piece at a
  time (a key split across pieces would not be found, and the per-token path must stay cheap):
  the recorder scrubs a step's whole text when it ends, and while it streams shows it through
  ``StreamScrub``, which holds back a tail that may still become a key.
- Where a record made elsewhere (``records_from_*``, a user's own) leaves: the store's encoding of
  its rows, the HTML of a view or a file, a span's content. Those scrub what they write again.

Cost: a text is lowered once and searched for each row's triggers (``str.__contains__``, the
triggers that hold ``-``, ``_``, ``=`` or ``@`` only when the text does); only the rows whose
triggers it holds run their pattern: 40 KB of prose cost about half a millisecond.
"""

from __future__ import annotations

import base64
import os
import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

from nbagent.text import map_strings

MASK = "***"

Replacement = str | Callable[[re.Match[str]], str]


@dataclass(frozen=True)
class Shape:
    """One kind of credential: its name, how to find it, what it becomes."""

    name: str
    pattern: re.Pattern[str]
    replacement: Replacement
    triggers: tuple[str, ...]
    """Lower-case texts of which every match holds at least one: a text without any of them is
    not searched with ``pattern``."""
    near: re.Pattern[str] | None = None
    """For a slow ``pattern`` (case-blind, many names): a fast one, searched in the lowered text,
    that finds every match's name; ``pattern`` then runs only next to what it finds."""


def _hide_basic(match: re.Match[str]) -> str:
    """``Basic <base64 of user:password>`` loses its token; "basic authentication" stays readable."""
    token = match.group(2)
    try:
        decoded = base64.b64decode(token, validate=True)
    except ValueError:
        return match.group(0)
    return f"{match.group(1)}{MASK}" if b":" in decoded else match.group(0)


def _hide_field_value(match: re.Match[str]) -> str:
    """A credential field keeps its name and its value's quotes: ``"password": "***"``."""
    value = match.group("value")
    for quote in ('\\"', '"', "'"):
        if value.startswith(quote):
            closed = len(value) >= 2 * len(quote) and value.endswith(quote)
            return f"{match.group('name')}{quote}{MASK}{quote if closed else ''}"
    return f"{match.group('name')}{MASK}"


_FIELD_NAMES = (
    r"api[-_]?key|x-api-key|access[-_]?token|refresh[-_]?token|id[-_]?token|auth[-_]?token"
    r"|client[-_]?secret|secret[-_]?key|private[-_]?key|secret|password|passwd"
)
"""Names whose value is a credential wherever they label one (``password: x``, ``"api_key": "x"``)."""
_QUOTED_FIELD_NAMES = rf"{_FIELD_NAMES}|token"
"""Names that label a credential only as a quoted field (``"token": "x"``; "token: 5" is prose)."""
_PARAMETER_NAMES = (
    r"api[-_]?key|x-api-key|apikey|key|token|access[-_]?token|refresh[-_]?token|id[-_]?token"
    r"|auth[-_]?token|client[-_]?secret|secret|password|passwd|pwd|sig|signature"
)
_KEY_CHARS = r"[A-Za-z0-9_\-*]"
"""What a provider key is made of (``*``: a key already partly masked by its provider)."""


def _shape(
    name: str, pattern: str, replacement: Replacement, *triggers: str, flags: int = 0, near: str | None = None
) -> Shape:
    return Shape(name, re.compile(pattern, flags), replacement, triggers, near and re.compile(near))


SHAPES: tuple[Shape, ...] = (
    _shape(
        "pem_private_key",  # a block cut short (a stream, a clipped text) is hidden to its end
        r"(-----BEGIN ([A-Z0-9 ]*PRIVATE KEY(?: BLOCK)?)-----).*?(-----END \2-----|\Z)",
        rf"\1{MASK}\3",
        "private key-----",
        flags=re.DOTALL,
    ),
    _shape("url_userinfo", r"(//)[^/\s?#]*@", rf"\1{MASK}@", "@"),  # up to the last "@" of the host
    _shape(
        "authorization_header",
        r"\b((?:proxy-)?authorization[\"']?\s*[:=]\s*[\"']?(?:[a-z]+\s+)?)[^\s\"',;}]+",
        rf"\1{MASK}",
        "authorization",
        flags=re.IGNORECASE,
        near=r"authorization[\"']?\s*[:=]",
    ),
    _shape("bearer_token", r"\b(bearer\s+)[^\s\"',;}]+", rf"\1{MASK}", "bearer", flags=re.IGNORECASE),
    _shape(
        "basic_credentials",
        r"\b(basic\s+)([A-Za-z0-9+/]{4,}={0,2})(?![\w+/=])",
        _hide_basic,
        "basic",
        flags=re.IGNORECASE,
    ),
    _shape(
        "aws_secret_access_key",
        r"(?<![\w-])(aws_?secret_?access_?key[\"']?\s*[:=]\s*[\"']?)[A-Za-z0-9/+=]{16,}",
        rf"\1{MASK}",
        "access_key",
        "accesskey",
        flags=re.IGNORECASE,
    ),
    _shape(
        "credential_field",
        rf"(?P<name>(?:(?<![\w-])(?:{_FIELD_NAMES})|(?:\\?[\"'])(?:{_QUOTED_FIELD_NAMES})\\?[\"'])\s*:\s*)"
        r"(?P<value>\\\"(?:[^\"\\\n]|\\[^\"\n])*(?:\\\"|\Z)|\"(?:[^\"\\\n]|\\.)*(?:\"|\Z)"
        r"|'(?:[^'\\\n]|\\.)*(?:'|\Z)|[^\s\"',;}]+)",
        _hide_field_value,
        "key",
        "token",
        "secret",
        "passw",
        flags=re.IGNORECASE,
        near=r"(?:key|token|secret|passw[a-z]*)\\?[\"']?\s*:",
    ),
    _shape(
        "credential_parameter",
        rf"(?<![\w-])((?:{_PARAMETER_NAMES})=)[^\s&#\"',;)]+",
        rf"\1{MASK}",
        "key=",
        "token=",
        "secret=",
        "password=",
        "passwd=",
        "pwd=",
        "sig=",
        "signature=",
        flags=re.IGNORECASE,
        near=r"(?:key|token|secret|passw[a-z]*|pwd|sig|signature)=",
    ),
    _shape(
        "jwt",
        r"(?<![\w-])eyJ[A-Za-z0-9_-]{8,}\.eyJ[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]*",
        MASK,
        "eyj",
    ),
    _shape("anthropic_key", rf"(?<![\w-])sk-ant-{_KEY_CHARS}{{16,}}", MASK, "sk-ant-"),
    _shape("openai_key", rf"(?<![\w-])sk-{_KEY_CHARS}{{16,}}", MASK, "sk-"),  # sk-proj-, sk-svcacct-...
    _shape("stripe_key", r"(?<![\w-])(?:sk|rk)_(?:live|test)_[A-Za-z0-9]{10,}", MASK, "_live_", "_test_"),
    _shape(
        "github_token",
        r"(?<![\w-])(?:gh[pousr]_[A-Za-z0-9]{20,}|github_pat_[A-Za-z0-9_]{20,})",
        MASK,
        "ghp_",
        "gho_",
        "ghu_",
        "ghs_",
        "ghr_",
        "github_pat_",
    ),
    _shape("slack_token", r"(?<![\w-])(?:xox[abposr]|xapp)-[A-Za-z0-9-]{10,}", MASK, "xox", "xapp-"),
    _shape(
        "aws_access_key_id",
        r"(?<![A-Za-z0-9])(?:AKIA|ASIA|ABIA|ACCA)[A-Z0-9]{16}(?![A-Za-z0-9])",
        MASK,
        "akia",
        "asia",
        "abia",
        "acca",
    ),
    _shape("google_api_key", r"(?<![\w-])AIza[A-Za-z0-9_-]{30,}", MASK, "aiza"),
    _shape(
        "provider_key",  # Hugging Face, Groq, xAI, GitLab, Replicate, and other sk_ / rk- keys
        rf"(?<![\w-])(?:sk_|rk-|hf_|gsk_|xai-|glpat-|r8_){_KEY_CHARS}{{16,}}",
        MASK,
        "sk_",
        "rk-",
        "hf_",
        "gsk_",
        "xai-",
        "glpat-",
        "r8_",
    ),
)
"""Every shape of credential ``scrub`` knows, most specific first (a PEM block or a header before
the keys inside it)."""


def _gated_triggers() -> list[tuple[str, list[tuple[str, set[int]]]]]:
    """The triggers, each with the rows it starts, grouped under a character every one of them
    holds (``""``: none of ``-_=@``): a text without the character skips the group, so a plain
    text pays for the few word triggers only."""
    rows: dict[str, set[int]] = {}
    for index, shape in enumerate(SHAPES):
        for trigger in shape.triggers:
            rows.setdefault(trigger, set()).add(index)
    groups: dict[str, list[tuple[str, set[int]]]] = {}
    for trigger, indices in rows.items():
        gate = next((c for c in "-_=@" if c in trigger), "")
        groups.setdefault(gate, []).append((trigger, indices))
    return list(groups.items())


_TRIGGERS = _gated_triggers()

_SECRET_NAMES = re.compile(r"(?:^|_)(?:API_?KEY|ACCESS_KEY|KEY|TOKEN|SECRET|PASSWORD)$", re.IGNORECASE)
_SHORTEST_SECRET = 8
"""Environment values shorter than this are not taken as secrets (they would blank out words)."""
_environment: tuple[Any, list[str]] = (None, [])
"""The environment last read (a copy of its raw mapping) and the secrets found in it."""


def environment_secrets() -> list[str]:
    """Values of environment variables named like credentials (``OPENAI_API_KEY``, ``HF_TOKEN``,
    ``AWS_SECRET_ACCESS_KEY``...), longest first: a framework's client often takes its key from
    there, so an error that echoes the key is scrubbed of it even when the key has no known shape.

    Reading the environment costs about a hundred microseconds, so the secrets are kept until it
    changes (told by comparing its raw mapping, a dict, with a copy: about a microsecond)."""
    global _environment
    raw = getattr(os.environ, "_data", None)
    seen, secrets = _environment
    if raw is not None and raw == seen:
        return secrets
    found = [
        value
        for name, value in os.environ.items()
        if len(value) >= _SHORTEST_SECRET and _SECRET_NAMES.search(name)
    ]
    secrets = sorted(set(found), key=len, reverse=True)
    _environment = (dict(raw) if raw is not None else None, secrets)
    return secrets


def scrub(text: str, secrets: Iterable[str] = ()) -> str:
    """``text`` with every credential in it replaced by ``***``: the exact ``secrets`` given, the
    values of credential-named environment variables, and anything of a shape in ``SHAPES``.
    Scrub before you shorten: a key cut in half no longer matches."""
    environment = environment_secrets()
    remembered = not secrets and len(text) >= _REMEMBERED
    if remembered:
        last_text, last_environment, last_scrubbed = _last
        if last_environment is environment and text == last_text:
            return last_scrubbed
    scrubbed = _scrub(text, (*secrets, *environment))
    if remembered:
        _remember(text, environment, scrubbed)
    return scrubbed


_REMEMBERED = 1_024
"""Texts this long are remembered: a run's answer, its last step's text and the conversation's last
message are often one long text, scrubbed three times in a row."""
_last: tuple[str, list[str], str] = ("", [], "")


def _remember(text: str, environment: list[str], scrubbed: str) -> None:
    global _last
    _last = (text, environment, scrubbed)  # one assignment: a reader on another thread sees all or none


def _scrub(text: str, secrets: Iterable[str]) -> str:
    for secret in secrets:
        if secret in text:
            text = text.replace(secret, MASK)
    lowered = text.lower()
    found: set[int] = set()
    for gate, triggers in _TRIGGERS:
        if gate in lowered:  # "" is in every text
            for trigger, indices in triggers:
                if trigger in lowered:
                    found |= indices
    for index in sorted(found):
        shape = SHAPES[index]
        text = shape.pattern.sub(shape.replacement, text) if shape.near is None else _sub_near(shape, text)
    return text


_NAME_REACH = 32
"""How far before what ``Shape.near`` found a match may start (``"client_secret`` for ``secret``)."""


def _sub_near(shape: Shape, text: str) -> str:
    """``shape.pattern.sub`` over ``text``, run only next to what ``shape.near`` finds (a case-blind
    pattern of many names costs about half a microsecond a character wherever it runs)."""
    assert shape.near is not None
    lowered = text.lower()
    if len(lowered) != len(text):  # a letter whose lower case is longer: positions differ
        return shape.pattern.sub(shape.replacement, text)
    pieces: list[str] = []
    done = 0
    for hit in shape.near.finditer(lowered):
        if hit.end() <= done:
            continue
        match = shape.pattern.search(text, max(done, hit.start() - _NAME_REACH), hit.end() + HOLD_LIMIT)
        if match is None:
            continue
        replacement = shape.replacement
        pieces += [
            text[done : match.start()],
            replacement(match) if callable(replacement) else match.expand(replacement),
        ]
        done = match.end()
    return "".join([*pieces, text[done:]]) if pieces else text


_CREDENTIAL_KEYS = frozenset(
    {
        "api_key",
        "apikey",
        "x_api_key",
        "token",
        "access_token",
        "refresh_token",
        "id_token",
        "auth_token",
        "client_secret",
        "secret",
        "secret_key",
        "private_key",
        "password",
        "passwd",
        "aws_secret_access_key",
        "authorization",
    }
)
"""Keys of a mapping whose text value is a credential, whatever it looks like (``{"password": "x"}``)."""


def scrub_value(value: Any) -> Any:
    """``value`` with every string in it (nested in plain lists, tuples and dicts) scrubbed, and
    the text under a credential-named key (``"password"``, ``"api_key"``...) hidden; otherwise as
    ``nbagent.text.map_strings`` maps (containers with nothing to hide are not copied)."""
    return map_strings(value, scrub, _hide_credential_entry)


def _hide_credential_entry(key: Any, item: Any, again: Callable[[Any], Any]) -> tuple[Any, Any]:
    return key, MASK if _names_credential(key) and isinstance(item, str) and item else again(item)


def _names_credential(key: Any) -> bool:
    return isinstance(key, str) and key.lower().replace("-", "_") in _CREDENTIAL_KEYS


_KEY_FILLER = "0" * 48
"""What a cut word is extended with to see whether it began a key (``scrub_cut``)."""


def scrub_cut(text: str) -> str:
    """``scrub(text)`` for a text cut short (a step's stream stopped mid-reply): a last word that
    begins like a key of a known shape (``sk-proj-AbC``) is hidden too, though it is too short to
    match its shape."""
    text = scrub(text)
    start = max(text.rfind(" "), text.rfind("\n"), text.rfind("\t")) + 1
    word = text[start:]
    if word and word != MASK and scrub(word + _KEY_FILLER) != word + _KEY_FILLER:
        return text[:start] + MASK
    return text


HOLD_LIMIT = 4_096
"""The longest tail ``StreamScrub`` holds back: no credential is longer (a PEM block excepted)."""

_LABEL = re.compile(
    r"authorization|bearer|basic|passw|pwd|secret|token|api[-_]?key|private[-_]?key|access[-_]?key",
    re.IGNORECASE,
)
"""Words after which a credential may follow a space: a line holding one is held back whole."""
_PEM_END = re.compile(r"-----END [A-Z0-9 ]*-----")


class StreamScrub:
    """Scrubs a text that arrives in pieces (a model's streamed reply), for a view that shows it as
    it grows: ``feed`` returns the scrubbed text that may be shown now, ``flush`` the rest.

    A piece may end inside a key (``"sk-pr"``), and the scrub cannot know a key from its head, so
    what a piece cannot yet tell is held back: the unfinished last word; a line in progress that
    names a credential (``Authorization:``, ``"password": "``), until the line ends, since its
    value may hold spaces or come in the next piece; a PEM block, until it ends. What
    is released is scrubbed as a whole, so a key is never cut across two releases. Holding costs
    nothing per piece but a search of the held text.
    """

    def __init__(self) -> None:
        self._held = ""

    def feed(self, piece: str) -> str:
        text = self._held + piece
        cut = _release_point(text)
        self._held = text[cut:]
        return scrub(text[:cut]) if cut else ""

    def flush(self) -> str:
        text, self._held = self._held, ""
        return scrub(text) if text else ""


def _release_point(text: str) -> int:
    """How much of ``text`` can be scrubbed and shown now (see ``StreamScrub``)."""
    cut = max(text.rfind(" "), text.rfind("\n"), text.rfind("\t")) + 1
    if not cut and len(text) > HOLD_LIMIT:
        cut = len(text) - HOLD_LIMIT
    begin = text.rfind("-----BEGIN ", 0, cut)  # held whole: its header may not have come yet
    if begin >= 0:
        end = _PEM_END.search(text, begin)
        if end is None:
            return begin
        cut = max(cut, end.end())
    line = text.rfind("\n", 0, cut) + 1
    if line < cut and cut - line <= HOLD_LIMIT and _LABEL.search(text, line, cut):
        return line
    return cut
