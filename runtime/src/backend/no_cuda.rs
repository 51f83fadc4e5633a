//! The CUDA backend's stand-in when `sycl-runtime` is built without its `cuda` feature, as
//! `sycl-ld` builds it: a linker that compiles through an OpenCL device has no use for a GPU
//! driver. It finds no device, and its device, object, program, memory, queue and kernel types
//! have no values, so `backend/mod.rs` keeps its CUDA arms as they are and the compiler knows
//! that none of them runs. It must never reach for the CUDA driver (`libcuda.so.1`).

use super::{DeviceInfo, Failure, SpecValue};
use crate::Error;

/// No CUDA device: this build has no CUDA backend.
pub(crate) fn devices() -> Result<Vec<DeviceInfo>, Error> {
    Ok(Vec::new())
}

/// A CUDA device, of which this build opens none.
pub(crate) enum Device {}

/// The error for anything asked of CUDA device `ordinal`.
fn no_backend<T>(ordinal: i32) -> Result<T, Error> {
    Err(Error::InvalidArgument(format!(
        "CUDA device {ordinal}: this build of sycl-runtime has no CUDA backend (its `cuda` \
         feature is off)"
    )))
}

impl Device {
    pub(crate) fn open(ordinal: i32, _info: &DeviceInfo) -> Result<Device, Error> {
        no_backend(ordinal)
    }

    pub(crate) fn compile(
        &self,
        _ptx: &[u8],
        _spec: &[SpecValue],
        _flags: &str,
    ) -> Result<Code, Failure> {
        match *self {}
    }

    pub(crate) fn load_object(&self, _object: &[u8], _spec: &[SpecValue]) -> Result<Code, Failure> {
        match *self {}
    }

    pub(crate) fn link(&self, _objects: &[&Code], _flags: &str) -> Result<Module, Failure> {
        match *self {}
    }

    pub(crate) fn load(&self, _cubin: &[u8]) -> Result<Module, Failure> {
        match *self {}
    }

    pub(crate) fn stream(&self, _profiled: bool) -> Result<Stream, Error> {
        match *self {}
    }

    pub(crate) fn alloc(&self, _bytes: usize) -> Result<Memory, Error> {
        match *self {}
    }

    pub(crate) fn alloc_host(&self, _bytes: usize) -> Result<HostMemory, Error> {
        match *self {}
    }
}

/// An image's code, of which this build has none.
pub(crate) enum Code {}

/// A loaded module, of which this build has none.
pub(crate) enum Module {}

impl Module {
    pub(crate) fn image(&self) -> Vec<u8> {
        match *self {}
    }

    pub(crate) fn kernel(&self, _name: &str) -> Result<Kernel, Error> {
        match *self {}
    }
}

/// A kernel function, of which this build has none.
pub(crate) enum Kernel {}

impl Kernel {
    pub(crate) fn set_bytes(&mut self, _index: u32, _bytes: &[u8]) {
        match *self {}
    }

    pub(crate) fn set_local(&mut self, _index: u32, _size: usize) {
        match *self {}
    }

    pub(crate) fn work_group_sizes(&self) -> Result<(usize, usize), Error> {
        match *self {}
    }
}

/// A stream, of which this build has none.
pub(crate) enum Stream {}

impl Stream {
    pub(crate) fn read(&self, _mem: &Memory, _offset: usize, _out: &mut [u8]) -> Result<(), Error> {
        match *self {}
    }

    pub(crate) fn launch(
        &self,
        _kernel: &Kernel,
        _global: &[usize],
        _local: Option<&[usize]>,
        _after: &[&Event],
    ) -> Result<Event, Error> {
        match *self {}
    }

    pub(crate) fn flush(&self) -> Result<(), Error> {
        match *self {}
    }

    /// # Safety
    /// None needed: this build has no stream to call it on.
    pub(crate) unsafe fn read_async(
        &self,
        _mem: &Memory,
        _offset: usize,
        _out: *mut u8,
        _size: usize,
    ) -> Result<Event, Error> {
        match *self {}
    }

    /// # Safety
    /// None needed: this build has no stream to call it on.
    pub(crate) unsafe fn write_async(
        &self,
        _mem: &Memory,
        _offset: usize,
        _data: *const u8,
        _size: usize,
    ) -> Result<Event, Error> {
        match *self {}
    }

