//! One process per rank: [`init_from_env`] meets the job's other processes
//! through the rendezvous store (rank 0 serves it) and returns this
//! process's world communicator on the backend `HCOMM_BACKEND` names.

use std::net::{IpAddr, TcpListener};
use std::sync::Arc;
use std::time::{Duration, Instant};

use super::bind::{allowed_cores, bind_current_thread, Binding};
use super::env::{JobEnv, StorePlace, Transport, STORE_FD_VAR, STORE_PORTS};
use super::store::Store;
use super::{hccl, nccl, BackendKind};
use crate::auth::JobSecret;
use crate::backend::host::proc::{self, Directory};
use crate::backend::host::wait;
use crate::comm::Comm;
use crate::error::{Error, Result};
use crate::options::{deadline_after, CommOptions};
use crate::topology::Placement;

/// Set by a process that cannot join, with its reason, so the others stop
/// waiting for it.
const ABORT_KEY: &str = "hcomm/abort";

/// This process's communicator in a job of one process per rank, on the
/// backend `HCOMM_BACKEND` names (default `host`), configured by the
/// launcher's variables ([`JobEnv::from_env`]) and the communicator options
/// of the environment ([`CommOptions::from_env`]). Joining waits for the
/// other processes at most the communicator's timeout (`HCOMM_TIMEOUT`).
///
/// The processes prove to each other that they know the job's secret
/// (`HCOMM_JOB_SECRET`, which `hcomm-run` sets; see [`JobSecret::from_env`]):
/// a process of another job, or of nobody's, can neither join nor change
/// the rendezvous store.
///
/// On the host backend the processes talk directly to each other (reading
/// each other's memory on one host). On HCCL rank 0's `HcclGetRootInfo`
/// reaches every process through the store and each joins with
/// `HcclCommInitRootInfo` on device `LOCAL_RANK`; on NCCL the same with the
/// unique id and `ncclCommInitRank`.
///
/// ```no_run
/// // Started by `hcomm-run -n 4 -- prog` or torchrun.
/// let comm = hcomm::init_from_env()?;
/// let mut x = [comm.rank() as f32];
/// comm.all_reduce_in_place(&mut x, hcomm::ReduceOp::Sum)?;
/// # Ok::<(), hcomm::Error>(())
/// ```
pub fn init_from_env() -> Result<Comm> {
    init_job(
        BackendKind::from_env()?,
        &JobEnv::from_env()?,
        &CommOptions::from_env()?,
    )
}

/// [`init_from_env`] with the backend, job and options given explicitly;
/// the secret still comes from `HCOMM_JOB_SECRET` ([`JobSecret::from_env`]).
pub fn init_job(kind: BackendKind, job: &JobEnv, options: &CommOptions) -> Result<Comm> {
    init_job_with(kind, job, options, &JobSecret::from_env()?)
}

/// [`init_job`] with the job's secret given explicitly.
pub fn init_job_with(kind: BackendKind, job: &JobEnv, options: &CommOptions, secret: &JobSecret) -> Result<Comm> {
    let rendezvous = Rendezvous::join(job, options.timeout, secret)?;
    let result = match kind {
        BackendKind::Host => connect_host(&rendezvous, job, options),
        BackendKind::Hccl => rendezvous.device_comm(
            "hccl/root_info",
            || hccl::root_info(job.local_rank as i32).map(|r| r.as_bytes().to_vec()),
            |bytes| {
                let root = hccl::RootInfo::from_bytes(bytes).ok_or_else(|| bad_id("HCCL root info", bytes.len()))?;
                hccl::init_rank(job.world, job.rank, &root, job.local_rank as i32, options)
            },
        ),
        BackendKind::Nccl => rendezvous.device_comm(
            "nccl/unique_id",
            || nccl::unique_id().map(|id| id.as_bytes().to_vec()),
            |bytes| {
                let id = nccl::UniqueId::from_bytes(bytes).ok_or_else(|| bad_id("NCCL unique id", bytes.len()))?;
                nccl::init_rank(job.world, job.rank, &id, job.local_rank as i32, options)
            },
        ),
    };
    match result {
        Ok(comm) => {
            rendezvous.leave();
            Ok(comm)
        }
        Err(e) => {
            rendezvous.report(&e);
            Err(e)
        }
    }
}

