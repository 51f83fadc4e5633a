//! Device-image collection for a kernel on a device: for the first image form the device can
//! use that has the kernel (its own ahead-of-time form, then its linkable form), the kernel's image, then
//! for every import the first image of the same form in loader order that exports it,
//! transitively. An import nobody exports is an error that names the symbol, the kernel and
//! the binaries searched; nothing is compiled before the whole set resolves.
//!
//! Two binaries exporting one symbol: the first in loader order wins, always; the trace names
//! both, and strict mode (`SYCL_STRICT_EXPORTS=1`) makes it an error. Exports of a library
//! opened `RTLD_LOCAL` serve only that library and its dependencies. `cycles`: the check for
//! call cycles across the collected images, before any driver sees them.

mod cycles;

use std::collections::HashSet;

use sycl_format::ImageFormat;

use crate::registry::{ImageId, Registry, Variant};
use crate::trace::trace;
use crate::Error;
pub(crate) use cycles::check as check_cycles;

/// Environment variable that turns duplicate exports into errors.
pub const STRICT_ENV: &str = "SYCL_STRICT_EXPORTS";

/// The images to link for a kernel, the kernel's own image first, all of one form.
#[derive(Debug, Clone)]
pub(crate) struct Collected {
    pub variant: Variant,
    pub images: Vec<ImageId>,
}

fn strict() -> bool {
    std::env::var(STRICT_ENV).is_ok_and(|v| !v.is_empty() && v != "0")
}

/// `compatible` says whether the device can run an image (seed 003's check); it decides
/// between a virtual-function set's image and its dummy.
pub(crate) fn collect(
    registry: &Registry,
    kernel: &str,
    variants: &[Variant],
    compatible: &dyn Fn(&sycl_format::Image) -> bool,
) -> Result<Collected, Error> {
    let mut failure = None;
    for variant in variants {
        let Some(&root) = registry.kernel_images(variant, kernel).first() else { continue };
        // SPIR bitcode cannot be linked by the device: only a self-contained image will do.
        if variant.format == ImageFormat::SpirBitcode
            && registry.image(root).imported_symbols().next().is_some()
        {
            continue;
        }
        match collect_in(registry, kernel, variant, root, compatible) {
            Ok(images) => return Ok(Collected { variant: variant.clone(), images }),
            Err(e) => failure = failure.or(Some(e)),
        }
    }
    Err(failure.unwrap_or_else(|| Error::KernelNotFound {
        kernel: kernel.to_string(),
        searched: registry.searched(),
    }))
}

