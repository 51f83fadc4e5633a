//! Events on both CPU devices: launches on two queues ordered by an event alone (the first
//! held behind a user event, so that the order is shown on every run), every kind of wait,
//! an event awaited as a future (pending at its first poll, then woken; and clones of it,
//! each by a task of its own), a failed command's error at each of its waiters, an event of
//! another device waited for, one queue shared by threads (kernels compiled once, 1-D
//! and 2-D ranges of one module at once), and memory: copies in place, host buffers with
//! asynchronous transfers, maps, views (empty ones too); driver handles handed to the program
//! and the program's own adopted; a bytemuck struct, half precision, and the mistaken
//! argument types a launch refuses; local memory, and the sizes and ranges a launch or an
//! allocation refuses before the driver sees them.

use sycl_tests::{run_fixture_args, stderr, stdout};

fn scenario(device: &str, args: &[&str]) -> (String, String) {
    let out = run_fixture_args("events-app", args, &[("SYCL_DEVICE", device)]);
    let (o, trace) = (stdout(&out), stderr(&out));
    assert!(out.status.success(), "{args:?} on {device}: {o}{trace}");
    (o, trace)
}

/// Each launch ordered after another queue's event (by `after`, or by `Queue::wait_for`) is
/// given while that event's fill is held behind a user event: it must still be pending once
/// a later launch on a free queue has run, and once the fill is let go it comes after it (an
/// unordered launch would add one first, and the fill would leave 41, then 7).
#[test]
fn a_launch_waits_for_an_event_of_another_queue_and_every_wait_works() {
    for device in ["intel", "pocl"] {
        let (out, _) = scenario(device, &["order"]);
        assert_eq!(
            out.lines().collect::<Vec<_>>(),
            [
                "while the other queue's event is held: held",
                "after the other queue's event: 42 x 1024",
                "complete once waited: true true",
                "wait_all: 44 x 1024",
                "while the event Queue::wait_for got is held: held",
                "a launch after Queue::wait_for: 8 x 1024",
            ],
            "on {device}"
        );
    }
}

/// The awaited command is held behind a user event until the first poll returned, so that
/// poll is pending on every run and only the driver's callback can wake the task: once, and
/// then the second poll is ready. For the clones, both tasks polled (pending) before the
/// command is let go, and each must be woken once.
#[test]
fn an_event_is_a_future_woken_by_the_driver() {
    let woken = "first poll pending, woken 1 time(s), ready at poll 2: ok";
    for device in ["intel", "pocl"] {
        let (out, _) = scenario(device, &["await"]);
        assert_eq!(
            out.lines().collect::<Vec<_>>(),
            [
                format!("awaited: {woken}; 7 x 1024"),
                format!(
                    "an event polled once: pending; it and its clone awaited on two threads: \
                     {woken}; {woken}; 8 x 1024"
                ),
            ],
            "on {device}"
        );
    }
}

/// A command held behind a user event that is then set to an error status. PoCL ends it,
/// and the launch on another queue ordered after it, abnormally: its own wait, the launch's
/// wait and `wait_all` each return the error. PoCL 3.1 calls no completion callback for a
/// command that failed, so the runtime watches awaited events of PoCL itself: the task that
/// awaited it from before the failure is woken once, and ready with the error (the runtime
/// reads the status PoCL gives it, -1).
/// Intel's CPU runtime runs what waits for a failed user event as if it had completed: no
/// command fails there, and every waiter sees success, the task woken as usual.
#[test]
fn a_failed_commands_error_reaches_every_waiter() {
    let waited = "clWaitForEvents failed with CL_EXEC_STATUS_ERROR_FOR_EVENTS_IN_WAIT_LIST (-14)";
    let expected = |device| {
        match device {
        "pocl" => [
            format!("wait: {waited}"),
            format!("a launch after it on another queue: {waited}"),
            format!("a launch after Queue::wait_for it: {waited}"),
            format!("a copy from its buffer on another queue: {waited}"),
            format!("wait_all: {waited}"),
            "awaited: first poll pending, woken 1 time(s), ready at poll 2: the enqueued command failed with execution status CL_DEVICE_NOT_FOUND \
             (-1) (it, or a command it waited for, ended abnormally)"
                .to_string(),
            "complete: true true".to_string(),
        ],
        "intel" => [
            "wait: ok".to_string(),
            "a launch after it on another queue: ok".to_string(),
            "a launch after Queue::wait_for it: ok".to_string(),
            "a copy from its buffer on another queue: ok".to_string(),
            "wait_all: ok".to_string(),
            "awaited: first poll pending, woken 1 time(s), ready at poll 2: ok".to_string(),
            "complete: true true".to_string(),
        ],
        other => panic!("no expected lines for {other}"),
    }
    };
    for device in ["intel", "pocl"] {
        let (out, _) = scenario(device, &["failed"]);
        assert_eq!(out.lines().collect::<Vec<_>>(), expected(device), "on {device}");
    }
}

