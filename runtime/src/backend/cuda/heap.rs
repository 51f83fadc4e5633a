//! How a CUDA context's device memory is allocated and freed: from a memory pool of the
//! runtime's own where the device has pools, freed stream-ordered after the commands that use
//! it; otherwise with `cuMemAlloc`, freed once those commands completed.

use std::ptr;
use std::sync::{Arc, Mutex, OnceLock};

use cudarc::driver::sys::{self, CUdevice_attribute, CUresult};

use super::context::Context;
use super::memory::Kind;
use super::{check, Event, Memory};
use crate::backend::api::Event as _;
use crate::trace::trace;
use crate::Error;

/// How a context's device memory is allocated and freed: a drop returns at once, and the
/// memory is freed once the commands that may use it ([`Memory::free_after`](crate::backend::api::Memory::free_after)) completed.
/// - Where the device has memory pools (`CU_DEVICE_ATTRIBUTE_MEMORY_POOLS_SUPPORTED`), memory
///   comes from a pool of the runtime's own (`cuMemAllocFromPoolAsync`) on a stream of ours,
///   synchronized there before the memory is handed out (an allocation is ordered on its own
///   stream only; synchronized, any stream may use it at once). A drop makes another stream
///   of ours wait for those commands' events, and frees there (`cuMemFreeAsync`: "the
///   allocation must not be accessed after stream execution reaches the free"). `cuMemFree`
///   would instead wait for the whole device, and a stream a program holds with a host wait
///   would deadlock it. Memory is freed by the call its allocator pairs with it (cudarc does
///   the same); the pool is ours so that no allocation is made to wait for a pending free
///   (`CU_MEMPOOL_ATTR_REUSE_ALLOW_INTERNAL_DEPENDENCIES` off: "allow cuMemAllocAsync to
///   insert new stream dependencies in order to establish the stream ordering required to
///   reuse a piece of memory released by cuMemFreeAsync"), which the allocation's
///   synchronization would then wait for. Its release threshold stays 0: freed memory goes
///   back to the system at the next synchronization, as with `cuMemFree`.
/// - Otherwise memory comes from `cuMemAlloc`, and a drop keeps its address with those
///   events; each later allocation and drop frees (`cuMemFree`) the kept addresses whose
///   events all completed, and the heap's own drop the rest, after waiting for them.
///
/// Events hold their stream, which holds the context; the heap holds events (kept frees):
/// so the heap is held by its device and its memory, never by the context.
pub(super) struct Heap {
    context: Arc<Context>,
    /// Made at the first allocation: `None` where the device has no memory pools (or making
    /// one failed).
    pool: OnceLock<Option<Pool>>,
    /// Memory from `cuMemAlloc` dropped before the commands that use it completed.
    deferred: Mutex<Vec<Deferred>>,
    /// The other GPUs given access to the pool's memory ([`Heap::share_with`]).
    shared: Mutex<Vec<sys::CUdevice>>,
}

/// The runtime's memory pool of a context, and its two streams.
struct Pool {
    raw: sys::CUmemoryPool,
    /// Where memory is allocated (and synchronized at once).
    alloc: sys::CUstream,
    /// Where memory is freed, after the commands that use it.
    free: sys::CUstream,
}

// SAFETY: a pool and streams may be used from any thread with their context current.
unsafe impl Send for Pool {}

// SAFETY: as above; the driver's calls on them are thread-safe.
unsafe impl Sync for Pool {}

struct Deferred {
    address: sys::CUdeviceptr,
    after: Vec<Event>,
}

impl Heap {
    pub(super) fn new(context: &Arc<Context>) -> Heap {
        Heap {
            context: context.clone(),
            pool: OnceLock::new(),
            deferred: Mutex::new(Vec::new()),
            shared: Mutex::new(Vec::new()),
        }
    }

    /// Lets GPU `device` reach this heap's pooled memory directly, once: peer access between
    /// contexts (`cuCtxEnablePeerAccess`) does not cover memory from a pool, whose access is
    /// the pool's own (`cuMemPoolSetAccess`). Without it a peer copy of pooled memory is staged
    /// by the driver at a tenth of the speed (38 GB/s against 396 over two H200s' NVLink). A
    /// refusal is logged: the copy works either way.
    pub(super) fn share_with(&self, device: sys::CUdevice) {
        if device == self.context.device {
            return;
        }
        let Some(pool) = self.pool.get().and_then(Option::as_ref) else { return };
        let mut shared = self.shared.lock().unwrap_or_else(|e| e.into_inner());
        if shared.contains(&device) {
            return;
        }
        shared.push(device);
        let access = sys::CUmemAccessDesc {
            location: sys::CUmemLocation {
                type_: sys::CUmemLocationType::CU_MEM_LOCATION_TYPE_DEVICE,
                id: device,
            },
            flags: sys::CUmemAccess_flags::CU_MEM_ACCESS_FLAGS_PROT_READWRITE,
        };
        let granted = self.context.bind().and_then(|()| {
            // SAFETY: a live pool of this context; one access descriptor.
            let code = unsafe { sys::cuMemPoolSetAccess(pool.raw, &access, 1) };
            check("cuMemPoolSetAccess", code)
        });
        if let Err(e) = granted {
            log::warn!(
                "GPU {device} reaching GPU {}'s pooled memory: {e}; peer copies staged by the \
                 driver",
                self.context.device
            );
        }
    }

