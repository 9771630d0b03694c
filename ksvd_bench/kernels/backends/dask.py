"""The Dask backend: kernel passes on a cluster, :class:`DistributedKernelSource`.

A lazy kernel matrix (:class:`~ksvd_bench.kernels.KernelSource`) whose set-up pass,
``matmat``, ``rmatmat``, ``sketch``, ``rows``, ``cols``, ``block`` and ``dense`` run as
``dask.distributed`` tasks over row blocks of G. Dask does the scheduling, data movement and
retries; this module only cuts the work into blocks and reduces the answers. Build one with
``KernelSource.from_points(X, Z, ..., client=client)`` or ``kernel_source(A, ...,
client=client)``; every solver in :mod:`solvers` runs on it unchanged.

How a pass runs
---------------
* The points (the source without its per-row constants: X, Z and their squared norms) are
  scattered once, to every worker (``broadcast``), so a killed worker never holds the only
  copy. The set-up pass runs as one task per row block; the client combines the blocks'
  statistics in block order and scatters the per-row constants (O(N + M)) once.
* A product is one task per row block ``[a, b)``: the task calls the source's scale-out hook
  ``pass_rows(a, b, Omega, Psi[a:b])`` (the row-source protocol,
  :class:`~ksvd_bench.kernels.backends.base.RowSource`, is all this module calls), which
  evaluates the block's kernel tiles and multiplies them at once (the fused pass).
  ``Psi[a:b]`` travels inside its task, and so does a small ``Omega`` (up to
  :data:`EMBED_BYTES`); a larger one is scattered to every worker once per pass.
  So the scheduler can rerun any task anywhere.
* The workers reduce, in a fixed tree: each reduction task takes :data:`FAN_IN`
  consecutive results (blocks, or reductions of the level below) and stacks their rows of
  ``G @ Omega`` and adds their partials of ``G.T @ Psi`` left to right. The client reads
  the root only: ``(N x k, M x l)``, so its memory is O((N + M)(k + l)) whatever the number
  of blocks (the leaves' M x l partials live on the workers, and reductions run before new
  leaves, so the workers hold a few at a time). The set-up statistics are reduced the same
  way. Each block and each reduction is one task key, so a task that Dask reruns after its
  worker died replaces its result: no block is lost or counted twice.
* The number of blocks is a function of the shape only (:func:`default_n_blocks`), and so
  is the tree: results are bitwise the same on any cluster, of any size.

Block bounds are multiples of the tile height, so each block walks the same tiles as the
in-process pass: rows, columns, blocks and ``G @ Omega`` of an uncentred kernel are bitwise
those of the in-process source; sums over blocks (``G.T @ Psi``, the centring means) differ
from it by rounding only (the tests assert 1e-12 relative), and never depend on the number
of workers, their threads or on which worker ran what.

If every worker holding the points dies (Dask cannot recompute scattered data), the client,
which still has them, scatters them again and reruns the pass.

:func:`kernel_tiles` and :func:`svd_compressed` give Dask's own algorithm the same kernel
values, as a ``dask.array`` of tiles (the peer the benchmarks compare with).

Threads. A task runs the Numba pass on as many threads as its worker has (``dask worker
--nthreads``) and one pass at a time per worker process, so ``--nthreads 1 --nworkers P``
and ``--nthreads P`` both use P cores without oversubscription.
"""

from __future__ import annotations

import contextlib
import numbers
import socket
import struct
import threading
import time
import uuid

import numba
import numpy as np

from solvers import (
    SVDResult,
    check_index,  # solvers imports nothing from ksvd_bench
)

from ..operands import check_operand
from .base import RowSource

try:
    import distributed
except ImportError as exc:  # pragma: no cover - the [dask] extra is part of [test]
    raise ImportError(
        "the Dask backend (ksvd_bench.kernels.distributed) needs dask.distributed: "
        "pip install 'ksvd-bench[dask]'"
    ) from exc

__all__ = ["DistributedKernelSource", "connect", "check_client", "kernel_tiles", "svd_compressed"]

