"""The paper's feature-learning reproduction, one module per table or figure.

Node classification, graph reconstruction, UCI tables, ablation, Nyström F1 and the
asymmetry measure; ``paper_numbers`` holds the paper's own figures. The modules compute and
return data (each ``run_*`` an :class:`~ksvd_bench.paper._result.ExperimentResult`, a dict with a
one-line repr); ``cli`` wires ``ksvd-bench reproduce``.
"""
