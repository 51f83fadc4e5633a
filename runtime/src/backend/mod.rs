//! The drivers under the runtime, behind one interface: devices, compiled images (objects),
//! linked programs, memory (device buffers, host memory for fast copies, maps), queues, their
//! copies (blocking or returning events) and kernel launches. The interface is a contract,
//! [`api`]: one trait per role, each operation documented there once. Two backends keep it,
//! each a folder of the same rooms (device, queue or stream, memory, event, program, kernel):
//! - [`opencl`]: any OpenCL platform (the Intel CPU runtime, PoCL), through `cl3`;
//! - `cuda`: NVIDIA GPUs through the CUDA driver API (`libcuda.so.1`, loaded at run time:
//!   a process without it has no CUDA devices and runs on OpenCL as before), where the PTX
//!   form of each image is an object and `cuLink` the linker. It is the crate's `cuda`
//!   feature (on by default); without it (`sycl-ld`'s build) `no_cuda` stands in its place:
//!   no devices, and types without values that keep the contract, so the arms below stay as
//!   they are.
//!
//! This module keeps the closed enums over the two (one variant per backend), which dispatch
//! statically to the drivers' types; one projection per enum (`mem.opencl()?`, `mem.cuda()?`)
//! that refuses a value of the other backend; and the policy that is the same for every
//! backend: devices found once, and in [`queue`] the queue's commands (empty copies as
//! markers, fills the driver does not take). [`handles`] adopts a program's driver handles and
//! hands out ours.
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
pub(crate) mod api;
pub(crate) mod info;
pub(crate) mod opencl;
#[cfg(feature = "cuda")]
pub(crate) mod cuda;
#[cfg(not(feature = "cuda"))]
mod no_cuda;
pub(crate) mod select;
mod queue;
mod graph;
mod handles;

#[cfg(not(feature = "cuda"))]
use no_cuda as cuda;

use std::sync::Arc;

pub use api::Backend;
pub(crate) use api::{DeviceHandle, DeviceInfo, Failure, Owner, SpecValue};
pub(crate) use caps::Capabilities;
pub(crate) use graph::{Graph, GraphBuilder};

use api::{
    Api, Device as _, Event as _, HostMemory as _, Kernel as _, Memory as _, Object as _,
    Program as _,
};
use native::NativeBuffer;

