//! The post-link (DPC++'s dynamic linking, shared libraries and optional kernel features designs), through `sycl-ld post-link` and real links of
//! device sources compiled by `sycl-build`: split modes, exports and imports, optional
//! features, required sizes, fixed targets, the diagnostics' texts, ahead-of-time filtering
//! and determinism.

use std::path::{Path, PathBuf};
use std::process::Command;

use sycl_build::SplitMode;
use sycl_format::{sets, DeviceRequirements, ImageFormat, ImageSet, Target};

const HEADER: &str = "#include <sycl/device.h>\n";

struct Unit {
    dir: tempfile::TempDir,
    archives: Vec<PathBuf>,
}

impl Unit {
    fn new() -> Unit {
        Unit { dir: tempfile::tempdir().unwrap(), archives: vec![] }
    }

    /// Compiles sources (name, text) as one crate would, with `configure` applied.
    fn build(
        &mut self,
        name: &str,
        sources: &[(&str, &str)],
        configure: impl FnOnce(&mut sycl_build::Build),
    ) -> sycl_build::Compiled {
        let mut build = sycl_build::Build::new();
        build.cargo_metadata(false).out_dir(self.dir.path().join(format!("out-{name}")));
        for (file, text) in sources {
            let path = self.dir.path().join(file);
            std::fs::write(&path, format!("{HEADER}{text}")).unwrap();
            build.file(path);
        }
        configure(&mut build);
        let compiled = build.try_compile(name).unwrap();
        self.archives.push(compiled.archive.clone());
        compiled
    }

    /// `sycl-ld post-link`: the images as (symbols, property sets), plus sycl-ld's stderr.
    fn post_link(&self, split: SplitMode) -> (Vec<Row>, String) {
        let out = self.dir.path().join(format!("table-{}", split.name()));
        let output = Command::new(env!("CARGO_BIN_EXE_sycl-ld"))
            .arg("post-link")
            .args(["--split", split.name(), "-o"])
            .arg(&out)
            .args(&self.archives)
            .output()
            .unwrap();
        let stderr = String::from_utf8_lossy(&output.stderr).into_owned();
        assert!(output.status.success(), "{stderr}");
        let table = std::fs::read_to_string(out.join("table.txt")).unwrap();
        let rows = table
            .lines()
            .skip(1)
            .map(|row| {
                let cells: Vec<&str> = row.split('|').collect();
                let read = |c: &str| std::fs::read_to_string(out.join(c)).unwrap();
                Row {
                    spirv: std::fs::read(out.join(cells[0])).unwrap(),
                    symbols: read(cells[2]).lines().map(str::to_string).collect(),
                    properties: props(&read(cells[1])),
                }
            })
            .collect();
        (rows, stderr)
    }

    /// A real shared library linked through sycl-ld, and its images.
    fn link_shared(&self) -> ImageSet {
        let output = self.link_shared_with(&[]);
        assert!(output.status.success(), "{}", String::from_utf8_lossy(&output.stderr));
        images_of(&self.dir.path().join("libunit.so"))
    }

    fn link_shared_with(&self, env: &[(&str, &str)]) -> std::process::Output {
        self.link_shared_against(&[], env)
    }

    /// Linked with `libraries` (`-L`/`-l` arguments) on the link line, after the unit's code.
    fn link_shared_against(
        &self,
        libraries: &[String],
        env: &[(&str, &str)],
    ) -> std::process::Output {
        let mut cmd = Command::new(env!("CARGO_BIN_EXE_sycl-ld"));
        cmd.args(&self.archives)
            .args(libraries)
            .args(["-shared", "-nostdlib", "-o"])
            .arg(self.dir.path().join("libunit.so"));
        cmd.env_remove("SYCL_LD_LINKER").env_remove("SYCL_LD_SPLIT");
        cmd.envs(env.iter().copied());
        cmd.output().unwrap()
    }
}

struct Row {
    spirv: Vec<u8>,
    symbols: Vec<String>,
    properties: Vec<sycl_format::PropertySet>,
}

impl Row {
    fn set(&self, name: &str) -> Vec<String> {
        let set = self.properties.iter().find(|s| s.name == name);
        set.map(|s| s.properties.iter().map(|p| p.name.clone()).collect()).unwrap_or_default()
    }

    fn requirements(&self) -> DeviceRequirements {
        match self.properties.iter().find(|s| s.name == sets::DEVICE_REQUIREMENTS) {
            Some(s) => DeviceRequirements::from_property_set(s).unwrap(),
            None => DeviceRequirements::default(),
        }
    }
}

/// Properties files as `sycl-ld` writes them (parsed the way a reader of the table would).
fn props(text: &str) -> Vec<sycl_format::PropertySet> {
    let mut out: Vec<sycl_format::PropertySet> = vec![];
    for line in text.lines() {
        if let Some(name) = line.strip_prefix('[').and_then(|l| l.strip_suffix(']')) {
            out.push(sycl_format::PropertySet { name: name.into(), properties: vec![] });
        } else if let Some((name, rest)) = line.split_once('=') {
            let (ty, value) = rest.split_once('|').unwrap();
            let value = match ty {
                "1" => sycl_format::PropertyValue::U32(value.parse().unwrap()),
                "2" => sycl_format::PropertyValue::Bytes(
                    (0..value.len())
                        .step_by(2)
                        .map(|i| u8::from_str_radix(&value[i..i + 2], 16).unwrap())
                        .collect(),
                ),
                _ => sycl_format::PropertyValue::String(unescape(value)),
            };
            out.last_mut().unwrap().properties.push(sycl_format::Property::new(name, value));
        }
    }
    out
}

/// A string value of a properties file: `\\` is a backslash, `\n` a newline.
fn unescape(value: &str) -> String {
    let mut out = String::new();
    let mut chars = value.chars();
    while let Some(c) = chars.next() {
        out.push(match c {
            // The escaped character: `n` or a backslash.
            '\\' if chars.next() == Some('n') => '\n',
            c => c,
        });
    }
    out
}

fn images_of(file: &Path) -> ImageSet {
    use object::{Object, ObjectSection};
    let bytes = std::fs::read(file).unwrap();
    let obj = object::File::parse(&*bytes).unwrap();
    let section = obj.section_by_name(sycl_format::IMAGE_NOTE_SECTION).unwrap();
    let notes =
        sycl_format::find_notes(section.data().unwrap(), sycl_format::NOTE_TYPE_IMAGES, 4).unwrap();
    ImageSet::decode(notes[0]).unwrap()
}

const ALL_MODES: [SplitMode; 4] =
    [SplitMode::PerKernel, SplitMode::PerSource, SplitMode::Off, SplitMode::Auto];

const K1_K2: &str = "#pragma OPENCL EXTENSION cl_khr_fp16 : enable\n\
__kernel void K1(__global float *o) { o[get_global_id(0)] = 1.0f; }\n\
__kernel void K2(__global half *o) { size_t i = get_global_id(0); o[i] = o[i] * (half)2.0; }\n";

#[test]
fn k1_and_k2_never_share_an_image() {
    let mut unit = Unit::new();
    unit.build("k", &[("k.cl", K1_K2)], |_| {});
    for split in ALL_MODES {
        let (rows, _) = unit.post_link(split);
        let k1 = rows.iter().find(|r| r.symbols.contains(&"K1".to_string())).unwrap();
        let k2 = rows.iter().find(|r| r.symbols.contains(&"K2".to_string())).unwrap();
        assert_eq!(k1.symbols, ["K1"], "{split:?}");
        assert_eq!(k2.symbols, ["K2"], "{split:?}");
        assert!(k1.requirements().aspects.is_empty(), "{split:?}");
        assert_eq!(k2.requirements().aspects, [5], "K2 requires fp16 under {split:?}");
    }
}

#[test]
fn kernels_of_one_source_share_an_image_unless_split_per_kernel() {
    let mut unit = Unit::new();
    let two = "__kernel void a(__global int *o) { o[0] = 1; }\n__kernel void b(__global int *o) { o[0] = 2; }\n";
    unit.build(
        "two",
        &[("two.cl", two), ("three.cl", "__kernel void c(__global int *o) { o[0] = 3; }\n")],
        |_| {},
    );
    let symbols =
        |split| unit.post_link(split).0.into_iter().map(|r| r.symbols).collect::<Vec<_>>();
    assert_eq!(symbols(SplitMode::PerKernel), [vec!["a"], vec!["b"], vec!["c"]]);
    assert_eq!(symbols(SplitMode::PerSource), [vec!["a", "b"], vec!["c"]]);
    assert_eq!(symbols(SplitMode::Off), [vec!["a", "b", "c"]]);
    assert_eq!(symbols(SplitMode::Auto), symbols(SplitMode::PerSource));
}

