//! The walk that collects a program's images: from its roots, each import to the first image
//! of the same form in loader order that exports it and that the importer may see,
//! transitively; a virtual-function set, whether reached through a call, a use recorded on an
//! image (a method table) or a root that is one of its images, linked whole: per binary its
//! real image, or its dummy where the device cannot run the real one; and the kernels that use
//! a linked set, so that objects made by one kernel dispatch in another.
//!
//! Two binaries exporting one symbol: the first in loader order wins, always, for every caller
//! (the global scope first, then a library's own `RTLD_LOCAL` group, as the host's loader
//! searches): an image taken whose own definition loses keeps its body out of the program
//! (the plan lists the definition as overridden, to be made an import before any driver sees
//! it) and the winner's image is taken too. The trace names both, and strict mode
//! (`SYCL_STRICT_EXPORTS=1`) makes it an error. Exports of a library opened `RTLD_LOCAL` serve
//! only that library and its dependencies.

use std::collections::{HashMap, HashSet};

use foldhash::fast::RandomState;
use sycl_format::Target;

use super::Subject;
use crate::registry::{ImageId, Registry};
use crate::trace::trace;
use crate::Error;

/// Environment variable that turns duplicate exports into errors.
pub const STRICT_ENV: &str = "SYCL_STRICT_EXPORTS";

/// Whether the environment asks for strict mode.
pub(super) fn strict() -> bool {
    std::env::var(STRICT_ENV).is_ok_and(|v| !v.is_empty() && v != "0")
}

/// One collection in progress.
struct Walk<'r> {
    /// Whether a symbol exported twice is an error (see [`STRICT_ENV`]).
    strict: bool,
    registry: &'r Registry,
    target: Target,
    subject: Subject<'r>,
    /// Whether the device can run an image: decides between a set's image and its dummy.
    compatible: &'r dyn Fn(ImageId) -> bool,
    /// In link order; `images[next..]` still have their imports and sets to resolve.
    images: Vec<ImageId>,
    next: usize,
    /// Each symbol the images so far export, with the first image that does.
    provided: HashMap<&'r str, ImageId, RandomState>,
    sets_done: HashSet<&'r str, RandomState>,
    /// Symbols already traced as exported by more than one binary (once per program).
    duplicates: HashSet<&'r str, RandomState>,
    /// Definitions of images taken that another binary's image wins, by image.
    overridden: Overridden,
    /// Images whose definitions won over an image's taken, still to be taken.
    winners: Vec<ImageId>,
    /// Whether any symbol of the form is exported by more than one binary: if not (most
    /// programs), no definition can give way, and none is looked up. Asked when an image
    /// that exports is taken: a kernel that imports nothing has the form's exports indexed
    /// by nobody.
    shared_exports: std::cell::OnceCell<bool>,
}

/// Each image's definitions that another binary's image wins (the images in order, each
/// one's symbols sorted): empty for a program without duplicates.
pub(crate) type Overridden = Vec<(ImageId, Vec<String>)>;

/// The definitions of `image` that `overridden` lists (none for most images).
pub(crate) fn overridden_in(overridden: &Overridden, image: ImageId) -> &[String] {
    overridden.iter().find(|(id, _)| *id == image).map_or(&[], |(_, s)| s)
}

/// What a walk collected: the images in link order, and the definitions overridden.
#[derive(Debug)]
pub(super) struct Collected {
    pub(super) images: Vec<ImageId>,
    pub(super) overridden: Overridden,
}

/// The images to link for `roots` (all of `target`'s form), roots first, in the order the
/// walk reached them. A root that is an image of a virtual-function set stands for its set.
/// `strict`: whether a symbol two binaries export is an error ([`strict`] reads it from the
/// environment).
pub(super) fn collect(
    registry: &Registry,
    target: Target,
    subject: Subject<'_>,
    roots: &[ImageId],
    compatible: &dyn Fn(ImageId) -> bool,
    strict: bool,
) -> Result<Collected, Error> {
    let mut walk = Walk {
        strict,
        registry,
        target,
        subject,
        compatible,
        images: Vec::with_capacity(roots.len()),
        next: 0,
        provided: HashMap::default(),
        sets_done: HashSet::default(),
        duplicates: HashSet::default(),
        overridden: Vec::new(),
        winners: Vec::new(),
        shared_exports: std::cell::OnceCell::new(),
    };
    let mut sets: Vec<(&str, ImageId)> = Vec::new();
    for &root in roots {
        match registry.view(root).virtual_functions_set() {
            Some((set, _)) => sets.push((set, root)),
            None => walk.add(root)?,
        }
    }
    loop {
        // The sets asked for so far (each with the image that asked, whose scope decides
        // which binaries may provide it), before the next image's imports.
        for (set, requester) in sets.drain(..) {
            walk.link_set(set, requester)?;
        }
        while let Some(winner) = walk.winners.pop() {
            walk.add(winner)?;
        }
        let Some(&id) = walk.images.get(walk.next) else { break };
        walk.next += 1;
        sets.extend(registry.view(id).uses_virtual_functions_sets().map(|s| (s, id)));
        for symbol in registry.view(id).imported_symbols() {
            if let Some(set) = walk.resolve(symbol, id)? {
                sets.push((set, id));
            }
        }
    }
    let mut overridden = walk.overridden;
    overridden.sort();
    Ok(Collected { images: walk.images, overridden })
}

