//! Ahead-of-time targets: turning post-linked SPIR-V images into what a device builds without
//! a SPIR-V front end. `intel_cpu_x86_64` compiles with the Intel CPU OpenCL runtime (as
//! `opencl-aot` does) into a compiled-object program binary, linkable at run time; `pocl_cpu`
//! translates to the SPIR bitcode that PoCL builds; `ptx64` translates to PTX for the CUDA
//! driver (`ptx.rs`).

use std::process::Command;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Mutex;

use anyhow::{anyhow, bail, Context, Result};
use sycl_format::Target;
use sycl_spirv::PostLinkImage;

use crate::ptx;

/// Each image built for `target` (an ahead-of-time target), in order. PTX images are made side
/// by side, one per core: each runs five LLVM tools.
pub(crate) fn compile(target: Target, images: &[&PostLinkImage]) -> Result<Vec<Vec<u8>>> {
    let context =
        |image: &PostLinkImage| format!("building image of {} for {target}", describe(image));
    match target {
        Target::IntelCpuX86_64 => images
            .iter()
            .map(|image| {
                sycl_runtime::compile_object_for("intel:cpu", &image.spirv)
                    .map_err(|e| anyhow!("{e}\n(the {target} target compiles with Intel's CPU OpenCL runtime at link time)"))
                    .with_context(|| context(image))
            })
            .collect(),
        Target::PoclCpu => images.iter().map(|image| to_spir_bitcode(&image.spirv).with_context(|| context(image))).collect(),
        ptx::TARGET => {
            let tools = ptx::Toolchain::find()?;
            in_parallel(images, |image| ptx::compile(image, &tools).with_context(|| context(image)))
        }
        Target::Spir64 | Target::Ptx64Inlined => {
            bail!("the {target} target's images are not compiled one by one ahead of time")
        }
    }
}

fn describe(image: &PostLinkImage) -> String {
    let names: Vec<&str> =
        image.kernels.iter().chain(&image.exported).map(String::as_str).collect();
    names.join(", ")
}

/// `f` over `items` on as many threads as there are cores (at most one per item); the
/// results in order, or the first error in order.
pub(crate) fn in_parallel<T: Sync, R: Send>(
    items: &[T],
    f: impl Fn(&T) -> Result<R> + Sync,
) -> Result<Vec<R>> {
    let workers = std::thread::available_parallelism().map_or(1, |n| n.get()).min(items.len());
    if workers <= 1 {
        return items.iter().map(&f).collect();
    }
    let next = AtomicUsize::new(0);
    let results: Mutex<Vec<Option<Result<R>>>> = Mutex::new(items.iter().map(|_| None).collect());
    std::thread::scope(|scope| {
        for _ in 0..workers {
            scope.spawn(|| loop {
                let i = next.fetch_add(1, Ordering::Relaxed);
                let Some(item) = items.get(i) else { break };
                let result = f(item);
                results.lock().unwrap_or_else(|e| e.into_inner())[i] = Some(result);
            });
        }
    });
    let results = results.into_inner().unwrap_or_else(|e| e.into_inner());
    results.into_iter().map(|r| r.expect("every item was taken by a worker")).collect()
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parallel_results_keep_their_order_and_the_first_error_wins() {
        let items: Vec<u32> = (0..20).collect();
        assert_eq!(
            in_parallel(&items, |i| Ok(i * 2)).unwrap(),
            items.iter().map(|i| i * 2).collect::<Vec<_>>()
        );
        let err =
            in_parallel(&items, |i| if *i >= 7 { bail!("item {i}") } else { Ok(*i) }).unwrap_err();
        assert_eq!(err.to_string(), "item 7");
    }
}
