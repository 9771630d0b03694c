"""ksvd-bench: nonlinear SVD with asymmetric kernels (KSVD) and the asymmetric Nystrom method.

Sub-packages: :mod:`ksvd_bench.kernels` (kernel builders and matrix sources),
:mod:`ksvd_bench.datasets`, :mod:`ksvd_bench.metrics`, :mod:`ksvd_bench.driver`,
:mod:`ksvd_bench.race` (the solver race), :mod:`ksvd_bench.paper` (the feature-learning
reproduction). The solvers live in the separate package :mod:`solvers`.
"""

__version__ = "0.1.0"
__all__ = ["KSVD", "__version__"]


def __getattr__(name):
    # The estimator pulls in scikit-learn; import it only when asked for.
    if name == "KSVD":
        from .estimators import KSVD  # scikit-learn: loaded when KSVD is asked for

        return KSVD
    raise AttributeError(f"module 'ksvd_bench' has no attribute {name!r}")
