//! Compile device sources from `build.rs`, the way `cc::Build` compiles C.
//!
//! ```no_run
//! // build.rs
//! sycl_build::Build::new().file("src/kernels.cl").compile("app");
//! ```
//!
//! Each `.cl` (OpenCL C) or `.clcpp` (C++ for OpenCL) source becomes relocatable SPIR-V
//! (clang-15, opt-15, then llvm-spirv-15), wrapped as a device object in a static archive that cargo
//! links into the crate like any native library. The archive rides along in the crate's rlib,
//! so a crate used as a dependency brings its device code to the final link, where `sycl-ld`
//! finds it. The builder also writes `$OUT_DIR/sycl-kernels-NAME.rs` with one constant per
//! kernel and a typed launcher for each kernel whose parameters Rust types can stand for, for
//! `sycl_runtime::include_kernels!("NAME")`.
//!
//! Sources include `<sycl/device.h>` for `SYCL_EXTERNAL`.

mod archive;
mod codegen;
mod elf;
mod rust;
mod tool;
mod translate;

use std::env;
use std::ffi::OsString;
use std::fs;
use std::path::{Path, PathBuf};
use std::process::Command;

use sycl_format::aspects::aspect_name;
use sycl_format::{DeviceConfig, DeviceObject, DEVICE_OBJECT_MEMBER_PREFIX, DEVICE_OBJECT_SECTION};
use sycl_spirv::Features;

use codegen::DeviceInterface;

pub use sycl_format::{SplitMode, Target, DEFAULT_DEVICE_CONFIG};
pub use tool::{Package, Tool, ToolFile};
pub use translate::Untranslatable;

/// Targets images can be built for ([`Target::BUILDABLE`]): `spir64` (SPIR-V, compiled by the
/// driver at run time), `intel_cpu_x86_64` (the Intel CPU OpenCL runtime's program binaries,
/// made at link time), `pocl_cpu` (SPIR bitcode, which PoCL builds), `ptx64` (PTX for NVIDIA
/// GPUs through the CUDA driver, made at link time with LLVM 16 and libclc), and
/// `nvidia_gpu_sm_XX` (native code for one NVIDIA architecture, made from that PTX by `ptxas`).
pub const TARGETS: &[Target] = Target::BUILDABLE;

/// SPIR-V extensions the translator may use: function pointers, for virtual functions.
const SPIRV_EXTENSIONS: &str = "--spirv-ext=+SPV_INTEL_function_pointers";

/// Keeps each kernel's `kernel_arg_type_qual` (and `kernel_arg_type`) metadata, which SPIR-V
/// has no place for, as an `OpString`: `sycl-spirv` reads from it which pointer parameters
/// point at `const` memory, so that the runtime knows what a launch only reads. Drivers and
/// `llvm-spirv -r` take the strings as they take any other.
const KEEP_ARG_TYPE_QUALIFIERS: &str = "--preserve-ocl-kernel-arg-type-metadata-through-string";

/// What `opt-15` runs between the front end and the translator: LLVM 15's `default<O2>`
/// pipeline, as `opt-15 -passes='default<O2>' -print-pipeline-passes` prints it, less five
/// passes. Four write what llvm-spirv-15 cannot translate: `div-rem-pairs` (a `freeze` after
/// `x / n` beside `x % n`), `loop-vectorize`, `slp-vectorizer` (`<64 x float>` from a register
/// tile, `freeze <4 x i1>` from a chain of `&&`) and `vector-combine`. The fifth,
/// `elim-avail-extern`, would leave a C99 `inline` function that was not inlined everywhere a
/// declaration without a definition (drivers build such programs; the translator's `Import`
/// on its body is undone by `localize_inline_definitions`). The devices' compilers vectorise
/// for themselves; Intel's CPU runtime needs the rest of the pipeline to see through
/// index arithmetic (without it, gathers: `runtime/benches/kernel_time.rs`).
const OPT_PIPELINE: &str = concat!(
    "verify,annotation2metadata,forceattrs,inferattrs,coro-early,",
    "function<eager-inv>(lower-expect,",
    "simplifycfg<bonus-inst-threshold=1;no-forward-switch-cond;no-switch-range-to-icmp;no-switch-to-lookup;keep-loops;no-hoist-common-insts;no-sink-common-insts>,",
    "sroa,early-cse<>),openmp-opt,ipsccp,called-value-propagation,globalopt,",
    "function(mem2reg),deadargelim,function<eager-inv>(instcombine,",
    "simplifycfg<bonus-inst-threshold=1;no-forward-switch-cond;switch-range-to-icmp;no-switch-to-lookup;keep-loops;no-hoist-common-insts;no-sink-common-insts>),",
    "require<globals-aa>,function(invalidate<aa>),require<profile-summary>,",
    "cgscc(devirt<4>(inline<only-mandatory>,inline,function-attrs,openmp-opt-cgscc,",
    "function<eager-inv>(sroa,early-cse<memssa>,speculative-execution,jump-threading,",
    "correlated-propagation,",
    "simplifycfg<bonus-inst-threshold=1;no-forward-switch-cond;switch-range-to-icmp;no-switch-to-lookup;keep-loops;no-hoist-common-insts;no-sink-common-insts>,",
    "instcombine,libcalls-shrinkwrap,tailcallelim,",
    "simplifycfg<bonus-inst-threshold=1;no-forward-switch-cond;switch-range-to-icmp;no-switch-to-lookup;keep-loops;no-hoist-common-insts;no-sink-common-insts>,",
    "reassociate,require<opt-remark-emit>,loop-mssa(loop-instsimplify,loop-simplifycfg,",
    "licm<no-allowspeculation>,loop-rotate,licm<allowspeculation>,",
    "simple-loop-unswitch<no-nontrivial;trivial>),",
    "simplifycfg<bonus-inst-threshold=1;no-forward-switch-cond;switch-range-to-icmp;no-switch-to-lookup;keep-loops;no-hoist-common-insts;no-sink-common-insts>,",
    "instcombine,loop(loop-idiom,indvars,loop-deletion,loop-unroll-full),sroa,",
    "mldst-motion<no-split-footer-bb>,gvn<>,sccp,bdce,instcombine,jump-threading,",
    "correlated-propagation,adce,memcpyopt,dse,loop-mssa(licm<allowspeculation>),coro-elide,",
    "simplifycfg<bonus-inst-threshold=1;no-forward-switch-cond;switch-range-to-icmp;no-switch-to-lookup;keep-loops;hoist-common-insts;sink-common-insts>,",
    "instcombine),coro-split)),coro-cleanup,globalopt,globaldce,",
    "rpo-function-attrs,recompute-globalsaa,function<eager-inv>(float2int,",
    "lower-constant-intrinsics,loop(loop-rotate,loop-deletion),loop-distribute,",
    "inject-tli-mappings,loop-load-elim,instcombine,",
    "simplifycfg<bonus-inst-threshold=1;forward-switch-cond;switch-range-to-icmp;switch-to-lookup;no-keep-loops;hoist-common-insts;sink-common-insts>,",
    "instcombine,loop-unroll<O2>,transform-warning,instcombine,require<opt-remark-emit>,",
    "loop-mssa(licm<allowspeculation>),alignment-from-assumptions,loop-sink,instsimplify,",
    "tailcallelim,",
    "simplifycfg<bonus-inst-threshold=1;no-forward-switch-cond;switch-range-to-icmp;no-switch-to-lookup;keep-loops;no-hoist-common-insts;no-sink-common-insts>),",
    "globaldce,constmerge,cg-profile,rel-lookup-table-converter,function(annotation-remarks),",
    "verify",
);

