"""The smolagents adapter: see ``source`` for how a run of it works.

Every adapter folder has the same roles: ``source`` (the ``Source`` subclass that runs the
framework's agent, and its detection test), ``stream`` (the framework's events read as ``ctx``
calls), ``records`` (the framework's own history read as nbagent records:
``records_from_smolagents``, also for runs made without nbagent), and what smolagents needs besides:
``worker`` (the agent's own blocking run on a thread of its own), ``stop`` (a Stop raised into that
thread), ``console`` (its console output silenced while a view shows the run). Importing this
package imports no framework.
"""
