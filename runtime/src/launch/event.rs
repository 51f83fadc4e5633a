//! Events: what an asynchronous command hands back. An [`Event`] is waited for
//! ([`Event::wait`], with a time limit [`Event::wait_timeout`], [`wait_all`]), asked
//! ([`Event::is_complete`]), awaited (it is a [`Future`], woken by the driver's own completion
//! callback: `clSetEventCallback`, or a CUDA stream callback, which the driver also calls
//! when the work failed), and given to a launch on any queue of any device to order it
//! after ([`crate::Launch::after`]).
//!
//! Where a driver calls no callback for a command that ended abnormally (PoCL 3.1), an awaited
//! or time-limited event of that device is also watched by one thread of the runtime's, which
//! asks its status every few milliseconds while such events are pending: every completion
//! arrives, a failure included.

use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Condvar, Mutex, OnceLock};
use std::task::{Context, Poll, Waker};
use std::time::{Duration, Instant};

use crate::backend;
use crate::backend::native::NativeEvent;
use crate::program::DeviceState;
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
/// A command that ends abnormally (it faulted, or a command it waits for failed) completes
/// with its error: [`Event::wait`], [`Event::wait_timeout`] and an `.await` give it.
pub struct Event {
    pub(crate) event: backend::Event,
    /// The device the command runs on.
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
        self.event.flush()?;
        self.event.wait()
    }

    /// Blocks until the command completed or `limit` passed, whichever comes first: whether
    /// it completed (`Ok(false)`: still running), or its error if it failed.
    pub fn wait_timeout(&self, limit: Duration) -> Result<bool, Error> {
        let deadline = Instant::now() + limit;
        if self.event.is_complete()? {
            return self.event.wait().map(|()| true);
        }
        self.event.flush()?;
        let signal = Arc::new(Signal::default());
        let done = signal.clone();
        self.event.on_complete(Box::new(move || done.set()))?;
        if !self.device.failure_callbacks() {
            watch(self.event.clone(), Waiting::Signal(signal.clone()));
        }
        loop {
            if self.event.is_complete()? {
                return self.event.wait().map(|()| true);
            }
            let now = Instant::now();
            if now >= deadline {
                return Ok(false);
            }
            signal.wait(deadline - now);
        }
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

/// A flag a thread can wait on, with a time limit.
#[derive(Default)]
struct Signal {
    set: Mutex<bool>,
    changed: Condvar,
}

impl Signal {
    fn set(&self) {
        *self.set.lock().unwrap_or_else(|e| e.into_inner()) = true;
        self.changed.notify_all();
    }

    /// Waits until it is set, or `limit` passed.
    fn wait(&self, limit: Duration) {
        let set = self.set.lock().unwrap_or_else(|e| e.into_inner());
        let _ = self.changed.wait_timeout_while(set, limit, |set| !*set);
    }
}

/// Who waits for a watched event.
enum Waiting {
    Signal(Arc<Signal>),
    Task(Arc<Wakeup>),
}

impl Waiting {
    fn wake(&self) {
        match self {
            Waiting::Signal(signal) => signal.set(),
            Waiting::Task(wakeup) => wakeup.wake(),
        }
    }
}

/// Events watched for a driver that calls no callback when a command fails.
struct Watched {
    events: Mutex<Vec<(backend::Event, Waiting)>>,
    added: Condvar,
}

/// Adds `event` to the events the watcher thread (started at the first) asks about every
/// few milliseconds until each completed or failed; then wakes `waiting`.
fn watch(event: backend::Event, waiting: Waiting) {
    static WATCHED: OnceLock<Arc<Watched>> = OnceLock::new();
    let watched = WATCHED.get_or_init(|| {
        let watched = Arc::new(Watched { events: Mutex::default(), added: Condvar::new() });
        let shared = watched.clone();
        let started = std::thread::Builder::new()
            .name("sycl-event-watch".into())
            .spawn(move || watch_loop(&shared));
        if let Err(e) = started {
            log::warn!("no thread to watch events on a driver without failure callbacks: {e}");
        }
        watched
    });
    watched.events.lock().unwrap_or_else(|e| e.into_inner()).push((event, waiting));
    watched.added.notify_one();
}

/// The watcher thread: sleeps while nothing is watched; otherwise asks each event's status,
/// every millisecond at first and less often (up to every 10 ms) while nothing changes.
fn watch_loop(watched: &Watched) {
    let mut pause = Duration::from_millis(1);
    let mut events = watched.events.lock().unwrap_or_else(|e| e.into_inner());
    loop {
        if events.is_empty() {
            events = watched.added.wait(events).unwrap_or_else(|e| e.into_inner());
            pause = Duration::from_millis(1);
            continue;
        }
        let before = events.len();
        events.retain(|(event, waiting)| {
            let pending = matches!(event.is_complete(), Ok(false));
            if !pending {
                waiting.wake();
            }
            pending
        });
        pause = if events.len() < before {
            Duration::from_millis(1)
        } else {
            (pause * 2).min(Duration::from_millis(10))
        };
        events = watched.added.wait_timeout(events, pause).unwrap_or_else(|e| e.into_inner()).0;
    }
}

impl Wakeup {
    /// Marks the event done and wakes the task awaiting it (once).
    fn wake(&self) {
        self.done.store(true, Ordering::Release);
        if let Some(waker) = self.waker.lock().unwrap_or_else(|e| e.into_inner()).take() {
            waker.wake();
        }
    }
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
            // Submitted, so that it will complete.
            this.event.flush()?;
            // The driver's callback holds the shared state until it runs, once.
            let shared = wakeup.clone();
            this.event.on_complete(Box::new(move || shared.wake()))?;
            if !this.device.failure_callbacks() {
                watch(this.event.clone(), Waiting::Task(wakeup.clone()));
            }
        }
        // The callback may have run before the waker was stored: ask again.
        if wakeup.done.load(Ordering::Acquire) || this.event.is_complete()? {
            return Poll::Ready(this.event.wait());
        }
        Poll::Pending
    }
}
