//! A Rust device crate ([`crate::Build::rust_crate`]) made relocatable SPIR-V, as an OpenCL C
//! source is: the rest of the toolkit (the link, the post-link, every target's images, the
//! runtime) cannot tell the two apart.
//!
//! 1. cargo-web and rustc-web (Debian's Rust 1.96, whose library sources `rust-web-src` ships)
//!    build the crate for `nvptx64-nvidia-cuda` with `-Zbuild-std=core`, through a wrapper
//!    package in the build's work directory (a `cdylib` with `panic = "abort"` and fat LTO),
//!    which keeps the user's tree free of lock files and targets; rustc writes the module's
//!    LLVM IR after LTO (`--emit=llvm-ir`), and `-C linker=true` stands in for the bitcode
//!    linker nobody ships.
//! 2. [`ir::rewrite`] makes that IR SPIR's (generic pointers, `spir_func`, kernels).
//! 3. `llc-22 -mtriple=spirv64-unknown-unknown` writes SPIR-V 1.4.
//! 4. [`spirv::fix_up`] gives exported and imported functions the pointer types their Rust
//!    signatures say ([`signature`]), and the `sycl-external` marker.
//! 5. `llvm-spirv-15 -r` reads the result back, as PoCL's path and the `ptx64` target will.

pub(crate) mod ir;
pub(crate) mod signature;
pub(crate) mod spirv;

use std::fs;
use std::path::{Path, PathBuf};
use std::process::Command;

use crate::tool::{Tool, ToolFile};
use crate::{run, write_file, write_if_changed, Error};

use signature::Signatures;

/// The device crate compiles for this target; its IR is rewritten for SPIR-V.
const RUST_TARGET: &str = "nvptx64-nvidia-cuda";

/// How the wrapper package's library is named: `sycl_device_unit_HASH` (of the crate's
/// path), its IR `deps/sycl_device_unit_HASH.ll`, one per crate in a shared target directory.
const WRAPPER: &str = "sycl_device_unit";

/// The device build's profile, on cargo's command line, where no `.cargo/config.toml` of the
/// user's (which cargo reads from the work directory's ancestors) overrides it: fat LTO makes
/// the crate, `core` and its dependencies one module; without it `core`'s functions would be
/// imports nothing resolves.
const PROFILE: &[&str] = &[
    "profile.release.panic=\"abort\"",
    "profile.release.lto=\"fat\"",
    "profile.release.codegen-units=1",
    "profile.release.opt-level=3",
    "profile.release.debug=false",
    "profile.release.debug-assertions=false",
    "profile.release.overflow-checks=false",
    "profile.release.incremental=false",
    "build.rustc-wrapper=\"\"",
];

/// The tools a Rust device crate needs, found once a build.
pub(crate) struct RustTools {
    rustc: PathBuf,
    cargo: PathBuf,
    llc: PathBuf,
    /// The translator every OpenCL C source goes through, which reads the SPIR-V back.
    llvm_spirv: PathBuf,
}

impl RustTools {
    /// rustc-web's rustc with its library sources, cargo-web's cargo and `llc-22`; an error
    /// naming the Debian package of the first one missing. `llvm_spirv` is the build's.
    pub(crate) fn find(cargo_lines: bool, llvm_spirv: PathBuf) -> Result<RustTools, Error> {
        let rustc = ToolFile::RUSTC_WEB.find(None, cargo_lines)?;
        let sysroot = rustc.parent().and_then(Path::parent).unwrap_or(Path::new("/"));
        let core = sysroot.join("lib/rustlib/src/rust/library/core/src/lib.rs");
        if !core.is_file() {
            return Err(Error::ToolNotFound {
                tool: "rust-web-src",
                hint: format!(
                    "{} is not a file: `-Zbuild-std=core` needs the library sources of {}; install the Debian package `rust-web-src` (apt-get install rust-web-src)",
                    core.display(),
                    rustc.display()
                ),
            });
        }
        Ok(RustTools {
            rustc,
            cargo: ToolFile::CARGO_WEB.find(None, cargo_lines)?,
            llc: Tool::LLC_22.find(None, cargo_lines)?,
            llvm_spirv,
        })
    }
}

/// One Rust device crate's SPIR-V, and the module read from it.
pub(crate) struct RustUnit {
    pub(crate) spirv: Vec<u8>,
    pub(crate) module: sycl_spirv::dr::Module,
}

