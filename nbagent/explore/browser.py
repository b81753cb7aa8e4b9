"""The run browser: a table of runs to filter, sort and page; pick one to open it, two to compare.

``browse(store)`` (or ``browse()`` for the configured store, else this process's history) shows
filter controls, one page of runs, and below them the picked run (its static view) or, with two
picked, their comparison. The browser holds one page, never all runs: every change of a filter,
the sort or the page asks its ``RunSource`` (``nbagent.analytics.runs``) for the new page (SQL
on a store), so fifty thousand stored runs answer as fast as fifty.

The page is an itables ``ITable`` (DataTables, with row selection, over anywidget) when itables
and anywidget are installed, else an ipywidgets ``SelectMultiple`` with one line per run. Both
send a selection as a widget state update, which the kernel handles while idle (a click never
waits on a running cell; see docs/architecture.md). The callbacks may run on a kernel thread other
than the main one; each only sets widget values, and a lock keeps two of them from interleaving.

The controls always say what is shown: ``filter(...)`` and ``pick(...)`` from code set the menus,
the text, the dates and the picked rows as a user would have (without firing their callbacks),
so the table never reads "(any)" over a filtered page. A page wider than the output scrolls
sideways instead of losing its right-hand columns.
"""

from __future__ import annotations

import threading
from datetime import date, datetime, time, timedelta, timezone
from typing import Any, Literal

from nbagent.explore.query import PAGE_COLUMNS, SORTABLE, Page, RunQuery, RunSource, run_source
from nbagent.extras import install_hint

__all__ = ["RunBrowser", "browse"]

ANY = "(any)"
_NUMBERS = ("n_steps", "duration_s", "input_tokens", "output_tokens", "cost_usd")
_SHOWN = (*(c for c in PAGE_COLUMNS if not c.startswith("forked_")), "fork")
"""The table's columns: a page's, a fork's original and step in one "fork" column."""
_COLUMN_DEFS = [
    {
        "targets": [i for i, c in enumerate(_SHOWN) if c not in _NUMBERS and c != "task"],
        "className": "dt-body-nowrap",
    },
    {"targets": [_SHOWN.index(c) for c in _NUMBERS], "className": "dt-body-nowrap dt-right"},
    {"targets": _SHOWN.index("task"), "width": "16em"},
]
"""Every cell on one line but the task's, which wraps in a column of its own width; a page still
wider than the output scrolls sideways (its container has a scrollbar). Numbers align right, also
in a column with an unknown "?" in it (which DataTables would take for a column of text)."""
TableKind = Literal["auto", "itables", "select"]


def _itables_available() -> bool:
    try:
        import anywidget  # noqa: F401
        from itables.widget import ITable  # noqa: F401
    except Exception:
        return False
    return True


def _day_start(day: date | None) -> datetime | None:
    return None if day is None else datetime.combine(day, time(), tzinfo=timezone.utc)


def _display_rows(page: Page) -> Any:
    """The page as the table shows it: short ids, readable times and numbers."""
    rows = page.rows.copy()
    rows["run_id"] = rows["run_id"].str.slice(0, 8)
    rows["started_at"] = rows["started_at"].dt.strftime("%Y-%m-%d %H:%M:%S")
    rows["task"] = rows["task"].str.slice(0, 80)
    rows["duration_s"] = rows["duration_s"].round(2)
    for column in ("n_steps", "input_tokens", "output_tokens", "cost_usd"):
        # Unknown shows as "?", as in the run view (never as 0, never as pandas' <NA>).
        rows[column] = rows[column].astype(object).where(rows[column].notna(), "?")
    rows["fork"] = [_fork_text(row) for _, row in rows.iterrows()]
    rows = rows.drop(columns=["forked_from_run_id", "forked_at_step"])
    return rows.rename(
        columns={"n_steps": "steps", "input_tokens": "tokens in", "output_tokens": "tokens out"}
    )


def _fork_text(row: Any) -> str:
    """Which run a fork forks and at which step (``"3f2a9c1e @ 3"``); empty for a run that is
    not a fork (also every run of a store from before forks)."""
    import pandas as pd

    original = row["forked_from_run_id"]
    if pd.isna(original):
        return ""
    step = row["forked_at_step"]
    return f"{str(original)[:8]} @ {'?' if pd.isna(step) else int(step)}"


