//! The `nvidia_gpu_sm_XX` targets: native code for one NVIDIA architecture, made from an
//! image's PTX (the `ptx64` form, `ptx.rs`) by `ptxas -c`, NVIDIA's assembler, into a
//! relocatable SASS object (an ELF `ET_REL` cubin). Its imports stay undefined symbols, which
//! the CUDA driver's linker resolves at run time against other images' objects as it resolves
//! PTX, with no JIT. The object carries the same kernels, exports, imports and property sets
//! as the image's other forms.
//!
//! An image that neither imports nor exports anything (a self-contained kernel image, a twin
//! with its providers compiled in) is never linked with another: `ptxas` without `-c` makes
//! it a whole program (`ET_EXEC`), which the driver loads as it is. The driver's linker is
//! then never used, and its first use in a process costs about 2 ms (measured on an H200),
//! most of a native first launch. (A relocatable object loaded as it is fails as soon as
//! it calls a function of its own: its relocations are the linker's to apply.)
//!
//! A specialization constant keeps its variable (see `sycl_format::PTX_SPEC_CONSTANT_PREFIX`):
//! every one gets an explicit initialiser in the PTX handed to `ptxas` (`llc` writes none for
//! zeros), so that its default lies in the object's constant bank, where the runtime writes
//! the values it is given before the link (`sycl_format::cubin::set_initializer`).

use std::path::Path;
use std::process::Command;

use anyhow::{bail, Context, Result};
use sycl_format::cubin::Cubin;
use sycl_format::{CudaArch, PtxSpecConstant, PTX_SPEC_CONSTANT_PREFIX};
use sycl_spirv::PostLinkImage;

/// `ptx` (the image's PTX form) assembled for `arch` with `ptxas`, and checked: a relocatable
/// object for `arch` that defines every kernel and export of the image.
pub(crate) fn assemble(
    ptx: &[u8],
    arch: CudaArch,
    ptxas: &Path,
    image: &PostLinkImage,
) -> Result<Vec<u8>> {
    let dir = tempfile::Builder::new()
        .prefix("sycl-sass-")
        .tempdir()
        .context("creating a temporary directory")?;
    let (input, output) = (dir.path().join("image.ptx"), dir.path().join("image.cubin"));
    std::fs::write(&input, with_initialisers(ptx)?)
        .with_context(|| format!("writing {}", input.display()))?;
    let whole = is_whole_program(ptx, image)?;
    let mut cmd = Command::new(ptxas);
    if !whole {
        cmd.arg("-c");
    }
    cmd.args(["-O3", "-arch", arch.name()]).arg(&input).arg("-o").arg(&output);
    let out = cmd.output().with_context(|| format!("running {}", ptxas.display()))?;
    if !out.status.success() {
        bail!("{cmd:?} failed:\n{}", String::from_utf8_lossy(&out.stderr).trim());
    }
    let object = std::fs::read(&output).with_context(|| format!("reading {}", output.display()))?;
    check(&object, arch, image, whole)?;
    Ok(object)
}

/// Whether the image's code is all of its program: it imports nothing (no `.extern` but the
/// dynamic shared memory), exports nothing, and its only visible variables are its
/// specialization constants.
fn is_whole_program(ptx: &[u8], image: &PostLinkImage) -> Result<bool> {
    let text = std::str::from_utf8(ptx).context("the PTX is not UTF-8 text")?;
    let summary = crate::ptx::Summary::of(text);
    let imports = text.lines().any(|line| {
        let line = line.trim_start();
        line.starts_with(".extern") && !line.starts_with(".extern .shared")
    });
    // A twin's imports are compiled in: its PTX says what it still imports.
    Ok(image.exported.is_empty()
        && !imports
        && summary.functions.is_empty()
        && summary.variables.iter().all(|v| v.starts_with(PTX_SPEC_CONSTANT_PREFIX)))
}

/// `ptx` with an initialiser on each specialization constant's variable that has none:
/// `.weak .const .align 4 .b8 __sycl_spec_constant_n[4];` → `… [4] = {0, 0, 0, 0};`.
fn with_initialisers(ptx: &[u8]) -> Result<String> {
    let text = std::str::from_utf8(ptx).context("the PTX is not UTF-8 text")?;
    let mut out = String::with_capacity(text.len());
    for line in text.split_inclusive('\n') {
        match PtxSpecConstant::of(line).filter(|c| !c.initialised) {
            Some(constant) => {
                out.push_str(&constant.with_value(&vec![0; constant.size]));
                out.push('\n');
            }
            None => out.push_str(line),
        }
    }
    Ok(out)
}

/// The object `ptxas` wrote is what the runtime will take for `image`: relocatable (or a
/// `whole` program), for `arch`, defining the image's kernels and exports as functions.
fn check(object: &[u8], arch: CudaArch, image: &PostLinkImage, whole: bool) -> Result<()> {
    let cubin = Cubin::parse(object).context("reading the object ptxas wrote")?;
    let kind = |relocatable| if relocatable { "a relocatable object" } else { "a whole program" };
    if cubin.relocatable == whole || cubin.arch != arch.number() {
        bail!(
            "ptxas wrote {} for sm_{}, not {} for {}",
            kind(cubin.relocatable),
            cubin.arch,
            kind(!whole),
            arch.name()
        );
    }
    let missing: Vec<&str> = image
        .kernels
        .iter()
        .chain(&image.exported)
        .filter(|name| !cubin.symbol(name).is_some_and(|s| s.function && s.defined))
        .map(String::as_str)
        .collect();
    if !missing.is_empty() {
        bail!("the {} object does not define {}", arch.name(), missing.join(", "));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_constant_gets_an_initialiser() {
        let ptx = ".version 6.0\n.weak .const .align 4 .b8 __sycl_spec_constant_n[4];\n\
                   .weak .const .align 4 .b8 __sycl_spec_constant_s[4] = {2, 0, 0, 0};\n\
                   .global .align 4 .b8 other[4];\n";
        assert_eq!(
            with_initialisers(ptx.as_bytes()).unwrap(),
            ".version 6.0\n.weak .const .align 4 .b8 __sycl_spec_constant_n[4] = {0, 0, 0, 0};\n\
             .weak .const .align 4 .b8 __sycl_spec_constant_s[4] = {2, 0, 0, 0};\n\
             .global .align 4 .b8 other[4];\n"
        );
    }
}
