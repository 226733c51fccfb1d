//! Ctrl-C during a call made on the caller's own thread (see
//! [`crate::exec::run`]): the caller waits inside the runtime with the GIL
//! released, where Python's signal handler cannot reach it, so a SIGINT
//! handler chained before Python's (signal-hook; Python's still runs and
//! raises `KeyboardInterrupt` once the call returns) wakes a watcher thread
//! that aborts every communicator such a call is using. The aborted call
//! fails promptly and the caller raises `KeyboardInterrupt`; to the other
//! ranks this rank failed.

use std::io::Read;
use std::os::unix::net::UnixStream;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Mutex, MutexGuard, OnceLock, PoisonError};

/// The communicators of the calls now running on their callers' threads.
static ACTIVE: Mutex<Vec<(u64, hcomm::Comm)>> = Mutex::new(Vec::new());
static NEXT: AtomicU64 = AtomicU64::new(0);
/// Whether the handler and its watcher are installed.
static INSTALLED: OnceLock<bool> = OnceLock::new();

fn active() -> MutexGuard<'static, Vec<(u64, hcomm::Comm)>> {
    ACTIVE.lock().unwrap_or_else(PoisonError::into_inner)
}

/// Installs the SIGINT handler and starts its watcher, once per process.
/// `false` when either failed: calls then go to the executor, whose waits
/// Python's handler interrupts.
pub(crate) fn installed() -> bool {
    *INSTALLED.get_or_init(|| {
        let Ok((mut read, write)) = UnixStream::pair() else {
            return false;
        };
        let watcher = std::thread::Builder::new()
            .name("hcomm-py-sigint".into())
            .spawn(move || {
                let mut byte = [0u8; 1];
                while read.read(&mut byte).is_ok_and(|n| n > 0) {
                    for (_, comm) in active().iter() {
                        comm.abort(&crate::errors::interrupted_reason(comm.rank()));
                    }
                }
            });
        watcher.is_ok() && signal_hook::low_level::pipe::register(signal_hook::consts::SIGINT, write).is_ok()
    })
}

/// A call running on its caller's thread, watched for Ctrl-C until dropped.
pub(crate) struct Watch(u64);

impl Watch {
    pub(crate) fn new(comm: &hcomm::Comm) -> Watch {
        let id = NEXT.fetch_add(1, Ordering::Relaxed);
        active().push((id, comm.clone()));
        Watch(id)
    }
}

impl Drop for Watch {
    fn drop(&mut self) {
        active().retain(|(id, _)| *id != self.0);
    }
}
