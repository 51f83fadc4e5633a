//! opencl3 0.12 (the `opencl3` feature): opencl3's context and command queue as a [`Queue`],
//! its buffers as kernel arguments and as [`Buffer`]s, and our queue, buffers and events as
//! opencl3's objects. Every conversion takes an OpenCL reference of its own; who owns what, and
//! how work is ordered on the two libraries' queues, is the public [`interop`](crate::interop)
//! module's docs ("opencl3"). A live buffer's memory object is never adopted again (one
//! [`Buffer`] per memory object, or two records of its uses would order its queues).

use opencl3::command_queue::CommandQueue;
use opencl3::context::Context;
use opencl3::error_codes::ClError;
use opencl3::memory::{Buffer as ClBuffer, ClMem};

use crate::backend::native::{
    cl_command_queue, cl_context, cl_device_id, NativeBuffer, NativeEvent, NativeQueue,
};
use crate::backend::opencl::cl_err;
use crate::launch::kernel::{ArgValue, KernelArg};
use crate::launch::typed::{DeviceMemory, OfType};
use crate::{Buffer, Error, Event, Launch, Pod, Queue};

/// An OpenCL error code, from cl3 or opencl3, as the runtime reports a driver's.
fn cl(call: &'static str) -> impl Fn(ClError) -> Error {
    move |e| cl_err(call)(e.0)
}

/// The queue's OpenCL handles, or the error that says an OpenCL queue is needed for `what`.
fn opencl_queue(
    queue: &Queue,
    what: &str,
) -> Result<(cl_context, cl_device_id, cl_command_queue), Error> {
    match queue.native()? {
        NativeQueue::OpenCl { context, device, queue } => Ok((context, device, queue)),
        _ => Err(Error::InvalidArgument(format!(
            "{what}: the queue is on {}, a CUDA device: opencl3 works with OpenCL devices; use \
             the cudarc conversions there, or a queue of an OpenCL device \
             (Queue::with_device(\"opencl\"), Queue::from_opencl3)",
            queue.device_name()
        ))),
    }
}

impl Queue {
    /// opencl3's command queue, with the context it was made in, as a queue: opencl3's
    /// commands and the toolkit's launches run on it in the order the host gives them. Both
    /// are retained (released when the last clone of the queue, and the last buffer of the
    /// context, goes), so opencl3's values may be dropped at once. The toolkit's kernels are
    /// built in that context, once (its own programs and caches).
    ///
    /// Errors: a queue of another context than `context` (give the one it was made in), a
    /// device the runtime does not list. Who owns what, and how work is ordered with opencl3's
    /// other queues: [`interop`](crate::interop#opencl3).
    pub fn from_opencl3(context: &Context, queue: &CommandQueue) -> Result<Queue, Error> {
        let of = queue.context().map_err(cl("clGetCommandQueueInfo"))?;
        if of != context.get() {
            return Err(Error::InvalidArgument(
                "Queue::from_opencl3: the command queue is of another context than the one \
                 given with it: give the context the queue was made in"
                    .into(),
            ));
        }
        let device = queue.device().map_err(cl("clGetCommandQueueInfo"))?;
        let native = NativeQueue::OpenCl { context: context.get(), device, queue: queue.get() };
        // SAFETY: opencl3's live context and queue (borrowed), which belong together (checked
        // above); the runtime retains both, so they outlive the queue made of them whatever
        // opencl3 does with its own references.
        unsafe { Queue::adopted(native, None) }
    }