/// This process's world on the host backend; the process is bound where
/// `HCOMM_BIND` allows: with none of the processes of this host placed by
/// their launcher, the cores it may use are split into one block per
/// process in rank order, or shared evenly by consecutive processes where
/// they outnumber the cores (see `bind.rs`).
fn connect_host(rendezvous: &Rendezvous, job: &JobEnv, options: &CommOptions) -> Result<Comm> {
    let binding = Binding::from_env()?;
    let cores = allowed_cores().unwrap_or_default();
    // Counted while this thread still has all of the process's cores.
    wait::cores();
    let (backend, here) = proc::connect(
        rendezvous,
        job.rank,
        job.world,
        &options.topology,
        options.timeout,
        &cores,
        &rendezvous.secret,
    )?;
    if let Some((block, shared)) = binding.process_cores(&cores, here) {
        if bind_current_thread(&block) {
            if !shared {
                wait::note_own_core();
            }
            tracing::debug!(rank = job.rank, cores = ?block, shared, "bound");
        }
    }
    let per_host = if here.count >= job.world {
        job.world
    } else {
        ranks_per_host(job.world)
    };
    let topology = options
        .topology
        .clone()
        .detected(Placement::Processes { per_host }, job.world);
    Ok(Comm::from_backend_on(backend, options, topology))
}

/// Ranks per host of a job on several hosts, the same on every rank: torchrun's
/// `LOCAL_WORLD_SIZE` where it divides the world (torchrun starts that many
/// consecutive ranks per host), else 1 (the detected topology is then
/// one level of TCP between ranks).
fn ranks_per_host(world: usize) -> usize {
    std::env::var("LOCAL_WORLD_SIZE")
        .ok()
        .and_then(|v| v.trim().parse::<usize>().ok())
        .filter(|&n| n > 0 && world.is_multiple_of(n))
        .unwrap_or(1)
}

fn bad_id(what: &str, len: usize) -> Error {
    Error::Config {
        message: format!("the {what} in the rendezvous store has {len} bytes, not the library's size"),
    }
}

/// The store as this process joined it.
struct Rendezvous {
    store: Arc<Store>,
    rank: usize,
    world: usize,
    timeout: Duration,
    deadline: Instant,
    secret: JobSecret,
    transport: Transport,
}

impl Rendezvous {
    /// Serves (rank 0) or reaches the store, claims this rank and checks
    /// that every process agrees on the world size.
    fn join(job: &JobEnv, timeout: Duration, secret: &JobSecret) -> Result<Rendezvous> {
        let deadline = deadline_after(timeout);
        let secret = match job.store {
            // Ports after torchrun's may hold the store of another job
            // with the same run id (or none): the place tells them apart.
            StorePlace::AfterAgentStore => secret.at_place(&job.store_addr()),
            StorePlace::Port | StorePlace::Inherited(_) => secret.clone(),
        };
        let store = if job.rank == 0 {
            Store::serve_on(listen(job)?, &secret, timeout)?
        } else if job.store == StorePlace::AfterAgentStore {
            connect_after_agent_store(job, deadline, timeout, &secret)?
        } else {
            Store::connect_with(&job.store_addr(), timeout, &secret)?
        };
        let r = Rendezvous {
            store: Arc::new(store),
            rank: job.rank,
            world: job.world,
            timeout,
            deadline,
            secret,
            transport: job.transport,
        };
        if let Err(e) = r.check(job) {
            r.report(&e);
            return Err(e);
        }
        Ok(r)
    }

    fn check(&self, job: &JobEnv) -> Result<()> {
        let me = format!("pid {} on {}", std::process::id(), proc::hostname());
        if let Err(other) = self
            .store
            .compare_set(&format!("hcomm/rank/{}", job.rank), None, me.as_bytes())?
        {
            let other = other
                .map(|o| String::from_utf8_lossy(&o).into_owned())
                .unwrap_or_default();
            return Err(Error::Config {
                message: format!(
                    "`{}={}` is claimed by two processes ({other} and {me}); hint: give each process its own rank",
                    job.rank_var, job.rank
                ),
            });
        }
        let world = format!("{}={}", job.world_var, job.world);
        if job.rank == 0 {
            self.store.set("hcomm/world", world.as_bytes())?;
            return Ok(());
        }
        let theirs = self.lookup("hcomm/world", self.deadline)?;
        let theirs_world = String::from_utf8_lossy(&theirs).into_owned();
        let count = theirs_world.rsplit('=').next().and_then(|n| n.parse::<usize>().ok());
        if count != Some(job.world) {
            return Err(Error::Config {
                message: format!(
                    "rank {} has `{world}` but rank 0 has `{theirs_world}`; hint: start every process with the same \
                     world size",
                    job.rank
                ),
            });
        }
        Ok(())
    }

