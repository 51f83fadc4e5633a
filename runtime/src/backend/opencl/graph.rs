//! Recorded work as OpenCL replays it: a command buffer (`cl_khr_command_buffer`), recorded
//! command by command for one queue, finalized once and enqueued whole at each replay.
//!
//! What a queue needs for one: its device lists the extension with its version
//! (`CL_DEVICE_EXTENSIONS_WITH_VERSION`, which decides the functions' signatures), its
//! platform gives every function used here (through `clGetExtensionFunctionAddressForPlatform`,
//! looked up once per platform: the ICD loader exports none of them, so `cl3`'s wrappers fail),
//! and the queue is in order, with the properties the device asks of command-buffer queues
//! (`CL_DEVICE_COMMAND_BUFFER_REQUIRED_QUEUE_PROPERTIES_KHR`; from 0.9.6, only those
//! `…_SUPPORTED_QUEUE_PROPERTIES_KHR` allows). Otherwise [`Queue::graph_builder`] says which of
//! these the device lacks, and the runtime replays the commands one by one.
//!
//! The extension changed its functions at 0.9.5: copy, fill and barrier take a properties
//! list after the queue. They are called in the form of the device's version: PoCL 3.1
//! implements 0.9.0 and Intel's CPU runtime (2026.22) 1.0.0, which has the lists (measured:
//! each device records and runs copies in its form).
//!
//! A kernel command keeps the arguments the kernel has when it is added: the extension says
//! so since a clarification of 2022, but PoCL 3.1 reads them when a replay runs (measured: a
//! replay ran every node of a kernel with the arguments set last). So before 0.9.5 a graph
//! records a clone of the kernel (`clCloneKernel` copies the arguments), which nothing sets
//! again; from 0.9.5 the kernel itself. The extension retains neither the kernels nor the
//! buffers its commands name, so a graph retains each, and its queue, and frees them with its
//! command buffers when it drops, or, while a replay runs, when the last replay completes.
//!
//! Replays of one graph follow each other on one queue without waiting. Before 0.9.8 of the
//! extension a command buffer has a pending state, from its enqueue to its completion, and one
//! made without `CL_COMMAND_BUFFER_SIMULTANEOUS_USE_KHR` is refused while pending (measured on
//! PoCL: the second of two back-to-back `clEnqueueCommandBufferKHR` fails with
//! `CL_INVALID_OPERATION`; waiting for the first replay's event in the second's wait list is no
//! help, as the driver checks at enqueue). Intel's keeps a running buffer executable and takes
//! it again without the flag. So a graph is made with the flag where the device reports the
//! capability (`CL_COMMAND_BUFFER_CAPABILITY_SIMULTANEOUS_USE_KHR`: both devices here do);
//! from 0.9.8, which removed the pending state, replays on one in-order queue are never
//! simultaneous use and need no flag; otherwise a graph records two identical command buffers
//! and replays them in turn, and where both are pending it waits for the older: the host
//! blocks only then, and stays two replays ahead of the device.
//!
//! Neither CPU driver makes a replay cheaper than launching the same kernels one by one
//! (1,000 launches of a 64-item kernel, each after the last, best of 50 on a busy 2-core
//! host): Intel's replays them in 3.7 ms where the launches and a wait take 2.3–3.0 ms, PoCL's
//! in 1.6 ms where they take 1.2–1.5 ms. Recording the 1,000 commands (arguments set for each)
//! takes 1.0–1.3 ms on Intel, where launching them takes 2.1 ms, and 3.2–3.4 ms on PoCL, where
//! launching them takes 0.5–0.8 ms (the clones add 0.1–0.3 ms of it).
//!
//! In-place updates of a recorded kernel's arguments would go through
//! `cl_khr_command_buffer_mutable_dispatch` (Intel's CPU runtime has it, PoCL 3.1 has not);
//! a graph here does not change (see [`api::Graph::update_kernel`]).

use std::ffi::{c_void, CStr};
use std::ptr;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use cl3::ext::{
    cl_command_buffer_khr, cl_command_properties_khr, cl_mutable_command_khr, cl_name_version,
    cl_sync_point_khr, CL_COMMAND_BUFFER_CAPABILITY_SIMULTANEOUS_USE_KHR,
    CL_COMMAND_BUFFER_FLAGS_KHR, CL_COMMAND_BUFFER_SIMULTANEOUS_USE_KHR,
    CL_COMMAND_BUFFER_STATE_KHR, CL_DEVICE_COMMAND_BUFFER_CAPABILITIES_KHR,
    CL_DEVICE_COMMAND_BUFFER_REQUIRED_QUEUE_PROPERTIES_KHR,
    CL_DEVICE_COMMAND_BUFFER_SUPPORTED_QUEUE_PROPERTIES_KHR, CL_DEVICE_EXTENSIONS_WITH_VERSION,
};
use cl3::types::{cl_command_queue, cl_event, cl_int, cl_kernel, cl_mem, cl_platform_id, cl_uint};

