//! Automatic ordering per buffer: what makes launches and copies on several queues safe
//! without the program ordering them by hand.
//!
//! Every buffer keeps its [`Uses`]: the event of the last command that wrote it, and of the
//! last command of each queue that read it since. A command names the buffers it uses and how
//! ([`Access`]: a launch reads through a `constant` or `global const` pointer parameter and
//! writes through any other; a copy reads its source and writes its destination; a read to
//! the host reads, a write or a fill writes). [`ordered`] enqueues it after the last
//! conflicting use on *other* queues (read after write, write after read, write after write):
//! the queue waits on the device, the host does not. A queue is in order, so its own earlier
//! uses need no wait, and a loop of launches on one queue waits for nothing: it takes one
//! uncontended lock per buffer, and allocates nothing. Nor does it keep each launch's event: a
//! queue's record that its later commands used the buffer again is marked stale, and a
//! command of another queue that must wait for it takes a new event of that queue then (an
//! OpenCL marker, a CUDA stream's latest command), which covers those uses and everything
//! before them.
//!
//! The buffers' locks are held from the check to the record, so two threads that give two
//! queues conflicting commands order them one way or the other, never not at all; they are
//! taken in address order, so that no two commands deadlock. A blocking read or write is
//! enqueued, recorded, and only then waited for, with no lock held; but for CUDA's blocking
//! read (staged through page-locked memory when large), which holds its buffer's lock until
//! the bytes are there.
//!
//! An event of another queue is handed to this queue's driver after that queue is flushed
//! (`clFlush`): OpenCL need not submit a queue's commands until then, and a command waiting
//! for one that is never submitted waits forever.
//!
//! Across devices the same rules hold: a buffer's uses may be commands of another device (a
//! copy between devices uses both buffers), and a launch may wait for events of any device.
//! Where the queue's driver cannot wait for such an event on the device (an OpenCL queue, for
//! an event of another context; any queue, for an event of the other driver) the host waits
//! for it before enqueueing ([`wait_on`]); CUDA GPUs wait for each other on the device.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};

use smallvec::SmallVec;

use crate::backend;
use crate::Error;

/// How a command uses a buffer.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub(crate) enum Access {
    Read,
    Write,
}

/// A queue's number: what tells the uses of two queues apart. Never reused, unlike an address.
pub(crate) fn next_queue_id() -> u64 {
    static NEXT: AtomicU64 = AtomicU64::new(1);
    NEXT.fetch_add(1, Ordering::Relaxed)
}

/// A buffer's recent uses: the commands a later command may have to wait for. One per
/// allocation: a view's uses are its buffer's.
pub(crate) struct Uses {
    state: Mutex<State>,
    /// The whole allocation (a map left in place is ended on it).
    root: Arc<backend::Memory>,
}

#[derive(Default)]
pub(crate) struct State {
    /// The last command that wrote the buffer.
    write: Option<Use>,
    /// The commands that read it since the last write, the latest of each queue (a queue
    /// runs in order, so its latest read comes after its others).
    reads: SmallVec<[Use; 2]>,
    /// The buffer's map while a guard ([`crate::Mapped`], [`crate::MappedMut`]) lives: the
    /// guard ends it when it goes; a guard that was forgotten (`std::mem::forget`) left it
    /// in place, and the next command on the buffer, or its drop, ends it.
    pub(crate) map: Option<backend::Mapping>,
    /// The buffer is mapped, or being mapped, while the program may hold a guard of it: set
    /// before the map is ordered and cleared when it ends. Commands that borrow the buffer
    /// cannot meet a live guard (the guard borrows it exclusively); a graph's replay, which
    /// holds the buffer without borrowing it, refuses it while this is set.
    held: bool,
}

struct Use {
    queue: u64,
    event: backend::Event,
    /// The queue used the buffer again after `event`: a command that waits for this use
    /// takes [`backend::Event::later`] of it first.
    stale: bool,
    /// `event` is the runtime's marker (from `later`): given up once it completed (PoCL aborts
    /// the process when a failure reaches a marker released while pending).
    marker: bool,
}

impl Use {
    fn new(queue: u64, event: &backend::Event) -> Use {
        Use { queue, event: event.clone(), stale: false, marker: false }
    }

    /// Makes `event` cover the queue's latest use.
    fn refresh(&mut self) -> Result<(), Error> {
        if self.stale {
            let later = self.event.later()?;
            let was = std::mem::replace(&mut self.event, later);
            if std::mem::replace(&mut self.marker, true) {
                was.release_when_complete();
            }
            self.stale = false;
        }
        Ok(())
    }
}

