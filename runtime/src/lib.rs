//! `sycl-runtime`: runs kernels whose device code lives in this executable and in the shared
//! libraries it loaded, linking across them at run time.
//!
//! At first use the runtime reads the device images that `sycl-ld` embedded in every loaded
//! binary (from memory, in the dynamic loader's order), indexes kernels and exported symbols,
//! and for each kernel collects the images that resolve its imports, compiles each once,
//! links them through the device's driver (OpenCL, or the CUDA driver for NVIDIA GPUs) and
//! caches the program. A program's side is a build script that compiles its device code with
//! `sycl_build::Build`, `sycl-ld` as its linker, and the API below; the repository's README and
//! `docs/GUIDE.md` show the whole of it.
//!
//! ```no_run
//! mod kernels {
//!     // What `sycl_runtime::include_kernels!("app");` brings in after `Build::compile("app")`,
//!     // for `kernel void app_kernel(global int* out)`: a name constant, and a typed launcher.
//!     pub const APP_KERNEL: &str = "app_kernel";
//! }
//!
//! let q = sycl_runtime::Queue::new()?; // the device `SYCL_DEVICE` picks, or the default
//! let out = q.buffer::<i32>(8)?;
//! let done = q.launch(kernels::APP_KERNEL).arg(&out).global([8]).run()?; // never waits
//! done.wait()?; // or `.await` it; a read waits by itself
//! println!("{:?}", out.read()?);
//! # Ok::<(), sycl_runtime::Error>(())
//! ```
//!
//! # The model: queues, buffers, launches, events
//!
//! - A [`Queue`] is an in-order command queue on one device: [`Queue::new`] opens one on the
//!   default device, [`Queue::with_device`] on the device a selector picks (as `SYCL_DEVICE`
//!   does), [`Queue::on`] on a [`DeviceInfo`] of [`devices`]. A clone is a handle to the same
//!   queue; [`Queue::new`] twice gives two queues of one device, which share its programs.
//! - A [`Buffer<T>`] is device memory of `T: `[`Pod`] values, made by a queue
//!   ([`Queue::buffer`], [`Queue::buffer_from`], [`Queue::buffer_zeroed`]); its reads, writes,
//!   copies and fills ([`Buffer::read_into`], [`Buffer::write`], [`Buffer::copy_from`],
//!   [`Buffer::fill`], …) go through that queue, and [`Buffer::map`] reads it in place. A
//!   [`BufferView`] ([`Buffer::slice`], [`Buffer::split_at`]) is part of one, read, written,
//!   copied, filled and given to kernels as a buffer is. A [`UsmBuffer<T>`]
//!   ([`Queue::malloc_device`]) is a buffer at a fixed device address, which device code may
//!   store and follow (lists, trees). A [`HostBuffer<T>`] ([`Queue::host_buffer`]) is host memory for asynchronous copies, each a
//!   [`Transfer`] that borrows it until the copy completed.
//! - A [`Launch`] ([`Queue::launch`], or the typed launcher [`include_kernels!`] brings for each
//!   kernel) takes the kernel's arguments ([`Launch::arg`]: buffers, views, values, [`Local`]
//!   memory; checked against the kernel's parameters, or at compile time by a typed launcher),
//!   its global range ([`Launch::global`]) and optionally a work-group size, an offset, events
//!   to wait for ([`Launch::after`]) or a kernel bundle; [`Launch::run`] enqueues it.
//! - An [`Event`] is the completion of one command: every launch returns one, and so do the
//!   asynchronous copies. [`Event::wait`], [`Event::wait_timeout`] and [`wait_all`] wait on the
//!   host; an `Event` is a `Future` too, woken by the driver's callback. On a profiled queue
//!   ([`Queue::profiled`]) it times the command ([`Event::elapsed`], [`Event::profile`]).
//! - A [`Graph`] is work recorded once ([`Queue::record`]: launches, copies and fills given
//!   to a [`Recorder`], checked then, run never) and replayed whole with [`Graph::run`], on
//!   any queue of its device, with no check and no lookup (a CUDA graph on a GPU); it keeps
//!   alive the buffers and programs it uses, and [`Graph::set_arg`] changes a recorded
//!   launch's arguments.
//!
//! Nothing waits unless asked: a launch returns at once, a read ([`Buffer::read`]) waits for
//! what its queue was given before it, and [`Queue::wait`] for everything. Every handle is
//! `Send + Sync` (checked at compile time): threads may share one queue.
//!
//! # Ordering
//!
//! Commands on one queue run in the order they were given. Across queues, every command that
//! uses a [`Buffer`] (a launch, a copy, a fill, a read or write, an asynchronous transfer, a
//! map) is ordered after the earlier commands of other queues that conflict with it: a read
//! after the last write, a write after the last write and every read since. A launch reads
//! through a `constant` or `global const` pointer parameter and writes through any other. The
//! queue waits on the device; the host does not. So a program never waits by hand for
//! another queue's kernel before reading, mapping or reusing a buffer, and a kernel never sees
//! a buffer half written by another queue's. [`Launch::after`] and [`Queue::wait_for`] order
//! what no buffer shows. A buffer may be dropped while commands use it: its memory is freed
//! after them, without the host waiting.
//!
//! The same holds across devices: a copy between two devices ([`Buffer::copy_from`]) uses
//! both buffers, and events of any device order launches. A queue waits on the device where
//! its driver can (within a device; between CUDA GPUs), and the host waits where it cannot
//! (between OpenCL devices, or the two drivers).
//!
//! # Kernels, programs and caches
//!
//! A kernel is found by name in every loaded binary, and its imports resolve in the dynamic
//! loader's order ([`STRICT_ENV`] makes a symbol exported twice an error). Its program is
//! built at its first launch on a device and cached: in memory for the process, and on disk
//! across processes ([`CACHE_DIR_ENV`], [`CACHE_DISABLE_ENV`], [`CACHE_MAX_BYTES_ENV`]).
//! [`KernelBundle`]s make those steps explicit, as SYCL 2020's kernel bundles: [`compile`],
//! [`link`] (where imports resolve, or fail), [`build`], specialization constants
//! ([`KernelBundle::with_spec_constant`], [`Launch::spec_constant`]).
//! [`load_device_library`] loads device code from a file made by `sycl-ld device-lib`.
//!
//! # Errors
//!
//! Every fallible call returns [`Error`], whose message names the thing and the remedy;
//! [`Error::kind`] says what a program can do about it ([`ErrorKind`]: out of memory, device
//! lost, invalid argument, not supported, a build or link error, …).
//!
//! # Driver handles, cudarc and opencl3
//!
//! Every object hands out its driver handles ([`Queue::native`], [`Buffer::native`],
//! [`Event::native`], [`DeviceInfo::native`]) and adopts a program's own
//! ([`Queue::from_native`], [`Buffer::from_native`]). With the `cudarc` and `opencl3`
//! features, [`interop`] converts cudarc's and opencl3's streams, queues, memory and events
//! safely, and says who owns what and how work is ordered between the libraries.
//!
//! # Features
//!
//! - `cuda` (default): NVIDIA GPUs through the CUDA driver, loaded at run time (no CUDA is
//!   needed to build or run); without it the runtime drives OpenCL devices alone.
//! - `cudarc`, `opencl3`: the conversions of [`interop`].
//! - `bytemuck`: every `bytemuck::Pod` type is a [`Pod`] (buffer element and argument).
//! - `half`: `half::f16` and `half::bf16` as buffer elements and arguments.
//!
//! Environment: `SYCL_DEVICE` picks the device (`intel`, `pocl`, `cuda`, `cpu`, `pocl:0`: see
//! [`Queue::with_device`]; [`devices`] lists them, [`Queue::on`] opens one); `SYCL_TRACE=1`
//! prints one line per event (`sycl: discover …`).

