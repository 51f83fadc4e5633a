//! Device link plus post-link against `spirv-link`, and the `per_kernel` split of many kernels.
//!
//! Generates projects of 20 sources × F functions (F = 100 and 400, i.e. 2,000 and 8,000
//! functions), where source s defines `f_s_i` for every i, and for s > 0 `f_s_i` calls
//! `f_{s-1}_i`. Each project is compiled by one `sycl_build::Build`, and the 20 `.spv` files
//! it leaves in its out dir are the inputs of both sides:
//! (a) ours, in process, from bytes to images: `sycl_spirv::load` of every module, `link`,
//! and `post_link` with `per_source` split; and
//! (b) `spirv-link --create-library` on the same files (the spirv-tools binary on PATH).
//! Then one source with 1,000 kernels sharing a helper is loaded, linked and post-linked with
//! `per_kernel` split. Prints the medians, the ratio ours / spirv-link per size, each side's
//! growth from 2,000 to 8,000 functions (linear would be ×4), and where our time goes by phase;
//! then, for `cargo xtask bench`, the ratios as `RATIO` lines and the split's seconds as one
//! against its bound (1 s), each with every digit. Nothing is asserted about the timings; only
//! that the `per_kernel` split made one image per kernel.
//!
//! Run with `cargo bench -p sycl-ld --bench postlink`. Without `--bench` (as in
//! `cargo test --benches`) everything runs once on small sizes (20 × 5 and 20 × 20 functions,
//! 100 kernels), as a smoke test, which prints the same `RATIO` lines (measuring nothing).

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use sycl_format::{DeviceConfig, SplitMode};
use sycl_spirv::{LinkInput, PostLinkOptions, Source};

const SOURCES: usize = 20;
const HEADER: &str = "#include <sycl/device.h>\n";

/// How many times each side runs.
struct Runs {
    ours: usize,
    spirv_link_small: usize,
    spirv_link_large: usize,
    per_kernel: usize,
}

fn main() {
    let bench = std::env::args().any(|a| a == "--bench");
    let (functions, kernels, runs) = if bench {
        (
            [100, 400],
            1000,
            Runs { ours: 5, spirv_link_small: 3, spirv_link_large: 1, per_kernel: 3 },
        )
    } else {
        ([5, 20], 100, Runs { ours: 1, spirv_link_small: 1, spirv_link_large: 1, per_kernel: 1 })
    };

    let dir = tempfile::Builder::new().prefix("sycl-ld-bench-postlink").tempdir().unwrap();
    let config = DeviceConfig::default_config();

    let mut rows = Vec::new();
    for (size, &f) in functions.iter().enumerate() {
        let inputs = chain_project(dir.path(), f);
        let ours =
            median_of(runs.ours, || link_and_post_link(&inputs, SplitMode::PerSource, &config));
        let spirv_link_runs = if size == 0 { runs.spirv_link_small } else { runs.spirv_link_large };
        let theirs = spirv_link(dir.path(), &inputs, spirv_link_runs);
        rows.push(Row { functions: SOURCES * f, ours, spirv_link: theirs, spirv_link_runs });
    }

    let kernel_inputs = kernels_project(dir.path(), kernels);
    let split = median_of(runs.per_kernel, || {
        link_and_post_link(&kernel_inputs, SplitMode::PerKernel, &config)
    });
    assert_eq!(split.images, kernels, "per_kernel split of {kernels} kernels");

    let profile = if cfg!(debug_assertions) { "debug" } else { "optimized" };
    println!("device link + post-link vs spirv-link ({SOURCES} sources, {profile} build)");
    println!("  functions   ours (link+post-link)   spirv-link       ours/spirv-link");
    let runs_of = |n: usize| format!("{n} run{}", if n == 1 { "" } else { "s" });
    for r in &rows {
        println!(
            "  {:>9}   {:>10.3} s ({})   {:>8.3} s ({})   {:.4}",
            r.functions,
            r.ours.total,
            runs_of(runs.ours),
            r.spirv_link,
            runs_of(r.spirv_link_runs),
            r.ours.total / r.spirv_link
        );
    }
    let (small, large) = (&rows[0], &rows[1]);
    println!(
        "  growth {} -> {} functions (x{}): ours x{:.1}, spirv-link x{:.1}",
        small.functions,
        large.functions,
        large.functions / small.functions,
        large.ours.total / small.ours.total,
        large.spirv_link / small.spirv_link
    );
    for r in &rows {
        println!(
            "  ours at {:>5} functions: {} ({} images)",
            r.functions,
            r.ours.phases(),
            r.ours.images
        );
    }
    println!(
        "per_kernel split of {kernels} kernels: {:.3} s (limit 1 s; {})",
        split.total,
        split.phases()
    );
    for r in &rows {
        println!(
            "RATIO {} | device link + post-link / spirv-link, {} functions | {:.3} s vs {:.3} s",
            r.ours.total / r.spirv_link,
            r.functions,
            r.ours.total,
            r.spirv_link
        );
    }
    println!(
        "RATIO {} <= 1 | load, link and per_kernel split of one source's kernels, seconds | {kernels} kernels; {}",
        split.total,
        split.phases()
    );
}

