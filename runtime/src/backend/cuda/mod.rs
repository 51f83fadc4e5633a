//! The CUDA backend: NVIDIA GPUs through the CUDA driver API, with `cudarc`'s `sys` layer,
//! which loads `libcuda.so.1` at run time (a process without it has no CUDA devices).
//!
//! An image's object is its native form where the GPU runs one (a relocatable SASS object
//! that `sycl-ld` made with `ptxas -c` for an `nvidia_gpu_sm_XX` target: nothing is compiled
//! at run time), else its PTX form (the `ptx64` target, compiled by the driver's JIT). A
//! program is the objects of every collected image linked by the driver's linker
//! (`cuLinkCreate`, `cuLinkAddData`, `cuLinkComplete`) for this GPU, then loaded as a module;
//! the linked cubin is what the persistent cache keeps. Launches follow the
//! conventions of the PTX `sycl-ld` makes:
//! - grid = global size / local size in each dimension, block = local size; no offsets;
//! - a `local` pointer parameter is an 8-byte byte offset into the launch's dynamic shared
//!   memory (`__sycl_local_mem`), whose size is the total of the local arguments, each aligned
//!   to 16 bytes;
//! - the dynamic shared memory size also says the launch's number of dimensions, which
//!   `get_work_dim` reads (`sycl_format::ptx_dynamic_shared_size`), so nothing is written
//!   between launches;
//! - a specialization constant is a `.weak .const` variable whose initialiser the runtime
//!   rewrites before the link: in each image's PTX text, or in a native object's constant
//!   bank (`sycl_format::cubin::set_initializer`), so the linked cubin, cached like any other
//!   under a key that includes the values, holds them.
//!
//! Every call first makes the device's primary context current on the calling thread, so
//! queues, buffers and programs work from any thread, as OpenCL's do.
//!
//! Its rooms are the contract's roles (`backend/api.rs`): `device.rs` (devices found, opened
//! and adopted), `stream.rs` (the queue), `memory.rs`, `event.rs`, `program.rs` and
//! `kernel.rs`; and what only CUDA needs: `context.rs` (binding a context on each thread),
//! `clock.rs` (a profiled stream's timestamps), `staging.rs` (page-locked memory for maps and
//! large reads) and `heap.rs` (device memory freed in order with the commands that use it).

mod context;
mod device;
mod stream;
mod kernel;
mod event;
mod clock;
mod program;
mod memory;
mod heap;
mod staging;
mod graph;

pub(crate) use device::Device;
pub(crate) use event::Event;
pub(crate) use graph::{Graph, GraphBuilder};
pub(crate) use kernel::Kernel;
pub(crate) use memory::{HostMemory, Mapping, Memory};
pub(crate) use program::{Code, Module};
pub(crate) use stream::Stream;

use std::ffi::{c_char, CStr};
use std::ptr;
use std::sync::OnceLock;

use cudarc::driver::sys::{self, CUresult};

use super::api::{Api, DeviceInfo};
use super::native::NativeDevice;
use crate::{DriverCode, Error};

/// The platform name CUDA devices are listed under (`SYCL_DEVICE=cuda` picks them).
pub(crate) const PLATFORM: &str = "CUDA";

/// A CUDA error as people look it up: `CUDA_ERROR_INVALID_PTX (218)`.
fn error_name(code: CUresult) -> String {
    let mut name: *const c_char = ptr::null();
    // SAFETY: the driver writes a pointer to a static string, or leaves it null.
    let known = unsafe { sys::cuGetErrorName(code, &mut name) } == CUresult::CUDA_SUCCESS
        && !name.is_null();
    let number = code as i32;
    if known {
        // SAFETY: a NUL-terminated static string from the driver.
        let name = unsafe { CStr::from_ptr(name) }.to_string_lossy();
        format!("{name} ({number})")
    } else {
        format!("CUDA error {number}")
    }
}

/// The error of a CUDA call that failed with `code`.
pub(crate) fn driver_error(call: &'static str, code: CUresult) -> Error {
    Error::Driver { call, code: DriverCode::Cuda(code as i32), error: error_name(code) }
}

fn check(call: &'static str, code: CUresult) -> Result<(), Error> {
    match code {
        CUresult::CUDA_SUCCESS => Ok(()),
        code => Err(driver_error(call, code)),
    }
}

/// The CUDA driver: its type for each role of the contract.
pub(crate) struct Cuda;

impl Api for Cuda {
    /// The device's ordinal.
    type Handle = i32;
    type RawContext = sys::CUcontext;
    type RawDevice = sys::CUdevice;
    type RawQueue = sys::CUstream;
    type RawMemory = sys::CUdeviceptr;
    type Device = Device;
    type Queue = Stream;
    type Memory = Memory;
    type HostMemory = HostMemory;
    type Mapping = Mapping;
    type Event = Event;
    type Object = Code;
    type Program = Module;
    type Kernel = Kernel;
    type GraphBuilder = GraphBuilder;
    type Graph = Graph;

    /// Found once per process.
    fn devices() -> Result<Vec<DeviceInfo>, Error> {
        static FOUND: OnceLock<Result<Vec<DeviceInfo>, String>> = OnceLock::new();
        match FOUND.get_or_init(|| device::enumerate().map_err(|e| e.to_string())) {
            Ok(devices) => Ok(devices.clone()),
            Err(e) => {
                Err(Error::NoDevice { problem: format!("the CUDA driver: {e}"), available: vec![] })
            }
        }
    }

    fn native_device(ordinal: i32) -> Result<NativeDevice, Error> {
        device_of(ordinal).map(NativeDevice::Cuda)
    }

    fn handle_of(device: sys::CUdevice) -> Result<i32, Error> {
        ordinal_of(device)
    }
}

/// The device whose ordinal is `ordinal`.
fn device_of(ordinal: i32) -> Result<sys::CUdevice, Error> {
    let mut device = 0;
    // SAFETY: an out-pointer to a local.
    check("cuDeviceGet", unsafe { sys::cuDeviceGet(&mut device, ordinal) })?;
    Ok(device)
}

/// The ordinal of `device`, among the devices the driver counts.
pub(crate) fn ordinal_of(device: sys::CUdevice) -> Result<i32, Error> {
    let mut count = 0;
    // SAFETY: an out-pointer to a local.
    check("cuDeviceGetCount", unsafe { sys::cuDeviceGetCount(&mut count) })?;
    for ordinal in 0..count {
        if device_of(ordinal)? == device {
            return Ok(ordinal);
        }
    }
    Err(Error::InvalidArgument(format!("CUDA device {device}: the driver does not list it")))
}
