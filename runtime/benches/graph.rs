//! Kernel graphs on each CPU device (`intel`, `pocl`), measured on the demo in one process per
//! device: 1,000 tiny launches alternating the demo's two kernels from two binaries
//! (`app_kernel`, in the executable, which calls `LibDeviceFunc` of the shared library, and
//! `lib_kernel`, the library's own), each kernel on a small buffer of its own (16 values, one
//! work-item each), then one wait:
//! - one replay of a graph recording the same 1,000 launches, then one wait, against the eager
//!   launches, each way a graph can replay on the device: the runtime's own replay of the
//!   checked commands one by one (a CPU device's default), shown without a bound, and the
//!   driver's command buffer (`SYCL_COMMAND_BUFFERS=1`), bound: replay / eager <= 0.5, which
//!   neither CPU driver meets (`docs/PERFORMANCE.md` says why);
//! - recording the 1,000 launches (`Queue::record`) against launching them eagerly (bound:
//!   record / eager <= 2.0); beside it, unbounded, recording plus the new graph's first
//!   replay, which builds it for the queue.
//!
//! The eager launches' buffers and the replay's are checked equal bit for bit (the program
//! panics otherwise). Times are medians of rounds in which each side goes first in turn, the
//! ratios the medians of the rounds' own; the measured program is `program/app.rs`'s
//! `graphs` mode. Which way the device replays a graph is read from the `graph-build` line of
//! `SYCL_TRACE`, in a run of its own (tracing would slow the eager launches).
//!
//! Run with `cargo bench -p sycl-runtime --bench graph`. Without `--bench` (as in
//! `cargo test --benches`) one round runs, as a smoke test.

mod common;

use std::path::Path;
use std::process::Command;

use common::{ratio, run_ok, us, Demo};

/// The CPU devices, by their `SYCL_DEVICE` selectors.
const CPU_DEVICES: [&str; 2] = ["intel", "pocl"];

/// Launches per block: the 1,000.
const LAUNCHES: &str = "1000";

/// How a device replays a graph, as its `graph-build` trace line says.
enum Replay {
    CommandBuffer,
    /// One by one, and why (the driver's reason).
    OneByOne(String),
}

fn main() {
    let rounds = if common::bench_mode() { "101" } else { "1" };
    let demo = Demo::build();
    for device in CPU_DEVICES {
        // The device's default first (whose recording ratio is the one bounded), then the
        // driver's command buffers.
        for command_buffers in ["", "1"] {
            measure(&demo, device, command_buffers, rounds);
        }
    }
}

/// One device's graphs, replayed as `SYCL_COMMAND_BUFFERS=command_buffers` decides.
fn measure(demo: &Demo, device: &str, command_buffers: &str, rounds: &str) {
    {
        let replay = replay_path(demo, device, command_buffers);
        let env: &[(&str, &Path)] = &[
            ("SYCL_CACHE_DISABLE", Path::new("1")),
            ("SYCL_DEVICE", Path::new(device)),
            ("SYCL_COMMAND_BUFFERS", Path::new(command_buffers)),
        ];
        let values = demo.run(&["graphs", LAUNCHES, rounds], env);
        let value = |key: &str| {
            values
                .iter()
                .find(|(k, _)| k == key)
                .unwrap_or_else(|| panic!("the program printed no {key}: {values:?}"))
                .1
        };
        let time = |key: &str| us(value(key) * 1e-6);
        let path = match &replay {
            Replay::CommandBuffer => "replayed as an OpenCL command buffer",
            Replay::OneByOne(why) => why,
        };
        println!(
            "graphs on {device}: {LAUNCHES} launches then one wait (medians of {rounds} rounds; \
             {path})"
        );
        println!(
            "  eager {} (submitting {})   replay {} (submitting {})   record {}   \
             record + first replay {}   (warm-up's first replay {})",
            time("eager_us"),
            time("eager_submit_us"),
            time("replay_us"),
            time("replay_submit_us"),
            time("record_us"),
            time("record_replay_us"),
            time("first_replay_us"),
        );
        let detail = |name: &str| {
            format!(
                "median of {rounds} rounds' ratios ({:.3} to {:.3}); medians {} vs {} eager; \
                 {LAUNCHES} launches of app_kernel and lib_kernel (two binaries) then one wait",
                value(&format!("{name}_ratio_min")),
                value(&format!("{name}_ratio_max")),
                time(&format!("{name}_us")),
                time("eager_us"),
            )
        };
        let what = format!("graph replay / eager launches, 1,000 tiny launches, {device}");
        match &replay {
            Replay::CommandBuffer => {
                ratio(&what, value("replay_ratio"), "<= 0.5", &detail("replay"))
            }
            Replay::OneByOne(why) => println!(
                "RATIO {} | {what}, no command buffer | {}; {why}",
                value("replay_ratio"),
                detail("replay")
            ),
        }
        if command_buffers.is_empty() {
            ratio(
                &format!("graph recording / eager launches, 1,000 launches, {device}"),
                value("record_ratio"),
                "<= 2.0",
                &detail("record"),
            );
        }
        println!(
            "RATIO {} | graph recording and first replay / eager launches, 1,000 launches, \
             {device} | {}",
            value("record_replay_ratio"),
            detail("record_replay")
        );
    }
}

/// How `device` replays the demo's graph: one traced run of the program (one round), its
/// `graph-build` line read.
fn replay_path(demo: &Demo, device: &str, command_buffers: &str) -> Replay {
    let mut cmd = Command::new(&demo.exe);
    cmd.args(["graphs", LAUNCHES, "1"])
        .env("SYCL_DEVICE", device)
        .env("SYCL_COMMAND_BUFFERS", command_buffers)
        .env("SYCL_TRACE", "1")
        .env("SYCL_CACHE_DISABLE", "1")
        .env_remove("SYCL_STRICT_EXPORTS")
        .env_remove("SYCL_CACHE_DIR");
    let output = run_ok(&mut cmd);
    let stderr = String::from_utf8_lossy(&output.stderr);
    let line = stderr
        .lines()
        .find(|l| l.starts_with("sycl: graph-build "))
        .unwrap_or_else(|| panic!("no `graph-build` line in the trace of {cmd:?}"));
    if line.ends_with(": an OpenCL command buffer") {
        Replay::CommandBuffer
    } else if let Some(at) = line.find("replayed one by one") {
        Replay::OneByOne(line[at..].to_string())
    } else {
        panic!("a `graph-build` line that says neither way: {line}")
    }
}
