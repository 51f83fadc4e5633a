//! Host memory for fast copies and what uses it: [`HostBuffer`] (page-locked on CUDA; on
//! OpenCL the driver's own memory, a buffer made with `CL_MEM_ALLOC_HOST_PTR` and mapped for
//! its whole life), the asynchronous copies between one and a device buffer, each a
//! [`Transfer`] that borrows the host side until the copy completed, and a buffer's contents in
//! host memory while a guard lives ([`Buffer::map`], [`Buffer::map_mut`]).
//!
//! It must never let the host see host memory that a copy is still writing, nor free memory a
//! copy still uses. While a `Transfer` lives the borrow checker refuses both; a `Transfer`
//! that was forgotten (`std::mem::forget`) is waited for at the host buffer's next access,
//! since the host buffer keeps the events of the copies that use it.

use std::future::Future;
use std::marker::PhantomData;
use std::ops::{Deref, DerefMut, Range};
use std::pin::Pin;
use std::sync::atomic::{AtomicU8, Ordering};
use std::sync::{Mutex, MutexGuard};
use std::task::{Context, Poll};

use super::event::Event;
use super::order::Access;
use super::queue::{byte_size, Buffer, Pod, Queue};
use super::view::BufferView;
use crate::backend;
use crate::Error;

impl Queue {
    /// Host memory for `len` values of `T`, zeroed, which copies to and from this device's
    /// buffers take at the driver's full speed and asynchronously
    /// ([`Buffer::read_into_async`], [`Buffer::write_async`], …): page-locked memory on CUDA
    /// (`cuMemAllocHost`); on OpenCL a buffer made with `CL_MEM_ALLOC_HOST_PTR`, mapped for
    /// the host buffer's whole life (on a queue of its own), so that its memory is the
    /// driver's. A host buffer works with the buffers of any device, at the speed of ordinary
    /// memory on the others.
    pub fn host_buffer<T: Pod>(&self, len: usize) -> Result<HostBuffer<T>, Error> {
        let bytes = byte_size::<T>(len)?;
        let memory = self.inner.device.device.alloc_host(bytes)?;
        check_aligned::<T>(memory.as_ptr(), "host memory")?;
        Ok(HostBuffer { memory, len, pending: Pending::default(), _t: PhantomData })
    }
}

/// That `at` is aligned for `T` (drivers give page-aligned memory: this never fails on the
/// drivers we know).
fn check_aligned<T>(at: *const u8, what: &str) -> Result<(), Error> {
    match (at as usize).is_multiple_of(std::mem::align_of::<T>()) {
        true => Ok(()),
        false => Err(Error::InvalidArgument(format!(
            "{what} at {at:p} is not aligned for {} ({} bytes)",
            std::any::type_name::<T>(),
            std::mem::align_of::<T>()
        ))),
    }
}

/// Host memory holding `len` values of `T` ([`Queue::host_buffer`]), for fast and
/// asynchronous copies to and from buffers. It derefs to `[T]`.
///
/// Every access waits first for the copies that may still use the memory: reading (`Deref`)
/// for a copy into it, writing (`DerefMut`) and dropping for any. Those are copies whose
/// [`Transfer`] was forgotten: while a `Transfer` lives it borrows the host buffer, so the
/// compiler refuses the access. Deref once (`let values: &mut [T] = &mut host;`) rather than
/// per element in a loop: each deref asks whether anything is pending.
///
/// `Send + Sync`.
pub struct HostBuffer<T: Pod> {
    memory: backend::HostMemory,
    len: usize,
    pending: Pending,
    _t: PhantomData<T>,
}

impl<T: Pod> HostBuffer<T> {
    /// How many values of `T` it holds (waits for nothing).
    pub fn len(&self) -> usize {
        self.len
    }

    /// Whether it holds none.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }
}

impl<T: Pod> Deref for HostBuffer<T> {
    type Target = [T];

    /// The values, once no copy into them runs.
    fn deref(&self) -> &[T] {
        self.pending.settle(INTO_HOST);
        // SAFETY: the memory holds `len` values of `T` (`byte_size::<T>(len)` bytes, at least
        // one, so the pointer is not null), aligned for `T` (checked when made), initialised
        // (zeroed when made, and only ever written with bytes that are valid `T: Pod`), owned
        // by `self` for the borrow. No copy into it runs: those pending were waited for above,
        // and a new one takes `&mut self`, which this borrow excludes.
        unsafe { std::slice::from_raw_parts(self.memory.as_ptr().cast(), self.len) }
    }
}