/// The macro OpenCL drivers define to the device's OpenCL version (`300`), and clang does not.
const OPENCL_VERSION_MACRO: &str = "__OPENCL_VERSION__";

/// Environment variable naming a device configuration file (after the builder's setter).
pub const DEVICE_CONFIG_ENV: &str = "SYCL_DEVICE_CONFIG";

/// The header that device sources include as `<sycl/device.h>`.
pub const DEVICE_HEADER: &str = include_str!("../include/sycl/device.h");

/// Why a build failed.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// A tool or a file a tool reads is neither where its setter or environment variable
    /// says nor on PATH (or in its package's place).
    #[error("{tool} not found: {hint}")]
    ToolNotFound {
        /// The tool's name (`clang-15`, `libclc for NVPTX`).
        tool: &'static str,
        /// Where it was looked for and how to get it: the Debian package, the variable.
        hint: String,
    },
    /// A source whose extension is neither `.cl` nor `.clcpp`.
    #[error("{source_path}: unknown device source kind (expected .cl for OpenCL C or .clcpp for C++ for OpenCL)")]
    UnknownSourceKind {
        /// The source as given to [`Build::file`].
        source_path: PathBuf,
    },
    /// A tool (clang, opt, llvm-spirv) ran on a source and failed.
    #[error("{source_path}: compilation failed\ncommand: {command}\n{stderr}")]
    Compile {
        /// The source being compiled.
        source_path: PathBuf,
        /// The command line that failed.
        command: String,
        /// What the tool wrote to stderr.
        stderr: String,
    },
    /// llvm-spirv-15 could not translate a source's IR: why, and where in the source.
    #[error(transparent)]
    Translate(Box<Untranslatable>),
    /// A tool wrote SPIR-V that `sycl-spirv` cannot read.
    #[error("{source_path}: {tool} produced SPIR-V that cannot be read: {error}")]
    InvalidSpirv {
        /// The source the SPIR-V was made from.
        source_path: PathBuf,
        /// The tool that wrote it.
        tool: &'static str,
        /// Why it could not be read.
        error: sycl_spirv::Error,
    },
    /// Reading or writing a file, or starting a tool, failed.
    #[error("{path}: {error}")]
    Io {
        /// The file read or written, or the program started.
        path: PathBuf,
        /// The I/O error.
        error: std::io::Error,
    },
    /// A variable that cargo sets for build scripts (`OUT_DIR`) is missing.
    #[error("environment variable {0} is not set (is this running from a build script?)")]
    Env(&'static str),
    /// Two kernels whose names give the same constant in the generated kernel-name module.
    #[error("kernels `{first}` and `{second}` both map to the Rust constant {constant}")]
    KernelNameClash {
        /// The kernel that took the constant first, in source order.
        first: String,
        /// The kernel that maps to it again.
        second: String,
        /// The constant's name.
        constant: String,
    },
    /// The device configuration file cannot be read as one; the error says where and why.
    #[error("device configuration {0}")]
    DeviceConfig(sycl_format::ConfigError),
    /// A target name that no buildable target or configured device has.
    #[error("unknown target `{target}` in {setter} (known: {known})")]
    UnknownTarget {
        /// The name as given.
        target: String,
        /// The setter it was given to ([`Build::targets`] or [`Build::fixed_targets`]).
        setter: &'static str,
        /// The names that setter takes, comma-separated.
        known: String,
    },
}

/// What a successful build produced.
#[derive(Debug, Clone)]
pub struct Compiled {
    /// The static archive that carries the device objects.
    pub archive: PathBuf,
    /// The generated Rust file with kernel-name constants.
    pub kernels_rs: PathBuf,
    /// Kernel names, in source order.
    pub kernels: Vec<String>,
    /// Diagnostics about optional features (also printed as cargo warnings).
    pub diagnostics: Vec<String>,
    /// The compiler's warnings, line by line as clang wrote them (`FILE:LINE:COL: warning: …`,
    /// the source line and the caret; also printed as cargo warnings).
    pub compiler_warnings: Vec<String>,
}

/// A device-code build, configured with setters and finished with [`Build::compile`].
#[derive(Debug, Clone, Default)]
pub struct Build {
    files: Vec<PathBuf>,
    rust_crates: Vec<PathBuf>,
    includes: Vec<PathBuf>,
    defines: Vec<(String, Option<String>)>,
    flags: Vec<String>,
    clang: Option<PathBuf>,
    opt: Option<PathBuf>,
    llvm_spirv: Option<PathBuf>,
    out_dir: Option<PathBuf>,
    cargo_metadata: Option<bool>,
    device_images: Vec<PathBuf>,
    split: Option<SplitMode>,
    fixed_targets: Vec<String>,
    targets: Vec<String>,
    device_config: Option<PathBuf>,
}

impl Build {
    /// A build with no sources and every setting at its default.
    pub fn new() -> Build {
        Build::default()
    }

    /// Adds a device source (`.cl` or `.clcpp`).
    pub fn file(&mut self, path: impl AsRef<Path>) -> &mut Build {
        self.files.push(path.as_ref().to_path_buf());
        self
    }

    /// Adds device sources, as [`Build::file`] adds one.
    pub fn files<P: AsRef<Path>>(&mut self, paths: impl IntoIterator<Item = P>) -> &mut Build {
        for p in paths {
            self.file(p);
        }
        self
    }

    /// Adds a Rust device crate: the directory of a `#![no_std]` package (its `Cargo.toml`)
    /// that depends on `sycl-device`. Its `#[no_mangle] pub extern "C" fn`s are exported
    /// device functions (`SYCL_EXTERNAL`), its `sycl_device::kernel!`s kernels, and the
    /// functions its `extern "C"` blocks declare are imports resolved at run time, as an
    /// OpenCL C source's are. It is built with Debian's `rustc-web`, `cargo-web`,
    /// `rust-web-src` and `llvm-22` (docs/DESIGN.md, "Device code in Rust").
    pub fn rust_crate(&mut self, dir: impl AsRef<Path>) -> &mut Build {
        self.rust_crates.push(dir.as_ref().to_path_buf());
        self
    }

    /// Adds an include directory (`-I`).
    pub fn include(&mut self, dir: impl AsRef<Path>) -> &mut Build {
        self.includes.push(dir.as_ref().to_path_buf());
        self
    }

