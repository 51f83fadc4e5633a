//! cudarc 0.19 (the `cudarc` feature): a `CudaStream` as a [`Queue`], cudarc's memory as
//! kernel arguments and as a [`Buffer`], a [`Buffer`] as cudarc's device memory (so cuBLAS
//! and cudarc's copies take it), and events across the two. Who owns what, and how each
//! conversion orders work on the two libraries' streams, is the public
//! [`interop`](crate::interop) module's docs ("cudarc"): a kernel argument cannot record
//! cudarc's per-slice events after the kernel, so a slice is launched on its own stream or
//! lent through [`Queue::with_tracking`].

use std::marker::PhantomData;
use std::sync::{Arc, Mutex};

use ::cudarc::driver::result as cu;
use ::cudarc::driver::sys::{self, CUevent_wait_flags};
use ::cudarc::driver::{
    CudaContext, CudaEvent, CudaSlice, CudaStream, DevicePtr, DevicePtrMut, DeviceSlice,
    DriverError, SyncOnDrop,
};
use ::cudarc::driver::{CudaView, CudaViewMut};

use crate::backend::native::{NativeBuffer, NativeEvent, NativeQueue};
use crate::launch::kernel::{ArgValue, KernelArg};
use crate::launch::order::Access;
use crate::launch::typed::{DeviceMemory, OfType};
use crate::{Buffer, Error, Event, Launch, Pod, Queue};

/// A cudarc error as the runtime reports a driver's.
fn driver(call: &'static str) -> impl Fn(DriverError) -> Error {
    move |e| crate::backend::cuda::driver_error(call, e.0)
}

/// The queue's CUDA context and stream, or the error that says a CUDA queue is needed for
/// `what`.
fn cuda_queue(queue: &Queue, what: &str) -> Result<(sys::CUcontext, sys::CUstream), Error> {
    cuda_handles(queue, what).map(|(context, _, stream)| (context, stream))
}

/// The queue's CUDA context, device and stream, or the error that says a CUDA queue is
/// needed for `what`.
fn cuda_handles(
    queue: &Queue,
    what: &str,
) -> Result<(sys::CUcontext, sys::CUdevice, sys::CUstream), Error> {
    match queue.native()? {
        NativeQueue::Cuda { context, device, stream } => Ok((context, device, stream)),
        _ => Err(Error::InvalidArgument(format!(
            "{what}: the queue is on {}, an OpenCL device: cudarc works with CUDA devices; make \
             the queue with Queue::from_cudarc or Queue::with_device(\"cuda\")",
            queue.device_name()
        ))),
    }
}

/// That `of` (the context of cudarc's memory or stream) is the queue's context `context`.
fn same_context(
    context: sys::CUcontext,
    of: sys::CUcontext,
    what: &str,
    queue: &Queue,
) -> Result<(), Error> {
    if of == context {
        return Ok(());
    }
    Err(Error::InvalidArgument(format!(
        "{what}: cudarc's memory or stream is of another CUDA context than the queue on {}: use \
         the device's primary context on both sides (cudarc's CudaContext::new(ordinal), which \
         the runtime's own queues use), or make the queue of cudarc's stream with \
         Queue::from_cudarc",
        queue.device_name()
    )))
}

/// Makes `waiter` wait for the work given so far to the stream `stream` (numbered as a
/// [`NativeQueue`]'s) of `waiter`'s context, through an event; an error is kept in the
/// context, as cudarc keeps those of calls that cannot return one.
fn wait_for_stream(waiter: &CudaStream, stream: usize) {
    let context = waiter.context();
    let waited = context.new_event(None).and_then(|event| {
        // SAFETY: a live event of `waiter`'s context and a live stream (the callers hold what
        // keeps it alive); the driver refuses the record when the contexts differ.
        unsafe { cu::event::record(event.cu_event(), stream as sys::CUstream) }?;
        waiter.wait(&event)
    });
    context.record_err(waited);
}

