//! The contract every driver keeps: the vocabulary the drivers and the room above them share
//! (a device before it is opened, its limits, a driver's refusal of device code, a
//! specialization value, the objects a program's handles belong to), and one trait per role:
//! [`Device`], [`Queue`], [`Memory`] (with [`HostMemory`]), [`Event`], [`Object`] and
//! [`Program`], [`Kernel`], tied together by [`Api`], whose associated types name one driver's
//! type for each role. Each operation is documented here, once; a driver's impl says only how
//! it does it, where that matters.
//!
//! Below it the drivers (`opencl/`, `cuda/`, and `no_cuda.rs` in a build without CUDA) import
//! this module, `caps`, `native` and their own folder, never the dispatching enums of
//! `backend/mod.rs` above them. `backend/mod.rs` matches on its closed enums and calls these
//! traits' methods on the concrete types: dispatch is static, and nothing on the launch path
//! goes through a `dyn`.

use std::any::Any;
use std::sync::Arc;

use super::caps::Capabilities;
use super::native::{cl_device_id, NativeBuffer, NativeDevice, NativeEvent, NativeQueue};
use crate::Error;

/// Another library's object that a queue or buffer was made from, kept alive with it (a
/// CUDA stream's by every event of the stream).
pub(crate) type Owner = Box<dyn Any + Send + Sync>;

/// The memory a view was made of ([`Memory::view`]), for a driver whose view does not keep
/// it alive by itself to hold.
pub(crate) type Whole = Arc<dyn Any + Send + Sync>;

/// What [`Event::on_complete`] calls once the command completed (boxed again by a driver, so
/// that the `void *` it hands its driver's callback is a thin pointer).
pub(crate) type Callback = Box<dyn FnOnce() + Send>;

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

/// An OpenCL device id (an OpenCL [`DeviceHandle`]). Device ids of root devices are not
/// reference counted.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub(crate) struct DeviceId(pub cl_device_id);
// SAFETY: an OpenCL device id is an opaque handle that the API allows from any thread.
unsafe impl Send for DeviceId {}
// SAFETY: as above.
unsafe impl Sync for DeviceId {}

/// A device as its driver knows it, before anything is created on it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub(crate) enum DeviceHandle {
    OpenCl(DeviceId),
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

/// A driver's refusal of device code: its error, in its words, and its log. The build step
/// turns it into `Error::Build`.
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
    pub(crate) fn unsupported(step: &str, why: &str) -> Failure {
        Failure { error: step.into(), log: why.into(), bad_options: false }
    }
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

/// A driver: its type for each role, and what it knows before a device is opened.
pub(crate) trait Api: Sized + 'static {
    /// A device as the driver knows it before it is opened ([`DeviceHandle`]'s variant).
    type Handle: Copy;
    /// The driver's handle of a context, a device, a queue and memory, as a program gives
    /// them to be adopted (the fields of [`NativeQueue`] and [`NativeBuffer`]).
    type RawContext: Copy;
    type RawDevice: Copy;
    type RawQueue: Copy;
    type RawMemory: Copy;
    type Device: Device<Self>;
    type Queue: Queue<Self>;
    type Memory: Memory<Self>;
    type HostMemory: HostMemory;
    /// A buffer in host memory, from [`Queue::map`] until [`Queue::unmap`].
    type Mapping: HostMemory;
    type Event: Event;
    type Object: Object;
    type Program: Program<Self>;
    type Kernel: Kernel<Self>;
    /// A graph of commands being built for one queue ([`Queue::graph`]).
    type GraphBuilder: GraphBuilder<Self>;
    /// A graph of commands built for one queue, replayed whole ([`Queue::replay`]).
    type Graph: Graph<Self>;

    /// Every device of the driver, in its order; none when the driver's library is not there,
    /// an error when it is but does not start.
    fn devices() -> Result<Vec<DeviceInfo>, Error>;

    /// The device's driver handle.
    fn native_device(handle: Self::Handle) -> Result<NativeDevice, Error>;

    /// The device whose driver handle is `device`: a program's queue's.
    fn handle_of(device: Self::RawDevice) -> Result<Self::Handle, Error>;
}

/// A device opened for use: its context, in which its programs, queues and memory are made.
pub(crate) trait Device<A: Api>: Sized + Send + Sync {
    /// The device `handle`, which `info` describes, in a context the runtime opens (on OpenCL
    /// one of its own; on CUDA the device's primary context, retained).
    fn open(handle: A::Handle, info: &DeviceInfo) -> Result<Self, Error>;

