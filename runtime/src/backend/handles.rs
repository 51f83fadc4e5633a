//! Driver handles in and out: a program's queue, context and memory adopted as the runtime's
//! (each refused when it is of another backend than the device it is used with), ours handed
//! out, and the record of the memory objects live buffers hold, which keeps one memory from
//! becoming two buffers.

#[cfg(doc)]
use super::api;
use super::api::{Api, Device as _, Event as _, Memory as _, Queue as _};
use super::native::{NativeBuffer, NativeDevice, NativeEvent, NativeQueue};
use super::{cuda, opencl, Device, DeviceHandle, DeviceInfo, Event, Memory, Owner, Queue};
use crate::Error;

impl DeviceHandle {
    /// The device's driver handle.
    pub(crate) fn native(self) -> Result<NativeDevice, Error> {
        match self {
            DeviceHandle::OpenCl(id) => opencl::OpenCl::native_device(id),
            DeviceHandle::Cuda(ordinal) => cuda::Cuda::native_device(ordinal),
        }
    }

    /// The device of a program's queue.
    pub(crate) fn of_queue(native: &NativeQueue) -> Result<DeviceHandle, Error> {
        match *native {
            NativeQueue::OpenCl { device, .. } => {
                opencl::OpenCl::handle_of(device).map(DeviceHandle::OpenCl)
            }
            NativeQueue::Cuda { device, .. } => {
                cuda::Cuda::handle_of(device).map(DeviceHandle::Cuda)
            }
        }
    }
}

impl Device {
    /// [`api::Device::adopt`]: the device `info` describes in the context of a program's queue
    /// `native`.
    ///
    /// # Safety
    /// `native`'s handles are live, as [`api::Device::adopt`] says of its context.
    pub(crate) unsafe fn adopt(info: &DeviceInfo, native: &NativeQueue) -> Result<Device, Error> {
        // SAFETY: the caller's promise, passed on.
        unsafe {
            Ok(match (info.handle, *native) {
                (DeviceHandle::OpenCl(id), NativeQueue::OpenCl { context, .. }) => {
                    Device::OpenCl(opencl::Device::adopt(id, info, context)?)
                }
                (DeviceHandle::Cuda(ordinal), NativeQueue::Cuda { context, .. }) => {
                    Device::Cuda(cuda::Device::adopt(ordinal, info, context)?)
                }
                _ => {
                    return Err(Error::InvalidArgument(
                        "Queue::from_native: a queue of another backend than its device's".into(),
                    ))
                }
            })
        }
    }

    /// [`api::Device::adopt_queue`]: the program's queue `native` itself, on this device (made
    /// by [`Device::adopt`] of it).
    ///
    /// # Safety
    /// As [`api::Device::adopt_queue`].
    pub(crate) unsafe fn adopt_queue(
        &self,
        native: &NativeQueue,
        owner: &mut Option<Owner>,
    ) -> Result<Queue, Error> {
        // SAFETY: the caller's promise, passed on.
        unsafe {
            Ok(match (self, *native) {
                (Device::OpenCl(d), NativeQueue::OpenCl { queue, context, device }) => {
                    Queue::OpenCl(d.adopt_queue(context, device, queue, owner)?)
                }
                (Device::Cuda(d), NativeQueue::Cuda { context, device, stream }) => {
                    Queue::Cuda(d.adopt_queue(context, device, stream, owner)?)
                }
                _ => {
                    return Err(Error::InvalidArgument(
                        "Queue::from_native: a queue of another backend than its device's".into(),
                    ))
                }
            })
        }
    }