#[test]
fn per_source_duplicates_lib_device_func_but_exports_it_once() {
    let mut unit = Unit::new();
    unit.build(
        "lib",
        &[
            ("A.cl", "SYCL_EXTERNAL int LibDeviceFunc(int i) { return i * 2; }\n"),
            ("B.cl", "SYCL_EXTERNAL int LibDeviceFunc(int i);\n__kernel void k(__global int *o) { size_t i = get_global_id(0); o[i] = LibDeviceFunc((int)i); }\n"),
        ],
        |b| {
            b.split(SplitMode::PerSource);
        },
    );
    let (rows, _) = unit.post_link(SplitMode::PerSource);
    assert_eq!(rows.len(), 2);
    let kernel = &rows[0];
    assert_eq!(kernel.symbols, ["k"]);
    assert!(kernel.set(sets::EXPORTED_SYMBOLS).is_empty(), "never exported from the kernel image");
    assert!(kernel.set(sets::IMPORTED_SYMBOLS).is_empty(), "the kernel image is self-contained");
    let module = sycl_spirv::load(&kernel.spirv).unwrap();
    let symbols = sycl_spirv::Symbols::of(&module);
    assert_eq!(
        symbols.defined_functions.len(),
        3,
        "entry wrapper, k, and the copy of LibDeviceFunc"
    );
    assert!(
        symbols.linkage.values().all(|(name, _)| name.starts_with("__spirv_BuiltIn")),
        "the copy is internal: {:?}",
        symbols.linkage
    );
    let exports = &rows[1];
    assert_eq!(exports.set(sets::EXPORTED_SYMBOLS), ["LibDeviceFunc"]);
    assert!(!exports.symbols.contains(&"k".to_string()));
}

#[test]
fn a_sycl_external_calling_one_from_another_source_imports_it() {
    let mut unit = Unit::new();
    unit.build(
        "chain",
        &[
            ("f.cl", "SYCL_EXTERNAL int g(int i);\nstatic int helper(int i) { return i + 1; }\nSYCL_EXTERNAL int f(int i) { return helper(g(i)); }\n"),
            ("g.cl", "SYCL_EXTERNAL int g(int i) { return i * 3; }\n"),
        ],
        |_| {},
    );
    let (rows, _) = unit.post_link(SplitMode::PerSource);
    assert_eq!(rows.len(), 2);
    let (f, g) = (&rows[0], &rows[1]);
    assert_eq!(f.set(sets::EXPORTED_SYMBOLS), ["f"]);
    assert_eq!(
        f.set(sets::IMPORTED_SYMBOLS),
        ["g"],
        "g is not copied: the dependency is an import"
    );
    assert_eq!(g.set(sets::EXPORTED_SYMBOLS), ["g"]);
    assert!(g.set(sets::IMPORTED_SYMBOLS).is_empty());
    // Under `off` both functions share one exports image, so nothing is imported.
    let (rows, _) = unit.post_link(SplitMode::Off);
    assert_eq!(rows.len(), 1);
    assert_eq!(rows[0].set(sets::EXPORTED_SYMBOLS), ["f", "g"]);
    assert!(rows[0].set(sets::IMPORTED_SYMBOLS).is_empty());
}

#[test]
fn required_sizes_split_images_and_are_recorded() {
    let mut unit = Unit::new();
    let src = "__kernel void plain(__global int *o) { o[0] = 0; }\n\
__kernel SYCL_REQD_WORK_GROUP_SIZE(8, 1, 1) void wg(__global int *o) { o[0] = 1; }\n\
__kernel SYCL_REQD_SUB_GROUP_SIZE(16) void sg(__global int *o) { o[0] = 2; }\n";
    unit.build("sizes", &[("sizes.cl", src)], |_| {});
    let (rows, _) = unit.post_link(SplitMode::Off);
    let by = |k: &str| rows.iter().find(|r| r.symbols == [k]).unwrap().requirements();
    assert_eq!(rows.len(), 3);
    assert_eq!(by("plain"), DeviceRequirements::default());
    assert_eq!(by("wg").reqd_work_group_sizes, [vec![8, 1, 1]]);
    assert_eq!(by("sg").reqd_sub_group_sizes, [16]);
}

#[test]
fn fixed_targets_bundle_kernels_whatever_their_features() {
    let mut unit = Unit::new();
    unit.build("fixed", &[("k.cl", K1_K2)], |b| {
        b.fixed_targets([Target::IntelCpuX86_64]);
    });
    let (rows, _) = unit.post_link(SplitMode::Off);
    assert_eq!(rows.len(), 1, "fixed targets: split exactly as requested");
    assert_eq!(rows[0].symbols, ["K1", "K2"]);
    let r = rows[0].requirements();
    assert_eq!(
        r.fixed_target,
        Some(vec![sycl_format::aspects::target_aspect(Target::IntelCpuX86_64).unwrap()])
    );
    assert!(r.aspects.is_empty());
}

#[test]
fn a_function_compiled_for_other_fixed_targets_is_warned_about() {
    let mut unit = Unit::new();
    unit.build(
        "kern",
        &[(
            "k.cl",
            "SYCL_EXTERNAL int f(int);\n__kernel void k(__global int *o) { o[0] = f(1); }\n",
        )],
        |b| {
            b.fixed_targets([Target::IntelCpuX86_64]);
        },
    );
    unit.build("func", &[("f.cl", "SYCL_EXTERNAL int f(int i) { return i; }\n")], |b| {
        b.fixed_targets([Target::PoclCpu]);
    });
    let (rows, stderr) = unit.post_link(SplitMode::PerKernel);
    assert!(
        stderr.contains(
            "warning: function 'f' compiled with different fixed targets than its calling kernel."
        ),
        "{stderr}"
    );
    let kernel = rows.iter().find(|r| r.symbols == ["k"]).unwrap();
    assert_eq!(kernel.requirements().fixed_target, Some(vec![]), "the intersection is empty");
}

#[test]
fn undeclared_aspect_warning_shows_the_call_chain() {
    let src = "#pragma OPENCL EXTENSION cl_khr_fp16 : enable\n\
static float boo(float x) { half h = (half)x; return (float)(h * h); }\n\
static float bar(float x) { return boo(x) + 1.0f; }\n\
__kernel SYCL_DEVICE_HAS(fp64) void foo(__global float *o) { o[0] = bar(o[1]); }\n";
    let mut unit = Unit::new();
    let compiled = unit.build("warn", &[("hw.cl", src)], |_| {});
    assert_eq!(
        compiled.diagnostics,
        ["warning: function 'foo' uses aspect 'fp16' not listed in 'SYCL_DEVICE_HAS'\n\
use is from this call chain:\n  foo()\n  bar()\n  boo()\ncompile with '-g' to get source location"]
    );
    let compiled = unit.build("warn_g", &[("hw.cl", src)], |b| {
        b.flag("-g");
    });
    let hw = unit.dir.path().join("hw.cl").display().to_string();
    assert_eq!(
        compiled.diagnostics,
        [format!(
            "{hw}:3:38: warning: function 'foo' uses aspect 'fp16' not listed in 'SYCL_DEVICE_HAS'\n\
use is from this call chain:\n  foo()\n  bar() {hw}:5:69\n  boo() {hw}:4:36"
        )]
    );
}

#[test]
fn a_fixed_target_that_lacks_an_aspect_is_warned_about() {
    let mut unit = Unit::new();
    let compiled = unit.build("pocl", &[("k.cl", K1_K2)], |b| {
        b.fixed_targets([Target::PoclCpu]);
    });
    assert_eq!(compiled.diagnostics.len(), 1, "{:?}", compiled.diagnostics);
    assert!(
        compiled.diagnostics[0].starts_with("warning: function 'K2' uses aspect 'fp16', which fixed target 'pocl_cpu' does not support"),
        "{:?}",
        compiled.diagnostics
    );
}

#[test]
fn an_aspect_from_another_source_is_warned_about_at_link_time() {
    let mut unit = Unit::new();
    unit.build(
        "cross",
        &[
            ("k.cl", "SYCL_EXTERNAL double twice(double);\n__kernel void k(__global double *o) { o[0] = twice(o[1]); }\n"),
            ("f.cl", "SYCL_EXTERNAL double twice(double x) { return 2.0 * x; }\n"),
        ],
        |_| {},
    );
    // The kernel's own source already uses double: no warning.
    let (_, stderr) = unit.post_link(SplitMode::PerSource);
    assert!(!stderr.contains("not expected"), "{stderr}");

    let mut unit = Unit::new();
    unit.build(
        "cross2",
        &[
            ("k.cl", "SYCL_EXTERNAL int scaled(int);\n__kernel void k(__global int *o) { o[0] = scaled(o[1]); }\n"),
            ("f.cl", "SYCL_EXTERNAL int scaled(int x) { return (int)(x * 0.5); }\n"),
        ],
        |_| {},
    );
    let (rows, stderr) = unit.post_link(SplitMode::PerSource);
    assert!(
        stderr.contains("warning: function 'scaled' uses aspect 'fp64' not expected by its calling kernel.\nsycl-ld: Missing SYCL_DEVICE_HAS on SYCL_EXTERNAL function?"),
        "{stderr}"
    );
    assert_eq!(rows[0].requirements().aspects, [6], "the kernel image requires fp64 all the same");
}

