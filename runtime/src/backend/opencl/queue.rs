//! An OpenCL in-order command queue: launches, copies, fills, maps, markers and barriers, each
//! returning the event of its command (those of device allocations are `usm.rs`'s).

use std::ptr;

use cl3::types::{cl_command_queue, cl_context, cl_event, CL_BLOCKING, CL_NON_BLOCKING};

use super::{
    cl_err, info_ptr, usm, Context, Event, Graph, GraphBuilder, Kernel, Mapping, Memory, OpenCl,
};
use crate::backend::api::{self, DeviceId, Event as _};
use crate::backend::native::NativeQueue;
use crate::Error;

handle!(Queue, cl_command_queue, cl3::command_queue::release_command_queue);

// SAFETY: OpenCL command queues are thread-safe (OpenCL 2.x, appendix A.2).
unsafe impl Send for Queue {}
// SAFETY: as above.
unsafe impl Sync for Queue {}

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

    /// The context the queue belongs to.
    pub(crate) fn context(&self) -> Result<cl_context, Error> {
        use cl3::command_queue::{get_command_queue_info, CL_QUEUE_CONTEXT};
        info_ptr(get_command_queue_info(self.0, CL_QUEUE_CONTEXT), "clGetCommandQueueInfo")
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
        match api::Queue::native(&adopted)? {
            NativeQueue::OpenCl { context: c, device: d, .. } if c == context && d == device.0 => Ok(adopted),
            _ => Err(Error::InvalidArgument(
                "Queue::from_native: the command queue is not of the context and device given with it".into(),
            )),
        }
    }
}