#[test]
fn a_launch_waits_for_an_event_of_another_device() {
    for (device, other) in [("intel", "pocl"), ("pocl", "intel")] {
        let (out, _) = scenario(device, &["other-device", other]);
        assert_eq!(out, "an event of another device: waited for, complete: true\n", "{device}");
    }
}

#[test]
fn one_queue_shared_by_threads_compiles_each_kernel_once() {
    for device in ["intel", "pocl"] {
        let (out, trace) = scenario(device, &["threads"]);
        assert_eq!(out, "8 threads on one queue: ok\n", "on {device}");
        // One source, one image: one link for every thread and kernel (and on Intel's
        // runtime, which compiles images one by one, one compile; PoCL compiles none).
        let count = |step: &str| trace.lines().filter(|l| l.starts_with(step)).count();
        assert_eq!(count("sycl: link "), 1, "one link on {device}:\n{trace}");
        assert_eq!(count("sycl: compile "), usize::from(device == "intel"), "{device}:\n{trace}");
    }
}

#[test]
fn buffers_read_write_copy_and_fill_in_place_and_refuse_mistakes() {
    for (device, other) in [("intel", "pocl"), ("pocl", "intel")] {
        let (out, _) = scenario(device, &["memory", other]);
        let lines: Vec<&str> = out.lines().collect();
        assert_eq!(
            lines[..12],
            [
                "zeroed: 0 x 1024",
                "filled, values 10..20: 7 x 10",
                "written at 5: [7, 7, 1, 2, 3, 7, 7]",
                "copied twice: true",
                "a 12-byte fill: [[1, 2, 3], [1, 2, 3], [1, 2, 3], [1, 2, 3], [1, 2, 3]]",
                "a range past the end: invalid argument: reading values 1000..1100 of a buffer of 1024",
                "a range and a slice of two lengths: invalid argument: reading values 0..10 (10 values) with 5 on the host",
                "a write past the end: invalid argument: writing values 1023..1025 of a buffer of 1024",
                "a copy of another length: invalid argument: copying 512 values into 1024 values: a copy takes as many as it writes (a view of either: slice)",
                "a size that overflows: invalid argument: 4611686018427387903 values of u64 (8 bytes each) overflow the address space",
                "a copy from another device: 9 x 1024",
                lines[11],
            ],
            "on {device}"
        );
        assert!(
            lines[11].starts_with("a buffer of another device: invalid argument: kernel `add_one` argument 0: a buffer of ")
                && lines[11].contains(&format!(" (`{other}`) given to a launch on "))
                && lines[11].contains(&format!(" (`{device}`): copy it to a buffer")),
            "{}",
            lines[11]
        );
        assert_eq!(lines.len(), 12, "{out}");
    }
}

#[test]
fn a_profiled_queue_times_its_kernels_on_the_device() {
    for device in ["intel", "pocl"] {
        let (out, _) = scenario(device, &["profile"]);
        let lines: Vec<&str> = out.lines().collect();
        assert_eq!(
            lines[..5],
            [
                "ordered: true",
                "elapsed is end - start: true",
                "elapsed within the host's wait: true",
                "a copy is timed: true",
                "a fill is timed: true"
            ],
            "on {device}"
        );
        assert!(
            lines[5].starts_with("unprofiled: invalid argument: profiling an event of a queue on ")
                && lines[5].ends_with("made without profiling: make the queue with Queue::with_device_profiled or Queue::profiled"),
            "{out}"
        );
    }
}

