//! CUDA memory: device memory (an allocation of the context's heap, a view, or a program's),
//! page-locked host memory for fast copies, and a buffer's map (a copy in staging).

use std::ffi::c_void;
use std::ptr;
use std::sync::{Arc, Mutex};

use cudarc::driver::sys;

use super::context::Context;
use super::heap::Heap;
use super::staging::Staged;
use super::{check, Cuda, Event};
use crate::backend::api::{self, Whole};
use crate::backend::native::NativeBuffer;
use crate::Error;

/// Device memory of the context.
pub(crate) struct Memory {
    heap: Arc<Heap>,
    pub(super) address: sys::CUdeviceptr,
    /// For a view into another allocation, that allocation, kept alive while the view is.
    _whole: Option<Whole>,
    kind: Kind,
    /// What [`api::Memory::free_after`] said: the commands that may still use the memory when it
    /// goes.
    after: Mutex<Option<Vec<Event>>>,
}

/// Whose device memory is, and how it goes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Kind {
    /// From the heap's pool: freed stream-ordered (`cuMemFreeAsync`).
    Pooled,
    /// From `cuMemAlloc`: freed with `cuMemFree`, once the commands that use it completed.
    Plain,
    /// A view, or a program's memory: never freed here.
    Borrowed,
}

impl Memory {
    /// Memory `heap` allocated at `address`, freed as `kind` says when it drops.
    pub(super) fn allocated(heap: &Arc<Heap>, address: sys::CUdeviceptr, kind: Kind) -> Memory {
        let after = Mutex::new(None);
        Memory { heap: heap.clone(), address, _whole: None, kind, after }
    }

    /// Memory at `address` that is not freed here (a view's, a program's).
    pub(super) fn borrowed(
        heap: &Arc<Heap>,
        address: sys::CUdeviceptr,
        whole: Option<Whole>,
    ) -> Memory {
        let after = Mutex::new(None);
        Memory { heap: heap.clone(), address, _whole: whole, kind: Kind::Borrowed, after }
    }
}

impl Memory {
    /// The context it is memory of.
    pub(super) fn context(&self) -> &Context {
        self.heap.context()
    }

    /// Lets GPU `device` reach this memory directly where the GPUs can (see
    /// [`Heap::share_with`]); the caller enabled peer access between the contexts first.
    pub(super) fn share_with(&self, device: sys::CUdevice) {
        self.heap.share_with(device);
    }
}

impl api::Memory<Cuda> for Memory {
    /// The address plus the offset, keeping `whole` (this allocation's owner) alive.
    fn view(&self, offset: usize, _size: usize, whole: Whole) -> Result<Memory, Error> {
        Ok(Memory::borrowed(&self.heap, self.address + offset as u64, Some(whole)))
    }

    fn frees_itself(&self) -> bool {
        false
    }

    /// Says which commands may still use the memory when it goes (those of `events`, on any
    /// stream of the context): its drop then frees it after them without the host waiting
    /// (see [`Heap`]). Memory dropped without it is freed after everything the context was
    /// given, as `cuMemFree` does (a host wait for the whole device): say `free_after(vec![])`
    /// of memory that nothing uses.
    fn free_after(&self, events: Vec<Event>) {
        if self.kind != Kind::Borrowed {
            *self.after.lock().unwrap_or_else(|e| e.into_inner()) = Some(events);
        }
    }

    fn native(&self) -> NativeBuffer {
        NativeBuffer::Cuda(self.address)
    }
}

impl Drop for Memory {
    fn drop(&mut self) {
        let after = self.after.get_mut().unwrap_or_else(|e| e.into_inner()).take();
        self.heap.release(self.address, self.kind, after);
    }
}

/// Page-locked host memory of the context (`cuMemAllocHost`): the driver copies it to and from
/// the device at full speed, asynchronously. Zeroed when made; freed on drop.
pub(crate) struct HostMemory {
    context: Arc<Context>,
    at: *mut c_void,
}

// SAFETY: page-locked memory is plain host memory, owned by this value alone; it is freed with
// its context current, from any thread.
unsafe impl Send for HostMemory {}

// SAFETY: as above; `&HostMemory` gives out only the pointer.
unsafe impl Sync for HostMemory {}

impl HostMemory {
    /// `size` bytes (at least one), zeroed.
    pub(super) fn new(context: &Arc<Context>, size: usize) -> Result<HostMemory, Error> {
        context.bind()?;
        let size = size.max(1);
        let mut at = ptr::null_mut();
        // SAFETY: an out-pointer to a local; the context is bound.
        check("cuMemAllocHost", unsafe { sys::cuMemAllocHost_v2(&mut at, size) })?;
        let memory = HostMemory { context: context.clone(), at };
        // SAFETY: `size` bytes of host memory, ours until `drop` frees them.
        unsafe { ptr::write_bytes(memory.at.cast::<u8>(), 0, size) };
        Ok(memory)
    }
}

impl api::HostMemory for HostMemory {
    fn as_ptr(&self) -> *mut u8 {
        self.at.cast()
    }
}

impl Drop for HostMemory {
    fn drop(&mut self) {
        if self.context.bind().is_ok() {
            // SAFETY: allocated once, freed once; whoever copied to or from it waited first
            // (`HostBuffer` waits before it drops this).
            unsafe {
                let _ = sys::cuMemFreeHost(self.at);
            }
        }
    }
}

/// A buffer's contents copied into page-locked staging by [`api::Queue::map`], until
/// [`api::Queue::unmap`] (or until dropped, which gives the staging back too).
pub(crate) struct Mapping {
    pub(super) host: Staged,
    pub(super) size: usize,
    /// Written back by the unmap.
    pub(super) write: bool,
}

impl api::HostMemory for Mapping {
    fn as_ptr(&self) -> *mut u8 {
        self.host.block.at.cast()
    }
}
