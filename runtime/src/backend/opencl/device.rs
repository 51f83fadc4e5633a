//! OpenCL devices: every platform's devices found with their capabilities, and a device
//! opened in a context of the runtime's own (or adopted in a program's), which compiles, links
//! and builds programs and makes queues and memory.

use std::collections::BTreeSet;
use std::ptr;
use std::sync::{Arc, OnceLock};

use cl3::types::{cl_command_queue, cl_context, cl_device_id, cl_int, cl_mem};
use sycl_format::aspects::{aspect_number, target_aspect};
use sycl_format::Target;

use super::usm::{supports_usm, Heap};
use super::{cl_err, error_name, HostMemory, Memory, OpenCl, Program, Queue};
use crate::backend::api::{
    self, Backend, DeviceHandle, DeviceId, DeviceInfo, Failure, Limits, Owner, SpecValue,
};
use crate::backend::caps::{
    Capabilities, CL_DEVICE_TYPE_ACCELERATOR, CL_DEVICE_TYPE_CPU, CL_DEVICE_TYPE_GPU,
};
use crate::Error;

/// What the capabilities are made of: the device's answers to `clGetDeviceInfo`.
pub(crate) struct Queried {
    pub name: String,
    pub platform: String,
    pub vendor: String,
    pub il_version: String,
    pub driver_version: String,
    pub device_type: u64,
    pub extensions: String,
    pub image_support: bool,
    pub compiler_available: bool,
    pub linker_available: bool,
    pub max_work_group_size: usize,
    /// `CL_DEVICE_SINGLE_FP_CONFIG`.
    pub single_fp_config: u64,
    /// `CL_DEVICE_SUB_GROUP_SIZES_INTEL`; empty when the device has no sub-groups to offer.
    pub sub_group_sizes: Vec<usize>,
    /// Device allocations (`cl_intel_unified_shared_memory`, with access to device memory, or
    /// coarse-grained buffer SVM).
    pub usm_device: bool,
    /// `CL_DEVICE_GLOBAL_MEM_SIZE`, `CL_DEVICE_LOCAL_MEM_SIZE`, `CL_DEVICE_MAX_COMPUTE_UNITS`.
    pub limits: Limits,
}

/// `CL_DEVICE_SUB_GROUP_SIZES_INTEL` (cl_intel_required_subgroup_size).
const CL_DEVICE_SUB_GROUP_SIZES_INTEL: u32 = 0x4108;

pub(super) fn device_words(id: cl_device_id, param: u32) -> Vec<u64> {
    let bytes = cl3::device::get_device_data(id, param).unwrap_or_default();
    match bytes.len() {
        4 => vec![u64::from(u32::from_le_bytes(bytes[..4].try_into().unwrap()))],
        _ => bytes.chunks_exact(8).map(|c| u64::from_le_bytes(c.try_into().unwrap())).collect(),
    }
}

/// Every device of every platform, in the ICD loader's order.
pub(crate) fn devices() -> Result<Vec<DeviceInfo>, Error> {
    Ok(queried_devices()?
        .into_iter()
        .map(|(id, q)| DeviceInfo {
            handle: DeviceHandle::OpenCl(id),
            backend: Backend::OpenCl,
            identity: format!("{}\n{}\n{}", q.platform, q.name, q.driver_version),
            caps: Capabilities::of(&q),
            takes_linkable: q.il_version.contains("SPIR-V"),
            limits: q.limits,
            name: q.name,
            platform: q.platform,
            vendor: q.vendor,
            device_type: q.device_type,
        })
        .collect())
}