// The docs link the conversions of `interop`, which exist with the `cudarc` and `opencl3`
// features; CI builds the docs with every feature, where every link must resolve.
#![cfg_attr(
    not(all(feature = "cudarc", feature = "opencl3")),
    allow(rustdoc::broken_intra_doc_links)
)]

// The rooms, each importing only those above it: `error` and `trace` serve every room; then
// the loaded binaries' images (`registry`, filled by `discovery`), the drivers (`backend`),
// what a program is linked from (`resolve`), building it (`program`), the process's devices
// and caches (`process`), the API (`launch`), and its conversions with cudarc and opencl3
// (`interop`).
mod error;
mod trace;
mod registry;
mod discovery;
mod backend;
mod resolve;
mod program;
mod process;
mod launch;
#[cfg(any(feature = "cudarc", feature = "opencl3"))]
pub mod interop;

pub use backend::native::{
    cl_command_queue, cl_context, cl_device_id, cl_event, cl_mem, cl_platform_id, CUcontext,
    CUdevice, CUdeviceptr, CUevent, CUstream, NativeBuffer, NativeDevice, NativeEvent, NativeQueue,
};
pub use discovery::files::{
    load_device_library, load_device_library_with, DeviceLibrary, LibraryScope,
};
pub use error::{DriverCode, Error, ErrorKind};
pub use launch::bundle::{
    build, compile, get_kernel_bundle, get_kernel_bundle_for, has_kernel_bundle, join, link,
    BuildProperty, BundleState, DeviceImage, Executable, Input, KernelBundle, Object, SpecConstant,
};
pub use launch::device::{devices, Backend, DeviceInfo, DeviceType, WorkGroupSizes};
pub use launch::event::{wait_all, Event, Profile};
pub use launch::graph::{Graph, GraphNode, Recorder, Recording, COMMAND_BUFFERS_ENV};
pub use launch::host::{HostBuffer, Mapped, MappedMut, Transfer};
pub use launch::kernel::{Eager, GlobalRange, KernelArg, Launch, Launcher, Local, NoGlobalRange};
pub use launch::queue::{Buffer, Pod, Queue};
pub use launch::typed::{c, DeviceMemory, OfType};
pub use launch::usm::UsmBuffer;
pub use launch::view::{AsView, BufferView};
pub use process::{compile_object_for, DEVICE_ENV};
pub use program::disk::{
    DIR_ENV as CACHE_DIR_ENV, DISABLE_ENV as CACHE_DISABLE_ENV,
    MAX_BYTES_ENV as CACHE_MAX_BYTES_ENV,
};
pub use resolve::STRICT_ENV;

