//! What an operation borrows from Python: the elements of an array or
//! tensor (`Raw`) and the reference that keeps them alive (`Lent`), however
//! they were lent (numpy, torch, `DLPack`: see `array`).

use hcomm::DataType;
use pyo3::prelude::*;

use crate::errors::precondition;

/// Where an operation may read or write an array's elements.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Raw {
    /// Address of the first element.
    pub(crate) addr: usize,
    /// Number of elements.
    pub(crate) len: usize,
    pub(crate) dtype: DataType,
}

impl Raw {
    /// `len` elements of `dtype` at `addr`, which must be aligned for
    /// `dtype` (an empty array may sit anywhere): otherwise
    /// `hcomm.Precondition` naming `what`.
    pub(crate) fn aligned(what: &str, addr: usize, len: usize, dtype: DataType) -> PyResult<Raw> {
        if len > 0 && !addr.is_multiple_of(dtype.size()) {
            return Err(precondition(format!(
                "`{what}` is not aligned for its element type {}",
                dtype.name()
            )));
        }
        Ok(Raw { addr, len, dtype })
    }

    /// The elements as a slice.
    ///
    /// # Safety
    ///
    /// `T` is the type of `self.dtype`; the array this describes is alive
    /// and not resized until the slice is gone, and no `&mut` slice of the
    /// same elements exists meanwhile (the in-flight registry of
    /// [`crate::exec`] refuses overlapping lends).
    pub(crate) unsafe fn slice<'a, T>(self) -> &'a [T] {
        if self.len == 0 {
            return &[];
        }
        // SAFETY: forwarded from the caller; numpy checked alignment
        // (`lend` refuses unaligned arrays) and the length.
        unsafe { std::slice::from_raw_parts(self.addr as *const T, self.len) }
    }

    /// The elements as a mutable slice.
    ///
    /// # Safety
    ///
    /// As for [`Raw::slice`], and no other slice of the same elements
    /// exists meanwhile; `self.writable`.
    pub(crate) unsafe fn slice_mut<'a, T>(self) -> &'a mut [T] {
        if self.len == 0 {
            return &mut [];
        }
        // SAFETY: forwarded from the caller.
        unsafe { std::slice::from_raw_parts_mut(self.addr as *mut T, self.len) }
    }

    /// The range of addresses the elements occupy.
    pub(crate) fn bytes(self) -> std::ops::Range<usize> {
        self.addr..self.addr + self.len * self.dtype.size()
    }
}

/// An array lent to an operation: its elements and the reference that
/// keeps it alive.
pub(crate) struct Lent {
    pub(crate) raw: Raw,
    pub(crate) shape: Vec<usize>,
    /// Keeps the array (and its memory) alive while an operation uses it.
    pub(crate) owner: Py<PyAny>,
}