#[test]
fn host_buffers_transfer_asynchronously_and_maps_share_what_kernels_write() {
    for device in ["intel", "pocl"] {
        let (out, _) = scenario(device, &["host"]);
        assert_eq!(
            out.lines().collect::<Vec<_>>(),
            [
                "a new host buffer: 0 x 1024",
                "read while written: every value is its index + 0",
                "written, added one, read back: every value is its index + 1",
                // Each after a slow kernel: the copy still ran when its transfer went.
                "a transfer dropped, not waited: 5 x 1024",
                "a transfer forgotten, then the host buffer read: 6 x 1024",
                "written at 10, values 8..14 into a host buffer of 8: [6, 6, 100, 101, 102, 103, 0, 0]",
                "a map sees what a kernel wrote: 9 x 1024",
                "a kernel sees what a map wrote: every value is its index + 1",
                "a map dropped keeps what it wrote: -5",
                "a map forgotten (mem::forget), then a kernel: -6",
                "a read-only map forgotten, then a kernel, then a map: -5",
                "a copy across queues: 3 x 1024",
                "a fill's event waited: 4 x 1024 (true)",
                "a 12-byte fill: true",
                "an 8-byte fill: true",
                "a read into a host buffer too short: invalid argument: reading values 0..10 (10 values) into a host buffer of 4",
                "a host buffer of another length: invalid argument: writing a host buffer of 4 values into a buffer of 1024",
                "a write past the end: invalid argument: writing values 1022..1026 of a buffer of 1024",
                "a host buffer that overflows: invalid argument: 4611686018427387903 values of u64 (8 bytes each) overflow the address space",
            ],
            "on {device}"
        );
    }
}

#[test]
fn a_launch_with_a_global_offset_starts_its_ids_there() {
    for device in ["intel", "pocl"] {
        let (out, _) = scenario(device, &["offset"]);
        assert_eq!(
            out.lines().collect::<Vec<_>>(),
            [
                "ids from offset 100: [100, 101, 102, 103, 104, 105, 106, 107]",
                "an offset of two dimensions: invalid argument: kernel `ids`: the offset [1, 2] has 2 dimension(s), the global range [8] has 1",
            ],
            "on {device}"
        );
    }
}

#[test]
fn a_view_of_part_of_a_buffer_is_a_kernel_argument() {
    for device in ["intel", "pocl"] {
        let (out, _) = scenario(device, &["slice"]);
        let lines: Vec<&str> = out.lines().collect();
        assert_eq!(lines[0], "a view of 256..512: 256 ones, from 256 to 511", "on {device}");
        assert_eq!(lines[1], "empty views: 0..0 ok, 5..5 ok, 1024..1024 ok", "on {device}");
        assert!(
            lines[2].starts_with("a view from value 1 as a kernel argument: invalid argument: kernel `add_one` argument 0: a view from value 1 (byte 4): ")
                && lines[2].contains(&format!("(`{device}`) starts a kernel's views only at multiples of 128 bytes (DeviceInfo::view_align_bytes; 32 values of i32)")),
            "on {device}: {out}"
        );
        assert_eq!(
            lines[3],
            "a view past the end: invalid argument: viewing values 1000..2000 of a buffer of 1024",
            "on {device}"
        );
    }
}

