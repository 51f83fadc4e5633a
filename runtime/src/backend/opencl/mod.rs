//! The OpenCL backend: owned handles over `cl3`'s raw API (each wrapper releases its object on
//! drop; every call that can fail returns the OpenCL error with the name of the call), the
//! devices of every platform with their capabilities, and [`Device`]'s compile, link and build.
//! Its rooms are the contract's roles (`backend/api.rs`): `device.rs`, `queue.rs`,
//! `memory.rs`, `event.rs`, `program.rs` and `kernel.rs`; `graph.rs` (command buffers) and
//! `usm.rs` (device allocations) are extensions, whose functions a platform gives by name
//! ([`extension_function`], each platform's looked up once: [`PerPlatform`]).
//!
//! One of the rooms with `unsafe` code (with `cuda`, `discovery::loaded`, `program::disk`,
//! `launch::queue` and `launch::host`): the handles are created here and never leave as raw
//! pointers; a mapped region's pointer (host memory, a map) leaves, for `launch::host` to make
//! a slice of while its owner keeps it mapped.

/// An owned handle: `$name` holds a `$raw` of the runtime's, released with `$release` when it
/// drops.
macro_rules! handle {
    ($name:ident, $raw:ty, $release:path) => {
        pub(crate) struct $name(pub(crate) $raw);
        impl Drop for $name {
            fn drop(&mut self) {
                // SAFETY: the handle was created by us, is owned by this value alone, and is
                // released exactly once, here.
                unsafe {
                    let _ = $release(self.0);
                }
            }
        }
    };
}

mod device;
mod event;
mod memory;
mod queue;
mod program;
mod kernel;
mod graph;
mod usm;

pub(crate) use device::Device;
pub(crate) use event::Event;
pub(crate) use graph::{Graph, GraphBuilder};
pub(crate) use kernel::Kernel;
pub(crate) use memory::{parent_of, HostMemory, Mapping, Memory};
pub(crate) use program::Program;
pub(crate) use queue::Queue;

use device::Context;

use std::ffi::{c_void, CStr};
use std::sync::{Mutex, PoisonError};

use cl3::types::{cl_command_queue, cl_context, cl_device_id, cl_int, cl_mem, cl_platform_id};

use super::api::{Api, DeviceId, DeviceInfo};
use super::native::NativeDevice;
use crate::{DriverCode, Error};

/// The OpenCL driver: its type for each role of the contract.
pub(crate) struct OpenCl;

impl Api for OpenCl {
    type Handle = DeviceId;
    type RawContext = cl_context;
    type RawDevice = cl_device_id;
    type RawQueue = cl_command_queue;
    type RawMemory = cl_mem;
    type Device = Device;
    type Queue = Queue;
    type Memory = Memory;
    type HostMemory = HostMemory;
    type Mapping = Mapping;
    type Event = Event;
    type Object = Program;
    type Program = Program;
    type Kernel = Kernel;
    type GraphBuilder = GraphBuilder;
    type Graph = Graph;

    /// Every device of every platform, in the ICD loader's order.
    fn devices() -> Result<Vec<DeviceInfo>, Error> {
        device::devices()
    }

    /// The device's handle, with its platform.
    fn native_device(id: DeviceId) -> Result<NativeDevice, Error> {
        let platform = info_ptr(
            cl3::device::get_device_info(id.0, cl3::device::CL_DEVICE_PLATFORM),
            "clGetDeviceInfo",
        )?;
        Ok(NativeDevice::OpenCl { platform, device: id.0 })
    }

    fn handle_of(device: cl_device_id) -> Result<DeviceId, Error> {
        Ok(DeviceId(device))
    }
}

/// The error of an OpenCL call that failed with `code`.
pub(crate) fn cl_err(call: &'static str) -> impl Fn(cl_int) -> Error {
    move |code| Error::Driver { call, code: DriverCode::OpenCl(code), error: error_name(code) }
}

/// An OpenCL error code as people look it up: `CL_LINK_PROGRAM_FAILURE (-17)`.
pub(crate) fn error_name(code: cl_int) -> String {
    match cl3::error_codes::error_text(code) {
        "UNKNOWN_ERROR" | "" => format!("OpenCL error {code}"),
        name => format!("{name} ({code})"),
    }
}

/// A pointer-sized answer of `clGet*Info` (a context, a device, a platform).
fn info_ptr<T>(
    answer: Result<cl3::info_type::InfoType, cl_int>,
    call: &'static str,
) -> Result<*mut T, Error> {
    answer.map(|v| isize::from(v) as *mut T).map_err(cl_err(call))
}

/// The address of the extension function `name` of `platform`, or why it has none. The ICD
/// loader exports no extension's functions (so `cl3`'s wrappers of them fail): each platform
/// gives its own.
fn extension_function(platform: cl_platform_id, name: &CStr) -> Result<*mut c_void, String> {
    let library = cl3::load_library().as_ref().map_err(|e| e.to_string())?;
    match library.clGetExtensionFunctionAddressForPlatform(platform, name.as_ptr()) {
        Some(address) if !address.is_null() => Ok(address),
        _ => Err(format!("its platform gives no {}", name.to_string_lossy())),
    }
}

/// An extension's entry points (`E`), looked up once per platform, at its first use, and
/// kept for the life of the process, as the driver's own functions are; or why the platform
/// has none.
struct PerPlatform<E: 'static>(Mutex<Vec<(usize, Result<&'static E, String>)>>);

impl<E: Sync> PerPlatform<E> {
    const fn new() -> PerPlatform<E> {
        PerPlatform(Mutex::new(Vec::new()))
    }

    /// `platform`'s, from `load` at the first call for it.
    fn get(
        &self,
        platform: cl_platform_id,
        load: impl FnOnce(cl_platform_id) -> Result<E, String>,
    ) -> Result<&'static E, String> {
        let mut loaded = self.0.lock().unwrap_or_else(PoisonError::into_inner);
        if let Some((_, found)) = loaded.iter().find(|(p, _)| *p == platform as usize) {
            return found.clone();
        }
        let found = load(platform).map(|e| &*Box::leak(Box::new(e)));
        loaded.push((platform as usize, found.clone()));
        found
    }
}

/// The function type inside a header's `Option<fn>` type.
trait Function {
    type Fn;
}

impl<F> Function for Option<F> {
    type Fn = F;
}
