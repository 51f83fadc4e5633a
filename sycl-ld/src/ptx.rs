//! The `ptx64` target: PTX for NVIDIA GPUs (sm_70 on: V100, T4, A100, the RTX 20 to 40 series,
//! L4, H100), which the CUDA driver compiles and links
//! at run time (`cuLink*`), made from each post-linked SPIR-V image. The SPIR-V stays the
//! image's truth: the PTX form carries the same kernels, exports, imports and property sets.
//!
//! Per image:
//!
//! ```text
//! llvm-spirv-15 -r --spirv-target-env=CL1.2   SPIR-V → SPIR LLVM bitcode, builtins as OpenCL 1.2 names
//! llvm-dis-16                                 → text, typed pointers read as opaque ones
//! retarget (ptx/retarget.rs)                  → NVPTX IR; ptx/shim.rs: our builtins, as IR
//! llvm-link-16 IMAGE SHIM --only-needed --internalize nvptx64--nvidiacl.bc   (libclc)
//! opt-16 -O2
//! llc-16 -march=nvptx64 -mcpu=sm_70 -mattr=+ptx60 -nvptx-sched4reg      → PTX 6.0
//! ```
//!
//! **Why text.** The differences between SPIR and NVPTX that matter here are LLVM's: calling
//! conventions, the data layout, address-space numbers in types and intrinsic names, and the
//! names `llvm-spirv -r` gives builtins (`_Z5fractfPU3AS4f`), which exist only once the
//! translator has run. Rewriting our SPIR-V before `-r` (with `sycl-spirv`) could change storage
//! classes, but not the names the translator then writes; a pass over the IR it writes sees
//! everything, and LLVM 16's textual IR with opaque pointers is regular enough to rewrite token
//! by token (`ptx/retarget.rs`), with no LLVM library linked into `sycl-ld`.
//!
//! **Why LLVM 16.** It reads `llvm-spirv-15`'s typed-pointer bitcode as opaque pointers, as
//! libclc's library is (and its NVPTX back end knows sm_90 and PTX 7.8, should a target ask
//! for them). **Why CL1.2.** With OpenCL 2.0 names, `llvm-spirv -r` writes barriers
//! as `work_group_barrier` and atomics as `atomic_*_explicit`, which libclc does not define.
//! **Why `-nvptx-sched4reg`.** Measured 4% faster on SGEMM.
//!
//! A builtin neither libclc nor `ptx/shim.rs` defines would stay an `.extern .func` that no
//! image exports, and the CUDA link would fail at run time; [`compile_with`] refuses it at link
//! time instead, naming the builtin. Features the device lacks by its configuration entry
//! (images, sub-group sizes other than 32) never get here: the aspect filter keeps those
//! images out of the target. Half (`fp16`) does: NVPTX compiles half arithmetic natively for
//! sm_70, and `ptx/shim.rs` defines the builtins on half that libclc lacks through their float
//! twins.

mod mangle;
mod retarget;
mod shim;

use std::path::{Path, PathBuf};
use std::process::Command;

use anyhow::{bail, Context, Result};
use sycl_build::{Tool, ToolFile};
use sycl_format::{Target, PTX_SPEC_CONSTANT_PREFIX};
use sycl_spirv::PostLinkImage;

/// Set (not to 0), each image's intermediate files are kept (the SPIR LLVM IR, the
/// retargeted IR, our builtins, the linked and optimised bitcode, the PTX) and their directory
/// named on stderr.
pub(crate) const KEEP_ENV: &str = "SYCL_LD_PTX_KEEP";

/// The target this module makes images for.
pub(crate) const TARGET: Target = Target::Ptx64;
/// The GPU architecture and PTX version `llc` writes for: the oldest architecture with the
/// warp-synchronous instructions sub-groups use (`shfl.sync`, `vote.sync`: PTX 6.0, CUDA 9),
/// so that every NVIDIA GPU of the last years loads the PTX; the driver's JIT compiles it for
/// the GPU at hand (sm_90 on an H100), so the code is the GPU's own.
pub(crate) fn cpu() -> String {
    let (major, minor) = sycl_format::PTX_COMPUTE_CAPABILITY;
    format!("sm_{major}{minor}")
}
pub(crate) const PTX_FEATURE: &str = "+ptx60";

