"""The "hcomm" torch.distributed backend: every process-group op gives what
gloo gives for the same inputs (integer-valued data, so sums are exact in any
order); DistributedDataParallel trains to gloo's losses."""

import pytest
import torch
import torch.distributed as dist

import hcomm

DTYPES = [torch.float32, torch.float64, torch.int32, torch.int64, torch.bfloat16, torch.float16]


def both(groups, f):
    """``f(group)`` on the hcomm group, then on the gloo group."""
    hc, gloo = groups
    return f(hc), f(gloo)


def data(shape, dtype, salt=0):
    r = dist.get_rank()
    n = 1
    for s in shape:
        n *= s
    return ((torch.arange(n) * 3 + 7 * r + salt) % 23 - 5).reshape(shape).to(dtype)


def test_backend_is_registered(groups):
    assert dist.get_backend(groups[0]) == "hcomm"
    assert dist.get_rank() == hcomm.get_rank() and dist.get_world_size() == hcomm.get_world_size()


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("op", [dist.ReduceOp.SUM, dist.ReduceOp.MAX, dist.ReduceOp.MIN, dist.ReduceOp.PRODUCT])
def test_all_reduce_matches_gloo(groups, dtype, op):
    if op == dist.ReduceOp.PRODUCT and dtype in (torch.bfloat16, torch.float16):
        pytest.skip("a product of 4 values in 16 bits rounds differently in any order")

    def run(g):
        t = data((5, 3), dtype) % 4 + 1 if op == dist.ReduceOp.PRODUCT else data((5, 3), dtype)
        dist.all_reduce(t, op=op, group=g)
        return t

    a, b = both(groups, run)
    assert a.dtype == dtype
    torch.testing.assert_close(a, b, rtol=0, atol=0)


def test_all_reduce_async_and_avg(groups):
    hc, _ = groups
    w = dist.get_world_size()
    t = data((1000,), torch.float32)
    expected = sum(((torch.arange(1000) * 3 + 7 * q) % 23 - 5).float() for q in range(w))
    work = dist.all_reduce(t, group=hc, async_op=True)
    work.wait()
    torch.testing.assert_close(t, expected, rtol=0, atol=0)
    torch.testing.assert_close(work.get_future().value()[0], expected, rtol=0, atol=0)
    u = data((1000,), torch.float64)
    dist.all_reduce(u, op=dist.ReduceOp.AVG, group=hc)
    torch.testing.assert_close(u, expected.double() / w)


@pytest.mark.parametrize("dtype", DTYPES)
def test_all_gather_matches_gloo(groups, dtype):
    w = dist.get_world_size()

    def run(g):
        out = [torch.zeros(4, 2, dtype=dtype) for _ in range(w)]
        dist.all_gather(out, data((4, 2), dtype), group=g)
        single = torch.zeros(4 * w, 2, dtype=dtype)
        dist.all_gather_into_tensor(single, data((4, 2), dtype, salt=1), group=g)
        return torch.stack(out), single

    (a1, a2), (b1, b2) = both(groups, run)
    torch.testing.assert_close(a1, b1, rtol=0, atol=0)
    torch.testing.assert_close(a2, b2, rtol=0, atol=0)


def test_all_gather_into_tensor_async(groups):
    hc, _ = groups
    w = dist.get_world_size()
    out = torch.zeros(3 * w, dtype=torch.int64)
    work = dist.all_gather_into_tensor(out, torch.full((3,), dist.get_rank(), dtype=torch.int64), group=hc,
                                       async_op=True)
    work.wait()
    assert out.tolist() == [q for q in range(w) for _ in range(3)]


@pytest.mark.parametrize("dtype", [torch.float32, torch.int64, torch.bfloat16])
def test_reduce_scatter_matches_gloo(groups, dtype):
    w = dist.get_world_size()

    def run(g):
        out = torch.zeros(3, dtype=dtype)
        dist.reduce_scatter(out, [data((3,), dtype, salt=j) for j in range(w)], group=g)
        single = torch.zeros(2, 3, dtype=dtype)
        dist.reduce_scatter_tensor(single, data((2 * w, 3), dtype), op=dist.ReduceOp.MAX, group=g)
        return out, single

    (a1, a2), (b1, b2) = both(groups, run)
    torch.testing.assert_close(a1, b1, rtol=0, atol=0)
    torch.testing.assert_close(a2, b2, rtol=0, atol=0)


