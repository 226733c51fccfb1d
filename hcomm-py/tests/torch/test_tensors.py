"""torch tensors through the native API: read and written in place (no copy),
bfloat16 included, new tensors of the input's kind, clear errors otherwise."""

import os

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


def huge_pages_of(t):
    """KiB of transparent huge pages in the mapping that holds ``t``'s elements."""
    addr = t.data_ptr()
    with open("/proc/self/smaps") as f:
        inside = False
        for line in f:
            head = line.split()[0]
            if "-" in head and not head.endswith(":"):
                lo, hi = (int(x, 16) for x in head.split("-"))
                inside = lo <= addr < hi
            elif inside and head == "AnonHugePages:":
                return int(line.split()[1])
    return 0


def thp_collapse_available():
    try:
        with open("/sys/kernel/mm/transparent_hugepage/enabled") as f:
            enabled = "[never]" not in f.read()
    except OSError:
        return False
    major, minor = (int(x) for x in os.uname().release.split(".")[:2])
    return enabled and (major, minor) >= (6, 1)


def test_a_large_tensor_lent_again_gets_huge_pages_and_keeps_its_data(comm):
    # torch's allocator leaves large tensors on 4 KiB pages; hcomm collapses
    # one into huge pages the second time it is lent (MADV_COLLAPSE, once):
    # the data must be exactly what it was, before and after.
    w, r = comm.size(), comm.rank()
    n = (16 << 20) // 4
    base = torch.arange(n, dtype=torch.float32) % 1000
    t = base + r
    before = huge_pages_of(t)
    comm.all_reduce(t)
    comm.all_reduce(t)
    want = w * (w * base + sum(range(w)))
    assert torch.equal(t, want)
    if thp_collapse_available() and before < (8 << 10):
        assert huge_pages_of(t) >= (14 << 10), "the 16 MiB tensor's aligned 14 MiB were not collapsed"
