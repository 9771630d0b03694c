"""Kernel passes on a Dask cluster (``ksvd_bench.kernels.distributed``).

One LocalCluster of two single-threaded worker processes serves the whole module. Every
distributed answer is compared with the in-process source's on the same points: the cluster
may change the order of sums over row blocks, nothing else (1e-12 relative).
"""

import os
import signal
import socket
import threading
import time

import distributed  # the [dask] extra is part of [test]
import numpy as np
import pytest
import scipy.sparse as sp

import solvers
from ksvd_bench.kernels import KernelSource, kernel_source
from ksvd_bench.kernels.backends.dask import MAX_BLOCKS, MIN_BLOCKS, default_n_blocks
from ksvd_bench.kernels.distributed import DistributedKernelSource, connect, row_blocks

RTOL = 1e-12
#: a tile of 16 rows (16 bytes per entry of a 16 x 64 tile), so small G has several blocks
CHUNK = 16 * 16 * 64
#: options that make every method cheap on the small problem
OPTIONS = {"sym_nystrom": {"n_samples": 40}, "asym_nystrom": {"n_samples": 40}}


@pytest.fixture(scope="module")
def client():
    cluster = distributed.LocalCluster(
        n_workers=2, threads_per_worker=1, processes=True, dashboard_address=":0"
    )
    c = distributed.Client(cluster)
    yield c
    c.close()
    cluster.close()


def _points(n, m, d, seed):
    rng = np.random.default_rng(seed)
    centres = rng.normal(scale=3.0, size=(4, d))
    X = centres[rng.integers(4, size=n)] + rng.normal(size=(n, d))
    Z = centres[rng.integers(4, size=m)] + rng.normal(size=(m, d))
    return X, Z


def _close(a, b, rtol=RTOL):
    a, b = np.asarray(a, dtype=np.float64), np.asarray(b, dtype=np.float64)
    assert a.shape == b.shape
    np.testing.assert_allclose(b, a, rtol=0, atol=rtol * max(np.abs(a).max(), 1e-300))


@pytest.fixture(scope="module")
def pair(client):
    """The same centred SNE kernel in process and on the cluster (10 row blocks of a tile)."""
    X, Z = _points(150, 130, 5, seed=0)
    kw = dict(gamma=3.0, center=True, chunk_bytes=CHUNK)
    local = KernelSource.from_points(X, Z, "sne", **kw)
    dist = KernelSource.from_points(X, Z, "sne", client=client, **kw)
    yield local, dist
    dist.close()


def test_block_count_is_a_function_of_the_shape():
    assert default_n_blocks(150, 130) == MIN_BLOCKS
    assert default_n_blocks(10**6, 10**6) == MAX_BLOCKS
    assert default_n_blocks(2**14, 2**14) == 16 and default_n_blocks(2**15, 2**14) == 32


def test_blocks_are_whole_tiles():
    assert row_blocks(150, 16, 4) == [(0, 48), (48, 96), (96, 144), (144, 150)]
    assert row_blocks(10, 16, 4) == [(0, 10)]
    bounds = row_blocks(1000, 64, 7)
    assert bounds[0][0] == 0 and bounds[-1][1] == 1000
    assert all(b == c for (_, b), (c, _) in zip(bounds[:-1], bounds[1:], strict=True))
    assert all(a % 64 == 0 for a, _ in bounds) and len(bounds) <= 7


