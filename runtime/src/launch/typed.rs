//! Typed launches: what the launchers `include_kernels!` generates are written against. The
//! markers of OpenCL C's types (`c`), which Rust types each takes ([`OfType`]), and which
//! memory a pointer parameter takes ([`DeviceMemory`]).

use super::kernel::KernelArg;

/// Markers of OpenCL C's types, for [`OfType`].
#[allow(non_camel_case_types)]
pub mod c {
    /// OpenCL C's `int` (and `uint`, which SPIR-V reads as `int`).
    pub struct int;
}

/// Rust types whose values a kernel sees as the OpenCL C type `C` (a marker of [`c`]).
pub trait OfType<C> {}

/// Device memory a kernel's pointer parameter to `C` takes.
pub trait DeviceMemory<'a, C>: KernelArg<'a> {}
