//! The measuring program of the `launch` benchmark: the demo (a kernel in the executable that
//! calls `LibDeviceFunc` from a shared library), linked by `sycl-ld` so that it carries device
//! images, with the same launch also written by hand against `cl3`.
//!
//! The benchmark copies this file into a throwaway cargo project, builds it in release mode
//! and runs it in fresh processes, one mode per process:
//! - `runtime-first`: the first launch through the runtime (discovery, collection, compile,
//!   link, kernel, arguments, enqueue, finish) after the queue and buffer exist, and then a
//!   discovery alone (the runtime's main work of its own in a first launch);
//! - `hand-first IMAGE...`: the same driver calls by hand on the same SPIR-V images (the ones
//!   the runtime links for `app_kernel`), after the same setup (context, queue, buffer);
//! - `cached ROUNDS BLOCK IMAGE...`: after one first launch each way, cached launches through
//!   the runtime against a raw `clEnqueueNDRangeKernel` + `clFinish` of an already created
//!   kernel, in alternating blocks, every launch timed on its own; and a third block, raw
//!   launches that create and release their kernel object each time, as the runtime does.
//!
//! - `runtime-loop LAUNCHES`: cached launches through the runtime only, for a profiler
//!   (`perf record`) to show where a cached launch spends its time.
//!
//! Each mode checks the kernel's output and prints `key value` lines on stdout.

use std::ffi::{c_void, CString};
use std::ptr;
use std::time::{Duration, Instant};

use cl3::types::{cl_command_queue, cl_context, cl_device_id, cl_kernel, cl_mem, cl_program, CL_BLOCKING};

mod kernels {
    sycl_runtime::include_kernels!("benchapp");
}

/// The demo's range.
const N: usize = 8;

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let usage = "usage: sycl_bench_app runtime-first | hand-first IMAGE... | cached ROUNDS BLOCK IMAGE... | runtime-loop LAUNCHES";
    match args.first().map(String::as_str) {
        Some("runtime-first") => runtime_first(),
        Some("hand-first") if args.len() > 1 => hand_first(&images(&args[1..])),
        Some("runtime-loop") if args.len() == 2 => runtime_loop(args[1].parse().unwrap_or_else(|_| panic!("{usage}"))),
        Some("cached") if args.len() > 3 => {
            let number = |s: &str| s.parse::<usize>().unwrap_or_else(|_| panic!("{usage}"));
            cached(number(&args[1]), number(&args[2]), &images(&args[3..]))
        }
        _ => {
            eprintln!("{usage}");
            std::process::exit(2);
        }
    }
}

fn images(paths: &[String]) -> Vec<Vec<u8>> {
    paths.iter().map(|p| std::fs::read(p).unwrap_or_else(|e| panic!("{p}: {e}"))).collect()
}

fn check(values: &[i32]) {
    let expected: Vec<i32> = (0..N as i32).map(|i| i * 2).collect();
    assert_eq!(values, expected, "app_kernel computed the wrong values");
}

/// One launch of the demo's kernel through the runtime, waited for.
fn runtime_launch(q: &sycl_runtime::Queue, out: &sycl_runtime::Buffer<i32>) {
    q.launch(kernels::APP_KERNEL).arg(out).global([N]).run().expect("launch through the runtime");
    q.wait().expect("waiting for the queue");
}

fn runtime_first() {
    let q = sycl_runtime::Queue::new().expect("a queue on the default device");
    let out = q.buffer::<i32>(N).expect("a buffer");
    let start = Instant::now();
    runtime_launch(&q, &out);
    let first = start.elapsed();
    check(&out.read().expect("reading the buffer"));
    // The runtime's own share of a first launch, beside the driver calls: finding and
    // indexing the images of every loaded binary (done again here, as the launch did it).
    let start = Instant::now();
    let images = sycl_runtime::bench_support::discover();
    let discover = start.elapsed();
    assert!(images >= 2, "the demo's images were not found");
    println!("first_us {}", first.as_micros());
    println!("discover_us {}", discover.as_micros());
}

fn runtime_loop(launches: usize) {
    let q = sycl_runtime::Queue::new().expect("a queue on the default device");
    let out = q.buffer::<i32>(N).expect("a buffer");
    let mut times = Vec::with_capacity(launches);
    for _ in 0..launches {
        let start = Instant::now();
        runtime_launch(&q, &out);
        times.push(start.elapsed());
    }
    check(&out.read().expect("reading the buffer"));
    println!("runtime_launch_ns {}", median_ns(&mut times));
}

fn hand_first(images: &[Vec<u8>]) {
    let hand = Hand::new();
    let start = Instant::now();
    let (_, kernel) = hand.build(images);
    hand.set_arg(kernel);
    hand.enqueue(kernel);
    hand.finish();
    let first = start.elapsed();
    check(&hand.read());
    println!("first_us {}", first.as_micros());
}