fn queried_devices() -> Result<Vec<(DeviceId, Queried)>, Error> {
    let mut out = Vec::new();
    let platforms = cl3::platform::get_platform_ids().map_err(cl_err("clGetPlatformIDs"))?;
    for platform in platforms {
        let platform_text = |param| {
            cl3::platform::get_platform_info(platform, param)
                .map(String::from)
                .unwrap_or_default()
                .trim_end_matches('\0')
                .to_string()
        };
        let platform_name = platform_text(cl3::platform::CL_PLATFORM_NAME);
        let vendor = platform_text(cl3::platform::CL_PLATFORM_VENDOR);
        let Ok(ids) = cl3::device::get_device_ids(platform, cl3::device::CL_DEVICE_TYPE_ALL) else {
            continue;
        };
        for id in ids {
            let text = |param| {
                cl3::device::get_device_info(id, param)
                    .map(String::from)
                    .unwrap_or_default()
                    .trim_end_matches('\0')
                    .to_string()
            };
            let word = |param| device_words(id, param).first().copied().unwrap_or(0);
            out.push((
                DeviceId(id),
                Queried {
                    name: text(cl3::device::CL_DEVICE_NAME),
                    platform: platform_name.clone(),
                    vendor: vendor.clone(),
                    il_version: text(cl3::device::CL_DEVICE_IL_VERSION),
                    driver_version: text(cl3::device::CL_DRIVER_VERSION),
                    device_type: word(cl3::device::CL_DEVICE_TYPE),
                    extensions: text(cl3::device::CL_DEVICE_EXTENSIONS),
                    image_support: word(cl3::device::CL_DEVICE_IMAGE_SUPPORT) != 0,
                    compiler_available: word(cl3::device::CL_DEVICE_COMPILER_AVAILABLE) != 0,
                    linker_available: word(cl3::device::CL_DEVICE_LINKER_AVAILABLE) != 0,
                    max_work_group_size: word(cl3::device::CL_DEVICE_MAX_WORK_GROUP_SIZE) as usize,
                    single_fp_config: word(cl3::device::CL_DEVICE_SINGLE_FP_CONFIG),
                    sub_group_sizes: device_words(id, CL_DEVICE_SUB_GROUP_SIZES_INTEL)
                        .into_iter()
                        .map(|v| v as usize)
                        .collect(),
                    usm_device: supports_usm(id),
                    limits: Limits {
                        global_mem_bytes: word(cl3::device::CL_DEVICE_GLOBAL_MEM_SIZE),
                        local_mem_bytes: word(cl3::device::CL_DEVICE_LOCAL_MEM_SIZE),
                        max_alloc_bytes: word(cl3::device::CL_DEVICE_MAX_MEM_ALLOC_SIZE),
                        // Reported in bits.
                        view_align_bytes: word(cl3::device::CL_DEVICE_MEM_BASE_ADDR_ALIGN) / 8,
                        compute_units: word(cl3::device::CL_DEVICE_MAX_COMPUTE_UNITS) as u32,
                        compute_capability: None,
                    },
                },
            ));
        }
    }
    Ok(out)
}

handle!(Context, cl_context, cl3::context::release_context);

// SAFETY: OpenCL contexts are thread-safe (OpenCL 2.x, appendix A.2).
unsafe impl Send for Context {}
// SAFETY: as above.
unsafe impl Sync for Context {}

impl Context {
    pub(crate) fn new(device: DeviceId) -> Result<Context, Error> {
        cl3::context::create_context(&[device.0], ptr::null(), None, ptr::null_mut())
            .map(Context)
            .map_err(cl_err("clCreateContext"))
    }
}

/// An OpenCL device opened for use: its id and a context of its own.
pub(crate) struct Device {
    id: DeviceId,
    context: Context,
    /// The queue that maps and unmaps host memory ([`api::Device::alloc_host`]), made at its
    /// first use.
    host_queue: OnceLock<Queue>,
    /// Its device allocations ([`Device::alloc_usm`]), from the first.
    usm: OnceLock<Arc<Heap>>,
}

/// A refused compile, link or build: the call, the error and the device's log.
fn failure(call: &str, code: cl_int, log: String) -> Failure {
    use cl3::error_codes::{
        CL_INVALID_BUILD_OPTIONS, CL_INVALID_COMPILER_OPTIONS, CL_INVALID_LINKER_OPTIONS,
    };
    Failure {
        error: format!("{call}: {}", error_name(code)),
        log,
        bad_options: [
            CL_INVALID_BUILD_OPTIONS,
            CL_INVALID_COMPILER_OPTIONS,
            CL_INVALID_LINKER_OPTIONS,
        ]
        .contains(&code),
    }
}

/// An error before the driver saw the code (creating the program) as a failure without a log.
fn not_created(e: Error) -> Failure {
    Failure { error: e.to_string(), log: String::new(), bad_options: false }
}

impl Device {
    /// A program built from OpenCL C source by the driver itself (tests compare with it).
    pub(crate) fn build_source(&self, source: &str, flags: &str) -> Result<Program, Failure> {
        let program = Program::from_source(&self.context, source).map_err(not_created)?;
        program
            .build(self.id, flags)
            .map_err(|(code, log)| failure("clBuildProgram", code, log))?;
        Ok(program)
    }

    /// OpenCL C source compiled to an object by the driver (tests link such objects).
    pub(crate) fn compile_source(&self, source: &str) -> Result<Program, Failure> {
        let program = Program::from_source(&self.context, source).map_err(not_created)?;
        program
            .compile(self.id, "")
            .map_err(|(code, log)| failure("clCompileProgram", code, log))?;
        Ok(program)
    }

