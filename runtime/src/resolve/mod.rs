//! Resolution: what a program is linked from, decided once and checked before any driver sees
//! device code. A launch asks for a kernel's [`Plan`] ([`plan_kernel`]), a kernel bundle's
//! link for its images' ([`plan_bundle`]); both are the same steps:
//!
//! 1. the image form: the first the device can use that has the kernel (its own ahead-of-time
//!    form, then its linkable form; a bundle is always of the linkable form);
//! 2. the walk (`collect`): the roots, each import's provider in loader order (strict mode,
//!    duplicates traced, `RTLD_LOCAL` scopes; a definition another binary's image wins is
//!    overridden, for every caller, and the winner taken), virtual-function sets whole (real or dummy) and
//!    the kernels that use them; an import nobody exports is an error that names the symbol,
//!    the kernel and the binaries searched;
//! 3. the checks: every image against the device's capabilities (optional kernel features:
//!    the aspect, sub-group or work-group size, fixed target it needs), call cycles across the
//!    images (`cycles`), and that every import of every image is exported by one of them;
//! 4. for a kernel's GPU image (PTX or native), the twin with its imports compiled in, when
//!    resolution picked exactly what it compiled in and overrode nothing (`inline`).
//!
//! Overridden definitions are made imports when the program is built (SPIR-V's linkage, PTX's
//! `.visible`): an ahead-of-time object's own calls cannot be redirected, so a form of those
//! with an overridden definition gives way to the device's linkable form, traced.
//!
//! A plan is only made complete: nothing incomplete is ever handed to `program`.

mod collect;
mod cycles;
mod inline;

use std::collections::HashSet;
use std::fmt;

use sycl_format::{CudaArch, ImageFormat, Target};

pub use collect::STRICT_ENV;
pub(crate) use collect::{overridden_in, Overridden};

use crate::backend::Capabilities;
use crate::registry::{ImageId, Registry};
use crate::trace::trace;
use crate::Error;

/// A checked plan for one program: every image it is linked from, all of one form, in link
/// order (the roots first). Only this module makes one, and only after every check passed:
/// holding a `Plan` means the program is complete and the device can run it.
#[derive(Debug, Clone)]
pub(crate) struct Plan {
    target: Target,
    images: Vec<ImageId>,
    overridden: Overridden,
}

impl Plan {
    /// The image form (target) of every image.
    pub(crate) fn target(&self) -> Target {
        self.target
    }

    /// The images, in link order.
    pub(crate) fn images(&self) -> &[ImageId] {
        &self.images
    }

    /// The definitions of its images that another image of the plan wins, each to be made an
    /// import before the image is compiled or linked: empty for a program without duplicates.
    pub(crate) fn overridden(&self) -> &Overridden {
        &self.overridden
    }

    /// The definitions of `image` that another image wins (none for most).
    pub(crate) fn overridden_in(&self, image: ImageId) -> &[String] {
        overridden_in(&self.overridden, image)
    }
}

/// The device a plan is made for: its name for messages, and what it can run.
#[derive(Clone, Copy)]
pub(crate) struct ForDevice<'a> {
    pub(crate) name: &'a str,
    pub(crate) caps: &'a Capabilities,
}

impl ForDevice<'_> {
    /// Whether the device has everything `image` requires (aspects, sizes, fixed targets).
    pub(crate) fn can_run(&self, image: sycl_format::ImageView<'_>) -> bool {
        image.requirements().is_ok_and(|r| self.caps.check(&r).is_ok())
    }
}

/// What a plan is for, as errors and traces name it.
#[derive(Clone, Copy)]
pub(crate) enum Subject<'a> {
    /// A launch of this kernel.
    Kernel(&'a str),
    /// The link of a kernel bundle.
    Bundle,
}

impl Subject<'_> {
    /// The kernel a failed check names (`(bundle)` for a bundle).
    fn name(&self) -> &str {
        match self {
            Subject::Kernel(kernel) => kernel,
            Subject::Bundle => "(bundle)",
        }
    }

    /// The kernel an unresolved import names: for a bundle, the image that imports it.
    fn name_for(&self, requester: ImageId, registry: &Registry) -> String {
        match self {
            Subject::Kernel(kernel) => kernel.to_string(),
            Subject::Bundle => format!("(bundle of {})", registry.describe(requester)),
        }
    }
}

impl fmt::Display for Subject<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Subject::Kernel(kernel) => write!(f, "kernel {kernel}"),
            Subject::Bundle => f.write_str("a kernel bundle"),
        }
    }
}

/// The plan for launching `kernel` on `device`, trying the image forms `targets` in order.
pub(crate) fn plan_kernel(
    registry: &Registry,
    kernel: &str,
    targets: &[Target],
    device: ForDevice<'_>,
) -> Result<Plan, Error> {
    let subject = Subject::Kernel(kernel);
    let can_run = |id: ImageId| device.can_run(registry.view(id));
    let mut failure = None;
    for &target in targets {
        let Some(&root) = registry.kernel_images(target, kernel).first() else { continue };
        // SPIR bitcode cannot be linked by the device: only a self-contained image will do.
        if target.format() == ImageFormat::SpirBitcode
            && registry.view(root).imported_symbols().next().is_some()
        {
            continue;
        }
        match collect::collect(registry, target, subject, &[root], &can_run, collect::strict()) {
            Ok(collected) if !collected.overridden.is_empty() && !can_override(target) => {
                let (image, symbols) = &collected.overridden[0];
                let reason = format!(
                    "{} defines {} too, which an image first in loader order wins, and its {} \
                     objects' own calls cannot be redirected: build with the device's linkable \
                     target too (ptx64 for NVIDIA GPUs, spir64 for OpenCL devices)",
                    registry.describe(*image),
                    symbols.join(", "),
                    target.name()
                );
                trace!("interpose", "{kernel} on {}: {reason}; trying the next form", device.name);
                let e = Error::KernelNotSupported {
                    kernel: kernel.to_string(),
                    device: device.name.to_string(),
                    reason,
                };
                failure = failure.or(Some(e));
            }
            Ok(collected) => {
                let collect::Collected { images, overridden } = collected;
                check(registry, subject, device, target, &images)?;
                let twin = target
                    .inlined()
                    .filter(|_| overridden.is_empty())
                    .and_then(|twin| inline::swap_in_twin(registry, kernel, &images, twin));
                let (target, images) = twin.unwrap_or((target, images));
                return Ok(Plan { target, images, overridden });
            }
            Err(e) => failure = failure.or(Some(e)),
        }
    }
    Err(failure.unwrap_or_else(|| not_found(registry, kernel, device)))
}