use crate::Error;

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
    let (mut all, cuda) = match cuda::Cuda::devices() {
        Ok(found) => (found, None),
        Err(e) => {
            crate::trace::trace!("backend", "CUDA: {e}");
            (Vec::new(), Some(e))
        }
    };
    match opencl::OpenCl::devices() {
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

/// The error for `what` (a buffer, an event, …) of another backend than the one it is used
/// with.
fn another(what: &str) -> Error {
    Error::InvalidArgument(format!("{what} of another device's backend"))
}

/// The completion of one enqueued command (a kernel, a copy), as its driver reports it.
#[derive(Clone)]
pub(crate) enum Event {
    OpenCl(opencl::Event),
    Cuda(cuda::Event),
}

impl Event {
    /// The OpenCL event; an error for another backend's.
    #[inline]
    fn opencl(&self) -> Result<&opencl::Event, Error> {
        match self {
            Event::OpenCl(e) => Ok(e),
            Event::Cuda(_) => Err(another("an event")),
        }
    }

    /// The CUDA event; an error for another backend's.
    #[inline]
    fn cuda(&self) -> Result<&cuda::Event, Error> {
        match self {
            Event::Cuda(e) => Ok(e),
            Event::OpenCl(_) => Err(another("an event")),
        }
    }

    /// [`api::Event::wait`].
    pub(crate) fn wait(&self) -> Result<(), Error> {
        match self {
            Event::OpenCl(e) => e.wait(),
            Event::Cuda(e) => e.wait(),
        }
    }

    /// [`api::Event::is_complete`].
    pub(crate) fn is_complete(&self) -> Result<bool, Error> {
        match self {
            Event::OpenCl(e) => e.is_complete(),
            Event::Cuda(e) => e.is_complete(),
        }
    }

    /// [`api::Event::profile`].
    pub(crate) fn profile(&self) -> Result<Option<[u64; 4]>, Error> {
        match self {
            Event::OpenCl(e) => e.profile(),
            Event::Cuda(e) => e.profile(),
        }
    }

    /// [`api::Event::on_complete`].
    pub(crate) fn on_complete(&self, done: api::Callback) -> Result<(), Error> {
        match self {
            Event::OpenCl(e) => e.on_complete(done),
            Event::Cuda(e) => e.on_complete(done),
        }
    }

    /// [`api::Event::later`]; give it up with [`Event::release_when_complete`].
    pub(crate) fn later(&self) -> Result<Event, Error> {
        match self {
            Event::OpenCl(e) => e.later().map(Event::OpenCl),
            Event::Cuda(e) => e.later().map(Event::Cuda),
        }
    }

    /// [`api::Event::release_when_complete`].
    pub(crate) fn release_when_complete(self) {
        match self {
            Event::OpenCl(e) => e.release_when_complete(),
            Event::Cuda(e) => e.release_when_complete(),
        }
    }

    /// [`api::Event::flush`].
    pub(crate) fn flush(&self) -> Result<(), Error> {
        match self {
            Event::OpenCl(e) => e.flush(),
            Event::Cuda(e) => e.flush(),
        }
    }
}

/// The backend's own events among `after`, by its projection `own` (no allocation when there
/// are none, as for most launches); an event of another backend is an error.
#[inline]
fn events_of<'a, E>(
    after: &[&'a Event],
    own: impl Fn(&'a Event) -> Result<&'a E, Error>,
) -> Result<Vec<&'a E>, Error> {
    if after.is_empty() {
        return Ok(Vec::new()); // most launches: no iterator to run
    }
    after.iter().map(|&e| own(e)).collect()
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

/// A linked program whose kernels can be launched.
pub(crate) enum Program {
    OpenCl(opencl::Program),
    Cuda(cuda::Module),
}

/// Device memory.
pub(crate) enum Memory {
    OpenCl(opencl::Memory),
    Cuda(cuda::Memory),
}

/// Host memory for fast copies, owned ([`api::HostMemory`]).
pub(crate) enum HostMemory {
    OpenCl(opencl::HostMemory),
    Cuda(cuda::HostMemory),
}

/// A buffer in host memory, from [`Queue::map`] until [`Queue::unmap`].
pub(crate) enum Mapping {
    OpenCl(opencl::Mapping),
    Cuda(cuda::Mapping),
}

/// An in-order queue of work for the device.
pub(crate) enum Queue {
    OpenCl(opencl::Queue),
    Cuda(cuda::Stream),
}

/// A kernel of a program, with its arguments as last set.
pub(crate) enum Kernel {
    OpenCl(opencl::Kernel),
    Cuda(cuda::Kernel),
}

impl Device {
    /// [`api::Device::open`] of the device `info` describes.
    pub(crate) fn open(info: &DeviceInfo) -> Result<Device, Error> {
        Ok(match info.handle {
            DeviceHandle::OpenCl(id) => Device::OpenCl(opencl::Device::open(id, info)?),
            DeviceHandle::Cuda(ordinal) => Device::Cuda(cuda::Device::open(ordinal, info)?),
        })
    }

    /// [`api::Device::compile`].
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

    /// [`api::Device::load_object`].
    pub(crate) fn load_object(&self, binary: &[u8], spec: &[SpecValue]) -> Result<Object, Failure> {
        match self {
            Device::OpenCl(d) => d.load_object(binary, spec).map(Object::OpenCl),
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

    /// [`api::Device::link`] of the objects of this device's backend among `objects`.
    pub(crate) fn link(&self, objects: &[&Object], flags: &str) -> Result<Program, Failure> {
        match self {
            Device::OpenCl(d) => {
                let objects: Vec<&opencl::Program> =
                    objects.iter().filter_map(|o| o.opencl()).collect();
                d.link(&objects, flags).map(Program::OpenCl)
            }
            Device::Cuda(d) => {
                let objects: Vec<&cuda::Code> = objects.iter().filter_map(|o| o.cuda()).collect();
                d.link(&objects, flags).map(Program::Cuda)
            }
        }
    }

    /// [`api::Device::load`].
    pub(crate) fn load(&self, binary: &[u8], flags: &str) -> Result<Program, Failure> {
        match self {
            Device::OpenCl(d) => d.load(binary, flags).map(Program::OpenCl),
            Device::Cuda(d) => d.load(binary, flags).map(Program::Cuda),
        }
    }

    /// [`api::Device::queue`].
    pub(crate) fn queue(&self, profiled: bool) -> Result<Queue, Error> {
        Ok(match self {
            Device::OpenCl(d) => Queue::OpenCl(d.queue(profiled)?),
            Device::Cuda(d) => Queue::Cuda(d.queue(profiled)?),
        })
    }

    /// [`api::Device::alloc`].
    pub(crate) fn alloc(&self, bytes: usize) -> Result<Memory, Error> {
        Ok(match self {
            Device::OpenCl(d) => Memory::OpenCl(d.alloc(bytes)?),
            Device::Cuda(d) => Memory::Cuda(d.alloc(bytes)?),
        })
    }

    /// `bytes` (at least one) of device memory at a fixed device address, which a program may
    /// store in memory and a kernel follow, with that address: on CUDA [`api::Device::alloc`]'s
    /// (a device pointer), on OpenCL a device allocation of `cl_intel_unified_shared_memory`
    /// (`Error::Unsupported` on a device without it).
    pub(crate) fn alloc_device(&self, bytes: usize) -> Result<(Memory, u64), Error> {
        let mem = match self {
            Device::OpenCl(d) => Memory::OpenCl(d.alloc_usm(bytes)?),
            Device::Cuda(d) => Memory::Cuda(d.alloc(bytes)?),
        };
        let address = match mem.native() {
            NativeBuffer::Cuda(address) => address,
            NativeBuffer::OpenClUsm(address) => address as u64,
            NativeBuffer::OpenCl(_) => unreachable!("a device allocation is no buffer object"),
        };
        Ok((mem, address))
    }

    /// [`api::Device::alloc_host`].
    pub(crate) fn alloc_host(&self, bytes: usize) -> Result<HostMemory, Error> {
        Ok(match self {
            Device::OpenCl(d) => HostMemory::OpenCl(d.alloc_host(bytes)?),
            Device::Cuda(d) => HostMemory::Cuda(d.alloc_host(bytes)?),
        })
    }
}

impl Object {
    /// [`api::Object::binary`].
    pub(crate) fn binary(&self) -> Result<Vec<u8>, Error> {
        match self {
            Object::OpenCl(p) => api::Object::binary(p),
            Object::Cuda(c) => c.binary(),
        }
    }

    /// The OpenCL object; `None` for another backend's.
    fn opencl(&self) -> Option<&opencl::Program> {
        match self {
            Object::OpenCl(p) => Some(p),
            Object::Cuda(_) => None,
        }
    }

    /// The CUDA object; `None` for another backend's.
    fn cuda(&self) -> Option<&cuda::Code> {
        match self {
            Object::Cuda(c) => Some(c),
            Object::OpenCl(_) => None,
        }
    }
}

impl Program {
    /// [`api::Program::binary`].
    pub(crate) fn binary(&self) -> Result<Vec<u8>, Error> {
        match self {
            Program::OpenCl(p) => api::Program::binary(p),
            Program::Cuda(m) => m.binary(),
        }
    }

    /// [`api::Program::kernel`].
    pub(crate) fn kernel(self: &Arc<Self>, name: &str) -> Result<Kernel, Error> {
        Ok(match self.as_ref() {
            Program::OpenCl(p) => Kernel::OpenCl(p.kernel(name)?),
            Program::Cuda(m) => Kernel::Cuda(m.kernel(name)?),
        })
    }
}

impl Memory {
    /// The OpenCL memory; an error for another backend's.
    #[inline]
    fn opencl(&self) -> Result<&opencl::Memory, Error> {
        match self {
            Memory::OpenCl(m) => Ok(m),
            Memory::Cuda(_) => Err(another("a buffer")),
        }
    }

    /// The CUDA memory; an error for another backend's.
    #[inline]
    fn cuda(&self) -> Result<&cuda::Memory, Error> {
        match self {
            Memory::Cuda(m) => Ok(m),
            Memory::OpenCl(_) => Err(another("a buffer")),
        }
    }

    /// [`api::Memory::frees_itself`].
    pub(crate) fn frees_itself(&self) -> bool {
        match self {
            Memory::OpenCl(m) => m.frees_itself(),
            Memory::Cuda(m) => m.frees_itself(),
        }
    }

    /// [`api::Memory::free_after`] the uses of this memory's backend among `uses` (the others
    /// go).
    pub(crate) fn free_after(&self, uses: Vec<Event>) {
        match self {
            Memory::OpenCl(m) => m.free_after(
                uses.into_iter()
                    .filter_map(|e| match e {
                        Event::OpenCl(e) => Some(e),
                        Event::Cuda(_) => None,
                    })
                    .collect(),
            ),
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

    /// Whether a view of the memory may start at any byte: memory a kernel reaches by address
    /// (CUDA's, an OpenCL device allocation), not an OpenCL buffer object (whose sub-buffers
    /// start at multiples of the device's base address alignment).
    pub(crate) fn views_anywhere(&self) -> bool {
        !matches!(self.native(), NativeBuffer::OpenCl(_))
    }

    /// [`api::Memory::view`] of `whole`, which the view keeps alive.
    pub(crate) fn view(whole: &Arc<Memory>, offset: usize, size: usize) -> Result<Memory, Error> {
        match &**whole {
            Memory::OpenCl(m) => m.view(offset, size, whole.clone()).map(Memory::OpenCl),
            Memory::Cuda(m) => m.view(offset, size, whole.clone()).map(Memory::Cuda),
        }
    }
}

impl HostMemory {
    /// [`api::HostMemory::as_ptr`].
    pub(crate) fn as_ptr(&self) -> *mut u8 {
        match self {
            HostMemory::OpenCl(m) => m.as_ptr(),
            HostMemory::Cuda(m) => m.as_ptr(),
        }
    }
}

impl Mapping {
    /// The OpenCL mapping; an error for another backend's.
    fn opencl(self) -> Result<opencl::Mapping, Error> {
        match self {
            Mapping::OpenCl(m) => Ok(m),
            Mapping::Cuda(_) => Err(another("a mapping")),
        }
    }

    /// The CUDA mapping; an error for another backend's.
    fn cuda(self) -> Result<cuda::Mapping, Error> {
        match self {
            Mapping::Cuda(m) => Ok(m),
            Mapping::OpenCl(_) => Err(another("a mapping")),
        }
    }

    /// Where the mapped bytes start.
    pub(crate) fn as_ptr(&self) -> *mut u8 {
        match self {
            Mapping::OpenCl(m) => m.as_ptr(),
            Mapping::Cuda(m) => m.as_ptr(),
        }
    }
}

impl Kernel {
    /// The OpenCL kernel; an error for another backend's.
    #[inline]
    fn opencl(&self) -> Result<&opencl::Kernel, Error> {
        match self {
            Kernel::OpenCl(k) => Ok(k),
            Kernel::Cuda(_) => Err(another("a kernel")),
        }
    }

    /// The CUDA kernel; an error for another backend's.
    #[inline]
    fn cuda(&self) -> Result<&cuda::Kernel, Error> {
        match self {
            Kernel::Cuda(k) => Ok(k),
            Kernel::OpenCl(_) => Err(another("a kernel")),
        }
    }

    /// [`api::Kernel::work_group_sizes`] on `device`.
    pub(crate) fn work_group_sizes(&self, device: &Device) -> Result<(usize, usize), Error> {
        match device {
            Device::OpenCl(d) => self.opencl()?.work_group_sizes(d),
            Device::Cuda(d) => self.cuda()?.work_group_sizes(d),
        }
    }

    /// [`api::Kernel::set_mem`].
    pub(crate) fn set_mem(&mut self, index: u32, mem: &Memory) -> Result<(), Error> {
        match self {
            Kernel::OpenCl(k) => k.set_mem(index, mem.opencl()?),
            Kernel::Cuda(k) => k.set_mem(index, mem.cuda()?),
        }
    }

    /// [`api::Kernel::set_native`], by the memory's public handle.
    pub(crate) fn set_native(&mut self, index: u32, mem: NativeBuffer) -> Result<(), Error> {
        match (self, mem) {
            (Kernel::OpenCl(k), NativeBuffer::OpenCl(m)) => k.set_native(index, m),
            (Kernel::Cuda(k), NativeBuffer::Cuda(address)) => k.set_native(index, address),
            _ => Err(another("memory")),
        }
    }

    /// [`api::Kernel::set_local`].
    pub(crate) fn set_local(&mut self, index: u32, size: usize) -> Result<(), Error> {
        match self {
            Kernel::OpenCl(k) => k.set_local(index, size),
            Kernel::Cuda(k) => k.set_local(index, size),
        }
    }

    /// [`api::Kernel::set_bytes`].
    pub(crate) fn set_bytes(&mut self, index: u32, bytes: &[u8]) -> Result<(), Error> {
        match self {
            Kernel::OpenCl(k) => k.set_bytes(index, bytes),
            Kernel::Cuda(k) => k.set_bytes(index, bytes),
        }
    }
}
