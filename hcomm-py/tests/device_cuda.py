"""CUDA tensors in place on the NCCL backend, world 1 (one GPU: NCCL
forbids two ranks on one device), and their refusal on the host backend.

Run by scripts/device-python.sh on a machine with a CUDA GPU, torch and
libnccl.so.2; not a pytest module (pytest needs no GPU). Every check
compares exact data; the last line is "device-python: PASS ..." or the
script exits non-zero.
"""

import os
import sys
import time

try:
    import torch
except ImportError as missing:
    print(f"device-python: FAIL torch is not installed ({missing}); hint: run on a machine with torch (CUDA)")
    sys.exit(1)

import hcomm
import hcomm._native as native

START = time.monotonic()
CHECKS = []


def check(name, got, want):
    if not torch.equal(got.cpu(), want.cpu()):
        raise AssertionError(f"{name}: got {got.cpu().tolist()} want {want.cpu().tolist()}")
    CHECKS.append(name)
    print(f"device-python case {name}: ok", flush=True)


def expect_refusal(name, fn, words):
    try:
        fn()
    except ValueError as e:
        text = str(e)
        missing = [w for w in words if w not in text]
        if missing:
            raise AssertionError(f"{name}: message {text!r} lacks {missing}") from e
        CHECKS.append(name)
        print(f"device-python case {name}: ok ({text})", flush=True)
        return
    raise AssertionError(f"{name}: no ValueError")


def host_refusal(dev):
    # A host communicator of one rank, on its own port.
    env = {"RANK": "0", "WORLD_SIZE": "1", "MASTER_ADDR": "127.0.0.1", "MASTER_PORT": "29581"}
    saved = {k: os.environ.get(k) for k in env}
    os.environ.update(env)
    try:
        host = native.init("host")
    finally:
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v
    x = torch.ones(4, device=dev)
    expect_refusal("host all_reduce refuses a CUDA tensor", lambda: host.all_reduce(x),
                   ["`tensor` is a CUDA tensor on cuda:0", "`host` backend", "hint:"])
    expect_refusal("host broadcast refuses a CUDA tensor", lambda: host.broadcast(x, 0),
                   ["CUDA tensor", "`host` backend"])
    expect_refusal("host send refuses a CUDA tensor", lambda: host.send(x, 0),
                   ["not the CPU", "tensor.cpu()"])
    check("host all_reduce of a CPU tensor still works", host.all_reduce(torch.arange(3.0)),
          torch.arange(3.0))


def main():
    assert torch.cuda.is_available(), "no CUDA device"
    dev = torch.device("cuda:0")
    comm = hcomm.init("nccl")
    assert comm.backend() == "nccl" and comm.size() == 1, (comm.backend(), comm.size())

    # all_reduce in place, after a kernel on torch's current stream wrote the
    # tensor (the stream contract: hcomm synchronises that stream first).
    for dtype in (torch.float32, torch.float16, torch.bfloat16, torch.int32, torch.int64, torch.float64):
        x = (torch.arange(1 << 16, device=dev) % 1000).to(dtype) * 3
        want = x.clone()
        ptr = x.data_ptr()
        out = comm.all_reduce(x)
        assert out is x and x.data_ptr() == ptr
        check(f"all_reduce sum {dtype}", x, want)
    x = torch.full((1000,), 7.5, device=dev)
    comm.all_reduce(x, op="avg")
    check("all_reduce avg", x, torch.full((1000,), 7.5))
    x = torch.arange(10.0, device=dev)
    comm.all_reduce(x, op="max")
    check("all_reduce max", x, torch.arange(10.0))

    # A non-default torch stream: the tensor is produced there.
    s = torch.cuda.Stream()
    with torch.cuda.stream(s):
        big = torch.ones(1 << 22, device=dev)
        big.mul_(2.0)
        big.add_(1.0)
        comm.all_reduce(big)
    torch.cuda.synchronize()
    check("all_reduce on a side stream", big, torch.full((1 << 22,), 3.0))

    # async_op: the request completes once the collective is done.
    y = torch.arange(256, dtype=torch.float32, device=dev)
    req = comm.all_reduce(y, async_op=True)
    req.wait()
    check("all_reduce async_op", y, torch.arange(256, dtype=torch.float32))

    # broadcast in place.
    b = torch.arange(12, dtype=torch.int64, device=dev).reshape(3, 4)
    comm.broadcast(b, 0)
    check("broadcast", b, torch.arange(12, dtype=torch.int64).reshape(3, 4))

    # all_gather: a new CUDA tensor, on the input's device.
    g = torch.arange(6, dtype=torch.float32, device=dev).reshape(2, 3) + 0.5
    out = comm.all_gather(g)
    torch.cuda.synchronize()
    assert out.is_cuda and out.shape == (2, 3), (out.device, out.shape)
    check("all_gather", out, torch.arange(6, dtype=torch.float32).reshape(2, 3) + 0.5)

    # A tensor that requires grad is used through its memory.
    w = torch.ones(5, device=dev, requires_grad=True)
    comm.all_reduce(w)
    check("all_reduce of a tensor that requires grad", w.detach(), torch.ones(5))

    # Refusals on the NCCL communicator: a non-contiguous CUDA tensor.
    t = torch.zeros(4, 4, device=dev).t()
    expect_refusal("non-contiguous CUDA tensor", lambda: comm.all_reduce(t), ["not contiguous", "hint:"])

    # cupy (`__cuda_array_interface__`) where installed.
    try:
        import cupy
    except ImportError:
        print("device-python: cupy not installed, its case skipped", flush=True)
        cupy = None
    if cupy is not None:
        try:
            c = cupy.arange(100, dtype=cupy.float32) * 2
        except Exception as e:  # noqa: BLE001 - cupy's own set-up, not hcomm
            print(f"device-python: cupy unusable here ({type(e).__name__}: {e}), its case skipped", flush=True)
            cupy = None
    if cupy is not None:
        comm.all_reduce(c)
        cupy.cuda.Device(0).synchronize()
        check("cupy all_reduce (__cuda_array_interface__)", torch.as_tensor(cupy.asnumpy(c)),
              torch.arange(100, dtype=torch.float32) * 2)

    host_refusal(dev)
    print(f"device-python: PASS {len(CHECKS)} cases ok, {time.monotonic() - START:.1f} s; "
          f"{torch.cuda.get_device_name(0)}, torch {torch.__version__}", flush=True)


if __name__ == "__main__":
    try:
        main()
    except Exception as e:  # noqa: BLE001 - the summary line names any failure
        print(f"device-python: FAIL {type(e).__name__}: {e}", flush=True)
        sys.exit(1)
