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

use std::cell::Cell;
use std::ffi::{c_char, c_void, CStr};
use std::ptr;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::{Duration, Instant};

use cudarc::driver::sys::{self, CUdevice_attribute, CUresult};
use sycl_format::aspects::{aspect_number, target_aspect};
use sycl_format::{PtxSpecConstant, Target, PTX_SPEC_CONSTANT_PREFIX};

use super::api::{
    self, Api, Backend, Callback, DeviceHandle, DeviceInfo, Event as _, Failure, Limits, Owner,
    Queue as _, SpecValue, Whole,
};
use super::caps::{Capabilities, CL_DEVICE_TYPE_GPU};
use super::native::{NativeBuffer, NativeDevice, NativeEvent, NativeQueue};
use crate::trace::trace;
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

    /// Found once per process.
    fn devices() -> Result<Vec<DeviceInfo>, Error> {
        static FOUND: OnceLock<Result<Vec<DeviceInfo>, String>> = OnceLock::new();
        match FOUND.get_or_init(|| enumerate().map_err(|e| e.to_string())) {
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

fn enumerate() -> Result<Vec<DeviceInfo>, Error> {
    // SAFETY: loading the library runs no code of ours; it is only looked for.
    if !unsafe { sys::is_culib_present() } {
        return Ok(Vec::new());
    }
    // SAFETY: plain driver calls with out-pointers to locals.
    unsafe {
        check("cuInit", sys::cuInit(0))?;
        let mut version = 0;
        check("cuDriverGetVersion", sys::cuDriverGetVersion(&mut version))?;
        let mut count = 0;
        check("cuDeviceGetCount", sys::cuDeviceGetCount(&mut count))?;
        let mut out = Vec::new();
        for ordinal in 0..count {
            let mut device = 0;
            check("cuDeviceGet", sys::cuDeviceGet(&mut device, ordinal))?;
            let mut name = [0 as c_char; 256];
            check(
                "cuDeviceGetName",
                sys::cuDeviceGetName(name.as_mut_ptr(), name.len() as i32, device),
            )?;
            let name = CStr::from_ptr(name.as_ptr()).to_string_lossy().into_owned();
            let attribute = |a: CUdevice_attribute| {
                let mut value = 0;
                check("cuDeviceGetAttribute", sys::cuDeviceGetAttribute(&mut value, a, device))
                    .map(|()| value)
            };
            let major =
                attribute(CUdevice_attribute::CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR)?;
            let minor =
                attribute(CUdevice_attribute::CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR)?;
            let warp = attribute(CUdevice_attribute::CU_DEVICE_ATTRIBUTE_WARP_SIZE)?;
            let threads = attribute(CUdevice_attribute::CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_BLOCK)?;
            let mut total = 0;
            check("cuDeviceTotalMem", sys::cuDeviceTotalMem_v2(&mut total, device))?;
            // A launch raises a kernel's dynamic shared memory up to the opt-in limit (see
            // `Stream::launch`), so that is the local memory a work-group can have.
            use CUdevice_attribute::{
                CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK as SHARED,
                CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN as SHARED_OPTIN,
            };
            let shared = match attribute(SHARED_OPTIN).unwrap_or(0) {
                0 => attribute(SHARED)?,
                optin => optin,
            };
            let units = attribute(CUdevice_attribute::CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT)?;
            out.push(DeviceInfo {
                handle: DeviceHandle::Cuda(ordinal),
                backend: Backend::Cuda,
                identity: format!("{PLATFORM}\n{name}\nsm_{major}{minor}\ndriver {version}"),
                caps: capabilities(warp as u32, threads as usize, (major as u32, minor as u32)),
                takes_linkable: true,
                limits: Limits {
                    global_mem_bytes: total as u64,
                    local_mem_bytes: shared as u64,
                    max_alloc_bytes: total as u64,
                    view_align_bytes: 1,
                    compute_units: units as u32,
                    compute_capability: Some((major as u32, minor as u32)),
                },
                name,
                platform: PLATFORM.into(),
                vendor: "NVIDIA Corporation".into(),
                device_type: CL_DEVICE_TYPE_GPU,
            });
        }
        Ok(out)
    }
}

/// What the PTX of the `ptx64` target, and the native images made from it, can do on a GPU of
/// compute capability `cc` (the targets' device-configuration entries, measured on an H100):
/// half (every GPU the PTX runs on, compute capability 7.0 and up, has f16 instructions),
/// double, 64-bit atomics, calls through pointers, sub-groups as warps; no images. The GPU is
/// each of those targets whose images it runs (their `target_*` aspects).
fn capabilities(warp: u32, max_threads: usize, cc: (u32, u32)) -> Capabilities {
    let aspects: std::collections::BTreeSet<u32> = [
        "gpu",
        "fp16",
        "fp64",
        "atomic64",
        "online_compiler",
        "online_linker",
        "queue_profiling",
        "function_pointers",
    ]
    .iter()
    .map(|a| aspect_number(a).expect("known aspect"))
    .collect();
    let mut caps = Capabilities {
        aspects,
        sub_group_sizes: vec![warp],
        max_work_group_size: max_threads,
        links_images: true,
        target: Some(Target::Ptx64),
        fma: true,
        compute_capability: Some(cc),
    };
    let targets: Vec<Target> = caps.forms();
    caps.aspects.extend(targets.into_iter().filter_map(target_aspect));
    caps
}

/// A device's primary context, current on a thread before each call.
struct Context {
    raw: sys::CUcontext,
    device: sys::CUdevice,
    /// The device's primary context, retained by us (released on drop); otherwise a
    /// program's own context, which the program keeps alive.
    primary: bool,
    /// Untimed events no longer in use, for the next launches to record again: a launch
    /// creates no event in steady state.
    idle_events: Mutex<Vec<sys::CUevent>>,
    /// One idle event kept outside the lock: a loop of launches whose events are dropped
    /// passes one event back and forth here.
    spare_event: std::sync::atomic::AtomicPtr<sys::CUevent_st>,
    /// Page-locked blocks no longer in use ([`Staged`]), for the next maps and staged reads:
    /// allocating page-locked memory costs a system call and pinning, and freeing it waits
    /// for the device. Freed with the context.
    staging: Mutex<Vec<Block>>,
}

/// How many idle events a context keeps.
const IDLE_EVENTS: usize = 1024;

// SAFETY: a CUDA context may be made current on any thread; the driver API is thread-safe.
unsafe impl Send for Context {}
// SAFETY: as above.
unsafe impl Sync for Context {}

thread_local! {
    /// The context [`Context::bind`] last found or made current on this thread. Other code
    /// (cudarc, a library, the program) may have changed it since: only a launch trusts it,
    /// and binds and tries again when the driver refuses the launch for its context.
    static BOUND: Cell<sys::CUcontext> = const { Cell::new(ptr::null_mut()) };
}

impl Context {
    fn new(raw: sys::CUcontext, device: sys::CUdevice, primary: bool) -> Context {
        Context {
            raw,
            device,
            primary,
            idle_events: Mutex::new(Vec::new()),
            spare_event: std::sync::atomic::AtomicPtr::new(ptr::null_mut()),
            staging: Mutex::new(Vec::new()),
        }
    }

    /// Makes the context current on this thread (when it is not already: asking is cheaper
    /// than setting).
    fn bind(&self) -> Result<(), Error> {
        let mut current = ptr::null_mut();
        // SAFETY: an out-pointer to a local.
        if unsafe { sys::cuCtxGetCurrent(&mut current) } != CUresult::CUDA_SUCCESS
            || current != self.raw
        {
            // SAFETY: the context is retained until this value drops.
            check("cuCtxSetCurrent", unsafe { sys::cuCtxSetCurrent(self.raw) })?;
        }
        BOUND.with(|bound| bound.set(self.raw));
        Ok(())
    }

    /// Whether [`Context::bind`] last bound this context on this thread (see [`BOUND`]).
    fn was_bound(&self) -> bool {
        BOUND.with(|bound| bound.get() == self.raw)
    }

    /// A stream of the runtime's own that waits for no other (not even the legacy default
    /// stream); the context is bound.
    fn own_stream(&self) -> Result<sys::CUstream, Error> {
        let mut raw = ptr::null_mut();
        // SAFETY: an out-pointer to a local.
        check("cuStreamCreate", unsafe {
            sys::cuStreamCreate(&mut raw, sys::CUstream_flags::CU_STREAM_NON_BLOCKING as u32)
        })?;
        Ok(raw)
    }
}

impl Drop for Context {
    fn drop(&mut self) {
        let mut idle =
            std::mem::take(self.idle_events.get_mut().unwrap_or_else(|e| e.into_inner()));
        let spare = *self.spare_event.get_mut();
        if !spare.is_null() {
            idle.push(spare);
        }
        let staging = std::mem::take(self.staging.get_mut().unwrap_or_else(|e| e.into_inner()));
        if (!idle.is_empty() || !staging.is_empty()) && self.bind().is_ok() {
            for event in idle {
                // SAFETY: each idle event was created once and is destroyed once, here.
                unsafe {
                    let _ = sys::cuEventDestroy_v2(event);
                }
            }
            for block in staging {
                // SAFETY: each idle block was allocated once and is freed once, here; no copy
                // uses an idle block.
                unsafe {
                    let _ = sys::cuMemFreeHost(block.at);
                }
            }
        }
        if self.primary {
            // SAFETY: retained once in `Device::open`, released once here.
            unsafe {
                let _ = sys::cuDevicePrimaryCtxRelease_v2(self.device);
            }
        }
    }
}

/// A CUDA device opened for use: its primary context.
pub(crate) struct Device {
    context: Arc<Context>,
    /// How its memory is allocated and freed.
    heap: Arc<Heap>,
    /// The GPU's compute capability, which says what native objects it runs.
    compute_capability: (u32, u32),
}

/// Whether a GPU of compute capability `(major, minor)` runs the `ptx64` target's PTX; the
/// refusal names it and what the images carry.
fn runs_ptx(ordinal: i32, name: &str, (major, minor): (u32, u32)) -> Result<(), Error> {
    let (need_major, need_minor) = sycl_format::PTX_COMPUTE_CAPABILITY;
    if (major, minor) >= (need_major, need_minor) {
        return Ok(());
    }
    Err(Error::InvalidArgument(format!(
        "CUDA device {ordinal} ({name}, compute capability {major}.{minor}) cannot run this \
         toolkit's device code: its images carry PTX for sm_{need_major}{need_minor} (compute \
         capability {need_major}.{need_minor}) and later GPUs; pick another device with \
         SYCL_DEVICE"
    )))
}

impl Device {
    /// The device `info` describes, in `context`.
    fn of(context: Context, info: &DeviceInfo) -> Device {
        let context = Arc::new(context);
        Device {
            heap: Arc::new(Heap::new(&context)),
            context,
            compute_capability: info.limits.compute_capability.unwrap_or((0, 0)),
        }
    }

    /// `objects` linked by the driver's linker into one module.
    fn link_objects(&self, objects: &[&Code], _flags: &str) -> Result<Module, Failure> {
        const LOG: usize = 64 << 10;
        let fail = |error: Error, log: &[u8]| Failure {
            error: error.to_string(),
            log: String::from_utf8_lossy(log.split(|&b| b == 0).next().unwrap_or_default())
                .trim()
                .to_string(),
            bad_options: false,
        };
        self.context.bind().map_err(|e| fail(e, &[]))?;
        let mut error_log = vec![0u8; LOG];
        let mut options = [
            sys::CUjit_option::CU_JIT_ERROR_LOG_BUFFER,
            sys::CUjit_option::CU_JIT_ERROR_LOG_BUFFER_SIZE_BYTES,
        ];
        let mut values = [error_log.as_mut_ptr().cast::<c_void>(), LOG as *mut c_void];
        let mut state = ptr::null_mut();
        // SAFETY: the option values are a buffer of LOG bytes and its size, alive until the
        // state is destroyed below; each PTX is NUL-terminated, and each object outlives the
        // link.
        unsafe {
            check(
                "cuLinkCreate",
                sys::cuLinkCreate_v2(
                    options.len() as u32,
                    options.as_mut_ptr(),
                    values.as_mut_ptr(),
                    &mut state,
                ),
            )
            .map_err(|e| fail(e, &[]))?;
            let linked = (|| {
                for (i, code) in objects.iter().enumerate() {
                    let name = format!("image{i}\0");
                    check(
                        "cuLinkAddData",
                        sys::cuLinkAddData_v2(
                            state,
                            code.input,
                            code.bytes.as_ptr() as *mut c_void,
                            code.bytes.len(),
                            name.as_ptr().cast(),
                            0,
                            ptr::null_mut(),
                            ptr::null_mut(),
                        ),
                    )?;
                }
                let mut cubin = ptr::null_mut();
                let mut size = 0;
                check("cuLinkComplete", sys::cuLinkComplete(state, &mut cubin, &mut size))?;
                // The cubin belongs to the link state: copied out before it is destroyed.
                Ok(std::slice::from_raw_parts(cubin.cast::<u8>(), size).to_vec())
            })();
            let _ = sys::cuLinkDestroy(state);
            let cubin = linked.map_err(|e| fail(e, &error_log))?;
            self.module(cubin).map_err(|e| fail(e, &[]))
        }
    }

    fn module(&self, cubin: Vec<u8>) -> Result<Module, Error> {
        self.context.bind()?;
        // A cubin is an ELF file: anything else is refused here, before the driver reads it.
        if !cubin.starts_with(b"\x7fELF") {
            return Err(Error::Driver {
                call: "cuModuleLoadData",
                // The code the driver gives an image it cannot load.
                code: DriverCode::Cuda(CUresult::CUDA_ERROR_INVALID_IMAGE as i32),
                error: "not a cubin (no ELF header)".into(),
            });
        }
        let mut raw = ptr::null_mut();
        // SAFETY: the image is a complete cubin in memory; the driver copies what it needs.
        check("cuModuleLoadData", unsafe {
            sys::cuModuleLoadData(&mut raw, cubin.as_ptr().cast())
        })?;
        Ok(Module(vec![Arc::new(Loaded { context: self.context.clone(), raw, cubin })]))
    }
}

impl api::Device<Cuda> for Device {
    /// The device's primary context, retained; a GPU older than the PTX is refused.
    fn open(ordinal: i32, info: &DeviceInfo) -> Result<Device, Error> {
        runs_ptx(ordinal, &info.name, info.limits.compute_capability.unwrap_or((0, 0)))?;
        let mut device = 0;
        let mut raw = ptr::null_mut();
        // SAFETY: out-pointers to locals; the driver was initialised when the device was found.
        unsafe {
            check("cuDeviceGet", sys::cuDeviceGet(&mut device, ordinal))?;
            check("cuDevicePrimaryCtxRetain", sys::cuDevicePrimaryCtxRetain(&mut raw, device))?;
        }
        Ok(Device::of(Context::new(raw, device, true), info))
    }

    /// The primary context is opened as [`api::Device::open`] does; another context is used
    /// as it is, and the program keeps it alive.
    unsafe fn adopt(
        ordinal: i32,
        info: &DeviceInfo,
        context: sys::CUcontext,
    ) -> Result<Device, Error> {
        let opened = Device::open(ordinal, info)?;
        if opened.context.raw == context {
            return Ok(opened);
        }
        let device = device_of(ordinal)?;
        // SAFETY: a live context (the caller's promise); an out-pointer to a local.
        let of = unsafe {
            check("cuCtxSetCurrent", sys::cuCtxSetCurrent(context))?;
            let mut of = 0;
            check("cuCtxGetDevice", sys::cuCtxGetDevice(&mut of))?;
            of
        };
        if of != device {
            return Err(Error::InvalidArgument(
                "Queue::from_native: the CUDA context is not of the device given with it".into(),
            ));
        }
        Ok(Device::of(Context::new(context, device, false), info))
    }

    /// An image's PTX: the object (the JIT linker compiles it), with the specialization
    /// values written into the variables that hold them.
    fn compile(&self, ptx: &[u8], spec: &[SpecValue], _flags: &str) -> Result<Code, Failure> {
        let mut text = specialize(ptx, spec).map_err(|log| Failure {
            error: "specializing PTX".into(),
            log,
            bad_options: false,
        })?;
        if text.last() != Some(&0) {
            text.push(0);
        }
        Ok(Code {
            input: sys::CUjitInputType::CU_JIT_INPUT_PTX,
            bytes: text.into(),
            complete: false,
        })
    }

    /// A native image (SASS for this GPU's architecture, which `sycl-ld` made with `ptxas`: a
    /// relocatable object, or a whole program for an image that neither imports nor exports):
    /// the object as it is, nothing compiled, with the specialization values written into
    /// the initial values of the variables that hold them.
    fn load_object(&self, object: &[u8], spec: &[SpecValue]) -> Result<Code, Failure> {
        let failed = |log: String| Failure {
            error: "reading a native image".into(),
            log,
            bad_options: false,
        };
        let cubin = sycl_format::cubin::Cubin::parse(object).map_err(|e| failed(e.to_string()))?;
        // The driver would refuse SASS this GPU cannot run: a mislabelled object never
        // reaches it.
        if !sycl_format::sass_runs_on(cubin.arch, self.compute_capability) {
            let (major, minor) = self.compute_capability;
            return Err(failed(format!(
                "the object holds SASS for sm_{}, which this GPU (compute capability \
                 {major}.{minor}) cannot run",
                cubin.arch
            )));
        }
        // A whole program (`ptxas` without `-c`: no imports, no exports) is loaded as it is.
        let complete = !cubin.relocatable;
        let mut bytes = object.to_vec();
        for value in spec {
            let name = format!("{PTX_SPEC_CONSTANT_PREFIX}{}", value.name);
            sycl_format::cubin::set_initializer(&mut bytes, &name, value.bytes)
                .map_err(|e| failed(format!("specialization constant `{}`: {e}", value.name)))?;
        }
        let input = sys::CUjitInputType::CU_JIT_INPUT_CUBIN;
        Ok(Code { input, bytes: bytes.into(), complete })
    }

    /// The objects linked by the driver's linker for this GPU (compiling PTX, taking native
    /// objects as they are), and loaded. A native whole program needs no link: it is loaded as
    /// a module of its own (the linker's first use in a process costs about 2 ms, measured on
    /// an H200: most of a native first launch), and the program is its modules together.
    fn link(&self, objects: &[&Code], flags: &str) -> Result<Module, Failure> {
        let failed = |error: Error| Failure {
            error: error.to_string(),
            log: String::new(),
            bad_options: false,
        };
        let (whole, linked): (Vec<&Code>, Vec<&Code>) = objects.iter().partition(|c| c.complete);
        let mut parts = Vec::with_capacity(whole.len() + 1);
        for code in whole {
            parts.extend(self.module(code.bytes.to_vec()).map_err(failed)?.0);
        }
        if !linked.is_empty() {
            parts.extend(self.link_objects(&linked, flags)?.0);
        }
        Ok(Module(parts))
    }

    /// A program's [`Module::image`] (from the persistent cache), loaded.
    fn load(&self, image: &[u8], _flags: &str) -> Result<Module, Failure> {
        let failed = |error: Error| Failure {
            error: error.to_string(),
            log: String::new(),
            bad_options: false,
        };
        let mut parts = Vec::new();
        for cubin in split_modules(image).map_err(failed)? {
            parts.extend(self.module(cubin.to_vec()).map_err(failed)?.0);
        }
        Ok(Module(parts))
    }

    /// A stream; with `profiled`, each command's event carries timing (see [`Clock`]).
    fn queue(&self, profiled: bool) -> Result<Stream, Error> {
        self.context.bind()?;
        let mut raw = ptr::null_mut();
        // SAFETY: an out-pointer to a local; flags 0 is a blocking stream.
        check("cuStreamCreate", unsafe { sys::cuStreamCreate(&mut raw, 0) })?;
        let shared = Arc::new(StreamShared::new(&self.context, raw, true, None));
        let clock = match profiled {
            true => Some(Clock::new(shared.record_raw(true)?)),
            false => None,
        };
        Ok(Stream { shared, clock })
    }

    /// See [`Heap`].
    fn alloc(&self, bytes: usize) -> Result<Memory, Error> {
        self.heap.alloc(bytes.max(1))
    }

    /// Page-locked memory.
    fn alloc_host(&self, bytes: usize) -> Result<HostMemory, Error> {
        HostMemory::new(&self.context, bytes)
    }

    /// A program's stream of this device's context; `owner` (a cudarc `CudaStream`) is kept
    /// as long as the stream's last event.
    unsafe fn adopt_queue(
        &self,
        _context: sys::CUcontext,
        _device: sys::CUdevice,
        stream: sys::CUstream,
        owner: &mut Option<Owner>,
    ) -> Result<Stream, Error> {
        let owner = owner.take();
        self.context.bind()?;
        let mut of = ptr::null_mut();
        // SAFETY: a live stream (the caller's promise); an out-pointer to a local.
        check("cuStreamGetCtx", unsafe { sys::cuStreamGetCtx(stream, &mut of) })?;
        if of != self.context.raw {
            return Err(Error::InvalidArgument(
                "Queue::from_native: the CUDA stream is of another context than the one given with it".into(),
            ));
        }
        let shared = Arc::new(StreamShared::new(&self.context, stream, false, owner));
        Ok(Stream { shared, clock: None })
    }

    /// Memory of a stream-ordered allocator, which belongs to no context, is taken when it is
    /// of this device.
    unsafe fn adopt_memory(&self, address: sys::CUdeviceptr, size: usize) -> Result<Memory, Error> {
        self.context.bind()?;
        let mut context: sys::CUcontext = ptr::null_mut();
        // SAFETY: an out-pointer of the attribute's type (a context).
        let found = unsafe {
            sys::cuPointerGetAttribute(
                (&mut context as *mut sys::CUcontext).cast(),
                sys::CUpointer_attribute::CU_POINTER_ATTRIBUTE_CONTEXT,
                address,
            )
        };
        check("cuPointerGetAttribute", found).map_err(|_| {
            Error::InvalidArgument(format!(
                "Buffer::from_native: {address:#x} is not CUDA device memory"
            ))
        })?;
        // Memory from a stream-ordered allocator (`cuMemAllocAsync`, as cudarc allocates where
        // the GPU has memory pools) belongs to no context: it must be of this device.
        if context.is_null() {
            let mut ordinal = -1i32;
            // SAFETY: an out-pointer of the attribute's type (an int).
            check("cuPointerGetAttribute", unsafe {
                sys::cuPointerGetAttribute(
                    (&mut ordinal as *mut i32).cast(),
                    sys::CUpointer_attribute::CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL,
                    address,
                )
            })?;
            if device_of(ordinal).ok() != Some(self.context.device) {
                return Err(Error::InvalidArgument(format!(
                    "Buffer::from_native: the memory is of CUDA device {ordinal}, not the queue's"
                )));
            }
            context = self.context.raw;
        }
        if context != self.context.raw {
            return Err(Error::InvalidArgument(
                "Buffer::from_native: the memory is of another CUDA context than the queue's"
                    .into(),
            ));
        }
        let (mut base, mut bytes) = (0, 0);
        // SAFETY: out-pointers to locals.
        check("cuMemGetAddressRange", unsafe {
            sys::cuMemGetAddressRange_v2(&mut base, &mut bytes, address)
        })?;
        let available = (base + bytes as u64).saturating_sub(address);
        if available < size as u64 {
            return Err(Error::InvalidArgument(format!(
                "Buffer::from_native: the allocation holds {available} bytes from {address:#x}; the buffer needs {size}"
            )));
        }
        Ok(Memory::borrowed(&self.heap, address, None))
    }

    /// The primary context, which it retains.
    fn holds_context(&self) -> bool {
        self.context.primary
    }

    fn context_key(&self) -> usize {
        self.context.raw as usize
    }
}

/// `ptx` with each value of `spec` as the initialiser of its constant's variable,
/// `.weak .const .align 4 .b8 __sycl_spec_constant_scale[4] = {2, 0, 0, 0};` (the form
/// `sycl-ld` writes); a constant the PTX does not read has no variable and is skipped.
fn specialize(ptx: &[u8], spec: &[SpecValue]) -> Result<Vec<u8>, String> {
    if spec.is_empty() {
        return Ok(ptx.to_vec());
    }
    let text = std::str::from_utf8(ptx).map_err(|_| "the PTX is not UTF-8 text".to_string())?;
    let mut out = String::with_capacity(text.len() + 16 * spec.len());
    for line in text.split_inclusive('\n') {
        let declared = PtxSpecConstant::of(line);
        let Some((value, constant)) =
            declared.and_then(|c| Some((spec.iter().find(|v| v.name == c.name)?, c)))
        else {
            out.push_str(line);
            continue;
        };
        if constant.size != value.bytes.len() {
            return Err(format!(
                "specialization constant `{}`: {} byte(s) given, the image's holds {}",
                value.name,
                value.bytes.len(),
                constant.size
            ));
        }
        out.push_str(&constant.with_value(value.bytes));
        if line.ends_with('\n') {
            out.push('\n');
        }
    }
    Ok(out.into_bytes())
}

/// An image's code as the driver's linker takes it: PTX (NUL-terminated), or a native
/// relocatable object.
pub(crate) struct Code {
    input: sys::CUjitInputType,
    bytes: Arc<[u8]>,
    /// A native object with no undefined symbol of ours: loadable without a link.
    complete: bool,
}

/// A program: its loaded modules (one linked module, and a module of each native whole
/// program), kernels looked up in each.
pub(crate) struct Module(Vec<Arc<Loaded>>);

/// What [`Module::image`] starts with when a program is several modules: then a `u32` count
/// and each module's cubin as a `u64` length and its bytes, little-endian.
const MODULES_MAGIC: &[u8; 8] = b"SYCLMODS";

/// The cubins of a program's image: one cubin, or those [`MODULES_MAGIC`] frames.
fn split_modules(image: &[u8]) -> Result<Vec<&[u8]>, Error> {
    let Some(mut rest) = image.strip_prefix(MODULES_MAGIC) else { return Ok(vec![image]) };
    let malformed = || Error::Driver {
        call: "cuModuleLoadData",
        // The code the driver gives an image it cannot load.
        code: DriverCode::Cuda(CUresult::CUDA_ERROR_INVALID_IMAGE as i32),
        error: "a malformed program of modules".into(),
    };
    let mut take = |n: usize| -> Result<&[u8], Error> {
        let (head, tail) = rest.split_at_checked(n).ok_or_else(malformed)?;
        rest = tail;
        Ok(head)
    };
    let count = u32::from_le_bytes(take(4)?.try_into().map_err(|_| malformed())?);
    let mut cubins = Vec::new();
    for _ in 0..count {
        let len = u64::from_le_bytes(take(8)?.try_into().map_err(|_| malformed())?);
        cubins.push(take(usize::try_from(len).map_err(|_| malformed())?)?);
    }
    Ok(cubins)
}

struct Loaded {
    context: Arc<Context>,
    raw: sys::CUmodule,
    cubin: Vec<u8>,
}

// SAFETY: a module handle may be used from any thread with its context current.
unsafe impl Send for Loaded {}
// SAFETY: as above; nothing in it changes after loading.
unsafe impl Sync for Loaded {}

impl Drop for Loaded {
    fn drop(&mut self) {
        if self.context.bind().is_ok() {
            // SAFETY: loaded once, unloaded once; no kernel of it outlives it (each holds it).
            unsafe {
                let _ = sys::cuModuleUnload(self.raw);
            }
        }
    }
}

impl Module {
    /// What the persistent cache keeps: the linked cubin, or with several modules each
    /// module's, framed ([`MODULES_MAGIC`]).
    fn image(&self) -> Vec<u8> {
        if let [only] = self.0.as_slice() {
            return only.cubin.clone();
        }
        let mut out = MODULES_MAGIC.to_vec();
        out.extend((self.0.len() as u32).to_le_bytes());
        for part in &self.0 {
            out.extend((part.cubin.len() as u64).to_le_bytes());
            out.extend(&part.cubin);
        }
        out
    }
}

impl api::Object for Code {
    fn binary(&self) -> Result<Vec<u8>, Error> {
        Err(Error::InvalidArgument("a CUDA object has no binary apart from its image".into()))
    }
}

impl api::Program<Cuda> for Module {
    /// [`Module::image`].
    fn binary(&self) -> Result<Vec<u8>, Error> {
        Ok(self.image())
    }

    fn kernel(&self, name: &str) -> Result<Kernel, Error> {
        let c_name = std::ffi::CString::new(name)
            .map_err(|_| Error::KernelNotFound { kernel: name.into(), searched: vec![] })?;
        let mut last = None;
        for part in &self.0 {
            part.context.bind()?;
            let mut function = ptr::null_mut();
            // SAFETY: a live module and a NUL-terminated name.
            let found = check("cuModuleGetFunction", unsafe {
                sys::cuModuleGetFunction(&mut function, part.raw, c_name.as_ptr())
            });
            match found {
                Ok(()) => {
                    let mut max_threads = 0;
                    // SAFETY: a live function of a loaded module; an out-pointer to a local.
                    check("cuFuncGetAttribute", unsafe {
                        sys::cuFuncGetAttribute(
                            &mut max_threads,
                            sys::CUfunction_attribute::CU_FUNC_ATTRIBUTE_MAX_THREADS_PER_BLOCK,
                            function,
                        )
                    })?;
                    return Ok(Kernel {
                        module: part.clone(),
                        function,
                        name: name.into(),
                        max_threads: u32::try_from(max_threads).unwrap_or(0),
                        args: Vec::new(),
                        params: Vec::new(),
                        offsets: Vec::new(),
                        local_bytes: 0,
                        max_dynamic_shared: Cell::new(48 << 10),
                    });
                }
                Err(e) => last = Some(e),
            }
        }
        Err(last.unwrap_or_else(|| Error::KernelNotFound { kernel: name.into(), searched: vec![] }))
    }
}

/// A kernel argument as set.
enum Slot {
    Bytes(Vec<u8>),
    /// Bytes of local memory per work-group.
    Local(usize),
}

/// A kernel function with its arguments, kept between launches.
pub(crate) struct Kernel {
    module: Arc<Loaded>,
    function: sys::CUfunction,
    /// The kernel's name, which a stream keeps for its last launch (see
    /// [`StreamShared::last_kernel`]).
    name: Arc<str>,
    /// The most work-items a block of it may have (`CU_FUNC_ATTRIBUTE_MAX_THREADS_PER_BLOCK`,
    /// which its registers may make smaller than the device's limit).
    max_threads: u32,
    args: Vec<Slot>,
    /// What `cuLaunchKernel` reads, made again whenever an argument is set (a launch in a
    /// loop reuses it): one pointer per parameter, to the bytes of a value in `args` or to a
    /// local argument's offset in `offsets`. Both live in heap buffers that stay put until the
    /// next set.
    params: Vec<*mut c_void>,
    /// Each local argument's offset in the dynamic shared memory (0 for the others).
    offsets: Vec<u64>,
    /// The local arguments' bytes in all.
    local_bytes: usize,
    /// The dynamic shared memory the function is allowed (48 KiB until raised); a kernel is
    /// used by one thread at a time.
    max_dynamic_shared: Cell<usize>,
}

// SAFETY: a function handle may be used from any thread with its context current; a kernel is
// used by one thread at a time (it is taken from a pool for a launch).
unsafe impl Send for Kernel {}

impl Kernel {
    fn slot(&mut self, index: u32) -> &mut Slot {
        let index = index as usize;
        while self.args.len() <= index {
            self.args.push(Slot::Bytes(Vec::new()));
        }
        &mut self.args[index]
    }

    /// Sets argument `index` to `bytes`.
    fn set(&mut self, index: u32, bytes: &[u8]) {
        match self.slot(index) {
            // The same buffer again: a value that changes every launch allocates nothing.
            Slot::Bytes(was) => {
                was.clear();
                was.extend_from_slice(bytes);
            }
            slot => *slot = Slot::Bytes(bytes.to_vec()),
        }
        self.prepare();
    }

    /// Makes `params`, `offsets` and `local_bytes` of the arguments as now set. Local
    /// arguments become offsets into the dynamic shared memory, each aligned to 16 bytes.
    fn prepare(&mut self) {
        let mut shared = 0usize;
        self.offsets.clear();
        for arg in &self.args {
            let offset = match arg {
                Slot::Bytes(_) => 0,
                Slot::Local(size) => {
                    shared = shared.next_multiple_of(16);
                    let at = shared as u64;
                    shared += size;
                    at
                }
            };
            self.offsets.push(offset);
        }
        self.local_bytes = shared;
        self.params.clear();
        for (arg, offset) in self.args.iter_mut().zip(&mut self.offsets) {
            self.params.push(match arg {
                Slot::Bytes(bytes) => bytes.as_mut_ptr().cast(),
                Slot::Local(_) => (offset as *mut u64).cast(),
            });
        }
    }
}

impl api::Kernel<Cuda> for Kernel {
    fn work_group_sizes(&self, _device: &Device) -> Result<(usize, usize), Error> {
        let context = &self.module.context;
        context.bind()?;
        let mut warp = 0;
        // SAFETY: the device of a live context; an out-pointer to a local.
        check("cuDeviceGetAttribute", unsafe {
            sys::cuDeviceGetAttribute(
                &mut warp,
                CUdevice_attribute::CU_DEVICE_ATTRIBUTE_WARP_SIZE,
                context.device,
            )
        })?;
        Ok((self.max_threads as usize, warp as usize))
    }

    /// The memory's address.
    fn set_mem(&mut self, index: u32, mem: &Memory) -> Result<(), Error> {
        self.set(index, &mem.address.to_ne_bytes());
        Ok(())
    }

    /// The address.
    fn set_native(&mut self, index: u32, address: sys::CUdeviceptr) -> Result<(), Error> {
        self.set(index, &address.to_ne_bytes());
        Ok(())
    }

    /// An offset into the launch's dynamic shared memory (see [`Kernel::prepare`]).
    fn set_local(&mut self, index: u32, size: usize) -> Result<(), Error> {
        *self.slot(index) = Slot::Local(size);
        self.prepare();
        Ok(())
    }

    fn set_bytes(&mut self, index: u32, bytes: &[u8]) -> Result<(), Error> {
        self.set(index, bytes);
        Ok(())
    }
}

/// A stream of the device's primary context: launches and copies in order.
pub(crate) struct Stream {
    shared: Arc<StreamShared>,
    /// On a profiled stream, what its commands' timestamps count from.
    clock: Option<Clock>,
}

/// The stream itself, shared with the events of its commands, which record on it when first
/// asked about (a launch records no event: see [`Event`]) and wait on its callback lanes: it
/// lives as long as the last of them.
struct StreamShared {
    context: Arc<Context>,
    raw: sys::CUstream,
    /// Made by us (destroyed on drop); otherwise a program's, which it keeps alive.
    owned: bool,
    /// Commands enqueued so far: each launch, and each command whose event is recorded, takes
    /// the next number once it is enqueued (its [`Event::order`]).
    issued: AtomicU64,
    /// The last event recorded for launches' events, with how many commands it covers.
    recorded: Mutex<Option<(u64, Arc<RawEvent>)>>,
    /// The streams that call the completion callbacks of this stream's events, made at the
    /// first ([`Event::on_complete`]).
    lanes: Mutex<Lanes>,
    /// The name of the last kernel launched here, which an error of the stream's names.
    last_kernel: Mutex<Option<Arc<str>>>,
    /// Where `last_kernel`'s text lies, as a number: a launch writes the name only when its
    /// kernel's lies elsewhere, so a loop of one kernel pays one relaxed load per launch, and
    /// nothing is allocated. (`last_kernel` holds the text, so no other name can lie there.)
    last_kernel_at: AtomicUsize,
    /// For a program's stream, the object it belongs to (a cudarc `CudaStream`): every event
    /// of the stream holds the stream, so the object outlives them all. Dropped after `drop`
    /// destroyed what is ours.
    _owner: Option<Owner>,
}

// SAFETY: a stream may be used from any thread with its context current; the owner is `Send`.
unsafe impl Send for StreamShared {}
// SAFETY: as above; the driver serializes work submitted to a stream, and the owner is `Sync`.
unsafe impl Sync for StreamShared {}

impl StreamShared {
    fn new(
        context: &Arc<Context>,
        raw: sys::CUstream,
        owned: bool,
        owner: Option<Owner>,
    ) -> StreamShared {
        StreamShared {
            context: context.clone(),
            raw,
            owned,
            issued: AtomicU64::new(0),
            recorded: Mutex::new(None),
            lanes: Mutex::new(Lanes::default()),
            last_kernel: Mutex::new(None),
            last_kernel_at: AtomicUsize::new(0),
            _owner: owner,
        }
    }

    /// An event that completes when command number `order` (and everything enqueued before
    /// it) did: the last one recorded when it covers the command, else one recorded now,
    /// which also covers what was enqueued since.
    fn covering(&self, order: u64) -> Result<Arc<RawEvent>, Error> {
        let mut recorded = self.recorded.lock().unwrap_or_else(|e| e.into_inner());
        if let Some((covers, event)) = recorded.as_ref() {
            if *covers > order {
                return Ok(event.clone());
            }
        }
        self.context.bind()?;
        // Every command numbered below `covers` is enqueued (its number is taken after).
        let covers = self.issued.load(Ordering::Acquire);
        let event = self.record_raw(false)?;
        *recorded = Some((covers, event.clone()));
        Ok(event)
    }

    /// An event recorded now, with timing when `timed` (the context is bound); an untimed one
    /// is an idle event of the context's when there is one.
    fn record_raw(&self, timed: bool) -> Result<Arc<RawEvent>, Error> {
        let idle = match timed {
            false => {
                let spare = self.context.spare_event.swap(ptr::null_mut(), Ordering::AcqRel);
                match spare.is_null() {
                    false => Some(spare),
                    true => {
                        self.context.idle_events.lock().unwrap_or_else(|e| e.into_inner()).pop()
                    }
                }
            }
            true => None,
        };
        let raw = match idle {
            Some(raw) => raw,
            None => {
                let mut raw = ptr::null_mut();
                let flags =
                    if timed { 0 } else { sys::CUevent_flags::CU_EVENT_DISABLE_TIMING as u32 };
                // SAFETY: an out-pointer to a local; the context is bound.
                check("cuEventCreate", unsafe { sys::cuEventCreate(&mut raw, flags) })?;
                raw
            }
        };
        let event = Arc::new(RawEvent { context: self.context.clone(), raw, timed });
        // SAFETY: a live event and stream of one context.
        check("cuEventRecord", unsafe { sys::cuEventRecord(raw, self.raw) })?;
        Ok(event)
    }

    /// Notes `kernel` as the last launched here.
    fn launched(&self, kernel: &Kernel) {
        let at = kernel.name.as_ptr() as usize;
        if self.last_kernel_at.load(Ordering::Relaxed) != at {
            let mut last = self.last_kernel.lock().unwrap_or_else(|e| e.into_inner());
            *last = Some(kernel.name.clone());
            self.last_kernel_at.store(at, Ordering::Relaxed);
        }
    }

    /// The name of the last kernel launched here, if any.
    fn last_kernel(&self) -> Option<Arc<str>> {
        self.last_kernel.lock().unwrap_or_else(|e| e.into_inner()).clone()
    }

    /// `result`, traced with the last kernel launched here when it is an error: after a fault
    /// (a sticky error, which every later call returns) that kernel is the first suspect.
    fn named<T>(&self, result: Result<T, Error>) -> Result<T, Error> {
        if let Err(e) = &result {
            if let Some(kernel) = self.last_kernel() {
                trace!("fault", "{e}: the last kernel launched on the queue before it: `{kernel}`");
            }
        }
        result
    }
}

impl Drop for StreamShared {
    fn drop(&mut self) {
        let lanes = self.lanes.get_mut().unwrap_or_else(|e| e.into_inner());
        if (self.owned || lanes.count > 0) && self.context.bind().is_ok() {
            for &lane in &lanes.raw[..lanes.count] {
                // SAFETY: made once, destroyed once. A callback still pending runs all the
                // same: a stream destroyed while the device has work in it is released once
                // that work completed (`cuStreamDestroy`, CUDA driver API, stream
                // management); a callback holds nothing of this stream's.
                unsafe {
                    let _ = sys::cuStreamDestroy_v2(lane);
                }
            }
            if self.owned {
                // SAFETY: created once, destroyed once (its pending work completes as above).
                unsafe {
                    let _ = sys::cuStreamDestroy_v2(self.raw);
                }
            }
        }
    }
}

/// How many callback lanes a stream may have.
const LANES: usize = 4;

/// A stream's callback lanes: each a stream of the runtime's own that waits for the events
/// given to it, in the order given, and after each one calls its callback. An event waits on
/// the lane of its own stream, never behind another queue's work. On one stream events
/// complete in order, so one lane serves callbacks registered in the order of their
/// commands; a callback for an earlier command than one a lane already waits for goes to
/// another lane (see [`pick_lane`]), rather than wait behind that later command.
struct Lanes {
    raw: [sys::CUstream; LANES],
    /// The [`Event::order`] of the latest event each lane waits for.
    last: [u64; LANES],
    /// Lanes made so far.
    count: usize,
}

impl Default for Lanes {
    fn default() -> Lanes {
        Lanes { raw: [ptr::null_mut(); LANES], last: [0; LANES], count: 0 }
    }
}

impl Lanes {
    /// The lane for a callback of command number `order`, made when needed (the context is
    /// bound).
    fn lane_for(&mut self, order: u64, context: &Context) -> Result<sys::CUstream, Error> {
        let i = match pick_lane(&self.last[..self.count], order, LANES) {
            Some(i) => i,
            None => {
                let i = self.count;
                self.raw[i] = context.own_stream()?;
                self.last[i] = order;
                self.count += 1;
                i
            }
        };
        self.last[i] = self.last[i].max(order);
        Ok(self.raw[i])
    }
}

/// Which lane a callback of command number `order` waits on, given the latest command each
/// lane made so far waits for (`last`): the lane whose latest is the latest not after
/// `order` (so the callback waits behind nothing that ends after its command); else `None`,
/// for a new lane, while fewer than `max` are made; else the lane whose latest comes first
/// (the callback then waits for that later command of its stream too).
fn pick_lane(last: &[u64], order: u64, max: usize) -> Option<usize> {
    let fits = last.iter().enumerate().filter(|&(_, &l)| l <= order).max_by_key(|&(_, &l)| l);
    match fits {
        Some((i, _)) => Some(i),
        None if last.len() < max => None,
        None => last.iter().enumerate().min_by_key(|&(_, &l)| l).map(|(i, _)| i),
    }
}

/// Work-group sizes when the launch gives none: as large as divides the global size, up to
/// 256 work-items in all, first dimension first.
fn default_local(global: &[usize]) -> [usize; 3] {
    let mut local = [1; 3];
    let mut budget = 256;
    for (d, &g) in global.iter().enumerate() {
        local[d] = (1..=budget.min(g)).rev().find(|b| g % b == 0).unwrap_or(1);
        budget /= local[d];
    }
    local
}

/// The grid and the block of a launch of `kernel` (which takes blocks of at most
/// `max_threads` work-items) over `global` work-items in work-groups of `local`: each within
/// what CUDA takes (`u32`), and the block no larger than the kernel takes.
fn launch_shape(
    kernel: &str,
    max_threads: u32,
    global: &[usize],
    local: &[usize; 3],
) -> Result<([u32; 3], [u32; 3]), Error> {
    let (mut grid, mut block) = ([1u32; 3], [1u32; 3]);
    for d in 0..global.len() {
        let groups = global[d] / local[d];
        grid[d] = u32::try_from(groups).map_err(|_| {
            Error::InvalidArgument(format!("{groups} work-groups in dimension {d}"))
        })?;
        block[d] = u32::try_from(local[d]).map_err(|_| {
            Error::InvalidArgument(format!(
                "{} work-items per work-group in dimension {d}",
                local[d]
            ))
        })?;
    }
    let threads: u64 = block.iter().map(|&b| u64::from(b)).product();
    if threads > u64::from(max_threads) {
        let shape = block[..global.len().max(1)].iter().map(u32::to_string).collect::<Vec<_>>();
        return Err(Error::InvalidArgument(format!(
            "a work-group of {threads} work-items ({}) for kernel `{kernel}`, which takes at most \
             {max_threads} per work-group on this GPU: launch it with smaller work-groups",
            shape.join("×")
        )));
    }
    Ok((grid, block))
}

impl api::Queue<Cuda> for Stream {
    /// A launch records no event (see [`Event`]); the grid is the global size over the local
    /// one, and an offset other than zero is refused.
    fn launch(
        &self,
        kernel: &Kernel,
        global: &[usize],
        local: Option<&[usize]>,
        offset: Option<&[usize]>,
        after: &[&Event],
    ) -> Result<Event, Error> {
        if offset.is_some_and(|o| o.iter().any(|&d| d != 0)) {
            // The ptx64 target's get_global_id and get_global_offset know no offset.
            return Err(Error::InvalidArgument(
                "a global offset on a CUDA device: its kernels' get_global_id knows none; \
                 add the offset to the index in the kernel, or pass it as an argument"
                    .into(),
            ));
        }
        // Asking the driver for the current context costs a launch in a loop about 2 %: a
        // launch without events to wait for or to time trusts the thread's last bind, and
        // binds and tries again if the driver refuses the launch for its context.
        let trusted = after.is_empty() && self.clock.is_none() && self.shared.context.was_bound();
        if !trusted {
            self.shared.context.bind()?;
            self.wait_events(after)?;
        }
        let local = match local {
            Some(given) => {
                let mut l = [1; 3];
                l[..given.len()].copy_from_slice(given);
                l
            }
            None => default_local(global),
        };
        let (grid, block) = launch_shape(&kernel.name, kernel.max_threads, global, &local)?;
        let shared = sycl_format::ptx_dynamic_shared_size(kernel.local_bytes, global.len());
        if shared > kernel.max_dynamic_shared.get() {
            self.shared.context.bind()?;
            // SAFETY: a live function; the driver checks the size against the device.
            check("cuFuncSetAttribute", unsafe {
                sys::cuFuncSetAttribute(
                    kernel.function,
                    sys::CUfunction_attribute::CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES,
                    shared as i32,
                )
            })?;
            kernel.max_dynamic_shared.set(shared);
        }
        let start = self.start()?;
        let launch = || {
            // SAFETY: `params` holds one pointer per kernel parameter, each to a value of the
            // parameter's size (the argument check compared them with the kernel's record),
            // alive until the call returns (the driver copies them at launch and writes
            // nothing through them).
            unsafe {
                sys::cuLaunchKernel(
                    kernel.function,
                    grid[0],
                    grid[1],
                    grid[2],
                    block[0],
                    block[1],
                    block[2],
                    shared as u32,
                    self.shared.raw,
                    kernel.params.as_ptr().cast_mut(),
                    ptr::null_mut(),
                )
            }
        };
        let mut code = launch();
        if trusted
            && matches!(
                code,
                CUresult::CUDA_ERROR_INVALID_CONTEXT
                    | CUresult::CUDA_ERROR_INVALID_HANDLE
                    | CUresult::CUDA_ERROR_CONTEXT_IS_DESTROYED
            )
        {
            // Another context was made current since this thread's last bind.
            trace!(
                "rebind",
                "{code:?}: another context was current; launched again in the queue's"
            );
            self.shared.context.bind()?;
            code = launch();
        }
        self.shared.named(check("cuLaunchKernel", code))?;
        self.shared.launched(kernel);
        match start {
            Some(timing) => self.timed(timing),
            // No event recorded: the launch's number stands for it until it is asked about.
            None => Ok(self.event(End::Launch, None)),
        }
    }

    /// Nothing to do: the driver submits work as it is launched.
    fn flush(&self) -> Result<(), Error> {
        Ok(())
    }

    /// A large read into pageable memory not yet touched goes through page-locked staging
    /// ([`Stream::read_staged`]).
    fn read_blocking(
        &self,
        mem: &Memory,
        offset: usize,
        out: &mut [u8],
    ) -> Option<Result<(), Error>> {
        Some(self.read(mem, offset, out))
    }

    unsafe fn read_async(
        &self,
        mem: &Memory,
        offset: usize,
        out: *mut u8,
        size: usize,
    ) -> Result<Event, Error> {
        self.shared.context.bind()?;
        self.submit(|| {
            // SAFETY: `size` bytes into `out`, which the caller keeps alive and untouched
            // until the event recorded after the copy completes, from within the allocation
            // (the caller checked the range).
            check("cuMemcpyDtoHAsync", unsafe {
                sys::cuMemcpyDtoHAsync_v2(
                    out.cast(),
                    mem.address + offset as u64,
                    size,
                    self.shared.raw,
                )
            })
        })
    }

    unsafe fn write_async(
        &self,
        mem: &Memory,
        offset: usize,
        data: *const u8,
        size: usize,
    ) -> Result<Event, Error> {
        self.shared.context.bind()?;
        self.submit(|| {
            // SAFETY: `size` bytes from `data`, which the caller keeps alive and unchanged
            // until the event recorded after the copy completes, into the allocation (the
            // caller checked the range).
            check("cuMemcpyHtoDAsync", unsafe {
                sys::cuMemcpyHtoDAsync_v2(
                    mem.address + offset as u64,
                    data.cast(),
                    size,
                    self.shared.raw,
                )
            })
        })
    }

    fn wait_for(&self, after: &[&Event]) -> Result<(), Error> {
        self.shared.context.bind()?;
        self.wait_events(after)
    }

    fn marker(&self) -> Result<Event, Error> {
        self.shared.context.bind()?;
        self.record()
    }

    /// A copy into page-locked staging of the context's, reused from map to map, since device
    /// memory is not the host's (with `write`, written back by the unmap).
    fn map(&self, mem: &Memory, size: usize, write: bool) -> Result<Mapping, Error> {
        let host = self.shared.context.stage(size)?;
        self.shared.context.bind()?;
        // SAFETY: `size` bytes into the staging block (which holds at least `size`), from
        // within the allocation (the caller checked); waited for below.
        let copied = check("cuMemcpyDtoHAsync", unsafe {
            sys::cuMemcpyDtoHAsync_v2(host.block.at, mem.address, size, self.shared.raw)
        })
        .and_then(|()| self.finish());
        match copied {
            Ok(()) => Ok(Mapping { host, size, write }),
            Err(e) => {
                // The copy may still be under way: the block is not used again.
                host.abandon();
                Err(e)
            }
        }
    }

    /// A map for writing is copied back to `mem`; the staging goes back to the context.
    fn unmap(&self, mem: &Memory, mapping: Mapping) -> Result<(), Error> {
        if !mapping.write {
            return Ok(());
        }
        self.shared.context.bind()?;
        // SAFETY: `size` bytes from the staging block into the allocation, from its start (the
        // map's range); waited for below, before the block goes back.
        let copied = check("cuMemcpyHtoDAsync", unsafe {
            sys::cuMemcpyHtoDAsync_v2(
                mem.address,
                mapping.host.block.at,
                mapping.size,
                self.shared.raw,
            )
        })
        .and_then(|()| self.finish());
        if copied.is_err() {
            // The copy may still be under way: the block is not used again.
            mapping.host.abandon();
        }
        copied
    }

    fn copy(
        &self,
        (src, src_offset): (&Memory, usize),
        (dst, dst_offset): (&Memory, usize),
        size: usize,
        after: &[&Event],
    ) -> Result<Event, Error> {
        self.shared.context.bind()?;
        self.wait_events(after)?;
        self.submit(|| {
            // SAFETY: two allocations of this context; the caller checked both ranges.
            check("cuMemcpyDtoDAsync", unsafe {
                sys::cuMemcpyDtoDAsync_v2(
                    dst.address + dst_offset as u64,
                    src.address + src_offset as u64,
                    size,
                    self.shared.raw,
                )
            })
        })
    }

    /// A 1-, 2- or 4-byte pattern (or a longer one that repeats one), by the driver's memset.
    fn fill(
        &self,
        mem: &Memory,
        pattern: &[u8],
        offset: usize,
        size: usize,
    ) -> Result<Option<Event>, Error> {
        let Some(unit) = [1, 2, 4].into_iter().find(|&u| {
            pattern.len().is_multiple_of(u) && pattern.chunks(u).all(|c| c == &pattern[..u])
        }) else {
            return Ok(None);
        };
        self.shared.context.bind()?;
        let at = mem.address + offset as u64;
        self.submit(|| {
            // SAFETY: `size / unit` units within the allocation (the caller checked the
            // range, a multiple of the pattern's size and so of `unit`).
            let code = unsafe {
                match unit {
                    1 => sys::cuMemsetD8Async(at, pattern[0], size, self.shared.raw),
                    2 => sys::cuMemsetD16Async(
                        at,
                        u16::from_ne_bytes([pattern[0], pattern[1]]),
                        size / 2,
                        self.shared.raw,
                    ),
                    _ => sys::cuMemsetD32Async(
                        at,
                        u32::from_ne_bytes([pattern[0], pattern[1], pattern[2], pattern[3]]),
                        size / 4,
                        self.shared.raw,
                    ),
                }
            };
            check("cuMemsetAsync", code)
        })
        .map(Some)
    }

    fn finish(&self) -> Result<(), Error> {
        self.shared.context.bind()?;
        // SAFETY: a live stream.
        self.shared.named(check("cuStreamSynchronize", unsafe {
            sys::cuStreamSynchronize(self.shared.raw)
        }))
    }

    fn native(&self) -> Result<NativeQueue, Error> {
        let context = &self.shared.context;
        Ok(NativeQueue::Cuda {
            context: context.raw,
            device: context.device,
            stream: self.shared.raw,
        })
    }
}

impl Stream {
    /// [`api::Queue::read_blocking`].
    fn read(&self, mem: &Memory, offset: usize, out: &mut [u8]) -> Result<(), Error> {
        self.shared.context.bind()?;
        let from = mem.address + offset as u64;
        if out.len() >= STAGED_READ_MIN && !page_locked(out.as_ptr()) && !resident(out) {
            return self.read_staged(from, out);
        }
        // SAFETY: `out.len()` bytes into `out` from within the allocation (the caller checked
        // `offset + out.len()`); waited for below, before `out` can go.
        check("cuMemcpyDtoHAsync", unsafe {
            sys::cuMemcpyDtoHAsync_v2(out.as_mut_ptr().cast(), from, out.len(), self.shared.raw)
        })?;
        self.finish()
    }

    /// The event of the command just enqueued, which takes the stream's next number.
    fn event(&self, end: End, timing: Option<Arc<Timing>>) -> Event {
        let order = self.shared.issued.fetch_add(1, Ordering::AcqRel);
        Event { stream: self.shared.clone(), order, end, timing, pinned: OnceLock::new() }
    }

    /// An event recorded on the stream now: it completes when the work before it does.
    fn record(&self) -> Result<Event, Error> {
        Ok(self.event(End::Recorded(self.shared.record_raw(false)?), None))
    }

    /// On a profiled stream, the start of the command about to be enqueued: a timed event
    /// recorded right before it, and the anchor it counts from.
    fn start(&self) -> Result<Option<Timing>, Error> {
        let Some(clock) = &self.clock else { return Ok(None) };
        let start = self.shared.record_raw(true)?;
        Ok(Some(Timing { anchor: clock.anchor_for(&start)?, start }))
    }

    /// The event of the command just enqueued, which `start` began: its end recorded now.
    fn timed(&self, timing: Timing) -> Result<Event, Error> {
        let end = End::Recorded(self.shared.record_raw(true)?);
        Ok(self.event(end, Some(Arc::new(timing))))
    }

    /// Enqueues the command `enqueue` makes; its event, timed on a profiled stream.
    fn submit(&self, enqueue: impl FnOnce() -> Result<(), Error>) -> Result<Event, Error> {
        let start = self.start()?;
        enqueue()?;
        match start {
            Some(timing) => self.timed(timing),
            None => self.record(),
        }
    }

    /// [`Stream::wait_for`], the context bound already.
    fn wait_events(&self, after: &[&Event]) -> Result<(), Error> {
        for event in after {
            // SAFETY: a live stream and a live event of its context.
            check("cuStreamWaitEvent", unsafe {
                sys::cuStreamWaitEvent(self.shared.raw, event.resolve()?.raw, 0)
            })?;
        }
        Ok(())
    }

    /// [`Stream::read`] through two page-locked chunks of the context's staging: the device
    /// copies each chunk while the host copies the one before out of staging into `out`,
    /// split among a few threads ([`COPY_THREADS`]). The driver's own copy into pageable
    /// memory not touched before ran at 1.4–1.8 GB/s on an H200 against 10.5–16.4 GB/s into
    /// memory touched before (`docs/DESIGN.md`): the first touch of each page (a fault, the
    /// page zeroed) is the cost, which here is spread over threads and overlaps the device's
    /// copy. `out` is asked for huge pages first (`MADV_HUGEPAGE`): a fault per 2 MiB, not
    /// per 4 KiB. The context is bound.
    fn read_staged(&self, from: sys::CUdeviceptr, out: &mut [u8]) -> Result<(), Error> {
        advise_huge_pages(out);
        let context = &self.shared.context;
        let staging = [context.stage(STAGED_CHUNK)?, context.stage(STAGED_CHUNK)?];
        let copied = self.copy_through(from, out, &staging);
        if copied.is_err() && self.finish().is_err() {
            // A copy into staging may still be under way: neither block is used again.
            staging.into_iter().for_each(Staged::abandon);
        }
        copied
    }

    /// The chunks of [`Stream::read_staged`], double-buffered in `staging`.
    fn copy_through(
        &self,
        from: sys::CUdeviceptr,
        out: &mut [u8],
        staging: &[Staged; 2],
    ) -> Result<(), Error> {
        let len = out.len();
        let chunks = len.div_ceil(STAGED_CHUNK);
        // Chunk `i`: where it starts in `out` and its size.
        let chunk = |i: usize| (i * STAGED_CHUNK, STAGED_CHUNK.min(len - i * STAGED_CHUNK));
        // Addresses as numbers, which the copying threads may share.
        let blocks = [staging[0].block.at as usize, staging[1].block.at as usize];
        let dst = out.as_mut_ptr() as usize;
        let enqueue = |i: usize| -> Result<Arc<RawEvent>, Error> {
            let (start, size) = chunk(i);
            // SAFETY: `size` (at most a block's) bytes into staging block `i % 2`, which
            // nothing reads until the event recorded after the copy completed, from within
            // the range the caller checked.
            check("cuMemcpyDtoHAsync", unsafe {
                sys::cuMemcpyDtoHAsync_v2(
                    blocks[i % 2] as *mut c_void,
                    from + start as u64,
                    size,
                    self.shared.raw,
                )
            })?;
            self.shared.record_raw(false)
        };
        let copy = |i: usize, thread: usize, threads: usize| {
            let (start, size) = chunk(i);
            let (lo, hi) = stripe(size, thread, threads);
            // SAFETY: bytes `lo..hi` of chunk `i`: within its staging block, whose copy from
            // the device completed, and within `out` (`start + size <= len`), borrowed
            // mutably for this call; the stripes of a chunk do not overlap, so no two threads
            // write one byte.
            unsafe {
                ptr::copy_nonoverlapping(
                    (blocks[i % 2] + lo) as *const u8,
                    (dst + start + lo) as *mut u8,
                    hi - lo,
                );
            }
        };
        // Chunk `i + 1` goes into the block chunk `i - 1` was copied out of, then chunk `i` is
        // waited for.
        let mut pending = [Some(enqueue(0)?), None];
        let ready = |i: usize| -> Result<(), Error> {
            if i + 1 < chunks {
                pending[(i + 1) % 2] = Some(enqueue(i + 1)?);
            }
            let Some(event) = &pending[i % 2] else { return Ok(()) };
            // SAFETY: a live event of the bound context.
            check("cuEventSynchronize", unsafe { sys::cuEventSynchronize(event.raw) })
        };
        copy_out(chunks, copy_threads(), ready, copy)
    }
}

/// How long (host time) an anchor of a profiled stream's clock serves before a command's
/// start may replace it.
const REBASE: Duration = Duration::from_millis(100);

/// A profiled stream's clock. CUDA measures the time between two timed events, in `f32`
/// milliseconds (`cuEventElapsedTime`, "a resolution of around 0.5 microseconds" in the
/// driver API's event management): measured from one origin at the stream's creation, the
/// stamps of a stream an hour old would come in steps of 0.25 ms. So each command is
/// measured from an anchor recorded shortly before it (its start → end directly), and each
/// anchor from the one before it, the anchors' offsets from the origin added up in integer
/// nanoseconds ([`chained`]). An anchor is a command's start event, taken as the next anchor
/// once the current one is [`REBASE`] old and has completed (its offset known), so an
/// anchor holds only the one before it, and only until its own offset is known. Commands
/// that share an anchor are stamped against it to the timer's resolution however old the
/// stream; an anchor's own offset carries the rounding of each link before it (2^-24 of the
/// link's length), the same for every command that counts from it.
struct Clock {
    anchor: Mutex<Arc<Anchor>>,
}

struct Anchor {
    event: Arc<RawEvent>,
    /// When it was recorded (host time).
    recorded: Instant,
    offset: Mutex<Offset>,
}

/// An anchor's offset from its stream's origin.
enum Offset {
    /// Known, in nanoseconds.
    Known(u64),
    /// Not yet measured: the anchor before it (which had completed when this one was made)
    /// and that one's offset.
    After(Arc<RawEvent>, u64),
}

impl Clock {
    /// A clock whose origin is `origin`, a timed event just recorded.
    fn new(origin: Arc<RawEvent>) -> Clock {
        let anchor = Anchor {
            event: origin,
            recorded: Instant::now(),
            offset: Mutex::new(Offset::Known(0)),
        };
        Clock { anchor: Mutex::new(Arc::new(anchor)) }
    }

    /// The anchor a command started by `start` (a timed event just recorded) counts from: the
    /// current one, or `start` itself as the next (the context is bound).
    fn anchor_for(&self, start: &Arc<RawEvent>) -> Result<Arc<Anchor>, Error> {
        let mut current = self.anchor.lock().unwrap_or_else(|e| e.into_inner());
        if current.recorded.elapsed() >= REBASE {
            if let Some(offset) = current.offset_if_complete()? {
                let after = Offset::After(current.event.clone(), offset);
                *current = Arc::new(Anchor {
                    event: start.clone(),
                    recorded: Instant::now(),
                    offset: Mutex::new(after),
                });
            }
        }
        Ok(current.clone())
    }
}

impl Anchor {
    /// Its offset, once its event completed; `None` while it has not (the context is bound).
    fn offset_if_complete(&self) -> Result<Option<u64>, Error> {
        if let Offset::Known(offset) = *self.offset.lock().unwrap_or_else(|e| e.into_inner()) {
            return Ok(Some(offset));
        }
        // SAFETY: a live event.
        match unsafe { sys::cuEventQuery(self.event.raw) } {
            CUresult::CUDA_SUCCESS => self.offset().map(Some),
            CUresult::CUDA_ERROR_NOT_READY => Ok(None),
            code => check("cuEventQuery", code).map(|()| None),
        }
    }

    /// Its offset from the origin, in nanoseconds: measured from the anchor before it at the
    /// first call, after which that anchor goes. Its event completed; the context is bound.
    fn offset(&self) -> Result<u64, Error> {
        let mut offset = self.offset.lock().unwrap_or_else(|e| e.into_inner());
        let known = match &*offset {
            Offset::Known(known) => return Ok(*known),
            Offset::After(before, base) => chained(*base, elapsed_ms(before, &self.event)?),
        };
        *offset = Offset::Known(known);
        Ok(known)
    }
}

/// The milliseconds from `from` to `to`, two completed timed events of the bound context.
fn elapsed_ms(from: &RawEvent, to: &RawEvent) -> Result<f32, Error> {
    let mut ms = 0f32;
    // SAFETY: two live events; an out-pointer to a local.
    check("cuEventElapsedTime", unsafe { sys::cuEventElapsedTime(&mut ms, from.raw, to.raw) })?;
    Ok(ms)
}

/// Milliseconds as CUDA measures them, in whole nanoseconds (none for a negative or
/// meaningless measure).
fn ms_to_ns(ms: f32) -> u64 {
    if ms.is_nan() || ms <= 0.0 {
        return 0;
    }
    // At most 2^24 significant bits: exact in `f64`, and far within `u64` as nanoseconds.
    (f64::from(ms) * 1e6).round() as u64
}

/// The offset of an anchor measured `link_ms` after one at `base` nanoseconds.
fn chained(base: u64, link_ms: f32) -> u64 {
    base.saturating_add(ms_to_ns(link_ms))
}

/// A command's timestamps in nanoseconds (queued, submitted, started, ended: CUDA times the
/// start and the end only, so the first three are the start), from its anchor's offset, the
/// time from the anchor to its start and from its start to its end.
fn stamps(anchor: u64, to_start_ms: f32, took_ms: f32) -> [u64; 4] {
    let started = chained(anchor, to_start_ms);
    [started, started, started, chained(started, took_ms)]
}

/// The completion of a launch (or a copy) and of the work its stream had before it. A launch
/// records no CUDA event: its event is the launch's number on its stream, and becomes a
/// recorded event when it is first waited for, asked, awaited or waited on by other work —
/// one that covers what the stream was given since, too (a superset: never too early).
#[derive(Clone)]
pub(crate) struct Event {
    /// Its stream, which it keeps alive (and with it, an adopted stream's owner).
    stream: Arc<StreamShared>,
    /// Its command's number on the stream ([`StreamShared::issued`]): for a launch what
    /// stands for its event, and for any command where it comes among the stream's.
    order: u64,
    end: End,
    /// On a profiled stream: where the command's timestamps count from, and its start.
    timing: Option<Arc<Timing>>,
    /// The recorded event handed out by [`Event::native`], held as long as this value so that
    /// the handle stays the same and is not recorded again for other work.
    pinned: OnceLock<Arc<RawEvent>>,
}

struct Timing {
    anchor: Arc<Anchor>,
    start: Arc<RawEvent>,
}

#[derive(Clone)]
enum End {
    /// An event recorded when the work was enqueued (copies, fills, profiled launches).
    Recorded(Arc<RawEvent>),
    /// A launch, whose [`Event::order`] stands for it.
    Launch,
}

struct RawEvent {
    context: Arc<Context>,
    raw: sys::CUevent,
    /// Made with timing (kept out of the idle events, which have none).
    timed: bool,
}

// SAFETY: an event handle may be used from any thread with its context current.
unsafe impl Send for RawEvent {}
// SAFETY: as above; the driver's event calls are thread-safe.
unsafe impl Sync for RawEvent {}

impl Drop for RawEvent {
    fn drop(&mut self) {
        if !self.timed {
            let spare = &self.context.spare_event;
            if spare
                .compare_exchange(ptr::null_mut(), self.raw, Ordering::AcqRel, Ordering::Relaxed)
                .is_ok()
            {
                return;
            }
            let mut idle = self.context.idle_events.lock().unwrap_or_else(|e| e.into_inner());
            if idle.len() < IDLE_EVENTS {
                // Recording it again later replaces what it stood for; work that waits on it
                // now waited on the recording it had when the wait was enqueued.
                idle.push(self.raw);
                return;
            }
        }
        if self.context.bind().is_ok() {
            // SAFETY: created once, destroyed once (work that waits on it keeps its own hold).
            unsafe {
                let _ = sys::cuEventDestroy_v2(self.raw);
            }
        }
    }
}

/// Called by the driver when a callback lane reaches a callback: once the event the lane
/// waited for completed, or once a device error ended the lane's work. The driver calls each
/// callback added with `cuStreamAddCallback` exactly once, passing `CUDA_SUCCESS` or the
/// error ("In the event of a device error, all subsequently executed callbacks will receive
/// an appropriate error": the driver API's stream management; a host function of
/// `cuLaunchHostFunc` is not called after a fault at all). The status is not kept: the
/// event's own wait and query return the error. Calls `done`, which neither blocks nor calls
/// the driver (callbacks may make no CUDA call).
unsafe extern "C" fn called(_stream: sys::CUstream, _status: CUresult, data: *mut c_void) {
    // SAFETY: `data` is the `Box<Callback>` leaked by `Event::on_complete`; the driver calls
    // each callback once.
    let done = unsafe { Box::from_raw(data.cast::<Callback>()) };
    // A panic must not unwind into the driver (it would abort the process).
    let _ = std::panic::catch_unwind(std::panic::AssertUnwindSafe(done));
}

impl Event {
    /// The recorded event that stands for this one.
    fn resolve(&self) -> Result<Arc<RawEvent>, Error> {
        match &self.end {
            End::Recorded(event) => Ok(event.clone()),
            End::Launch => self.stream.covering(self.order),
        }
    }
}

impl api::Event for Event {
    /// The driver's own code of a fault.
    fn wait(&self) -> Result<(), Error> {
        self.stream.named((|| {
            let end = self.resolve()?;
            self.stream.context.bind()?;
            // SAFETY: a live event.
            check("cuEventSynchronize", unsafe { sys::cuEventSynchronize(end.raw) })
        })())
    }

    fn is_complete(&self) -> Result<bool, Error> {
        self.stream.named((|| {
            let end = self.resolve()?;
            self.stream.context.bind()?;
            // SAFETY: a live event.
            match unsafe { sys::cuEventQuery(end.raw) } {
                CUresult::CUDA_SUCCESS => Ok(true),
                CUresult::CUDA_ERROR_NOT_READY => Ok(false),
                code => check("cuEventQuery", code).map(|()| true),
            }
        })())
    }

    /// From the stream's creation (see [`stamps`] and [`Clock`]); waits for the work.
    fn profile(&self) -> Result<Option<[u64; 4]>, Error> {
        let Some(timing) = &self.timing else { return Ok(None) };
        self.wait()?;
        let anchor = timing.anchor.offset()?;
        let to_start = elapsed_ms(&timing.anchor.event, &timing.start)?;
        let took = elapsed_ms(&timing.start, &*self.resolve()?)?;
        Ok(Some(stamps(anchor, to_start, took)))
    }

    /// A callback on one of its stream's lanes ([`Lanes`]), after the lane waits for the
    /// event.
    fn on_complete(&self, done: Callback) -> Result<(), Error> {
        self.stream.named((|| {
            let end = self.resolve()?;
            let stream = &self.stream;
            stream.context.bind()?;
            let mut lanes = stream.lanes.lock().unwrap_or_else(|e| e.into_inner());
            let lane = lanes.lane_for(self.order, &stream.context)?;
            // SAFETY: a live stream and event of the bound context.
            check("cuStreamWaitEvent", unsafe { sys::cuStreamWaitEvent(lane, end.raw, 0) })?;
            let data = Box::into_raw(Box::new(done));
            // SAFETY: `called` takes `data` back exactly once, when the driver calls it (it
            // calls every callback it took once, after errors too).
            let added = unsafe { sys::cuStreamAddCallback(lane, Some(called), data.cast(), 0) };
            check("cuStreamAddCallback", added).inspect_err(|_| {
                // SAFETY: the driver refused the callback, so it never takes `data`.
                drop(unsafe { Box::from_raw(data) });
            })
        })())
    }

    /// Recorded when first asked about. It takes a number of its own, which no event recorded
    /// before covers: so it covers work other libraries gave the stream too.
    fn later(&self) -> Result<Event, Error> {
        let order = self.stream.issued.fetch_add(1, Ordering::AcqRel);
        Ok(Event {
            stream: self.stream.clone(),
            order,
            end: End::Launch,
            timing: None,
            pinned: OnceLock::new(),
        })
    }

    /// Nothing to keep: the event goes at once.
    fn release_when_complete(self) {}

    /// Nothing to do: the driver submits work as it is given.
    fn flush(&self) -> Result<(), Error> {
        Ok(())
    }

    fn native(&self) -> Result<NativeEvent, Error> {
        if let Some(event) = self.pinned.get() {
            return Ok(NativeEvent::Cuda(event.raw));
        }
        let event = self.resolve()?;
        Ok(NativeEvent::Cuda(self.pinned.get_or_init(|| event).raw))
    }
}

/// Page-locked host memory of the context (`cuMemAllocHost`): the driver copies it to and from
/// the device at full speed, asynchronously. Zeroed when made; freed on drop.
pub(crate) struct HostMemory {
    context: Arc<Context>,
    at: *mut c_void,
}

// SAFETY: page-locked memory is plain host memory, owned by this value alone; it is freed with
// its context current, from any thread.
unsafe impl Send for HostMemory {}
// SAFETY: as above; `&HostMemory` gives out only the pointer.
unsafe impl Sync for HostMemory {}

impl HostMemory {
    /// `size` bytes (at least one), zeroed.
    fn new(context: &Arc<Context>, size: usize) -> Result<HostMemory, Error> {
        context.bind()?;
        let size = size.max(1);
        let mut at = ptr::null_mut();
        // SAFETY: an out-pointer to a local; the context is bound.
        check("cuMemAllocHost", unsafe { sys::cuMemAllocHost_v2(&mut at, size) })?;
        let memory = HostMemory { context: context.clone(), at };
        // SAFETY: `size` bytes of host memory, ours until `drop` frees them.
        unsafe { ptr::write_bytes(memory.at.cast::<u8>(), 0, size) };
        Ok(memory)
    }
}

impl api::HostMemory for HostMemory {
    fn as_ptr(&self) -> *mut u8 {
        self.at.cast()
    }
}

impl Drop for HostMemory {
    fn drop(&mut self) {
        if self.context.bind().is_ok() {
            // SAFETY: allocated once, freed once; whoever copied to or from it waited first
            // (`HostBuffer` waits before it drops this).
            unsafe {
                let _ = sys::cuMemFreeHost(self.at);
            }
        }
    }
}

/// A block of page-locked host memory (`cuMemAllocHost`), `size` bytes from `at`.
struct Block {
    at: *mut c_void,
    size: usize,
}

/// The smallest staging block: maps and reads of fewer bytes share blocks of this size.
const STAGING_MIN: usize = 64 << 10;
/// The most page-locked memory a context keeps idle for staging; a block given back beyond
/// it is freed (which waits for the device).
const STAGING_KEEP: usize = 128 << 20;
/// The size of each chunk of a staged read ([`Stream::read_staged`]).
const STAGED_CHUNK: usize = 16 << 20;
/// The smallest read into pageable memory that is staged: two chunks, one copied out while
/// the other comes in.
const STAGED_READ_MIN: usize = 2 * STAGED_CHUNK;
/// The most threads that copy a staged read's chunks out of staging.
const COPY_THREADS: usize = 8;

/// The size of the staging block for `size` bytes: the next power of two, and at least
/// [`STAGING_MIN`] (a few sizes, so that blocks are reused across sizes).
fn staging_size(size: usize) -> usize {
    let size = size.max(STAGING_MIN);
    size.checked_next_power_of_two().unwrap_or(size)
}

/// Which of the idle blocks (by size) serves a need of `size` bytes: the smallest that holds
/// them.
fn best_block(sizes: impl Iterator<Item = usize>, size: usize) -> Option<usize> {
    sizes.enumerate().filter(|&(_, s)| s >= size).min_by_key(|&(_, s)| s).map(|(i, _)| i)
}

/// Whether a block of `size` bytes given back is kept, `idle` bytes being idle already.
fn keeps(idle: usize, size: usize) -> bool {
    idle.saturating_add(size) <= STAGING_KEEP
}

/// Which bytes of a chunk of `size` bytes copying thread `thread` of `threads` copies: the
/// chunk split evenly, on page boundaries (4 KiB) but for the end, so that no two threads
/// touch one page.
fn stripe(size: usize, thread: usize, threads: usize) -> (usize, usize) {
    let at = |k: usize| if k >= threads { size } else { (size / threads * k) & !4095 };
    (at(thread), at(thread + 1))
}

/// Copies `chunks` chunks out of staging on `threads` threads (this one among them): chunk
/// `i` once `ready(i)` returned (on this thread; it may also refill the staging of chunks
/// copied before `i`), each thread its own stripe of it (`copy(i, thread, threads)`), all
/// threads done with it before `ready(i + 1)`. Stops at the first error of `ready`.
fn copy_out(
    chunks: usize,
    threads: usize,
    mut ready: impl FnMut(usize) -> Result<(), Error>,
    copy: impl Fn(usize, usize, usize) + Sync,
) -> Result<(), Error> {
    let threads = threads.max(1);
    // The other threads copy chunk `current` between two waits at the barrier, until `done`.
    let barrier = std::sync::Barrier::new(threads);
    let current = AtomicUsize::new(0);
    let done = std::sync::atomic::AtomicBool::new(false);
    std::thread::scope(|scope| {
        for thread in 1..threads {
            let (barrier, current, done, copy) = (&barrier, &current, &done, &copy);
            scope.spawn(move || loop {
                barrier.wait();
                if done.load(Ordering::Acquire) {
                    break;
                }
                copy(current.load(Ordering::Acquire), thread, threads);
                barrier.wait();
            });
        }
        let copied = (|| {
            for i in 0..chunks {
                ready(i)?;
                current.store(i, Ordering::Release);
                barrier.wait();
                copy(i, 0, threads);
                barrier.wait();
            }
            Ok(())
        })();
        done.store(true, Ordering::Release);
        barrier.wait();
        copied
    })
}

/// How many threads copy a staged read's chunks: the cores there are, at most
/// [`COPY_THREADS`].
fn copy_threads() -> usize {
    std::thread::available_parallelism().map_or(1, |n| n.get()).min(COPY_THREADS)
}

/// Whether `at` is page-locked host memory the driver knows (allocated or registered with
/// it), which it copies to at full speed as it is.
fn page_locked(at: *const u8) -> bool {
    let mut kind = 0u32;
    // SAFETY: an out-pointer of the attribute's type (a `CUmemorytype`, 32 bits); the driver
    // only looks the address up.
    let found = unsafe {
        sys::cuPointerGetAttribute(
            (&mut kind as *mut u32).cast(),
            sys::CUpointer_attribute::CU_POINTER_ATTRIBUTE_MEMORY_TYPE,
            at as sys::CUdeviceptr,
        )
    };
    found == CUresult::CUDA_SUCCESS && kind == sys::CUmemorytype::CU_MEMORYTYPE_HOST as u32
}

/// Whether the pages of `bytes` are in memory, by a sample of three (its first, middle and
/// last page; `mincore`): memory touched before, into which the driver copies at full
/// pageable speed. Memory the system cannot tell about counts as in memory.
#[cfg(target_os = "linux")]
fn resident(bytes: &[u8]) -> bool {
    // SAFETY: `sysconf` has no preconditions.
    let page = usize::try_from(unsafe { libc::sysconf(libc::_SC_PAGESIZE) }).unwrap_or(4096);
    let start = bytes.as_ptr() as usize;
    [0, bytes.len() / 2, bytes.len().saturating_sub(1)].iter().all(|&offset| {
        let at = (start + offset) & !(page.max(1) - 1);
        let mut state = 0u8;
        // SAFETY: one page from a page boundary, of a mapping `bytes` lies in; the system
        // writes one byte into `state`.
        let asked = unsafe { libc::mincore(at as *mut libc::c_void, page, &mut state) };
        asked != 0 || state & 1 == 1
    })
}

#[cfg(not(target_os = "linux"))]
fn resident(_bytes: &[u8]) -> bool {
    true
}

/// Asks the system to back the whole 2 MiB pages within `bytes` with huge pages
/// (`MADV_HUGEPAGE`): memory not yet touched then faults in once per 2 MiB.
#[cfg(target_os = "linux")]
fn advise_huge_pages(bytes: &mut [u8]) {
    const HUGE: usize = 2 << 20;
    let start = (bytes.as_ptr() as usize).next_multiple_of(HUGE);
    let end = (bytes.as_ptr() as usize + bytes.len()) & !(HUGE - 1);
    if end > start {
        // SAFETY: advice on whole pages within `bytes`, which are borrowed mutably: it
        // changes how the system backs them, never what they hold.
        unsafe {
            libc::madvise(start as *mut libc::c_void, end - start, libc::MADV_HUGEPAGE);
        }
    }
}

#[cfg(not(target_os = "linux"))]
fn advise_huge_pages(_bytes: &mut [u8]) {}

/// Page-locked staging taken from its context's idle blocks ([`Context::stage`]), given back
/// on drop.
struct Staged {
    context: Arc<Context>,
    block: Block,
}

// SAFETY: page-locked memory is plain host memory, owned by this value alone.
unsafe impl Send for Staged {}
// SAFETY: as above; `&Staged` gives out only the address.
unsafe impl Sync for Staged {}

impl Context {
    /// At least `size` bytes of page-locked staging: an idle block when one holds them, else
    /// one allocated now ([`staging_size`]). Not zeroed.
    fn stage(self: &Arc<Context>, size: usize) -> Result<Staged, Error> {
        let size = staging_size(size);
        {
            let mut idle = self.staging.lock().unwrap_or_else(|e| e.into_inner());
            if let Some(i) = best_block(idle.iter().map(|b| b.size), size) {
                return Ok(Staged { context: self.clone(), block: idle.swap_remove(i) });
            }
        }
        self.bind()?;
        let mut at = ptr::null_mut();
        // SAFETY: an out-pointer to a local; the context is bound.
        check("cuMemAllocHost", unsafe { sys::cuMemAllocHost_v2(&mut at, size) })?;
        Ok(Staged { context: self.clone(), block: Block { at, size } })
    }
}

impl Staged {
    /// Gives up the block without freeing it or giving it back: a copy to or from it may
    /// still be under way (after a failed wait).
    fn abandon(self) {
        let this = std::mem::ManuallyDrop::new(self);
        // SAFETY: the context is read out once and dropped; the rest (the block) is leaked.
        drop(unsafe { ptr::read(&this.context) });
    }
}

impl Drop for Staged {
    fn drop(&mut self) {
        let block = Block { at: self.block.at, size: self.block.size };
        let mut idle = self.context.staging.lock().unwrap_or_else(|e| e.into_inner());
        if keeps(idle.iter().map(|b| b.size).sum(), block.size) {
            idle.push(block);
            return;
        }
        drop(idle);
        if self.context.bind().is_ok() {
            // SAFETY: allocated once, freed once, here; no copy uses it any more (whoever
            // copied waited, or abandoned it).
            unsafe {
                let _ = sys::cuMemFreeHost(block.at);
            }
        }
    }
}

/// A buffer's contents copied into page-locked staging by [`api::Queue::map`], until
/// [`api::Queue::unmap`] (or until dropped, which gives the staging back too).
pub(crate) struct Mapping {
    host: Staged,
    size: usize,
    /// Written back by the unmap.
    write: bool,
}

impl api::HostMemory for Mapping {
    fn as_ptr(&self) -> *mut u8 {
        self.host.block.at.cast()
    }
}

/// Device memory of the context.
pub(crate) struct Memory {
    heap: Arc<Heap>,
    address: sys::CUdeviceptr,
    /// For a view into another allocation, that allocation, kept alive while the view is.
    _whole: Option<Whole>,
    kind: Kind,
    /// What [`Memory::free_after`] said: the commands that may still use the memory when it
    /// goes.
    after: Mutex<Option<Vec<Event>>>,
}

/// Whose device memory is, and how it goes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    /// From the heap's pool: freed stream-ordered (`cuMemFreeAsync`).
    Pooled,
    /// From `cuMemAlloc`: freed with `cuMemFree`, once the commands that use it completed.
    Plain,
    /// A view, or a program's memory: never freed here.
    Borrowed,
}

impl Memory {
    /// Memory at `address` that is not freed here (a view's, a program's).
    fn borrowed(heap: &Arc<Heap>, address: sys::CUdeviceptr, whole: Option<Whole>) -> Memory {
        let after = Mutex::new(None);
        Memory { heap: heap.clone(), address, _whole: whole, kind: Kind::Borrowed, after }
    }
}

impl api::Memory<Cuda> for Memory {
    /// The address plus the offset, keeping `whole` (this allocation's owner) alive.
    fn view(&self, offset: usize, _size: usize, whole: Whole) -> Result<Memory, Error> {
        Ok(Memory::borrowed(&self.heap, self.address + offset as u64, Some(whole)))
    }

    fn frees_itself(&self) -> bool {
        false
    }

    /// Says which commands may still use the memory when it goes (those of `events`, on any
    /// stream of the context): its drop then frees it after them without the host waiting
    /// (see [`Heap`]). Memory dropped without it is freed after everything the context was
    /// given, as `cuMemFree` does (a host wait for the whole device): say `free_after(vec![])`
    /// of memory that nothing uses.
    fn free_after(&self, events: Vec<Event>) {
        if self.kind != Kind::Borrowed {
            *self.after.lock().unwrap_or_else(|e| e.into_inner()) = Some(events);
        }
    }

    fn native(&self) -> NativeBuffer {
        NativeBuffer::Cuda(self.address)
    }
}

impl Drop for Memory {
    fn drop(&mut self) {
        let after = self.after.get_mut().unwrap_or_else(|e| e.into_inner()).take();
        self.heap.release(self.address, self.kind, after);
    }
}

/// How a context's device memory is allocated and freed: a drop returns at once, and the
/// memory is freed once the commands that may use it ([`Memory::free_after`]) completed.
/// - Where the device has memory pools (`CU_DEVICE_ATTRIBUTE_MEMORY_POOLS_SUPPORTED`), memory
///   comes from a pool of the runtime's own (`cuMemAllocFromPoolAsync`) on a stream of ours,
///   synchronized there before the memory is handed out (an allocation is ordered on its own
///   stream only; synchronized, any stream may use it at once). A drop makes another stream
///   of ours wait for those commands' events, and frees there (`cuMemFreeAsync`: "the
///   allocation must not be accessed after stream execution reaches the free"). `cuMemFree`
///   would instead wait for the whole device, and a stream a program holds with a host wait
///   would deadlock it. Memory is freed by the call its allocator pairs with it (cudarc does
///   the same); the pool is ours so that no allocation is made to wait for a pending free
///   (`CU_MEMPOOL_ATTR_REUSE_ALLOW_INTERNAL_DEPENDENCIES` off: "allow cuMemAllocAsync to
///   insert new stream dependencies in order to establish the stream ordering required to
///   reuse a piece of memory released by cuMemFreeAsync"), which the allocation's
///   synchronization would then wait for. Its release threshold stays 0: freed memory goes
///   back to the system at the next synchronization, as with `cuMemFree`.
/// - Otherwise memory comes from `cuMemAlloc`, and a drop keeps its address with those
///   events; each later allocation and drop frees (`cuMemFree`) the kept addresses whose
///   events all completed, and the heap's own drop the rest, after waiting for them.
///
/// Events hold their stream, which holds the context; the heap holds events (kept frees):
/// so the heap is held by its device and its memory, never by the context.
struct Heap {
    context: Arc<Context>,
    /// Made at the first allocation: `None` where the device has no memory pools (or making
    /// one failed).
    pool: OnceLock<Option<Pool>>,
    /// Memory from `cuMemAlloc` dropped before the commands that use it completed.
    deferred: Mutex<Vec<Deferred>>,
}

/// The runtime's memory pool of a context, and its two streams.
struct Pool {
    raw: sys::CUmemoryPool,
    /// Where memory is allocated (and synchronized at once).
    alloc: sys::CUstream,
    /// Where memory is freed, after the commands that use it.
    free: sys::CUstream,
}

// SAFETY: a pool and streams may be used from any thread with their context current.
unsafe impl Send for Pool {}
// SAFETY: as above; the driver's calls on them are thread-safe.
unsafe impl Sync for Pool {}

struct Deferred {
    address: sys::CUdeviceptr,
    after: Vec<Event>,
}

impl Heap {
    fn new(context: &Arc<Context>) -> Heap {
        Heap { context: context.clone(), pool: OnceLock::new(), deferred: Mutex::new(Vec::new()) }
    }

    /// The pool, made at the first call (the context is bound).
    fn pool(&self) -> Option<&Pool> {
        self.pool
            .get_or_init(|| {
                Pool::new(&self.context)
                    .inspect_err(|e| {
                        trace!("memory", "no memory pool of our own ({e}): cuMemAlloc")
                    })
                    .ok()
                    .flatten()
            })
            .as_ref()
    }

    /// `bytes` (at least one) of device memory, which any stream of the context may use at
    /// once.
    fn alloc(self: &Arc<Heap>, bytes: usize) -> Result<Memory, Error> {
        self.context.bind()?;
        let (address, kind) = match self.pool() {
            Some(pool) => (pool.alloc(bytes)?, Kind::Pooled),
            None => (self.alloc_plain(bytes)?, Kind::Plain),
        };
        let after = Mutex::new(None);
        Ok(Memory { heap: self.clone(), address, _whole: None, kind, after })
    }

    /// `cuMemAlloc`, after freeing kept memory whose commands completed; when the device is
    /// out of memory, again after waiting for every kept memory's commands and freeing it.
    fn alloc_plain(&self, bytes: usize) -> Result<sys::CUdeviceptr, Error> {
        let mut deferred = self.deferred.lock().unwrap_or_else(|e| e.into_inner());
        self.sweep(&mut deferred, false);
        let mut address = 0;
        // SAFETY: an out-pointer to a local; the context is bound.
        let mut code = unsafe { sys::cuMemAlloc_v2(&mut address, bytes) };
        if code == CUresult::CUDA_ERROR_OUT_OF_MEMORY && !deferred.is_empty() {
            self.sweep(&mut deferred, true);
            // SAFETY: as above.
            code = unsafe { sys::cuMemAlloc_v2(&mut address, bytes) };
        }
        check("cuMemAlloc", code)?;
        Ok(address)
    }

    /// Frees the kept memory whose commands completed (all of it, after waiting, with
    /// `wait`). A command that failed is complete.
    fn sweep(&self, deferred: &mut Vec<Deferred>, wait: bool) {
        deferred.retain(|kept| {
            let complete = kept.after.iter().all(|event| match wait {
                true => {
                    let _ = event.wait();
                    true
                }
                false => event.is_complete().unwrap_or(true),
            });
            if complete && self.context.bind().is_ok() {
                // SAFETY: allocated once, freed once, here; what used it completed.
                unsafe {
                    let _ = sys::cuMemFree_v2(kept.address);
                }
            }
            !complete
        });
    }

    /// Frees memory dropped: `after` the commands that may use it, when said.
    fn release(&self, address: sys::CUdeviceptr, kind: Kind, after: Option<Vec<Event>>) {
        match (kind, after) {
            (Kind::Borrowed, _) => {}
            (Kind::Pooled, after) => {
                if let (Ok(()), Some(pool)) = (self.context.bind(), self.pool()) {
                    pool.free(address, after);
                }
            }
            (Kind::Plain, None) => {
                if self.context.bind().is_ok() {
                    // SAFETY: allocated once, freed once; `cuMemFree` waits for the device's
                    // work, which may use it.
                    unsafe {
                        let _ = sys::cuMemFree_v2(address);
                    }
                }
            }
            (Kind::Plain, Some(after)) => {
                let mut deferred = self.deferred.lock().unwrap_or_else(|e| e.into_inner());
                deferred.push(Deferred { address, after });
                self.sweep(&mut deferred, false);
            }
        }
    }
}

impl Drop for Heap {
    fn drop(&mut self) {
        let mut deferred =
            std::mem::take(self.deferred.get_mut().unwrap_or_else(|e| e.into_inner()));
        self.sweep(&mut deferred, true);
        if let Some(Some(pool)) = self.pool.take() {
            if self.context.bind().is_ok() {
                // SAFETY: made once, destroyed once. Frees still pending complete all the
                // same: a stream destroyed while the device has work in it is released once
                // that work completed, and a pool destroyed with frees pending "will return
                // immediately and the resources associated with the pool will be released
                // automatically once there are no more outstanding allocations"
                // (`cuMemPoolDestroy`); no memory of the pool outlives the heap.
                unsafe {
                    let _ = sys::cuStreamDestroy_v2(pool.alloc);
                    let _ = sys::cuStreamDestroy_v2(pool.free);
                    let _ = sys::cuMemPoolDestroy(pool.raw);
                }
            }
        }
    }
}

impl Pool {
    /// The context's pool and its streams; `None` where the device has no memory pools (the
    /// context is bound).
    fn new(context: &Context) -> Result<Option<Pool>, Error> {
        let mut supported = 0;
        // SAFETY: the device of a live context; an out-pointer to a local.
        let asked = unsafe {
            sys::cuDeviceGetAttribute(
                &mut supported,
                CUdevice_attribute::CU_DEVICE_ATTRIBUTE_MEMORY_POOLS_SUPPORTED,
                context.device,
            )
        };
        if asked != CUresult::CUDA_SUCCESS || supported == 0 {
            return Ok(None);
        }
        let props = sys::CUmemPoolProps {
            allocType: sys::CUmemAllocationType::CU_MEM_ALLOCATION_TYPE_PINNED,
            handleTypes: sys::CUmemAllocationHandleType::CU_MEM_HANDLE_TYPE_NONE,
            location: sys::CUmemLocation {
                type_: sys::CUmemLocationType::CU_MEM_LOCATION_TYPE_DEVICE,
                id: context.device,
            },
            win32SecurityAttributes: ptr::null_mut(),
            maxSize: 0,
            usage: 0,
            reserved: [0; 54],
        };
        let mut raw = ptr::null_mut();
        // SAFETY: an out-pointer to a local; the properties of device memory of the device.
        check("cuMemPoolCreate", unsafe { sys::cuMemPoolCreate(&mut raw, &props) })?;
        let made = (|| {
            let mut off = 0i32;
            // SAFETY: a live pool; the attribute's value is an `int`.
            check("cuMemPoolSetAttribute", unsafe {
                sys::cuMemPoolSetAttribute(
                    raw,
                    sys::CUmemPool_attribute::CU_MEMPOOL_ATTR_REUSE_ALLOW_INTERNAL_DEPENDENCIES,
                    (&mut off as *mut i32).cast(),
                )
            })?;
            let alloc = context.own_stream()?;
            match context.own_stream() {
                Ok(free) => Ok(Pool { raw, alloc, free }),
                Err(e) => {
                    // SAFETY: made above, used by nobody.
                    unsafe {
                        let _ = sys::cuStreamDestroy_v2(alloc);
                    }
                    Err(e)
                }
            }
        })();
        if made.is_err() {
            // SAFETY: made above, used by nobody.
            unsafe {
                let _ = sys::cuMemPoolDestroy(raw);
            }
        }
        made.map(Some)
    }

    /// `bytes` of the pool, synchronized (the context is bound). When the device is out of
    /// memory, tries again once the frees enqueued so far are done.
    fn alloc(&self, bytes: usize) -> Result<sys::CUdeviceptr, Error> {
        let mut address = 0;
        let mut allocate = || {
            // SAFETY: an out-pointer to a local; a live pool and stream of the bound context.
            unsafe { sys::cuMemAllocFromPoolAsync(&mut address, bytes, self.raw, self.alloc) }
        };
        let mut code = allocate();
        if code == CUresult::CUDA_ERROR_OUT_OF_MEMORY {
            // SAFETY: a live stream.
            unsafe {
                let _ = sys::cuStreamSynchronize(self.free);
            }
            code = allocate();
        }
        check("cuMemAllocFromPoolAsync", code)?;
        // SAFETY: a live stream.
        let synchronized =
            check("cuStreamSynchronize", unsafe { sys::cuStreamSynchronize(self.alloc) });
        if synchronized.is_err() {
            // SAFETY: allocated above, used by nobody.
            unsafe {
                let _ = sys::cuMemFreeAsync(address, self.alloc);
            }
        }
        synchronized.map(|()| address)
    }

    /// Frees `address` on the free stream, after the commands `after` stands for; without
    /// them (or when the stream cannot wait for them), after everything the context was given
    /// (a host wait, as `cuMemFree`'s). The context is bound.
    fn free(&self, address: sys::CUdeviceptr, after: Option<Vec<Event>>) {
        let ordered = after.is_some_and(|events| {
            events.iter().all(|event| {
                event
                    .resolve()
                    .and_then(|end| {
                        // SAFETY: a live stream; a live event of the context.
                        check("cuStreamWaitEvent", unsafe {
                            sys::cuStreamWaitEvent(self.free, end.raw, 0)
                        })
                    })
                    .is_ok()
            })
        });
        // SAFETY: a live context (bound), then memory of the pool freed once, here, after
        // every command that may use it (waited for on the stream, or by the host).
        unsafe {
            if !ordered {
                let _ = sys::cuCtxSynchronize();
            }
            let _ = sys::cuMemFreeAsync(address, self.free);
        }
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_callback_waits_on_a_lane_behind_nothing_that_ends_after_its_command() {
        // Registered in the order of their commands: one lane serves them all.
        assert_eq!(pick_lane(&[], 0, LANES), None, "the first makes a lane");
        assert_eq!(pick_lane(&[3], 5, LANES), Some(0));
        assert_eq!(pick_lane(&[5], 5, LANES), Some(0), "the same command again");
        // An earlier command than the lane waits for: another lane, not behind command 9.
        assert_eq!(pick_lane(&[9], 4, LANES), None);
        // Of the lanes it may follow, the one whose latest command is the latest.
        assert_eq!(pick_lane(&[9, 4], 6, LANES), Some(1));
        assert_eq!(pick_lane(&[2, 4, 3], 7, LANES), Some(1));
        // All lanes made and each ahead of it: the one that gets there first.
        assert_eq!(pick_lane(&[9, 7, 12, 8], 5, LANES), Some(1));
    }

    #[test]
    fn blocks_are_checked_as_grids_are_and_against_the_kernel() {
        let shape = |global: &[usize], local: [usize; 3]| launch_shape("k", 1024, global, &local);
        assert_eq!(shape(&[4096], [256, 1, 1]).unwrap(), ([16, 1, 1], [256, 1, 1]));
        assert_eq!(shape(&[64, 64], [32, 32, 1]).unwrap(), ([2, 2, 1], [32, 32, 1]));
        assert_eq!(
            shape(&[1 << 33], [1 << 32, 1, 1]).unwrap_err().to_string(),
            "invalid argument: 4294967296 work-items per work-group in dimension 0",
            "truncated to u32, this block would be 0 work-items"
        );
        assert_eq!(
            shape(&[1 << 40], [128, 1, 1]).unwrap_err().to_string(),
            "invalid argument: 8589934592 work-groups in dimension 0"
        );
        assert_eq!(
            launch_shape("saxpy", 768, &[4096, 4], &[512, 2, 1]).unwrap_err().to_string(),
            "invalid argument: a work-group of 1024 work-items (512×2) for kernel `saxpy`, which \
             takes at most 768 per work-group on this GPU: launch it with smaller work-groups"
        );
        assert!(launch_shape("saxpy", 768, &[4096, 4], &[384, 2, 1]).is_ok());
    }

    #[test]
    fn profile_stamps_keep_nanoseconds_however_old_the_stream() {
        assert_eq!(ms_to_ns(1.5), 1_500_000);
        assert_eq!(ms_to_ns(0.0005), 500, "the timer's resolution, 0.5 µs");
        assert_eq!(ms_to_ns(-0.001), 0);
        assert_eq!(ms_to_ns(f32::NAN), 0);
        // A stream an hour old, reached through anchors each under a second from the next.
        let hour = (0..3600).fold(0, |at, _| chained(at, 1000.0));
        assert_eq!(hour, 3_600_000_000_000);
        // A command 0.1 ms after its anchor, taking 1.5 µs: both exact in nanoseconds.
        let [queued, submitted, started, ended] = stamps(hour, 0.1, 0.0015);
        assert_eq!([queued, submitted, started], [3_600_000_100_000; 3]);
        assert_eq!(ended - started, 1_500);
        // Measured from the origin as one f32 of milliseconds, the same start is off by tens
        // of microseconds: what the anchors are for.
        let from_origin = ms_to_ns(3_600_000.1f32);
        assert!(from_origin.abs_diff(started) > 10_000, "{from_origin} vs {started}");
        // The end never comes before the start.
        assert_eq!(stamps(7, 0.0, -1.0), [7, 7, 7, 7]);
    }

    #[test]
    fn staging_blocks_come_in_few_sizes_and_the_smallest_that_fits_is_reused() {
        assert_eq!(staging_size(1), STAGING_MIN);
        assert_eq!(staging_size(STAGING_MIN + 1), 2 * STAGING_MIN);
        assert_eq!(staging_size(3 << 20), 4 << 20);
        assert_eq!(staging_size(usize::MAX), usize::MAX, "no overflow");
        let idle = [8 << 20, 1 << 20, 4 << 20];
        assert_eq!(best_block(idle.into_iter(), 2 << 20), Some(2));
        assert_eq!(best_block(idle.into_iter(), 1 << 20), Some(1));
        assert_eq!(best_block(idle.into_iter(), 16 << 20), None);
        assert!(keeps(0, STAGING_KEEP));
        assert!(!keeps(STAGING_KEEP - 1, 2));
        assert!(!keeps(usize::MAX, 1), "no overflow");
    }

    #[test]
    fn stripes_split_a_chunk_on_page_boundaries_without_gaps_or_overlaps() {
        for size in [1, 4095, 4096, 10_000, STAGED_CHUNK, STAGED_CHUNK - 1] {
            for threads in 1..=COPY_THREADS {
                let stripes: Vec<_> = (0..threads).map(|t| stripe(size, t, threads)).collect();
                assert_eq!(stripes[0].0, 0);
                assert_eq!(stripes[threads - 1].1, size);
                for pair in stripes.windows(2) {
                    assert_eq!(pair[0].1, pair[1].0, "{size} bytes on {threads} threads");
                    assert_eq!(pair[0].1 % 4096, 0);
                }
                assert!(stripes.iter().all(|&(lo, hi)| lo <= hi));
            }
        }
    }

    #[test]
    fn copying_out_of_staging_on_several_threads_copies_every_chunk_whole_in_order() {
        const CHUNK: usize = 3 * 4096 + 5;
        for (len, threads) in [(0, 2), (1, 1), (CHUNK, 3), (5 * CHUNK + 17, 4), (2 * CHUNK, 2)] {
            let src: Vec<u8> = (0..len).map(|i| (i * 7 % 251) as u8).collect();
            let mut dst = vec![0u8; len];
            let (from, to) = (src.as_ptr() as usize, dst.as_mut_ptr() as usize);
            let chunks = len.div_ceil(CHUNK);
            let mut readied = Vec::new();
            let copy = |i: usize, thread: usize, threads: usize| {
                let size = CHUNK.min(len - i * CHUNK);
                let (lo, hi) = stripe(size, thread, threads);
                // SAFETY: a stripe of chunk `i`, within both vectors; stripes do not overlap.
                unsafe {
                    ptr::copy_nonoverlapping(
                        (from + i * CHUNK + lo) as *const u8,
                        (to + i * CHUNK + lo) as *mut u8,
                        hi - lo,
                    );
                }
            };
            let ready = |i| {
                readied.push(i);
                Ok(())
            };
            copy_out(chunks, threads, ready, copy).unwrap();
            assert_eq!(readied, (0..chunks).collect::<Vec<_>>());
            assert!(dst == src, "{len} bytes on {threads} threads");
        }
        // An error stops the copy (and lets the other threads go: no hang).
        let failed = copy_out(
            4,
            3,
            |i| match i {
                2 => Err(Error::InvalidArgument("the device".into())),
                _ => Ok(()),
            },
            |_, _, _| {},
        );
        assert_eq!(failed.unwrap_err().to_string(), "invalid argument: the device");
    }

    #[cfg(target_os = "linux")]
    #[test]
    fn memory_never_touched_is_not_resident_and_touched_memory_is() {
        // Beyond glibc's largest mmap threshold (32 MiB): pages of their own, untouched by
        // `calloc`.
        let fresh = vec![0u8; 64 << 20];
        assert!(!resident(&fresh));
        let touched = vec![1u8; 64 << 20];
        assert!(resident(&touched));
    }

    #[test]
    fn default_work_groups_divide_the_global_size_within_256_work_items() {
        assert_eq!(default_local(&[1024]), [256, 1, 1]);
        assert_eq!(default_local(&[1000]), [250, 1, 1]);
        assert_eq!(default_local(&[1009]), [1, 1, 1]);
        assert_eq!(default_local(&[64, 64]), [64, 4, 1]);
        assert_eq!(default_local(&[8, 8, 8]), [8, 8, 4]);
    }

    const PTX: &str =
        ".version 7.8\n.weak .const .align 4 .b8 __sycl_spec_constant_scale[4] = {2, 0, 0, 0};\n\
.weak .const .align 4 .b8 __sycl_spec_constant_scale_2[4] = {9, 0, 0, 0};\n\
.weak .const .align 8 .b8 __sycl_spec_constant_zero[8];\n\
.weak .const .align 4 .u32 __sycl_other;\n\tld.const.u32 %r5, [__sycl_spec_constant_scale];\n";

    #[test]
    fn a_program_of_several_modules_frames_each_and_malformed_frames_are_errors() {
        let cubin = b"\x7fELF one".as_slice();
        assert_eq!(split_modules(cubin).unwrap(), [cubin]);
        let mut framed = MODULES_MAGIC.to_vec();
        framed.extend(2u32.to_le_bytes());
        for part in [&b"\x7fELF a"[..], b"\x7fELF bc"] {
            framed.extend((part.len() as u64).to_le_bytes());
            framed.extend(part);
        }
        assert_eq!(split_modules(&framed).unwrap(), [&b"\x7fELF a"[..], b"\x7fELF bc"]);
        for len in MODULES_MAGIC.len()..framed.len() {
            assert!(split_modules(&framed[..len]).is_err(), "cut at {len}");
        }
    }

    #[test]
    fn gpus_older_than_the_ptx_are_refused_naming_both() {
        assert!(runs_ptx(0, "H100", (9, 0)).is_ok());
        assert!(runs_ptx(0, "V100", (7, 0)).is_ok());
        assert_eq!(
            runs_ptx(1, "Tesla P100", (6, 0)).unwrap_err().to_string(),
            "invalid argument: CUDA device 1 (Tesla P100, compute capability 6.0) cannot run this \
             toolkit's device code: its images carry PTX for sm_70 (compute capability 7.0) and \
             later GPUs; pick another device with SYCL_DEVICE"
        );
    }

    #[test]
    fn specialization_values_become_the_initialisers_of_their_variables() {
        let value = |name, bytes| SpecValue { name, id: 0, bytes };
        let three = 3i32.to_le_bytes();
        let out = String::from_utf8(specialize(PTX.as_bytes(), &[value("scale", &three)]).unwrap())
            .unwrap();
        assert_eq!(
            out,
            PTX.replace("scale[4] = {2, 0, 0, 0}", "scale[4] = {3, 0, 0, 0}"),
            "only `scale`, not `scale_2`"
        );
        let minus = (-1i32).to_le_bytes();
        let out = String::from_utf8(
            specialize(PTX.as_bytes(), &[value("scale_2", &minus), value("absent", &three)])
                .unwrap(),
        )
        .unwrap();
        assert!(out.contains("scale_2[4] = {255, 255, 255, 255};\n"), "{out}");
        assert!(out.contains("scale[4] = {2, 0, 0, 0};\n"), "{out}");
        let one_and_a_half = 1.5f64.to_le_bytes();
        let out = String::from_utf8(
            specialize(PTX.as_bytes(), &[value("zero", &one_and_a_half)]).unwrap(),
        )
        .unwrap();
        assert!(out.contains("\n.weak .const .align 8 .b8 __sycl_spec_constant_zero[8] = {0, 0, 0, 0, 0, 0, 248, 63};\n"), "a default of zeros has no initialiser: {out}");
        assert_eq!(
            specialize(PTX.as_bytes(), &[value("scale", &[1, 0])]).unwrap_err(),
            "specialization constant `scale`: 2 byte(s) given, the image's holds 4"
        );
        assert_eq!(
            specialize(PTX.as_bytes(), &[]).unwrap(),
            PTX.as_bytes(),
            "nothing to write, nothing changed"
        );
    }
}
