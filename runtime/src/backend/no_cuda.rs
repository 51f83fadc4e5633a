//! The CUDA backend's stand-in when `sycl-runtime` is built without its `cuda` feature, as
//! `sycl-ld` builds it: a linker that compiles through an OpenCL device has no use for a GPU
//! driver. It finds no device, and its device, object, program, memory, queue and kernel types
//! have no values: each keeps the contract (`backend/api.rs`) with bodies that cannot run, so
//! `backend/mod.rs` keeps its CUDA arms as they are, and the compiler lists here whatever the
//! contract gains. It must never reach for the CUDA driver (`libcuda.so.1`).

use super::api::{self, Api, Callback, DeviceInfo, Failure, Owner, SpecValue, Whole};
use super::native::{
    CUcontext, CUdevice, CUdeviceptr, CUstream, NativeBuffer, NativeDevice, NativeEvent,
    NativeQueue,
};
use crate::Error;

/// The CUDA driver, absent from this build.
pub(crate) struct Cuda;

/// The error for anything asked of CUDA device `ordinal`.
fn no_backend<T>(ordinal: i32) -> Result<T, Error> {
    Err(Error::InvalidArgument(format!(
        "CUDA device {ordinal}: this build of sycl-runtime has no CUDA backend (its `cuda` \
         feature is off)"
    )))
}

impl Api for Cuda {
    type Handle = i32;
    type RawContext = CUcontext;
    type RawDevice = CUdevice;
    type RawQueue = CUstream;
    type RawMemory = CUdeviceptr;
    type Device = Device;
    type Queue = Stream;
    type Memory = Memory;
    type HostMemory = HostMemory;
    type Mapping = Mapping;
    type Event = Event;
    type Object = Code;
    type Program = Module;
    type Kernel = Kernel;
    type GraphBuilder = GraphBuilder;
    type Graph = Graph;

    /// No CUDA device: this build has no CUDA backend.
    fn devices() -> Result<Vec<DeviceInfo>, Error> {
        Ok(Vec::new())
    }

    fn native_device(ordinal: i32) -> Result<NativeDevice, Error> {
        no_backend(ordinal)
    }

    fn handle_of(_device: CUdevice) -> Result<i32, Error> {
        no_backend(0)
    }
}

/// A CUDA device, of which this build opens none.
pub(crate) enum Device {}

impl api::Device<Cuda> for Device {
    fn open(ordinal: i32, _info: &DeviceInfo) -> Result<Device, Error> {
        no_backend(ordinal)
    }

    unsafe fn adopt(
        ordinal: i32,
        _info: &DeviceInfo,
        _context: CUcontext,
    ) -> Result<Device, Error> {
        no_backend(ordinal)
    }

    fn compile(&self, _code: &[u8], _spec: &[SpecValue], _flags: &str) -> Result<Code, Failure> {
        match *self {}
    }

    fn load_object(&self, _binary: &[u8], _spec: &[SpecValue]) -> Result<Code, Failure> {
        match *self {}
    }

    fn link(&self, _objects: &[&Code], _flags: &str) -> Result<Module, Failure> {
        match *self {}
    }

    fn load(&self, _binary: &[u8], _flags: &str) -> Result<Module, Failure> {
        match *self {}
    }

    fn queue(&self, _profiled: bool) -> Result<Stream, Error> {
        match *self {}
    }

    fn alloc(&self, _bytes: usize) -> Result<Memory, Error> {
        match *self {}
    }

    fn alloc_host(&self, _bytes: usize) -> Result<HostMemory, Error> {
        match *self {}
    }

    unsafe fn adopt_queue(
        &self,
        _context: CUcontext,
        _device: CUdevice,
        _queue: CUstream,
        _owner: &mut Option<Owner>,
    ) -> Result<Stream, Error> {
        match *self {}
    }

    unsafe fn adopt_memory(&self, _memory: CUdeviceptr, _size: usize) -> Result<Memory, Error> {
        match *self {}
    }

    fn holds_context(&self) -> bool {
        match *self {}
    }

    fn context_key(&self) -> usize {
        match *self {}
    }
}

/// A stream, of which this build has none.
pub(crate) enum Stream {}

impl api::Queue<Cuda> for Stream {
    fn launch(
        &self,
        _kernel: &Kernel,
        _global: &[usize],
        _local: Option<&[usize]>,
        _offset: Option<&[usize]>,
        _after: &[&Event],
    ) -> Result<Event, Error> {
        match *self {}
    }

    fn flush(&self) -> Result<(), Error> {
        match *self {}
    }

    fn read_blocking(
        &self,
        _mem: &Memory,
        _offset: usize,
        _out: &mut [u8],
    ) -> Option<Result<(), Error>> {
        match *self {}
    }

    unsafe fn read_async(
        &self,
        _mem: &Memory,
        _offset: usize,
        _out: *mut u8,
        _size: usize,
    ) -> Result<Event, Error> {
        match *self {}
    }

    unsafe fn write_async(
        &self,
        _mem: &Memory,
        _offset: usize,
        _data: *const u8,
        _size: usize,
    ) -> Result<Event, Error> {
        match *self {}
    }

    fn wait_for(&self, _after: &[&Event]) -> Result<(), Error> {
        match *self {}
    }

    fn marker(&self) -> Result<Event, Error> {
        match *self {}
    }

