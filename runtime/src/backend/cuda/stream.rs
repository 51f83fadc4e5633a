//! A CUDA stream: launches and copies in order, each command's event numbered rather than
//! recorded (a launch records none until asked about), and its errors traced with the last
//! kernel launched on it.

use std::ptr;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, OnceLock};

use cudarc::driver::sys::{self, CUresult};

use super::clock::Clock;
use super::context::Context;
use super::event::{End, Lanes, RawEvent, Timing};
use super::staging::{page_locked, resident, STAGED_READ_MIN};
use super::{check, Cuda, Event, Graph, GraphBuilder, Kernel, Mapping, Memory};
use crate::backend::api::{self, Owner, Queue as _};
use crate::backend::native::NativeQueue;
use crate::trace::trace;
use crate::Error;

/// A stream of the device's primary context: launches and copies in order.
pub(crate) struct Stream {
    pub(super) shared: Arc<StreamShared>,
    /// On a profiled stream, what its commands' timestamps count from.
    pub(super) clock: Option<Clock>,
}

/// The stream itself, shared with the events of its commands, which record on it when first
/// asked about (a launch records no event: see [`Event`]) and wait on its callback lanes: it
/// lives as long as the last of them.
pub(super) struct StreamShared {
    pub(super) context: Arc<Context>,
    pub(super) raw: sys::CUstream,
    /// Made by us (destroyed on drop); otherwise a program's, which it keeps alive.
    owned: bool,
    /// Commands enqueued so far: each launch, and each command whose event is recorded, takes
    /// the next number once it is enqueued (its [`Event::order`]).
    pub(super) issued: AtomicU64,
    /// The last event recorded for launches' events, with how many commands it covers.
    recorded: Mutex<Option<(u64, Arc<RawEvent>)>>,
    /// The streams that call the completion callbacks of this stream's events, made at the
    /// first ([`api::Event::on_complete`]).
    pub(super) lanes: Mutex<Lanes>,
    /// The name of the last kernel launched here, which an error of the stream's names.
    last_kernel: Mutex<Option<Arc<str>>>,
    /// Where `last_kernel`'s text lies, as a number: a launch writes the name only when its
    /// kernel's lies elsewhere, so a loop of one kernel pays one relaxed load per launch, and
    /// nothing is allocated. (`last_kernel` holds the text, so no other name can lie there.)
    last_kernel_at: AtomicUsize,
    /// For a program's stream, the object it belongs to (a cudarc `CudaStream`): every event
    /// of the stream holds the stream, so the object outlives them all. Dropped after `drop`
    /// destroyed what is ours.
    _owner: Option<Owner>,
}

// SAFETY: a stream may be used from any thread with its context current; the owner is `Send`.
unsafe impl Send for StreamShared {}

// SAFETY: as above; the driver serializes work submitted to a stream, and the owner is `Sync`.
unsafe impl Sync for StreamShared {}

impl StreamShared {
    pub(super) fn new(
        context: &Arc<Context>,
        raw: sys::CUstream,
        owned: bool,
        owner: Option<Owner>,
    ) -> StreamShared {
        StreamShared {
            context: context.clone(),
            raw,
            owned,
            issued: AtomicU64::new(0),
            recorded: Mutex::new(None),
            lanes: Mutex::new(Lanes::default()),
            last_kernel: Mutex::new(None),
            last_kernel_at: AtomicUsize::new(0),
            _owner: owner,
        }
    }

    /// An event that completes when command number `order` (and everything enqueued before
    /// it) did: the last one recorded when it covers the command, else one recorded now,
    /// which also covers what was enqueued since.
    pub(super) fn covering(&self, order: u64) -> Result<Arc<RawEvent>, Error> {
        let mut recorded = self.recorded.lock().unwrap_or_else(|e| e.into_inner());
        if let Some((covers, event)) = recorded.as_ref() {
            if *covers > order {
                return Ok(event.clone());
            }
        }
        self.context.bind()?;
        // Every command numbered below `covers` is enqueued (its number is taken after).
        let covers = self.issued.load(Ordering::Acquire);
        let event = self.record_raw(false)?;
        *recorded = Some((covers, event.clone()));
        Ok(event)
    }

