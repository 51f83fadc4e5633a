//! The drivers under the runtime, behind one interface: devices, compiled images (objects),
//! linked programs, memory (device buffers, host memory for fast copies, maps), queues, their
//! copies (blocking or returning events) and kernel launches. Two backends implement it:
//! - [`opencl`]: any OpenCL platform (the Intel CPU runtime, PoCL), through `cl3`;
//! - `cuda`: NVIDIA GPUs through the CUDA driver API (`libcuda.so.1`, loaded at run time:
//!   a process without it has no CUDA devices and runs on OpenCL as before), where the PTX
//!   form of each image is an object and `cuLink` the linker. It is the crate's `cuda`
//!   feature (on by default); without it (`sycl-ld`'s build) `no_cuda` stands in its place:
//!   no devices, and types without values, so the arms below stay as they are.
//!
//! Everything above this module (the registry, resolution, requirement checks, the caches,
//! launches) sees only these types and [`Capabilities`], and calls their methods: it never
//! matches on a backend's variant, and no `cfg` of the `cuda` feature reaches above this
//! room. A failed driver step, or one the device's backend does not have, returns a
//! [`Failure`] holding the driver's own words (or ours); the build step turns it into
//! `Error::Build`. [`info`] describes each device as users see it (`sycl_runtime::DeviceInfo`),
//! from what the backends found; [`native`] holds the driver handles programs get and give.

pub(crate) mod native;
pub(crate) mod caps;
#[cfg(feature = "cuda")]
pub(crate) mod cuda;
#[cfg(not(feature = "cuda"))]
mod no_cuda;
pub(crate) mod info;
pub(crate) mod opencl;
pub(crate) mod select;

#[cfg(not(feature = "cuda"))]
use no_cuda as cuda;

use std::sync::Arc;

pub(crate) use caps::Capabilities;

use crate::Error;

/// Another library's object that a queue or buffer was made from, kept alive with it (a
/// CUDA stream's by every event of the stream).
pub(crate) type Owner = Box<dyn std::any::Any + Send + Sync>;

/// Which driver a device is reached through: the one enum of backends, public as
/// `sycl_runtime::Backend` (a device's [`DeviceInfo::backend`](crate::DeviceInfo::backend)).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Backend {
    /// An OpenCL platform's device (Intel's CPU runtime, PoCL, …), through the ICD loader.
    OpenCl,
    /// An NVIDIA GPU, through the CUDA driver API.
    Cuda,
}

impl std::fmt::Display for Backend {
    /// `OpenCL` or `CUDA`.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Backend::OpenCl => "OpenCL",
            Backend::Cuda => "CUDA",
        })
    }
}

/// A device as its driver knows it, before anything is created on it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub(crate) enum DeviceHandle {
    OpenCl(opencl::DeviceId),
    /// The CUDA device ordinal (none without the `cuda` feature).
    #[cfg_attr(not(feature = "cuda"), allow(dead_code))]
    Cuda(i32),
}

/// A device found by a backend: what selection, the requirement checks and the caches need.
#[derive(Clone)]
pub(crate) struct DeviceInfo {
    pub handle: DeviceHandle,
    pub backend: Backend,
    pub name: String,
    /// The platform's name (`CUDA` for the CUDA backend's devices).
    pub platform: String,
    pub vendor: String,
    /// `CL_DEVICE_TYPE_*` bits.
    pub device_type: u64,
    /// Platform, device and driver: what the persistent cache key needs of the device.
    pub identity: String,
    /// Takes the images' linkable form as it is (PTX; SPIR-V on OpenCL): such a device can be
    /// the default.
    pub takes_linkable: bool,
    pub caps: Capabilities,
    /// The device's limits as its driver reports them, for `sycl_runtime::DeviceInfo`.
    pub limits: Limits,
}

/// A device's size limits as its driver reports them: plain data, the same for every backend.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub(crate) struct Limits {
    /// `CL_DEVICE_GLOBAL_MEM_SIZE`; `cuDeviceTotalMem`.
    pub global_mem_bytes: u64,
    /// `CL_DEVICE_LOCAL_MEM_SIZE`; `CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN`
    /// (the most a launch can raise a kernel's to), else `..._MAX_SHARED_MEMORY_PER_BLOCK`.
    pub local_mem_bytes: u64,
    /// `CL_DEVICE_MAX_MEM_ALLOC_SIZE`; on CUDA `cuDeviceTotalMem` (no other limit).
    pub max_alloc_bytes: u64,
    /// `CL_DEVICE_MEM_BASE_ADDR_ALIGN` in bytes (where a sub-buffer may start); 1 on CUDA,
    /// whose views are pointers.
    pub view_align_bytes: u64,
    /// `CL_DEVICE_MAX_COMPUTE_UNITS`; `CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT`.
    pub compute_units: u32,
    /// The compute capability (major, minor) of a CUDA GPU; `None` elsewhere.
    pub compute_capability: Option<(u32, u32)>,
}

