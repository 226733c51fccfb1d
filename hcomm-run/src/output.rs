//! The ranks' output, line by line, each line prefixed with `[rank] `.

use std::io::{BufRead, BufReader, Read, Write};
use std::thread::JoinHandle;

/// Copies the lines of `from` to this process's stdout (or stderr), each
/// prefixed with `[rank] `, until end of file.
pub(crate) fn prefix_lines(rank: usize, from: impl Read + Send + 'static, to_stderr: bool) -> JoinHandle<()> {
    std::thread::spawn(move || {
        let mut r = BufReader::new(from);
        let mut line = Vec::new();
        let prefix = format!("[{rank}] ");
        loop {
            line.clear();
            match r.read_until(b'\n', &mut line) {
                Ok(0) | Err(_) => return,
                Ok(_) => {
                    if !line.ends_with(b"\n") {
                        line.push(b'\n');
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
