//! Queues on a device and the buffers they allocate: the first things a program makes, with
//! the buffers' copies through ordinary host memory (blocking) and on the device (blocking, or
//! returning an [`Event`]). Host memory for asynchronous copies and maps is `host`'s, which
//! adds [`Queue::host_buffer`]; launching is `kernel`'s, which adds [`Queue::launch`].

use std::marker::PhantomData;
use std::sync::{Arc, Mutex};

use smallvec::{smallvec, SmallVec};

use super::event::Event;
use super::order::{next_queue_id, ordered, wait_on, Access, Uses};
use crate::backend::native::{NativeBuffer, NativeQueue};
use crate::backend::{self, Memory, Program};
use crate::discovery::LoadState;
use crate::process::runtime;
use crate::program::{DeviceState, PooledKernel};
use crate::registry::Registry;
use crate::Error;

/// Plain data that can be copied to and from a device byte for byte: numbers, arrays of
/// them (`[f32; 4]` is OpenCL C's `float4`), and `#[repr(C)]` structs of them.
///
/// With the crate's `bytemuck` feature, every `bytemuck::Pod` type is one (derive
/// `bytemuck::Pod` on a struct, and it is a buffer element and a kernel argument); a type
/// cannot then also have an `unsafe impl Pod` of its own. With `half`, `half::f16` and
/// `half::bf16` are.
///
/// # Safety
/// Every bit pattern of the type's size must be a valid value, and it must have no padding.
pub unsafe trait Pod: Copy + Send + Sync + 'static {}
#[cfg(not(feature = "bytemuck"))]
macro_rules! pod {
    ($($t:ty),*) => { $(
        // SAFETY: these numbers have no padding and no invalid bit patterns.
        unsafe impl Pod for $t {}
    )* };
}
#[cfg(not(feature = "bytemuck"))]
pod!(u8, i8, u16, i16, u32, i32, u64, i64, usize, isize, f32, f64);
#[cfg(all(feature = "half", not(feature = "bytemuck")))]
pod!(half::f16, half::bf16);
// SAFETY: an array of plain data has no padding between its elements and no invalid bit
// patterns: `[f32; 4]` is OpenCL's `float4`.
#[cfg(not(feature = "bytemuck"))]
unsafe impl<T: Pod, const N: usize> Pod for [T; N] {}
// SAFETY: `bytemuck::Pod` promises what `Pod` asks (any bit pattern valid, no padding).
#[cfg(feature = "bytemuck")]
unsafe impl<T: bytemuck::Pod + Send + Sync> Pod for T {}

pub(crate) fn as_bytes<T: Pod>(data: &[T]) -> &[u8] {
    // SAFETY: `T: Pod` has no padding, so all `size_of_val(data)` bytes are initialised.
    unsafe { std::slice::from_raw_parts(data.as_ptr().cast(), std::mem::size_of_val(data)) }
}

/// `data`'s bytes, to be overwritten.
pub(super) fn as_bytes_mut<T: Pod>(data: &mut [T]) -> &mut [u8] {
    // SAFETY: `T: Pod` has no padding and no invalid bit pattern, so any bytes written through
    // the slice leave valid values of `T`; the borrow is exclusive for the slice's life.
    unsafe { std::slice::from_raw_parts_mut(data.as_mut_ptr().cast(), std::mem::size_of_val(data)) }
}

/// `len` values of `T` that are all zero bytes (a valid value of every `Pod` type), from the
/// allocator's zeroed memory: a large one is fresh pages of the system's, which nothing has
/// touched yet, so a read into it writes each page once (on CUDA, through page-locked
/// staging: the driver's own copy into untouched pageable memory runs at a tenth of the
/// speed).
pub(super) fn zeroed<T: Pod>(len: usize) -> Vec<T> {
    let layout = std::alloc::Layout::array::<T>(len)
        .unwrap_or_else(|_| panic!("{len} values of {} overflow", std::any::type_name::<T>()));
    if layout.size() == 0 {
        // SAFETY: all-zero bytes (here, none) are a valid `T` (`T: Pod`).
        return (0..len).map(|_| unsafe { std::mem::zeroed::<T>() }).collect();
    }
    // SAFETY: a layout of non-zero size.
    let at = unsafe { std::alloc::alloc_zeroed(layout) };
    if at.is_null() {
        std::alloc::handle_alloc_error(layout);
    }
    // SAFETY: `at` was allocated by the global allocator with the layout of `len` values of
    // `T` (its alignment, `len * size_of::<T>()` bytes), all zero: `len` valid values
    // (`T: Pod`), owned by the vector from here on.
    unsafe { Vec::from_raw_parts(at.cast::<T>(), len, len) }
}