use super::device::device_words;
use super::memory::MemObject;
use super::{
    cl_err, error_name, extension_function, info_ptr, Event, Function, Kernel, Memory, OpenCl,
    PerPlatform, Queue,
};
use crate::backend::api::{self, Event as _};
use crate::Error;

/// A recorded command's queue: none, the command buffer's own (the base extension takes no
/// other).
const NO_QUEUE: cl_command_queue = ptr::null_mut();
/// A recorded command's properties: none.
const NO_PROPERTIES: *const cl_command_properties_khr = ptr::null();
/// A recorded command's handle for changing it later: not asked for.
const NO_HANDLE: *mut cl_mutable_command_khr = ptr::null_mut();

/// `CL_COMMAND_BUFFER_STATE_EXECUTABLE_KHR`: finalized, and (before 0.9.8) not pending.
const EXECUTABLE: cl_uint = 1;

/// A `cl_version` (`major.minor.patch`).
const fn cl_version(major: u32, minor: u32, patch: u32) -> u32 {
    (major << 22) | (minor << 12) | patch
}

type CreateFn = <cl3::ext::clCreateCommandBufferKHR_fn as Function>::Fn;
type OnBufferFn = <cl3::ext::clReleaseCommandBufferKHR_fn as Function>::Fn;
type EnqueueFn = <cl3::ext::clEnqueueCommandBufferKHR_fn as Function>::Fn;
type GetInfoFn = <cl3::ext::clGetCommandBufferInfoKHR_fn as Function>::Fn;
/// The same in every version (its properties list was there from the start).
type NdRangeFn = <cl3::ext::clCommandNDRangeKernelKHR_fn as Function>::Fn;
/// `clCommandCopyBufferKHR` from 0.9.5, with a properties list after the queue (as are fill
/// and barrier).
type CopyFn = <cl3::ext::clCommandCopyBufferKHR_fn as Function>::Fn;
type FillFn = <cl3::ext::clCommandFillBufferKHR_fn as Function>::Fn;
type BarrierFn = <cl3::ext::clCommandBarrierWithWaitListKHR_fn as Function>::Fn;

/// `clCommandCopyBufferKHR` before 0.9.5, without the properties list (as are fill and
/// barrier).
type CopyBefore095Fn = unsafe extern "C" fn(
    cl_command_buffer_khr,
    cl_command_queue,
    cl_mem,
    cl_mem,
    usize,
    usize,
    usize,
    cl_uint,
    *const cl_sync_point_khr,
    *mut cl_sync_point_khr,
    *mut cl_mutable_command_khr,
) -> cl_int;

type FillBefore095Fn = unsafe extern "C" fn(
    cl_command_buffer_khr,
    cl_command_queue,
    cl_mem,
    *const c_void,
    usize,
    usize,
    usize,
    cl_uint,
    *const cl_sync_point_khr,
    *mut cl_sync_point_khr,
    *mut cl_mutable_command_khr,
) -> cl_int;

type BarrierBefore095Fn = unsafe extern "C" fn(
    cl_command_buffer_khr,
    cl_command_queue,
    cl_uint,
    *const cl_sync_point_khr,
    *mut cl_sync_point_khr,
    *mut cl_mutable_command_khr,
) -> cl_int;

/// The extension's entry points of one platform. Copy, fill and barrier are kept in their
/// 0.9.5 form and cast to the earlier one for a device of an earlier version.
struct Entries {
    create: CreateFn,
    finalize: OnBufferFn,
    release: OnBufferFn,
    enqueue: EnqueueFn,
    get_info: GetInfoFn,
    nd_range: NdRangeFn,
    copy: CopyFn,
    fill: FillFn,
    barrier: BarrierFn,
}

/// The entry points of `platform`, looked up at its first graph (or why it has none).
fn entries(platform: cl_platform_id) -> Result<&'static Entries, String> {
    static LOADED: PerPlatform<Entries> = PerPlatform::new();
    LOADED.get(platform, load)
}

fn load(platform: cl_platform_id) -> Result<Entries, String> {
    let address = |name: &CStr| extension_function(platform, name);
    // SAFETY: each address is the platform's own function of that name, whose C signature
    // (cl_khr_command_buffer's, in its 0.9.5 form for copy, fill and barrier) is the type it
    // is cast to; a function pointer has the size of a data pointer on every OpenCL platform.
    unsafe {
        use std::mem::transmute as cast;
        Ok(Entries {
            create: cast::<*mut c_void, CreateFn>(address(c"clCreateCommandBufferKHR")?),
            finalize: cast::<*mut c_void, OnBufferFn>(address(c"clFinalizeCommandBufferKHR")?),
            release: cast::<*mut c_void, OnBufferFn>(address(c"clReleaseCommandBufferKHR")?),
            enqueue: cast::<*mut c_void, EnqueueFn>(address(c"clEnqueueCommandBufferKHR")?),
            get_info: cast::<*mut c_void, GetInfoFn>(address(c"clGetCommandBufferInfoKHR")?),
            nd_range: cast::<*mut c_void, NdRangeFn>(address(c"clCommandNDRangeKernelKHR")?),
            copy: cast::<*mut c_void, CopyFn>(address(c"clCommandCopyBufferKHR")?),
            fill: cast::<*mut c_void, FillFn>(address(c"clCommandFillBufferKHR")?),
            barrier: cast::<*mut c_void, BarrierFn>(address(c"clCommandBarrierWithWaitListKHR")?),
        })
    }
}