#[test]
fn an_aot_target_that_cannot_run_fp16_does_not_get_it() {
    let mut unit = Unit::new();
    unit.build("aot", &[("k.cl", K1_K2)], |b| {
        b.targets([Target::Spir64, Target::PoclCpu, Target::IntelCpuX86_64]);
    });
    let set = unit.link_shared();
    let kernels = |target: Target| -> Vec<String> {
        set.images.iter().filter(|i| i.target == target).flat_map(|i| i.kernels.clone()).collect()
    };
    assert_eq!(kernels(Target::Spir64), ["K1", "K2"]);
    assert_eq!(kernels(Target::PoclCpu), ["K1"], "PoCL has no fp16");
    assert_eq!(kernels(Target::IntelCpuX86_64), ["K1", "K2"]);
    for image in &set.images {
        let magic: &[u8] = match image.format {
            sycl_format::ImageFormat::SpirV => &[0x03, 0x02, 0x23, 0x07],
            sycl_format::ImageFormat::SpirBitcode => b"BC\xc0\xde",
            sycl_format::ImageFormat::Native => b"\x7fELF",
            sycl_format::ImageFormat::Ptx => b"//\n",
        };
        assert!(
            image.data.starts_with(magic),
            "{} image for {} starts {:x?}",
            image.format.name(),
            image.target,
            &image.data[..4]
        );
    }
}

#[test]
fn aot_targets_drop_the_virtual_function_sets_they_cannot_run() {
    let mut unit = Unit::new();
    let source = "#pragma OPENCL EXTENSION __cl_clang_function_pointers : enable\n\
#pragma OPENCL EXTENSION cl_khr_fp16 : enable\n\
typedef int (*fn_t)(int);\n\
SYCL_INDIRECTLY_CALLABLE(plain) int twice(int x) { return 2 * x; }\n\
SYCL_INDIRECTLY_CALLABLE(halves) int halve(int x) { half h = (half)x; return (int)(h / (half)2.0); }\n\
__global fn_t table[2] = { twice, halve };\n\
__kernel SYCL_CALLS_INDIRECTLY(plain) void call_plain(__global int *o) { o[0] = table[0](o[0]); }\n\
__kernel void no_pointers(__global int *o) { o[0] = 1; }\n";
    unit.build("vf", &[("vf.cl", source)], |b| {
        b.targets([Target::Spir64, Target::PoclCpu]);
    });
    let set = unit.link_shared();
    let of = |target: Target| -> (Vec<(String, bool)>, Vec<String>) {
        let images: Vec<_> = set.images.iter().filter(|i| i.target == target).collect();
        let mut sets: Vec<(String, bool)> = images
            .iter()
            .filter_map(|i| i.virtual_functions_set())
            .map(|(s, dummy)| (s.to_string(), dummy))
            .collect();
        sets.sort();
        let mut kernels: Vec<String> = images.iter().flat_map(|i| i.kernels.clone()).collect();
        kernels.sort();
        (sets, kernels)
    };
    let (sets, kernels) = of(Target::Spir64);
    assert_eq!(sets, [("halves".into(), false), ("halves".into(), true), ("plain".into(), false)]);
    assert_eq!(kernels, ["call_plain", "no_pointers"]);
    // PoCL has no fp16: the real `halves` goes, its dummy stays. Its ahead-of-time images
    // cannot call through pointers (the runtime lowers them only in whole programs), so the
    // calling kernel is left to SPIR-V.
    let (sets, kernels) = of(Target::PoclCpu);
    assert_eq!(sets, [("halves".into(), true), ("plain".into(), false)]);
    assert_eq!(kernels, ["no_pointers"]);
}

const FIB: &str = "int fib(int n){ return n<2?n:fib(n-1)+fib(n-2);}\n\
__kernel void fibs(__global int *o) { size_t i = get_global_id(0); o[i] = fib((int)i); }\n";

const CYCLE_WARNING: &str =
    "sycl-ld: warning: call cycle in device code (recursion is not allowed in OpenCL C or SYCL \
device code; the runtime will refuse kernels that reach it): fib -> fib";

#[test]
fn recursion_is_warned_about_and_recorded_but_links() {
    let mut unit = Unit::new();
    unit.build("fib", &[("fib.cl", FIB)], |b| {
        b.targets([Target::Spir64, Target::PoclCpu]);
    });
    let out = unit.link_shared_with(&[]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    assert!(
        stderr.contains(&format!(
            "{CYCLE_WARNING}\nsycl-ld: compile with '-g' to get source location"
        )),
        "{stderr}"
    );
    let set = images_of(&unit.dir.path().join("libunit.so"));
    assert_eq!(set.images.len(), 2, "SPIR-V and pocl_cpu");
    for image in &set.images {
        assert_eq!(image.kernels, ["fibs"]);
        assert_eq!(image.call_graph(), [("fib", vec!["fib"])], "{} image", image.target);
    }

    // With line information, where each call of the cycle is.
    let mut unit = Unit::new();
    unit.build("fib_g", &[("fib.cl", FIB)], |b| {
        b.flag("-g");
    });
    let out = unit.link_shared_with(&[]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    let fib_cl = unit.dir.path().join("fib.cl").display().to_string();
    let expected = format!(
        "{CYCLE_WARNING}\nsycl-ld: cycle of calls:\nsycl-ld:   fib()\nsycl-ld:   fib() {fib_cl}:2:"
    );
    assert!(stderr.contains(&expected), "{stderr}");
}

#[test]
fn an_export_calling_extern_functions_records_them_without_warning() {
    let mut unit = Unit::new();
    let src = "SYCL_EXTERNAL int g(int);\nSYCL_EXTERNAL int h(int);\n\
SYCL_EXTERNAL int f(int i) { return g(i) + h(i); }\n";
    unit.build("ext", &[("f.cl", src)], |_| {});
    let (rows, stderr) = unit.post_link(SplitMode::Auto);
    assert!(!stderr.contains("warning"), "{stderr}");
    assert_eq!(rows.len(), 1);
    assert_eq!(rows[0].set(sets::IMPORTED_SYMBOLS), ["g", "h"]);
    let graph =
        rows[0].properties.iter().find(|s| s.name == sets::CALL_GRAPH).expect("a call graph");
    assert_eq!(
        graph.properties,
        [sycl_format::Property::new("f", sycl_format::PropertyValue::String("g\nh".into()))]
    );
    let set = unit.link_shared();
    assert_eq!(set.images[0].call_graph(), [("f", vec!["g", "h"])]);
}

#[test]
fn post_link_output_is_deterministic() {
    let mut unit = Unit::new();
    unit.build(
        "det",
        &[("k.cl", K1_K2), ("A.cl", "SYCL_EXTERNAL int LibDeviceFunc(int i) { return i * 2; }\n")],
        |_| {},
    );
    for split in ALL_MODES {
        let first: Vec<Vec<u8>> = unit.post_link(split).0.into_iter().map(|r| r.spirv).collect();
        let second: Vec<Vec<u8>> = unit.post_link(split).0.into_iter().map(|r| r.spirv).collect();
        assert_eq!(first, second, "{split:?}");
    }
}

#[test]
fn the_split_mode_chosen_in_build_rs_can_be_overridden_at_link_time() {
    let mut unit = Unit::new();
    let src = "__kernel void a(__global int *o) { o[0] = 1; }\n__kernel void b(__global int *o) { o[0] = 2; }\n";
    unit.build("split", &[("ab.cl", src)], |b| {
        b.split(SplitMode::Off);
    });
    assert_eq!(unit.link_shared().images.len(), 1, "off, as build.rs asked");
    let out = unit.link_shared_with(&[("SYCL_LD_SPLIT", "per_kernel")]);
    assert!(out.status.success());
    assert_eq!(images_of(&unit.dir.path().join("libunit.so")).images.len(), 2);
    let out = unit.link_shared_with(&[("SYCL_LD_SPLIT", "by_mood")]);
    assert!(!out.status.success());
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("SYCL_LD_SPLIT=by_mood: unknown split mode")
    );
}

#[test]
fn targets_can_be_added_at_link_time() {
    let mut unit = Unit::new();
    unit.build(
        "added",
        &[("a.cl", "__kernel void a(__global int *o) { o[get_global_id(0)] = 1; }\n")],
        |_| {},
    );
    assert_eq!(unit.link_shared().images.len(), 1, "spir64 only, as build.rs asked");
    let out = unit.link_shared_with(&[("SYCL_LD_TARGETS", "ptx64")]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let set = images_of(&unit.dir.path().join("libunit.so"));
    let forms: Vec<(ImageFormat, &str)> =
        set.images.iter().map(|i| (i.format, i.target.as_str())).collect();
    assert_eq!(forms, [(ImageFormat::SpirV, "spir64"), (ImageFormat::Ptx, "ptx64")]);
    let out = unit.link_shared_with(&[("SYCL_LD_TARGETS", "ptx64, sm_90")]);
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr)
        .contains("SYCL_LD_TARGETS: unknown target `sm_90` (known: spir64,"));
}

