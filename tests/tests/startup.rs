//! The start-up programs, `startup-1` (one kernel) and `startup-1000` (1,000 kernels, each
//! its own image), one source (`fixtures/startup-1/src/main.rs`) that `gpu-bench --overheads`
//! runs side by side: on both CPU devices, each in a new process on an empty persistent cache,
//! then again on the cache it filled. What they print, line by line (the timings
//! `gpu-bench` reads, each one measured and within the run's own time, and the count of
//! images), and what they build: only the one image launched, then nothing.

use std::path::Path;
use std::time::SystemTime;

use sycl_tests::{device_name, fixtures, fixtures_dir, output, stderr, stdout, Device, DEVICES};

/// The timings the programs print, in order, each in microseconds with one decimal:
/// `exec_to_main_us` first, where the spawner gave its clock reading.
const TIMINGS: [&str; 4] = ["exec_to_main_us", "discover_us", "queue_us", "first_launch_us"];

/// One run of `program` on `device` with its persistent cache in `cache`, `SYCL_TRACE=1`, and
/// `STARTUP_SPAWNED_NS` (the clock reading just before the spawn) where `spawned` is set;
/// checks its output line by line (against the run's length by the same clock) and returns
/// its trace.
fn run(program: &str, device: &str, cache: &Path, spawned: bool, images: usize) -> String {
    let what = format!("{program} on {device}");
    let mut command = std::process::Command::new(fixtures().join(program));
    command
        .env("SYCL_TRACE", "1")
        .env("SYCL_DEVICE", device)
        .env("SYCL_CACHE_DIR", cache)
        .env_remove("SYCL_CACHE_DISABLE")
        .env_remove("SYCL_STRICT_EXPORTS")
        .env_remove("STARTUP_SPAWNED_NS");
    let start = SystemTime::now();
    if spawned {
        let ns = start.duration_since(SystemTime::UNIX_EPOCH).unwrap().as_nanos();
        command.env("STARTUP_SPAWNED_NS", ns.to_string());
    }
    let out = output(&mut command);
    let took = start.elapsed().unwrap().as_secs_f64() * 1e6;
    let (text, trace) = (stdout(&out), stderr(&out));
    assert!(out.status.success(), "{what}:\n{text}{trace}");

    let keys = if spawned { &TIMINGS[..] } else { &TIMINGS[1..] };
    let lines: Vec<(&str, &str)> =
        text.lines().map(|l| l.split_once(' ').unwrap_or((l, ""))).collect();
    let got_keys: Vec<&str> = lines.iter().map(|(key, _)| *key).collect();
    let mut want_keys = keys.to_vec();
    want_keys.push("images");
    assert_eq!(got_keys, want_keys, "{what}:\n{text}");
    assert_eq!(lines[keys.len()].1, images.to_string(), "{what}: images in the process:\n{text}");
    let mut sum = 0.0;
    for (key, value) in &lines[..keys.len()] {
        let (whole, tenths) = value.split_once('.').unwrap_or_default();
        let digits = |s: &str, n: std::ops::RangeInclusive<usize>| {
            n.contains(&s.len()) && s.bytes().all(|b| b.is_ascii_digit())
        };
        assert!(
            digits(whole, 1..=usize::MAX) && digits(tenths, 1..=1),
            "{what}: {key} {value} is not microseconds with one decimal"
        );
        let us: f64 = value.parse().unwrap();
        assert!(us > 0.0, "{what}: {key} {value}: nothing measured");
        sum += us;
    }
    // Each timing is of a part of the run: together they are less than the whole run.
    assert!(sum <= took, "{what}: the timings add up to {sum} µs, the run took {took} µs:\n{text}");
    trace
}

/// The trace of a run on `device` of `program`, whose `k0` lies in image 0: two discoveries
/// (the program's own, from scratch, then the runtime's), the device, then the build of `k0`
/// from the one image ([`Device::build_events`], stored in the cache: `persist-store KEY`) or
/// the cache's program (`persist-hit`). Returns the stored entry's key, if any.
fn check_trace(
    trace: &str,
    program: &str,
    device: Device,
    images: usize,
    cold: bool,
) -> Option<String> {
    let what = format!("{program} on {}", device.selector);
    let lines: Vec<&str> = trace.lines().collect();
    let name = device_name(trace, device);
    let platform = device.platform;
    let path = fixtures_dir().join(program);
    let discovered = format!(
        "sycl: discover {}: {images} image{}",
        path.display(),
        if images == 1 { "" } else { "s" }
    );
    let mut want =
        vec![discovered.clone(), discovered, format!("sycl: device {platform} / {name}")];
    let mut key = None;
    if cold {
        let image = format!("{program} image 0");
        let build = device.build_events(name, "k0", &[&image], &image);
        want.extend(build.iter().map(|event| format!("sycl: {event}")));
        // `persist-store KEY (N bytes)`, KEY 64 hexadecimal digits.
        let stored = lines.last().and_then(|l| l.strip_prefix("sycl: persist-store "));
        let stored = stored.and_then(|s| s.split_once(" ("));
        if let Some((k, size)) = stored.filter(|(k, size)| {
            k.len() == 64
                && k.bytes().all(|b| b.is_ascii_hexdigit() && !b.is_ascii_uppercase())
                && size.strip_suffix(" bytes)").is_some_and(|n| n.parse::<u64>().is_ok())
        }) {
            want.push(format!("sycl: persist-store {k} ({size}"));
            key = Some(k.to_string());
        } else {
            want.push("sycl: persist-store KEY (N bytes)".into());
        }
    } else {
        want.push(format!("sycl: persist-hit k0 on {name}: {program} image 0"));
    }
    assert_eq!(lines, want, "{what}:\n{trace}");
    key
}

/// Each program on each device: on an empty cache (with `STARTUP_SPAWNED_NS`, so
/// `exec_to_main_us` too) it builds `k0` alone and stores it; again on that cache (without
/// it), the stored program serves and nothing is built.
fn start_up(program: &str, images: usize) {
    for device in DEVICES {
        let dir = tempfile::tempdir().unwrap();
        let cache = dir.path().join("cache");
        let trace = run(program, device.selector, &cache, true, images);
        let key = check_trace(&trace, program, device, images, true).unwrap();
        let entries: Vec<_> =
            std::fs::read_dir(&cache).unwrap().map(|e| e.unwrap().file_name()).collect();
        assert_eq!(entries, [format!("{key}.bin").as_str()], "{program} on {}", device.selector);
        let trace = run(program, device.selector, &cache, false, images);
        check_trace(&trace, program, device, images, false);
    }
}

#[test]
fn a_binary_with_one_kernel_starts_and_prints_its_timings_on_both_devices() {
    start_up("startup-1", 1);
}

#[test]
fn a_binary_with_a_thousand_kernels_compiles_only_the_image_it_launches() {
    start_up("startup-1000", 1000);
}
