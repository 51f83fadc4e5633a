//! OpenCL memory: buffer objects and their sub-buffers (views), or device allocations
//! (`usm.rs`) and theirs; a buffer's region mapped into host memory; and host memory the
//! driver allocated for fast copies.

use std::ffi::c_void;
use std::ptr;

use cl3::types::{cl_context, cl_mem};

use super::usm::{HostCopy, Usm};
use super::{cl_err, info_ptr, Context, Event, OpenCl, Queue};
use crate::backend::api::{self, Event as _, Queue as _, Whole};
use crate::backend::native::NativeBuffer;
use crate::Error;

/// Device memory: a buffer object, or a device allocation.
pub(crate) enum Memory {
    /// A buffer object (for a view, a sub-buffer), which the driver frees once no queued
    /// command uses it.
    Object(MemObject),
    /// A device allocation (for a view, its address plus the offset).
    Usm(Usm),
}

handle!(MemObject, cl_mem, cl3::memory::release_mem_object);

// SAFETY: OpenCL memory objects are thread-safe (OpenCL 2.x, appendix A.2).
unsafe impl Send for MemObject {}
// SAFETY: as above.
unsafe impl Sync for MemObject {}

impl MemObject {
    /// `size` bytes of this buffer from `offset`, as a sub-buffer (which keeps this one
    /// alive). The offset must be a multiple of the device's base address alignment.
    fn sub(&self, offset: usize, size: usize) -> Result<MemObject, Error> {
        // OpenCL has no empty sub-buffer: an empty view is the buffer's first byte, which a
        // kernel given no values reads nothing of (every buffer holds at least one byte).
        let region = match size {
            0 => cl3::types::cl_buffer_region { origin: 0, size: 1 },
            _ => cl3::types::cl_buffer_region { origin: offset, size },
        };
        // SAFETY: a live buffer; `region` is a `cl_buffer_region` that lives for the call.
        unsafe {
            cl3::memory::create_sub_buffer(
                self.0,
                cl3::memory::CL_MEM_READ_WRITE,
                cl3::memory::CL_BUFFER_CREATE_TYPE_REGION,
                (&region as *const cl3::types::cl_buffer_region).cast(),
            )
        }
        .map(MemObject)
        .map_err(|code| match code {
            cl3::error_codes::CL_MISALIGNED_SUB_BUFFER_OFFSET => Error::InvalidArgument(format!(
                "a view from byte {offset}: an OpenCL device takes views only from offsets \
                 that are multiples of its base address alignment (CL_DEVICE_MEM_BASE_ADDR_ALIGN; \
                 128 bytes on most): start the view there, or pass the offset to the kernel"
            )),
            code => cl_err("clCreateSubBuffer")(code),
        })
    }
}

impl Memory {
    /// The buffer object; for a device allocation, an error that says `what` (a command
    /// buffer's command) cannot name one.
    pub(super) fn object(&self, what: &str) -> Result<cl_mem, Error> {
        match self {
            Memory::Object(m) => Ok(m.0),
            Memory::Usm(_) => Err(Error::InvalidArgument(format!(
                "{what} cannot name a device allocation (Queue::malloc_device), only a buffer"
            ))),
        }
    }

    /// `size` bytes (at least one) of device memory.
    pub(crate) fn new(context: &Context, size: usize) -> Result<Memory, Error> {
        // SAFETY: no host pointer is used, so the flags cannot refer to foreign memory.
        unsafe {
            cl3::memory::create_buffer(
                context.0,
                cl3::memory::CL_MEM_READ_WRITE,
                size.max(1),
                ptr::null_mut(),
            )
        }
        .map(|mem| Memory::Object(MemObject(mem)))
        .map_err(cl_err("clCreateBuffer"))
    }

    /// A program's buffer, retained (released when this value drops), of `context` and at
    /// least `size` bytes.
    ///
    /// # Safety
    /// `mem` is a live memory object.
    pub(crate) unsafe fn adopt(
        mem: cl_mem,
        context: cl_context,
        size: usize,
    ) -> Result<Memory, Error> {
        use cl3::memory::{get_mem_object_info, CL_MEM_CONTEXT, CL_MEM_SIZE};
        // SAFETY: a live memory object (the caller's promise); released once, when the value
        // drops.
        unsafe { cl3::memory::retain_mem_object(mem) }.map_err(cl_err("clRetainMemObject"))?;
        let adopted = Memory::Object(MemObject(mem));
        let of: cl_context =
            info_ptr(get_mem_object_info(mem, CL_MEM_CONTEXT), "clGetMemObjectInfo")?;
        let bytes = get_mem_object_info(mem, CL_MEM_SIZE)
            .map(usize::from)
            .map_err(cl_err("clGetMemObjectInfo"))?;
        if of != context {
            return Err(Error::InvalidArgument(
                "Buffer::from_native: the memory object is of another context than the queue's"
                    .into(),
            ));
        }
        if bytes < size {
            return Err(Error::InvalidArgument(format!(
                "Buffer::from_native: the memory object holds {bytes} bytes; the buffer needs {size}"
            )));
        }
        Ok(adopted)
    }
}

