//! The ranks' output, line by line, each line prefixed with `[rank] `, and
//! copied to the rank's log file where there is one.

use std::fs::File;
use std::io::{BufRead, BufReader, Read, Write};
use std::sync::{Arc, Mutex, PoisonError};
use std::thread::JoinHandle;

/// A rank's log file, shared by the copiers of its stdout and stderr.
pub(crate) type Log = Arc<Mutex<File>>;

/// Copies the lines of `from` to this process's stdout (or stderr), each
/// prefixed with `[rank] `, and to `log` as they are, until end of file.
/// A log that cannot be written any more is left alone; the terminal copy
/// goes on.
pub(crate) fn prefix_lines(
    rank: usize,
    from: impl Read + Send + 'static,
    to_stderr: bool,
    log: Option<Log>,
) -> JoinHandle<()> {
    std::thread::spawn(move || {
        let mut r = BufReader::new(from);
        let mut line = Vec::new();
        let prefix = format!("[{rank}] ");
        let mut log = log;
        loop {
            line.clear();
            match r.read_until(b'\n', &mut line) {
                Ok(0) | Err(_) => return,
                Ok(_) => {
                    if !line.ends_with(b"\n") {
                        line.push(b'\n');
                    }
                    if let Some(file) = &log {
                        let mut f = file.lock().unwrap_or_else(PoisonError::into_inner);
                        if f.write_all(&line).is_err() {
                            drop(f);
                            log = None;
                        }
                    }
                    let written = if to_stderr {
                        let mut e = std::io::stderr().lock();
                        e.write_all(prefix.as_bytes()).and_then(|()| e.write_all(&line))
                    } else {
                        let mut o = std::io::stdout().lock();
                        o.write_all(prefix.as_bytes())
                            .and_then(|()| o.write_all(&line))
                            .and_then(|()| o.flush())
                    };
                    if written.is_err() {
                        return;
                    }
                }
            }
        }
    })
}
