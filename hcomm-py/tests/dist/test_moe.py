"""Expert parallelism: dispatch/combine and all_to_all against serial references."""

import numpy as np
import pytest

import hcomm
from hcomm import moe


def tokens_of(rank, n=5, h=3):
    return (np.arange(n * h, dtype=np.float32).reshape(n, h) + 100 * rank)


def ids_of(rank, n, experts):
    return np.array([(rank * 7 + t * 3) % experts for t in range(n)], dtype=np.int64)


def test_all_to_all_forward_and_back(world):
    w, r = world.size(), world.rank()
    experts = 2 * w
    x, ids = tokens_of(r), ids_of(r, 5, experts)
    routed, routing = moe.all_to_all(x, ids, num_experts=experts, group=world)
    # Serial reference: rows for my experts 2r, 2r+1, by expert, then source rank, then order.
    want = [tokens_of(q)[t] for e in (2 * r, 2 * r + 1) for q in range(w)
            for t in range(5) if ids_of(q, 5, experts)[t] == e]
    np.testing.assert_array_equal(routed, np.array(want, dtype=np.float32).reshape(-1, 3))
    assert sum(routing.tokens_per_expert) == len(want)
    back = moe.all_to_all(routed * 2, routing, num_experts=experts, group=world)
    np.testing.assert_array_equal(back, x * 2)


def test_dispatch_combine_top2(world):
    w, r = world.size(), world.rank()
    experts = w
    x = tokens_of(r, n=4)
    topk = np.array([[t % experts, (t + 1) % experts] for t in range(4)], dtype=np.int64)
    weights = np.array([[0.25, 0.75]] * 4, dtype=np.float32)
    d = moe.dispatch(x, topk, weights, experts, group=world)
    assert d.tokens.shape[1] == 3 and len(d.tokens_per_expert) == 1
    out = moe.combine(d.tokens, d, group=world)
    np.testing.assert_array_equal(out, x)


def test_bad_counts_and_ids(world):
    w = world.size()
    x = tokens_of(0, n=2)
    with pytest.raises(hcomm.Precondition, match="expert 0"):
        moe.all_to_all(x, np.array([0, 0]), num_experts=w, tokens_per_expert=[1] + [0] * (w - 1) if w > 1 else [5],
                       group=world)
    with pytest.raises(hcomm.Precondition):
        moe.all_to_all(x, np.array([0, w]) if world.rank() == 0 else np.array([0, 0]), num_experts=w, group=world)
