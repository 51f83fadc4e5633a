//! Builtins on both devices: those taking pointers of every address space, under OpenCL C 2.0
//! (where every such call passes a generic pointer, which PoCL's library has no builtins for)
//! and 1.2; and float results, which on PoCL must be those of its own build of the source.

use std::path::{Path, PathBuf};

use sycl_runtime::{load_device_library, test_support::run_source, Buffer, Queue};
use sycl_tests::{device_lib, repo_root, DEVICES};

const CL20: &str = "-cl-std=CL2.0";

fn data(name: &str) -> PathBuf {
    repo_root().join("tests/kernels").join(name)
}

/// A device library file made of `source` with `options`, in `dir`.
fn library(dir: &Path, source: &str, options: &[&str]) -> PathBuf {
    let out = dir.join(format!("{source}{}.sydl", options.concat()));
    let made = device_lib(options, &out, &[&data(source)]);
    assert!(made.status.success(), "{}", String::from_utf8_lossy(&made.stderr));
    out
}

/// The bits of a half that represents `v` exactly (normal or zero).
fn half(v: f32) -> u16 {
    let bits = v.to_bits();
    let sign = (bits >> 16) as u16 & 0x8000;
    if v == 0.0 {
        return sign;
    }
    let exponent = ((bits >> 23) & 0xff) as i32 - 127 + 15;
    assert!((1..31).contains(&exponent) && bits & 0x1fff == 0, "{v} is no half");
    sign | (exponent as u16) << 10 | ((bits >> 13) & 0x3ff) as u16
}

fn run<T>(what: &str, result: Result<T, sycl_runtime::Error>) {
    if let Err(e) = result {
        panic!("{what}: {e}");
    }
}

fn check_vectors(q: &Queue, what: &str) {
    let input: Vec<f32> = (0..16).map(|j| j as f32 * 0.5 - 3.0).collect();
    let ints: Vec<i32> = (0..12).map(|j| j * 7 - 20).collect();
    let (a, out) = (q.buffer_from(&input).unwrap(), q.buffer::<f32>(64).unwrap());
    let (k, iout) = (q.buffer_from(&ints).unwrap(), q.buffer::<i32>(12).unwrap());
    run(
        what,
        q.launch("vectors").arg(&a).arg(&out).arg(&k).arg(&iout).global([4]).local([4]).run(),
    );
    let mut expected = Vec::new();
    for i in 0..4 {
        let own = &input[4 * i..4 * i + 4];
        let next = &input[4 * ((i + 1) % 4)..][..4];
        expected.extend(own);
        expected.extend(own);
        expected.extend(next.iter().map(|x| x * 2.0));
        expected.extend(own.iter().map(|x| x + 1.0));
    }
    assert_eq!(out.read().unwrap(), expected, "vectors: {what}");
    let tripled: Vec<i32> = ints.iter().map(|x| x * 3).collect();
    assert_eq!(iout.read().unwrap(), tripled, "vectors: {what}");
}

fn check_halves(q: &Queue, what: &str) {
    let values: Vec<f32> = (0..16).map(|k| k as f32 * 0.25 - 2.0).collect();
    let third = 1.0f32 / 3.0;
    let x = [third, -third, third, -third];
    let h = q.buffer_from(&values.iter().map(|&v| half(v)).collect::<Vec<u16>>()).unwrap();
    let (xs, hout, out) =
        (q.buffer_from(&x).unwrap(), q.buffer::<u16>(16).unwrap(), q.buffer::<f32>(32).unwrap());
    run(
        what,
        q.launch("halves").arg(&h).arg(&xs).arg(&hout).arg(&out).global([4]).local([4]).run(),
    );
    // 1/3 lies between the halves 0x3555 and 0x3556, nearer the first.
    let (rtp, rtn, rte, rtz) =
        ([0x3556, 0xb555], [0x3555, 0xb556], [0x3555, 0xb555], [0x3555, 0xb555]);
    let mut expected_halves = Vec::new();
    let mut expected = Vec::new();
    for i in 0..4 {
        let s = i % 2;
        expected_halves.extend([rtp[s], rtn[s], rte[s], rtz[s]]);
        expected.extend(&values[4 * i..4 * i + 4]);
        let rounded_up = [0.333_496_1f32, -0.333_251_95][s];
        expected.extend([
            values[4 * i + 3],
            values[4 * i + 2],
            2.0 * values[4 * ((i + 1) % 4) + 1],
            rounded_up,
        ]);
    }
    assert_eq!(hout.read().unwrap(), expected_halves, "halves: {what}");
    assert_eq!(out.read().unwrap(), expected, "halves: {what}");
}

