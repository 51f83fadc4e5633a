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

use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet};

use rspirv::dr::{Function, Instruction, Module, Operand};
use rspirv::spirv::{Decoration, LinkageType, Op, Word};
use sycl_format::aspects::{aspect_name, target_aspect};
use sycl_format::{DeviceConfig, KernelParam, SplitMode};

use crate::calls::reduced_call_graph;
use crate::features::Features;
use crate::link::{max_id, Linked};
use crate::load::operand_id;
use crate::load::untyped_sets;
use crate::spec::{constants_of, SpecConstant};
use crate::symbols::{linkage_of, Linkage, Symbols};
use crate::vfunc::{self, VirtualSets};
use crate::{assemble, Error};

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
    let Linked { module, origins } = linked;
    let symbols = Symbols::of(&module);
    let features = Features::analyze(&module);
    let vsets = VirtualSets::of(&module);
    let ic: HashSet<Word> = vsets.set_of.keys().copied().collect();
    let ic_names: HashSet<String> =
        ic.iter().filter_map(|f| symbols.linkage.get(f).map(|(n, _)| n.clone())).collect();
    let index = ModuleIndex::of(&module);
    let set_aspects: BTreeMap<&str, BTreeSet<u32>> = vsets
        .members
        .iter()
        .map(|(set, members)| {
            (set.as_str(), members.iter().flat_map(|f| features.used(*f)).collect())
        })
        .collect();
    let declared_sets = |declaring: &[Word]| -> BTreeSet<String> {
        declaring.iter().flat_map(|d| vsets.calls.get(d).into_iter().flatten().cloned()).collect()
    };
    let split = match options.split {
        SplitMode::Auto if features.has_function_pointers => SplitMode::Off,
        SplitMode::Auto => SplitMode::PerSource,
        mode => mode,
    };
    let origin = |f: Word| origins.get(&f).copied().unwrap_or(0);
    let fixed = |o: usize| {
        let mut t = options.sources.get(o).map(|s| s.fixed_targets.clone()).unwrap_or_default();
        t.sort();
        t.dedup();
        t
    };

    let mut entries = Vec::new();
    for (name, entry) in &symbols.kernels {
        let mut declaring = vec![*entry];
        declaring.extend(features.callees(*entry).filter(|c| features.name(*c) == *name));
        entries.push((name.clone(), *entry, true, declaring));
    }
    for (name, id) in symbols.exports() {
        if !ic.contains(&id) {
            entries.push((name, id, false, vec![id]));
        }
    }
    let entries: Vec<Entry> = entries
        .into_iter()
        .map(|(name, function, kernel, declaring)| {
            let o = origin(function);
            let targets = fixed(o);
            let key = if targets.is_empty() {
                let mut aspects = features.used(function);
                for d in &declaring {
                    aspects.extend(features.declared(*d).into_iter().flatten());
                }
                // A kernel that calls into a set needs what the set's functions need (one that
                // only builds objects referring to the set does not).
                for set in declared_sets(&declaring) {
                    aspects.extend(set_aspects.get(set.as_str()).into_iter().flatten());
                }
                Key::Features {
                    aspects,
                    wg: features.reqd_work_group_size.get(&function).copied(),
                    sg: features.reqd_sub_group_size.get(&function).copied(),
                    sets: declared_sets(&declaring),
                }
            } else {
                Key::Fixed(targets)
            };
            Entry { name, function, kernel, origin: o, declaring, key }
        })
        .collect();

    // Groups in order of their first entry: kernels in module order, then exports by name.
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

    let same_origin_used = features.propagate(|a, b| origin(a) == origin(b));
    let externals: HashSet<Word> = symbols
        .sycl_external
        .iter()
        .copied()
        .filter(|f| symbols.defined_functions.contains(f))
        .collect();
    let mut warnings = Vec::new();
    let mut images = Vec::with_capacity(groups.len());
    for group in groups {
        let members: Vec<&Entry> = group.iter().map(|&i| &entries[i]).collect();
        let kernel = members[0].kernel;
        let roots: Vec<Word> = members.iter().map(|e| e.function).collect();
        let (contents, exports) = if kernel {
            // Self-contained, but for virtual functions: those stay declarations.
            (index.contents(roots.iter().copied(), &ic), HashSet::new())
        } else {
            let own: HashSet<Word> = roots.iter().copied().collect();
            let others: HashSet<Word> = externals.difference(&own).chain(&ic).copied().collect();
            (index.contents(roots.iter().copied(), &others), own)
        };

        let requirements = match &members[0].key {
            Key::Features { aspects, wg, sg, .. } => {
                let mut aspects = aspects.clone();
                for e in members.iter().filter(|e| e.kernel) {
                    let mut expected =
                        same_origin_used.get(&e.function).cloned().unwrap_or_default();
                    for d in &e.declaring {
                        expected.extend(features.declared(*d).into_iter().flatten());
                    }
                    for a in features.used(e.function).difference(&expected) {
                        let Some((path, _)) = features.chain(e.function, *a, |_, _| true) else {
                            continue;
                        };
                        if let Some((f, _)) = path.iter().find(|(f, _)| origin(*f) != e.origin) {
                            warnings.push(format!(
                                "warning: function '{}' uses aspect '{}' not expected by its calling kernel.\nMissing SYCL_DEVICE_HAS on SYCL_EXTERNAL function?",
                                features.name(*f),
                                aspect_name(*a)
                            ));
                        }
                    }
                    aspects.extend(features.used(e.function));
                }
                Requirements {
                    aspects: aspects.into_iter().collect(),
                    reqd_work_group_size: *wg,
                    reqd_sub_group_size: *sg,
                    fixed_target: None,
                }
            }
            Key::Fixed(targets) => {
                let mut final_targets: Vec<String> = targets.clone();
                let mut checked: Vec<Word> =
                    contents.defined.iter().copied().filter(|f| externals.contains(f)).collect();
                checked.sort_unstable();
                for f in checked {
                    let theirs = fixed(origin(f));
                    if !theirs.is_empty() && theirs.iter().any(|t| !targets.contains(t)) {
                        warnings.push(format!(
                            "warning: function '{}' compiled with different fixed targets than its calling kernel.",
                            features.name(f)
                        ));
                        final_targets.retain(|t| theirs.contains(t));
                    }
                }
                let mut fixed_aspects = Vec::new();
                for t in &final_targets {
                    match options.config.target(t).and_then(|c| c.target_aspect).or_else(|| target_aspect(t)) {
                        Some(a) => fixed_aspects.push(a),
                        None => warnings.push(format!(
                            "warning: fixed target '{t}' is not in the device configuration; no device will match it"
                        )),
                    }
                }
                Requirements { fixed_target: Some(fixed_aspects), ..Requirements::default() }
            }
        };

        let image = extract(&module, &index, &contents, &exports);
        let mut exported: Vec<String> =
            members.iter().filter(|e| !e.kernel).map(|e| e.name.clone()).collect();
        exported.sort();
        let mut uses: BTreeSet<String> =
            contents.declared.iter().filter_map(|f| vsets.set_of.get(f).cloned()).collect();
        for e in members.iter().filter(|e| e.kernel) {
            uses.extend(declared_sets(&e.declaring));
        }
        let virtual_functions =
            VirtualFunctions { uses: uses.into_iter().collect(), ..VirtualFunctions::default() };
        let kernels = members.iter().filter(|e| e.kernel).map(|e| e.name.clone()).collect();
        images.push(finish(
            image,
            kernels,
            exported,
            requirements,
            virtual_functions,
            options,
            &ic_names,
        ));
    }

    // Each virtual-function set in an image of its own, whatever the split mode; and, for a set
    // that needs optional features, a dummy with empty bodies for devices without them.
    for (set, functions) in &vsets.members {
        let own: HashSet<Word> = functions.iter().copied().collect();
        let others: HashSet<Word> =
            externals.iter().chain(&ic).copied().filter(|f| !own.contains(f)).collect();
        let contents = index.contents(functions.iter().copied(), &others);
        let aspects: Vec<u32> = set_aspects[set.as_str()].iter().copied().collect();
        let requirements = Requirements { aspects: aspects.clone(), ..Requirements::default() };
        let image = extract(&module, &index, &contents, &own);
        let vf = VirtualFunctions { set: Some(set.clone()), ..VirtualFunctions::default() };
        // Exported, so that a binary that calls into the set from elsewhere finds it; the
        // runtime links a set's image (or its dummy) by set, never by name alone.
        let mut names: Vec<String> = functions
            .iter()
            .filter_map(|f| symbols.linkage.get(f).map(|(n, _)| n.clone()))
            .collect();
        names.sort();
        images.push(finish(image, vec![], names.clone(), requirements, vf, options, &ic_names));
        if !aspects.is_empty() {
            let emptied = vfunc::with_empty_bodies(&module, functions);
            let dummy_index = ModuleIndex::of(&emptied);
            let contents = dummy_index.contents(functions.iter().copied(), &HashSet::new());
            let image = extract(&emptied, &dummy_index, &contents, &own);
            let vf = VirtualFunctions {
                set: Some(set.clone()),
                dummy: true,
                ..VirtualFunctions::default()
            };
            images.push(finish(
                image,
                vec![],
                names,
                Requirements::default(),
                vf,
                options,
                &ic_names,
            ));
        }
    }
    // What the post-link writes, it checks: an input that `load` accepted but that still
    // makes an image `load` refuses is an error naming the image, never an invalid image.
    for image in &images {
        if let Err(e) = crate::load(&image.spirv) {
            let mut names =
                image.kernels.iter().chain(&image.exported).chain(&image.virtual_functions.set);
            let first = names.next().map_or("no entry points", String::as_str);
            return Err(Error::Malformed(format!(
                "the image with `{first}` that this input makes is invalid: {e}"
            )));
        }
    }
    Ok(PostLink { images, split, warnings })
}

