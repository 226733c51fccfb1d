"""The torch.distributed backend ``"hcomm"``: importing this module registers it.

    import torch.distributed as dist
    import hcomm.torch  # noqa: F401  (registers the backend)
    dist.init_process_group("hcomm")  # under torchrun or hcomm-run

The process group is a Python ``torch.distributed.ProcessGroup`` over an
:class:`hcomm.Comm` (the job's communicator for the default group, a new one
split from it for ``dist.new_group``) on CPU tensors, read and written in place. It
implements all_reduce, all_gather (and ``all_gather_into_tensor``),
reduce_scatter (and ``reduce_scatter_tensor``), all_to_all (and
``all_to_all_single`` with split sizes), broadcast, reduce, barrier, send and
recv, each returning a ``Work`` (so ``async_op=True`` and
``DistributedDataParallel`` work). Collectives run to their end before they
return (on the caller's thread: see the package README, "Cost of a call"), so
their ``Work`` is complete; send and recv return pending ones. Errors are hcomm's exceptions.

The job's communicator is joined on the first process group: under torchrun,
rank 0 picks a free TCP port for hcomm's own rendezvous and publishes it
through torch's store (``HCOMM_MASTER_PORT`` set by hcomm-run is used as is).
Under hcomm-run, importing this module sets torch's ``RANK``, ``WORLD_SIZE``,
``LOCAL_RANK``, ``MASTER_ADDR`` and ``MASTER_PORT`` from hcomm-run's job (a
collective: every rank imports it). Waits are bounded by hcomm's own timeout (``HCOMM_TIMEOUT``), not torch's.
"""

from __future__ import annotations

import os
import socket
from typing import Any, List, Sequence

import numpy as np
import torch
import torch.distributed as dist

import hcomm
from ._errors import Precondition
from ._native import Comm, Request

BACKEND = "hcomm"

# torch's reduce operators and hcomm's names, SUM first: comparing
# ``opts.reduceOp`` with one costs about 0.3 us (a pybind11 call), less than
# hashing it for a dictionary.
_OPS = (
    (dist.ReduceOp.SUM, "sum"),
    (dist.ReduceOp.AVG, "avg"),
    (dist.ReduceOp.MAX, "max"),
    (dist.ReduceOp.MIN, "min"),
    (dist.ReduceOp.PRODUCT, "prod"),
)

_PORT_KEY = "hcomm_master_port"


def _op(opts: Any) -> str:
    """hcomm's name of the reduce operator of ``opts`` (``None``: sum)."""
    if opts is None:
        return "sum"
    reduce_op = opts.reduceOp
    for torch_op, name in _OPS:
        if reduce_op == torch_op:
            return name
    raise Precondition(
        f"precondition: reduce op {reduce_op.op} is not supported by the hcomm backend; "
        "hint: use SUM, PRODUCT, MIN, MAX or AVG")


class _Work(dist.Work):
    """The handle of one operation: its hcomm requests (none for an operation
    that ran to its end) and what its future holds."""

    def __init__(self, requests: Sequence[Request], result: Any) -> None:
        super().__init__()
        self._requests = list(requests)
        self._result = result
        self._done = not self._requests

    def wait(self, timeout: Any = None) -> bool:
        if not self._done:
            for r in self._requests:
                r.wait()
            self._done = True
        return True

    def is_completed(self) -> bool:
        return self._done or all(r.test() for r in self._requests)

    def is_success(self) -> bool:
        return self.is_completed()

    def get_future(self) -> torch.futures.Future:
        self.wait()
        fut: torch.futures.Future = torch.futures.Future()
        fut.set_result(self._result)
        return fut

    def result(self) -> Any:
        self.wait()
        return self._result


def _done(result: Any) -> _Work:
    return _Work((), result)


# What a blocking collective returns: torch.distributed's functions wait on
# the handle of a call made with ``async_op=False`` and drop it, so one
# completed handle serves them all (a new ``Work`` cost about 1 us of the
# 4.7 us of CPU a 4 KiB dist.all_reduce spent in Python on one rank).
_DONE = _done(None)


def _finished(opts: Any, result: Any) -> _Work:
    """The handle of a collective that ran to its end: ``_DONE`` when the
    caller blocks (``opts.asyncOp`` false), else one holding ``result`` for
    its future (DDP's hooks read it)."""
    if opts is not None and not getattr(opts, "asyncOp", True):
        return _DONE
    return _done(result)


