"""The product documents' Python examples, run as written where the API
allows and corrected where their code is wrong (each correction is said at
its test), on numpy arrays in place of NPU tensors, every rank checking the
exact data it ends with against a serial reference. Sizes scale with the
job: the documents' 4-way tensor parallelism and 8 experts fit 2 and 4
ranks."""

import numpy as np
import pytest

import hcomm
from hcomm import moe, pp, tp

PP_TAG_FORWARD = 1
PP_TAG_BACKWARD = 2


def context_for(w):
    """The documents' init_context(tp_size=4, pp_size=2, dp_size=4) scaled to w ranks."""
    return {2: dict(tp_size=1, pp_size=2, dp_size=1), 4: dict(tp_size=2, pp_size=2, dp_size=1)}.get(
        w, dict(tp_size=1, pp_size=w, dp_size=1))


def test_tensor_parallel_activation_sync(world):
    # The document passes tp_rank=0 on every rank; tp_rank must be this
    # rank's index in its group (the spec), so it is left out here (None:
    # taken from the rank), and tp_rank=0 on another index is refused.
    w, r = world.size(), world.rank()
    size = min(4, w)
    tp_group = hcomm.init_tensor_parallel_group(tp_size=size)
    i, base = r % size, r - r % size
    attention_output = np.arange(8, dtype=np.float32).reshape(2, 4) * (r + 1)
    synced_output = tp.all_reduce(attention_output, group=tp_group)
    assert synced_output is attention_output
    want = np.arange(8, dtype=np.float32).reshape(2, 4) * sum(q + 1 for q in range(base, base + size))
    np.testing.assert_array_equal(synced_output, want)
    # Column-parallel MLP: each rank holds 1/size of the hidden dimension.
    column_output = np.full((2, 3), r, dtype=np.float32)
    full_output = tp.all_gather(column_output, dim=-1, group=tp_group)
    np.testing.assert_array_equal(
        full_output, np.concatenate([np.full((2, 3), q, dtype=np.float32) for q in range(base, base + size)], axis=1))
    if i != 0:
        with pytest.raises(hcomm.Precondition, match="tp_rank"):
            hcomm.init_tensor_parallel_group(tp_rank=0, tp_size=size)


def test_pipeline_send_recv_between_stages(world):
    # As written, with `output.grad` replaced by a gradient array (numpy has
    # no autograd): stage 0 sends its activation forward and receives the
    # gradient back; stage 1 receives a new array (shape and dtype travel
    # with the data) and sends the gradient back.
    ctx = hcomm.init_context(**context_for(world.size()))
    pp_rank = ctx.pp.rank()
    tp_rank = ctx.tp.rank()
    if pp_rank == 0:
        output = np.arange(12, dtype=np.float16).reshape(3, 4) + tp_rank
        pp.send(output, dst=1, tag=PP_TAG_FORWARD)
        grad = pp.recv(src=1, tag=PP_TAG_BACKWARD)
        assert grad.dtype == np.float32 and grad.shape == (3, 4)
        np.testing.assert_array_equal(grad, 2 * (np.arange(12, dtype=np.float32).reshape(3, 4) + tp_rank))
    if pp_rank == 1:
        input_data = pp.recv(src=0, tag=PP_TAG_FORWARD)
        assert input_data.dtype == np.float16 and input_data.shape == (3, 4)
        np.testing.assert_array_equal(input_data, np.arange(12).reshape(3, 4) + tp_rank)
        grad = input_data.astype(np.float32) * 2
        pp.send(grad, dst=0, tag=PP_TAG_BACKWARD)


