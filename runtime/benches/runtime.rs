//! In-process costs of the runtime's image bookkeeping:
//! - collection: collecting a kernel's images (the kernel's image, then the providers of its
//!   imports, transitively) over a synthetic registry of N = 100, 1,000 and 10,000 images in
//!   binaries of 100. The kernel imports one symbol whose provider imports another, so three
//!   images are collected; the other images are fillers with their own kernels, exports and
//!   imports. Bound: the same time at every size (ratios to N = 100 within 10%), since the
//!   work depends on what the kernel imports, not on how many images exist. The sizes are
//!   timed side by side, in rounds (see [`collect_side_by_side`]), not with criterion, which
//!   times one benchmark after another;
//! - `discover`, with criterion: finding and indexing the images of every loaded binary, with
//!   100 shared libraries of 20 images each opened (generated here: 20 kernels per library,
//!   `per_kernel` split, linked by `sycl-ld`, every library with its own kernel names).
//!   Bound: under 1% of one link of the demo (its executable's link replayed through
//!   `target/debug/sycl-ld`, the linker the demo uses).
//!
//! Ratios are printed as `RATIO` lines for `cargo xtask bench`: collection's as the median
//! of the rounds' ratios, discovery's from the samples criterion reports (per-iteration
//! median over its measurement samples).
//!
//! Run with `cargo bench -p sycl-runtime --bench runtime`. Without `--bench` (as in
//! `cargo test --benches`) every benchmark runs once, on 5 libraries, as a smoke test.

mod common;

use std::cell::RefCell;
use std::ffi::CString;
use std::hint::black_box;
use std::path::{Path, PathBuf};
use std::rc::Rc;
use std::time::{Duration, Instant};

use criterion::Criterion;
use sycl_format::{sets, Image, ImageFormat, ImageSet, PropertySet, SplitMode, Target};
use sycl_runtime::bench_support::{self, SyntheticRegistry};

use common::{median, ms, ns, ratio};

const SIZES: [usize; 3] = [100, 1_000, 10_000];
const IMAGES_PER_BINARY: usize = 100;
const LIBRARIES: usize = 100;
const KERNELS_PER_LIBRARY: usize = 20;
const SAMPLES: usize = 50;
/// Rounds of the side-by-side collection timing, the rounds of warm-up before them, and how
/// long each size collects in a round: under 2 s in all.
const COLLECT_ROUNDS: usize = 500;
const COLLECT_WARMUP_ROUNDS: usize = 50;
const COLLECT_BATCH: Duration = Duration::from_millis(1);

fn main() {
    let bench = common::bench_mode();
    let mut c = Criterion::default()
        .warm_up_time(Duration::from_secs(1))
        .measurement_time(Duration::from_secs(3))
        .sample_size(SAMPLES)
        .configure_from_args();

    // Image collection against the registry's size.
    let registries: Vec<(usize, SyntheticRegistry)> = SIZES
        .iter()
        .map(|&n| {
            let registry = SyntheticRegistry::new(synthetic(n));
            assert_eq!(
                registry.collect("main_kernel").unwrap(),
                3,
                "the kernel, its import's provider and that one's"
            );
            (n, registry)
        })
        .collect();
    let collect = collect_side_by_side(&registries, if bench { COLLECT_ROUNDS } else { 1 });
    drop(registries);

    // Discovery with 100 libraries x 20 images loaded, against one link of the demo.
    let libraries = if bench { LIBRARIES } else { 5 };
    let paths = libraries_of_images(libraries);
    for path in &paths {
        open(path);
    }
    let images = bench_support::discover();
    assert_eq!(images, libraries * KERNELS_PER_LIBRARY, "images found in {libraries} libraries");
    let samples = Samples::default();
    c.bench_function(&format!("discover/{libraries}x{KERNELS_PER_LIBRARY}"), |b| {
        b.iter_custom(|iters| {
            let start = Instant::now();
            for _ in 0..iters {
                black_box(bench_support::discover());
            }
            samples.record(iters, start.elapsed())
        })
    });
    let discover = samples.per_iteration();

    let demo = common::Demo::build();
    let out = tempfile::Builder::new().prefix("sycl-bench-link").tempdir().unwrap();
    let links = if bench { 10 } else { 1 };
    demo.link_once(&out.path().join("warm-up"));
    let link = median(
        (0..links)
            .map(|n| demo.link_once(&out.path().join(format!("app-{n}"))).as_secs_f64())
            .collect(),
    );
    c.final_summary();

    println!(
        "image collection (3 images collected; per collection, over {} rounds side by side)",
        collect.rounds
    );
    for (n, t) in &collect.sizes {
        println!("  {n:>6} images registered   median {}  min {}", ns(t.median), ns(t.min));
    }
    if let Some(discover) = discover {
        println!("discovery of {libraries} libraries x {KERNELS_PER_LIBRARY} images ({images} images)   {}", ms(discover));
    }
    println!("one link of the demo (sycl-ld, {links} runs)   {}", ms(link));
    if let [(100, base), rest @ ..] = collect.sizes.as_slice() {
        for (n, t) in rest {
            ratio(
                &format!("collect a kernel's images: {n} / 100 images registered"),
                t.ratio_to(base),
                "<= 1.10",
                &format!(
                    "median of {} rounds' ratios; medians {} vs {}; min/min {:.3}",
                    collect.rounds,
                    ns(t.median),
                    ns(base.median),
                    t.min / base.min
                ),
            );
        }
    }
    if let Some(discover) = discover {
        ratio(
            "discover every loaded library's images / one demo link",
            discover / link,
            "< 0.01",
            &format!(
                "{libraries} libraries x {KERNELS_PER_LIBRARY} images: {} vs {}",
                ms(discover),
                ms(link)
            ),
        );
    }
}