#[test]
fn a_launch_refuses_local_memory_ranges_and_sizes_the_device_cannot_take_naming_both() {
    for device in ["intel", "pocl"] {
        let (out, _) = scenario(device, &["limits"]);
        let lines: Vec<&str> = out.lines().collect();
        let on = format!("(`{device}`)");
        assert_eq!(lines[0], "group sums through local memory: right", "on {device}");
        let expect = [
            ("local memory of no values: invalid argument: kernel `group_sum` argument 2: local memory of no i32 values", ""),
            ("local memory past the address space: invalid argument: kernel `group_sum` argument 2: local memory of i32 values whose size overflows the address space", "gives a work-group at most"),
            ("local memory beyond the device's: invalid argument: kernel `group_sum` argument 2: local memory of ", "gives a work-group ("),
            ("a first launch without arguments: invalid argument: kernel `add_one` takes 1 argument (global int*); got 0", ""),
            ("a work-group twice the kernel's largest: invalid argument: kernel `add_one`: a work-group of ", "(at most "),
            ("a global range past a size: invalid argument: kernel `add_one`: the global range [8589934592, 8589934592] has more work-items than a size holds", ""),
            ("a buffer past the largest allocation: invalid argument: a buffer of ", "allocates at most "),
        ];
        assert_eq!(lines.len(), 1 + expect.len(), "on {device}: {out}");
        for (line, (start, names)) in lines[1..].iter().zip(expect) {
            assert!(line.starts_with(start), "on {device}: {line}");
            if !names.is_empty() {
                assert!(line.contains(&format!("{on} {names}")), "on {device}: {line}");
            }
        }
    }
}

#[test]
fn the_host_api_examples_run_on_both_devices() {
    let root = sycl_tests::repo_root().join("fixtures");
    sycl_tests::fixtures();
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
    let built = sycl_tests::output(
        std::process::Command::new(cargo)
            .args(["build", "-q", "-p", "events-app", "--examples"])
            .current_dir(&root),
    );
    assert!(built.status.success(), "{}", stderr(&built));
    let names: Vec<String> = sycl_runtime::devices().unwrap().into_iter().map(|d| d.name).collect();
    for device in ["intel", "pocl"] {
        let run = |example: &str| {
            let out = sycl_tests::output(
                std::process::Command::new(root.join("target/debug/examples").join(example))
                    .env("SYCL_DEVICE", device),
            );
            let text = stdout(&out);
            assert!(out.status.success(), "{example} on {device}: {text}{}", stderr(&out));
            text
        };

        // Eight steps, alternating queues, each adding one to what the step before left.
        let pipeline: Vec<String> = (0..8)
            .map(|step| format!("step {step} on queue {}: every value {}", step % 2, step / 2 + 1))
            .collect();
        assert_eq!(run("pipeline").lines().collect::<Vec<_>>(), pipeline, "on {device}");

        // Three kernels of 1, 1,000 and 10,000 spins, each timed on the device it ran on.
        let profiling = run("profiling");
        let lines: Vec<&str> = profiling.lines().collect();
        assert_eq!(lines.len(), 3, "on {device}: {profiling}");
        for (line, spins) in lines.iter().zip(["1", "1000", "10000"]) {
            let what = format!("on {device}: {line}");
            let rest = line.trim_start().strip_prefix(&format!("{spins} spins: ")).expect(&what);
            let (elapsed, rest) = rest.split_once(" on ").expect(&what);
            assert!(duration_ns(elapsed) > 0, "{what}");
            let (name, times) = rest.rsplit_once(" (queued ").expect(&what);
            assert!(names.iter().any(|n| n == name), "{what}: not one of {names:?}");
            let times = times.strip_suffix(" ns)").expect(&what);
            let [queued, submitted, started] = times
                .split(" ns, ")
                .enumerate()
                .map(|(i, t)| match i {
                    0 => t,
                    1 => t.strip_prefix("submitted +").expect(&what),
                    _ => t.strip_prefix("started +").expect(&what),
                })
                .map(|t| t.parse::<u64>().expect(&what))
                .collect::<Vec<_>>()[..]
            else {
                panic!("{what}: three timestamps")
            };
            assert!(queued > 0 && submitted < 1 << 40 && started < 1 << 40, "{what}");
        }

        // The copy alone, the kernels alone, both at once, and the two times' sum.
        let overlap = run("overlap");
        let what = format!("on {device}: {overlap}");
        let lines: Vec<&str> = overlap.lines().collect();
        let [alone, both] = lines[..] else { panic!("{what}") };
        let (copy, kernels) = alone
            .strip_prefix("copy of 64 MiB alone: ")
            .and_then(|r| r.split_once("; kernels alone: "))
            .expect(&what);
        let (at_once, sum) = both
            .strip_prefix("both at once: ")
            .and_then(|r| r.strip_suffix(')'))
            .and_then(|r| r.split_once(" (one after the other: "))
            .expect(&what);
        let [copy, kernels, at_once, sum] = [copy, kernels, at_once, sum].map(duration_ns);
        assert!(copy > 0 && kernels > 0 && at_once > 0, "{what}");
        assert_eq!(sum, copy + kernels, "{what}");
    }
}

