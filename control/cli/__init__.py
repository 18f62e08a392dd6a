"""icectl: the operator's command line (``app.py``: parser and ``main``; one module per verb group)."""