/// The tools and the library the translation runs, found once per link.
pub(crate) struct Toolchain {
    llvm_spirv: PathBuf,
    llvm_dis: PathBuf,
    llvm_link: PathBuf,
    opt: PathBuf,
    llc: PathBuf,
    libclc: PathBuf,
}

impl Toolchain {
    pub(crate) fn find() -> Result<Toolchain> {
        let context = || format!("the {TARGET} target needs LLVM 16 and libclc");
        Ok(Toolchain {
            llvm_spirv: Tool::LLVM_SPIRV.find(None, false).with_context(context)?,
            llvm_dis: Tool::LLVM_DIS.find(None, false).with_context(context)?,
            llvm_link: Tool::LLVM_LINK.find(None, false).with_context(context)?,
            opt: Tool::OPT_16.find(None, false).with_context(context)?,
            llc: Tool::LLC.find(None, false).with_context(context)?,
            libclc: ToolFile::LIBCLC_NVPTX.find(None, false).with_context(context)?,
        })
    }
}

/// A function another binary exports, compiled into an image's PTX instead of imported: the
/// SPIR-V image that defines it (with no imports, no specialization constants) and its exports.
pub(crate) struct Provider<'a> {
    pub spirv: &'a [u8],
    pub exported: Vec<String>,
}

/// The PTX of one post-linked image, with `providers`' functions (none for the image itself,
/// some for a twin) linked in before the optimiser runs, so that their calls are inlined as calls inside one image are: what
/// `cuLink` cannot do across modules (ptxas never inlines across them).
pub(crate) fn compile_with(
    image: &PostLinkImage,
    providers: &[Provider],
    tools: &Toolchain,
) -> Result<Vec<u8>> {
    let keep = std::env::var_os(KEEP_ENV).is_some_and(|v| !v.is_empty() && v != "0");
    let dir = tempfile::Builder::new()
        .prefix("sycl-ptx-")
        .disable_cleanup(keep)
        .tempdir()
        .context("creating a temporary directory")?;
    if keep {
        let names: Vec<&str> =
            image.kernels.iter().chain(&image.exported).map(String::as_str).collect();
        eprintln!(
            "sycl-ld: {TARGET} image of {}: intermediate files kept in {}",
            names.join(", "),
            dir.path().display()
        );
    }
    let path = |name: &str| dir.path().join(name);
    // The functions the image declares: its imports, and the members of virtual-function sets
    // its kernels call.
    let mut module = sycl_spirv::load(&image.spirv).context("reading the image's SPIR-V")?;
    let declared = sycl_spirv::Symbols::of(&module).declared_functions(&module);
    let spec_globals: Vec<(u32, String)> = image
        .spec_constants
        .iter()
        .map(|c| (c.id, format!("{PTX_SPEC_CONSTANT_PREFIX}{}", c.name)))
        .collect();
    let lowered = sycl_spirv::spec::lower_to_globals(&mut module, &spec_globals).map_err(|name| {
        anyhow::anyhow!(
            "the {TARGET} target cannot set specialization constant `{}`: a constant expression uses it \
             (read it with SYCL_SPEC in a function instead)",
            name.trim_start_matches(PTX_SPEC_CONSTANT_PREFIX)
        )
    })?;
    let ir = spir_ir(&image.spirv, module, !lowered.is_empty(), tools, &path("image"))?;

    let symbols = retarget::Symbols {
        kernels: &image.kernels,
        exported: &image.exported,
        declared: &declared,
    };
    let retargeted = retarget::retarget(&ir, &symbols, &shim::redirect);
    let mut builtins = retargeted.builtins;
    let mut modules = vec![path("image.nvptx.ll")];
    for (i, provider) in providers.iter().enumerate() {
        let (module, provided) =
            retarget_provider(provider, tools, &dir.path().join(format!("provider{i}")))?;
        for builtin in provided {
            if !builtins.iter().any(|b| b.name == builtin.name) {
                builtins.push(builtin);
            }
        }
        modules.push(module);
    }
    let shim = shim::shim(&builtins);
    let mut module = spec_constants_in_const_space(&retargeted.module, &image.spec_constants);
    if providers.is_empty() && !image.exported.is_empty() {
        module = interposable(&module);
    }
    write(&path("image.nvptx.ll"), module.as_bytes())?;
    write(&path("shim.ll"), shim.as_bytes())?;
    modules.push(path("shim.ll"));

    let modules: Vec<&Path> = modules.iter().map(PathBuf::as_path).collect();
    let ptx = link_and_compile(tools, &modules, dir.path())?;
    check(&ptx, image, &declared)?;
    Ok(ptx.into_bytes())
}