def test_protocol_equals_in_process(pair):
    local, dist = pair
    assert isinstance(dist, DistributedKernelSource)
    assert dist.shape == local.shape and dist.dtype == local.dtype
    assert len(dist.block_bounds) == 10 and dist.chunk_rows == 16
    assert (dist.kernel, dist.gamma, dist.center) == ("sne", 3.0, True)
    rng = np.random.default_rng(1)
    V, P = rng.normal(size=(130, 3)), rng.normal(size=(150, 2))
    _close(local.matmat(V), dist.matmat(V))
    _close(local.matmat(V[:, 0]), dist.matmat(V[:, 0]))
    _close(local.rmatmat(P), dist.rmatmat(P))
    for a, b in zip(local.sketch(V, P), dist.sketch(V, P), strict=True):
        _close(a, b)
    r, c = np.array([149, 0, 77, 3]), np.array([5, 129, 64])
    _close(local.rows(r), dist.rows(r))
    _close(local.cols(c), dist.cols(c))
    _close(local.block(r, c), dist.block(r, c))
    _close(local.dense(), dist.dense())
    assert abs(dist.norm_bound() - local.norm_bound()) <= RTOL * local.norm_bound()
    # three products, one sketch and dense: the same counts as in process
    assert (dist.n_passes, dist.n_matmat) == (local.n_passes, local.n_matmat) == (5, 5)
    assert dist.n_entries == local.n_entries
    # one task key per row block in the latest pass, all distinct
    assert len(set(dist.last_pass_keys)) == len(dist.block_bounds)


@pytest.mark.parametrize("method", solvers.METHODS)
def test_every_method_equals_in_process(pair, method):
    local, dist = pair
    opts = OPTIONS.get(method, {})
    ref = solvers.svd(local, 5, method=method, random_state=0, **opts)
    res = solvers.svd(dist, 5, method=method, random_state=0, **opts)
    _close(ref.s, res.s)
    # vectors carry the sums' rounding divided by the spectral gaps
    _close(ref.U, res.U, rtol=1e-10)
    _close(ref.V, res.V, rtol=1e-10)
    assert res.info["n_passes"] == ref.info["n_passes"]


@pytest.mark.parametrize("dtype, sparse", [(np.float32, False), (np.float64, True)])
def test_from_points_float32_and_sparse(client, dtype, sparse):
    X, Z = _points(90, 70, 6, seed=2)
    if sparse:
        X[np.abs(X) < 1.0] = 0.0
        X = sp.csr_matrix(X)
    kw = dict(gamma=4.0, center=False, dtype=dtype, chunk_bytes=CHUNK)
    local = KernelSource.from_points(X, Z, "rbf", **kw)
    with KernelSource.from_points(X, Z, "rbf", client=client, **kw) as dist:
        assert dist.dtype == local.dtype == dtype
        rng = np.random.default_rng(3)
        V, P = rng.normal(size=(70, 2)), rng.normal(size=(90, 2))
        _close(local.matmat(V), dist.matmat(V))
        _close(local.rmatmat(P), dist.rmatmat(P))
        assert dist.cols([4]).dtype == dtype


def test_kernel_source_of_data_matrix(client):
    A = np.random.default_rng(4).normal(size=(60, 40))
    kw = dict(compat="pinv", center=True, structured=False, chunk_bytes=CHUNK)
    local = kernel_source(A, "t", **kw)
    dist = kernel_source(A, "t", client=client, **kw)
    assert isinstance(dist, DistributedKernelSource) and dist.compat == "pinv"
    _close(local.dense(), dist.dense())
    dist.close()
    # the structured graph source stays in process (not worth distributing, see the docs)
    G = sp.random(50, 50, density=0.1, random_state=0, format="csr")
    S = kernel_source(G, "sne", client=client)
    assert type(S).__name__ == "StructuredKernelSource"


@pytest.mark.parametrize("center", [False, True])
def test_softmax_on_the_cluster_matches_the_formula(client, center):
    """Softmax attention on two workers (several row blocks) equals the numpy formula to
    1e-12, every pass, with logits over 1e3 (a naive exp overflows)."""
    rng = np.random.default_rng(8)
    X, Z = rng.normal(size=(150, 6)), rng.normal(size=(130, 6))
    X[:5] *= 200.0  # rows whose logits reach thousands
    S = X @ Z.T / 0.9
    assert np.abs(S).max() > 1e3
    E = np.exp(S - S.max(axis=1, keepdims=True))
    G = E / E.sum(axis=1, keepdims=True)
    if center:
        G = G - G.mean(axis=0) - G.mean(axis=1, keepdims=True) + G.mean()
    kw = dict(gamma=0.9, center=center, chunk_bytes=CHUNK)
    with KernelSource.from_points(X, Z, "softmax", client=client, **kw) as dist:
        assert len(dist.block_bounds) > 1
        V, P = rng.normal(size=(130, 3)), rng.normal(size=(150, 2))
        _close(G @ V, dist.matmat(V))
        _close(G.T @ P, dist.rmatmat(P))
        Y, W = dist.sketch(V, P)
        _close(G @ V, Y)
        _close(G.T @ P, W)
        _close(G, dist.dense())
        _close(G[:, [7, 0]], dist.cols([7, 0]))


