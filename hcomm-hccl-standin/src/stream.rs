//! Streams: an ordered queue per stream, run by one worker thread.

use std::collections::VecDeque;
use std::sync::{Arc, Condvar, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use hcomm_sys::aclError;

use crate::runtime::lock;

/// A failure of an enqueued task, reported by the next synchronisation.
#[derive(Clone, Debug)]
pub(crate) struct AsyncError {
    pub(crate) code: aclError,
    pub(crate) message: String,
}

pub(crate) type Task = Box<dyn FnOnce() -> Result<(), AsyncError> + Send>;

#[derive(Default)]
struct State {
    queue: VecDeque<Task>,
    busy: bool,
    error: Option<AsyncError>,
    closing: bool,
}

pub(crate) struct Stream {
    pub(crate) device: i32,
    state: Mutex<State>,
    cv: Condvar,
    worker: Mutex<Option<JoinHandle<()>>>,
}

impl Stream {
    pub(crate) fn new(device: i32) -> Option<Arc<Stream>> {
        let stream = Arc::new(Stream {
            device,
            state: Mutex::new(State::default()),
            cv: Condvar::new(),
            worker: Mutex::new(None),
        });
        let s = Arc::clone(&stream);
        let handle = std::thread::Builder::new()
            .name(format!("standin-stream-dev{device}"))
            .spawn(move || s.run())
            .ok()?;
        *lock(&stream.worker) = Some(handle);
        Some(stream)
    }

    fn run(&self) {
        loop {
            let mut st = lock(&self.state);
            while st.queue.is_empty() && !st.closing {
                st = self.cv.wait(st).unwrap_or_else(std::sync::PoisonError::into_inner);
            }
            let Some(task) = st.queue.pop_front() else {
                return; // closing and drained
            };
            if st.error.is_some() {
                // The stream failed: discard the rest until it is synchronised.
                drop(task);
                self.cv.notify_all();
                continue;
            }
            st.busy = true;
            drop(st);
            let result = task();
            let mut st = lock(&self.state);
            st.busy = false;
            if let Err(e) = result {
                st.error.get_or_insert(e);
            }
            self.cv.notify_all();
        }
    }

    pub(crate) fn enqueue(&self, task: Task) {
        let mut st = lock(&self.state);
        st.queue.push_back(task);
        self.cv.notify_all();
    }

    /// Waits until the queue drained (at most `timeout`); returns and clears the
    /// first error. `Err(None)` means the wait timed out.
    pub(crate) fn synchronize(&self, timeout: Option<Duration>) -> Result<(), Option<AsyncError>> {
        let deadline = timeout.and_then(|t| Instant::now().checked_add(t));
        let mut st = lock(&self.state);
        while !st.queue.is_empty() || st.busy {
            st = match deadline {
                None => self.cv.wait(st).unwrap_or_else(std::sync::PoisonError::into_inner),
                Some(d) => {
                    let now = Instant::now();
                    if now >= d {
                        return Err(None);
                    }
                    self.cv
                        .wait_timeout(st, d - now)
                        .unwrap_or_else(std::sync::PoisonError::into_inner)
                        .0
                }
            };
        }
        st.error.take().map_or(Ok(()), |e| Err(Some(e)))
    }

    /// Whether every task ran (errors stay for the next synchronisation).
    pub(crate) fn idle(&self) -> bool {
        let st = lock(&self.state);
        st.queue.is_empty() && !st.busy
    }

    /// Drains the queue and stops the worker.
    pub(crate) fn close(&self) {
        lock(&self.state).closing = true;
        self.cv.notify_all();
        let handle = lock(&self.worker).take();
        if let Some(h) = handle {
            // A worker that panicked has nothing left to clean up.
            let _ = h.join();
        }
    }
}