/// The image whose definition of `symbol` serves `requester`'s binary: the first in loader
/// order among those it may see, looking in the global scope before its own `RTLD_LOCAL`
/// group, as the host's loader does.
fn winner(
    registry: &Registry,
    target: Target,
    symbol: &str,
    requester: ImageId,
) -> Option<ImageId> {
    let providers = registry.providers(target, symbol);
    let visible = |p: &&ImageId| registry.visible(requester.binary, p.binary);
    let global =
        providers.iter().filter(visible).find(|p| registry.local_group(p.binary).is_none());
    global.or_else(|| providers.iter().find(visible)).copied()
}

impl<'r> Walk<'r> {
    /// Links image `id`. A symbol it exports that an image of another binary wins (first in
    /// loader order for `id`'s own callers) is overridden: traced, an error in strict mode, and
    /// the winner is taken too. A symbol that images of two binaries linked already both keep
    /// (virtual-function sets, which are linked whole) is a second definition in one program,
    /// which the drivers refuse: traced, and an error in strict mode.
    fn add(&mut self, id: ImageId) -> Result<(), Error> {
        if self.images.contains(&id) {
            return Ok(());
        }
        self.images.push(id);
        let registry = self.registry;
        let is_set = |id: ImageId| registry.view(id).virtual_functions_set().is_some();
        for symbol in registry.view(id).exported_symbols() {
            let shared =
                *self.shared_exports.get_or_init(|| registry.has_shared_exports(self.target));
            let winner = match shared {
                false => None,
                true => winner(registry, self.target, symbol, id)
                    .filter(|w| w.binary != id.binary && !is_set(*w) && !is_set(id)),
            };
            if let Some(winner) = winner {
                self.duplicate(symbol, winner, id)?;
                match self.overridden.iter_mut().find(|(image, _)| *image == id) {
                    Some((_, symbols)) => symbols.push(symbol.to_string()),
                    None => self.overridden.push((id, vec![symbol.to_string()])),
                }
                self.winners.push(winner);
                continue;
            }
            match self.provided.get(symbol) {
                None => {
                    self.provided.insert(symbol, id);
                    // This image's definition wins; another binary may still export the
                    // symbol after it in loader order (opened later, `RTLD_GLOBAL`).
                    if shared && !is_set(id) {
                        self.exported_elsewhere(symbol, id, id)?;
                    }
                }
                Some(&first) if first.binary != id.binary => {
                    let names = vec![registry.describe(first), registry.describe(id)];
                    trace!(
                        "duplicate",
                        "{symbol}: defined by {} and {}, both linked for {} (the second for \
                         other symbols): a program holds one definition, which the driver's link \
                         will say",
                        names[0],
                        names[1],
                        self.subject
                    );
                    self.refuse_in_strict_mode(symbol, names)?;
                }
                Some(_) => {}
            }
        }
        Ok(())
    }

    /// Every image that exports `symbol` and that `requester` may see, in loader order, as
    /// traces and strict mode's error name them.
    fn exporters(&self, symbol: &str, requester: ImageId) -> Vec<String> {
        let registry = self.registry;
        let visible = |p: &&ImageId| registry.visible(requester.binary, p.binary);
        let providers = registry.providers(self.target, symbol).iter().filter(visible);
        providers.map(|&p| registry.describe(p)).collect()
    }

    /// Strict mode's error for `symbol`, exported by `names`; nothing otherwise.
    fn refuse_in_strict_mode(&self, symbol: &str, names: Vec<String>) -> Result<(), Error> {
        match self.strict {
            true => Err(Error::DuplicateSymbol { symbol: symbol.to_string(), providers: names }),
            false => Ok(()),
        }
    }

