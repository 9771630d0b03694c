"""Exact rescaling of extreme magnitudes by a power of two.

Products and Gram matrices square the entries of ``G``: below about ``2^-500`` the squares
underflow and above ``2^500`` they overflow, and an inverse of a tiny core value overflows
long before that. Multiplying by a power of two is exact (barring underflow of the input
itself), so a solver may work on ``2^-e G`` and divide its values by ``2^-e`` at the end.
"""

from __future__ import annotations

import math

__all__ = ["SAFE_EXPONENT", "power_of_two_scale"]

#: Magnitudes outside ``[2^-SAFE_EXPONENT, 2^SAFE_EXPONENT]`` are brought near 1 first: the
#: Gram operator squares the entries (``2^-400`` would underflow to subnormals) and sums up
#: to ``min(N, M)`` of them.
SAFE_EXPONENT = 200
#: the largest power of two in float64, ``2^1023``
MAX_EXPONENT = 1023


def power_of_two_scale(amax):
    """``2^-e`` bringing ``amax > 0`` near 1, or 1.0 when it is already safe (or 0, or not
    finite: nothing to scale by). A subnormal ``amax`` gets ``2^1023``, the largest power of
    two there is (``2^-e`` itself would overflow)."""
    if not (math.isfinite(amax) and amax > 0):
        return 1.0
    e = math.frexp(amax)[1]
    return 1.0 if abs(e) <= SAFE_EXPONENT else math.ldexp(1.0, min(-e, MAX_EXPONENT))
