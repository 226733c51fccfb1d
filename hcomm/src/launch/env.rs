//! What a launcher tells each process: `HCOMM_RANK`, `HCOMM_WORLD_SIZE`,
//! `HCOMM_MASTER_ADDR`, `HCOMM_MASTER_PORT` (or torchrun's `RANK`,
//! `WORLD_SIZE`, `MASTER_ADDR`, `MASTER_PORT` when those are unset),
//! `LOCAL_RANK` (default: the rank) for the device index, `HCOMM_TRANSPORT`,
//! and where the rendezvous store listens.
//!
//! # The store's port under torchrun
//!
//! torchrun's agent serves its own store on `MASTER_PORT` (with its default
//! rendezvous and with `--standalone`), and tells its workers so with
//! `TORCHELASTIC_USE_AGENT_STORE=True`; every worker of torchrun has
//! `TORCHELASTIC_RUN_ID`. When either is set and the port came from
//! `MASTER_PORT` (not `HCOMM_MASTER_PORT`), rank 0 serves our store on the
//! first free port of the [`STORE_PORTS`] ports after `MASTER_PORT`, and
//! the other ranks try them in order: a port where no store answers, or
//! one of another job (the handshake proves the job; the job's identity
//! covers torchrun's run id and `MASTER_ADDR:MASTER_PORT`), is passed over.

use std::ffi::OsString;

pub use crate::backend::host::proc::Transport;
use crate::error::{Error, Result};
pub(crate) use crate::options::text;

/// [`text`] of this process's variable `name`.
pub(crate) fn var(name: &str) -> Result<Option<String>> {
    text(name, std::env::var_os(name))
}

/// The launcher variables [`JobEnv::from_env`] reads, ours and torchrun's.
const JOB_VARS: [&str; 13] = [
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
    STORE_FD_VAR,
    "TORCHELASTIC_USE_AGENT_STORE",
    "TORCHELASTIC_RUN_ID",
];

/// The variable by which a launcher hands rank 0 the store's listening
/// socket, bound to the job's port already (`hcomm-run` does).
pub(crate) const STORE_FD_VAR: &str = "HCOMM_STORE_FD";

/// How many ports after torchrun's `MASTER_PORT` our store may take (see
/// the module's documentation).
pub(crate) const STORE_PORTS: u16 = 32;

/// Where rank 0 serves the rendezvous store.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum StorePlace {
    /// On the job's port.
    Port,
    /// On the listening socket the launcher handed over (file descriptor).
    Inherited(i32),
    /// On the first free of the 32 ports after the job's port,
    /// which torchrun's agent store holds.
    AfterAgentStore,
}

/// This process's place in a job of one process per rank, as the launcher's
/// environment variables describe it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct JobEnv {
    /// This process's rank, in `0..world`.
    pub rank: usize,
    /// The number of processes of the job.
    pub world: usize,
    /// The device index on this host (`LOCAL_RANK`).
    pub local_rank: usize,
    /// The host of rank 0, which serves the rendezvous store.
    pub master_addr: String,
    /// The store's port.
    pub master_port: u16,
    /// The variable the world size came from (for messages).
    pub world_var: &'static str,
    /// The variable the rank came from (for messages).
    pub rank_var: &'static str,
    /// `HCOMM_TRANSPORT`.
    pub transport: Transport,
    /// Where rank 0 serves the rendezvous store.
    pub store: StorePlace,
}

/// A variable of ours, else the torchrun one.
fn lookup(
    get: &impl Fn(&str) -> Option<String>,
    ours: &'static str,
    torch: &'static str,
) -> Option<(&'static str, String)> {
    [ours, torch]
        .into_iter()
        .find_map(|name| get(name).filter(|v| !v.trim().is_empty()).map(|v| (name, v)))
}

fn number<T: std::str::FromStr>(name: &str, value: &str, what: &str) -> Result<T> {
    value.trim().parse().map_err(|_| Error::Config {
        message: format!("`{name}={}`: expected {what}", value.escape_debug()),
    })
}

fn required(
    get: &impl Fn(&str) -> Option<String>,
    ours: &'static str,
    torch: &'static str,
) -> Result<(&'static str, String)> {
    lookup(get, ours, torch).ok_or_else(|| Error::Config {
        message: format!(
            "neither `{ours}` nor `{torch}` is set; hint: start the program with `hcomm-run -n N`, torchrun, or set \
             HCOMM_RANK, HCOMM_WORLD_SIZE, HCOMM_MASTER_ADDR and HCOMM_MASTER_PORT"
        ),
    })
}

