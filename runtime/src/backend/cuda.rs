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
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, OnceLock};

use cudarc::driver::sys::{self, CUdevice_attribute, CUresult};
use sycl_format::aspects::{aspect_number, target_aspect};
use sycl_format::{PtxSpecConstant, Target, PTX_SPEC_CONSTANT_PREFIX};

use super::caps::CL_DEVICE_TYPE_GPU;
use super::native::{NativeBuffer, NativeDevice, NativeEvent, NativeQueue};
use super::{Backend, Capabilities, DeviceHandle, DeviceInfo, Failure, Limits, SpecValue};
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

/// Every CUDA device, found once per process: none when `libcuda.so.1` is not there; an
/// error when it is, but the driver does not start.
pub(crate) fn devices() -> Result<Vec<DeviceInfo>, Error> {
    static FOUND: OnceLock<Result<Vec<DeviceInfo>, String>> = OnceLock::new();
    match FOUND.get_or_init(|| enumerate().map_err(|e| e.to_string())) {
        Ok(devices) => Ok(devices.clone()),
        Err(e) => {
            Err(Error::NoDevice { problem: format!("the CUDA driver: {e}"), available: vec![] })
        }
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
    /// The stream that runs completion callbacks ([`Event::on_complete`]), made at the first:
    /// each callback waits there for its event, so no queue's work waits for a callback.
    callbacks: OnceLock<sys::CUstream>,
    /// Untimed events no longer in use, for the next launches to record again: a launch
    /// creates no event in steady state.
    idle_events: Mutex<Vec<sys::CUevent>>,
    /// One idle event kept outside the lock: a loop of launches whose events are dropped
    /// passes one event back and forth here.
    spare_event: std::sync::atomic::AtomicPtr<sys::CUevent_st>,
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

    /// The callback stream (the context is bound).
    fn callbacks(&self) -> Result<sys::CUstream, Error> {
        if let Some(&stream) = self.callbacks.get() {
            return Ok(stream);
        }
        let mut raw = ptr::null_mut();
        // SAFETY: an out-pointer to a local; a stream that does not wait for the null stream.
        check("cuStreamCreate", unsafe {
            sys::cuStreamCreate(&mut raw, sys::CUstream_flags::CU_STREAM_NON_BLOCKING as u32)
        })?;
        if let Err(raw) = self.callbacks.set(raw) {
            // Another thread made one first: this one goes.
            // SAFETY: made above, used by nobody.
            unsafe {
                let _ = sys::cuStreamDestroy_v2(raw);
            }
        }
        Ok(*self.callbacks.get().unwrap_or(&raw))
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
        if !idle.is_empty() && self.bind().is_ok() {
            for event in idle {
                // SAFETY: each idle event was created once and is destroyed once, here.
                unsafe {
                    let _ = sys::cuEventDestroy_v2(event);
                }
            }
        }
        if let Some(&stream) = self.callbacks.get() {
            if self.bind().is_ok() {
                // SAFETY: made once, destroyed once, before the context goes.
                unsafe {
                    let _ = sys::cuStreamDestroy_v2(stream);
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
    /// Device `ordinal`, which `info` describes, in its primary context.
    pub(crate) fn open(ordinal: i32, info: &DeviceInfo) -> Result<Device, Error> {
        runs_ptx(ordinal, &info.name, info.limits.compute_capability.unwrap_or((0, 0)))?;
        let mut device = 0;
        let mut raw = ptr::null_mut();
        // SAFETY: out-pointers to locals; the driver was initialised when the device was found.
        unsafe {
            check("cuDeviceGet", sys::cuDeviceGet(&mut device, ordinal))?;
            check("cuDevicePrimaryCtxRetain", sys::cuDevicePrimaryCtxRetain(&mut raw, device))?;
        }
        Ok(Device {
            context: Arc::new(Context {
                raw,
                device,
                primary: true,
                callbacks: OnceLock::new(),
                idle_events: Mutex::new(Vec::new()),
                spare_event: std::sync::atomic::AtomicPtr::new(ptr::null_mut()),
            }),
            compute_capability: info.limits.compute_capability.unwrap_or((0, 0)),
        })
    }

    /// An image's PTX: the object (the JIT linker compiles it), with the specialization
    /// values written into the variables that hold them.
    pub(crate) fn compile(
        &self,
        ptx: &[u8],
        spec: &[SpecValue],
        _flags: &str,
    ) -> Result<Code, Failure> {
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
    pub(crate) fn load_object(&self, object: &[u8], spec: &[SpecValue]) -> Result<Code, Failure> {
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
    pub(crate) fn link(&self, objects: &[&Code], flags: &str) -> Result<Module, Failure> {
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

    /// A program's [`Module::image`] (from the persistent cache), loaded.
    pub(crate) fn load(&self, image: &[u8]) -> Result<Module, Failure> {
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

    /// A stream; with `profiled`, each launch's event carries timing (an event recorded at
    /// the stream's creation is the origin of its timestamps).
    pub(crate) fn stream(&self, profiled: bool) -> Result<Stream, Error> {
        self.context.bind()?;
        let mut raw = ptr::null_mut();
        // SAFETY: an out-pointer to a local; flags 0 is a blocking stream.
        check("cuStreamCreate", unsafe { sys::cuStreamCreate(&mut raw, 0) })?;
        let shared = Arc::new(StreamShared {
            context: self.context.clone(),
            raw,
            owned: true,
            issued: AtomicU64::new(0),
            recorded: Mutex::new(None),
        });
        let mut stream = Stream { shared, origin: None };
        if profiled {
            stream.origin = Some(stream.shared.record_raw(true)?);
        }
        Ok(stream)
    }

    pub(crate) fn alloc(&self, bytes: usize) -> Result<Memory, Error> {
        self.context.bind()?;
        let mut address = 0;
        // SAFETY: an out-pointer to a local.
        check("cuMemAlloc", unsafe { sys::cuMemAlloc_v2(&mut address, bytes.max(1)) })?;
        Ok(Memory { context: self.context.clone(), address, _whole: None, owned: true })
    }

    /// Host memory for fast copies: `bytes` of page-locked memory, zeroed.
    pub(crate) fn alloc_host(&self, bytes: usize) -> Result<HostMemory, Error> {
        HostMemory::new(&self.context, bytes)
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
    pub(crate) fn image(&self) -> Vec<u8> {
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

    pub(crate) fn kernel(&self, name: &str) -> Result<Kernel, Error> {
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
                    return Ok(Kernel {
                        module: part.clone(),
                        function,
                        args: Vec::new(),
                        params: Vec::new(),
                        offsets: Vec::new(),
                        local_bytes: 0,
                        max_dynamic_shared: Cell::new(48 << 10),
                    })
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

    pub(crate) fn set_bytes(&mut self, index: u32, bytes: &[u8]) {
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

    /// The function's largest block (`CU_FUNC_ATTRIBUTE_MAX_THREADS_PER_BLOCK`, which its
    /// registers may make smaller than the device's) and the warp size.
    pub(crate) fn work_group_sizes(&self) -> Result<(usize, usize), Error> {
        let context = &self.module.context;
        context.bind()?;
        let (mut threads, mut warp) = (0, 0);
        // SAFETY: a live function of a loaded module, the device of its context, out-pointers
        // to locals.
        unsafe {
            check(
                "cuFuncGetAttribute",
                sys::cuFuncGetAttribute(
                    &mut threads,
                    sys::CUfunction_attribute::CU_FUNC_ATTRIBUTE_MAX_THREADS_PER_BLOCK,
                    self.function,
                ),
            )?;
            check(
                "cuDeviceGetAttribute",
                sys::cuDeviceGetAttribute(
                    &mut warp,
                    CUdevice_attribute::CU_DEVICE_ATTRIBUTE_WARP_SIZE,
                    context.device,
                ),
            )?;
        }
        Ok((threads as usize, warp as usize))
    }

    pub(crate) fn set_local(&mut self, index: u32, size: usize) {
        *self.slot(index) = Slot::Local(size);
        self.prepare();
    }
}

/// A stream of the device's primary context: launches and copies in order.
pub(crate) struct Stream {
    shared: Arc<StreamShared>,
    /// On a profiled stream, the event recorded at its creation: launches' timestamps count
    /// from it.
    origin: Option<Arc<RawEvent>>,
}

/// The stream itself, shared with the events of its launches, which record on it when first
/// asked about (a launch records no event: see [`Event`]).
struct StreamShared {
    context: Arc<Context>,
    raw: sys::CUstream,
    /// Made by us (destroyed on drop); otherwise a program's, which it keeps alive.
    owned: bool,
    /// Launches enqueued so far: each takes the next number once it is enqueued.
    issued: AtomicU64,
    /// The last event recorded for launches' events, with how many launches it covers.
    recorded: Mutex<Option<(u64, Arc<RawEvent>)>>,
}

// SAFETY: a stream may be used from any thread with its context current.
unsafe impl Send for StreamShared {}
// SAFETY: as above; the driver serializes work submitted to a stream.
unsafe impl Sync for StreamShared {}

impl StreamShared {
    /// An event that completes when launch number `ticket` (and everything enqueued before
    /// it) did: the last one recorded when it covers the launch, else one recorded now, which
    /// also covers what was enqueued since.
    fn covering(&self, ticket: u64) -> Result<Arc<RawEvent>, Error> {
        let mut recorded = self.recorded.lock().unwrap_or_else(|e| e.into_inner());
        if let Some((covers, event)) = recorded.as_ref() {
            if *covers > ticket {
                return Ok(event.clone());
            }
        }
        self.context.bind()?;
        // Every launch numbered below `covers` is enqueued (its number is taken after).
        let covers = self.issued.load(Ordering::Acquire);
        let event = self.record_raw(false)?;
        *recorded = Some((covers, event.clone()));
        Ok(event)
    }
}

impl StreamShared {
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
}

impl Drop for StreamShared {
    fn drop(&mut self) {
        if self.owned && self.context.bind().is_ok() {
            // SAFETY: created once, destroyed once.
            unsafe {
                let _ = sys::cuStreamDestroy_v2(self.raw);
            }
        }
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

impl Stream {
    /// Launches `kernel` after the work `after` stands for (events of this context); the
    /// event of its completion.
    pub(crate) fn launch(
        &self,
        kernel: &Kernel,
        global: &[usize],
        local: Option<&[usize]>,
        after: &[&Event],
    ) -> Result<Event, Error> {
        // Asking the driver for the current context costs a launch in a loop about 2 %: a
        // launch without events to wait for or to time trusts the thread's last bind, and
        // binds and tries again if the driver refuses the launch for its context.
        let trusted = after.is_empty() && self.origin.is_none() && self.shared.context.was_bound();
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
        let (mut grid, mut block) = ([1u32; 3], [1u32; 3]);
        for d in 0..global.len() {
            let groups = global[d] / local[d];
            grid[d] = u32::try_from(groups).map_err(|_| {
                Error::InvalidArgument(format!("{groups} work-groups in dimension {d}"))
            })?;
            block[d] = local[d] as u32;
        }
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
        check("cuLaunchKernel", code)?;
        if let Some(start) = start {
            return self.timed(start);
        }
        // No event recorded: the launch's number stands for it until it is asked about.
        let ticket = self.shared.issued.fetch_add(1, Ordering::AcqRel);
        Ok(Event {
            end: End::Launch { stream: self.shared.clone(), ticket },
            timing: None,
            pinned: OnceLock::new(),
        })
    }

    /// An event recorded on the stream now: it completes when the work before it does.
    fn record(&self) -> Result<Event, Error> {
        Ok(Event {
            end: End::Recorded(self.shared.record_raw(false)?),
            timing: None,
            pinned: OnceLock::new(),
        })
    }

    /// On a profiled stream, the start of the command about to be enqueued: a timed event
    /// recorded right before it.
    fn start(&self) -> Result<Option<Arc<RawEvent>>, Error> {
        match self.origin {
            Some(_) => self.shared.record_raw(true).map(Some),
            None => Ok(None),
        }
    }

    /// The event of the command just enqueued, which `start` began: its end recorded now.
    fn timed(&self, start: Arc<RawEvent>) -> Result<Event, Error> {
        let origin = self.origin.clone().expect("a profiled stream");
        let end = End::Recorded(self.shared.record_raw(true)?);
        Ok(Event { end, timing: Some(Arc::new(Timing { origin, start })), pinned: OnceLock::new() })
    }

    /// Enqueues the command `enqueue` makes; its event, timed on a profiled stream.
    fn submit(&self, enqueue: impl FnOnce() -> Result<(), Error>) -> Result<Event, Error> {
        let start = self.start()?;
        enqueue()?;
        match start {
            Some(start) => self.timed(start),
            None => self.record(),
        }
    }

    /// Nothing to do: the driver submits work as it is launched.
    pub(crate) fn flush(&self) -> Result<(), Error> {
        Ok(())
    }

    /// Copies `out.len()` bytes of `mem` from `offset` into `out`, after the stream's earlier
    /// work; returns when they are there.
    pub(crate) fn read(&self, mem: &Memory, offset: usize, out: &mut [u8]) -> Result<(), Error> {
        self.shared.context.bind()?;
        // SAFETY: `out.len()` bytes into `out` from within the allocation (the caller checked
        // `offset + out.len()`); waited for below, before `out` can go.
        check("cuMemcpyDtoHAsync", unsafe {
            sys::cuMemcpyDtoHAsync_v2(
                out.as_mut_ptr().cast(),
                mem.address + offset as u64,
                out.len(),
                self.shared.raw,
            )
        })?;
        self.synchronize()
    }

    /// Copies `data` into `mem` at `offset`, after the stream's earlier work; returns when
    /// `data` may go.
    pub(crate) fn write(&self, mem: &Memory, offset: usize, data: &[u8]) -> Result<(), Error> {
        self.shared.context.bind()?;
        // SAFETY: `data.len()` bytes from `data` into the allocation (the caller checked the
        // range); waited for below, before `data` can go.
        check("cuMemcpyHtoDAsync", unsafe {
            sys::cuMemcpyHtoDAsync_v2(
                mem.address + offset as u64,
                data.as_ptr().cast(),
                data.len(),
                self.shared.raw,
            )
        })?;
        self.synchronize()
    }

    /// Copies `size` bytes of `mem` from `offset` to `out`, after the stream's earlier work;
    /// returns at once, with the event of the copy's completion.
    ///
    /// # Safety
    /// `out` points to `size` bytes of host memory that stay allocated, and that nothing else
    /// reads or writes, until the event completed.
    pub(crate) unsafe fn read_async(
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

    /// Copies `size` bytes from `data` into `mem` at `offset`, after the stream's earlier
    /// work; returns at once, with the event of the copy's completion.
    ///
    /// # Safety
    /// `data` points to `size` bytes of host memory that stay allocated, and that nothing
    /// writes, until the event completed.
    pub(crate) unsafe fn write_async(
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

    /// Makes the work enqueued on the stream from now on wait for the work `after` stands
    /// for (events of this context).
    pub(crate) fn wait_for(&self, after: &[&Event]) -> Result<(), Error> {
        self.shared.context.bind()?;
        self.wait_events(after)
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

    /// An event that completes when the stream's work before it has.
    pub(crate) fn marker(&self) -> Result<Event, Error> {
        self.shared.context.bind()?;
        self.record()
    }

    /// `size` bytes of `mem` from its start in host memory, after the stream's earlier work:
    /// a copy, since device memory is not the host's (with `write`, written back by
    /// [`Stream::unmap`]).
    pub(crate) fn map(&self, mem: &Memory, size: usize, write: bool) -> Result<Mapping, Error> {
        let mut host = HostMemory::new(&self.shared.context, size)?;
        self.read(mem, 0, host.bytes_mut(size))?;
        Ok(Mapping { host, size, write })
    }

    /// Ends a [`Stream::map`]: a map for writing is copied back to `mem` (after the stream's
    /// earlier work; returns when it is there).
    pub(crate) fn unmap(&self, mem: &Memory, mut mapping: Mapping) -> Result<(), Error> {
        if mapping.write {
            let size = mapping.size;
            self.write(mem, 0, mapping.host.bytes_mut(size))?;
        }
        Ok(())
    }

    /// Copies `size` bytes from `src` at `src_offset` to `dst` at `dst_offset` on the device,
    /// after the stream's earlier work and the work `after` stands for (events of this
    /// context). `src` and `dst` may be one allocation when the ranges do not overlap.
    pub(crate) fn copy(
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

    /// Repeats `pattern` over `size` bytes of `mem` from `offset`: a 1-, 2- or 4-byte pattern
    /// (or a longer one that repeats one) by the driver's memset; `None` for any other, which
    /// the caller fills otherwise (`backend::Queue::fill`).
    pub(crate) fn fill(
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

    pub(crate) fn synchronize(&self) -> Result<(), Error> {
        self.shared.context.bind()?;
        // SAFETY: a live stream.
        check("cuStreamSynchronize", unsafe { sys::cuStreamSynchronize(self.shared.raw) })
    }
}

/// The completion of a launch (or a copy) and of the work its stream had before it. A launch
/// records no CUDA event: its event is the launch's number on its stream, and becomes a
/// recorded event when it is first waited for, asked, awaited or waited on by other work —
/// one that covers what the stream was given since, too (a superset: never too early).
#[derive(Clone)]
pub(crate) struct Event {
    end: End,
    /// On a profiled stream: where the launch's timestamps count from, and its start.
    timing: Option<Arc<Timing>>,
    /// The recorded event handed out by [`Event::native`], held as long as this value so that
    /// the handle stays the same and is not recorded again for other work.
    pinned: OnceLock<Arc<RawEvent>>,
}

struct Timing {
    origin: Arc<RawEvent>,
    start: Arc<RawEvent>,
}

#[derive(Clone)]
enum End {
    /// An event recorded when the work was enqueued (copies, fills, profiled launches).
    Recorded(Arc<RawEvent>),
    /// Launch number `ticket` of `stream`.
    Launch { stream: Arc<StreamShared>, ticket: u64 },
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

/// What `Event::on_complete` hands the driver, boxed twice so its `void *` is thin.
type Callback = Box<dyn FnOnce() + Send>;

unsafe extern "C" fn completed(data: *mut c_void) {
    // SAFETY: `data` is the `Box<Callback>` leaked by `on_complete`; the driver calls each
    // host function once.
    let done = unsafe { Box::from_raw(data.cast::<Callback>()) };
    done();
}

impl Event {
    /// The recorded event that stands for this one.
    fn resolve(&self) -> Result<Arc<RawEvent>, Error> {
        match &self.end {
            End::Recorded(event) => Ok(event.clone()),
            End::Launch { stream, ticket } => stream.covering(*ticket),
        }
    }

    /// Blocks until the work completed; its error if it failed.
    pub(crate) fn wait(&self) -> Result<(), Error> {
        let end = self.resolve()?;
        end.context.bind()?;
        // SAFETY: a live event.
        check("cuEventSynchronize", unsafe { sys::cuEventSynchronize(end.raw) })
    }

    /// Whether the work completed.
    pub(crate) fn is_complete(&self) -> Result<bool, Error> {
        let end = self.resolve()?;
        end.context.bind()?;
        // SAFETY: a live event.
        match unsafe { sys::cuEventQuery(end.raw) } {
            CUresult::CUDA_SUCCESS => Ok(true),
            CUresult::CUDA_ERROR_NOT_READY => Ok(false),
            code => check("cuEventQuery", code).map(|()| true),
        }
    }

    /// The launch's device timestamps in nanoseconds from the stream's creation (queued,
    /// submitted, started, ended: CUDA times the start and the end only, so the first three
    /// are the start); `None` when its stream was made without profiling. Waits for the work.
    pub(crate) fn profile(&self) -> Result<Option<[u64; 4]>, Error> {
        let Some(timing) = &self.timing else { return Ok(None) };
        self.wait()?;
        let ns = |from: &RawEvent, to: &RawEvent| -> Result<u64, Error> {
            let mut ms = 0f32;
            // SAFETY: two completed, timed events of the bound context; an out-pointer.
            check("cuEventElapsedTime", unsafe {
                sys::cuEventElapsedTime(&mut ms, from.raw, to.raw)
            })?;
            Ok((f64::from(ms) * 1e6) as u64)
        };
        let started = ns(&timing.origin, &timing.start)?;
        let took = ns(&timing.start, &*self.resolve()?)?;
        Ok(Some([started, started, started, started + took]))
    }

    /// Calls `done` on a driver thread once the work completed: a host function on the
    /// context's callback stream, after that stream waits for the event.
    pub(crate) fn on_complete(&self, done: Callback) -> Result<(), Error> {
        let end = self.resolve()?;
        end.context.bind()?;
        let stream = end.context.callbacks()?;
        // SAFETY: a live stream and event of the bound context.
        check("cuStreamWaitEvent", unsafe { sys::cuStreamWaitEvent(stream, end.raw, 0) })?;
        let data = Box::into_raw(Box::new(done));
        // SAFETY: `completed` takes `data` back exactly once, when the driver calls it.
        let launched = unsafe { sys::cuLaunchHostFunc(stream, Some(completed), data.cast()) };
        check("cuLaunchHostFunc", launched).inspect_err(|_| {
            // SAFETY: the driver refused the host function, so it never takes `data`.
            drop(unsafe { Box::from_raw(data) });
        })
    }
}

/// Page-locked host memory of the context (`cuMemAllocHost`): the driver copies it to and from
/// the device at full speed, asynchronously. Zeroed when made; freed on drop.
pub(crate) struct HostMemory {
    context: Arc<Context>,
    at: *mut c_void,
    size: usize,
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
        let memory = HostMemory { context: context.clone(), at, size };
        // SAFETY: `size` bytes of host memory, ours until `drop` frees them.
        unsafe { ptr::write_bytes(memory.at.cast::<u8>(), 0, size) };
        Ok(memory)
    }

    pub(crate) fn as_ptr(&self) -> *mut u8 {
        self.at.cast()
    }

    /// The first `size` bytes (at most all of them), to read or write.
    fn bytes_mut(&mut self, size: usize) -> &mut [u8] {
        // SAFETY: the allocation holds `self.size` initialised bytes (zeroed when made), and
        // the exclusive borrow of `self` keeps every other access out for the slice's life.
        unsafe { std::slice::from_raw_parts_mut(self.at.cast(), size.min(self.size)) }
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

/// A buffer's contents copied into page-locked host memory by [`Stream::map`], until
/// [`Stream::unmap`].
pub(crate) struct Mapping {
    host: HostMemory,
    size: usize,
    /// Written back by the unmap.
    write: bool,
}

impl Mapping {
    pub(crate) fn as_ptr(&self) -> *mut u8 {
        self.host.as_ptr()
    }
}

/// Device memory of the context.
pub(crate) struct Memory {
    context: Arc<Context>,
    address: sys::CUdeviceptr,
    /// For a view into another allocation, that allocation, kept alive while the view is.
    _whole: Option<Arc<super::Memory>>,
    /// Allocated by us (freed on drop); otherwise a program's, which it keeps alive.
    owned: bool,
}

impl Memory {
    pub(crate) fn address(&self) -> u64 {
        self.address
    }

    /// The memory from `offset` bytes into this allocation on, as a view that keeps `whole`
    /// (this allocation's owner) alive.
    pub(crate) fn view(&self, offset: usize, whole: Arc<super::Memory>) -> Memory {
        Memory {
            context: self.context.clone(),
            address: self.address + offset as u64,
            _whole: Some(whole),
            owned: false,
        }
    }

    /// Frees the memory after the work `uses` stands for (see `backend::Memory::free_after`).
    pub(crate) fn free_after(&self, uses: Vec<Event>) {
        drop(uses);
    }
}

impl Drop for Memory {
    fn drop(&mut self) {
        if self.owned && self.context.bind().is_ok() {
            // SAFETY: allocated once, freed once.
            unsafe {
                let _ = sys::cuMemFree_v2(self.address);
            }
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

/// The driver handle of the device whose ordinal is `ordinal`.
pub(crate) fn native_device(ordinal: i32) -> Result<NativeDevice, Error> {
    device_of(ordinal).map(NativeDevice::Cuda)
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

impl Device {
    /// The device in a program's context: its primary context is opened as [`Device::open`]
    /// does; another context is used as it is, and the program keeps it alive.
    ///
    /// # Safety
    /// `context` is a live context of the device whose ordinal is `ordinal`, alive as long as
    /// anything made on it.
    pub(crate) unsafe fn adopt(
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
        Ok(Device {
            context: Arc::new(Context {
                raw: context,
                device,
                primary: false,
                callbacks: OnceLock::new(),
                idle_events: Mutex::new(Vec::new()),
                spare_event: std::sync::atomic::AtomicPtr::new(ptr::null_mut()),
            }),
            compute_capability: info.limits.compute_capability.unwrap_or((0, 0)),
        })
    }

    /// The context everything of this device is made in.
    pub(crate) fn context(&self) -> sys::CUcontext {
        self.context.raw
    }

    /// Whether the context stays alive as long as this value (the primary context, which it
    /// retains); a program's own context may be destroyed, and its handle reused, meanwhile.
    pub(crate) fn holds_context(&self) -> bool {
        self.context.primary
    }

    /// A program's stream of this device's context, which the program keeps alive.
    ///
    /// # Safety
    /// `stream` is a live stream (or null: the legacy default stream), alive as long as the
    /// queue made of it.
    pub(crate) unsafe fn adopt_stream(&self, stream: sys::CUstream) -> Result<Stream, Error> {
        self.context.bind()?;
        let mut of = ptr::null_mut();
        // SAFETY: a live stream (the caller's promise); an out-pointer to a local.
        check("cuStreamGetCtx", unsafe { sys::cuStreamGetCtx(stream, &mut of) })?;
        if of != self.context.raw {
            return Err(Error::InvalidArgument(
                "Queue::from_native: the CUDA stream is of another context than the one given with it".into(),
            ));
        }
        let shared = Arc::new(StreamShared {
            context: self.context.clone(),
            raw: stream,
            owned: false,
            issued: AtomicU64::new(0),
            recorded: Mutex::new(None),
        });
        Ok(Stream { shared, origin: None })
    }

    /// A program's allocation, from `address` on for `size` bytes, which the program keeps
    /// alive (it is never freed here).
    ///
    /// # Safety
    /// `address` points into a live allocation, alive as long as the buffer made of it.
    pub(crate) unsafe fn adopt_memory(
        &self,
        address: sys::CUdeviceptr,
        size: usize,
    ) -> Result<Memory, Error> {
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
        Ok(Memory { context: self.context.clone(), address, _whole: None, owned: false })
    }
}

impl Stream {
    pub(crate) fn native(&self) -> NativeQueue {
        let context = &self.shared.context;
        NativeQueue::Cuda { context: context.raw, device: context.device, stream: self.shared.raw }
    }
}

impl Memory {
    pub(crate) fn native(&self) -> NativeBuffer {
        NativeBuffer::Cuda(self.address)
    }
}

impl Event {
    /// The driver's event (for a launch, recorded now if it was not yet).
    pub(crate) fn native(&self) -> Result<NativeEvent, Error> {
        if let Some(event) = self.pinned.get() {
            return Ok(NativeEvent::Cuda(event.raw));
        }
        let event = self.resolve()?;
        Ok(NativeEvent::Cuda(self.pinned.get_or_init(|| event).raw))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

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
