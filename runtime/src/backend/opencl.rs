//! The OpenCL backend: owned handles over `cl3`'s raw API (each wrapper releases its object on
//! drop; every call that can fail returns the OpenCL error with the name of the call), the
//! devices of every platform with their capabilities, and [`Device`]'s compile, link and build.
//!
//! One of the six modules with `unsafe` code (with `cuda`, `discovery::loaded`,
//! `build::disk`, `launch::queue` and `launch::host`): the handles are created here and never
//! leave as raw pointers; a mapped region's pointer (host memory, a map) leaves, for
//! `launch::host` to make a slice of while its owner keeps it mapped.

use std::collections::BTreeSet;
use std::ffi::{c_void, CString};
use std::ptr;

use cl3::types::{
    cl_command_queue, cl_context, cl_device_id, cl_event, cl_int, cl_kernel, cl_mem, cl_program,
    CL_BLOCKING, CL_NON_BLOCKING,
};
use sycl_format::aspects::{aspect_number, target_aspect};
use sycl_format::Target;

use super::caps::{CL_DEVICE_TYPE_ACCELERATOR, CL_DEVICE_TYPE_CPU, CL_DEVICE_TYPE_GPU};
use super::native::{NativeBuffer, NativeDevice, NativeEvent, NativeQueue};
use super::{Backend, Capabilities, DeviceHandle, DeviceInfo, Failure, Limits, SpecValue};
use crate::{DriverCode, Error};

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

/// A device id. Device ids of root devices are not reference counted.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub(crate) struct DeviceId(pub cl_device_id);
// SAFETY: an OpenCL device id is an opaque handle that the API allows from any thread.
unsafe impl Send for DeviceId {}
// SAFETY: as above.
unsafe impl Sync for DeviceId {}

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
    /// `CL_DEVICE_GLOBAL_MEM_SIZE`, `CL_DEVICE_LOCAL_MEM_SIZE`, `CL_DEVICE_MAX_COMPUTE_UNITS`.
    pub limits: Limits,
}

/// `CL_DEVICE_SUB_GROUP_SIZES_INTEL` (cl_intel_required_subgroup_size).
const CL_DEVICE_SUB_GROUP_SIZES_INTEL: u32 = 0x4108;