def test_bad_arguments(client):
    X, Z = _points(20, 20, 2, seed=5)
    with pytest.raises(TypeError, match="client must be a dask.distributed.Client"):
        KernelSource.from_points(X, Z, "sne", gamma=1.0, client="tcp://127.0.0.1:8786")
    with pytest.raises(TypeError, match="client must be a dask.distributed.Client"):
        kernel_source(X, "sne", client=object())
    local = KernelSource._from_arrays(X, Z, "sne", gamma=1.0, setup=False)
    with pytest.raises(ValueError, match="n_blocks"):
        DistributedKernelSource(local, client, n_blocks=0)
    with pytest.raises(TypeError, match="source must be a KernelSource"):
        DistributedKernelSource(np.eye(3), client)


def test_no_worker_fails_within_timeout():
    X, Z = _points(20, 20, 2, seed=8)
    local = KernelSource._from_arrays(X, Z, "sne", gamma=1.0, setup=False)
    with (
        distributed.LocalCluster(n_workers=0, processes=False, dashboard_address=":0") as lc,
        distributed.Client(lc) as empty,
    ):
        with pytest.raises(TimeoutError, match="no Dask worker joined the scheduler"):
            DistributedKernelSource(local, empty, timeout=0.5)


def _free_port():
    with socket.socket() as s:  # a port that nothing listens on once closed
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_unreachable_scheduler_fails_within_timeout():
    port = _free_port()
    with pytest.raises(
        ConnectionError,
        match=f"could not reach a Dask scheduler at 'tcp://127.0.0.1:{port}' within 1 s",
    ):
        connect(f"tcp://127.0.0.1:{port}", timeout=1)


def test_scale_cli_refuses_unreachable_scheduler(monkeypatch, tmp_path, capsys):
    from ksvd_bench import cli
    from ksvd_bench.kernels.backends import dask as kd

    monkeypatch.setattr(kd, "DEFAULT_TIMEOUT", 1.0)
    with pytest.raises(SystemExit) as exc:
        cli.main(
            [
                "scale",
                "--quick",
                "--scheduler",
                f"tcp://127.0.0.1:{_free_port()}",
                "--out",
                str(tmp_path / "out"),
            ]
        )
    assert exc.value.code == 2
    assert "argument --scheduler: could not reach a Dask scheduler" in capsys.readouterr().err
    assert not (tmp_path / "out").exists()  # refused before any work


def test_scale_on_the_cluster_with_svd_compressed(client, tmp_path):
    """``scale --scheduler``: the cells run on the cluster, svd_compressed among them."""
    import json

    from ksvd_bench import cli

    out = tmp_path / "scale"
    cli.main(
        [
            "scale",
            "--part",
            "b",
            "--sizes",
            "1000",
            "--methods",
            "rsvd,svd_compressed",
            "--scheduler",
            client.scheduler.address,
            "--in-process",
            "--no-progress",
            "--out",
            str(out),
        ]
    )
    result = json.loads((out / "scale.json").read_text())
    assert result["meta"]["dask"] == client.scheduler.address
    rows = {r["method"]: r for r in result["rows"]}
    assert rows["rsvd"]["status"] == rows["svd_compressed"]["status"] == "ok"
    # the same power iterations (q = 0): two passes each (rsvd's certificate adds 2), and an
    # answer of the same quality
    assert rows["svd_compressed"]["passes"] == rows["rsvd"]["passes"] - 2 == 2
    assert rows["svd_compressed"]["effort"] == rows["rsvd"]["effort"]
    assert rows["svd_compressed"]["subspace_error"] < 0.05
    assert rows["rsvd"]["subspace_error"] < 0.05


