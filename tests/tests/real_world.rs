//! Kernels as people write them (`tests/kernels/`), built through the toolkit
//! (`sycl-ld device-lib`, with `-D`, `-I` and `-cl-std=` as host code sets them), loaded into
//! this process with `load_device_library` and run on both CPU devices, every result checked
//! against a host reference: integer division beside remainder, chains of `&&`, a
//! register-blocked SGEMM, an n-body step, vloadN/vstoreN in every address space, `__local`
//! parameters with barriers, OpenCL 1.2 atomics, doubles, a stencil with an `-I` header.
//!
//! Several of these are what clang's optimiser turned into LLVM IR that llvm-spirv-15 cannot
//! translate (`freeze`, `<64 x float>`, `<4 x i1>`); `sycl-build` now runs LLVM's pipeline
//! without the passes that write them.

use std::path::{Path, PathBuf};

use sycl_runtime::{build, load_device_library, DeviceLibrary, Error, Local, Queue};
use sycl_tests::{device_lib, repo_root, stderr, DEVICES};

fn kernels_dir() -> PathBuf {
    repo_root().join("tests/kernels")
}

/// A device library file made from `tests/kernels/SOURCE` with compiler `options` (the
/// kernels' `include/` directory is always on the include path), loaded into this process;
/// unloaded when dropped.
struct Library {
    loaded: DeviceLibrary,
    _dir: tempfile::TempDir,
}

fn library(source: &str, options: &[&str]) -> Library {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join(Path::new(source).with_extension("sydl"));
    let include = format!("-I{}", kernels_dir().join("include").display());
    let mut all = vec![include.as_str()];
    all.extend(options);
    let made = device_lib(&all, &file, &[&kernels_dir().join(source)]);
    assert!(made.status.success(), "sycl-ld device-lib {all:?} {source}:\n{}", stderr(&made));
    let loaded = load_device_library(&file).unwrap_or_else(|e| panic!("loading {source}: {e}"));
    Library { loaded, _dir: dir }
}

/// Runs `check` on a queue of each device; an error names the device.
fn on_both_devices(check: impl Fn(&str, &Queue) -> Result<(), Error>) {
    for device in DEVICES.map(|d| d.selector) {
        let q = Queue::with_device(device).unwrap_or_else(|e| panic!("{device}: {e}"));
        check(device, &q).unwrap_or_else(|e| panic!("{device}: {e}"));
    }
}

/// Deterministic pseudo-random numbers (a 64-bit LCG), the same on every run.
struct Lcg(u64);

impl Lcg {
    fn next_u32(&mut self) -> u32 {
        self.0 = self.0.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
        (self.0 >> 33) as u32
    }

    /// Uniform in [lo, hi).
    fn f32(&mut self, lo: f32, hi: f32) -> f32 {
        lo + (hi - lo) * (self.next_u32() as f32 / (1u64 << 31) as f32)
    }

    fn f32s(&mut self, n: usize, lo: f32, hi: f32) -> Vec<f32> {
        (0..n).map(|_| self.f32(lo, hi)).collect()
    }

    /// Uniform in [lo, hi).
    fn i32(&mut self, lo: i32, hi: i32) -> i32 {
        lo + (self.next_u32() % (hi - lo) as u32) as i32
    }
}

/// Every `got[i]` within `tol * max(scale[i], 1)` of `want[i]`, the first one that is not
/// named with its index.
fn assert_close_scaled(what: &str, got: &[f64], want: &[f64], scale: &[f64], tol: f64) {
    assert_eq!(got.len(), want.len(), "{what}: lengths");
    for (i, (g, w)) in got.iter().zip(want).enumerate() {
        let limit = tol * scale[i].max(1.0);
        assert!((g - w).abs() <= limit, "{what}[{i}]: got {g}, want {w} (tolerance {limit:e})");
    }
}

/// [`assert_close_scaled`] relative to each wanted value.
fn assert_close(what: &str, got: &[f64], want: &[f64], tol: f64) {
    let scale: Vec<f64> = want.iter().map(|w| w.abs()).collect();
    assert_close_scaled(what, got, want, &scale, tol);
}

