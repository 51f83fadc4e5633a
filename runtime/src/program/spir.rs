//! SPIR-V as the OpenCL drivers get it: builtins rewritten into the ones each device's own
//! build of a source would call, and, for devices that neither take SPIR-V nor link (PoCL),
//! the program linked here and translated to SPIR bitcode with `llvm-spirv`.

use std::path::PathBuf;
use std::process::Command;

use super::SpecValues;
use crate::backend::{Capabilities, SpecValue};
use crate::registry::{ImageId, Registry};
use crate::resolve::Plan;
use crate::trace::trace;
use crate::Error;

/// One image's SPIR-V as a device that links SPIR-V gets it: its definitions `overridden`
/// (another image wins them) made imports, its builtins rewritten ([`rewrite_builtins`]); the
/// image as it is when nothing applies, or when it does not load (the driver then says what is
/// wrong with it, in its build log) and has nothing overridden.
pub(super) fn rewrite_for_device<'a>(
    registry: &'a Registry,
    id: ImageId,
    overridden: &[String],
    caps: &Capabilities,
) -> Result<std::borrow::Cow<'a, [u8]>, Error> {
    rewrite(registry.view(id).data, overridden, caps, &registry.describe(id))
}

/// `data` (SPIR-V, `what` in messages) with `overridden` made imports and its builtins
/// rewritten for the device of `caps`; borrowed where nothing changed, or where it cannot be
/// read and nothing had to change (the driver refuses it then, in its own words).
fn rewrite<'a>(
    data: &'a [u8],
    overridden: &[String],
    caps: &Capabilities,
    what: &str,
) -> Result<std::borrow::Cow<'a, [u8]>, Error> {
    let mut module = match sycl_spirv::load(data) {
        Ok(module) => module,
        Err(_) if overridden.is_empty() => return Ok(std::borrow::Cow::Borrowed(data)),
        Err(e) => return Err(Error::Translate(format!("{what}: {e}"))),
    };
    let imported = import_overridden(&mut module, overridden, what);
    Ok(match rewrite_builtins(&mut module, caps, what)? || imported {
        true => std::borrow::Cow::Owned(sycl_spirv::assemble(&module)),
        false => std::borrow::Cow::Borrowed(data),
    })
}

/// One image's SPIR-V as a device that compiles it ahead of time (`sycl-ld`'s
/// `intel_cpu_x86_64` target) gets it: its builtins rewritten as [`rewrite_for_device`]
/// rewrites them for the same device at run time, so that what links there links here
/// (Intel's runtime builds no atomic on a generic pointer, in either path).
pub(crate) fn for_ahead_of_time<'a>(
    spirv: &'a [u8],
    caps: &Capabilities,
) -> Result<std::borrow::Cow<'a, [u8]>, Error> {
    rewrite(spirv, &[], caps, "an ahead-of-time image")
}

/// `module`'s definitions `overridden` made imports (traced); whether any was.
fn import_overridden(
    module: &mut sycl_spirv::dr::Module,
    overridden: &[String],
    what: &str,
) -> bool {
    if overridden.is_empty() {
        return false;
    }
    let names: Vec<&str> = overridden.iter().map(String::as_str).collect();
    let n = sycl_spirv::import_definitions(module, &names);
    trace!("interpose", "{what}: {} made imports", overridden.join(", "));
    n > 0
}

/// The builtins a device gets as its own build of the source would call them (see
/// [`rewrite_for_device`]); traced, and whether anything changed:
/// - Under OpenCL C 2.0 every builtin taking a pointer takes a generic one: PoCL 3.1's library
///   has none for the generic address space, and Intel's CPU runtime builds no atomic on one
///   from SPIR-V. Each gets a global, local or private pointer.
/// - PoCL 3.1's library (a device that does not link SPIR-V) defines `mem_fence` and the
///   `half_*` functions only under other names (`_cl_mem_fence`, `_cl_half_sqrt`, …): `half_*`
///   become full precision, and the program gets a `mem_fence` that calls PoCL's.
/// - clang's contractions (`llvm.fmuladd`) reach the device as `mad`, which PoCL computes
///   unfused and Intel fuses only in part, where their own builds fuse them on hardware with
///   FMA: `fma` there.
fn rewrite_builtins(
    module: &mut sycl_spirv::dr::Module,
    caps: &Capabilities,
    what: &str,
) -> Result<bool, Error> {
    let generic =
        sycl_spirv::lower_generic_builtins(module).map_err(|e| Error::Translate(e.to_string()))?;
    let renamed = if caps.links_images { 0 } else { sycl_spirv::lower_renamed_builtins(module) };
    let fused = if caps.fma { sycl_spirv::fuse_mad(module) } else { 0 };
    let changed = generic + renamed + fused > 0;
    if changed {
        trace!(
            "spir-rewrite",
            "{what}: {generic} builtin(s) on generic pointers made specific, {renamed} half_* or fence(s) given PoCL's \
             builtins, {fused} mad as fma"
        );
    }
    Ok(changed)
}