#[test]
fn a_user_device_configuration_replaces_the_default() {
    let mut unit = Unit::new();
    let config = unit.dir.path().join("devices.toml");
    std::fs::write(&config, "[pocl_cpu]\naspects = [\"cpu\", \"fp16\"]\nsub-group-sizes = []\n")
        .unwrap();
    unit.build("cfg", &[("k.cl", K1_K2)], |b| {
        b.targets([Target::PoclCpu]).device_config(&config);
    });
    let set = unit.link_shared();
    let kernels: Vec<String> = set.images.iter().flat_map(|i| i.kernels.clone()).collect();
    assert_eq!(kernels, ["K1", "K2"], "this configuration says PoCL has fp16");
    assert!(set.images.iter().all(|i| i.target == Target::PoclCpu));
}

#[test]
fn every_image_passes_spirv_val() {
    let mut unit = Unit::new();
    unit.build(
        "val",
        &[
            ("k.cl", K1_K2),
            ("A.cl", "SYCL_EXTERNAL int LibDeviceFunc(int i) { return i * 2; }\n"),
            ("B.cl", "SYCL_EXTERNAL int LibDeviceFunc(int i);\nSYCL_EXTERNAL int g(int i) { return LibDeviceFunc(i) + 1; }\n__kernel void k(__global int *o) { o[0] = g(2); }\n"),
        ],
        |_| {},
    );
    for split in ALL_MODES {
        for (i, row) in unit.post_link(split).0.iter().enumerate() {
            let path = unit.dir.path().join(format!("val-{}-{i}.spv", split.name()));
            std::fs::write(&path, &row.spirv).unwrap();
            let out = Command::new("spirv-val")
                .arg(&path)
                .output()
                .expect("spirv-val (Debian spirv-tools) runs");
            assert!(
                out.status.success(),
                "{split:?} image {i} ({:?}): {}",
                row.symbols,
                String::from_utf8_lossy(&out.stderr)
            );
        }
    }
}

#[test]
fn aspects_come_from_the_values_a_kernel_touches() {
    let mut unit = Unit::new();
    let src = "__kernel void a64(__global long *l) { atom_add(l, 1L); }\n\
__kernel void img(read_only image2d_t im, sampler_t s, __global float4 *o) { o[0] = read_imagef(im, s, (int2)(0, 0)); }\n\
__kernel void dbl(__global double *d) { d[0] = d[1] * 2.0; }\n\
__kernel void storage_only(__global float *o, __global half *h) { o[0] = vload_half(0, h); }\n";
    unit.build("aspects", &[("a.cl", src)], |_| {});
    let (rows, _) = unit.post_link(SplitMode::Off);
    let aspects = |k: &str| rows.iter().find(|r| r.symbols == [k]).unwrap().requirements().aspects;
    let n = |name: &str| sycl_format::aspects::aspect_number(name).unwrap();
    assert_eq!(aspects("a64"), [n("atomic64")]);
    assert_eq!(aspects("img"), [n("image")]);
    assert_eq!(aspects("dbl"), [n("fp64")]);
    assert!(aspects("storage_only").is_empty(), "half pointers for vload_half need no fp16");
}

/// Kernels as people write them: buffers, sizes, scalars of every width, vectors, local
/// scratch, structs by value (sizes checked against clang's own `sizeof`), images and samplers.
const PARAMS: &str = "#pragma OPENCL EXTENSION cl_khr_fp16 : enable\n\
typedef struct { float x; int n; char c; } Pt;\n\
struct Big { double d; char c; float4 v; };\n\
struct S3 { float3 p; short s; };\n\
struct __attribute__((packed)) Pk { char c; int i; };\n\
struct Nest { char c; struct Big b; };\n\
kernel void sizes(global int *out) {\n\
  out[0] = sizeof(Pt); out[1] = sizeof(struct Big); out[2] = sizeof(struct S3);\n\
  out[3] = sizeof(struct Pk); out[4] = sizeof(struct Nest);\n\
}\n\
kernel void reduce(global const float *restrict in, global float *out, local float *scratch, uint n) {\n\
  size_t l = get_local_id(0);\n\
  scratch[l] = l < n ? in[get_global_id(0)] : 0.0f;\n\
  barrier(CLK_LOCAL_MEM_FENCE);\n\
  if (l == 0) out[get_group_id(0)] = scratch[0];\n\
}\n\
kernel void scalars(global long *out, constant float *c, char ch, uchar uc, short sh, int i, ulong ul,\n\
                    half h, float f, double d, float4 v, float3 v3, char3 c3, double2 d2, half4 h4) {\n\
  out[0] = ch + uc + sh + i + ul + (long)h + (long)f + (long)d + (long)v.x + (long)v3.y + c3.z + (long)d2.x + (long)h4.w + (long)c[0];\n\
}\n\
kernel void structs(global int *out, Pt p, struct Big b, struct S3 s3, struct Pk pk, struct Nest nest, local Pt *lp) {\n\
  out[0] = (int)p.x + p.n + (int)b.d + s3.s + pk.i + nest.c + lp[0].n;\n\
}\n\
kernel void images(read_only image2d_t img, sampler_t smp, write_only image3d_t dst, global float4 *out) {\n\
  out[0] = read_imagef(img, smp, (int2)(0, 0));\n\
}\n\
kernel void nothing(void) {}\n\
kernel void qualifiers(const global int *a, global const volatile int *b, global int *restrict c,\n\
                       const global int *restrict d, constant float *e, local const int *f, const int n,\n\
                       global volatile float4 *g, const global Pt *h, global const uint *u) {\n\
  c[0] = a[0] + b[0] + d[0] + (int)e[0] + f[0] + n + (int)g[0].x + h->n + u[0];\n\
}\n";

/// A parameter as (kind, size, type, name).
type Param<'a> = (sycl_format::ParamKind, u32, &'a str, &'a str);

