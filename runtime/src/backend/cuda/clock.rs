//! A profiled stream's clock: each command's timestamps measured from an anchor recorded
//! shortly before it, the anchors chained in integer nanoseconds, so that stamps keep the
//! timer's resolution however old the stream.

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use cudarc::driver::sys::{self, CUresult};

use super::check;
use super::event::RawEvent;
use crate::Error;

/// How long (host time) an anchor of a profiled stream's clock serves before a command's
/// start may replace it.
const REBASE: Duration = Duration::from_millis(100);

/// A profiled stream's clock. CUDA measures the time between two timed events, in `f32`
/// milliseconds (`cuEventElapsedTime`, "a resolution of around 0.5 microseconds" in the
/// driver API's event management): measured from one origin at the stream's creation, the
/// stamps of a stream an hour old would come in steps of 0.25 ms. So each command is
/// measured from an anchor recorded shortly before it (its start → end directly), and each
/// anchor from the one before it, the anchors' offsets from the origin added up in integer
/// nanoseconds ([`chained`]). An anchor is a command's start event, taken as the next anchor
/// once the current one is [`REBASE`] old and has completed (its offset known), so an
/// anchor holds only the one before it, and only until its own offset is known. Commands
/// that share an anchor are stamped against it to the timer's resolution however old the
/// stream; an anchor's own offset carries the rounding of each link before it (2^-24 of the
/// link's length), the same for every command that counts from it.
pub(super) struct Clock {
    anchor: Mutex<Arc<Anchor>>,
}

pub(super) struct Anchor {
    pub(super) event: Arc<RawEvent>,
    /// When it was recorded (host time).
    recorded: Instant,
    offset: Mutex<Offset>,
}

/// An anchor's offset from its stream's origin.
enum Offset {
    /// Known, in nanoseconds.
    Known(u64),
    /// Not yet measured: the anchor before it (which had completed when this one was made)
    /// and that one's offset.
    After(Arc<RawEvent>, u64),
}

impl Clock {
    /// A clock whose origin is `origin`, a timed event just recorded.
    pub(super) fn new(origin: Arc<RawEvent>) -> Clock {
        let anchor = Anchor {
            event: origin,
            recorded: Instant::now(),
            offset: Mutex::new(Offset::Known(0)),
        };
        Clock { anchor: Mutex::new(Arc::new(anchor)) }
    }

    /// The anchor a command started by `start` (a timed event just recorded) counts from: the
    /// current one, or `start` itself as the next (the context is bound).
    pub(super) fn anchor_for(&self, start: &Arc<RawEvent>) -> Result<Arc<Anchor>, Error> {
        let mut current = self.anchor.lock().unwrap_or_else(|e| e.into_inner());
        if current.recorded.elapsed() >= REBASE {
            if let Some(offset) = current.offset_if_complete()? {
                let after = Offset::After(current.event.clone(), offset);
                *current = Arc::new(Anchor {
                    event: start.clone(),
                    recorded: Instant::now(),
                    offset: Mutex::new(after),
                });
            }
        }
        Ok(current.clone())
    }
}

impl Anchor {
    /// Its offset, once its event completed; `None` while it has not (the context is bound).
    fn offset_if_complete(&self) -> Result<Option<u64>, Error> {
        if let Offset::Known(offset) = *self.offset.lock().unwrap_or_else(|e| e.into_inner()) {
            return Ok(Some(offset));
        }
        // SAFETY: a live event.
        match unsafe { sys::cuEventQuery(self.event.raw) } {
            CUresult::CUDA_SUCCESS => self.offset().map(Some),
            CUresult::CUDA_ERROR_NOT_READY => Ok(None),
            code => check("cuEventQuery", code).map(|()| None),
        }
    }

    /// Its offset from the origin, in nanoseconds: measured from the anchor before it at the
    /// first call, after which that anchor goes. Its event completed; the context is bound.
    pub(super) fn offset(&self) -> Result<u64, Error> {
        let mut offset = self.offset.lock().unwrap_or_else(|e| e.into_inner());
        let known = match &*offset {
            Offset::Known(known) => return Ok(*known),
            Offset::After(before, base) => chained(*base, elapsed_ms(before, &self.event)?),
        };
        *offset = Offset::Known(known);
        Ok(known)
    }
}

/// The milliseconds from `from` to `to`, two completed timed events of the bound context.
pub(super) fn elapsed_ms(from: &RawEvent, to: &RawEvent) -> Result<f32, Error> {
    let mut ms = 0f32;
    // SAFETY: two live events; an out-pointer to a local.
    check("cuEventElapsedTime", unsafe { sys::cuEventElapsedTime(&mut ms, from.raw, to.raw) })?;
    Ok(ms)
}

/// Milliseconds as CUDA measures them, in whole nanoseconds (none for a negative or
/// meaningless measure).
fn ms_to_ns(ms: f32) -> u64 {
    if ms.is_nan() || ms <= 0.0 {
        return 0;
    }
    // At most 2^24 significant bits: exact in `f64`, and far within `u64` as nanoseconds.
    (f64::from(ms) * 1e6).round() as u64
}

/// The offset of an anchor measured `link_ms` after one at `base` nanoseconds.
fn chained(base: u64, link_ms: f32) -> u64 {
    base.saturating_add(ms_to_ns(link_ms))
}

/// A command's timestamps in nanoseconds (queued, submitted, started, ended: CUDA times the
/// start and the end only, so the first three are the start), from its anchor's offset, the
/// time from the anchor to its start and from its start to its end.
pub(super) fn stamps(anchor: u64, to_start_ms: f32, took_ms: f32) -> [u64; 4] {
    let started = chained(anchor, to_start_ms);
    [started, started, started, chained(started, took_ms)]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn profile_stamps_keep_nanoseconds_however_old_the_stream() {
        assert_eq!(ms_to_ns(1.5), 1_500_000);
        assert_eq!(ms_to_ns(0.0005), 500, "the timer's resolution, 0.5 µs");
        assert_eq!(ms_to_ns(-0.001), 0);
        assert_eq!(ms_to_ns(f32::NAN), 0);
        // A stream an hour old, reached through anchors each under a second from the next.
        let hour = (0..3600).fold(0, |at, _| chained(at, 1000.0));
        assert_eq!(hour, 3_600_000_000_000);
        // A command 0.1 ms after its anchor, taking 1.5 µs: both exact in nanoseconds.
        let [queued, submitted, started, ended] = stamps(hour, 0.1, 0.0015);
        assert_eq!([queued, submitted, started], [3_600_000_100_000; 3]);
        assert_eq!(ended - started, 1_500);
        // Measured from the origin as one f32 of milliseconds, the same start is off by tens
        // of microseconds: what the anchors are for.
        let from_origin = ms_to_ns(3_600_000.1f32);
        assert!(from_origin.abs_diff(started) > 10_000, "{from_origin} vs {started}");
        // The end never comes before the start.
        assert_eq!(stamps(7, 0.0, -1.0), [7, 7, 7, 7]);
    }
}
