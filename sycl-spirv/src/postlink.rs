//! Post-link: from one link unit's linked module to device images.
//!
//! DPC++'s rules (docs/DESIGN.md). Entry points are kernels and SYCL_EXTERNAL functions, and they are
//! grouped by the split mode (per kernel, per source, or all together), never kernels with
//! exported functions: SYCL_EXTERNAL functions are exported only from images without kernels
//! (DPC++'s shared libraries design). Each group is split again so that an image holds only entry points with the
//! same used aspects, required work-group size and required sub-group size, or, for sources
//! compiled with fixed targets, the same fixed targets (optional kernel features). Kernel images are
//! self-contained: every function they reach is copied in, SYCL_EXTERNAL ones internalized.
//! An exported function that calls a SYCL_EXTERNAL function of another image does not copy
//! it: the call stays an import. Every other definition is internalized, and declarations
//! that pass canBeImportedFunction are recorded as imports, per image. An image holds only the
//! module-scope values its functions use (which also drops the stray string variables that
//! clang leaves behind for `__attribute__((annotate))`). Each image records its reduced call
//! graph and its kernels' parameters, from the image as written (see [`crate::calls`] and
//! [`crate::params`]).

mod extract;
mod module_index;

use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet};

use rspirv::dr::Module;
use rspirv::spirv::{Op, Word};
use sycl_format::aspects::{aspect_name, target_aspect};
use sycl_format::{DeviceConfig, KernelParam, SplitMode};

use crate::calls::reduced_call_graph;
use crate::features::Features;
use crate::link::{max_id, Linked};
use crate::spec::{constants_of, SpecConstant};
use crate::symbols::Symbols;
use crate::vfunc::{self, VirtualSets};
use crate::{assemble, Error};
use extract::extract;
use module_index::{Contents, ModuleIndex};

/// A link input as the post-link sees it: its name and the fixed targets it was compiled for.
#[derive(Debug, Clone, Default)]
pub struct Source {
    /// The input's name, as its [`LinkInput`](crate::LinkInput) gives it: its source path.
    pub name: String,
    /// DPC++'s `-fsycl-fixed-targets` for this source, by target name (empty: none).
    pub fixed_targets: Vec<String>,
}

/// What [`post_link`] needs besides the linked module: how to split it and what its inputs were.
pub struct PostLinkOptions<'a> {
    /// The split mode asked for; `auto` becomes `off` when the module uses function pointers,
    /// `per_source` otherwise ([`PostLink::split`] says which).
    pub split: SplitMode,
    /// The link inputs, in the order given to [`crate::link`].
    pub sources: &'a [Source],
    /// The device configuration that gives each fixed target its `target_*` aspect.
    pub config: &'a DeviceConfig,
    /// The unit's named specialization constants ([`crate::spec::assign_ids`]).
    pub spec_constants: &'a BTreeMap<String, SpecConstant>,
}

/// The `SYCL/device requirements` of an image.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Requirements {
    /// Aspect numbers the image's code uses or declares, ascending; empty for images of
    /// sources compiled with fixed targets, which `fixed_target` describes instead.
    pub aspects: Vec<u32>,
    /// The `reqd_work_group_size` that every kernel of the image has, if any.
    pub reqd_work_group_size: Option<[u32; 3]>,
    /// The `intel_reqd_sub_group_size` that every kernel of the image has, if any.
    pub reqd_sub_group_size: Option<u32>,
    /// Aspects of the fixed targets; `Some(empty)` when the intersection came out empty.
    pub fixed_target: Option<Vec<u32>>,
}

/// One device image that the post-link produced.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PostLinkImage {
    /// The kernels (entry-point names) the image holds, in module order; empty for an image
    /// of SYCL_EXTERNAL functions or of a virtual-function set.
    pub kernels: Vec<String>,
    /// The functions the image exports, by linkage name, sorted: SYCL_EXTERNAL functions, or a
    /// set's members; always empty for kernel images.
    pub exported: Vec<String>,
    /// The functions the image imports, by linkage name: declarations that pass
    /// [`can_be_imported`](crate::can_be_imported), virtual functions (linked in by set) left out.
    pub imported: Vec<String>,
    /// What a device must have to run the image (`SYCL/device requirements`).
    pub requirements: Requirements,
    /// The named specialization constants the image uses.
    pub spec_constants: Vec<SpecConstant>,
    /// The image's part in virtual-function sets.
    pub virtual_functions: VirtualFunctions,
    /// The image's reduced call graph (`SYCL/call graph`): each defined function that reaches
    /// an import through direct calls or lies on a call cycle, by name, with its callees that
    /// are such functions or imports, sorted. Empty for most images.
    pub call_graph: BTreeMap<String, Vec<String>>,
    /// Each kernel's parameters (`SYCL/kernel arguments`), in the order of `kernels`, read
    /// from the image as written.
    pub kernel_params: Vec<(String, Vec<KernelParam>)>,
    /// The image's SPIR-V binary, which [`crate::load`] accepts.
    pub spirv: Vec<u8>,
}

