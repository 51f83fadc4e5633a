//! Launch costs, measured on the demo in fresh processes, against the same work done by hand:
//! - the first launch through the runtime (discovery, collection, compile, link, kernel,
//!   enqueue, finish) against the same driver calls written by hand with `cl3` on the same
//!   SPIR-V images (bound: ratio <= 1.02). Each side runs in its own new process, alternating,
//!   because the Intel runtime's first build in a process costs far more than later ones;
//!   the persistent cache is off;
//! - a cached launch (program in the in-memory cache) against a raw `clEnqueueNDRangeKernel`
//!   and `clFinish` of an already created kernel, in one process, in alternating blocks
//!   (bound: ratio <= 1.05). Also shown: raw launches that create and release their kernel
//!   object each time, as the runtime does, which tells the driver's share of the difference
//!   from the runtime's own;
//! - a new process's first launch with a warm persistent cache against a cold one (empty
//!   cache directory) (bound: cold / warm >= 10);
//! - launch throughput on each CPU device (`intel`, `pocl`): 100,000 asynchronous launches
//!   through the runtime, then one wait, against as many raw `clEnqueueNDRangeKernel` of an
//!   already created kernel (each event released), then one `clFinish`, in rounds (each side
//!   first in turn) (bound: launches per second, runtime / raw >= 0.90, the median of the
//!   rounds' own ratios; on PoCL, which takes no SPIR-V, the raw side builds the same kernel
//!   from OpenCL C); and the heap allocations of the runtime's launches in steady state, counted by the
//!   program's global allocator (bound: zero per launch). Also shown: raw launches that set
//!   the argument each time (`clSetKernelArg`), as a launch through the runtime must.
//!
//! The measured program is `program/app.rs` (see `common`); times are taken inside it, around
//! the launch, after the queue and the buffer exist. Prints medians and `RATIO` lines.
//!
//! Run with `cargo bench -p sycl-runtime --bench launch`. Without `--bench` (as in
//! `cargo test --benches`) every measurement runs once, as a smoke test.

mod common;

use std::path::Path;

use common::{median, ms, ratio, us, Demo};

/// The CPU devices the throughput is measured on, by their `SYCL_DEVICE` selectors.
const CPU_DEVICES: [&str; 2] = ["intel", "pocl"];

/// Processes per side for the first-launch comparisons, the cached-launch loop, and the
/// throughput blocks.
struct Runs {
    processes: usize,
    rounds: usize,
    block: usize,
    /// Asynchronous launches per throughput block (the 100,000), and timed rounds.
    throughput_launches: usize,
    throughput_rounds: usize,
}

