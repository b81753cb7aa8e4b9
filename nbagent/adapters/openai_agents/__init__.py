"""The the OpenAI Agents SDK adapter: see ``source`` for how a run of it works.

Every adapter folder has the same roles: ``source`` (the ``Source`` subclass that runs the
framework's agent, and its detection test), ``stream`` (the framework's events read as ``ctx``
calls), ``records`` (the framework's own history read as nbagent records:
``records_from_openai_agents``, also for runs made without nbagent), and ``clients`` (a run's own
copy of the model's HTTP client). Importing this package imports no framework.
"""