/// `ir` with its exported functions interposable (LLVM's `SemanticInterposition` module flag:
/// a definition that is not `dso_local`, as none is after `llvm-spirv -r`, may be replaced at
/// link time), so that the optimiser inlines no call to them: the runtime makes an image's
/// definition an `.extern` when another binary's wins (as sycl-build keeps `SYCL_EXTERNAL`
/// functions interposable in the SPIR-V), and every call must then reach the winner's.
fn interposable(ir: &str) -> String {
    let next = ir
        .lines()
        .filter_map(|l| l.strip_prefix('!')?.split_once(' ')?.0.parse::<u64>().ok())
        .max()
        .map_or(0, |n| n + 1);
    let flag = format!("!{next} = !{{i32 1, !\"SemanticInterposition\", i32 1}}\n");
    match ir.find("\n!llvm.module.flags = !{") {
        Some(at) => {
            let open = at + "\n!llvm.module.flags = !{".len();
            let mut out = String::with_capacity(ir.len() + 64);
            out.push_str(&ir[..open]);
            out.push_str(&format!("!{next}"));
            if !ir[open..].starts_with('}') {
                out.push_str(", ");
            }
            out.push_str(&ir[open..]);
            out.push_str(&flag);
            out
        }
        None => format!("{ir}\n!llvm.module.flags = !{{!{next}}}\n{flag}"),
    }
}

/// A provider's SPIR-V as NVPTX IR in `{stem}.nvptx.ll`, with the builtins it declares.
fn retarget_provider(
    provider: &Provider,
    tools: &Toolchain,
    stem: &Path,
) -> Result<(PathBuf, Vec<retarget::Declaration>)> {
    let module = sycl_spirv::load(provider.spirv).context("reading a provider's SPIR-V")?;
    let declared = sycl_spirv::Symbols::of(&module).declared_functions(&module);
    let ir = spir_ir(provider.spirv, module, false, tools, stem)?;
    let symbols =
        retarget::Symbols { kernels: &[], exported: &provider.exported, declared: &declared };
    let retargeted = retarget::retarget(&ir, &symbols, &shim::redirect);
    let file = stem.with_extension("nvptx.ll");
    write(&file, retargeted.module.as_bytes())?;
    Ok((file, retargeted.builtins))
}