/// How replays that follow each other without waiting are made to queue up.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Reuse {
    /// One buffer made with `CL_COMMAND_BUFFER_SIMULTANEOUS_USE_KHR`.
    Simultaneous,
    /// One buffer: the extension (0.9.8 on) has no pending state.
    InOrder,
    /// Two identical buffers replayed in turn (a device of a version with a pending state and
    /// without simultaneous use).
    Pool,
}

/// What a queue's command buffers are made with.
struct Support {
    /// The device, as the trace names it.
    name: String,
    entries: &'static Entries,
    /// The extension's version (which decides the signatures of copy, fill and barrier).
    version: u32,
    reuse: Reuse,
}

/// The device's `cl_khr_command_buffer` version, or why it has none to use.
fn extension_version(device: cl3::types::cl_device_id, name: &str) -> Result<u32, String> {
    const EXTENSION: &[u8] = b"cl_khr_command_buffer";
    let listed = cl3::device::get_device_info(device, CL_DEVICE_EXTENSIONS_WITH_VERSION)
        .map(Vec::<cl_name_version>::from);
    match listed {
        Ok(listed) => listed
            .iter()
            .find(|e| e.name.split(|&c| c == 0).next() == Some(EXTENSION))
            .map(|e| e.version)
            .ok_or_else(|| format!("{name} has no cl_khr_command_buffer")),
        Err(_) => Err(format!(
            "{name} does not list its extensions' versions (CL_DEVICE_EXTENSIONS_WITH_VERSION, \
             OpenCL 3.0), which decide the signatures of cl_khr_command_buffer's functions"
        )),
    }
}

impl Queue {
    /// Whether this queue can have command buffers, and how; `Err(why)` where it cannot.
    fn command_buffers(&self) -> Result<Result<Support, String>, Error> {
        use cl3::command_queue::{
            get_command_queue_info, CL_QUEUE_DEVICE, CL_QUEUE_OUT_OF_ORDER_EXEC_MODE_ENABLE,
            CL_QUEUE_PROPERTIES,
        };
        let device: cl3::types::cl_device_id =
            info_ptr(get_command_queue_info(self.0, CL_QUEUE_DEVICE), "clGetCommandQueueInfo")?;
        let name = cl3::device::get_device_info(device, cl3::device::CL_DEVICE_NAME)
            .map(String::from)
            .map_err(cl_err("clGetDeviceInfo"))?;
        let name = format!("OpenCL device {:?}", name.trim_end_matches('\0'));
        let version = match extension_version(device, &name) {
            Ok(version) => version,
            Err(why) => return Ok(Err(why)),
        };
        let platform = info_ptr(
            cl3::device::get_device_info(device, cl3::device::CL_DEVICE_PLATFORM),
            "clGetDeviceInfo",
        )?;
        let entries = match entries(platform) {
            Ok(entries) => entries,
            Err(why) => return Ok(Err(format!("{name} has cl_khr_command_buffer, but {why}"))),
        };
        let properties = get_command_queue_info(self.0, CL_QUEUE_PROPERTIES)
            .map(u64::from)
            .map_err(cl_err("clGetCommandQueueInfo"))?;
        let required = device_words(device, CL_DEVICE_COMMAND_BUFFER_REQUIRED_QUEUE_PROPERTIES_KHR);
        let required = required.first().copied().unwrap_or(0);
        // From 0.9.6; a device of an earlier version fails the query, and allows any.
        let supported =
            device_words(device, CL_DEVICE_COMMAND_BUFFER_SUPPORTED_QUEUE_PROPERTIES_KHR);
        let supported = supported.first().copied().unwrap_or(u64::MAX);
        if properties & CL_QUEUE_OUT_OF_ORDER_EXEC_MODE_ENABLE != 0 {
            return Ok(Err(format!(
                "the queue of {name} is out of order, and graphs are recorded for in-order queues"
            )));
        }
        if properties & required != required || properties & !supported != 0 {
            return Ok(Err(format!(
                "{name} runs command buffers on queues with properties {required:#x} (and at \
                 most {supported:#x}), and this queue has {properties:#x}"
            )));
        }
        let capabilities = device_words(device, CL_DEVICE_COMMAND_BUFFER_CAPABILITIES_KHR);
        let simultaneous = capabilities.first().copied().unwrap_or(0)
            & CL_COMMAND_BUFFER_CAPABILITY_SIMULTANEOUS_USE_KHR
            != 0;
        let reuse = match (simultaneous, version >= cl_version(0, 9, 8)) {
            (true, _) => Reuse::Simultaneous,
            (false, true) => Reuse::InOrder,
            (false, false) => Reuse::Pool,
        };
        Ok(Ok(Support { name, entries, version, reuse }))
    }

