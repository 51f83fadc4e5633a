//! Discovery: which loaded objects and device-library files carry device images, kept up to
//! date as libraries are opened and closed, and the [`Registry`] of them.
//!
//! The first look reads every loaded object. Later looks happen when the loader's counts of
//! objects added and removed, or the device-library files' generation, have moved since, and
//! are incremental: an object seen before (same name, load address and payload hashes) is not
//! read again, only the objects that appeared are, and those that went are dropped. When no
//! object with images appeared or went (the OpenCL drivers loading their own libraries, say)
//! the registry stays the same one, so nothing built or resolved is thrown away; otherwise a
//! new registry is assembled from the binaries already read plus the new ones. Every newly
//! found binary traces a `discover` line, every later look that changed something a
//! `rediscover` line naming what appeared and what went.
//!
//! `RTLD_LOCAL` groups are recomputed at every look: a library opened `RTLD_LOCAL` is one
//! whose scope marker symbol is not visible in the global scope, and one that was local is
//! checked again whenever the loader's counts move (a library opened `RTLD_GLOBAL` that needs
//! it makes it global; closed and opened again, it may come back global).
//!
//! The walk of the loader's list happens under the loader's lock: nothing here may call
//! `dlopen` or `dlsym` from inside it.

pub(crate) mod files;
mod loaded;

use std::collections::HashMap;
use std::sync::Arc;

use crate::registry::{Binary, BinaryId, Members, Registry};
use crate::trace::trace;
use files::LibraryScope;
use loaded::{loaded_objects, loader_counters, GlobalScope};

/// What the last look saw, and the registry made of it.
pub(crate) struct Discovery {
    /// `(dlpi_adds, dlpi_subs)` at the last look.
    counters: (u64, u64),
    /// The device-library files' generation at the last look.
    files_generation: u64,
    /// Every loaded object, in loader order.
    objects: Vec<Seen>,
    /// Device-library files, in the order they were loaded, by load id.
    files: Vec<(u64, Arc<Binary>, LibraryScope)>,
    registry: Arc<Registry>,
}

/// A loaded object as it was first read.
struct Seen {
    /// The loader's name (empty for the executable) and load address.
    name: String,
    base: usize,
    payload_hashes: Vec<u64>,
    /// The last component of its path, which `DT_NEEDED` entries name.
    file_name: String,
    /// Its `DT_NEEDED` entries, each followed by a NUL: read only once some library is
    /// opened `RTLD_LOCAL` ([`Discovery::read_needed`]).
    needed: Option<String>,
    /// Its binary, when it has device images (or a malformed payload).
    binary: Option<Arc<Binary>>,
    /// Opened `RTLD_LOCAL`: its exports serve its own group only.
    local: bool,
}

/// What a look found changed.
#[derive(Default)]
struct Changes {
    /// Binaries found, in resolution order: loaded ones (with whether opened `RTLD_LOCAL`),
    /// then device-library files.
    found: Vec<(Arc<Binary>, Found)>,
    went: Vec<Arc<Binary>>,
    now_global: Vec<Arc<Binary>>,
}

enum Found {
    Loaded { local: bool },
    File,
}

impl Changes {
    fn is_empty(&self) -> bool {
        self.found.is_empty() && self.went.is_empty() && self.now_global.is_empty()
    }
}

fn short(name: &str) -> &str {
    name.rsplit('/').next().unwrap_or(name)
}

/// `liba.so, libb.so`, or `none`: loaded binaries by file name, device-library files (which
/// have no loaded segments) by path. Formatted only when traced.
fn names<'b>(binaries: impl Iterator<Item = &'b Binary>) -> String {
    let names: Vec<&str> =
        binaries.map(|b| if b.ranges.is_empty() { &b.name[..] } else { short(&b.name) }).collect();
    if names.is_empty() {
        "none".into()
    } else {
        names.join(", ")
    }
}

/// A `discover` line's text.
fn found(binary: &Binary, how: &Found) -> String {
    let count = binary.image_count;
    match (how, &binary.error) {
        (Found::File, _) => format!("{}: {count} image(s) from a device library file", binary.name),
        (Found::Loaded { .. }, Some(error)) => {
            format!("{}: malformed device images ignored: {error}", binary.name)
        }
        (Found::Loaded { local }, None) => {
            format!(
                "{}: {count} image{}{}",
                binary.name,
                if count == 1 { "" } else { "s" },
                if *local { " (RTLD_LOCAL)" } else { "" }
            )
        }
    }
}

/// The process's loaded state as a look sees it: the loader's counts of objects added and
/// removed, and the generation of device library files. Both only grow, so two equal values
/// mean nothing was opened, closed, loaded or unloaded in between: a kernel resolved while the
/// registry saw one value is resolved the same while [`LoadState::now`] still reads it (a launch's
/// fast path asks this, without the runtime's lock).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct LoadState {
    counters: (u64, u64),
    files: u64,
}

impl LoadState {
    pub(crate) fn now() -> LoadState {
        LoadState { counters: loader_counters(), files: files::generation() }
    }
}