impl<T: Pod> DerefMut for HostBuffer<T> {
    /// The values, to change, once no copy uses them.
    fn deref_mut(&mut self) -> &mut [T] {
        self.pending.settle(INTO_HOST | FROM_HOST);
        // SAFETY: as for `deref`; no copy into or out of the memory runs (those pending were
        // waited for above, and a new one borrows `self`, which this exclusive borrow
        // excludes), so the slice is the memory's only user while it lives.
        unsafe { std::slice::from_raw_parts_mut(self.memory.as_ptr().cast(), self.len) }
    }
}

impl<T: Pod> Drop for HostBuffer<T> {
    fn drop(&mut self) {
        // The memory is freed (unmapped on OpenCL) after this, when no copy uses it.
        self.pending.settle(INTO_HOST | FROM_HOST);
    }
}

impl<T: Pod + std::fmt::Debug> std::fmt::Debug for HostBuffer<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_list().entries(self.iter()).finish()
    }
}

/// A copy into a host buffer: the device writes it (a read of a buffer).
const INTO_HOST: u8 = 1;
/// A copy out of a host buffer: the device reads it (a write to a buffer).
const FROM_HOST: u8 = 2;

/// The copies that may still use a host buffer, with their directions.
#[derive(Default)]
struct Pending {
    /// The directions among `events` (`INTO_HOST`, `FROM_HOST` bits): an access with nothing
    /// pending reads this alone.
    state: AtomicU8,
    events: Mutex<Vec<(backend::Event, u8)>>,
}

impl Pending {
    fn lock(&self) -> MutexGuard<'_, Vec<(backend::Event, u8)>> {
        self.events.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Enqueues a copy in `direction` with `enqueue`, once the forgotten copies it must not
    /// overlap completed (a copy into the host memory comes after every other; one out of it
    /// after those into it), and keeps its event.
    fn start(
        &self,
        direction: u8,
        enqueue: impl FnOnce() -> Result<backend::Event, Error>,
    ) -> Result<backend::Event, Error> {
        let mut events = self.lock();
        let before = if direction == INTO_HOST { INTO_HOST | FROM_HOST } else { INTO_HOST };
        wait_for(&mut events, before);
        events.retain(|(event, _)| matches!(event.is_complete(), Ok(false)));
        let started = enqueue();
        if let Ok(event) = &started {
            events.push((event.clone(), direction));
        }
        self.update(&events);
        started
    }

    /// Waits for the pending copies in `directions`: before an access.
    fn settle(&self, directions: u8) {
        if self.state.load(Ordering::Acquire) & directions == 0 {
            return;
        }
        let mut events = self.lock();
        wait_for(&mut events, directions);
        self.update(&events);
    }

    /// Forgets the copies that completed: after a [`Transfer`] completed.
    fn forget_completed(&self) {
        if self.state.load(Ordering::Acquire) == 0 {
            return;
        }
        let mut events = self.lock();
        events.retain(|(event, _)| matches!(event.is_complete(), Ok(false)));
        self.update(&events);
    }

    fn update(&self, events: &[(backend::Event, u8)]) {
        let state = events.iter().fold(0, |state, (_, direction)| state | direction);
        self.state.store(state, Ordering::Release);
    }
}

/// Waits for the copies of `events` in `directions`, and forgets them. Their `Transfer` was
/// forgotten, so nobody else hears of a failure: it is logged.
fn wait_for(events: &mut Vec<(backend::Event, u8)>, directions: u8) {
    events.retain(|(event, direction)| {
        if direction & directions == 0 {
            return true;
        }
        if let Err(e) = event.wait() {
            log::warn!("a copy to or from a host buffer, its transfer forgotten, failed: {e}");
        }
        false
    });
}

