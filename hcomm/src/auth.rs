//! The job's secret and what proves knowledge of it.
//!
//! Every process of a job started by `hcomm-run` gets the same fresh secret
//! in `HCOMM_JOB_SECRET`; a process that knows it can answer a challenge
//! (an HMAC-SHA-256 tag over a label and the parts of the message, each
//! length-prefixed so that no two part lists encode alike) and derive the
//! keys of the job's connections from it.
//! The secret itself never travels. A job started without a secret still
//! runs, with the all-zero key, and says once that it is unauthenticated:
//! its connections are then protected against accidents (a second job on
//! the same port, a corrupted stream), not against a process that reads
//! the library's source.
//!
//! An unauthenticated job still has an id of its own when the launcher
//! names the run: `HCOMM_JOB_ID`, else torchrun's `TORCHELASTIC_RUN_ID`,
//! is hashed into its key, so two such jobs with different ids cannot mix
//! (they tell each other apart; neither proves anything to the other).

use std::sync::atomic::{AtomicBool, Ordering};

use hmac::{Hmac, KeyInit, Mac};
use sha2::{Digest, Sha256};

use crate::error::{Error, Result};

/// The variable the secret is read from.
pub const SECRET_VAR: &str = "HCOMM_JOB_SECRET";

/// The variables that name an unauthenticated job's run, first found wins.
pub const JOB_ID_VARS: [&str; 2] = ["HCOMM_JOB_ID", "TORCHELASTIC_RUN_ID"];

/// The fewest bytes a secret may have.
const MIN_SECRET: usize = 16;

/// The length of a key, a tag and a nonce.
pub(crate) const KEY_BYTES: usize = 32;

/// A key, tag or nonce.
pub(crate) type Key = [u8; KEY_BYTES];

type HmacSha256 = Hmac<Sha256>;

/// Set once the unauthenticated warning was given.
static WARNED: AtomicBool = AtomicBool::new(false);

/// The secret every process of one job shares.
#[derive(Clone, PartialEq, Eq)]
pub struct JobSecret {
    key: Key,
    authenticated: bool,
}

impl std::fmt::Debug for JobSecret {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // Never the key.
        f.debug_struct("JobSecret")
            .field("authenticated", &self.authenticated)
            .field("job_id", &format_args!("{:016x}", self.job_id()))
            .finish_non_exhaustive()
    }
}

impl JobSecret {
    /// The secret `text` stands for (at least 16 bytes; `hcomm-run` gives
    /// 64 hexadecimal digits).
    pub fn new(text: &str) -> Result<JobSecret> {
        if text.len() < MIN_SECRET {
            return Err(Error::Config {
                message: format!(
                    "`{SECRET_VAR}` has {} bytes, fewer than {MIN_SECRET}; hint: let `hcomm-run` make one, or use 64 \
                     random hexadecimal digits",
                    text.len()
                ),
            });
        }
        let mut h = Sha256::new();
        h.update(b"hcomm job secret\0");
        h.update(text.as_bytes());
        Ok(JobSecret {
            key: h.finalize().into(),
            authenticated: true,
        })
    }

    /// The secret of a job started without one: everybody knows it.
    pub fn unauthenticated() -> JobSecret {
        JobSecret {
            key: [0; KEY_BYTES],
            authenticated: false,
        }
    }

    /// The secret of an unauthenticated job whose launcher named the run
    /// `run_id`: as public as [`JobSecret::unauthenticated`], but two runs
    /// with different ids have different job ids and keys.
    pub fn unauthenticated_run(run_id: &str) -> JobSecret {
        let mut h = Sha256::new();
        h.update(b"hcomm unauthenticated run\0");
        h.update(run_id.as_bytes());
        JobSecret {
            key: h.finalize().into(),
            authenticated: false,
        }
    }