// The concurrency contract the types document, checked by the compiler: every handle a
// program holds may move to another thread and be shared between threads.
const _: () = {
    const fn send_sync<T: Send + Sync>() {}
    send_sync::<Queue>();
    send_sync::<Buffer<f32>>();
    send_sync::<Event>();
    send_sync::<HostBuffer<f32>>();
    send_sync::<Transfer<'static>>();
    send_sync::<KernelBundle<Executable>>();
    send_sync::<KernelBundle<Input>>();
    send_sync::<Graph>();
};

/// Entry points for the fuzz targets, which check decoders no user calls directly.
#[doc(hidden)]
pub mod fuzz_support {
    /// Checks `bytes` as the persistent-cache entry of `key`; the payload when it is intact.
    pub fn decode_cache_entry<'a>(bytes: &'a [u8], key: &str) -> Result<&'a [u8], String> {
        crate::program::disk::decode_entry(bytes, key)
    }

    /// The bytes the persistent cache writes for `payload` under `key`.
    pub fn encode_cache_entry(key: &str, payload: &[u8]) -> Vec<u8> {
        crate::program::disk::encode_entry(key, payload)
    }
}

/// Entry points for the tests, which make the driver fail in ways loaded images should not.
#[doc(hidden)]
pub mod test_support {
    use std::sync::Arc;

    use crate::program::Step;
    use crate::Error;

    /// Compiles each OpenCL C source for the OpenCL device `selector` picks and links the
    /// objects as the runtime links images, so a test sees the error a link the driver refuses
    /// gives. A device without OpenCL C (a CUDA GPU) fails at the first source.
    pub fn link_sources(selector: &str, sources: &[&str]) -> Result<(), Error> {
        let state = crate::process::runtime().device(Some(selector))?;
        let mut objects = Vec::new();
        for source in sources {
            let object = state.device.compile_source(source).map_err(|f| {
                state.failed(Step::Compile, format!("compiling source {}", objects.len()), "", f)
            })?;
            objects.push(Arc::new(object));
        }
        let names: Vec<String> = (0..objects.len()).map(|i| format!("source {i}")).collect();
        state.link_objects(&objects, "", &names).map(drop)
    }

    /// Builds OpenCL C `source` on the queue's (OpenCL) device as the driver builds a source
    /// itself (`clCreateProgramWithSource`, `clBuildProgram` with `options`) and runs `kernel`
    /// over `global` work-items, so that a test can compare the driver's own build of a source
    /// with the program the runtime makes of the same source's images. A device without
    /// OpenCL C (a CUDA GPU) fails to build it.
    pub fn run_source(
        queue: &crate::Queue,
        source: &str,
        options: &str,
        kernel: &str,
        args: &[&dyn crate::KernelArg<'_>],
        global: usize,
    ) -> Result<(), Error> {
        let state = queue.state();
        let program = state
            .device
            .build_source(source, options)
            .map_err(|f| state.failed(Step::Build, "building a source".into(), options, f))?;
        let args: Vec<_> = args.iter().map(|a| a.to_arg()).collect();
        queue.run_program(&Arc::new(program), kernel, &args, &[global])
    }
}

/// Entry points for the benchmarks, which measure internals no user calls directly.
#[doc(hidden)]
pub mod bench_support;

/// Includes the kernel-name constants that `sycl_build::Build::compile(NAME)` generated.
#[macro_export]
macro_rules! include_kernels {
    ($name:literal) => {
        include!(concat!(env!("OUT_DIR"), "/sycl-kernels-", $name, ".rs"));
    };
}