/// An asynchronous copy between a buffer and a [`HostBuffer`], which it borrows until the copy
/// completed: exclusively for a copy into the host buffer ([`Buffer::read_into_async`]),
/// shared for one out of it ([`Buffer::write_async`]), so that the compiler refuses to let the
/// host read memory the device still writes, or write memory the device still reads.
///
/// [`Transfer::wait`] waits and gives the copy's error ([`Transfer::wait_timeout`] with a time
/// limit); a `Transfer` is a [`Future`] too, whose `.await` ends the borrow when the copy
/// completed; dropping a `Transfer` waits (and logs an error). Its [`Transfer::event`] orders
/// launches after the copy ([`crate::Launch::after`]) without the host waiting; later
/// commands on the buffer are ordered after it anyway.
#[must_use = "dropping a Transfer waits for its copy: keep it while other work runs, then wait"]
pub struct Transfer<'h> {
    event: Event,
    /// The host buffer's pending copies, which forget this one once it completed; borrowed
    /// as the host buffer is, for `'h`.
    pending: &'h Pending,
    waited: bool,
}

impl Transfer<'_> {
    /// The event of the copy's completion: give it to a launch to run after the copy, on any
    /// queue of the device (the runtime flushes the copy's queue first). Commands that use
    /// the buffer are ordered after the copy without it.
    pub fn event(&self) -> &Event {
        &self.event
    }

    /// Whether the copy completed (a failed one is complete: [`Transfer::wait`] says how).
    pub fn is_complete(&self) -> bool {
        self.event.is_complete()
    }

    /// Blocks until the copy completed or `limit` passed, whichever comes first: whether it
    /// completed, or its error. The host buffer stays borrowed until the `Transfer` goes.
    pub fn wait_timeout(&self, limit: std::time::Duration) -> Result<bool, Error> {
        self.event.wait_timeout(limit)
    }

    /// Blocks until the copy completed, and ends the borrow of the host buffer; the copy's
    /// error if it failed.
    pub fn wait(mut self) -> Result<(), Error> {
        self.waited = true;
        let result = self.event.wait();
        self.pending.forget_completed();
        result
    }
}

impl Drop for Transfer<'_> {
    /// Waits for the copy, so that the host buffer is free when its borrow ends.
    fn drop(&mut self) {
        if self.waited {
            return;
        }
        if let Err(e) = self.event.wait() {
            log::warn!("a copy to or from a host buffer, its transfer dropped, failed: {e}");
        }
        self.pending.forget_completed();
    }
}

impl Future for Transfer<'_> {
    type Output = Result<(), Error>;

    /// Ready once the copy completed (woken as an [`Event`] is), with its error if it failed.
    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let this = &mut *self;
        let Poll::Ready(result) = Pin::new(&mut this.event).poll(cx) else { return Poll::Pending };
        this.waited = true;
        this.pending.forget_completed();
        Poll::Ready(result)
    }
}

impl std::fmt::Debug for Transfer<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Transfer").field("event", &self.event).finish()
    }
}

