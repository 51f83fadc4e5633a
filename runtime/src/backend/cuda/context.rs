//! A CUDA context, made current on a thread before each call (a launch trusts the thread's
//! last bind, and binds again when the driver refuses it), with what it keeps for reuse: idle
//! events and page-locked staging blocks.

use std::cell::Cell;
use std::ptr;
use std::sync::Mutex;

use cudarc::driver::sys::{self, CUresult};

use super::check;
use super::staging::Block;
use crate::Error;

/// A device's primary context, current on a thread before each call.
pub(super) struct Context {
    pub(super) raw: sys::CUcontext,
    pub(super) device: sys::CUdevice,
    /// The device's primary context, retained by us (released on drop); otherwise a
    /// program's own context, which the program keeps alive.
    pub(super) primary: bool,
    /// Untimed events no longer in use, for the next launches to record again: a launch
    /// creates no event in steady state.
    pub(super) idle_events: Mutex<Vec<sys::CUevent>>,
    /// One idle event kept outside the lock: a loop of launches whose events are dropped
    /// passes one event back and forth here.
    pub(super) spare_event: std::sync::atomic::AtomicPtr<sys::CUevent_st>,
    /// Page-locked blocks no longer in use ([`Staged`](super::staging::Staged)), for the next maps and staged reads:
    /// allocating page-locked memory costs a system call and pinning, and freeing it waits
    /// for the device. Freed with the context.
    pub(super) staging: Mutex<Vec<Block>>,
    /// The contexts whose memory this one was given access to ([`Context::reach`]), as
    /// numbers: each pair is asked once.
    reached: Mutex<Vec<usize>>,
}

/// How many idle events a context keeps.
pub(super) const IDLE_EVENTS: usize = 1024;

// SAFETY: a CUDA context may be made current on any thread; the driver API is thread-safe.
unsafe impl Send for Context {}

// SAFETY: as above.
unsafe impl Sync for Context {}

thread_local! {
    /// The context [`Context::bind`] last found or made current on this thread. Other code
    /// (cudarc, a library, the program) may have changed it since: only a launch trusts it,
    /// and binds and tries again when the driver refuses the launch for its context.
    static BOUND: Cell<sys::CUcontext> = const { Cell::new(ptr::null_mut()) };
}

impl Context {
    pub(super) fn new(raw: sys::CUcontext, device: sys::CUdevice, primary: bool) -> Context {
        Context {
            raw,
            device,
            primary,
            idle_events: Mutex::new(Vec::new()),
            spare_event: std::sync::atomic::AtomicPtr::new(ptr::null_mut()),
            staging: Mutex::new(Vec::new()),
            reached: Mutex::new(Vec::new()),
        }
    }

    /// Gives this context direct access to `peer`'s memory where their GPUs can
    /// (`cuCtxEnablePeerAccess`, once per pair): a peer copy between them then runs over
    /// NVLink or PCIe at full speed; without it the driver stages it (a tenth of the speed,
    /// measured on two H200s). Two contexts of one GPU need nothing. A refusal is logged, not
    /// returned: the copy works either way.
    pub(super) fn reach(&self, peer: &Context) {
        if peer.device == self.device {
            return;
        }
        let mut reached = self.reached.lock().unwrap_or_else(|e| e.into_inner());
        if reached.contains(&(peer.raw as usize)) {
            return;
        }
        reached.push(peer.raw as usize);
        let mut can = 0;
        // SAFETY: two valid device ordinals; `can` is written.
        let asked = check("cuDeviceCanAccessPeer", unsafe {
            sys::cuDeviceCanAccessPeer(&mut can, self.device, peer.device)
        });
        if asked.is_err() || can == 0 {
            log::debug!(
                "GPU {} cannot reach GPU {}'s memory: peer copies staged by the driver",
                self.device,
                peer.device
            );
            return;
        }
        // SAFETY: a live context made current, and a live peer context.
        let enabled =
            self.bind().and_then(|()| match unsafe { sys::cuCtxEnablePeerAccess(peer.raw, 0) } {
                CUresult::CUDA_SUCCESS | CUresult::CUDA_ERROR_PEER_ACCESS_ALREADY_ENABLED => Ok(()),
                other => check("cuCtxEnablePeerAccess", other),
            });
        if let Err(e) = enabled {
            log::warn!(
                "GPU {} reaching GPU {}'s memory: {e}; peer copies staged by the driver",
                self.device,
                peer.device
            );
        }
    }

    /// Makes the context current on this thread (when it is not already: asking is cheaper
    /// than setting).
    pub(super) fn bind(&self) -> Result<(), Error> {
        let mut current = ptr::null_mut();
        // SAFETY: an out-pointer to a local.
        if unsafe { sys::cuCtxGetCurrent(&mut current) } != CUresult::CUDA_SUCCESS
            || current != self.raw
        {
            // SAFETY: the context is retained until this value drops.
            check("cuCtxSetCurrent", unsafe { sys::cuCtxSetCurrent(self.raw) })?;
        }
        BOUND.with(|bound| bound.set(self.raw));
        Ok(())
    }

    /// Whether [`Context::bind`] last bound this context on this thread (see [`BOUND`]).
    pub(super) fn was_bound(&self) -> bool {
        BOUND.with(|bound| bound.get() == self.raw)
    }

    /// A stream of the runtime's own that waits for no other (not even the legacy default
    /// stream); the context is bound.
    pub(super) fn own_stream(&self) -> Result<sys::CUstream, Error> {
        let mut raw = ptr::null_mut();
        // SAFETY: an out-pointer to a local.
        check("cuStreamCreate", unsafe {
            sys::cuStreamCreate(&mut raw, sys::CUstream_flags::CU_STREAM_NON_BLOCKING as u32)
        })?;
        Ok(raw)
    }
}

impl Drop for Context {
    fn drop(&mut self) {
        let mut idle =
            std::mem::take(self.idle_events.get_mut().unwrap_or_else(|e| e.into_inner()));
        let spare = *self.spare_event.get_mut();
        if !spare.is_null() {
            idle.push(spare);
        }
        let staging = std::mem::take(self.staging.get_mut().unwrap_or_else(|e| e.into_inner()));
        if (!idle.is_empty() || !staging.is_empty()) && self.bind().is_ok() {
            for event in idle {
                // SAFETY: each idle event was created once and is destroyed once, here.
                unsafe {
                    let _ = sys::cuEventDestroy_v2(event);
                }
            }
            for block in staging {
                // SAFETY: each idle block was allocated once and is freed once, here; no copy
                // uses an idle block.
                unsafe {
                    let _ = sys::cuMemFreeHost(block.at);
                }
            }
        }
        if self.primary {
            // SAFETY: retained once in `Device::open`, released once here.
            unsafe {
                let _ = sys::cuDevicePrimaryCtxRelease_v2(self.device);
            }
        }
    }
}
