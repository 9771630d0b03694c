"""The solver race: which solver reaches the top-r triplets of G to a given accuracy fastest.

One module per study: ``compare`` (the paper's race and strict measures), ``spectrum``
(bandwidth sweep), ``residual_study`` (residual stopping), ``problems`` (the raced problems)
and ``paper_runtime`` (the paper's runtime figures). They compute and return data;
:mod:`ksvd_bench.report` and :mod:`ksvd_bench.cli` format and wire them.
"""
