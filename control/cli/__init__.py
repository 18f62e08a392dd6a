"""icectl's controller verbs, one module per group, each with ``register(verbs)``.

``app.py`` is the frame (global options, exit codes, errors); ``common.py`` what the verb
modules share (``Verbs``, ``CliError``, exit codes, API calls). The ``icectl`` entry point,
``icefabric/icectl.py``, lists the verb modules of every package in help order.
"""