/// Every device of every backend: CUDA's first (when `libcuda.so.1` loads), then OpenCL's in
/// the ICD loader's order. A backend that fails to enumerate is traced and skipped, so that
/// one broken driver does not hide the others.
///
/// Found once per process, under a lock: PoCL crashes when threads enumerate its devices at
/// once (16 threads opening queues together did, 1 run in 5, on the GPU machine). A failure
/// is not kept: the next call looks again.
pub(crate) fn devices() -> Result<Vec<DeviceInfo>, Error> {
    static FOUND: std::sync::Mutex<Option<Vec<DeviceInfo>>> = std::sync::Mutex::new(None);
    let mut found = FOUND.lock().unwrap_or_else(|e| e.into_inner());
    if let Some(all) = found.as_ref() {
        return Ok(all.clone());
    }
    let all = enumerate()?;
    *found = Some(all.clone());
    Ok(all)
}

fn enumerate() -> Result<Vec<DeviceInfo>, Error> {
    let (mut all, cuda) = match cuda::devices() {
        Ok(found) => (found, None),
        Err(e) => {
            crate::trace::trace!("backend", "CUDA: {e}");
            (Vec::new(), Some(e))
        }
    };
    match opencl::devices() {
        Ok(found) => all.extend(found),
        Err(e) if !all.is_empty() => crate::trace::trace!("backend", "OpenCL: {e}"),
        // Neither backend has a device: both reasons, and (from the empty list) what to install.
        Err(e) => {
            let cuda = cuda.map_or("no GPU".to_string(), |c| c.to_string());
            return Err(Error::NoDevice {
                problem: format!("no backend found a device (OpenCL: {e}; CUDA: {cuda})"),
                available: Vec::new(),
            });
        }
    }
    Ok(all)
}

/// A driver's refusal of device code: its error, in its words, and its log.
#[derive(Debug)]
pub(crate) struct Failure {
    /// The call and its error: `clLinkProgram: CL_LINK_PROGRAM_FAILURE (-17)`.
    pub error: String,
    pub log: String,
    /// The options were what the driver refused.
    pub bad_options: bool,
}

impl Failure {
    /// A step the device's backend does not have: `step` names it, `why` stands in the log.
    fn unsupported(step: &str, why: &str) -> Failure {
        Failure { error: step.into(), log: why.into(), bad_options: false }
    }
}

/// The completion of one enqueued command (a kernel, a copy), as its driver reports it.
#[derive(Clone)]
pub(crate) enum Event {
    OpenCl(opencl::Event),
    Cuda(cuda::Event),
}

impl Event {
    /// Blocks until the command completed; its error if it failed.
    pub(crate) fn wait(&self) -> Result<(), Error> {
        match self {
            Event::OpenCl(e) => e.wait(),
            Event::Cuda(e) => e.wait(),
        }
    }

    /// Whether the command completed (a failed command is complete; `wait` says how).
    pub(crate) fn is_complete(&self) -> Result<bool, Error> {
        match self {
            Event::OpenCl(e) => e.is_complete(),
            Event::Cuda(e) => e.is_complete(),
        }
    }

    /// The command's device timestamps in nanoseconds (queued, submitted, started, ended);
    /// `None` when its queue was made without profiling.
    pub(crate) fn profile(&self) -> Result<Option<[u64; 4]>, Error> {
        match self {
            Event::OpenCl(e) => e.profile(),
            Event::Cuda(e) => e.profile(),
        }
    }

    /// Calls `done` once the command completed, on a thread of the driver's (at once when it
    /// already has). `done` must not block.
    pub(crate) fn on_complete(&self, done: Box<dyn FnOnce() + Send>) -> Result<(), Error> {
        match self {
            Event::OpenCl(e) => e.on_complete(done),
            Event::Cuda(e) => e.on_complete(done),
        }
    }

    /// An event that completes when everything the event's queue was given until now did (a
    /// superset of this one): an OpenCL marker on its queue (this event itself for a user
    /// event, which has none), or on CUDA the stream's latest command's, recorded when first
    /// asked about. Give it up with [`Event::release_when_complete`].
    #[cfg_attr(not(feature = "cuda"), allow(unreachable_code))]
    pub(crate) fn later(&self) -> Result<Event, Error> {
        match self {
            Event::OpenCl(e) => e.later().map(Event::OpenCl),
            Event::Cuda(e) => Ok(Event::Cuda(e.later())),
        }
    }

    /// Gives up an event that may be a runtime's marker once its command completed, not
    /// before (see `opencl::Event::release_when_complete`).
    pub(crate) fn release_when_complete(self) {
        match self {
            Event::OpenCl(e) => e.release_when_complete(),
            Event::Cuda(_) => {}
        }
    }

    /// Submits the event's queue to the device (OpenCL's `clFlush`; the CUDA driver submits
    /// at once), so that its command will complete: before the event is waited for by another
    /// queue, awaited, or waited for by the host. A user event has no queue: nothing to do.
    pub(crate) fn flush(&self) -> Result<(), Error> {
        match self {
            Event::OpenCl(e) => e.flush(),
            Event::Cuda(_) => Ok(()),
        }
    }
}

/// The backend's own events among `after` (no allocation when there are none, as for most
/// launches); an event of another backend is an error.
fn events_of<'a, E>(
    after: &[&'a Event],
    own: impl Fn(&'a Event) -> Option<&'a E>,
) -> Result<Vec<&'a E>, Error> {
    if after.is_empty() {
        return Ok(Vec::new()); // most launches: no iterator to run
    }
    after
        .iter()
        .map(|&e| {
            own(e).ok_or_else(|| {
                Error::InvalidArgument("an event of another device's backend".into())
            })
        })
        .collect()
}

/// A device opened for use: its context.
pub(crate) enum Device {
    OpenCl(opencl::Device),
    Cuda(cuda::Device),
}

