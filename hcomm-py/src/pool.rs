//! The helper threads operations run on: started on demand, kept while
//! idle for a while, so a call pays a hand-over, not a thread start.

use std::sync::mpsc::{channel, RecvTimeoutError, Sender};
use std::sync::{Mutex, MutexGuard, PoisonError};
use std::time::Duration;

/// A job for a helper thread.
pub(crate) type Job = Box<dyn FnOnce() + Send + 'static>;

/// How long an idle helper thread waits for a job before it ends.
const IDLE: Duration = Duration::from_secs(30);

/// Idle helper threads, each by the sender of its job channel.
static IDLE_THREADS: Mutex<Vec<(u64, Sender<Job>)>> = Mutex::new(Vec::new());
static NEXT_THREAD: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);

fn idle() -> MutexGuard<'static, Vec<(u64, Sender<Job>)>> {
    IDLE_THREADS.lock().unwrap_or_else(PoisonError::into_inner)
}

/// Runs `job` on an idle helper thread, or on a new one.
pub(crate) fn submit(job: Job) -> std::io::Result<()> {
    let mut job = job;
    loop {
        let Some((_, tx)) = idle().pop() else { break };
        match tx.send(job) {
            Ok(()) => return Ok(()),
            // That thread ended meanwhile: try the next one.
            Err(back) => job = back.0,
        }
    }
    let (tx, rx) = channel::<Job>();
    let id = NEXT_THREAD.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    tx.send(job)
        .map_err(|_| std::io::Error::other("a new job channel is closed"))?;
    std::thread::Builder::new()
        .name("hcomm-py-op".into())
        .spawn(move || loop {
            match rx.recv_timeout(IDLE) {
                Ok(job) => {
                    job();
                    idle().push((id, tx.clone()));
                }
                Err(RecvTimeoutError::Timeout) => {
                    let mut list = idle();
                    let before = list.len();
                    list.retain(|(t, _)| *t != id);
                    if list.len() < before {
                        // Nobody holds this thread's sender: it can end.
                        return;
                    }
                    // Someone took it from the list and is sending a job.
                }
                Err(RecvTimeoutError::Disconnected) => return,
            }
        })?;
    Ok(())
}
