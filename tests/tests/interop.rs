//! The runtime beside opencl3 and cudarc (`fixtures/interop-app`, built with the runtime's
//! `opencl3` and `cudarc` features), on both CPU devices: opencl3's context and queue adopted,
//! kernels calling libhelpers.so's `LibDeviceFunc` on opencl3's buffer and ours in order on
//! that queue with no host wait, the runtime's handles in raw OpenCL calls (a read, profiling
//! read by hand against `Event::elapsed`), buffers converted both ways, the reference counts
//! each conversion takes and gives back, and the mistakes each conversion refuses with its
//! remedy. The cudarc scenario needs an NVIDIA GPU:
//! `scripts/gpu/interop.sh` runs it there; here it must say it was skipped, and why.

use sycl_tests::{run_fixture_args, stderr, stdout};

fn scenario(device: &str, args: &[&str]) -> String {
    let out = run_fixture_args("interop-app", args, &[("SYCL_DEVICE", device)]);
    let (o, trace) = (stdout(&out), stderr(&out));
    assert!(out.status.success(), "{args:?} on {device}: {o}{trace}");
    o
}

#[test]
fn opencl3s_queue_runs_our_kernels_on_its_buffers_and_ours_in_order() {
    for device in ["intel", "pocl"] {
        let out = scenario(device, &["opencl3", device]);
        assert_eq!(
            out.lines().collect::<Vec<_>>(),
            [
                "opencl3 write, two kernels of ours on its queue, opencl3 read: right",
                "our buffer read by clEnqueueReadBuffer on Queue::native(): right",
                "Event::elapsed() / clGetEventProfilingInfo(END - START) = 1.000",
                "profiling agrees within 5%: pass",
                "our buffer read by opencl3 (Buffer::to_opencl3): right",
                "opencl3's buffer read as ours (Buffer::from_opencl3, opencl3's value dropped): right",
                "the queue's handles as opencl3's are opencl3's own: true",
            ],
            "on {device}"
        );
    }
}

#[test]
fn conversions_refuse_another_context_a_wrong_element_type_and_a_partial_value() {
    for device in ["intel", "pocl"] {
        let out = scenario(device, &["mistakes", device]);
        let lines: Vec<&str> = out.lines().collect();
        assert_eq!(lines.len(), 5, "on {device}: {out}");
        let line = |prefix: &str| {
            lines
                .iter()
                .find_map(|l| l.strip_prefix(prefix))
                .unwrap_or_else(|| panic!("no `{prefix}` line on {device}: {out}"))
        };
        let another = line("an opencl3 buffer of another context: ");
        assert!(
            another.starts_with("invalid argument: kernel `add_lib` argument 0: memory of another driver context than the launch's queue on ")
                && another.ends_with("make the queue from the library's own (Queue::from_native, or the cudarc/opencl3 conversions)"),
            "{another}"
        );
        assert_eq!(
            line("an opencl3 buffer of f32 for an int*: "),
            "invalid argument: kernel `add_lib` argument 0 (global const int* theirs) takes a buffer of int (i32 or u32); got a buffer of f32"
        );
        assert_eq!(
            line("a queue given with another context: "),
            "invalid argument: Queue::from_opencl3: the command queue is of another context than the one given with it: give the context the queue was made in"
        );
        let memory = line("memory of another context as ours: ");
        assert!(
            memory.starts_with("invalid argument: Buffer::from_opencl3: the opencl3 buffer is of another context than the queue on ")
                && memory.ends_with("make the queue of opencl3's context and queue (Queue::from_opencl3), or the buffer in the queue's context (Queue::opencl3_context)"),
            "{memory}"
        );
        assert_eq!(
            line("ten bytes as i32s: "),
            "invalid argument: Buffer::from_opencl3: the opencl3 buffer holds 10 bytes, not a whole number of i32 (4 bytes each): use an element type whose size divides 10 (Buffer::<u8>::from_opencl3 of the same memory, after opencl3's Buffer::<u8>::new)"
        );
    }
}

/// Reference counts (`CL_*_REFERENCE_COUNT`, read through cl3) of opencl3's context, queue
/// and memory adopted by the toolkit, three times over with kernels run on them, and of ours
/// lent to opencl3: each conversion takes one reference, and each drop gives exactly that one
/// back (no leak, no over-release), the same in every round. The adopted context included:
/// the state the runtime makes for it (its program caches, runtime/src/process.rs `adopt`)
/// goes with the last queue, buffer and event in it, and with it the context's reference and
/// those of the programs built in it.
#[test]
fn adopted_and_lent_opencl_objects_take_one_reference_and_give_it_back() {
    for device in ["intel", "pocl"] {
        let out = scenario(device, &["refcounts", device]);
        let dropped = |round| {
            format!("round {round}, everything of ours dropped: context +0, queue +0, memory +0")
        };
        assert_eq!(
            out.lines().collect::<Vec<_>>(),
            [
                "adopted: context +1, queue +1, memory +1".to_string(),
                dropped(1),
                dropped(2),
                dropped(3),
                "ours lent to opencl3: context +1, queue +1, memory +1, event +1".to_string(),
                "opencl3's values dropped: context +0, queue +0, memory +0, event +0".to_string(),
            ],
            "on {device}"
        );
    }
}

/// Without an NVIDIA GPU (as on the CPU machines CI runs on), the cudarc scenario prints that
/// it was skipped and why, and succeeds. What it checks on a GPU (cudarc's stream as a queue,
/// cudarc's slices as arguments, cuBLAS on the result, against nvcc's kernel through cudarc
/// alone) is `scripts/gpu/interop.sh`'s to run; where this machine has a GPU, this test only
/// checks that the scenario asks for nvcc's cubin, and says so.
#[test]
fn the_cudarc_scenario_says_it_was_skipped_without_a_gpu() {
    let out = run_fixture_args("interop-app", &["cudarc"], &[]);
    let (o, e) = (stdout(&out), stderr(&out));
    // Which of the three outcomes is right here is asked of the CUDA driver directly, not of
    // the program under test.
    let why = match sycl_tests::cuda_gpu() {
        Some(true) => {
            eprintln!(
                "a GPU is here: the cudarc scenario itself is scripts/gpu/interop.sh's to run"
            );
            assert!(
                !out.status.success() && e.contains("usage: interop-app cudarc NVCC.cubin"),
                "{o}{e}"
            );
            return;
        }
        None => "no CUDA driver (libcuda.so.1 not found)",
        Some(false) => "the CUDA driver ",
    };
    assert!(out.status.success(), "{o}{e}");
    let said = o.strip_prefix("cudarc: skipped: ").unwrap_or_else(|| panic!("{o}{e}"));
    match why {
        // A driver without a GPU says which: none listed, or not starting (its own words).
        "the CUDA driver " => assert!(
            said.starts_with("the CUDA driver lists no GPU;")
                || said.starts_with("the CUDA driver does not start: "),
            "{o}"
        ),
        _ => assert!(said.starts_with(why), "{o}"),
    }
    assert!(said.ends_with("; scripts/gpu/interop.sh runs it on a GPU machine\n"), "{o}");
}