    /// Defines a macro (`-DNAME` or `-DNAME=VALUE`).
    pub fn define<'a>(&mut self, name: &str, value: impl Into<Option<&'a str>>) -> &mut Build {
        self.defines.push((name.to_string(), value.into().map(str::to_string)));
        self
    }

    /// Passes a flag to clang as it is.
    pub fn flag(&mut self, flag: &str) -> &mut Build {
        self.flags.push(flag.to_string());
        self
    }

    /// Uses this clang instead of `$SYCL_CLANG` or `clang-15` on PATH.
    pub fn clang(&mut self, path: impl AsRef<Path>) -> &mut Build {
        self.clang = Some(path.as_ref().to_path_buf());
        self
    }

    /// Uses this opt instead of `$SYCL_OPT` or `opt-15` on PATH.
    pub fn opt(&mut self, path: impl AsRef<Path>) -> &mut Build {
        self.opt = Some(path.as_ref().to_path_buf());
        self
    }

    /// Uses this translator instead of `$SYCL_LLVM_SPIRV` or `llvm-spirv-15` on PATH.
    pub fn llvm_spirv(&mut self, path: impl AsRef<Path>) -> &mut Build {
        self.llvm_spirv = Some(path.as_ref().to_path_buf());
        self
    }

    /// Writes outputs here instead of `$OUT_DIR`.
    pub fn out_dir(&mut self, dir: impl AsRef<Path>) -> &mut Build {
        self.out_dir = Some(dir.as_ref().to_path_buf());
        self
    }

    /// Adds a device image made separately to the binaries this crate links: a device library
    /// file (`sycl-ld device-lib`) or a SPIR-V module, whose properties sycl-ld computes as for
    /// the crate's own code (DPC++'s `-fsycl-add-targets`).
    pub fn device_image(&mut self, path: impl AsRef<Path>) -> &mut Build {
        self.device_images.push(path.as_ref().to_path_buf());
        self
    }

    /// How the link groups this crate's kernels and exported functions into images (default
    /// `auto`); `SYCL_LD_SPLIT` overrides it at link time.
    pub fn split(&mut self, mode: SplitMode) -> &mut Build {
        self.split = Some(mode);
        self
    }

    /// DPC++'s `-fsycl-fixed-targets`: asserts that this build's device code runs only on
    /// these targets (names from the device configuration). Code using what a target lacks
    /// is warned about, and images are bundled by target set rather than by features.
    pub fn fixed_targets<S: AsRef<str>>(
        &mut self,
        targets: impl IntoIterator<Item = S>,
    ) -> &mut Build {
        self.fixed_targets = targets.into_iter().map(|t| t.as_ref().to_string()).collect();
        self
    }

    /// Targets to build images for, from [`TARGETS`], as [`Target`]s or by name (default:
    /// [`Target::DEFAULT`], `spir64`, only). Ahead-of-time targets get only the images they can
    /// run, by the device configuration.
    pub fn targets<S: AsRef<str>>(&mut self, targets: impl IntoIterator<Item = S>) -> &mut Build {
        self.targets = targets.into_iter().map(|t| t.as_ref().to_string()).collect();
        self
    }

    /// Uses this device configuration file instead of `$SYCL_DEVICE_CONFIG` or the default
    /// ([`DEFAULT_DEVICE_CONFIG`]).
    pub fn device_config(&mut self, path: impl AsRef<Path>) -> &mut Build {
        self.device_config = Some(path.as_ref().to_path_buf());
        self
    }

    /// Whether to print `cargo:` lines (default: when running under cargo).
    pub fn cargo_metadata(&mut self, on: bool) -> &mut Build {
        self.cargo_metadata = Some(on);
        self
    }

    /// Builds, or prints the error and exits with status 1: the usual call in `build.rs`.
    pub fn compile(&self, name: &str) -> Compiled {
        match self.try_compile(name) {
            Ok(compiled) => compiled,
            Err(e) => {
                eprintln!("\nerror: sycl-build: {e}\n");
                std::process::exit(1);
            }
        }
    }

    /// Builds every source into `lib{sycl_device_NAME}.a` and the kernel-name module.
    pub fn try_compile(&self, name: &str) -> Result<Compiled, Error> {
        let cargo = self.cargo_metadata.unwrap_or_else(|| env::var_os("CARGO").is_some());
        let out_dir = match &self.out_dir {
            Some(dir) => dir.clone(),
            None => env::var_os("OUT_DIR").map(PathBuf::from).ok_or(Error::Env("OUT_DIR"))?,
        };
        let package = env::var("CARGO_PKG_NAME").unwrap_or_default();
        let tools = self.find_tools(cargo)?;
        let (config, config_text) = self.load_device_config(cargo)?;
        self.check_targets(&config)?;

        let work = out_dir.join("sycl-device").join(name);
        create_dir(&work)?;
        let include_dir = write_device_header(&out_dir)?;

        let mut members = Vec::new();
        let mut interface = DeviceInterface::default();
        let mut diagnostics = Vec::new();
        let mut compiler_warnings = Vec::new();
        for (index, source) in self.files.iter().enumerate() {
            let std_flag = match source.extension().and_then(|e| e.to_str()) {
                Some("cl") => "-cl-std=CL2.0",
                Some("clcpp") => "-cl-std=clc++2021",
                _ => return Err(Error::UnknownSourceKind { source_path: source.clone() }),
            };
            let stem = source.file_stem().unwrap_or_default().to_string_lossy();
            let unit = Unit {
                source,
                base: work.join(format!("{index}-{stem}")),
                std_flag,
                include_dir: &include_dir,
            };
            compiler_warnings.extend(self.front_end(&tools.clang, &unit, cargo)?);
            let translated = self.translate(&tools, &unit)?;
            interface.add(&translated.module);
            if needs_feature_check(&translated.module, &self.fixed_targets) {
                let warnings = self.feature_diagnostics(&tools, &unit, &translated, &config)?;
                if cargo {
                    for line in warnings.iter().flat_map(|w| w.lines()) {
                        println!("cargo:warning={line}");
                    }
                }
                diagnostics.extend(warnings);
            }

            let object = self.device_object(&package, source, &config_text, translated.spirv);
            members.push((format!("{DEVICE_OBJECT_MEMBER_PREFIX}{index}-{stem}.o"), object));
        }

        if !self.rust_crates.is_empty() {
            let tools = rust::RustTools::find(cargo, tools.llvm_spirv.clone())?;
            for (index, dir) in self.rust_crates.iter().enumerate() {
                // The wrapper package names it by path from elsewhere.
                let absolute = fs::canonicalize(dir.join("Cargo.toml"))
                    .map_err(|error| Error::Io { path: dir.join("Cargo.toml"), error })?;
                let crate_dir = absolute.parent().unwrap_or(dir);
                let stem = crate_dir.file_name().unwrap_or_default().to_string_lossy();
                let unit_dir = work.join(format!("rust-{index}-{stem}"));
                let unit = rust::compile(&tools, crate_dir, &unit_dir, cargo)?;
                interface.add(&unit.module);
                let object = self.device_object(&package, dir, &config_text, unit.spirv);
                members
                    .push((format!("{DEVICE_OBJECT_MEMBER_PREFIX}rust-{index}-{stem}.o"), object));
            }
        }

        let archive = work.join(format!("libsycl_device_{name}.a"));
        write_file(&archive, &archive::gnu_archive(&members))?;
        let kernels_rs = out_dir.join(format!("sycl-kernels-{name}.rs"));
        let module = interface.module(&mut diagnostics)?;
        if cargo {
            for line in
                diagnostics.iter().filter(|d| d.starts_with("warning: specialization constant"))
            {
                println!("cargo:warning={line}");
            }
        }
        write_file(&kernels_rs, module.as_bytes())?;
        if cargo {
            self.print_link_lines(name, &work)?;
        }
        let kernels = interface.kernels;
        Ok(Compiled { archive, kernels_rs, kernels, diagnostics, compiler_warnings })
    }

    /// The ELF object carrying one source's (or Rust crate's) SPIR-V as a device object, with
    /// this build's link settings.
    fn device_object(
        &self,
        package: &str,
        source: &Path,
        config_text: &Option<String>,
        spirv: Vec<u8>,
    ) -> Vec<u8> {
        elf_object(&DeviceObject {
            package: package.to_string(),
            source: source.to_string_lossy().into_owned(),
            split: self.split,
            fixed_targets: self.fixed_targets.clone(),
            targets: self.targets.clone(),
            device_config: config_text.clone(),
            spirv,
        })
    }

    /// The tools every source goes through: each setter, then its environment variable, then
    /// PATH.
    fn find_tools(&self, cargo: bool) -> Result<Tools, Error> {
        Ok(Tools {
            clang: Tool::CLANG.find(self.clang.as_deref(), cargo)?,
            opt: Tool::OPT.find(self.opt.as_deref(), cargo)?,
            llvm_spirv: Tool::LLVM_SPIRV.find(self.llvm_spirv.as_deref(), cargo)?,
        })
    }

    /// Refuses a target name that no buildable target ([`Build::targets`]) or configured
    /// device ([`Build::fixed_targets`]) has.
    fn check_targets(&self, config: &DeviceConfig) -> Result<(), Error> {
        for target in &self.targets {
            Target::buildable(target).map_err(|e| Error::UnknownTarget {
                target: e.name,
                setter: "targets",
                known: TARGETS.iter().map(|t| t.name()).collect::<Vec<_>>().join(", "),
            })?;
        }
        for target in &self.fixed_targets {
            if config.target(target).is_none() {
                let known: Vec<&str> = config.targets.keys().map(String::as_str).collect();
                return Err(Error::UnknownTarget {
                    target: target.clone(),
                    setter: "fixed_targets",
                    known: known.join(", "),
                });
            }
        }
        Ok(())
    }

    /// The front end: the source as LLVM bitcode (`BASE.bc`), and its depfile; the compiler's
    /// warnings, which are also printed for cargo with a `rerun-if-changed` line for the
    /// source and each header it includes.
    fn front_end(&self, clang: &Path, unit: &Unit, cargo: bool) -> Result<Vec<String>, Error> {
        let dep = unit.base.with_extension("d");
        let mut cmd = self.clang_command(clang, unit.std_flag, unit.include_dir);
        cmd.arg("-MD").arg("-MF").arg(&dep).arg("-o").arg(unit.bitcode()).arg(unit.source);
        let warnings = run(&mut cmd, unit.source)?;
        if cargo {
            for line in &warnings {
                println!("cargo:warning={line}");
            }
            println!("cargo:rerun-if-changed={}", unit.source.display());
            // Not the compiler's own headers (`/usr/lib/llvm-15/…`, which change with
            // the package) nor ours (`sycl/device.h`, which changes with this crate).
            for header in read_depfile(&dep)? {
                let theirs = header.to_string_lossy().starts_with("/usr/lib/llvm-");
                if !theirs && !header.starts_with(unit.include_dir) {
                    println!("cargo:rerun-if-changed={}", header.display());
                }
            }
        }
        Ok(warnings)
    }

    /// The front end's bitcode optimised (`BASE.opt.bc`) and translated to SPIR-V
    /// (`BASE.spv`). Should the translator refuse what the optimiser made, or emulate an LLVM
    /// intrinsic it has no SPIR-V for (`llvm.fshl.i32`, which instcombine makes of a rotate),
    /// the front end's IR is translated instead: the devices' compilers optimise it
    /// themselves. A failure of that too is explained ([`Untranslatable`]).
    fn translate(&self, tools: &Tools, unit: &Unit) -> Result<Translated, Error> {
        let (bc, spv) = (unit.bitcode(), unit.base.with_extension("spv"));
        let optimised = unit.base.with_extension("opt.bc");
        let mut cmd = Command::new(&tools.opt);
        cmd.arg(format!("-passes={OPT_PIPELINE}")).arg(&bc).arg("-o").arg(&optimised);
        run(&mut cmd, unit.source)?;
        let translated = match to_spirv(&tools.llvm_spirv, &optimised, &spv, unit.source) {
            Ok((spirv, module)) if !has_llvm_intrinsics(&module) => Ok(((spirv, module), false)),
            _ => to_spirv(&tools.llvm_spirv, &bc, &spv, unit.source).map(|t| (t, true)),
        };
        let ((spirv, module), from_front_end) = translated.map_err(|error| match error {
            Error::Compile { source_path, command, stderr } => {
                let ir = self.line_tables_ir(&tools.clang, unit);
                Error::Translate(Box::new(Untranslatable::new(source_path, command, &stderr, &ir)))
            }
            other => other,
        })?;
        Ok(Translated { spirv, module, from_front_end })
    }

    /// The source's LLVM IR as text with line tables (`BASE.ll`), which locate what the
    /// translator refused; empty if it cannot be made.
    fn line_tables_ir(&self, clang: &Path, unit: &Unit) -> String {
        let ir = unit.base.with_extension("ll");
        let mut cmd = self.clang_command(clang, unit.std_flag, unit.include_dir);
        cmd.args(["-S", "-gline-tables-only", "-w"]).arg("-o").arg(&ir).arg(unit.source);
        run(&mut cmd, unit.source)
            .ok()
            .and_then(|_| fs::read_to_string(&ir).ok())
            .unwrap_or_default()
    }

    /// The feature diagnostics of one source ([`feature_warnings`]), on the front end's IR,
    /// whose call chains are the source's (no inlining): translated anew
    /// (`BASE.check.spv`) when the SPIR-V was made from the optimised IR.
    fn feature_diagnostics(
        &self,
        tools: &Tools,
        unit: &Unit,
        translated: &Translated,
        config: &DeviceConfig,
    ) -> Result<Vec<String>, Error> {
        let front_end = if translated.from_front_end {
            translated.module.clone()
        } else {
            let check = unit.base.with_extension("check.spv");
            to_spirv(&tools.llvm_spirv, &unit.bitcode(), &check, unit.source)?.1
        };
        Ok(feature_warnings(&front_end, &self.fixed_targets, config))
    }

    /// The `cargo:` lines that link the archive in `work` and the device images into the
    /// crate, after a warning if cargo's linker is not `sycl-ld`.
    fn print_link_lines(&self, name: &str, work: &Path) -> Result<(), Error> {
        for line in linker_warning(
            env::var_os("RUSTC_LINKER").as_deref(),
            &env::var("TARGET").unwrap_or_default(),
        ) {
            println!("cargo:warning={line}");
        }
        println!("cargo:rustc-link-search=native={}", work.display());
        println!("cargo:rustc-link-lib=static=sycl_device_{name}");
        for image in &self.device_images {
            let path = fs::canonicalize(image)
                .map_err(|error| Error::Io { path: image.clone(), error })?;
            println!("cargo:rerun-if-changed={}", path.display());
            println!("cargo:rustc-link-arg=--sycl-add-images={}", path.display());
        }
        Ok(())
    }

    /// clang for one source: target, language (the user's `-cl-std=` replaces ours), kernel
    /// argument information, include directories, defines, then the user's flags (which may
    /// override any of them).
    ///
    /// The front end alone runs (`-O2 -Xclang -disable-llvm-passes`); `opt-15` then runs the
    /// passes whose output llvm-spirv-15 can translate ([`OPT_PIPELINE`]). A `SYCL_EXTERNAL`
    /// function is interposable, as a default-visibility function of a host library built
    /// with `gcc -fPIC` is (`-fPIC -fsemantic-interposition`; `sycl/device.h` gives it default
    /// visibility, every other function is hidden): the optimiser inlines no call to it, so
    /// that when another binary's definition wins at run time, every call reaches that one,
    /// the calls from this source included. The devices' compilers still inline it into the
    /// kernels of its own image, where it is not exported. With
    /// `-cl-kernel-arg-info`, llvm-spirv names each kernel's
    /// parameters (`OpName`): the post-link records the names in `SYCL/kernel arguments`, for
    /// the runtime's messages about a launch's arguments, and drivers answer `clGetKernelArgInfo`.
    fn clang_command(&self, clang: &Path, std_flag: &str, include_dir: &Path) -> Command {
        let mut cmd = Command::new(clang);
        cmd.args(["--target=spir64", "-emit-llvm", "-c", "-cl-kernel-arg-info"]);
        if !self.flags.iter().any(|f| f.starts_with("-cl-std=")) {
            cmd.arg(std_flag);
        }
        cmd.args(["-O2", "-Xclang", "-disable-llvm-passes"]);
        cmd.args(["-fPIC", "-fsemantic-interposition", "-fvisibility=hidden"]);
        // What an OpenCL driver defines and clang does not: the device's OpenCL version. The
        // SPIR-V serves every device; the devices it runs on are OpenCL 3.0 ones.
        if !self.defines.iter().any(|(k, _)| k == OPENCL_VERSION_MACRO)
            && !self.flags.iter().any(|f| f.contains(OPENCL_VERSION_MACRO))
        {
            cmd.arg(format!("-D{OPENCL_VERSION_MACRO}=300"));
        }
        cmd.arg("-I").arg(include_dir);
        for dir in &self.includes {
            cmd.arg("-I").arg(dir);
        }
        for (k, v) in &self.defines {
            cmd.arg(match v {
                Some(v) => format!("-D{k}={v}"),
                None => format!("-D{k}"),
            });
        }
        // Options drivers take that clang does not, and that change nothing in the SPIR-V:
        // Intel's `-cl-no-subgroup-ifp` (sub-groups without independent forward progress).
        cmd.args(self.flags.iter().filter(|f| *f != "-cl-no-subgroup-ifp"));
        cmd
    }

    /// The device configuration: setter, then `$SYCL_DEVICE_CONFIG`, then the default; with
    /// the chosen file's text, which travels to the link (`None` for the default).
    fn load_device_config(&self, cargo: bool) -> Result<(DeviceConfig, Option<String>), Error> {
        let path = match &self.device_config {
            Some(p) => Some(p.clone()),
            None => env_path(DEVICE_CONFIG_ENV, cargo).map(PathBuf::from),
        };
        let Some(path) = path else { return Ok((DeviceConfig::default_config(), None)) };
        if cargo {
            println!("cargo:rerun-if-changed={}", path.display());
        }
        let text =
            fs::read_to_string(&path).map_err(|error| Error::Io { path: path.clone(), error })?;
        let config =
            DeviceConfig::parse(&text, &path.display().to_string()).map_err(Error::DeviceConfig)?;
        Ok((config, Some(text)))
    }
}

