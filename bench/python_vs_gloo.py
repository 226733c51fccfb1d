"""All-reduce as torch users measure it, side by side in one run: torch.distributed
with gloo, torch.distributed with the "hcomm" backend, and hcomm's native API
(``comm.all_reduce``) on a numpy array and on a torch tensor.

Run it on every rank of one job (the environment of scripts/torch-env.sh, the
`hcomm` package installed in it):

    python -m torch.distributed.run --nproc-per-node 2 bench/python_vs_gloo.py
    hcomm-run -n 4 -- python bench/python_vs_gloo.py

Each round times every method once per size, in turn, so the machine's load
falls on all of them alike; rank 0 prints one line per (size, method): the
median, 10th and 90th percentile of the per-call times (the slowest rank's time
of each call: every rank times a barrier-started batch and the maximum is
taken), and the ratio of gloo's median to the method's.
Options: --sizes 4K,64M  --rounds 5  --out FILE (a JSON copy of the table).

Placement, fair to both: hcomm binds the thread that joins the job to cores
of its own (``HCOMM_BIND=core``, its default), and threads started later
inherit that binding. gloo's group is therefore created with the thread
unbound (gloo's threads start on every core the process may use, as in a job
without hcomm), and gloo's batches run with the calling thread unbound too:
gloo runs as in a gloo-only job, hcomm as in an hcomm-only job.
``HCOMM_BIND=none`` leaves every method to the scheduler. ``--gloo-only``
times gloo alone in a job that never joins hcomm, the reference that gloo's
figures beside hcomm's should match.

``--cost`` instead times ``comm.all_reduce`` of 4 KiB (float32, numpy and torch)
call by call, as ``hcomm-bench all_reduce -b 4K -e 4K`` times the Rust call
(the median over calls of the slowest rank's time), for the cost of a Python
call over the Rust one: run both in turn under the same ``hcomm-run -n 2``.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import time

import numpy as np
import torch
import torch.distributed as dist

import hcomm
import hcomm.torch  # noqa: F401  (registers the backend)


def parse_size(text: str) -> int:
    units = {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30}
    if text[-1].upper() in units:
        return int(text[:-1]) * units[text[-1].upper()]
    return int(text)


def calls_for(nbytes: int) -> int:
    """Calls per timed batch: about 0.2 s of gloo's time at each size."""
    return max(3, min(2000, (64 << 20) // max(nbytes, 1) // 8))


def timed(call, n: int, gloo, cores=None) -> float:
    """Seconds per call of ``n`` calls, the slowest rank's, started together;
    with ``cores``, the calling thread runs on them meanwhile."""
    bound = os.sched_getaffinity(0)
    if cores is not None:
        os.sched_setaffinity(0, cores)
    dist.barrier(group=gloo)
    start = time.perf_counter()
    for _ in range(n):
        call()
    elapsed = time.perf_counter() - start
    if cores is not None:
        os.sched_setaffinity(0, bound)
    per_call = torch.tensor([elapsed / n], dtype=torch.float64)
    dist.all_reduce(per_call, op=dist.ReduceOp.MAX, group=gloo)
    return per_call.item()


def call_cost(calls: int = 3000) -> None:
    """Median over calls of the slowest rank's time of one 4 KiB all_reduce."""
    comm = hcomm.init()
    a = np.ones(1024, dtype=np.float32)
    t = torch.ones(1024, dtype=torch.float32)
    for name, x in (("numpy", a), ("torch", t)):
        own = np.zeros(calls, dtype=np.float64)
        for i in range(calls // 10):  # warm up
            comm.all_reduce(x)
        for i in range(calls):
            start = time.perf_counter()
            comm.all_reduce(x)
            own[i] = time.perf_counter() - start
        comm.all_reduce(own, op="max")
        if comm.rank() == 0:
            print(f"python comm.all_reduce 4 KiB {name}: median {np.median(own) * 1e6:.2f} us, "
                  f"p10 {np.percentile(own, 10) * 1e6:.2f}, p90 {np.percentile(own, 90) * 1e6:.2f} "
                  f"({comm.size()} processes, {calls} calls)")


def gloo_only(args) -> None:
    """gloo's all_reduce in a job that never joins hcomm (nothing bound)."""
    dist.init_process_group("gloo")
    times = {}
    for size in args.sizes.split(","):
        t = torch.ones(parse_size(size) // 4, dtype=torch.float32)
        n = calls_for(parse_size(size))
        timed(lambda: dist.all_reduce(t), max(2, n // 10), None)
        times[size] = sorted(timed(lambda: dist.all_reduce(t), n, None) for _ in range(args.rounds))
    if dist.get_rank() == 0:
        print(f"gloo alone, all_reduce float32, {dist.get_world_size()} processes, {args.rounds} rounds, "
              f"load {os.getloadavg()[0]:.1f}")
        for size, xs in times.items():
            print(f"{size:>6} gloo alone median {statistics.median(xs) * 1e6:10.1f} us")
    dist.destroy_process_group()


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--sizes", default="4K,64M")
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--out", default=None)
    ap.add_argument("--cost", action="store_true")
    ap.add_argument("--gloo-only", action="store_true")
    args = ap.parse_args()
    if args.cost:
        call_cost()
        return
    if args.gloo_only:
        gloo_only(args)
        return
    unbound = os.sched_getaffinity(0)
    dist.init_process_group("hcomm")  # joins hcomm's job: binds this thread (HCOMM_BIND)
    bound = os.sched_getaffinity(0)
    os.sched_setaffinity(0, unbound)
    gloo = dist.new_group(backend="gloo")  # gloo's threads start unbound
    os.sched_setaffinity(0, bound)
    hc = dist.group.WORLD
    comm = hcomm.init()
    rank, world = dist.get_rank(), dist.get_world_size()
    methods = ["gloo", "hcomm backend", "hcomm native numpy", "hcomm native torch"]
    times = {}
    for size in args.sizes.split(","):
        nbytes = parse_size(size)
        t = torch.ones(nbytes // 4, dtype=torch.float32)
        a = np.ones(nbytes // 4, dtype=np.float32)
        calls = {
            "gloo": lambda: dist.all_reduce(t, group=gloo),
            "hcomm backend": lambda: dist.all_reduce(t, group=hc),
            "hcomm native numpy": lambda: comm.all_reduce(a),
            "hcomm native torch": lambda: comm.all_reduce(t),
        }
        n = calls_for(nbytes)
        cores = {"gloo": unbound}
        # Warm up: connections, pages, caches; the torch tensor, lent twice
        # to hcomm, gets huge pages here (hcomm.torch's large tensors), so
        # gloo's rounds and hcomm's read the same memory.
        for m in methods:
            timed(calls[m], max(2, n // 10), gloo, cores.get(m))
        for _ in range(args.rounds):
            for m in methods:
                times.setdefault((size, m), []).append(timed(calls[m], n, gloo, cores.get(m)))
    if rank == 0:
        rows = []
        print(f"all_reduce float32, {world} processes, {args.rounds} rounds, load {os.getloadavg()[0]:.1f}, "
              f"HCOMM_BIND={os.environ.get('HCOMM_BIND', 'core')}, hcomm's thread on cores {sorted(bound)}")
        print(f"{'size':>6} {'method':<20} {'median us':>10} {'p10 us':>9} {'p90 us':>9} {'gloo/this':>9}")
        for size in args.sizes.split(","):
            base = statistics.median(times[(size, "gloo")])
            for m in methods:
                xs = sorted(times[(size, m)])
                med = statistics.median(xs)
                p10, p90 = xs[len(xs) // 10], xs[min(len(xs) - 1, (9 * len(xs)) // 10)]
                print(f"{size:>6} {m:<20} {med * 1e6:10.1f} {p10 * 1e6:9.1f} {p90 * 1e6:9.1f} {base / med:8.2f}x")
                rows.append({"size": size, "method": m, "world": world, "median_us": med * 1e6,
                             "p10_us": p10 * 1e6, "p90_us": p90 * 1e6, "speedup_vs_gloo": base / med})
        if args.out:
            with open(args.out, "w") as f:
                json.dump(rows, f, indent=1)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
