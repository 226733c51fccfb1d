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
/// Implemented for `[T]`, `Vec<T>` and `[T; N]` of an [`Element`] type, for
/// `ndarray` arrays and views in standard (row-major, contiguous) layout,
/// and for the device buffers of device backends. Sealed: backends move these
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

    /// Why the memory cannot be used as one contiguous run of elements, if
    /// it cannot (an `ndarray` array that is not in standard layout).
    #[doc(hidden)]
    fn layout_problem(&self) -> Option<String> {
        None
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

/// `ndarray` arrays and views (owned, shared, borrowed, copy-on-write) are
/// buffers when they are in standard layout: row-major and contiguous, so
/// their elements in logical order are one run of memory. Any other layout
/// (a transposed or Fortran-order array, a strided slice) is rejected by every
/// operation with an [`Error::Precondition`](crate::Error::Precondition) that
/// names the shape and strides; make a contiguous copy first with
/// `x.as_standard_layout()`. The array is never copied behind the caller's back.
#[cfg(feature = "ndarray")]
impl<S, D> sealed::Sealed for ndarray::ArrayBase<S, D>
where
    S: ndarray::Data,
    S::Elem: Element,
    D: ndarray::Dimension,
{
}

#[cfg(feature = "ndarray")]
impl<S, D> Buffer for ndarray::ArrayBase<S, D>
where
    S: ndarray::Data,
    S::Elem: Element,
    D: ndarray::Dimension,
{
    type Elem = S::Elem;

    fn raw_parts(&self) -> (*const S::Elem, usize) {
        // A layout that is not one run of memory exposes no elements at all,
        // so code that skips `layout_problem` can never read past the data.
        let len = if self.is_standard_layout() { self.len() } else { 0 };
        (self.as_ptr(), len)
    }

    fn memory(&self) -> Memory {
        Memory::Host
    }

    fn layout_problem(&self) -> Option<String> {
        (!self.is_standard_layout()).then(|| layout_message(self.shape(), self.strides()))
    }
}

#[cfg(feature = "ndarray")]
impl<S, D> BufferMut for ndarray::ArrayBase<S, D>
where
    S: ndarray::DataMut,
    S::Elem: Element,
    D: ndarray::Dimension,
{
    fn raw_parts_mut(&mut self) -> (*mut S::Elem, usize) {
        let len = if self.is_standard_layout() { self.len() } else { 0 };
        (self.as_mut_ptr(), len)
    }
}

/// The error text for an array whose layout is not standard.
#[cfg(feature = "ndarray")]
fn layout_message(shape: &[usize], strides: &[isize]) -> String {
    format!(
        "an array of shape {shape:?} with strides {strides:?} is not in standard (row-major, contiguous) layout; hint: pass `x.as_standard_layout()`"
    )
}