def _kill_when_busy(client, prefix, out):
    """SIGKILL the first worker seen running a task whose key starts with ``prefix``."""
    pids = client.run(os.getpid)
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        for worker, keys in client.processing().items():
            mine = [k for k in keys if str(k).startswith(prefix)]
            if mine:
                out["keys"] = mine
                os.kill(pids[worker], signal.SIGKILL)
                return
        time.sleep(0.002)


def test_worker_killed_mid_pass(client):
    """The pass completes on the other worker, each block added once: the same answer."""
    X, Z = _points(4096, 2000, 32, seed=6)  # 16 row tiles of 256: 8 blocks of 2 tiles
    kw = dict(gamma=8.0, center=True)
    local = KernelSource.from_points(X, Z, "sne", **kw)
    rng = np.random.default_rng(7)
    V, P = rng.normal(size=(2000, 8)), rng.normal(size=(4096, 8))
    ref = local.sketch(V, P)
    with _distributed(X, Z, client, kw) as dist:
        _close(ref[0], dist.sketch(V, P)[0])  # warm: the workers have compiled the pass
        killed = {}
        # this pass's tasks only: a task of the warm-up pass can still show as processing
        prefix = f"ksvd-pass-{dist._token}-{dist._next_pass + 1}-"
        killer = threading.Thread(target=_kill_when_busy, args=(client, prefix, killed))
        killer.start()
        Y, W = dist.sketch(V, P)
        killer.join()
        assert killed.get("keys"), "no task of the pass was running when the worker was killed"
        assert set(killed["keys"]) <= set(dist.last_pass_keys)
        # the killed tasks ran again elsewhere (the scheduler's story shows two starts) ...
        story = client.story(*killed["keys"])
        starts = [t for t in story if t[2] == "processing"]
        assert len(starts) >= 2 * len(killed["keys"])
        # ... and their blocks were added once: a block counted twice or lost moves W by
        # that block's whole contribution, far beyond rounding
        _close(ref[0], Y)
        _close(ref[1], W)
        assert len(dist.last_pass_keys) == len(dist.block_bounds) == 8
        assert dist.n_rescatters == 0  # the other worker still held the points
        # every worker killed at once: the scattered points are gone from the cluster, the
        # client scatters them again and the pass gives the same answer
        client.wait_for_workers(2, timeout=60)
        _kill_all_and_wait(client)
        _close(ref[1], dist.rmatmat(P))
        assert dist.n_rescatters == 1


def _kill_all_and_wait(client):
    pids = client.run(os.getpid)
    for pid in pids.values():
        os.kill(pid, signal.SIGKILL)
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:  # the nannies restart them on new addresses
        alive = client.nthreads()
        if len(alive) == len(pids) and not set(alive) & set(pids):
            return
        time.sleep(0.05)
    raise TimeoutError("the workers were not restarted within 60 s")


def _distributed(X, Z, client, kw):
    local = KernelSource._from_arrays(X, Z, "sne", setup=False, **kw)
    return DistributedKernelSource(local, client, n_blocks=8)