#[test]
fn every_kernel_image_records_its_parameters_as_clang_compiles_them() {
    use sycl_format::ParamKind::*;
    let mut unit = Unit::new();
    unit.build("params", &[("params.cl", PARAMS)], |b| {
        b.targets([Target::Spir64, Target::PoclCpu]);
    });
    let set = unit.link_shared();
    let spirv: Vec<&sycl_format::Image> =
        set.images.iter().filter(|i| i.target == Target::Spir64).collect();
    let pocl: Vec<&sycl_format::Image> =
        set.images.iter().filter(|i| i.target == Target::PoclCpu).collect();
    assert!(!pocl.is_empty());
    let expected: [(&str, Vec<Param<'_>>); 7] = [
        ("sizes", vec![(Global, 8, "global int*", "out")]),
        (
            "reduce",
            vec![
                (Global, 8, "global const float*", "in"),
                (Global, 8, "global float*", "out"),
                (Local, 8, "local float*", "scratch"),
                (Scalar, 4, "int", "n"),
            ],
        ),
        (
            "scalars",
            vec![
                (Global, 8, "global long*", "out"),
                (Constant, 8, "constant float*", "c"),
                (Scalar, 1, "char", "ch"),
                (Scalar, 1, "char", "uc"),
                (Scalar, 2, "short", "sh"),
                (Scalar, 4, "int", "i"),
                (Scalar, 8, "long", "ul"),
                (Scalar, 2, "half", "h"),
                (Scalar, 4, "float", "f"),
                (Scalar, 8, "double", "d"),
                (Scalar, 16, "float4", "v"),
                (Scalar, 16, "float3", "v3"),
                (Scalar, 4, "char3", "c3"),
                (Scalar, 16, "double2", "d2"),
                (Scalar, 8, "half4", "h4"),
            ],
        ),
        (
            "structs",
            vec![
                (Global, 8, "global int*", "out"),
                (Struct, 12, "struct Pt", "p"),
                (Struct, 32, "struct Big", "b"),
                (Struct, 32, "struct S3", "s3"),
                (Struct, 5, "struct Pk", "pk"),
                (Struct, 48, "struct Nest", "nest"),
                (Local, 8, "local struct Pt*", "lp"),
            ],
        ),
        (
            "images",
            vec![
                (Image, 8, "read_only image2d_t", "img"),
                (Sampler, 8, "sampler_t", "smp"),
                (Image, 8, "write_only image3d_t", "dst"),
                (Global, 8, "global float4*", "out"),
            ],
        ),
        ("nothing", vec![]),
        (
            "qualifiers",
            vec![
                (Global, 8, "global const int*", "a"),
                (Global, 8, "global const int*", "b"),
                (Global, 8, "global int*", "c"),
                (Global, 8, "global const int*", "d"),
                (Constant, 8, "constant float*", "e"),
                (Local, 8, "local const int*", "f"),
                (Scalar, 4, "int", "n"),
                (Global, 8, "global float4*", "g"),
                (Global, 8, "global const struct Pt*", "h"),
                (Global, 8, "global const int*", "u"),
            ],
        ),
    ];
    for (kernel, params) in &expected {
        let image = spirv.iter().find(|i| i.kernels.contains(&kernel.to_string())).unwrap();
        let found =
            image.kernel_params(kernel).unwrap_or_else(|| panic!("{kernel} has a record")).unwrap();
        let found: Vec<Param<'_>> =
            found.iter().map(|p| (p.kind, p.size, p.ty.as_str(), p.name.as_str())).collect();
        assert_eq!(&found, params, "{kernel}");
        // Ahead-of-time images carry the same record.
        if let Some(aot) = pocl.iter().find(|i| i.kernels.contains(&kernel.to_string())) {
            assert_eq!(
                aot.kernel_params(kernel),
                image.kernel_params(kernel),
                "{kernel} for pocl_cpu"
            );
        }
    }
    let reduce = spirv.iter().find(|i| i.kernels.contains(&"reduce".to_string())).unwrap();
    let params = reduce.kernel_params("reduce").unwrap().unwrap();
    assert_eq!(
        sycl_format::kernel_signature(&params),
        "(global const float*, global float*, local float*, int)"
    );
    // What the runtime orders launches by: `const` and `constant` pointers are only read.
    let image = spirv.iter().find(|i| i.kernels.contains(&"qualifiers".to_string())).unwrap();
    let reads: Vec<bool> = image
        .kernel_params("qualifiers")
        .unwrap()
        .unwrap()
        .iter()
        .map(sycl_format::KernelParam::reads_only)
        .collect();
    assert_eq!(reads, [true, true, false, true, true, false, false, false, true, true]);
    assert!(
        set.images
            .iter()
            .filter(|i| i.kernels.is_empty())
            .all(|i| i.property_set(sets::KERNEL_ARGUMENTS).is_none()),
        "images without kernels have no such set"
    );

    // The sizes clang itself gives the structs (`sizes` stores them as constants).
    let (rows, _) = unit.post_link(SplitMode::PerKernel);
    let sizes = rows.iter().find(|r| r.symbols == ["sizes"]).unwrap();
    let record = sizes
        .properties
        .iter()
        .find(|s| s.name == sets::KERNEL_ARGUMENTS)
        .expect("the table has the set");
    let value = sycl_format::PropertyValue::String("global\t8\tglobal int*\tout".into());
    assert_eq!(
        record.properties,
        [sycl_format::Property::new("sizes", value)],
        "the file table keeps the value"
    );
    let module = sycl_spirv::load(&sizes.spirv).unwrap();
    let stored: Vec<u32> = module
        .types_global_values
        .iter()
        .filter(|i| i.class.opname == "Constant")
        .filter_map(|i| match i.operands.first() {
            Some(sycl_spirv::dr::Operand::LiteralBit32(v)) => Some(*v),
            _ => None,
        })
        .collect();
    for size in [12, 32, 5, 48] {
        assert!(stored.contains(&size), "clang's sizeof gives {size}: {stored:?}");
    }
}

#[test]
fn c_plus_plus_for_opencl_structs_keep_their_qualified_names() {
    let mut unit = Unit::new();
    let src = "namespace geo { struct Pt { float x; int n; }; }\n\
class Cl { public: int v; char c; };\n\
kernel void cpp_k(global int *out, geo::Pt p, Cl c, const global geo::Pt *q) {\n\
  out[0] = p.n + c.v + q->n;\n\
}\n";
    unit.build("cpp", &[("k.clcpp", src)], |_| {});
    let set = unit.link_shared();
    let params = set.images[0].kernel_params("cpp_k").unwrap().unwrap();
    let shown: Vec<String> =
        params.iter().map(|p| format!("{} ({} bytes)", p.declaration(), p.size)).collect();
    assert_eq!(
        shown,
        [
            "global int* out (8 bytes)",
            "struct geo::Pt p (8 bytes)",
            "class Cl c (8 bytes)",
            "global const struct geo::Pt* q (8 bytes)"
        ]
    );
}

/// `sycl-ld device-lib OPTIONS -o lib.sycldev lib.cl` on `source`: the file's images.
fn device_lib_of(source: &str, options: &[&str]) -> ImageSet {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("lib.cl");
    std::fs::write(&path, source).unwrap();
    let out = dir.path().join("lib.sycldev");
    let made = Command::new(env!("CARGO_BIN_EXE_sycl-ld"))
        .arg("device-lib")
        .args(options)
        .arg("-o")
        .arg(&out)
        .arg(&path)
        .output()
        .unwrap();
    assert!(made.status.success(), "{}", String::from_utf8_lossy(&made.stderr));
    ImageSet::decode(&std::fs::read(&out).unwrap()).unwrap()
}

const SCALE: &str =
    "kernel void scale(global float *data, float factor) { data[get_global_id(0)] *= factor; }\n";

#[test]
fn device_library_files_record_kernel_parameters_too() {
    let set = device_lib_of(SCALE, &[]);
    let params = set.images[0].kernel_params("scale").expect("a record").unwrap();
    let declared: Vec<String> = params.iter().map(|p| p.declaration()).collect();
    assert_eq!(declared, ["global float* data", "float factor"]);
}

#[test]
fn device_lib_takes_compiler_options_and_shows_the_compilers_warnings() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::create_dir(dir.path().join("inc")).unwrap();
    std::fs::write(dir.path().join("inc/tile.h"), "#define TILE_OF(x) ((x) * TILE)\n").unwrap();
    let source = dir.path().join("lib.cl");
    std::fs::write(
        &source,
        "#include \"tile.h\"\n\
         #ifndef TILE\n#error TILE must be defined\n#endif\n\
         kernel void tiled(global float *data, global int *other) {\n\
         \x20   global float *alias = other;\n\
         \x20   data[get_global_id(0)] = TILE_OF(*alias) + WIDTH;\n\
         }\n",
    )
    .unwrap();
    let out = dir.path().join("lib.sycldev");
    let device_lib = |options: &[&str]| {
        Command::new(env!("CARGO_BIN_EXE_sycl-ld"))
            .arg("device-lib")
            .args(options)
            .arg("-o")
            .arg(&out)
            .arg(&source)
            .output()
            .unwrap()
    };

    let inc = format!("-I{}", dir.path().join("inc").display());
    let made = device_lib(&["-D", "TILE=4", "-DWIDTH=2", &inc, "-cl-std=CL1.2", "-cl-mad-enable"]);
    let stderr = String::from_utf8_lossy(&made.stderr);
    assert!(made.status.success(), "{stderr}");
    assert!(
        stderr.contains("lib.cl:6:19: warning: incompatible pointer types"),
        "clang's warning, with file and line: {stderr}"
    );
    let set = ImageSet::decode(&std::fs::read(&out).unwrap()).unwrap();
    assert!(set.images.iter().any(|i| i.kernels.iter().any(|k| k == "tiled")));

    let failed = device_lib(&["-DWIDTH=2", "-I", &dir.path().join("inc").display().to_string()]);
    assert!(!failed.status.success());
    assert!(
        String::from_utf8_lossy(&failed.stderr).contains("TILE must be defined"),
        "{}",
        String::from_utf8_lossy(&failed.stderr)
    );
}

#[test]
fn c99_inline_helpers_are_defined_in_the_image() {
    // clang emits an `inline` (neither static nor extern) function available_externally, and
    // llvm-spirv-15 writes it as a body with Import linkage; OpenCL drivers build such
    // programs (Rodinia's cfd, SHOC's scan and fft...), so device-lib must too.
    let set = device_lib_of(
        "inline float sq(float x) { return x * x; }\n\
         __attribute__((noinline)) inline uint mix(uint a, uint b) {\n\
           for (int i = 0; i < 64; i++) { a = (a << 3) ^ (a >> 5) ^ b * 2654435761u; b = a ^ (b >> 7) ^ i; a += b * 7u; }\n\
           return a ^ b; }\n\
         kernel void squares(global float *data) { data[get_global_id(0)] = sq(data[get_global_id(0)]); }\n\
         kernel void mixes(global uint *d) { uint i = get_global_id(0); d[i] = mix(i, d[i]) + mix(d[i], i) + mix(i, i) + mix(d[i], d[i]); }\n",
        &[],
    );
    // `mix` is not inlined: its calls stay, and so must its body.
    for kernel in ["squares", "mixes"] {
        let image = set
            .images
            .iter()
            .find(|i| i.kernels.iter().any(|k| k == kernel))
            .expect("the kernel's image");
        assert_eq!(
            image.imported_symbols().count(),
            0,
            "{kernel}: its inline helper is defined in the image, not imported"
        );
    }
}

#[test]
fn device_lib_takes_g_as_the_drivers_do() {
    // `-g` is an OpenCL build option (clBuildProgram takes it on both devices): debug
    // information in the images, as clang makes it.
    let set = device_lib_of(SCALE, &["-g"]);
    let module = sycl_spirv::load(&set.images[0].data).unwrap();
    let sets: Vec<String> = module
        .ext_inst_imports
        .iter()
        .filter_map(|i| match i.operands.first() {
            Some(sycl_spirv::dr::Operand::LiteralString(s)) => Some(s.clone()),
            _ => None,
        })
        .collect();
    assert!(
        sets.iter().any(|s| s.contains("DebugInfo")),
        "debug information in the image: {sets:?}"
    );
}

/// A library for the `ptx64` tests: exports taking a global pointer, a generic pointer
/// (written through by `fract`) and doubles.
const PTX_LIB: &str = "SYCL_EXTERNAL float lib_scale(float x, __global const float *table) { return x * table[0]; }\n\
SYCL_EXTERNAL float lib_fract(float x, float *whole) { return fract(x, whole); }\n\
SYCL_EXTERNAL double lib_norm(double a, double b) { return sqrt(a * a + b * b); }\n";