/// Nanoseconds in a `Duration` as its `Debug` prints it (`8.301994ms`, `138.592µs`, `2s`):
/// exact, since `Debug` drops only trailing zeros.
fn duration_ns(text: &str) -> u128 {
    let unit_at = text.find(|c: char| !(c.is_ascii_digit() || c == '.')).expect(text);
    let (number, unit) = text.split_at(unit_at);
    let scale: u32 = match unit {
        "ns" => 0,
        "µs" => 3,
        "ms" => 6,
        "s" => 9,
        _ => panic!("{text}: unit {unit:?}"),
    };
    let (whole, fraction) = number.split_once('.').unwrap_or((number, ""));
    assert!(fraction.len() <= scale as usize, "{text}: finer than a nanosecond");
    let digits = format!("{whole}{fraction}{}", "0".repeat(scale as usize - fraction.len()));
    digits.parse().expect(text)
}

#[test]
fn driver_handles_go_out_to_the_program_and_its_own_come_in() {
    for device in ["intel", "pocl"] {
        let (out, _) = scenario(device, &["native"]);
        let lines: Vec<&str> = out.lines().collect();
        assert_eq!(
            lines[..3],
            [
                "the queue's device handle is the device's: true",
                "ours read by hand: true",
                "theirs written by a kernel: true",
            ],
            "on {device}"
        );
        assert_eq!(
            lines[3],
            "a buffer larger than its memory: invalid argument: Buffer::from_native: the memory \
             object holds 4096 bytes; the buffer needs 4100",
            "on {device}"
        );
        assert_eq!(
            lines[4..6],
            ["a kernel on the program's queue: true", "its handles are the program's: true"],
            "on {device}"
        );
        assert!(
            lines[6].starts_with(
                "a buffer of the program's context on the runtime's: invalid argument: kernel \
                 `add_one` argument 0: a buffer made in another driver context of "
            ),
            "on {device}: {}",
            lines[6]
        );
        assert_eq!(
            lines[7],
            "a queue of another context: invalid argument: Queue::from_native: the command queue \
             is not of the context and device given with it",
            "on {device}"
        );
    }
}

#[test]
fn bytemuck_structs_and_half_run_and_mistaken_types_are_refused_naming_both() {
    for device in ["intel", "pocl"] {
        let (out, _) = scenario(device, &["types"]);
        let half = if device == "intel" {
            "half axpy: 3.25"
        } else {
            "half axpy: kernel_not_supported without fp16"
        };
        let bundle = format!(
            "the binary's bundle: half_axpy {}, scale_ints gives [3, 6, 9, 12]",
            if device == "intel" { "in it" } else { "left out" }
        );
        let refused = "invalid argument: kernel";
        assert_eq!(
            out.lines().collect::<Vec<_>>(),
            [
                "points moved: Pt { x: 11.0, y: 22.0 }",
                half,
                &bundle,
                &format!(
                    "a buffer of f32 for int*: {refused} `scale_ints` argument 0 (global int* \
                     data) takes a buffer of int (i32 or u32); got a buffer of f32"
                ),
                &format!(
                    "f32 for int: {refused} `scale_ints` argument 1 (int factor) takes int (i32 \
                     or u32); got f32 (4 bytes)"
                ),
                &format!(
                    "a struct of the wrong size: {refused} `move_points` argument 1 (struct Pt \
                     by) takes struct Pt (8 bytes: a #[repr(C)] type of its layout); got [f32; \
                     3] (12 bytes)"
                ),
            ],
            "on {device}"
        );
    }
}
