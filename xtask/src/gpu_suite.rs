//! `cargo xtask gpu-suite DIR`: the fixtures' end-to-end programs, built to run on an NVIDIA
//! GPU through the runtime's CUDA backend, packed for `scripts/gpu/suite.sh` on a machine
//! without Rust or LLVM.
//!
//! The fixtures are built in release, stripped, three times ([`FLAVOURS`]): with
//! `SYCL_LD_TARGETS=ptx64,nvidia_gpu_sm_90` (every link also makes the PTX and the native
//! form of each image the GPU can run) into `fixtures/target/gpu`, and with each of the two
//! alone; the device library file `devlib-app` loads is made the same way. Each case below is then run here on
//! both CPU devices: a case whose output is the same on Intel's runtime and on PoCL (or one
//! whose kernels need fp16 or device allocations, which the GPU has as Intel's runtime does, on
//! Intel) gets that output as its expected output on the GPU (paths written as `BIN`, for the directory the
//! programs run from, device names as `DEVICE`, image numbers as `image #`, since a PTX image's
//! number is not its SPIR-V form's); a case whose output depends on the device is left out,
//! and said so.
//!
//! `DIR/suite.tar.xz` holds `bin/` (programs, examples, `deps/*.so`, the device library;
//! `bin-ptx/` and `bin-native/` the cases' programs of the other two builds),
//! `cases.txt` (one case a line: `NAME<TAB>[VAR=value...] PROGRAM ARGS...`),
//! `expected/NAME.txt` (and `expected/NAME.bin-native.refusal`, the words the native-only
//! build's run of a case it must refuse prints instead), `bench.cu` (for `scripts/gpu/bench.sh`) and `sycl-ld` (stripped, for
//! `sycl-ld inspect --extract` in `scripts/gpu/sass.sh`), about a tenth of the programs' size:
//! what travels to the GPU machine.

use std::fs;
use std::path::Path;
use std::process::Command;

use anyhow::{bail, Context, Result};
use sycl_format::{CudaArch, Target};

use crate::{cargo, repo_root, run_captured, run_checked};

/// A case: its name, then environment variables (`NAME=value`), the program (from `bin/`)
/// and its arguments, where `@BIN` is the directory the programs run from; `fp16`: the case
/// has kernels that need fp16 (or device allocations), which the GPU has as Intel's runtime
/// does (PoCL lacks it), so Intel's output is the expected one.
struct Case {
    name: &'static str,
    argv: &'static [&'static str],
    fp16: bool,
}

