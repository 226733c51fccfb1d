//! Hostile values of every `HCOMM_*` and torchrun variable hcomm reads
//! (huge, negative, NaN, infinite, empty, malformed, not UTF-8), set in
//! the real environment: each is accepted with a sane value or is an
//! `Error::Config` naming the variable; none panics. One test, so that no
//! other test of this binary reads the environment meanwhile.

#![allow(
    clippy::unnecessary_debug_formatting,
    reason = "values are shown escaped: they hold newlines and bytes that are not UTF-8"
)]

use std::ffi::OsString;
use std::os::unix::ffi::OsStringExt;
use std::time::Duration;

use hcomm::{BackendKind, CommOptions, Error, JobEnv, ReduceOp, MAX_TIMEOUT};

fn hostile() -> Vec<OsString> {
    let text = [
        "1e20",
        "1e19",
        "18446744073709551615",
        "18446744073709551616",
        "-1",
        "-1e20",
        "NaN",
        "inf",
        "-inf",
        "0",
        "1e-12",
        "",
        " ",
        "=",
        "all_reduce=",
        "all_reduce=ring,,",
        "custom:0",
        "custom:99999999999999999999",
        "tcp",
        "none",
        "a\nb",
    ];
    let mut all: Vec<OsString> = text.iter().map(OsString::from).collect();
    all.push(OsString::from_vec(vec![0xff, 0xfe]));
    all.push(OsString::from_vec(b"1\xc3".to_vec()));
    all
}

/// `Ok` with sane settings, or a configuration error naming `name`.
fn sane_or_named<T: std::fmt::Debug>(name: &str, value: &OsString, r: hcomm::Result<T>, sane: impl Fn(&T) -> bool) {
    match r {
        Ok(v) => assert!(sane(&v), "{name}={value:?}: accepted as {v:?}"),
        Err(Error::Config { message }) => assert!(message.contains(name), "{name}={value:?}: {message}"),
        Err(e) => panic!("{name}={value:?}: expected Ok or a configuration error, got {e}"),
    }
}

fn options_sane(o: &CommOptions) -> bool {
    !o.timeout.is_zero() && o.timeout <= MAX_TIMEOUT && o.segment_bytes > 0
}

#[test]
fn hostile_environment_values_are_accepted_sanely_or_named_config_errors() {
    for name in [
        "HCOMM_TIMEOUT",
        "HCOMM_SEGMENT_BYTES",
        "HCOMM_ALGO",
        "HCOMM_TOPOLOGY",
        "HCOMM_TOPOLOGY_FILE",
        "HCOMM_BACKEND",
        "HCOMM_BIND",
    ] {
        for value in hostile() {
            std::env::set_var(name, &value);
            sane_or_named(name, &value, CommOptions::from_env(), options_sane);
            sane_or_named(name, &value, BackendKind::from_env(), |_| true);
            // Everything a run reads from the environment, then a call.
            let run = hcomm::run(2, |c| {
                let mut x = [1u32; 3];
                c.all_reduce_in_place(&mut x, ReduceOp::Sum)?;
                assert_eq!(x, [2; 3]);
                Ok(c.timeout())
            });
            sane_or_named(name, &value, run, |t| {
                t.iter().all(|t| !t.is_zero() && *t <= MAX_TIMEOUT)
            });
            std::env::remove_var(name);
        }
    }

    let job = [
        ("HCOMM_RANK", "0"),
        ("HCOMM_WORLD_SIZE", "1"),
        ("HCOMM_MASTER_ADDR", "127.0.0.1"),
        ("HCOMM_MASTER_PORT", "29500"),
    ];
    for name in [
        "HCOMM_RANK",
        "RANK",
        "HCOMM_WORLD_SIZE",
        "WORLD_SIZE",
        "HCOMM_MASTER_ADDR",
        "MASTER_ADDR",
        "HCOMM_MASTER_PORT",
        "MASTER_PORT",
        "LOCAL_RANK",
        "HCOMM_TRANSPORT",
    ] {
        for value in hostile() {
            for (k, v) in job {
                std::env::set_var(k, v);
            }
            std::env::set_var(name, &value);
            let ours = name.strip_prefix("HCOMM_").map_or(name.to_owned(), str::to_owned);
            match JobEnv::from_env() {
                Ok(j) => assert!(
                    j.rank < j.world && !j.master_addr.is_empty(),
                    "{name}={value:?}: accepted as {j:?}"
                ),
                Err(Error::Config { message }) => {
                    assert!(message.contains(&ours), "{name}={value:?}: {message}");
                }
                Err(e) => panic!("{name}={value:?}: expected Ok or a configuration error, got {e}"),
            }
            for (k, _) in job {
                std::env::remove_var(k);
            }
            std::env::remove_var(name);
        }
    }

    // A huge timeout through a whole one-process job: capped, no panic.
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .unwrap();
    for huge in ["1e19", "1e20", "18446744073709551615"] {
        for (k, v) in job {
            std::env::set_var(k, v);
        }
        std::env::set_var("HCOMM_MASTER_PORT", port.to_string());
        std::env::set_var("HCOMM_TIMEOUT", huge);
        let comm = hcomm::init_from_env().unwrap_or_else(|e| panic!("HCOMM_TIMEOUT={huge}: {e}"));
        assert_eq!(comm.timeout(), MAX_TIMEOUT);
        comm.barrier().unwrap();
        drop(comm);
        for (k, _) in job {
            std::env::remove_var(k);
        }
        std::env::remove_var("HCOMM_TIMEOUT");
    }
    let set = hcomm::host::comms(1, &CommOptions::default()).unwrap().remove(0);
    set.set_timeout(Duration::MAX);
    assert_eq!(set.timeout(), MAX_TIMEOUT);
}