impl api::Queue<OpenCl> for Queue {
    fn launch(
        &self,
        kernel: &Kernel,
        global: &[usize],
        local: Option<&[usize]>,
        offset: Option<&[usize]>,
        after: &[&Event],
    ) -> Result<Event, Error> {
        kernel.before_launch()?;
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

    fn flush(&self) -> Result<(), Error> {
        cl3::command_queue::flush(self.0).map_err(cl_err("clFlush"))
    }

    /// None: the caller's asynchronous read, waited for, is OpenCL's blocking read.
    fn read_blocking(
        &self,
        _mem: &Memory,
        _offset: usize,
        _out: &mut [u8],
    ) -> Option<Result<(), Error>> {
        None
    }

    unsafe fn read_async(
        &self,
        mem: &Memory,
        offset: usize,
        out: *mut u8,
        size: usize,
    ) -> Result<Event, Error> {
        let mem = match mem {
            Memory::Object(m) => m.0,
            // SAFETY: as the caller promised.
            Memory::Usm(m) => return unsafe { m.read(self, offset, out, size) },
        };
        // SAFETY: a non-blocking read of `size` bytes into `out`, which the caller keeps alive
        // and untouched until the event completes; the caller checked that `offset + size`
        // lies within the buffer.
        unsafe {
            cl3::command_queue::enqueue_read_buffer(
                self.0,
                mem,
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

    unsafe fn write_async(
        &self,
        mem: &Memory,
        offset: usize,
        data: *const u8,
        size: usize,
    ) -> Result<Event, Error> {
        let mem = match mem {
            Memory::Object(m) => m.0,
            // SAFETY: as the caller promised.
            Memory::Usm(m) => return unsafe { m.write(self, offset, data, size) },
        };
        // SAFETY: a non-blocking write of `size` bytes from `data`, which the caller keeps
        // alive and unchanged until the event completes; the caller checked the range.
        unsafe {
            cl3::command_queue::enqueue_write_buffer(
                self.0,
                mem,
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

    /// A barrier with the events as its wait list.
    fn wait_for(&self, after: &[&Event]) -> Result<(), Error> {
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

    fn marker(&self) -> Result<Event, Error> {
        // SAFETY: a live queue and an empty wait list.
        unsafe { cl3::command_queue::enqueue_marker_with_wait_list(self.0, 0, ptr::null()) }
            .map(Event)
            .map_err(cl_err("clEnqueueMarkerWithWaitList"))
    }

    /// A blocking map of the buffer's own memory: for reading, or with `write` for reading and
    /// writing. A device allocation's is a copy in host memory.
    fn map(&self, mem: &Memory, size: usize, write: bool) -> Result<Mapping, Error> {
        let mem = match mem {
            Memory::Object(m) => m.0,
            Memory::Usm(m) => return m.map(self, size, write),
        };
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
                mem,
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
        Ok(Mapping { at, copy: None })
    }

    fn unmap(&self, mem: &Memory, mapping: Mapping) -> Result<(), Error> {
        let mem = match mem {
            Memory::Object(m) => m.0,
            Memory::Usm(m) => return m.unmap(self, mapping),
        };
        // SAFETY: a pointer this queue's map of `mem` returned, unmapped once (the mapping is
        // consumed); nothing reads or writes it after (its guard is gone).
        let event = unsafe {
            cl3::command_queue::enqueue_unmap_mem_object(self.0, mem, mapping.at, 0, ptr::null())
        }
        .map_err(cl_err("clEnqueueUnmapMemObject"))?;
        Event(event).wait()
    }

    fn copy(
        &self,
        (src, src_offset): (&Memory, usize),
        (dst, dst_offset): (&Memory, usize),
        size: usize,
        after: &[&Event],
    ) -> Result<Event, Error> {
        let waits: Vec<cl_event> = after.iter().map(|e| e.0).collect();
        let (Memory::Object(src_mem), Memory::Object(dst_mem)) = (src, dst) else {
            return usm::copy(self, (src, src_offset), (dst, dst_offset), size, &waits);
        };
        // SAFETY: two live buffers of this queue's context; the caller checked both ranges
        // (and that they do not overlap within one buffer); `waits` holds `waits.len()` live
        // events (their owners hold them until this returns).
        unsafe {
            cl3::command_queue::enqueue_copy_buffer(
                self.0,
                src_mem.0,
                dst_mem.0,
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

    /// OpenCL fills with patterns of 1, 2, 4, … 128 bytes (a device allocation's, at
    /// addresses aligned to the pattern's size).
    fn fill(
        &self,
        mem: &Memory,
        pattern: &[u8],
        offset: usize,
        size: usize,
    ) -> Result<Option<Event>, Error> {
        let mem = match mem {
            Memory::Object(m) => m.0,
            Memory::Usm(m) => return m.fill(self, pattern, offset, size),
        };
        if !fills(pattern) {
            return Ok(None);
        }
        // SAFETY: the driver copies `pattern` before returning; the caller checked the range
        // and the pattern's size.
        unsafe {
            cl3::command_queue::enqueue_fill_buffer(
                self.0,
                mem,
                pattern.as_ptr().cast(),
                pattern.len(),
                offset,
                size,
                0,
                ptr::null(),
            )
        }
        .map(|event| Some(Event(event)))
        .map_err(cl_err("clEnqueueFillBuffer"))
    }

    fn finish(&self) -> Result<(), Error> {
        cl3::command_queue::finish(self.0).map_err(cl_err("clFinish"))
    }

    /// The queue's handles, with its context and device as the driver reports them.
    fn native(&self) -> Result<NativeQueue, Error> {
        use cl3::command_queue::{get_command_queue_info, CL_QUEUE_CONTEXT, CL_QUEUE_DEVICE};
        let context =
            info_ptr(get_command_queue_info(self.0, CL_QUEUE_CONTEXT), "clGetCommandQueueInfo")?;
        let device =
            info_ptr(get_command_queue_info(self.0, CL_QUEUE_DEVICE), "clGetCommandQueueInfo")?;
        Ok(NativeQueue::OpenCl { context, device, queue: self.0 })
    }

    fn graph(&self) -> Result<Result<GraphBuilder, String>, Error> {
        self.graph_builder()
    }

    fn replay(&self, graph: &Graph, after: &[&Event]) -> Result<Event, Error> {
        self.replay_graph(graph, after)
    }
}

/// Whether OpenCL fills with `pattern` (`clEnqueueFillBuffer`, and a command buffer's fill):
/// a pattern of 1, 2, 4, … 128 bytes.
pub(super) fn fills(pattern: &[u8]) -> bool {
    pattern.len().is_power_of_two() && pattern.len() <= 128
}
