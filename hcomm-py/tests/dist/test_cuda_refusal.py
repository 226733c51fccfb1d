"""CUDA memory on the host backend: a clear `hcomm.Precondition` (a
`ValueError`) naming the argument and the backend on every rank, before any
memory is touched, and the communicator stays usable. An object with
`__cuda_array_interface__` stands in for a CUDA tensor (no GPU needed; the
NCCL path is checked on a GPU by scripts/device-python.sh)."""

import numpy as np
import pytest

import hcomm


class DeviceArray:
    """Claims 4 float32 of device memory at an address nothing may read."""

    def __init__(self):
        self.__cuda_array_interface__ = {
            "shape": (4,), "typestr": "<f4", "data": (0xDEAD0000, False), "strides": None, "version": 3,
            "stream": None,
        }


REFUSED = r"`tensor` is a CUDA tensor on a CUDA device but this communicator runs on the `host` backend.*hint:"


def test_cuda_memory_is_refused_on_the_host_backend(comm):
    x = DeviceArray()
    with pytest.raises(hcomm.Precondition, match=REFUSED):
        comm.all_reduce(x)
    with pytest.raises(hcomm.Precondition, match=REFUSED):
        comm.all_reduce(x, async_op=True)
    with pytest.raises(hcomm.Precondition, match=REFUSED):
        comm.broadcast(x, 0)
    with pytest.raises(hcomm.Precondition, match=REFUSED):
        comm.all_gather(x)
    # the calls without a device path say what they take
    with pytest.raises(hcomm.Precondition, match="must be a numpy array or a torch tensor"):
        comm.reduce_scatter(x)
    a = np.full(3, comm.rank() + 1, np.float32)
    comm.all_reduce(a)
    n = comm.size()
    assert a.tolist() == [n * (n + 1) / 2] * 3