    /// An event recorded now, with timing when `timed` (the context is bound); an untimed one
    /// is an idle event of the context's when there is one.
    pub(super) fn record_raw(&self, timed: bool) -> Result<Arc<RawEvent>, Error> {
        let idle = match timed {
            false => {
                let spare = self.context.spare_event.swap(ptr::null_mut(), Ordering::AcqRel);
                match spare.is_null() {
                    false => Some(spare),
                    true => {
                        self.context.idle_events.lock().unwrap_or_else(|e| e.into_inner()).pop()
                    }
                }
            }
            true => None,
        };
        let raw = match idle {
            Some(raw) => raw,
            None => {
                let mut raw = ptr::null_mut();
                let flags =
                    if timed { 0 } else { sys::CUevent_flags::CU_EVENT_DISABLE_TIMING as u32 };
                // SAFETY: an out-pointer to a local; the context is bound.
                check("cuEventCreate", unsafe { sys::cuEventCreate(&mut raw, flags) })?;
                raw
            }
        };
        let event = Arc::new(RawEvent { context: self.context.clone(), raw, timed });
        // SAFETY: a live event and stream of one context.
        check("cuEventRecord", unsafe { sys::cuEventRecord(raw, self.raw) })?;
        Ok(event)
    }

    /// Notes the kernel `name` (a [`Kernel::name`]) as the last launched here.
    pub(super) fn launched(&self, name: &Arc<str>) {
        let at = name.as_ptr() as usize;
        if self.last_kernel_at.load(Ordering::Relaxed) != at {
            let mut last = self.last_kernel.lock().unwrap_or_else(|e| e.into_inner());
            *last = Some(name.clone());
            self.last_kernel_at.store(at, Ordering::Relaxed);
        }
    }

    /// The name of the last kernel launched here, if any.
    fn last_kernel(&self) -> Option<Arc<str>> {
        self.last_kernel.lock().unwrap_or_else(|e| e.into_inner()).clone()
    }

    /// `result`, traced with the last kernel launched here when it is an error: after a fault
    /// (a sticky error, which every later call returns) that kernel is the first suspect.
    pub(super) fn named<T>(&self, result: Result<T, Error>) -> Result<T, Error> {
        if let Err(e) = &result {
            if let Some(kernel) = self.last_kernel() {
                trace!("fault", "{e}: the last kernel launched on the queue before it: `{kernel}`");
            }
        }
        result
    }
}

impl Drop for StreamShared {
    fn drop(&mut self) {
        let lanes = self.lanes.get_mut().unwrap_or_else(|e| e.into_inner());
        if (self.owned || lanes.count > 0) && self.context.bind().is_ok() {
            for &lane in &lanes.raw[..lanes.count] {
                // SAFETY: made once, destroyed once. A callback still pending runs all the
                // same: a stream destroyed while the device has work in it is released once
                // that work completed (`cuStreamDestroy`, CUDA driver API, stream
                // management); a callback holds nothing of this stream's.
                unsafe {
                    let _ = sys::cuStreamDestroy_v2(lane);
                }
            }
            if self.owned {
                // SAFETY: created once, destroyed once (its pending work completes as above).
                unsafe {
                    let _ = sys::cuStreamDestroy_v2(self.raw);
                }
            }
        }
    }
}