fn f64s(values: &[f32]) -> Vec<f64> {
    values.iter().map(|&v| f64::from(v)).collect()
}

#[test]
fn division_beside_remainder() {
    let _lib = library("divrem.cl", &[]);
    let values: Vec<i32> = {
        let mut rng = Lcg(1);
        let mut v: Vec<i32> = (0..1024).map(|_| rng.i32(-100_000, 100_000)).collect();
        v[..6].copy_from_slice(&[0, -1, -16, -17, 15, i32::MIN]);
        v
    };
    on_both_devices(|device, q| {
        let out = q.buffer::<i32>(1000)?;
        q.launch("divrem_sum").arg(&out).arg(7i32).global([1000]).run()?;
        let want: Vec<i32> = (0..1000).map(|i| i / 7 + i % 7).collect();
        assert_eq!(out.read()?, want, "{device}: i / n + i % n");

        let input = q.buffer_from(&values)?;
        let (quot, rem, packed) = (
            q.buffer::<i32>(values.len())?,
            q.buffer::<i32>(values.len())?,
            q.buffer::<u32>(values.len())?,
        );
        q.launch("divrem_by_16")
            .arg(&input)
            .arg(&quot)
            .arg(&rem)
            .arg(&packed)
            .global([values.len()])
            .run()?;
        assert_eq!(
            quot.read()?,
            values.iter().map(|x| x / 16).collect::<Vec<_>>(),
            "{device}: x / 16"
        );
        assert_eq!(
            rem.read()?,
            values.iter().map(|x| x % 16).collect::<Vec<_>>(),
            "{device}: x % 16"
        );
        let want: Vec<u32> = values
            .iter()
            .map(|&x| (x as u32 / 16).wrapping_mul(100).wrapping_add(x as u32 % 16))
            .collect();
        assert_eq!(packed.read()?, want, "{device}: unsigned x / 16 and x % 16");

        let (width, height) = (37usize, 29usize);
        let xy = q.buffer::<i32>(2 * width * height)?;
        q.launch("index_to_xy").arg(&xy).arg(width as u64).global([width * height]).run()?;
        let want: Vec<i32> =
            (0..width * height).flat_map(|i| [(i % width) as i32, (i / width) as i32]).collect();
        assert_eq!(xy.read()?, want, "{device}: 64-bit i / w and i % w");
        Ok(())
    });
}

#[test]
fn chains_of_and_in_bounds_checks() {
    let _lib = library("bounds.cl", &[]);
    let (n, padded) = (1000usize, 1024usize);
    let xyz = Lcg(2).f32s(3 * padded, -1.0, 1.0);
    let (lo, hi) = (-0.5f32, 0.5f32);
    let (w, h, dx, dy) = (37usize, 23usize, 3i32, -2i32);
    let image: Vec<i32> = (0..(w * h) as i32).map(|v| v * 3 + 1).collect();
    on_both_devices(|device, q| {
        let points = q.buffer_from(&xyz)?;
        let inside = q.buffer::<i32>(padded)?;
        q.launch("in_box")
            .arg(&points)
            .arg(&inside)
            .arg(lo)
            .arg(hi)
            .arg(n as i32)
            .global([padded])
            .run()?;
        let want: Vec<i32> = (0..padded)
            .map(|i| i32::from(i < n && xyz[3 * i..3 * i + 3].iter().all(|&c| c >= lo && c < hi)))
            .collect();
        assert_eq!(inside.read()?, want, "{device}: in_box");
        assert!(want.contains(&1) && want[..n].contains(&0), "the points straddle the box");

        let (input, out) = (q.buffer_from(&image)?, q.buffer::<i32>(w * h)?);
        q.launch("shifted")
            .arg(&input)
            .arg(&out)
            .arg(w as i32)
            .arg(h as i32)
            .arg(dx)
            .arg(dy)
            .global([40, 24])
            .run()?;
        let want: Vec<i32> = (0..h as i32)
            .flat_map(|y| (0..w as i32).map(move |x| (x, y)))
            .map(|(x, y)| {
                let (sx, sy) = (x + dx, y + dy);
                if sx >= 0 && sy >= 0 && sx < w as i32 && sy < h as i32 {
                    image[sy as usize * w + sx as usize]
                } else {
                    0
                }
            })
            .collect();
        assert_eq!(out.read()?, want, "{device}: shifted");
        Ok(())
    });
}