/// `len` values of `T` in bytes, or the error that names the overflow.
pub(super) fn byte_size<T>(len: usize) -> Result<usize, Error> {
    len.checked_mul(std::mem::size_of::<T>()).ok_or_else(|| {
        Error::InvalidArgument(format!(
            "{len} values of {} ({} bytes each) overflow the address space",
            std::any::type_name::<T>(),
            std::mem::size_of::<T>()
        ))
    })
}

/// An in-order command queue on one device.
///
/// `Send + Sync`: clone it (a cheap handle to one queue) or share a reference; threads may
/// launch on one queue at once, and each kernel is still built once per device.
#[derive(Clone)]
pub struct Queue {
    pub(super) inner: Arc<QueueInner>,
}

pub(super) struct QueueInner {
    /// The queue's number, which tells its uses of a buffer from other queues' (never reused).
    pub(super) id: u64,
    /// Its CUDA stream's handle, as a number (0 on OpenCL): a cudarc slice's uses are tracked
    /// on its own stream alone.
    pub(super) stream: usize,
    pub(super) device: Arc<DeviceState>,
    pub(super) queue: backend::Queue,
    /// The kernels of the last plain launches (no bundle, no specialization values), ready
    /// to go again: up to [`KEPT_KERNELS`], the most recent last.
    pub(super) last: Mutex<Vec<LastLaunch>>,
    /// For a queue adopted from another library's object (a cudarc stream, an opencl3
    /// queue), that object: kept alive as long as the queue.
    _owner: Option<Owner>,
}

pub(crate) use crate::backend::Owner;

/// How many kernels a queue keeps ready for its next launches: a loop that launches a few
/// kernels in turn finds each of them there, as a loop of one kernel does.
pub(super) const KEPT_KERNELS: usize = 8;

/// A kernel as a recent launch resolved it: launching it again while the registry is the
/// same one (no library opened or closed since) needs no lookup, no pool and, for unchanged
/// arguments, no `clSetKernelArg`.
pub(super) struct LastLaunch {
    pub(super) kernel: String,
    pub(super) registry: Arc<Registry>,
    /// The loaded state `registry` is of.
    pub(super) seen: LoadState,
    pub(super) program: Arc<Program>,
    pub(super) object: PooledKernel,
}

impl Queue {
    /// A queue on the default device: the one `SYCL_DEVICE` names, otherwise the first CUDA
    /// GPU, otherwise the first OpenCL device that accepts SPIR-V.
    pub fn new() -> Result<Queue, Error> {
        Queue::create(None, false)
    }

    /// A queue on the one device `selector` picks, as `SYCL_DEVICE` does (case-insensitive):
    /// - `"intel"`, `"pocl"`, `"nvidia"`: an OpenCL platform, named by a word of its name or
    ///   vendor (never by device names, which PoCL takes from the host CPU);
    /// - `"cuda"`: the GPUs of the CUDA backend; `"opencl"`: every OpenCL device; `"*"`: every
    ///   device;
    /// - `"cpu"`, `"gpu"`, `"accelerator"`: a device type;
    /// - `"intel:1"`, `"cuda:0"`, `"pocl:cpu"`: the N-th device, or the devices of a type, of
    ///   what comes before the `:`.
    ///
    /// A selector that picks no device or several is [`Error::NoDevice`], whose message lists
    /// every device with the selector that picks it.
    pub fn with_device(selector: &str) -> Result<Queue, Error> {
        Queue::create(Some(selector), false)
    }

    /// [`Queue::with_device`], with profiling: every event of the queue carries the device's
    /// timestamps ([`crate::Event::profile`], [`crate::Event::elapsed`]).
    pub fn with_device_profiled(selector: &str) -> Result<Queue, Error> {
        Queue::create(Some(selector), true)
    }