impl<T: Pod> Buffer<T> {
    /// Starts copying the buffer into `host`, which holds exactly [`Buffer::len`] values,
    /// after everything submitted to the buffer's queue before; returns at once. `host` stays
    /// borrowed until the [`Transfer`] is waited for or dropped, so reading it before the copy
    /// completed does not compile:
    ///
    /// ```compile_fail,E0502
    /// # fn f(q: &sycl_runtime::Queue, data: &sycl_runtime::Buffer<i32>) -> Result<(), sycl_runtime::Error> {
    /// let mut host = q.host_buffer::<i32>(data.len())?;
    /// let transfer = data.read_into_async(&mut host)?;
    /// // error[E0502]: cannot borrow `host` as immutable because it is also borrowed as mutable
    /// println!("{}", host[0]);
    /// transfer.wait()?;
    /// # Ok(()) }
    /// ```
    ///
    /// (rustdoc on the stable toolchain checks only that this fails to compile:
    /// `tests/tests/compile_fail.rs` checks the error, in
    /// `fixtures/misuse/examples/read_before_transfer_waited.rs`.)
    ///
    /// What compiles waits first:
    ///
    /// ```no_run
    /// # fn f(q: &sycl_runtime::Queue, data: &sycl_runtime::Buffer<i32>) -> Result<(), sycl_runtime::Error> {
    /// let mut host = q.host_buffer::<i32>(data.len())?;
    /// let transfer = data.read_into_async(&mut host)?;
    /// // … other work, on the host or other queues …
    /// transfer.wait()?;
    /// println!("{}", host[0]);
    /// # Ok(()) }
    /// ```
    pub fn read_into_async<'h>(&self, host: &'h mut HostBuffer<T>) -> Result<Transfer<'h>, Error> {
        if host.len != self.len() {
            return Err(Error::InvalidArgument(format!(
                "reading a buffer of {} values into a host buffer of {}",
                self.len(),
                host.len
            )));
        }
        self.read_range_async(0..self.len(), host)
    }

    /// Starts copying the values at `range` into the first `range.len()` values of `host`
    /// (which may hold more: one host buffer serves reads of any size up to its own), after
    /// everything submitted to the buffer's queue before; returns at once. `host` stays
    /// borrowed until the [`Transfer`] is waited for or dropped.
    /// (`buffer.slice(range)?.read_into_async(host)`.)
    pub fn read_range_async<'h>(
        &self,
        range: Range<usize>,
        host: &'h mut HostBuffer<T>,
    ) -> Result<Transfer<'h>, Error> {
        self.check_range("reading", &range, range.len())?;
        if range.len() > host.len {
            return Err(Error::InvalidArgument(format!(
                "reading values {}..{} ({} values) into a host buffer of {}",
                range.start,
                range.end,
                range.len(),
                host.len
            )));
        }
        self.slice(range)?.read_into_async(host)
    }

    /// Starts overwriting the buffer with `host`, which holds exactly [`Buffer::len`] values,
    /// after everything submitted to the buffer's queue before; returns at once. `host` stays
    /// borrowed (shared: it can be read, and written to other buffers meanwhile) until the
    /// [`Transfer`] is waited for or dropped.
    pub fn write_async<'h>(&self, host: &'h HostBuffer<T>) -> Result<Transfer<'h>, Error> {
        if host.len != self.len() {
            return Err(Error::InvalidArgument(format!(
                "writing a host buffer of {} values into a buffer of {}",
                host.len,
                self.len()
            )));
        }
        self.write_at_async(0, host)
    }

    /// Starts overwriting the values from `offset` on with every value of `host`, after
    /// everything submitted to the buffer's queue before; returns at once. `host` stays
    /// borrowed (shared) until the [`Transfer`] is waited for or dropped.
    pub fn write_at_async<'h>(
        &self,
        offset: usize,
        host: &'h HostBuffer<T>,
    ) -> Result<Transfer<'h>, Error> {
        let range = offset..offset.saturating_add(host.len);
        self.check_range("writing", &range, host.len)?;
        self.slice(range)?.write_async(host)
    }

    /// The buffer's values in host memory, to read, after everything submitted to its queue
    /// before and every command of another queue that writes it, until the guard goes: where
    /// the device shares the host's memory (the CPU devices, through OpenCL's
    /// `clEnqueueMapBuffer`) they are the buffer's own, with no copy; on CUDA a copy.
    ///
    /// The buffer is borrowed exclusively, so that no launch, copy or other map can name it
    /// while the guard lives (OpenCL leaves undefined a command on a mapped buffer, and on a
    /// CPU device the host would see a kernel write what it holds as `&[T]`). A guard that is
    /// forgotten (`std::mem::forget`) leaves the map in place: the next command on the buffer,
    /// or its drop, ends it.
    ///
    /// ```compile_fail,E0502
    /// # fn f(q: &sycl_runtime::Queue, mut data: sycl_runtime::Buffer<i32>) -> Result<(), sycl_runtime::Error> {
    /// let values = data.map()?;
    /// // error[E0502]: cannot borrow `data` as immutable because it is also borrowed as mutable
    /// q.launch("add_one").arg(&data).global([1024]).run()?;
    /// println!("{}", values[0]);
    /// # Ok(()) }
    /// ```
    ///
    /// (`fixtures/misuse/examples/launch_while_mapped.rs` is this mistake with a generated
    /// launcher; `tests/tests/compile_fail.rs` checks its error, which rustdoc does not.)
    pub fn map(&mut self) -> Result<Mapped<'_, T>, Error> {
        let at = self.map_with(false)?;
        Ok(Mapped { buffer: self, at: Some(at) })
    }

    /// [`Buffer::map`] to read and write, after every command of another queue that uses the
    /// buffer: when the guard goes ([`MappedMut::unmap`], or its drop), the buffer holds what
    /// the host wrote (on CUDA, the copy is written back).
    pub fn map_mut(&mut self) -> Result<MappedMut<'_, T>, Error> {
        let at = self.map_with(true)?;
        Ok(MappedMut { buffer: self, at: Some(at) })
    }

    /// Maps the buffer, kept in its uses until [`Buffer::end_map`]; where it starts.
    fn map_with(&self, write: bool) -> Result<MapAt, Error> {
        // Ends a map a forgotten guard left; from here until the map ends, a graph's replay
        // (which does not borrow the buffer) refuses the buffer. Then orders the map after
        // other queues' commands, a replay's included.
        self.end_map()?;
        self.alloc.uses.hold();
        let mapped = self.settle(if write { Access::Write } else { Access::Read }).and_then(|_| {
            let queue = &self.queue().inner.queue;
            let mapping = queue.map(self.mem(), byte_size::<T>(self.len())?, write)?;
            match check_aligned::<T>(mapping.as_ptr(), "a buffer's map") {
                Ok(()) => Ok(mapping),
                Err(e) => queue.unmap(self.mem(), mapping).and(Err(e)),
            }
        });
        let mapping = match mapped {
            Ok(mapping) => mapping,
            Err(e) => {
                self.alloc.uses.end_map();
                return Err(e);
            }
        };
        let at = mapping.as_ptr();
        self.alloc.uses.lock().map = Some(mapping);
        Ok(MapAt(at))
    }

    /// Ends the buffer's map, once (a guard's, or one a forgotten guard left in place).
    pub(super) fn end_map(&self) -> Result<(), Error> {
        self.alloc.end_map()
    }
}

