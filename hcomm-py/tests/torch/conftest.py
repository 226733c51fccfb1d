"""The torch tests: every test of this folder runs on every rank of a job
started by ``torchrun --nproc-per-node N -m pytest`` (or ``hcomm-run``), in
the same order on every rank. Without torch the folder is skipped, loudly."""

import sys

import pytest

try:
    import torch  # noqa: F401
except ImportError:
    sys.stderr.write(
        "\n*** hcomm torch tests SKIPPED: torch is not installed in this environment; "
        "hint: run them with the environment scripts/torch-env.sh makes ***\n\n")
    collect_ignore_glob = ["test_*.py"]
else:
    import torch.distributed as dist

    import hcomm
    import hcomm.torch  # noqa: F401  (registers the backend)

    @pytest.fixture(scope="session")
    def groups():
        """The default group on the "hcomm" backend and a gloo group of the same ranks."""
        dist.init_process_group("hcomm")
        gloo = dist.new_group(backend="gloo")
        yield dist.group.WORLD, gloo
        dist.destroy_process_group()

    @pytest.fixture()
    def comm(groups):
        """A fresh native communicator per test (of the job's, as hcomm.init() returns it)."""
        c = hcomm.init().split(0)
        c.set_timeout(20.0)
        return c