/// SPIR-V as the SPIR LLVM IR `llvm-spirv -r` writes (through `{stem}.spv`, `.bc`, `.ll`):
/// `module`, loaded from `spirv` and `changed` by a pass or not, with its sub-group barriers
/// made calls to a function of ours, which `llvm-spirv -r --spirv-target-env=CL1.2` would
/// otherwise write as work-group barriers. An unchanged module is written as it came.
fn spir_ir(
    spirv: &[u8],
    mut module: sycl_spirv::dr::Module,
    changed: bool,
    tools: &Toolchain,
    stem: &Path,
) -> Result<String> {
    let file = |ext: &str| stem.with_extension(ext);
    let barriers = sycl_spirv::sub_group_barriers_to_calls(&mut module, shim::SUB_GROUP_BARRIER);
    match (changed, barriers) {
        (false, 0) => write(&file("spv"), spirv)?,
        _ => write(&file("spv"), &sycl_spirv::assemble(&module))?,
    }
    run(Command::new(&tools.llvm_spirv)
        .args(["-r", "--spirv-target-env=CL1.2"])
        .arg(file("spv"))
        .arg("-o")
        .arg(file("bc")))?;
    run(Command::new(&tools.llvm_dis).arg(file("bc")).arg("-o").arg(file("ll")))?;
    std::fs::read_to_string(file("ll")).with_context(|| format!("reading {}", file("ll").display()))
}

/// The variables `lower_to_globals` made for specialization constants, as the runtime finds
/// them in the PTX: `.weak` (one per link, however many images read it), in the const space
/// (read by every thread alike), `externally_initialized` (never folded), and an array of the
/// value's bytes, so the runtime writes any type's value the same way:
/// `@__sycl_spec_constant_scale = internal addrspace(1) global i32 2, align 4` →
/// `@__sycl_spec_constant_scale = weak addrspace(4) externally_initialized global [4 x i8] c"\02\00\00\00", align 4`.
fn spec_constants_in_const_space(ir: &str, constants: &[sycl_spirv::spec::SpecConstant]) -> String {
    let mut ir = ir.to_string();
    for c in constants {
        let global = format!("@{PTX_SPEC_CONSTANT_PREFIX}{}", c.name);
        let bytes: String = c.default.iter().map(|b| format!("\\{b:02X}")).collect();
        let align = c.default.len().next_power_of_two().clamp(1, 8);
        let definition = format!(
            "{global} = weak addrspace(4) externally_initialized global [{} x i8] c\"{bytes}\", align {align}",
            c.default.len()
        );
        let is_definition = |line: &str| {
            line.strip_prefix(global.as_str()).is_some_and(|rest| rest.starts_with(" = "))
        };
        let use_in_global = format!("ptr addrspace(1) {global}");
        let use_in_const = format!("ptr addrspace(4) {global}");
        ir = ir
            .lines()
            .map(|line| {
                if is_definition(line) {
                    return format!("{definition}\n");
                }
                let mut out = String::with_capacity(line.len());
                let mut rest = line;
                while let Some(at) = rest.find(&use_in_global) {
                    let end = at + use_in_global.len();
                    let whole = !rest[end..].starts_with(|c: char| {
                        c.is_ascii_alphanumeric() || c == '_' || c == '.' || c == '$'
                    });
                    out.push_str(&rest[..at]);
                    out.push_str(if whole { &use_in_const } else { &use_in_global });
                    rest = &rest[end..];
                }
                out.push_str(rest);
                out + "\n"
            })
            .collect();
    }
    ir
}

/// `modules` (the image first) linked with libclc, optimised and compiled to PTX, in `dir`.
/// Every module after the first is linked only where needed and made internal: our builtins,
/// then libclc's.
fn link_and_compile(tools: &Toolchain, modules: &[&Path], dir: &Path) -> Result<String> {
    let path = |name: &str| dir.join(name);
    let (first, rest) = modules.split_first().expect("an image module");
    run(Command::new(&tools.llvm_link)
        .arg(first)
        .args(rest)
        .args(["--only-needed", "--internalize"])
        .arg(&tools.libclc)
        .arg("-o")
        .arg(path("linked.bc")))?;
    run(Command::new(&tools.opt).arg("-O2").arg(path("linked.bc")).arg("-o").arg(path("opt.bc")))?;
    run(Command::new(&tools.llc)
        .args([
            "-march=nvptx64",
            &format!("-mcpu={}", cpu()),
            &format!("-mattr={PTX_FEATURE}"),
            "-nvptx-sched4reg",
        ])
        .arg(path("opt.bc"))
        .arg("-o")
        .arg(path("image.ptx")))?;
    std::fs::read_to_string(path("image.ptx")).context("reading the PTX")
}

