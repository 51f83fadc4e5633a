//! Events: what an asynchronous command hands back. An [`Event`] is waited for
//! ([`Event::wait`], [`wait_all`]), asked ([`Event::is_complete`]), awaited (it is a
//! [`Future`], woken by the driver's own completion callback: `clSetEventCallback`, or a host
//! function on a CUDA stream that waits for the event; no thread polls), and given to a launch
//! on any queue of the same device to order it after ([`crate::Launch::after`]).

use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, OnceLock};
use std::task::{Context, Poll, Waker};
use std::time::Duration;

use crate::backend;
use crate::backend::native::NativeEvent;
use crate::build::DeviceState;
use crate::Error;

/// The completion of a command enqueued on a queue: a kernel launch, a copy, a fill. Cheap to
/// clone (every clone stands for the same command); `Send + Sync`, so it can be waited for or
/// awaited on any thread.
///
/// On a CUDA device a launch records no driver event (that would cost every launch): its
/// event is recorded when first waited for, asked, awaited or given to [`crate::Launch::after`],
/// and then also covers what the queue was given since. It never completes too early; it may
/// complete later than its own kernel would have.
///
/// A command that ends abnormally (a command it waits for failed) completes with its error.
/// PoCL 3.1 calls no completion callback for such a command: a task awaiting its event there
/// is not woken by the driver ([`Event::wait`] and [`Event::is_complete`] see the error).
pub struct Event {
    pub(crate) event: backend::Event,
    /// The device the command runs on: an event orders only launches of the same device.
    pub(crate) device: Arc<DeviceState>,
    /// The waker of the task awaiting the event, made when one first polls it (a launch
    /// allocates nothing for it). Each clone has its own: two tasks awaiting two clones are
    /// each woken.
    wakeup: OnceLock<Arc<Wakeup>>,
}

impl Clone for Event {
    /// The same command's event, awaited apart from this one: a task awaiting the clone
    /// registers its own waker (sharing this one's slot, the second task's waker would
    /// replace the first's, and the first would never be woken).
    fn clone(&self) -> Event {
        Event { event: self.event.clone(), device: self.device.clone(), wakeup: OnceLock::new() }
    }
}

/// Where the driver's completion callback finds the task to wake.
#[derive(Default)]
struct Wakeup {
    done: AtomicBool,
    waker: Mutex<Option<Waker>>,
}

impl Event {
    pub(crate) fn new(event: backend::Event, device: Arc<DeviceState>) -> Event {
        Event { event, device, wakeup: OnceLock::new() }
    }

    /// The driver's event: an OpenCL `cl_event`, or a CUDA `CUevent` (for a launch, recorded
    /// now if it was not yet; see above). Valid while this event (or a clone) lives; a program
    /// may wait on it, or make its own work wait for it (`cuStreamWaitEvent`,
    /// `clEnqueueBarrierWithWaitList`).
    pub fn native(&self) -> Result<NativeEvent, Error> {
        self.event.native()
    }

    /// Blocks until the command completed; its error, if it failed.
    pub fn wait(&self) -> Result<(), Error> {
        self.event.wait()
    }

    /// Whether the command completed (a command that failed is complete: [`Event::wait`]
    /// returns its error).
    pub fn is_complete(&self) -> bool {
        self.event.is_complete().unwrap_or(true)
    }

    /// When the command was queued, submitted, started and ended, in nanoseconds of the
    /// device's clock; waits for it to end. Its queue must have been made with profiling
    /// ([`crate::Queue::with_device_profiled`], [`crate::Queue::profiled`]). On CUDA the
    /// clock starts with the queue, and only the start and the end are timed (queued and
    /// submitted are the start).
    pub fn profile(&self) -> Result<Profile, Error> {
        self.wait()?;
        match self.event.profile()? {
            Some([queued, submitted, started, ended]) => {
                Ok(Profile { queued, submitted, started, ended })
            }
            None => Err(Error::InvalidArgument(format!(
                "profiling an event of a queue on {} made without profiling: make the queue \
                 with Queue::with_device_profiled or Queue::profiled",
                self.device.name
            ))),
        }
    }

    /// How long the command ran on the device, from its start to its end; waits for it to
    /// end (see [`Event::profile`]).
    pub fn elapsed(&self) -> Result<Duration, Error> {
        let profile = self.profile()?;
        Ok(Duration::from_nanos(profile.ended.saturating_sub(profile.started)))
    }

    /// The name of the device the command runs on.
    pub fn device_name(&self) -> &str {
        &self.device.name
    }
}

impl std::fmt::Debug for Event {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Event")
            .field("device", &self.device.name)
            .field("complete", &self.is_complete())
            .finish()
    }
}

/// A command's device timestamps, in nanoseconds of the device's clock ([`Event::profile`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Profile {
    /// When the host enqueued it.
    pub queued: u64,
    /// When it was submitted to the device.
    pub submitted: u64,
    /// When it started running.
    pub started: u64,
    /// When it ended.
    pub ended: u64,
}

/// Blocks until every one of `events` completed; the first error among them.
pub fn wait_all(events: &[&Event]) -> Result<(), Error> {
    let mut first = Ok(());
    for event in events {
        if let Err(e) = event.wait() {
            first = first.and(Err(e));
        }
    }
    first
}

impl Future for Event {
    type Output = Result<(), Error>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let this = self.get_mut();
        if this.event.is_complete()? {
            return Poll::Ready(this.event.wait());
        }
        let mut first = false;
        let wakeup = this.wakeup.get_or_init(|| {
            first = true;
            Arc::default()
        });
        *wakeup.waker.lock().unwrap_or_else(|e| e.into_inner()) = Some(cx.waker().clone());
        if first {
            // The driver's callback holds the shared state until it runs, once.
            let shared = wakeup.clone();
            this.event.on_complete(Box::new(move || {
                shared.done.store(true, Ordering::Release);
                if let Some(waker) = shared.waker.lock().unwrap_or_else(|e| e.into_inner()).take() {
                    waker.wake();
                }
            }))?;
        }
        // The callback may have run before the waker was stored: ask again.
        if wakeup.done.load(Ordering::Acquire) || this.event.is_complete()? {
            return Poll::Ready(this.event.wait());
        }
        Poll::Pending
    }
}
