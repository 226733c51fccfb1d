//! The schedule checker, and schedules read from text.
//!
//! Everything of `hcomm_schedule` is here (the IR, [`check_world`],
//! [`verify`], ...): e.g. `checker::check_world(&NAME::SCHEDULE, 384, &[])`
//! checks a production world size of a `comm_schedule!` function in a test.
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

pub use hcomm_schedule::*;
pub use interp::Call;
pub use text::{parse_schedules, TextDiagnostic, TextSchedule};
