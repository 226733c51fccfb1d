//! Memory two processes of one host share: an anonymous memory file
//! (`memfd`) whose size is sealed, created by one process and mapped by a
//! peer through `/proc/<pid>/fd`, which the kernel allows only to a process
//! of the same user that may trace the owner (the rule of the single copy).
//! The message rings (`ring.rs`) and the board regions (`shm.rs`) both live
//! in one.
//!
//! Nothing has a name: the memory is freed when the last process that maps
//! it exits, however it exits, so a SIGKILL leaves nothing in `/dev/shm`,
//! and a survivor's mapping stays valid after its owner died. The seal keeps
//! anyone from shrinking the file under a reader (a read past the end of a
//! shrunk file would fault); a peer's file of the wrong size or without the
//! seal is refused.

use std::ffi::CStr;
use std::fs::OpenOptions;
use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};

/// The seals every file carries: its size never changes.
const SEALS: i32 = libc::F_SEAL_SHRINK | libc::F_SEAL_GROW | libc::F_SEAL_SEAL;

/// A memory file of a fixed size, mapped shared into this process.
pub(super) struct MemFile {
    base: *mut u8,
    len: usize,
    fd: OwnedFd,
}

// SAFETY: the mapping lives as long as the value and is only reached
// through raw pointers; what may touch which bytes when is the protocol of
// the owner (`Ring`, `Region`), which states its own rules.
unsafe impl Send for MemFile {}
// SAFETY: as for `Send`.
unsafe impl Sync for MemFile {}

impl MemFile {
    /// A new file of this process, `len` bytes of zeros, its size sealed,
    /// mapped; `name` only shows in `/proc/<pid>/fd`.
    pub(super) fn create(name: &CStr, len: usize) -> io::Result<MemFile> {
        // SAFETY: the name is a valid NUL-terminated string; a
        // non-negative result is a new descriptor nothing else owns.
        let fd = unsafe { libc::memfd_create(name.as_ptr(), libc::MFD_CLOEXEC | libc::MFD_ALLOW_SEALING) };
        if fd < 0 {
            return Err(io::Error::last_os_error());
        }
        // SAFETY: `fd` is fresh and owned by nothing else.
        let file = std::fs::File::from(unsafe { OwnedFd::from_raw_fd(fd) });
        file.set_len(len as u64)?;
        // SAFETY: `F_ADD_SEALS` on a descriptor this function owns; the
        // argument is a plain integer.
        if unsafe { libc::fcntl(file.as_raw_fd(), libc::F_ADD_SEALS, SEALS) } < 0 {
            return Err(io::Error::last_os_error());
        }
        MemFile::map(file.into(), len)
    }

    /// Maps the file that process `pid` holds as its descriptor `fd`, once
    /// it is `len` bytes long and sealed so; `what` names it in errors.
    pub(super) fn open(pid: i32, fd: i32, len: usize, what: &str) -> io::Result<MemFile> {
        let file = OpenOptions::new()
            .read(true)
            .write(true)
            .open(format!("/proc/{pid}/fd/{fd}"))?;
        let size = file.metadata()?.len();
        if size != len as u64 {
            return Err(io::Error::new(
                io::ErrorKind::InvalidData,
                format!("the peer's {what} has {size} bytes where {len} were expected"),
            ));
        }
        // SAFETY: `F_GET_SEALS` on a descriptor `file` owns; no pointer.
        let seals = unsafe { libc::fcntl(file.as_raw_fd(), libc::F_GET_SEALS) };
        if seals < 0 || seals & SEALS != SEALS {
            return Err(io::Error::new(
                io::ErrorKind::InvalidData,
                format!("the peer's {what} is not sealed against resizing"),
            ));
        }
        MemFile::map(file.into(), len)
    }

    fn map(fd: OwnedFd, len: usize) -> io::Result<MemFile> {
        // SAFETY: maps `len` bytes of the file `fd` (which is that long and
        // sealed so), shared, at an address the kernel chooses; nothing is
        // passed by pointer.
        let base = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                len,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_SHARED,
                fd.as_raw_fd(),
                0,
            )
        };
        if base == libc::MAP_FAILED {
            return Err(io::Error::last_os_error());
        }
        Ok(MemFile {
            base: base.cast(),
            len,
            fd,
        })
    }

    /// The start of the mapping (page-aligned), valid for `len` bytes as
    /// long as `self` lives.
    pub(super) fn base(&self) -> *mut u8 {
        self.base
    }

    /// The descriptor of the memory file in this process.
    pub(super) fn fd(&self) -> RawFd {
        self.fd.as_raw_fd()
    }
}

impl Drop for MemFile {
    fn drop(&mut self) {
        // SAFETY: unmaps exactly the mapping `map` made; no reference into
        // it outlives `self` (its owners hand out none that outlive them).
        unsafe { libc::munmap(self.base.cast(), self.len) };
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_peer_sees_the_owners_bytes_and_a_wrong_size_or_no_seal_is_refused() {
        let pid = std::process::id() as i32;
        let a = MemFile::create(c"t", 8192).unwrap();
        let b = MemFile::open(pid, a.fd(), 8192, "test file").unwrap();
        // SAFETY: both map the same 8192 bytes; one thread, no overlap in time.
        unsafe {
            a.base().add(5000).write(42);
            assert_eq!(b.base().add(5000).read(), 42);
        }
        let e = MemFile::open(pid, a.fd(), 4096, "test file").err().unwrap();
        assert_eq!(
            e.to_string(),
            "the peer's test file has 8192 bytes where 4096 were expected"
        );

        // SAFETY: a valid name; the descriptor is owned below.
        let fd = unsafe { libc::memfd_create(c"t".as_ptr(), libc::MFD_CLOEXEC) };
        // SAFETY: fresh descriptor.
        let file = std::fs::File::from(unsafe { OwnedFd::from_raw_fd(fd) });
        file.set_len(4096).unwrap();
        let e = MemFile::open(pid, file.as_raw_fd(), 4096, "test file").err().unwrap();
        assert_eq!(e.to_string(), "the peer's test file is not sealed against resizing");
    }
}
