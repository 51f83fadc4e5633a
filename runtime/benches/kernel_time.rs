//! Kernel execution time with SPIR-V made two ways, on both CPU devices (Intel's OpenCL
//! runtime and PoCL):
//! - new: what `sycl-build` makes now: the front end alone (`-O2 -Xclang
//!   -disable-llvm-passes`), then `opt-15` with LLVM's `-O2` pipeline less the passes whose
//!   output llvm-spirv-15 cannot translate (vectorisers, div-rem pairs);
//! - old: clang `-O2` with every LLVM pass, straight to the translator, as `sycl-build` made it
//!   before. It runs through `sycl_build::Build` too, with a clang wrapper that drops
//!   `-Xclang -disable-llvm-passes` from its command line, so every other flag is the same,
//!   and an `opt` that copies its input.
//!
//! Each way's objects become a device library file (`sycl-ld device-lib`), loaded into this
//! process; each kernel runs from its library's bundle through the runtime, with buffers of
//! its own per side, in alternating order (old, new, then new, old), warmed up first. A
//! sample is one launch and `Queue::wait` (the runtime's launch costs microseconds; the
//! kernels run milliseconds). Builds are not timed. Both sides' outputs must agree.
//!
//! The kernels are ones both ways can build (clang -O2 writes what llvm-spirv-15 cannot
//! translate for the register-tiled SGEMM and for division beside remainder): streaming
//! (SAXPY), a local-memory tiled matmul with four results per work-item, a 5-point stencil,
//! an n-body step (tests/kernels/nbody.cl), a work-group reduction and a histogram with local
//! atomics (tests/kernels/local_memory.cl). Bound: new / old <= 1.02 (geometric mean over the
//! kernels, per device and overall, of the median ratios).
//!
//! Run with `cargo bench -p sycl-runtime --bench kernel_time`. Without `--bench` (as in
//! `cargo test --benches`) each kernel runs once per side, as a smoke test.

mod common;

use std::path::Path;
use std::process::Command;
use std::rc::Rc;
use std::time::Instant;

use sycl_runtime::{
    build, load_device_library, Buffer, DeviceLibrary, Error, Executable, KernelBundle, Local, Pod,
    Queue,
};

use common::{median, ratio, repo_root, run_ok};

const DEVICES: [&str; 2] = ["intel", "pocl"];

/// The device sources, from the repository root.
const SOURCES: [&str; 3] = [
    "runtime/benches/kernels/kernel_time.cl",
    "tests/kernels/nbody.cl",
    "tests/kernels/local_memory.cl",
];

/// A clang that runs clang-15 (or `$SYCL_CLANG`) with sycl-build's command line, less
/// `-Xclang -disable-llvm-passes`: LLVM's optimisations on, as `-O2` alone.
const CLANG_WITH_PASSES: &str = r#"#!/bin/sh
pending=
for a do
    shift
    if [ -n "$pending" ]; then
        pending=
        [ "$a" = -disable-llvm-passes ] && continue
        set -- "$@" -Xclang
    fi
    if [ "$a" = -Xclang ]; then pending=1; continue; fi
    set -- "$@" "$a"
done
[ -n "$pending" ] && set -- "$@" -Xclang
exec "${SYCL_CLANG:-clang-15}" "$@"
"#;

/// An opt that leaves the bitcode as it is: `opt -passes=… IN -o OUT` copies IN to OUT.
const OPT_NOTHING: &str = r#"#!/bin/sh
for a do
    case "$a" in -passes=*) ;; -o) out=1 ;; *) if [ -n "$out" ]; then output="$a"; out=; else input="$a"; fi ;; esac
done
exec cp "$input" "$output"
"#;

