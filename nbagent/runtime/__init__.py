"""The runtime: the private event loop, run handles, Stop (cancel scopes) and Ctrl-C.

- ``source``: the contract between the runtime and what it runs (``Source``) and where events go
  (``Sink``); docs/adapters.md says how to write a source.
- ``handle``: ``Run``, the caller's side of a run (build, control, wait); ``run_loop`` its loop
  side (launch, drive, fan out, finish); ``run_setup`` what a run checks and looks up as it is built.
- ``loop``: the background loop thread; ``cancel`` and ``tasks`` how a Stop reaches running code;
  ``lost_cancels`` how a cancel swallowed on its way is delivered again.
- ``turns``: which runs of one agent may work at once; ``identity_map``: state kept beside a
  user's object, by identity.
- ``waiting``: blocking and awaiting a handle; ``interrupts``: Ctrl-C and a blocked kernel;
  ``script_exit``: live runs at a script's exit.

The public calls (``start``, ``run``...) are in ``nbagent.api``.
"""