/// The tools every source goes through, found once a build.
struct Tools {
    /// The front end (`clang-15`).
    clang: PathBuf,
    /// The optimiser (`opt-15`).
    opt: PathBuf,
    /// The translator (`llvm-spirv-15`).
    llvm_spirv: PathBuf,
}

/// One source being compiled: where its files go and how the front end reads it.
struct Unit<'a> {
    /// The source as given to [`Build::file`].
    source: &'a Path,
    /// Its files' path in the work directory, less the extension (`WORK/0-kernels`).
    base: PathBuf,
    /// The language its extension says (`-cl-std=CL2.0`), unless the user's flags say one.
    std_flag: &'static str,
    /// The directory holding `sycl/device.h`.
    include_dir: &'a Path,
}

impl Unit<'_> {
    /// The front end's bitcode (`BASE.bc`).
    fn bitcode(&self) -> PathBuf {
        self.base.with_extension("bc")
    }
}

/// One source's SPIR-V, as the device object carries it, and its module.
struct Translated {
    /// The SPIR-V's bytes.
    spirv: Vec<u8>,
    /// The SPIR-V, read.
    module: sycl_spirv::dr::Module,
    /// Whether it was made from the front end's IR rather than the optimised one.
    from_front_end: bool,
}

/// Writes `sycl/device.h` under `OUT_DIR/sycl-include`, which it returns, when it differs:
/// cargo watches the headers a source includes, and a header written anew on every run would
/// make every build run the build script again.
fn write_device_header(out_dir: &Path) -> Result<PathBuf, Error> {
    let include_dir = out_dir.join("sycl-include");
    write_if_changed(&include_dir.join("sycl").join("device.h"), DEVICE_HEADER.as_bytes())?;
    Ok(include_dir)
}