    /// The queue's context as opencl3's, with a reference of its own (released when opencl3
    /// drops it): opencl3 makes buffers, programs and queues in it that the toolkit's launches
    /// on this queue take. Errors: a queue of a CUDA device.
    pub fn opencl3_context(&self) -> Result<Context, Error> {
        let (context, _, _) = opencl_queue(self, "Queue::opencl3_context")?;
        let devices: Vec<cl_device_id> =
            cl3::context::get_context_info(context, cl3::context::CL_CONTEXT_DEVICES)
                .map(Vec::<isize>::from)
                .map_err(|code| cl("clGetContextInfo")(ClError(code)))?
                .into_iter()
                .map(|d| d as cl_device_id)
                .collect();
        // SAFETY: the queue's live context; the reference taken here is opencl3's to release.
        unsafe { cl3::context::retain_context(context) }
            .map_err(|code| cl("clRetainContext")(ClError(code)))?;
        Ok(Context::new(context, &devices))
    }

    /// The queue as opencl3's command queue, with a reference of its own (released when
    /// opencl3 drops it): what opencl3 enqueues there runs in order with the toolkit's
    /// launches. Errors: a queue of a CUDA device.
    pub fn opencl3_queue(&self) -> Result<CommandQueue, Error> {
        let (_, device, queue) = opencl_queue(self, "Queue::opencl3_queue")?;
        let dimensions = opencl3::device::Device::new(device)
            .max_work_item_dimensions()
            .map_err(cl("clGetDeviceInfo"))?;
        // SAFETY: the queue's live command queue; the reference taken here is opencl3's to
        // release.
        unsafe { cl3::command_queue::retain_command_queue(queue) }
            .map_err(|code| cl("clRetainCommandQueue")(ClError(code)))?;
        Ok(CommandQueue::new(queue, dimensions))
    }
}

impl TryFrom<(&Context, &CommandQueue)> for Queue {
    type Error = Error;

    /// [`Queue::from_opencl3`].
    fn try_from((context, queue): (&Context, &CommandQueue)) -> Result<Queue, Error> {
        Queue::from_opencl3(context, queue)
    }
}

/// opencl3's buffer as a kernel argument: its memory object, its context (told apart by
/// number; one the driver does not name is none, which the launch refuses).
fn buffer_arg<'a, T: Pod>(buffer: &'a ClBuffer<T>) -> ArgValue<'a> {
    let context = buffer.context().map_or(0, |c| c as usize);
    ArgValue::native::<T, ClBuffer<T>>(buffer, NativeBuffer::OpenCl(buffer.get()), context, 0)
}

/// opencl3's buffer given to [`Launch::opencl3_arg`]: a kernel argument in every
/// configuration of the crate (a type of this crate, so no `Pod` type can be it).
struct Opencl3Arg<'a, T>(&'a ClBuffer<T>);

impl<'a, T: Pod> KernelArg<'a> for Opencl3Arg<'a, T> {
    fn to_arg(&self) -> ArgValue<'a> {
        buffer_arg(self.0)
    }
}

impl<'q, R> Launch<'q, R> {
    /// Appends opencl3's buffer as the next argument, without a copy, for a `global` or
    /// `constant` pointer to `T`, on a queue of its context (a launch on another is refused,
    /// naming the remedy). Typed launchers take the buffer itself.
    pub fn opencl3_arg<T: Pod>(self, buffer: &'q ClBuffer<T>) -> Self {
        self.arg(Opencl3Arg(buffer))
    }
}

impl<'a, C, T: Pod + OfType<C>> DeviceMemory<'a, C> for &'a ClBuffer<T> {
    fn memory_arg(&self) -> ArgValue<'a> {
        buffer_arg(*self)
    }
}

