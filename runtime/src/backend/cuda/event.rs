//! CUDA events: the completion of a launch or a copy and of its stream's work before it, a
//! launch's number until it is first asked about, and completion callbacks on a stream's
//! lanes.

use std::ffi::c_void;
use std::ptr;
use std::sync::atomic::Ordering;
use std::sync::{Arc, OnceLock};

use cudarc::driver::sys::{self, CUresult};

use super::check;
use super::clock::{elapsed_ms, stamps, Anchor};
use super::context::{Context, IDLE_EVENTS};
use super::stream::StreamShared;
use crate::backend::api::{self, Callback};
use crate::backend::native::NativeEvent;
use crate::Error;

/// The completion of a launch (or a copy) and of the work its stream had before it. A launch
/// records no CUDA event: its event is the launch's number on its stream, and becomes a
/// recorded event when it is first waited for, asked, awaited or waited on by other work —
/// one that covers what the stream was given since, too (a superset: never too early).
#[derive(Clone)]
pub(crate) struct Event {
    /// Its stream, which it keeps alive (and with it, an adopted stream's owner).
    pub(super) stream: Arc<StreamShared>,
    /// Its command's number on the stream ([`StreamShared::issued`]): for a launch what
    /// stands for its event, and for any command where it comes among the stream's.
    pub(super) order: u64,
    pub(super) end: End,
    /// On a profiled stream: where the command's timestamps count from, and its start.
    pub(super) timing: Option<Arc<Timing>>,
    /// The recorded event handed out by [`api::Event::native`], held as long as this value so that
    /// the handle stays the same and is not recorded again for other work.
    pub(super) pinned: OnceLock<Arc<RawEvent>>,
}

pub(super) struct Timing {
    pub(super) anchor: Arc<Anchor>,
    pub(super) start: Arc<RawEvent>,
}

#[derive(Clone)]
pub(super) enum End {
    /// An event recorded when the work was enqueued (copies, fills, profiled launches).
    Recorded(Arc<RawEvent>),
    /// A launch, whose [`Event::order`] stands for it.
    Launch,
}

pub(super) struct RawEvent {
    pub(super) context: Arc<Context>,
    pub(super) raw: sys::CUevent,
    /// Made with timing (kept out of the idle events, which have none).
    pub(super) timed: bool,
}

// SAFETY: an event handle may be used from any thread with its context current.
unsafe impl Send for RawEvent {}

// SAFETY: as above; the driver's event calls are thread-safe.
unsafe impl Sync for RawEvent {}

impl Drop for RawEvent {
    fn drop(&mut self) {
        if !self.timed {
            let spare = &self.context.spare_event;
            if spare
                .compare_exchange(ptr::null_mut(), self.raw, Ordering::AcqRel, Ordering::Relaxed)
                .is_ok()
            {
                return;
            }
            let mut idle = self.context.idle_events.lock().unwrap_or_else(|e| e.into_inner());
            if idle.len() < IDLE_EVENTS {
                // Recording it again later replaces what it stood for; work that waits on it
                // now waited on the recording it had when the wait was enqueued.
                idle.push(self.raw);
                return;
            }
        }
        if self.context.bind().is_ok() {
            // SAFETY: created once, destroyed once (work that waits on it keeps its own hold).
            unsafe {
                let _ = sys::cuEventDestroy_v2(self.raw);
            }
        }
    }
}

/// Called by the driver when a callback lane reaches a callback: once the event the lane
/// waited for completed, or once a device error ended the lane's work. The driver calls each
/// callback added with `cuStreamAddCallback` exactly once, passing `CUDA_SUCCESS` or the
/// error ("In the event of a device error, all subsequently executed callbacks will receive
/// an appropriate error": the driver API's stream management; a host function of
/// `cuLaunchHostFunc` is not called after a fault at all). The status is not kept: the
/// event's own wait and query return the error. Calls `done`, which neither blocks nor calls
/// the driver (callbacks may make no CUDA call).
unsafe extern "C" fn called(_stream: sys::CUstream, _status: CUresult, data: *mut c_void) {
    // SAFETY: `data` is the `Box<Callback>` leaked by `Event::on_complete`; the driver calls
    // each callback once.
    let done = unsafe { Box::from_raw(data.cast::<Callback>()) };
    // A panic must not unwind into the driver (it would abort the process).
    let _ = std::panic::catch_unwind(std::panic::AssertUnwindSafe(done));
}

impl Event {
    /// The recorded event that stands for this one.
    pub(super) fn resolve(&self) -> Result<Arc<RawEvent>, Error> {
        match &self.end {
            End::Recorded(event) => Ok(event.clone()),
            End::Launch => self.stream.covering(self.order),
        }
    }
}

impl api::Event for Event {
    /// The driver's own code of a fault.
    fn wait(&self) -> Result<(), Error> {
        self.stream.named((|| {
            let end = self.resolve()?;
            self.stream.context.bind()?;
            // SAFETY: a live event.
            check("cuEventSynchronize", unsafe { sys::cuEventSynchronize(end.raw) })
        })())
    }

    fn is_complete(&self) -> Result<bool, Error> {
        self.stream.named((|| {
            let end = self.resolve()?;
            self.stream.context.bind()?;
            // SAFETY: a live event.
            match unsafe { sys::cuEventQuery(end.raw) } {
                CUresult::CUDA_SUCCESS => Ok(true),
                CUresult::CUDA_ERROR_NOT_READY => Ok(false),
                code => check("cuEventQuery", code).map(|()| true),
            }
        })())
    }