fn device_words(id: cl_device_id, param: u32) -> Vec<u64> {
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

handle!(Context, cl_context, cl3::context::release_context);
handle!(Queue, cl_command_queue, cl3::command_queue::release_command_queue);
handle!(Program, cl_program, cl3::program::release_program);
handle!(Kernel, cl_kernel, cl3::kernel::release_kernel);
handle!(Mem, cl_mem, cl3::memory::release_mem_object);

// SAFETY: OpenCL contexts, queues, programs and memory objects are thread-safe (OpenCL 2.x,
// appendix A.2); kernels are not Sync (setting arguments races), so they are only Send.
unsafe impl Send for Context {}
// SAFETY: as above.
unsafe impl Sync for Context {}
// SAFETY: as above.
unsafe impl Send for Queue {}
// SAFETY: as above.
unsafe impl Sync for Queue {}
// SAFETY: as above.
unsafe impl Send for Program {}
// SAFETY: as above.
unsafe impl Sync for Program {}
// SAFETY: as above.
unsafe impl Send for Mem {}
// SAFETY: as above.
unsafe impl Sync for Mem {}
// SAFETY: a kernel may move between threads; it is used by one at a time.
unsafe impl Send for Kernel {}

/// An event: the completion of one enqueued command. Cloning retains it, dropping releases
/// it.
pub(crate) struct Event(cl_event);
// SAFETY: OpenCL event objects may be used and released from any thread.
unsafe impl Send for Event {}
// SAFETY: as above; the calls on an event are thread-safe.
unsafe impl Sync for Event {}

impl Clone for Event {
    fn clone(&self) -> Event {
        // SAFETY: a live event, retained once for the new owner.
        unsafe {
            let _ = cl3::event::retain_event(self.0);
        }
        Event(self.0)
    }
}

impl Drop for Event {
    fn drop(&mut self) {
        // SAFETY: each owner releases its reference once.
        unsafe {
            let _ = cl3::event::release_event(self.0);
        }
    }
}

/// What `Event::on_complete` hands the driver: the closure to call, boxed twice so that the
/// driver's `void *` holds a thin pointer.
type Callback = Box<dyn FnOnce() + Send>;

extern "C" fn completed(_event: cl_event, _status: cl_int, data: *mut std::ffi::c_void) {
    // SAFETY: `data` is the `Box<Callback>` leaked by `on_complete`, which the driver calls
    // back exactly once.
    let done = unsafe { Box::from_raw(data.cast::<Callback>()) };
    done();
}

impl Event {
    /// Blocks until the command completed; its error if it failed.
    pub(crate) fn wait(&self) -> Result<(), Error> {
        cl3::event::wait_for_events(&[self.0]).map_err(cl_err("clWaitForEvents"))?;
        self.status().map(drop)
    }

    /// Whether the command completed (successfully or not).
    pub(crate) fn is_complete(&self) -> Result<bool, Error> {
        self.status()
    }

    /// Whether the command completed: `CL_COMPLETE`, or a negative status (its error).
    fn status(&self) -> Result<bool, Error> {
        let status =
            cl3::event::get_event_info(self.0, cl3::event::CL_EVENT_COMMAND_EXECUTION_STATUS)
                .map_err(cl_err("clGetEventInfo"))?;
        match status {
            cl3::info_type::InfoType::Int(s) if s < 0 => Err(Error::Driver {
                call: "the enqueued command",
                code: DriverCode::OpenClStatus(s),
                error: format!(
                    "execution status {} (it, or a command it waited for, ended abnormally)",
                    error_name(s)
                ),
            }),
            cl3::info_type::InfoType::Int(s) => Ok(s == cl3::event::CL_COMPLETE),
            _ => Ok(false),
        }
    }

    /// The command's device timestamps (queued, submitted, started, ended), in nanoseconds;
    /// `None` when its queue was made without profiling.
    pub(crate) fn profile(&self) -> Result<Option<[u64; 4]>, Error> {
        let mut times = [0u64; 4];
        let names = [
            cl3::event::CL_PROFILING_COMMAND_QUEUED,
            cl3::event::CL_PROFILING_COMMAND_SUBMIT,
            cl3::event::CL_PROFILING_COMMAND_START,
            cl3::event::CL_PROFILING_COMMAND_END,
        ];
        for (time, name) in times.iter_mut().zip(names) {
            match cl3::event::get_event_profiling_info(self.0, name) {
                Ok(cl3::info_type::InfoType::Ulong(t)) => *time = t,
                Ok(_) => return Ok(None),
                Err(cl3::error_codes::CL_PROFILING_INFO_NOT_AVAILABLE) => return Ok(None),
                Err(code) => return Err(cl_err("clGetEventProfilingInfo")(code)),
            }
        }
        Ok(Some(times))
    }

    /// A marker on the event's command queue: it completes when everything the queue was
    /// given until now did. A user event, which has no queue, is its own.
    pub(crate) fn later(&self) -> Result<Event, Error> {
        let queue = self.queue()?;
        if queue.is_null() {
            return Ok(self.clone());
        }
        // SAFETY: the queue of a live event (which keeps it alive), and an empty wait list.
        unsafe { cl3::command_queue::enqueue_marker_with_wait_list(queue, 0, ptr::null()) }
            .map(Event)
            .map_err(cl_err("clEnqueueMarkerWithWaitList"))
    }

    /// Submits the event's command queue to the device (`clFlush`); nothing for a user
    /// event, which has none.
    pub(crate) fn flush(&self) -> Result<(), Error> {
        let queue = self.queue()?;
        if queue.is_null() {
            return Ok(());
        }
        cl3::command_queue::flush(queue).map_err(cl_err("clFlush"))
    }

    /// The command queue of the event's command (null for a user event), which the event
    /// keeps alive.
    fn queue(&self) -> Result<cl_command_queue, Error> {
        info_ptr(
            cl3::event::get_event_info(self.0, cl3::event::CL_EVENT_COMMAND_QUEUE),
            "clGetEventInfo",
        )
    }

    /// Gives up this reference once the command completed, not before. PoCL 3.1 aborts the
    /// process ("PTHREAD ERROR in pocl_update_event_failed()") when a failure reaches a
    /// barrier or marker the program released while it was pending, so the runtime's own
    /// barriers and markers are released by their completion callback. Where the driver never
    /// calls back (PoCL, for a command that ended abnormally) the reference stays: one event
    /// kept, not a process aborted.
    pub(crate) fn release_when_complete(self) {
        let kept = self.clone();
        // Refused, the callback is dropped at once, and the reference it holds with it.
        let _ = self.on_complete(Box::new(move || drop(kept)));
    }

    /// Calls `done` on a driver thread once the command completed (at once when it already
    /// has).
    pub(crate) fn on_complete(&self, done: Callback) -> Result<(), Error> {
        let data = Box::into_raw(Box::new(done));
        cl3::event::set_event_callback(self.0, cl3::event::CL_COMPLETE, completed, data.cast())
            .map_err(|code| {
                // SAFETY: the driver refused the callback, so it never takes `data`.
                drop(unsafe { Box::from_raw(data) });
                cl_err("clSetEventCallback")(code)
            })
    }
}

impl Context {
    pub(crate) fn new(device: DeviceId) -> Result<Context, Error> {
        cl3::context::create_context(&[device.0], ptr::null(), None, ptr::null_mut())
            .map(Context)
            .map_err(cl_err("clCreateContext"))
    }
}

impl Queue {
    /// An in-order queue; with `profiled`, its commands' events carry device timestamps.
    pub(crate) fn new(context: &Context, device: DeviceId, profiled: bool) -> Result<Queue, Error> {
        let properties = [
            cl3::command_queue::CL_QUEUE_PROPERTIES as cl3::types::cl_queue_properties,
            cl3::command_queue::CL_QUEUE_PROFILING_ENABLE,
            0,
        ];
        // SAFETY: the device belongs to the context (both made from `device`); the property
        // list is zero-terminated (or absent).
        unsafe {
            cl3::command_queue::create_command_queue_with_properties(
                context.0,
                device.0,
                if profiled { properties.as_ptr() } else { ptr::null() },
            )
        }
        .map(Queue)
        .map_err(cl_err("clCreateCommandQueueWithProperties"))
    }

    /// Enqueues `kernel` after the commands `after` stand for (events of this queue's
    /// context); the event of its completion.
    pub(crate) fn enqueue(
        &self,
        kernel: &Kernel,
        global: &[usize],
        local: Option<&[usize]>,
        offset: Option<&[usize]>,
        after: &[&Event],
    ) -> Result<Event, Error> {
        let local_ptr = local.map_or(ptr::null(), <[usize]>::as_ptr);
        let offset_ptr = offset.map_or(ptr::null(), <[usize]>::as_ptr);
        // A short wait list on the stack: a launch allocates nothing.
        let mut waits = [ptr::null_mut(); 8];
        let heap: Vec<cl_event>;
        let waits: &[cl_event] = if after.len() <= waits.len() {
            for (slot, event) in waits.iter_mut().zip(after) {
                *slot = event.0;
            }
            &waits[..after.len()]
        } else {
            heap = after.iter().map(|e| e.0).collect();
            &heap
        };
        // SAFETY: `global` (and `local` and `offset`, when given) hold `global.len()` sizes; every argument
        // of the kernel was set by the caller before enqueueing; `waits` holds `waits.len()`
        // live events (their owners hold them until this returns).
        let event = unsafe {
            cl3::command_queue::enqueue_nd_range_kernel(
                self.0,
                kernel.0,
                global.len() as u32,
                offset_ptr,
                global.as_ptr(),
                local_ptr,
                waits.len() as u32,
                if waits.is_empty() { ptr::null() } else { waits.as_ptr() },
            )
        }
        .map_err(cl_err("clEnqueueNDRangeKernel"))?;
        Ok(Event(event))
    }

    /// Submits what was enqueued to the device without waiting for it.
    pub(crate) fn flush(&self) -> Result<(), Error> {
        cl3::command_queue::flush(self.0).map_err(cl_err("clFlush"))
    }

    /// Copies `out.len()` bytes of `mem` from `offset` into `out`, after everything enqueued
    /// before; returns at once, with the event of the copy's completion.
    ///
    /// # Safety
    /// `out` points to `size` bytes of host memory that stay allocated, and that nothing else
    /// reads or writes, until the event completed.
    pub(crate) unsafe fn read_async(
        &self,
        mem: &Mem,
        offset: usize,
        out: *mut u8,
        size: usize,
    ) -> Result<Event, Error> {
        // SAFETY: a non-blocking read of `size` bytes into `out`, which the caller keeps alive
        // and untouched until the event completes; the caller checked that `offset + size`
        // lies within the buffer.
        unsafe {
            cl3::command_queue::enqueue_read_buffer(
                self.0,
                mem.0,
                CL_NON_BLOCKING,
                offset,
                size,
                out.cast(),
                0,
                ptr::null(),
            )
        }
        .map(Event)
        .map_err(cl_err("clEnqueueReadBuffer"))
    }

    /// Copies `size` bytes from `data` into `mem` at `offset`, after everything enqueued
    /// before; returns at once, with the event of the copy's completion.
    ///
    /// # Safety
    /// `data` points to `size` bytes of host memory that stay allocated, and that nothing
    /// writes, until the event completed.
    pub(crate) unsafe fn write_async(
        &self,
        mem: &Mem,
        offset: usize,
        data: *const u8,
        size: usize,
    ) -> Result<Event, Error> {
        // SAFETY: a non-blocking write of `size` bytes from `data`, which the caller keeps
        // alive and unchanged until the event completes; the caller checked the range.
        unsafe {
            cl3::command_queue::enqueue_write_buffer(
                self.0,
                mem.0,
                CL_NON_BLOCKING,
                offset,
                size,
                data.cast(),
                0,
                ptr::null(),
            )
        }
        .map(Event)
        .map_err(cl_err("clEnqueueWriteBuffer"))
    }

    /// An event that completes when everything enqueued before it has.
    pub(crate) fn marker(&self) -> Result<Event, Error> {
        // SAFETY: a live queue and an empty wait list.
        unsafe { cl3::command_queue::enqueue_marker_with_wait_list(self.0, 0, ptr::null()) }
            .map(Event)
            .map_err(cl_err("clEnqueueMarkerWithWaitList"))
    }

    /// Makes the commands enqueued from now on wait for those `after` stands for (events of
    /// this queue's context): a barrier with them as its wait list.
    pub(crate) fn wait_for(&self, after: &[&Event]) -> Result<(), Error> {
        let waits: Vec<cl_event> = after.iter().map(|e| e.0).collect();
        // SAFETY: a live queue; `waits` holds `waits.len()` live events (their owners hold
        // them until this returns). The barrier's own event is released once it completed.
        unsafe {
            cl3::command_queue::enqueue_barrier_with_wait_list(
                self.0,
                waits.len() as u32,
                if waits.is_empty() { ptr::null() } else { waits.as_ptr() },
            )
        }
        .map(|barrier| Event(barrier).release_when_complete())
        .map_err(cl_err("clEnqueueBarrierWithWaitList"))
    }

    /// Copies `size` bytes from `src` at `src_offset` to `dst` at `dst_offset` on the device,
    /// after everything enqueued before and the commands `after` stand for (events of this
    /// queue's context). `src` and `dst` may be one buffer when the ranges do not overlap.
    pub(crate) fn copy(
        &self,
        (src, src_offset): (&Mem, usize),
        (dst, dst_offset): (&Mem, usize),
        size: usize,
        after: &[&Event],
    ) -> Result<Event, Error> {
        let waits: Vec<cl_event> = after.iter().map(|e| e.0).collect();
        // SAFETY: two live buffers of this queue's context; the caller checked both ranges
        // (and that they do not overlap within one buffer); `waits` holds `waits.len()` live
        // events (their owners hold them until this returns).
        unsafe {
            cl3::command_queue::enqueue_copy_buffer(
                self.0,
                src.0,
                dst.0,
                src_offset,
                dst_offset,
                size,
                waits.len() as u32,
                if waits.is_empty() { ptr::null() } else { waits.as_ptr() },
            )
        }
        .map(Event)
        .map_err(cl_err("clEnqueueCopyBuffer"))
    }

    /// Repeats `pattern` (of 1, 2, 4, … 128 bytes) over `size` bytes of `mem` from `offset`
    /// (both multiples of the pattern's size).
    pub(crate) fn fill(
        &self,
        mem: &Mem,
        pattern: &[u8],
        offset: usize,
        size: usize,
    ) -> Result<Event, Error> {
        // SAFETY: the driver copies `pattern` before returning; the caller checked the range
        // and the pattern's size.
        unsafe {
            cl3::command_queue::enqueue_fill_buffer(
                self.0,
                mem.0,
                pattern.as_ptr().cast(),
                pattern.len(),
                offset,
                size,
                0,
                ptr::null(),
            )
        }
        .map(Event)
        .map_err(cl_err("clEnqueueFillBuffer"))
    }

    pub(crate) fn finish(&self) -> Result<(), Error> {
        cl3::command_queue::finish(self.0).map_err(cl_err("clFinish"))
    }

    /// Maps `size` bytes of `mem` from its start into host memory, after everything enqueued
    /// before (a blocking map): for reading, or with `write` for reading and writing. The
    /// mapping lasts until [`Queue::unmap`].
    pub(crate) fn map(&self, mem: &Mem, size: usize, write: bool) -> Result<Mapping, Error> {
        let flags = match write {
            false => cl3::memory::CL_MAP_READ,
            true => cl3::memory::CL_MAP_READ | cl3::memory::CL_MAP_WRITE,
        };
        let mut at = ptr::null_mut();
        // SAFETY: a blocking map of `size` bytes from the start of a live buffer of this
        // queue's context (the caller checked the size); `at` is an out-pointer to a local.
        let event = unsafe {
            cl3::command_queue::enqueue_map_buffer(
                self.0,
                mem.0,
                CL_BLOCKING,
                flags,
                0,
                size,
                &mut at,
                0,
                ptr::null(),
            )
        }
        .map_err(cl_err("clEnqueueMapBuffer"))?;
        drop(Event(event));
        Ok(Mapping(at))
    }

    /// Unmaps what [`Queue::map`] mapped of `mem`, and waits until the device sees what the
    /// host wrote there.
    pub(crate) fn unmap(&self, mem: &Mem, mapping: Mapping) -> Result<(), Error> {
        // SAFETY: a pointer this queue's map of `mem` returned, unmapped once (the mapping is
        // consumed); nothing reads or writes it after (its guard is gone).
        let event = unsafe {
            cl3::command_queue::enqueue_unmap_mem_object(self.0, mem.0, mapping.0, 0, ptr::null())
        }
        .map_err(cl_err("clEnqueueUnmapMemObject"))?;
        Event(event).wait()
    }
}

/// A buffer's region mapped into host memory by [`Queue::map`], until [`Queue::unmap`].
pub(crate) struct Mapping(*mut c_void);

// SAFETY: the mapped region is plain host memory, usable from any thread; the pointer says
// where it is and owns nothing.
unsafe impl Send for Mapping {}
// SAFETY: as above.
unsafe impl Sync for Mapping {}

impl Mapping {
    pub(crate) fn as_ptr(&self) -> *mut u8 {
        self.0.cast()
    }
}

/// Host memory the driver allocated: a buffer made with `CL_MEM_ALLOC_HOST_PTR`, mapped for
/// reading and writing for its whole life, so that its host pointer is the driver's own
/// memory (which it copies to and from device buffers fastest). Zeroed when made; unmapped
/// and released on drop.
pub(crate) struct HostMem {
    at: *mut c_void,
    mem: Mem,
    /// The queue it was mapped on, retained: the unmap goes there.
    queue: Queue,
}

// SAFETY: the mapped region is plain host memory owned by this value alone; the buffer and
// queue handles are thread-safe (see above).
unsafe impl Send for HostMem {}
// SAFETY: as above; `&HostMem` gives out only the pointer.
unsafe impl Sync for HostMem {}

impl HostMem {
    /// `size` bytes (at least one) mapped on `queue`, a queue of `context` that nothing else
    /// uses but host memory (so the map does not wait for a program's work).
    fn new(context: &Context, queue: &Queue, size: usize) -> Result<HostMem, Error> {
        let size = size.max(1);
        // SAFETY: no host pointer is given: the driver allocates host-accessible memory.
        let mem = unsafe {
            cl3::memory::create_buffer(
                context.0,
                cl3::memory::CL_MEM_READ_WRITE | cl3::memory::CL_MEM_ALLOC_HOST_PTR,
                size,
                ptr::null_mut(),
            )
        }
        .map(Mem)
        .map_err(cl_err("clCreateBuffer"))?;
        // SAFETY: a live queue, retained once for the new owner below, which releases it once.
        unsafe { cl3::command_queue::retain_command_queue(queue.0) }
            .map_err(cl_err("clRetainCommandQueue"))?;
        let queue = Queue(queue.0);
        let Mapping(at) = queue.map(&mem, size, true)?;
        // SAFETY: the mapped region is `size` bytes of host memory, ours until the unmap.
        unsafe { ptr::write_bytes(at.cast::<u8>(), 0, size) };
        Ok(HostMem { at, mem, queue })
    }

    pub(crate) fn as_ptr(&self) -> *mut u8 {
        self.at.cast()
    }
}

impl Drop for HostMem {
    fn drop(&mut self) {
        // Mapped once in `new`, unmapped once here; whoever copied to or from the memory
        // waited for it first (`HostBuffer` waits before it drops this).
        if let Err(e) = self.queue.unmap(&self.mem, Mapping(self.at)) {
            log::warn!("unmapping host memory: {e}");
        }
    }
}

impl Mem {
    /// `size` bytes of this buffer from `offset`, as a sub-buffer (which keeps this one
    /// alive). The offset must be a multiple of the device's base address alignment.
    pub(crate) fn sub(&self, offset: usize, size: usize) -> Result<Mem, Error> {
        // OpenCL has no empty sub-buffer: an empty view is the buffer's first byte, which a
        // kernel given no values reads nothing of (every buffer holds at least one byte).
        let region = match size {
            0 => cl3::types::cl_buffer_region { origin: 0, size: 1 },
            _ => cl3::types::cl_buffer_region { origin: offset, size },
        };
        // SAFETY: a live buffer; `region` is a `cl_buffer_region` that lives for the call.
        unsafe {
            cl3::memory::create_sub_buffer(
                self.0,
                cl3::memory::CL_MEM_READ_WRITE,
                cl3::memory::CL_BUFFER_CREATE_TYPE_REGION,
                (&region as *const cl3::types::cl_buffer_region).cast(),
            )
        }
        .map(Mem)
        .map_err(|code| match code {
            cl3::error_codes::CL_MISALIGNED_SUB_BUFFER_OFFSET => Error::InvalidArgument(format!(
                "a view from byte {offset}: an OpenCL device takes views only from offsets \
                 that are multiples of its base address alignment (CL_DEVICE_MEM_BASE_ADDR_ALIGN; \
                 128 bytes on most): start the view there, or pass the offset to the kernel"
            )),
            code => cl_err("clCreateSubBuffer")(code),
        })
    }

    pub(crate) fn new(context: &Context, size: usize) -> Result<Mem, Error> {
        // SAFETY: no host pointer is used, so the flags cannot refer to foreign memory.
        unsafe {
            cl3::memory::create_buffer(
                context.0,
                cl3::memory::CL_MEM_READ_WRITE,
                size.max(1),
                ptr::null_mut(),
            )
        }
        .map(Mem)
        .map_err(cl_err("clCreateBuffer"))
    }
}

impl Program {
    pub(crate) fn from_binary(
        context: &Context,
        device: DeviceId,
        binary: &[u8],
    ) -> Result<Program, Error> {
        // SAFETY: one binary for the one device of the context; the driver validates it.
        unsafe { cl3::program::create_program_with_binary(context.0, &[device.0], &[binary]) }
            .map(Program)
            .map_err(cl_err("clCreateProgramWithBinary"))
    }

    /// Builds an executable from source, IL or binary; on failure, the build log.
    pub(crate) fn build(&self, device: DeviceId, options: &str) -> Result<(), (cl_int, String)> {
        let options = CString::new(options).unwrap_or_default();
        cl3::program::build_program(self.0, &[device.0], &options, None, ptr::null_mut())
            .map_err(|code| (code, self.build_log(device)))
    }

    /// A program from OpenCL C source (tests only: device code reaches the runtime as images).
    pub(crate) fn from_source(context: &Context, source: &str) -> Result<Program, Error> {
        cl3::program::create_program_with_source(context.0, &[source])
            .map(Program)
            .map_err(cl_err("clCreateProgramWithSource"))
    }

    pub(crate) fn from_il(context: &Context, il: &[u8]) -> Result<Program, Error> {
        cl3::program::create_program_with_il(context.0, il)
            .map(Program)
            .map_err(cl_err("clCreateProgramWithIL"))
    }

    pub(crate) fn set_spec_constant(&self, id: u32, value: &[u8]) -> Result<(), Error> {
        // SAFETY: the driver copies `value.len()` bytes and checks the size against the
        // constant's type.
        unsafe {
            cl3::program::set_program_specialization_constant(
                self.0,
                id,
                value.len(),
                value.as_ptr().cast(),
            )
        }
        .map_err(cl_err("clSetProgramSpecializationConstant"))
    }

    /// Compiles to an object; on failure, the build log.
    pub(crate) fn compile(&self, device: DeviceId, options: &str) -> Result<(), (cl_int, String)> {
        let options = CString::new(options).unwrap_or_default();
        cl3::program::compile_program(
            self.0,
            &[device.0],
            &options,
            &[],
            &[],
            None,
            ptr::null_mut(),
        )
        .map_err(|code| (code, self.build_log(device)))
    }

    /// Links compiled objects into an executable; on failure, the code and the link log.
    ///
    /// Called through the loaded library rather than `cl3::program::link_program`, which drops
    /// the program `clLinkProgram` returns with `CL_LINK_PROGRAM_FAILURE`, and with it the log.
    pub(crate) fn link(
        context: &Context,
        device: DeviceId,
        objects: &[&Program],
        options: &str,
    ) -> Result<Program, (cl_int, String)> {
        let options = CString::new(options).unwrap_or_default();
        let raw: Vec<cl_program> = objects.iter().map(|p| p.0).collect();
        let library = cl3::load_library()
            .as_ref()
            .map_err(|e| (cl3::error_codes::DLOPEN_RUNTIME_LOAD_FAILED, e.to_string()))?;
        let mut status = cl3::error_codes::CL_INVALID_VALUE;
        // The wrapper's method is not marked unsafe, but it is a raw FFI call: the device is
        // the context's device, every input program was compiled in this context, `raw`
        // holds `raw.len()` live programs, the options string is NUL-terminated, and with no
        // callback the call is synchronous.
        let linked = library.clLinkProgram(
            context.0,
            1,
            &device.0,
            options.as_ptr(),
            raw.len() as u32,
            raw.as_ptr(),
            None,
            ptr::null_mut(),
            &mut status,
        );
        let Some(linked) = linked else {
            return Err((
                cl3::error_codes::DLOPEN_FUNCTION_NOT_AVAILABLE,
                "the OpenCL library has no clLinkProgram".into(),
            ));
        };
        // A failed link may still return a program: it holds the log, and is released here.
        let program = (!linked.is_null()).then_some(Program(linked));
        match (status, program) {
            (cl3::error_codes::CL_SUCCESS, Some(program)) => Ok(program),
            (code, program) => {
                Err((code, program.map(|p| p.build_log(device)).unwrap_or_default()))
            }
        }
    }

    /// The program's binary for its one device (`CL_PROGRAM_BINARIES`).
    pub(crate) fn binary(&self) -> Result<Vec<u8>, Error> {
        match cl3::program::get_program_info(self.0, cl3::program::CL_PROGRAM_BINARIES)
            .map_err(cl_err("clGetProgramInfo"))?
        {
            cl3::info_type::InfoType::VecVecUchar(mut binaries) if !binaries.is_empty() => {
                Ok(binaries.swap_remove(0))
            }
            _ => Err(cl_err("clGetProgramInfo")(cl3::error_codes::CL_INVALID_PROGRAM)),
        }
    }

    pub(crate) fn build_log(&self, device: DeviceId) -> String {
        cl3::program::get_program_build_info(self.0, device.0, cl3::program::CL_PROGRAM_BUILD_LOG)
            .map(String::from)
            .unwrap_or_default()
            .trim_end_matches('\0')
            .trim()
            .to_string()
    }
}

impl Kernel {
    pub(crate) fn new(program: &Program, name: &str) -> Result<Kernel, Error> {
        let name = CString::new(name)
            .map_err(|_| Error::KernelNotFound { kernel: name.into(), searched: vec![] })?;
        cl3::kernel::create_kernel(program.0, &name).map(Kernel).map_err(cl_err("clCreateKernel"))
    }

    /// `CL_KERNEL_WORK_GROUP_SIZE` and `CL_KERNEL_PREFERRED_WORK_GROUP_SIZE_MULTIPLE` on
    /// `device`, the device of the kernel's program.
    pub(crate) fn work_group_sizes(&self, device: &Device) -> Result<(usize, usize), Error> {
        let size = |param| {
            let value = cl3::kernel::get_kernel_work_group_info(self.0, device.id.0, param)
                .map_err(cl_err("clGetKernelWorkGroupInfo"))?;
            match value {
                cl3::info_type::InfoType::Size(size) => Ok(size),
                _ => Err(cl_err("clGetKernelWorkGroupInfo")(cl3::error_codes::CL_INVALID_VALUE)),
            }
        };
        Ok((
            size(cl3::kernel::CL_KERNEL_WORK_GROUP_SIZE)?,
            size(cl3::kernel::CL_KERNEL_PREFERRED_WORK_GROUP_SIZE_MULTIPLE)?,
        ))
    }

    pub(crate) fn set_mem(&self, index: u32, mem: &Mem) -> Result<(), Error> {
        self.set_raw_mem(index, mem.0)
    }

    /// A buffer argument by its handle (one of this kernel's context).
    pub(crate) fn set_raw_mem(&self, index: u32, mem: cl_mem) -> Result<(), Error> {
        // SAFETY: a buffer argument is passed as a pointer to its `cl_mem` handle.
        unsafe {
            cl3::kernel::set_kernel_arg(
                self.0,
                index,
                std::mem::size_of::<cl_mem>(),
                (&mem as *const cl_mem).cast::<c_void>(),
            )
        }
        .map_err(cl_err("clSetKernelArg"))
    }

    /// A `local` pointer argument: `size` bytes of local memory per work-group.
    pub(crate) fn set_local(&self, index: u32, size: usize) -> Result<(), Error> {
        // SAFETY: a NULL value with a size asks the driver to allocate that much local memory.
        unsafe { cl3::kernel::set_kernel_arg(self.0, index, size, ptr::null()) }
            .map_err(cl_err("clSetKernelArg"))
    }

    pub(crate) fn set_bytes(&self, index: u32, bytes: &[u8]) -> Result<(), Error> {
        // SAFETY: the driver copies `bytes.len()` bytes and checks the size against the
        // parameter's type, failing with CL_INVALID_ARG_SIZE on a mismatch.
        unsafe { cl3::kernel::set_kernel_arg(self.0, index, bytes.len(), bytes.as_ptr().cast()) }
            .map_err(cl_err("clSetKernelArg"))
    }
}

/// An OpenCL device opened for use: its id and a context of its own.
pub(crate) struct Device {
    id: DeviceId,
    context: Context,
    /// The queue that maps and unmaps host memory ([`Device::alloc_host`]), made at its
    /// first use.
    host_queue: std::sync::OnceLock<Queue>,
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
    pub(crate) fn open(id: DeviceId) -> Result<Device, Error> {
        Ok(Device { id, context: Context::new(id)?, host_queue: std::sync::OnceLock::new() })
    }

    /// SPIR-V with its specialization values, compiled to an object.
    pub(crate) fn compile(
        &self,
        il: &[u8],
        spec: &[SpecValue],
        flags: &str,
    ) -> Result<Program, Failure> {
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
    pub(crate) fn load_object(&self, binary: &[u8]) -> Result<Program, Failure> {
        Program::from_binary(&self.context, self.id, binary).map_err(not_created)
    }

    pub(crate) fn link(&self, objects: &[&Program], flags: &str) -> Result<Program, Failure> {
        Program::link(&self.context, self.id, objects, flags)
            .map_err(|(code, log)| failure("clLinkProgram", code, log))
    }

    /// A program from a binary (SPIR bitcode or a program binary), built with `flags`.
    pub(crate) fn load(&self, binary: &[u8], flags: &str) -> Result<Program, Failure> {
        let program = Program::from_binary(&self.context, self.id, binary).map_err(not_created)?;
        program
            .build(self.id, flags)
            .map_err(|(code, log)| failure("clBuildProgram", code, log))?;
        Ok(program)
    }

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

    pub(crate) fn queue(&self, profiled: bool) -> Result<Queue, Error> {
        Queue::new(&self.context, self.id, profiled)
    }

    pub(crate) fn alloc(&self, bytes: usize) -> Result<Mem, Error> {
        Mem::new(&self.context, bytes)
    }

    /// Host memory for fast copies: `bytes` of the driver's own memory, zeroed. It is mapped
    /// and unmapped on a queue of its own, so that neither waits for a program's work.
    pub(crate) fn alloc_host(&self, bytes: usize) -> Result<HostMem, Error> {
        let queue = match self.host_queue.get() {
            Some(queue) => queue,
            None => {
                // Two threads may both make one: the second is dropped.
                let _ = self.host_queue.set(self.queue(false)?);
                self.host_queue.get().expect("set above")
            }
        };
        HostMem::new(&self.context, queue, bytes)
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

/// A pointer-sized answer of `clGet*Info` (a context, a device, a platform).
fn info_ptr<T>(
    answer: Result<cl3::info_type::InfoType, cl_int>,
    call: &'static str,
) -> Result<*mut T, Error> {
    answer.map(|v| isize::from(v) as *mut T).map_err(cl_err(call))
}

impl DeviceId {
    /// The device's driver handles.
    pub(crate) fn native(self) -> Result<NativeDevice, Error> {
        let platform = info_ptr(
            cl3::device::get_device_info(self.0, cl3::device::CL_DEVICE_PLATFORM),
            "clGetDeviceInfo",
        )?;
        Ok(NativeDevice::OpenCl { platform, device: self.0 })
    }
}

impl Queue {
    /// The queue's driver handles, with its context and device as the driver reports them.
    pub(crate) fn native(&self) -> Result<NativeQueue, Error> {
        use cl3::command_queue::{get_command_queue_info, CL_QUEUE_CONTEXT, CL_QUEUE_DEVICE};
        let context =
            info_ptr(get_command_queue_info(self.0, CL_QUEUE_CONTEXT), "clGetCommandQueueInfo")?;
        let device =
            info_ptr(get_command_queue_info(self.0, CL_QUEUE_DEVICE), "clGetCommandQueueInfo")?;
        Ok(NativeQueue::OpenCl { context, device, queue: self.0 })
    }

    /// A program's queue, retained (released when this value drops): the queue must be on
    /// `device` in `context`.
    ///
    /// # Safety
    /// `queue` is a live command queue.
    pub(crate) unsafe fn adopt(
        queue: cl_command_queue,
        context: cl_context,
        device: DeviceId,
    ) -> Result<Queue, Error> {
        // SAFETY: a live queue (the caller's promise). Retained before it is wrapped: a
        // failed retain must not release the caller's reference when the wrapper drops.
        unsafe { cl3::command_queue::retain_command_queue(queue) }
            .map_err(cl_err("clRetainCommandQueue"))?;
        // Released once, when `adopted` drops.
        let adopted = Queue(queue);
        match adopted.native()? {
            NativeQueue::OpenCl { context: c, device: d, .. } if c == context && d == device.0 => Ok(adopted),
            _ => Err(Error::InvalidArgument(
                "Queue::from_native: the command queue is not of the context and device given with it".into(),
            )),
        }
    }
}

impl Event {
    pub(crate) fn native(&self) -> NativeEvent {
        NativeEvent::OpenCl(self.0)
    }
}

impl Mem {
    pub(crate) fn native(&self) -> NativeBuffer {
        NativeBuffer::OpenCl(self.0)
    }

    /// A program's buffer, retained (released when this value drops), of `context` and at
    /// least `size` bytes.
    ///
    /// # Safety
    /// `mem` is a live memory object.
    pub(crate) unsafe fn adopt(
        mem: cl_mem,
        context: cl_context,
        size: usize,
    ) -> Result<Mem, Error> {
        use cl3::memory::{get_mem_object_info, CL_MEM_CONTEXT, CL_MEM_SIZE};
        // SAFETY: a live memory object (the caller's promise); released once, when the value
        // drops.
        unsafe { cl3::memory::retain_mem_object(mem) }.map_err(cl_err("clRetainMemObject"))?;
        let adopted = Mem(mem);
        let of: cl_context =
            info_ptr(get_mem_object_info(mem, CL_MEM_CONTEXT), "clGetMemObjectInfo")?;
        let bytes = get_mem_object_info(mem, CL_MEM_SIZE)
            .map(usize::from)
            .map_err(cl_err("clGetMemObjectInfo"))?;
        if of != context {
            return Err(Error::InvalidArgument(
                "Buffer::from_native: the memory object is of another context than the queue's"
                    .into(),
            ));
        }
        if bytes < size {
            return Err(Error::InvalidArgument(format!(
                "Buffer::from_native: the memory object holds {bytes} bytes; the buffer needs {size}"
            )));
        }
        Ok(adopted)
    }
}

impl Device {
    /// The device in a program's context (retained, released when this value drops), rather
    /// than a context of the runtime's own.
    ///
    /// # Safety
    /// `context` is a live context that holds `id`.
    pub(crate) unsafe fn adopt(id: DeviceId, context: cl_context) -> Result<Device, Error> {
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
        Ok(Device { id, context, host_queue: std::sync::OnceLock::new() })
    }

    /// The context everything of this device is made in.
    pub(crate) fn context(&self) -> cl_context {
        self.context.0
    }
}
