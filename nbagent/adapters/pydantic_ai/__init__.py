"""The pydantic-ai adapter: see ``source`` for how a run of it works.

Every adapter folder has the same roles: ``source`` (the ``Source`` subclass that runs the
framework's agent, and its detection test), ``stream`` (the framework's events read as ``ctx``
calls), ``records`` (the framework's own history read as nbagent records:
``records_from_pydantic_ai``, also for runs made without nbagent), ``clients`` (a run's own copy of
the model's HTTP client, so plain and nbagent runs of one agent mix in a kernel) and ``approvals``
(tool calls held for a person). Importing this package imports no framework.
"""