/// Kernels that call the library, and what PTX has to get right: local memory and barriers,
/// a constant table, 32- and 64-bit atomics on global, local and generic pointers, double,
/// builtins with pointer out-parameters, vload/vstore, the native_* and rsqrt functions, a
/// kernel calling another (a `.entry` cannot be called), the
/// work-item functions libclc lacks, work-group collectives, sub-groups of 32 (a barrier that
/// only one sub-group reaches), half arithmetic and builtins on half (libclc has none; ours
/// go through float); and a kernel `ptx64` cannot run.
const PTX_APP: &str = "#pragma OPENCL EXTENSION cl_khr_fp16 : enable\n\
SYCL_EXTERNAL float lib_scale(float x, __global const float *table);\n\
SYCL_EXTERNAL float lib_fract(float x, float *whole);\n\
SYCL_EXTERNAL double lib_norm(double a, double b);\n\
__constant float weights[4] = {0.5f, 1.0f, 1.5f, 2.0f};\n\
__kernel void tile_sum(__global const float *in, __global float *out, __local float *tile) {\n\
  size_t l = get_local_id(0);\n\
  tile[l] = in[get_global_id(0)] * weights[l & 3];\n\
  barrier(CLK_LOCAL_MEM_FENCE);\n\
  for (size_t s = get_local_size(0) / 2; s > 0; s >>= 1) { if (l < s) tile[l] += tile[l + s]; barrier(CLK_LOCAL_MEM_FENCE); }\n\
  if (l == 0) out[get_group_id(0)] = lib_scale(tile[0], in);\n\
}\n\
__kernel void tile_sums(__global const float *in, __global float *out, __local float *tile) { tile_sum(in, out, tile); }\n\
__kernel void histogram(__global const int *in, __global int *bins, __global long *total, __local int *local_bins) {\n\
  size_t l = get_local_id(0);\n\
  local_bins[l] = 0;\n\
  barrier(CLK_LOCAL_MEM_FENCE);\n\
  atomic_inc(&local_bins[in[get_global_id(0)] & 15]);\n\
  barrier(CLK_LOCAL_MEM_FENCE);\n\
  atomic_add(&bins[l], local_bins[l]);\n\
  atom_add(total, (long)in[get_global_id(0)]);\n\
  atomic_fetch_add_explicit((volatile __global atomic_int *)&bins[16], 1, memory_order_relaxed, memory_scope_device);\n\
}\n\
__kernel void distances(__global const double *xy, __global double *d) {\n\
  size_t i = get_global_id(0);\n\
  d[i] = lib_norm(xy[2 * i], xy[2 * i + 1]) + sin(xy[i]);\n\
}\n\
__kernel void math(__global float *f, __global float4 *v) {\n\
  size_t i = get_global_id(0);\n\
  float whole, c;\n\
  float fr = lib_fract(f[i], &whole) + fract(f[i], &c);\n\
  float s = sincos(f[i], &c);\n\
  float4 x = vload4(i, f);\n\
  float4 w4;\n\
  float4 fr4 = fract(x, &w4);\n\
  v[i] = fr4 + w4 + native_exp(x) + rsqrt(x) + (float4)(fr + whole + s + c + native_sin(f[i]) + native_recip(f[i]) + native_powr(f[i], 2.0f));\n\
  vstore4(x * 2.0f, i + 1, f);\n\
}\n\
__kernel void launch_info(__global int *o) {\n\
  o[0] = get_work_dim();\n\
  o[1] = (int)get_global_offset(0) + (int)get_global_linear_id();\n\
  o[2] = work_group_reduce_add(o[3]) + work_group_scan_exclusive_max(o[4]);\n\
  o[5] = work_group_broadcast(o[6], 0) + work_group_all(o[7]);\n\
}\n\
__kernel SYCL_REQD_SUB_GROUP_SIZE(32) void warps(__global int *o) {\n\
  size_t i = get_global_id(0);\n\
  int v = sub_group_reduce_add(o[i]) + sub_group_scan_inclusive_max(o[i]) + sub_group_broadcast(o[i], 0);\n\
  if (get_sub_group_id() == 0) sub_group_barrier(CLK_LOCAL_MEM_FENCE);\n\
  o[i] = v + sub_group_any(v) + (int)get_sub_group_local_id() + (int)get_num_sub_groups();\n\
}\n\
__kernel void halves(__global half *h, __global half2 *h2) {\n\
  size_t i = get_global_id(0);\n\
  h[i] = mad(h[i], (half)2.0, sqrt(h[i + 1])) + work_group_reduce_add(h[i]);\n\
  h2[i] = fmax(h2[i] * h2[i + 1], (half2)(0.5h)) + select(h2[i], h2[i + 1], isless(h2[i], h2[i + 1]));\n\
}\n\
__kernel SYCL_REQD_SUB_GROUP_SIZE(16) void sub_sized(__global int *o) { o[0] = 1; }\n";

/// C++ for OpenCL on both sides: the export and the import keep SPIR's mangled names (with
/// their address-space qualifiers), so they still meet in the CUDA link.
const PTX_LIB_CPP: &str = "namespace geo { SYCL_EXTERNAL float dot(__global const float *a, __global const float *b, int n) {\n\
  float s = 0; for (int i = 0; i < n; i++) s += a[i] * b[i]; return s; } }\n";
const PTX_APP_CPP: &str = "namespace geo { SYCL_EXTERNAL float dot(__global const float *a, __global const float *b, int n); }\n\
template <typename T> T sq(T x) { return x * x; }\n\
__kernel void dots(__global float *a) { a[0] = sq(geo::dot(a, a + 4, 4)); }\n";

/// `sycl-ld inspect --json` of a binary: each image's JSON.
fn inspect_json(file: &Path) -> Vec<serde_json::Value> {
    let output = Command::new(env!("CARGO_BIN_EXE_sycl-ld"))
        .arg("inspect")
        .arg(file)
        .arg("--json")
        .output()
        .unwrap();
    assert!(output.status.success(), "{}", String::from_utf8_lossy(&output.stderr));
    let json: serde_json::Value = serde_json::from_slice(&output.stdout).unwrap();
    json["images"].as_array().unwrap().clone()
}

fn strings(value: &serde_json::Value) -> Vec<String> {
    value.as_array().unwrap().iter().map(|v| v.as_str().unwrap().to_string()).collect()
}

/// Every image `ptx64` can run has a PTX form beside its SPIR-V with the same kernels and
/// property sets; the PTX declares kernels `.visible .entry`, exports `.visible .func`,
/// imports (and the virtual functions its kernels call) `.extern .func`, and nothing else
/// extern: no builtin is left for the CUDA link.
fn check_ptx_forms(file: &Path) -> Vec<serde_json::Value> {
    let set = images_of(file);
    let config = sycl_format::DeviceConfig::default_config();
    let ptx64 = config.target(Target::Ptx64).unwrap();
    for spirv in set.images.iter().filter(|i| i.target == Target::Spir64) {
        let ptx = set.images.iter().find(|i| {
            i.target == Target::Ptx64
                && i.kernels == spirv.kernels
                && i.exported_symbols().eq(spirv.exported_symbols())
        });
        if spirv.requirements().unwrap().accepted_by(ptx64) {
            let ptx =
                ptx.unwrap_or_else(|| panic!("no PTX form of the image of {:?}", spirv.kernels));
            assert_eq!(ptx.format, sycl_format::ImageFormat::Ptx);
            assert_eq!(ptx.property_sets, spirv.property_sets, "{:?}", spirv.kernels);
        } else {
            assert!(ptx.is_none(), "{:?}: ptx64 cannot run it", spirv.kernels);
        }
    }
    let images = inspect_json(file);
    let ptx: Vec<serde_json::Value> = images.into_iter().filter(|i| i["format"] == "ptx").collect();
    for image in &ptx {
        let summary = &image["ptx"];
        assert_eq!(summary["version"], "6.0");
        assert_eq!(summary["target"], "sm_70");
        let sorted = |v: &serde_json::Value| {
            let mut v = strings(v);
            v.sort();
            v
        };
        assert_eq!(sorted(&summary["entries"]), sorted(&image["kernels"]));
        assert_eq!(sorted(&summary["functions"]), sorted(&image["exported"]));
        let uses = image["properties"]["SYCL/virtual functions"]["uses-virtual-functions-set"]
            .as_str()
            .unwrap_or("");
        let mut expected_externs = strings(&image["imported"]);
        for set in uses.split(',').filter(|s| !s.is_empty()) {
            let members = set_members(file, set);
            expected_externs.extend(members);
        }
        expected_externs.sort();
        assert_eq!(sorted(&summary["externs"]), expected_externs, "{image}");
        for variable in strings(&summary["variables"]) {
            assert!(
                variable.starts_with(sycl_format::PTX_SPEC_CONSTANT_PREFIX),
                "only specialization constants are visible: {image}"
            );
        }
    }
    ptx
}

/// The functions of virtual-function set `set` among a binary's images.
fn set_members(file: &Path, set: &str) -> Vec<String> {
    let images = images_of(file);
    let set_images = images
        .images
        .iter()
        .filter(|i| i.target == Target::Spir64 && i.virtual_functions_set() == Some((set, false)));
    set_images.flat_map(|i| i.exported_symbols().map(str::to_string).collect::<Vec<_>>()).collect()
}

