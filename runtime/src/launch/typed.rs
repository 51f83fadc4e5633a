//! Typed launches: what the launchers `include_kernels!` generates are written against. The
//! markers of OpenCL C's types (`c`), which Rust types each takes ([`OfType`]), and which
//! memory a pointer parameter takes ([`DeviceMemory`]).
//!
//! For every kernel whose parameters it can name, `sycl-build` writes a function of the
//! kernel's name that takes the queue and one Rust argument per parameter and returns the
//! [`Launch`](crate::Launch) with its arguments set: a mistake the runtime would name at
//! [`Launch::run`](crate::Launch::run) (a buffer of `f32` for a `global int*`, a
//! value for a buffer, too few arguments) is a compile error instead. The mapping, from
//! `sycl_format::c_types`' one table:
//!
//! | OpenCL C parameter            | launcher parameter                                   |
//! |-------------------------------|------------------------------------------------------|
//! | `float`, `double`             | `f32`, `f64` (a literal `2.0` would otherwise be `f64`) |
//! | `int`, `uint`, `char`, `long`, … | `impl OfType<c::int>` (`i32` or `u32`), …         |
//! | `half`                        | `impl OfType<c::half>`                               |
//! | `float4`, `float3`            | `[f32; 4]` (a 3-vector is padded to 4)               |
//! | `int4`, `int3`, `half2`, …    | `impl OfType<c::Vector<c::int, 4>>` (`[i32; 4]`), …  |
//! | `struct Pt` (N bytes)         | `T: Pod`, checked at compile time to be N bytes      |
//! | `global int*`, `constant T*`  | `impl DeviceMemory<'q, c::int>` (`&Buffer<i32>`, a view) |
//! | `local float*`                | `Local<impl OfType<c::float>>`                       |
//! | a pointer to a struct         | `impl DeviceMemory<'q, c::Any>` (any [`Pod`] element) |
//!
//! Kernels that take an image, a sampler or another handle get no launcher; the string API
//! (`queue.launch("name")`) launches every kernel, checked when it runs.
//!
//! A launcher of the generated shape, and its use:
//!
//! ```no_run
//! use sycl_runtime::{c, DeviceMemory, Launch, Local, NoGlobalRange, OfType, Pod, Queue};
//!
//! /// `block_sum(global int* in, global int* out, local int* scratch, int n)`
//! fn block_sum<'q>(
//!     queue: &'q Queue,
//!     r#in: impl DeviceMemory<'q, c::int>,
//!     out: impl DeviceMemory<'q, c::int>,
//!     scratch: Local<impl OfType<c::int>>,
//!     n: impl OfType<c::int>,
//! ) -> Launch<'q, NoGlobalRange> {
//!     queue.launch("block_sum").memory(r#in).memory(out).arg(scratch).arg(n)
//! }
//!
//! /// `shift(global struct Pt* pts, struct Pt by, float scale)`
//! fn shift<'q, T1: Pod>(
//!     queue: &'q Queue,
//!     pts: impl DeviceMemory<'q, c::Any>,
//!     by: T1,
//!     scale: f32,
//! ) -> Launch<'q, NoGlobalRange> {
//!     const { assert!(std::mem::size_of::<T1>() == 8, "kernel `shift` parameter `by` (struct Pt) takes 8 bytes") };
//!     queue.launch("shift").memory(pts).arg(by).arg(scale)
//! }
//!
//! #[repr(C)]
//! #[derive(Clone, Copy)]
//! struct Pt {
//!     x: f32,
//!     y: f32,
//! }
//! // SAFETY: two `f32`s, no padding.
//! unsafe impl Pod for Pt {}
//!
//! let q = Queue::new()?;
//! let data = q.buffer_from(&(0..64).collect::<Vec<u32>>())?; // `uint` is `int` to SPIR-V
//! let sums = q.buffer::<i32>(4)?;
//! block_sum(&q, &data, &sums, Local::<i32>::new(16), 64).global([64]).local([16]).run()?;
//! let pts = q.buffer_from(&[Pt { x: 0.0, y: 1.0 }; 8])?;
//! shift(&q, &pts, Pt { x: 1.0, y: 2.0 }, 2.0).global([8]).run()?;
//! # Ok::<(), sycl_runtime::Error>(())
//! ```

use super::kernel::{ArgValue, KernelArg, Launch};
use super::queue::{Buffer, Pod};
use super::view::BufferView;

