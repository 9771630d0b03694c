"""``python -m ksvd_bench``: the same as the ``ksvd-bench`` command."""

import sys

from ksvd_bench.cli import main

if __name__ == "__main__":
    sys.exit(main())