    /// The device in the context of a program's queue, rather than a context of the runtime's
    /// own.
    ///
    /// # Safety
    /// `context` is a live context that holds the device, and stays alive as long as anything
    /// made on it (an OpenCL context is retained here; a CUDA context other than the primary
    /// one is not).
    unsafe fn adopt(
        handle: A::Handle,
        info: &DeviceInfo,
        context: A::RawContext,
    ) -> Result<Self, Error>;

    /// Compiles one image's linkable form (SPIR-V, with its specialization values; PTX) into
    /// an object.
    fn compile(&self, code: &[u8], spec: &[SpecValue], flags: &str) -> Result<A::Object, Failure>;

    /// An object compiled ahead of time for this device: an OpenCL program binary, or a
    /// native NVIDIA image (a relocatable SASS object) with the specialization values written
    /// into it. An OpenCL binary takes none: only an image's SPIR-V form is specialized.
    fn load_object(&self, binary: &[u8], spec: &[SpecValue]) -> Result<A::Object, Failure>;

    /// The objects linked (with `flags`, which only OpenCL's linker takes) into a program
    /// whose kernels can be launched.
    fn link(&self, objects: &[&A::Object], flags: &str) -> Result<A::Program, Failure>;

    /// A program from a binary made for this device: SPIR bitcode or an OpenCL program binary
    /// (built with `flags`), or what CUDA's [`Program::binary`] gave (from the persistent
    /// cache).
    fn load(&self, binary: &[u8], flags: &str) -> Result<A::Program, Failure>;

    /// A queue (in order); with `profiled`, its commands' events carry device timestamps.
    fn queue(&self, profiled: bool) -> Result<A::Queue, Error>;

    /// `bytes` (at least one) of device memory, which any queue of the device may use at once.
    fn alloc(&self, bytes: usize) -> Result<A::Memory, Error>;

    /// `bytes` of host memory for fast copies to and from this device's buffers, zeroed.
    fn alloc_host(&self, bytes: usize) -> Result<A::HostMemory, Error>;

    /// A program's queue (`queue` of `device`, in `context`) on this device, made by
    /// [`Device::adopt`] of that context or opened in it; `owner`, the object the queue
    /// belongs to, is taken by a driver that keeps it (a CUDA stream keeps it until its last
    /// event goes, so that no event outlives the stream it records on) and left otherwise.
    ///
    /// # Safety
    /// The handles are live; the queue stays alive as long as the queue made of it and its
    /// events (an OpenCL queue is retained here; a CUDA stream is not, unless `owner` keeps
    /// it). A null CUDA stream is the legacy default stream.
    unsafe fn adopt_queue(
        &self,
        context: A::RawContext,
        device: A::RawDevice,
        queue: A::RawQueue,
        owner: &mut Option<Owner>,
    ) -> Result<A::Queue, Error>;

    /// A program's memory (`size` bytes from `memory` on) as device memory of this device.
    ///
    /// # Safety
    /// `memory` is live memory of this device's context; an OpenCL buffer is retained here,
    /// CUDA memory must stay allocated as long as the buffer made of it (it is never freed
    /// here).
    unsafe fn adopt_memory(&self, memory: A::RawMemory, size: usize) -> Result<A::Memory, Error>;

    /// Whether the driver's context lives as long as this value (retained, or the runtime's
    /// own): only then may the device be found again by its context's number. A program's own
    /// CUDA context may be destroyed, and its handle reused, meanwhile.
    fn holds_context(&self) -> bool;

    /// The driver's context this device's programs, queues and memory are made in, as a
    /// number that tells two contexts apart.
    fn context_key(&self) -> usize;
}

/// An in-order queue of work for the device: launches and copies, each after everything
/// enqueued before it.
pub(crate) trait Queue<A: Api>: Sized + Send + Sync {
    /// Enqueues `kernel` over `global` work-items in work-groups of `local` (the driver's
    /// choice when `None`), as OpenCL defines them, the global ids starting at `offset`, after
    /// the commands `after` stand for (events of this device); the event of its completion.
    /// Never blocks the host. A CUDA device refuses an offset other than zero.
    fn launch(
        &self,
        kernel: &A::Kernel,
        global: &[usize],
        local: Option<&[usize]>,
        offset: Option<&[usize]>,
        after: &[&A::Event],
    ) -> Result<A::Event, Error>;