/// Builds the device crate at `crate_dir` in `work` (the module doc says how). With
/// `cargo_lines`, prints `cargo:rerun-if-changed` for each of its sources.
pub(crate) fn compile(
    tools: &RustTools,
    crate_dir: &Path,
    work: &Path,
    cargo_lines: bool,
) -> Result<RustUnit, Error> {
    let (ll, signatures) = rustc_ir(tools, crate_dir, work, cargo_lines)?;
    let ir = fs::read_to_string(&ll).map_err(|error| Error::Io { path: ll.clone(), error })?;
    let rewritten = ir::rewrite(&ir, &signatures).map_err(|e| Error::Compile {
        source_path: crate_dir.to_path_buf(),
        command: format!("rewriting {} for SPIR-V", ll.display()),
        stderr: e.0,
    })?;
    let spir_ll = work.join("unit.spir.ll");
    write_file(&spir_ll, rewritten.ir.as_bytes())?;
    let llc_spv = work.join("unit.llc.spv");
    run(
        Command::new(&tools.llc)
            .args(["-mtriple=spirv64-unknown-unknown", "-O2", "-filetype=obj"])
            .arg(&spir_ll)
            .arg("-o")
            .arg(&llc_spv),
        crate_dir,
    )?;
    let bytes = fs::read(&llc_spv).map_err(|error| Error::Io { path: llc_spv.clone(), error })?;
    let invalid =
        |error| Error::InvalidSpirv { source_path: crate_dir.to_path_buf(), tool: "llc-22", error };
    let mut module = sycl_spirv::load(&bytes).map_err(invalid)?;
    let unsigned = spirv::fix_up(&mut module, &signatures, &rewritten.exports, &rewritten.kernels);
    for name in unsigned.iter().filter(|_| cargo_lines) {
        println!(
            "cargo:warning=sycl-build: {}: no Rust signature of `{name}` found in the crate's sources (one `fn {name}(…)` with its parameters' types): its pointer parameters keep llc-22's guess of their pointee",
            crate_dir.display()
        );
    }
    let spirv = sycl_spirv::assemble(&module);
    let module = sycl_spirv::load(&spirv).map_err(|error| Error::InvalidSpirv {
        source_path: crate_dir.to_path_buf(),
        tool: "sycl-build's fix-up of llc-22's SPIR-V",
        error,
    })?;
    read_back(tools, crate_dir, work, &spirv)?;
    Ok(RustUnit { spirv, module })
}

/// Builds the crate for the device through the wrapper package (the module doc says how):
/// rustc's IR after LTO (`deps/LIB.ll`), and the signatures of the sources it was made from.
/// With `cargo_lines`, prints `cargo:rerun-if-changed` for each of them and the manifest.
fn rustc_ir(
    tools: &RustTools,
    crate_dir: &Path,
    work: &Path,
    cargo_lines: bool,
) -> Result<(PathBuf, Signatures), Error> {
    let manifest = crate_dir.join("Cargo.toml");
    let package = package_name(&manifest)?;
    let lib = format!("{WRAPPER}_{:016x}", fnv1a(crate_dir.as_os_str().as_encoded_bytes()));
    let wrapper = work.join("wrapper");
    write_if_changed(
        &wrapper.join("Cargo.toml"),
        wrapper_manifest(crate_dir, &package, &lib).as_bytes(),
    )?;
    write_if_changed(&wrapper.join("lib.rs"), b"#![no_std]\npub extern crate device;\n")?;
    let target_dir = shared_target_dir(work);
    let mut cmd = Command::new(&tools.cargo);
    cmd.args(["rustc", "--quiet", "--release", "--lib", "--target", RUST_TARGET])
        .args(["-Zbuild-std=core", "--manifest-path"])
        .arg(wrapper.join("Cargo.toml"))
        .arg("--target-dir")
        .arg(&target_dir)
        .args(PROFILE.iter().flat_map(|setting| ["--config", setting]))
        .args(["--", "--emit=llvm-ir,link", "-Clinker=true"])
        .current_dir(&wrapper)
        .env("RUSTC", &tools.rustc)
        .env("RUSTC_BOOTSTRAP", "1")
        .env("CARGO_ENCODED_RUSTFLAGS", "-Ctarget-cpu=sm_70");
    // What cargo tells this build script about the host build is not the device's.
    for var in HOST_BUILD_VARS {
        cmd.env_remove(var);
    }
    // The host's own build scripts (core's `compiler_builtins` has one) link with the host's
    // C compiler, not with a linker the user's `.cargo/config.toml` above the work directory
    // names for their own crates (`sycl-ld`).
    if let Ok(host) = std::env::var("HOST") {
        let key = host.to_uppercase().replace(['-', '.'], "_");
        cmd.env(format!("CARGO_TARGET_{key}_LINKER"), "cc");
        cmd.env(format!("CARGO_TARGET_{key}_RUSTFLAGS"), "");
    }
    run(&mut cmd, crate_dir)?;

    let out = target_dir.join(RUST_TARGET).join("release");
    let mut signatures = Signatures::default();
    for source in &dep_info(&out.join(format!("{lib}.d")))? {
        if cargo_lines {
            println!("cargo:rerun-if-changed={}", source.display());
        }
        if let Ok(text) = fs::read_to_string(source) {
            signatures.add_source(&text);
        }
    }
    if cargo_lines {
        println!("cargo:rerun-if-changed={}", manifest.display());
    }
    Ok((out.join("deps").join(format!("{lib}.ll")), signatures))
}

