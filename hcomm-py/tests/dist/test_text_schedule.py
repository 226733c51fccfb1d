"""hcomm.Schedule: a schedule from text, checked when made (the macro's
diagnostics, at their line and column of the text), run with exact data."""

import numpy as np
import pytest

import hcomm

RING = """
    #[verify(world in 1..=3)]
    #[postcondition(all_gather(input -> output))]
    fn ring(input: &[T; n], output: &mut [T; n * world]) {
        copy input -> output.chunk(rank);
        for s in 0..world - 1 {
            batch {
                send output.chunk((rank - s) % world) to (rank + 1) % world;
                recv output.chunk((rank - s - 1) % world) from (rank - 1) % world;
            }
        }
    }
"""

DEADLOCK = (
    "#[verify(world in 2..=4)]\n"
    "fn f(a: &[T; n], b: &mut [T; n]) {\n"
    "    send a to (rank + 1) % world;\n"
    "    recv b from (rank - 1) % world;\n"
    "}"
)

# The same ring with a length range: empty buffers allowed, at most 2
# elements per rank.
RANGED = RING.replace("world in 1..=3", "world in 1..=4, n in 0..=2").replace("fn ring", "fn ranged")

SCALED = """
    #[verify(world in 1..=4)]
    fn reduce_blocks(x: &[T; k * world], out: &mut [T; k], op: ReduceOp) {
        reduce_scatter(x -> out, op);
    }
"""


def test_ring_from_text_exact_data(comm):
    # world 4 lies outside the verify set (1..=3): checked at the first call.
    w, r = comm.size(), comm.rank()
    ring = hcomm.Schedule(RING)
    assert ring.name == "ring" and ring.buffers == [("input", False), ("output", True)]
    x = np.array([r, 10 + r], dtype=np.float32)
    out = np.zeros(2 * w, dtype=np.float32)
    ring(comm, x, out)
    np.testing.assert_array_equal(out, np.array([[q, 10 + q] for q in range(w)], dtype=np.float32).ravel())


def test_deadlock_reported_at_its_line_and_column():
    with pytest.raises(hcomm.ScheduleError) as e:
        hcomm.Schedule(DEADLOCK)
    d = e.value.diagnostics[0]
    assert (d.kind, d.world, d.line, d.column) == ("deadlock", 2, 3, 5)
    assert "3:5: deadlock: with world = 2" in str(e.value)


def test_operator_keyword(comm):
    w, r = comm.size(), comm.rank()
    s = hcomm.Schedule(SCALED)
    x = np.arange(2 * w, dtype=np.int64) * (r + 1)
    out = np.zeros(2, dtype=np.int64)
    s(comm, x, out, op="max")
    np.testing.assert_array_equal(out, np.arange(2 * r, 2 * r + 2) * w)


def test_wrong_number_of_arrays_names_the_parameters(comm):
    ring = hcomm.Schedule(RING)
    with pytest.raises(hcomm.Precondition, match=r"`ring` takes 2 arrays \(input, output\), not 1"):
        ring(comm, np.zeros(2, dtype=np.float32))


def test_two_items_are_refused():
    with pytest.raises(hcomm.Precondition, match="holds 2 schedules"):
        hcomm.Schedule(RING + RING.replace("fn ring", "fn ring2"))


def test_length_range_from_text_runs_empty_buffers_and_refuses_values_outside(comm):
    w, r = comm.size(), comm.rank()
    ranged = hcomm.Schedule(RANGED)
    # n = 0: an empty bucket runs the schedule (the ranks still agree)
    empty = np.zeros(0, dtype=np.float32)
    ranged(comm, np.zeros(0, dtype=np.float32), empty)
    assert empty.size == 0
    x = np.array([r, 10 + r], dtype=np.float32)
    out = np.zeros(2 * w, dtype=np.float32)
    ranged(comm, x, out)
    np.testing.assert_array_equal(out, np.array([[q, 10 + q] for q in range(w)], dtype=np.float32).ravel())
    # n = 3 lies outside 0..=2: every rank refuses it before communicating
    with pytest.raises(hcomm.Precondition, match=r"length variable `n` = 3 .*outside its range 0\.\.=2"):
        ranged(comm, np.zeros(3, dtype=np.float32), np.zeros(3 * w, dtype=np.float32))
