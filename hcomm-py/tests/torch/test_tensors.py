"""torch tensors through the native API: read and written in place (no copy),
bfloat16 included, new tensors of the input's kind, clear errors otherwise."""

import pytest
import torch

import hcomm
from hcomm import pp


def test_all_reduce_writes_the_tensor_in_place(comm):
    w, r = comm.size(), comm.rank()
    t = torch.full((3, 4), float(r + 1))
    storage = t.data_ptr()
    out = comm.all_reduce(t)
    assert out is t and t.data_ptr() == storage
    assert t.tolist() == [[w * (w + 1) / 2] * 4] * 3


def test_bfloat16_and_float16(comm):
    w, r = comm.size(), comm.rank()
    for dtype in (torch.bfloat16, torch.float16):
        t = torch.full((8,), float(r), dtype=dtype)
        comm.all_reduce(t, op="max")
        assert t.dtype == dtype and t.tolist() == [float(w - 1)] * 8


def test_new_tensors_are_torch_tensors(comm):
    w, r = comm.size(), comm.rank()
    g = comm.all_gather(torch.full((2, 3), r, dtype=torch.int32))
    assert isinstance(g, torch.Tensor) and g.dtype == torch.int32 and g.shape == (2 * w, 3)
    assert g[:, 0].tolist() == [q for q in range(w) for _ in range(2)]
    rs = comm.reduce_scatter(torch.ones(w, 2, dtype=torch.bfloat16))
    assert isinstance(rs, torch.Tensor) and rs.dtype == torch.bfloat16 and rs.tolist() == [[float(w)] * 2]


def test_a_view_with_an_offset_is_read_where_it_lies(comm):
    r = comm.rank()
    base = torch.arange(10, dtype=torch.float64)
    view = base[4:7]  # contiguous, at an offset into the storage
    comm.broadcast(view, 0)
    assert view.tolist() == [4.0, 5.0, 6.0]
    assert base.tolist() == list(map(float, range(10)))
    del r


def test_non_contiguous_tensor_is_refused_with_its_strides(comm):
    t = torch.zeros(4, 6).t()
    with pytest.raises(hcomm.Precondition, match=r"not contiguous \(shape \[6, 4\], strides \[1, 6\]"):
        comm.all_reduce(t)


def test_tensor_requiring_grad_is_read(comm):
    w = comm.size()
    t = torch.ones(3, requires_grad=True)
    g = comm.all_gather(t)
    assert g.tolist() == [1.0] * (3 * w)


def test_pp_recv_returns_a_torch_tensor_of_the_senders_shape(comm):
    w, r = comm.size(), comm.rank()
    if w < 2:
        pytest.skip("needs 2 ranks")
    if r == 0:
        pp.send(torch.arange(6, dtype=torch.bfloat16).reshape(2, 3), dst=1, group=comm)
    elif r == 1:
        t = pp.recv(src=0, group=comm)
        assert isinstance(t, torch.Tensor) and t.dtype == torch.bfloat16 and t.shape == (2, 3)
        assert t.flatten().tolist() == [0.0, 1.0, 2.0, 3.0, 4.0, 5.0]
    comm.barrier()