/// Whether a definition in an image of `target`'s form can be made an import: SPIR-V's
/// linkage and PTX's `.visible` can; an ahead-of-time object's own calls are bound.
fn can_override(target: Target) -> bool {
    matches!(target.format(), ImageFormat::SpirV | ImageFormat::Ptx)
}

/// The error for `kernel`, which no image of a form `device` takes defines. An ahead-of-time
/// target's aspect filter leaves out what the target cannot run (`ptx64` has no images): when
/// the kernel's SPIR-V image says the device cannot run it, that is the error
/// (`kernel_not_supported`, as the check of optional kernel features words it), else
/// `kernel_not_found`.
pub(crate) fn not_found(registry: &Registry, kernel: &str, device: ForDevice<'_>) -> Error {
    if let Some(&spirv) = registry.kernel_images(Target::Spir64, kernel).first() {
        if let Err(e) = check_requirements(registry, Subject::Kernel(kernel), device, &[spirv]) {
            return e;
        }
    }
    // A GPU the binaries carry only other architectures' native code for.
    if let Some((major, minor)) = device.caps.compute_capability {
        let carried: Vec<&str> = CudaArch::ALL
            .into_iter()
            .filter(|&a| !registry.kernel_images(Target::NvidiaGpu(a), kernel).is_empty())
            .map(CudaArch::name)
            .collect();
        if !carried.is_empty() {
            return Error::KernelNotSupported {
                kernel: kernel.to_string(),
                device: device.name.to_string(),
                reason: format!(
                    "the binaries carry native code for {} and no PTX, and this GPU is of compute \
                     capability {major}.{minor}: build with the ptx64 target, or nvidia_gpu_sm_{major}{minor}",
                    carried.join(", ")
                ),
            };
        }
    }
    Error::KernelNotFound {
        kernel: kernel.to_string(),
        searched: registry.searched(),
        similar: registry.similar_kernels(kernel),
    }
}

/// The plan for linking a bundle's images `roots` (of the device's linkable form `target`)
/// into one program with the providers of their imports.
pub(crate) fn plan_bundle(
    registry: &Registry,
    roots: &[ImageId],
    target: Target,
    device: ForDevice<'_>,
) -> Result<Plan, Error> {
    let can_run = |id: ImageId| device.can_run(registry.view(id));
    let collect::Collected { images, overridden } =
        collect::collect(registry, target, Subject::Bundle, roots, &can_run, collect::strict())?;
    check(registry, Subject::Bundle, device, target, &images)?;
    Ok(Plan { target, images, overridden })
}

/// Every check a plan passes before a driver sees it.
fn check(
    registry: &Registry,
    subject: Subject<'_>,
    device: ForDevice<'_>,
    target: Target,
    images: &[ImageId],
) -> Result<(), Error> {
    check_requirements(registry, subject, device, images)?;
    // Recursion is refused for every device: PoCL's compiler dies of it.
    cycles::check(registry, subject.name(), images)?;
    check_complete(registry, subject, target, images)
}

/// Each image against the device's capabilities, before any device code is used. For a
/// bundle, the error names the kernels of the image the device cannot run, as a launch of one
/// of them would.
fn check_requirements(
    registry: &Registry,
    subject: Subject<'_>,
    device: ForDevice<'_>,
    images: &[ImageId],
) -> Result<(), Error> {
    for &id in images {
        let image = registry.view(id);
        let unsupported = |reason: String| Error::KernelNotSupported {
            kernel: match subject {
                Subject::Bundle if image.kernels().next().is_some() => {
                    image.kernels().collect::<Vec<_>>().join(", ")
                }
                _ => subject.name_for(id, registry),
            },
            device: device.name.to_string(),
            reason,
        };
        let requirements = image.requirements().map_err(|e| {
            unsupported(format!("{}: malformed device requirements: {e}", registry.describe(id)))
        })?;
        device.caps.check(&requirements).map_err(unsupported)?;
    }
    Ok(())
}

/// Every import of every image exported by one of them: the walk guarantees it; this says so
/// where a driver would otherwise be the one to find out (some crash on it).
fn check_complete(
    registry: &Registry,
    subject: Subject<'_>,
    target: Target,
    images: &[ImageId],
) -> Result<(), Error> {
    let exported: HashSet<&str> =
        images.iter().flat_map(|&id| registry.view(id).exported_symbols()).collect();
    for &id in images {
        if let Some(symbol) = registry.view(id).imported_symbols().find(|s| !exported.contains(s)) {
            return Err(collect::unresolved(registry, target, symbol, &subject, id));
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests;
