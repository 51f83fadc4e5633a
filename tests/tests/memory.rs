//! Memory without walls on both CPU devices of one process together (`fixtures/memory-app`): a
//! ring of kernels and copies around the devices ordered only by events and buffers, views
//! filled, written, copied and read anywhere (and what they refuse), events of another device
//! waited for by a launch and by a queue, the automatic ordering across devices with no event,
//! a large copy staged between the devices and back, and lists linked by device addresses on
//! both devices, followed by kernels and copied between the devices' allocations.

use sycl_tests::{run_fixture_args, stderr, stdout};

/// `memory-app ARGS`: its stdout lines.
fn scenario(args: &[&str]) -> Vec<String> {
    let out = run_fixture_args("memory-app", args, &[]);
    let (o, e) = (stdout(&out), stderr(&out));
    assert!(out.status.success(), "{args:?}: {o}{e}");
    o.lines().map(str::to_string).collect()
}

/// Both CPU devices, each way round.
const PAIRS: [[&str; 2]; 2] = [["intel", "pocl"], ["pocl", "intel"]];

#[test]
fn a_ring_of_kernels_and_copies_around_the_devices_is_ordered_by_events_and_buffers() {
    assert_eq!(
        scenario(&["ring", "intel", "pocl"]),
        ["ring of 2 devices, 5 rounds, 10 kernels: every value right"]
    );
    // A device twice in the ring: two of its buffers, copied between on the device.
    assert_eq!(
        scenario(&["ring", "pocl", "intel", "pocl"]),
        ["ring of 3 devices, 5 rounds, 15 kernels: every value right"]
    );
}

#[test]
fn views_are_filled_written_copied_and_read_anywhere() {
    for [device, other] in PAIRS {
        let out = scenario(&["views", device, other]);
        let name = if device == "intel" { "AMD EPYC" } else { "pthread-" };
        assert_eq!(
            out[..8],
            [
                "split, filled, written, copied within: [100, 101] [199, 1, 1, 1, 1] [1, 1, 0, 1] [510, 511]",
                "a view read: [198, 199, 1, 1]",
                "an overlapping copy: invalid argument: copying values 256..768 onto values 0..512 of one buffer: the ranges overlap; copy through another buffer",
                "a view into a host buffer: [10, 11, 12, 13]",
                "a host buffer into a view: [104, 40, 41, 42, 43, 109]",
                "a kernel on an aligned view: [397, 400, 403, 406]",
                &out[6],
                "a graph of views: [5, 5, 5, 5, 103, 104, 40, 41]",
            ],
            "{device}"
        );
        assert!(
            out[6].starts_with(
                "a kernel on a view from value 3: invalid argument: kernel `mix` argument 0: a \
                 view from value 3 (byte 12): "
            ) && out[6].contains(name)
                && out[6].contains(&format!(
                    "(`{device}`) starts a kernel's views only at multiples of 128 bytes"
                )),
            "{device}: {}",
            out[6]
        );
        assert_eq!(
            out[8..],
            [
                "a view copied to another device's view: [0, 0, 0, 1, 1, 1, 1, 1, 1, 1, 0, 1, 2, 0, 0, 0]",
                "and back into a buffer: [1, 1, 1, 1]",
            ],
            "{device}"
        );
    }
}

/// The first device's long kernel must be complete when the second device's command that
/// waits for its event is.
#[test]
fn a_launch_and_a_queue_wait_for_an_event_of_another_device() {
    for pair in PAIRS {
        assert_eq!(
            scenario(&["events", pair[0], pair[1]]),
            [
                "a launch after another device's event: done after it: true",
                "a queue waiting for another device's event: done after it: true",
            ],
            "{pair:?}"
        );
    }
}

/// A long kernel, then a copy to the other device, a kernel there and a copy back, with no
/// event: a copy that ran before the kernel it follows would leave other values.
#[test]
fn commands_on_two_devices_are_ordered_by_their_buffers_alone() {
    for pair in PAIRS {
        assert_eq!(
            scenario(&["ordered", pair[0], pair[1]]),
            ["a kernel, a copy across, a kernel there, a copy back, no event: every value right"],
            "{pair:?}"
        );
    }
}

#[test]
fn a_large_copy_is_staged_between_the_devices_and_back() {
    for pair in PAIRS {
        assert_eq!(
            scenario(&["staged", pair[0], pair[1], "64"]),
            ["64 MiB there and back: every value right"],
            "{pair:?}"
        );
    }
}

#[test]
fn lists_linked_by_device_addresses_are_followed_on_both_devices_and_copied_between_them() {
    for pair in PAIRS {
        assert_eq!(
            scenario(&["pointers", pair[0], pair[1]]),
            [
                "device 0: a list of 100 nodes followed by a kernel sums to 5050",
                "device 1: a list of 100 nodes followed by a kernel sums to 5050",
                "device 0's nodes copied to device 1's allocation and back: true",
            ],
            "{pair:?}"
        );
    }
}
