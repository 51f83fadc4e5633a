//! Ahead-of-time targets: turning a post-linked SPIR-V image into what a device builds
//! without a SPIR-V front end. `intel_cpu_x86_64` compiles with the Intel CPU OpenCL runtime
//! (as `opencl-aot` does) into a compiled-object program binary, linkable at run time;
//! `pocl_cpu` translates to the SPIR bitcode that PoCL builds.

use std::process::Command;

use anyhow::{anyhow, bail, Context, Result};
use sycl_format::ImageFormat;

/// The image format an ahead-of-time target gets.
pub fn format_of(target: &str) -> Result<ImageFormat> {
    match target {
        "intel_cpu_x86_64" => Ok(ImageFormat::Native),
        "pocl_cpu" => Ok(ImageFormat::SpirBitcode),
        t => bail!("unknown target `{t}` (known: {})", sycl_build::TARGETS.join(", ")),
    }
}

pub fn compile(target: &str, spirv: &[u8]) -> Result<Vec<u8>> {
    match target {
        "intel_cpu_x86_64" => sycl_runtime::compile_object_for("intel:cpu", spirv).map_err(|e| {
            anyhow!("{e}\n(the intel_cpu_x86_64 target compiles with Intel's CPU OpenCL runtime at link time)")
        }),
        "pocl_cpu" => to_spir_bitcode(spirv),
        t => bail!("unknown target `{t}`"),
    }
}

/// `llvm-spirv-15 -r`: SPIR-V to LLVM SPIR bitcode, once builtins on generic pointers have
/// specific ones (PoCL's library has no builtin for generic pointers, as the runtime's own
/// translation for PoCL knows), and `half_*` and fences the builtins PoCL's library defines.
/// `mad` stays `mad`: whether the device has FMA is not known here.
fn to_spir_bitcode(spirv: &[u8]) -> Result<Vec<u8>> {
    let mut module = sycl_spirv::load(spirv)?;
    sycl_spirv::lower_generic_builtins(&mut module)?;
    sycl_spirv::lower_renamed_builtins(&mut module);
    let spirv = sycl_spirv::assemble(&module);
    let tool = sycl_build::Tool::LLVM_SPIRV.find(None, false)?;
    let dir = tempfile::tempdir().context("creating a temporary directory")?;
    let (input, output) = (dir.path().join("image.spv"), dir.path().join("image.bc"));
    std::fs::write(&input, spirv).with_context(|| format!("writing {}", input.display()))?;
    let mut cmd = Command::new(&tool);
    cmd.arg("-r").arg(&input).arg("-o").arg(&output);
    let out = cmd.output().with_context(|| format!("running {}", tool.display()))?;
    if !out.status.success() {
        bail!("{cmd:?} failed:\n{}", String::from_utf8_lossy(&out.stderr));
    }
    std::fs::read(&output).with_context(|| format!("reading {}", output.display()))
}
