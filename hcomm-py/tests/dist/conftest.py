"""Every test of this folder runs on every rank of a job started by
``hcomm-run -n N`` (or ``python -m hcomm.run``): collective tests are called in
the same order on every rank."""

import pytest

import hcomm


@pytest.fixture(scope="session")
def world():
    return hcomm.init()


@pytest.fixture()
def comm(world):
    """A fresh communicator per test, so an error test leaves no broken state."""
    c = world.split(0)
    c.set_timeout(20.0)
    return c