/// One image compiled for the device, ready to link.
pub(crate) enum Object {
    OpenCl(opencl::Program),
    Cuda(cuda::Code),
}

/// A specialization constant's value for one image: by `SpecId` in SPIR-V, by name in PTX
/// (see `sycl_format::PTX_SPEC_CONSTANT_PREFIX`).
#[derive(Debug, Clone, Copy)]
pub(crate) struct SpecValue<'a> {
    /// The constant's name, which only PTX uses.
    #[cfg_attr(not(feature = "cuda"), allow(dead_code))]
    pub name: &'a str,
    pub id: u32,
    pub bytes: &'a [u8],
}

/// A linked program whose kernels can be launched.
pub(crate) enum Program {
    OpenCl(opencl::Program),
    Cuda(cuda::Module),
}

/// Device memory.
pub(crate) enum Memory {
    OpenCl(opencl::Mem),
    Cuda(cuda::Memory),
}

/// The memory objects of the live buffers, by handle.
static OWNED: std::sync::Mutex<Vec<usize>> = std::sync::Mutex::new(Vec::new());

fn owned_buffers() -> std::sync::MutexGuard<'static, Vec<usize>> {
    OWNED.lock().unwrap_or_else(|e| e.into_inner())
}

impl Memory {
    /// Notes that a buffer holds `mem` (when it is OpenCL memory).
    pub(crate) fn own(&self) {
        if let NativeBuffer::OpenCl(handle) = self.native() {
            owned_buffers().push(handle as usize);
        }
    }

    /// Notes that the buffer that held `mem` is gone.
    pub(crate) fn disown(&self) {
        if let NativeBuffer::OpenCl(handle) = self.native() {
            let mut owned = owned_buffers();
            if let Some(i) = owned.iter().rposition(|&h| h == handle as usize) {
                owned.swap_remove(i);
            }
        }
    }

    /// Refuses `mem`, about to become a buffer by `what`, when a live buffer holds its memory
    /// object, or the one it is a sub-buffer of.
    pub(crate) fn check_not_owned(&self, what: &str) -> Result<(), Error> {
        let NativeBuffer::OpenCl(handle) = self.native() else { return Ok(()) };
        let parent =
            cl3::memory::get_mem_object_info(handle, cl3::memory::CL_MEM_ASSOCIATED_MEMOBJECT)
                .map_or(0, |p| isize::from(p) as usize);
        let owned = owned_buffers();
        if owned.iter().any(|&h| h == handle as usize || (parent != 0 && h == parent)) {
            return Err(Error::InvalidArgument(format!(
                "{what}: the memory object (or the buffer it is a sub-buffer of) is a live \
                 Buffer's already (made by the runtime, or adopted before): two buffers of one \
                 memory would not order their commands, and their maps could hand out the same \
                 bytes as `&mut` and `&`; use that Buffer (or views of it, Buffer::slice)"
            )));
        }
        Ok(())
    }

    /// Whether the driver frees the memory by itself once no queued command uses it
    /// (OpenCL): then its last uses need not be given to [`Memory::free_after`].
    pub(crate) fn frees_itself(&self) -> bool {
        matches!(self, Memory::OpenCl(_))
    }

    /// Frees the memory, when its last owner drops it, only after the commands `uses` stand
    /// for (on any queue of the device), without the host waiting for them. OpenCL does so by
    /// itself (a memory object goes once no queued command uses it); CUDA's `cuMemFree`
    /// would stall the whole device, so the CUDA memory keeps the events and frees in order
    /// with them.
    #[cfg_attr(not(feature = "cuda"), allow(unreachable_code))]
    pub(crate) fn free_after(&self, uses: Vec<Event>) {
        match self {
            // OpenCL frees by itself; the uses may be markers of the runtime's, which go once
            // they completed.
            Memory::OpenCl(_) => uses.into_iter().for_each(Event::release_when_complete),
            Memory::Cuda(m) => m.free_after(
                uses.into_iter()
                    .filter_map(|e| match e {
                        Event::Cuda(e) => Some(e),
                        Event::OpenCl(_) => None,
                    })
                    .collect(),
            ),
        }
    }

    /// `size` bytes of `whole` from `offset` as memory of their own, for a kernel argument: an
    /// OpenCL sub-buffer, or on CUDA the address plus the offset. Keeps `whole` alive. The
    /// range lies within `whole` (callers check).
    #[cfg_attr(not(feature = "cuda"), allow(unreachable_code))] // no CUDA memory to view
    pub(crate) fn view(whole: &Arc<Memory>, offset: usize, size: usize) -> Result<Memory, Error> {
        match &**whole {
            Memory::OpenCl(m) => m.sub(offset, size).map(Memory::OpenCl),
            Memory::Cuda(m) => Ok(Memory::Cuda(m.view(offset, whole.clone()))),
        }
    }
}

/// Host memory for fast copies, owned: page-locked on CUDA; on OpenCL a buffer made with
/// `CL_MEM_ALLOC_HOST_PTR`, mapped for its whole life. Zeroed when made; freed on drop (the
/// owner first waits for every copy that uses it).
pub(crate) enum HostMemory {
    OpenCl(opencl::HostMem),
    Cuda(cuda::HostMemory),
}