impl Queue {
    /// cudarc's stream as a queue: the toolkit's launches, cudarc's copies and cuBLAS calls on
    /// the stream run in the order the host gives them, with no event between them. The
    /// queue keeps a clone of the `Arc` (and so the stream and its context) as long as it,
    /// its clones and its buffers live.
    ///
    /// On the device's primary context (cudarc's `CudaContext::new`) the queue shares the
    /// runtime's programs and caches; on another (`new_non_primary`) it gets its own, as
    /// [`Queue::from_native`] says. How cudarc's slices and our buffers are then ordered on
    /// this and other streams: [`interop`](crate::interop#cudarc).
    pub fn from_cudarc(stream: &Arc<CudaStream>) -> Result<Queue, Error> {
        let context = stream.context();
        let native = NativeQueue::Cuda {
            context: context.cu_ctx(),
            device: context.cu_device(),
            stream: stream.cu_stream(),
        };
        // SAFETY: cudarc's stream and context are live while an `Arc` of the stream is; the
        // queue keeps a clone of it as its owner, alive as long as the queue, its clones and
        // its buffers (which hold their queue), so both outlive everything made of them.
        unsafe { Queue::adopted(native, Some(Box::new(stream.clone()))) }
    }

    /// Lends cudarc's `slice` to the launches `launches` gives this queue, a queue of another
    /// stream than the slice's included, with cudarc's ordering kept ([cudarc: one
    /// stream](crate::interop#cudarc-one-stream) says when that matters). First this queue's
    /// stream waits for the work the slice's stream was given so far (its allocation included)
    /// and for the slice's last reads and writes on other streams; then `launches` runs, given
    /// the slice as a kernel argument (`.cudarc_arg(slice)`); then the slice's stream waits for
    /// this queue's work, and the slice's `write` event is recorded on this queue's stream, so
    /// that cudarc's later uses of the slice on any stream, its free included, come after those
    /// launches. Give the slice only to launches on this queue. Errors: a queue of an OpenCL
    /// device, a slice of another CUDA context.
    pub fn with_tracking<T: Pod, S: DevicePtrMut<T>, R>(
        &self,
        slice: &mut S,
        launches: impl FnOnce(&S) -> R,
    ) -> Result<R, Error> {
        let (context, raw) = cuda_queue(self, "Queue::with_tracking")?;
        let cuda = slice.stream().context().clone();
        same_context(context, cuda.cu_ctx(), "Queue::with_tracking", self)?;
        let other = slice.stream().cu_stream() != raw;
        if other {
            let done = slice.stream().record_event(None).map_err(driver("cuEventRecord"))?;
            // SAFETY: the queue's live stream and a live event of its context.
            unsafe {
                cu::stream::wait_event(
                    raw,
                    done.cu_event(),
                    CUevent_wait_flags::CU_EVENT_WAIT_DEFAULT,
                )
            }
            .map_err(driver("cuStreamWaitEvent"))?;
        }
        // SAFETY: the queue's live stream, of `cuda`'s context (checked above); the queue,
        // borrowed for this call, keeps it alive longer than the wrapper, which drops at its
        // end and never destroys the stream.
        let stream = unsafe { cuda.wrap_borrowed_stream(raw) };
        let (_, record) = slice.device_ptr_mut(&stream);
        // Recorded now it would cover none of the launches: `Lent` records it after them.
        std::mem::forget(record);
        /// The slice while lent: ordered after the launches when this drops.
        struct Lent<'a, T, S: DevicePtrMut<T>> {
            slice: &'a mut S,
            queue: &'a CudaStream,
            other: bool,
            _t: PhantomData<T>,
        }
        impl<T, S: DevicePtrMut<T>> Drop for Lent<'_, T, S> {
            fn drop(&mut self) {
                LENT.with(|lent| lent.set(None));
                if self.other {
                    wait_for_stream(self.slice.stream(), self.queue.cu_stream() as usize);
                }
                drop(self.slice.device_ptr_mut(self.queue).1);
            }
        }
        // Ordered on the way out, a panic of `launches` included.
        let lent = Lent::<T, S> { slice, queue: &stream, other, _t: PhantomData };
        LENT.with(|lent_to| lent_to.set(Some((&*lent.slice as *const S as usize, raw as usize))));
        Ok(launches(&*lent.slice))
    }

    /// Makes this queue's later work wait for cudarc's `event` (as recorded now), on the
    /// device: `cuStreamWaitEvent`. Errors: a queue of an OpenCL device.
    pub fn wait_for_cudarc(&self, event: &CudaEvent) -> Result<(), Error> {
        let (_, stream) = cuda_queue(self, "Queue::wait_for_cudarc")?;
        event.context().bind_to_thread().map_err(driver("cuCtxSetCurrent"))?;
        // SAFETY: the queue's live stream and cudarc's live event (borrowed for the call);
        // the driver takes a wait on an event of another context.
        unsafe {
            cu::stream::wait_event(
                stream,
                event.cu_event(),
                CUevent_wait_flags::CU_EVENT_WAIT_DEFAULT,
            )
        }
        .map_err(driver("cuStreamWaitEvent"))
    }

    /// cudarc's `slice` as a buffer of this queue's stream, without a copy, which owns the
    /// slice: the whole [`Buffer`] API (reads, writes, fills, views, launches, and cudarc's
    /// own calls through it). When the queue is not on the slice's stream, the queue first
    /// waits for the slice stream's work so far, and when the buffer goes, the slice's stream
    /// waits for the queue's work before cudarc frees the slice there. The slice's `write`
    /// event is recorded after that, for cudarc's tracking. Errors: a queue of an OpenCL
    /// device, a slice of another CUDA context.
    pub fn buffer_from_cudarc<T: Pod>(&self, mut slice: CudaSlice<T>) -> Result<Buffer<T>, Error> {
        let (context, queue_stream) = cuda_queue(self, "Queue::buffer_from_cudarc")?;
        same_context(context, slice.context().cu_ctx(), "Queue::buffer_from_cudarc", self)?;
        let stream = slice.stream().clone();
        // The slice's stream waits for its tracked reads and writes (recorded again when the
        // buffer goes).
        let (ptr, record) = slice.device_ptr_mut(&stream);
        drop(record);
        if stream.cu_stream() != queue_stream {
            let done = stream.record_event(None).map_err(driver("cuEventRecord"))?;
            // SAFETY: the queue's live stream and a live event of its context.
            unsafe {
                cu::stream::wait_event(
                    queue_stream,
                    done.cu_event(),
                    CUevent_wait_flags::CU_EVENT_WAIT_DEFAULT,
                )
            }
            .map_err(driver("cuStreamWaitEvent"))?;
        }
        let len = slice.len();
        let owner = SliceOwner { slice, _queue: self.clone(), queue_stream: queue_stream as usize };
        // SAFETY: this queue's own live handles, adopted again as a queue whose owner is the
        // slice (with this queue, which keeps the stream alive): the owner outlives the queue
        // made here and every buffer of it.
        let queue = unsafe { Queue::adopted(self.native()?, Some(Box::new(owner)))? };
        // SAFETY: the slice's allocation, of the queue's context (checked above), of `len`
        // values; the slice is the queue's owner, so it stays allocated as long as the buffer
        // (which holds the queue) and, through `SliceOwner`'s drop, the work given to it.
        unsafe { Buffer::from_native(&queue, NativeBuffer::Cuda(ptr), len) }
    }
}

