//! The checks (language reference, section 7) that run on an unrolled schedule, in order:
//! ranges (during unrolling), matching, deadlock, hazards, completion and
//! postcondition (whose symbolic run moves `runs` of elements as one); and all of them on one rank of a schedule that is the
//! same on every rank up to a rotation (`symmetry`, which `rotation` spares
//! the unrolling of the other ranks when the program's shape proves it).

pub(crate) mod blame;
pub(crate) mod completion;
pub(crate) mod deadlock;
pub(crate) mod hazards;
pub(crate) mod matching;
pub(crate) mod postcondition;
pub(crate) mod rotation;
pub(crate) mod runs;
pub(crate) mod symmetry;