impl HostMemory {
    /// Where the memory starts: as many bytes as were asked for, zeroed when made.
    pub(crate) fn as_ptr(&self) -> *mut u8 {
        match self {
            HostMemory::OpenCl(m) => m.as_ptr(),
            HostMemory::Cuda(m) => m.as_ptr(),
        }
    }
}

/// A buffer in host memory, from [`Queue::map`] until [`Queue::unmap`]: the buffer's own
/// memory where the device shares the host's (OpenCL maps it), a copy where it does not (CUDA).
pub(crate) enum Mapping {
    OpenCl(opencl::Mapping),
    Cuda(cuda::Mapping),
}

impl Mapping {
    /// Where the mapped bytes start.
    pub(crate) fn as_ptr(&self) -> *mut u8 {
        match self {
            Mapping::OpenCl(m) => m.as_ptr(),
            Mapping::Cuda(m) => m.as_ptr(),
        }
    }
}

/// An in-order queue of work for the device.
pub(crate) enum Queue {
    OpenCl(opencl::Queue),
    Cuda(cuda::Stream),
}

/// A kernel of a program, with its arguments as last set (both drivers keep them between
/// launches).
pub(crate) enum Kernel {
    OpenCl(opencl::Kernel),
    Cuda(cuda::Kernel),
}

impl Device {
    pub(crate) fn open(info: &DeviceInfo) -> Result<Device, Error> {
        Ok(match info.handle {
            DeviceHandle::OpenCl(id) => Device::OpenCl(opencl::Device::open(id)?),
            DeviceHandle::Cuda(ordinal) => Device::Cuda(cuda::Device::open(ordinal, info)?),
        })
    }

    /// Compiles one image's linkable form (SPIR-V, with its specialization values; PTX) into
    /// an object.
    pub(crate) fn compile(
        &self,
        code: &[u8],
        spec: &[SpecValue],
        flags: &str,
    ) -> Result<Object, Failure> {
        match self {
            Device::OpenCl(d) => d.compile(code, spec, flags).map(Object::OpenCl),
            Device::Cuda(d) => d.compile(code, spec, flags).map(Object::Cuda),
        }
    }

    /// SPIR-V compiled ahead of time into an object whose [`Object::binary`] this device's
    /// driver takes back later ([`Device::load_object`]): an OpenCL compiled-object program
    /// binary, as `sycl-ld` makes them for a native target. The CUDA backend has none.
    pub(crate) fn compile_ahead_of_time(&self, spirv: &[u8]) -> Result<Object, Failure> {
        match self {
            Device::OpenCl(d) => d.compile(spirv, &[], "").map(Object::OpenCl),
            Device::Cuda(_) => Err(Failure::unsupported(
                "compiling an ahead-of-time object",
                "the CUDA backend links PTX; it has no ahead-of-time objects",
            )),
        }
    }

    /// An object compiled ahead of time for this device: an OpenCL program binary, or a
    /// native NVIDIA image (a relocatable SASS object) with the specialization values written
    /// into it. An OpenCL binary takes none: only an image's SPIR-V form is specialized.
    pub(crate) fn load_object(&self, binary: &[u8], spec: &[SpecValue]) -> Result<Object, Failure> {
        match self {
            Device::OpenCl(d) => d.load_object(binary).map(Object::OpenCl),
            Device::Cuda(d) => d.load_object(binary, spec).map(Object::Cuda),
        }
    }

    /// OpenCL C `source` compiled to an object by the driver, to be linked like an image's
    /// (tests link such objects). The CUDA backend takes no OpenCL C.
    pub(crate) fn compile_source(&self, source: &str) -> Result<Object, Failure> {
        match self {
            Device::OpenCl(d) => d.compile_source(source).map(Object::OpenCl),
            Device::Cuda(_) => Err(Failure::unsupported(
                "compiling an OpenCL C source",
                "the CUDA backend takes PTX, not OpenCL C",
            )),
        }
    }

    /// OpenCL C `source` built into a program by the driver itself, with `flags`, as an
    /// OpenCL application builds a source (tests compare such programs with the runtime's).
    /// The CUDA backend takes no OpenCL C.
    pub(crate) fn build_source(&self, source: &str, flags: &str) -> Result<Program, Failure> {
        match self {
            Device::OpenCl(d) => d.build_source(source, flags).map(Program::OpenCl),
            Device::Cuda(_) => Err(Failure::unsupported(
                "building an OpenCL C source",
                "the CUDA backend takes PTX, not OpenCL C",
            )),
        }
    }

    pub(crate) fn link(&self, objects: &[&Object], flags: &str) -> Result<Program, Failure> {
        match self {
            Device::OpenCl(d) => {
                let objects: Vec<&opencl::Program> =
                    objects.iter().filter_map(|o| o.as_opencl()).collect();
                d.link(&objects, flags).map(Program::OpenCl)
            }
            Device::Cuda(d) => {
                let objects: Vec<&cuda::Code> =
                    objects.iter().filter_map(|o| o.as_cuda()).collect();
                d.link(&objects, flags).map(Program::Cuda)
            }
        }
    }

    /// A program from a binary made for this device: SPIR bitcode, an OpenCL program binary,
    /// a cubin; built with `flags`.
    pub(crate) fn load(&self, binary: &[u8], flags: &str) -> Result<Program, Failure> {
        match self {
            Device::OpenCl(d) => d.load(binary, flags).map(Program::OpenCl),
            Device::Cuda(d) => d.load(binary).map(Program::Cuda),
        }
    }