/// C = alpha * A * B + beta * C in f64, row-major.
fn sgemm_reference(
    [m, n, k]: [usize; 3],
    a: &[f32],
    b: &[f32],
    c: &[f32],
    alpha: f32,
    beta: f32,
) -> (Vec<f64>, Vec<f64>) {
    let (mut want, mut scale) = (vec![0.0; m * n], vec![0.0; m * n]);
    for i in 0..m {
        for j in 0..n {
            let (mut sum, mut magnitude) = (0.0f64, 0.0f64);
            for p in 0..k {
                let term = f64::from(a[i * k + p]) * f64::from(b[p * n + j]);
                sum += term;
                magnitude += term.abs();
            }
            want[i * n + j] = f64::from(alpha) * sum + f64::from(beta) * f64::from(c[i * n + j]);
            scale[i * n + j] =
                f64::from(alpha.abs()) * magnitude + f64::from(beta.abs() * c[i * n + j].abs());
        }
    }
    (want, scale)
}

#[test]
fn register_blocked_sgemm() {
    // (tile -D values, per-work-item tile WPTM x WPTN, M, N, K)
    let shapes: [(&[&str], [usize; 2], [usize; 3]); 2] = [
        (&["-DTSM=64", "-DTSN=64", "-DTSK=16", "-DWPTM=8", "-DWPTN=8"], [8, 8], [128, 128, 128]),
        (&["-DTSM=32", "-DTSN=64", "-DTSK=8", "-DWPTM=4", "-DWPTN=8"], [4, 8], [64, 128, 96]),
    ];
    for (options, [wptm, wptn], [m, n, k]) in shapes {
        // Both configurations name their kernel `sgemm_tiled`: one library at a time.
        let _lib = library("sgemm.cl", options);
        let mut rng = Lcg(3);
        let (a, b, c) =
            (rng.f32s(m * k, -1.0, 1.0), rng.f32s(k * n, -1.0, 1.0), rng.f32s(m * n, -1.0, 1.0));
        let (alpha, beta) = (1.5f32, 0.5f32);
        let (want, scale) = sgemm_reference([m, n, k], &a, &b, &c, alpha, beta);
        on_both_devices(|device, q| {
            let (ab, bb, cb) = (q.buffer_from(&a)?, q.buffer_from(&b)?, q.buffer_from(&c)?);
            q.launch("sgemm_tiled")
                .arg(m as i32)
                .arg(n as i32)
                .arg(k as i32)
                .arg(&ab)
                .arg(&bb)
                .arg(&cb)
                .arg(alpha)
                .arg(beta)
                .global([n / wptn, m / wptm])
                .local([8, 8])
                .run()?;
            let what = format!("{device}: sgemm {m}x{n}x{k}, {wptm}x{wptn} per work-item");
            assert_close_scaled(&what, &f64s(&cb.read()?), &want, &scale, 1e-5);
            Ok(())
        });
    }
}