    /// Submits what was enqueued to the device without waiting for it (nothing to do where
    /// the driver submits work as it is given).
    fn flush(&self) -> Result<(), Error>;

    /// Copies `out.len()` bytes of `mem` from `offset` into `out` after everything enqueued
    /// before, and returns when they are there: the driver's own blocking read, where it has
    /// one better than an asynchronous read waited for (CUDA: a large read into pageable
    /// memory goes through reused page-locked staging, the copy out of one chunk overlapping
    /// the next chunk's transfer). `None` where it has none (OpenCL), and the caller makes
    /// the read asynchronous and waits for it. The range lies within `mem` (callers check).
    fn read_blocking(
        &self,
        mem: &A::Memory,
        offset: usize,
        out: &mut [u8],
    ) -> Option<Result<(), Error>>;

    /// Copies `size` bytes (at least one) of `mem` from `offset` to `out` after everything
    /// enqueued before; returns at once, with the event of the copy's completion. The range
    /// lies within `mem` (callers check).
    ///
    /// # Safety
    /// `out` points to `size` bytes of host memory that stay allocated, and that nothing else
    /// reads or writes, until the event completed.
    unsafe fn read_async(
        &self,
        mem: &A::Memory,
        offset: usize,
        out: *mut u8,
        size: usize,
    ) -> Result<A::Event, Error>;

    /// Copies `size` bytes (at least one) from `data` into `mem` at `offset` after everything
    /// enqueued before; returns at once, with the event of the copy's completion. The range
    /// lies within `mem` (callers check).
    ///
    /// # Safety
    /// `data` points to `size` bytes of host memory that stay allocated, and that nothing
    /// writes, until the event completed.
    unsafe fn write_async(
        &self,
        mem: &A::Memory,
        offset: usize,
        data: *const u8,
        size: usize,
    ) -> Result<A::Event, Error>;

    /// Makes the commands enqueued from now on wait for those `after` stands for (events of
    /// this device), with no host wait.
    fn wait_for(&self, after: &[&A::Event]) -> Result<(), Error>;

    /// An event that completes when everything enqueued before it has: what another queue
    /// waits for to come after this one's work.
    fn marker(&self) -> Result<A::Event, Error>;

    /// `size` bytes (at least one) of `mem` from its start in host memory, after everything
    /// enqueued before; returns when they are there: the buffer's own memory where the device
    /// shares the host's (OpenCL maps it), a copy where it does not (CUDA). With `write` the
    /// host may change them, and [`Queue::unmap`] makes the changes the buffer's.
    fn map(&self, mem: &A::Memory, size: usize, write: bool) -> Result<A::Mapping, Error>;

    /// Ends a [`Queue::map`] of `mem` on this queue; returns when the buffer holds what the
    /// host wrote.
    fn unmap(&self, mem: &A::Memory, mapping: A::Mapping) -> Result<(), Error>;

    /// Copies `size` bytes (at least one) from `src` at its offset to `dst` at its offset on
    /// the device, after everything enqueued before and the commands `after` stand for
    /// (events the queue takes: `backend::Queue::takes`). Both ranges lie within their
    /// buffers, and do not overlap within one buffer (callers check). `dst` is memory of the
    /// queue's context; on CUDA `src` may be another GPU's (a peer copy), on OpenCL it is of
    /// the queue's context too.
    fn copy(
        &self,
        src: (&A::Memory, usize),
        dst: (&A::Memory, usize),
        size: usize,
        after: &[&A::Event],
    ) -> Result<A::Event, Error>;

    /// The driver's own fill: repeats `pattern` over `size` bytes (at least one) of `mem` from
    /// `offset` (both multiples of the pattern's size, within `mem`) on the device, after
    /// everything enqueued before. `None` for a pattern the driver does not take (OpenCL takes
    /// 1, 2, 4, … 128 bytes; CUDA one that repeats 1, 2 or 4 bytes), which the caller fills
    /// otherwise.
    fn fill(
        &self,
        mem: &A::Memory,
        pattern: &[u8],
        offset: usize,
        size: usize,
    ) -> Result<Option<A::Event>, Error>;

    /// Blocks until everything enqueued completed; the error of a command that failed.
    fn finish(&self) -> Result<(), Error>;

    /// The queue's driver handles.
    fn native(&self) -> Result<NativeQueue, Error>;

    /// A builder of a graph that this queue replays: the driver's own form of recorded work
    /// (a CUDA graph, an OpenCL command buffer), or `Ok(Err(why))` where the driver has none
    /// for this queue (the runtime then replays the commands one by one itself; `why` goes
    /// into the trace).
    fn graph(&self) -> Result<Result<A::GraphBuilder, String>, Error>;

