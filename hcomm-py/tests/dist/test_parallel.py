"""Model parallelism: the context's layout, tp and pp, exact data."""

import numpy as np
import pytest

import hcomm
from hcomm import pp, tp


def layout(w):
    """(tp, pp, dp) for a world of w ranks."""
    return {1: (1, 1, 1), 2: (2, 1, 1), 3: (1, 3, 1), 4: (2, 2, 1)}.get(w, (1, w, 1))


def test_context_layout_is_megatrons(world):
    w, r = world.size(), world.rank()
    t, p, d = layout(w)
    ctx = hcomm.init_context(tp_size=t, pp_size=p, dp_size=d)
    assert hcomm.get_context() is ctx
    assert ctx.world.size() == w
    assert (ctx.tp.size(), ctx.pp.size(), ctx.dp.size(), ctx.ep.size()) == (t, p, d, 1)
    tp_i, pp_i = r % t, r // (t * d)
    assert ctx.tp.rank() == tp_i and ctx.pp.rank() == pp_i
    assert ctx.is_first_stage == (pp_i == 0) and ctx.is_last_stage == (pp_i == p - 1)


def test_context_sizes_that_do_not_fit(world):
    w = world.size()
    with pytest.raises(hcomm.Precondition, match=str(w + 1)):
        hcomm.init_context(tp_size=w + 1, pp_size=1, dp_size=1)


def test_tensor_parallel_ops(world):
    ctx = hcomm.init_context(*layout(world.size()))
    g = ctx.tp
    n, i = g.size(), g.rank()
    x = np.arange(6, dtype=np.float32).reshape(2, 3) + 10 * i
    assert tp.all_reduce(x) is x
    np.testing.assert_array_equal(x, sum(np.arange(6, dtype=np.float32).reshape(2, 3) + 10 * q for q in range(n)))
    y = np.arange(6, dtype=np.int64).reshape(2, 3) + 100 * i
    got = tp.all_gather(y, dim=-1)
    np.testing.assert_array_equal(got, np.concatenate([np.arange(6).reshape(2, 3) + 100 * q for q in range(n)], axis=1))
    z = np.arange(4 * n, dtype=np.float64).reshape(2, 2 * n) + i
    total = sum(np.arange(4 * n, dtype=np.float64).reshape(2, 2 * n) + q for q in range(n))
    np.testing.assert_array_equal(tp.reduce_scatter(z, dim=1), total[:, 2 * i : 2 * i + 2])
    np.testing.assert_array_equal(tp.split(z, dim=-1), z[:, 2 * i : 2 * i + 2])
    with pytest.raises(hcomm.Precondition, match="dimension 5"):
        tp.all_gather(y, dim=5)


def test_tensor_parallel_group_blocks(world):
    w, r = world.size(), world.rank()
    size = 2 if w % 2 == 0 else 1
    g = hcomm.init_tensor_parallel_group(tp_size=size, tp_rank=r % size)
    assert g.size() == size and g.rank() == r % size
    x = np.array([r], dtype=np.int32)
    tp.all_reduce(x, group=g)
    assert x[0] == sum(range(r - r % size, r - r % size + size))
    with pytest.raises(hcomm.Precondition, match="tp_rank"):
        hcomm.init_tensor_parallel_group(tp_size=size, tp_rank=(r + 1) % size + size)


def test_pipeline_transfers(world):
    ctx = hcomm.init_context(*layout(world.size()))
    g = ctx.pp
    s, n = g.rank(), g.size()
    if n < 2:
        pytest.skip("one stage")
    # send/recv: shape and dtype travel with the data.
    if s == 0:
        pp.send(np.arange(12, dtype=np.float16).reshape(3, 4), dst=1, tag=5)
    elif s == 1:
        got = pp.recv(src=0, tag=5)
        assert got.dtype == np.float16 and got.shape == (3, 4)
        np.testing.assert_array_equal(got, np.arange(12).reshape(3, 4))
    # forward along the pipeline, then the paired form back.
    act = np.full(4, float(s), dtype=np.float32)
    if not ctx.is_first_stage:
        pp.recv_forward(act)
        assert act[0] == s - 1
    if not ctx.is_last_stage:
        pp.send_forward(np.full(4, float(s), dtype=np.float32))
    grad = np.zeros(4, dtype=np.float32)
    if 0 < s < n - 1 or n == 2:
        if s == 0:
            pp.send_forward_recv_backward(np.full(4, 7.0, dtype=np.float32), grad)
            assert grad[0] == 9.0
        elif s == n - 1:
            a = np.zeros(4, dtype=np.float32)
            pp.send_backward_recv_forward(np.full(4, 9.0, dtype=np.float32), a)
            assert a[0] == 7.0
    if ctx.is_first_stage:
        with pytest.raises(hcomm.Precondition, match="previous"):
            pp.send_backward(grad)


def test_group_none_without_context_is_precondition(monkeypatch):
    monkeypatch.setattr(hcomm, "_context", None)
    with pytest.raises(hcomm.Precondition, match="init_context"):
        tp.all_reduce(np.zeros(2))