impl Drop for Use {
    fn drop(&mut self) {
        if self.marker {
            // A clone of the marker's reference, released once it completed; ours drops now.
            self.event.clone().release_when_complete();
        }
    }
}

impl Uses {
    pub(crate) fn new(root: Arc<backend::Memory>) -> Uses {
        Uses { state: Mutex::default(), root }
    }

    /// Marks the buffer as mapped from now on (see [`State::held`]).
    pub(crate) fn hold(&self) {
        self.lock().held = true;
    }

    /// Ends the buffer's mapped state: its map, if one is in place, for the caller to end.
    pub(crate) fn end_map(&self) -> Option<backend::Mapping> {
        let mut state = self.lock();
        state.held = false;
        state.map.take()
    }

    /// The whole allocation.
    pub(crate) fn root(&self) -> &Arc<backend::Memory> {
        &self.root
    }

    pub(crate) fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Notes that queue `queue` was given more work that uses the buffer, which no event of
    /// ours stands for (another library's, on the queue's stream): its uses are marked stale,
    /// so a command of another queue that must wait for them waits for that work too.
    pub(crate) fn used_later_by(&self, queue: u64) {
        let mut state = self.lock();
        let State { write, reads, .. } = &mut *state;
        for u in write.iter_mut().chain(reads.iter_mut()).filter(|u| u.queue == queue) {
            u.stale = true;
        }
    }

    /// The events of every command that may still use the buffer, for its memory to be freed
    /// after them; the uses are forgotten.
    pub(crate) fn take_all(&self) -> Vec<backend::Event> {
        let mut state = self.lock();
        let reads = std::mem::take(&mut state.reads);
        let uses = state.write.take().into_iter().chain(reads);
        uses.map(|mut u| {
            if let Err(e) = u.refresh() {
                log::warn!("a dropped buffer's last use: {e}; freed after an earlier one");
            }
            u.marker = false; // the caller gives it up once it completed
            u.event.clone()
        })
        .collect()
    }
}

impl State {
    /// Other queues' uses that a command of `queue` using the buffer as `access` must come
    /// after, each made to cover its queue's latest use first.
    fn refresh_conflicts(&mut self, queue: u64, access: Access) -> Result<(), Error> {
        let reads = match access {
            Access::Read => [].iter_mut(),
            Access::Write => self.reads.iter_mut(),
        };
        for u in self.write.iter_mut().chain(reads).filter(|u| u.queue != queue) {
            u.refresh()?;
        }
        Ok(())
    }

    /// The events of the uses [`State::refresh_conflicts`] refreshed.
    fn conflicts(&self, queue: u64, access: Access) -> impl Iterator<Item = &backend::Event> {
        let write = self.write.iter();
        let reads = match access {
            Access::Read => [].iter(),
            Access::Write => self.reads.iter(),
        };
        write.chain(reads).filter(move |u| u.queue != queue).map(|u| &u.event)
    }

    /// Records `event` as queue `queue`'s use of the buffer: where the queue's own record is
    /// the one a later command would wait for, it is marked stale rather than replaced (no
    /// event kept per command).
    fn record(&mut self, queue: u64, access: Access, event: &backend::Event) {
        let mine = |u: &Use| u.queue == queue;
        match access {
            Access::Write => {
                // Every use it replaces was waited for (another queue's) or comes before it
                // on its own queue.
                let only_mine =
                    self.write.as_ref().is_some_and(mine) && self.reads.iter().all(mine);
                self.reads.clear();
                match &mut self.write {
                    Some(write) if only_mine => write.stale = true,
                    write => *write = Some(Use::new(queue, event)),
                }
            }
            Access::Read => {
                if let Some(read) = self.reads.iter_mut().find(|u| mine(u)) {
                    read.stale = true;
                } else if let Some(write) = self.write.as_mut().filter(|w| mine(w)) {
                    // What waits for this read waits for the write anyway: made to cover it.
                    write.stale = true;
                } else {
                    self.reads.push(Use::new(queue, event));
                }
            }
        }
    }
}

/// The buffers a command uses, each with how; a launch names up to eight without allocating.
pub(crate) type Accesses<'a> = SmallVec<[(&'a Uses, Access); 8]>;

