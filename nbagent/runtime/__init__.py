"""The runtime: the private event loop, run handles, Stop (cancel scopes) and Ctrl-C.

``runner`` holds the public calls (``start``, ``run``, ``arun``); ``handle`` the ``Run`` handle;
``loop`` the background loop thread; ``cancel`` and ``tasks`` how a Stop reaches running code;
``interrupts`` how Ctrl-C and a blocked kernel are handled.
"""