impl<T: Pod> Buffer<T> {
    /// The buffer as opencl3's, with a reference of its own to the memory object (released
    /// when opencl3 drops it). Errors: a buffer of a CUDA device, a device allocation
    /// ([`crate::Queue::malloc_device`]).
    pub fn to_opencl3(&self) -> Result<ClBuffer<T>, Error> {
        let mem = match self.native() {
            NativeBuffer::OpenCl(mem) => mem,
            NativeBuffer::OpenClUsm(_) => {
                return Err(Error::InvalidArgument(format!(
                    "Buffer::to_opencl3: a device allocation of {} (Queue::malloc_device), not \
                     a memory object: opencl3's buffers are memory objects; give opencl3 a \
                     Buffer made by Queue::buffer",
                    self.queue().device_name()
                )))
            }
            _ => {
                return Err(Error::InvalidArgument(format!(
                    "Buffer::to_opencl3: a buffer of {}, a CUDA device: opencl3 works with \
                     OpenCL memory; cudarc takes this one (a Buffer is cudarc device memory)",
                    self.queue().device_name()
                )))
            }
        };
        // SAFETY: the buffer's live memory object; the reference taken here is released once,
        // by the opencl3 buffer.
        unsafe { cl3::memory::retain_mem_object(mem) }
            .map_err(|code| cl("clRetainMemObject")(ClError(code)))?;
        Ok(ClBuffer::new(mem))
    }

    /// opencl3's buffer as a buffer of `queue`, without a copy: the memory object is retained
    /// (released when the buffer goes), its length the memory's size in values of `T`.
    /// Errors: a queue of a CUDA device, memory of another context than the queue's, a size
    /// that is not a whole number of values of `T`, memory a live [`Buffer`] holds already
    /// (its [`Buffer::to_opencl3`], one adopted before, or a sub-buffer of one: use that
    /// buffer).
    pub fn from_opencl3(queue: &Queue, buffer: &ClBuffer<T>) -> Result<Buffer<T>, Error> {
        let (context, _, _) = opencl_queue(queue, "Buffer::from_opencl3")?;
        let of = buffer.context().map_err(cl("clGetMemObjectInfo"))?;
        if of != context {
            return Err(Error::InvalidArgument(format!(
                "Buffer::from_opencl3: the opencl3 buffer is of another context than the queue \
                 on {}: make the queue of opencl3's context and queue (Queue::from_opencl3), or \
                 the buffer in the queue's context (Queue::opencl3_context)",
                queue.device_name()
            )));
        }
        let bytes = buffer.size().map_err(cl("clGetMemObjectInfo"))?;
        let size = std::mem::size_of::<T>();
        if size == 0 || bytes % size != 0 {
            return Err(Error::InvalidArgument(format!(
                "Buffer::from_opencl3: the opencl3 buffer holds {bytes} bytes, not a whole number \
                 of {} ({size} bytes each): use an element type whose size divides {bytes} \
                 (Buffer::<u8>::from_opencl3 of the same memory, after opencl3's \
                 Buffer::<u8>::new)",
                std::any::type_name::<T>()
            )));
        }
        // SAFETY: opencl3's live memory object (borrowed), of the queue's context (checked
        // above) and of `bytes / size` values; the buffer made here retains it.
        unsafe { Buffer::from_native(queue, NativeBuffer::OpenCl(buffer.get()), bytes / size) }
    }
}

impl Event {
    /// The event as opencl3's, with a reference of its own (released when opencl3 drops it):
    /// for opencl3's wait lists, on any queue of the event's context. Errors: an event of a
    /// CUDA device.
    pub fn to_opencl3(&self) -> Result<opencl3::event::Event, Error> {
        let NativeEvent::OpenCl(event) = self.native()? else {
            return Err(Error::InvalidArgument(format!(
                "Event::to_opencl3: an event of {}, a CUDA device: opencl3 waits for OpenCL \
                 events; a cudarc stream waits for it with Event::wait_in_cudarc",
                self.device_name()
            )));
        };
        // SAFETY: this event's live driver event; the reference taken here is released once,
        // by the opencl3 event.
        unsafe { cl3::event::retain_event(event) }
            .map_err(|code| cl("clRetainEvent")(ClError(code)))?;
        Ok(opencl3::event::Event::new(event))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::launch::typed::c;

    fn memory<'a, C, M: DeviceMemory<'a, C>>() {}

    #[test]
    fn an_opencl3_buffer_is_device_memory_of_its_element_type() {
        memory::<c::int, &ClBuffer<i32>>();
        memory::<c::Any, &ClBuffer<[f64; 3]>>();
    }
}