/// Enqueues a command on `queue` (numbered `id`) that uses `accesses`, after the commands
/// `after` stands for and the conflicting uses of those buffers on other queues, and records
/// its event as their latest use. `enqueue` receives the events to wait for (on the device)
/// and returns the command's event. A map that a forgotten guard left in place is ended
/// first, on `queue`.
pub(crate) fn ordered(
    queue: &backend::Queue,
    id: u64,
    accesses: &mut Accesses<'_>,
    after: &[&backend::Event],
    enqueue: impl FnOnce(&[&backend::Event]) -> Result<backend::Event, Error>,
) -> Result<backend::Event, Error> {
    // The common case first: one buffer, nothing to wait for, no map left in place (a loop
    // of launches on one queue), with one lock and nothing else to build.
    if let ([(uses, access)], []) = (&accesses[..], after) {
        let mut state = uses.lock();
        if state.map.is_none() && state.conflicts(id, *access).next().is_none() {
            let event = enqueue(&[])?;
            state.record(id, *access, &event);
            return Ok(event);
        }
    }
    ordered_with(queue, id, accesses, after, None, enqueue)
}

/// [`ordered`] for a command that holds its buffers without borrowing them (a graph's
/// replay): a buffer that is mapped, or whose map a forgotten guard left in place, is refused
/// with the error `mapped` makes of its position in `accesses` (a live guard may be using its
/// memory; a borrowing command would have ended a forgotten one).
pub(crate) fn ordered_unborrowed(
    queue: &backend::Queue,
    id: u64,
    accesses: &mut Accesses<'_>,
    mapped: &dyn Fn(&Uses) -> Error,
    enqueue: impl FnOnce(&[&backend::Event]) -> Result<backend::Event, Error>,
) -> Result<backend::Event, Error> {
    ordered_with(queue, id, accesses, &[], Some(mapped), enqueue)
}

fn ordered_with(
    queue: &backend::Queue,
    id: u64,
    accesses: &mut Accesses<'_>,
    after: &[&backend::Event],
    mapped: Option<&dyn Fn(&Uses) -> Error>,
    enqueue: impl FnOnce(&[&backend::Event]) -> Result<backend::Event, Error>,
) -> Result<backend::Event, Error> {
    // In address order, each buffer once (as a writer when any use writes): one lock each.
    if accesses.len() > 1 {
        accesses.sort_unstable_by_key(|(uses, access)| (*uses as *const Uses, *access));
        accesses.dedup_by(|later, kept| {
            let same = std::ptr::eq(later.0, kept.0);
            if same {
                kept.1 = kept.1.max(later.1);
            }
            same
        });
    }
    let mut states: SmallVec<[MutexGuard<'_, State>; 8]> =
        accesses.iter().map(|(uses, _)| uses.lock()).collect();
    for (state, (uses, _)) in states.iter_mut().zip(accesses.iter()) {
        if let Some(mapped) = mapped.filter(|_| state.held || state.map.is_some()) {
            return Err(mapped(uses));
        }
        if let Some(mapping) = state.map.take() {
            state.held = false;
            queue.unmap(&uses.root, mapping)?;
        }
    }
    for (state, (_, access)) in states.iter_mut().zip(accesses.iter()) {
        state.refresh_conflicts(id, *access)?;
    }
    let mut waits: SmallVec<[&backend::Event; 8]> = SmallVec::new();
    for event in after {
        wait_on(queue, event, &mut waits)?;
    }
    for (state, (_, access)) in states.iter().zip(accesses.iter()) {
        for event in state.conflicts(id, *access) {
            // One that ended needs no wait: nor does one that failed, which would fail this
            // command too (PoCL), leaving the buffer unusable after one failed command.
            if !matches!(event.is_complete(), Ok(false)) {
                continue;
            }
            wait_on(queue, event, &mut waits)?;
        }
    }
    let event = enqueue(&waits)?;
    drop(waits);
    for (state, (_, access)) in states.iter_mut().zip(accesses.iter()) {
        state.record(id, *access, &event);
    }
    Ok(event)
}

/// Makes a command for `queue` come after `event`: on the device where the queue's driver can
/// wait for it (`event` joins `waits`: an event of the queue's own OpenCL context, or of any
/// CUDA GPU), otherwise on the host, now (an event of the other driver, or of another OpenCL
/// context: another device). Either way the event is submitted first (`clFlush`), so that the
/// wait can end. The host's wait may hold buffers' locks: it cannot deadlock, since the
/// command it waits for is submitted and waits for nothing the host still has to do.
pub(crate) fn wait_on<'e>(
    queue: &backend::Queue,
    event: &'e backend::Event,
    waits: &mut SmallVec<[&'e backend::Event; 8]>,
) -> Result<(), Error> {
    event.flush()?;
    if queue.takes(event) {
        waits.push(event);
        Ok(())
    } else {
        event.wait()
    }
}