#[test]
fn nbody_step_with_local_tiles() {
    let _lib = library("nbody.cl", &["-DSOFTENING=0.01f", "-DUNROLL=4", "-cl-fast-relaxed-math"]);
    let (n, group, dt, softening) = (1024usize, 64usize, 0.01f32, 0.01f64);
    let mut rng = Lcg(4);
    let pos: Vec<f32> = (0..n)
        .flat_map(|_| {
            [rng.f32(-1.0, 1.0), rng.f32(-1.0, 1.0), rng.f32(-1.0, 1.0), rng.f32(0.5, 1.5)]
        })
        .collect();
    let vel: Vec<f32> = (0..n)
        .flat_map(|_| [rng.f32(-0.1, 0.1), rng.f32(-0.1, 0.1), rng.f32(-0.1, 0.1), 0.0])
        .collect();
    // Reference in f64; each component's tolerance scales with the sum of the magnitudes of
    // the terms it adds up (f32 sums of 1024 terms, and rsqrt under -cl-fast-relaxed-math).
    let (mut want_pos, mut want_vel, mut scale) =
        (vec![0.0f64; 4 * n], vec![0.0f64; 4 * n], vec![0.0f64; 4 * n]);
    let p = |i: usize, c: usize| f64::from(pos[4 * i + c]);
    for i in 0..n {
        let (mut acc, mut magnitude) = ([0.0f64; 3], 0.0f64);
        for j in 0..n {
            let d = [p(j, 0) - p(i, 0), p(j, 1) - p(i, 1), p(j, 2) - p(i, 2)];
            let inv = 1.0 / (d[0] * d[0] + d[1] * d[1] + d[2] * d[2] + softening).sqrt();
            let f = p(j, 3) * inv * inv * inv;
            for c in 0..3 {
                acc[c] += d[c] * f;
                magnitude += (d[c] * f).abs();
            }
        }
        for c in 0..4 {
            let v = f64::from(vel[4 * i + c]) + if c < 3 { acc[c] * f64::from(dt) } else { 0.0 };
            want_vel[4 * i + c] = v;
            want_pos[4 * i + c] = if c < 3 { p(i, c) + v * f64::from(dt) } else { p(i, 3) };
            scale[4 * i + c] = p(i, c).abs() + v.abs() + magnitude * f64::from(dt);
        }
    }
    on_both_devices(|device, q| {
        let (pb, vb) = (q.buffer_from(&pos)?, q.buffer_from(&vel)?);
        let (new_pos, new_vel) = (q.buffer::<f32>(4 * n)?, q.buffer::<f32>(4 * n)?);
        q.launch("nbody_step")
            .arg(&pb)
            .arg(&vb)
            .arg(&new_pos)
            .arg(&new_vel)
            .arg(Local::<f32>::new(4 * group))
            .arg(n as i32)
            .arg(dt)
            .global([n])
            .local([group])
            .run()?;
        assert_close_scaled(
            &format!("{device}: velocities"),
            &f64s(&new_vel.read()?),
            &want_vel,
            &scale,
            1e-4,
        );
        assert_close_scaled(
            &format!("{device}: positions"),
            &f64s(&new_pos.read()?),
            &want_pos,
            &scale,
            1e-4,
        );
        Ok(())
    });
}

/// What `VEC_BLOCK` (`tests/kernels/include/vec_block.h`) makes of blocks of 32 floats: each
/// element scaled by the width of the vector that moved it.
fn vec_block_reference(input: &[f32]) -> Vec<f32> {
    const WIDTH: [f32; 32] = [
        2., 2., 4., 4., 4., 4., 8., 8., 8., 8., 8., 8., 8., 8., 1., 1., 16., 16., 16., 16., 16.,
        16., 16., 16., 16., 16., 16., 16., 16., 16., 16., 16.,
    ];
    input.iter().enumerate().map(|(i, v)| v * WIDTH[i % 32]).collect()
}

/// Blocks of 32 floats (one per work-item) the vload kernels run over.
const VEC_BLOCKS: usize = 64;