    /// [`api::Queue::graph`]: a command buffer for this queue, or why the queue has none.
    /// While a device allocation of the queue's context lives, none: a command buffer cannot
    /// name one.
    pub(super) fn graph_builder(&self) -> Result<Result<GraphBuilder, String>, Error> {
        use cl3::command_queue::{get_command_queue_info, CL_QUEUE_CONTEXT};
        let context =
            info_ptr(get_command_queue_info(self.0, CL_QUEUE_CONTEXT), "clGetCommandQueueInfo")?;
        if super::usm::live_in(context) {
            return Ok(Err("a device allocation (Queue::malloc_device) lives in the queue's \
                 context, and cl_khr_command_buffer cannot name one"
                .into()));
        }
        match self.command_buffers()? {
            Ok(support) => GraphBuilder::new(self, support),
            Err(why) => Ok(Err(why)),
        }
    }

    /// [`api::Queue::replay`]: the graph's command buffer enqueued on this queue, the one it
    /// was recorded for.
    pub(super) fn replay_graph(&self, graph: &Graph, after: &[&Event]) -> Result<Event, Error> {
        if graph.held.queue.0 != self.0 {
            return Err(Error::InvalidArgument(
                "a graph replays on the OpenCL queue it was recorded for only".into(),
            ));
        }
        let waits: Vec<cl_event> = after.iter().map(|e| e.0).collect();
        let mut replays = graph.replays.lock().unwrap_or_else(PoisonError::into_inner);
        let copy = graph.executable(&mut replays)?;
        let mut event = ptr::null_mut();
        // SAFETY: a finalized command buffer of this queue's (the queue list is left to the
        // buffer's own); `waits` holds `waits.len()` live events (their owners hold them
        // until this returns); `event` is an out-pointer to a local.
        let code = unsafe {
            (graph.entries.enqueue)(
                0,
                ptr::null_mut(),
                graph.held.buffers[copy].0,
                waits.len() as cl_uint,
                if waits.is_empty() { ptr::null() } else { waits.as_ptr() },
                &mut event,
            )
        };
        check(code, "clEnqueueCommandBufferKHR")?;
        let event = Event(event);
        replays.last[copy] = Some(event.clone());
        replays.latest = copy;
        Ok(event)
    }
}

/// `Ok` for `CL_SUCCESS`, else the error of `call`.
fn check(code: cl_int, call: &'static str) -> Result<(), Error> {
    match code {
        cl3::error_codes::CL_SUCCESS => Ok(()),
        code => Err(cl_err(call)(code)),
    }
}

/// A command buffer, released when it drops (the driver keeps it while it runs).
struct CommandBuffer(cl_command_buffer_khr, OnBufferFn);

impl Drop for CommandBuffer {
    fn drop(&mut self) {
        // SAFETY: a command buffer we created, released once, here.
        unsafe {
            (self.1)(self.0);
        }
    }
}

handle!(HeldKernel, cl_kernel, cl3::kernel::release_kernel);

/// What a graph holds for its driver objects: its command buffers, and the kernels, buffers
/// and queue they use (retained, as the extension does not).
struct Held {
    buffers: Vec<CommandBuffer>,
    kernels: Vec<HeldKernel>,
    memories: Vec<MemObject>,
    queue: Queue,
}

// SAFETY: command buffers are thread-safe OpenCL objects (their calls here are serialized by
// the graph's lock besides); a held kernel is never used, only released.
unsafe impl Send for Held {}
// SAFETY: as above.
unsafe impl Sync for Held {}

/// A command buffer being recorded for one queue (or two identical ones, [`Reuse::Pool`]).
pub(crate) struct GraphBuilder {
    entries: &'static Entries,
    /// Whether copy, fill and barrier take a properties list (0.9.5 on).
    properties: bool,
    /// Whether a kernel command records a clone of the kernel, for a driver that reads the
    /// arguments at each replay (before 0.9.5).
    clones_kernels: bool,
    held: Held,
    /// Each buffer's sync points, by command.
    points: Vec<Vec<cl_sync_point_khr>>,
}

impl GraphBuilder {
    /// Empty command buffers for `queue`: with the simultaneous-use flag where `support` says
    /// so, two where it makes a pool; `Ok(Err(why))` where the driver refuses to make one.
    fn new(queue: &Queue, support: Support) -> Result<Result<GraphBuilder, String>, Error> {
        let flags = [CL_COMMAND_BUFFER_FLAGS_KHR, CL_COMMAND_BUFFER_SIMULTANEOUS_USE_KHR, 0];
        let properties = match support.reuse {
            Reuse::Simultaneous => flags.as_ptr(),
            Reuse::InOrder | Reuse::Pool => ptr::null(),
        };
        let copies = if support.reuse == Reuse::Pool { 2 } else { 1 };
        let mut buffers = Vec::with_capacity(copies);
        for _ in 0..copies {
            let mut code = 0;
            // SAFETY: one live queue; the property list is zero-terminated (or absent);
            // `code` is an out-pointer to a local.
            let raw = unsafe { (support.entries.create)(1, &queue.0, properties, &mut code) };
            if code != cl3::error_codes::CL_SUCCESS || raw.is_null() {
                return Ok(Err(format!(
                    "{}: clCreateCommandBufferKHR refused the queue with {}",
                    support.name,
                    error_name(code)
                )));
            }
            buffers.push(CommandBuffer(raw, support.entries.release));
        }
        // SAFETY: a live queue, retained for the graph (released when its copy drops).
        unsafe { cl3::command_queue::retain_command_queue(queue.0) }
            .map_err(cl_err("clRetainCommandQueue"))?;
        Ok(Ok(GraphBuilder {
            entries: support.entries,
            properties: support.version >= cl_version(0, 9, 5),
            clones_kernels: support.version < cl_version(0, 9, 5),
            points: vec![Vec::new(); copies],
            held: Held {
                buffers,
                kernels: Vec::new(),
                memories: Vec::new(),
                queue: Queue(queue.0),
            },
        }))
    }

