"""Timed experiments: ICE against ECMP + DCQCN on the same topology, workload and seed.

Layout (control/README.md, "Experiments"): ``config.py`` the experiment file and modes,
``presets.py`` + ``presets/`` the built-in experiments, ``measures.py`` busbw, bounds and the
per-mode measures, ``results.py`` results.json, ``report.py`` the table and comparison.png,
``runner.py`` one invocation over all modes, ``cli.py`` ``icectl experiment``.
"""