    /// Another queue on this queue's device, with profiling (see
    /// [`Queue::with_device_profiled`]).
    pub fn profiled(&self) -> Result<Queue, Error> {
        Queue::of(self.inner.device.clone(), true)
    }

    fn create(wanted: Option<&str>, profiled: bool) -> Result<Queue, Error> {
        Queue::of(runtime().device(wanted)?, profiled)
    }

    fn of(device: Arc<DeviceState>, profiled: bool) -> Result<Queue, Error> {
        let queue = device.device.queue(profiled)?;
        Ok(Queue::made(device, queue, None))
    }

    fn made(device: Arc<DeviceState>, queue: backend::Queue, owner: Option<Owner>) -> Queue {
        let stream = match queue.native() {
            Ok(NativeQueue::Cuda { stream, .. }) => stream as usize,
            _ => 0,
        };
        Queue {
            inner: Arc::new(QueueInner {
                id: next_queue_id(),
                stream,
                device,
                queue,
                last: Mutex::new(Vec::new()),
                _owner: owner,
            }),
        }
    }

    /// A program's own queue, adopted: an OpenCL command queue (with its context and device)
    /// or a CUDA stream (with its context and device). The toolkit's kernels then resolve,
    /// build and launch on it, in order with what the program enqueues there itself; buffers
    /// of the queue are made in its context.
    ///
    /// An OpenCL queue and context are retained (released when the last clone of the queue,
    /// and the last buffer of the context, goes). A CUDA stream is not: it must outlive the
    /// queue. On CUDA the device's primary context (cudarc's `CudaContext::new`) is the one
    /// the runtime uses anyway; another context must outlive every queue and buffer made in
    /// it. A context other than the runtime's own gets its own program caches (each program
    /// is built once per context).
    ///
    /// Errors: a queue, context and device that do not belong together, a device the runtime
    /// does not list.
    ///
    /// # Safety
    /// The handles are live objects of their driver, and what is not retained stays alive
    /// as said above.
    pub unsafe fn from_native(native: NativeQueue) -> Result<Queue, Error> {
        // SAFETY: the caller's promise, passed on.
        unsafe { Queue::adopted(native, None) }
    }

    /// [`Queue::from_native`], keeping `owner` (the object the handles belong to) alive as
    /// long as the queue.
    ///
    /// # Safety
    /// As [`Queue::from_native`].
    #[cfg_attr(not(any(feature = "cudarc", feature = "opencl3")), allow(dead_code))]
    pub(crate) unsafe fn adopted(
        native: NativeQueue,
        owner: Option<Owner>,
    ) -> Result<Queue, Error> {
        let mut owner = owner;
        // A CUDA stream's owner goes into the stream's state, which every event of the queue
        // holds: a cudarc stream outlives the events too. Any other stays with the queue.
        // SAFETY: the caller's promise, passed on.
        let (device, queue) = unsafe { runtime().adopt(&native, &mut owner)? };
        Ok(Queue::made(device, queue, owner))
    }

    /// The queue's driver handles: its OpenCL context, device and command queue, or its CUDA
    /// context, device and stream. They stay valid while the queue (or a clone of it) lives;
    /// work a program enqueues on them runs in order with the queue's own.
    pub fn native(&self) -> Result<NativeQueue, Error> {
        self.inner.queue.native()
    }

    /// The device's state: its backend device and caches.
    pub(crate) fn state(&self) -> Arc<DeviceState> {
        self.inner.device.clone()
    }

    /// The device's name, as the driver reports it.
    pub fn device_name(&self) -> &str {
        &self.inner.device.name
    }

    /// A buffer of `len` elements, uninitialised on the device.
    pub fn buffer<T: Pod>(&self, len: usize) -> Result<Buffer<T>, Error> {
        let bytes = byte_size::<T>(len)?;
        let device = &self.inner.device;
        let most = device.info.max_alloc_bytes;
        if most > 0 && bytes as u64 > most {
            return Err(Error::InvalidArgument(format!(
                "a buffer of {len} values of {} ({bytes} bytes): {} allocates at most {most} \
                 bytes at once (DeviceInfo::max_alloc_bytes); split it into buffers of at most \
                 that size",
                std::any::type_name::<T>(),
                device.describe()
            )));
        }
        let mem = device.device.alloc(bytes)?;
        Ok(Buffer::made(self, mem, len))
    }

