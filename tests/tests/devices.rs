//! Devices as data on this machine's two CPU devices (Intel's CPU runtime and PoCL): both are
//! listed with their selectors and sane limits, the aspect that tells them apart (`fp16`), a
//! queue opened on each, a kernel's work-group limits as the drivers enforce them at launch,
//! and the `devices` example's listing of them.

use std::process::Command;

use sycl_runtime::{devices, load_device_library, Backend, DeviceInfo, DeviceType, Error, Queue};
use sycl_tests::{device_lib, output, repo_root, stderr, stdout, DEVICES};

/// The device `selector` picks, from the list.
fn listed<'d>(devices: &'d [DeviceInfo], selector: &str) -> &'d DeviceInfo {
    devices.iter().find(|d| d.selector == selector).unwrap_or_else(|| {
        panic!("no device with selector `{selector}` among {devices:#?}");
    })
}

#[test]
fn both_cpu_devices_are_listed_with_their_selectors_limits_and_aspects() {
    let all = devices().unwrap();
    let (intel, pocl) = (listed(&all, "intel"), listed(&all, "pocl"));
    for d in [intel, pocl] {
        let what = &d.selector;
        assert_eq!((d.backend, d.device_type), (Backend::OpenCl, DeviceType::Cpu), "{what}");
        assert!(d.compute_units > 0, "{what}: {d:?}");
        assert!(d.global_mem_bytes >= 1 << 20, "{what}: {d:?}");
        assert!(d.local_mem_bytes >= 16 << 10, "{what}: OpenCL's minimum is 16 KiB: {d:?}");
        assert!(d.max_work_group_size >= 1, "{what}: {d:?}");
        assert_eq!(d.compute_capability, None, "{what}: not a CUDA GPU");
        assert!(d.has_aspect("cpu") && d.has_aspect("fp64"), "{what}: {:?}", d.aspects);
        assert!(!d.has_aspect("gpu"), "{what}: {:?}", d.aspects);
    }
    // What the tests' table of devices says of each: its platform, and `fp16` (Intel's CPU
    // runtime has cl_khr_fp16, PoCL has not).
    for device in DEVICES {
        let d = listed(&all, device.selector);
        assert!(d.platform.contains(device.platform), "{device:?}: {d:?}");
        assert_eq!(d.has_aspect("fp16"), device.fp16, "{device:?}: {:?}", d.aspects);
    }
    assert!(intel.has_aspect("target_intel_cpu_x86_64") && pocl.has_aspect("target_pocl_cpu"));
    assert!(intel.sub_group_sizes.contains(&8), "{:?}", intel.sub_group_sizes);

    // Each selector picks its device, however the queue is asked for.
    for d in [intel, pocl] {
        assert_eq!(Queue::with_device(&d.selector).unwrap().device(), d);
        let q = Queue::on(d).unwrap();
        assert_eq!(q.device(), d);
        assert_eq!(q.device_name(), d.name);
    }
}

#[test]
fn kernel_work_group_sizes_are_what_the_drivers_enforce() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("divrem.sydl");
    let made = device_lib(&[], &file, &[&repo_root().join("tests/kernels/divrem.cl")]);
    assert!(made.status.success(), "{}", stderr(&made));
    let _library = load_device_library(&file).unwrap();

    for selector in DEVICES.map(|d| d.selector) {
        let q = Queue::with_device(selector).unwrap();
        let sizes = q.kernel_work_group_sizes("divrem_sum").unwrap();
        assert!(
            sizes.max >= sizes.preferred_multiple && sizes.preferred_multiple >= 1,
            "{selector}: {sizes:?}"
        );
        assert!(sizes.max <= q.device().max_work_group_size, "{selector}: {sizes:?}");

        // A work-group of `max` work-items runs; one of twice as many is refused by the driver,
        // and the error names both sizes.
        let n = sizes.max;
        let out = q.buffer::<i32>(2 * n).unwrap();
        q.launch("divrem_sum").arg(&out).arg(7i32).global([n]).local([n]).run().unwrap();
        let want: Vec<i32> = (0..n as i32).map(|i| i / 7 + i % 7).collect();
        assert_eq!(out.read().unwrap()[..n], want, "{selector}: a work-group of {n}");
        let refused = q.launch("divrem_sum").arg(&out).arg(7i32).global([2 * n]).local([2 * n]);
        match refused.run().map(drop) {
            Err(Error::InvalidArgument(e)) => assert!(
                e.starts_with(&format!(
                    "kernel `divrem_sum`: a work-group of {} work-items ([{}]) is more than it takes on ",
                    2 * n,
                    2 * n
                )) && e.contains(&format!("(`{selector}`) (at most {n}: Queue::kernel_work_group_sizes)"))
                    && e.ends_with(
                        "the driver said clEnqueueNDRangeKernel failed with CL_INVALID_WORK_GROUP_SIZE (-54)"
                    ),
                "{selector}: {e}"
            ),
            other => panic!("{selector}: a work-group of {} work-items: {other:?}", 2 * n),
        }
    }
}