    /// From the stream's creation (see [`stamps`] and [`Clock`](super::clock::Clock)); waits for the work.
    fn profile(&self) -> Result<Option<[u64; 4]>, Error> {
        let Some(timing) = &self.timing else { return Ok(None) };
        self.wait()?;
        let anchor = timing.anchor.offset()?;
        let to_start = elapsed_ms(&timing.anchor.event, &timing.start)?;
        let took = elapsed_ms(&timing.start, &*self.resolve()?)?;
        Ok(Some(stamps(anchor, to_start, took)))
    }

    /// A callback on one of its stream's lanes ([`Lanes`]), after the lane waits for the
    /// event.
    fn on_complete(&self, done: Callback) -> Result<(), Error> {
        self.stream.named((|| {
            let end = self.resolve()?;
            let stream = &self.stream;
            stream.context.bind()?;
            let mut lanes = stream.lanes.lock().unwrap_or_else(|e| e.into_inner());
            let lane = lanes.lane_for(self.order, &stream.context)?;
            // SAFETY: a live stream and event of the bound context.
            check("cuStreamWaitEvent", unsafe { sys::cuStreamWaitEvent(lane, end.raw, 0) })?;
            let data = Box::into_raw(Box::new(done));
            // SAFETY: `called` takes `data` back exactly once, when the driver calls it (it
            // calls every callback it took once, after errors too).
            let added = unsafe { sys::cuStreamAddCallback(lane, Some(called), data.cast(), 0) };
            check("cuStreamAddCallback", added).inspect_err(|_| {
                // SAFETY: the driver refused the callback, so it never takes `data`.
                drop(unsafe { Box::from_raw(data) });
            })
        })())
    }

    /// Recorded when first asked about. It takes a number of its own, which no event recorded
    /// before covers: so it covers work other libraries gave the stream too.
    fn later(&self) -> Result<Event, Error> {
        let order = self.stream.issued.fetch_add(1, Ordering::AcqRel);
        Ok(Event {
            stream: self.stream.clone(),
            order,
            end: End::Launch,
            timing: None,
            pinned: OnceLock::new(),
        })
    }

    /// Nothing to keep: the event goes at once.
    fn release_when_complete(self) {}

    /// Nothing to do: the driver submits work as it is given.
    fn flush(&self) -> Result<(), Error> {
        Ok(())
    }

    fn native(&self) -> Result<NativeEvent, Error> {
        if let Some(event) = self.pinned.get() {
            return Ok(NativeEvent::Cuda(event.raw));
        }
        let event = self.resolve()?;
        Ok(NativeEvent::Cuda(self.pinned.get_or_init(|| event).raw))
    }
}

/// How many callback lanes a stream may have.
const LANES: usize = 4;

/// A stream's callback lanes: each a stream of the runtime's own that waits for the events
/// given to it, in the order given, and after each one calls its callback. An event waits on
/// the lane of its own stream, never behind another queue's work. On one stream events
/// complete in order, so one lane serves callbacks registered in the order of their
/// commands; a callback for an earlier command than one a lane already waits for goes to
/// another lane (see [`pick_lane`]), rather than wait behind that later command.
pub(super) struct Lanes {
    pub(super) raw: [sys::CUstream; LANES],
    /// The [`Event::order`] of the latest event each lane waits for.
    last: [u64; LANES],
    /// Lanes made so far.
    pub(super) count: usize,
}

impl Default for Lanes {
    fn default() -> Lanes {
        Lanes { raw: [ptr::null_mut(); LANES], last: [0; LANES], count: 0 }
    }
}

impl Lanes {
    /// The lane for a callback of command number `order`, made when needed (the context is
    /// bound).
    fn lane_for(&mut self, order: u64, context: &Context) -> Result<sys::CUstream, Error> {
        let i = match pick_lane(&self.last[..self.count], order, LANES) {
            Some(i) => i,
            None => {
                let i = self.count;
                self.raw[i] = context.own_stream()?;
                self.last[i] = order;
                self.count += 1;
                i
            }
        };
        self.last[i] = self.last[i].max(order);
        Ok(self.raw[i])
    }
}

/// Which lane a callback of command number `order` waits on, given the latest command each
/// lane made so far waits for (`last`): the lane whose latest is the latest not after
/// `order` (so the callback waits behind nothing that ends after its command); else `None`,
/// for a new lane, while fewer than `max` are made; else the lane whose latest comes first
/// (the callback then waits for that later command of its stream too).
fn pick_lane(last: &[u64], order: u64, max: usize) -> Option<usize> {
    let fits = last.iter().enumerate().filter(|&(_, &l)| l <= order).max_by_key(|&(_, &l)| l);
    match fits {
        Some((i, _)) => Some(i),
        None if last.len() < max => None,
        None => last.iter().enumerate().min_by_key(|&(_, &l)| l).map(|(i, _)| i),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_callback_waits_on_a_lane_behind_nothing_that_ends_after_its_command() {
        // Registered in the order of their commands: one lane serves them all.
        assert_eq!(pick_lane(&[], 0, LANES), None, "the first makes a lane");
        assert_eq!(pick_lane(&[3], 5, LANES), Some(0));
        assert_eq!(pick_lane(&[5], 5, LANES), Some(0), "the same command again");
        // An earlier command than the lane waits for: another lane, not behind command 9.
        assert_eq!(pick_lane(&[9], 4, LANES), None);
        // Of the lanes it may follow, the one whose latest command is the latest.
        assert_eq!(pick_lane(&[9, 4], 6, LANES), Some(1));
        assert_eq!(pick_lane(&[2, 4, 3], 7, LANES), Some(1));
        // All lanes made and each ahead of it: the one that gets there first.
        assert_eq!(pick_lane(&[9, 7, 12, 8], 5, LANES), Some(1));
    }
}