    /// [`api::Device::adopt_memory`]: a program's memory (`size` bytes from `native` on).
    ///
    /// # Safety
    /// As [`api::Device::adopt_memory`].
    pub(crate) unsafe fn adopt_memory(
        &self,
        native: NativeBuffer,
        size: usize,
    ) -> Result<Memory, Error> {
        // SAFETY: the caller's promise, passed on.
        unsafe {
            Ok(match (self, native) {
                (Device::OpenCl(d), NativeBuffer::OpenCl(mem)) => {
                    Memory::OpenCl(d.adopt_memory(mem, size)?)
                }
                (Device::Cuda(d), NativeBuffer::Cuda(address)) => {
                    Memory::Cuda(d.adopt_memory(address, size)?)
                }
                (_, NativeBuffer::OpenClUsm(_)) => {
                    return Err(Error::InvalidArgument(
                        "Buffer::from_native: a device allocation's address \
                         (NativeBuffer::OpenClUsm) is not adopted: a buffer is adopted from a \
                         memory object (NativeBuffer::OpenCl) or a CUDA device pointer"
                            .into(),
                    ))
                }
                _ => {
                    return Err(Error::InvalidArgument(
                        "Buffer::from_native: memory of another backend than the queue's device"
                            .into(),
                    ))
                }
            })
        }
    }

    /// [`api::Device::holds_context`].
    pub(crate) fn holds_context(&self) -> bool {
        match self {
            Device::OpenCl(d) => d.holds_context(),
            Device::Cuda(d) => d.holds_context(),
        }
    }

    /// [`api::Device::context_key`].
    pub(crate) fn context_key(&self) -> usize {
        match self {
            Device::OpenCl(d) => d.context_key(),
            Device::Cuda(d) => d.context_key(),
        }
    }
}

impl Queue {
    /// [`api::Queue::native`].
    pub(crate) fn native(&self) -> Result<NativeQueue, Error> {
        match self {
            Queue::OpenCl(q) => q.native(),
            Queue::Cuda(s) => s.native(),
        }
    }
}

impl Event {
    /// [`api::Event::native`].
    pub(crate) fn native(&self) -> Result<NativeEvent, Error> {
        match self {
            Event::OpenCl(e) => e.native(),
            Event::Cuda(e) => e.native(),
        }
    }
}

/// The memory objects of the live buffers, by handle.
static OWNED: std::sync::Mutex<Vec<usize>> = std::sync::Mutex::new(Vec::new());

fn owned_buffers() -> std::sync::MutexGuard<'static, Vec<usize>> {
    OWNED.lock().unwrap_or_else(|e| e.into_inner())
}

impl Memory {
    /// Notes that a buffer holds `mem` (when it is OpenCL memory).
    pub(crate) fn own(&self) {
        if let NativeBuffer::OpenCl(handle) = self.native() {
            owned_buffers().push(handle as usize);
        }
    }

    /// Notes that the buffer that held `mem` is gone.
    pub(crate) fn disown(&self) {
        if let NativeBuffer::OpenCl(handle) = self.native() {
            let mut owned = owned_buffers();
            if let Some(i) = owned.iter().rposition(|&h| h == handle as usize) {
                owned.swap_remove(i);
            }
        }
    }

    /// Refuses `mem`, about to become a buffer by `what`, when a live buffer holds its memory
    /// object, or the one it is a sub-buffer of.
    pub(crate) fn check_not_owned(&self, what: &str) -> Result<(), Error> {
        let NativeBuffer::OpenCl(handle) = self.native() else { return Ok(()) };
        let parent = opencl::parent_of(handle);
        let owned = owned_buffers();
        if owned.iter().any(|&h| h == handle as usize || (parent != 0 && h == parent)) {
            return Err(Error::InvalidArgument(format!(
                "{what}: the memory object (or the buffer it is a sub-buffer of) is a live \
                 Buffer's already (made by the runtime, or adopted before): two buffers of one \
                 memory would not order their commands, and their maps could hand out the same \
                 bytes as `&mut` and `&`; use that Buffer (or views of it, Buffer::slice)"
            )));
        }
        Ok(())
    }

    /// [`api::Memory::native`].
    pub(crate) fn native(&self) -> NativeBuffer {
        match self {
            Memory::OpenCl(m) => m.native(),
            Memory::Cuda(m) => m.native(),
        }
    }
}