/// What cargo tells a build script about the host's build, which the device build must not
/// take.
const HOST_BUILD_VARS: &[&str] = &[
    "RUSTFLAGS",
    "RUSTC_WRAPPER",
    "RUSTC_WORKSPACE_WRAPPER",
    "CARGO_TARGET_DIR",
    "CARGO_BUILD_TARGET",
    "CARGO_BUILD_RUSTFLAGS",
    "CARGO_PROFILE_RELEASE_LTO",
    "CARGO_PROFILE_RELEASE_STRIP",
    "CARGO_PROFILE_RELEASE_DEBUG",
    "CARGO_PROFILE_RELEASE_PANIC",
    "CARGO_PROFILE_RELEASE_OPT_LEVEL",
    "CARGO_PROFILE_RELEASE_CODEGEN_UNITS",
    "CARGO_INCREMENTAL",
];

/// `spirv` read back by `llvm-spirv-15 -r`, as PoCL and the `ptx64` target will read it: what
/// it cannot read fails here, naming the crate, rather than on a device at run time.
fn read_back(tools: &RustTools, crate_dir: &Path, work: &Path, spirv: &[u8]) -> Result<(), Error> {
    let unit_spv = work.join("unit.spv");
    write_file(&unit_spv, spirv)?;
    let mut cmd = Command::new(&tools.llvm_spirv);
    cmd.arg("-r").arg(&unit_spv).arg("-o").arg(work.join("unit.check.bc"));
    run(&mut cmd, crate_dir).map(drop).map_err(|e| match e {
        Error::Compile { source_path, command, stderr } => Error::Compile {
            source_path,
            command,
            stderr: format!(
                "{stderr}\nthe crate's SPIR-V ({}) holds what LLVM 15's translator cannot read back; PoCL and the ptx64 target need it to",
                unit_spv.display()
            ),
        },
        other => other,
    })
}

/// The wrapper package's manifest: a `cdylib` of the user's crate.
fn wrapper_manifest(crate_dir: &Path, package: &str, lib: &str) -> String {
    format!(
        r#"# Written by sycl-build: the device build of {dir}.
[package]
name = "{package_name}"
version = "0.0.0"
edition = "2021"
publish = false

[lib]
name = "{lib}"
path = "lib.rs"
crate-type = ["cdylib"]

[dependencies]
device = {{ path = {dir:?}, package = {package:?} }}

# Its profile is on cargo's command line (PROFILE in sycl-build/src/rust/mod.rs).

[workspace]
"#,
        dir = crate_dir.display().to_string(),
        package_name = lib.replace('_', "-"),
    )
}

/// Where cargo builds device crates: beside the host's build directories
/// (`target/debug/sycl-rust-device`, from `OUT_DIR`, which is `target/debug/build/PKG/out`),
/// so that every package of a workspace shares one build of `core` (cargo locks the directory
/// while it builds); else in `work`.
fn shared_target_dir(work: &Path) -> PathBuf {
    let profile_dir = std::env::var_os("OUT_DIR").map(PathBuf::from).and_then(|out| {
        let build = out.parent()?.parent()?;
        (build.file_name()? == "build").then(|| build.parent().map(Path::to_path_buf))?
    });
    match profile_dir {
        Some(dir) => dir.join("sycl-rust-device"),
        None => work.join("target"),
    }
}

/// FNV-1a, 64 bits: a name that stays the same for the same path.
fn fnv1a(bytes: &[u8]) -> u64 {
    bytes
        .iter()
        .fold(0xcbf2_9ce4_8422_2325, |h, b| (h ^ u64::from(*b)).wrapping_mul(0x0100_0000_01b3))
}

/// The device crate's package name.
fn package_name(manifest: &Path) -> Result<String, Error> {
    let text =
        fs::read_to_string(manifest).map_err(|error| Error::Io { path: manifest.into(), error })?;
    let table: toml::Table = text.parse().map_err(|e: toml::de::Error| Error::Compile {
        source_path: manifest.into(),
        command: "reading the device crate's manifest".into(),
        stderr: e.to_string(),
    })?;
    match table.get("package").and_then(|p| p.get("name")).and_then(|n| n.as_str()) {
        Some(package) => Ok(package.to_string()),
        None => Err(Error::Compile {
            source_path: manifest.into(),
            command: "reading the device crate's manifest".into(),
            stderr: "no [package] name: a Rust device crate is a package with a library".into(),
        }),
    }
}

/// The sources a dep-info file's first rule lists (cargo writes one rule, then an empty one
/// per source), less the Rust library's own.
fn dep_info(path: &Path) -> Result<Vec<PathBuf>, Error> {
    let text = fs::read_to_string(path).map_err(|error| Error::Io { path: path.into(), error })?;
    let first = text.lines().next().unwrap_or_default();
    let deps = first.split_once(": ").map_or("", |(_, d)| d);
    Ok(crate::depfile_paths(deps)
        .into_iter()
        .filter(|d| !d.to_string_lossy().contains("/lib/rustlib/src/"))
        .collect())
}
