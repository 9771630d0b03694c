"""The solver race: which solver reaches the top-r triplets of G to a given accuracy fastest.

One module per study: ``compare`` (the paper's race and strict measures), ``spectrum``
(bandwidth sweep), ``residual_study`` (residual stopping), ``scale`` (cost against size,
lazy and structured, up to N = 1e6), ``problems`` (the raced problems)
and ``paper_runtime`` (the paper's runtime figures). They compute and return data;
:mod:`ksvd_bench.report` and their ``format_*`` functions format them, and ``_cli`` wires the
``compare``, ``spectrum`` and ``residual-study`` sub-commands of :mod:`ksvd_bench.cli`.
"""