def _rows(t: torch.Tensor, w: int) -> torch.Tensor:
    """``t`` viewed as ``w`` rows (its elements split evenly between the ranks)."""
    return t.reshape(w, -1)


class ProcessGroup(dist.ProcessGroup):
    """A torch.distributed process group over an :class:`hcomm.Comm`."""

    def __init__(self, comm: Comm) -> None:
        super().__init__(comm.rank(), comm.size())
        self.comm = comm

    def getBackendName(self) -> str:  # noqa: N802 (torch's name)
        return BACKEND

    @property
    def name(self) -> str:  # type: ignore[override]
        return BACKEND

    def size(self) -> int:
        return self.comm.size()

    def rank(self) -> int:
        return self.comm.rank()

    def allreduce(self, tensors: List[torch.Tensor], opts: Any = None) -> _Work:
        op = _op(opts)
        all_reduce = self.comm.all_reduce
        for t in tensors:
            all_reduce(t, op)
        return _finished(opts, tensors)

    def allreduce_coalesced(self, tensors: List[torch.Tensor], opts: Any = None) -> _Work:
        return self.allreduce(tensors, opts)

    def allgather(self, output_lists: List[List[torch.Tensor]], inputs: List[torch.Tensor], opts: Any = None) -> _Work:
        w = self.comm.size()
        for outs, t in zip(output_lists, inputs):
            if len(outs) != w:
                raise Precondition(f"precondition: all_gather: {len(outs)} output tensors for {w} ranks")
            got = _rows(self.comm.all_gather(t.reshape(1, -1)), w)
            for i, o in enumerate(outs):
                o.copy_(got[i].view_as(o))
        return _finished(opts, output_lists)

    def all_gather_single(self, output: torch.Tensor, input: torch.Tensor, opts: Any = None) -> _Work:
        w = self.comm.size()
        if output.numel() != input.numel() * w:
            raise Precondition(
                f"precondition: all_gather_into_tensor: output has {output.numel()} elements, "
                f"expected {w} x {input.numel()}")
        output.copy_(self.comm.all_gather(input.reshape(1, -1)).view_as(output))
        return _finished(opts, [output])

    _allgather_base = all_gather_single

    def reduce_scatter(self, outputs: List[torch.Tensor], input_lists: List[List[torch.Tensor]], opts: Any = None) -> _Work:
        op = _op(opts)
        w = self.comm.size()
        for o, ins in zip(outputs, input_lists):
            if len(ins) != w or any(t.numel() != o.numel() for t in ins):
                raise Precondition(
                    f"precondition: reduce_scatter: expected {w} inputs of {o.numel()} elements, the output's size")
            got = self.comm.reduce_scatter(torch.stack([t.reshape(-1) for t in ins]), op)
            o.copy_(got.view_as(o))
        return _finished(opts, outputs)

    def reduce_scatter_single(self, output: torch.Tensor, input: torch.Tensor, opts: Any = None) -> _Work:
        op = _op(opts)
        w = self.comm.size()
        if input.numel() != output.numel() * w:
            raise Precondition(
                f"precondition: reduce_scatter_tensor: input has {input.numel()} elements, "
                f"expected {w} x {output.numel()}")
        output.copy_(self.comm.reduce_scatter(_rows(input, w), op).view_as(output))
        return _finished(opts, [output])

    _reduce_scatter_base = reduce_scatter_single

    def all_to_all_single(self, output: torch.Tensor, input: torch.Tensor, output_split_sizes: List[int],
                          input_split_sizes: List[int], opts: Any = None) -> _Work:
        w = self.comm.size()
        if not input_split_sizes:
            if input.shape[0] % w if input.dim() else True:
                raise Precondition(
                    f"precondition: all_to_all_single: dimension 0 of the input ({tuple(input.shape)}) "
                    f"does not divide by the {w} ranks")
            input_split_sizes = [input.shape[0] // w] * w
        got = self.comm.all_to_all_v(input, list(input_split_sizes))
        if got.shape != output.shape:
            raise Precondition(
                f"precondition: all_to_all_single: received shape {tuple(got.shape)}, the output has "
                f"{tuple(output.shape)} (output_split_sizes {list(output_split_sizes)})")
        output.copy_(got)
        return _finished(opts, [output])

    alltoall_base = all_to_all_single

    def alltoall(self, outputs: List[torch.Tensor], inputs: List[torch.Tensor], opts: Any = None) -> _Work:
        w = self.comm.size()
        if len(outputs) != w or len(inputs) != w:
            raise Precondition(
                f"precondition: all_to_all: {len(inputs)} inputs and {len(outputs)} outputs for {w} ranks")
        flat = torch.cat([t.reshape(-1) for t in inputs])
        got = self.comm.all_to_all_v(flat, [t.numel() for t in inputs])
        sizes = [o.numel() for o in outputs]
        if got.numel() != sum(sizes):
            raise Precondition(
                f"precondition: all_to_all: received {got.numel()} elements, the outputs hold {sum(sizes)}")
        for o, part in zip(outputs, torch.split(got, sizes)):
            o.copy_(part.view_as(o))
        return _finished(opts, outputs)

    def broadcast(self, tensors: List[torch.Tensor], opts: Any = None) -> _Work:
        root = opts.rootRank if opts is not None else 0
        for t in tensors:
            self.comm.broadcast(t, root)
        return _finished(opts, tensors)

    def reduce(self, tensors: List[torch.Tensor], opts: Any = None) -> _Work:
        op = _op(opts)
        for t in tensors:
            self.comm.reduce(t, opts.rootRank, op)
        return _finished(opts, tensors)

    def barrier(self, opts: Any = None) -> _Work:
        self.comm.barrier()
        return _finished(opts, None)

    def send(self, tensors: List[torch.Tensor], dst: int, tag: int = 0) -> _Work:
        return _Work([self.comm.isend(t, dst, tag) for t in tensors], tensors)

    def recv(self, tensors: List[torch.Tensor], src: int, tag: int = 0) -> _Work:
        return _Work([self.comm.irecv(t, src, tag) for t in tensors], tensors)

    def abort(self) -> None:
        self.comm.abort("torch.distributed process group aborted")

    def shutdown(self) -> None:
        pass


def _join(store: Any, rank: int) -> Comm:
    """The job's communicator; its rendezvous port comes from torch's store
    when the launcher (torchrun) did not give one for hcomm."""
    if "HCOMM_MASTER_PORT" not in os.environ:
        if rank == 0:
            with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
                s.bind((os.environ.get("MASTER_ADDR", "127.0.0.1"), 0))
                port = s.getsockname()[1]
            store.set(_PORT_KEY, str(port))
        os.environ["HCOMM_MASTER_PORT"] = store.get(_PORT_KEY).decode()
    return hcomm.init()


def _torch_env_from_hcomm_run() -> None:
    """Under hcomm-run (``HCOMM_RANK`` set, not a torchrun worker), gives
    torch's ``env://`` rendezvous its variables: rank, world size and address
    from hcomm-run's, and a free port rank 0 picks and broadcasts over the
    job's communicator (so every rank of the job must import this module).
    hcomm-run's own ``MASTER_PORT`` is the port of hcomm's store, which rank
    0 already holds: torch's store cannot listen there."""
    if "HCOMM_RANK" not in os.environ or "TORCHELASTIC_RUN_ID" in os.environ:
        return
    world = hcomm.init()
    addr = os.environ.get("HCOMM_MASTER_ADDR", "127.0.0.1")
    port = np.zeros(1, dtype=np.int64)
    if world.rank() == 0:
        with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
            s.bind((addr, 0))
            port[0] = s.getsockname()[1]
    world.broadcast(port, 0)
    os.environ.update({"RANK": str(world.rank()), "WORLD_SIZE": str(world.size()),
                       "LOCAL_RANK": os.environ.get("LOCAL_RANK", str(world.rank())),
                       "MASTER_ADDR": addr, "MASTER_PORT": str(int(port[0]))})


def _create(options: Any, backend_options: Any = None) -> ProcessGroup:
    """torch's creator of the backend (extended API): the default group's
    communicator is the job's; another group's is a new one, split from it
    (all ranks) or a subgroup of it (some ranks), so that a failure on one
    group leaves the others usable."""
    if not dist.is_initialized():
        return ProcessGroup(_join(options.store, options.group_rank))
    world = hcomm.init()
    ranks = list(options.global_ranks_in_group or range(world.size()))
    if ranks == list(range(world.size())):
        comm = world.split(0)
    else:
        comm = world.subgroup(ranks)
    if comm is None:
        raise Precondition(f"precondition: rank {world.rank()} is not in the group of ranks {ranks}")
    return ProcessGroup(comm)


dist.Backend.register_backend(BACKEND, _create, extended_api=True, devices=["cpu"])
_torch_env_from_hcomm_run()

__all__ = ["BACKEND", "ProcessGroup"]