const CASES: &[Case] = &[
    Case { name: "app", argv: &["app"], fp16: false },
    Case {
        name: "app-preload",
        argv: &["LD_PRELOAD=@BIN/deps/libfast_helpers.so", "app"],
        fp16: false,
    },
    Case { name: "static-app", argv: &["static-app"], fp16: false },
    Case { name: "chain-app", argv: &["chain-app"], fp16: false },
    Case { name: "cpp-app", argv: &["cpp-app"], fp16: false },
    Case { name: "args-app", argv: &["args-app"], fp16: false },
    Case { name: "unresolved-app", argv: &["unresolved-app"], fp16: false },
    Case { name: "cycle-app", argv: &["cycle-app"], fp16: false },
    Case { name: "dlopen-app", argv: &["dlopen-app"], fp16: false },
    Case { name: "dlopen-app-cycles", argv: &["dlopen-app", "3"], fp16: false },
    Case { name: "scoped-app", argv: &["scoped-app"], fp16: false },
    Case { name: "fnptr-app", argv: &["fnptr-app"], fp16: false },
    Case { name: "vfunc-app", argv: &["vfunc-app"], fp16: true },
    Case { name: "vfunc-app-bundles", argv: &["vfunc-app", "bundle"], fp16: true },
    Case { name: "threads-app", argv: &["threads-app"], fp16: false },
    Case { name: "prebuilt-app", argv: &["prebuilt-app"], fp16: false },
    Case { name: "features-app", argv: &["features-app"], fp16: false },
    Case { name: "compile_once", argv: &["compile_once"], fp16: false },
    Case { name: "devlib-app", argv: &["devlib-app", "@BIN/devlib.sydl"], fp16: false },
    // Native objects the GPU refuses: the runtime links the PTX beside them instead.
    Case {
        name: "devlib-native-fallback",
        argv: &["devlib-app", "@BIN/devlib-other-arch.sydl"],
        fp16: false,
    },
    Case { name: "bundle-states", argv: &["bundle-app", "states"], fp16: false },
    Case { name: "bundle-unresolved", argv: &["bundle-app", "unresolved"], fp16: false },
    Case { name: "bundle-join", argv: &["bundle-app", "join"], fp16: false },
    Case { name: "bundle-not-found", argv: &["bundle-app", "not_found"], fp16: false },
    Case { name: "bundle-spec", argv: &["bundle-app", "spec"], fp16: false },
    Case { name: "events-order", argv: &["events-app", "order"], fp16: false },
    Case { name: "events-await", argv: &["events-app", "await"], fp16: false },
    Case { name: "events-threads", argv: &["events-app", "threads"], fp16: false },
    Case { name: "events-memory", argv: &["events-app", "memory"], fp16: false },
    Case { name: "events-host", argv: &["events-app", "host"], fp16: false },
    Case { name: "events-profile", argv: &["events-app", "profile"], fp16: false },
    Case { name: "events-types", argv: &["events-app", "types"], fp16: true },
    Case { name: "half-app", argv: &["half-app"], fp16: true },
    Case { name: "graph-replay", argv: &["graph-app", "replay"], fp16: false },
    Case { name: "graph-branches", argv: &["graph-app", "branches"], fp16: false },
    Case { name: "graph-update", argv: &["graph-app", "update"], fp16: false },
    Case { name: "graph-refused", argv: &["graph-app", "refused"], fp16: false },
    Case { name: "graph-dlclose", argv: &["graph-app", "dlclose"], fp16: false },
    // Device allocations, which the GPU has as Intel's runtime does (PoCL refuses them).
    Case { name: "usm-app", argv: &["usm-app"], fp16: true },
    Case {
        name: "bundle-strict",
        argv: &[
            "LD_PRELOAD=@BIN/deps/libfast_helpers.so",
            "SYCL_STRICT_EXPORTS=1",
            "bundle-app",
            "states",
        ],
        fp16: false,
    },
    // Two libraries defining `odr_shared` (issue 42): the first in the loader's order serves
    // every caller, the device's values printed beside the host loader's. The winner changes
    // from case to case, so the warm runs also show that the shared cache follows it.
    Case { name: "odr-app", argv: &["odr-app"], fp16: false },
    Case {
        name: "odr-preload-b",
        argv: &["LD_PRELOAD=@BIN/deps/libodr_b.so", "odr-app"],
        fp16: false,
    },
    Case { name: "odr-only-b", argv: &["odr-app", "only-b"], fp16: false },
    Case { name: "odr-app-ba", argv: &["odr-app-ba"], fp16: false },
    Case { name: "odr-ba-only-b", argv: &["odr-app-ba", "only-b"], fp16: false },
    Case { name: "odr-strict", argv: &["SYCL_STRICT_EXPORTS=1", "odr-app"], fp16: false },
    // Device code in Rust (issue 43): OpenCL C kernels calling librs_lib.so's Rust functions,
    // Rust kernels calling libcl_lib.so's OpenCL C ones, each checked against the host; then
    // librs_alt.so preloaded, whose `rs_poly` serves the host and the device, Rust's images
    // included.
    Case { name: "rs-app", argv: &["rs-app"], fp16: false },
    Case {
        name: "rs-app-preload",
        argv: &["LD_PRELOAD=@BIN/deps/librs_alt.so", "rs-app"],
        fp16: false,
    },
];

/// Cases that the native-only build (`bin-native`) must refuse, and what the refusal says: a
/// definition another binary wins cannot be made an import in native code, whose own calls
/// are bound, and there is no PTX to fall back to (docs/DESIGN.md, one definition rule).
const NATIVE_REFUSES: &[(&str, &str)] = &[
    ("odr-app", NATIVE_CALLS_BOUND),
    ("odr-preload-b", NATIVE_CALLS_BOUND),
    ("odr-only-b", NATIVE_CALLS_BOUND),
    ("odr-app-ba", NATIVE_CALLS_BOUND),
    // librs_lib.so's image defines the `rs_poly` that librs_alt.so wins.
    ("rs-app-preload", NATIVE_CALLS_BOUND),
];