    /// A queue (in order); with `profiled`, its commands' events carry device timestamps.
    pub(crate) fn queue(&self, profiled: bool) -> Result<Queue, Error> {
        Ok(match self {
            Device::OpenCl(d) => Queue::OpenCl(d.queue(profiled)?),
            Device::Cuda(d) => Queue::Cuda(d.stream(profiled)?),
        })
    }

    pub(crate) fn alloc(&self, bytes: usize) -> Result<Memory, Error> {
        Ok(match self {
            Device::OpenCl(d) => Memory::OpenCl(d.alloc(bytes)?),
            Device::Cuda(d) => Memory::Cuda(d.alloc(bytes)?),
        })
    }

    /// `bytes` of host memory for fast copies to and from this device's buffers, zeroed.
    pub(crate) fn alloc_host(&self, bytes: usize) -> Result<HostMemory, Error> {
        Ok(match self {
            Device::OpenCl(d) => HostMemory::OpenCl(d.alloc_host(bytes)?),
            Device::Cuda(d) => HostMemory::Cuda(d.alloc_host(bytes)?),
        })
    }
}

impl Object {
    /// The object as its driver stores it, for [`Device::load_object`] to take back: an OpenCL
    /// program binary. A CUDA object has none apart from its image (what CUDA stores is a
    /// linked program's cubin, [`Program::binary`]).
    pub(crate) fn binary(&self) -> Result<Vec<u8>, Error> {
        match self {
            Object::OpenCl(p) => p.binary(),
            Object::Cuda(_) => Err(Error::InvalidArgument(
                "a CUDA object has no binary apart from its image".into(),
            )),
        }
    }

    fn as_opencl(&self) -> Option<&opencl::Program> {
        match self {
            Object::OpenCl(p) => Some(p),
            Object::Cuda(_) => None,
        }
    }

    fn as_cuda(&self) -> Option<&cuda::Code> {
        match self {
            Object::Cuda(p) => Some(p),
            Object::OpenCl(_) => None,
        }
    }
}

impl Program {
    /// What the persistent cache keeps of the program: its binary for the device.
    pub(crate) fn binary(&self) -> Result<Vec<u8>, Error> {
        match self {
            Program::OpenCl(p) => p.binary(),
            Program::Cuda(m) => Ok(m.image()),
        }
    }

    pub(crate) fn kernel(self: &Arc<Self>, name: &str) -> Result<Kernel, Error> {
        Ok(match self.as_ref() {
            Program::OpenCl(p) => Kernel::OpenCl(opencl::Kernel::new(p, name)?),
            Program::Cuda(m) => Kernel::Cuda(m.kernel(name)?),
        })
    }
}

impl Kernel {
    /// The kernel's work-group limits on `device` (the device its program was built for):
    /// the largest work-group it can be launched with, and the multiple of work-items its
    /// work-groups run best at (OpenCL's `CL_KERNEL_WORK_GROUP_SIZE` and
    /// `CL_KERNEL_PREFERRED_WORK_GROUP_SIZE_MULTIPLE`; CUDA's `MAX_THREADS_PER_BLOCK` of the
    /// function and the warp size).
    pub(crate) fn work_group_sizes(&self, device: &Device) -> Result<(usize, usize), Error> {
        match (self, device) {
            (Kernel::OpenCl(k), Device::OpenCl(d)) => k.work_group_sizes(d),
            (Kernel::Cuda(k), Device::Cuda(_)) => k.work_group_sizes(),
            _ => Err(Error::InvalidArgument("a kernel of another device's backend".into())),
        }
    }

    pub(crate) fn set_mem(&mut self, index: u32, mem: &Memory) -> Result<(), Error> {
        match (self, mem) {
            (Kernel::OpenCl(k), Memory::OpenCl(m)) => k.set_mem(index, m),
            (Kernel::Cuda(k), Memory::Cuda(m)) => {
                k.set_bytes(index, &m.address().to_ne_bytes());
                Ok(())
            }
            _ => Err(Error::InvalidArgument("a buffer of another device's backend".into())),
        }
    }

    /// A pointer argument to another library's memory, by its driver handle.
    pub(crate) fn set_native(&mut self, index: u32, mem: NativeBuffer) -> Result<(), Error> {
        match (self, mem) {
            (Kernel::OpenCl(k), NativeBuffer::OpenCl(m)) => k.set_raw_mem(index, m),
            (Kernel::Cuda(k), NativeBuffer::Cuda(address)) => {
                k.set_bytes(index, &address.to_ne_bytes());
                Ok(())
            }
            _ => Err(Error::InvalidArgument("memory of another device's backend".into())),
        }
    }

    /// A `local` pointer argument: `size` bytes of local memory per work-group.
    pub(crate) fn set_local(&mut self, index: u32, size: usize) -> Result<(), Error> {
        match self {
            Kernel::OpenCl(k) => k.set_local(index, size),
            Kernel::Cuda(k) => {
                k.set_local(index, size);
                Ok(())
            }
        }
    }

    pub(crate) fn set_bytes(&mut self, index: u32, bytes: &[u8]) -> Result<(), Error> {
        match self {
            Kernel::OpenCl(k) => k.set_bytes(index, bytes),
            Kernel::Cuda(k) => {
                k.set_bytes(index, bytes);
                Ok(())
            }
        }
    }
}