    /// Tells every process waiting in the store that this one failed.
    fn report(&self, e: &Error) {
        let message = format!("rank {} could not join: {e}", self.rank);
        let _ = self.store.compare_set(ABORT_KEY, None, message.as_bytes());
    }

    /// Done with the store: rank 0 keeps serving until the others let go.
    fn leave(self) {
        if self.rank == 0 && self.world > 1 {
            self.store.wait_for_clients_to_leave(self.timeout);
        }
    }

    /// A device communicator whose id rank 0 makes with `make` and every
    /// rank joins with `join`.
    fn device_comm(
        &self,
        key: &str,
        make: impl FnOnce() -> Result<Vec<u8>>,
        join: impl FnOnce(&[u8]) -> Result<Comm>,
    ) -> Result<Comm> {
        let key = format!("hcomm/{key}");
        let bytes = if self.rank == 0 {
            let bytes = make()?;
            self.store.set(&key, &bytes)?;
            bytes
        } else {
            self.lookup(&key, self.deadline)?
        };
        join(&bytes)
    }
}

impl Directory for Rendezvous {
    fn publish(&self, key: &str, value: &[u8]) -> Result<()> {
        self.store.set(key, value)
    }

    /// Waits for `key` unless a process reports that it cannot join.
    fn lookup(&self, key: &str, deadline: Instant) -> Result<Vec<u8>> {
        let wait = deadline.saturating_duration_since(Instant::now());
        match self.store.get_any(&[key, ABORT_KEY], wait) {
            Ok((0, value)) => Ok(value),
            Ok((_, reason)) => Err(abort_error(&reason)),
            Err(Error::Timeout { operation, waited, .. }) => Err(Error::Timeout {
                operation,
                rank: self.rank,
                waited,
                limit: self.timeout,
            }),
            Err(e) => Err(e),
        }
    }

    fn local_ip(&self) -> IpAddr {
        self.store.local_ip()
    }

    fn transport(&self) -> Transport {
        self.transport
    }

    fn gave_up(&self) -> Option<Error> {
        match self.store.get(ABORT_KEY, Duration::ZERO) {
            Ok(reason) => Some(abort_error(&reason)),
            Err(Error::Timeout { .. }) => None,
            // The store is gone: rank 0 gave up joining.
            Err(e) => Some(Error::PeerFailed {
                rank: 0,
                reason: format!("it stopped serving the rendezvous store ({e})"),
            }),
        }
    }
}

/// The address rank 0 serves the store on: all interfaces unless the job's
/// host is this one's loopback.
fn bind_addr(job: &JobEnv, port: u16) -> String {
    let loopback = job.master_addr == "localhost" || job.master_addr.parse::<IpAddr>().is_ok_and(|ip| ip.is_loopback());
    if loopback {
        let mut local = job.clone();
        local.master_port = port;
        local.store_addr()
    } else {
        format!("0.0.0.0:{port}")
    }
}

/// Rank 0's listening socket for the store (see [`StorePlace`]).
fn listen(job: &JobEnv) -> Result<TcpListener> {
    let bind = |port: u16| {
        let addr = bind_addr(job, port);
        TcpListener::bind(&addr).map_err(|e| (addr, e))
    };
    match job.store {
        StorePlace::Port => bind(job.master_port).map_err(|(addr, e)| Error::Config {
            message: format!(
                "cannot listen on {addr} for the rendezvous store: {e}; hint: choose a free port with \
                 `HCOMM_MASTER_PORT`, or start the job with `hcomm-run`, which holds one for it"
            ),
        }),
        StorePlace::Inherited(fd) => inherited_listener(fd, job.master_port),
        StorePlace::AfterAgentStore => {
            let mut last = None;
            for port in store_ports(job.master_port) {
                match bind(port) {
                    Ok(l) => return Ok(l),
                    Err(e) => last = Some(e),
                }
            }
            let (addr, e) = last.unwrap_or_else(|| (job.store_addr(), std::io::ErrorKind::AddrInUse.into()));
            Err(Error::Config {
                message: format!(
                    "torchrun's store holds `MASTER_PORT={}` and none of the {STORE_PORTS} ports after it is free for \
                     the rendezvous store (the last, {addr}: {e}); hint: set `HCOMM_MASTER_PORT` to a free port",
                    job.master_port
                ),
            })
        }
    }
}

