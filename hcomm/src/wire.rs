//! Messages between processes: a frame is a 4-byte little-endian length
//! followed by that many bytes of a [`postcard`]-encoded value. The rendezvous
//! store and the host transport between processes both speak it; each frame
//! is encoded into and decoded from a buffer the caller reuses, so steady
//! traffic allocates nothing.

use std::io::{self, Read, Write};

use serde::de::DeserializeOwned;
use serde::Serialize;

/// The largest frame accepted; anything longer is a corrupt stream.
const MAX_FRAME: usize = 64 << 20;

/// Writes `value` as one frame, encoding it in `buf` (reused between calls).
pub(crate) fn write_frame<T: Serialize>(w: &mut impl Write, value: &T, buf: &mut Vec<u8>) -> io::Result<()> {
    buf.clear();
    buf.extend_from_slice(&[0; 4]);
    postcard::to_io(value, &mut *buf).map_err(invalid)?;
    let len = u32::try_from(buf.len() - 4).map_err(|_| invalid("frame too long"))?;
    buf[..4].copy_from_slice(&len.to_le_bytes());
    w.write_all(buf)
}

/// Reads one frame into `buf` (reused between calls) and decodes it.
pub(crate) fn read_frame<T: DeserializeOwned>(r: &mut impl Read, buf: &mut Vec<u8>) -> io::Result<T> {
    let mut len = [0u8; 4];
    r.read_exact(&mut len)?;
    let len = u32::from_le_bytes(len) as usize;
    if len > MAX_FRAME {
        return Err(invalid(format!(
            "frame of {len} bytes exceeds the limit of {MAX_FRAME}"
        )));
    }
    buf.resize(len, 0);
    r.read_exact(buf)?;
    postcard::from_bytes(buf).map_err(invalid)
}

fn invalid(e: impl Into<Box<dyn std::error::Error + Send + Sync>>) -> io::Error {
    io::Error::new(io::ErrorKind::InvalidData, e)
}

#[cfg(test)]
mod tests {
    use super::*;

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
        assert_eq!(read_frame::<Msg>(&mut r, &mut buf).unwrap(), a);
        assert_eq!(read_frame::<Msg>(&mut r, &mut buf).unwrap(), Msg::B(-7));
        assert_eq!(
            read_frame::<Msg>(&mut r, &mut buf).unwrap_err().kind(),
            io::ErrorKind::UnexpectedEof
        );
        let bad = u32::MAX.to_le_bytes();
        assert_eq!(
            read_frame::<Msg>(&mut &bad[..], &mut buf).unwrap_err().kind(),
            io::ErrorKind::InvalidData
        );
    }
}