def test_moe_token_routing_forward_and_reverse(world):
    # Corrected: the document's tokens_per_expert ([batch // num_experts] *
    # num_experts) must be the true count of this rank's tokens per expert,
    # so the expert ids here give every expert exactly that many; and the
    # reverse call takes the Routing the forward call returned, not a
    # "reverse routing table" the document never builds.
    w, r = world.size(), world.rank()
    num_experts, batch, hidden = 8, 16, 4
    tokens_per_npu = [batch // num_experts] * num_experts
    rng = np.random.default_rng(r)
    expert_ids = rng.permutation(np.arange(batch) % num_experts)
    local_tokens = (np.arange(batch * hidden, dtype=np.float32).reshape(batch, hidden) + 1000 * r)
    routed_tokens, routing = moe.all_to_all(local_tokens, expert_ids, num_experts=num_experts,
                                            tokens_per_expert=tokens_per_npu, group=world)
    per_rank = num_experts // w
    mine = range(r * per_rank, (r + 1) * per_rank)
    # Serial reference: for each of my experts, each source rank's tokens in order.
    ids_of = [np.random.default_rng(q).permutation(np.arange(batch) % num_experts) for q in range(w)]
    want = [np.arange(batch * hidden, dtype=np.float32).reshape(batch, hidden)[t] + 1000 * q
            for e in mine for q in range(w) for t in range(batch) if ids_of[q][t] == e]
    np.testing.assert_array_equal(routed_tokens, np.array(want, dtype=np.float32))
    assert list(routing.tokens_per_expert) == [w * batch // num_experts] * per_rank
    # Expert e scales its tokens by e + 1.
    scale = np.repeat([e + 1 for e in mine], routing.tokens_per_expert).astype(np.float32)
    expert_output = routed_tokens * scale[:, None]
    final_output = moe.all_to_all(expert_output, routing, num_experts=num_experts, group=world)
    np.testing.assert_array_equal(final_output, local_tokens * (expert_ids + 1).astype(np.float32)[:, None])


def test_init_context_and_data_parallel_gradients(world):
    # The document's layout (tp 4, pp 2, dp 4: 32 NPUs, backend 'hccl')
    # scaled to this job on the host backend; the gradients are averaged
    # by hand over ctx.dp as the training loop does.
    w, r = world.size(), world.rank()
    layout = {2: (1, 1, 2), 4: (2, 1, 2)}.get(w, (1, 1, w))
    ctx = hcomm.init_context(tp_size=layout[0], pp_size=layout[1], dp_size=layout[2])
    assert (ctx.tp.size(), ctx.pp.size(), ctx.dp.size()) == layout
    grads = np.full(5, float(r), dtype=np.float64)
    ctx.dp.all_reduce(grads)
    # Megatron's layout: the dp group of rank r holds r % tp + k * tp.
    t = layout[0]
    members = [r % t + k * t for k in range(layout[2])]
    np.testing.assert_array_equal(grads, np.full(5, float(sum(members))))


def test_pair_exchange(world):
    # Corrected: the document pairs `send_rank`/`recv_rank` so that odd
    # ranks send to themselves and even ranks receive from themselves, and
    # both sides of a pair start with a blocking send. Here each rank's
    # partner is rank ^ 1, and the even rank sends first while the odd one
    # receives first, so every blocking call has its peer.
    r, w = hcomm.get_rank(), hcomm.get_world_size()
    assert w % 2 == 0
    partner = r ^ 1
    hidden_size, batch_size = 64, 8
    send_tensor = (np.arange(batch_size * hidden_size) % 97 + r).astype(np.float16).reshape(batch_size, hidden_size)
    recv_tensor = np.empty_like(send_tensor)
    if r % 2 == 0:
        hcomm.send(send_tensor, dst=partner)
        hcomm.recv(recv_tensor, src=partner)
    else:
        hcomm.recv(recv_tensor, src=partner)
        hcomm.send(send_tensor, dst=partner)
    want = (np.arange(batch_size * hidden_size) % 97 + partner).astype(np.float16).reshape(batch_size, hidden_size)
    np.testing.assert_array_equal(recv_tensor, want)


def compute_local_layers(x):
    return x * 2


def pipeline_forward(input_tensor, send_rank, recv_rank):
    """The document's overlapped stage, corrected for the ends of the
    pipeline: as written every rank first waits for a receive and only then
    sends, so a ring of such stages never starts; here the first stage
    (send_rank None) receives nothing and the last (recv_rank None) sends
    nothing."""
    recv_tensor = np.empty_like(input_tensor)
    recv_req = hcomm.irecv(recv_tensor, src=send_rank) if send_rank is not None else None
    local_output = compute_local_layers(input_tensor)
    if recv_req is not None:
        recv_req.wait()
        output = local_output + recv_tensor
    else:
        output = local_output
    if recv_rank is not None:
        send_tensor = output.copy()
        send_req = hcomm.isend(send_tensor, dst=recv_rank)
        send_req.wait()
    return output


def test_nonblocking_pipeline_overlap(world):
    r, w = world.rank(), world.size()
    x = np.full(6, float(r + 1), dtype=np.float32)
    out = pipeline_forward(x, r - 1 if r > 0 else None, r + 1 if r < w - 1 else None)
    np.testing.assert_array_equal(out, np.full(6, float(sum(2 * (k + 1) for k in range(r + 1)))))


def sparse_allgather(tensor_list, group):
    """The document's ring all-gather of one chunk per rank, corrected: as
    written every rank starts with a blocking send (which returns once the
    peer received, and every peer is sending too), it uses the module-level
    calls (the world's ranks) with the group's rank numbers, and it stores
    what came from `src` at `dst`. Here the send is posted without blocking
    on the group, the receive from `src` goes to `src`'s place, and then the
    send is waited for."""
    world_size = group.size()
    rank = group.rank()
    scattered = []
    num_tensors = len(tensor_list)
    chunk_size = num_tensors // world_size
    for i in range(world_size):
        start = i * chunk_size
        end = start + chunk_size if i < world_size - 1 else num_tensors
        scattered.append(np.concatenate(tensor_list[start:end], axis=0))
    local_chunk = scattered[rank]
    result = [np.empty_like(local_chunk) for _ in range(world_size)]
    result[rank] = local_chunk
    for step in range(1, world_size):
        src = (rank - step + world_size) % world_size
        dst = (rank + step) % world_size
        tmp = np.empty_like(local_chunk)
        req = group.isend(local_chunk, dst=dst)
        group.recv(tmp, src=src)
        req.wait()
        result[src] = tmp
    return np.concatenate(result, axis=0)


def test_sparse_allgather(comm):
    w, r = comm.size(), comm.rank()

    def tensors_of(q):
        return [np.full(3, 100.0 * q + i, dtype=np.float32) for i in range(2 * w)]

    got = sparse_allgather(tensors_of(r), comm)
    # Rank q contributes chunk q of its own list: tensors 2q and 2q + 1.
    want = np.concatenate([np.concatenate(tensors_of(q)[2 * q:2 * q + 2]) for q in range(w)])
    np.testing.assert_array_equal(got, want)


def test_moe_top2_dispatch_and_combine(world):
    # The document's moe_dispatch (top-2 of the gate's scores, each token
    # sent to its experts' ranks with blocking sends nobody receives, and a
    # syntax error in its `def`) is what moe.dispatch and moe.combine do:
    # tokens to their two experts and back, weighted by the gate's scores.
    w, r = world.size(), world.rank()
    expert_count, batch, seq, hidden = 8, 2, 3, 4
    tokens = (np.arange(batch * seq * hidden, dtype=np.float32).reshape(batch, seq, hidden) + 100 * r)
    rng = np.random.default_rng(10 + r)
    gate_scores = rng.permutation(np.arange(batch * seq * expert_count)).reshape(batch, seq, expert_count)
    topk_indices = np.argsort(-gate_scores, axis=-1)[..., :2].reshape(-1, 2)
    weights = np.tile(np.array([0.75, 0.25], dtype=np.float32), (batch * seq, 1))
    flat = tokens.reshape(-1, hidden)
    d = moe.dispatch(flat, topk_indices, weights, expert_count, group=world)
    per_rank = expert_count // w
    scale = np.repeat([e + 1 for e in range(r * per_rank, (r + 1) * per_rank)], d.tokens_per_expert)
    out = moe.combine(d.tokens * scale.astype(np.float32)[:, None], d, group=world)
    want = flat * (0.75 * (topk_indices[:, 0] + 1) + 0.25 * (topk_indices[:, 1] + 1)).astype(np.float32)[:, None]
    np.testing.assert_array_equal(out, want)
