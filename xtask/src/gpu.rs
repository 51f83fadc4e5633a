//! `cargo xtask gpu-pack DIR`: the PTX that the `ptx64` target makes for a set of real device
//! code, written out for `scripts/gpu/ptx-check.sh` to link, load and run on an NVIDIA GPU
//! through the CUDA driver (a machine without Rust or LLVM).
//!
//! Each unit below is compiled by `sycl_build::Build` for the `spir64` and `ptx64` targets,
//! linked through `sycl-ld` into a shared library as cargo would link a crate, and the image
//! set embedded in that library is decoded: every PTX image becomes `DIR/UNIT.N.ptx`, and
//! `DIR/manifest.txt` says what each one holds, one fact a line:
//!
//! ```text
//! image UNIT.N.ptx UNIT
//! kernel NAME          a `.visible .entry`
//! export NAME          a `.visible .func` other images may call
//! import NAME          an `.extern .func` another image must provide (imports, and the
//!                      functions of virtual-function sets the image's tables name)
//! dummy                the image is a virtual-function set's dummy (empty bodies)
//! param KERNEL INDEX KIND SIZE TYPE NAME
//! ```
//!
//! The units are the kernels of `tests/kernels/` with the options `tests/tests/real_world.rs`
//! builds them with, and `scripts/gpu/device/`: a library whose exports another library's
//! kernels call (`xlib` and `xapp`), and calls through function pointers into an outlined
//! virtual-function set (`vf`).

use std::fs;
use std::path::{Path, PathBuf};
use std::process::Command;

use anyhow::{bail, Context, Result};
use object::{Object, ObjectSection};
use sycl_format::{ImageFormat, ImageSet, Target};

use crate::{cargo, describe, repo_root, run_captured, run_checked};

/// One unit: its name, its sources (from the repository root) and its compiler options.
struct Unit {
    name: &'static str,
    sources: &'static [&'static str],
    options: &'static [&'static str],
}

const KERNELS_INCLUDE: &str = "-Itests/kernels/include";

const UNITS: &[Unit] = &[
    Unit {
        name: "xlib",
        sources: &["scripts/gpu/device/xlib.cl", "scripts/gpu/device/xgeo.clcpp"],
        options: &[],
    },
    Unit {
        name: "xapp",
        sources: &["scripts/gpu/device/xapp.cl", "scripts/gpu/device/xdots.clcpp"],
        options: &[],
    },
    Unit { name: "vf", sources: &["scripts/gpu/device/vf.cl"], options: &[] },
    Unit {
        name: "sgemm_64x64",
        sources: &["tests/kernels/sgemm.cl"],
        options: &["-DTSM=64", "-DTSN=64", "-DTSK=16", "-DWPTM=8", "-DWPTN=8"],
    },
    Unit {
        name: "sgemm_32x64",
        sources: &["tests/kernels/sgemm.cl"],
        options: &["-DTSM=32", "-DTSN=64", "-DTSK=8", "-DWPTM=4", "-DWPTN=8"],
    },
    Unit {
        name: "nbody",
        sources: &["tests/kernels/nbody.cl"],
        options: &["-DSOFTENING=0.01f", "-DUNROLL=4", "-cl-fast-relaxed-math"],
    },
    Unit {
        name: "local_memory",
        sources: &["tests/kernels/local_memory.cl"],
        options: &["-DBINS=32"],
    },
    Unit { name: "atomics", sources: &["tests/kernels/atomics.cl"], options: &["-cl-std=CL1.2"] },
    Unit {
        name: "vload12",
        sources: &["tests/kernels/vload.cl"],
        options: &[KERNELS_INCLUDE, "-cl-std=CL1.2"],
    },
    Unit { name: "vload20", sources: &["tests/kernels/vload.cl"], options: &[KERNELS_INCLUDE] },
    Unit {
        name: "vload_generic",
        sources: &["tests/kernels/vload_generic.cl"],
        options: &[KERNELS_INCLUDE],
    },
    Unit { name: "divrem", sources: &["tests/kernels/divrem.cl"], options: &[] },
    Unit { name: "bounds", sources: &["tests/kernels/bounds.cl"], options: &[] },
    Unit { name: "stencil", sources: &["tests/kernels/stencil.cl"], options: &[KERNELS_INCLUDE] },
    Unit { name: "doubles_pragma", sources: &["tests/kernels/doubles_pragma.cl"], options: &[] },
    Unit { name: "doubles_plain", sources: &["tests/kernels/doubles_plain.cl"], options: &[] },
];

