//! Starting, watching and stopping the ranks' processes.

use std::io::{BufRead, BufReader, Read, Write};
use std::os::unix::process::ExitStatusExt;
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use nix::sys::signal::{kill, Signal};
use nix::unistd::Pid;

/// How often the children are polled.
const POLL: Duration = Duration::from_millis(10);

/// Runs `n` ranks of `command`; the exit code for this process, or why the
/// job failed (a message naming the rank and the cause).
pub(crate) fn run(n: usize, port: u16, command: &[String], grace: Duration) -> Result<u8, String> {
    let signal = Arc::new(AtomicUsize::new(0));
    for sig in [signal_hook::consts::SIGINT, signal_hook::consts::SIGTERM] {
        signal_hook::flag::register_usize(sig, Arc::clone(&signal), sig as usize)
            .map_err(|e| format!("cannot handle signal {sig}: {e}"))?;
    }
    let mut children = Vec::with_capacity(n);
    let mut printers = Vec::new();
    for rank in 0..n {
        let spawned = Command::new(&command[0])
            .args(&command[1..])
            .env("HCOMM_RANK", rank.to_string())
            .env("HCOMM_WORLD_SIZE", n.to_string())
            .env("HCOMM_MASTER_ADDR", "127.0.0.1")
            .env("HCOMM_MASTER_PORT", port.to_string())
            .env("LOCAL_RANK", rank.to_string())
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn();
        let mut child = match spawned {
            Ok(c) => c,
            Err(e) => {
                stop(&mut children, grace);
                return Err(format!("cannot start rank {rank} (`{}`): {e}", command[0]));
            }
        };
        if let Some(out) = child.stdout.take() {
            printers.push(prefix_lines(rank, out, false));
        }
        if let Some(err) = child.stderr.take() {
            printers.push(prefix_lines(rank, err, true));
        }
        children.push(Some(child));
    }
    let outcome = watch(&mut children, &signal, grace);
    for p in printers {
        let _ = p.join();
    }
    outcome
}

/// Waits for the children; stops the rest when one fails or a signal
/// arrives.
fn watch(children: &mut [Option<Child>], signal: &AtomicUsize, grace: Duration) -> Result<u8, String> {
    let mut forwarded = 0;
    loop {
        let sig = signal.swap(0, Ordering::SeqCst);
        if sig != 0 {
            forwarded = sig;
            let Ok(s) = Signal::try_from(sig as i32) else { continue };
            for c in children.iter().flatten() {
                let _ = kill(Pid::from_raw(c.id() as i32), s);
            }
        }
        let mut running = 0;
        for rank in 0..children.len() {
            let Some(child) = children[rank].as_mut() else { continue };
            match child.try_wait() {
                Ok(None) => running += 1,
                Ok(Some(status)) => {
                    children[rank] = None;
                    if !status.success() && forwarded == 0 {
                        let cause = describe(status);
                        stop(children, grace);
                        return Err(format!("rank {rank} {cause}; the other ranks were stopped"));
                    }
                }
                Err(e) => {
                    children[rank] = None;
                    stop(children, grace);
                    return Err(format!("cannot wait for rank {rank}: {e}"));
                }
            }
        }
        if running == 0 {
            return Ok(if forwarded == 0 {
                0
            } else {
                (128 + forwarded).min(255) as u8
            });
        }
        std::thread::sleep(POLL);
    }
}

/// Sends SIGTERM to the children still running, waits up to `grace`, then
/// kills the rest.
fn stop(children: &mut [Option<Child>], grace: Duration) {
    for c in children.iter().flatten() {
        let _ = kill(Pid::from_raw(c.id() as i32), Signal::SIGTERM);
    }
    let deadline = Instant::now() + grace;
    while Instant::now() < deadline && children.iter_mut().flatten().any(|c| matches!(c.try_wait(), Ok(None))) {
        std::thread::sleep(POLL);
    }
    for c in children.iter_mut().flatten() {
        if matches!(c.try_wait(), Ok(None)) {
            let _ = c.kill();
        }
        let _ = c.wait();
    }
}

/// "exited with code 3" or "was killed by signal SIGKILL".
fn describe(status: ExitStatus) -> String {
    match (status.code(), status.signal()) {
        (Some(code), _) => format!("exited with code {code}"),
        (None, Some(sig)) => match Signal::try_from(sig) {
            Ok(s) => format!("was killed by signal {}", s.as_str()),
            Err(_) => format!("was killed by signal {sig}"),
        },
        (None, None) => format!("ended ({status})"),
    }
}

/// Copies the lines of `from` to this process's stdout (or stderr),
/// each prefixed with `[rank] `.
fn prefix_lines(rank: usize, from: impl Read + Send + 'static, to_stderr: bool) -> std::thread::JoinHandle<()> {
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
