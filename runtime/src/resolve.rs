//! Device-image collection for a kernel: its image, then for every import the first image
//! in loader order that exports it, transitively. An import nobody exports is an error that
//! names the symbol, the kernel and the binaries searched; nothing is compiled before the
//! whole set resolves.

use std::collections::{HashSet, VecDeque};

use crate::registry::{ImageId, Registry};
use crate::trace::trace;
use crate::Error;

/// The images to link for `kernel`, the kernel's own image first.
pub(crate) fn collect(registry: &Registry, kernel: &str) -> Result<Vec<ImageId>, Error> {
    let root = registry
        .kernel(kernel)
        .ok_or_else(|| Error::KernelNotFound { kernel: kernel.to_string(), searched: registry.searched() })?;
    let mut images = vec![root];
    let mut provided: HashSet<&str> = registry.image(root).exported_symbols().collect();
    let mut queue = VecDeque::from([root]);
    while let Some(id) = queue.pop_front() {
        for symbol in registry.image(id).imported_symbols() {
            if provided.contains(symbol) {
                continue;
            }
            let provider = registry.provider(symbol).ok_or_else(|| Error::UnresolvedSymbol {
                symbol: symbol.to_string(),
                kernel: kernel.to_string(),
                searched: registry.searched(),
            })?;
            trace!("resolve", "{symbol} -> {} (for kernel {kernel})", registry.describe(provider));
            provided.extend(registry.image(provider).exported_symbols());
            if !images.contains(&provider) {
                images.push(provider);
                queue.push_back(provider);
            }
        }
    }
    Ok(images)
}