fn cached(rounds: usize, block: usize, images: &[Vec<u8>]) {
    let q = sycl_runtime::Queue::new().expect("a queue on the default device");
    let out = q.buffer::<i32>(N).expect("a buffer");
    runtime_launch(&q, &out);
    check(&out.read().expect("reading the buffer"));

    let hand = Hand::new();
    let (program, kernel) = hand.build(images);
    hand.set_arg(kernel);
    hand.enqueue(kernel);
    hand.finish();
    check(&hand.read());

    let mut through_runtime = Vec::with_capacity(rounds * block);
    let mut raw = Vec::with_capacity(rounds * block);
    let mut raw_new_kernel = Vec::with_capacity(rounds * block);
    for _ in 0..rounds {
        for _ in 0..block {
            let start = Instant::now();
            runtime_launch(&q, &out);
            through_runtime.push(start.elapsed());
        }
        for _ in 0..block {
            let start = Instant::now();
            hand.enqueue(kernel);
            hand.finish();
            raw.push(start.elapsed());
        }
        // What the runtime does per launch: a new kernel object each time.
        for _ in 0..block {
            let start = Instant::now();
            let kernel = hand.kernel(program);
            hand.set_arg(kernel);
            hand.enqueue(kernel);
            // SAFETY: the kernel is ours and released once; the enqueued command keeps what it needs.
            unsafe { cl3::kernel::release_kernel(kernel) }.expect("clReleaseKernel");
            hand.finish();
            raw_new_kernel.push(start.elapsed());
        }
    }
    check(&out.read().expect("reading the buffer"));
    check(&hand.read());
    println!("runtime_launch_ns {}", median_ns(&mut through_runtime));
    println!("raw_launch_ns {}", median_ns(&mut raw));
    println!("raw_new_kernel_launch_ns {}", median_ns(&mut raw_new_kernel));
    println!("runtime_launch_min_ns {}", through_runtime[0].as_nanos());
    println!("raw_launch_min_ns {}", raw[0].as_nanos());
}

/// Sorts `times` and returns their median in nanoseconds.
fn median_ns(times: &mut [Duration]) -> u128 {
    times.sort();
    times[times.len() / 2].as_nanos()
}

/// The demo launch written by hand against `cl3`. Handles are leaked: the process ends soon.
struct Hand {
    device: cl_device_id,
    context: cl_context,
    queue: cl_command_queue,
    out: cl_mem,
}

impl Hand {
    /// The device the runtime picks by default (the first that accepts SPIR-V, in the ICD
    /// loader's order), a context, a queue and the output buffer.
    fn new() -> Hand {
        let mut device = None;
        'platforms: for platform in cl3::platform::get_platform_ids().expect("clGetPlatformIDs") {
            let Ok(ids) = cl3::device::get_device_ids(platform, cl3::device::CL_DEVICE_TYPE_ALL) else { continue };
            for id in ids {
                let il = cl3::device::get_device_info(id, cl3::device::CL_DEVICE_IL_VERSION)
                    .map(String::from)
                    .unwrap_or_default();
                if il.contains("SPIR-V") {
                    device = Some(id);
                    break 'platforms;
                }
            }
        }
        let device = device.expect("an OpenCL device that accepts SPIR-V");
        let context = cl3::context::create_context(&[device], ptr::null(), None, ptr::null_mut()).expect("clCreateContext");
        // SAFETY: the device belongs to the context; no properties.
        let queue = unsafe { cl3::command_queue::create_command_queue_with_properties(context, device, ptr::null()) }
            .expect("clCreateCommandQueueWithProperties");
        // SAFETY: no host pointer.
        let out = unsafe {
            cl3::memory::create_buffer(context, cl3::memory::CL_MEM_READ_WRITE, N * size_of::<i32>(), ptr::null_mut())
        }
        .expect("clCreateBuffer");
        Hand { device, context, queue, out }
    }

    /// clCreateProgramWithIL and clCompileProgram per image, clLinkProgram, clCreateKernel:
    /// what the runtime does for a kernel whose images are not built yet.
    fn build(&self, images: &[Vec<u8>]) -> (cl_program, cl_kernel) {
        let options = CString::default();
        let objects: Vec<cl_program> = images
            .iter()
            .map(|il| {
                let program = cl3::program::create_program_with_il(self.context, il).expect("clCreateProgramWithIL");
                cl3::program::compile_program(program, &[self.device], &options, &[], &[], None, ptr::null_mut())
                    .expect("clCompileProgram");
                program
            })
            .collect();
        // SAFETY: every object was compiled in this context for this device.
        let linked = unsafe { cl3::program::link_program(self.context, &[self.device], &options, &objects, None, ptr::null_mut()) }
            .expect("clLinkProgram");
        (linked, self.kernel(linked))
    }

    fn kernel(&self, program: cl_program) -> cl_kernel {
        let name = CString::new(kernels::APP_KERNEL).unwrap();
        cl3::kernel::create_kernel(program, &name).expect("clCreateKernel")
    }

    fn set_arg(&self, kernel: cl_kernel) {
        // SAFETY: a buffer argument is a pointer to its handle.
        unsafe { cl3::kernel::set_kernel_arg(kernel, 0, size_of::<cl_mem>(), (&self.out as *const cl_mem).cast::<c_void>()) }
            .expect("clSetKernelArg");
    }

    fn enqueue(&self, kernel: cl_kernel) {
        let global = [N];
        // SAFETY: one dimension, its argument set.
        let event = unsafe {
            cl3::command_queue::enqueue_nd_range_kernel(self.queue, kernel, 1, ptr::null(), global.as_ptr(), ptr::null(), 0, ptr::null())
        }
        .expect("clEnqueueNDRangeKernel");
        // SAFETY: the event is ours, released once (as the runtime does).
        unsafe { cl3::event::release_event(event) }.expect("clReleaseEvent");
    }

    fn finish(&self) {
        cl3::command_queue::finish(self.queue).expect("clFinish");
    }

    fn read(&self) -> Vec<i32> {
        let mut values = vec![0i32; N];
        // SAFETY: a blocking read of the whole buffer into a vector of its size.
        let event = unsafe {
            cl3::command_queue::enqueue_read_buffer(
                self.queue,
                self.out,
                CL_BLOCKING,
                0,
                N * size_of::<i32>(),
                values.as_mut_ptr().cast(),
                0,
                ptr::null(),
            )
        }
        .expect("clEnqueueReadBuffer");
        // SAFETY: released once.
        unsafe { cl3::event::release_event(event) }.expect("clReleaseEvent");
        values
    }
}
