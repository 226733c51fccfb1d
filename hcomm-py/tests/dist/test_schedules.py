"""hcomm.schedules: every built-in schedule, exact data on every rank."""

import numpy as np
import pytest

import hcomm
import hcomm.schedules as S


def test_every_schedule_is_bound():
    assert sorted(S.__all__) == sorted(hcomm._native.schedule_names())
    assert len(S.__all__) == 20


@pytest.mark.parametrize("name", ["ring_all_gather", "recursive_doubling_all_gather", "bruck_all_gather",
                                  "direct_all_gather", "one_shot_all_gather"])
def test_all_gathers(comm, name):
    w, r = comm.size(), comm.rank()
    if name == "recursive_doubling_all_gather" and w & (w - 1):
        pytest.skip("power-of-two world sizes only")
    x = np.arange(3, dtype=np.int32) + 10 * r
    out = np.zeros(3 * w, dtype=np.int32)
    getattr(S, name)(comm, x, out)
    np.testing.assert_array_equal(out, np.concatenate([np.arange(3) + 10 * q for q in range(w)]))


@pytest.mark.parametrize("name", ["pairwise_all_to_all", "one_shot_all_to_all"])
def test_all_to_alls(comm, name):
    w, r = comm.size(), comm.rank()
    x = np.array([100 * r + j for j in range(w)], dtype=np.int64)
    out = np.zeros(w, dtype=np.int64)
    getattr(S, name)(comm, x, out)
    np.testing.assert_array_equal(out, [100 * q + r for q in range(w)])


@pytest.mark.parametrize("name", ["one_shot_all_reduce", "direct_all_reduce"])
def test_all_reduces_out_of_place(comm, name):
    w, r = comm.size(), comm.rank()
    x = np.arange(2 * w, dtype=np.float64) + r
    out = np.zeros_like(x)
    getattr(S, name)(comm, x, out, op="max")
    np.testing.assert_array_equal(out, np.arange(2 * w) + w - 1)


@pytest.mark.parametrize("name", ["ring_all_reduce", "halving_doubling_all_reduce", "recursive_doubling_all_reduce"])
def test_all_reduces_in_place(comm, name):
    w, r = comm.size(), comm.rank()
    if name == "halving_doubling_all_reduce" and w & (w - 1):
        pytest.skip("the buffer length must be n * 2^floor(log2(world))")
    buf = np.arange(4 * w, dtype=np.float32) * (r + 1)
    getattr(S, name)(comm, buf)
    np.testing.assert_array_equal(buf, np.arange(4 * w, dtype=np.float32) * (w * (w + 1) // 2))


@pytest.mark.parametrize("name", ["one_shot_reduce_scatter", "direct_reduce_scatter",
                                  "recursive_halving_reduce_scatter", "ring_reduce_scatter"])
def test_reduce_scatters(comm, name):
    w, r = comm.size(), comm.rank()
    if name == "recursive_halving_reduce_scatter" and w & (w - 1):
        pytest.skip("power-of-two world sizes only")
    x = np.arange(2 * w, dtype=np.int64) + r
    out = np.zeros(2, dtype=np.int64)
    getattr(S, name)(comm, x, out)
    np.testing.assert_array_equal(out, (np.arange(2 * w) * w + w * (w - 1) // 2)[2 * r : 2 * r + 2])


@pytest.mark.parametrize("name", ["binomial_broadcast", "one_shot_broadcast", "scatter_all_gather_broadcast"])
def test_broadcasts(comm, name):
    w, r = comm.size(), comm.rank()
    buf = np.full(2 * w, r, dtype=np.uint8)
    getattr(S, name)(comm, buf, w - 1)
    np.testing.assert_array_equal(buf, np.full(2 * w, w - 1))


def test_binomial_reduce_and_length_error(comm):
    w, r = comm.size(), comm.rank()
    x = np.full(5, r + 1, dtype=np.int32)
    out = np.zeros(5, dtype=np.int32)
    S.binomial_reduce(comm, x, out, root=0)
    np.testing.assert_array_equal(out, np.full(5, w * (w + 1) // 2) if r == 0 else np.zeros(5))
    with pytest.raises((hcomm.BufferLength, hcomm.Mismatch)):
        S.ring_all_gather(comm, np.zeros(3, dtype=np.int32), np.zeros(3 * w + 1, dtype=np.int32))
