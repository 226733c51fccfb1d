//! `hcomm-run -n N [--] PROG ARGS...`: starts N processes of `PROG` on this
//! host, rank `r` with `HCOMM_RANK=r`, `HCOMM_WORLD_SIZE=N`,
//! `HCOMM_MASTER_ADDR=127.0.0.1`, `HCOMM_MASTER_PORT` (a free port),
//! `LOCAL_RANK=r` and `HCOMM_JOB_SECRET` (fresh per job unless the caller
//! set one), in a process group of their own; prefixes each line they print
//! with `[r]`; forwards SIGINT and SIGTERM to the group; and when one dies
//! or exits non-zero, stops the group and exits non-zero naming the rank
//! that failed first and the cause. No rank outlives hcomm-run, even when
//! it is killed with SIGKILL.
//!
//! The port is one the kernel chose for a socket bound and closed at once:
//! another process may take it before rank 0 listens on it, and rank 0 then
//! fails saying so (the job is not started again: that would run the
//! ranks' code twice). `--port` chooses it instead.

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
    #[arg(short = 'n', long = "nprocs", value_parser = clap::value_parser!(u32).range(1..=4096))]
    n: u32,
    /// Port of the rendezvous store (default: a free one).
    #[arg(long)]
    port: Option<u16>,
    /// How long the other ranks get to exit after one failed before they
    /// are killed, in seconds.
    #[arg(long, default_value_t = 5.0)]
    grace: f64,
    /// The program and its arguments.
    #[arg(required = true, num_args = 1.., allow_hyphen_values = true)]
    command: Vec<String>,
}

fn main() -> ExitCode {
    let args = Args::parse();
    let port = match args.port {
        Some(p) => p,
        None => match free_port() {
            Ok(p) => p,
            Err(e) => {
                eprintln!("hcomm-run: cannot find a free port: {e}");
                return ExitCode::from(2);
            }
        },
    };
    let grace = Duration::try_from_secs_f64(args.grace).unwrap_or(Duration::from_secs(5));
    let secret = match secret::for_job(std::env::var_os(secret::SECRET_VAR).as_deref()) {
        Ok(s) => s,
        Err(e) => {
            eprintln!("hcomm-run: {e}");
            return ExitCode::from(2);
        }
    };
    let job = children::Job {
        n: args.n as usize,
        port,
        command: &args.command,
        grace,
        secret,
    };
    match children::run(&job) {
        Ok(code) => ExitCode::from(code),
        Err(message) => {
            eprintln!("hcomm-run: {message}");
            ExitCode::from(1)
        }
    }
}

/// A port nobody listens on now (the kernel's choice for port 0).
fn free_port() -> std::io::Result<u16> {
    Ok(TcpListener::bind("127.0.0.1:0")?.local_addr()?.port())
}