impl JobEnv {
    /// Reads the job from this process's environment. A variable that is
    /// not UTF-8 is an [`Error::Config`] naming it, as is one that does not
    /// parse.
    pub fn from_env() -> Result<JobEnv> {
        JobEnv::from_os_vars(|name| std::env::var_os(name))
    }

    /// [`JobEnv::from_vars`] over raw values, which may not be UTF-8.
    pub(crate) fn from_os_vars(get: impl Fn(&str) -> Option<OsString>) -> Result<JobEnv> {
        let mut values = Vec::with_capacity(JOB_VARS.len());
        for name in JOB_VARS {
            values.push((name, text(name, get(name))?));
        }
        JobEnv::from_vars(|name| values.iter().find(|(n, _)| *n == name).and_then(|(_, v)| v.clone()))
    }

    /// Reads the job from the variables `get` returns.
    pub fn from_vars(get: impl Fn(&str) -> Option<String>) -> Result<JobEnv> {
        let (rank_var, rank) = required(&get, "HCOMM_RANK", "RANK")?;
        let rank: usize = number(rank_var, &rank, "a rank number")?;
        let (world_var, world) = required(&get, "HCOMM_WORLD_SIZE", "WORLD_SIZE")?;
        let world: usize = number(world_var, &world, "a number of processes")?;
        if world == 0 {
            return Err(Error::Config {
                message: format!("`{world_var}=0`: a job needs at least one process"),
            });
        }
        if rank >= world {
            return Err(Error::Config {
                message: format!("`{rank_var}={rank}` is out of range for `{world_var}={world}`"),
            });
        }
        let (addr_var, master_addr) = required(&get, "HCOMM_MASTER_ADDR", "MASTER_ADDR")?;
        if master_addr.trim().is_empty() {
            return Err(Error::Config {
                message: format!("`{addr_var}` is empty"),
            });
        }
        if master_addr.trim().chars().any(|c| c.is_whitespace() || c.is_control()) {
            return Err(Error::Config {
                message: format!(
                    "`{addr_var}={}`: expected a host name or address",
                    master_addr.escape_debug()
                ),
            });
        }
        let (port_var, port) = required(&get, "HCOMM_MASTER_PORT", "MASTER_PORT")?;
        let master_port: u16 = number(port_var, &port, "a TCP port number")?;
        let local_rank = match get("LOCAL_RANK").filter(|v| !v.trim().is_empty()) {
            Some(v) => number("LOCAL_RANK", &v, "a device index")?,
            None => rank,
        };
        let transport = match get("HCOMM_TRANSPORT") {
            None => Transport::Shm,
            Some(v) => match v.trim().to_ascii_lowercase().as_str() {
                "" | "default" | "auto" | "shm" => Transport::Shm,
                "cma" => Transport::Cma,
                "tcp" => Transport::Tcp,
                _ => {
                    return Err(Error::Config {
                        message: format!(
                            "`HCOMM_TRANSPORT={}` is not a transport; hint: use `shm` (the default), `cma` or `tcp`",
                            v.escape_debug()
                        ),
                    })
                }
            },
        };
        let store = store_place(&get, port_var, rank)?;
        Ok(JobEnv {
            rank,
            world,
            local_rank,
            master_addr: master_addr.trim().to_owned(),
            master_port,
            world_var,
            rank_var,
            transport,
            store,
        })
    }

    /// `host:port` of the rendezvous store.
    pub fn store_addr(&self) -> String {
        if self.master_addr.contains(':') && !self.master_addr.starts_with('[') {
            format!("[{}]:{}", self.master_addr, self.master_port)
        } else {
            format!("{}:{}", self.master_addr, self.master_port)
        }
    }
}

/// Where rank 0 serves the store: on the socket `HCOMM_STORE_FD` names
/// (rank 0 only; at least 3), else past torchrun's agent store when the
/// port came from torchrun's `MASTER_PORT` (see the module's
/// documentation), else on the port.
fn store_place(get: &impl Fn(&str) -> Option<String>, port_var: &str, rank: usize) -> Result<StorePlace> {
    if let Some(v) = get(STORE_FD_VAR) {
        let fd = v
            .trim()
            .parse::<i32>()
            .ok()
            .filter(|&fd| fd >= 3)
            .ok_or_else(|| Error::Config {
                message: format!(
                    "`{STORE_FD_VAR}={}`: expected the number of an open listening socket (3 or more); hint: only a \
                 launcher sets it",
                    v.escape_debug()
                ),
            })?;
        if rank == 0 {
            return Ok(StorePlace::Inherited(fd));
        }
    }
    let agent = get("TORCHELASTIC_USE_AGENT_STORE").is_some_and(|v| v.trim().eq_ignore_ascii_case("true"));
    if port_var == "MASTER_PORT" && (agent || get("TORCHELASTIC_RUN_ID").is_some()) {
        return Ok(StorePlace::AfterAgentStore);
    }
    Ok(StorePlace::Port)
}