/// The ports after torchrun's `MASTER_PORT` the store may take, in order.
fn store_ports(master_port: u16) -> impl Iterator<Item = u16> {
    (1..=STORE_PORTS).filter_map(move |k| master_port.checked_add(k))
}

/// Set once the inherited socket is taken over.
static INHERITED_TAKEN: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);

/// The listening socket a launcher handed over as file descriptor `fd`,
/// once it is checked to be a listening TCP socket on `port`.
fn inherited_listener(fd: i32, port: u16) -> Result<TcpListener> {
    let bad = |why: &str| Error::Config {
        message: format!("`{STORE_FD_VAR}={fd}`: {why}; hint: only a launcher sets it, for rank 0"),
    };
    let mut listening: libc::c_int = 0;
    let mut len = libc::socklen_t::try_from(size_of::<libc::c_int>()).unwrap_or(4);
    // SAFETY: `listening` and `len` are valid, writable, and `len` is the
    // size of `listening`; any `fd` is safe to ask (a closed or non-socket
    // one fails with `EBADF` or `ENOTSOCK`).
    let rc = unsafe {
        libc::getsockopt(
            fd,
            libc::SOL_SOCKET,
            libc::SO_ACCEPTCONN,
            (&raw mut listening).cast(),
            &raw mut len,
        )
    };
    if rc != 0 {
        return Err(bad(&format!(
            "not an open socket ({})",
            std::io::Error::last_os_error()
        )));
    }
    if listening == 0 {
        return Err(bad("the socket does not listen"));
    }
    if INHERITED_TAKEN.swap(true, std::sync::atomic::Ordering::SeqCst) {
        return Err(bad("this process took the socket over already, for an earlier job"));
    }
    // SAFETY: `fd` is an open listening socket (checked above) that the
    // launcher handed to this process alone; the listener takes it over
    // and closes it when dropped, once per process (`INHERITED_TAKEN`).
    let listener = unsafe { <TcpListener as std::os::fd::FromRawFd>::from_raw_fd(fd) };
    // SAFETY: `fd` is open (the listener owns it); children started later
    // must not inherit the job's port.
    unsafe { libc::fcntl(fd, libc::F_SETFD, libc::FD_CLOEXEC) };
    let local = listener.local_addr().map_err(|e| bad(&format!("no address ({e})")))?;
    if local.port() != port {
        return Err(bad(&format!(
            "it listens on port {}, not the job's port {port}",
            local.port()
        )));
    }
    Ok(listener)
}

/// The store served past torchrun's agent store: the first of the ports
/// after `MASTER_PORT` where the store of this job (`secret`) answers,
/// tried in order until `deadline`.
fn connect_after_agent_store(job: &JobEnv, deadline: Instant, timeout: Duration, secret: &JobSecret) -> Result<Store> {
    let mut tried = Vec::new();
    loop {
        for port in store_ports(job.master_port) {
            let mut at = job.clone();
            at.master_port = port;
            // A short try per port: a free port refuses at once; one of
            // another job fails its handshake.
            match Store::connect_within(
                &at.store_addr(),
                Duration::from_millis(200),
                (deadline, timeout),
                secret,
            ) {
                Ok(store) => return Ok(store),
                Err(e) => {
                    if tried.len() < 3 {
                        tried.push(format!("{}: {e}", at.store_addr()));
                    }
                }
            }
            if Instant::now() >= deadline {
                return Err(Error::Timeout {
                    operation: format!(
                        "looking for the rendezvous store on the {STORE_PORTS} ports after torchrun's `MASTER_PORT={}` \
                         (first failures: {})",
                        job.master_port,
                        tried.join("; ")
                    ),
                    rank: job.rank,
                    waited: timeout,
                    limit: timeout,
                });
            }
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// The error of a rank that waits for one that gave up joining.
fn abort_error(reason: &[u8]) -> Error {
    Error::PeerFailed {
        rank: reason_rank(reason).unwrap_or(0),
        reason: String::from_utf8_lossy(reason).into_owned(),
    }
}

/// The rank an abort message (`rank R could not join: ...`) names.
fn reason_rank(reason: &[u8]) -> Option<usize> {
    String::from_utf8_lossy(reason)
        .strip_prefix("rank ")?
        .split(' ')
        .next()?
        .parse()
        .ok()
}
