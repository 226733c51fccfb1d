//! The schedule checker, and schedules read from text.
//!
//! The checker's entry points ([`check_world`], [`verify`], ...), its
//! diagnostics and the IR they take ([`ir`], [`Schedule`]): e.g.
//! `checker::check_world(&NAME::SCHEDULE, 384, &[])` checks a production
//! world size of a `comm_schedule!` function in a test. The rest of the
//! checker crate stays in `hcomm_schedule`.
//!
//! [`parse_schedules`] reads the language from a string, the way
//! `comm_schedule!` reads its tokens (the same parser, the same checker, the
//! same diagnostics at the same places), and [`TextSchedule::call`] runs a
//! schedule so read on a [`Comm`](crate::Comm) of any backend through the
//! executor the generated code uses (same prologue, same run-time
//! verification of world sizes outside the verify set, same operations):
//!
//! ```no_run
//! # fn main() -> Result<(), Box<dyn std::error::Error>> {
//! let comm = hcomm::init_from_env()?;
//! let text = std::fs::read_to_string("ring.sched")?;
//! let schedules = hcomm::checker::parse_schedules(&text).map_err(|diagnostics| {
//!     hcomm::Error::Config { message: format!("{}", diagnostics[0]) }
//! })?;
//! let (input, mut output) = (vec![1.0_f32; 4], vec![0.0_f32; 4 * comm.world()]);
//! schedules[0].call(&comm).input("input", &input[..]).output("output", &mut output[..]).run()?;
//! # Ok(())
//! # }
//! ```

mod interp;
mod text;

pub use hcomm_schedule::ir::{self, Schedule};
pub use hcomm_schedule::{
    check_static, check_world, check_world_unreduced, requires_holds, scalar_range, verify, DiagKind, Diagnostic,
    VerifyCache,
};
pub use interp::Call;
pub use text::{parse_schedules, TextDiagnostic, TextSchedule};