def _line(row: Any) -> str:
    import pandas as pd

    tokens = "?" if pd.isna(row["input_tokens"]) else row["input_tokens"]
    took = "?" if pd.isna(row["duration_s"]) else f"{row['duration_s']:.1f}s"
    return (
        f"{str(row['started_at'])[:19]}  {row['status']:<11} {str(row['agent'])[:16]:<16} "
        f"{str(row['model'])[:18]:<18} {row['n_steps']!s:>3} steps {took:>7} {tokens!s:>7} tok  "
        f"{str(row['task'])[:60]}" + (f"  (fork of {fork})" if (fork := _fork_text(row)) else "")
    )


class RunBrowser:
    """The browser widget over a ``RunSource``; ``browse()`` makes one. Display it (it is the
    cell's result) or use ``.widget``. ``query`` is the current ``RunQuery``; ``page`` the rows
    shown; ``selected`` the picked run ids; ``shown_html`` what is drawn under the table."""

    def __init__(self, source: RunSource, *, page_size: int = 25, table: TableKind = "auto") -> None:
        import ipywidgets as w

        if table not in ("auto", "itables", "select"):
            raise ValueError("table must be 'auto', 'itables' or 'select'")
        if table == "itables" and not _itables_available():
            raise ImportError(f"table='itables' needs itables: {install_hint('explore')}")
        self.source = source
        self.table_kind: Literal["itables", "select"] = (
            "itables" if table == "itables" or (table == "auto" and _itables_available()) else "select"
        )
        self.query = RunQuery(page_size=page_size)
        self._lock = threading.RLock()
        self._updating = False
        choices = source.choices()

        def menu(name: str, label: str) -> Any:
            return w.Dropdown(
                options=[ANY, *choices[name]], value=ANY, description=label, layout={"width": "220px"}
            )

        self.status = menu("status", "status")
        self.agent = menu("agent", "agent")
        self.model = menu("model", "model")
        self.text = w.Text(placeholder="task, output, error or id contains…", continuous_update=False)
        self.since = w.DatePicker(description="from", layout={"width": "220px"})
        self.until = w.DatePicker(description="to", layout={"width": "220px"})
        self.sort = w.Dropdown(
            options=list(SORTABLE), value="started_at", description="sort", layout={"width": "220px"}
        )
        self.descending = w.Checkbox(
            value=True, description="descending", indent=False, layout={"width": "110px"}
        )
        self.previous = w.Button(description="◀ previous", layout={"width": "auto"})
        self.next = w.Button(description="next ▶", layout={"width": "auto"})
        self.info = w.HTML()
        self.detail = w.HTML()
        self.page: Page = source.page(self.query)
        self.selected: list[str] = []
        if self.table_kind == "itables":
            from itables.widget import ITable

            self.table: Any = ITable(
                _display_rows(self.page),
                select={"style": "multi"},
                paging=False,
                ordering=False,
                layout={"topStart": None, "topEnd": None, "bottomStart": None, "bottomEnd": None},
                showIndex=False,
                classes="display compact",
                style="width: 100%; margin: 4px 0",
                columnDefs=_COLUMN_DEFS,
            )
            self.table.observe(self._on_itable_pick, names="selected_rows")
        else:
            self.table = w.SelectMultiple(
                options=self._options(), rows=min(page_size, 15), layout={"width": "100%"}
            )
            self.table.observe(self._on_select_pick, names="index")
        for control in (
            self.status,
            self.agent,
            self.model,
            self.text,
            self.since,
            self.until,
            self.sort,
            self.descending,
        ):
            control.observe(self._on_filter, names="value")
        self.previous.on_click(lambda _: self.go(self.query.page - 1))
        self.next.on_click(lambda _: self.go(self.query.page + 1))
        self.widget = w.VBox(
            [
                w.HBox([self.status, self.agent, self.model]),
                w.HBox([self.text, self.since, self.until]),
                w.HBox([self.sort, self.descending, self.previous, self.next, self.info]),
                self.table,
                self.detail,
            ]
        )
        self.widget.add_class("nbagent-browser")
        self._show_info()

    # -- what the widget shows ----------------------------------------------------------------

    def _options(self) -> list[tuple[str, int]]:
        return [(_line(row), i) for i, row in enumerate(self.page.rows.to_dict("records"))]

    def _show_info(self) -> None:
        page = self.page
        first = page.query.page * page.query.page_size + 1 if page.total else 0
        last = min(page.total, (page.query.page + 1) * page.query.page_size)
        self.info.value = (
            f"runs {first:,}–{last:,} of {page.total:,} · page {page.query.page + 1} of {page.pages:,}"
        )
        self.previous.disabled = page.query.page == 0
        self.next.disabled = page.query.page + 1 >= page.pages

    def _refresh(self) -> None:
        self.page = self.source.page(self.query)
        self._updating = True
        try:
            if self.table_kind == "itables":
                rows = _display_rows(self.page)
                self.table.update(rows, selected_rows=self._picked_rows(), columnDefs=_COLUMN_DEFS)
            else:
                self.table.options = self._options()
                self.table.index = tuple(self._picked_rows())
            self._show_query()
        finally:
            self._updating = False
        self._show_info()

    def _picked_rows(self) -> list[int]:
        """The rows of this page that are picked."""
        ids = self.page.rows["run_id"].tolist()
        return [ids.index(run_id) for run_id in self.selected if run_id in ids]

    def _show_query(self) -> None:
        """Set the controls to the query (call with ``_updating`` set: no callback fires)."""
        query = self.query
        for control, value in (
            (self.status, query.status),
            (self.agent, query.agent),
            (self.model, query.model),
        ):
            shown = ANY if value is None else value
            if shown not in control.options:  # e.g. a model no stored run has (yet)
                control.options = [*control.options, shown]
            control.value = shown
        self.text.value = query.text or ""
        self.since.value = None if query.since is None else query.since.date()
        until = query.until
        if until is not None and until.time() == time() and until.tzinfo is not None:
            until -= timedelta(days=1)  # the menu's day "to" includes that day: the query ends after it
        self.until.value = None if until is None else until.date()
        self.sort.value = query.sort
        self.descending.value = query.descending

    @property
    def shown_html(self) -> str:
        return self.detail.value

    # -- actions ----------------------------------------------------------------------------------

    def go(self, page: int) -> None:
        """Show page ``page`` (0-based; clipped to the pages there are)."""
        with self._lock:
            page = max(0, min(page, self.page.pages - 1))
            self.query = self.query.with_(page=page)
            self._refresh()

    def filter(self, **changes: Any) -> Page:
        """Change the query (``status=``, ``agent=``, ``model=``, ``text=``, ``since=``, ``until=``,
        ``sort=``, ``descending=``, ``page_size=``) and show its first page; returns the page."""
        with self._lock:
            self.query = self.query.with_(page=0, **changes)
            self._refresh()
            return self.page

    def pick(self, run_ids: list[str]) -> None:
        """Open one run, or compare two (as picking rows in the table does); the picked rows of
        the page are highlighted."""
        with self._lock:
            self.selected = list(run_ids)
            self._updating = True
            try:
                if self.table_kind == "itables":
                    self.table.selected_rows = self._picked_rows()
                else:
                    self.table.index = tuple(self._picked_rows())
            finally:
                self._updating = False
            if len(run_ids) == 1:
                from nbagent.view.html import record_html

                self.detail.value = record_html(self.source.record(run_ids[0]))
            elif len(run_ids) == 2:
                from nbagent.explore.comparison import Comparison, pair_steps
                from nbagent.explore.comparison_html import comparison_html

                a, b = (self.source.record(r) for r in run_ids)
                self.detail.value = comparison_html(Comparison(a, b, pair_steps(a, b)))
            elif run_ids:
                self.detail.value = "<div>Pick one run to open it, or two to compare them.</div>"
            else:
                self.detail.value = ""

    # -- widget callbacks (any kernel thread) ------------------------------------------------------

    def _on_filter(self, _change: dict[str, Any]) -> None:
        if self._updating:  # the controls are being set to the query: nothing new to ask
            return

        def value(control: Any) -> Any:
            return None if control.value in (ANY, "") else control.value

        until = _day_start(self.until.value)
        self.filter(
            status=value(self.status),
            agent=value(self.agent),
            model=value(self.model),
            text=value(self.text),
            since=_day_start(self.since.value),
            until=None if until is None else until + timedelta(days=1),
            sort=self.sort.value,
            descending=self.descending.value,
        )

    def _pick_rows(self, indexes: list[int]) -> None:
        with self._lock:
            if self._updating:
                return
            ids = self.page.rows["run_id"].tolist()
            self.pick([ids[i] for i in indexes if 0 <= i < len(ids)])

    def _on_itable_pick(self, change: dict[str, Any]) -> None:
        self._pick_rows(list(change["new"]))

    def _on_select_pick(self, change: dict[str, Any]) -> None:
        self._pick_rows(list(change["new"]))

    def _ipython_display_(self) -> None:
        from IPython.display import display

        display(self.widget)


def browse(runs: Any = None, *, page_size: int = 25, table: TableKind = "auto") -> RunBrowser:
    """A run browser over ``runs``: a ``RunStore`` (or a path to one), a list of records, or by
    default the configured store, else this process's history. ``table="select"`` uses plain
    ipywidgets even when itables is installed."""
    return RunBrowser(run_source(runs), page_size=page_size, table=table)