/// A cudarc slice that a [`Buffer`] was made of: kept alive by the buffer's queue; when that
/// goes, the slice's stream is ordered after the queue's work, then the slice dropped.
struct SliceOwner<T> {
    slice: CudaSlice<T>,
    /// The queue the buffer was asked of, which keeps its stream alive.
    _queue: Queue,
    queue_stream: usize,
}

impl<T> Drop for SliceOwner<T> {
    fn drop(&mut self) {
        let stream = self.slice.stream().clone();
        if stream.cu_stream() as usize != self.queue_stream {
            wait_for_stream(&stream, self.queue_stream);
        }
        drop(self.slice.device_ptr_mut(&stream).1);
    }
}

impl TryFrom<&Arc<CudaStream>> for Queue {
    type Error = Error;

    /// [`Queue::from_cudarc`].
    fn try_from(stream: &Arc<CudaStream>) -> Result<Queue, Error> {
        Queue::from_cudarc(stream)
    }
}

thread_local! {
    /// The slice [`Queue::with_tracking`] lends on this thread, by address, with the stream
    /// of the queue it is lent to: a launch there may take it.
    static LENT: std::cell::Cell<Option<(usize, usize)>> = const { std::cell::Cell::new(None) };
}

/// cudarc memory as a kernel argument: its device pointer, in its context, after the slice's
/// stream waits for the slice's last write (cudarc's tracking, as `device_ptr` does). A launch
/// takes it on the slice's own stream only (cudarc records the slice's uses there), or on the
/// queue [`Queue::with_tracking`] lends it to.
fn slice_arg<'a, T: Pod, S: DevicePtr<T>>(of: &'a S) -> ArgValue<'a> {
    let lent = LENT.with(|lent| lent.get()).filter(|(at, _)| *at == of as *const S as usize);
    let stream = of.stream();
    let (ptr, record) = of.device_ptr(stream);
    // Recording the read now would cover nothing of the kernel (the interop module's docs,
    // "cudarc: one stream").
    std::mem::forget(record);
    let context = stream.context().cu_ctx() as usize;
    let on = lent.map_or(stream.cu_stream() as usize, |(_, to)| to);
    ArgValue::native::<T, S>(of, NativeBuffer::Cuda(ptr), context, on)
}

