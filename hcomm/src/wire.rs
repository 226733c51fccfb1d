//! Messages between processes: a frame is a 4-byte little-endian length
//! followed by that many bytes of a [`postcard`]-encoded value. The rendezvous
//! store and the host transport between processes both speak it; each frame
//! is encoded into and decoded from a buffer the caller reuses, so steady
//! traffic allocates nothing. A frame's bytes are read as they arrive, the
//! buffer growing with them: a length announced by a peer reserves nothing
//! before the bytes come.

use std::io::{self, Read, Write};

use serde::de::DeserializeOwned;
use serde::Serialize;

/// Writes `value` as one frame, encoding it in `buf` (reused between calls).
pub(crate) fn write_frame<T: Serialize>(w: &mut impl Write, value: &T, buf: &mut Vec<u8>) -> io::Result<()> {
    buf.clear();
    buf.extend_from_slice(&[0; 4]);
    postcard::to_io(value, &mut *buf).map_err(invalid)?;
    let len = u32::try_from(buf.len() - 4).map_err(|_| invalid("frame too long"))?;
    buf[..4].copy_from_slice(&len.to_le_bytes());
    w.write_all(buf)
}

/// Writes one frame made of `parts` end to end.
pub(crate) fn write_raw(w: &mut impl Write, parts: &[&[u8]]) -> io::Result<()> {
    let len: usize = parts.iter().map(|p| p.len()).sum();
    let len = u32::try_from(len).map_err(|_| invalid("frame too long"))?;
    w.write_all(&len.to_le_bytes())?;
    for p in parts {
        w.write_all(p)?;
    }
    Ok(())
}

/// Reads one frame of at most `max` bytes into `buf` (reused between calls)
/// and decodes it; a longer frame is a corrupt stream.
pub(crate) fn read_frame_within<T: DeserializeOwned>(
    r: &mut impl Read,
    buf: &mut Vec<u8>,
    max: usize,
) -> io::Result<T> {
    read_raw(r, buf, max)?;
    postcard::from_bytes(buf).map_err(invalid)
}

/// Reads the bytes of one frame of at most `max` bytes into `buf`,
/// growing it only as the bytes arrive.
pub(crate) fn read_raw(r: &mut impl Read, buf: &mut Vec<u8>, max: usize) -> io::Result<()> {
    let mut len = [0u8; 4];
    r.read_exact(&mut len)?;
    let len = u32::from_le_bytes(len) as usize;
    if len > max {
        return Err(invalid(format!("frame of {len} bytes exceeds the limit of {max}")));
    }
    buf.clear();
    let got = r.take(len as u64).read_to_end(buf)?;
    if got < len {
        return Err(io::Error::new(
            io::ErrorKind::UnexpectedEof,
            format!("the stream ended after {got} of a frame's {len} bytes"),
        ));
    }
    Ok(())
}

fn invalid(e: impl Into<Box<dyn std::error::Error + Send + Sync>>) -> io::Error {
    io::Error::new(io::ErrorKind::InvalidData, e)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A frame limit for the tests.
    const LIMIT: usize = 64 << 20;

    #[derive(Serialize, serde::Deserialize, Debug, PartialEq)]
    enum Msg {
        A { key: String, value: Vec<u8> },
        B(i64),
    }

    #[test]
    fn frames_round_trip_and_corrupt_lengths_are_errors() {
        let mut stream = Vec::new();
        let mut buf = Vec::new();
        let a = Msg::A {
            key: "k".into(),
            value: vec![1, 2, 3],
        };
        write_frame(&mut stream, &a, &mut buf).unwrap();
        write_frame(&mut stream, &Msg::B(-7), &mut buf).unwrap();
        let mut r = &stream[..];
        assert_eq!(read_frame_within::<Msg>(&mut r, &mut buf, LIMIT).unwrap(), a);
        assert_eq!(read_frame_within::<Msg>(&mut r, &mut buf, LIMIT).unwrap(), Msg::B(-7));
        assert_eq!(
            read_frame_within::<Msg>(&mut r, &mut buf, LIMIT).unwrap_err().kind(),
            io::ErrorKind::UnexpectedEof
        );
        let bad = u32::MAX.to_le_bytes();
        assert_eq!(
            read_frame_within::<Msg>(&mut &bad[..], &mut buf, LIMIT)
                .unwrap_err()
                .kind(),
            io::ErrorKind::InvalidData
        );
        // A small limit refuses what a large one accepts.
        let mut r = &stream[..];
        assert_eq!(
            read_frame_within::<Msg>(&mut r, &mut buf, 3).unwrap_err().kind(),
            io::ErrorKind::InvalidData
        );
    }

    #[test]
    fn an_announced_length_reserves_nothing_before_the_bytes_come() {
        // 60 MiB announced, 5 bytes sent: the buffer holds what came.
        let mut stream = (60u32 << 20).to_le_bytes().to_vec();
        stream.extend_from_slice(b"hello");
        let mut buf = Vec::new();
        let e = read_raw(&mut &stream[..], &mut buf, LIMIT).unwrap_err();
        assert_eq!(e.kind(), io::ErrorKind::UnexpectedEof);
        assert!(e.to_string().contains("after 5 of"), "{e}");
        assert!(buf.capacity() < 1 << 20, "{}", buf.capacity());
        let mut out = Vec::new();
        write_raw(&mut out, &[b"ab", b"c"]).unwrap();
        read_raw(&mut &out[..], &mut buf, 3).unwrap();
        assert_eq!(buf, b"abc");
    }
}