/// Runs every kernel of `vload.cl` from the library's own bundle (the source is loaded twice,
/// as OpenCL C 1.2 and 2.0, and tests run in parallel: a launch by name could find the other
/// library's kernel) and checks each against the host.
fn check_vload_kernels(device: &str, q: &Queue, lib: &Library) -> Result<(), Error> {
    let exe = build(&lib.loaded.kernel_bundle(q), &[])?;
    let input = Lcg(5).f32s(32 * VEC_BLOCKS, -10.0, 10.0);
    let want = vec_block_reference(&input);
    let (inb, out) = (q.buffer_from(&input)?, q.buffer::<f32>(input.len())?);
    for kernel in ["vload_global", "vload_constant", "vload_private"] {
        out.write(&vec![0.0; input.len()])?;
        q.launch(kernel).arg(&inb).arg(&out).global([VEC_BLOCKS]).use_kernel_bundle(&exe).run()?;
        assert_eq!(out.read()?, want, "{device}: {kernel}");
    }
    out.write(&vec![0.0; input.len()])?;
    let group = 16;
    q.launch("vload_local")
        .arg(&inb)
        .arg(&out)
        .arg(Local::<f32>::new(2 * 32 * group))
        .global([VEC_BLOCKS])
        .local([group])
        .use_kernel_bundle(&exe)
        .run()?;
    assert_eq!(out.read()?, want, "{device}: vload_local");

    q.launch("vload_constant_table")
        .arg(&out)
        .global([VEC_BLOCKS])
        .use_kernel_bundle(&exe)
        .run()?;
    let table: Vec<f32> = (0..32).map(|j| j as f32 + 0.5).collect();
    let scaled = vec_block_reference(&table);
    let want_table: Vec<f32> =
        (0..32 * VEC_BLOCKS).map(|i| scaled[i % 32] + (i / 32) as f32).collect();
    assert_eq!(out.read()?, want_table, "{device}: vload_constant_table");

    let bytes: Vec<u8> = (0..1024u32).map(|i| (i * 7 % 256) as u8).collect();
    let (inb, outb) = (q.buffer_from(&bytes)?, q.buffer::<u8>(bytes.len())?);
    q.launch("brighten_u8")
        .arg(&inb)
        .arg(&outb)
        .arg(100u8)
        .global([bytes.len() / 16])
        .use_kernel_bundle(&exe)
        .run()?;
    assert_eq!(
        outb.read()?,
        bytes.iter().map(|b| b.saturating_add(100)).collect::<Vec<_>>(),
        "{device}: brighten_u8"
    );
    Ok(())
}

/// OpenCL C 1.2 has vloadN/vstoreN for each named address space, which both devices provide.
#[test]
fn vload_and_vstore_in_every_address_space() {
    let lib = library("vload.cl", &["-cl-std=CL1.2"]);
    on_both_devices(|device, q| check_vload_kernels(device, q, &lib));
}

/// Through generic pointers (OpenCL C 2.0): a helper whose unqualified pointers are generic,
/// given global ones; and `vload.cl` as OpenCL C 2.0, where clang-15's `opencl-c.h` declares
/// vloadN/vstoreN for generic and constant pointers only (the named-address-space overloads
/// need `__opencl_c_named_address_space_builtins`), so loads from global, local and private
/// pointers go through generic ones too. PoCL 3.1's kernel library has no generic overloads
/// (`Cannot find symbol _Z6vload4mPU3AS4Kf in kernel library`); the runtime is to provide
/// them. This test expects success on both devices.
#[test]
fn vload_and_vstore_through_generic_pointers() {
    let generic = library("vload_generic.cl", &[]);
    let cl20 = library("vload.cl", &[]);
    let input = Lcg(6).f32s(32 * VEC_BLOCKS, -10.0, 10.0);
    let want = vec_block_reference(&input);
    on_both_devices(|device, q| {
        let exe = build(&generic.loaded.kernel_bundle(q), &[])?;
        let (inb, out) = (q.buffer_from(&input)?, q.buffer::<f32>(input.len())?);
        q.launch("vload_generic")
            .arg(&inb)
            .arg(&out)
            .global([VEC_BLOCKS])
            .use_kernel_bundle(&exe)
            .run()?;
        assert_eq!(out.read()?, want, "{device}: vload_generic");
        check_vload_kernels(device, q, &cl20)
    });
}

#[test]
fn local_memory_parameters_with_barriers() {
    let bins = 32usize;
    let _lib = library("local_memory.cl", &[&format!("-DBINS={bins}")]);
    // Quarters up to 3.75: every partial sum is exact in f32, in any order.
    let n: usize = 1 << 16;
    let values: Vec<f32> = (0..n).map(|i| (i * 7 % 16) as f32 / 4.0).collect();
    let (global, group) = (1024usize, 64usize);
    let want_partial: Vec<f32> = (0..global / group)
        .map(|g| {
            (g * group..(g + 1) * group)
                .flat_map(|item| values.iter().skip(item).step_by(global))
                .sum()
        })
        .collect();
    let data: Vec<u32> = {
        let mut rng = Lcg(7);
        (0..10_000).map(|_| rng.next_u32()).collect()
    };
    let mut want_hist = vec![0u32; bins];
    for d in &data {
        want_hist[*d as usize % bins] += 1;
    }
    on_both_devices(|device, q| {
        let (inb, partial) = (q.buffer_from(&values)?, q.buffer::<f32>(global / group)?);
        q.launch("reduce_sum")
            .arg(&inb)
            .arg(&partial)
            .arg(Local::<f32>::new(group))
            .arg(n as i32)
            .global([global])
            .local([group])
            .run()?;
        assert_eq!(partial.read()?, want_partial, "{device}: reduce_sum");

        let (db, hist) = (q.buffer_from(&data)?, q.buffer_from(&vec![0u32; bins])?);
        q.launch("histogram")
            .arg(&db)
            .arg(data.len() as i32)
            .arg(&hist)
            .arg(Local::<u32>::new(bins))
            .global([global])
            .local([group])
            .run()?;
        assert_eq!(hist.read()?, want_hist, "{device}: histogram");
        Ok(())
    });
}