impl Queue {
    /// Enqueues `kernel` over `global` work-items in work-groups of `local` (the driver's
    /// choice when `None`), as OpenCL defines them, the global ids starting at `offset` (none
    /// on CUDA), after the commands `after` stand for (events of this device); the event of its
    /// completion. Never blocks the host.
    pub(crate) fn enqueue(
        &self,
        kernel: &Kernel,
        global: &[usize],
        local: Option<&[usize]>,
        offset: Option<&[usize]>,
        after: &[&Event],
    ) -> Result<Event, Error> {
        match (self, kernel) {
            (Queue::OpenCl(q), Kernel::OpenCl(k)) => {
                let after = events_of(after, |e| match e {
                    Event::OpenCl(e) => Some(e),
                    Event::Cuda(_) => None,
                })?;
                q.enqueue(k, global, local, offset, &after).map(Event::OpenCl)
            }
            (Queue::Cuda(_), Kernel::Cuda(_))
                if offset.is_some_and(|o| o.iter().any(|&d| d != 0)) =>
            {
                // The ptx64 target's get_global_id and get_global_offset know no offset.
                Err(Error::InvalidArgument(
                    "a global offset on a CUDA device: its kernels' get_global_id knows none; \
                     add the offset to the index in the kernel, or pass it as an argument"
                        .into(),
                ))
            }
            (Queue::Cuda(s), Kernel::Cuda(k)) => {
                let after = events_of(after, |e| match e {
                    Event::Cuda(e) => Some(e),
                    Event::OpenCl(_) => None,
                })?;
                s.launch(k, global, local, &after).map(Event::Cuda)
            }
            _ => Err(Error::InvalidArgument("a kernel of another device's backend".into())),
        }
    }

    /// Submits what was enqueued to the device without waiting for it.
    pub(crate) fn flush(&self) -> Result<(), Error> {
        match self {
            Queue::OpenCl(q) => q.flush(),
            Queue::Cuda(s) => s.flush(),
        }
    }

    /// Copies `out.len()` bytes of `mem` from `offset` into `out` after everything enqueued
    /// before; returns when they are there. The range lies within `mem` (callers check). On
    /// CUDA a large read into pageable memory goes through reused page-locked staging, the
    /// copy out of one chunk overlapping the next chunk's transfer; `None` on OpenCL, whose
    /// reads the caller makes asynchronous and waits for.
    pub(crate) fn read_blocking(
        &self,
        mem: &Memory,
        offset: usize,
        out: &mut [u8],
    ) -> Option<Result<(), Error>> {
        match (self, mem) {
            (Queue::Cuda(s), Memory::Cuda(m)) => Some(s.read(m, offset, out)),
            _ => None,
        }
    }