/// The `SYCL/virtual functions` properties of an image.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct VirtualFunctions {
    /// The set an outlined set image provides.
    pub set: Option<String>,
    /// Whether it is the set's dummy image (empty bodies).
    pub dummy: bool,
    /// Sets the image's kernels use: declared with `SYCL_CALLS_INDIRECTLY`, or referenced
    /// through function-pointer tables.
    pub uses: Vec<String>,
}

/// What [`post_link`] made of a link unit: its device images and the diagnostics.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PostLink {
    /// The device images: kernel and SYCL_EXTERNAL images in order of their first entry
    /// (kernels in module order, then exports by name), then each virtual-function set's image
    /// followed by its dummy, if it has one.
    pub images: Vec<PostLinkImage>,
    /// The split mode applied (`auto` resolved).
    pub split: SplitMode,
    /// Diagnostics in DPC++'s words, one per entry (lines separated by newlines).
    pub warnings: Vec<String>,
}

/// What images are grouped by, beyond the split mode.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
enum Key {
    Fixed(Vec<String>),
    /// Used aspects, required sizes, and the virtual-function sets the entry declares it
    /// calls (so a kernel calling into a missing set cannot fail its neighbours).
    Features {
        aspects: BTreeSet<u32>,
        wg: Option<[u32; 3]>,
        sg: Option<u32>,
        sets: BTreeSet<String>,
    },
}

struct Entry {
    name: String,
    function: Word,
    kernel: bool,
    origin: usize,
    /// Functions whose `SYCL_DEVICE_HAS` counts for this entry (a kernel's entry wrapper and
    /// the kernel function it calls).
    declaring: Vec<Word>,
    key: Key,
}

/// Splits a linked module into device images by DPC++'s rules (see the module
/// documentation). Fails with [`Error::Malformed`] when an image it makes would not load.
pub fn post_link(linked: Linked, options: &PostLinkOptions<'_>) -> Result<PostLink, Error> {
    let unit = Unit::new(linked, options);
    let split = match options.split {
        SplitMode::Auto if unit.features.has_function_pointers => SplitMode::Off,
        SplitMode::Auto => SplitMode::PerSource,
        mode => mode,
    };
    let entries = unit.entries();
    let groups = groups(&entries, split);
    let mut warnings = Vec::new();
    let mut images = Vec::with_capacity(groups.len());
    for group in groups {
        let members: Vec<&Entry> = group.iter().map(|&i| &entries[i]).collect();
        images.push(unit.group_image(&members, &mut warnings));
    }
    // Each virtual-function set in an image of its own, whatever the split mode; and, for a set
    // that needs optional features, a dummy with empty bodies for devices without them.
    for (set, functions) in &unit.vsets.members {
        images.extend(unit.set_images(set, functions));
    }
    check_images(&images)?;
    Ok(PostLink { images, split, warnings })
}

/// The groups of entries (indices into `entries`) that become images, in order of their first
/// entry: kernels in module order, then exports by name.
fn groups(entries: &[Entry], split: SplitMode) -> Vec<Vec<usize>> {
    let mut groups: Vec<Vec<usize>> = Vec::new();
    let mut slots: HashMap<(bool, usize, Key), usize> = HashMap::new();
    for (i, e) in entries.iter().enumerate() {
        let part = match split {
            SplitMode::PerKernel => i,
            SplitMode::PerSource => e.origin,
            SplitMode::Off | SplitMode::Auto => 0,
        };
        let slot = *slots.entry((e.kernel, part, e.key.clone())).or_insert_with(|| {
            groups.push(Vec::new());
            groups.len() - 1
        });
        groups[slot].push(i);
    }
    groups
}