fn finish(
    mut module: Module,
    kernels: Vec<String>,
    exported: Vec<String>,
    mut requirements: Requirements,
    virtual_functions: VirtualFunctions,
    options: &PostLinkOptions<'_>,
    virtual_names: &HashSet<String>,
) -> PostLinkImage {
    let bound = max_id(&module) + 1;
    if let Some(header) = &mut module.header {
        header.bound = bound;
    }
    // Function pointers are an optional feature of their own (see `aspects.rs`).
    let uses_pointers = module.all_inst_iter().any(|i| {
        matches!(i.class.opcode, Op::ConstantFunctionPointerINTEL | Op::FunctionPointerCallINTEL)
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
    imported.retain(|name| !virtual_names.contains(name));
    let spec_constants = constants_of(&module, options.spec_constants);
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

/// The linked module indexed once, so that each image is built in time proportional to its own
/// size rather than the module's; and the one notion of what a definition uses, behind both
/// which functions an image must hold and which module-scope values. A function uses what its
/// instructions, its entry point, its execution modes and the decorations on its ids use; a
/// module-scope value (type, constant, variable, decoration group), what its instruction and its
/// decorations use. Deciding the two questions from separate notions let them drift apart: the
/// `spirv_postlink` fuzz target found images holding a type or an interface variable that
/// named a function the image had dropped.
struct ModuleIndex {
    /// Function id → position in `module.functions`.
    functions: HashMap<Word, usize>,
    /// Module-scope value id → position in `types_global_values`.
    globals: HashMap<Word, usize>,
    /// Pointer type id → position of the `OpTypeForwardPointer` that announces it.
    forward_pointers: HashMap<Word, usize>,
    /// Id → positions of the annotations that decorate it (for a decoration group, also the
    /// `OpDecorationGroup` itself) and of the names that name it.
    annotations: HashMap<Word, Vec<usize>>,
    names: HashMap<Word, Vec<usize>>,
    /// What each function's whole definition uses, what its declaration alone uses (type,
    /// parameters and their decorations), and what each module-scope value uses: functions and
    /// module-scope values only, each list without repeats.
    body_uses: HashMap<Word, Vec<Word>>,
    declaration_uses: HashMap<Word, Vec<Word>>,
    value_uses: HashMap<Word, Vec<Word>>,
}

/// What one image holds: functions with their bodies, functions only declared, and module-scope
/// values (decoration groups included).
struct Contents {
    defined: HashSet<Word>,
    declared: HashSet<Word>,
    values: HashSet<Word>,
}

impl ModuleIndex {
    fn of(module: &Module) -> ModuleIndex {
        let functions: HashMap<Word, usize> = module
            .functions
            .iter()
            .enumerate()
            .filter_map(|(i, f)| Some((f.def_id()?, i)))
            .collect();
        let globals: HashMap<Word, usize> = module
            .types_global_values
            .iter()
            .enumerate()
            .filter_map(|(i, g)| Some((g.result_id?, i)))
            .collect();
        let forward_pointers = module
            .types_global_values
            .iter()
            .enumerate()
            .filter(|(_, g)| g.class.opcode == Op::TypeForwardPointer)
            .filter_map(|(i, g)| match g.operands.first() {
                Some(Operand::IdRef(p)) => Some((*p, i)),
                _ => None,
            })
            .collect();
        let groups: HashSet<Word> = module
            .annotations
            .iter()
            .filter(|a| a.class.opcode == Op::DecorationGroup)
            .filter_map(|a| a.result_id)
            .collect();
        let untyped: HashSet<Word> = untyped_sets(module).into_iter().collect();
        // The functions and module-scope values an instruction uses. The operands of an
        // extended instruction from a set rspirv has no grammar for may be literals read as
        // ids: they keep a module-scope value they happen to name, never a function.
        let uses = |inst: &Instruction, out: &mut Vec<Word>| {
            let untyped_from = match (inst.class.opcode, inst.operands.first()) {
                (Op::ExtInst, Some(Operand::IdRef(set))) if untyped.contains(set) => 1,
                _ => usize::MAX,
            };
            let operands =
                inst.operands.iter().enumerate().filter_map(|(i, op)| Some((i, operand_id(op)?)));
            for (i, id) in inst.result_type.map(|t| (0, t)).into_iter().chain(operands) {
                let node = globals.contains_key(&id) || groups.contains(&id);
                if node || (i < untyped_from && functions.contains_key(&id)) {
                    out.push(id);
                }
            }
        };

        // Where each id's uses go: a value's own list, or its function's body (and declaration).
        enum Owner {
            Value,
            Body(Word),
            Declaration(Word),
        }
        let mut owner: HashMap<Word, Owner> = HashMap::new();
        for id in globals.keys().chain(&groups) {
            owner.insert(*id, Owner::Value);
        }
        let mut body_uses: HashMap<Word, Vec<Word>> = HashMap::new();
        let mut declaration_uses: HashMap<Word, Vec<Word>> = HashMap::new();
        for f in &module.functions {
            let Some(id) = f.def_id() else { continue };
            let (mut body, mut declaration) = (Vec::new(), Vec::new());
            for inst in f.def.iter().chain(&f.parameters) {
                uses(inst, &mut declaration);
                owner.extend(inst.result_id.map(|r| (r, Owner::Declaration(id))));
            }
            for inst in f.all_inst_iter() {
                uses(inst, &mut body);
                if let Some(r) = inst.result_id {
                    owner.entry(r).or_insert(Owner::Body(id));
                }
            }
            body_uses.insert(id, body);
            declaration_uses.insert(id, declaration);
        }
        let mut value_uses: HashMap<Word, Vec<Word>> = HashMap::new();
        for g in &module.types_global_values {
            if let Some(id) = g.result_id {
                uses(g, value_uses.entry(id).or_default());
            }
        }
        for id in &groups {
            value_uses.entry(*id).or_default();
        }
        let mut add = |target: Word, used: &[Word]| {
            let lists: [Option<&mut Vec<Word>>; 2] = match owner.get(&target) {
                Some(Owner::Value) => [value_uses.get_mut(&target), None],
                Some(Owner::Body(f)) => [body_uses.get_mut(f), None],
                Some(Owner::Declaration(f)) => {
                    let f = *f;
                    [body_uses.get_mut(&f), declaration_uses.get_mut(&f)]
                }
                None => [None, None],
            };
            for list in lists.into_iter().flatten() {
                list.extend_from_slice(used);
            }
        };
        let used_by = |inst: &Instruction| {
            let mut used = Vec::new();
            uses(inst, &mut used);
            used
        };
        for e in &module.entry_points {
            if let Some(Operand::IdRef(f)) = e.operands.get(1) {
                add(*f, &used_by(e));
            }
        }
        for m in &module.execution_modes {
            if let Some(Operand::IdRef(f)) = m.operands.first() {
                add(*f, &used_by(m));
            }
        }
        let mut annotations: HashMap<Word, Vec<usize>> = HashMap::new();
        for (i, a) in module.annotations.iter().enumerate() {
            // An id in a group uses the group (and so the group's decorations), nothing else
            // the group names.
            let used = match (a.class.opcode, a.operands.first()) {
                (Op::GroupDecorate | Op::GroupMemberDecorate, Some(Operand::IdRef(g)))
                    if groups.contains(g) =>
                {
                    vec![*g]
                }
                (Op::GroupDecorate | Op::GroupMemberDecorate, _) => vec![],
                _ => used_by(a),
            };
            for target in annotation_targets(a) {
                add(target, &used);
                annotations.entry(target).or_default().push(i);
            }
        }
        for list in body_uses
            .values_mut()
            .chain(declaration_uses.values_mut())
            .chain(value_uses.values_mut())
        {
            list.sort_unstable();
            list.dedup();
        }
        let mut names: HashMap<Word, Vec<usize>> = HashMap::new();
        for (i, n) in module.debug_names.iter().enumerate() {
            if let Some(Operand::IdRef(t)) = n.operands.first() {
                names.entry(*t).or_default().push(i);
            }
        }
        ModuleIndex {
            functions,
            globals,
            forward_pointers,
            annotations,
            names,
            body_uses,
            declaration_uses,
            value_uses,
        }
    }

    /// What an image with `roots` must hold: everything they use, transitively; the functions
    /// in `stop` only as declarations.
    fn contents(&self, roots: impl IntoIterator<Item = Word>, stop: &HashSet<Word>) -> Contents {
        let mut contents =
            Contents { defined: HashSet::new(), declared: HashSet::new(), values: HashSet::new() };
        let mut seen = HashSet::new();
        let mut pending: Vec<Word> = roots.into_iter().collect();
        while let Some(id) = pending.pop() {
            if !seen.insert(id) {
                continue;
            }
            let (set, uses) = if stop.contains(&id) && self.functions.contains_key(&id) {
                (&mut contents.declared, self.declaration_uses.get(&id))
            } else if self.functions.contains_key(&id) {
                (&mut contents.defined, self.body_uses.get(&id))
            } else {
                (&mut contents.values, self.value_uses.get(&id))
            };
            if let Some(uses) = uses {
                set.insert(id);
                pending.extend(uses);
            }
        }
        contents
    }
}

/// The ids an annotation decorates; an `OpDecorationGroup` counts as decorating its group.
fn annotation_targets(a: &Instruction) -> Vec<Word> {
    match a.class.opcode {
        Op::DecorationGroup => a.result_id.into_iter().collect(),
        Op::GroupDecorate | Op::GroupMemberDecorate => a
            .operands
            .iter()
            .skip(1)
            .filter_map(|op| match op {
                Operand::IdRef(t) => Some(*t),
                _ => None,
            })
            .collect(),
        _ => match a.operands.first() {
            Some(Operand::IdRef(t)) => vec![*t],
            _ => vec![],
        },
    }
}

/// An image of `module` holding `contents`, its entry points among them, and export linkage
/// only on `exports` (every other definition is internalized).
fn extract(
    module: &Module,
    index: &ModuleIndex,
    contents: &Contents,
    exports: &HashSet<Word>,
) -> Module {
    let stub = |f: &Function| Function {
        def: f.def.clone(),
        end: f.end.clone(),
        parameters: f.parameters.clone(),
        blocks: vec![],
    };
    let mut positions: Vec<usize> = contents
        .defined
        .iter()
        .chain(&contents.declared)
        .filter_map(|f| index.functions.get(f).copied())
        .collect();
    positions.sort_unstable();
    let functions: Vec<Function> = positions
        .iter()
        .map(|&i| {
            let f = &module.functions[i];
            if f.def_id().is_some_and(|id| contents.declared.contains(&id)) {
                stub(f)
            } else {
                f.clone()
            }
        })
        .collect();

    // Ids the image defines, whose names and decorations it keeps.
    let mut present: HashSet<Word> = contents.values.clone();
    for f in &functions {
        present.extend(f.all_inst_iter().filter_map(|i| i.result_id));
    }
    let mut globals: Vec<usize> = contents
        .values
        .iter()
        .flat_map(|id| index.globals.get(id).into_iter().chain(index.forward_pointers.get(id)))
        .copied()
        .collect();
    globals.sort_unstable();

    let targeted = |map: &HashMap<Word, Vec<usize>>| -> Vec<usize> {
        let mut out: Vec<usize> =
            present.iter().filter_map(|id| map.get(id)).flatten().copied().collect();
        out.sort_unstable();
        out.dedup();
        out
    };
    let mut annotations = Vec::new();
    for i in targeted(&index.annotations) {
        let mut a = module.annotations[i].clone();
        match linkage_of(&a) {
            Some((id, _, _)) if contents.declared.contains(&id) => {
                a.operands[3] = Operand::LinkageType(LinkageType::Import)
            }
            Some((id, _, Linkage::Export | Linkage::LinkOnceOdr)) if !exports.contains(&id) => {
                continue
            }
            _ => {}
        }
        // Our own markers (`sycl-external`, `sycl-device-has:…`) have served once the post-link
        // has read them; left in, they come back from SPIR-V as `llvm.global.annotations`
        // referring to the kernel, which PoCL's kernel compiler aborts on.
        if matches!(a.operands.as_slice(), [_, Operand::Decoration(Decoration::UserSemantic), Operand::LiteralString(s)] if s.starts_with("sycl-"))
        {
            continue;
        }
        // A group applied to several ids applies here only to those the image holds.
        if matches!(a.class.opcode, Op::GroupDecorate | Op::GroupMemberDecorate) {
            let mut operands = a.operands.iter();
            let group = operands.next().cloned();
            let mut kept = Vec::new();
            let member = a.class.opcode == Op::GroupMemberDecorate;
            while let Some(target) = operands.next() {
                let literal = if member { operands.next().cloned() } else { None };
                if matches!(target, Operand::IdRef(t) if present.contains(t)) {
                    kept.push(target.clone());
                    kept.extend(literal);
                }
            }
            a.operands = group.into_iter().chain(kept).collect();
        }
        annotations.push(a);
    }

    let entry_points = module
        .entry_points
        .iter()
        .filter(|e| matches!(e.operands.get(1), Some(Operand::IdRef(id)) if contents.defined.contains(id)))
        .cloned()
        .collect();
    let execution_modes = module
        .execution_modes
        .iter()
        .filter(|m| matches!(m.operands.first(), Some(Operand::IdRef(id)) if contents.defined.contains(id)))
        .cloned()
        .collect();
    let mut functions = functions;
    // SPIR-V's layout: every declaration before the first definition.
    functions.sort_by_key(|f| !f.blocks.is_empty());
    Module {
        header: module.header.clone(),
        capabilities: module.capabilities.clone(),
        extensions: module.extensions.clone(),
        ext_inst_imports: module.ext_inst_imports.clone(),
        memory_model: module.memory_model.clone(),
        execution_modes,
        entry_points,
        debug_string_source: module.debug_string_source.clone(),
        debug_names: targeted(&index.names)
            .into_iter()
            .map(|i| module.debug_names[i].clone())
            .collect(),
        debug_module_processed: module.debug_module_processed.clone(),
        annotations,
        types_global_values: globals
            .into_iter()
            .map(|g| module.types_global_values[g].clone())
            .collect(),
        functions,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::load;
    use rspirv::dr::Builder;
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