/// Builds `sycl-ld`, then every unit, and writes the PTX images and the manifest to `dir`.
pub(crate) fn gpu_pack(dir: &Path) -> Result<()> {
    let root = repo_root();
    run_checked(cargo().args(["build", "-p", "sycl-ld"]).current_dir(&root))?;
    let sycl_ld = root.join("target/debug/sycl-ld");
    fs::create_dir_all(dir).with_context(|| format!("making {}", dir.display()))?;
    for entry in fs::read_dir(dir)? {
        let path = entry?.path();
        if path.extension().is_some_and(|e| e == "ptx") {
            fs::remove_file(&path)?;
        }
    }
    let work = std::env::temp_dir().join(format!("sycl-gpu-pack-{}", std::process::id()));
    fs::create_dir_all(&work)?;
    let mut manifest =
        String::from("# made by `cargo xtask gpu-pack`: see xtask/src/gpu.rs for the format\n");
    let mut count = 0;
    for unit in UNITS {
        let library = build_unit(unit, &root, &work, &sycl_ld)
            .with_context(|| format!("unit {}", unit.name))?;
        let set = image_set(&library)?;
        let mut index = 0;
        for image in set.images.iter().filter(|i| i.format == ImageFormat::Ptx) {
            let file = format!("{}.{index}.ptx", unit.name);
            index += 1;
            let text = std::str::from_utf8(&image.data).context("PTX that is not UTF-8")?;
            fs::write(dir.join(&file), text)?;
            manifest.push_str(&format!("image {file} {}\n", unit.name));
            for kernel in &image.kernels {
                manifest.push_str(&format!("kernel {kernel}\n"));
            }
            for export in image.exported_symbols() {
                manifest.push_str(&format!("export {export}\n"));
            }
            for import in externs(text) {
                manifest.push_str(&format!("import {import}\n"));
            }
            if image.virtual_functions_set().is_some_and(|(_, dummy)| dummy) {
                manifest.push_str("dummy\n");
            }
            for kernel in &image.kernels {
                let Some(params) = image.kernel_params(kernel) else { continue };
                let params = params.map_err(anyhow::Error::msg)?;
                for (i, p) in params.iter().enumerate() {
                    let ty = p.ty.replace(' ', "_");
                    let name = if p.name.is_empty() { "-" } else { &p.name };
                    manifest.push_str(&format!(
                        "param {kernel} {i} {:?} {} {ty} {name}\n",
                        p.kind, p.size
                    ));
                }
            }
            count += 1;
        }
        if index == 0 {
            bail!("unit {}: no PTX image", unit.name);
        }
    }
    fs::write(dir.join("manifest.txt"), manifest)?;
    let _ = fs::remove_dir_all(&work);
    println!("xtask: {count} PTX images of {} units in {}", UNITS.len(), dir.display());
    Ok(())
}

/// Compiles a unit and links it through `sycl-ld` into `work/libUNIT.so`.
fn build_unit(unit: &Unit, root: &Path, work: &Path, sycl_ld: &Path) -> Result<PathBuf> {
    let mut build = sycl_build::Build::new();
    build.cargo_metadata(false).out_dir(work.join(format!("out-{}", unit.name)));
    build.targets([Target::Spir64, Target::Ptx64]);
    for source in unit.sources {
        build.file(root.join(source));
    }
    for option in unit.options {
        match option.strip_prefix("-I") {
            Some(dir) => build.include(root.join(dir)),
            None => build.flag(option),
        };
    }
    let compiled = build.try_compile(unit.name)?;
    for line in &compiled.compiler_warnings {
        eprintln!("{}: {line}", unit.name);
    }
    let library = work.join(format!("lib{}.so", unit.name));
    let mut link = Command::new(sycl_ld);
    link.arg(&compiled.archive).args(["-shared", "-nostdlib", "-o"]).arg(&library);
    link.env_remove("SYCL_LD_LINKER").env_remove("SYCL_LD_SPLIT");
    let output = run_captured(&mut link)?;
    let warnings = String::from_utf8_lossy(&output.stderr);
    for line in warnings.lines() {
        eprintln!("{}: {line}", unit.name);
    }
    if !library.is_file() {
        bail!("{} wrote no {}", describe(&link), library.display());
    }
    Ok(library)
}

/// The image set a binary carries in its note section.
pub(crate) fn image_set(file: &Path) -> Result<ImageSet> {
    let bytes = fs::read(file)?;
    let obj = object::File::parse(&*bytes)?;
    let section =
        obj.section_by_name(sycl_format::IMAGE_NOTE_SECTION).context("no device images")?;
    let notes = sycl_format::find_notes(section.data()?, sycl_format::NOTE_TYPE_IMAGES, 4)
        .map_err(|e| anyhow::anyhow!("{e:?}"))?;
    let note = notes.first().context("no image-set note")?;
    ImageSet::decode(note).map_err(|e| anyhow::anyhow!("{}: {e:?}", file.display()))
}

/// The names a PTX module declares `.extern .func`: what the CUDA link must find elsewhere.
fn externs(ptx: &str) -> Vec<String> {
    let mut names = Vec::new();
    for line in ptx.lines() {
        let Some(rest) = line.trim_start().strip_prefix(".extern .func") else { continue };
        let mut rest = rest.trim_start();
        if rest.starts_with('(') {
            // The return value's parameter list comes first.
            let Some(close) = rest.find(')') else { continue };
            rest = rest[close + 1..].trim_start();
        }
        let name: String = rest
            .chars()
            .take_while(|c| c.is_ascii_alphanumeric() || *c == '_' || *c == '$')
            .collect();
        if !name.is_empty() && !names.contains(&name) {
            names.push(name);
        }
    }
    names
}

#[cfg(test)]
mod tests {
    use super::externs;

    #[test]
    fn externs_are_read_with_and_without_a_return_value() {
        let ptx = ".extern .func  (.param .b32 func_retval0) lib_scale\n(\n\t.param .b32 lib_scale_param_0\n)\n;\n\
                   .extern .func twice\n(\n)\n;\n.visible .func other()\n";
        assert_eq!(externs(ptx), ["lib_scale", "twice"]);
    }
}