#: parameters of the in-process source that the distributed one shows as its own
_FORWARDED = (
    "kernel",
    "gamma",
    "compat",
    "center",
    "degree",
    "coef0",
    "n_features",
    "chunk_rows",
    "chunk_cols",
)
#: operands up to this size travel inside each task; larger ones are scattered once per
#: pass to every worker (a broadcast costs a few round trips: ARPACK's one-vector passes
#: would pay them hundreds of times)
EMBED_BYTES = 1 << 20
#: default seconds to wait for a scheduler, and for a first worker to join it
DEFAULT_TIMEOUT = 10.0
#: entries of G per row block by default (whole tiles): a task of about 0.1 s on one core
#: at d = 64, long against Dask's per-task overhead (about 1 ms)
BLOCK_ENTRIES = 1 << 24
#: blocks per pass by default: at least MIN_BLOCKS (to share small passes out), at most
#: MAX_BLOCKS (scheduler load); always at most one per tile of rows
MIN_BLOCKS = 16
MAX_BLOCKS = 4096
#: results added by one reduction task (the fan-in of the fixed reduction tree)
FAN_IN = 4


# ----------------------------------------------------------------------- connecting
def connect(address, *, timeout=None):
    """A :class:`distributed.Client` connected to the scheduler at ``address``.

    Parameters
    ----------
    address : str
        Scheduler address, ``"tcp://host:port"`` or ``"host:port"`` (as printed by
        ``dask scheduler``, e.g. ``"tcp://scheduler-host:8786"``); other Dask schemes
        (``tls://``, ...) are passed to Dask as they are.
    timeout : float, default=None
        Seconds to wait for the connection; None uses :data:`DEFAULT_TIMEOUT` (10).

    Returns
    -------
    distributed.Client

    Raises
    ------
    ConnectionError
        When ``address`` is not a scheduler address, or no Dask scheduler answers there
        within ``timeout`` seconds: nothing listens, or something else does (a TCP address
        is first probed for a Dask handshake, so a foreign server can neither stall the
        connection nor make Dask read a garbage frame length).
    """
    if not isinstance(address, str) or not address:
        raise TypeError(
            f"address must be a non-empty string such as 'tcp://host:8786', got {address!r}"
        )
    timeout = _check_timeout(DEFAULT_TIMEOUT if timeout is None else timeout)
    where = _tcp_host_port(address)
    if where is not None:
        _probe_scheduler(address, *where, timeout)
    try:
        return distributed.Client(address, timeout=timeout)
    except (OSError, TimeoutError, MemoryError, ValueError) as exc:
        raise ConnectionError(
            f"could not reach a Dask scheduler at {address!r} within {timeout:g} s "
            f"({type(exc).__name__}: {exc}); start one with `dask scheduler` and check the "
            f"address and port"
        ) from None


#: largest first message accepted from a scheduler while probing (its handshake is ~60 bytes)
MAX_HANDSHAKE_BYTES = 1 << 16


def _tcp_host_port(address):
    """``(host, port)`` of a ``tcp://`` or scheme-less address; None for other schemes."""
    scheme, sep, location = address.rpartition("://")
    if sep and scheme != "tcp":
        return None
    host, colon, port = location.rpartition(":")
    if not colon or not host or not port.isdigit() or not 0 < int(port) < 65536:
        raise ConnectionError(
            f"{address!r} is not a Dask scheduler address: expected 'tcp://host:port', e.g. "
            f"'tcp://scheduler-host:8786' (as printed by `dask scheduler`)"
        )
    return host.strip("[]"), int(port)


def _recv_exactly(sock, n, deadline):
    data = b""
    while len(data) < n:
        sock.settimeout(max(deadline - time.monotonic(), 1e-3))
        chunk = sock.recv(n - len(data))
        if not chunk:
            raise ConnectionResetError("the connection was closed")
        data += chunk
    return data