    /// Copies `size` bytes of `mem` from `offset` to `out` after everything enqueued before;
    /// returns at once, with the event of the copy's completion. The range lies within `mem`
    /// (callers check).
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
        if size == 0 {
            // Drivers refuse empty copies: an event that completes as one would.
            return self.marker();
        }
        // SAFETY: the caller keeps `out` as the backends require.
        unsafe {
            match (self, mem) {
                (Queue::OpenCl(q), Memory::OpenCl(m)) => {
                    q.read_async(m, offset, out, size).map(Event::OpenCl)
                }
                (Queue::Cuda(s), Memory::Cuda(m)) => {
                    s.read_async(m, offset, out, size).map(Event::Cuda)
                }
                _ => Err(Error::InvalidArgument("a buffer of another device's backend".into())),
            }
        }
    }

    /// Copies `size` bytes from `data` into `mem` at `offset` after everything enqueued
    /// before; returns at once, with the event of the copy's completion. The range lies
    /// within `mem` (callers check).
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
        if size == 0 {
            return self.marker();
        }
        // SAFETY: the caller keeps `data` as the backends require.
        unsafe {
            match (self, mem) {
                (Queue::OpenCl(q), Memory::OpenCl(m)) => {
                    q.write_async(m, offset, data, size).map(Event::OpenCl)
                }
                (Queue::Cuda(s), Memory::Cuda(m)) => {
                    s.write_async(m, offset, data, size).map(Event::Cuda)
                }
                _ => Err(Error::InvalidArgument("a buffer of another device's backend".into())),
            }
        }
    }

    /// Makes the commands enqueued from now on wait for those `after` stands for; nothing for
    /// none (OpenCL would enqueue a barrier that waits for nothing).
    pub(crate) fn wait_for(&self, after: &[&Event]) -> Result<(), Error> {
        if after.is_empty() {
            return Ok(());
        }
        match self {
            Queue::OpenCl(q) => q.wait_for(&events_of(after, |e| match e {
                Event::OpenCl(e) => Some(e),
                Event::Cuda(_) => None,
            })?),
            Queue::Cuda(s) => s.wait_for(&events_of(after, |e| match e {
                Event::Cuda(e) => Some(e),
                Event::OpenCl(_) => None,
            })?),
        }
    }

    /// An event that completes when everything enqueued before it has: what another queue
    /// waits for to come after this one's work.
    pub(crate) fn marker(&self) -> Result<Event, Error> {
        match self {
            Queue::OpenCl(q) => q.marker().map(Event::OpenCl),
            Queue::Cuda(s) => s.marker().map(Event::Cuda),
        }
    }

    /// `size` bytes (at least one) of `mem` from its start in host memory, after everything
    /// enqueued before; returns when they are there. With `write` the host may change them,
    /// and [`Queue::unmap`] makes the changes the buffer's.
    pub(crate) fn map(&self, mem: &Memory, size: usize, write: bool) -> Result<Mapping, Error> {
        let size = size.max(1);
        match (self, mem) {
            (Queue::OpenCl(q), Memory::OpenCl(m)) => q.map(m, size, write).map(Mapping::OpenCl),
            (Queue::Cuda(s), Memory::Cuda(m)) => s.map(m, size, write).map(Mapping::Cuda),
            _ => Err(Error::InvalidArgument("a buffer of another device's backend".into())),
        }
    }

    /// Ends a [`Queue::map`] of `mem` on this queue; returns when the buffer holds what the
    /// host wrote.
    pub(crate) fn unmap(&self, mem: &Memory, mapping: Mapping) -> Result<(), Error> {
        match (self, mem, mapping) {
            (Queue::OpenCl(q), Memory::OpenCl(m), Mapping::OpenCl(mapping)) => q.unmap(m, mapping),
            (Queue::Cuda(s), Memory::Cuda(m), Mapping::Cuda(mapping)) => s.unmap(m, mapping),
            _ => Err(Error::InvalidArgument("a mapping of another device's backend".into())),
        }
    }

    /// Copies `size` bytes between two buffers of this device, on the device, after
    /// everything enqueued before and the commands `after` stand for (events of this
    /// device). Both ranges lie within their buffers, and do not overlap within one buffer
    /// (callers check).
    pub(crate) fn copy(
        &self,
        src: (&Memory, usize),
        dst: (&Memory, usize),
        size: usize,
        after: &[&Event],
    ) -> Result<Event, Error> {
        if size == 0 {
            return self.marker();
        }
        match (self, src, dst) {
            (Queue::OpenCl(q), (Memory::OpenCl(s), so), (Memory::OpenCl(d), doff)) => {
                let after = events_of(after, |e| match e {
                    Event::OpenCl(e) => Some(e),
                    Event::Cuda(_) => None,
                })?;
                q.copy((s, so), (d, doff), size, &after).map(Event::OpenCl)
            }
            (Queue::Cuda(q), (Memory::Cuda(s), so), (Memory::Cuda(d), doff)) => {
                let after = events_of(after, |e| match e {
                    Event::Cuda(e) => Some(e),
                    Event::OpenCl(_) => None,
                })?;
                q.copy((s, so), (d, doff), size, &after).map(Event::Cuda)
            }
            _ => Err(Error::InvalidArgument("a buffer of another device's backend".into())),
        }
    }

    /// Repeats `pattern` over `size` bytes of `mem` from `offset` (both multiples of the
    /// pattern's size, within `mem`) on the device, after everything enqueued before. The
    /// driver fills where it takes the pattern (OpenCL: 1, 2, 4, … 128 bytes; CUDA: one that
    /// repeats 1, 2 or 4 bytes); otherwise the first value is filled byte by byte, then copied
    /// over the range in doubling copies within the buffer (about log2 of the values' count).
    pub(crate) fn fill(
        &self,
        mem: &Memory,
        pattern: &[u8],
        offset: usize,
        size: usize,
    ) -> Result<Event, Error> {
        if size == 0 || pattern.is_empty() {
            return self.marker();
        }
        if let Some(filled) = self.driver_fill(mem, pattern, offset, size)? {
            return Ok(filled);
        }
        let mut last = None;
        for (i, byte) in pattern.iter().enumerate() {
            last = self.driver_fill(mem, std::slice::from_ref(byte), offset + i, 1)?;
        }
        let mut done = pattern.len();
        while done < size {
            let more = done.min(size - done);
            last = Some(self.copy((mem, offset), (mem, offset + done), more, &[])?);
            done += more;
        }
        last.ok_or_else(|| Error::InvalidArgument("a driver without a 1-byte fill".into()))
    }

    /// The driver's own fill of `pattern`; `None` when it takes no such pattern.
    fn driver_fill(
        &self,
        mem: &Memory,
        pattern: &[u8],
        offset: usize,
        size: usize,
    ) -> Result<Option<Event>, Error> {
        match (self, mem) {
            (Queue::OpenCl(q), Memory::OpenCl(m)) => {
                // OpenCL fills with patterns of 1, 2, 4, … 128 bytes.
                if !pattern.len().is_power_of_two() || pattern.len() > 128 {
                    return Ok(None);
                }
                q.fill(m, pattern, offset, size).map(|e| Some(Event::OpenCl(e)))
            }
            (Queue::Cuda(s), Memory::Cuda(m)) => {
                Ok(s.fill(m, pattern, offset, size)?.map(Event::Cuda))
            }
            _ => Err(Error::InvalidArgument("a buffer of another device's backend".into())),
        }
    }

    pub(crate) fn finish(&self) -> Result<(), Error> {
        match self {
            Queue::OpenCl(q) => q.finish(),
            Queue::Cuda(s) => s.synchronize(),
        }
    }
}

use native::{NativeBuffer, NativeDevice, NativeEvent, NativeQueue};

impl DeviceHandle {
    /// The device's driver handle.
    pub(crate) fn native(self) -> Result<NativeDevice, Error> {
        match self {
            DeviceHandle::OpenCl(id) => id.native(),
            DeviceHandle::Cuda(ordinal) => cuda::native_device(ordinal),
        }
    }