impl Discovery {
    /// Reads everything loaded now: a process's first discovery.
    pub(crate) fn new() -> Discovery {
        let mut discovery = Discovery {
            counters: (0, 0),
            files_generation: 0,
            objects: Vec::new(),
            files: Vec::new(),
            registry: Arc::new(Registry::default()),
        };
        discovery.look(true);
        discovery
    }

    pub(crate) fn registry(&self) -> &Arc<Registry> {
        &self.registry
    }

    /// Whether libraries were opened or closed, or device-library files loaded or unloaded,
    /// since the last look.
    pub(crate) fn is_stale(&self) -> bool {
        LoadState::now() != self.seen()
    }

    /// What the last look saw: the registry is of that state.
    pub(crate) fn seen(&self) -> LoadState {
        LoadState { counters: self.counters, files: self.files_generation }
    }

    /// Looks again, reading only what appeared; returns whether the registry changed (then
    /// programs built from binaries that went must be forgotten).
    pub(crate) fn refresh(&mut self) -> bool {
        self.look(false)
    }

    fn look(&mut self, first: bool) -> bool {
        let mut changes = Changes::default();
        // The counters are read before the walk: a library opened meanwhile moves them again,
        // and the next look sees it.
        let counters = loader_counters();
        if first || counters != self.counters {
            self.counters = counters;
            self.walk_objects(&mut changes);
        }
        if first || files::generation() != self.files_generation {
            self.read_files(&mut changes);
        }
        let groups = self.local_groups();
        let groups_moved = groups != self.current_groups();
        if !first && changes.is_empty() && !groups_moved {
            return false;
        }
        if !first {
            trace!(
                "rediscover",
                "appeared: {}; went: {}{}",
                names(changes.found.iter().map(|(b, _)| &**b)),
                names(changes.went.iter().map(|b| &**b)),
                match &changes.now_global[..] {
                    [] => String::new(),
                    now => format!("; now global: {}", names(now.iter().map(|b| &**b))),
                }
            );
        }
        for (binary, how) in &changes.found {
            trace!("discover", "{}", found(binary, how));
        }
        self.registry = Arc::new(self.assemble(groups));
        true
    }

    /// Walks the loader's list, reading the objects not seen before.
    fn walk_objects(&mut self, changes: &mut Changes) {
        // By load address: no two loaded objects share one.
        let mut before: HashMap<usize, Seen> =
            self.objects.drain(..).map(|seen| (seen.base, seen)).collect();
        let mut kept: HashMap<usize, Seen> = HashMap::new();
        let walked = loaded_objects(&mut |name, base, hashes| {
            let known = before
                .get(&base)
                .is_some_and(|seen| seen.name == name && seen.payload_hashes == hashes);
            if known {
                kept.insert(base, before.remove(&base).expect("just found"));
            }
            known
        });
        let mut scope = None;
        for (index, object) in walked.into_iter().enumerate() {
            let Some(contents) = object.contents else {
                self.objects
                    .push(kept.remove(&object.base).expect("each known object is kept once"));
                continue;
            };
            let binary = match contents.payloads {
                Ok(payloads) if payloads.is_empty() => None,
                payloads => {
                    let name = if object.name.is_empty() && index == 0 {
                        std::env::current_exe()
                            .map(|p| p.display().to_string())
                            .unwrap_or_else(|_| "<executable>".into())
                    } else {
                        object.name.clone()
                    };
                    Some(Arc::new(Binary::read(BinaryId::fresh(), name, payloads, contents.ranges)))
                }
            };
            // The executable and objects without images are global.
            let local = index != 0
                && binary.as_ref().is_some_and(|b| b.image_count > 0)
                && !scope.get_or_insert_with(GlobalScope::open).as_ref().is_none_or(|scope| {
                    defines_marker(
                        scope,
                        binary.as_deref().expect("checked"),
                        &object.payload_hashes,
                    )
                });
            if let Some(binary) = &binary {
                if let Some(error) = &binary.error {
                    log::warn!("{}: malformed device images ignored: {error}", binary.name);
                }
                changes.found.push((binary.clone(), Found::Loaded { local }));
            }
            self.objects.push(Seen {
                file_name: short(&object.name).to_string(),
                name: object.name,
                base: object.base,
                payload_hashes: object.payload_hashes,
                needed: None,
                binary,
                local,
            });
        }
        changes.went.extend(before.into_values().filter_map(|gone| gone.binary));
        self.read_needed();
        // A library opened RTLD_LOCAL becomes global when one opened RTLD_GLOBAL needs it, and
        // one closed and opened again at the same address may come back global.
        if self.objects.iter().any(|seen| seen.local) {
            let scope = scope.get_or_insert_with(GlobalScope::open);
            for seen in self.objects.iter_mut().filter(|seen| seen.local) {
                let binary = seen.binary.as_deref().expect("a local object has images");
                if scope
                    .as_ref()
                    .is_none_or(|scope| defines_marker(scope, binary, &seen.payload_hashes))
                {
                    seen.local = false;
                    changes.now_global.push(seen.binary.clone().expect("checked"));
                }
            }
        }
    }