impl api::Memory<OpenCl> for Memory {
    /// A sub-buffer, which keeps this buffer alive by itself; of a device allocation, the
    /// address plus the offset, keeping `whole` (the allocation's owner) alive.
    fn view(&self, offset: usize, size: usize, whole: Whole) -> Result<Memory, Error> {
        match self {
            Memory::Object(m) => m.sub(offset, size).map(Memory::Object),
            Memory::Usm(m) => Ok(Memory::Usm(m.view(offset, whole))),
        }
    }

    /// A buffer object does; a device allocation is freed after the uses it is given.
    fn frees_itself(&self) -> bool {
        matches!(self, Memory::Object(_))
    }

    fn free_after(&self, uses: Vec<Event>) {
        match self {
            Memory::Object(_) => uses.into_iter().for_each(Event::release_when_complete),
            Memory::Usm(m) => m.free_after(uses),
        }
    }

    fn native(&self) -> NativeBuffer {
        match self {
            Memory::Object(m) => NativeBuffer::OpenCl(m.0),
            Memory::Usm(m) => NativeBuffer::OpenClUsm(m.ptr),
        }
    }
}

/// The memory object `mem` is a sub-buffer of, as a number (0 for none, or when the driver
/// does not say).
pub(crate) fn parent_of(mem: cl_mem) -> usize {
    cl3::memory::get_mem_object_info(mem, cl3::memory::CL_MEM_ASSOCIATED_MEMOBJECT)
        .map_or(0, |p| isize::from(p) as usize)
}

/// A buffer's region mapped into host memory by [`api::Queue::map`], until
/// [`api::Queue::unmap`]: the driver's map of a buffer object, or a device allocation's copy.
pub(crate) struct Mapping {
    pub(super) at: *mut c_void,
    /// A device allocation's: the host memory `at` is, and whether the unmap writes it back.
    pub(super) copy: Option<(HostCopy, bool)>,
}

// SAFETY: the mapped region is plain host memory, usable from any thread; the pointer says
// where it is and owns nothing.
unsafe impl Send for Mapping {}
// SAFETY: as above.
unsafe impl Sync for Mapping {}

impl api::HostMemory for Mapping {
    fn as_ptr(&self) -> *mut u8 {
        self.at.cast()
    }
}

/// Host memory the driver allocated: a buffer made with `CL_MEM_ALLOC_HOST_PTR`, mapped for
/// reading and writing for its whole life, so that its host pointer is the driver's own
/// memory (which it copies to and from device buffers fastest). Zeroed when made; unmapped
/// and released on drop.
pub(crate) struct HostMemory {
    at: *mut c_void,
    mem: Memory,
    /// The queue it was mapped on, retained: the unmap goes there.
    queue: Queue,
}

// SAFETY: the mapped region is plain host memory owned by this value alone; the buffer and
// queue handles are thread-safe (OpenCL 2.x, appendix A.2).
unsafe impl Send for HostMemory {}
// SAFETY: as above; `&HostMemory` gives out only the pointer.
unsafe impl Sync for HostMemory {}

impl HostMemory {
    /// `size` bytes (at least one) mapped on `queue`, a queue of `context` that nothing else
    /// uses but host memory (so the map does not wait for a program's work).
    pub(super) fn new(context: &Context, queue: &Queue, size: usize) -> Result<HostMemory, Error> {
        let size = size.max(1);
        // SAFETY: no host pointer is given: the driver allocates host-accessible memory.
        let mem = unsafe {
            cl3::memory::create_buffer(
                context.0,
                cl3::memory::CL_MEM_READ_WRITE | cl3::memory::CL_MEM_ALLOC_HOST_PTR,
                size,
                ptr::null_mut(),
            )
        }
        .map(|mem| Memory::Object(MemObject(mem)))
        .map_err(cl_err("clCreateBuffer"))?;
        // SAFETY: a live queue, retained once for the new owner below, which releases it once.
        unsafe { cl3::command_queue::retain_command_queue(queue.0) }
            .map_err(cl_err("clRetainCommandQueue"))?;
        let queue = Queue(queue.0);
        let at = queue.map(&mem, size, true)?.at;
        // SAFETY: the mapped region is `size` bytes of host memory, ours until the unmap.
        unsafe { ptr::write_bytes(at.cast::<u8>(), 0, size) };
        Ok(HostMemory { at, mem, queue })
    }
}

impl api::HostMemory for HostMemory {
    fn as_ptr(&self) -> *mut u8 {
        self.at.cast()
    }
}

impl Drop for HostMemory {
    fn drop(&mut self) {
        // Mapped once in `new`, unmapped once here; whoever copied to or from the memory
        // waited for it first (`HostBuffer` waits before it drops this).
        if let Err(e) = self.queue.unmap(&self.mem, Mapping { at: self.at, copy: None }) {
            log::warn!("unmapping host memory: {e}");
        }
    }
}