fn main() {
    let runs = if common::bench_mode() {
        Runs {
            processes: 20,
            rounds: 40,
            block: 50,
            throughput_launches: 100_000,
            throughput_rounds: 15,
        }
    } else {
        Runs { processes: 1, rounds: 1, block: 2, throughput_launches: 100, throughput_rounds: 1 }
    };
    let demo = Demo::build();
    let dir = tempfile::Builder::new().prefix("sycl-bench-launch").tempdir().unwrap();
    let images = demo.kernel_images(dir.path());
    let image_args: Vec<&str> = images.iter().map(|p| p.to_str().unwrap()).collect();
    let no_cache: &[(&str, &Path)] = &[("SYCL_CACHE_DISABLE", Path::new("1"))];
    let first = |values: Vec<(String, f64)>| value(&values, "first_us") * 1e-6;

    // First launch, runtime against hand-written, one new process each, alternating.
    let mut hand_args = vec!["hand-first"];
    hand_args.extend(&image_args);
    let (mut through_runtime, mut by_hand, mut discover) = (Vec::new(), Vec::new(), Vec::new());
    for _ in 0..runs.processes {
        let values = demo.run(&["runtime-first"], no_cache);
        discover.push(value(&values, "discover_us") * 1e-6);
        through_runtime.push(first(values));
        by_hand.push(first(demo.run(&hand_args, no_cache)));
    }
    let (rt_min, hand_min) = (min(&through_runtime), min(&by_hand));
    let (rt, hand, discover) = (median(through_runtime), median(by_hand), median(discover));

    // Cached launches against raw enqueues, in one process.
    let (rounds, block) = (runs.rounds.to_string(), runs.block.to_string());
    let mut cached_args = vec!["cached", rounds.as_str(), block.as_str()];
    cached_args.extend(&image_args);
    let values = demo.run(&cached_args, no_cache);
    let (cached, raw) =
        (value(&values, "runtime_launch_ns") * 1e-9, value(&values, "raw_launch_ns") * 1e-9);
    let raw_new_kernel = value(&values, "raw_new_kernel_launch_ns") * 1e-9;
    let (cached_min, raw_min) = (
        value(&values, "runtime_launch_min_ns") * 1e-9,
        value(&values, "raw_launch_min_ns") * 1e-9,
    );

    // Persistent cache: a cold process (empty directory) and a warm one (the entry of the
    // first cold run), alternating.
    let warm_dir = dir.path().join("warm");
    let (mut cold, mut warm) = (Vec::new(), Vec::new());
    for n in 0..runs.processes {
        let cold_dir = dir.path().join(format!("cold-{n}"));
        cold.push(first(demo.run(&["runtime-first"], &[("SYCL_CACHE_DIR", &cold_dir)])));
        if n == 0 {
            std::fs::rename(&cold_dir, &warm_dir).unwrap();
        }
        warm.push(first(demo.run(&["runtime-first"], &[("SYCL_CACHE_DIR", &warm_dir)])));
    }
    let (cold, warm) = (median(cold), median(warm));

    // Launch throughput, on each CPU device, in one process each.
    let (launches, throughput_rounds) =
        (runs.throughput_launches.to_string(), runs.throughput_rounds.to_string());
    let mut throughput_args = vec!["throughput", launches.as_str(), throughput_rounds.as_str()];
    throughput_args.extend(&image_args);
    let throughput: Vec<(&str, Vec<(String, f64)>)> = CPU_DEVICES
        .iter()
        .map(|&device| {
            let env: &[(&str, &Path)] =
                &[("SYCL_CACHE_DISABLE", Path::new("1")), ("SYCL_DEVICE", Path::new(device))];
            (device, demo.run(&throughput_args, env))
        })
        .collect();

    let p = runs.processes;
    println!("launch of the demo kernel ({} images linked; medians; release build)", images.len());
    println!(
        "  first launch, runtime          {}   (min {}, {p} processes, persistent cache off)",
        ms(rt),
        ms(rt_min)
    );
    println!(
        "  first launch, by hand (cl3)    {}   (min {}, {p} processes)",
        ms(hand),
        ms(hand_min)
    );
    println!("    of the runtime's, discovery  {}   (all loaded binaries, measured again after the launch)", ms(discover));
    println!(
        "  cached launch, runtime         {}   (min {}, {} launches)",
        us(cached),
        us(cached_min),
        runs.rounds * runs.block
    );
    println!("  raw enqueue + finish           {}   (min {})", us(raw), us(raw_min));
    println!("  raw, creating the kernel each  {}   (clCreateKernel, clSetKernelArg, enqueue, clReleaseKernel, finish)", us(raw_new_kernel));
    println!("  first launch, cold cache       {}   ({p} processes)", ms(cold));
    println!("  first launch, warm cache       {}   ({p} processes)", ms(warm));
    let n = runs.throughput_launches;
    println!(
        "launch throughput: {n} asynchronous launches then one wait (median of {} rounds)",
        runs.throughput_rounds
    );
    for (device, values) in &throughput {
        println!(
            "  {device:5} runtime {:>9.0} /s   raw clEnqueueNDRangeKernel {:>9.0} /s   \
             raw with clSetKernelArg each {:>9.0} /s (runtime / it {:.3})",
            value(values, "runtime_launches_per_s"),
            value(values, "raw_launches_per_s"),
            value(values, "raw_set_arg_launches_per_s"),
            value(values, "throughput_ratio_set_arg"),
        );
        println!(
            "        heap allocations in {n} launches through the runtime: {} (and {} in the \
             wait after them; raw: {})",
            value(values, "runtime_allocations"),
            value(values, "runtime_allocations_in_wait"),
            value(values, "raw_allocations"),
        );
    }
    ratio(
        "first launch: runtime / hand-written cl3",
        rt / hand,
        "<= 1.02",
        &format!("{} vs {}", ms(rt), ms(hand)),
    );
    ratio(
        "cached launch / raw clEnqueueNDRangeKernel",
        cached / raw,
        "<= 1.05",
        &format!("{} vs {} per launch+finish", us(cached), us(raw)),
    );
    ratio(
        "new process first launch: cold / warm persistent cache",
        cold / warm,
        ">= 10",
        &format!("{} vs {}", ms(cold), ms(warm)),
    );
    for (device, values) in &throughput {
        let (runtime, raw) =
            (value(values, "runtime_launches_per_s"), value(values, "raw_launches_per_s"));
        ratio(
            &format!("launches per second, runtime / raw clEnqueueNDRangeKernel, {device}"),
            value(values, "throughput_ratio"),
            ">= 0.90",
            &format!(
                "median of {} rounds' ratios ({:.2} to {:.2}); medians {runtime:.0} vs {raw:.0} \
                 launches/s; {n} asynchronous launches then one wait{}",
                runs.throughput_rounds,
                value(values, "throughput_ratio_min"),
                value(values, "throughput_ratio_max"),
                if value(values, "raw_kernel_from_source") == 1.0 {
                    " (the raw kernel built from OpenCL C: the driver takes no SPIR-V)"
                } else {
                    ""
                }
            ),
        );
        ratio(
            &format!("heap allocations per launch in steady state, {device}"),
            value(values, "runtime_allocations_per_launch"),
            "<= 0",
            &format!(
                "{} in {n} launches after warm-up ({} in the wait after them; raw side {})",
                value(values, "runtime_allocations"),
                value(values, "runtime_allocations_in_wait"),
                value(values, "raw_allocations"),
            ),
        );
    }
}

fn min(values: &[f64]) -> f64 {
    values.iter().copied().fold(f64::INFINITY, f64::min)
}

fn value(values: &[(String, f64)], key: &str) -> f64 {
    values
        .iter()
        .find(|(k, _)| k == key)
        .unwrap_or_else(|| panic!("the program printed no {key}: {values:?}"))
        .1
}
