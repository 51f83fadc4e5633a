//! Graphs on both CPU devices (`fixtures/graph-app`): 1,000 launches of two binaries' kernels
//! (one calling the other library's device function) recorded once and replayed, on the
//! recording queue and another, checked value by value against the host and bit for bit
//! against the same launches run eagerly; parallel branches joined; a launch given other
//! arguments without recording again; what recording and replaying refuse; a graph that
//! outlives the library its kernel's import came from; and the path each device took, as the
//! trace says: by default the runtime's own replay of the checked commands (on a CPU device,
//! the driver's command buffers are slower), and with `SYCL_COMMAND_BUFFERS=1` the driver's
//! command buffers, whose replays must give the same.

use sycl_tests::{run_fixture_args, stderr, stdout};

const DEVICES: [&str; 2] = ["intel", "pocl"];

/// The two paths a graph on a CPU device can take: the runtime's replay (the default), and
/// the driver's command buffers; with what the trace says of each build.
const PATHS: [(&str, &str); 2] = [
    (
        "",
        ": replayed one by one (a CPU device, whose driver replays a command buffer slower \
         than it runs the launches; SYCL_COMMAND_BUFFERS=1 takes it)",
    ),
    ("1", ": an OpenCL command buffer"),
];

/// Each CPU device with each path.
fn devices_and_paths() -> impl Iterator<Item = (&'static str, (&'static str, &'static str))> {
    DEVICES.into_iter().flat_map(|d| PATHS.map(|p| (d, p)))
}

/// `graph-app SCENARIO` on `device`, traced: its stdout lines, and its trace.
fn scenario(device: &str, scenario: &str) -> (Vec<String>, String) {
    scenario_on(device, scenario, "")
}

/// [`scenario`] with `SYCL_COMMAND_BUFFERS` set to `command_buffers`.
fn scenario_on(device: &str, scenario: &str, command_buffers: &str) -> (Vec<String>, String) {
    let env =
        [("SYCL_DEVICE", device), ("SYCL_TRACE", "1"), ("SYCL_COMMAND_BUFFERS", command_buffers)];
    let out = run_fixture_args("graph-app", &[scenario], &env);
    let (o, trace) = (stdout(&out), stderr(&out));
    assert!(out.status.success(), "{scenario} on {device}: {o}{trace}");
    (o.lines().map(str::to_string).collect(), trace)
}

/// Every replay ends with the host's values: three on the recording queue (two of them not
/// waited for in between), then three alternating between two queues given no event, which
/// the graph's buffer alone orders. Nothing runs while recording.
#[test]
fn a_graph_of_two_libraries_kernels_replays_as_the_same_launches_run_eagerly() {
    for (device, (command_buffers, built)) in devices_and_paths() {
        let (out, trace) = scenario_on(device, "replay", command_buffers);
        assert_eq!(
            out,
            [
                "eager: every value as the host's",
                "recorded: 1000 commands, nothing run: true",
                "replay 1: every value as the host's",
                "eager and replay bit for bit: true",
                "replays 2 and 3, not waited for: every value as the host's",
                "replays on two queues, given no event: every value as the host's",
            ],
            "on {device}"
        );
        let record: Vec<&str> = trace.lines().filter(|l| l.contains("graph-record")).collect();
        assert_eq!(record.len(), 1, "on {device}: {trace}");
        assert!(
            record[0].starts_with(
                "sycl: graph-record 1000 command(s), 1000 kernel launch(es), 1 buffer(s) on "
            ),
            "on {device}: {}",
            record[0]
        );
        // Built once per queue it ran on.
        let builds: Vec<&str> = trace.lines().filter(|l| l.contains("graph-build")).collect();
        assert_eq!(builds.len(), 2, "on {device}: {builds:?}");
        for line in builds {
            assert!(line.ends_with(built), "on {device}: {line}");
        }
    }
}

/// Two chains on buffers they do not share, joined by a launch that reads both, with a fill
/// before and a copy after: the graph's order holds where buffers are shared, and nothing is
/// lost where they are not. A fill of a 12-byte pattern, which neither driver fills, is made
/// of byte fills and copies inside the graph.
#[test]
fn independent_chains_and_their_join_keep_their_order() {
    for (device, (command_buffers, _)) in devices_and_paths() {
        let (out, _) = scenario_on(device, "branches", command_buffers);
        assert_eq!(
            out,
            [
                "a, after the join, the copy and the fill's add: every value as the host's",
                "b, after the join: every value as the host's",
                "a fill of [1, 2, 3]: true",
            ],
            "on {device}"
        );
    }
}

