//! The entry check's route for ranks that share no memory on a backend that
//! carries no notes of its own (a device backend with one process per
//! rank): every rank all-gathers its call's sequence number and fingerprint
//! with the backend's own all-gather (16 bytes per rank). Every rank then
//! holds every rank's fingerprint, so a disagreement is found by every rank
//! at once, in the same call; only then do the ranks all-gather their calls'
//! descriptions ([`NOTE_BYTES`] per rank) to name both calls. Ranks that
//! agree pay one small all-gather per schedule call.

use std::sync::Mutex;
use std::time::Duration;

use crate::backend::entries::{describe, EntryNote};
use crate::backend::{Backend, NativeCall};
use crate::element::DataType;
use crate::error::{Error, Result};

/// Bytes of a rank's described call in the second all-gather: its length
/// (4 bytes), then the note as `postcard` writes it, its call text shortened
/// to fit.
const NOTE_BYTES: usize = 1024;

/// What a communicator keeps of this route: the last call checked and its
/// disagreement, so a rank that settles a call after the check (or fails
/// it, and so announces it again) gets the same answer without exchanging.
#[derive(Default)]
pub(crate) struct Gathered {
    last: Mutex<Option<(u64, Option<Error>)>>,
}

impl Gathered {
    /// The disagreement found for call `seq`, if it is the last one checked.
    pub(super) fn failure(&self, seq: u64) -> Option<Error> {
        let last = self.last.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        last.as_ref().filter(|(s, _)| *s == seq).and_then(|(_, e)| e.clone())
    }

    /// Compares this rank's call `note` with every rank's: `Err(Mismatch)`
    /// naming the first rank that disagrees with rank 0 and rank 0, on every
    /// rank; an all-gather's own error as it is.
    pub(super) fn check(&self, backend: &dyn Backend, timeout: Duration, note: &EntryNote) -> Result<()> {
        {
            let last = self.last.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
            if let Some((seq, result)) = last.as_ref() {
                if *seq == note.seq {
                    return result.clone().map_or(Ok(()), Err);
                }
            }
        }
        let world = backend.world();
        let mine = [note.seq, note.fingerprint];
        let mut all = vec![0u64; 2 * world];
        gather(backend, timeout, bytes_of(&mine), bytes_of_mut(&mut all))?;
        let odd = (1..world).find(|&r| all[2 * r..2 * r + 2] != all[..2]);
        let found = match odd {
            None => None,
            Some(r) => Some(name(backend, timeout, note, r)?),
        };
        let mut last = self.last.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        *last = Some((note.seq, found.clone()));
        found.map_or(Ok(()), Err)
    }
}

/// The `Mismatch` naming rank 0's call and rank `odd`'s, after every rank's
/// description is gathered.
#[cold]
fn name(backend: &dyn Backend, timeout: Duration, note: &EntryNote, odd: usize) -> Result<Error> {
    let world = backend.world();
    let mine = encode(note);
    let mut all = vec![0u8; NOTE_BYTES * world];
    gather(backend, timeout, &mine, &mut all)?;
    let theirs = |r: usize| decode(&all[r * NOTE_BYTES..(r + 1) * NOTE_BYTES]);
    Ok(Error::mismatch(describe(0, &theirs(0), odd, &theirs(odd))))
}

/// `recv` = every rank's `send`, in rank order, with the backend's own
/// all-gather.
fn gather(backend: &dyn Backend, timeout: Duration, send: &[u8], recv: &mut [u8]) -> Result<()> {
    debug_assert_eq!(send.len() * backend.world(), recv.len());
    let call = NativeCall::AllGather {
        send: send.as_ptr(),
        recv: recv.as_mut_ptr(),
        send_count: send.len(),
    };
    // SAFETY: `send` and `recv` are host memory (which every backend with
    // native collectives accepts), valid for the call and `recv` exclusive,
    // `recv` `world` times as long as `send` (the all-gather's shape).
    match unsafe { backend.native_collective(&call, DataType::U8, timeout) } {
        Some(result) => result.map(drop),
        None => Err(Error::precondition(format!(
            "the {} backend shares no memory, carries no entry notes and has no all-gather of its own for the \
             entry check of schedule calls",
            backend.name()
        ))),
    }
}

fn bytes_of(words: &[u64]) -> &[u8] {
    // SAFETY: `u64` has no padding and every byte pattern is a valid `u8`;
    // the slice covers exactly the words' memory.
    unsafe { std::slice::from_raw_parts(words.as_ptr().cast(), std::mem::size_of_val(words)) }
}

fn bytes_of_mut(words: &mut [u64]) -> &mut [u8] {
    // SAFETY: as in `bytes_of`, and every byte pattern is a valid `u64`;
    // the borrow is exclusive.
    unsafe { std::slice::from_raw_parts_mut(words.as_mut_ptr().cast(), std::mem::size_of_val(words)) }
}

/// `note` in [`NOTE_BYTES`] bytes: its encoded length, then the encoding,
/// with the call text shortened until it fits.
fn encode(note: &EntryNote) -> Vec<u8> {
    let mut note = note.clone();
    loop {
        if let Ok(bytes) = postcard::to_stdvec(&note) {
            if bytes.len() + 4 <= NOTE_BYTES {
                let mut out = vec![0u8; NOTE_BYTES];
                out[..4].copy_from_slice(&(bytes.len() as u32).to_le_bytes());
                out[4..4 + bytes.len()].copy_from_slice(&bytes);
                return out;
            }
        }
        // a char boundary at most half-way
        let mut keep = note.call.len() / 2;
        while !note.call.is_char_boundary(keep) {
            keep -= 1;
        }
        note.call.truncate(keep);
        note.call.push_str("...");
        note.schedule.truncate(note.schedule.len().min(NOTE_BYTES / 4));
    }
}

/// The note [`encode`] wrote; a note saying what is unreadable where the
/// bytes do not decode.
fn decode(bytes: &[u8]) -> EntryNote {
    let len = u32::from_le_bytes([bytes[0], bytes[1], bytes[2], bytes[3]]) as usize;
    bytes
        .get(4..4 + len)
        .and_then(|b| postcard::from_bytes(b).ok())
        .unwrap_or_else(|| EntryNote {
            seq: 0,
            fingerprint: 0,
            schedule: "another schedule call".into(),
            call: "(its description did not arrive intact)".into(),
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_long_call_is_shortened_to_fit_and_reads_back() {
        let note = EntryNote {
            seq: 3,
            fingerprint: 9,
            schedule: "s".into(),
            call: format!("with T = f32, n = [{}]", "7, ".repeat(2000)),
        };
        let bytes = encode(&note);
        assert_eq!(bytes.len(), NOTE_BYTES);
        let back = decode(&bytes);
        assert_eq!((back.seq, back.fingerprint, back.schedule.as_str()), (3, 9, "s"));
        assert!(
            back.call.starts_with("with T = f32, n = [7, 7, ") && back.call.ends_with("..."),
            "{}",
            back.call
        );
        let short = EntryNote {
            call: "with T = u8".into(),
            ..note
        };
        assert_eq!(decode(&encode(&short)), short);
        assert_eq!(decode(&[0xff; NOTE_BYTES]).schedule, "another schedule call");
    }
}