/// Checks `value`, a size as the `devices` example prints it, against `bytes`: `N bytes`
/// below 1 KiB, else `V UNIT (N bytes)` with `V` the size in the largest binary unit that
/// keeps it at least 1, to one decimal.
fn check_size(what: &str, value: &str, bytes: u64) {
    if bytes < 1024 {
        assert_eq!(value, format!("{bytes} bytes"), "{what}");
        return;
    }
    let (scaled, exact) = value.split_once(" (").unwrap_or_else(|| panic!("{what}: {value}"));
    assert_eq!(exact, format!("{bytes} bytes)"), "{what}");
    let (number, unit) = scaled.split_once(' ').unwrap_or_else(|| panic!("{what}: {value}"));
    let power = ["KiB", "MiB", "GiB", "TiB"].iter().position(|u| *u == unit);
    let power = power.unwrap_or_else(|| panic!("{what}: {value}: no such unit")) as i32 + 1;
    let (tenths, unit_bytes) = (number.split_once('.').map(|(_, t)| t), 1024f64.powi(power));
    assert!(tenths.is_some_and(|t| t.len() == 1), "{what}: {value}: one decimal");
    let number: f64 = number.parse().unwrap_or_else(|_| panic!("{what}: {value}"));
    assert!(
        (number - bytes as f64 / unit_bytes).abs() <= 0.05 + 1e-9
            && (power == 4 || bytes as f64 / unit_bytes < 1024.0),
        "{what}: {value} is not {bytes} bytes in its largest unit"
    );
}