struct Row {
    functions: usize,
    ours: Timing,
    spirv_link: f64,
    spirv_link_runs: usize,
}

/// One run of our pipeline, in seconds, with its phases.
#[derive(Clone, Copy)]
struct Timing {
    total: f64,
    load: f64,
    link: f64,
    post_link: f64,
    images: usize,
}

impl Timing {
    fn phases(&self) -> String {
        format!(
            "load {:.3} s, link {:.3} s, post-link {:.3} s",
            self.load, self.link, self.post_link
        )
    }
}

/// The run with the median total of `runs` runs.
fn median_of(runs: usize, mut run: impl FnMut() -> Timing) -> Timing {
    let mut times: Vec<Timing> = (0..runs).map(|_| run()).collect();
    times.sort_by(|a, b| a.total.total_cmp(&b.total));
    times[times.len() / 2]
}

fn median(mut secs: Vec<f64>) -> f64 {
    secs.sort_by(f64::total_cmp);
    let n = secs.len();
    if n % 2 == 1 {
        secs[n / 2]
    } else {
        (secs[n / 2 - 1] + secs[n / 2]) / 2.0
    }
}

/// A compiled source: its path (the source name the post-link groups by) and SPIR-V.
struct Input {
    source: String,
    spv: PathBuf,
    bytes: Vec<u8>,
}

/// Ours, from bytes to images: load every module, link, post-link.
fn link_and_post_link(inputs: &[Input], split: SplitMode, config: &DeviceConfig) -> Timing {
    let start = Instant::now();
    let mut modules = Vec::with_capacity(inputs.len());
    let mut sources = Vec::with_capacity(inputs.len());
    for input in inputs {
        modules.push(
            sycl_spirv::load(&input.bytes)
                .unwrap_or_else(|e| panic!("{}: {e}", input.spv.display())),
        );
        sources.push(Source { name: input.source.clone(), fixed_targets: vec![] });
    }
    let loaded = Instant::now();
    // As sycl-ld does: named specialization constants get their ids, then the link.
    let spec_constants = sycl_spirv::spec::assign_ids(&mut modules);
    let modules = modules
        .into_iter()
        .zip(inputs)
        .map(|(module, i)| LinkInput { name: i.source.clone(), module })
        .collect();
    let linked = sycl_spirv::link(modules).unwrap();
    let link_done = Instant::now();
    let options =
        PostLinkOptions { split, sources: &sources, config, spec_constants: &spec_constants };
    let post = sycl_spirv::post_link(linked, &options).unwrap();
    let end = Instant::now();
    assert!(!post.images.is_empty(), "the post-link made no images");
    let secs = |d: Duration| d.as_secs_f64();
    Timing {
        total: secs(end - start),
        load: secs(loaded - start),
        link: secs(link_done - loaded),
        post_link: secs(end - link_done),
        images: post.images.len(),
    }
}

/// Median seconds of `runs` runs of `spirv-link --create-library` on the inputs' files.
fn spirv_link(dir: &Path, inputs: &[Input], runs: usize) -> f64 {
    let files = spirv_link_inputs(dir, inputs);
    let out = dir.join("spirv-link-out.spv");
    let times = (0..runs)
        .map(|_| {
            let mut cmd = Command::new("spirv-link");
            cmd.arg("--create-library").args(&files).arg("-o").arg(&out);
            let start = Instant::now();
            let output = cmd.output().expect("running spirv-link (spirv-tools) from PATH");
            let elapsed = start.elapsed().as_secs_f64();
            assert!(
                output.status.success(),
                "spirv-link failed ({}):\n{}",
                output.status,
                String::from_utf8_lossy(&output.stderr)
            );
            elapsed
        })
        .collect();
    median(times)
}

