//! Automatic ordering per buffer, on both CPU devices (`events-app`): commands of two queues
//! that use one buffer, given no event and no wait, still run in the order the host gave
//! them; a buffer dropped while its kernels are held; waits with a time limit and awaited
//! transfers; and the launches a buffer and its views may not make together.
//!
//! Each check was seen to fail with the ordering turned off (`State::conflicts` in
//! `runtime/src/launch/order.rs` returning nothing): about 0 of 1000 rounds saw the writer's
//! values on Intel's CPU runtime, 885–984 on PoCL.

use sycl_tests::{run_fixture_args, stderr, stdout, DEVICES};

fn scenario(device: &str, args: &[&str]) -> Vec<String> {
    let out = run_fixture_args("events-app", args, &[("SYCL_DEVICE", device)]);
    let (o, trace) = (stdout(&out), stderr(&out));
    assert!(out.status.success(), "{args:?} on {device}: {o}{trace}");
    o.lines().map(str::to_string).collect()
}

/// A read, a map and a copy on one queue, each right after a slow kernel of another queue
/// that writes the buffer, 1000 times each; a write and a launch on one queue right after a
/// slow kernel of another that reads the buffer, 100 times each. Every one must see what the
/// order the host gave says.
#[test]
fn commands_of_two_queues_on_one_buffer_run_in_the_order_given() {
    for device in DEVICES {
        assert_eq!(
            scenario(device.selector, &["ordering"]),
            [
                "read_into right after another queue's slow writer: 1000 of 1000 saw the other queue's values",
                "map right after another queue's slow writer: 1000 of 1000 saw the other queue's values",
                "copy_from right after another queue's slow writer: 1000 of 1000 saw the other queue's values",
                "a write right after another queue's slow reader: 100 of 100 read the old values",
                "a launch right after another queue's slow reader: 100 of 100 read the old values",
                "the source afterwards: 100 x 1024",
            ],
            "on {}",
            device.selector
        );
    }
}

/// The buffer's kernels are held behind a gate when it is dropped: the drop must return
/// before they run (it does not wait for them), and they then run with its memory still
/// there (the other queue's kernel, ordered after the held one, reads its 2s).
#[test]
fn a_buffer_dropped_while_its_kernels_are_held_is_freed_after_them() {
    for device in DEVICES {
        assert_eq!(
            scenario(device.selector, &["drop"]),
            [
                "dropped while its kernels are held: returned at once",
                "the held kernel then: Ok(())",
                "another queue's kernel that read it: Ok(())",
                "what that kernel read: 2 x 1024",
            ],
            "on {}",
            device.selector
        );
    }
}

/// `wait_timeout` runs out on a held command and completes once it ran; a command that
/// fails (PoCL fails what waits for a failed user event; Intel's CPU runtime runs it) gives
/// its error. A transfer that another queue's held writer makes wait runs out its limit,
/// and, awaited, is pending at its first poll and woken once the writer ran, with its values.
#[test]
fn waits_have_time_limits_and_transfers_are_futures() {
    for device in DEVICES {
        let failed = match device.selector {
            "pocl" => {
                "wait_timeout on a command that failed: the enqueued command failed with \
                       execution status CL_DEVICE_NOT_FOUND (-1) (it, or a command it waited \
                       for, ended abnormally)"
            }
            _ => "wait_timeout on a command that failed: completed: true",
        };
        assert_eq!(
            scenario(device.selector, &["timeout"]),
            [
                "wait_timeout on a held command: false, after the limit: true",
                "wait_timeout once it may run: Ok(true)",
                failed,
                "a transfer waited for with a limit while the writer is held: Ok(false)",
                "the transfer awaited: first poll pending, woken 1 time(s), ready at poll 2: ok",
                "what it read: 42 x 1024",
            ],
            "on {}",
            device.selector
        );
    }
}

/// A launch that writes a buffer may not take an overlapping view of it too (OpenCL leaves
/// that undefined): refused, naming both arguments and their bytes. Views that do not
/// overlap, and one buffer given twice (one memory object), run.
#[test]
fn a_launch_that_writes_a_buffer_and_an_overlapping_view_is_refused() {
    let refused = |spans: &str| {
        format!(
            "invalid argument: kernel `slow_copy` arguments 0 and 1: a buffer and a view of it \
             (or two views) that overlap ({spans}), in a launch that writes them: OpenCL leaves \
             such a launch undefined; pass the buffer once and the offsets as values, or views \
             that do not overlap"
        )
    };
    for device in DEVICES {
        assert_eq!(
            scenario(device.selector, &["views"]),
            [
                format!(
                    "a buffer and a view of it, written: {}",
                    refused("bytes 0..4096 and 2048..4096")
                ),
                format!(
                    "two overlapping views, one written: {}",
                    refused("bytes 1024..3072 and 2048..4096")
                ),
                "two views that do not overlap: ran".to_string(),
                "the high half then: every value is its index + 0".to_string(),
                "the same buffer twice: ran".to_string(),
            ],
            "on {}",
            device.selector
        );
    }
}