    /// Enqueues every command of `graph` (built by this queue's [`Queue::graph`]) after the
    /// commands `after` stand for and everything enqueued before; the event of the whole
    /// graph's completion. Never blocks the host; a graph enqueued again while it runs runs
    /// again after it.
    fn replay(&self, graph: &A::Graph, after: &[&A::Event]) -> Result<A::Event, Error>;
}

/// A graph of commands being built: each added with the indices (in the order of adding,
/// from 0) of the earlier commands it must come after; commands that do not depend on each
/// other may run at once.
pub(crate) trait GraphBuilder<A: Api>: Sized + Send {
    /// Adds a launch of `kernel` with its arguments as now set (the driver keeps their values:
    /// the kernel may be set again for the next command) over `global` in work-groups of
    /// `local` from `offset`, as [`Queue::launch`] takes them.
    fn kernel(
        &mut self,
        kernel: &A::Kernel,
        global: &[usize],
        local: Option<&[usize]>,
        offset: Option<&[usize]>,
        after: &[usize],
    ) -> Result<(), Error>;

    /// Adds a copy of `size` bytes of `src` from its offset to `dst` at its offset, as
    /// [`Queue::copy`] takes them.
    fn copy(
        &mut self,
        src: (&A::Memory, usize),
        dst: (&A::Memory, usize),
        size: usize,
        after: &[usize],
    ) -> Result<(), Error>;

    /// Adds a fill of `size` bytes of `mem` from `offset` with `pattern`, as [`Queue::fill`]
    /// takes them; `Ok(false)`, adding nothing, for a pattern the driver does not fill.
    fn fill(
        &mut self,
        mem: &A::Memory,
        pattern: &[u8],
        offset: usize,
        size: usize,
        after: &[usize],
    ) -> Result<bool, Error>;

    /// The graph, ready to replay (CUDA's instantiation, OpenCL's finalization).
    fn finish(self) -> Result<A::Graph, Error>;
}

/// A graph of commands built for one queue.
pub(crate) trait Graph<A: Api>: Send + Sync {
    /// Gives the kernel command numbered `node` the arguments `kernel` (the same kernel
    /// function) has now, for the replays from now on: `Ok(false)` where the driver cannot
    /// change a built graph (the runtime then builds it again).
    fn update_kernel(&mut self, node: usize, kernel: &A::Kernel) -> Result<bool, Error>;
}

/// Device memory.
pub(crate) trait Memory<A: Api>: Sized + Send + Sync + 'static {
    /// `size` bytes of this memory from `offset` as memory of their own, for a kernel
    /// argument: an OpenCL sub-buffer (which keeps its buffer alive), or on CUDA the address
    /// plus the offset, which keeps `whole`, this memory's owner, alive. The range lies within
    /// the memory (callers check).
    fn view(&self, offset: usize, size: usize, whole: Whole) -> Result<Self, Error>;

    /// Whether the driver frees the memory by itself once no queued command uses it
    /// (OpenCL): then its last uses need not be given to [`Memory::free_after`].
    fn frees_itself(&self) -> bool;

    /// Frees the memory, when its last owner drops it, only after the commands `uses` stand
    /// for (on any queue of the device), without the host waiting for them. OpenCL does so by
    /// itself (a memory object goes once no queued command uses it), and gives the uses up
    /// (they may be markers of the runtime's, which go once they completed); CUDA's
    /// `cuMemFree` would stall the whole device, so the CUDA memory keeps the events and frees
    /// in order with them. Memory dropped without it is freed after everything the device was
    /// given; a view's or a program's memory is never freed here.
    fn free_after(&self, uses: Vec<A::Event>);

    /// The memory's driver handle.
    fn native(&self) -> NativeBuffer;
}

/// Host memory the runtime reads and writes through a pointer: owned memory for fast copies
/// ([`Device::alloc_host`]: page-locked on CUDA; on OpenCL a buffer made with
/// `CL_MEM_ALLOC_HOST_PTR`, mapped for its whole life; zeroed when made, freed on drop, the
/// owner first waiting for every copy that uses it), or a buffer's map ([`Queue::map`]).
pub(crate) trait HostMemory: Send + Sync {
    /// Where the memory starts: as many bytes as were asked for.
    fn as_ptr(&self) -> *mut u8;
}