def test_all_to_all_matches_gloo(groups):
    w, r = dist.get_world_size(), dist.get_rank()
    # rank r sends j + 1 rows to rank j, so rank r receives r + 1 rows from each.
    in_splits = [j + 1 for j in range(w)]
    out_splits = [r + 1] * w

    def run(g):
        equal = torch.zeros(2 * w, 3, dtype=torch.float32)
        dist.all_to_all_single(equal, data((2 * w, 3), torch.float32), group=g)
        uneven = torch.zeros(sum(out_splits), 2, dtype=torch.int32)
        dist.all_to_all_single(uneven, data((sum(in_splits), 2), torch.int32), out_splits, in_splits, group=g)
        return equal, uneven

    a, b = both(groups, run)
    for x, y in zip(a, b):
        torch.testing.assert_close(x, y, rtol=0, atol=0)
    # gloo has no list all_to_all: against the serial reference. Rank q sends
    # data((j + 1,), salt=j) to rank j.
    outs = [torch.zeros(r + 1, dtype=torch.int64) for _ in range(w)]
    dist.all_to_all(outs, [data((j + 1,), torch.int64, salt=j) for j in range(w)], group=groups[0])
    for q in range(w):
        assert outs[q].tolist() == ((torch.arange(r + 1) * 3 + 7 * q + r) % 23 - 5).tolist()


def test_broadcast_and_reduce_match_gloo(groups):
    w = dist.get_world_size()

    def run(g):
        t = data((6,), torch.float32)
        dist.broadcast(t, src=w - 1, group=g)
        u = data((6,), torch.int64)
        dist.reduce(u, dst=0, group=g)
        return t, u

    (a1, a2), (b1, b2) = both(groups, run)
    torch.testing.assert_close(a1, b1, rtol=0, atol=0)
    if dist.get_rank() == 0:
        torch.testing.assert_close(a2, b2, rtol=0, atol=0)


def test_send_recv_ring_and_barrier(groups):
    hc, _ = groups
    w, r = dist.get_world_size(), dist.get_rank()
    if w < 2:
        pytest.skip("needs 2 ranks")
    got = torch.zeros(4, dtype=torch.float64)
    reqs = [dist.isend(torch.full((4,), float(r), dtype=torch.float64), dst=(r + 1) % w, group=hc),
            dist.irecv(got, src=(r - 1) % w, group=hc)]
    for q in reqs:
        q.wait()
    assert got.tolist() == [float((r - 1) % w)] * 4
    if r == 0:
        dist.send(torch.arange(3), dst=w - 1, group=hc)
    elif r == w - 1:
        t = torch.zeros(3, dtype=torch.int64)
        dist.recv(t, src=0, group=hc)
        assert t.tolist() == [0, 1, 2]
    dist.barrier(group=hc)


def train(group, steps=5):
    """Losses of a small model trained with DDP over ``group`` (same seed, same data)."""
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.Tanh(), torch.nn.Linear(16, 1))
    ddp = torch.nn.parallel.DistributedDataParallel(model, process_group=group)
    opt = torch.optim.SGD(ddp.parameters(), lr=0.1)
    g = torch.Generator().manual_seed(100 + dist.get_rank())
    x = torch.randn(16, 8, generator=g)
    y = x.sum(dim=1, keepdim=True)
    losses = []
    for _ in range(steps):
        opt.zero_grad()
        loss = torch.nn.functional.mse_loss(ddp(x), y)
        loss.backward()
        opt.step()
        losses.append(loss.item())
    return losses, [p.detach().clone() for p in model.parameters()]


def test_ddp_trains_to_gloos_losses(groups):
    (la, pa), (lb, pb) = both(groups, train)
    assert len(la) == 5
    torch.testing.assert_close(torch.tensor(la), torch.tensor(lb), rtol=1e-6, atol=1e-7)
    for x, y in zip(pa, pb):
        torch.testing.assert_close(x, y, rtol=1e-6, atol=1e-7)
    assert la[-1] < la[0]


def test_subgroup_of_the_backend(groups):
    w, r = dist.get_world_size(), dist.get_rank()
    evens = list(range(0, w, 2))
    g = dist.new_group(evens, backend="hcomm")
    if r in evens:
        t = torch.tensor([r], dtype=torch.int64)
        dist.all_reduce(t, group=g)
        assert t.item() == sum(evens)


def test_mismatched_lengths_fail_on_every_rank(groups):
    # On a group of its own: a failed collective may leave a communicator unusable.
    g = dist.new_group(backend="hcomm")
    t = torch.zeros(4 + dist.get_rank(), dtype=torch.float32)
    if dist.get_world_size() < 2:
        pytest.skip("needs 2 ranks")
    with pytest.raises((hcomm.Mismatch, hcomm.BufferLength)):
        dist.all_reduce(t, group=g)