    /// The context everything of this device is made in.
    pub(crate) fn context(&self) -> cl_context {
        self.context.0
    }

    /// The device's id, for the queries of its kernels.
    pub(crate) fn id(&self) -> DeviceId {
        self.id
    }

    /// `bytes` (at least one) of device memory at a fixed device address
    /// (`cl_intel_unified_shared_memory`, or SVM), which a program may store in memory and a kernel
    /// follow; `Error::Unsupported` on a device without them.
    pub(crate) fn alloc_usm(&self, bytes: usize) -> Result<Memory, Error> {
        let heap = match self.usm.get() {
            Some(heap) => heap,
            None => {
                let name = cl3::device::get_device_info(self.id.0, cl3::device::CL_DEVICE_NAME)
                    .map(String::from)
                    .unwrap_or_default();
                let heap = Heap::new(self.context(), self.id.0, name.trim_end_matches('\0'))?;
                // Two threads may both make one: the second is dropped.
                self.usm.get_or_init(|| Arc::new(heap))
            }
        };
        heap.alloc(bytes).map(Memory::Usm)
    }
}

impl api::Device<OpenCl> for Device {
    fn open(id: DeviceId, _info: &DeviceInfo) -> Result<Device, Error> {
        Ok(Device {
            id,
            context: Context::new(id)?,
            host_queue: OnceLock::new(),
            usm: OnceLock::new(),
        })
    }

    /// The context is retained, and released when this value drops.
    unsafe fn adopt(
        id: DeviceId,
        _info: &DeviceInfo,
        context: cl_context,
    ) -> Result<Device, Error> {
        // SAFETY: a live context (the caller's promise); released once, when the value drops.
        unsafe { cl3::context::retain_context(context) }.map_err(cl_err("clRetainContext"))?;
        let context = Context(context);
        let devices: Vec<isize> =
            cl3::context::get_context_info(context.0, cl3::context::CL_CONTEXT_DEVICES)
                .map(Vec::from)
                .map_err(cl_err("clGetContextInfo"))?;
        if !devices.contains(&(id.0 as isize)) {
            return Err(Error::InvalidArgument(
                "Queue::from_native: the context does not hold the device given with it".into(),
            ));
        }
        Ok(Device { id, context, host_queue: OnceLock::new(), usm: OnceLock::new() })
    }

    /// SPIR-V with its specialization values, compiled to an object.
    fn compile(&self, il: &[u8], spec: &[SpecValue], flags: &str) -> Result<Program, Failure> {
        let program = Program::from_il(&self.context, il).map_err(not_created)?;
        for value in spec {
            program.set_spec_constant(value.id, value.bytes).map_err(not_created)?;
        }
        program
            .compile(self.id, flags)
            .map_err(|(code, log)| failure("clCompileProgram", code, log))?;
        Ok(program)
    }

    /// A compiled object made ahead of time (`CL_PROGRAM_BINARY_TYPE_COMPILED_OBJECT`).
    fn load_object(&self, binary: &[u8], _spec: &[SpecValue]) -> Result<Program, Failure> {
        Program::from_binary(&self.context, self.id, binary).map_err(not_created)
    }

    fn link(&self, objects: &[&Program], flags: &str) -> Result<Program, Failure> {
        Program::link(&self.context, self.id, objects, flags)
            .map_err(|(code, log)| failure("clLinkProgram", code, log))
    }

    /// A program from a binary (SPIR bitcode or a program binary), built with `flags`.
    fn load(&self, binary: &[u8], flags: &str) -> Result<Program, Failure> {
        let program = Program::from_binary(&self.context, self.id, binary).map_err(not_created)?;
        program
            .build(self.id, flags)
            .map_err(|(code, log)| failure("clBuildProgram", code, log))?;
        Ok(program)
    }

    fn queue(&self, profiled: bool) -> Result<Queue, Error> {
        Queue::new(&self.context, self.id, profiled)
    }

    fn alloc(&self, bytes: usize) -> Result<Memory, Error> {
        Memory::new(&self.context, bytes)
    }

    /// The driver's own memory, mapped and unmapped on a queue of its own, so that neither
    /// waits for a program's work.
    fn alloc_host(&self, bytes: usize) -> Result<HostMemory, Error> {
        let queue = match self.host_queue.get() {
            Some(queue) => queue,
            None => {
                // Two threads may both make one: the second is dropped.
                let _ = self.host_queue.set(self.queue(false)?);
                self.host_queue.get().expect("set above")
            }
        };
        HostMemory::new(&self.context, queue, bytes)
    }