/// The inputs as spirv-link will take them: copies, changed in two ways that do not touch
/// what is linked, so that spirv-link accepts the inputs ours takes as they are.
/// - clang emits `annotate` only on definitions, so an exported `SYCL_EXTERNAL` function
///   carries `UserSemantic "sycl-external"` while its imports in other sources do not, and
///   spirv-link refuses the link ("Decorations mismatch on symbol"). The copies lose their
///   `UserSemantic` decorations (one per exported function).
/// - spirv-link refuses to link modules whose SPIR-V versions differ (llvm-spirv writes the
///   lowest version a module needs, so they can), while our link takes the highest. Where they
///   differ, the copies' version word (word 1 of the header) is raised to the highest.
fn spirv_link_inputs(dir: &Path, inputs: &[Input]) -> Vec<PathBuf> {
    const OP_DECORATE: u32 = 71;
    const OP_DECORATE_STRING: u32 = 5632;
    const USER_SEMANTIC: u32 = 5635;
    let words = |bytes: &[u8]| -> Vec<u32> {
        bytes.chunks_exact(4).map(|w| u32::from_le_bytes(w.try_into().unwrap())).collect()
    };
    let max_version = inputs.iter().map(|i| words(&i.bytes)[1]).max().unwrap();
    let copies = dir.join(format!("spirv-link-inputs-{}", inputs.len()));
    std::fs::create_dir_all(&copies).unwrap();
    inputs
        .iter()
        .enumerate()
        .map(|(n, input)| {
            let source = words(&input.bytes);
            assert_eq!(source[0], 0x0723_0203, "{}: not little-endian SPIR-V", input.spv.display());
            let mut out = source[..5].to_vec();
            out[1] = max_version;
            let mut at = 5;
            while at < source.len() {
                let count = (source[at] >> 16) as usize;
                assert!(
                    count > 0 && at + count <= source.len(),
                    "{}: malformed SPIR-V",
                    input.spv.display()
                );
                let inst = &source[at..at + count];
                let opcode = inst[0] & 0xffff;
                let user_semantic = (opcode == OP_DECORATE || opcode == OP_DECORATE_STRING)
                    && inst.get(2) == Some(&USER_SEMANTIC);
                if !user_semantic {
                    out.extend_from_slice(inst);
                }
                at += count;
            }
            let path = copies.join(format!("{n}.spv"));
            std::fs::write(&path, out.iter().flat_map(|w| w.to_le_bytes()).collect::<Vec<u8>>())
                .unwrap();
            path
        })
        .collect()
}

/// 20 sources × `f` functions: `f_s_i` returns `f_{s-1}_i(x) + i`, and `f_0_i` returns
/// `x * i + 1`. Compiled as one build; returns the sources' `.spv` files in source order.
fn chain_project(dir: &Path, f: usize) -> Vec<Input> {
    let sources = (0..SOURCES)
        .map(|s| {
            let mut text = String::from(HEADER);
            for i in 0..f {
                if s == 0 {
                    text += &format!("SYCL_EXTERNAL int f_0_{i}(int x) {{ return x * {i} + 1; }}\n");
                } else {
                    let p = s - 1;
                    text += &format!(
                        "SYCL_EXTERNAL int f_{p}_{i}(int x);\nSYCL_EXTERNAL int f_{s}_{i}(int x) {{ return f_{p}_{i}(x) + {i}; }}\n"
                    );
                }
            }
            (format!("s{s}.cl"), text)
        })
        .collect::<Vec<_>>();
    compile(dir, &format!("chain{}", SOURCES * f), &sources)
}

/// One source with `n` kernels, each storing a shared static helper's result.
fn kernels_project(dir: &Path, n: usize) -> Vec<Input> {
    let mut text = String::from(HEADER);
    // noinline keeps the helper a function of its own, which every kernel's image must copy.
    text += "__attribute__((noinline)) static int helper(int i) { return i * 3 + 1; }\n";
    for i in 0..n {
        text += &format!(
            "__kernel void k{i}(__global int *o) {{ o[get_global_id(0)] = helper({i}); }}\n"
        );
    }
    compile(dir, &format!("kernels{n}"), &[("kernels.cl".into(), text)])
}

/// Compiles the sources (file name, text) as one build named `name` and reads back the `.spv`
/// it leaves for each, `<out_dir>/sycl-device/<name>/<index>-<stem>.spv`.
fn compile(dir: &Path, name: &str, sources: &[(String, String)]) -> Vec<Input> {
    let src_dir = dir.join(format!("src-{name}"));
    let out_dir = dir.join(format!("out-{name}"));
    std::fs::create_dir_all(&src_dir).unwrap();
    let mut build = sycl_build::Build::new();
    build.cargo_metadata(false).out_dir(&out_dir);
    let mut paths = Vec::new();
    for (file, text) in sources {
        let path = src_dir.join(file);
        std::fs::write(&path, text).unwrap();
        build.file(&path);
        paths.push(path);
    }
    build.try_compile(name).unwrap_or_else(|e| panic!("compiling {name}: {e}"));
    paths
        .into_iter()
        .enumerate()
        .map(|(index, path)| {
            let stem = path.file_stem().unwrap().to_string_lossy().into_owned();
            let spv = out_dir.join("sycl-device").join(name).join(format!("{index}-{stem}.spv"));
            let bytes = std::fs::read(&spv).unwrap_or_else(|e| panic!("{}: {e}", spv.display()));
            Input { source: path.to_string_lossy().into_owned(), spv, bytes }
        })
        .collect()
}