    fn map(&self, _mem: &Memory, _size: usize, _write: bool) -> Result<Mapping, Error> {
        match *self {}
    }

    fn unmap(&self, _mem: &Memory, _mapping: Mapping) -> Result<(), Error> {
        match *self {}
    }

    fn copy(
        &self,
        _src: (&Memory, usize),
        _dst: (&Memory, usize),
        _size: usize,
        _after: &[&Event],
    ) -> Result<Event, Error> {
        match *self {}
    }

    fn fill(
        &self,
        _mem: &Memory,
        _pattern: &[u8],
        _offset: usize,
        _size: usize,
    ) -> Result<Option<Event>, Error> {
        match *self {}
    }

    fn finish(&self) -> Result<(), Error> {
        match *self {}
    }

    fn native(&self) -> Result<NativeQueue, Error> {
        match *self {}
    }

    fn graph(&self) -> Result<Result<GraphBuilder, String>, Error> {
        match *self {}
    }

    fn replay(&self, _graph: &Graph, _after: &[&Event]) -> Result<Event, Error> {
        match *self {}
    }
}

/// A graph being built, of which this build has none.
pub(crate) enum GraphBuilder {}

impl api::GraphBuilder<Cuda> for GraphBuilder {
    fn kernel(
        &mut self,
        _kernel: &Kernel,
        _global: &[usize],
        _local: Option<&[usize]>,
        _offset: Option<&[usize]>,
        _after: &[usize],
    ) -> Result<(), Error> {
        match *self {}
    }

    fn copy(
        &mut self,
        _src: (&Memory, usize),
        _dst: (&Memory, usize),
        _size: usize,
        _after: &[usize],
    ) -> Result<(), Error> {
        match *self {}
    }

    fn fill(
        &mut self,
        _mem: &Memory,
        _pattern: &[u8],
        _offset: usize,
        _size: usize,
        _after: &[usize],
    ) -> Result<bool, Error> {
        match *self {}
    }

    fn finish(self) -> Result<Graph, Error> {
        match self {}
    }
}

/// A built graph, of which this build has none.
pub(crate) enum Graph {}

impl api::Graph<Cuda> for Graph {
    fn update_kernel(&mut self, _node: usize, _kernel: &Kernel) -> Result<bool, Error> {
        match *self {}
    }
}

/// Device memory, of which this build has none.
pub(crate) enum Memory {}

impl api::Memory<Cuda> for Memory {
    fn view(&self, _offset: usize, _size: usize, _whole: Whole) -> Result<Memory, Error> {
        match *self {}
    }

    fn frees_itself(&self) -> bool {
        match *self {}
    }

    fn free_after(&self, _uses: Vec<Event>) {
        match *self {}
    }

    fn native(&self) -> NativeBuffer {
        match *self {}
    }
}

/// Page-locked host memory, of which this build has none.
pub(crate) enum HostMemory {}

impl api::HostMemory for HostMemory {
    fn as_ptr(&self) -> *mut u8 {
        match *self {}
    }
}

/// A buffer's contents in host memory, of which this build has none.
pub(crate) enum Mapping {}

impl api::HostMemory for Mapping {
    fn as_ptr(&self) -> *mut u8 {
        match *self {}
    }
}

/// An event of a stream, of which this build has none.
#[derive(Clone)]
pub(crate) enum Event {}

impl api::Event for Event {
    fn wait(&self) -> Result<(), Error> {
        match *self {}
    }

    fn is_complete(&self) -> Result<bool, Error> {
        match *self {}
    }

    fn profile(&self) -> Result<Option<[u64; 4]>, Error> {
        match *self {}
    }

    fn on_complete(&self, _done: Callback) -> Result<(), Error> {
        match *self {}
    }

    fn later(&self) -> Result<Event, Error> {
        match *self {}
    }

    fn release_when_complete(self) {
        match self {}
    }

    fn flush(&self) -> Result<(), Error> {
        match *self {}
    }

    fn native(&self) -> Result<NativeEvent, Error> {
        match *self {}
    }
}

/// An image's code, of which this build has none.
pub(crate) enum Code {}

impl api::Object for Code {
    fn binary(&self) -> Result<Vec<u8>, Error> {
        match *self {}
    }
}

/// A loaded module, of which this build has none.
pub(crate) enum Module {}

impl api::Program<Cuda> for Module {
    fn binary(&self) -> Result<Vec<u8>, Error> {
        match *self {}
    }

    fn kernel(&self, _name: &str) -> Result<Kernel, Error> {
        match *self {}
    }
}

/// A kernel function, of which this build has none.
pub(crate) enum Kernel {}

impl api::Kernel<Cuda> for Kernel {
    fn work_group_sizes(&self, _device: &Device) -> Result<(usize, usize), Error> {
        match *self {}
    }

    fn set_mem(&mut self, _index: u32, _mem: &Memory) -> Result<(), Error> {
        match *self {}
    }

    fn set_native(&mut self, _index: u32, _mem: CUdeviceptr) -> Result<(), Error> {
        match *self {}
    }

    fn set_local(&mut self, _index: u32, _size: usize) -> Result<(), Error> {
        match *self {}
    }

    fn set_bytes(&mut self, _index: u32, _bytes: &[u8]) -> Result<(), Error> {
        match *self {}
    }
}