/// A launch given another buffer and value runs with them (the old buffer untouched); given
/// the buffer a fill recorded before it writes, it comes after the fill (the graph built
/// again, as the trace shows); mistaken updates are refused and change nothing.
#[test]
fn set_arg_changes_a_recorded_launch_without_recording_again() {
    for (device, (command_buffers, _)) in devices_and_paths() {
        let (out, trace) = scenario_on(device, "update", command_buffers);
        assert_eq!(
            out,
            [
                "recorded: every value as the host's",
                "another buffer and value: every value as the host's",
                "the first buffer, untouched since: every value as the host's",
                "the fill's buffer, filled then stepped: every value as the host's",
                "refused, a float for an int: invalid argument: kernel `step` argument 1 (int s) \
                 takes int (i32 or u32); got f32 (4 bytes)",
                "refused, argument 5: invalid argument: kernel `step` has 2 argument(s): no \
                 argument 5",
                "refused, a fill's node: invalid argument: graph node 0 is not a kernel launch \
                 of this graph (2 commands)",
                "after the refusals, unchanged: every value as the host's",
            ],
            "on {device}"
        );
        // Built at the first run, and again when an update changed the order; the other
        // update made in place, but for an OpenCL command buffer, which is built again.
        let builds = if command_buffers == "1" { 3 } else { 2 };
        assert_eq!(trace.matches("graph-build").count(), builds, "on {device}: {trace}");
    }
}

/// Recording refuses what an eager launch would, and launches that would wait for events;
/// no graph is made and nothing runs. A replay refuses a buffer left mapped by a forgotten
/// guard, and runs once a read ended the map.
#[test]
fn recording_and_replaying_refuse_mistakes_before_the_driver_sees_them() {
    for device in DEVICES {
        let (out, _) = scenario(device, "refused");
        assert_eq!(
            out,
            [
                "an unknown kernel: NotFound",
                "refused, a wrong argument: invalid argument: kernel `step` argument 1 (int s) \
                 takes int (i32 or u32); got f32 (4 bytes)",
                "refused, a launch after an event: invalid argument: kernel `step`: a recorded \
                 launch cannot wait for events (Launch::after): a graph's commands wait only \
                 for each other; make the queue that runs the graph wait for them \
                 (Queue::wait_for) before Graph::run",
                "refused, a copy of another length: invalid argument: a recorded copy of 3 \
                 values into 256: a copy takes as many as it writes",
                "nothing ran: true",
                "replayed while mapped: invalid argument: a graph's buffer (1 of its 1) is \
                 mapped (a Mapped or MappedMut guard of it lives, or was forgotten): a replay \
                 does not borrow the buffers it uses; drop the guard before Graph::run (after a \
                 forgotten guard, any read or write of the buffer ends its map)",
                "replayed once a read ended the map: every value as the host's",
            ],
            "on {device}"
        );
    }
}

/// A graph run on a queue of another device is refused, naming both.
#[test]
fn a_graph_runs_only_on_its_own_device() {
    let out = run_fixture_args("graph-app", &["other-device", "pocl"], &[("SYCL_DEVICE", "intel")]);
    let o = stdout(&out);
    assert!(out.status.success(), "{o}{}", stderr(&out));
    assert!(
        o.starts_with("on another device: invalid argument: a graph recorded on ")
            && o.contains("(`intel`) run on a queue of ")
            && o.contains(
                "(`pocl`): run it on a queue of its own device, or record it again there"
            ),
        "{o}"
    );
}

/// The graph keeps the program of a kernel whose import a `dlopen`ed library provided: once
/// the library is closed an eager launch cannot resolve it, and the graph still replays it;
/// dropped while 20 replays of its 1,000 launches are queued (the last holder of the
/// program), nothing faults and the replays complete.
#[test]
fn a_graph_replays_after_the_library_it_resolved_against_is_closed() {
    for (device, (command_buffers, _)) in devices_and_paths() {
        let (out, _) = scenario_on(device, "dlclose", command_buffers);
        assert_eq!(
            out,
            [
                "an eager launch once the library is closed: Link",
                "the graph replayed once the library is closed: [1000, 1001, 1002, 1003]",
                "the graph dropped while its replays ran, then read: [1000, 1001, 1002, 1003]",
            ],
            "on {device}"
        );
    }
}