impl<T: Pod> BufferView<'_, T> {
    /// Starts copying the view's values into the first [`BufferView::len`] values of `host`
    /// (which may hold more), after everything submitted to the buffer's queue before;
    /// returns at once. `host` stays borrowed until the [`Transfer`] is waited for or dropped
    /// (see [`Buffer::read_into_async`]).
    pub fn read_into_async<'h>(&self, host: &'h mut HostBuffer<T>) -> Result<Transfer<'h>, Error> {
        if self.len() > host.len {
            return Err(Error::InvalidArgument(format!(
                "reading {} values into a host buffer of {}",
                self.len(),
                host.len
            )));
        }
        let (offset, size) = (self.start_bytes(), self.size_bytes());
        let out = host.memory.as_ptr();
        let buffer = self.buffer;
        let event = host.pending.start(INTO_HOST, || {
            buffer.ordered(Access::Read, |queue| {
                // SAFETY: `out` holds `host.len` values, at least the `size` bytes read
                // (checked above), and the view lies within the buffer. The memory stays
                // allocated and untouched until the copy completed: the `Transfer` returned
                // borrows `host` exclusively and waits before it goes; forgotten, its event
                // stays in `host`'s pending copies, for which every later access and the drop
                // of `host` wait.
                unsafe { queue.read_async(buffer.mem(), offset, out, size) }
            })
        })?;
        Ok(Transfer {
            event: Event::new(event, buffer.queue().state()),
            pending: &host.pending,
            waited: false,
        })
    }

    /// Starts overwriting the view's values with the first [`BufferView::len`] values of
    /// `host` (which may hold more), after everything submitted to the buffer's queue before;
    /// returns at once. `host` stays borrowed (shared) until the [`Transfer`] is waited for or
    /// dropped.
    pub fn write_async<'h>(&self, host: &'h HostBuffer<T>) -> Result<Transfer<'h>, Error> {
        if self.len() > host.len {
            return Err(Error::InvalidArgument(format!(
                "writing {} values from a host buffer of {}",
                self.len(),
                host.len
            )));
        }
        let (offset, size) = (self.start_bytes(), self.size_bytes());
        let data = host.memory.as_ptr().cast_const();
        let buffer = self.buffer;
        let event = host.pending.start(FROM_HOST, || {
            buffer.ordered(Access::Write, |queue| {
                // SAFETY: `data` holds `host.len` values, at least the `size` bytes written,
                // and the view lies within the buffer (checked above). The memory stays
                // allocated and unchanged until the copy completed: the `Transfer` returned
                // borrows `host` (so nothing can write it) and waits before it goes;
                // forgotten, its event stays in `host`'s pending copies, for which writing to
                // `host` and its drop wait.
                unsafe { queue.write_async(buffer.mem(), offset, data, size) }
            })
        })?;
        Ok(Transfer {
            event: Event::new(event, buffer.queue().state()),
            pending: &host.pending,
            waited: false,
        })
    }
}