/// The completion of one enqueued command (a kernel, a copy), as its driver reports it.
pub(crate) trait Event: Sized + Clone + Send + Sync {
    /// Blocks until the command completed; its error if it failed (its own, or a command's it
    /// waited for; on CUDA a fault of a command before it on the stream, or of another stream
    /// of the context).
    fn wait(&self) -> Result<(), Error>;

    /// Whether the command completed (a failed command is complete; [`Event::wait`] says how).
    fn is_complete(&self) -> Result<bool, Error>;

    /// The command's device timestamps in nanoseconds (queued, submitted, started, ended);
    /// `None` when its queue was made without profiling.
    fn profile(&self) -> Result<Option<[u64; 4]>, Error>;

    /// Calls `done` on a thread of the driver's once the command completed (at once when it
    /// already has), or once a device error ended it (then [`Event::wait`] returns the
    /// error). `done` must neither block nor call the driver, nor drop the last handle of
    /// anything that does (an event, a queue, a buffer).
    fn on_complete(&self, done: Callback) -> Result<(), Error>;

    /// An event that completes when everything the event's queue was given until now did (a
    /// superset of this one): an OpenCL marker on its queue (this event itself for a user
    /// event, which has none), or on CUDA the stream's latest command's, recorded when first
    /// asked about. Give it up with [`Event::release_when_complete`].
    fn later(&self) -> Result<Self, Error>;

    /// Gives up an event that may be a runtime's marker once its command completed, not
    /// before. PoCL 3.1 aborts the process ("PTHREAD ERROR in pocl_update_event_failed()")
    /// when a failure reaches a barrier or marker the program released while it was pending,
    /// so the runtime's own barriers and markers are released by their completion callback.
    /// Where the driver never calls back (PoCL, for a command that ended abnormally) the
    /// reference stays: one event kept, not a process aborted. A CUDA event just goes.
    fn release_when_complete(self);

    /// Submits the event's queue to the device (OpenCL's `clFlush`; the CUDA driver submits
    /// at once), so that its command will complete: before the event is waited for by another
    /// queue, awaited, or waited for by the host. A user event has no queue: nothing to do.
    fn flush(&self) -> Result<(), Error>;

    /// The event's driver handle (on CUDA, for a launch, recorded now if it was not yet).
    fn native(&self) -> Result<NativeEvent, Error>;
}

/// One image compiled for the device, ready to link.
pub(crate) trait Object: Send + Sync {
    /// The object as its driver stores it, for [`Device::load_object`] to take back: an
    /// OpenCL program binary. A CUDA object has none apart from its image (what CUDA stores is
    /// a linked program's, [`Program::binary`]).
    fn binary(&self) -> Result<Vec<u8>, Error>;
}

/// A linked program whose kernels can be launched.
pub(crate) trait Program<A: Api>: Send + Sync {
    /// What the persistent cache keeps of the program, for [`Device::load`] to take back: its
    /// binary for the device.
    fn binary(&self) -> Result<Vec<u8>, Error>;

    /// The kernel `name` of the program, with no argument set.
    fn kernel(&self, name: &str) -> Result<A::Kernel, Error>;
}

/// A kernel of a program, with its arguments as last set (both drivers keep them between
/// launches). A kernel is used by one thread at a time.
pub(crate) trait Kernel<A: Api>: Send {
    /// The kernel's work-group limits on `device` (the device its program was built for):
    /// the largest work-group it can be launched with, and the multiple of work-items its
    /// work-groups run best at (OpenCL's `CL_KERNEL_WORK_GROUP_SIZE` and
    /// `CL_KERNEL_PREFERRED_WORK_GROUP_SIZE_MULTIPLE`; CUDA's `MAX_THREADS_PER_BLOCK` of the
    /// function, which its registers may make smaller than the device's, and the warp size).
    fn work_group_sizes(&self, device: &A::Device) -> Result<(usize, usize), Error>;

    /// A buffer argument: `mem`.
    fn set_mem(&mut self, index: u32, mem: &A::Memory) -> Result<(), Error>;

    /// A pointer argument to another library's memory, by its driver handle.
    fn set_native(&mut self, index: u32, mem: A::RawMemory) -> Result<(), Error>;

    /// A `local` pointer argument: `size` bytes of local memory per work-group.
    fn set_local(&mut self, index: u32, size: usize) -> Result<(), Error>;

    /// A value argument, as its bytes.
    fn set_bytes(&mut self, index: u32, bytes: &[u8]) -> Result<(), Error>;
}