/// Writes `bytes` unless the file holds them already: cargo decides what to rebuild by files'
/// times, so a file written anew on every run would make every build run again.
fn write_if_changed(path: &Path, bytes: &[u8]) -> Result<(), Error> {
    if fs::read(path).ok().as_deref() == Some(bytes) {
        return Ok(());
    }
    write_file(path, bytes)
}

/// Whether a source needs the feature diagnostics: it declares aspects, or it is compiled
/// for fixed targets. (SPIR-V is made before LLVM's optimisations, so call chains and source
/// lines are those of the source.)
fn needs_feature_check(module: &sycl_spirv::dr::Module, fixed_targets: &[String]) -> bool {
    !fixed_targets.is_empty()
        || module.annotations.iter().any(|a| {
            a.operands
                .iter()
                .any(|op| matches!(op, sycl_spirv::dr::Operand::LiteralString(s) if s.starts_with(sycl_spirv::DEVICE_HAS_SEMANTIC)))
        })
}

/// The front-end diagnostics of DPC++'s optional-kernel-features design for one translation
/// unit: uses of aspects a function did not declare, and uses of what a fixed target does not
/// support.
fn feature_warnings(
    module: &sycl_spirv::dr::Module,
    fixed_targets: &[String],
    config: &DeviceConfig,
) -> Vec<String> {
    let features = Features::analyze(module);
    let mut out = features.undeclared_use_warnings();
    if fixed_targets.is_empty() {
        return out;
    }
    let symbols = sycl_spirv::Symbols::of(module);
    let mut entries: Vec<(String, u32)> = symbols.kernels.clone();
    entries.extend(symbols.exports());
    for target in fixed_targets {
        let Some(entry) = config.target(target) else { continue };
        for (name, function) in &entries {
            let mut aspects = features.used(*function);
            aspects.extend(features.declared(*function).into_iter().flatten());
            for aspect in aspects.iter().filter(|a| !entry.has_aspect(**a)) {
                let message = format!(
                    "function '{name}' uses aspect '{}', which fixed target '{target}' does not support",
                    aspect_name(*aspect)
                );
                out.push(match features.chain(*function, *aspect, |_, _| true) {
                    Some((path, at)) => features.chain_warning(&message, &path, at.as_ref()),
                    None => format!("warning: {message}"),
                });
            }
            if let Some(size) = features.reqd_sub_group_size.get(function) {
                if !entry.sub_group_sizes.contains(size) {
                    out.push(format!(
                        "warning: kernel '{name}' requires sub-group size '{size}', which fixed target '{target}' does not support"
                    ));
                }
            }
        }
    }
    out
}