/// The PTX declares what the image's records say: each kernel a `.visible .entry`, each
/// export a `.visible .func`, and nothing `.extern` but the functions its SPIR-V declares
/// (imports, and the virtual functions its kernels call): no builtin is left to the CUDA link.
fn check(ptx: &str, image: &PostLinkImage, declared: &[String]) -> Result<()> {
    let summary = Summary::of(ptx);
    let missing: Vec<&str> = summary
        .externs
        .iter()
        .map(String::as_str)
        .filter(|e| !declared.iter().any(|d| d == e))
        .collect();
    if !missing.is_empty() {
        let names: Vec<String> = missing.iter().map(|m| describe_builtin(m)).collect();
        bail!(
            "the {TARGET} target has no {}: neither libclc's NVPTX library nor sycl-ld defines {}, \
             so the CUDA driver could not link the image",
            names.join(", "),
            if missing.len() == 1 { "it" } else { "them" }
        );
    }
    for kernel in &image.kernels {
        if !summary.entries.contains(kernel) {
            bail!("internal error: kernel `{kernel}` is not a `.visible .entry` of its PTX");
        }
    }
    for export in &image.exported {
        if !summary.functions.contains(export) {
            bail!(
                "internal error: exported function `{export}` is not a `.visible .func` of its PTX"
            );
        }
    }
    Ok(())
}

/// `_Z16get_sub_group_idv` → `get_sub_group_id (_Z16get_sub_group_idv)`; other names as they are.
fn describe_builtin(name: &str) -> String {
    match mangle::demangle(name) {
        Some(n) => format!("`{}` ({name})", n.base),
        None => format!("`{name}`"),
    }
}

/// What a PTX module declares, read from its directives.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub(crate) struct Summary {
    /// `.version`, `.target`.
    pub version: String,
    pub target: String,
    /// `.visible .entry`: kernels.
    pub entries: Vec<String>,
    /// `.visible .func`: exported functions.
    pub functions: Vec<String>,
    /// `.extern .func`: imported functions.
    pub externs: Vec<String>,
    /// `.visible` and `.weak` variables (`.global`, `.const`, `.shared`).
    pub variables: Vec<String>,
}

impl Summary {
    pub(crate) fn of(ptx: &str) -> Summary {
        let mut s = Summary::default();
        for line in ptx.lines() {
            let line = line.trim_start();
            let words: Vec<&str> = line.split_whitespace().collect();
            match words.as_slice() {
                [".version", v, ..] => s.version = v.to_string(),
                [".target", t, ..] => s.target = t.trim_end_matches(',').to_string(),
                [".visible" | ".extern" | ".weak", kind, ..] => {
                    let linkage = words[0];
                    let after = line[line.find(kind).expect("a word of the line") + kind.len()..]
                        .trim_start();
                    let Some(name) = symbol_name(after) else { continue };
                    match (linkage, *kind) {
                        (".visible", ".entry") => s.entries.push(name),
                        (".visible", ".func") => s.functions.push(name),
                        (".extern", ".func") => s.externs.push(name),
                        (".visible" | ".weak", ".global" | ".const" | ".shared") => {
                            s.variables.push(name)
                        }
                        _ => {}
                    }
                }
                _ => {}
            }
        }
        s
    }
}

