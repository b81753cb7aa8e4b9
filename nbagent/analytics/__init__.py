"""Run analytics: DataFrames of runs, steps and tool calls (``frames``), summaries (``analysis``),
plots, cost, this process's ``history`` and the SQLite ``store``.

Importing this package is cheap: pandas loads with ``frames``.
"""
