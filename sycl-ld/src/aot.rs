//! Ahead-of-time targets: turning post-linked SPIR-V images into what a device builds without
//! a SPIR-V front end. `intel_cpu_x86_64` compiles with the Intel CPU OpenCL runtime (as
//! `opencl-aot` does) into a compiled-object program binary, linkable at run time; `pocl_cpu`
//! translates to the SPIR bitcode that PoCL builds; `ptx64` translates to PTX for the CUDA
//! driver (`ptx.rs`); `nvidia_gpu_sm_XX` assembles that PTX into native objects
//! (`native.rs`), the PTX made once per image for every NVIDIA target of a link ([`Gpu`]).

use std::collections::HashMap;
use std::path::PathBuf;
use std::process::Command;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Mutex;

use anyhow::{anyhow, bail, Context, Result};
use sycl_format::{CudaArch, Target};
use sycl_spirv::PostLinkImage;

use crate::{native, ptx};

/// What the NVIDIA targets of one link share: the tools, found once, and each image's PTX
/// (and each twin's), made once whichever of `ptx64` and the native targets asks first.
#[derive(Default)]
pub(crate) struct Gpu {
    tools: Option<ptx::Toolchain>,
    ptxas: Option<PathBuf>,
    /// By the image's address in the link's post-linked images (and, for a twin, its
    /// providers' SPIR-V addresses).
    ptx: HashMap<(usize, Vec<usize>), Vec<u8>>,
}

impl Gpu {
    fn tools(&mut self) -> Result<&ptx::Toolchain> {
        if self.tools.is_none() {
            self.tools = Some(ptx::Toolchain::find()?);
        }
        Ok(self.tools.as_ref().expect("found above"))
    }

    fn ptxas(&mut self) -> Result<PathBuf> {
        if self.ptxas.is_none() {
            let found = sycl_build::Tool::PTXAS.find(None, false).with_context(|| {
                "the nvidia_gpu_sm_XX targets assemble their images' PTX with NVIDIA's ptxas"
            })?;
            self.ptxas = Some(found);
        }
        Ok(self.ptxas.clone().expect("found above"))
    }

    /// The PTX of each `(image, providers compiled in)`, in order, made side by side (one
    /// per core: each runs five LLVM tools) where not made before.
    pub(crate) fn ptx(
        &mut self,
        items: &[(&PostLinkImage, &[ptx::Provider])],
        target: Target,
    ) -> Result<Vec<Vec<u8>>> {
        let key = |(image, providers): &(&PostLinkImage, &[ptx::Provider])| {
            let providers = providers.iter().map(|p| p.spirv.as_ptr() as usize).collect();
            (*image as *const PostLinkImage as usize, providers)
        };
        let missing: Vec<&(&PostLinkImage, &[ptx::Provider])> =
            items.iter().filter(|item| !self.ptx.contains_key(&key(item))).collect();
        if !missing.is_empty() {
            let tools = self.tools()?;
            let made = in_parallel(&missing, |(image, providers)| {
                ptx::compile_with(image, providers, tools)
                    .with_context(|| format!("building image of {} for {target}", describe(image)))
            })?;
            for (item, ptx) in missing.into_iter().zip(made) {
                self.ptx.insert(key(item), ptx);
            }
        }
        Ok(items.iter().map(|item| self.ptx[&key(item)].clone()).collect())
    }

    /// Each `(image, providers compiled in)` as a native object for `arch`, from its PTX.
    pub(crate) fn native(
        &mut self,
        items: &[(&PostLinkImage, &[ptx::Provider])],
        arch: CudaArch,
        target: Target,
    ) -> Result<Vec<Vec<u8>>> {
        let ptx = self.ptx(items, target)?;
        let ptxas = self.ptxas()?;
        let work: Vec<(&PostLinkImage, Vec<u8>)> =
            items.iter().map(|(image, _)| *image).zip(ptx).collect();
        in_parallel(&work, |(image, ptx)| {
            native::assemble(ptx, arch, &ptxas, image)
                .with_context(|| format!("building image of {} for {target}", describe(image)))
        })
    }
}

/// Each image built for `target` (an ahead-of-time target), in order.
pub(crate) fn compile(
    target: Target,
    images: &[&PostLinkImage],
    gpu: &mut Gpu,
) -> Result<Vec<Vec<u8>>> {
    let alone: Vec<(&PostLinkImage, &[ptx::Provider])> =
        images.iter().map(|image| (*image, &[][..])).collect();
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
        ptx::TARGET => gpu.ptx(&alone, target),
        Target::NvidiaGpu(arch) => gpu.native(&alone, arch, target),
        Target::Spir64 | Target::Ptx64Inlined | Target::NvidiaGpuInlined(_) => {
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