/// Where a buffer's map starts: plain host memory, which the guard that holds it lends as
/// `[T]`.
struct MapAt(*mut u8);

// SAFETY: the mapped memory is plain host memory, usable from any thread; the guards that
// hold it hand it out under Rust's borrow rules.
unsafe impl Send for MapAt {}
// SAFETY: as above.
unsafe impl Sync for MapAt {}

/// A buffer's values in host memory, to read ([`Buffer::map`]); derefs to `[T]`. Dropping it
/// ends the map (an error is logged); [`Mapped::unmap`] ends it and gives the error.
pub struct Mapped<'b, T: Pod> {
    buffer: &'b Buffer<T>,
    /// `None` once unmapped.
    at: Option<MapAt>,
}

impl<T: Pod> Mapped<'_, T> {
    /// Ends the map; the driver's error if that failed.
    pub fn unmap(mut self) -> Result<(), Error> {
        self.at = None;
        self.buffer.end_map()
    }
}

impl<T: Pod> Deref for Mapped<'_, T> {
    type Target = [T];

    fn deref(&self) -> &[T] {
        let Some(MapAt(at)) = self.at else { return &[] };
        // SAFETY: the map holds the buffer's `len` values (`byte_size::<T>(len)` bytes, at
        // least one mapped, so the pointer is not null), aligned for `T` (checked by
        // `map_with`), initialised by the driver, until it is ended, which takes the guard by
        // value or `&mut`, or comes after the guard was forgotten (then no slice of it is
        // left). The buffer is borrowed exclusively for the guard's life, so no command on it
        // can be enqueued meanwhile.
        unsafe { std::slice::from_raw_parts(at.cast(), self.buffer.len()) }
    }
}

impl<T: Pod> Drop for Mapped<'_, T> {
    fn drop(&mut self) {
        if self.at.take().is_some() {
            if let Err(e) = self.buffer.end_map() {
                log::warn!("unmapping a buffer: {e}");
            }
        }
    }
}

/// A buffer's values in host memory, to read and write ([`Buffer::map_mut`]); derefs to
/// `[T]`, mutably. Dropping it ends the map and makes what the host wrote the buffer's (an
/// error is logged); [`MappedMut::unmap`] does so and gives the error.
pub struct MappedMut<'b, T: Pod> {
    buffer: &'b Buffer<T>,
    /// `None` once unmapped.
    at: Option<MapAt>,
}

impl<T: Pod> MappedMut<'_, T> {
    /// Ends the map: the buffer holds what the host wrote; the driver's error if that failed.
    pub fn unmap(mut self) -> Result<(), Error> {
        self.at = None;
        self.buffer.end_map()
    }
}

impl<T: Pod> Deref for MappedMut<'_, T> {
    type Target = [T];

    fn deref(&self) -> &[T] {
        let Some(MapAt(at)) = self.at else { return &[] };
        // SAFETY: as for `Mapped`: a map for reading and writing of the buffer's `len`
        // values, aligned, initialised, alive until the guard ends it; the buffer is borrowed
        // exclusively for the guard's life.
        unsafe { std::slice::from_raw_parts(at.cast(), self.buffer.len()) }
    }
}

impl<T: Pod> DerefMut for MappedMut<'_, T> {
    fn deref_mut(&mut self) -> &mut [T] {
        let len = self.buffer.len();
        let Some(MapAt(at)) = self.at else { return &mut [] };
        // SAFETY: as for `deref`; the map was made for writing, and the exclusive borrow of
        // the guard makes the slice the mapped memory's only user while it lives.
        unsafe { std::slice::from_raw_parts_mut(at.cast(), len) }
    }
}

impl<T: Pod> Drop for MappedMut<'_, T> {
    fn drop(&mut self) {
        if self.at.take().is_some() {
            if let Err(e) = self.buffer.end_map() {
                log::warn!("unmapping a buffer (what the host wrote may be lost): {e}");
            }
        }
    }
}
