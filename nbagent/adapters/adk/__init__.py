"""The Google ADK adapter: see ``source`` for how a run of it works.

Every adapter folder has the same roles: ``source`` (``AdkSource``, which runs an ADK agent,
``Workflow``, ``App`` or ``Runner``, and its detection test), ``stream`` (ADK's events and plugin
callbacks read as ``ctx`` calls), ``records`` (ADK's session read as nbagent records:
``records_from_adk``, also for runs made without nbagent), ``session`` (the session a run works
in, found before it and left consistent after a Stop). Importing this package imports no framework.
"""
