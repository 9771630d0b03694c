"""A/B of the CPU pass's tile limits: ``ksvd-bench roofline`` with the previous limits
(128 x 384) and the present ones (256 x 1024), alternated twice in one process.

At N = M = 4000 the tiles are 128 x 256 and 256 x 256 (16 column tiles are kept for the
column-parallel passes). Recorded: ``benchmarks/recorded/passes/cpu_tiles_2core.txt``.
"""

from ksvd_bench.kernels.backends import cpu
from ksvd_bench.roofline import format_roofline, roofline

LIMITS = ((128, 384), (256, 1024))


def main(threads=(1, 2), repeats=5):
    for round_, (rows, cols) in enumerate(LIMITS * 2, start=1):
        cpu.TILE_ROWS, cpu.TILE_COLS = rows, cols
        result = roofline(threads=threads, repeats=repeats)
        print(f"== round {round_}: tiles {rows} x {cols}")
        print(
            "\n".join(
                line for line in format_roofline(result).splitlines() if line.startswith("float")
            ),
            flush=True,
        )


if __name__ == "__main__":
    main()