/// Per-collection times at each registry size.
struct Collection {
    rounds: usize,
    sizes: Vec<(usize, Timing)>,
}

/// One size's time per collection in each round, and their median and minimum, in seconds.
struct Timing {
    rounds: Vec<f64>,
    median: f64,
    min: f64,
}

impl Timing {
    fn of(rounds: Vec<f64>) -> Timing {
        let min = rounds.iter().copied().fold(f64::INFINITY, f64::min);
        Timing { median: median(rounds.clone()), min, rounds }
    }

    /// The median over the rounds of this size's time over `base`'s in the same round: the
    /// machine can change speed for a while (a neighbour's build, the host), and the median of
    /// each size's times then falls on one side of the change or the other, 7% apart once in
    /// three quiet runs; a round's sizes run within milliseconds of each other.
    fn ratio_to(&self, base: &Timing) -> f64 {
        median(self.rounds.iter().zip(&base.rounds).map(|(t, b)| t / b).collect())
    }
}

/// Times collection at every size side by side: in each round, each registry collects for
/// about `COLLECT_BATCH`, in an order that turns from round to round, so that all sizes share
/// whatever else the machine is doing. Timed one after another, as criterion times its
/// benchmarks (a few seconds each), a build starting or ending on this 2-core machine between
/// two sizes moved their ratio by up to 20% (1.0-1.22 across runs); side by side, the same
/// load moves it by a few percent.
fn collect_side_by_side(registries: &[(usize, SyntheticRegistry)], rounds: usize) -> Collection {
    let batch = |registry: &SyntheticRegistry, iters: u32| {
        let start = Instant::now();
        for _ in 0..iters {
            black_box(registry.collect(black_box("main_kernel")).unwrap());
        }
        start.elapsed().as_secs_f64() / f64::from(iters)
    };
    // As many collections per batch as the smallest registry makes in `COLLECT_BATCH`.
    let (mut iters, started) = (0, Instant::now());
    while started.elapsed() < COLLECT_BATCH {
        batch(&registries[0].1, 1);
        iters += 1;
    }
    let mut times = vec![Vec::with_capacity(rounds); registries.len()];
    for round in 0..COLLECT_WARMUP_ROUNDS + rounds {
        for i in (0..registries.len()).map(|i| (i + round) % registries.len()) {
            let t = batch(&registries[i].1, iters);
            if round >= COLLECT_WARMUP_ROUNDS {
                times[i].push(t);
            }
        }
    }
    let sizes = registries.iter().zip(times).map(|((n, _), t)| (*n, Timing::of(t))).collect();
    Collection { rounds, sizes }
}

/// What `iter_custom` measured, call by call. Criterion calls the routine during warm-up
/// with growing iteration counts, then once per sample: the last `SAMPLES` calls are the
/// samples it reports.
#[derive(Default)]
struct Samples(Rc<RefCell<Vec<(u64, Duration)>>>);

impl Samples {
    fn record(&self, iters: u64, elapsed: Duration) -> Duration {
        self.0.borrow_mut().push((iters, elapsed));
        elapsed
    }

    /// The median over the measurement samples of the time per iteration, in seconds; none
    /// when a filter on the command line left the benchmark out.
    fn per_iteration(&self) -> Option<f64> {
        let all = self.0.borrow();
        let samples = &all[all.len().saturating_sub(SAMPLES)..];
        (!samples.is_empty()).then(|| {
            median(samples.iter().map(|(iters, d)| d.as_secs_f64() / *iters as f64).collect())
        })
    }
}

