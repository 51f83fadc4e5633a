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
//! - `throughput LAUNCHES ROUNDS IMAGE...`: launch throughput on the device `SYCL_DEVICE`
//!   picks. LAUNCHES asynchronous launches through the runtime (each `run()`'s event dropped),
//!   then one `Queue::wait`, against LAUNCHES raw `clEnqueueNDRangeKernel` of an already
//!   created kernel (each returned event released, as any caller must), then one `clFinish`;
//!   in rounds after a warm-up (each side first in turn), launches per second of each side
//!   (median of rounds) and the median of the rounds' ratios; beside them, raw launches that
//!   also call `clSetKernelArg` each time, as the runtime must. And the heap allocations of a
//!   block of LAUNCHES launches in steady state, counted by this program's global allocator.
//! - `graphs LAUNCHES ROUNDS`: kernel graphs (the `graph` benchmark) on the device
//!   `SYCL_DEVICE` picks. LAUNCHES launches alternating `app_kernel` (the executable's, which
//!   calls the library's `LibDeviceFunc`) and `lib_kernel` (the library's own), each kernel on
//!   a small buffer of its own, then one wait: launched eagerly, replayed as one recorded
//!   graph, and recorded (a new graph, then its first replay, which builds it for the queue);
//!   in rounds after a warm-up (each side first in turn), the median time of each side and
//!   the median of the rounds' ratios to the eager time. The buffers of the eager launches
//!   and of the replays are checked equal bit for bit, and against the host's values.
//!
//! Each mode checks the kernel's output and prints `key value` lines on stdout.

use std::ffi::{c_void, CString};
use std::ptr;
use std::time::{Duration, Instant};

use cl3::types::{
    cl_command_queue, cl_context, cl_device_id, cl_kernel, cl_mem, cl_platform_id, cl_program,
    CL_BLOCKING,
};
use sycl_runtime::bench_support::{allocations, CountingAllocator};

mod kernels {
    sycl_runtime::include_kernels!("benchapp");
}

/// The demo's range.
const N: usize = 8;