fn main() {
    let (warmup, rounds) = if common::bench_mode() { (3, 40) } else { (1, 1) };
    let dir = tempfile::Builder::new().prefix("sycl-bench-kernel-time").tempdir().unwrap();
    let sycl_ld = common::sycl_ld();
    let wrappers = [("clang-with-passes", CLANG_WITH_PASSES), ("opt-nothing", OPT_NOTHING)].map(
        |(name, text)| {
            let path = dir.path().join(name);
            std::fs::write(&path, text).unwrap();
            run_ok(Command::new("chmod").arg("+x").arg(&path));
            path
        },
    );
    let old = device_library(&sycl_ld, dir.path(), "old", Some(&wrappers));
    let new = device_library(&sycl_ld, dir.path(), "new", None);
    assert_ne!(
        std::fs::read(old.path()).unwrap(),
        std::fs::read(new.path()).unwrap(),
        "the two ways made the same images: the wrapper did not turn LLVM's passes on"
    );

    println!("kernel time: SPIR-V as sycl-build makes it (new) / from clang -O2 (old); per launch + wait, {rounds} samples each");
    println!("  load average before: {}", load_average());
    println!(
        "  {:<6} {:<17} {:>10} {:>10} {:>10} {:>10} {:>11} {:>11}",
        "device",
        "kernel",
        "old med",
        "new med",
        "old min",
        "new min",
        "med new/old",
        "min new/old"
    );
    let (mut all_median, mut all_min) = (Vec::new(), Vec::new());
    for device in DEVICES {
        let q = Queue::with_device(device).unwrap_or_else(|e| panic!("{device}: {e}"));
        let bundles = [&old, &new].map(|lib| {
            build(&lib.kernel_bundle(&q), &[]).unwrap_or_else(|e| panic!("{device}: {e}"))
        });
        let (mut device_median, mut device_min) = (Vec::new(), Vec::new());
        for case in CASES {
            let [old_times, new_times] = time_case(&q, case, &bundles, warmup, rounds)
                .unwrap_or_else(|e| panic!("{device} {}: {e}", case.kernel));
            let (old_med, new_med) = (median(old_times.clone()), median(new_times.clone()));
            let (old_min, new_min) = (min(&old_times), min(&new_times));
            println!(
                "  {device:<6} {:<17} {:>7.2} ms {:>7.2} ms {:>7.2} ms {:>7.2} ms {:>11.3} {:>11.3}",
                case.kernel,
                old_med * 1e3,
                new_med * 1e3,
                old_min * 1e3,
                new_min * 1e3,
                new_med / old_med,
                new_min / old_min
            );
            device_median.push(new_med / old_med);
            device_min.push(new_min / old_min);
        }
        ratio(
            &format!("kernel time on {device}: SPIR-V as sycl-build makes it / from clang -O2"),
            geomean(&device_median),
            "<= 1.02",
            &format!(
                "geomean of {} kernels' medians; of minima {:.4}",
                device_median.len(),
                geomean(&device_min)
            ),
        );
        all_median.extend(device_median);
        all_min.extend(device_min);
    }
    println!("  load average after: {}", load_average());
    ratio(
        "kernel time, both devices: SPIR-V as sycl-build makes it / from clang -O2",
        geomean(&all_median),
        "<= 1.02",
        &format!(
            "geomean of {} kernel-device medians; of minima {:.4}",
            all_median.len(),
            geomean(&all_min)
        ),
    );
}

/// The device sources built one way (`tools`: the clang and opt wrappers for the old way,
/// `None` for sycl-build's own commands), made into a device library file and loaded.
fn device_library(
    sycl_ld: &Path,
    dir: &Path,
    way: &str,
    tools: Option<&[std::path::PathBuf; 2]>,
) -> DeviceLibrary {
    let root = repo_root();
    let mut b = sycl_build::Build::new();
    b.files(SOURCES.iter().map(|s| root.join(s)))
        .define("BINS", "64")
        .out_dir(dir.join(way))
        .cargo_metadata(false);
    if let Some([clang, opt]) = tools {
        b.clang(clang).opt(opt);
    }
    let compiled = b.try_compile(way).unwrap_or_else(|e| panic!("building the {way} way: {e}"));
    let file = dir.join(format!("{way}.sydl"));
    run_ok(Command::new(sycl_ld).arg("device-lib").arg("-o").arg(&file).arg(&compiled.archive));
    load_device_library(&file).unwrap()
}

/// Enqueues one launch of the kernel from the bundle.
type Launcher = Box<dyn Fn(&KernelBundle<Executable>) -> Result<(), Error>>;

/// Reads what the kernel wrote.
type Output = Box<dyn Fn() -> Result<Vec<f64>, Error>>;

/// One kernel's launch with its buffers, made once per side.
struct Prepared {
    launch: Launcher,
    /// The kernel's output, as numbers to compare between the two sides.
    output: Output,
}