    pub(crate) fn marker(&self) -> Result<Event, Error> {
        match *self {}
    }

    pub(crate) fn map(&self, _mem: &Memory, _size: usize, _write: bool) -> Result<Mapping, Error> {
        match *self {}
    }

    pub(crate) fn unmap(&self, _mem: &Memory, _mapping: Mapping) -> Result<(), Error> {
        match *self {}
    }

    pub(crate) fn copy(
        &self,
        _src: (&Memory, usize),
        _dst: (&Memory, usize),
        _size: usize,
        _after: &[&Event],
    ) -> Result<Event, Error> {
        match *self {}
    }

    pub(crate) fn fill(
        &self,
        _mem: &Memory,
        _pattern: &[u8],
        _offset: usize,
        _size: usize,
    ) -> Result<Option<Event>, Error> {
        match *self {}
    }

    pub(crate) fn synchronize(&self) -> Result<(), Error> {
        match *self {}
    }
}

/// An event of a stream, of which this build has none.
#[derive(Clone)]
pub(crate) enum Event {}

impl Event {
    pub(crate) fn later(&self) -> Event {
        match *self {}
    }

    pub(crate) fn wait(&self) -> Result<(), Error> {
        match *self {}
    }

    pub(crate) fn is_complete(&self) -> Result<bool, Error> {
        match *self {}
    }

    pub(crate) fn on_complete(&self, _done: Box<dyn FnOnce() + Send>) -> Result<(), Error> {
        match *self {}
    }

    pub(crate) fn profile(&self) -> Result<Option<[u64; 4]>, Error> {
        match *self {}
    }
}

/// Device memory, of which this build has none.
pub(crate) enum Memory {}

impl Memory {
    pub(crate) fn address(&self) -> u64 {
        match *self {}
    }

    pub(crate) fn view(&self, _offset: usize, _whole: std::sync::Arc<super::Memory>) -> Memory {
        match *self {}
    }

    pub(crate) fn free_after(&self, _uses: Vec<Event>) {
        match *self {}
    }
}

/// Page-locked host memory, of which this build has none.
pub(crate) enum HostMemory {}

impl HostMemory {
    pub(crate) fn as_ptr(&self) -> *mut u8 {
        match *self {}
    }
}

/// A buffer's contents in host memory, of which this build has none.
pub(crate) enum Mapping {}

impl Mapping {
    pub(crate) fn as_ptr(&self) -> *mut u8 {
        match *self {}
    }
}

/// No CUDA device has a handle in this build.
pub(crate) fn native_device(ordinal: i32) -> Result<super::native::NativeDevice, Error> {
    no_backend(ordinal)
}

/// No CUDA device is known to this build.
pub(crate) fn ordinal_of(_device: super::native::CUdevice) -> Result<i32, Error> {
    no_backend(0)
}

impl Device {
    pub(crate) unsafe fn adopt(
        ordinal: i32,
        _info: &DeviceInfo,
        _context: super::native::CUcontext,
    ) -> Result<Device, Error> {
        no_backend(ordinal)
    }

    pub(crate) unsafe fn adopt_stream(
        &self,
        _stream: super::native::CUstream,
        _owner: Option<super::Owner>,
    ) -> Result<Stream, Error> {
        match *self {}
    }

    pub(crate) unsafe fn adopt_memory(
        &self,
        _address: super::native::CUdeviceptr,
        _size: usize,
    ) -> Result<Memory, Error> {
        match *self {}
    }

    pub(crate) fn context(&self) -> super::native::CUcontext {
        match *self {}
    }

    pub(crate) fn holds_context(&self) -> bool {
        match *self {}
    }
}

impl Stream {
    pub(crate) fn native(&self) -> super::native::NativeQueue {
        match *self {}
    }

    pub(crate) fn wait_for(&self, _after: &[&Event]) -> Result<(), Error> {
        match *self {}
    }
}

impl Memory {
    pub(crate) fn native(&self) -> super::native::NativeBuffer {
        match *self {}
    }
}

impl Event {
    pub(crate) fn native(&self) -> Result<super::native::NativeEvent, Error> {
        match *self {}
    }
}