#[test]
fn ptx64_images_carry_exports_imports_and_kernels_as_ptx_linkage() {
    let mut lib = Unit::new();
    lib.build("ptxlib", &[("lib.cl", PTX_LIB), ("geo.clcpp", PTX_LIB_CPP)], |b| {
        b.targets([Target::Spir64, Target::Ptx64]);
    });
    lib.link_shared();
    let lib_ptx = check_ptx_forms(&lib.dir.path().join("libunit.so"));
    let mut exported: Vec<String> =
        lib_ptx.iter().flat_map(|i| strings(&i["ptx"]["functions"])).collect();
    exported.sort();
    assert_eq!(exported, ["_ZN3geo3dotEPU3AS1KfS1_i", "lib_fract", "lib_norm", "lib_scale"]);

    let mut app = Unit::new();
    app.build("ptxapp", &[("app.cl", PTX_APP), ("dots.clcpp", PTX_APP_CPP)], |b| {
        b.targets([Target::Spir64, Target::Ptx64]);
    });
    let set = app.link_shared();
    let ptx = check_ptx_forms(&app.dir.path().join("libunit.so"));
    let mut kernels: Vec<String> = ptx.iter().flat_map(|i| strings(&i["kernels"])).collect();
    kernels.sort();
    assert_eq!(
        kernels,
        [
            "distances",
            "dots",
            "halves",
            "histogram",
            "launch_info",
            "math",
            "tile_sum",
            "tile_sums",
            "warps"
        ],
        "no sub-groups of 16 for ptx64"
    );
    let code = |kernel: &str| -> String {
        let image = set
            .images
            .iter()
            .find(|i| i.target == Target::Ptx64 && i.kernels.iter().any(|k| k == kernel))
            .unwrap();
        String::from_utf8(image.data.clone()).unwrap()
    };
    let tile_sum = code("tile_sum");
    // The local pointer comes as an offset into the launch's dynamic shared memory.
    for expected in [
        "bar.sync",
        "ld.shared.f32",
        "ld.global.nc.f32",
        ".extern .func  (.param .b32 func_retval0) lib_scale",
        ".extern .shared .align 16 .b8 __sycl_local_mem[];",
        ".param .u64 tile_sum_param_2\n",
    ] {
        assert!(tile_sum.contains(expected), "{expected}:\n{tile_sum}");
    }
    let tile_sums = code("tile_sums");
    assert!(
        tile_sums.contains(".visible .entry tile_sums(\n\t.param .u64 tile_sums_param_0,"),
        "{tile_sums}"
    );
    assert!(!tile_sums.contains("call.uni \n\ttile_sum,"), "{tile_sums}");
    let histogram = code("histogram");
    for expected in ["atom.shared.add.u32", "atom.global.add.u32", "atom.global.add.u64"] {
        assert!(histogram.contains(expected), "{expected}:\n{histogram}");
    }
    let math = code("math");
    for expected in ["rsqrt.approx.f32", "sin.approx.f32", "ex2.approx.f32", "lib_fract"] {
        assert!(math.contains(expected), "{expected}:\n{math}");
    }
    assert!(code("distances").contains(".extern .func  (.param .b64 func_retval0) lib_norm"));
    let launch_info = code("launch_info");
    // The dimension count travels with the launch, in its dynamic shared memory size.
    assert!(launch_info.contains("%dynamic_smem_size"), "{launch_info}");
    assert!(!launch_info.contains("__sycl_work_dim"), "{launch_info}");
    assert!(
        code("dots").contains(".extern .func  (.param .b32 func_retval0) _ZN3geo3dotEPU3AS1KfS1_i")
    );
    // Sub-groups are warps; their barrier a warp's, not the work-group's.
    let warps = code("warps");
    for expected in ["shfl.sync.up.b32", "shfl.sync.idx.b32", "vote.sync.any.pred", "bar.warp.sync"]
    {
        assert!(warps.contains(expected), "{expected}:\n{warps}");
    }
    assert!(!warps.contains("bar.sync"), "{warps}");
    // Half: NVPTX's f16 instructions, and builtins through their float twins.
    let halves = code("halves");
    for expected in ["ld.global.b16", "add.rn.f16x2", "cvt.f32.f16", "cvt.rn.f16.f32", "bar.sync"] {
        assert!(halves.contains(expected), "{expected}:\n{halves}");
    }

    let text = Command::new(env!("CARGO_BIN_EXE_sycl-ld"))
        .arg("inspect")
        .arg(app.dir.path().join("libunit.so"))
        .output()
        .unwrap();
    let text = String::from_utf8(text.stdout).unwrap();
    assert!(text.contains("ptx ptx64 ("), "{text}");
    assert!(
        text.contains("  ptx:      .version 6.0 .target sm_70\n    .visible .entry: distances\n"),
        "{text}"
    );
}

/// A specialization constant in PTX is a weak `.const` array of its value's bytes, which the
/// runtime rewrites before the CUDA link, read where SPIR-V read the constant; a `bool` is a
/// byte.
#[test]
fn ptx64_specialization_constants_are_weak_const_bytes_the_runtime_can_rewrite() {
    let mut unit = Unit::new();
    let source = "#include <sycl/device.h>\n\
SYCL_SPEC_CONSTANT(int, scale, -2)\nSYCL_SPEC_CONSTANT(double, shift, 0.5)\nSYCL_SPEC_CONSTANT(bool, negate, true)\n\
__kernel void spec(__global double *o) {\n\
  double v = o[get_global_id(0)] * SYCL_SPEC(scale) + SYCL_SPEC(shift);\n\
  o[get_global_id(0)] = SYCL_SPEC(negate) ? -v : v;\n\
}\n";
    unit.build("sc", &[("sc.cl", source)], |b| {
        b.targets([Target::Spir64, Target::Ptx64]);
    });
    let set = unit.link_shared();
    let ptx = check_ptx_forms(&unit.dir.path().join("libunit.so"));
    let mut variables = strings(&ptx[0]["ptx"]["variables"]);
    variables.sort();
    assert_eq!(
        variables,
        ["__sycl_spec_constant_negate", "__sycl_spec_constant_scale", "__sycl_spec_constant_shift"]
    );
    let image = set.images.iter().find(|i| i.target == Target::Ptx64).unwrap();
    let code = String::from_utf8(image.data.clone()).unwrap();
    for expected in [
        ".weak .const .align 4 .b8 __sycl_spec_constant_scale[4] = {254, 255, 255, 255};",
        ".weak .const .align 8 .b8 __sycl_spec_constant_shift[8] = {0, 0, 0, 0, 0, 0, 224, 63};",
        ".weak .const .align 1 .b8 __sycl_spec_constant_negate[1] = {1};",
        "ld.const.u32",
        "ld.const.f64",
        "ld.const.u8",
    ] {
        assert!(code.contains(expected), "{expected}:\n{code}");
    }
}

/// An image whose imports a shared library on the link line exports gets a `ptx64+inlined`
/// twin with the library's functions compiled in: no `.extern`, no call, and the provider's
/// PTX image named by hash, so that the runtime uses the twin only when resolution picks it.
/// A provider that imports in turn is not compiled in.
#[test]
fn ptx64_images_get_a_twin_with_the_link_lines_libraries_compiled_in() {
    let mut lib = Unit::new();
    let scale = "SYCL_EXTERNAL float lib_scale(float x) { return x * 3.0f; }\n";
    let relay = "SYCL_EXTERNAL float far_away(float x);\nSYCL_EXTERNAL float lib_relay(float x) { return far_away(x); }\n";
    lib.build("lib", &[("scale.cl", scale), ("relay.cl", relay)], |b| {
        b.targets([Target::Spir64, Target::Ptx64]);
    });
    let lib_set = lib.link_shared();
    let lib_dir = format!("-L{}", lib.dir.path().display());
    let provider = lib_set
        .images
        .iter()
        .find(|i| i.target == Target::Ptx64 && i.exported_symbols().any(|e| e == "lib_scale"))
        .unwrap();

    let mut app = Unit::new();
    let app_source =
        "SYCL_EXTERNAL float lib_scale(float x);\nSYCL_EXTERNAL float lib_relay(float x);\n\
__kernel void scale(__global float *o) { o[0] = lib_scale(o[0]); }\n";
    let relay_source = "SYCL_EXTERNAL float lib_relay(float x);\n__kernel void relay(__global float *o) { o[0] = lib_relay(o[0]); }\n";
    app.build("app", &[("app.cl", app_source), ("relay.cl", relay_source)], |b| {
        b.targets([Target::Spir64, Target::Ptx64]);
    });
    let output = app.link_shared_against(&[lib_dir, "-lunit".into()], &[]);
    assert!(output.status.success(), "{}", String::from_utf8_lossy(&output.stderr));
    let set = images_of(&app.dir.path().join("libunit.so"));
    check_ptx_forms(&app.dir.path().join("libunit.so"));
    let twins: Vec<&sycl_format::Image> =
        set.images.iter().filter(|i| i.target == Target::Ptx64Inlined).collect();
    assert_eq!(twins.len(), 1, "only `scale`'s image: lib_relay imports far_away");
    let twin = twins[0];
    assert_eq!(twin.kernels, ["scale"]);
    assert_eq!(twin.imported_symbols().count(), 0);
    assert_compiled_in(twin, "lib_scale", provider);
    let code = String::from_utf8(twin.data.clone()).unwrap();
    assert!(!code.contains(".extern") && !code.contains("call"), "{code}");
    assert!(code.contains("0f40400000"), "lib_scale's 3.0f, inlined: {code}");
    let plain =
        set.images.iter().find(|i| i.target == Target::Ptx64 && i.kernels == ["scale"]).unwrap();
    assert!(String::from_utf8_lossy(&plain.data)
        .contains(".extern .func  (.param .b32 func_retval0) lib_scale"));
}