impl api::Queue<Cuda> for Stream {
    /// A launch records no event (see [`Event`]); the grid is the global size over the local
    /// one, and an offset other than zero is refused.
    fn launch(
        &self,
        kernel: &Kernel,
        global: &[usize],
        local: Option<&[usize]>,
        offset: Option<&[usize]>,
        after: &[&Event],
    ) -> Result<Event, Error> {
        let (grid, block) = kernel.shape(global, local, offset)?;
        // Asking the driver for the current context costs a launch in a loop about 2 %: a
        // launch without events to wait for or to time trusts the thread's last bind, and
        // binds and tries again if the driver refuses the launch for its context.
        let trusted = after.is_empty() && self.clock.is_none() && self.shared.context.was_bound();
        if !trusted {
            self.shared.context.bind()?;
            self.wait_events(after)?;
        }
        let shared = kernel.dynamic_shared(global.len(), &self.shared.context)?;
        let start = self.start()?;
        let launch = || {
            // SAFETY: `params` holds one pointer per kernel parameter, each to a value of the
            // parameter's size (the argument check compared them with the kernel's record),
            // alive until the call returns (the driver copies them at launch and writes
            // nothing through them).
            unsafe {
                sys::cuLaunchKernel(
                    kernel.function,
                    grid[0],
                    grid[1],
                    grid[2],
                    block[0],
                    block[1],
                    block[2],
                    shared,
                    self.shared.raw,
                    kernel.params.as_ptr().cast_mut(),
                    ptr::null_mut(),
                )
            }
        };
        let mut code = launch();
        if trusted
            && matches!(
                code,
                CUresult::CUDA_ERROR_INVALID_CONTEXT
                    | CUresult::CUDA_ERROR_INVALID_HANDLE
                    | CUresult::CUDA_ERROR_CONTEXT_IS_DESTROYED
            )
        {
            // Another context was made current since this thread's last bind.
            trace!(
                "rebind",
                "{code:?}: another context was current; launched again in the queue's"
            );
            self.shared.context.bind()?;
            code = launch();
        }
        self.shared.named(check("cuLaunchKernel", code))?;
        self.shared.launched(&kernel.name);
        match start {
            Some(timing) => self.timed(timing),
            // No event recorded: the launch's number stands for it until it is asked about.
            None => Ok(self.event(End::Launch, None)),
        }
    }

    /// Nothing to do: the driver submits work as it is launched.
    fn flush(&self) -> Result<(), Error> {
        Ok(())
    }

    /// A large read into pageable memory not yet touched goes through page-locked staging
    /// ([`Stream::read_staged`]).
    fn read_blocking(
        &self,
        mem: &Memory,
        offset: usize,
        out: &mut [u8],
    ) -> Option<Result<(), Error>> {
        Some(self.read(mem, offset, out))
    }

    unsafe fn read_async(
        &self,
        mem: &Memory,
        offset: usize,
        out: *mut u8,
        size: usize,
    ) -> Result<Event, Error> {
        self.shared.context.bind()?;
        self.submit(|| {
            // SAFETY: `size` bytes into `out`, which the caller keeps alive and untouched
            // until the event recorded after the copy completes, from within the allocation
            // (the caller checked the range).
            check("cuMemcpyDtoHAsync", unsafe {
                sys::cuMemcpyDtoHAsync_v2(
                    out.cast(),
                    mem.address + offset as u64,
                    size,
                    self.shared.raw,
                )
            })
        })
    }

    unsafe fn write_async(
        &self,
        mem: &Memory,
        offset: usize,
        data: *const u8,
        size: usize,
    ) -> Result<Event, Error> {
        self.shared.context.bind()?;
        self.submit(|| {
            // SAFETY: `size` bytes from `data`, which the caller keeps alive and unchanged
            // until the event recorded after the copy completes, into the allocation (the
            // caller checked the range).
            check("cuMemcpyHtoDAsync", unsafe {
                sys::cuMemcpyHtoDAsync_v2(
                    mem.address + offset as u64,
                    data.cast(),
                    size,
                    self.shared.raw,
                )
            })
        })
    }

    fn wait_for(&self, after: &[&Event]) -> Result<(), Error> {
        self.shared.context.bind()?;
        self.wait_events(after)
    }

    fn marker(&self) -> Result<Event, Error> {
        self.shared.context.bind()?;
        self.record()
    }

    /// A copy into page-locked staging of the context's, reused from map to map, since device
    /// memory is not the host's (with `write`, written back by the unmap).
    fn map(&self, mem: &Memory, size: usize, write: bool) -> Result<Mapping, Error> {
        let host = self.shared.context.stage(size)?;
        self.shared.context.bind()?;
        // SAFETY: `size` bytes into the staging block (which holds at least `size`), from
        // within the allocation (the caller checked); waited for below.
        let copied = check("cuMemcpyDtoHAsync", unsafe {
            sys::cuMemcpyDtoHAsync_v2(host.block.at, mem.address, size, self.shared.raw)
        })
        .and_then(|()| self.finish());
        match copied {
            Ok(()) => Ok(Mapping { host, size, write }),
            Err(e) => {
                // The copy may still be under way: the block is not used again.
                host.abandon();
                Err(e)
            }
        }
    }

