//! Driver handles as programs see them: what [`Queue::native`](crate::Queue::native),
//! [`Buffer::native`](crate::Buffer::native), [`Event::native`](crate::Event::native) and
//! [`DeviceInfo::native`](crate::DeviceInfo::native) hand out, and what
//! [`Queue::from_native`](crate::Queue::from_native) and
//! [`Buffer::from_native`](crate::Buffer::from_native) adopt, so that a program can mix this
//! runtime's work with its own driver calls or another library's (cuBLAS, NCCL, opencl3).
//!
//! A handle handed out is borrowed: it stays valid while the object it came from lives, and
//! the runtime releases it when that object goes. To keep it longer, retain it
//! (`clRetainCommandQueue`, `clRetainMemObject`, `clRetainEvent`, …); CUDA has no retain, so
//! keep the object instead.

/// The CUDA driver's handle types: `cudarc::driver::sys`'s.
#[cfg(feature = "cuda")]
pub use cudarc::driver::sys::{CUcontext, CUdevice, CUdeviceptr, CUevent, CUstream};

/// Stand-ins of the CUDA driver's handle types, of the same layout as cudarc's, in a build
/// without the `cuda` feature (which hands out none).
#[cfg(not(feature = "cuda"))]
mod stand_ins {
    /// `CUcontext`.
    pub type CUcontext = *mut std::ffi::c_void;
    /// `CUdevice`.
    pub type CUdevice = i32;
    /// `CUdeviceptr`.
    pub type CUdeviceptr = u64;
    /// `CUevent`.
    pub type CUevent = *mut std::ffi::c_void;
    /// `CUstream`.
    pub type CUstream = *mut std::ffi::c_void;
}
pub use cl3::types::{
    cl_command_queue, cl_context, cl_device_id, cl_event, cl_mem, cl_platform_id,
};
#[cfg(not(feature = "cuda"))]
pub use stand_ins::{CUcontext, CUdevice, CUdeviceptr, CUevent, CUstream};

/// A queue's driver handles: an OpenCL context, device and command queue, or a CUDA context,
/// device and stream.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum NativeQueue {
    /// An OpenCL command queue, with its context and device.
    OpenCl {
        /// The queue's context: the runtime's own for a queue it made, or the one a program
        /// gave [`Queue::from_native`](crate::Queue::from_native).
        context: cl_context,
        /// The queue's device.
        device: cl_device_id,
        /// The in-order command queue.
        queue: cl_command_queue,
    },
    /// A CUDA stream, with its context and device.
    Cuda {
        /// The stream's context: the device's primary context (the one cudarc's
        /// `CudaContext::new` retains) for a queue the runtime made.
        context: CUcontext,
        /// The stream's device.
        device: CUdevice,
        /// The stream (never the legacy default stream for a queue the runtime made).
        stream: CUstream,
    },
}

impl NativeQueue {
    /// The queue's context as a number that tells two contexts apart.
    pub(crate) fn context_key(&self) -> usize {
        match *self {
            NativeQueue::OpenCl { context, .. } => context as usize,
            NativeQueue::Cuda { context, .. } => context as usize,
        }
    }
}

/// A buffer's driver handle: an OpenCL memory object, an OpenCL device allocation's address,
/// or a CUDA device pointer to its first byte.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum NativeBuffer {
    /// An OpenCL buffer (for a view, the sub-buffer).
    OpenCl(cl_mem),
    /// The device address of an OpenCL device allocation
    /// ([`Queue::malloc_device`](crate::Queue::malloc_device), `cl_intel_unified_shared_memory`;
    /// for a view, the view's first byte), which `clSetKernelArgMemPointerINTEL` and
    /// `clEnqueueMemcpyINTEL` take.
    OpenClUsm(*mut std::ffi::c_void),
    /// A CUDA device pointer (for a view, the view's first byte).
    Cuda(CUdeviceptr),
}

/// An event's driver handle.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum NativeEvent {
    /// An OpenCL event.
    OpenCl(cl_event),
    /// A CUDA event (for a launch, recorded when first asked for: it then also covers the
    /// work its queue was given after the launch, as [`Event`](crate::Event) says).
    Cuda(CUevent),
}

/// A device's driver handle.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum NativeDevice {
    /// An OpenCL device, with its platform.
    OpenCl {
        /// The device's platform.
        platform: cl_platform_id,
        /// The device.
        device: cl_device_id,
    },
    /// A CUDA device.
    Cuda(CUdevice),
}

// SAFETY: the handles are plain values (pointers and integers the drivers hand out) that any
// thread may pass to the driver; nothing here dereferences them.
unsafe impl Send for NativeQueue {}
// SAFETY: as above.
unsafe impl Sync for NativeQueue {}
// SAFETY: as above.
unsafe impl Send for NativeBuffer {}
// SAFETY: as above.
unsafe impl Sync for NativeBuffer {}
// SAFETY: as above.
unsafe impl Send for NativeEvent {}
// SAFETY: as above.
unsafe impl Sync for NativeEvent {}
// SAFETY: as above.
unsafe impl Send for NativeDevice {}
// SAFETY: as above.
unsafe impl Sync for NativeDevice {}