    /// The queue is retained (released when the queue made of it drops); `owner` is left to
    /// the caller.
    unsafe fn adopt_queue(
        &self,
        context: cl_context,
        device: cl_device_id,
        queue: cl_command_queue,
        _owner: &mut Option<Owner>,
    ) -> Result<Queue, Error> {
        if context != self.context() {
            return Err(Error::InvalidArgument(
                "Queue::from_native: the command queue is of another context than its device's"
                    .into(),
            ));
        }
        // SAFETY: a live queue (the caller's promise).
        unsafe { Queue::adopt(queue, context, DeviceId(device)) }
    }

    unsafe fn adopt_memory(&self, mem: cl_mem, size: usize) -> Result<Memory, Error> {
        // SAFETY: live memory of this context (the caller's promise).
        unsafe { Memory::adopt(mem, self.context(), size) }
    }

    /// Always: the runtime's own context, or a program's retained.
    fn holds_context(&self) -> bool {
        true
    }

    fn context_key(&self) -> usize {
        self.context() as usize
    }
}

impl Capabilities {
    /// What an OpenCL device can do, from its answers.
    fn of(info: &Queried) -> Capabilities {
        let mut aspects = BTreeSet::new();
        let mut add = |name: &str| {
            aspects.insert(aspect_number(name).expect("known aspect"));
        };
        if info.device_type & CL_DEVICE_TYPE_CPU != 0 {
            add("cpu");
        }
        if info.device_type & CL_DEVICE_TYPE_GPU != 0 {
            add("gpu");
        }
        if info.device_type & CL_DEVICE_TYPE_ACCELERATOR != 0 {
            add("accelerator");
        }
        let has_ext = |e: &str| info.extensions.split_whitespace().any(|x| x == e);
        if has_ext("cl_khr_fp16") {
            add("fp16");
        }
        if has_ext("cl_khr_fp64") {
            add("fp64");
        }
        if has_ext("cl_khr_int64_base_atomics") {
            add("atomic64");
        }
        if info.image_support {
            add("image");
        }
        if info.compiler_available {
            add("online_compiler");
        }
        if info.usm_device {
            add("usm_device_allocations");
        }
        if info.linker_available {
            add("online_linker");
        }
        add("queue_profiling");
        let target = if info.platform.contains("Intel(R) OpenCL")
            && info.device_type & CL_DEVICE_TYPE_CPU != 0
        {
            Some(Target::IntelCpuX86_64)
        } else if info.platform.contains("Portable Computing Language") {
            Some(Target::PoclCpu)
        } else {
            None
        };
        if let Some(a) = target.and_then(target_aspect) {
            aspects.insert(a);
        }
        // Measured: the Intel CPU runtime links and runs SPV_INTEL_function_pointers across
        // modules. PoCL 3.1 builds such programs but its kernels miss the pointed-to functions:
        // the runtime lowers the calls to switches when it links a program for PoCL
        // (`sycl_spirv::lower_function_pointers`), which its ahead-of-time images cannot have.
        if matches!(target, Some(Target::IntelCpuX86_64 | Target::PoclCpu)) {
            aspects.insert(aspect_number("function_pointers").expect("known aspect"));
        }
        Capabilities {
            aspects,
            sub_group_sizes: info.sub_group_sizes.iter().map(|s| *s as u32).collect(),
            max_work_group_size: info.max_work_group_size,
            links_images: info.il_version.contains("SPIR-V") && info.linker_available,
            target,
            // `CL_FP_FMA` among the single-precision capabilities (which PoCL reports when the
            // processor has FMA; double precision always reports it), or a CPU device on a
            // processor with FMA: Intel's CPU runtime does not report it, yet its own build of a
            // source fuses `a * b + c` there.
            fma: info.single_fp_config & CL_FP_FMA != 0
                || (matches!(target, Some(Target::IntelCpuX86_64 | Target::PoclCpu))
                    && host_has_fma()),
            compute_capability: None,
        }
    }
}

const CL_FP_FMA: u64 = 1 << 5;

/// Whether this processor has fused multiply-add (a CPU device runs on it).
fn host_has_fma() -> bool {
    #[cfg(target_arch = "x86_64")]
    return std::arch::is_x86_feature_detected!("fma");
    #[cfg(not(target_arch = "x86_64"))]
    return false;
}