/// What the post-link writes, it checks: an input that `load` accepted but that still makes an
/// image `load` refuses is an error naming the image, never an invalid image.
fn check_images(images: &[PostLinkImage]) -> Result<(), Error> {
    for image in images {
        if let Err(e) = crate::load(&image.spirv) {
            let mut names =
                image.kernels.iter().chain(&image.exported).chain(&image.virtual_functions.set);
            let first = names.next().map_or("no entry points", String::as_str);
            return Err(Error::Malformed(format!(
                "the image with `{first}` that this input makes is invalid: {e}"
            )));
        }
    }
    Ok(())
}

/// The linked module and what the post-link reads of it, once for all the images it makes.
struct Unit<'a> {
    module: Module,
    /// The input each function definition came from ([`Linked::origins`]).
    origins: HashMap<Word, usize>,
    options: &'a PostLinkOptions<'a>,
    symbols: Symbols,
    features: Features,
    vsets: VirtualSets,
    /// The virtual functions (indirectly callable), by id and by linkage name.
    ic: HashSet<Word>,
    ic_names: HashSet<String>,
    index: ModuleIndex,
    /// What the functions of each virtual-function set use.
    set_aspects: BTreeMap<String, BTreeSet<u32>>,
    /// What each function uses through calls within its own input.
    same_origin_used: HashMap<Word, BTreeSet<u32>>,
    /// The SYCL_EXTERNAL functions the module defines.
    externals: HashSet<Word>,
}