/// cudarc memory given to [`Launch::cudarc_arg`]: a kernel argument in every configuration
/// of the crate (a type of this crate, so no `Pod` type can be it).
struct CudarcArg<'a, T, S>(&'a S, PhantomData<fn() -> T>);

impl<'a, T: Pod, S: DevicePtr<T>> KernelArg<'a> for CudarcArg<'a, T, S> {
    fn to_arg(&self) -> ArgValue<'a> {
        slice_arg::<T, S>(self.0)
    }
}

impl<'q, R> Launch<'q, R> {
    /// Appends cudarc device memory (a `&CudaSlice<T>`, `&CudaView<T>`, `&CudaViewMut<T>`)
    /// as the next argument, without a copy, for a `global` or `constant` pointer to `T`; on
    /// a queue of the memory's own stream (`Queue::from_cudarc(slice.stream())`: [cudarc: one
    /// stream](crate::interop#cudarc-one-stream) says why, and [`Queue::with_tracking`] lends
    /// it to other streams). Typed launchers take the slice itself.
    pub fn cudarc_arg<T: Pod, S: DevicePtr<T>>(self, memory: &'q S) -> Self {
        self.arg(CudarcArg::<T, S>(memory, PhantomData))
    }
}

impl<'a, C, T: Pod + OfType<C>> DeviceMemory<'a, C> for &'a CudaSlice<T> {
    fn memory_arg(&self) -> ArgValue<'a> {
        slice_arg::<T, _>(*self)
    }
}
impl<'a, C, T: Pod + OfType<C>> DeviceMemory<'a, C> for &'a CudaView<'_, T> {
    fn memory_arg(&self) -> ArgValue<'a> {
        slice_arg::<T, _>(*self)
    }
}
impl<'a, C, T: Pod + OfType<C>> DeviceMemory<'a, C> for &'a CudaViewMut<'_, T> {
    fn memory_arg(&self) -> ArgValue<'a> {
        slice_arg::<T, _>(*self)
    }
}

/// A buffer's device pointer and its queue's stream (as a number), or a panic that names
/// the mistake: cudarc's traits cannot return an error.
fn cuda_parts<T: Pod>(buffer: &Buffer<T>, stream: &CudaStream) -> (sys::CUdeviceptr, usize) {
    let checked = cuda_queue(buffer.queue(), "a Buffer used as cudarc memory").and_then(
        |(context, queue_stream)| {
            same_context(
                context,
                stream.context().cu_ctx(),
                "a Buffer used as cudarc memory",
                buffer.queue(),
            )?;
            Ok(queue_stream as usize)
        },
    );
    match (checked, buffer.native()) {
        (Ok(queue_stream), NativeBuffer::Cuda(ptr)) => (ptr, queue_stream),
        (Err(e), _) => panic!("{e}"),
        (Ok(_), _) => panic!("a Buffer used as cudarc memory is not CUDA memory"),
    }
}

/// What a use of `buffer` on `stream` waits for first, and what its `SyncOnDrop` does after
/// it: nothing on the queue's own stream; on another, `stream` waits for the queue's work,
/// and the host for `stream` when the use is enqueued.
fn ordered<'a, T: Pod>(
    buffer: &Buffer<T>,
    stream: &'a CudaStream,
    access: Access,
) -> (sys::CUdeviceptr, SyncOnDrop<'a>) {
    let (ptr, queue_stream) = cuda_parts(buffer, stream);
    // After other queues' conflicting uses of the buffer, on its queue (which cudarc's stream
    // follows), and before their later ones, which then wait for cudarc's work.
    buffer
        .use_externally(access)
        .unwrap_or_else(|e| panic!("ordering a Buffer's use by cudarc: {e}"));
    if stream.cu_stream() as usize == queue_stream {
        return (ptr, SyncOnDrop::Sync(None));
    }
    // The buffer (borrowed by the caller) holds its queue, which keeps the stream alive.
    wait_for_stream(stream, queue_stream);
    (ptr, SyncOnDrop::sync_stream(stream))
}

/// A [`Buffer`] is cudarc device memory of its length (panics, as cudarc's traits cannot
/// fail, when the buffer is not on a CUDA device or its queue is of another context than
/// cudarc's stream).
impl<T: Pod> DeviceSlice<T> for Buffer<T> {
    fn len(&self) -> usize {
        Buffer::len(self)
    }