    /// Reads the `DT_NEEDED` entries of the objects not read yet, when some object is opened
    /// `RTLD_LOCAL` (its group is what it needs): otherwise nothing reads them.
    fn read_needed(&mut self) {
        let local = self.objects.iter().any(|seen| seen.local);
        if !local || self.objects.iter().all(|seen| seen.needed.is_some()) {
            return;
        }
        let mut all = loaded::needed_by_object();
        for seen in self.objects.iter_mut().filter(|seen| seen.needed.is_none()) {
            // An object closed since the walk has none: the loader's counters moved, and the
            // next look reads the objects again.
            seen.needed = all.remove(&(seen.base, seen.name.clone()));
        }
    }

    /// Takes in the device-library files loaded now, reusing the binaries of those already
    /// taken in.
    fn read_files(&mut self, changes: &mut Changes) {
        let files = files::files();
        // Read under the lock, which every load and unload takes to change both.
        self.files_generation = files::generation();
        let mut before: HashMap<u64, (Arc<Binary>, LibraryScope)> =
            self.files.drain(..).map(|(id, binary, scope)| (id, (binary, scope))).collect();
        for file in &files.list {
            let (binary, scope) = before.remove(&file.id).unwrap_or_else(|| {
                let binary = Arc::new(Binary::of_images(
                    BinaryId::fresh(),
                    file.path.display().to_string(),
                    file.images.clone(),
                ));
                changes.found.push((binary.clone(), Found::File));
                (binary, file.scope)
            });
            self.files.push((file.id, binary, scope));
        }
        changes.went.extend(before.into_values().map(|(binary, _)| binary));
    }

    /// For each loaded binary opened `RTLD_LOCAL`: itself and what it needs, transitively
    /// (by `DT_NEEDED` file names, among the objects loaded now); then each device-library
    /// file in a scope of its own.
    fn local_groups(&self) -> HashMap<BinaryId, Box<[BinaryId]>> {
        let mut groups = HashMap::new();
        if self.objects.iter().any(|seen| seen.local) {
            let by_file: HashMap<&str, usize> = self
                .objects
                .iter()
                .enumerate()
                .map(|(i, seen)| (seen.file_name.as_str(), i))
                .collect();
            for (i, seen) in self.objects.iter().enumerate().filter(|(_, seen)| seen.local) {
                let mut group = vec![i];
                let mut next = 0;
                while next < group.len() {
                    let needed = self.objects[group[next]].needed.as_deref().unwrap_or_default();
                    for needed in needed.split_terminator('\0') {
                        if let Some(&j) = by_file.get(needed) {
                            if !group.contains(&j) {
                                group.push(j);
                            }
                        }
                    }
                    next += 1;
                }
                let ids = group
                    .into_iter()
                    .filter_map(|j| self.objects[j].binary.as_ref().map(|b| b.id))
                    .collect();
                groups.insert(seen.binary.as_ref().expect("a local object has images").id, ids);
            }
        }
        for (_, binary, scope) in &self.files {
            if *scope == LibraryScope::Own {
                groups.insert(binary.id, vec![binary.id].into_boxed_slice());
            }
        }
        groups
    }

    /// The groups of the registry in use, for comparison.
    fn current_groups(&self) -> HashMap<BinaryId, Box<[BinaryId]>> {
        let binaries = self.registry.binaries.iter();
        binaries.filter_map(|b| Some((b.id, self.registry.local_group(b.id)?.into()))).collect()
    }

    /// The registry of every binary loaded now: loaded objects in loader order, then files.
    fn assemble(&self, mut groups: HashMap<BinaryId, Box<[BinaryId]>>) -> Registry {
        let mut members: Members = Vec::with_capacity(self.objects.len() + self.files.len());
        let loaded = self.objects.iter().filter_map(|seen| seen.binary.as_ref());
        for binary in loaded.chain(self.files.iter().map(|(_, binary, _)| binary)) {
            members.push((binary.clone(), groups.remove(&binary.id)));
        }
        let file_binaries = self.files.iter().map(|(id, binary, _)| (*id, binary.id)).collect();
        Registry::assemble(members, file_binaries)
    }
}

/// Whether one of `binary`'s scope markers resolves, in the global scope, to the binary itself.
fn defines_marker(scope: &GlobalScope, binary: &Binary, payload_hashes: &[u64]) -> bool {
    payload_hashes
        .iter()
        .any(|h| scope.defines(&binary.ranges, &sycl_format::scope_marker_symbol(*h)))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn libraries_without_images_keep_the_registry() {
        let mut discovery = Discovery::new();
        let before = discovery.registry().clone();
        assert!(!discovery.is_stale());
        assert!(!discovery.refresh(), "nothing changed");
        // A library that carries no device images, as the OpenCL drivers' are, and that no
        // driver loads (they load libz, and other tests of this process open drivers).
        loaded::open_for_test("libBrokenLocale.so.1");
        assert!(discovery.is_stale());
        assert!(!discovery.refresh(), "no images appeared");
        assert!(
            Arc::ptr_eq(&before, discovery.registry()),
            "the same registry, so nothing cached is dropped"
        );
        assert!(!discovery.is_stale());
    }
}
