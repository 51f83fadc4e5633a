//! Device pointers on both CPU devices (`fixtures/usm-app`): where the device has device
//! allocations (Intel's CPU runtime, through `cl_intel_unified_shared_memory`; PoCL, through
//! coarse-grained buffer SVM: both here), kernels follow lists,
//! arrays of arrays and a tree linked by device addresses (some named by no argument, only
//! stored in memory), and the allocations are copied to and from buffers, filled, mapped,
//! viewed from any value, recorded into graphs and dropped while a kernel may use them, every
//! result as the host's; with `SYCL_COMMAND_BUFFERS=1` the graph is replayed by the runtime
//! (a command buffer cannot name them), as the trace says. Where a device has none (neither
//! here), `malloc_device` is refused as `Unsupported`, naming the device.

use sycl_runtime::devices;
use sycl_tests::{device_name, run_fixture_with, stderr, stdout, Device, DEVICES};

/// What usm-app prints where the device has device allocations.
const FOLLOWED: [&str; 7] = [
    "lists: 64 lists of 1 to 7 nodes over 253 slots, heads' addresses in a buffer: as the host's",
    "a view from a list's second node as its head: as the host's",
    "arrays of arrays: 32 rows of 0 to 31 values: as the host's",
    "a tree of 255 keys, 512 lookups: as the host's",
    "memory: allocation to buffer, back, between allocations: as the host's; fills, written \
     ranges: as the host's; a map: as the host's; a 12-byte fill: as the host's",
    "a graph copying the nodes and walking the copy, 2 replays: 2 as the host's",
    "an allocation dropped while its kernel may run: as the host's",
];

/// usm-app on `device` with `env`, traced: its stdout, and its trace.
fn usm_app(device: Device, env: &[(&str, &str)]) -> (String, String) {
    let mut all = vec![("SYCL_DEVICE", device.selector)];
    all.extend_from_slice(env);
    let out = run_fixture_with("usm-app", &all);
    let (o, trace) = (stdout(&out), stderr(&out));
    assert!(out.status.success(), "on {}: {o}{trace}", device.selector);
    (o, trace)
}

#[test]
fn kernels_follow_device_addresses_or_the_device_refuses_them() {
    let all = devices().unwrap();
    for device in DEVICES {
        let listed = all.iter().find(|d| d.platform.contains(device.platform)).unwrap();
        assert_eq!(
            listed.has_aspect("usm_device_allocations"),
            device.usm,
            "{device:?}: {:?}",
            listed.aspects
        );
        let (out, trace) = usm_app(device, &[]);
        let lines: Vec<&str> = out.lines().collect();
        if device.usm {
            assert_eq!(lines, FOLLOWED, "on {}", device.selector);
            continue;
        }
        let name = device_name(&trace, device);
        assert_eq!(
            lines,
            [format!(
                "malloc_device refused: unsupported: Queue::malloc_device on {name} (`{}`): the \
                 device has no device allocations (no usm_device_allocations among \
                 DeviceInfo::aspects; on OpenCL, neither cl_intel_unified_shared_memory nor \
                 SVM); CUDA GPUs, Intel's OpenCL runtimes and OpenCL devices with SVM (PoCL's) \
                 have them; elsewhere store indices into a Buffer in place of addresses",
                device.selector
            )],
            "on {}",
            device.selector
        );
    }
}

/// With the driver's command buffers asked for, a graph that names device allocations is
/// replayed by the runtime, saying why; its results are the same.
#[test]
fn a_graph_of_device_allocations_is_replayed_command_by_command_on_opencl() {
    for device in DEVICES.into_iter().filter(|d| d.usm) {
        let (out, trace) = usm_app(device, &[("SYCL_COMMAND_BUFFERS", "1")]);
        assert_eq!(out.lines().collect::<Vec<_>>(), FOLLOWED, "on {}", device.selector);
        let builds: Vec<&str> = trace.lines().filter(|l| l.contains("graph-build")).collect();
        assert_eq!(builds.len(), 1, "on {}: {trace}", device.selector);
        assert!(
            builds[0].ends_with(
                ": replayed one by one (a device allocation (Queue::malloc_device) lives in the \
                 queue's context, and cl_khr_command_buffer cannot name one)"
            ),
            "on {}: {}",
            builds[0],
            device.selector
        );
    }
}
