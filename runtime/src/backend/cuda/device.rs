//! CUDA devices: every GPU found with its limits and capabilities, and a device opened in its
//! primary context (or adopted in a program's), which compiles, links and loads programs and
//! makes streams and memory.

use std::ffi::{c_char, CStr};
use std::ptr;
use std::sync::Arc;

use cudarc::driver::sys::{self, CUdevice_attribute};
use sycl_format::aspects::{aspect_number, target_aspect};
use sycl_format::{Target, PTX_SPEC_CONSTANT_PREFIX};

use super::clock::Clock;
use super::context::Context;
use super::heap::Heap;
use super::program::{specialize, split_modules};
use super::stream::StreamShared;
use super::{check, device_of, Code, Cuda, HostMemory, Memory, Module, Stream, PLATFORM};
use crate::backend::api::{
    self, Backend, DeviceHandle, DeviceInfo, Failure, Limits, Owner, SpecValue,
};
use crate::backend::caps::{Capabilities, CL_DEVICE_TYPE_GPU};
use crate::Error;

pub(super) fn enumerate() -> Result<Vec<DeviceInfo>, Error> {
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
/// double, 64-bit atomics, calls through pointers, sub-groups as warps, device allocations (its
/// memory is device pointers); no images. The GPU is each of those targets whose images it runs
/// (their `target_*` aspects).
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
        "usm_device_allocations",
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

/// A CUDA device opened for use: its primary context.
pub(crate) struct Device {
    pub(super) context: Arc<Context>,
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
        // Copied once, where it is kept (each page of a first launch's copies is a fault).
        let bytes: Arc<[u8]> = if spec.is_empty() {
            Arc::from(object)
        } else {
            let mut bytes = object.to_vec();
            for value in spec {
                let name = format!("{PTX_SPEC_CONSTANT_PREFIX}{}", value.name);
                sycl_format::cubin::set_initializer(&mut bytes, &name, value.bytes).map_err(
                    |e| failed(format!("specialization constant `{}`: {e}", value.name)),
                )?;
            }
            bytes.into()
        };
        let input = sys::CUjitInputType::CU_JIT_INPUT_CUBIN;
        Ok(Code { input, bytes, complete })
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
            // The module keeps the object's bytes, shared rather than copied.
            parts.extend(self.module(code.bytes.clone()).map_err(failed)?.0);
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
            parts.extend(self.module(Arc::from(cubin)).map_err(failed)?.0);
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

#[cfg(test)]
mod tests {
    use super::*;

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
}