    /// A buffer of `len` elements, every byte zero (filled on the device).
    pub fn buffer_zeroed<T: Pod>(&self, len: usize) -> Result<Buffer<T>, Error> {
        let buffer = self.buffer::<T>(len)?;
        buffer.fill_bytes(&[0], 0, byte_size::<T>(len)?)?.wait()?;
        Ok(buffer)
    }

    /// A buffer holding a copy of `data`.
    pub fn buffer_from<T: Pod>(&self, data: &[T]) -> Result<Buffer<T>, Error> {
        let buffer = self.buffer(data.len())?;
        buffer.write(data)?;
        Ok(buffer)
    }

    /// Makes everything given to this queue from now on (launches, copies, fills, transfers
    /// through host buffers) run after the commands `events` stand for: events of any queue,
    /// of any device. The queue waits on the device for events of its own device, and on CUDA
    /// for those of every GPU; for an event of another device that its driver cannot wait for
    /// (another OpenCL device, or the other driver) the host waits, here, before returning.
    pub fn wait_for(&self, events: &[&Event]) -> Result<(), Error> {
        let mut waits = SmallVec::<[&backend::Event; 8]>::new();
        for event in events {
            wait_on(&self.inner.queue, &event.event, &mut waits)?;
        }
        self.inner.queue.wait_for(&waits)
    }

    /// Waits until everything submitted has finished.
    pub fn wait(&self) -> Result<(), Error> {
        self.inner.queue.finish()
    }
}

/// Device memory holding `len` values of `T`. `Send + Sync`.
///
/// Its reads, writes, copies, fills and maps go through its queue; every command that uses
/// it, on any queue of its device, is ordered after the earlier commands that conflict with
/// it (the crate's [Ordering](crate#ordering)). Dropped, its memory is freed once no command
/// uses it, without the host waiting (and once no [`crate::Graph`] that recorded it lives).
pub struct Buffer<T: Pod> {
    /// The memory, its recent uses and its queue, shared with the graphs that use it.
    pub(super) alloc: Arc<Allocation>,
    len: usize,
    _t: PhantomData<T>,
}

/// A buffer's allocation: its memory and recent uses, and the queue its own commands go
/// through. Shared by the [`Buffer`] and the [`crate::Graph`]s that recorded it, and freed
/// when the last of them goes, once no command uses it.
pub(crate) struct Allocation {
    pub(super) uses: Uses,
    pub(super) queue: Queue,
}

impl Drop for Allocation {
    fn drop(&mut self) {
        // A guard that was forgotten left the map in place.
        if let Err(e) = self.end_map() {
            log::warn!("unmapping a dropped buffer: {e}");
        }
        let mem = self.uses.root();
        mem.disown();
        // OpenCL frees it after the queued commands that use it by itself: no event is
        // refreshed for it (the uses, dropped with the buffer, give up their markers).
        if !mem.frees_itself() {
            mem.free_after(self.uses.take_all());
        }
    }
}

impl Allocation {
    /// Ends the allocation's map, once (a guard's, or one a forgotten guard left in place).
    pub(super) fn end_map(&self) -> Result<(), Error> {
        let mapping = self.uses.end_map();
        match mapping {
            Some(mapping) => self.queue.inner.queue.unmap(self.uses.root(), mapping),
            None => Ok(()),
        }
    }
}

impl<T: Pod> Buffer<T> {
    /// `mem`, of `len` values, as a buffer of `queue`.
    pub(super) fn made(queue: &Queue, mem: Memory, len: usize) -> Buffer<T> {
        let mem = Arc::new(mem);
        mem.own();
        let alloc = Allocation { uses: Uses::new(mem), queue: queue.clone() };
        Buffer { alloc: Arc::new(alloc), len, _t: PhantomData }
    }