/// The name after `.func`/`.entry` (past a `(.param …)` return value) or a variable's type
/// and alignment: `(.param .b32 func_retval0) lib_func(` → `lib_func`,
/// `.align 4 .b8 __sycl_spec_constant_scale[4];` → `__sycl_spec_constant_scale`.
fn symbol_name(text: &str) -> Option<String> {
    let mut rest = text;
    if rest.starts_with('(') {
        rest = rest[rest.find(')')? + 1..].trim_start();
    }
    let mut words = rest
        .split(|c: char| c.is_whitespace() || c == '(' || c == ';' || c == '[' || c == '=')
        .filter(|w| !w.is_empty());
    let mut name = words.next()?;
    while name.starts_with('.') {
        name = words.next()?;
        if name.chars().all(|c| c.is_ascii_digit()) {
            name = words.next()?; // `.align 4`
        }
    }
    Some(name.to_string())
}

fn write(path: &Path, bytes: &[u8]) -> Result<()> {
    std::fs::write(path, bytes).with_context(|| format!("writing {}", path.display()))
}

/// Runs a tool; its failure reports the command line and what it wrote, without LLVM's stack
/// dump and libclc's harmless target-triple warning.
fn run(cmd: &mut Command) -> Result<()> {
    let out = cmd.output().with_context(|| format!("running {:?}", cmd.get_program()))?;
    if !out.status.success() {
        let stderr = String::from_utf8_lossy(&out.stderr);
        let message: Vec<&str> = stderr
            .lines()
            .take_while(|l| {
                !l.starts_with("PLEASE submit a bug report") && !l.starts_with("Stack dump:")
            })
            .filter(|l| !l.contains("Linking two modules of different target triples"))
            .collect();
        bail!("{cmd:?} failed ({}):\n{}", out.status, message.join("\n"));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    const PTX: &str = "//\n.version 7.8\n.target sm_90\n.address_size 64\n\n\
.extern .func  (.param .b32 func_retval0) lib_func\n(\n\t.param .b32 lib_func_param_0\n)\n;\n\
.weak .const .align 4 .b8 __sycl_spec_constant_scale[4];\n.visible .global .align 4 .b8 tbl[16] = {0};\n\
.visible .func  (.param .b32 func_retval0) exported(\n\t.param .b32 exported_param_0\n)\n{\n}\n\
.func helper()\n{\n}\n.visible .entry k(\n\t.param .u64 k_param_0\n)\n{\n}\n";

    #[test]
    fn exported_functions_are_made_interposable_by_a_module_flag() {
        let ir = "define spir_func i32 @f(i32 %0) #0 {\n  ret i32 %0\n}\n\n!0 = !{i32 2, i32 2}\n!7 = !{}\n";
        let out = interposable(ir);
        assert!(out.starts_with(ir), "{out}");
        assert!(out.ends_with(
            "!llvm.module.flags = !{!8}\n!8 = !{i32 1, !\"SemanticInterposition\", i32 1}\n"
        ));
        let with_flags = "!llvm.module.flags = !{!0}\n!0 = !{i32 7, !\"PIC Level\", i32 2}\n";
        let out = interposable(&format!("; m\n{with_flags}"));
        assert!(out.contains("\n!llvm.module.flags = !{!1, !0}\n"), "{out}");
        assert!(out.ends_with("!1 = !{i32 1, !\"SemanticInterposition\", i32 1}\n"), "{out}");
        let empty = interposable("; m\n!llvm.module.flags = !{}\n");
        assert!(empty.contains("!llvm.module.flags = !{!0}\n"), "{empty}");
    }

    #[test]
    fn summaries_read_the_linkage_directives() {
        let s = Summary::of(PTX);
        assert_eq!(s.version, "7.8");
        assert_eq!(s.target, "sm_90");
        assert_eq!(s.entries, ["k"]);
        assert_eq!(s.functions, ["exported"]);
        assert_eq!(s.externs, ["lib_func"]);
        assert_eq!(s.variables, ["__sycl_spec_constant_scale", "tbl"]);
    }

    #[test]
    fn builtins_are_named_by_their_source_names() {
        assert_eq!(
            describe_builtin("_Z16get_sub_group_idv"),
            "`get_sub_group_id` (_Z16get_sub_group_idv)"
        );
        assert_eq!(describe_builtin("printf"), "`printf`");
    }
}
