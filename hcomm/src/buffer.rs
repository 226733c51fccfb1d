//! What operations take as buffers: host slices, vectors and arrays, and the
//! device buffers of device backends.

use crate::element::Element;

/// Where a buffer's memory lives.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Memory {
    /// Ordinary host memory.
    Host,
    /// Memory of an accelerator, allocated through the backend named here.
    Device {
        /// `hccl` or `nccl`.
        backend: &'static str,
        /// The device index.
        device: i32,
    },
}

pub(crate) mod sealed {
    pub trait Sealed {}
}

/// Memory hcomm can send from.
#[diagnostic::on_unimplemented(
    message = "`{Self}` is not an hcomm buffer",
    label = "expected a slice, `Vec`, array or `DeviceBuffer` of an `hcomm::Element` type"
)]
///
/// Implemented for `[T]`, `Vec<T>` and `[T; N]` of an [`Element`] type, and
/// for the device buffers of device backends. Sealed: backends move these
/// buffers by address.
pub trait Buffer: sealed::Sealed {
    /// The element type.
    type Elem: Element;

    /// Start and length in elements.
    #[doc(hidden)]
    fn raw_parts(&self) -> (*const Self::Elem, usize);

    /// Where the memory lives.
    fn memory(&self) -> Memory;

    /// Length in elements.
    fn elems(&self) -> usize {
        self.raw_parts().1
    }
}

/// Memory hcomm can receive into.
#[diagnostic::on_unimplemented(
    message = "`{Self}` is not a writable hcomm buffer",
    label = "expected a mutable slice, `Vec`, array or `DeviceBuffer` of an `hcomm::Element` type"
)]
pub trait BufferMut: Buffer {
    /// Start and length in elements, for writing.
    #[doc(hidden)]
    fn raw_parts_mut(&mut self) -> (*mut Self::Elem, usize);
}

impl<T: Element> sealed::Sealed for [T] {}
impl<T: Element> Buffer for [T] {
    type Elem = T;
    fn raw_parts(&self) -> (*const T, usize) {
        (self.as_ptr(), self.len())
    }
    fn memory(&self) -> Memory {
        Memory::Host
    }
}
impl<T: Element> BufferMut for [T] {
    fn raw_parts_mut(&mut self) -> (*mut T, usize) {
        (self.as_mut_ptr(), self.len())
    }
}

impl<T: Element> sealed::Sealed for Vec<T> {}
impl<T: Element> Buffer for Vec<T> {
    type Elem = T;
    fn raw_parts(&self) -> (*const T, usize) {
        (self.as_ptr(), self.len())
    }
    fn memory(&self) -> Memory {
        Memory::Host
    }
}
impl<T: Element> BufferMut for Vec<T> {
    fn raw_parts_mut(&mut self) -> (*mut T, usize) {
        (self.as_mut_ptr(), self.len())
    }
}

impl<T: Element, const N: usize> sealed::Sealed for [T; N] {}
impl<T: Element, const N: usize> Buffer for [T; N] {
    type Elem = T;
    fn raw_parts(&self) -> (*const T, usize) {
        (self.as_ptr(), N)
    }
    fn memory(&self) -> Memory {
        Memory::Host
    }
}
impl<T: Element, const N: usize> BufferMut for [T; N] {
    fn raw_parts_mut(&mut self) -> (*mut T, usize) {
        (self.as_mut_ptr(), N)
    }
}

impl<T: Element> sealed::Sealed for Box<[T]> {}
impl<T: Element> Buffer for Box<[T]> {
    type Elem = T;
    fn raw_parts(&self) -> (*const T, usize) {
        (self.as_ptr(), self.len())
    }
    fn memory(&self) -> Memory {
        Memory::Host
    }
}
impl<T: Element> BufferMut for Box<[T]> {
    fn raw_parts_mut(&mut self) -> (*mut T, usize) {
        (self.as_mut_ptr(), self.len())
    }
}