/// Counts every allocation of this program's Rust code, the runtime's included.
#[global_allocator]
static ALLOCATOR: CountingAllocator = CountingAllocator;

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let usage = "usage: sycl_bench_app runtime-first | hand-first IMAGE... | cached ROUNDS BLOCK IMAGE... | runtime-loop LAUNCHES | throughput LAUNCHES ROUNDS IMAGE... | graphs LAUNCHES ROUNDS";
    match args.first().map(String::as_str) {
        Some("runtime-first") => runtime_first(),
        Some("hand-first") if args.len() > 1 => hand_first(&images(&args[1..])),
        Some("runtime-loop") if args.len() == 2 => {
            runtime_loop(args[1].parse().unwrap_or_else(|_| panic!("{usage}")))
        }
        Some("cached") if args.len() > 3 => {
            let number = |s: &str| s.parse::<usize>().unwrap_or_else(|_| panic!("{usage}"));
            cached(number(&args[1]), number(&args[2]), &images(&args[3..]))
        }
        Some("throughput") if args.len() > 3 => {
            let number = |s: &str| s.parse::<usize>().unwrap_or_else(|_| panic!("{usage}"));
            throughput(number(&args[1]), number(&args[2]), &images(&args[3..]))
        }
        Some("graphs") if args.len() == 3 => {
            let number = |s: &str| s.parse::<usize>().unwrap_or_else(|_| panic!("{usage}"));
            graphs(number(&args[1]), number(&args[2]))
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

fn throughput(launches: usize, rounds: usize, images: &[Vec<u8>]) {
    assert!(launches > 0 && rounds > 0, "throughput needs launches and rounds");
    let q = sycl_runtime::Queue::new().expect("a queue on the device SYCL_DEVICE picks");
    let out = q.buffer::<i32>(N).expect("a buffer");
    runtime_launch(&q, &out);
    check(&out.read().expect("reading the buffer"));

    // The raw side's kernel, built once before anything is timed: from the same SPIR-V images
    // where the driver takes SPIR-V (Intel); where it does not (PoCL, for which the runtime
    // links the images itself and hands the driver SPIR bitcode) from the same kernel written
    // as OpenCL C. How the kernel was built does not enter a launch's cost.
    let hand = Hand::on(q.device());
    let from_source = !hand.takes_spirv();
    let (_, kernel) =
        if from_source { hand.build_source(APP_KERNEL_SOURCE) } else { hand.build(images) };
    hand.set_arg(kernel);
    hand.enqueue(kernel);
    hand.finish();
    check(&hand.read());

    // One block of each side: `n` launches, then the one wait that ends them.
    let launch = || {
        let event = q.launch(kernels::APP_KERNEL).arg(&out).global([N]).run();
        drop(event.expect("launch through the runtime"));
    };
    let runtime_block = |n: usize| {
        let start = Instant::now();
        for _ in 0..n {
            launch();
        }
        q.wait().expect("waiting for the queue");
        start.elapsed()
    };
    let raw_block = |n: usize| {
        let start = Instant::now();
        for _ in 0..n {
            hand.enqueue(kernel);
        }
        hand.finish();
        start.elapsed()
    };
    // Shown beside them, not bounded: raw launches that also set the argument each time, as a
    // launch through the runtime must (its arguments may change from one launch to the next),
    // which tells the driver's share of the difference from the runtime's own.
    let raw_set_arg_block = |n: usize| {
        let start = Instant::now();
        for _ in 0..n {
            hand.set_arg(kernel);
            hand.enqueue(kernel);
        }
        hand.finish();
        start.elapsed()
    };

    // Warm-up: a whole block each, untimed, so that what either side keeps between launches
    // (the runtime's kernel cache and pools, the drivers' command and event structures) has
    // grown to its steady size before anything is counted or timed.
    runtime_block(launches);
    raw_block(launches);
    raw_set_arg_block(launches);

    // Heap allocations in steady state: a block of launches, counted apart from the wait that
    // ends it. The raw side is the control: `cl3` allocates nothing per call and the drivers'
    // allocations go to their own malloc, so it counts nothing unless something else allocates.
    let before = allocations();
    for _ in 0..launches {
        launch();
    }
    let launched = allocations();
    q.wait().expect("waiting for the queue");
    let waited = allocations();
    let raw_before = allocations();
    for _ in 0..launches {
        hand.enqueue(kernel);
    }
    let raw_launched = allocations();
    hand.finish();

    // Timed rounds, each side first in turn.
    let mut through_runtime = Vec::with_capacity(rounds);
    let mut raw = Vec::with_capacity(rounds);
    let mut raw_set_arg = Vec::with_capacity(rounds);
    let per_second = |time: Duration| launches as f64 / time.as_secs_f64();
    for round in 0..rounds {
        for side in (0..3).map(|s| (s + round) % 3) {
            match side {
                0 => through_runtime.push(per_second(runtime_block(launches))),
                1 => raw.push(per_second(raw_block(launches))),
                _ => raw_set_arg.push(per_second(raw_set_arg_block(launches))),
            }
        }
    }
    // The counter sees the runtime's allocations: a read into a new vector is one.
    let before_read = allocations();
    check(&out.read().expect("reading the buffer"));
    assert!(allocations() > before_read, "the counting allocator saw no allocation of a read");
    check(&hand.read());

    // The ratio is the median of each round's own: the sides of a round ran back to back,
    // so what else the machine was doing then weighs on both alike.
    let mut ratios: Vec<f64> = through_runtime.iter().zip(&raw).map(|(r, w)| r / w).collect();
    let ratio = median(&mut ratios);
    let mut set_arg_ratios: Vec<f64> =
        through_runtime.iter().zip(&raw_set_arg).map(|(r, w)| r / w).collect();
    let set_arg_ratio = median(&mut set_arg_ratios);
    let (runtime_rate, raw_rate) = (median(&mut through_runtime), median(&mut raw));
    println!("runtime_launches_per_s {runtime_rate:.0}");
    println!("raw_launches_per_s {raw_rate:.0}");
    println!("runtime_launches_per_s_max {:.0}", through_runtime[rounds - 1]);
    println!("raw_launches_per_s_max {:.0}", raw[rounds - 1]);
    // Ratios with every digit: the bench compares the median with its bound as printed.
    println!("throughput_ratio {ratio}");
    println!("throughput_ratio_min {}", ratios[0]);
    println!("throughput_ratio_max {}", ratios[rounds - 1]);
    println!("raw_set_arg_launches_per_s {:.0}", median(&mut raw_set_arg));
    println!("throughput_ratio_set_arg {set_arg_ratio}");
    println!("runtime_allocations {}", launched - before);
    println!("runtime_allocations_per_launch {}", (launched - before) as f64 / launches as f64);
    println!("runtime_allocations_in_wait {}", waited - launched);
    println!("raw_allocations {}", raw_launched - raw_before);
    println!("raw_kernel_from_source {}", u8::from(from_source));
}

/// Values per buffer of `graphs`' launches (one work-item each).
const GRAPH_N: usize = 16;

/// `graphs`' launch number `s`: `app_kernel` (even `s`, on the first buffer) or the helper
/// library's own `lib_kernel` (odd `s`, on the second).
fn graph_kernel(s: usize) -> &'static str {
    if s.is_multiple_of(2) {
        kernels::APP_KERNEL
    } else {
        "lib_kernel"
    }
}

fn graphs(launches: usize, rounds: usize) {
    assert!(launches > 1 && rounds > 0, "graphs needs launches (two or more) and rounds");
    let q = sycl_runtime::Queue::new().expect("a queue on the device SYCL_DEVICE picks");
    let buffers = || [0; 2].map(|_| q.buffer_zeroed::<i32>(GRAPH_N).expect("a buffer"));
    let (eager_out, replay_out) = (buffers(), buffers());
    // What `submit` enqueues, then the wait: the time of both, and of the submission alone.
    let timed = |submit: &dyn Fn()| {
        let start = Instant::now();
        submit();
        let submitted = start.elapsed().as_secs_f64();
        q.wait().expect("waiting for the queue");
        (start.elapsed().as_secs_f64(), submitted)
    };
    let eager = || {
        timed(&|| {
            for s in 0..launches {
                let launch = q.launch(graph_kernel(s)).arg(&eager_out[s % 2]).global([GRAPH_N]);
                drop(launch.run().expect("launch through the runtime"));
            }
        })
    };
    let record = || {
        let start = Instant::now();
        let graph = q
            .record(|r| {
                for s in 0..launches {
                    r.launch(graph_kernel(s)).arg(&replay_out[s % 2]).global([GRAPH_N]).run()?;
                }
                Ok(())
            })
            .expect("recording the launches");
        (graph, start.elapsed().as_secs_f64())
    };
    let replay =
        |graph: &sycl_runtime::Graph| timed(&|| drop(graph.run(&q).expect("replaying the graph")));

    // Warm-up: each kernel's program built, the graph built for the queue (its first replay),
    // then the results of both ways, from zeroed buffers, compared.
    eager();
    let (graph, _) = record();
    let (first_replay, _) = replay(&graph);
    check_graph_results(q.device_name(), &eager_out, &replay_out);

    // Timed rounds, each side first in turn; the recording side's new graph replayed once
    // (built for the queue, then run), timed apart. Beside each eager and replay time, the
    // time of its submission alone (the host's part).
    let (mut eager_s, mut replay_s, mut record_s, mut record_replay_s) =
        (Vec::new(), Vec::new(), Vec::new(), Vec::new());
    let (mut eager_submit, mut replay_submit) = (Vec::new(), Vec::new());
    for round in 0..rounds {
        for side in (0..3).map(|s| (s + round) % 3) {
            match side {
                0 => {
                    let (time, submit) = eager();
                    eager_s.push(time);
                    eager_submit.push(submit);
                }
                1 => {
                    let (time, submit) = replay(&graph);
                    replay_s.push(time);
                    replay_submit.push(submit);
                }
                _ => {
                    let (new, recording) = record();
                    record_s.push(recording);
                    record_replay_s.push(recording + replay(&new).0);
                }
            }
        }
    }
    check_graph_results(q.device_name(), &eager_out, &replay_out);

    // Ratios as the median of each round's own (the sides of a round ran back to back).
    let per_round = |side: &[f64]| -> Vec<f64> {
        let mut ratios: Vec<f64> = side.iter().zip(&eager_s).map(|(t, e)| t / e).collect();
        ratios.sort_by(f64::total_cmp);
        ratios
    };
    for (name, side) in
        [("replay", &replay_s), ("record", &record_s), ("record_replay", &record_replay_s)]
    {
        let mut ratios = per_round(side);
        // Every digit: the bench compares the median with its bound as printed.
        println!("{name}_ratio {}", median(&mut ratios));
        println!("{name}_ratio_min {}", ratios[0]);
        println!("{name}_ratio_max {}", ratios[rounds - 1]);
        println!("{name}_us {}", median(&mut side.clone()) * 1e6);
    }
    println!("eager_us {}", median(&mut eager_s) * 1e6);
    println!("eager_submit_us {}", median(&mut eager_submit) * 1e6);
    println!("replay_submit_us {}", median(&mut replay_submit) * 1e6);
    println!("first_replay_us {}", first_replay * 1e6);
}

/// Panics unless each buffer of the eager launches equals its replayed twin bit for bit and
/// holds what its kernel writes (`LibDeviceFunc(i)` is `2 i`; `lib_kernel` adds 100).
fn check_graph_results(
    device: &str,
    eager: &[sycl_runtime::Buffer<i32>; 2],
    replayed: &[sycl_runtime::Buffer<i32>; 2],
) {
    for (k, (e, r)) in eager.iter().zip(replayed).enumerate() {
        let (e, r) = (e.read().expect("reading a buffer"), r.read().expect("reading a buffer"));
        let bits = |v: &[i32]| v.iter().map(|x| x.to_ne_bytes()).collect::<Vec<_>>();
        assert!(
            bits(&e) == bits(&r),
            "on {device}: {}'s buffer after the graph's replay differs from the eager \
             launches' bit for bit: eager {e:?}, replay {r:?}",
            graph_kernel(k)
        );
        let want: Vec<i32> = (0..GRAPH_N as i32).map(|i| i * 2 + 100 * k as i32).collect();
        assert_eq!(e, want, "on {device}: {} computed the wrong values", graph_kernel(k));
    }
}

/// `app_kernel` with `LibDeviceFunc` (app.cl and helpers.cl) as one OpenCL C program, for a
/// raw side on a driver that takes no SPIR-V.
const APP_KERNEL_SOURCE: &str = "int LibDeviceFunc(int i) { return i * 2; }\n\
    __kernel void app_kernel(__global int *out) {\n\
        size_t i = get_global_id(0);\n\
        out[i] = LibDeviceFunc((int)i);\n\
    }\n";

/// Sorts `values` and returns their median (the upper one of an even count).
fn median(values: &mut [f64]) -> f64 {
    values.sort_by(f64::total_cmp);
    values[values.len() / 2]
}

/// Sorts `times` and returns their median in nanoseconds.
fn median_ns(times: &mut [Duration]) -> u128 {
    times.sort();
    times[times.len() / 2].as_nanos()
}

/// The first OpenCL device, in the ICD loader's order, that `wanted` accepts (given its
/// platform and its id).
fn opencl_device(wanted: impl Fn(cl_platform_id, cl_device_id) -> bool) -> Option<cl_device_id> {
    for platform in cl3::platform::get_platform_ids().expect("clGetPlatformIDs") {
        let Ok(ids) = cl3::device::get_device_ids(platform, cl3::device::CL_DEVICE_TYPE_ALL) else {
            continue;
        };
        if let Some(id) = ids.into_iter().find(|&id| wanted(platform, id)) {
            return Some(id);
        }
    }
    None
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
        let device = opencl_device(|_, id| {
            cl3::device::get_device_info(id, cl3::device::CL_DEVICE_IL_VERSION)
                .map(String::from)
                .unwrap_or_default()
                .contains("SPIR-V")
        });
        Hand::with_device(device.expect("an OpenCL device that accepts SPIR-V"))
    }

    /// As [`Hand::new`], on the OpenCL device a runtime queue is on: the first of its platform
    /// (by name) with its name, in the ICD loader's order.
    fn on(info: &sycl_runtime::DeviceInfo) -> Hand {
        let device = opencl_device(|platform, id| {
            let platform =
                cl3::platform::get_platform_info(platform, cl3::platform::CL_PLATFORM_NAME)
                    .map(String::from);
            let name =
                cl3::device::get_device_info(id, cl3::device::CL_DEVICE_NAME).map(String::from);
            let same = |text: Result<String, _>, expected: &str| {
                text.is_ok_and(|t| t.trim_end_matches('\0') == expected)
            };
            same(platform, &info.platform) && same(name, &info.name)
        });
        Hand::with_device(
            device.unwrap_or_else(|| panic!("no OpenCL device {} / {}", info.platform, info.name)),
        )
    }

    /// A context on `device`, a queue and the output buffer.
    fn with_device(device: cl_device_id) -> Hand {
        let context = cl3::context::create_context(&[device], ptr::null(), None, ptr::null_mut())
            .expect("clCreateContext");
        // SAFETY: the device belongs to the context; no properties.
        let queue = unsafe {
            cl3::command_queue::create_command_queue_with_properties(context, device, ptr::null())
        }
        .expect("clCreateCommandQueueWithProperties");
        // SAFETY: no host pointer.
        let out = unsafe {
            cl3::memory::create_buffer(
                context,
                cl3::memory::CL_MEM_READ_WRITE,
                N * size_of::<i32>(),
                ptr::null_mut(),
            )
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
                let program = cl3::program::create_program_with_il(self.context, il)
                    .expect("clCreateProgramWithIL");
                cl3::program::compile_program(
                    program,
                    &[self.device],
                    &options,
                    &[],
                    &[],
                    None,
                    ptr::null_mut(),
                )
                .expect("clCompileProgram");
                program
            })
            .collect();
        // SAFETY: every object was compiled in this context for this device.
        let linked = unsafe {
            cl3::program::link_program(
                self.context,
                &[self.device],
                &options,
                &objects,
                None,
                ptr::null_mut(),
            )
        }
        .expect("clLinkProgram");
        (linked, self.kernel(linked))
    }

    /// Whether the device takes SPIR-V (`CL_DEVICE_IL_VERSION`), which [`Hand::build`] needs.
    fn takes_spirv(&self) -> bool {
        cl3::device::get_device_info(self.device, cl3::device::CL_DEVICE_IL_VERSION)
            .map(String::from)
            .unwrap_or_default()
            .contains("SPIR-V")
    }

    /// clCreateProgramWithSource, clBuildProgram, clCreateKernel.
    fn build_source(&self, source: &str) -> (cl_program, cl_kernel) {
        let program = cl3::program::create_program_with_source(self.context, &[source])
            .expect("clCreateProgramWithSource");
        cl3::program::build_program(
            program,
            &[self.device],
            &CString::default(),
            None,
            ptr::null_mut(),
        )
        .expect("clBuildProgram");
        (program, self.kernel(program))
    }

    fn kernel(&self, program: cl_program) -> cl_kernel {
        let name = CString::new(kernels::APP_KERNEL).unwrap();
        cl3::kernel::create_kernel(program, &name).expect("clCreateKernel")
    }

    fn set_arg(&self, kernel: cl_kernel) {
        // SAFETY: a buffer argument is a pointer to its handle.
        unsafe {
            cl3::kernel::set_kernel_arg(
                kernel,
                0,
                size_of::<cl_mem>(),
                (&self.out as *const cl_mem).cast::<c_void>(),
            )
        }
        .expect("clSetKernelArg");
    }

    fn enqueue(&self, kernel: cl_kernel) {
        let global = [N];
        // SAFETY: one dimension, its argument set.
        let event = unsafe {
            cl3::command_queue::enqueue_nd_range_kernel(
                self.queue,
                kernel,
                1,
                ptr::null(),
                global.as_ptr(),
                ptr::null(),
                0,
                ptr::null(),
            )
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
