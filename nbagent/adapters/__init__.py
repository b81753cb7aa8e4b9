"""Adapters: run agents from other frameworks under nbagent (live view, Stop, records).

Each adapter module imports its framework lazily, so nbagent works without it installed.
"""