#[test]
fn atomics_on_global_and_local_memory() {
    let _lib = library("atomics.cl", &["-cl-std=CL1.2"]);
    let (n, group) = (4096usize, 64usize);
    let mut rng = Lcg(8);
    let values: Vec<i32> = (0..n).map(|_| rng.i32(-1000, 1000)).collect();
    let threshold = 500;
    let mut want_kept: Vec<i32> = values.iter().copied().filter(|&v| v > threshold).collect();
    want_kept.sort_unstable();
    // Small integers as floats: every sum is exact, whatever the order of the additions.
    let floats: Vec<f32> = (0..n).map(|i| (i % 7) as f32 - 3.0).collect();
    on_both_devices(|device, q| {
        let inb = q.buffer_from(&values)?;
        let (sum, count, kept) =
            (q.buffer_from(&[0i32])?, q.buffer_from(&[0u32])?, q.buffer::<i32>(n)?);
        q.launch("sum_and_compact")
            .arg(&inb)
            .arg(&sum)
            .arg(&count)
            .arg(&kept)
            .arg(threshold)
            .global([n])
            .run()?;
        assert_eq!(sum.read()?, [values.iter().sum::<i32>()], "{device}: atomic_add");
        let count = count.read()?[0] as usize;
        let mut got = kept.read()?[..count.min(n)].to_vec();
        got.sort_unstable();
        assert_eq!(got, want_kept, "{device}: atomic_inc compaction");

        let (fb, total) = (q.buffer_from(&floats)?, q.buffer_from(&[0.0f32.to_bits()])?);
        q.launch("float_sum_cmpxchg").arg(&fb).arg(&total).global([n]).local([group]).run()?;
        assert_eq!(
            f32::from_bits(total.read()?[0]),
            floats.iter().sum::<f32>(),
            "{device}: atomic_cmpxchg float sum"
        );

        let group_max = q.buffer::<i32>(n / group)?;
        let (max_all, min_all) = (q.buffer_from(&[i32::MIN])?, q.buffer_from(&[i32::MAX])?);
        q.launch("max_min")
            .arg(&inb)
            .arg(&group_max)
            .arg(&max_all)
            .arg(&min_all)
            .global([n])
            .local([group])
            .run()?;
        let want: Vec<i32> = values.chunks(group).map(|c| *c.iter().max().unwrap()).collect();
        assert_eq!(group_max.read()?, want, "{device}: local atomic_max");
        assert_eq!(max_all.read()?, [*values.iter().max().unwrap()], "{device}: global atomic_max");
        assert_eq!(min_all.read()?, [*values.iter().min().unwrap()], "{device}: global atomic_min");
        Ok(())
    });
}