    /// Records one command into each buffer: `command` is called with the buffer, the number
    /// and list of the sync points of the commands `after` names, and where to put the new
    /// command's sync point.
    fn record(
        &mut self,
        call: &'static str,
        after: &[usize],
        command: impl Fn(
            cl_command_buffer_khr,
            cl_uint,
            *const cl_sync_point_khr,
            *mut cl_sync_point_khr,
        ) -> cl_int,
    ) -> Result<(), Error> {
        for (buffer, points) in self.held.buffers.iter().zip(&mut self.points) {
            let waits = after
                .iter()
                .map(|&i| {
                    points.get(i).copied().ok_or_else(|| {
                        Error::InvalidArgument(format!(
                            "a graph's command {} follows command {i}, which is not recorded yet",
                            points.len()
                        ))
                    })
                })
                .collect::<Result<Vec<_>, _>>()?;
            let list = if waits.is_empty() { ptr::null() } else { waits.as_ptr() };
            let mut point = 0;
            check(command(buffer.0, waits.len() as cl_uint, list, &mut point), call)?;
            points.push(point);
        }
        Ok(())
    }

    /// A command that does nothing after the commands `after` names (drivers refuse empty
    /// copies and fills).
    fn barrier(&mut self, after: &[usize]) -> Result<(), Error> {
        let (entries, properties) = (self.entries, self.properties);
        self.record("clCommandBarrierWithWaitListKHR", after, |buffer, n, waits, point| {
            // SAFETY: a command buffer being recorded; `waits` holds `n` sync points of its
            // earlier commands; `point` is an out-pointer. The entry point is called in the
            // form of the device's version of the extension.
            unsafe {
                if properties {
                    (entries.barrier)(buffer, NO_QUEUE, NO_PROPERTIES, n, waits, point, NO_HANDLE)
                } else {
                    let barrier =
                        std::mem::transmute::<BarrierFn, BarrierBefore095Fn>(entries.barrier);
                    barrier(buffer, NO_QUEUE, n, waits, point, NO_HANDLE)
                }
            }
        })
    }

    /// `mem`, retained for as long as the graph lives.
    fn hold(&mut self, mem: cl_mem) -> Result<(), Error> {
        // SAFETY: a live buffer, retained once for the graph (released when its copy drops).
        unsafe { cl3::memory::retain_mem_object(mem) }.map_err(cl_err("clRetainMemObject"))?;
        self.held.memories.push(MemObject(mem));
        Ok(())
    }
}

impl api::GraphBuilder<OpenCl> for GraphBuilder {
    fn kernel(
        &mut self,
        kernel: &Kernel,
        global: &[usize],
        local: Option<&[usize]>,
        offset: Option<&[usize]>,
        after: &[usize],
    ) -> Result<(), Error> {
        let local = local.map_or(ptr::null(), <[usize]>::as_ptr);
        let offset = offset.map_or(ptr::null(), <[usize]>::as_ptr);
        // A clone has the kernel's arguments as set now, and nothing sets them again.
        let recorded = if self.clones_kernels {
            cl3::kernel::clone_kernel(kernel.0).map_err(cl_err("clCloneKernel"))?
        } else {
            // SAFETY: a live kernel, retained once for the graph (released when held drops).
            unsafe { cl3::kernel::retain_kernel(kernel.0) }.map_err(cl_err("clRetainKernel"))?;
            kernel.0
        };
        let recorded = HeldKernel(recorded);
        let nd_range = self.entries.nd_range;
        self.record("clCommandNDRangeKernelKHR", after, |buffer, n, waits, point| {
            let (dims, global) = (global.len() as cl_uint, global.as_ptr());
            // SAFETY: a command buffer being recorded; `global` (and `local` and `offset`,
            // when given) hold `global.len()` sizes; every argument of the kernel was set by
            // the caller; `waits` holds `n` sync points of the buffer's earlier commands;
            // `point` is an out-pointer.
            unsafe {
                nd_range(
                    buffer,
                    NO_QUEUE,
                    NO_PROPERTIES,
                    recorded.0,
                    dims,
                    offset,
                    global,
                    local,
                    n,
                    waits,
                    point,
                    NO_HANDLE,
                )
            }
        })?;
        self.held.kernels.push(recorded);
        Ok(())
    }