/// `cargo run --example devices -p sycl-runtime`, checked by what it prints: a table with a
/// row for every device the runtime lists on this machine (compared with this process's
/// [`devices`], as a set: whatever the CPU is called, in whatever order the drivers are
/// registered), each cell under its column's header (selector, backend, platform, name,
/// type); then, in the table's order, a block per device with its limits and aspects.
#[test]
fn the_devices_example_lists_every_device_with_its_fields() {
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
    let built = output(
        Command::new(cargo)
            .args(["build", "-q", "-p", "sycl-runtime", "--example", "devices"])
            .current_dir(repo_root()),
    );
    assert!(built.status.success(), "building the example: {}", stderr(&built));
    let out = output(&mut Command::new(repo_root().join("target/debug/examples/devices")));
    let (text, err) = (stdout(&out), stderr(&out));
    assert!(out.status.success() && err.is_empty(), "{text}{err}");

    let all = devices().unwrap();
    let mut listed: Vec<&str> = all.iter().map(|d| d.selector.as_str()).collect();
    listed.sort_unstable();
    assert!(DEVICES.iter().all(|d| listed.contains(&d.selector)), "{all:#?}");
    let device = |selector: &str| {
        all.iter()
            .find(|d| d.selector == selector)
            .unwrap_or_else(|| panic!("the example lists `{selector}`, the runtime not:\n{text}"))
    };

    // The table, then a block per device, each after a blank line.
    let mut parts = text.split("\n\n");
    let table: Vec<&str> = parts.next().unwrap().lines().collect();
    let header = ["selector", "backend", "platform", "name", "type"];
    let starts: Vec<usize> = header.iter().map(|h| table[0].find(h).unwrap()).collect();
    let padded: Vec<String> = header
        .iter()
        .enumerate()
        .map(|(i, h)| match starts.get(i + 1) {
            Some(next) => format!("{h:width$}", width = next - starts[i] - 2),
            None => h.to_string(),
        })
        .collect();
    assert_eq!(table[0], padded.join("  "), "the header, each column as wide as its cells");
    let mut order = Vec::new();
    for row in &table[1..] {
        let cell = |i: usize| {
            let end = starts.get(i + 1).map_or(row.len(), |next| next - 2);
            let cell = row.get(starts[i]..end).unwrap_or_else(|| panic!("{row:?}: column {i}"));
            if let Some(&next) = starts.get(i + 1) {
                assert_eq!(row.get(next - 2..next), Some("  "), "{row:?}: column {i}");
            }
            cell.trim_end()
        };
        let d = device(cell(0));
        let want = [
            &*d.selector,
            &d.backend.to_string(),
            &d.platform,
            &d.name,
            &d.device_type.to_string(),
        ];
        assert_eq!((0..5).map(cell).collect::<Vec<&str>>(), want, "{row:?}");
        if DEVICES.iter().any(|d| d.selector == cell(0)) {
            assert_eq!((cell(1), cell(4)), ("OpenCL", "cpu"), "{row:?}");
        }
        order.push(cell(0));
    }
    let mut in_table = order.clone();
    in_table.sort_unstable();
    assert_eq!(in_table, listed, "every device once in the table:\n{text}");

    let blocks: Vec<&str> = parts.collect();
    assert_eq!(blocks.len(), order.len(), "a block per device:\n{text}");
    for (block, selector) in blocks.iter().zip(&order) {
        let d = device(selector);
        let mut lines = block.lines();
        assert_eq!(lines.next(), Some(format!("{selector}:").as_str()), "{block}");
        // `  KEY:` padded to 23 columns, then the value.
        let fields: Vec<(&str, &str)> = lines
            .map(|l| {
                let (key, value) = (l.get(..23).unwrap_or(l), l.get(23..).unwrap_or(""));
                let key = key.strip_prefix("  ").and_then(|k| k.trim_end().strip_suffix(':'));
                let key = key.unwrap_or_else(|| panic!("{selector}: {l:?}"));
                assert!(!value.starts_with(' '), "{selector}: {l:?}: values in one column");
                (key, value)
            })
            .collect();
        let keys: Vec<&str> = fields.iter().map(|(key, _)| *key).collect();
        let mut want = vec!["compute units"];
        if d.compute_capability.is_some() {
            want.push("compute capability");
        }
        want.extend([
            "global memory",
            "local memory",
            "max work-group size",
            "sub-group sizes",
            "aspects",
        ]);
        assert_eq!(keys, want, "{selector}:\n{block}");
        let sub_groups: Vec<String> = d.sub_group_sizes.iter().map(usize::to_string).collect();
        for (key, value) in fields {
            let what = format!("{selector}: {key}");
            let want = match key {
                "global memory" | "local memory" => {
                    let global = key == "global memory";
                    check_size(
                        &what,
                        value,
                        if global { d.global_mem_bytes } else { d.local_mem_bytes },
                    );
                    continue;
                }
                "compute units" => d.compute_units.to_string(),
                "compute capability" => {
                    let (major, minor) = d.compute_capability.unwrap();
                    format!("{major}.{minor}")
                }
                "max work-group size" => d.max_work_group_size.to_string(),
                "sub-group sizes" if sub_groups.is_empty() => "(none)".into(),
                "sub-group sizes" => sub_groups.join(" "),
                _ => d.aspects.join(" "),
            };
            assert_eq!(value, want, "{what}");
        }
    }
    assert!(text.ends_with('\n') && !text.ends_with("\n\n"), "{text:?}");
}
