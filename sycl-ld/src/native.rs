//! The `nvidia_gpu_sm_XX` targets: native code for one NVIDIA architecture, made from an
//! image's PTX (the `ptx64` form, `ptx.rs`) by `ptxas -c`, NVIDIA's assembler, into a
//! relocatable SASS object (an ELF `ET_REL` cubin). Its imports stay undefined symbols, which
//! the CUDA driver's linker resolves at run time against other images' objects as it resolves
//! PTX, with no JIT. The object carries the same kernels, exports, imports and property sets
//! as the image's other forms.
//!
//! A specialization constant keeps its variable (see `sycl_format::PTX_SPEC_CONSTANT_PREFIX`):
//! every one gets an explicit initialiser in the PTX handed to `ptxas` (`llc` writes none for
//! zeros), so that its default lies in the object's constant bank, where the runtime writes
//! the values it is given before the link (`sycl_format::cubin::set_initializer`).

use std::path::Path;
use std::process::Command;

use anyhow::{bail, Context, Result};
use sycl_format::cubin::Cubin;
use sycl_format::{CudaArch, PTX_SPEC_CONSTANT_PREFIX};
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
    let mut cmd = Command::new(ptxas);
    cmd.args(["-c", "-O3", "-arch", arch.name()]).arg(&input).arg("-o").arg(&output);
    let out = cmd.output().with_context(|| format!("running {}", ptxas.display()))?;
    if !out.status.success() {
        bail!(
            "{} -c -arch {} failed:\n{}",
            ptxas.display(),
            arch.name(),
            String::from_utf8_lossy(&out.stderr).trim()
        );
    }
    let object = std::fs::read(&output).with_context(|| format!("reading {}", output.display()))?;
    check(&object, arch, image)?;
    Ok(object)
}

/// `ptx` with an initialiser on each specialization constant's variable that has none:
/// `.weak .const .align 4 .b8 __sycl_spec_constant_n[4];` → `… [4] = {0, 0, 0, 0};`.
fn with_initialisers(ptx: &[u8]) -> Result<String> {
    let text = std::str::from_utf8(ptx).context("the PTX is not UTF-8 text")?;
    let mut out = String::with_capacity(text.len());
    for line in text.split_inclusive('\n') {
        let declaration = line.trim_end();
        let size = declaration
            .strip_prefix(".weak .const ")
            .filter(|rest| rest.contains(PTX_SPEC_CONSTANT_PREFIX) && !rest.contains('='))
            .and_then(|rest| rest.strip_suffix("];"))
            .and_then(|rest| rest.rsplit_once('['))
            .and_then(|(_, size)| size.parse::<usize>().ok());
        match size {
            Some(size) => {
                let zeros = vec!["0"; size].join(", ");
                out.push_str(&format!(
                    "{} = {{{zeros}}};\n",
                    &declaration[..declaration.len() - 1]
                ));
            }
            None => out.push_str(line),
        }
    }
    Ok(out)
}

/// The object `ptxas` wrote is what the runtime will take for `image`: relocatable, for `arch`,
/// defining the image's kernels and exports as functions.
fn check(object: &[u8], arch: CudaArch, image: &PostLinkImage) -> Result<()> {
    let cubin = Cubin::parse(object).context("reading the object ptxas wrote")?;
    if !cubin.relocatable || cubin.arch != arch.number() {
        bail!(
            "ptxas wrote a{} object for sm_{}, not a relocatable one for {}",
            if cubin.relocatable { " relocatable" } else { "n executable" },
            cubin.arch,
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
