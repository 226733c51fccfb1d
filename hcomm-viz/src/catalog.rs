//! Every schedule the tool knows by name: the runtime's built-in algorithms
//! (`hcomm::schedules`), the examples' schedules (the workspace's `src/`)
//! and the schedules of [`crate::gallery`].

use hcomm::schedules as builtin;
use hcomm_examples::all_gather as examples;
use hcomm_schedule::ir::Schedule;

use crate::gallery;

/// Where a schedule comes from.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Origin {
    /// A built-in algorithm of the runtime.
    Builtin,
    /// A schedule of the examples.
    Example,
    /// A schedule of [`crate::gallery`].
    Gallery,
}

impl Origin {
    /// `built-in`, `example` or `gallery`.
    pub const fn as_str(self) -> &'static str {
        match self {
            Origin::Builtin => "built-in",
            Origin::Example => "example",
            Origin::Gallery => "gallery",
        }
    }
}

/// One named schedule.
#[derive(Clone, Copy, Debug)]
pub struct Entry {
    /// Its name (the function's).
    pub name: &'static str,
    /// Where it comes from.
    pub origin: Origin,
    /// Its IR.
    pub schedule: fn() -> &'static Schedule,
}

macro_rules! entries {
    ($($origin:ident: $module:ident::$name:ident;)*) => {
        &[$(Entry {
            name: stringify!($name),
            origin: Origin::$origin,
            schedule: || &$module::$name::SCHEDULE,
        }),*]
    };
}

/// Every known schedule, built-ins first.
pub const ALL: &[Entry] = entries! {
    Builtin: builtin::ring_all_gather;
    Builtin: builtin::recursive_doubling_all_gather;
    Builtin: builtin::bruck_all_gather;
    Builtin: builtin::pairwise_all_to_all;
    Builtin: builtin::binomial_broadcast;
    Builtin: builtin::ring_all_reduce;
    Example: examples::two_level_all_gather;
    Example: examples::sparse_all_gather;
    Gallery: gallery::nonblocking_ring;
    Gallery: gallery::shift_by_two;
    Gallery: gallery::blocking_ring;
    Gallery: gallery::send_versus_barrier;
    Gallery: gallery::send_without_recv;
    Gallery: gallery::ring_stops_early;
};

/// The schedule called `name`.
pub fn find(name: &str) -> Option<&'static Schedule> {
    ALL.iter().find(|e| e.name == name).map(|e| (e.schedule)())
}