def _probe_scheduler(address, host, port, timeout):
    """Raise ConnectionError unless a Dask server at ``host:port`` greets within ``timeout``.

    A Dask listener speaks first: a frame length (8 bytes, little endian), then a small
    msgpack handshake naming its ``pickle-protocol``. Anything else (silence, an HTTP
    server, garbage) is refused here, before Dask would wait on it or trust its length.
    """
    deadline = time.monotonic() + timeout
    problem = None
    try:
        with socket.create_connection((host, port), timeout=timeout) as sock:
            (n,) = struct.unpack("<Q", _recv_exactly(sock, 8, deadline))
            if not 8 <= n <= MAX_HANDSHAKE_BYTES:
                problem = f"it sent {n} as its first frame length"
            elif b"pickle-protocol" not in _recv_exactly(sock, n, deadline):
                problem = "its first message is not a Dask handshake"
    except TimeoutError:
        problem = f"no Dask handshake within {timeout:g} s"
    except OSError as exc:
        raise ConnectionError(
            f"could not reach a Dask scheduler at {address!r} within {timeout:g} s "
            f"({type(exc).__name__}: {exc}); start one with `dask scheduler` and check the "
            f"address and port"
        ) from None
    if problem is not None:
        raise ConnectionError(
            f"something other than a Dask scheduler listens at {address!r} ({problem}); "
            f"check the address and port"
        )


def check_client(client):
    """``client`` if it is a running :class:`distributed.Client`, else a clear error."""
    if not isinstance(client, distributed.Client):
        raise TypeError(
            f"client must be a dask.distributed.Client (for a scheduler address use "
            f"ksvd_bench.kernels.distributed.connect(address)), got {type(client).__name__}"
        )
    if client.status != "running":
        raise ValueError(f"client is not connected (status {client.status!r})")
    return client


def _check_timeout(timeout):
    if (
        isinstance(timeout, bool)
        or not isinstance(timeout, numbers.Real)
        or not np.isfinite(timeout)
        or timeout <= 0
    ):
        raise ValueError(f"timeout must be a finite number of seconds > 0, got {timeout!r}")
    return float(timeout)


def _check_n_blocks(n_blocks):
    if n_blocks is None:
        return None
    if isinstance(n_blocks, bool) or not isinstance(n_blocks, (int, np.integer)) or n_blocks < 1:
        raise ValueError(f"n_blocks must be a positive integer or None, got {n_blocks!r}")
    return int(n_blocks)


def _wait_for_workers(client, timeout):
    """Threads of every worker (``{address: nthreads}``), after at least one has joined."""
    try:
        client.wait_for_workers(1, timeout=timeout)
    except TimeoutError:
        raise TimeoutError(
            f"no Dask worker joined the scheduler at {client.scheduler.address!r} within "
            f"{timeout:g} s; start workers with `dask worker <scheduler address>`"
        ) from None
    return client.nthreads()