/// Markers of OpenCL C's types, for [`OfType`] and [`DeviceMemory`]: types that are never
/// made, only named. A scalar's marker has its OpenCL C name, the signed one (SPIR-V reads
/// `uint` as `int`, so `c::int` stands for both).
#[allow(non_camel_case_types)]
pub mod c {
    use std::marker::PhantomData;

    /// OpenCL C's `char` and `uchar`: `i8` or `u8`.
    pub struct char;
    /// OpenCL C's `short` and `ushort`: `i16` or `u16`.
    pub struct short;
    /// OpenCL C's `int` and `uint`: `i32` or `u32`.
    pub struct int;
    /// OpenCL C's `long` and `ulong`: `i64` or `u64`.
    pub struct long;
    /// OpenCL C's `half`: `half::f16` (with the runtime's `half` feature), or its bits as `u16`.
    pub struct half;
    /// OpenCL C's `float`: `f32`.
    pub struct float;
    /// OpenCL C's `double`: `f64`.
    pub struct double;
    /// Any plain data ([`Pod`](crate::Pod)): what a pointer to a struct, or to a type the
    /// table of C types does not know (`void`), points to.
    pub struct Any;
    /// OpenCL C's vector of `N` values of `S`: `float4` is `Vector<float, 4>`, which `[f32;
    /// 4]` is; a 3-vector is laid out as a 4-vector, so `Vector<float, 3>` is `[f32; 4]` too.
    pub struct Vector<S, const N: usize>(PhantomData<S>);
}

/// Rust types whose values a kernel sees as the OpenCL C type `C` (a marker of [`c`]): `i32`
/// and `u32` are `c::int`, `f32` is `c::float`, `[f32; 4]` is `c::Vector<c::float, 4>` (and
/// `c::Vector<c::float, 3>`), every [`Pod`] type is `c::Any`. The generated launchers take
/// `impl OfType<C>` where a value of either signedness will do, and
/// [`Local<impl OfType<C>>`](crate::Local) for local memory.
///
/// A value of another type does not compile:
///
/// ```compile_fail,E0277
/// use sycl_runtime::{c, OfType};
/// fn takes_int(_: impl OfType<c::int>) {}
/// takes_int(1.5f32); // error: `f32: OfType<c::int>` is not satisfied
/// ```
///
/// (rustdoc on the stable toolchain checks only that this fails to compile, not why:
/// `tests/tests/compile_fail.rs` checks the error, through a generated launcher, in
/// `fixtures/misuse/examples/float_for_int.rs` and `long_for_int.rs`.)
///
/// `half::f16` is `OfType<c::half>` with the runtime's `half` feature; `u16`, `half`'s bits,
/// always.
pub trait OfType<C>: Pod {}

#[cfg(feature = "half")]
impl OfType<c::half> for half::f16 {}

/// The impls of scalar types, and (in tests) their list, to hold against the table of C types.
macro_rules! of_type {
    ($($marker:ident: $($t:ty),+;)*) => {
        $($( impl OfType<c::$marker> for $t {} )+)*
        #[cfg(test)]
        const SCALAR_IMPLS: &[(&str, &[&str])] = &[$((stringify!($marker), &[$(stringify!($t)),+])),*];
    };
}

of_type! {
    char: i8, u8;
    short: i16, u16;
    int: i32, u32;
    long: i64, u64, usize, isize;
    half: u16;
    float: f32;
    double: f64;
}

impl<T: Pod> OfType<c::Any> for T {}

/// OpenCL C's vectors of 2, 4, 8 and 16 values as Rust arrays of as many.
macro_rules! vectors {
    ($($n:literal),*) => { $(
        impl<S, T: OfType<S>> OfType<c::Vector<S, $n>> for [T; $n] where [T; $n]: Pod {}
    )* };
}

vectors!(2, 4, 8, 16);

/// A 3-vector takes the room of a 4-vector (OpenCL C pads it), so `[T; 4]` is what it is.
impl<S, T: OfType<S>> OfType<c::Vector<S, 3>> for [T; 4] where [T; 4]: Pod {}

