"""Collectives: exact data on every rank against numpy references."""

import numpy as np
import pytest

import hcomm

DTYPES = [np.float16, np.float32, np.float64, np.int8, np.uint8, np.int32, np.uint32, np.int64, np.uint64]


def data(rank, n, dtype, shift=0):
    """Rank `rank`'s input: small values every element type holds exactly."""
    return ((np.arange(n) * 3 + rank * 5 + shift) % 11 + 1).astype(dtype)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("op", ["sum", "prod", "max", "min"])
def test_all_reduce_every_type_and_op(comm, dtype, op):
    w, r = comm.size(), comm.rank()
    n = 37
    every = [data(q, n, dtype) for q in range(w)]
    x = every[r].copy()
    comm.all_reduce(x, op=op)
    fold = {"sum": np.add, "prod": np.multiply, "max": np.maximum, "min": np.minimum}[op]
    want = every[0].copy()
    for y in every[1:]:
        want = fold(want, y).astype(dtype)
    np.testing.assert_array_equal(x, want)


@pytest.mark.parametrize("dtype", [np.float16, np.float32, np.float64])
def test_all_reduce_avg_is_sum_then_divide(comm, dtype):
    w, r = comm.size(), comm.rank()
    x = data(r, 16, dtype)
    comm.all_reduce(x, op="avg")
    total = sum(data(q, 16, dtype) for q in range(w)).astype(dtype)
    np.testing.assert_array_equal(x, (total / dtype(w)).astype(dtype))


def test_all_reduce_avg_of_integers_is_precondition(comm):
    with pytest.raises(hcomm.Precondition, match="floating-point"):
        comm.all_reduce(np.ones(4, dtype=np.int32), op="avg")


def test_all_reduce_in_place_on_2d_and_async(comm):
    w, r = comm.size(), comm.rank()
    x = np.full((3, 5), r + 1, dtype=np.float32)
    req = comm.all_reduce(x, async_op=True)
    assert isinstance(req, hcomm.Request)
    assert req.wait(timeout=20) is x
    np.testing.assert_array_equal(x, np.full((3, 5), w * (w + 1) / 2, dtype=np.float32))
    assert req.test()


def test_all_gather_concatenates_along_dim0(comm):
    w, r = comm.size(), comm.rank()
    x = np.arange(6, dtype=np.int64).reshape(2, 3) + 100 * r
    got = comm.all_gather(x)
    assert got.shape == (2 * w, 3) and got.dtype == np.int64
    np.testing.assert_array_equal(got, np.concatenate([np.arange(6).reshape(2, 3) + 100 * q for q in range(w)]))
    req = comm.all_gather(x, async_op=True)
    np.testing.assert_array_equal(req.wait(), got)


def test_reduce_scatter_keeps_this_ranks_block(comm):
    w, r = comm.size(), comm.rank()
    every = [data(q, 4 * w * 2, np.float64).reshape(2 * w, 4) for q in range(w)]
    got = comm.reduce_scatter(every[r])
    total = sum(every)
    np.testing.assert_array_equal(got, total[2 * r : 2 * r + 2])
    got = comm.reduce_scatter(every[r], op="max", async_op=True).wait()
    np.testing.assert_array_equal(got, np.maximum.reduce(every)[2 * r : 2 * r + 2])


def test_all_to_all_and_v(comm):
    w, r = comm.size(), comm.rank()
    x = np.array([[100 * r + j, -j] for j in range(w)], dtype=np.int32)
    got = comm.all_to_all(x)
    np.testing.assert_array_equal(got, np.array([[100 * q + r, -r] for q in range(w)], dtype=np.int32))
    # rank q sends (q + j) % 3 rows to rank j
    counts = [(r + j) % 3 for j in range(w)]
    rows = []
    for j, n in enumerate(counts):
        rows += [[r, j, k] for k in range(n)]
    x = np.array(rows, dtype=np.float32).reshape(-1, 3)
    got = comm.all_to_all_v(x, counts)
    want = [[q, r, k] for q in range(w) for k in range((q + r) % 3)]
    np.testing.assert_array_equal(got, np.array(want, dtype=np.float32).reshape(-1, 3))


def test_broadcast_and_reduce(comm):
    w, r = comm.size(), comm.rank()
    root = w - 1
    x = np.full(9, r, dtype=np.uint8)
    comm.broadcast(x, root)
    np.testing.assert_array_equal(x, np.full(9, root, dtype=np.uint8))
    y = data(r, 10, np.float32)
    mine = y.copy()
    comm.reduce(y, root=0, op="sum")
    if r == 0:
        np.testing.assert_array_equal(y, sum(data(q, 10, np.float32) for q in range(w)))
    else:
        np.testing.assert_array_equal(y, mine)


def test_barrier_split_subgroup(comm):
    w, r = comm.size(), comm.rank()
    comm.barrier()
    half = comm.split(r % 2, key=-r)
    members = [q for q in range(w) if q % 2 == r % 2]
    assert half.size() == len(members)
    assert half.rank() == sorted(members, key=lambda q: -q).index(r)
    assert comm.split(None) is None
    sub = comm.subgroup([0, w - 1])
    if r in (0, w - 1):
        x = np.array([r], dtype=np.int64)
        sub.all_reduce(x)
        assert x[0] == w - 1
    else:
        assert sub is None


def test_mismatched_kinds_fail_on_every_rank(comm):
    x = np.zeros(4, dtype=np.float32)
    with pytest.raises(hcomm.Mismatch):
        if comm.rank() == 0:
            comm.all_reduce(x)
        else:
            comm.broadcast(x, 0)


def test_mismatched_lengths_fail_on_every_rank(comm):
    x = np.zeros(4 + comm.rank(), dtype=np.float32)
    with pytest.raises((hcomm.Mismatch, hcomm.BufferLength)):
        comm.all_reduce(x)


def test_bad_arguments(comm):
    w = comm.size()
    with pytest.raises(hcomm.Precondition, match=f"rank {w} is out of range"):
        comm.broadcast(np.zeros(2), w)
    with pytest.raises(hcomm.Precondition, match=r"shape \[4, 4\], strides \[8, 32\]"):
        comm.all_reduce(np.zeros((4, 4)).T)
    with pytest.raises(ValueError, match="not a reduction"):
        comm.all_reduce(np.zeros(2), op="mean")
    with pytest.raises(hcomm.Precondition, match="not supported"):
        comm.all_reduce(np.zeros(2, dtype=np.complex64))
    with pytest.raises(hcomm.Precondition, match="read-only"):
        ro = np.zeros(2)
        ro.flags.writeable = False
        comm.all_reduce(ro)
    with pytest.raises(hcomm.Precondition, match="multiple"):
        comm.reduce_scatter(np.zeros(w + 1))
    with pytest.raises(hcomm.Precondition, match="numpy array"):
        comm.all_reduce([1.0, 2.0])