/// What a launch says when only native objects hold a definition another binary wins.
const NATIVE_CALLS_BOUND: &str = "objects' own calls cannot be redirected";

/// The device library file's name in `bin/`.
const DEVLIB: &str = "devlib.sydl";

/// The device library file again, its native objects made to claim another architecture
/// where PTX is beside them ([`other_arch_devlib`]).
const DEVLIB_OTHER_ARCH: &str = "devlib-other-arch.sydl";

/// Programs carried for runs outside the cases: `two_devices cuda pocl` uses the GPU and
/// another device from one process; `gpu-bench` is `scripts/gpu/bench.sh`'s, with the CUDA C
/// of its kernels (`bench.cu`), which nvcc compiles on the GPU machine, and the two start-up
/// programs its `--overheads` compares; `interop-app` is `scripts/gpu/interop.sh`'s (cudarc,
/// cuBLAS and the toolkit on one stream), and so is `cudarc`, the guide's example of the same;
/// `nccl-app` (NCCL all-reducing the runtime's buffers across every GPU) is
/// `scripts/gpu/multi-gpu.sh`'s, with `gpu-bench --multi`, and `suite.sh` runs it once too.
const CARRIED: &[&str] = &[
    "two_devices",
    "gpu-bench",
    "startup-1",
    "startup-1000",
    "interop-app",
    "cudarc",
    "nccl-app",
    "memory-app",
];

/// The CUDA C side of `gpu-bench`, from the fixtures.
const BENCH_CUDA: &str = "gpu-bench/device/bench.cu";

impl Case {
    /// The `NAME=value` words before the program, and the rest.
    fn split(&self) -> (&[&'static str], &[&'static str]) {
        let env = self.argv.iter().take_while(|a| a.contains('=')).count();
        self.argv.split_at(env)
    }
}

/// The builds the suite carries: the directory each goes to in the archive, and the targets
/// its links add. `bin` has both forms (the runtime prefers the native one); the other two
/// prove each form alone: native objects with no PTX to fall back to, and PTX only.
const FLAVOURS: &[(&str, &[Target])] = &[
    ("bin", &[Target::Ptx64, Target::NvidiaGpu(GPU_ARCH)]),
    ("bin-ptx", &[Target::Ptx64]),
    ("bin-native", &[Target::NvidiaGpu(GPU_ARCH)]),
];

/// The architecture of the GPU machine's GPU (an H100).
const GPU_ARCH: CudaArch = CudaArch::Sm90;

