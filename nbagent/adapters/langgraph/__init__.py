"""The LangGraph adapter: see ``source`` for how a run of it works.

Every adapter folder has the same roles: ``source`` (the ``Source`` subclass that runs the
framework's agent, and its detection test), ``stream`` (the framework's events read as ``ctx``
calls), ``records`` (the framework's own history read as nbagent records:
``records_from_langgraph``, also for runs made without nbagent), ``threads`` (a checkpointed thread
prepared for the next run, calls a Stop cut answered) and ``interrupts`` (``interrupt()`` answered
from the approval panel). Importing this package imports no framework.
"""