def default_n_blocks(n, m):
    """Row blocks of a pass over an ``n x m`` kernel: from the shape only, never the cluster.

    About :data:`BLOCK_ENTRIES` entries of G per block, within
    ``[MIN_BLOCKS, MAX_BLOCKS]`` (:func:`row_blocks` then keeps whole tiles, so a small G
    gets fewer).
    """
    return int(min(MAX_BLOCKS, max(MIN_BLOCKS, -(-int(n) * int(m) // BLOCK_ENTRIES))))


def row_blocks(n, tile_rows, n_blocks):
    """Bounds ``[(a, b), ...]`` of at most ``n_blocks`` row blocks tiling ``[0, n)``.

    Every bound is a multiple of ``tile_rows`` (or ``n``), so a block's tiles are the
    in-process pass's tiles.
    """
    n_tiles = -(-n // tile_rows)
    per_block = -(-n_tiles // max(1, min(n_blocks, n_tiles))) * tile_rows
    return [(a, min(a + per_block, n)) for a in range(0, n, per_block)]


def _is_row_source(source):
    """Whether ``source`` is an in-process lazy source: a :class:`~.base.RowSource`.

    Checked by the protocol's members (this backend imports no source module). The
    structured source has none of them.
    """
    return not isinstance(source, DistributedKernelSource) and isinstance(source, RowSource)


# ----------------------------------------------------------------------- worker side
_PASS_LOCK = threading.Lock()


def _worker_threads():
    """Threads of the Dask worker running this task (all Numba threads outside a worker)."""
    try:
        worker = distributed.get_worker()
    except ValueError:
        return numba.config.NUMBA_NUM_THREADS
    n = getattr(getattr(worker, "state", None), "nthreads", None) or 1
    return max(1, min(int(n), numba.config.NUMBA_NUM_THREADS))


@contextlib.contextmanager
def _numba_threads():
    """One pass at a time per process, on as many Numba threads as the worker has threads.

    Dask runs ``nthreads`` tasks at once per worker; the pass itself is Numba-parallel, so
    running passes one at a time, each on ``nthreads`` threads, uses the worker's cores
    without oversubscribing them (and never enters Numba's thread pool from two threads).
    """
    with _PASS_LOCK:
        previous = numba.get_num_threads()
        numba.set_num_threads(_worker_threads())
        try:
            yield
        finally:
            numba.set_num_threads(previous)


def _reduce_products(*parts):
    """``(Y, W)`` of consecutive row blocks (in order): rows of Y stacked, W added left to
    right (a fixed order, so a fixed tree gives fixed bits)."""
    ys = [p[0] for p in parts]
    ws = [p[1] for p in parts]
    Y = None if ys[0] is None else np.concatenate(ys, axis=0)
    W = None
    if ws[0] is not None:
        W = ws[0].copy()
        for w in ws[1:]:
            W += w
    return Y, W


def _reduce_setup(*parts):
    """Set-up statistics of consecutive row ranges (``setup_rows`` results, in order) as one
    part over their union: per-row arrays joined, column sums and sums of squares added left
    to right."""
    first = parts[0]
    out = {"rows": (first["rows"][0], parts[-1]["rows"][1])}
    for key in ("shift", "scale", "rowsum"):
        out[key] = None if first[key] is None else np.concatenate([p[key] for p in parts])
    out["colsum"] = None if first["colsum"] is None else first["colsum"].copy()
    out["sumsq"] = first["sumsq"]
    for p in parts[1:]:
        if out["colsum"] is not None:
            out["colsum"] += p["colsum"]
        out["sumsq"] = (
            None if out["sumsq"] is None or p["sumsq"] is None else out["sumsq"] + p["sumsq"]
        )
    return out


def _setup_task(points, a, b):
    with _numba_threads():
        return points.setup_rows(a, b)


def _pass_task(points, state, a, b, Omega, Psi_rows):
    src = points.with_setup_state(state)
    with _numba_threads():
        return src.pass_rows(a, b, Omega, Psi_rows)


def _rows_task(points, state, ridx, cidx):
    src = points.with_setup_state(state)
    with _numba_threads():
        return src.rows(ridx) if cidx is None else src.block(ridx, cidx)


def _cols_task(points, state, a, b, cidx):
    src = points.with_setup_state(state)
    with _numba_threads():
        return src.block_rows(a, b, cidx)


def _count_tile():
    """Count one tile evaluation where it runs (a worker, or this process)."""
    global _LOCAL_TILES
    try:
        worker = distributed.get_worker()
    except ValueError:
        _LOCAL_TILES += 1
        return
    worker.ksvd_tiles = getattr(worker, "ksvd_tiles", 0) + 1


_LOCAL_TILES = 0


def _tile_task(points, state, block_info=None):
    """One tile of G for ``dask.array.map_blocks`` (dask fuses tiles into their consumers'
    tasks, so tiles are counted where they are evaluated, not from task keys)."""
    (a, b), (c0, c1) = block_info[None]["array-location"]
    _count_tile()
    src = points if state is None else points.with_setup_state(state)
    with _numba_threads():
        return src.block_rows(a, b, np.arange(c0, c1))


def _tiles_evaluated(client):
    counts = (
        {}
        if client is None
        else client.run(lambda dask_worker: getattr(dask_worker, "ksvd_tiles", 0))
    )
    return _LOCAL_TILES + sum(counts.values())


# ----------------------------------------------------------------------- client side
class DistributedKernelSource:
    """A :class:`~ksvd_bench.kernels.KernelSource` whose passes run on a Dask cluster.

    Usually built by ``KernelSource.from_points(..., client=client)`` or
    ``kernel_source(A, ..., client=client)``. Same matrix-source protocol and attributes as
    the in-process source (``shape``, ``dtype``, ``rows``, ``cols``, ``block``, ``matmat``,
    ``rmatmat``, ``sketch``, ``dense``, ``norm_bound``, the counters), so every solver runs
    on it unchanged. See the module docstring for how passes are cut and reduced.

    Parameters
    ----------
    source : KernelSource
        The in-process source (a :class:`~.base.RowSource`); where its set-up pass has not
        run (``not source.is_set_up()``) it runs on the cluster, otherwise its constants
        are used as they are. Kept as :attr:`local`.
    client : distributed.Client
        A connected client (:func:`connect` for a scheduler address).
    n_blocks : int, default=None
        Row blocks (tasks) per pass; None chooses from the shape only
        (:func:`default_n_blocks`: about 16 M entries of G each, 16 to 4096), never from
        the cluster, so results do not change with its size. Blocks are whole tiles
        (``source.chunk_rows`` rows), so there are at most ``ceil(N / chunk_rows)``.
    timeout : float, default=10
        Seconds to wait for a first worker to join the scheduler.

    Attributes
    ----------
    local : KernelSource
        The client's copy, with the cluster's set-up constants (in-process passes on it
        give the same answers).
    client : distributed.Client
    block_bounds : list of (int, int)
        The row blocks ``[a, b)`` of every pass.
    n_workers : int
        Workers when the source was built.
    n_entries, n_matmat, n_passes : int
        As :class:`~ksvd_bench.kernels.KernelSource` counts them.
    last_pass_keys : list of str
        Task keys of the latest pass, one per row block (in block order): the reduction
        tree reads each exactly once.
    last_gathered : list of str
        Keys of the results the client fetched in the latest product or set-up pass: one,
        the root of the reduction tree.
    n_rescatters : int
        Times the points were scattered again because every worker holding them died
        (Dask cannot recompute scattered data; the client still has it).

    Raises
    ------
    TypeError
        ``source`` is not a :class:`KernelSource` (the structured graph source stays in
        process: its products cost about as much as moving their operands, see
        ``benchmarks/scripts/bench_distributed.py``) or ``client`` is not a Client.
    TimeoutError
        No worker joined within ``timeout`` seconds.

    Examples
    --------
    >>> from distributed import Client, LocalCluster  # doctest: +SKIP
    >>> client = Client(LocalCluster(n_workers=2, threads_per_worker=1))  # doctest: +SKIP
    >>> G = KernelSource.from_points(X, Z, "sne", gamma=1.0, client=client)  # doctest: +SKIP
    >>> res = solvers.svd(G, 20, method="block_krylov", random_state=0)  # doctest: +SKIP
    """

    def __init__(self, source, client, *, n_blocks=None, timeout=DEFAULT_TIMEOUT):
        if not _is_row_source(source):
            raise TypeError(f"source must be a KernelSource, got {type(source).__name__}")
        self.client = check_client(client)
        n_blocks = _check_n_blocks(n_blocks)
        threads = _wait_for_workers(client, _check_timeout(timeout))
        self.n_workers = len(threads)
        if n_blocks is None:
            n_blocks = default_n_blocks(*source.shape)
        self.local = source
        self.block_bounds = row_blocks(source.shape[0], source.chunk_rows, n_blocks)
        self.n_entries = 0
        self.n_matmat = 0
        self.n_passes = 0
        self.last_pass_keys = []
        self.last_gathered = []
        self._next_pass = -1
        self._token = uuid.uuid4().hex[:12]
        self._points = self._scatter(source)
        if not source.is_set_up():
            self._run_setup()
        self._state = self._scatter(source.setup_state())
        self.n_rescatters = 0

    # ------------------------------------------------------------------- plumbing
    def _empty(self, r, c):
        return np.empty((r, c), dtype=self.dtype)

    def _scatter(self, obj):
        """One future of ``obj``, held by every worker (a killed one is not the only copy)."""
        return self.client.scatter([obj], broadcast=True, hash=False)[0]

    def _retried(self, run, *args):
        """``run(*args)``; once more after re-scattering if every copy of the points died.

        Dask reruns tasks whose worker died, but scattered data cannot be recomputed: when
        all the workers holding it are gone, the tasks that need it are cancelled. The
        client still holds the points, so they are scattered again (``n_rescatters``).
        """
        try:
            return run(*args)
        except distributed.client.FutureCancelledError:
            if self._points.status != "cancelled" and self._state.status != "cancelled":
                raise
        self._points = self._scatter(self.local)
        self._state = self._scatter(self.local.setup_state())
        self.n_rescatters += 1
        return run(*args)

    def _submit(self, kind, i, func, *args, priority=0):
        key = f"ksvd-{kind}-{self._token}-{self._next_pass}-{i}"
        return self.client.submit(func, *args, key=key, priority=priority)

    def _tree(self, kind, leaves, func):
        """The root future of a fixed reduction tree over ``leaves`` (futures, in order).

        Level ``l`` applies ``func`` to each run of :data:`FAN_IN` consecutive results of
        level ``l - 1``; its shape depends on ``len(leaves)`` only. A reduction has a higher
        priority than every leaf, so workers reduce the partials they hold before computing
        new ones. Only the root is kept here: the scheduler keeps the other results for
        as long as their reduction needs them (and recomputes them if a worker dies).
        """
        level = 0
        while len(leaves) > 1:
            level += 1
            leaves = [
                self._submit(
                    f"{kind}-reduce{level}", i, func, *leaves[j : j + FAN_IN], priority=level
                )
                for i, j in enumerate(range(0, len(leaves), FAN_IN))
            ]
        return leaves[0]

    def _gather_root(self, root):
        """The root's result: the one result of a pass the client fetches."""
        self.last_gathered = [root.key]
        return root.result()

    def _new_pass(self):
        self._next_pass += 1

    def _run_setup(self):
        self._new_pass()
        futures = [
            self._submit("setup", i, _setup_task, self._points, a, b)
            for i, (a, b) in enumerate(self.block_bounds)
        ]
        # one part over [0, N): the workers joined and added the blocks' parts in a fixed tree
        root = self._tree("setup", futures, _reduce_setup)
        del futures
        self.local.finish_setup([self._gather_root(root)])

    def _products(self, Om, Psi):
        """Reduced ``(G @ Om, G.T @ Psi)`` of one distributed pass (None where not asked)."""
        return self._retried(self._products_once, Om, Psi)

    def _products_once(self, Om, Psi):
        self._new_pass()
        om = None if Om is None else np.ascontiguousarray(Om, dtype=np.float64)
        if om is not None and om.nbytes > EMBED_BYTES:
            om = self._scatter(om)
        futures = [
            self._submit(
                "pass",
                i,
                _pass_task,
                self._points,
                self._state,
                a,
                b,
                om,
                None if Psi is None else np.ascontiguousarray(Psi[a:b], dtype=np.float64),
            )
            for i, (a, b) in enumerate(self.block_bounds)
        ]
        self.last_pass_keys = [f.key for f in futures]
        # One result per block key, reduced on the workers in a fixed tree: a fixed-order sum
        # in which a rerun task (its worker died) is still one term.
        root = self._tree("pass", futures, _reduce_products)
        del futures
        return self._gather_root(root)

    def _gather_rows(self, ridx, cidx):
        """``G[ridx][:, cidx]`` (all columns for None) as tasks over chunks of ``ridx``."""
        return self._retried(self._gather_rows_once, ridx, cidx)

    def _gather_rows_once(self, ridx, cidx):
        n_chunks = max(1, min(len(self.block_bounds), -(-ridx.size // self.chunk_rows)))
        self._new_pass()
        chunks = np.array_split(ridx, n_chunks)
        futures = [
            self._submit("rows", i, _rows_task, self._points, self._state, chunk, cidx)
            for i, chunk in enumerate(chunks)
        ]
        return np.concatenate([f.result() for f in futures], axis=0)

    def _gather_cols(self, cidx):
        """``G[:, cidx]`` as one task per row block."""
        return self._retried(self._gather_cols_once, cidx)

    def _gather_cols_once(self, cidx):
        self._new_pass()
        futures = [
            self._submit("cols", i, _cols_task, self._points, self._state, a, b, cidx)
            for i, (a, b) in enumerate(self.block_bounds)
        ]
        return np.concatenate([f.result() for f in futures], axis=0)

    # ------------------------------------------------------------------- protocol
    @property
    def shape(self):
        return self.local.shape

    @property
    def dtype(self):
        return self.local.dtype

    def __getattr__(self, name):
        # the in-process source's parameters; nothing else, so that no method of it can
        # silently run in process
        if name in _FORWARDED:
            return getattr(self.local, name)
        raise AttributeError(f"{type(self).__name__!r} object has no attribute {name!r}")

    def rows(self, idx):
        """``G[idx, :]`` as a dense ``(len(idx), M)`` array (tasks over chunks of ``idx``)."""
        idx = check_index(idx, self.shape[0], "row indices")
        if idx.size == 0:
            return self._empty(0, self.shape[1])
        self.n_entries += idx.size * self.shape[1]
        return self._gather_rows(idx, None)

    def cols(self, idx):
        """``G[:, idx]`` as a dense ``(N, len(idx))`` array (one task per row block)."""
        idx = check_index(idx, self.shape[1], "column indices")
        if idx.size == 0:
            return self._empty(self.shape[0], 0)
        self.n_entries += idx.size * self.shape[0]
        return self._gather_cols(idx)

    def block(self, ridx, cidx):
        """``G[np.ix_(ridx, cidx)]`` as a dense array (tasks over chunks of ``ridx``)."""
        r = check_index(ridx, self.shape[0], "row indices")
        c = check_index(cidx, self.shape[1], "column indices")
        if r.size == 0 or c.size == 0:
            return self._empty(r.size, c.size)
        self.n_entries += r.size * c.size
        return self._gather_rows(r, c)

    def matmat(self, X):
        """``G @ X`` for a dense ``(M, k)`` array (or a vector): one distributed pass."""
        V, vec = check_operand(X, self.shape[1], "X")
        if V.shape[1] == 0:
            return self.local.product_result(np.empty((self.shape[0], 0)), V, vec, "X")
        Y, _ = self._products(V, None)
        self.n_matmat += 1
        self.n_passes += 1
        return self.local.product_result(Y, V, vec, "X")

    def rmatmat(self, Y):
        """``G.T @ Y`` for a dense ``(N, k)`` array (or a vector): one distributed pass."""
        W_in, vec = check_operand(Y, self.shape[0], "Y")
        if W_in.shape[1] == 0:
            return self.local.product_result(np.empty((self.shape[1], 0)), W_in, vec, "Y")
        _, W = self._products(None, W_in)
        self.n_matmat += 1
        self.n_passes += 1
        return self.local.product_result(W, W_in, vec, "Y", transpose=True)

    def sketch(self, Omega, Psi):
        """``(G @ Omega, G.T @ Psi)`` from ONE distributed pass over G.

        Parameters
        ----------
        Omega : ndarray of shape (M, k)
        Psi : ndarray of shape (N, l)

        Returns
        -------
        Y : ndarray of shape (N, k)
        W : ndarray of shape (M, l)
        """
        Om, vo = check_operand(Omega, self.shape[1], "Omega")
        Ps, vp = check_operand(Psi, self.shape[0], "Psi")
        if Om.shape[1] == 0 or Ps.shape[1] == 0:
            Y = (
                self.matmat(Omega)
                if Om.shape[1]
                else self.local.product_result(np.empty((self.shape[0], 0)), Om, vo, "Omega")
            )
            W = (
                self.rmatmat(Psi)
                if Ps.shape[1]
                else self.local.product_result(
                    np.empty((self.shape[1], 0)), Ps, vp, "Psi", transpose=True
                )
            )
            return Y, W
        Y, W = self._products(Om, Ps)
        self.n_matmat += 2
        self.n_passes += 1
        return (
            self.local.product_result(Y, Om, vo, "Omega"),
            self.local.product_result(W, Ps, vp, "Psi", transpose=True),
        )

    def dense(self):
        """All of G as a dense array, gathered on the client (O(N M) memory; one pass)."""
        self.n_passes += 1
        return self._gather_cols(np.arange(self.shape[1]))

    def norm_bound(self):
        """A cheap upper bound on ``||G||_2`` (from the cluster's set-up pass)."""
        return self.local.norm_bound()

    def frobenius_norm(self):
        """``||G||_F`` or None, as :meth:`KernelSource.frobenius_norm` (its centred pass
        gathers row blocks from the cluster; counted in ``n_passes``)."""
        return self.local.known_frobenius(self.frobenius_slack())

    def frobenius_slack(self):
        """``(value, slack)`` as :meth:`KernelSource.frobenius_slack`."""
        return self.local.frobenius_slack(
            lambda a, b: self._gather_rows(np.arange(a, b), None), self
        )

    # ------------------------------------------------------------------- lifetime
    def close(self):
        """Release the scattered points and constants on the cluster (idempotent)."""
        for name in ("_points", "_state"):
            fut = self.__dict__.pop(name, None)
            if fut is not None:
                fut.release()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def __reduce__(self):
        raise TypeError(
            "a DistributedKernelSource holds futures of a live Dask client and "
            "cannot be pickled; pickle its .local source instead"
        )

    def __repr__(self):
        return (
            f"DistributedKernelSource(shape={self.shape}, kernel={self.kernel!r}, "
            f"gamma={self.gamma}, center={self.center}, dtype={self.dtype}, "
            f"n_blocks={len(self.block_bounds)}, n_workers={self.n_workers})"
        )


# ----------------------------------------------------------------------- Dask's own SVD
def kernel_tiles(source, tile=4096):
    """G as a :class:`dask.array.Array` of ``tile x tile`` blocks, each evaluated by its task.

    The peer representation for Dask's own algorithms: the same kernel values as the
    source's passes, built by ``map_blocks`` from the points the source already scattered
    (a :class:`DistributedKernelSource`), or from an in-process
    :class:`~ksvd_bench.kernels.KernelSource` (then the tasks run wherever dask computes).
    Every evaluation writes a dense tile, which the consumer then multiplies.

    Parameters
    ----------
    source : DistributedKernelSource or KernelSource
        With its set-up pass done.
    tile : int, default=4096
        Rows and columns of a block (the last ones may be smaller).

    Returns
    -------
    dask.array.Array of shape ``source.shape``
    """
    # start-up: dask.array adds 0.2 s to distributed's import; only the tile peer needs it
    import dask.array as da

    if isinstance(tile, bool) or not isinstance(tile, (int, np.integer)) or tile < 1:
        raise ValueError(f"tile must be a positive integer, got {tile!r}")
    if isinstance(source, DistributedKernelSource):
        args = (source._points, source._state)
    elif _is_row_source(source):
        source.ensure_setup()
        args = (source, None)
    else:
        raise TypeError(
            f"source must be a KernelSource or DistributedKernelSource, got {type(source).__name__}"
        )
    n, m = source.shape
    chunks = (
        tuple(min(tile, n - a) for a in range(0, n, tile)),
        tuple(min(tile, m - c) for c in range(0, m, tile)),
    )
    return da.map_blocks(
        _tile_task,
        *args,
        chunks=chunks,
        dtype=source.dtype,
        meta=np.empty((0, 0), dtype=source.dtype),
    )


def svd_compressed(source, rank, *, n_iter=0, n_oversamples=10, tile=4096, random_state=None):
    """Dask's ``dask.array.linalg.svd_compressed`` on :func:`kernel_tiles` of ``source``.

    ``compute=True``: G is evaluated again at every use (holding it would take N M numbers),
    so it makes ``2 n_iter + 2`` passes over G, as :func:`solvers.rsvd` with the same
    ``n_iter`` and ``n_oversamples``.

    Parameters
    ----------
    source : DistributedKernelSource or KernelSource
    rank : int
    n_iter : int, default=0
        Power iterations (``n_power_iter``).
    n_oversamples : int, default=10
    tile : int, default=4096
    random_state : None or int
        Seed of dask's sketch.

    Returns
    -------
    solvers.SVDResult
        ``info["n_passes"]`` counts the tiles evaluated (on every worker) divided by the
        tiles of G; ``info["seconds"]`` the wall time.
    """
    # start-up: dask.array adds 0.2 s to distributed's import; only the tile peer needs it
    import dask
    import dask.array as da

    client = source.client if isinstance(source, DistributedKernelSource) else None
    G = kernel_tiles(source, tile)
    n_tiles = len(G.chunks[0]) * len(G.chunks[1])
    before = _tiles_evaluated(client)
    t0 = time.perf_counter()
    seed = None if random_state is None else int(random_state)
    u, s, v = da.linalg.svd_compressed(
        G, rank, n_power_iter=n_iter, n_oversamples=n_oversamples, seed=seed, compute=True
    )
    u, s, v = dask.compute(u, s, v, **({} if client is None else {"scheduler": client}))
    seconds = time.perf_counter() - t0
    passes = (_tiles_evaluated(client) - before) / n_tiles
    info = {
        "method": "svd_compressed",
        "effort": n_iter,
        "n_passes": passes,
        "n_products": int(round(passes)),
        "seconds": seconds,
        "tile": tile,
    }
    return SVDResult(np.asarray(u), np.asarray(s), np.asarray(v).T, info)