fn check_math(q: &Queue, what: &str) {
    let x = [2.75f32, -1.25, 8.0, -3.5];
    let (xs, out, iout) =
        (q.buffer_from(&x).unwrap(), q.buffer::<f32>(48).unwrap(), q.buffer::<i32>(16).unwrap());
    run(what, q.launch("math").arg(&xs).arg(&out).arg(&iout).global([4]).local([4]).run());
    let (out, iout) = (out.read().unwrap(), iout.read().unwrap());
    let fract = [(0.75, 2.0), (0.75, -2.0), (0.0, 8.0), (0.5, -4.0)];
    let modf = [(0.75, 2.0), (-0.25, -1.0), (0.0, 8.0), (-0.5, -3.0)];
    let frexp = [(0.6875, 2), (-0.625, 1), (0.5, 4), (-0.875, 2)];
    let lgamma = [(-0.117_755_27f32, 1), (1.333_077_6, -1), (1.791_759_5, 1), (1.016_088_8, 1)];
    let remquo = [(0.75, 1), (0.75, -1), (0.0, 4), (0.5, -2)];
    for i in 0..4 {
        let (o, n) = (&out[12 * i..12 * i + 9], &iout[4 * i..4 * i + 3]);
        let got = format!("math: {what}, x = {}: {o:?} {n:?}", x[i]);
        assert_eq!((o[0], o[1]), fract[i], "fract, {got}");
        assert_eq!((o[2], o[3]), modf[i], "modf, {got}");
        assert_eq!((o[4], n[0]), frexp[i], "frexp, {got}");
        assert_eq!((o[5], o[6]), (0.0, 1.0), "sincos, {got}");
        assert!(
            (o[7] - lgamma[i].0).abs() <= 1e-5 * lgamma[i].0.abs() && n[1] == lgamma[i].1,
            "lgamma_r, {got}"
        );
        assert_eq!((o[8], n[2]), remquo[i], "remquo, {got}");
    }
}

fn check_atomics(q: &Queue, what: &str) {
    let c = q.buffer_from(&[0i32; 3]).unwrap();
    // Intel's runtime builds no atomic on a generic pointer from SPIR-V, not even one on a
    // global pointer cast to generic: the runtime makes them specific for it too.
    run(what, q.launch("atomics").arg(&c).global([8]).local([4]).run());
    assert_eq!(c.read().unwrap(), [8, 16, 4], "atomics: {what}");
}

#[test]
fn builtins_on_pointers_of_every_address_space_run_on_both_devices() {
    let dir = tempfile::tempdir().unwrap();
    for std in [CL20, "-cl-std=CL1.2"] {
        let file = library(dir.path(), "pointer_builtins.cl", &["--split", "per_kernel", std]);
        let library = load_device_library(&file).unwrap();
        for device in DEVICES.map(|d| d.selector) {
            let q = Queue::with_device(device).unwrap();
            let what = &format!("{std} on {device}");
            check_vectors(&q, what);
            check_halves(&q, what);
            check_math(&q, what);
            check_atomics(&q, what);
            if std == CL20 {
                let out = q.buffer_from(&[-1i32; 3]).unwrap();
                run(what, q.launch("fences").arg(&out).global([1]).run());
                // CLK_GLOBAL_MEM_FENCE, CLK_LOCAL_MEM_FENCE, as the specification has it (Intel's
                // runtime answers CLK_GLOBAL_MEM_FENCE for every pointer in its own build of a
                // source; the runtime's rewrite answers from the pointer's address space).
                assert_eq!(out.read().unwrap(), [2, 1, 2], "fences on {device}");
            }
        }
        library.unload();
    }
}

/// A deterministic pseudo-random float in [-2, 2) for each index.
fn inputs(seed: u32, len: usize) -> Vec<f32> {
    let mut state = seed;
    (0..len)
        .map(|_| {
            state = state.wrapping_mul(1_664_525).wrapping_add(1_013_904_223);
            (state >> 8) as f32 / (1u32 << 24) as f32 * 4.0 - 2.0
        })
        .collect()
}