/// This process's rank as far as the environment says, for messages of
/// errors raised before the job is known (0 when unknown).
pub(crate) fn rank_hint() -> usize {
    ["HCOMM_RANK", "RANK"]
        .into_iter()
        .find_map(|n| std::env::var(n).ok()?.trim().parse().ok())
        .unwrap_or(0)
}

#[cfg(test)]
mod tests {
    use std::collections::HashMap;

    use super::*;

    fn job(vars: &[(&str, &str)]) -> Result<JobEnv> {
        let map: HashMap<String, String> = vars.iter().map(|(k, v)| ((*k).to_owned(), (*v).to_owned())).collect();
        JobEnv::from_vars(|n| map.get(n).cloned())
    }

    fn config_message(r: Result<JobEnv>) -> String {
        match r {
            Err(Error::Config { message }) => message,
            other => panic!("expected a configuration error, got {other:?}"),
        }
    }

    #[test]
    fn ours_win_over_torchrun_and_local_rank_defaults_to_the_rank() {
        let j = job(&[
            ("HCOMM_RANK", "1"),
            ("RANK", "0"),
            ("WORLD_SIZE", "4"),
            ("MASTER_ADDR", "127.0.0.1"),
            ("MASTER_PORT", "29500"),
        ])
        .unwrap();
        assert_eq!((j.rank, j.world, j.local_rank, j.master_port), (1, 4, 1, 29500));
        assert_eq!((j.rank_var, j.world_var), ("HCOMM_RANK", "WORLD_SIZE"));
        assert_eq!(j.store_addr(), "127.0.0.1:29500");
        let j = job(&[
            ("RANK", "3"),
            ("LOCAL_RANK", "1"),
            ("WORLD_SIZE", "4"),
            ("MASTER_ADDR", "::1"),
            ("MASTER_PORT", "1"),
        ])
        .unwrap();
        assert_eq!((j.rank, j.local_rank), (3, 1));
        assert_eq!(j.store_addr(), "[::1]:1");
    }

    #[test]
    fn bad_variables_are_errors_naming_the_variable_and_value() {
        let base = [("MASTER_ADDR", "h"), ("MASTER_PORT", "5")];
        let with = |extra: &[(&'static str, &'static str)]| {
            let mut v = base.to_vec();
            v.extend_from_slice(extra);
            job(&v)
        };
        assert!(config_message(with(&[("WORLD_SIZE", "2")])).contains("`HCOMM_RANK` nor `RANK`"));
        assert!(config_message(with(&[("RANK", "x"), ("WORLD_SIZE", "2")])).contains("`RANK=x`"));
        assert!(config_message(with(&[("RANK", "0"), ("HCOMM_WORLD_SIZE", "two")])).contains("`HCOMM_WORLD_SIZE=two`"));
        assert!(config_message(with(&[("RANK", "2"), ("WORLD_SIZE", "2")]))
            .contains("`RANK=2` is out of range for `WORLD_SIZE=2`"));
        assert!(config_message(with(&[("RANK", "0"), ("WORLD_SIZE", "0")])).contains("`WORLD_SIZE=0`"));
        assert!(config_message(job(&[
            ("RANK", "0"),
            ("WORLD_SIZE", "1"),
            ("MASTER_ADDR", "h"),
            ("MASTER_PORT", "99999")
        ]))
        .contains("`MASTER_PORT=99999`"));
        assert!(
            config_message(job(&[("RANK", "0"), ("WORLD_SIZE", "1"), ("MASTER_PORT", "1")])).contains("MASTER_ADDR")
        );
        assert!(
            config_message(with(&[("RANK", "0"), ("WORLD_SIZE", "1"), ("LOCAL_RANK", "-1")]))
                .contains("`LOCAL_RANK=-1`")
        );
    }

