"""The solver race: which solver reaches the top-r triplets of G to a given accuracy fastest.

One module per study: ``compare`` (the paper's race and strict measures), ``spectrum``
(bandwidth sweep), ``residual_study`` (residual stopping), ``scale`` (cost against size,
lazy and structured, up to N = 1e6), ``problems`` (the raced problems)
and ``paper_runtime`` (the paper's runtime figures). They compute and return data.

The two large studies are split by job: ``compare`` orchestrates, ``_compare_settings``
checks its arguments, ``_compare_cells`` races one method, ``_compare_files`` writes its
files (and the record behind the README's tables), ``_compare_table`` formats its tables;
``scale`` orchestrates, ``_scale_problems`` defines its problems, ``_scale_cells`` runs and
isolates one cell, ``_scale_fit`` draws its conclusions, ``_scale_files`` writes (and merges)
its files, ``_scale_table`` formats. ``_common`` holds what they share, the whole-triplet
verdict among it. :mod:`ksvd_bench.report` lays tables out; ``_cli`` and ``_scale_cli`` wire
the sub-commands of :mod:`ksvd_bench.cli`.
"""