    fn copy(
        &mut self,
        (src, src_offset): (&Memory, usize),
        (dst, dst_offset): (&Memory, usize),
        size: usize,
        after: &[usize],
    ) -> Result<(), Error> {
        if size == 0 {
            return self.barrier(after);
        }
        let (src, dst) = (src.object("a command buffer")?, dst.object("a command buffer")?);
        let (entries, properties) = (self.entries, self.properties);
        self.record("clCommandCopyBufferKHR", after, |buffer, n, waits, point| {
            let (from, to) = ((src, src_offset), (dst, dst_offset));
            // SAFETY: a command buffer being recorded; two live buffers of its context whose
            // ranges the caller checked; `waits` holds `n` sync points of the buffer's earlier
            // commands; `point` is an out-pointer. The entry point is called in the form of
            // the device's version of the extension.
            unsafe {
                if properties {
                    let copy = entries.copy;
                    let props = NO_PROPERTIES;
                    copy(
                        buffer, NO_QUEUE, props, from.0, to.0, from.1, to.1, size, n, waits, point,
                        NO_HANDLE,
                    )
                } else {
                    let copy = std::mem::transmute::<CopyFn, CopyBefore095Fn>(entries.copy);
                    copy(
                        buffer, NO_QUEUE, from.0, to.0, from.1, to.1, size, n, waits, point,
                        NO_HANDLE,
                    )
                }
            }
        })?;
        self.hold(src)?;
        self.hold(dst)
    }

    /// Patterns of 1, 2, 4, … 128 bytes, as the queue's own fill.
    fn fill(
        &mut self,
        mem: &Memory,
        pattern: &[u8],
        offset: usize,
        size: usize,
        after: &[usize],
    ) -> Result<bool, Error> {
        if !super::queue::fills(pattern) {
            return Ok(false);
        }
        if size == 0 {
            return self.barrier(after).map(|()| true);
        }
        let mem = mem.object("a command buffer")?;
        let (entries, properties) = (self.entries, self.properties);
        self.record("clCommandFillBufferKHR", after, |buffer, n, waits, point| {
            let (value, len) = (pattern.as_ptr().cast::<c_void>(), pattern.len());
            // SAFETY: a command buffer being recorded; a live buffer of its context whose
            // range the caller checked; the driver copies the pattern before returning;
            // `waits` holds `n` sync points of the buffer's earlier commands; `point` is an
            // out-pointer. The entry point is called in the form of the device's version of
            // the extension.
            unsafe {
                if properties {
                    let fill = entries.fill;
                    let props = NO_PROPERTIES;
                    fill(
                        buffer, NO_QUEUE, props, mem, value, len, offset, size, n, waits, point,
                        NO_HANDLE,
                    )
                } else {
                    let fill = std::mem::transmute::<FillFn, FillBefore095Fn>(entries.fill);
                    fill(
                        buffer, NO_QUEUE, mem, value, len, offset, size, n, waits, point, NO_HANDLE,
                    )
                }
            }
        })?;
        self.hold(mem)?;
        Ok(true)
    }

    fn finish(self) -> Result<Graph, Error> {
        for buffer in &self.held.buffers {
            // SAFETY: a command buffer being recorded, finalized once.
            check(unsafe { (self.entries.finalize)(buffer.0) }, "clFinalizeCommandBufferKHR")?;
        }
        let copies = self.held.buffers.len();
        Ok(Graph {
            entries: self.entries,
            held: Arc::new(self.held),
            replays: Mutex::new(Replays { last: vec![None; copies], latest: 0 }),
        })
    }
}

/// Each command buffer's last replay.
struct Replays {
    /// By buffer.
    last: Vec<Option<Event>>,
    /// The buffer replayed last.
    latest: usize,
}

/// A finalized command buffer of one queue (or two, replayed in turn: [`Reuse::Pool`]).
pub(crate) struct Graph {
    entries: &'static Entries,
    held: Arc<Held>,
    replays: Mutex<Replays>,
}

impl Graph {
    /// The buffer to enqueue now: the only one; of a pool, the next in turn that is not
    /// pending, or, where both are, the older once its replay completed and the driver made it
    /// executable again (which PoCL does in a callback of the replay's event, after waiters
    /// wake).
    fn executable(&self, replays: &mut Replays) -> Result<usize, Error> {
        let copies = self.held.buffers.len();
        if copies == 1 {
            return Ok(0);
        }
        let order = (1..=copies).map(|k| (replays.latest + k) % copies);
        for copy in order {
            if self.state(copy)? == EXECUTABLE {
                return Ok(copy);
            }
        }
        let oldest = (replays.latest + 1) % copies;
        if let Some(event) = &replays.last[oldest] {
            event.wait()?;
        }
        let since = Instant::now();
        while self.state(oldest)? != EXECUTABLE {
            if since.elapsed() > Duration::from_secs(10) {
                return Err(Error::Driver {
                    call: "clEnqueueCommandBufferKHR",
                    code: crate::DriverCode::OpenCl(cl3::error_codes::CL_INVALID_OPERATION),
                    error: "the command buffer stayed pending 10 s after its replay completed"
                        .into(),
                });
            }
            std::thread::yield_now();
        }
        Ok(oldest)
    }