    /// The device of a program's queue.
    pub(crate) fn of_queue(native: &NativeQueue) -> Result<DeviceHandle, Error> {
        match *native {
            NativeQueue::OpenCl { device, .. } => {
                Ok(DeviceHandle::OpenCl(opencl::DeviceId(device)))
            }
            NativeQueue::Cuda { device, .. } => cuda::ordinal_of(device).map(DeviceHandle::Cuda),
        }
    }
}

impl Device {
    /// The device in the context of a program's queue (`native`, whose device `info` is),
    /// rather than a context of the runtime's own.
    ///
    /// # Safety
    /// `native`'s handles are live, and the context stays alive as long as anything made on
    /// it (OpenCL's is retained here; a CUDA context other than the primary one is not).
    pub(crate) unsafe fn adopt(info: &DeviceInfo, native: &NativeQueue) -> Result<Device, Error> {
        // SAFETY: the caller's promise, passed on.
        unsafe {
            Ok(match (info.handle, *native) {
                (DeviceHandle::OpenCl(id), NativeQueue::OpenCl { context, .. }) => {
                    Device::OpenCl(opencl::Device::adopt(id, context)?)
                }
                (DeviceHandle::Cuda(ordinal), NativeQueue::Cuda { context, .. }) => {
                    Device::Cuda(cuda::Device::adopt(ordinal, info, context)?)
                }
                _ => {
                    return Err(Error::InvalidArgument(
                        "Queue::from_native: a queue of another backend than its device's".into(),
                    ))
                }
            })
        }
    }

    /// The program's queue `native` itself, on this device (made by [`Device::adopt`] of it);
    /// `owner`, the object the queue belongs to, is kept by a CUDA stream until its last
    /// event goes.
    ///
    /// # Safety
    /// As [`Device::adopt`]; the queue or stream stays alive as long as the queue made of it
    /// (an OpenCL queue is retained here; a CUDA stream is not, unless `owner` keeps it).
    pub(crate) unsafe fn adopt_queue(
        &self,
        native: &NativeQueue,
        owner: &mut Option<Owner>,
    ) -> Result<Queue, Error> {
        // SAFETY: the caller's promise, passed on.
        unsafe {
            Ok(match (self, *native) {
                (Device::OpenCl(d), NativeQueue::OpenCl { queue, context, device }) => {
                    if context != d.context() {
                        return Err(Error::InvalidArgument(
                            "Queue::from_native: the command queue is of another context than its device's".into(),
                        ));
                    }
                    Queue::OpenCl(opencl::Queue::adopt(queue, context, opencl::DeviceId(device))?)
                }
                (Device::Cuda(d), NativeQueue::Cuda { stream, .. }) => {
                    Queue::Cuda(d.adopt_stream(stream, owner.take())?)
                }
                _ => {
                    return Err(Error::InvalidArgument(
                        "Queue::from_native: a queue of another backend than its device's".into(),
                    ))
                }
            })
        }
    }

    /// A program's memory (`size` bytes from `native` on) as device memory of this device.
    ///
    /// # Safety
    /// `native` is live memory of this device's context; an OpenCL buffer is retained here,
    /// CUDA memory must stay allocated as long as the buffer made of it.
    pub(crate) unsafe fn adopt_memory(
        &self,
        native: NativeBuffer,
        size: usize,
    ) -> Result<Memory, Error> {
        // SAFETY: the caller's promise, passed on.
        unsafe {
            Ok(match (self, native) {
                (Device::OpenCl(d), NativeBuffer::OpenCl(mem)) => {
                    Memory::OpenCl(opencl::Mem::adopt(mem, d.context(), size)?)
                }
                (Device::Cuda(d), NativeBuffer::Cuda(address)) => {
                    Memory::Cuda(d.adopt_memory(address, size)?)
                }
                _ => {
                    return Err(Error::InvalidArgument(
                        "Buffer::from_native: memory of another backend than the queue's device"
                            .into(),
                    ))
                }
            })
        }
    }

    /// Whether the driver's context lives as long as this value (retained, or the runtime's
    /// own): only then may the device be found again by its context's number.
    pub(crate) fn holds_context(&self) -> bool {
        match self {
            Device::OpenCl(_) => true,
            Device::Cuda(d) => d.holds_context(),
        }
    }

    /// The driver's context this device's programs, queues and memory are made in, as a
    /// number that tells two contexts apart.
    pub(crate) fn context_key(&self) -> usize {
        match self {
            Device::OpenCl(d) => d.context() as usize,
            Device::Cuda(d) => d.context() as usize,
        }
    }
}

impl Queue {
    /// The queue's driver handles.
    pub(crate) fn native(&self) -> Result<NativeQueue, Error> {
        match self {
            Queue::OpenCl(q) => q.native(),
            Queue::Cuda(s) => Ok(s.native()),
        }
    }
}

impl Memory {
    /// The memory's driver handle.
    pub(crate) fn native(&self) -> NativeBuffer {
        match self {
            Memory::OpenCl(m) => m.native(),
            Memory::Cuda(m) => m.native(),
        }
    }
}

impl Event {
    /// The event's driver handle.
    pub(crate) fn native(&self) -> Result<NativeEvent, Error> {
        match self {
            Event::OpenCl(e) => Ok(e.native()),
            Event::Cuda(e) => e.native(),
        }
    }
}