    #[test]
    fn the_store_goes_past_torchruns_own_and_the_transport_is_parsed() {
        let base = [
            ("RANK", "1"),
            ("WORLD_SIZE", "2"),
            ("MASTER_ADDR", "127.0.0.1"),
            ("MASTER_PORT", "29500"),
        ];
        let with = |extra: &[(&'static str, &'static str)]| {
            let mut v = base.to_vec();
            v.extend_from_slice(extra);
            job(&v)
        };
        assert_eq!(with(&[]).unwrap().store, StorePlace::Port);
        assert_eq!(
            with(&[("TORCHELASTIC_RUN_ID", "none")]).unwrap().store,
            StorePlace::AfterAgentStore
        );
        assert_eq!(
            with(&[("TORCHELASTIC_USE_AGENT_STORE", "True")]).unwrap().store,
            StorePlace::AfterAgentStore
        );
        // Our port wins, and it is the job's own.
        assert_eq!(
            with(&[("TORCHELASTIC_RUN_ID", "x"), ("HCOMM_MASTER_PORT", "4000")])
                .unwrap()
                .store,
            StorePlace::Port
        );
        // The inherited socket is rank 0's only.
        assert_eq!(with(&[("HCOMM_STORE_FD", "5")]).unwrap().store, StorePlace::Port);
        let zero = job(&[
            ("RANK", "0"),
            ("WORLD_SIZE", "2"),
            ("MASTER_ADDR", "127.0.0.1"),
            ("MASTER_PORT", "29500"),
            ("HCOMM_STORE_FD", "7"),
        ]);
        assert_eq!(zero.unwrap().store, StorePlace::Inherited(7));
        assert!(config_message(with(&[("HCOMM_STORE_FD", "1")])).contains("`HCOMM_STORE_FD=1`"));
        assert_eq!(with(&[]).unwrap().transport, Transport::Shm);
        assert_eq!(with(&[("HCOMM_TRANSPORT", " TCP ")]).unwrap().transport, Transport::Tcp);
        assert_eq!(with(&[("HCOMM_TRANSPORT", "cma")]).unwrap().transport, Transport::Cma);
        assert_eq!(with(&[("HCOMM_TRANSPORT", "shm")]).unwrap().transport, Transport::Shm);
        assert!(config_message(with(&[("HCOMM_TRANSPORT", "pigeon")]))
            .contains("`HCOMM_TRANSPORT=pigeon` is not a transport; hint: use `shm` (the default), `cma` or `tcp`"));
    }

    fn os(raw: &[u8]) -> OsString {
        use std::os::unix::ffi::OsStrExt;
        std::ffi::OsStr::from_bytes(raw).to_owned()
    }

    /// Hostile values of each launcher variable: huge, negative, NaN, empty,
    /// blank, control characters, non-UTF-8. Each is accepted with a sane
    /// value or is a configuration error naming the variable; none panics.
    #[test]
    fn hostile_values_are_config_errors_naming_the_variable() {
        let hostile: Vec<OsString> = [
            &b"1e20"[..],
            b"18446744073709551616",
            b"99999999999999999999999",
            b"-1",
            b"NaN",
            b"inf",
            b"",
            b"   ",
            b"0x10",
            b"1\n2",
            b"\xff\xfe",
            b"h\xc3",
        ]
        .iter()
        .map(|b| os(b))
        .collect();
        let base = [
            ("RANK", "1"),
            ("WORLD_SIZE", "4"),
            ("MASTER_ADDR", "127.0.0.1"),
            ("MASTER_PORT", "29500"),
        ];
        for name in JOB_VARS {
            for value in &hostile {
                let vars: HashMap<&str, OsString> = base
                    .iter()
                    .map(|(k, v)| (*k, OsString::from(*v)))
                    .chain([(name, value.clone())])
                    .collect();
                let torch_twin = name.strip_prefix("HCOMM_").filter(|t| vars.contains_key(t));
                match JobEnv::from_os_vars(|n| vars.get(n).cloned()) {
                    Ok(j) => {
                        assert!(j.rank < j.world, "{name}={value:?}: {j:?}");
                        assert!(!j.master_addr.is_empty() && !j.master_addr.contains(char::is_whitespace));
                    }
                    Err(Error::Config { message }) => {
                        let named = message.contains(name) || torch_twin.is_some_and(|t| message.contains(t));
                        assert!(named, "{name}={value:?}: {message}");
                    }
                    Err(e) => panic!("{name}={value:?}: expected a configuration error, got {e}"),
                }
            }
        }
        let not_utf8 = JobEnv::from_os_vars(|n| match n {
            "RANK" => Some(os(b"\xff")),
            _ => base.iter().find(|(k, _)| *k == n).map(|(_, v)| OsString::from(*v)),
        });
        assert!(config_message(not_utf8).contains("`RANK` is not UTF-8"));
    }
}