/// What to tell a crate whose binaries cargo will not link through `sycl-ld`: device code
/// compiles, but nothing embeds it, and at run time no kernel is found. Cargo tells build
/// scripts the configured linker in `RUSTC_LINKER`.
fn linker_warning(linker: Option<&std::ffi::OsStr>, target: &str) -> Vec<String> {
    let is_sycl_ld = linker.and_then(|l| Path::new(l).file_name()).is_some_and(|n| n == "sycl-ld");
    if is_sycl_ld {
        return Vec::new();
    }
    let configured = match linker {
        Some(l) => format!("the linker configured for {target} is {}", Path::new(l).display()),
        None => format!("no linker is configured for {target}"),
    };
    let target = if target.is_empty() { "x86_64-unknown-linux-gnu" } else { target };
    vec![
        format!("sycl-build: {configured}, not sycl-ld: the device code compiled here will not be embedded, and at run time no kernel will be found. Add to .cargo/config.toml:"),
        format!("[target.{target}]"),
        "linker = \"/path/to/sycl-ld\"   # `cargo install --path sycl-ld` puts it in ~/.cargo/bin; a relative path is relative to the directory holding .cargo/".into(),
        "rustflags = [\"-C\", \"linker-flavor=gcc\"]".into(),
    ]
}

/// The file name stem cargo gives the shared library of the crate a user names: a package
/// name (`s1-liba`) and the library's own name (`s1_liba`, `libs1_liba.so`) all mean
/// `s1_liba`, as cargo turns `-` into `_` in crate names.
fn library_name(name: &str) -> String {
    let name = match name.strip_suffix(".so") {
        Some(file) => file.strip_prefix("lib").unwrap_or(file),
        None => name,
    };
    name.replace('-', "_")
}

/// Links the crate being built against the shared library that the dependency crate `name`
/// builds (`crate-type = ["cdylib", ...]`): `lib{name}.so`, where `name` may be the package
/// name (`my-lib`) or the crate's (`my_lib`). List that crate under `[dependencies]` too, so
/// cargo builds it first; host code need not use it.
///
/// The library is found at link time in `target/<profile>/deps`, and at run time through a
/// run path relative to the binary itself ([`RUN_PATH`]; examples also get
/// [`RUN_PATH_EXAMPLES`]), never a build directory: the binary finds its libraries when run
/// from anywhere in the build tree, and still when it is copied elsewhere with them in a
/// `deps/` directory beside it (`cargo xtask pack` lays a program out so).
pub fn link_device_library(name: &str) {
    let name = library_name(name);
    let out_dir = env::var_os("OUT_DIR").map(PathBuf::from).unwrap_or_default();
    // OUT_DIR is target/<profile>/build/<pkg>-<hash>/out; dependencies land in target/<profile>/deps.
    let Some(profile_dir) = out_dir.ancestors().nth(3) else {
        eprintln!("error: sycl-build: OUT_DIR is not set (is this running from a build script?)");
        std::process::exit(1);
    };
    let deps = profile_dir.join("deps");
    println!("cargo:rustc-link-search=native={}", deps.display());
    println!("cargo:rustc-link-lib=dylib={name}");
    let manifest_dir = env::var_os("CARGO_MANIFEST_DIR").map(PathBuf::from).unwrap_or_default();
    for line in run_path_lines(&manifest_dir) {
        println!("{line}");
    }
}

/// The run path of every binary of a crate that links a device library: `$ORIGIN/deps` (an
/// executable in `target/<profile>/`, its dependencies in `deps/`), then `$ORIGIN` (the
/// library beside the binary: cargo's `deps/` holds tests, benches and the cdylibs
/// themselves). `deps/` comes first because cargo refreshes only it when a build names some
/// packages (`cargo build -p app`): the copy of a workspace member's cdylib in
/// `target/<profile>/` is then an older build, which `$ORIGIN` first would load. The dynamic
/// loader expands `$ORIGIN` to the directory of the binary that names it; the text reaches
/// `ld` literally (cargo, rustc, `sycl-ld` and `cc` pass arguments without a shell).
pub const RUN_PATH: &str = "$ORIGIN/deps:$ORIGIN";

/// What examples (`target/<profile>/examples/`) add to [`RUN_PATH`]: `deps/` is beside their
/// directory. Only examples get it: in a program copied elsewhere, `$ORIGIN/../deps` would be
/// a directory outside the program's own (`/tmp/deps` for `/tmp/app/`, which anyone may
/// create).
pub const RUN_PATH_EXAMPLES: &str = "$ORIGIN/../deps";

/// The `cargo:` lines that give a package's binaries [`RUN_PATH`], and its examples, if it has
/// any, [`RUN_PATH_EXAMPLES`] after it (cargo refuses `rustc-link-arg-examples` from a package
/// without examples). With examples, also the `rerun-if-changed` lines that notice them go.
fn run_path_lines(manifest_dir: &Path) -> Vec<String> {
    let mut lines = vec![format!("cargo:rustc-link-arg=-Wl,-rpath,{RUN_PATH}")];
    if has_examples(manifest_dir) {
        lines.push(format!("cargo:rustc-link-arg-examples=-Wl,-rpath,{RUN_PATH_EXAMPLES}"));
        for path in ["Cargo.toml", "examples"] {
            let path = manifest_dir.join(path);
            if path.exists() {
                lines.push(format!("cargo:rerun-if-changed={}", path.display()));
            }
        }
    }
    lines
}

/// Whether the package in `manifest_dir` has example targets, as cargo finds them: an
/// `[[example]]` table in its manifest, or (unless `autoexamples = false`) `examples/*.rs` or
/// `examples/*/main.rs`.
fn has_examples(manifest_dir: &Path) -> bool {
    let manifest = fs::read_to_string(manifest_dir.join("Cargo.toml")).unwrap_or_default();
    let lines =
        manifest.lines().map(|l| l.split('#').next().unwrap_or("").replace([' ', '\t'], ""));
    let (mut declared, mut auto) = (false, true);
    for line in lines {
        declared |= line == "[[example]]";
        auto &= line != "autoexamples=false";
    }
    if declared {
        return true;
    }
    let Ok(entries) = fs::read_dir(manifest_dir.join("examples")) else {
        return false;
    };
    auto && entries.flatten().map(|e| e.path()).any(|p| {
        if p.is_dir() {
            p.join("main.rs").is_file()
        } else {
            p.extension().is_some_and(|e| e == "rs")
        }
    })
}

/// Whether the module has a function named for an LLVM intrinsic: `spirv.llvm_fshl_i32`, the
/// translator's emulation of `llvm.fshl.i32`, which the devices' SPIR-V readers turn back into
/// the intrinsic and then cannot build (Intel: `Symbols not found: [ llvm.fshl.i32 ]`; PoCL's
/// bitcode fails to verify), or an `llvm.` name passed through.
fn has_llvm_intrinsics(module: &sycl_spirv::dr::Module) -> bool {
    let symbols = sycl_spirv::Symbols::of(module);
    symbols
        .linkage
        .values()
        .any(|(name, _)| name.starts_with("spirv.llvm_") || name.starts_with("llvm."))
}

/// `llvm-spirv-15 BC -o SPV`: the SPIR-V and its module.
fn to_spirv(
    llvm_spirv: &Path,
    bc: &Path,
    spv: &Path,
    source: &Path,
) -> Result<(Vec<u8>, sycl_spirv::dr::Module), Error> {
    run(
        Command::new(llvm_spirv)
            .args([SPIRV_EXTENSIONS, KEEP_ARG_TYPE_QUALIFIERS])
            .arg(bc)
            .arg("-o")
            .arg(spv),
        source,
    )?;
    let spirv = fs::read(spv).map_err(|error| Error::Io { path: spv.to_path_buf(), error })?;
    // C99 `inline` functions come out as bodies with `Import` linkage: local definitions.
    let spirv = sycl_spirv::localize_inline_definitions(&spirv).unwrap_or(spirv);
    let module = sycl_spirv::load(&spirv).map_err(|error| Error::InvalidSpirv {
        source_path: source.to_path_buf(),
        tool: "llvm-spirv",
        error,
    })?;
    Ok((spirv, module))
}