fn collect_in(
    registry: &Registry,
    kernel: &str,
    variant: &Variant,
    root: ImageId,
    compatible: &dyn Fn(&sycl_format::Image) -> bool,
) -> Result<Vec<ImageId>, Error> {
    // Breadth first: `images[next..]` are the images whose imports are still to resolve.
    let mut images = vec![root];
    let mut next = 0;
    let mut provided: HashSet<&str, foldhash::fast::RandomState> =
        registry.image(root).exported_symbols().collect();
    let mut sets_done: HashSet<String, foldhash::fast::RandomState> = HashSet::default();
    let add = |id: ImageId, images: &mut Vec<ImageId>| {
        if !images.contains(&id) {
            images.push(id);
        }
    };
    while let Some(&id) = images.get(next) {
        next += 1;
        let mut sets: Vec<String> = registry
            .image(id)
            .uses_virtual_functions_sets()
            .into_iter()
            .map(str::to_string)
            .collect();
        for symbol in registry.image(id).imported_symbols() {
            if provided.contains(symbol) {
                continue;
            }
            let providers: Vec<ImageId> = registry
                .providers(variant, symbol)
                .iter()
                .copied()
                .filter(|p| registry.visible(id.binary, p.binary))
                .collect();
            let Some(&provider) = providers.first() else {
                return Err(unresolved(registry, variant, symbol, kernel, id));
            };
            // A virtual function: its set is linked in whole (or its dummy), not by name.
            if let Some((set, _)) = registry.image(provider).virtual_functions_set() {
                sets.push(set.to_string());
                continue;
            }
            if providers.iter().any(|p| p.binary != provider.binary) {
                let names: Vec<String> = providers.iter().map(|&p| registry.describe(p)).collect();
                trace!(
                    "duplicate",
                    "{symbol}: exported by {}; the first in loader order wins",
                    names.join(", ")
                );
                if strict() {
                    return Err(Error::DuplicateSymbol {
                        symbol: symbol.to_string(),
                        providers: names,
                    });
                }
            }
            trace!("resolve", "{symbol} -> {} (for kernel {kernel})", registry.describe(provider));
            provided.extend(registry.image(provider).exported_symbols());
            add(provider, &mut images);
        }
        for set in sets {
            if !sets_done.insert(set.clone()) {
                continue;
            }
            let providers: Vec<ImageId> = registry
                .set_images(variant, &set)
                .iter()
                .copied()
                .filter(|p| registry.visible(id.binary, p.binary))
                .collect();
            if providers.is_empty() {
                return Err(Error::MissingVirtualFunctions {
                    set,
                    kernel: kernel.to_string(),
                    searched: registry.searched(),
                });
            }
            let is_dummy = |p: ImageId| {
                registry.image(p).virtual_functions_set().is_some_and(|(_, dummy)| dummy)
            };
            let mut binaries: Vec<_> = providers.iter().map(|p| p.binary).collect();
            binaries.dedup();
            for binary in binaries {
                let real = providers.iter().copied().find(|p| p.binary == binary && !is_dummy(*p));
                let dummy = providers.iter().copied().find(|p| p.binary == binary && is_dummy(*p));
                // The device lacks what the set needs, or the image form has only the dummy (an
                // ahead-of-time target's aspect filter left the real one out): the dummy.
                let chosen = match (real, dummy) {
                    (Some(r), Some(d)) if !compatible(registry.image(r)) => d,
                    (Some(r), _) => r,
                    (None, Some(d)) => d,
                    (None, None) => continue,
                };
                trace!(
                    "resolve",
                    "virtual functions {set} -> {}{} (for kernel {kernel})",
                    registry.describe(chosen),
                    if is_dummy(chosen) { " (dummy)" } else { "" }
                );
                provided.extend(registry.image(chosen).exported_symbols());
                add(chosen, &mut images);
            }
            // Kernels that use the same set share the program, so objects stay valid.
            for &user in registry.set_users(variant, &set) {
                if registry.visible(id.binary, user.binary) && compatible(registry.image(user)) {
                    add(user, &mut images);
                }
            }
        }
    }
    Ok(images)
}

/// The error for `symbol`, which no image visible to `requester` exports: binaries that do
/// export it, but whose scope keeps it from `requester`, are named with the reason.
pub(crate) fn unresolved(
    registry: &Registry,
    variant: &Variant,
    symbol: &str,
    kernel: &str,
    requester: ImageId,
) -> Error {
    let mut hidden = Vec::new();
    for &p in registry.providers(variant, symbol) {
        let binary = registry.binary(p.binary);
        let name = binary.name.rsplit('/').next().unwrap_or(&binary.name);
        let why = if registry.is_file_library(p.binary) {
            format!(
                "{name} exports it, but was loaded with LibraryScope::Own, so only its own images may use its exports \
                 (load it with sycl_runtime::load_device_library, whose scope is global)"
            )
        } else {
            // Loaded as a dependency of a library opened RTLD_LOCAL, or opened so itself.
            let opener = registry.binaries.iter().find(|b| {
                b.id != p.binary
                    && registry
                        .local_group(b.id)
                        .is_some_and(|g| g.first() == Some(&b.id) && g.contains(&p.binary))
            });
            let scope = match opener {
                Some(b) => {
                    let opener = b.name.rsplit('/').next().unwrap_or(&b.name);
                    format!("was loaded for {opener}, which was opened RTLD_LOCAL, so only {opener} and its dependencies")
                }
                None => {
                    "was opened RTLD_LOCAL, so only it and the libraries it depends on".to_string()
                }
            };
            format!(
                "{name} exports it, but {scope} may use its exports, and {} is not one of them (open the library \
                 RTLD_GLOBAL, or link {} against {name})",
                registry.describe(requester),
                registry.binary(requester.binary).name.rsplit('/').next().unwrap_or_default()
            )
        };
        if !hidden.contains(&why) {
            hidden.push(why);
        }
    }
    let hidden_binaries: Vec<&str> = registry
        .providers(variant, symbol)
        .iter()
        .map(|p| registry.binary(p.binary).name.as_str())
        .collect();
    let searched = registry
        .searched()
        .into_iter()
        .zip(&registry.binaries)
        .filter(|(_, b)| !hidden_binaries.contains(&b.name.as_str()))
        .map(|(line, _)| line)
        .collect();
    Error::UnresolvedSymbol {
        symbol: symbol.to_string(),
        kernel: kernel.to_string(),
        searched,
        hidden,
    }
}
