"""Point to point: blocking, requests, batches, module-level functions, errors."""

import gc

import numpy as np
import pytest

import hcomm


def test_module_level_ring_with_requests(world):
    w, r = hcomm.get_world_size(), hcomm.get_rank()
    assert (w, r) == (world.size(), world.rank())
    assert hcomm.init() is world
    got = np.zeros((2, 3), dtype=np.float32)
    rr = hcomm.irecv(got, (r - 1) % w, tag=7)
    sr = hcomm.isend(np.full((2, 3), r, dtype=np.float32), (r + 1) % w, tag=7)
    hcomm.wait_all([sr, rr])
    np.testing.assert_array_equal(got, np.full((2, 3), (r - 1) % w, dtype=np.float32))


def test_many_requests_in_flight_around_a_collective(comm):
    # Eight receives and eight sends pending on one communicator at once
    # (receives posted in the reverse tag order of the sends), a blocking
    # all_reduce while they are in flight, then waited last to first.
    w, r = comm.size(), comm.rank()
    n = 8
    got = [np.zeros(4, dtype=np.int64) for _ in range(n)]
    recvs = [comm.irecv(got[t], (r - 1) % w, tag=t) for t in reversed(range(n))]
    sends = [comm.isend(np.arange(4, dtype=np.int64) + 100 * r + t, (r + 1) % w, tag=t) for t in range(n)]
    total = np.full(3, r + 1, dtype=np.int64)
    comm.all_reduce(total)
    np.testing.assert_array_equal(total, np.full(3, w * (w + 1) // 2))
    for req in reversed(recvs + sends):
        req.wait(timeout=20)
    src = (r - 1) % w
    for t in range(n):
        np.testing.assert_array_equal(got[t], np.arange(4) + 100 * src + t)


def test_blocking_pairs(comm):
    w, r = comm.size(), comm.rank()
    if w % 2:
        pytest.skip("pairs need an even number of ranks")
    peer = r ^ 1
    mine = np.arange(5, dtype=np.int64) * (r + 1)
    theirs = np.zeros(5, dtype=np.int64)
    if r % 2 == 0:
        comm.send(mine, peer)
        comm.recv(theirs, peer)
    else:
        comm.recv(theirs, peer)
        comm.send(mine, peer)
    np.testing.assert_array_equal(theirs, np.arange(5) * (peer + 1))


def test_batch_exchange_with_every_rank(comm):
    w, r = comm.size(), comm.rank()
    outs = [np.zeros(3, dtype=np.float64) for _ in range(w)]
    ops = []
    for q in range(w):
        ops.append(hcomm.P2POp("isend", np.full(3, 10 * r + q, dtype=np.float64), q, tag=1))
        ops.append(hcomm.P2POp("irecv", outs[q], q, tag=1))
    reqs = comm.batch_isend_irecv(ops)
    assert len(reqs) == 2 * w
    hcomm.wait_all(reqs)
    for q in range(w):
        np.testing.assert_array_equal(outs[q], np.full(3, 10 * q + r))


def test_request_dropped_early_keeps_its_array(comm):
    w, r = comm.size(), comm.rank()
    # The send's request and array are dropped at once: the operation keeps
    # the array alive until it completed.
    comm.isend(np.full(1000, r, dtype=np.int32), (r + 1) % w)
    gc.collect()
    got = np.zeros(1000, dtype=np.int32)
    comm.recv(got, (r - 1) % w) if w > 1 else comm.irecv(got, r).wait()
    np.testing.assert_array_equal(got, np.full(1000, (r - 1) % w))


def test_wait_timeout_then_completion(comm):
    w, r = comm.size(), comm.rank()
    got = np.zeros(2, dtype=np.uint32)
    req = comm.irecv(got, (r - 1) % w, tag=3)
    with pytest.raises(hcomm.Timeout):
        req.wait(timeout=0.05)
    assert not req.test()
    # A pending receive's array cannot be lent again.
    with pytest.raises(hcomm.Precondition, match="pending"):
        comm.all_reduce(got)
    comm.barrier()
    s = comm.isend(np.array([r, 1], dtype=np.uint32), (r + 1) % w, tag=3)
    req.wait(timeout=20)
    s.wait()
    np.testing.assert_array_equal(got, [(r - 1) % w, 1])


def test_length_and_type_mismatch_fail_on_both_sides(comm):
    w, r = comm.size(), comm.rank()
    if w % 2:
        pytest.skip("pairs need an even number of ranks")
    peer = r ^ 1
    with pytest.raises((hcomm.Mismatch, hcomm.BufferLength)):
        if r % 2 == 0:
            comm.send(np.zeros(4, dtype=np.float32), peer)
        else:
            comm.recv(np.zeros(3, dtype=np.float32), peer)


def test_p2p_argument_errors(comm):
    w = comm.size()
    with pytest.raises(hcomm.Precondition, match=f"rank {w + 2} is out of range"):
        comm.isend(np.zeros(2), w + 2)
    with pytest.raises(hcomm.Precondition, match="rank -1 is out of range"):
        hcomm.send(np.zeros(2), -1)
    with pytest.raises(hcomm.Precondition, match="irecv"):
        hcomm.P2POp("bogus", np.zeros(1), 0)
    x = np.zeros(4)
    with pytest.raises(hcomm.Precondition, match="another argument"):
        comm.batch_isend_irecv([hcomm.P2POp("irecv", x, 0), hcomm.P2POp("irecv", x[:2], 0)])