/// Device memory a kernel's `global` or `constant` pointer parameter to `C` takes: a
/// [`&Buffer<T>`](Buffer) or a [`&BufferView<T>`](BufferView) whose element `T` is
/// [`OfType<C>`]. A generated launcher takes `impl DeviceMemory<'q, C>`, so that a buffer of
/// another element type is a compile error:
///
/// ```compile_fail,E0277
/// use sycl_runtime::{c, DeviceMemory, Queue};
/// fn takes_ints<'q>(_: impl DeviceMemory<'q, c::int>) {}
/// let q = Queue::new()?;
/// let floats = q.buffer::<f32>(4)?;
/// takes_ints(&floats); // error: `f32: OfType<c::int>` is not satisfied
/// # Ok::<(), sycl_runtime::Error>(())
/// ```
///
/// (`fixtures/misuse/examples/float_buffer_for_int_pointer.rs` is this mistake with a
/// generated launcher; `tests/tests/compile_fail.rs` checks its error, which rustdoc does not.)
///
/// A struct passed by value must have the size the kernel records; the launcher's `const`
/// assertion fails the build otherwise (when the launcher is instantiated: `cargo build`, not
/// `cargo check`):
///
/// ```compile_fail,E0080
/// use sycl_runtime::{Launch, NoGlobalRange, Pod, Queue};
/// /// `shift(struct Pt by)`, with `struct Pt { float x, y; }`
/// fn shift<'q, T0: Pod>(queue: &'q Queue, by: T0) -> Launch<'q, NoGlobalRange> {
///     const { assert!(std::mem::size_of::<T0>() == 8, "kernel `shift` parameter `by` (struct Pt) takes 8 bytes") };
///     queue.launch("shift").arg(by)
/// }
/// let q = Queue::new()?;
/// shift(&q, [1.0f32; 3]); // 12 bytes: error[E0080]
/// # Ok::<(), sycl_runtime::Error>(())
/// ```
///
/// (The assertion above is the doctest's own copy of what `sycl-build` writes.
/// `fixtures/misuse/examples/struct_of_another_size.rs` calls a launcher `sycl-build` generated
/// with this mistake, and `tests/tests/compile_fail.rs` checks that the launcher's assertion is
/// what fails.)
///
/// With the `cudarc` and `opencl3` features, cudarc's slices and views and opencl3's buffers are
/// device memory too. (It is not a [`KernelArg`]: every `Pod` value is one, and a foreign
/// reference could not be told apart from one; a launcher passes memory with
/// [`Launch::memory`].)
pub trait DeviceMemory<'a, C> {
    /// The memory as a kernel argument.
    #[doc(hidden)]
    fn memory_arg(&self) -> ArgValue<'a>;
}

impl<'a, C, T: Pod + OfType<C>> DeviceMemory<'a, C> for &'a Buffer<T> {
    fn memory_arg(&self) -> ArgValue<'a> {
        self.to_arg()
    }
}

impl<'a, C, T: Pod + OfType<C>> DeviceMemory<'a, C> for &'a BufferView<'_, T> {
    fn memory_arg(&self) -> ArgValue<'a> {
        self.to_arg()
    }
}

impl<'q, R, S> Launch<'q, R, S> {
    /// Appends device memory as the next argument: what a generated launcher does for a
    /// pointer parameter (a program writes `.arg(&buffer)`).
    #[doc(hidden)]
    pub fn memory<C>(mut self, memory: impl DeviceMemory<'q, C>) -> Self {
        self.push_arg(memory.memory_arg());
        self
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn is<C, T: OfType<C>>() {}
    fn memory<'a, C, M: DeviceMemory<'a, C>>() {}

    #[test]
    fn the_scalar_impls_are_the_table_of_c_types() {
        for scalar in sycl_format::c_types::SCALARS {
            let impls = SCALAR_IMPLS.iter().find(|(c, _)| *c == scalar.c);
            // `half::f16` is one with the `half` feature, beside the macro.
            let rust: Vec<&str> =
                scalar.rust.iter().copied().filter(|r| *r != "half::binary16::f16").collect();
            assert_eq!(impls.map(|(_, r)| r.to_vec()), Some(rust), "{}", scalar.c);
        }
        assert_eq!(SCALAR_IMPLS.len(), sycl_format::c_types::SCALARS.len());
    }

    #[test]
    fn arrays_are_vectors_and_pod_is_any() {
        is::<c::int, u32>();
        is::<c::Vector<c::float, 4>, [f32; 4]>();
        is::<c::Vector<c::float, 3>, [f32; 4]>();
        is::<c::Vector<c::char, 16>, [u8; 16]>();
        is::<c::Any, [f64; 3]>();
        memory::<c::int, &Buffer<u32>>();
        memory::<c::Vector<c::int, 2>, &BufferView<'_, [i32; 2]>>();
        memory::<c::Any, &Buffer<f32>>();
    }
}
