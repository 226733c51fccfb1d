//! The checks (language reference, section 7) that run on an unrolled schedule, in order:
//! ranges (during unrolling), matching, deadlock, hazards, completion and
//! postcondition.

pub(crate) mod completion;
pub(crate) mod deadlock;
pub(crate) mod hazards;
pub(crate) mod matching;
pub(crate) mod postcondition;
