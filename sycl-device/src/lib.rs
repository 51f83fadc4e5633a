//! What device code written in Rust depends on: a `#![no_std]` crate of OpenCL C builtins.
//!
//! A Rust device crate is `#![no_std]`, depends on this crate by path, and is compiled by
//! `sycl-build` for `nvptx64-nvidia-cuda` (with `-Zbuild-std=core` and `panic = "abort"`);
//! `sycl-build` then rewrites rustc's LLVM IR for `spirv64-unknown-unknown` and LLVM's SPIR-V
//! back end writes the device object. Every function here is a declaration of an OpenCL C
//! builtin under its Itanium-mangled name (`_Z13get_global_idj`), which that back end turns into
//! the SPIR-V instruction or built-in variable it stands for, or a few lines over one. On the
//! host, where this crate is also built (for the workspace's checks), they are declarations that
//! nothing calls.
//!
//! - **Kernels** are written in [`kernel!`]: `extern "C"` functions in the section
//!   `.sycl.kernel`, returning nothing, whose parameters are raw pointers to global memory
//!   (`*const f32`, `*mut u32`: the buffers and USM pointers the host passes) and scalars
//!   (`u32`, `i64`, `f32`, …). An exported **device function**, one that another device
//!   library or OpenCL C calls, is a `#[no_mangle] pub extern "C" fn` outside that section.
//! - **Pointers** in device functions are OpenCL C's generic pointers (address space 4): the
//!   build makes every pointer generic. An OpenCL C function that Rust calls, or that calls
//!   Rust, declares unqualified pointer parameters: `float *p`, not `global float *p`.
//! - **A panic** (a failed bounds check, a division by zero, `unwrap` of `None`; overflow wraps,
//!   as the device build has no overflow checks) calls `__sycl_device_panic`, which the build
//!   defines as a fault: the kernel ends, never past the failed check (on a CPU device the
//!   process ends with it; docs/DESIGN.md, "Device code in Rust"). The panic
//!   handler here never touches the [`core::panic::PanicInfo`], so no formatting code is pulled
//!   into device code.
//!
//! The functions, by concern: the work-item functions ([`global_id`], [`local_size`], …),
//! the barriers ([`barrier`], [`barrier_local`], [`barrier_global`]), the atomics
//! ([`atomic_add_i32`], [`atomic_cmpxchg_u32`], [`atomic_add_f32`], …) and the math that `core`
//! lacks, as methods of [`DeviceFloat`] (`f32`, `f64`) and [`NativeFloat`] (`f32`).
//!
//! ```ignore
//! #![no_std]
//! use sycl_device::DeviceFloat;
//!
//! sycl_device::kernel! {
//!     /// y = a*x + y
//!     pub fn saxpy(n: u32, a: f32, x: *const f32, y: *mut f32) {
//!         let i = sycl_device::global_id(0);
//!         if i < n as usize {
//!             unsafe { *y.add(i) = a * *x.add(i) + *y.add(i) }
//!         }
//!     }
//!
//!     /// Each element replaced by its square root; their sum added to `*total`.
//!     pub fn roots(n: u32, x: *mut f32, total: *mut f32) {
//!         let i = sycl_device::global_id(0);
//!         if i < n as usize {
//!             unsafe {
//!                 let r = (*x.add(i)).sqrt();
//!                 *x.add(i) = r;
//!                 sycl_device::atomic_add_f32(total, r);
//!             }
//!         }
//!     }
//! }
//! ```
//!
//! (`ignore`: the example is a device crate, which links only where the build defines the
//! builtins.)

#![no_std]

mod work_item;
mod barrier;
mod atomic;
mod math;

pub use atomic::*;
pub use barrier::*;
pub use math::{DeviceFloat, NativeFloat};
pub use work_item::*;

/// Defines kernels: each `fn` inside becomes a `#[no_mangle] pub extern "C" fn` in the section
/// `.sycl.kernel`, which is how the build tells kernels from exported device functions.
///
/// Any number of functions, each with its attributes and doc comments, which are kept. A kernel
/// returns nothing; its parameters are raw pointers to global memory and scalars (see the crate
/// doc). The runtime calls a kernel with the arguments the host set; Rust code does not call it
/// (it is not `unsafe`, for the kernel's body to read like other Rust: raw pointers are
/// dereferenced in `unsafe` blocks there).
///
/// ```no_run
/// sycl_device::kernel! {
///     /// y = a*x + y
///     pub fn saxpy(n: u32, a: f32, x: *const f32, y: *mut f32) {
///         let i = sycl_device::global_id(0);
///         if i < n as usize { unsafe { *y.add(i) = a * *x.add(i) + *y.add(i) } }
///     }
/// }
/// # // The host links the example: a stand-in for the builtin that the device provides.
/// # #[no_mangle] extern "C" fn _Z13get_global_idj(_: u32) -> usize { 0 }
/// # fn main() {}
/// ```
///
/// A kernel returns nothing:
///
/// ```compile_fail
/// sycl_device::kernel! {
///     pub fn answer(out: *mut u32) -> u32 { 42 }
/// }
/// # fn main() {}
/// ```
#[macro_export]
macro_rules! kernel {
    ($($(#[$attr:meta])* $vis:vis fn $name:ident($($params:tt)*) $body:block)*) => {
        $(
            $(#[$attr])*
            // The unsafe attribute forms (Rust 1.82) hold in every edition, 2024's included.
            #[unsafe(no_mangle)]
            #[unsafe(link_section = ".sycl.kernel")]
            // A kernel's raw pointers come from the host, through the runtime: no Rust caller.
            #[allow(clippy::not_unsafe_ptr_arg_deref)]
            $vis extern "C" fn $name($($params)*) $body
        )*
    };
}

#[cfg(target_arch = "nvptx64")]
unsafe extern "C" {
    /// Ends the work-item after a panic; the build defines it.
    fn __sycl_device_panic() -> !;
}

/// Every panic of device code ends here, and goes on to `__sycl_device_panic` without touching
/// the [`core::panic::PanicInfo`] (formatting its message would pull `core::fmt` into device
/// code).
#[cfg(target_arch = "nvptx64")]
#[panic_handler]
fn panic(_: &core::panic::PanicInfo) -> ! {
    // SAFETY: `__sycl_device_panic` takes nothing and never returns; the build defines it.
    unsafe { __sycl_device_panic() }
}
