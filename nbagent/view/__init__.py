"""Views of a run: the live widget view (``live``), its static HTML (``html``), the terminal view
(``terminal``) and the choice between them (``display``)."""