/// The native targets: for every PTX image, one per architecture asked for, with the same
/// kernels and property sets; each an object for its architecture that defines the image's
/// kernels and exports: relocatable (`ptxas -c`) with its imports undefined, for the CUDA
/// driver's linker to resolve at run time, or a whole program when it neither imports nor
/// exports. Twins get native forms too (whole programs), naming the provider's native image of
/// their own architecture.
#[test]
fn native_targets_are_relocatable_objects_for_their_architecture_with_imports_undefined() {
    use sycl_format::cubin::Cubin;
    use sycl_format::CudaArch;
    let archs = [CudaArch::Sm80, CudaArch::Sm90];
    let targets =
        [Target::Spir64, Target::Ptx64, Target::NvidiaGpu(archs[0]), Target::NvidiaGpu(archs[1])];
    let mut lib = Unit::new();
    let scale = "SYCL_EXTERNAL float lib_scale(float x) { return x * 3.0f; }\n";
    lib.build("lib", &[("scale.cl", scale)], |b| {
        b.targets(targets);
    });
    let lib_set = lib.link_shared();
    let lib_dir = format!("-L{}", lib.dir.path().display());
    let mut app = Unit::new();
    let app_source = "SYCL_EXTERNAL float lib_scale(float x);\n\
__kernel void scale(__global float *o) { o[0] = lib_scale(o[0]); }\n\
__kernel void alone(__global float *o) { o[0] = o[0] + 1.0f; }\n";
    app.build("app", &[("app.cl", app_source)], |b| {
        b.targets(targets).split(SplitMode::PerKernel);
    });
    let output = app.link_shared_against(&[lib_dir, "-lunit".into()], &[]);
    assert!(output.status.success(), "{}", String::from_utf8_lossy(&output.stderr));
    let set = images_of(&app.dir.path().join("libunit.so"));
    for (set, name) in [(&lib_set, "lib"), (&set, "app")] {
        let ptx: Vec<&sycl_format::Image> =
            set.images.iter().filter(|i| i.target == Target::Ptx64).collect();
        assert!(!ptx.is_empty());
        for arch in archs {
            let native: Vec<&sycl_format::Image> =
                set.images.iter().filter(|i| i.target == Target::NvidiaGpu(arch)).collect();
            assert_eq!(native.len(), ptx.len(), "{name}: one {} image per PTX image", arch.name());
            for (native, ptx) in native.iter().zip(&ptx) {
                assert_eq!(native.format, ImageFormat::Native);
                assert_eq!(native.kernels, ptx.kernels);
                assert_eq!(native.property_sets, ptx.property_sets);
                let cubin = Cubin::parse(&native.data).unwrap();
                // Linked with others at run time: relocatable; else a whole program.
                let alone = native.imported_symbols().next().is_none()
                    && native.exported_symbols().next().is_none();
                assert_eq!(cubin.relocatable, !alone, "{name}: {:?}", native.kernels);
                assert_eq!(cubin.arch, arch.number(), "{name}: for {}", arch.name());
                let [functions, undefined, _] = cubin.summary();
                let mut defined: Vec<&str> = native
                    .kernels
                    .iter()
                    .map(String::as_str)
                    .chain(native.exported_symbols())
                    .collect();
                defined.sort();
                let mut functions = functions.clone();
                functions.sort();
                assert_eq!(functions, defined, "{name}: its kernels and exports");
                let imported: Vec<&str> = native.imported_symbols().collect();
                assert_eq!(undefined, imported, "{name}: imports stay undefined");
            }
        }
    }
    for arch in archs {
        let twin = set
            .images
            .iter()
            .find(|i| i.target == Target::NvidiaGpuInlined(arch))
            .expect("a native twin of `scale`");
        assert_eq!(twin.kernels, ["scale"]);
        assert_eq!(twin.imported_symbols().count(), 0);
        let cubin = Cubin::parse(&twin.data).unwrap();
        assert!(!cubin.relocatable, "a whole program, loaded without a link");
        assert_eq!(cubin.summary()[1], Vec::<&str>::new(), "lib_scale compiled in");
        let provider = lib_set
            .images
            .iter()
            .find(|i| {
                i.target == Target::NvidiaGpu(arch)
                    && i.exported_symbols().any(|e| e == "lib_scale")
            })
            .unwrap();
        assert_compiled_in(twin, "lib_scale", provider);
    }
}

#[test]
fn ptx64_kernels_call_virtual_functions_through_pointers_across_images() {
    let mut unit = Unit::new();
    let source = "#pragma OPENCL EXTENSION __cl_clang_function_pointers : enable\n\
typedef int (*fn_t)(int);\n\
SYCL_INDIRECTLY_CALLABLE(ops) int twice(int x) { return 2 * x; }\n\
SYCL_INDIRECTLY_CALLABLE(ops) int thrice(int x) { return 3 * x; }\n\
__global fn_t table[2] = { twice, thrice };\n\
__kernel SYCL_CALLS_INDIRECTLY(ops) void call_ops(__global int *o) { o[0] = table[o[1] & 1](o[0]); }\n";
    unit.build("vf", &[("vf.cl", source)], |b| {
        b.targets([Target::Spir64, Target::Ptx64]);
    });
    unit.link_shared();
    let ptx = check_ptx_forms(&unit.dir.path().join("libunit.so"));
    let externs: Vec<String> = ptx.iter().flat_map(|i| strings(&i["ptx"]["externs"])).collect();
    assert_eq!(externs, ["twice", "thrice"], "the kernel's table refers to the set's image");
}

#[test]
fn a_builtin_ptx64_lacks_fails_the_link_and_is_named() {
    let mut unit = Unit::new();
    unit.build(
        "p",
        &[("p.cl", "__kernel void say(__global int *o) { printf(\"%d\\n\", o[0]); }\n")],
        |b| {
            b.targets([Target::Spir64, Target::Ptx64]);
        },
    );
    let output = unit.link_shared_with(&[]);
    assert!(!output.status.success());
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        stderr.contains("building image of say for ptx64: the ptx64 target has no `printf`: neither libclc's NVPTX library nor sycl-ld defines it"),
        "{stderr}"
    );
}

/// The sub-group builtins on half link for ptx64: the shuffles of cl_khr_subgroup_shuffle and
/// cl_khr_subgroup_shuffle_relative and `sub_group_broadcast` move the halves' bits through
/// `shfl.sync` (no conversion to float), the collectives go through their float twins.
#[test]
fn ptx64_half_sub_group_builtins_link() {
    let source = "#pragma OPENCL EXTENSION cl_khr_fp16 : enable\n\
__kernel void half_warps(__global half *h, uint c) {\n\
  size_t i = get_global_id(0);\n\
  half x = h[i];\n\
  x = sub_group_shuffle(x, c);\n\
  x = sub_group_shuffle_xor(x, c);\n\
  x = sub_group_shuffle_up(x, c);\n\
  x = sub_group_shuffle_down(x, c);\n\
  x = sub_group_broadcast(x, c);\n\
  x += sub_group_reduce_add(x) + sub_group_reduce_min(x) + sub_group_reduce_max(x);\n\
  x += sub_group_scan_inclusive_add(x) + sub_group_scan_exclusive_max(x);\n\
  h[i] = x;\n\
}\n";
    let mut unit = Unit::new();
    unit.build("hw", &[("hw.cl", source)], |b| {
        b.targets([Target::Spir64, Target::Ptx64]);
    });
    let set = unit.link_shared();
    let image = set.images.iter().find(|i| i.target == Target::Ptx64).unwrap();
    let code = String::from_utf8(image.data.clone()).unwrap();
    for expected in
        ["shfl.sync.idx.b32", "shfl.sync.bfly.b32", "shfl.sync.up.b32", "shfl.sync.down.b32"]
    {
        assert!(code.contains(expected), "{expected}:\n{code}");
    }
}

/// `twin` records `provider` (by its hash) as what it compiled in for `symbol`.
fn assert_compiled_in(twin: &sycl_format::Image, symbol: &str, provider: &sycl_format::Image) {
    let recorded = twin.property_set(sets::INLINED_IMPORTS).unwrap();
    assert_eq!(
        recorded.get(symbol),
        Some(&sycl_format::PropertyValue::String(format!(
            "{:016x}",
            sycl_format::payload_hash(&provider.data)
        )))
    );
}