/// `total` synthetic SPIR-V images in binaries of 100: `main_kernel` (first binary) imports
/// `helper_a`, exported by an image that imports `helper_b`, exported by another (both in the
/// last binary); every other image has its own kernel and export and imports the next one's.
fn synthetic(total: usize) -> Vec<(String, ImageSet)> {
    let image = |kernels: Vec<String>, exports: Vec<String>, imports: Vec<String>| Image {
        format: ImageFormat::SpirV,
        target: Target::Spir64.name().into(),
        kernels,
        property_sets: vec![
            PropertySet::symbols(sets::EXPORTED_SYMBOLS, exports),
            PropertySet::symbols(sets::IMPORTED_SYMBOLS, imports),
        ],
        data: vec![0; 64],
    };
    let s = |v: &str| vec![v.to_string()];
    let mut images = vec![image(s("main_kernel"), vec![], s("helper_a"))];
    for i in 0..total - 3 {
        images.push(image(
            vec![format!("filler_kernel_{i}")],
            vec![format!("filler_fn_{i}")],
            vec![format!("filler_fn_{}", i + 1)],
        ));
    }
    images.push(image(vec![], s("helper_a"), s("helper_b")));
    images.push(image(vec![], s("helper_b"), vec![]));
    let mut binaries = Vec::new();
    let mut images = images.into_iter().peekable();
    while images.peek().is_some() {
        let set = ImageSet { images: images.by_ref().take(IMAGES_PER_BINARY).collect() };
        binaries.push((format!("libsynthetic{}.so", binaries.len()), set));
    }
    binaries
}

/// `count` shared libraries of `KERNELS_PER_LIBRARY` images each, made by `sycl-build` and
/// `sycl-ld` (kept under `target/sycl-bench/` and remade when `sycl-ld` changes).
fn libraries_of_images(count: usize) -> Vec<PathBuf> {
    let sycl_ld = common::sycl_ld();
    let dir = common::bench_dir().join("libraries");
    let stamp = dir.join("stamp");
    let meta = std::fs::metadata(&sycl_ld).unwrap();
    let want = format!("v1 {KERNELS_PER_LIBRARY} {:?} {}\n", meta.modified().unwrap(), meta.len());
    let paths: Vec<PathBuf> = (0..count).map(|i| dir.join(format!("libsyclbench{i}.so"))).collect();
    let current = std::fs::read_to_string(&stamp).is_ok_and(|s| s == want);
    let missing: Vec<usize> = (0..count).filter(|&i| !current || !paths[i].exists()).collect();
    if !missing.is_empty() {
        let started = Instant::now();
        std::fs::create_dir_all(&dir).unwrap();
        let _ = std::fs::remove_file(&stamp);
        // Two at a time: the machine has two cores.
        let next = std::sync::atomic::AtomicUsize::new(0);
        std::thread::scope(|scope| {
            for _ in 0..2 {
                scope.spawn(|| loop {
                    let n = next.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                    let Some(&i) = missing.get(n) else { break };
                    make_library(&sycl_ld, &dir, i, &paths[i]);
                });
            }
        });
        std::fs::write(&stamp, want).unwrap();
        eprintln!(
            "made {} libraries in {:.0} s ({})",
            missing.len(),
            started.elapsed().as_secs_f64(),
            dir.display()
        );
    }
    paths
}

/// Library `i`: kernels `lib{i}_k{j}`, each its own image (`per_kernel`).
fn make_library(sycl_ld: &Path, dir: &Path, i: usize, out: &Path) {
    let work = dir.join(format!("work{i}"));
    std::fs::create_dir_all(&work).unwrap();
    let source = work.join(format!("lib{i}.cl"));
    let mut text = String::from("#include <sycl/device.h>\n");
    for j in 0..KERNELS_PER_LIBRARY {
        text += &format!(
            "__kernel void lib{i}_k{j}(__global int *o) {{ o[get_global_id(0)] = {}; }}\n",
            i * 1000 + j
        );
    }
    std::fs::write(&source, text).unwrap();
    let compiled = sycl_build::Build::new()
        .file(&source)
        .split(SplitMode::PerKernel)
        .cargo_metadata(false)
        .out_dir(&work)
        .try_compile(&format!("lib{i}"))
        .unwrap_or_else(|e| panic!("compiling {}: {e}", source.display()));
    common::run_ok(
        std::process::Command::new(sycl_ld)
            .args(["-shared", "-nostdlib", "-o"])
            .arg(out)
            .arg(&compiled.archive)
            .env_remove("SYCL_LD_LINKER")
            .env_remove("SYCL_LD_SPLIT"),
    );
    std::fs::remove_dir_all(&work).unwrap();
}

/// Opens a library for good (`RTLD_NOW | RTLD_GLOBAL`, like a library the executable needs).
fn open(path: &Path) {
    let name = CString::new(path.to_str().unwrap()).unwrap();
    // SAFETY: the libraries made above hold no code that runs at load (no constructors).
    let handle = unsafe { libc::dlopen(name.as_ptr(), libc::RTLD_NOW | libc::RTLD_GLOBAL) };
    assert!(!handle.is_null(), "dlopen {} failed", path.display());
}