    /// A map for writing is copied back to `mem`; the staging goes back to the context.
    fn unmap(&self, mem: &Memory, mapping: Mapping) -> Result<(), Error> {
        if !mapping.write {
            return Ok(());
        }
        self.shared.context.bind()?;
        // SAFETY: `size` bytes from the staging block into the allocation, from its start (the
        // map's range); waited for below, before the block goes back.
        let copied = check("cuMemcpyHtoDAsync", unsafe {
            sys::cuMemcpyHtoDAsync_v2(
                mem.address,
                mapping.host.block.at,
                mapping.size,
                self.shared.raw,
            )
        })
        .and_then(|()| self.finish());
        if copied.is_err() {
            // The copy may still be under way: the block is not used again.
            mapping.host.abandon();
        }
        copied
    }

    fn copy(
        &self,
        (src, src_offset): (&Memory, usize),
        (dst, dst_offset): (&Memory, usize),
        size: usize,
        after: &[&Event],
    ) -> Result<Event, Error> {
        let (from, to) = (src.context(), dst.context());
        if from.raw != to.raw {
            // A peer copy, between two GPUs (or two contexts of one): each context given
            // access to the other's memory first, once.
            to.reach(from);
            from.reach(to);
            src.share_with(to.device);
            dst.share_with(from.device);
        }
        self.shared.context.bind()?;
        self.wait_events(after)?;
        self.submit(|| {
            let (src_at, dst_at) =
                (src.address + src_offset as u64, dst.address + dst_offset as u64);
            if from.raw == to.raw {
                // SAFETY: two allocations of this context; the caller checked both ranges.
                return check("cuMemcpyDtoDAsync", unsafe {
                    sys::cuMemcpyDtoDAsync_v2(dst_at, src_at, size, self.shared.raw)
                });
            }
            // SAFETY: two allocations of live contexts (their memory holds them); the caller
            // checked both ranges.
            check("cuMemcpyPeerAsync", unsafe {
                sys::cuMemcpyPeerAsync(dst_at, to.raw, src_at, from.raw, size, self.shared.raw)
            })
        })
    }

    /// A 1-, 2- or 4-byte pattern (or a longer one that repeats one), by the driver's memset.
    fn fill(
        &self,
        mem: &Memory,
        pattern: &[u8],
        offset: usize,
        size: usize,
    ) -> Result<Option<Event>, Error> {
        let Some((unit, value)) = memset_unit(pattern) else { return Ok(None) };
        self.shared.context.bind()?;
        let at = mem.address + offset as u64;
        self.submit(|| {
            // SAFETY: `size / unit` units within the allocation (the caller checked the
            // range, a multiple of the pattern's size and so of `unit`).
            let code = unsafe {
                match unit {
                    1 => sys::cuMemsetD8Async(at, value as u8, size, self.shared.raw),
                    2 => sys::cuMemsetD16Async(at, value as u16, size / 2, self.shared.raw),
                    _ => sys::cuMemsetD32Async(at, value, size / 4, self.shared.raw),
                }
            };
            check("cuMemsetAsync", code)
        })
        .map(Some)
    }

    fn finish(&self) -> Result<(), Error> {
        self.shared.context.bind()?;
        // SAFETY: a live stream.
        self.shared.named(check("cuStreamSynchronize", unsafe {
            sys::cuStreamSynchronize(self.shared.raw)
        }))
    }

    fn native(&self) -> Result<NativeQueue, Error> {
        let context = &self.shared.context;
        Ok(NativeQueue::Cuda {
            context: context.raw,
            device: context.device,
            stream: self.shared.raw,
        })
    }

    fn graph(&self) -> Result<Result<GraphBuilder, String>, Error> {
        self.graph_builder()
    }

    fn replay(&self, graph: &Graph, after: &[&Event]) -> Result<Event, Error> {
        self.replay_graph(graph, after)
    }
}

impl Stream {
    /// [`api::Queue::read_blocking`].
    fn read(&self, mem: &Memory, offset: usize, out: &mut [u8]) -> Result<(), Error> {
        self.shared.context.bind()?;
        let from = mem.address + offset as u64;
        if out.len() >= STAGED_READ_MIN && !page_locked(out.as_ptr()) && !resident(out) {
            return self.read_staged(from, out);
        }
        // SAFETY: `out.len()` bytes into `out` from within the allocation (the caller checked
        // `offset + out.len()`); waited for below, before `out` can go.
        check("cuMemcpyDtoHAsync", unsafe {
            sys::cuMemcpyDtoHAsync_v2(out.as_mut_ptr().cast(), from, out.len(), self.shared.raw)
        })?;
        self.finish()
    }

