"""Views of a run: the live widget view (``live``), its static HTML (``html``), the terminal view
(``terminal``), a live run shown again (``follow``) and the choice between them (``display``)."""