pub(crate) fn gpu_suite(dir: &Path) -> Result<()> {
    let root = repo_root();
    let fixtures = root.join("fixtures");
    run_checked(cargo().args(["build", "-q", "-p", "sycl-ld"]).current_dir(&root))?;
    let stage = dir.join("suite");
    let _ = fs::remove_dir_all(&stage);
    let mut built_in = Vec::new();
    for (i, (name, targets)) in FLAVOURS.iter().enumerate() {
        let target =
            fixtures.join(if i == 0 { "target/gpu".into() } else { format!("target/gpu-{name}") });
        let targets: Vec<&str> = targets.iter().map(|t| t.name()).collect();
        let targets = targets.join(",");
        let mut build = cargo();
        build
            // `--lib`: the cdylibs no program depends on too (`LD_PRELOAD`ed, `dlopen`ed).
            .args(["build", "-q", "--release", "--lib", "--bins", "--examples"])
            .current_dir(&fixtures)
            .env("CARGO_TARGET_DIR", &target)
            .env("CARGO_PROFILE_RELEASE_STRIP", "symbols")
            .env("SYCL_LD_TARGETS", &targets);
        let started = std::time::Instant::now();
        run_checked(&mut build)?;
        built_in.push(started.elapsed().as_secs_f64());
        let bin = stage.join(name);
        fs::create_dir_all(bin.join("deps"))?;
        let release = target.join("release");
        let mut programs: Vec<&str> = CASES.iter().map(|c| c.split().1[0]).collect();
        if i == 0 {
            programs.extend(CARRIED);
        }
        if *name == "bin-ptx" {
            // `gpu-bench --overheads` compares cold first launches with this build's.
            programs.push("gpu-bench");
        }
        programs.sort();
        programs.dedup();
        for program in programs {
            let built = [release.join(program), release.join("examples").join(program)];
            let path = built
                .iter()
                .find(|p| p.is_file())
                .with_context(|| format!("no program {program} in {}", release.display()))?;
            fs::copy(path, bin.join(program))?;
        }
        for entry in fs::read_dir(release.join("deps"))? {
            let path = entry?.path();
            if path.extension().is_some_and(|e| e == "so") {
                fs::copy(&path, bin.join("deps").join(path.file_name().unwrap_or_default()))?;
            }
        }
        let mut devlib = Command::new(root.join("target/debug/sycl-ld"));
        devlib
            .arg("device-lib")
            .arg("-o")
            .arg(bin.join(DEVLIB))
            .arg(fixtures.join("devlib-app/device/devlib.cl"))
            .env("SYCL_LD_TARGETS", &targets);
        run_captured(&mut devlib)?;
        other_arch_devlib(&bin.join(DEVLIB), &bin.join(DEVLIB_OTHER_ARCH))?;
        // A case's file that is not there would only be ignored (`LD_PRELOAD`) or fail alike
        // on every device: the expected output would hide it.
        for word in CASES.iter().flat_map(|c| c.argv.iter()) {
            if let Some((_, file)) = word.split_once("@BIN/") {
                if !bin.join(file).exists() {
                    bail!("{name}/{file}, which a case names, was not built");
                }
            }
        }
    }
    report_costs(&stage, &built_in)?;
    let bin = stage.join("bin");
    fs::copy(fixtures.join(BENCH_CUDA), stage.join("bench.cu"))?;
    // `sycl-ld inspect --extract` there writes the native objects out for cuobjdump.
    run_captured(
        Command::new("strip")
            .arg("-o")
            .arg(stage.join("sycl-ld"))
            .arg(root.join("target/debug/sycl-ld")),
    )?;

    // Expected outputs: the same on both CPU devices (Intel's where the case needs fp16).
    let bin = fs::canonicalize(&bin)?;
    fs::create_dir_all(stage.join("expected"))?;
    let mut cases = String::new();
    let mut left_out = Vec::new();
    for case in CASES {
        let intel = run_case(&bin, case, "intel")?;
        let pocl = run_case(&bin, case, "pocl")?;
        if intel != pocl && !case.fp16 {
            left_out.push(case.name);
            continue;
        }
        let expected = if case.fp16 { &intel } else { &pocl };
        fs::write(stage.join("expected").join(format!("{}.txt", case.name)), expected)?;
        cases.push_str(&format!("{}\t{}\n", case.name, case.argv.join(" ")));
    }
    for (name, refusal) in NATIVE_REFUSES {
        fs::write(stage.join("expected").join(format!("{name}.bin-native.refusal")), refusal)?;
    }
    fs::write(stage.join("cases.txt"), cases)?;
    if !left_out.is_empty() {
        println!(
            "xtask: left out, their output depends on the CPU device: {}",
            left_out.join(", ")
        );
    }

    let archive = dir.join("suite.tar.xz");
    let mut tar = Command::new("tar");
    tar.arg("-cJf").arg(&archive).arg("-C").arg(&stage).args(FLAVOURS.iter().map(|f| f.0)).args([
        "cases.txt",
        "expected",
        "bench.cu",
        "sycl-ld",
    ]);
    run_captured(&mut tar)?;
    fs::remove_dir_all(&stage)?;
    let size = fs::metadata(&archive)?.len();
    if size > 60 << 20 {
        bail!("{} is {} MiB: more than travels to the GPU machine", archive.display(), size >> 20);
    }
    println!(
        "xtask: {} cases in {} ({} KiB)",
        CASES.len() - left_out.len(),
        archive.display(),
        size >> 10
    );
    Ok(())
}

/// What the native forms cost: each build's time (incremental: what changed since the last
/// run of this command) and programs' size, and the bytes of each target's images in `bin/`.
fn report_costs(stage: &Path, built_in: &[f64]) -> Result<()> {
    let mut per_target: std::collections::BTreeMap<String, (usize, u64)> = Default::default();
    for ((name, _), seconds) in FLAVOURS.iter().zip(built_in) {
        let mut bytes = 0;
        for dir in [stage.join(name), stage.join(name).join("deps")] {
            for entry in fs::read_dir(&dir)? {
                let path = entry?.path();
                if !path.is_file() {
                    continue;
                }
                bytes += fs::metadata(&path)?.len();
                if *name == "bin" {
                    for image in crate::gpu::image_set(&path).map(|s| s.images).unwrap_or_default()
                    {
                        let entry = per_target.entry(image.target).or_default();
                        entry.0 += 1;
                        entry.1 += image.data.len() as u64;
                    }
                }
            }
        }
        println!(
            "xtask: {name}: built in {seconds:.0} s, programs and libraries {} KiB",
            bytes >> 10
        );
    }
    for (target, (count, bytes)) in per_target {
        println!("xtask: bin/ {target}: {count} images, {} KiB", bytes >> 10);
    }
    Ok(())
}