impl<'a> Unit<'a> {
    fn new(linked: Linked, options: &'a PostLinkOptions<'a>) -> Unit<'a> {
        let Linked { module, origins } = linked;
        let symbols = Symbols::of(&module);
        let features = Features::analyze(&module);
        let vsets = VirtualSets::of(&module);
        let ic: HashSet<Word> = vsets.set_of.keys().copied().collect();
        let ic_names: HashSet<String> =
            ic.iter().filter_map(|f| symbols.linkage.get(f).map(|(n, _)| n.clone())).collect();
        let index = ModuleIndex::of(&module);
        let set_aspects = vsets
            .members
            .iter()
            .map(|(set, members)| {
                (set.clone(), members.iter().flat_map(|f| features.used(*f)).collect())
            })
            .collect();
        let origin = |f: Word| origins.get(&f).copied().unwrap_or(0);
        let same_origin_used = features.propagate(|a, b| origin(a) == origin(b));
        let externals: HashSet<Word> = symbols
            .sycl_external
            .iter()
            .copied()
            .filter(|f| symbols.defined_functions.contains(f))
            .collect();
        Unit {
            module,
            origins,
            options,
            symbols,
            features,
            vsets,
            ic,
            ic_names,
            index,
            set_aspects,
            same_origin_used,
            externals,
        }
    }

    /// The input function `f` came from.
    fn origin(&self, f: Word) -> usize {
        self.origins.get(&f).copied().unwrap_or(0)
    }

    /// The fixed targets of input `o`, sorted, without repeats.
    fn fixed(&self, o: usize) -> Vec<String> {
        let mut t =
            self.options.sources.get(o).map(|s| s.fixed_targets.clone()).unwrap_or_default();
        t.sort();
        t.dedup();
        t
    }

    /// The virtual-function sets that `declaring` declare they call.
    fn declared_sets(&self, declaring: &[Word]) -> BTreeSet<String> {
        declaring
            .iter()
            .flat_map(|d| self.vsets.calls.get(d).into_iter().flatten().cloned())
            .collect()
    }

    /// The entry points, each with what it is grouped by: kernels in module order, then the
    /// exported functions that are not virtual, by name.
    fn entries(&self) -> Vec<Entry> {
        let features = &self.features;
        let mut entries = Vec::new();
        for (name, entry) in &self.symbols.kernels {
            let mut declaring = vec![*entry];
            declaring.extend(features.callees(*entry).filter(|c| features.name(*c) == *name));
            entries.push((name.clone(), *entry, true, declaring));
        }
        for (name, id) in self.symbols.exports() {
            if !self.ic.contains(&id) {
                entries.push((name, id, false, vec![id]));
            }
        }
        entries
            .into_iter()
            .map(|(name, function, kernel, declaring)| {
                let origin = self.origin(function);
                let key = self.key(function, origin, &declaring);
                Entry { name, function, kernel, origin, declaring, key }
            })
            .collect()
    }

    /// What the entry `function` of input `origin` is grouped by.
    fn key(&self, function: Word, origin: usize, declaring: &[Word]) -> Key {
        let targets = self.fixed(origin);
        if !targets.is_empty() {
            return Key::Fixed(targets);
        }
        let features = &self.features;
        let mut aspects = features.used(function);
        for d in declaring {
            aspects.extend(features.declared(*d).into_iter().flatten());
        }
        // A kernel that calls into a set needs what the set's functions need (one that
        // only builds objects referring to the set does not).
        for set in self.declared_sets(declaring) {
            aspects.extend(self.set_aspects.get(set.as_str()).into_iter().flatten());
        }
        Key::Features {
            aspects,
            wg: features.reqd_work_group_size.get(&function).copied(),
            sg: features.reqd_sub_group_size.get(&function).copied(),
            sets: self.declared_sets(declaring),
        }
    }

    /// The image of one group of entries, which share their key.
    fn group_image(&self, members: &[&Entry], warnings: &mut Vec<String>) -> PostLinkImage {
        let kernel = members[0].kernel;
        let roots: Vec<Word> = members.iter().map(|e| e.function).collect();
        let (contents, exports) = if kernel {
            // Self-contained, but for virtual functions: those stay declarations.
            (self.index.contents(roots.iter().copied(), &self.ic), HashSet::new())
        } else {
            let own: HashSet<Word> = roots.iter().copied().collect();
            let others: HashSet<Word> =
                self.externals.difference(&own).chain(&self.ic).copied().collect();
            (self.index.contents(roots.iter().copied(), &others), own)
        };

        let requirements = match &members[0].key {
            Key::Features { aspects, wg, sg, .. } => Requirements {
                aspects: self.kernel_aspects(members, aspects.clone(), warnings),
                reqd_work_group_size: *wg,
                reqd_sub_group_size: *sg,
                fixed_target: None,
            },
            Key::Fixed(targets) => Requirements {
                fixed_target: Some(self.fixed_aspects(targets, &contents, warnings)),
                ..Requirements::default()
            },
        };

        let image = extract(&self.module, &self.index, &contents, &exports);
        let mut exported: Vec<String> =
            members.iter().filter(|e| !e.kernel).map(|e| e.name.clone()).collect();
        exported.sort();
        let mut uses: BTreeSet<String> =
            contents.declared.iter().filter_map(|f| self.vsets.set_of.get(f).cloned()).collect();
        for e in members.iter().filter(|e| e.kernel) {
            uses.extend(self.declared_sets(&e.declaring));
        }
        let virtual_functions =
            VirtualFunctions { uses: uses.into_iter().collect(), ..VirtualFunctions::default() };
        let kernels = members.iter().filter(|e| e.kernel).map(|e| e.name.clone()).collect();
        self.finish(image, kernels, exported, requirements, virtual_functions)
    }

    /// The aspects of an image with `members`, which start from their key's `aspects`: with
    /// what each kernel uses, and a warning for each aspect a kernel uses through a function
    /// of another input that the kernel did not expect.
    fn kernel_aspects(
        &self,
        members: &[&Entry],
        mut aspects: BTreeSet<u32>,
        warnings: &mut Vec<String>,
    ) -> Vec<u32> {
        let features = &self.features;
        for e in members.iter().filter(|e| e.kernel) {
            let mut expected = self.same_origin_used.get(&e.function).cloned().unwrap_or_default();
            for d in &e.declaring {
                expected.extend(features.declared(*d).into_iter().flatten());
            }
            for a in features.used(e.function).difference(&expected) {
                let Some((path, _)) = features.chain(e.function, *a, |_, _| true) else {
                    continue;
                };
                if let Some((f, _)) = path.iter().find(|(f, _)| self.origin(*f) != e.origin) {
                    warnings.push(format!(
                        "warning: function '{}' uses aspect '{}' not expected by its calling kernel.\nMissing SYCL_DEVICE_HAS on SYCL_EXTERNAL function?",
                        features.name(*f),
                        aspect_name(*a)
                    ));
                }
            }
            aspects.extend(features.used(e.function));
        }
        aspects.into_iter().collect()
    }

    /// The `target_*` aspects of an image of sources compiled for `targets`: those of the
    /// targets that every SYCL_EXTERNAL function it holds was also compiled for, with a warning
    /// for each function that narrows them and each target the configuration lacks.
    fn fixed_aspects(
        &self,
        targets: &[String],
        contents: &Contents,
        warnings: &mut Vec<String>,
    ) -> Vec<u32> {
        let mut final_targets: Vec<String> = targets.to_vec();
        let mut checked: Vec<Word> =
            contents.defined.iter().copied().filter(|f| self.externals.contains(f)).collect();
        checked.sort_unstable();
        for f in checked {
            let theirs = self.fixed(self.origin(f));
            if !theirs.is_empty() && theirs.iter().any(|t| !targets.contains(t)) {
                warnings.push(format!(
                    "warning: function '{}' compiled with different fixed targets than its calling kernel.",
                    self.features.name(f)
                ));
                final_targets.retain(|t| theirs.contains(t));
            }
        }
        let mut fixed_aspects = Vec::new();
        for t in &final_targets {
            match self.options.config.target(t).and_then(|c| c.target_aspect).or_else(|| target_aspect(t)) {
                Some(a) => fixed_aspects.push(a),
                None => warnings.push(format!(
                    "warning: fixed target '{t}' is not in the device configuration; no device will match it"
                )),
            }
        }
        fixed_aspects
    }

    /// A virtual-function set's image, and its dummy (empty bodies, no requirements) when the
    /// set needs optional features.
    fn set_images(&self, set: &str, functions: &[Word]) -> Vec<PostLinkImage> {
        let own: HashSet<Word> = functions.iter().copied().collect();
        let others: HashSet<Word> =
            self.externals.iter().chain(&self.ic).copied().filter(|f| !own.contains(f)).collect();
        let contents = self.index.contents(functions.iter().copied(), &others);
        let aspects: Vec<u32> = self.set_aspects[set].iter().copied().collect();
        let requirements = Requirements { aspects: aspects.clone(), ..Requirements::default() };
        let image = extract(&self.module, &self.index, &contents, &own);
        let vf = VirtualFunctions { set: Some(set.to_string()), ..VirtualFunctions::default() };
        // Exported, so that a binary that calls into the set from elsewhere finds it; the
        // runtime links a set's image (or its dummy) by set, never by name alone.
        let mut names: Vec<String> = functions
            .iter()
            .filter_map(|f| self.symbols.linkage.get(f).map(|(n, _)| n.clone()))
            .collect();
        names.sort();
        let mut images = vec![self.finish(image, vec![], names.clone(), requirements, vf)];
        if !aspects.is_empty() {
            let emptied = vfunc::with_empty_bodies(&self.module, functions);
            let dummy_index = ModuleIndex::of(&emptied);
            let contents = dummy_index.contents(functions.iter().copied(), &HashSet::new());
            let image = extract(&emptied, &dummy_index, &contents, &own);
            let vf = VirtualFunctions {
                set: Some(set.to_string()),
                dummy: true,
                ..VirtualFunctions::default()
            };
            images.push(self.finish(image, vec![], names, Requirements::default(), vf));
        }
        images
    }

    /// The image `module` made: its id bound set, the `function_pointers` aspect added where it
    /// uses them, its imports (virtual functions left out), specialization constants, reduced
    /// call graph and kernel parameters read from it, and its binary.
    fn finish(
        &self,
        mut module: Module,
        kernels: Vec<String>,
        exported: Vec<String>,
        mut requirements: Requirements,
        virtual_functions: VirtualFunctions,
    ) -> PostLinkImage {
        let bound = max_id(&module) + 1;
        if let Some(header) = &mut module.header {
            header.bound = bound;
        }
        // Function pointers are an optional feature of their own (see `aspects.rs`).
        let uses_pointers = module.all_inst_iter().any(|i| {
            matches!(
                i.class.opcode,
                Op::ConstantFunctionPointerINTEL | Op::FunctionPointerCallINTEL
            )
        });
        if uses_pointers && requirements.fixed_target.is_none() {
            let aspect =
                sycl_format::aspects::aspect_number("function_pointers").expect("known aspect");
            if !requirements.aspects.contains(&aspect) {
                requirements.aspects.push(aspect);
                requirements.aspects.sort_unstable();
            }
        }
        // Virtual functions are linked in by set, not resolved by name.
        let mut imported = Symbols::of(&module).imports(&module);
        imported.retain(|name| !self.ic_names.contains(name));
        let spec_constants = constants_of(&module, self.options.spec_constants);
        let call_graph = reduced_call_graph(&module, &imported);
        let kernel_params = crate::params::kernel_params(&module, &kernels);
        PostLinkImage {
            kernels,
            exported,
            imported,
            requirements,
            spec_constants,
            virtual_functions,
            call_graph,
            kernel_params,
            spirv: assemble(&module),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::load;
    use crate::Linkage;
    use rspirv::dr::{Builder, Instruction, Operand};
    use rspirv::spirv::{self, Decoration, ExecutionModel, FunctionControl, LinkageType};

    /// `kernel k` calls SYCL_EXTERNAL `f` (defined here), which calls `g` (declared only);
    /// `h` is an ordinary exported function nobody calls.
    fn unit() -> Module {
        let mut b = crate::test_support::kernel_builder(&[spirv::Capability::Linkage]);
        let void = b.type_void();
        let int = b.type_int(32, 0);
        let void_fn = b.type_function(void, vec![]);
        let int_fn = b.type_function(int, vec![int]);
        let link = |b: &mut Builder, id, name: &str, kind| {
            b.decorate(
                id,
                Decoration::LinkageAttributes,
                vec![Operand::LiteralString(name.into()), Operand::LinkageType(kind)],
            )
        };

        let g = b.begin_function(int, None, FunctionControl::NONE, int_fn).unwrap();
        b.function_parameter(int).unwrap();
        b.end_function().unwrap();
        link(&mut b, g, "g", LinkageType::Import);

        let f = b.begin_function(int, None, FunctionControl::NONE, int_fn).unwrap();
        let p = b.function_parameter(int).unwrap();
        b.begin_block(None).unwrap();
        let r = b.function_call(int, None, g, vec![p]).unwrap();
        b.ret_value(r).unwrap();
        b.end_function().unwrap();
        link(&mut b, f, "f", LinkageType::Export);
        b.decorate(
            f,
            Decoration::UserSemantic,
            vec![Operand::LiteralString("sycl-external".into())],
        );

        let h = b.begin_function(int, None, FunctionControl::NONE, int_fn).unwrap();
        let q = b.function_parameter(int).unwrap();
        b.begin_block(None).unwrap();
        b.ret_value(q).unwrap();
        b.end_function().unwrap();
        link(&mut b, h, "h", LinkageType::Export);

        let k = b.begin_function(void, None, FunctionControl::NONE, void_fn).unwrap();
        b.begin_block(None).unwrap();
        let one = b.constant_bit32(int, 1);
        b.function_call(int, None, f, vec![one]).unwrap();
        b.ret().unwrap();
        b.end_function().unwrap();
        b.entry_point(ExecutionModel::Kernel, k, "k", vec![]);
        b.module()
    }

    fn run(module: Module, split: SplitMode) -> PostLink {
        let sources = [Source::default()];
        let spec = BTreeMap::new();
        let options = PostLinkOptions {
            split,
            sources: &sources,
            config: &DeviceConfig::default_config(),
            spec_constants: &spec,
        };
        post_link(Linked { module, origins: HashMap::new() }, &options).unwrap()
    }

    #[test]
    fn kernel_images_are_self_contained_and_export_nothing() {
        let images = run(unit(), SplitMode::PerKernel).images;
        assert_eq!(images.len(), 2);
        let (kernel, exports) = (&images[0], &images[1]);
        assert_eq!(kernel.kernels, ["k"]);
        assert!(kernel.exported.is_empty(), "exports never come from kernel images");
        assert_eq!(kernel.imported, ["g"]);
        // f is copied into the kernel image, with its linkage gone.
        let module = load(&kernel.spirv).unwrap();
        let symbols = Symbols::of(&module);
        assert_eq!(module.functions.len(), 3, "k, f and the declaration of g");
        assert!(symbols
            .linkage
            .values()
            .all(|(name, kind)| name == "g" && *kind == Linkage::Import));

        assert!(exports.kernels.is_empty());
        assert_eq!(exports.exported, ["f"]);
        assert_eq!(exports.imported, ["g"]);
        let module = load(&exports.spirv).unwrap();
        let symbols = Symbols::of(&module);
        let names: Vec<&str> = symbols.linkage.values().map(|(n, _)| n.as_str()).collect();
        assert!(!names.contains(&"h"), "h is neither SYCL_EXTERNAL nor reachable: dropped");
    }

    /// Kernels `k1` and `k2` each store to a variable of their own. A decoration group covers
    /// both variables, and an `OpDecorateId` on the first names a constant pointing to `h`, a
    /// function nothing calls; `k2`'s interface lists a table pointing to `h2`, which its body
    /// never uses. Each image holds what its annotations and interface name and nothing else.
    #[test]
    fn images_hold_what_their_annotations_name() {
        let mut b = crate::test_support::kernel_builder(&[spirv::Capability::Addresses]);
        let void = b.type_void();
        let int = b.type_int(32, 0);
        let void_fn = b.type_function(void, vec![]);
        let int_ptr = b.type_pointer(None, spirv::StorageClass::CrossWorkgroup, int);
        let fn_ptr = b.type_pointer(None, spirv::StorageClass::CodeSectionINTEL, void_fn);
        let zero = b.constant_bit32(int, 0);
        let v1 = b.variable(int_ptr, None, spirv::StorageClass::CrossWorkgroup, Some(zero));
        let v2 = b.variable(int_ptr, None, spirv::StorageClass::CrossWorkgroup, Some(zero));
        let mut pointer_to_nothing = || {
            let f = b.begin_function(void, None, FunctionControl::NONE, void_fn).unwrap();
            b.begin_block(None).unwrap();
            b.ret().unwrap();
            b.end_function().unwrap();
            let pointer = b.id();
            let constant = Instruction::new(
                Op::ConstantFunctionPointerINTEL,
                Some(fn_ptr),
                Some(pointer),
                vec![Operand::IdRef(f)],
            );
            b.module_mut().types_global_values.push(constant);
            (f, pointer)
        };
        let (_, pointer) = pointer_to_nothing();
        let (h2, pointer2) = pointer_to_nothing();
        let table_ptr = b.type_pointer(None, spirv::StorageClass::CrossWorkgroup, fn_ptr);
        let table =
            b.variable(table_ptr, None, spirv::StorageClass::CrossWorkgroup, Some(pointer2));
        let group = b.decoration_group();
        b.decorate(group, Decoration::Alignment, vec![Operand::LiteralBit32(4)]);
        b.group_decorate(group, [v1, v2]);
        b.decorate_id(v1, Decoration::AlignmentId, vec![Operand::IdRef(pointer)]);
        for (name, variable, interface) in [("k1", v1, vec![]), ("k2", v2, vec![table])] {
            let k = b.begin_function(void, None, FunctionControl::NONE, void_fn).unwrap();
            b.begin_block(None).unwrap();
            b.store(variable, zero, None, vec![]).unwrap();
            b.ret().unwrap();
            b.end_function().unwrap();
            b.entry_point(ExecutionModel::Kernel, k, name, interface);
        }
        let images = run(b.module(), SplitMode::PerKernel).images;
        assert_eq!(images.iter().map(|i| i.kernels.clone()).collect::<Vec<_>>(), [["k1"], ["k2"]]);
        let group_targets = |m: &Module| -> Vec<Operand> {
            let applied =
                m.annotations.iter().find(|a| a.class.opcode == Op::GroupDecorate).unwrap();
            applied.operands.clone()
        };
        let first = load(&images[0].spirv).unwrap();
        assert_eq!(first.functions.len(), 2, "k1 and h, which its variable's decoration reaches");
        assert_eq!(group_targets(&first), [Operand::IdRef(group), Operand::IdRef(v1)]);
        let second = load(&images[1].spirv).unwrap();
        let defined: Vec<Word> = second.functions.iter().filter_map(|f| f.def_id()).collect();
        assert_eq!(defined.len(), 2);
        assert!(defined.contains(&h2), "k2's interface reaches h2");
        assert_eq!(group_targets(&second), [Operand::IdRef(group), Operand::IdRef(v2)]);
        assert!(second
            .all_inst_iter()
            .all(|i| i.class.opcode != Op::DecorateId && i.result_id != Some(pointer)));
    }

    /// As clang makes them: kernel `k` calls `helper`, which calls the import `g`; kernel `k2`
    /// calls the recursive `fib`; kernel `k3` calls nothing; SYCL_EXTERNAL `f` calls `g`. Each
    /// kernel is an entry function calling a function of the kernel's name.
    fn recursive_unit() -> Module {
        let mut b = crate::test_support::kernel_builder(&[spirv::Capability::Linkage]);
        let int = b.type_int(32, 0);
        let int_fn = b.type_function(int, vec![int]);
        let g = b.begin_function(int, None, FunctionControl::NONE, int_fn).unwrap();
        b.function_parameter(int).unwrap();
        b.end_function().unwrap();
        let function =
            |b: &mut Builder, name: &str, export: bool, calls: &[Option<Word>]| -> Word {
                let id = b.id();
                b.begin_function(int, Some(id), FunctionControl::NONE, int_fn).unwrap();
                let mut value = b.function_parameter(int).unwrap();
                b.begin_block(None).unwrap();
                for callee in calls {
                    value = b.function_call(int, None, callee.unwrap_or(id), vec![value]).unwrap();
                }
                b.ret_value(value).unwrap();
                b.end_function().unwrap();
                b.name(id, name);
                if export {
                    let linkage = vec![
                        Operand::LiteralString(name.into()),
                        Operand::LinkageType(LinkageType::Export),
                    ];
                    b.decorate(id, Decoration::LinkageAttributes, linkage);
                }
                id
            };
        let helper = function(&mut b, "helper", false, &[Some(g)]);
        let fib = function(&mut b, "fib", true, &[None, None]);
        let f = function(&mut b, "f", true, &[Some(g)]);
        b.decorate(
            f,
            Decoration::UserSemantic,
            vec![Operand::LiteralString("sycl-external".into())],
        );
        for (name, callee) in [("k", Some(helper)), ("k2", Some(fib)), ("k3", None)] {
            let calls: Vec<Option<Word>> = callee.into_iter().map(Some).collect();
            let kernel = function(&mut b, name, true, &calls);
            let entry = function(&mut b, name, false, &[Some(kernel)]);
            b.module_mut().debug_names.pop(); // clang leaves entry functions unnamed
            b.entry_point(ExecutionModel::Kernel, entry, name, vec![]);
        }
        let linkage =
            vec![Operand::LiteralString("g".into()), Operand::LinkageType(LinkageType::Import)];
        b.decorate(g, Decoration::LinkageAttributes, linkage);
        b.module()
    }

    #[test]
    fn every_image_records_its_reduced_call_graph() {
        let graph = |nodes: &[(&str, &[&str])]| -> BTreeMap<String, Vec<String>> {
            nodes
                .iter()
                .map(|(n, c)| (n.to_string(), c.iter().map(|c| c.to_string()).collect()))
                .collect()
        };
        let images = run(recursive_unit(), SplitMode::PerKernel).images;
        let by = |first: &str| {
            images
                .iter()
                .find(|i| i.kernels.first().or(i.exported.first()).unwrap() == first)
                .unwrap()
        };
        assert_eq!(images.len(), 4);
        assert_eq!(by("k").imported, ["g"]);
        assert_eq!(by("k").call_graph, graph(&[("helper", &["g"]), ("k", &["helper"])]));
        assert_eq!(
            by("k2").call_graph,
            graph(&[("fib", &["fib"])]),
            "k2 reaches the cycle without lying on it"
        );
        assert!(by("k3").call_graph.is_empty());
        assert_eq!(by("f").call_graph, graph(&[("f", &["g"])]));

        let images = run(recursive_unit(), SplitMode::Off).images;
        assert_eq!(images.len(), 2);
        assert_eq!(images[0].kernels, ["k", "k2", "k3"]);
        assert_eq!(
            images[0].call_graph,
            graph(&[("fib", &["fib"]), ("helper", &["g"]), ("k", &["helper"])])
        );
        assert_eq!(images[1].call_graph, graph(&[("f", &["g"])]));
    }

    #[test]
    fn kernel_images_record_their_kernels_parameters() {
        let int = sycl_format::KernelParam {
            kind: sycl_format::ParamKind::Scalar,
            size: 4,
            ty: "int".into(),
            name: String::new(),
        };
        let images = run(recursive_unit(), SplitMode::Off).images;
        let expected: Vec<(String, Vec<KernelParam>)> =
            ["k", "k2", "k3"].iter().map(|k| (k.to_string(), vec![int.clone()])).collect();
        assert_eq!(images[0].kernel_params, expected, "in the order of the image's kernels");
        assert!(images[1].kernel_params.is_empty(), "an exports image has no kernels");
        let images = run(unit(), SplitMode::PerKernel).images;
        assert_eq!(
            images[0].kernel_params,
            [("k".to_string(), vec![])],
            "a kernel without parameters has a record"
        );
    }

    #[test]
    fn post_link_is_deterministic() {
        for split in [SplitMode::PerKernel, SplitMode::PerSource, SplitMode::Off, SplitMode::Auto] {
            assert_eq!(run(unit(), split), run(unit(), split));
            assert_eq!(run(recursive_unit(), split), run(recursive_unit(), split));
        }
    }

    #[test]
    fn a_unit_without_kernels_or_exports_gives_no_image() {
        let mut m = unit();
        m.entry_points.clear();
        m.annotations.retain(|a| {
            !matches!(a.operands.get(1), Some(Operand::Decoration(Decoration::UserSemantic)))
        });
        assert!(run(m, SplitMode::Auto).images.is_empty());
    }
}