    /// `HCOMM_JOB_SECRET`, or an unauthenticated job (said once, as a
    /// `tracing` warning) when it is unset or empty, named by the first of
    /// [`JOB_ID_VARS`] that is set.
    pub fn from_env() -> Result<JobSecret> {
        let mut secret = JobSecret::from_value(std::env::var_os(SECRET_VAR).as_deref())?;
        if !secret.authenticated {
            let run = JOB_ID_VARS
                .iter()
                .find_map(|v| std::env::var(v).ok().filter(|id| !id.trim().is_empty()));
            if let Some(run) = run {
                secret = JobSecret::unauthenticated_run(run.trim());
            }
        }
        if !secret.authenticated && !WARNED.swap(true, Ordering::Relaxed) {
            tracing::warn!(
                "`{SECRET_VAR}` is not set: this job is unauthenticated, so any local process can join it; hint: start \
                 it with `hcomm-run`, which makes a secret per job"
            );
        }
        Ok(secret)
    }

    /// The secret a variable's value gives (`None`: unset).
    pub(crate) fn from_value(value: Option<&std::ffi::OsStr>) -> Result<JobSecret> {
        match value {
            None => Ok(JobSecret::unauthenticated()),
            Some(v) => match v.to_str() {
                Some(t) if t.trim().is_empty() => Ok(JobSecret::unauthenticated()),
                Some(t) => JobSecret::new(t.trim()),
                None => Err(Error::Config {
                    message: format!("`{SECRET_VAR}` is not valid UTF-8"),
                }),
            },
        }
    }

    /// Whether the job has a secret of its own.
    pub fn is_authenticated(&self) -> bool {
        self.authenticated
    }

    /// A number that names the job without revealing the secret (two jobs
    /// with different secrets have different ids).
    pub fn job_id(&self) -> u64 {
        let t = self.tag(b"job id", &[]);
        u64::from_le_bytes([t[0], t[1], t[2], t[3], t[4], t[5], t[6], t[7]])
    }

    /// The HMAC of `parts` under this secret, for the purpose `label`.
    pub(crate) fn tag(&self, label: &[u8], parts: &[&[u8]]) -> Key {
        mac(&self.key, label, parts)
    }

    /// Whether `tag` is [`JobSecret::tag`] of the same message, compared in
    /// constant time.
    pub(crate) fn verify(&self, label: &[u8], parts: &[&[u8]], tag: &[u8]) -> bool {
        mac_verify(&self.key, label, parts, tag)
    }

    /// The secret of this job at one place (`MASTER_ADDR:MASTER_PORT` and
    /// the like): as authenticated as this one, with another job id and
    /// keys, so that two jobs that share a secret (or have none) but not
    /// the place never mix.
    pub(crate) fn at_place(&self, place: &str) -> JobSecret {
        JobSecret {
            key: self.derive(b"hcomm job place", &[place.as_bytes()]),
            authenticated: self.authenticated,
        }
    }

    /// A key for the purpose `label` bound to `parts` (a connection's
    /// nonces and ends), which only holders of the secret can compute.
    pub(crate) fn derive(&self, label: &[u8], parts: &[&[u8]]) -> Key {
        self.tag(label, parts)
    }
}

/// HMAC-SHA-256 under `key` of `label` and `parts`, each length-prefixed.
pub(crate) fn mac(key: &Key, label: &[u8], parts: &[&[u8]]) -> Key {
    // HMAC pads a key shorter than SHA-256's 64-byte block with zeros
    // (RFC 2104); padded here, it fits the block-sized constructor, which
    // cannot fail.
    let mut block = [0u8; 64];
    block[..KEY_BYTES].copy_from_slice(key);
    let mut mac = <HmacSha256 as KeyInit>::new(&block.into());
    for part in std::iter::once(label).chain(parts.iter().copied()) {
        mac.update(&(part.len() as u64).to_le_bytes());
        mac.update(part);
    }
    mac.finalize().into_bytes().into()
}

/// Whether `tag` is [`mac`] of the same message, compared in constant time.
pub(crate) fn mac_verify(key: &Key, label: &[u8], parts: &[&[u8]], tag: &[u8]) -> bool {
    let expected = mac(key, label, parts);
    tag.len() == expected.len() && expected.iter().zip(tag).fold(0u8, |acc, (a, b)| acc | (a ^ b)) == 0
}

/// Fresh random bytes (a challenge, a secret).
pub(crate) fn nonce() -> Result<Key> {
    let mut n = [0u8; KEY_BYTES];
    getrandom::fill(&mut n).map_err(|e| Error::Backend {
        backend: "host",
        message: format!("the system's random source failed: {e}"),
    })?;
    Ok(n)
}