    /// The context whose memory it is.
    pub(super) fn context(&self) -> &Arc<Context> {
        &self.context
    }

    /// The pool, made at the first call (the context is bound).
    fn pool(&self) -> Option<&Pool> {
        self.pool
            .get_or_init(|| {
                Pool::new(&self.context)
                    .inspect_err(|e| {
                        trace!("memory", "no memory pool of our own ({e}): cuMemAlloc")
                    })
                    .ok()
                    .flatten()
            })
            .as_ref()
    }

    /// `bytes` (at least one) of device memory, which any stream of the context may use at
    /// once.
    pub(super) fn alloc(self: &Arc<Heap>, bytes: usize) -> Result<Memory, Error> {
        self.context.bind()?;
        let (address, kind) = match self.pool() {
            Some(pool) => (pool.alloc(bytes)?, Kind::Pooled),
            None => (self.alloc_plain(bytes)?, Kind::Plain),
        };
        Ok(Memory::allocated(self, address, kind))
    }

    /// `cuMemAlloc`, after freeing kept memory whose commands completed; when the device is
    /// out of memory, again after waiting for every kept memory's commands and freeing it.
    fn alloc_plain(&self, bytes: usize) -> Result<sys::CUdeviceptr, Error> {
        let mut deferred = self.deferred.lock().unwrap_or_else(|e| e.into_inner());
        self.sweep(&mut deferred, false);
        let mut address = 0;
        // SAFETY: an out-pointer to a local; the context is bound.
        let mut code = unsafe { sys::cuMemAlloc_v2(&mut address, bytes) };
        if code == CUresult::CUDA_ERROR_OUT_OF_MEMORY && !deferred.is_empty() {
            self.sweep(&mut deferred, true);
            // SAFETY: as above.
            code = unsafe { sys::cuMemAlloc_v2(&mut address, bytes) };
        }
        check("cuMemAlloc", code)?;
        Ok(address)
    }

    /// Frees the kept memory whose commands completed (all of it, after waiting, with
    /// `wait`). A command that failed is complete.
    fn sweep(&self, deferred: &mut Vec<Deferred>, wait: bool) {
        deferred.retain(|kept| {
            let complete = kept.after.iter().all(|event| match wait {
                true => {
                    let _ = event.wait();
                    true
                }
                false => event.is_complete().unwrap_or(true),
            });
            if complete && self.context.bind().is_ok() {
                // SAFETY: allocated once, freed once, here; what used it completed.
                unsafe {
                    let _ = sys::cuMemFree_v2(kept.address);
                }
            }
            !complete
        });
    }

    /// Frees memory dropped: `after` the commands that may use it, when said.
    pub(super) fn release(&self, address: sys::CUdeviceptr, kind: Kind, after: Option<Vec<Event>>) {
        match (kind, after) {
            (Kind::Borrowed, _) => {}
            (Kind::Pooled, after) => {
                if let (Ok(()), Some(pool)) = (self.context.bind(), self.pool()) {
                    pool.free(address, after);
                }
            }
            (Kind::Plain, None) => {
                if self.context.bind().is_ok() {
                    // SAFETY: allocated once, freed once; `cuMemFree` waits for the device's
                    // work, which may use it.
                    unsafe {
                        let _ = sys::cuMemFree_v2(address);
                    }
                }
            }
            (Kind::Plain, Some(after)) => {
                let mut deferred = self.deferred.lock().unwrap_or_else(|e| e.into_inner());
                deferred.push(Deferred { address, after });
                self.sweep(&mut deferred, false);
            }
        }
    }
}

impl Drop for Heap {
    fn drop(&mut self) {
        let mut deferred =
            std::mem::take(self.deferred.get_mut().unwrap_or_else(|e| e.into_inner()));
        self.sweep(&mut deferred, true);
        if let Some(Some(pool)) = self.pool.take() {
            if self.context.bind().is_ok() {
                // SAFETY: made once, destroyed once. Frees still pending complete all the
                // same: a stream destroyed while the device has work in it is released once
                // that work completed, and a pool destroyed with frees pending "will return
                // immediately and the resources associated with the pool will be released
                // automatically once there are no more outstanding allocations"
                // (`cuMemPoolDestroy`); no memory of the pool outlives the heap.
                unsafe {
                    let _ = sys::cuStreamDestroy_v2(pool.alloc);
                    let _ = sys::cuStreamDestroy_v2(pool.free);
                    let _ = sys::cuMemPoolDestroy(pool.raw);
                }
            }
        }
    }
}

