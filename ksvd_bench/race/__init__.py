"""The solver race: which solver reaches the top-r triplets of G to a given accuracy fastest.

One module or package per study, each computing and returning data: ``compare`` (the paper's
race and strict measures), ``spectrum`` (bandwidth sweep), ``residual_study`` (residual
stopping), ``scale`` (cost against size, lazy and structured, up to N = 1e6), ``sampling``
(the asym Nystrom samplers by entries read); ``problems`` defines the raced problems and
``paper_runtime`` holds the paper's runtime numbers.

The two large studies are packages split by job (``compare/``: ``run``, ``settings``,
``cells``, ``files``, ``table``, ``cli``; ``scale/``: ``run``, ``problems``, ``runners``,
``cells``, ``fit``, ``files``, ``table``, ``cli``). :mod:`~ksvd_bench.race.common` holds what
the studies share: the raced entries, the vacuity bound, the warm-up and the whole-triplet
verdict. No study imports another study's modules or private names, and there is no import
circle (``tests/test_race_layout.py`` checks both). :mod:`~ksvd_bench.race.commands` wires the
sub-commands of the single-module studies; :mod:`ksvd_bench.cli` lists them all.
"""