struct Case {
    kernel: &'static str,
    /// Relative tolerance between the two sides' outputs (the device compilers may contract
    /// or reorder float operations differently).
    tolerance: f64,
    prepare: fn(&Queue, &'static str) -> Result<Prepared, Error>,
}

const CASES: &[Case] = &[
    Case { kernel: "saxpy", tolerance: 1e-6, prepare: saxpy },
    Case { kernel: "matmul_tiled", tolerance: 1e-5, prepare: matmul },
    Case { kernel: "stencil_interior", tolerance: 1e-6, prepare: stencil },
    Case { kernel: "nbody_step", tolerance: 1e-4, prepare: nbody },
    Case { kernel: "reduce_sum", tolerance: 1e-5, prepare: reduce },
    Case { kernel: "histogram", tolerance: 0.0, prepare: histogram },
];

/// Times `case` on `q` from each bundle (old, new): warmed up, then `rounds` samples per side
/// in alternating order; the outputs compared at the end. Seconds per sample.
fn time_case(
    q: &Queue,
    case: &Case,
    bundles: &[KernelBundle<Executable>; 2],
    warmup: usize,
    rounds: usize,
) -> Result<[Vec<f64>; 2], Error> {
    let sides = [(case.prepare)(q, case.kernel)?, (case.prepare)(q, case.kernel)?];
    let mut times = [Vec::with_capacity(rounds), Vec::with_capacity(rounds)];
    for round in 0..warmup + rounds {
        let order = if round % 2 == 0 { [0, 1] } else { [1, 0] };
        for side in order {
            let start = Instant::now();
            (sides[side].launch)(&bundles[side])?;
            q.wait()?;
            let elapsed = start.elapsed().as_secs_f64();
            if round >= warmup {
                times[side].push(elapsed);
            }
        }
    }
    let (old, new) = ((sides[0].output)()?, (sides[1].output)()?);
    assert_eq!(old.len(), new.len());
    let scale = old.iter().fold(0.0f64, |m, v| m.max(v.abs())).max(1.0);
    if let Some((i, (o, n))) = old
        .iter()
        .zip(&new)
        .enumerate()
        .find(|(_, (o, n))| (*o - *n).abs() > case.tolerance * scale)
    {
        panic!("{}: the two ways disagree at {i}: old {o}, new {n}", case.kernel);
    }
    Ok(times)
}

/// Reads a buffer as f64s, for [`Prepared::output`].
fn output_of<T: Pod + Into<f64>>(buffer: &Rc<Buffer<T>>) -> Output {
    let buffer = buffer.clone();
    Box::new(move || Ok(buffer.read()?.into_iter().map(Into::into).collect()))
}

/// Deterministic inputs in [-1, 1).
fn inputs(n: usize, seed: u32) -> Vec<f32> {
    let mut state = seed.wrapping_mul(2654435761) | 1;
    (0..n)
        .map(|_| {
            state ^= state << 13;
            state ^= state >> 17;
            state ^= state << 5;
            (state >> 8) as f32 / (1u32 << 23) as f32 - 1.0
        })
        .collect()
}

/// 16 Mi floats: 192 MiB through memory.
fn saxpy(q: &Queue, kernel: &'static str) -> Result<Prepared, Error> {
    let n = 16 << 20;
    let (x, y, out) = (
        q.buffer_from(&inputs(n, 1))?,
        q.buffer_from(&inputs(n, 2))?,
        Rc::new(q.buffer::<f32>(n)?),
    );
    let (queue, o) = (q.clone(), out.clone());
    Ok(Prepared {
        launch: Box::new(move |exe| {
            queue
                .launch(kernel)
                .arg(&x)
                .arg(&y)
                .arg(&*o)
                .arg(2.5f32)
                .global([n])
                .use_kernel_bundle(exe)
                .run()
                .map(drop)
        }),
        output: output_of(&out),
    })
}

/// 512 x 512 x 512, tiles of 16 x 16, four results per work-item.
fn matmul(q: &Queue, kernel: &'static str) -> Result<Prepared, Error> {
    let n = 512;
    let (a, b, c) = (
        q.buffer_from(&inputs(n * n, 3))?,
        q.buffer_from(&inputs(n * n, 4))?,
        Rc::new(q.buffer::<f32>(n * n)?),
    );
    let (queue, o) = (q.clone(), c.clone());
    Ok(Prepared {
        launch: Box::new(move |exe| {
            let size = n as i32;
            queue
                .launch(kernel)
                .arg(size)
                .arg(size)
                .arg(size)
                .arg(&a)
                .arg(&b)
                .arg(&*o)
                .global([n, n / 4])
                .local([16, 4])
                .use_kernel_bundle(exe)
                .run()
                .map(drop)
        }),
        output: output_of(&c),
    })
}

/// The interior of a 4098 x 4098 grid.
fn stencil(q: &Queue, kernel: &'static str) -> Result<Prepared, Error> {
    let w = 4098;
    let (input, out) =
        (q.buffer_from(&inputs(w * w, 5))?, Rc::new(q.buffer_from(&vec![0.0f32; w * w])?));
    let (queue, o) = (q.clone(), out.clone());
    Ok(Prepared {
        launch: Box::new(move |exe| {
            queue
                .launch(kernel)
                .arg(&input)
                .arg(&*o)
                .arg(w as i32)
                .global([w - 2, w - 2])
                .use_kernel_bundle(exe)
                .run()
                .map(drop)
        }),
        output: output_of(&out),
    })
}

/// 2,048 bodies in work-groups of 64.
fn nbody(q: &Queue, kernel: &'static str) -> Result<Prepared, Error> {
    let (n, group) = (2048, 64);
    let mut pos = inputs(4 * n, 6);
    for mass in pos.iter_mut().skip(3).step_by(4) {
        *mass = *mass * 0.5 + 1.0;
    }
    let vel: Vec<f32> = inputs(4 * n, 7).iter().map(|v| v * 0.1).collect();
    let (p, v) = (q.buffer_from(&pos)?, q.buffer_from(&vel)?);
    let (new_pos, new_vel) = (Rc::new(q.buffer::<f32>(4 * n)?), q.buffer::<f32>(4 * n)?);
    let (queue, o) = (q.clone(), new_pos.clone());
    Ok(Prepared {
        launch: Box::new(move |exe| {
            queue
                .launch(kernel)
                .arg(&p)
                .arg(&v)
                .arg(&*o)
                .arg(&new_vel)
                .arg(Local::<f32>::new(4 * group))
                .arg(n as i32)
                .arg(0.01f32)
                .global([n])
                .local([group])
                .use_kernel_bundle(exe)
                .run()
                .map(drop)
        }),
        output: output_of(&new_pos),
    })
}

/// 8 Mi floats summed by 8,192 work-items in groups of 64.
fn reduce(q: &Queue, kernel: &'static str) -> Result<Prepared, Error> {
    let (n, global, group) = (8 << 20, 8192, 64);
    let (input, partial) =
        (q.buffer_from(&inputs(n, 8))?, Rc::new(q.buffer::<f32>(global / group)?));
    let (queue, o) = (q.clone(), partial.clone());
    Ok(Prepared {
        launch: Box::new(move |exe| {
            queue
                .launch(kernel)
                .arg(&input)
                .arg(&*o)
                .arg(Local::<f32>::new(group))
                .arg(n as i32)
                .global([global])
                .local([group])
                .use_kernel_bundle(exe)
                .run()
                .map(drop)
        }),
        output: output_of(&partial),
    })
}

/// 4 Mi values into 64 bins (counts accumulate over the launches, the same number per side).
fn histogram(q: &Queue, kernel: &'static str) -> Result<Prepared, Error> {
    let (n, global, group, bins) = (4 << 20, 8192, 64, 64);
    let data: Vec<u32> = inputs(n, 9).iter().map(|v| v.to_bits()).collect();
    let (input, hist) = (q.buffer_from(&data)?, Rc::new(q.buffer_from(&vec![0u32; bins])?));
    let (queue, o) = (q.clone(), hist.clone());
    Ok(Prepared {
        launch: Box::new(move |exe| {
            queue
                .launch(kernel)
                .arg(&input)
                .arg(n as i32)
                .arg(&*o)
                .arg(Local::<u32>::new(bins))
                .global([global])
                .local([group])
                .use_kernel_bundle(exe)
                .run()
                .map(drop)
        }),
        output: output_of(&hist),
    })
}

/// `/proc/loadavg`'s first three fields: the machine may be busy with other work.
fn load_average() -> String {
    let text = std::fs::read_to_string("/proc/loadavg").unwrap_or_default();
    text.split_whitespace().take(3).collect::<Vec<_>>().join(" ")
}

fn min(values: &[f64]) -> f64 {
    values.iter().copied().fold(f64::INFINITY, f64::min)
}

fn geomean(values: &[f64]) -> f64 {
    (values.iter().map(|v| v.ln()).sum::<f64>() / values.len() as f64).exp()
}