/// `from`'s images written to `to`, each native NVIDIA object's header made to say the SASS is
/// for sm_120 (which no GPU of another major version runs) when the set also carries PTX: the
/// runtime refuses such an object before the driver sees it and links the PTX instead. A set
/// without PTX (the native-only build's) is copied as it is, since it has nothing to fall
/// back to.
fn other_arch_devlib(from: &Path, to: &Path) -> Result<()> {
    let mut set = sycl_format::ImageSet::decode(&fs::read(from)?)
        .map_err(|e| anyhow::anyhow!("{}: {e}", from.display()))?;
    if set.images.iter().any(|i| i.target == Target::Ptx64.name()) {
        for image in &mut set.images {
            let native = Target::from_name(&image.target).and_then(Target::cuda_arch).is_some();
            if native && image.data.len() >= 52 {
                // ELF64 `e_flags` (offset 48): ABI version 7 (byte 8) keeps the architecture
                // in the low byte, later versions in the next one.
                let at = if image.data[8] >= 8 { 49 } else { 48 };
                image.data[at] = 120;
            }
        }
    }
    fs::write(to, set.encode())?;
    Ok(())
}

/// `text` with every `image N` written `image #`.
fn image_numbers_hidden(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(at) = rest.find("image ") {
        out.push_str(&rest[..at + "image ".len()]);
        rest = &rest[at + "image ".len()..];
        let digits = rest.len() - rest.trim_start_matches(|c: char| c.is_ascii_digit()).len();
        if digits > 0 {
            out.push('#');
            rest = &rest[digits..];
        }
    }
    out.push_str(rest);
    out
}

/// A case's output on `device`: stdout and the exit status when it is not 0, with `bin`
/// written as `BIN` and the device's name as `DEVICE`.
fn run_case(bin: &Path, case: &Case, device: &str) -> Result<String> {
    let at_bin = |word: &str| word.replace("@BIN", &bin.display().to_string());
    let (env, argv) = case.split();
    let mut command = Command::new(bin.join(argv[0]));
    command.args(argv[1..].iter().map(|a| at_bin(a)));
    // The case's own variables last: a case may set one removed here (strict mode).
    command
        .env("SYCL_DEVICE", device)
        .env("SYCL_CACHE_DISABLE", "1")
        .env("LD_LIBRARY_PATH", bin.join("deps"))
        .env("SYCL_TRACE", "1")
        .env_remove("SYCL_STRICT_EXPORTS");
    for assignment in env {
        let (name, value) = assignment.split_once('=').expect("an assignment");
        command.env(name, at_bin(value));
    }
    let out = command.output().with_context(|| format!("running case {}", case.name))?;
    let mut text = String::from_utf8_lossy(&out.stdout).into_owned();
    if !out.status.success() {
        text.push_str(&format!(
            "exit: {}\n",
            out.status.code().map_or("signal".to_string(), |c| c.to_string())
        ));
    }
    text = text.replace(&bin.display().to_string(), "BIN");
    // A PTX image's number is not its SPIR-V form's.
    text = image_numbers_hidden(&text);
    // The device's name, as the trace's `device PLATFORM / NAME` line gives it.
    let trace = String::from_utf8_lossy(&out.stderr);
    for name in trace
        .lines()
        .filter_map(|l| l.strip_prefix("sycl: device ")?.split_once(" / ").map(|(_, n)| n))
    {
        text = text.replace(name, "DEVICE");
    }
    Ok(text)
}

#[cfg(test)]
mod tests {
    #[test]
    fn image_numbers_are_hidden() {
        assert_eq!(
            super::image_numbers_hidden("bundle of app image 12; image x; image 3"),
            "bundle of app image #; image x; image #"
        );
    }
}
