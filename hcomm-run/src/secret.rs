//! The job's secret: 32 bytes from the operating system's random source,
//! written as 64 hexadecimal digits into `HCOMM_JOB_SECRET` of every rank.

use std::ffi::OsStr;
use std::fmt::Write as _;

/// The variable the ranks read the secret from.
pub(crate) const SECRET_VAR: &str = "HCOMM_JOB_SECRET";

/// Bytes of randomness in a fresh secret.
const SECRET_BYTES: usize = 32;

/// The value hcomm-run must set for the ranks: `None` when the caller's
/// environment already has a secret (`inherited`, non-blank), which the
/// ranks then inherit unchanged; else a fresh one.
pub(crate) fn for_job(inherited: Option<&OsStr>) -> Result<Option<String>, String> {
    let has_one = inherited.is_some_and(|v| !v.to_string_lossy().trim().is_empty());
    if has_one {
        Ok(None)
    } else {
        fresh().map(Some)
    }
}

/// 64 hexadecimal digits from the operating system's random source.
fn fresh() -> Result<String, String> {
    let mut bytes = [0u8; SECRET_BYTES];
    getrandom::fill(&mut bytes).map_err(|e| {
        format!("cannot make the job secret: the operating system's random source failed ({e}); hint: set `{SECRET_VAR}` to 64 random hexadecimal digits")
    })?;
    let mut text = String::with_capacity(2 * SECRET_BYTES);
    for b in bytes {
        // Writing to a String cannot fail.
        let _ = write!(text, "{b:02x}");
    }
    Ok(text)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_fresh_secret_is_64_hex_digits_and_differs_each_time() {
        let a = for_job(None).unwrap().unwrap();
        let b = for_job(Some(OsStr::new(""))).unwrap().unwrap();
        let c = for_job(Some(OsStr::new("  \n"))).unwrap().unwrap();
        for s in [&a, &b, &c] {
            assert_eq!(s.len(), 64, "{}", s.len());
            assert!(s.bytes().all(|d| d.is_ascii_hexdigit() && !d.is_ascii_uppercase()));
        }
        assert!(a != b && b != c && a != c);
    }

    #[test]
    fn a_secret_from_the_caller_is_kept() {
        assert_eq!(for_job(Some(OsStr::new("caller's own secret, 32 bytes..."))), Ok(None));
    }
}