    /// The buffer's queue's stream, as cudarc's: made once per stream and kept for the
    /// process (borrowed: it never destroys the stream), since a `Buffer` holds none.
    fn stream(&self) -> &Arc<CudaStream> {
        cudarc_stream(self.queue()).unwrap_or_else(|e| panic!("a Buffer's stream for cudarc: {e}"))
    }
}

/// A [`Buffer`] read by cudarc (cuBLAS's inputs, a copy's source).
impl<T: Pod> DevicePtr<T> for Buffer<T> {
    fn device_ptr<'a>(&'a self, stream: &'a CudaStream) -> (sys::CUdeviceptr, SyncOnDrop<'a>) {
        ordered(self, stream, Access::Read)
    }
}

/// A [`Buffer`] written by cudarc (cuBLAS's output, a copy's destination).
impl<T: Pod> DevicePtrMut<T> for Buffer<T> {
    fn device_ptr_mut<'a>(
        &'a mut self,
        stream: &'a CudaStream,
    ) -> (sys::CUdeviceptr, SyncOnDrop<'a>) {
        ordered(self, stream, Access::Write)
    }
}

/// The queue's stream as cudarc's `Arc<CudaStream>`, made once per context and stream and
/// kept for the process: cudarc's `DeviceSlice::stream` lends one for as long as the memory,
/// and a [`Buffer`] holds none. Each is a borrowed wrapper (it never destroys the stream) of
/// a context cudarc retains (the primary one) or never releases (another).
fn cudarc_stream(queue: &Queue) -> Result<&'static Arc<CudaStream>, Error> {
    type Streams = Vec<((usize, usize), &'static Arc<CudaStream>)>;
    static STREAMS: Mutex<Streams> = Mutex::new(Vec::new());
    let (context, device, stream) = cuda_handles(queue, "a Buffer used as cudarc memory")?;
    let key = (context as usize, stream as usize);
    let mut streams = STREAMS.lock().unwrap_or_else(|e| e.into_inner());
    if let Some((_, found)) = streams.iter().find(|(k, _)| *k == key) {
        return Ok(found);
    }
    let ordinal = crate::backend::cuda::ordinal_of(device)? as usize;
    let primary = CudaContext::new(ordinal).map_err(driver("cuDevicePrimaryCtxRetain"))?;
    let cuda = if primary.cu_ctx() == context {
        primary
    } else {
        // SAFETY: the queue's live context of `device`; the `CudaContext` made of it is
        // leaked below with the stream, so it never destroys the context.
        unsafe { CudaContext::from_raw_context(ordinal, device, context) }
            .map_err(driver("cuCtxSetCurrent"))?
    };
    // SAFETY: the queue's live stream of `cuda`'s context; the wrapper never destroys it, and
    // is used by cudarc only while a buffer of the queue (which keeps the stream alive) is
    // borrowed.
    let wrapped: &'static Arc<CudaStream> =
        Box::leak(Box::new(unsafe { cuda.wrap_borrowed_stream(stream) }));
    streams.push((key, wrapped));
    Ok(wrapped)
}

impl Event {
    /// Makes cudarc's `stream` wait for this event on the device (`cuStreamWaitEvent` on
    /// [`Event::native`]): work cudarc enqueues there later starts after the command. cudarc
    /// cannot make a `CudaEvent` of a driver event, hence this. Errors: an event of an OpenCL
    /// device.
    pub fn wait_in_cudarc(&self, stream: &CudaStream) -> Result<(), Error> {
        let NativeEvent::Cuda(event) = self.native()? else {
            return Err(Error::InvalidArgument(format!(
                "Event::wait_in_cudarc: an event of {}, an OpenCL device: cudarc's streams wait \
                 for events of CUDA devices",
                self.device_name()
            )));
        };
        stream.context().bind_to_thread().map_err(driver("cuCtxSetCurrent"))?;
        // SAFETY: cudarc's live stream (borrowed) and this event's live driver event (held
        // by this value).
        unsafe {
            cu::stream::wait_event(
                stream.cu_stream(),
                event,
                CUevent_wait_flags::CU_EVENT_WAIT_DEFAULT,
            )
        }
        .map_err(driver("cuStreamWaitEvent"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::launch::typed::c;

    fn memory<'a, C, M: DeviceMemory<'a, C>>() {}

    #[test]
    fn cudarc_memory_is_device_memory_of_its_element_type() {
        memory::<c::float, &CudaSlice<f32>>();
        memory::<c::int, &CudaView<'_, u32>>();
        memory::<c::Vector<c::float, 4>, &CudaViewMut<'_, [f32; 4]>>();
    }
}