    /// Orders work another library gives the buffer's queue's own stream (cudarc's, cuBLAS's)
    /// as a use of the buffer as `access`: after other queues' conflicting uses, and before
    /// their later conflicting commands, which wait for what the queue was given by then.
    #[cfg_attr(not(feature = "cudarc"), allow(dead_code))]
    pub(crate) fn use_externally(&self, access: Access) -> Result<(), Error> {
        self.settle(access)?;
        self.alloc.uses.used_later_by(self.alloc.queue.inner.id);
        Ok(())
    }

    /// The whole allocation.
    pub(super) fn mem(&self) -> &Arc<Memory> {
        self.alloc.uses.root()
    }

    /// Enqueues on the buffer's queue a command that uses this buffer as `access`, after the
    /// conflicting uses on other queues (the queue waits for them first); records it (see
    /// `order`).
    pub(super) fn ordered(
        &self,
        access: Access,
        enqueue: impl FnOnce(&backend::Queue) -> Result<backend::Event, Error>,
    ) -> Result<backend::Event, Error> {
        let queue = &self.alloc.queue.inner;
        ordered(&queue.queue, queue.id, &mut smallvec![(&self.alloc.uses, access)], &[], |waits| {
            queue.queue.wait_for(waits)?;
            enqueue(&queue.queue)
        })
    }

    /// Makes the buffer's queue wait, on the device, for the commands of other queues that a
    /// use of the buffer as `access` conflicts with, and records a marker as that use: for a
    /// command that no other can overlap (one made while the buffer is borrowed exclusively: a
    /// map), or one of another library's on the queue (see [`Buffer::use_externally`]).
    pub(crate) fn settle(&self, access: Access) -> Result<backend::Event, Error> {
        self.ordered(access, backend::Queue::marker)
    }
    /// How many values of `T` it holds.
    pub fn len(&self) -> usize {
        self.len
    }

    /// The buffer's driver handle: its OpenCL memory object, or its CUDA device pointer.
    /// Valid while the buffer lives.
    pub fn native(&self) -> NativeBuffer {
        self.mem().native()
    }

    /// A program's device memory as a buffer of `len` values on `queue`'s device: an OpenCL
    /// memory object of the queue's context (retained, released when the buffer goes), or a
    /// CUDA device pointer into an allocation of the queue's context (borrowed: never freed
    /// here). Errors: memory of another context, smaller than `len` values.
    ///
    /// # Safety
    /// The handle is live; CUDA memory stays allocated as long as the buffer, the work given
    /// it and every [`crate::Graph`] that recorded it live, and nothing else writes it while
    /// the toolkit's work reads it.
    pub unsafe fn from_native(
        queue: &Queue,
        native: NativeBuffer,
        len: usize,
    ) -> Result<Buffer<T>, Error> {
        let bytes = byte_size::<T>(len)?;
        // SAFETY: the caller's promise, passed on.
        let mem = unsafe { queue.inner.device.device.adopt_memory(native, bytes)? };
        mem.check_not_owned("Buffer::from_native")?;
        Ok(Buffer::made(queue, mem, len))
    }

    /// Whether it holds none.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// The queue its reads, writes and copies go through.
    pub fn queue(&self) -> &Queue {
        &self.alloc.queue
    }

    /// Repeats `pattern` over `size` bytes from byte `start`, ordered as a write.
    pub(super) fn fill_bytes(
        &self,
        pattern: &[u8],
        start: usize,
        size: usize,
    ) -> Result<backend::Event, Error> {
        self.ordered(Access::Write, |queue| queue.fill(self.mem(), pattern, start, size))
    }

    /// That `range` lies within the buffer and that the host side holds `host` values, as
    /// many as it spans.
    pub(super) fn check_range(
        &self,
        what: &str,
        range: &std::ops::Range<usize>,
        host: usize,
    ) -> Result<(), Error> {
        if range.start > range.end || range.end > self.len {
            return Err(Error::InvalidArgument(format!(
                "{what} values {}..{} of a buffer of {}",
                range.start, range.end, self.len
            )));
        }
        if range.len() != host {
            return Err(Error::InvalidArgument(format!(
                "{what} values {}..{} ({} values) with {host} on the host",
                range.start,
                range.end,
                range.len()
            )));
        }
        Ok(())
    }
}