#[test]
fn each_device_computes_what_its_own_build_of_the_source_computes() {
    const ITEMS: usize = 64;
    let dir = tempfile::tempdir().unwrap();
    let source_path = data("float_kernels.cl");
    let source = std::fs::read_to_string(&source_path).unwrap();
    let kernels: Vec<&str> = source
        .lines()
        .filter_map(|l| l.strip_prefix("kernel void "))
        .map(|l| &l[..l.find('(').unwrap()])
        .collect();
    assert!(kernels.len() >= 10, "{kernels:?}");
    let library = load_device_library(library(dir.path(), "float_kernels.cl", &[])).unwrap();
    let mut differences = Vec::new();
    for device in DEVICES.map(|d| d.selector) {
        let q = Queue::with_device(device).unwrap();
        let [a, b, c] = [1, 2, 3].map(|seed| q.buffer_from(&inputs(seed, 16 * ITEMS)).unwrap());
        for kernel in &kernels {
            let (own, ours) =
                (q.buffer_from(&[0f32; ITEMS]).unwrap(), q.buffer_from(&[0f32; ITEMS]).unwrap());
            run(
                &format!("{kernel} on {device}"),
                run_source(&q, &source, "", kernel, &[&&own, &&a, &&b, &&c], ITEMS),
            );
            let launch = q.launch(kernel).arg(&ours).arg(&a).arg(&b).arg(&c).global([ITEMS]);
            run(&format!("{kernel} on {device}"), launch.run());
            let bits = |buffer: &Buffer<f32>| {
                buffer.read().unwrap().iter().map(|x| x.to_bits()).collect::<Vec<u32>>()
            };
            let (own, ours) = (bits(&own), bits(&ours));
            let differ = own.iter().zip(&ours).filter(|(x, y)| x != y).count();
            // Intel's build of `mad` fuses only one product of f_two_uses where its own build
            // fuses both: the runtime gives it `fma` (docs/PLATFORMS.md).
            if differ > 0 {
                differences
                    .push(format!("{kernel} on {device}: {differ} of {ITEMS} results differ"));
            }
        }
    }
    assert!(differences.is_empty(), "{differences:#?}");
    library.unload();
}

/// A function computed on the host.
type Host = fn(f64) -> f64;

/// `half_*` math and the memory fences, which PoCL 3.1's library defines only under other
/// names (`_cl_half_sqrt`, `_cl_mem_fence`): on PoCL the runtime makes `half_*` full precision
/// and gives the program a `mem_fence` that calls PoCL's.
#[test]
fn half_math_and_memory_fences_run_on_both_devices() {
    let dir = tempfile::tempdir().unwrap();
    let library = load_device_library(library(dir.path(), "half_math_fences.cl", &[])).unwrap();
    let x = [0.3f32, 0.9, 1.7, 3.1];
    let functions: [(&str, Host); 12] = [
        ("half_cos", f64::cos),
        ("half_exp", f64::exp),
        ("half_exp2", f64::exp2),
        ("half_exp10", |v| 10f64.powf(v)),
        ("half_log", f64::ln),
        ("half_log2", f64::log2),
        ("half_log10", f64::log10),
        ("half_powr", |v| v.powf(1.5)),
        ("half_rsqrt", |v| 1.0 / v.sqrt()),
        ("half_sin", f64::sin),
        ("half_sqrt", f64::sqrt),
        ("half_tan", |v| (v * 0.25).tan()),
    ];
    for device in DEVICES.map(|d| d.selector) {
        let q = Queue::with_device(device).unwrap();
        let (xs, out) = (q.buffer_from(&x).unwrap(), q.buffer::<f32>(64).unwrap());
        run(
            &format!("half_math on {device}"),
            q.launch("half_math").arg(&xs).arg(&out).global([4]).run(),
        );
        let out = out.read().unwrap();
        for (i, &v) in x.iter().enumerate() {
            let v = f64::from(v);
            let vector = (0..4).map(|k| v + k as f64);
            let vector =
                vector.map(|w| (format!("half_recip + half_divide, {w}"), 1.0 / w + w / 4.0));
            let expected =
                functions.iter().map(|(name, f)| (format!("{name}({v})"), f(v))).chain(vector);
            for ((what, expected), &got) in expected.zip(&out[16 * i..16 * i + 16]) {
                // half_* allow 8192 ulps (2^-10 relative).
                let error = (f64::from(got) - expected).abs();
                assert!(
                    error <= 2e-3 * expected.abs(),
                    "{what} on {device}: {got}, expected {expected}"
                );
            }
        }

        let out = q.buffer_from(&[-1i32; 16]).unwrap();
        run(
            &format!("memory_fences on {device}"),
            q.launch("memory_fences").arg(&out).global([8]).local([4]).run(),
        );
        let expected: Vec<i32> =
            (0..8).chain((0..8).map(|i| 11 * i + 10 * (i / 4 * 4 + (i + 1) % 4))).collect();
        assert_eq!(out.read().unwrap(), expected, "memory_fences on {device}");
    }
    library.unload();
}