    /// `CL_COMMAND_BUFFER_STATE_KHR` of buffer `copy`.
    fn state(&self, copy: usize) -> Result<cl_uint, Error> {
        let mut state: cl_uint = 0;
        // SAFETY: a live command buffer; `state` is a `cl_uint` out-value of that size.
        let code = unsafe {
            (self.entries.get_info)(
                self.held.buffers[copy].0,
                CL_COMMAND_BUFFER_STATE_KHR,
                size_of::<cl_uint>(),
                (&mut state as *mut cl_uint).cast(),
                ptr::null_mut(),
            )
        };
        check(code, "clGetCommandBufferInfoKHR").map(|()| state)
    }
}

impl api::Graph<OpenCl> for Graph {
    /// Never: a recorded command changes with `cl_khr_command_buffer_mutable_dispatch`
    /// (`clUpdateMutableCommandsKHR` on a buffer made with `CL_COMMAND_BUFFER_MUTABLE_KHR`),
    /// where in-place updates would go; the runtime records the graph again instead.
    fn update_kernel(&mut self, _node: usize, _kernel: &Kernel) -> Result<bool, Error> {
        Ok(false)
    }
}

impl Drop for Graph {
    /// The driver objects go now, or, while the last replay runs (which completes after every
    /// earlier one: they share an in-order queue), when it completes.
    fn drop(&mut self) {
        let replays = self.replays.get_mut().unwrap_or_else(PoisonError::into_inner);
        let Some(last) = replays.last[replays.latest].take() else {
            return;
        };
        if !last.is_complete().unwrap_or(true) {
            let held = self.held.clone();
            // Refused, the callback drops at once: the driver keeps the running buffer, and
            // the spec has it keep the kernels and buffers its queued commands use.
            let _ = last.on_complete(Box::new(move || drop(held)));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::{Graph, GraphBuilder, Memory, Queue, Reuse};
    use crate::backend::api::DeviceHandle;
    use crate::backend::api::{
        Device as _, Event as _, GraphBuilder as _, Kernel as _, Queue as _,
    };
    use crate::backend::caps::CL_DEVICE_TYPE_CPU;
    use crate::backend::opencl::{Device, Kernel, Program};

    const SOURCE: &str = "kernel void add(global int* a, int v) { a[get_global_id(0)] += v; }
        kernel void scale(global int* a, int m) { a[get_global_id(0)] *= m; }";
    const N: usize = 64;

    /// Runs `test` on Intel's and PoCL's CPU devices, each skipped (with the reason printed)
    /// where this machine has none.
    fn on_each(test: impl Fn(&Device)) {
        let devices = super::super::device::devices().unwrap();
        for word in ["intel", "pocl"] {
            let found = devices.iter().find(|d| {
                let platform = format!("{} {}", d.platform, d.vendor).to_lowercase();
                platform.contains(word) && d.device_type & CL_DEVICE_TYPE_CPU != 0
            });
            match found.map(|d| (d.handle, d)) {
                Some((DeviceHandle::OpenCl(id), info)) => test(&Device::open(id, info).unwrap()),
                _ => println!("skipped on {word}: this machine has no such CPU device"),
            }
        }
    }

    /// A queue of `device`, and the test program built for it.
    fn setup(device: &Device) -> (Queue, Program) {
        let program = device.build_source(SOURCE, "").map_err(|f| f.error).unwrap();
        (device.queue(false).unwrap(), program)
    }

    /// A buffer of `N` ints, all `value`.
    fn buffer(device: &Device, queue: &Queue, value: i32) -> Memory {
        let mem = device.alloc(N * 4).unwrap();
        queue.fill(&mem, &value.to_ne_bytes(), 0, N * 4).unwrap().unwrap().wait().unwrap();
        mem
    }

    /// The `N` ints of `mem`.
    fn read(queue: &Queue, mem: &Memory) -> Vec<i32> {
        let mut out = vec![0i32; N];
        // SAFETY: `out` holds N ints, untouched until the read completed (waited for here).
        let event = unsafe { queue.read_async(mem, 0, out.as_mut_ptr().cast(), N * 4) }.unwrap();
        event.wait().unwrap();
        out
    }

    /// Sets `kernel`'s buffer and int arguments.
    fn set(kernel: &mut Kernel, mem: &Memory, value: i32) {
        kernel.set_mem(0, mem).unwrap();
        kernel.set_bytes(1, &value.to_ne_bytes()).unwrap();
    }

    /// A builder for `queue` as the device has it, or with its way of reusing buffers
    /// replaced by `reuse`.
    fn builder(queue: &Queue, reuse: Option<Reuse>) -> GraphBuilder {
        let mut support = queue.command_buffers().unwrap().unwrap();
        support.reuse = reuse.unwrap_or(support.reuse);
        GraphBuilder::new(queue, support).unwrap().unwrap()
    }

    /// Kernels, copies and fills with dependencies, on two branches, replayed three times back
    /// to back: every buffer holds exactly the values of three runs in order.
    fn replays_in_order(device: &Device, reuse: Option<Reuse>) {
        let (queue, program) = setup(device);
        let (a, b, count) =
            (buffer(device, &queue, 0), buffer(device, &queue, 0), buffer(device, &queue, 0));
        let mut add = Kernel::new(&program, "add").unwrap();
        let mut scale = Kernel::new(&program, "scale").unwrap();
        let mut graph = builder(&queue, reuse);
        assert!(graph.fill(&a, &1i32.to_ne_bytes(), 0, N * 4, &[]).unwrap()); // 0: a = 1
        set(&mut add, &a, 2);
        graph.kernel(&add, &[N], None, None, &[0]).unwrap(); // 1: a = 3
        set(&mut scale, &a, 3);
        graph.kernel(&scale, &[N], Some(&[8]), None, &[1]).unwrap(); // 2: a = 9
        set(&mut add, &a, 5);
        graph.kernel(&add, &[N / 2], None, Some(&[N / 2]), &[2]).unwrap(); // 3: upper a = 14
        graph.copy((&a, 0), (&b, 0), N * 4, &[3]).unwrap(); // 4: b = a
        set(&mut add, &b, 7);
        graph.kernel(&add, &[N], None, None, &[4]).unwrap(); // 5: b = 16, 21
        set(&mut add, &count, 1);
        graph.kernel(&add, &[N], None, None, &[]).unwrap(); // 6: count += 1
        graph.copy((&a, 0), (&b, 0), 0, &[5, 6]).unwrap(); // 7: nothing, after both branches
        set(&mut add, &count, 10);
        graph.kernel(&add, &[N], None, None, &[7]).unwrap(); // 8: count += 10
        assert!(!graph.fill(&a, &[0; 3], 0, N * 4, &[]).unwrap(), "3-byte patterns are not filled");
        let graph: Graph = graph.finish().unwrap();
        let events: Vec<_> = (0..3).map(|_| queue.replay_graph(&graph, &[]).unwrap()).collect();
        events.last().unwrap().wait().unwrap();
        let halves = |low: i32, high: i32| -> Vec<i32> {
            (0..N).map(|i| if i < N / 2 { low } else { high }).collect()
        };
        assert_eq!(read(&queue, &a), halves(9, 14));
        assert_eq!(read(&queue, &b), halves(16, 21));
        assert_eq!(read(&queue, &count), vec![33; N]);
    }

    #[test]
    fn graph_replays_back_to_back() {
        on_each(|device| replays_in_order(device, None));
    }

    /// Two identical buffers replayed in turn, as a device with a pending state and without
    /// simultaneous use has them (PoCL refuses a pending buffer made without the flag, so
    /// there the pool's waits are exercised).
    #[test]
    fn graph_pool_replays_back_to_back() {
        on_each(|device| replays_in_order(device, Some(Reuse::Pool)));
    }

    /// A kernel command keeps the arguments set when it was added, whatever is set after.
    #[test]
    fn graph_takes_kernel_arguments_when_added() {
        on_each(|device| {
            let (queue, program) = setup(device);
            let (a, b) = (buffer(device, &queue, 0), buffer(device, &queue, 0));
            let mut add = Kernel::new(&program, "add").unwrap();
            let mut graph = builder(&queue, None);
            set(&mut add, &a, 1);
            graph.kernel(&add, &[N], None, None, &[]).unwrap();
            set(&mut add, &b, 1000);
            graph.kernel(&add, &[N], None, None, &[0]).unwrap();
            set(&mut add, &a, 5);
            let graph = graph.finish().unwrap();
            queue.replay_graph(&graph, &[]).unwrap();
            queue.replay_graph(&graph, &[]).unwrap().wait().unwrap();
            assert_eq!(read(&queue, &a), vec![2; N]);
            assert_eq!(read(&queue, &b), vec![2000; N]);
        });
    }

    /// A graph of no command replays as a command that does nothing.
    #[test]
    fn graph_without_commands_replays() {
        on_each(|device| {
            let queue = device.queue(false).unwrap();
            let graph = builder(&queue, None).finish().unwrap();
            queue.replay_graph(&graph, &[]).unwrap().wait().unwrap();
        });
    }

    /// A graph dropped while its replays run, with its kernel and program gone too: the
    /// replays complete with every command.
    #[test]
    fn graph_drops_while_replaying() {
        on_each(|device| {
            let (queue, program) = setup(device);
            let a = buffer(device, &queue, 0);
            let mut add = Kernel::new(&program, "add").unwrap();
            let mut graph = builder(&queue, Some(Reuse::Pool));
            set(&mut add, &a, 1);
            for i in 0..200usize {
                let previous = [i.saturating_sub(1)];
                graph.kernel(&add, &[N], None, None, &previous[..usize::from(i > 0)]).unwrap();
            }
            let graph = graph.finish().unwrap();
            let last = (0..3).map(|_| queue.replay_graph(&graph, &[]).unwrap()).last().unwrap();
            drop((graph, add, program));
            last.wait().unwrap();
            queue.finish().unwrap();
            assert_eq!(read(&queue, &a), vec![600; N]);
        });
    }
}