/// Links SPIR-V images with our own linker and translates the result to SPIR bitcode, for
/// devices that take neither SPIR-V nor a link step; specialization values are baked in.
/// Builtins the device's library lacks are rewritten into ones it has, and `mad` computed as
/// the device's own build of the source computes it.
pub(super) fn link_to_spir(
    registry: &Registry,
    kernel: &str,
    plan: &Plan,
    spec: &SpecValues,
    caps: &Capabilities,
) -> Result<Vec<u8>, Error> {
    // The translator first: without it nothing below is of use (its error names the package).
    let tool = llvm_spirv()?;
    let images = plan.images();
    let mut inputs = Vec::with_capacity(images.len());
    for &id in images {
        let mut module = sycl_spirv::load(registry.view(id).data)
            .map_err(|e| Error::Translate(format!("{}: {e}", registry.describe(id))))?;
        import_overridden(&mut module, plan.overridden_in(id), &registry.describe(id));
        inputs.push(sycl_spirv::LinkInput { name: registry.describe(id), module });
    }
    let mut linked = sycl_spirv::link(inputs).map_err(|e| Error::Translate(e.to_string()))?;
    // PoCL's kernel compiler cannot take calls through pointers; the whole program is here, so
    // they become switches over the functions whose addresses are taken.
    sycl_spirv::lower_function_pointers(&mut linked.module)
        .map_err(|e| Error::Translate(e.to_string()))?;
    rewrite_builtins(&mut linked.module, caps, kernel)?;
    // Lowering turns calls through pointers into direct calls: a cycle through a pointer (which
    // the images' call graphs cannot show) is now one PoCL's compiler would die of.
    if let Some(cycle) = sycl_spirv::call_cycle(&linked.module) {
        let describe = |id: &u32| {
            let binary =
                linked.origins.get(id).map(|&i| registry.binary(images[i].binary).name.as_str());
            let binary =
                binary.map_or("made by the runtime", |b| b.rsplit('/').next().unwrap_or(b));
            format!("{} ({binary})", sycl_spirv::function_name(&linked.module, *id))
        };
        let mut path: Vec<String> = cycle.iter().map(describe).collect();
        path.push(describe(&cycle[0]));
        return Err(Error::CallCycle { kernel: kernel.to_string(), cycle: path });
    }
    let mut baked = Vec::new();
    for &id in images {
        for SpecValue { id: spec_id, bytes, .. } in spec.for_image(registry.view(id)) {
            let Some(ty) = sycl_spirv::spec::llvm_type_of(&linked.module, spec_id) else {
                continue;
            };
            let text = spec_value_text(&ty, bytes).ok_or_else(|| {
                Error::InvalidArgument(format!(
                    "specialization constant {spec_id}: {} bytes for {ty}",
                    bytes.len()
                ))
            })?;
            let arg = format!("{spec_id}:{ty}:{text}");
            if !baked.contains(&arg) {
                baked.push(arg);
            }
        }
    }
    let spirv = sycl_spirv::assemble(&linked.module);
    let dir =
        tempfile::tempdir().map_err(|e| Error::Translate(format!("temporary directory: {e}")))?;
    let (input, output) = (dir.path().join("program.spv"), dir.path().join("program.bc"));
    std::fs::write(&input, spirv)
        .map_err(|e| Error::Translate(format!("{}: {e}", input.display())))?;
    let mut cmd = Command::new(&tool);
    cmd.arg("-r").arg(&input).arg("-o").arg(&output);
    if !baked.is_empty() {
        cmd.arg(format!("--spec-const={}", baked.join(" ")));
    }
    let out =
        cmd.output().map_err(|e| Error::Translate(format!("running {}: {e}", tool.display())))?;
    if !out.status.success() {
        return Err(Error::Translate(format!(
            "{cmd:?} failed: {}",
            String::from_utf8_lossy(&out.stderr)
        )));
    }
    std::fs::read(&output).map_err(|e| Error::Translate(format!("{}: {e}", output.display())))
}

/// A specialization value as `llvm-spirv --spec-const` reads it.
fn spec_value_text(ty: &str, bytes: &[u8]) -> Option<String> {
    let arr = |n: usize| -> Option<[u8; 8]> {
        let mut a = [0u8; 8];
        a.get_mut(..n)?.copy_from_slice(bytes.get(..n)?);
        (bytes.len() == n).then_some(a)
    };
    Some(match ty {
        "i1" | "i8" => i8::from_le_bytes([arr(1)?[0]]).to_string(),
        "i16" => i16::from_le_bytes(arr(2)?[..2].try_into().ok()?).to_string(),
        "i32" => i32::from_le_bytes(arr(4)?[..4].try_into().ok()?).to_string(),
        "i64" => i64::from_le_bytes(arr(8)?).to_string(),
        "f32" => format!("{:?}", f32::from_le_bytes(arr(4)?[..4].try_into().ok()?)),
        "f64" => format!("{:?}", f64::from_le_bytes(arr(8)?)),
        _ => return None,
    })
}

/// Whether the translator for devices without SPIR-V is available.
pub(crate) fn can_translate() -> bool {
    llvm_spirv().is_ok()
}

/// `$SYCL_LLVM_SPIRV`, or `llvm-spirv-15` on PATH: the one build tool the runtime runs, for
/// PoCL (docs/DEPLOYMENT.md); its error names the Debian package.
fn llvm_spirv() -> Result<PathBuf, Error> {
    if let Some(path) = std::env::var_os("SYCL_LLVM_SPIRV").filter(|v| !v.is_empty()) {
        return Ok(PathBuf::from(path));
    }
    which::which("llvm-spirv-15").map_err(|_| {
        Error::Translate(
            "llvm-spirv-15 not found on PATH: a device without SPIR-V (PoCL) needs it at run time, \
             to translate the programs the runtime links for it; install the Debian package \
             llvm-spirv-15 (`apt-get install llvm-spirv-15`), or set SYCL_LLVM_SPIRV to the translator"
                .into(),
        )
    })
}