/// Runs a tool: its stderr, line by line, on success (the compiler's warnings), the error
/// text on failure.
fn run(cmd: &mut Command, source: &Path) -> Result<Vec<String>, Error> {
    let command = format!("{cmd:?}");
    let output =
        cmd.output().map_err(|error| Error::Io { path: cmd.get_program().into(), error })?;
    let stderr = String::from_utf8_lossy(&output.stderr).into_owned();
    if !output.status.success() {
        return Err(Error::Compile { source_path: source.to_path_buf(), command, stderr });
    }
    Ok(stderr.lines().filter(|l| !l.trim().is_empty()).map(str::to_string).collect())
}

/// The prerequisites listed in a Makefile-style depfile written by `clang -MD`.
fn read_depfile(path: &Path) -> Result<Vec<PathBuf>, Error> {
    let text = fs::read_to_string(path).map_err(|error| Error::Io { path: path.into(), error })?;
    let joined = text.replace("\\\n", " ");
    Ok(depfile_paths(joined.split_once(": ").map_or("", |(_, deps)| deps)))
}

/// The paths of a depfile rule's prerequisites (`a\ b.c` is one path, `a b.c`).
pub(crate) fn depfile_paths(deps: &str) -> Vec<PathBuf> {
    let mut out = Vec::new();
    let mut current = String::new();
    let mut chars = deps.chars();
    while let Some(c) = chars.next() {
        match c {
            '\\' => current.extend(chars.next()),
            c if c.is_whitespace() => {
                if !current.is_empty() {
                    out.push(PathBuf::from(std::mem::take(&mut current)));
                }
            }
            c => current.push(c),
        }
    }
    if !current.is_empty() {
        out.push(PathBuf::from(current));
    }
    out
}

/// An x86-64 ELF relocatable object whose only content is the device object, in a section
/// marked `SHF_EXCLUDE` so that a static linker that pulls the member in drops the bytes.
fn elf_object(device_object: &DeviceObject) -> Vec<u8> {
    /// ELF's `SHF_EXCLUDE`.
    const SHF_EXCLUDE: u64 = 0x8000_0000;
    elf::relocatable_with_section(DEVICE_OBJECT_SECTION, SHF_EXCLUDE, &device_object.encode(), 8)
}

fn create_dir(dir: &Path) -> Result<(), Error> {
    fs::create_dir_all(dir).map_err(|error| Error::Io { path: dir.into(), error })
}

fn write_file(path: &Path, bytes: &[u8]) -> Result<(), Error> {
    if let Some(parent) = path.parent() {
        create_dir(parent)?;
    }
    fs::write(path, bytes).map_err(|error| Error::Io { path: path.into(), error })
}