impl Pool {
    /// The context's pool and its streams; `None` where the device has no memory pools (the
    /// context is bound).
    pub(super) fn new(context: &Context) -> Result<Option<Pool>, Error> {
        let mut supported = 0;
        // SAFETY: the device of a live context; an out-pointer to a local.
        let asked = unsafe {
            sys::cuDeviceGetAttribute(
                &mut supported,
                CUdevice_attribute::CU_DEVICE_ATTRIBUTE_MEMORY_POOLS_SUPPORTED,
                context.device,
            )
        };
        if asked != CUresult::CUDA_SUCCESS || supported == 0 {
            return Ok(None);
        }
        let props = sys::CUmemPoolProps {
            allocType: sys::CUmemAllocationType::CU_MEM_ALLOCATION_TYPE_PINNED,
            handleTypes: sys::CUmemAllocationHandleType::CU_MEM_HANDLE_TYPE_NONE,
            location: sys::CUmemLocation {
                type_: sys::CUmemLocationType::CU_MEM_LOCATION_TYPE_DEVICE,
                id: context.device,
            },
            win32SecurityAttributes: ptr::null_mut(),
            maxSize: 0,
            usage: 0,
            reserved: [0; 54],
        };
        let mut raw = ptr::null_mut();
        // SAFETY: an out-pointer to a local; the properties of device memory of the device.
        check("cuMemPoolCreate", unsafe { sys::cuMemPoolCreate(&mut raw, &props) })?;
        let made = (|| {
            let mut off = 0i32;
            // SAFETY: a live pool; the attribute's value is an `int`.
            check("cuMemPoolSetAttribute", unsafe {
                sys::cuMemPoolSetAttribute(
                    raw,
                    sys::CUmemPool_attribute::CU_MEMPOOL_ATTR_REUSE_ALLOW_INTERNAL_DEPENDENCIES,
                    (&mut off as *mut i32).cast(),
                )
            })?;
            let alloc = context.own_stream()?;
            match context.own_stream() {
                Ok(free) => Ok(Pool { raw, alloc, free }),
                Err(e) => {
                    // SAFETY: made above, used by nobody.
                    unsafe {
                        let _ = sys::cuStreamDestroy_v2(alloc);
                    }
                    Err(e)
                }
            }
        })();
        if made.is_err() {
            // SAFETY: made above, used by nobody.
            unsafe {
                let _ = sys::cuMemPoolDestroy(raw);
            }
        }
        made.map(Some)
    }

    /// `bytes` of the pool, synchronized (the context is bound). When the device is out of
    /// memory, tries again once the frees enqueued so far are done.
    pub(super) fn alloc(&self, bytes: usize) -> Result<sys::CUdeviceptr, Error> {
        let mut address = 0;
        let mut allocate = || {
            // SAFETY: an out-pointer to a local; a live pool and stream of the bound context.
            unsafe { sys::cuMemAllocFromPoolAsync(&mut address, bytes, self.raw, self.alloc) }
        };
        let mut code = allocate();
        if code == CUresult::CUDA_ERROR_OUT_OF_MEMORY {
            // SAFETY: a live stream.
            unsafe {
                let _ = sys::cuStreamSynchronize(self.free);
            }
            code = allocate();
        }
        check("cuMemAllocFromPoolAsync", code)?;
        // SAFETY: a live stream.
        let synchronized =
            check("cuStreamSynchronize", unsafe { sys::cuStreamSynchronize(self.alloc) });
        if synchronized.is_err() {
            // SAFETY: allocated above, used by nobody.
            unsafe {
                let _ = sys::cuMemFreeAsync(address, self.alloc);
            }
        }
        synchronized.map(|()| address)
    }

    /// Frees `address` on the free stream, after the commands `after` stands for; without
    /// them (or when the stream cannot wait for them), after everything the context was given
    /// (a host wait, as `cuMemFree`'s). The context is bound.
    fn free(&self, address: sys::CUdeviceptr, after: Option<Vec<Event>>) {
        let ordered = after.is_some_and(|events| {
            events.iter().all(|event| {
                event
                    .resolve()
                    .and_then(|end| {
                        // SAFETY: a live stream; a live event of the context.
                        check("cuStreamWaitEvent", unsafe {
                            sys::cuStreamWaitEvent(self.free, end.raw, 0)
                        })
                    })
                    .is_ok()
            })
        });
        // SAFETY: a live context (bound), then memory of the pool freed once, here, after
        // every command that may use it (waited for on the stream, or by the host).
        unsafe {
            if !ordered {
                let _ = sys::cuCtxSynchronize();
            }
            let _ = sys::cuMemFreeAsync(address, self.free);
        }
    }
}
