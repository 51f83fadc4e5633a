//! Queues on a device and the buffers they allocate: the first things a program makes.
//! Launching is `kernel`'s, which adds [`Queue::launch`].

use std::marker::PhantomData;
use std::sync::{Arc, Mutex};

use crate::backend::{self, Memory, Program};
use crate::build::{DeviceState, PooledKernel};
use crate::process::runtime;
use crate::registry::Registry;
use crate::Error;

/// Plain data that can be copied to and from a device byte for byte.
///
/// # Safety
/// Every bit pattern of the type's size must be a valid value, and it must have no padding.
pub unsafe trait Pod: Copy + Send + Sync + 'static {}
macro_rules! pod {
    ($($t:ty),*) => { $(
        // SAFETY: primitive numbers have no padding and no invalid bit patterns.
        unsafe impl Pod for $t {}
    )* };
}
pod!(u8, i8, u16, i16, u32, i32, u64, i64, f32, f64);
// SAFETY: an array of plain data has no padding between its elements and no invalid bit
// patterns: `[f32; 4]` is OpenCL's `float4`.
unsafe impl<T: Pod, const N: usize> Pod for [T; N] {}

pub(crate) fn as_bytes<T: Pod>(data: &[T]) -> &[u8] {
    // SAFETY: `T: Pod` has no padding, so all `size_of_val(data)` bytes are initialised.
    unsafe { std::slice::from_raw_parts(data.as_ptr().cast(), std::mem::size_of_val(data)) }
}

/// An in-order command queue on one device.
#[derive(Clone)]
pub struct Queue {
    pub(super) inner: Arc<QueueInner>,
}

pub(super) struct QueueInner {
    pub(super) device: Arc<DeviceState>,
    pub(super) queue: backend::Queue,
    /// The last plain launch (no bundle, no specialization values), ready to go again.
    pub(super) last: Mutex<Option<LastLaunch>>,
}

/// A kernel as the last launch resolved it: launching it again while the registry is the
/// same one (no library opened or closed since) needs no lookup, no pool and, for unchanged
/// arguments, no `clSetKernelArg`.
pub(super) struct LastLaunch {
    pub(super) kernel: String,
    pub(super) registry: Arc<Registry>,
    pub(super) program: Arc<Program>,
    pub(super) object: PooledKernel,
}

impl Queue {
    /// A queue on the default device: the one `SYCL_DEVICE` names, otherwise the first CUDA
    /// GPU, otherwise the first OpenCL device that accepts SPIR-V.
    pub fn new() -> Result<Queue, Error> {
        Queue::create(None)
    }

    /// A queue on the one device `selector` picks, as `SYCL_DEVICE` does (case-insensitive):
    /// - `"intel"`, `"pocl"`, `"nvidia"`: an OpenCL platform, named by a word of its name or
    ///   vendor (never by device names, which PoCL takes from the host CPU);
    /// - `"cuda"`: the GPUs of the CUDA backend; `"opencl"`: every OpenCL device; `"*"`: every
    ///   device;
    /// - `"cpu"`, `"gpu"`, `"accelerator"`: a device type;
    /// - `"intel:1"`, `"cuda:0"`, `"pocl:cpu"`: the N-th device, or the devices of a type, of
    ///   what comes before the `:`.
    ///
    /// A selector that picks no device or several is [`Error::NoDevice`], whose message lists
    /// every device with the selector that picks it.
    pub fn with_device(selector: &str) -> Result<Queue, Error> {
        Queue::create(Some(selector))
    }

    fn create(wanted: Option<&str>) -> Result<Queue, Error> {
        let device = runtime().device(wanted)?;
        let queue = device.device.queue()?;
        Ok(Queue { inner: Arc::new(QueueInner { device, queue, last: Mutex::new(None) }) })
    }

    /// The device's state: its backend device and caches.
    pub(crate) fn state(&self) -> Arc<DeviceState> {
        self.inner.device.clone()
    }

    /// The device's name, as the driver reports it.
    pub fn device_name(&self) -> &str {
        &self.inner.device.name
    }

    /// A buffer of `len` elements, uninitialised on the device.
    pub fn buffer<T: Pod>(&self, len: usize) -> Result<Buffer<T>, Error> {
        let mem = self.inner.device.device.alloc(len * std::mem::size_of::<T>())?;
        Ok(Buffer { mem: Arc::new(mem), len, queue: self.clone(), _t: PhantomData })
    }

    /// A buffer holding a copy of `data`.
    pub fn buffer_from<T: Pod>(&self, data: &[T]) -> Result<Buffer<T>, Error> {
        let buffer = self.buffer(data.len())?;
        buffer.write(data)?;
        Ok(buffer)
    }

    /// Waits until everything submitted has finished.
    pub fn wait(&self) -> Result<(), Error> {
        self.inner.queue.finish()
    }
}

/// Device memory holding `len` values of `T`.
pub struct Buffer<T: Pod> {
    pub(super) mem: Arc<Memory>,
    len: usize,
    queue: Queue,
    _t: PhantomData<T>,
}

impl<T: Pod> Buffer<T> {
    /// How many values of `T` it holds.
    pub fn len(&self) -> usize {
        self.len
    }

    /// Whether it holds none.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Copies the buffer to the host, after everything submitted before.
    pub fn read(&self) -> Result<Vec<T>, Error> {
        let mut out = vec![0u8; self.len * std::mem::size_of::<T>()];
        self.queue.inner.queue.read(&self.mem, &mut out)?;
        // Copy element by element out of the byte vector, which has no alignment for T.
        Ok(out
            .chunks_exact(std::mem::size_of::<T>().max(1))
            .take(self.len)
            // SAFETY: each chunk has `size_of::<T>()` bytes, and any bit pattern is a valid `T`.
            .map(|c| unsafe { std::ptr::read_unaligned(c.as_ptr().cast::<T>()) })
            .collect())
    }

    /// Overwrites the buffer with `data`, which must have exactly `len` elements.
    pub fn write(&self, data: &[T]) -> Result<(), Error> {
        if data.len() != self.len {
            return Err(Error::InvalidArgument(format!(
                "writing {} elements into a buffer of {}",
                data.len(),
                self.len
            )));
        }
        self.queue.inner.queue.write(&self.mem, as_bytes(data))
    }
}