fn env_path(var: &str, cargo: bool) -> Option<OsString> {
    if cargo {
        println!("cargo:rerun-if-env-changed={var}");
    }
    env::var_os(var).filter(|v| !v.is_empty())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn depfile_with_continuations_and_escaped_spaces() {
        let dir = tempdir();
        let dep = dir.join("a.d");
        fs::write(&dep, "a.bc: src/a.cl \\\n  inc/my\\ header.h /usr/x.h\n").unwrap();
        assert_eq!(
            read_depfile(&dep).unwrap(),
            [PathBuf::from("src/a.cl"), "inc/my header.h".into(), "/usr/x.h".into()]
        );
    }

    #[test]
    fn device_object_survives_the_elf_wrapper() {
        use object::{Object as _, ObjectSection as _};
        let device_object = DeviceObject {
            package: "p".into(),
            source: "a.cl".into(),
            split: None,
            fixed_targets: vec![],
            targets: vec![],
            device_config: None,
            spirv: vec![7; 12],
        };
        let bytes = elf_object(&device_object);
        let file = object::File::parse(&*bytes).unwrap();
        let section = file.section_by_name(DEVICE_OBJECT_SECTION).unwrap();
        assert_eq!(DeviceObject::decode(section.data().unwrap()).unwrap(), device_object);
    }

    #[test]
    fn a_second_build_leaves_the_generated_header_as_it_was() {
        // Cargo reruns a build script when a header it was told to watch is newer than the
        // last run: a header written anew by every run would rerun every build.
        let dir = tempdir().join("rebuild");
        fs::create_dir_all(&dir).unwrap();
        let src = dir.join("k.cl");
        fs::write(
            &src,
            "#include <sycl/device.h>\n__kernel void k(__global int *o) { o[0] = 1; }\n",
        )
        .unwrap();
        let build = || Build::new().file(&src).out_dir(&dir).cargo_metadata(false).try_compile("t");
        build().unwrap();
        let header = dir.join("sycl-include/sycl/device.h");
        let written = fs::metadata(&header).unwrap().modified().unwrap();
        std::thread::sleep(std::time::Duration::from_millis(20));
        build().unwrap();
        assert_eq!(fs::metadata(&header).unwrap().modified().unwrap(), written);
    }

    #[test]
    fn a_failed_compile_shows_the_compiler_message() {
        let dir = tempdir().join("failed");
        fs::create_dir_all(&dir).unwrap();
        let src = dir.join("broken.cl");
        fs::write(&src, "__kernel void k(__global int *o) { o[0] = undeclared_thing; }\n").unwrap();
        let err = Build::new()
            .file(&src)
            .out_dir(&dir)
            .cargo_metadata(false)
            .try_compile("t")
            .unwrap_err();
        let text = err.to_string();
        assert!(matches!(err, Error::Compile { .. }), "{text}");
        assert!(
            text.contains("broken.cl: compilation failed") && text.contains("undeclared_thing"),
            "{text}"
        );
    }

    #[test]
    fn a_translator_failure_names_the_source_line_the_cause_and_a_remedy() {
        let dir = tempdir().join("untranslatable");
        fs::create_dir_all(&dir).unwrap();
        fs::write(
            dir.join("cycles.h"),
            "static long cycles(void) {\n  return __builtin_readcyclecounter();\n}\n",
        )
        .unwrap();
        let src = dir.join("timed.cl");
        fs::write(
            &src,
            "#include \"cycles.h\"\nkernel void timed(global long *out) { out[0] = cycles(); }\n",
        )
        .unwrap();
        let err = Build::new()
            .file(&src)
            .out_dir(&dir)
            .cargo_metadata(false)
            .try_compile("t")
            .unwrap_err();
        let text = err.to_string();
        assert!(matches!(err, Error::Translate(_)), "{text}");
        assert!(text.contains("cannot translate it to SPIR-V: the source uses LLVM intrinsic `llvm.readcyclecounter`"), "{text}");
        let at = format!(
            "{}:2:10\n      return __builtin_readcyclecounter();\n             ^",
            dir.join("cycles.h").display()
        );
        assert!(text.contains(&at), "the header's line, with a caret: {text}");
        assert!(text.contains("to try: use an OpenCL C builtin"), "{text}");
        assert!(!text.contains("Stack dump") && !text.contains("[Src:"), "{text}");
    }

    #[test]
    fn what_the_optimiser_made_untranslatable_builds() {
        // Without the passes that make them: no freeze beside x / n and x % n, no <4 x i1>
        // from a chain of &&, no <64 x float> from an 8x8 register tile.
        let dir = tempdir().join("optimiser");
        fs::create_dir_all(&dir).unwrap();
        let src = dir.join("real.cl");
        fs::write(
            &src,
            "kernel void divrem(global int *out, int n) { int i = get_global_id(0); out[i] = i / n + i % n; }\n\
             kernel void rotl(global uint *out) { uint x = out[get_global_id(0)]; out[get_global_id(0)] = (x << 7) | (x >> 25); }\n\
             kernel void inside(global int *out, int w, int h) { int x = get_global_id(0), y = get_global_id(1);\n\
               out[y * w + x] = x > 0 && x < w - 1 && y > 0 && y < h - 1; }\n\
             kernel void tile(global const float *a, global const float *b, global float *c, int n) {\n\
               float acc[8][8] = {{0}}; int r = get_global_id(1) * 8, q = get_global_id(0) * 8;\n\
               for (int k = 0; k < n; k++) {\n\
                 float ar[8], br[8];\n\
                 for (int i = 0; i < 8; i++) { ar[i] = a[(r + i) * n + k]; br[i] = b[k * n + q + i]; }\n\
                 for (int i = 0; i < 8; i++) for (int j = 0; j < 8; j++) acc[i][j] += ar[i] * br[j];\n\
               }\n\
               for (int i = 0; i < 8; i++) for (int j = 0; j < 8; j++) c[(r + i) * n + q + j] = acc[i][j]; }\n",
        )
        .unwrap();
        let compiled =
            Build::new().file(&src).out_dir(&dir).cargo_metadata(false).try_compile("t").unwrap();
        assert_eq!(compiled.kernels, ["divrem", "rotl", "inside", "tile"]);
        // instcombine makes a rotate `llvm.fshl.i32`, which llvm-spirv-15 emulates with a
        // function the devices turn back into the intrinsic and cannot build: none reaches
        // the device object.
        let archive = fs::read(&compiled.archive).unwrap();
        assert!(
            !archive.windows(9).any(|w| w == b"llvm_fshl"),
            "an LLVM intrinsic emulated by the translator"
        );
    }

    #[test]
    fn the_macros_an_opencl_driver_defines_are_defined() {
        let dir = tempdir().join("macros");
        fs::create_dir_all(&dir).unwrap();
        let src = dir.join("version.cl");
        fs::write(&src, "#if __OPENCL_VERSION__ != 300\n#error wrong version\n#endif\nkernel void v(global int *o) { o[0] = __OPENCL_VERSION__; }\n").unwrap();
        Build::new().file(&src).out_dir(&dir).cargo_metadata(false).try_compile("t").unwrap();
        let mut own = Build::new();
        own.file(&src).out_dir(&dir).cargo_metadata(false).define("__OPENCL_VERSION__", "120");
        let err = own.try_compile("t").unwrap_err().to_string();
        assert!(
            err.contains("wrong version") && !err.contains("macro redefined"),
            "the user's definition wins: {err}"
        );
    }

    #[test]
    fn a_missing_tool_names_itself_and_its_package() {
        let dir = tempdir().join("missing");
        let err = Build::new()
            .file("x.cl")
            .out_dir(&dir)
            .cargo_metadata(false)
            .clang("/nonexistent/clang-15")
            .try_compile("t")
            .unwrap_err();
        let text = err.to_string();
        assert!(text.starts_with("clang-15 not found: `/nonexistent/clang-15`"), "{text}");
        assert!(text.contains("install the Debian package `clang-15`"), "{text}");
    }

    #[test]
    fn package_names_name_their_libraries() {
        assert_eq!(library_name("s1-liba"), "s1_liba");
        assert_eq!(library_name("s1_liba"), "s1_liba");
        assert_eq!(library_name("libs1_liba.so"), "s1_liba");
        assert_eq!(library_name("libfoo"), "libfoo", "a crate may be called lib-something");
    }

    #[test]
    fn run_paths_are_relative_to_the_binary() {
        let dir = tempdir().join("run-paths");
        fs::create_dir_all(&dir).unwrap();
        fs::write(dir.join("Cargo.toml"), "[package]\nname = \"p\"\n").unwrap();
        let rpath = "cargo:rustc-link-arg=-Wl,-rpath,$ORIGIN/deps:$ORIGIN";
        assert_eq!(run_path_lines(&dir), [rpath], "no examples: no line of theirs");
        fs::create_dir_all(dir.join("examples/data")).unwrap();
        fs::write(dir.join("examples/input.txt"), "").unwrap();
        assert_eq!(run_path_lines(&dir), [rpath], "a folder of data is no example");
        fs::write(dir.join("examples/data/main.rs"), "fn main() {}").unwrap();
        let lines = run_path_lines(&dir);
        assert_eq!(lines[1], "cargo:rustc-link-arg-examples=-Wl,-rpath,$ORIGIN/../deps");
        assert!(lines[2].ends_with("Cargo.toml") && lines[3].ends_with("examples"), "{lines:?}");
        fs::write(dir.join("Cargo.toml"), "[package]\nautoexamples = false # none\n").unwrap();
        assert_eq!(run_path_lines(&dir), [rpath], "autoexamples = false");
        fs::write(dir.join("Cargo.toml"), "[package]\nautoexamples = false\n[[example]]\n")
            .unwrap();
        assert_eq!(run_path_lines(&dir).len(), 4, "a declared example");
    }

    #[test]
    fn a_linker_other_than_sycl_ld_is_warned_with_the_config_to_add() {
        assert!(linker_warning(
            Some("/home/u/.cargo/bin/sycl-ld".as_ref()),
            "x86_64-unknown-linux-gnu"
        )
        .is_empty());
        assert!(linker_warning(
            Some("../target/debug/sycl-ld".as_ref()),
            "x86_64-unknown-linux-gnu"
        )
        .is_empty());
        let none = linker_warning(None, "x86_64-unknown-linux-gnu");
        assert!(
            none[0].starts_with(
                "sycl-build: no linker is configured for x86_64-unknown-linux-gnu, not sycl-ld"
            ),
            "{none:?}"
        );
        assert_eq!(none[1], "[target.x86_64-unknown-linux-gnu]");
        assert!(none[2].starts_with("linker = \"/path/to/sycl-ld\""));
        assert_eq!(none[3], "rustflags = [\"-C\", \"linker-flavor=gcc\"]");
        let cc = linker_warning(Some("cc".as_ref()), "aarch64-unknown-linux-gnu");
        assert!(cc[0].starts_with("sycl-build: the linker configured for aarch64-unknown-linux-gnu is cc, not sycl-ld"), "{cc:?}");
    }

    #[test]
    fn unknown_source_kinds_are_refused() {
        let dir = tempdir().join("kind");
        let err = Build::new()
            .file("x.cpp")
            .out_dir(&dir)
            .cargo_metadata(false)
            .try_compile("t")
            .unwrap_err();
        assert!(matches!(err, Error::UnknownSourceKind { .. }), "{err}");
    }

    fn tempdir() -> PathBuf {
        let dir = env::temp_dir().join(format!("sycl-build-test-{}", std::process::id()));
        fs::create_dir_all(&dir).unwrap();
        dir
    }
}
