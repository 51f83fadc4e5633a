//! Virtual-function sets: outlined set images, dummies, linking by device
//! capability, a set from a shared library, a missing set, objects that survive a rebuild.

use sycl_tests::{events, Device, Run, DEVICES};

#[test]
fn the_design_examples_run_on_intel_with_the_real_sets() {
    let Run { out: o, trace, .. } = Run::new(Device::INTEL, "vfunc-app", &[], &[]);
    let lines: Vec<&str> = o.lines().collect();
    assert_eq!(
        &lines[..6],
        [
            "construct: [0, 0, 1, 10, 0, 20, 1, 30]",
            "use_foo: [1, 12, 21, 32]",
            "use_bar: [0, 20, 40, 60]",
            "use_lib: [0, 30, 60, 90]",
            "select_call: [2, 11, 22, 31]",
            "use_foo_offset after a rebuild: [101, 112, 121, 132]",
        ]
    );
    // A select between function pointers would have killed the process in the vectorizer.
    assert!(trace.contains("sycl: vectorizer off for this process"), "{trace}");
    assert!(lines[6].starts_with("use_missing: no image provides virtual-function set `nobody_provides_this`, which kernel `use_missing` uses"), "{o}");
    assert!(
        trace.contains(
            "sycl: resolve virtual functions fp16_set -> vfunc-app image 6 (for kernel construct)"
        ),
        "{trace}"
    );
    assert!(
        trace.contains("sycl: resolve virtual functions lib_set -> libvfunc_lib.so image 0"),
        "a set from a shared library: {trace}"
    );
    // Constructing and calling kernels share one program, so objects stay valid between them.
    assert_eq!(events(&trace, "link").len(), 2, "one program, plus its rebuild: {trace}");
    let hits = events(&trace, "cache-hit");
    assert_eq!(hits.iter().filter(|l| l.starts_with("use_")).count(), 3, "{trace}");
}

#[test]
fn the_design_examples_run_on_pocl_with_the_dummy_where_fp16_is_missing() {
    // No process crash.
    let Run { out: o, trace, .. } = Run::new(Device::POCL, "vfunc-app", &[], &[]);
    // PoCL has no fp16: the program links fp16_set's dummy, and the kernel that calls into the
    // set is refused; every other call goes through the method tables, lowered to switches.
    assert!(trace.contains("sycl: resolve virtual functions fp16_set -> vfunc-app image 7 (dummy) (for kernel construct)"), "{trace}");
    let lines: Vec<&str> = o.lines().collect();
    let ran: Vec<&str> =
        lines.iter().copied().filter(|l| !l.starts_with("use_bar: ")).take(5).collect();
    assert_eq!(
        ran,
        [
            "construct: [0, 0, 1, 10, 0, 20, 1, 30]",
            "use_foo: [1, 12, 21, 32]",
            "use_lib: [0, 30, 60, 90]",
            "select_call: [2, 11, 22, 31]",
            "use_foo_offset after a rebuild: [101, 112, 121, 132]",
        ],
        "{trace}"
    );
    assert!(
        lines[2].starts_with("use_bar: kernel_not_supported: Kernel uses optional feature corresponding to 'aspect::fp16' but device does not support this aspect."),
        "{o}"
    );
    assert!(
        lines[6].starts_with(
            "use_missing: no image provides virtual-function set `nobody_provides_this`"
        ),
        "{o}"
    );
    assert!(trace.contains("(linked by the runtime, translated to SPIR)"), "{trace}");
}

#[test]
fn kernels_from_bundles_link_the_sets_as_launches_do_on_both_devices() {
    // Each kernel from a bundle built for it alone: the same walk as a launch, so the same
    // results; `construct` only refers to the method tables (no indirect call), and its
    // bundle still links every set they hold.
    for device in DEVICES {
        // fp16_set's own image where the device has fp16, its dummy where not (PoCL).
        let fp16_set = if device.fp16 { "vfunc-app image 6" } else { "vfunc-app image 7 (dummy)" };
        let plain = Run::new(device, "vfunc-app", &[], &[]);
        // No process crash.
        let Run { out: o, trace, .. } = Run::new(device, "vfunc-app", &["bundle"], &[]);
        let on = device.selector;
        // Every line as the launches print it, but the missing set's, which names the image
        // whose bundle asked for it.
        let lines = |out: &str| -> Vec<String> {
            out.lines().filter(|l| !l.starts_with("use_missing: ")).map(str::to_string).collect()
        };
        assert_eq!(lines(&o), lines(&plain.out), "on {on}: {trace}");
        // use_bar calls into fp16_set: refused where the device has no fp16.
        let ran = o.lines().filter(|l| l.ends_with(']')).count();
        assert_eq!(ran, if device.fp16 { 6 } else { 5 }, "on {on}: {o}");
        let first_link = trace.lines().find(|l| l.starts_with("sycl: link (bundle) on ")).unwrap();
        for set_image in
            ["vfunc-app image 5", fp16_set.trim_end_matches(" (dummy)"), "libvfunc_lib.so image 0"]
        {
            assert!(first_link.contains(set_image), "{on}: {set_image} in {first_link}");
        }
        assert!(
            trace.contains(&format!(
                "sycl: resolve virtual functions fp16_set -> {fp16_set} (for a kernel bundle)"
            )),
            "{on}: {trace}"
        );
        assert!(
            o.lines().last().unwrap().starts_with(
                "use_missing: no image provides virtual-function set `nobody_provides_this`, which kernel `(bundle of vfunc-app image"
            ),
            "{on}: {o}"
        );
    }
}