    /// The event of the command just enqueued, which takes the stream's next number.
    pub(super) fn event(&self, end: End, timing: Option<Arc<Timing>>) -> Event {
        let order = self.shared.issued.fetch_add(1, Ordering::AcqRel);
        Event { stream: self.shared.clone(), order, end, timing, pinned: OnceLock::new() }
    }

    /// An event recorded on the stream now: it completes when the work before it does.
    fn record(&self) -> Result<Event, Error> {
        Ok(self.event(End::Recorded(self.shared.record_raw(false)?), None))
    }

    /// On a profiled stream, the start of the command about to be enqueued: a timed event
    /// recorded right before it, and the anchor it counts from.
    pub(super) fn start(&self) -> Result<Option<Timing>, Error> {
        let Some(clock) = &self.clock else { return Ok(None) };
        let start = self.shared.record_raw(true)?;
        Ok(Some(Timing { anchor: clock.anchor_for(&start)?, start }))
    }

    /// The event of the command just enqueued, which `start` began: its end recorded now.
    pub(super) fn timed(&self, timing: Timing) -> Result<Event, Error> {
        let end = End::Recorded(self.shared.record_raw(true)?);
        Ok(self.event(end, Some(Arc::new(timing))))
    }

    /// Enqueues the command `enqueue` makes; its event, timed on a profiled stream.
    fn submit(&self, enqueue: impl FnOnce() -> Result<(), Error>) -> Result<Event, Error> {
        let start = self.start()?;
        enqueue()?;
        match start {
            Some(timing) => self.timed(timing),
            None => self.record(),
        }
    }

    /// [`Stream::wait_for`], the context bound already.
    pub(super) fn wait_events(&self, after: &[&Event]) -> Result<(), Error> {
        for event in after {
            // Recording a launch's event binds its stream's context, another GPU's for an
            // event of another device: this stream's is bound again before the wait.
            let raw = event.resolve()?;
            self.shared.context.bind()?;
            // SAFETY: a live stream and a live event (of any context: the driver takes events
            // of other devices).
            check("cuStreamWaitEvent", unsafe {
                sys::cuStreamWaitEvent(self.shared.raw, raw.raw, 0)
            })?;
        }
        Ok(())
    }
}

/// The unit of a pattern the driver's memset repeats, in bytes (1, 2 or 4: the shortest that
/// the pattern repeats), and its value (its bytes in the machine's order, as the driver reads
/// a `u16` or `u32`); `None` for a pattern that repeats none of them.
pub(super) fn memset_unit(pattern: &[u8]) -> Option<(u32, u32)> {
    let unit = [1, 2, 4].into_iter().find(|&u| {
        pattern.len() >= u
            && pattern.len().is_multiple_of(u)
            && pattern.chunks(u).all(|c| c == &pattern[..u])
    })?;
    let value = match unit {
        1 => u32::from(pattern[0]),
        2 => u32::from(u16::from_ne_bytes([pattern[0], pattern[1]])),
        _ => u32::from_ne_bytes([pattern[0], pattern[1], pattern[2], pattern[3]]),
    };
    Some((unit as u32, value))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_memset_repeats_the_shortest_unit_of_the_pattern() {
        assert_eq!(memset_unit(&[7]), Some((1, 7)));
        assert_eq!(memset_unit(&[7, 7, 7, 7]), Some((1, 7)));
        assert_eq!(memset_unit(&[1, 2, 1, 2]), Some((2, u32::from(u16::from_ne_bytes([1, 2])))));
        assert_eq!(
            memset_unit(&[1, 2, 3, 4, 1, 2, 3, 4]),
            Some((4, u32::from_ne_bytes([1, 2, 3, 4])))
        );
        assert_eq!(memset_unit(&[1, 2, 3]), None);
        assert_eq!(memset_unit(&[]), None);
        assert_eq!(memset_unit(&[1, 2, 3, 4, 5, 6, 7, 8]), None);
    }
}
