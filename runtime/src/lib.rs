//! `sycl-runtime`: runs kernels whose device code lives in this executable and in the shared
//! libraries it loaded, linking across them at run time.
//!
//! At first use the runtime reads the device images that `sycl-ld` embedded in every loaded
//! binary (from memory, in the dynamic loader's order), indexes kernels and exported symbols,
//! and for each kernel collects the images that resolve its imports, compiles each once,
//! links them through the device's driver (OpenCL, or the CUDA driver for NVIDIA GPUs) and
//! caches the program.
//!
//! ```no_run
//! mod kernels {
//!     // What `sycl_runtime::include_kernels!("app");` brings in after `Build::compile("app")`:
//!     pub const APP_KERNEL: &str = "app_kernel";
//! }
//!
//! let q = sycl_runtime::Queue::new()?;
//! let out = q.buffer::<i32>(8)?;
//! q.launch(kernels::APP_KERNEL).arg(&out).global([8]).run()?;
//! println!("{:?}", out.read()?);
//! # Ok::<(), sycl_runtime::Error>(())
//! ```
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
//! Environment: `SYCL_DEVICE` picks the device (`intel`, `pocl`, `cuda`, `cpu`, `pocl:0`: see
//! [`Queue::with_device`]; [`devices`] lists them, [`Queue::on`] opens one); `SYCL_TRACE=1`
//! prints one line per event (`sycl: discover …`).

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
mod interop;

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
pub use launch::host::{HostBuffer, Mapped, MappedMut, Transfer};
pub use launch::kernel::{GlobalRange, KernelArg, Launch, Local, NoGlobalRange};
pub use launch::queue::{Buffer, BufferView, Pod, Queue};
pub use launch::typed::{c, DeviceMemory, OfType};
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