def test_same_bits_on_one_and_two_workers(client, monkeypatch):
    """Blocks and reduction tree come from the shape: the cluster's size changes no bit.

    The client fetches one result per pass (the root of the workers' reduction tree), never
    one M x l partial per block.
    """
    X, Z = _points(150, 130, 5, seed=12)
    kw = dict(gamma=3.0, center=True, chunk_bytes=CHUNK)
    rng = np.random.default_rng(13)
    V, P = rng.normal(size=(130, 3)), rng.normal(size=(150, 2))
    fetched = []
    result = distributed.Future.result

    def counting_result(self, *args, **kwargs):
        fetched.append(self.key)
        return result(self, *args, **kwargs)

    monkeypatch.setattr(distributed.Future, "result", counting_result)
    answers = []
    with (
        distributed.LocalCluster(
            n_workers=1, threads_per_worker=1, processes=False, dashboard_address=":0"
        ) as lc,
        distributed.Client(lc) as one,
    ):
        for c in (client, one):
            fetched.clear()
            with KernelSource.from_points(X, Z, "sne", client=c, **kw) as dist:
                assert len(dist.block_bounds) == 10  # > FAN_IN: a tree of two levels
                assert fetched == dist.last_gathered and len(fetched) == 1  # set-up pass
                out = [dist.norm_bound(), dist.rmatmat(P), *dist.sketch(V, P)]
                assert len(fetched) == 3 and fetched[-1] == dist.last_gathered[0]
                assert "reduce2" in fetched[-1]  # the root, two levels above the blocks
                answers.append(out)
    for a, b in zip(*answers, strict=True):
        np.testing.assert_array_equal(a, b)


def _foreign_server(reply):
    """A plain TCP server on a loopback port that sends ``reply`` (or nothing) and holds on."""
    srv = socket.create_server(("127.0.0.1", 0))
    held = []

    def serve():
        while True:
            try:
                conn, _ = srv.accept()
            except OSError:
                return  # closed
            held.append(conn)
            if reply:
                conn.sendall(reply)

    threading.Thread(target=serve, daemon=True).start()
    return srv, held


def _connect_in_thread(address, timeout):
    """``connect(address)``'s exception, from a thread given 60 s: a hang fails the test."""
    out = {}

    def run():
        try:
            connect(address, timeout=timeout).close()
        except BaseException as exc:  # noqa: BLE001 - handed to the test
            out["exc"] = exc

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    thread.join(60)
    assert not thread.is_alive(), f"connect({address!r}) hung"
    return out.get("exc")


@pytest.mark.parametrize("reply", [b"HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nhello", b""])
def test_a_foreign_server_is_not_a_scheduler(reply):
    """Something other than a Dask scheduler listening: a garbage frame length made Dask
    allocate 3.07 EiB (MemoryError); a silent server made it hang."""
    srv, held = _foreign_server(reply)
    address = f"tcp://127.0.0.1:{srv.getsockname()[1]}"
    try:
        exc = _connect_in_thread(address, timeout=1)
    finally:
        srv.close()
        for conn in held:
            conn.close()
    assert isinstance(exc, ConnectionError), repr(exc)
    assert f"at {address!r}" in str(exc)
    assert ("frame length" in str(exc)) if reply else ("no Dask handshake within 1 s" in str(exc))


def test_malformed_addresses_name_the_address():
    for address in ("foo", "tcp://foo", "127.0.0.1:http"):
        with pytest.raises(
            ConnectionError,
            match=f"{address!r} is not a Dask scheduler address.*scheduler-host:8786",
        ):
            connect(address, timeout=1)
    with pytest.raises(TypeError, match="address must be a non-empty string"):
        connect("", timeout=1)


def test_scale_cli_names_a_malformed_scheduler(tmp_path, capsys):
    from ksvd_bench import cli

    with pytest.raises(SystemExit) as exc:
        cli.main(["scale", "--quick", "--scheduler", "foo", "--out", str(tmp_path / "out")])
    assert exc.value.code == 2
    err = capsys.readouterr().err
    assert "argument --scheduler: 'foo' is not a Dask scheduler address" in err
    assert "Traceback" not in err


def test_a_real_scheduler_passes_the_probe(client):
    """The probe reads a Dask handshake: a real scheduler on TCP connects as before."""
    address = client.scheduler.address
    assert address.startswith("tcp://127.0.0.1:")
    with connect(address, timeout=10) as other:
        assert other.status == "running" and len(other.nthreads()) == 2


def test_device_other_than_cpu_with_a_client_is_refused(client):
    X, Z = _points(20, 20, 2, seed=9)
    with pytest.raises(ValueError, match="device='cuda' runs in this process"):
        KernelSource.from_points(X, Z, "sne", gamma=1.0, client=client, device="cuda")
