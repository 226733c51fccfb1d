//! `hcomm-run -n N [--] PROG ARGS...` (or `--nproc-per-node N`, as
//! torchrun spells it): starts N processes of `PROG` on this host, rank `r`
//! with `HCOMM_RANK=r`, `HCOMM_WORLD_SIZE=N`, `HCOMM_MASTER_ADDR=127.0.0.1`,
//! `HCOMM_MASTER_PORT`, torchrun's `RANK`, `WORLD_SIZE`, `LOCAL_RANK`,
//! `LOCAL_WORLD_SIZE`, `MASTER_ADDR` and `MASTER_PORT` with the same values,
//! and `HCOMM_JOB_SECRET` (fresh per job unless the caller set one), in a
//! process group of their own; prefixes each line they print with `[r]`
//! (and with `--log-dir DIR` also writes them, unprefixed, to
//! `DIR/rank_r.log`); forwards SIGINT and SIGTERM to the group; and when
//! one dies or exits non-zero, stops the group and exits non-zero naming
//! the rank that failed first and the cause. No rank outlives hcomm-run,
//! even when it is killed with SIGKILL.
//!
//! The port is held from the start: hcomm-run listens on it (a free one
//! the kernel chooses, or `--port`) and hands the listening socket to rank 0
//! (`HCOMM_STORE_FD`), which serves the rendezvous store on it. No other
//! process can take the port between the choice and rank 0's start.

mod children;
mod group;
mod output;
mod reap;
mod secret;

use std::net::TcpListener;
use std::process::ExitCode;
use std::time::Duration;

use clap::Parser;

/// Runs N processes of an hcomm program on this host.
#[derive(Parser, Debug)]
#[command(name = "hcomm-run", version, about, trailing_var_arg = true)]
struct Args {
    /// Number of processes (ranks).
    #[arg(
        short = 'n',
        long = "nprocs",
        visible_aliases = ["nproc-per-node", "nproc_per_node"],
        value_parser = clap::value_parser!(u32).range(1..=4096)
    )]
    n: u32,
    /// Port of the rendezvous store (default: a free one).
    #[arg(long)]
    port: Option<u16>,
    /// How long the other ranks get to exit after one failed before they
    /// are killed, in seconds (0 to 3600).
    #[arg(long, default_value = "5", value_parser = parse_grace)]
    grace: Duration,
    /// Writes each rank's output (stdout and stderr, in the order read)
    /// to `DIR/rank_R.log` too; the directory is made if missing.
    #[arg(long, value_name = "DIR")]
    log_dir: Option<std::path::PathBuf>,
    /// The program and its arguments.
    #[arg(required = true, num_args = 1.., allow_hyphen_values = true)]
    command: Vec<String>,
}

/// The longest `--grace`.
const MAX_GRACE: Duration = Duration::from_secs(3600);

/// `--grace`: seconds, finite, from 0 to [`MAX_GRACE`].
fn parse_grace(text: &str) -> Result<Duration, String> {
    let secs: f64 = text
        .trim()
        .parse()
        .map_err(|_| format!("`{text}` is not a number of seconds"))?;
    if !(0.0..=MAX_GRACE.as_secs_f64()).contains(&secs) {
        return Err(format!(
            "{text} seconds is out of range; hint: give 0 to {} seconds",
            MAX_GRACE.as_secs()
        ));
    }
    Duration::try_from_secs_f64(secs).map_err(|e| format!("`{text}`: {e}"))
}

fn main() -> ExitCode {
    let args = Args::parse();
    let bind = format!("127.0.0.1:{}", args.port.unwrap_or(0));
    let listener = match TcpListener::bind(&bind) {
        Ok(l) => l,
        Err(e) => {
            eprintln!(
                "hcomm-run: cannot listen on {bind} for the rendezvous store: {e}; hint: choose another `--port`"
            );
            return ExitCode::from(2);
        }
    };
    let port = match listener.local_addr() {
        Ok(a) => a.port(),
        Err(e) => {
            eprintln!("hcomm-run: cannot read the address of the store's socket: {e}");
            return ExitCode::from(2);
        }
    };
    if let Some(dir) = &args.log_dir {
        if let Err(e) = std::fs::create_dir_all(dir) {
            eprintln!("hcomm-run: cannot make the log directory {}: {e}", dir.display());
            return ExitCode::from(2);
        }
    }
    let secret = match secret::for_job(std::env::var_os(secret::SECRET_VAR).as_deref()) {
        Ok(s) => s,
        Err(e) => {
            eprintln!("hcomm-run: {e}");
            return ExitCode::from(2);
        }
    };
    let mut job = children::Job {
        n: args.n as usize,
        port,
        store: Some(listener),
        command: &args.command,
        grace: args.grace,
        secret,
        log_dir: args.log_dir.as_deref(),
    };
    match children::run(&mut job) {
        Ok(code) => ExitCode::from(code),
        Err(message) => {
            eprintln!("hcomm-run: {message}");
            ExitCode::from(1)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn grace_is_checked_not_overflowed() {
        assert_eq!(parse_grace("2.5"), Ok(Duration::from_millis(2500)));
        assert_eq!(parse_grace("0"), Ok(Duration::ZERO));
        for bad in ["1e19", "-1", "NaN", "inf", "3601"] {
            let e = parse_grace(bad).unwrap_err();
            assert!(e.contains("out of range") && e.contains(bad), "{bad}: {e}");
        }
        assert!(parse_grace("soon").unwrap_err().contains("`soon` is not a number"));
    }
}