    /// `winner`'s definition of `symbol` serves `seen_from` (an image importing it, or
    /// `winner` itself, taken first), and another binary that `seen_from` may see exports it
    /// too: traced once per program, an error in strict mode, whichever way the walk came to
    /// the symbol (as when the definition taken loses: [`Walk::duplicate`]).
    fn exported_elsewhere(
        &mut self,
        symbol: &'r str,
        winner: ImageId,
        seen_from: ImageId,
    ) -> Result<(), Error> {
        let registry = self.registry;
        let visible = |p: &&ImageId| registry.visible(seen_from.binary, p.binary);
        let providers = registry.providers(self.target, symbol);
        if !providers.iter().filter(visible).any(|p| p.binary != winner.binary)
            || !self.duplicates.insert(symbol)
        {
            return Ok(());
        }
        let names = self.exporters(symbol, seen_from);
        trace!(
            "duplicate",
            "{symbol}: exported by {}; the first in loader order wins: {} (for {})",
            names.join(", "),
            registry.describe(winner),
            self.subject
        );
        self.refuse_in_strict_mode(symbol, names)
    }

    /// `loser`'s definition of `symbol` gives way to `winner`'s: traced, an error in strict
    /// mode (naming every binary that exports it, in loader order).
    fn duplicate(&self, symbol: &str, winner: ImageId, loser: ImageId) -> Result<(), Error> {
        let registry = self.registry;
        let names = self.exporters(symbol, loser);
        trace!(
            "duplicate",
            "{symbol}: exported by {}; the first in loader order wins: {} serves every caller, \
             {}'s own calls included (for {})",
            names.join(", "),
            registry.describe(winner),
            registry.describe(loser),
            self.subject
        );
        self.refuse_in_strict_mode(symbol, names)
    }

    /// Links the provider of `symbol` for `requester`; a virtual function is not linked by
    /// name: its set is returned, to be linked whole.
    fn resolve(&mut self, symbol: &'r str, requester: ImageId) -> Result<Option<&'r str>, Error> {
        let registry = self.registry;
        if self.provided.contains_key(symbol) {
            return Ok(None);
        }
        let Some(provider) = winner(registry, self.target, symbol, requester) else {
            return Err(unresolved(registry, self.target, symbol, &self.subject, requester));
        };
        if let Some((set, _)) = registry.view(provider).virtual_functions_set() {
            return Ok(Some(set));
        }
        self.exported_elsewhere(symbol, provider, requester)?;
        trace!("resolve", "{symbol} -> {} (for {})", registry.describe(provider), self.subject);
        self.add(provider)?;
        Ok(None)
    }

    /// Links `set` for `requester`: per binary that provides it, its real image, or its dummy
    /// where the device cannot run the real one (or the image form has only the dummy: an
    /// ahead-of-time target's aspect filter left the real one out); then the kernels that use
    /// the set, which the device can run.
    fn link_set(&mut self, set: &'r str, requester: ImageId) -> Result<(), Error> {
        let registry = self.registry;
        if !self.sets_done.insert(set) {
            return Ok(());
        }
        let visible = |p: &ImageId| registry.visible(requester.binary, p.binary);
        let providers: Vec<ImageId> =
            registry.set_images(self.target, set).iter().copied().filter(visible).collect();
        if providers.is_empty() {
            return Err(Error::MissingVirtualFunctions {
                set: set.to_string(),
                kernel: self.subject.name_for(requester, registry),
                searched: registry.searched(),
            });
        }
        let is_dummy =
            |p: ImageId| registry.view(p).virtual_functions_set().is_some_and(|(_, dummy)| dummy);
        let mut binaries: Vec<_> = providers.iter().map(|p| p.binary).collect();
        binaries.dedup();
        for binary in binaries {
            let real = providers.iter().copied().find(|p| p.binary == binary && !is_dummy(*p));
            let dummy = providers.iter().copied().find(|p| p.binary == binary && is_dummy(*p));
            let chosen = match (real, dummy) {
                (Some(r), Some(d)) if !(self.compatible)(r) => d,
                (Some(r), _) => r,
                (None, Some(d)) => d,
                (None, None) => continue,
            };
            trace!(
                "resolve",
                "virtual functions {set} -> {}{} (for {})",
                registry.describe(chosen),
                if is_dummy(chosen) { " (dummy)" } else { "" },
                self.subject
            );
            self.add(chosen)?;
        }
        for &user in registry.set_users(self.target, set) {
            if visible(&user) && (self.compatible)(user) {
                self.add(user)?;
            }
        }
        Ok(())
    }
}

/// The error for `symbol`, which no image visible to `requester` exports: binaries that do
/// export it, but whose scope keeps it from `requester`, are named with the reason.
pub(super) fn unresolved(
    registry: &Registry,
    target: Target,
    symbol: &str,
    subject: &Subject<'_>,
    requester: ImageId,
) -> Error {
    let mut hidden = Vec::new();
    for &p in registry.providers(target, symbol) {
        if registry.visible(requester.binary, p.binary) {
            continue;
        }
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
        .providers(target, symbol)
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
        kernel: subject.name_for(requester, registry),
        searched,
        hidden,
    }
}