/// A fresh secret in the form `hcomm-run` hands its ranks: 64 hexadecimal
/// digits.
pub fn generate_secret() -> Result<String> {
    Ok(nonce()?.iter().fold(String::with_capacity(2 * KEY_BYTES), |mut s, b| {
        use std::fmt::Write;
        let _ = write!(s, "{b:02x}");
        s
    }))
}

#[cfg(test)]
mod tests {
    use std::ffi::OsStr;

    use super::*;

    #[test]
    fn tags_depend_on_key_label_and_every_part() {
        let a = JobSecret::new("0123456789abcdef-a").unwrap();
        let b = JobSecret::new("0123456789abcdef-b").unwrap();
        let t = a.tag(b"hello", &[b"x", b"yz"]);
        assert!(a.verify(b"hello", &[b"x", b"yz"], &t));
        assert!(!b.verify(b"hello", &[b"x", b"yz"], &t));
        assert!(!a.verify(b"hellO", &[b"x", b"yz"], &t));
        // Length prefixes: the same bytes split differently are another message.
        assert!(!a.verify(b"hello", &[b"xy", b"z"], &t));
        assert!(!a.verify(b"hello", &[b"x", b"yz"], &t[..31]));
        assert_ne!(a.job_id(), b.job_id());
        assert_eq!(a.job_id(), JobSecret::new("0123456789abcdef-a").unwrap().job_id());
        assert_ne!(a.derive(b"link", &[b"1"]), a.derive(b"link", &[b"2"]));
        // The padded key gives what HMAC's own padding of the key does.
        let mut jefe = [0u8; KEY_BYTES];
        jefe[..4].copy_from_slice(b"Jefe");
        let mut plain = <HmacSha256 as KeyInit>::new_from_slice(&jefe).unwrap();
        for part in [&b"l"[..], b"p"] {
            plain.update(&(part.len() as u64).to_le_bytes());
            plain.update(part);
        }
        assert_eq!(mac(&jefe, b"l", &[b"p"]), <Key>::from(plain.finalize().into_bytes()));
    }

    #[test]
    fn the_variable_is_read_with_clear_errors() {
        assert!(!JobSecret::from_value(None).unwrap().is_authenticated());
        assert!(!JobSecret::from_value(Some(OsStr::new("  ")))
            .unwrap()
            .is_authenticated());
        let s = generate_secret().unwrap();
        assert_eq!(s.len(), 64);
        assert_ne!(s, generate_secret().unwrap());
        assert!(JobSecret::from_value(Some(OsStr::new(&s))).unwrap().is_authenticated());
        let short = JobSecret::from_value(Some(OsStr::new("short"))).unwrap_err();
        assert!(short.to_string().contains("HCOMM_JOB_SECRET"), "{short}");
        #[cfg(unix)]
        {
            use std::os::unix::ffi::OsStrExt;
            let bad = JobSecret::from_value(Some(OsStr::from_bytes(&[0xff; 20]))).unwrap_err();
            assert!(bad.to_string().contains("not valid UTF-8"), "{bad}");
        }
        assert!(!format!("{:?}", JobSecret::new(&s).unwrap()).contains(&s));
    }

    #[test]
    fn unauthenticated_runs_with_different_ids_do_not_mix() {
        let a = JobSecret::unauthenticated_run("run-a");
        let b = JobSecret::unauthenticated_run("run-b");
        assert!(!a.is_authenticated());
        assert_ne!(a.job_id(), b.job_id());
        assert_ne!(a.job_id(), JobSecret::unauthenticated().job_id());
        assert_eq!(a.job_id(), JobSecret::unauthenticated_run("run-a").job_id());
        let t = a.tag(b"x", &[]);
        assert!(!b.verify(b"x", &[], &t));
        let k = a.derive(b"k", &[b"1"]);
        assert!(mac_verify(&k, b"m", &[b"p"], &mac(&k, b"m", &[b"p"])));
        assert!(!mac_verify(&k, b"m", &[b"q"], &mac(&k, b"m", &[b"p"])));
    }
}