#[test]
fn doubles_with_and_without_the_extension_pragma() {
    let n = 1000;
    let mut rng = Lcg(9);
    let xs: Vec<f64> = (0..n).map(|_| f64::from(rng.f32(0.1, 10.0)) + 1e-9).collect();
    let pairs: Vec<f64> = (0..4 * n).map(|_| f64::from(rng.f32(-1.0, 1.0)) / 3.0).collect();
    {
        let _lib = library("doubles_pragma.cl", &[]);
        let want: Vec<f64> = xs
            .iter()
            .map(|&x| x.sqrt() + (-x).exp() * x.mul_add(2.0, 1.0) + x.sin() / (1.0 + x * x))
            .collect();
        let (a, b) = pairs.split_at(2 * n);
        let want_dot: Vec<f64> =
            (0..n).map(|i| a[2 * i] * b[2 * i] + a[2 * i + 1] * b[2 * i + 1]).collect();
        on_both_devices(|device, q| {
            let (xb, out) = (q.buffer_from(&xs)?, q.buffer::<f64>(n)?);
            q.launch("double_math").arg(&xb).arg(&out).global([n]).run()?;
            assert_close(&format!("{device}: double_math"), &out.read()?, &want, 1e-13);
            let (ab, bb) = (q.buffer_from(a)?, q.buffer_from(b)?);
            q.launch("double_dot").arg(&ab).arg(&bb).arg(&out).global([n]).run()?;
            assert_close(&format!("{device}: double_dot"), &out.read()?, &want_dot, 1e-15);
            Ok(())
        });
    }
    let _lib = library("doubles_plain.cl", &[]);
    let x: Vec<f32> = (0..n).map(|i| i as f32 / 100.0 - 5.0).collect();
    let coeffs = [1.0, -0.5, 1.0 / 3.0, 0.25, -0.2, 1.0 / 7.0];
    let degree = coeffs.len() - 1;
    let want: Vec<f64> =
        x.iter().map(|&v| coeffs.iter().rev().fold(0.0, |acc, c| acc * f64::from(v) + c)).collect();
    on_both_devices(|device, q| {
        let (xb, cb) = (q.buffer_from(&x)?, q.buffer_from(&coeffs)?);
        let (out, out_f) = (q.buffer::<f64>(n)?, q.buffer::<f32>(n)?);
        q.launch("horner")
            .arg(&xb)
            .arg(&cb)
            .arg(degree as i32)
            .arg(&out)
            .arg(&out_f)
            .global([n])
            .run()?;
        // Contracting `acc * v + c` into fma is allowed, hence a few ulps.
        let got = out.read()?;
        assert_close(&format!("{device}: horner"), &got, &want, 1e-13);
        assert_close(&format!("{device}: convert_float"), &f64s(&out_f.read()?), &want, 1e-7);
        Ok(())
    });
}

#[test]
fn stencil_with_a_header_from_the_include_path() {
    let _lib = library("stencil.cl", &[]);
    let (w, h) = (64usize, 48usize);
    let input = Lcg(10).f32s(w * h, 0.0, 1.0);
    let want: Vec<f64> = (0..w * h)
        .map(|i| {
            let (x, y) = (i % w, i / w);
            let interior = x > 0 && y > 0 && x < w - 1 && y < h - 1;
            let v = if interior {
                0.5 * input[i] + 0.125 * (input[i - 1] + input[i + 1] + input[i - w] + input[i + w])
            } else {
                input[i]
            };
            f64::from(v)
        })
        .collect();
    on_both_devices(|device, q| {
        let (inb, out) = (q.buffer_from(&input)?, q.buffer::<f32>(w * h)?);
        q.launch("stencil5")
            .arg(&inb)
            .arg(&out)
            .arg(w as i32)
            .arg(h as i32)
            .global([w, h])
            .run()?;
        assert_close(&format!("{device}: stencil5"), &f64s(&out.read()?), &want, 1e-6);
        Ok(())
    });
}

#[test]
fn libraries_built_with_debug_information_link_across_libraries() {
    // Debug information's ids cannot be renumbered by a link: it is dropped from programs
    // linked from several images (PoCL links them itself), and line information stays.
    let helper = library("debug_helper.cl", &["-g"]);
    let kernel = library("debug_kernel.cl", &["-g"]);
    on_both_devices(|_, q| {
        let (width, rows) = (8, 4);
        let input: Vec<f32> = (0..width * rows).map(|i| i as f32).collect();
        let x = q.buffer_from(&input)?;
        let out = q.buffer::<f32>(rows)?;
        q.launch("row_sums").arg(&x).arg(&out).arg(width as i32).global([rows]).run()?;
        let expected: Vec<f32> = input.chunks(width).map(|r| r.iter().sum::<f32>() * 0.5).collect();
        assert_eq!(out.read()?, expected);
        Ok(())
    });
    drop((kernel, helper));
}
