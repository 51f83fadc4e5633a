//! The twin swap: `sycl-ld` makes, beside a `ptx64` (or native `nvidia_gpu_sm_XX`) kernel
//! image whose imports shared libraries on its link line export, a `ptx64+inlined` (or
//! `nvidia_gpu_sm_XX+inlined`) twin with those providers compiled in, recording each
//! provider's hash (`SYCL/inlined imports`, of the provider's image of the same form). A plan takes the twin instead of
//! the kernel's image and those providers only when resolution picked exactly the images the
//! twin compiled in, so `LD_PRELOAD`, `dlopen` and `RTLD_LOCAL` keep their meaning.

use sycl_format::{PropertyValueView, Target};

use crate::registry::{ImageId, Registry};
use crate::trace::trace;

/// `images` (of a plan for `kernel` whose form has twins of form `twin_target`, the kernel's
/// image first) with the kernel's twin from the same binary in place of its image and of the
/// providers the twin compiled in, when resolution picked exactly those (by hash); otherwise
/// `None`. Providers that the rest of the plan still imports from stay.
pub(super) fn swap_in_twin(
    registry: &Registry,
    kernel: &str,
    images: &[ImageId],
    twin_target: Target,
) -> Option<(Target, Vec<ImageId>)> {
    let (&root, rest) = images.split_first()?;
    let &twin =
        registry.kernel_images(twin_target, kernel).iter().find(|t| t.binary == root.binary)?;
    let recorded = registry.view(twin).property_set(sycl_format::sets::INLINED_IMPORTS)?;
    let exports =
        |id: ImageId, symbol: &str| registry.view(id).exported_symbols().any(|e| e == symbol);
    let mut inlined: Vec<ImageId> = Vec::new();
    for (name, value) in recorded.properties() {
        let provider = rest.iter().copied().find(|&id| exports(id, name));
        let hash = provider
            .map(|id| format!("{:016x}", sycl_format::payload_hash(registry.view(id).data)));
        match (provider, value) {
            (Some(id), PropertyValueView::String(recorded))
                if hash.as_deref() == Some(recorded) =>
            {
                if !inlined.contains(&id) {
                    inlined.push(id);
                }
            }
            _ => {
                trace!(
                    "inline",
                    "{kernel}: {} not used: {} resolved to another image than it compiled in",
                    registry.describe(twin),
                    name
                );
                return None;
            }
        }
    }
    let others: Vec<ImageId> = rest.iter().copied().filter(|id| !inlined.contains(id)).collect();
    let still_imported = |provider: ImageId| {
        others.iter().any(|&o| registry.view(o).imported_symbols().any(|s| exports(provider, s)))
    };
    let names: Vec<String> = inlined.iter().map(|&id| registry.describe(id)).collect();
    trace!("inline", "{kernel}: {} has {} compiled in", registry.describe(twin), names.join(" + "));
    let mut swapped = vec![twin];
    swapped.extend(rest.iter().copied().filter(|&id| !inlined.contains(&id) || still_imported(id)));
    Some((twin_target, swapped))
}
