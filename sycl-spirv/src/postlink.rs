//! Post-link: from one link unit's linked module to device images.
//!
//! The seeds' rules. Entry points are kernels and SYCL_EXTERNAL functions, and they are
//! grouped by the split mode (per kernel, per source, or all together), never kernels with
//! exported functions: SYCL_EXTERNAL functions are exported only from images without kernels
//! (seed 001). Each group is split again so that an image holds only entry points with the
//! same used aspects, required work-group size and required sub-group size, or, for sources
//! compiled with fixed targets, the same fixed targets (seed 003). Kernel images are
//! self-contained: every function they reach is copied in, SYCL_EXTERNAL ones internalized.
//! An exported function that calls a SYCL_EXTERNAL function of another image does not copy
//! it: the call stays an import. Every other definition is internalized, and declarations
//! that pass canBeImportedFunction are recorded as imports, per image. An image holds only the
//! module-scope values its functions use (which also drops the stray string variables that
//! clang leaves behind for `__attribute__((annotate))`).

use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet};

use rspirv::dr::{Function, Instruction, Module, Operand};
use rspirv::spirv::{Decoration, LinkageType, Op, Word};
use sycl_format::aspects::{aspect_name, target_aspect};
use sycl_format::{DeviceConfig, SplitMode};

use crate::features::Features;
use crate::link::{max_id, Linked};
use crate::spec::{constants_of, SpecConstant};
use crate::vfunc::{self, VirtualSets};
use crate::symbols::{linkage_of, Linkage, Symbols};
use crate::{assemble, Error};

/// A link input as the post-link sees it: its name and the fixed targets it was compiled for.
#[derive(Debug, Clone, Default)]
pub struct Source {
    pub name: String,
    pub fixed_targets: Vec<String>,
}

pub struct PostLinkOptions<'a> {
    pub split: SplitMode,
    /// The link inputs, in the order given to [`crate::link`].
    pub sources: &'a [Source],
    pub config: &'a DeviceConfig,
    /// The unit's named specialization constants ([`crate::spec::assign_ids`]).
    pub spec_constants: &'a BTreeMap<String, SpecConstant>,
}

/// The `SYCL/device requirements` of an image.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Requirements {
    pub aspects: Vec<u32>,
    pub reqd_work_group_size: Option<[u32; 3]>,
    pub reqd_sub_group_size: Option<u32>,
    /// Aspects of the fixed targets; `Some(empty)` when the intersection came out empty.
    pub fixed_target: Option<Vec<u32>>,
}

/// One device image that the post-link produced.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PostLinkImage {
    pub kernels: Vec<String>,
    pub exported: Vec<String>,
    pub imported: Vec<String>,
    pub requirements: Requirements,
    /// The named specialization constants the image uses.
    pub spec_constants: Vec<SpecConstant>,
    /// The image's part in virtual-function sets (seed 002).
    pub virtual_functions: VirtualFunctions,
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

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PostLink {
    pub images: Vec<PostLinkImage>,
    /// The split mode applied (`auto` resolved).
    pub split: SplitMode,
    /// Diagnostics in the seed's words, one per entry (lines separated by newlines).
    pub warnings: Vec<String>,
}

/// What images are grouped by, beyond the split mode.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
enum Key {
    Fixed(Vec<String>),
    /// Used aspects, required sizes, and the virtual-function sets the entry declares it
    /// calls (so a kernel calling into a missing set cannot fail its neighbours).
    Features { aspects: BTreeSet<u32>, wg: Option<[u32; 3]>, sg: Option<u32>, sets: BTreeSet<String> },
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

pub fn post_link(linked: Linked, options: &PostLinkOptions<'_>) -> Result<PostLink, Error> {
    let Linked { module, origins } = linked;
    let symbols = Symbols::of(&module);
    let features = Features::analyze(&module);
    let vsets = VirtualSets::of(&module);
    let ic: HashSet<Word> = vsets.set_of.keys().copied().collect();
    let ic_names: HashSet<String> =
        ic.iter().filter_map(|f| symbols.linkage.get(f).map(|(n, _)| n.clone())).collect();
    let graph = CallGraph::of(&module);
    let set_aspects: BTreeMap<&str, BTreeSet<u32>> = vsets
        .members
        .iter()
        .map(|(set, members)| (set.as_str(), members.iter().flat_map(|f| features.used(*f)).collect()))
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
    let mut index: HashMap<(bool, usize, Key), usize> = HashMap::new();
    for (i, e) in entries.iter().enumerate() {
        let part = match split {
            SplitMode::PerKernel => i,
            SplitMode::PerSource => e.origin,
            SplitMode::Off | SplitMode::Auto => 0,
        };
        let slot = *index.entry((e.kernel, part, e.key.clone())).or_insert_with(|| {
            groups.push(Vec::new());
            groups.len() - 1
        });
        groups[slot].push(i);
    }

    let same_origin_used = features.propagate(|a, b| origin(a) == origin(b));
    let index = ModuleIndex::of(&module);
    let externals: HashSet<Word> = symbols.sycl_external.iter().copied().filter(|f| symbols.defined_functions.contains(f)).collect();
    let mut warnings = Vec::new();
    let mut images = Vec::with_capacity(groups.len());
    for group in groups {
        let members: Vec<&Entry> = group.iter().map(|&i| &entries[i]).collect();
        let kernel = members[0].kernel;
        let roots: Vec<Word> = members.iter().map(|e| e.function).collect();
        let (keep, as_imports, exports) = if kernel {
            // Self-contained, but for virtual functions: those stay declarations.
            let keep = graph.reachable(roots.iter().copied(), &ic);
            let as_imports: HashSet<Word> = keep.intersection(&ic).copied().collect();
            let keep: HashSet<Word> = keep.difference(&as_imports).copied().collect();
            (keep, as_imports, HashSet::new())
        } else {
            let own: HashSet<Word> = roots.iter().copied().collect();
            let others: HashSet<Word> = externals.difference(&own).chain(&ic).copied().collect();
            let keep = graph.reachable(roots.iter().copied(), &others);
            let as_imports: HashSet<Word> = keep.intersection(&others).copied().collect();
            let keep: HashSet<Word> = keep.difference(&as_imports).copied().collect();
            (keep, as_imports, own)
        };

        let requirements = match &members[0].key {
            Key::Features { aspects, wg, sg, .. } => {
                let mut aspects = aspects.clone();
                for e in members.iter().filter(|e| e.kernel) {
                    let mut expected = same_origin_used.get(&e.function).cloned().unwrap_or_default();
                    for d in &e.declaring {
                        expected.extend(features.declared(*d).into_iter().flatten());
                    }
                    for a in features.used(e.function).difference(&expected) {
                        let Some((path, _)) = features.chain(e.function, *a, |_, _| true) else { continue };
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
                let mut checked: Vec<Word> = keep.iter().copied().filter(|f| externals.contains(f)).collect();
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

        let image = extract(&module, &index, &keep, &as_imports, &exports);
        let mut exported: Vec<String> = members.iter().filter(|e| !e.kernel).map(|e| e.name.clone()).collect();
        exported.sort();
        let mut uses: BTreeSet<String> = as_imports.iter().filter_map(|f| vsets.set_of.get(f).cloned()).collect();
        for e in members.iter().filter(|e| e.kernel) {
            uses.extend(declared_sets(&e.declaring));
        }
        let virtual_functions = VirtualFunctions { uses: uses.into_iter().collect(), ..VirtualFunctions::default() };
        let kernels = members.iter().filter(|e| e.kernel).map(|e| e.name.clone()).collect();
        images.push(finish(image, kernels, exported, requirements, virtual_functions, options, &ic_names));
    }

    // Each virtual-function set in an image of its own, whatever the split mode; and, for a set
    // that needs optional features, a dummy with empty bodies for devices without them.
    for (set, functions) in &vsets.members {
        let own: HashSet<Word> = functions.iter().copied().collect();
        let others: HashSet<Word> = externals.iter().chain(&ic).copied().filter(|f| !own.contains(f)).collect();
        let keep = graph.reachable(functions.iter().copied(), &others);
        let as_imports: HashSet<Word> = keep.intersection(&others).copied().collect();
        let keep: HashSet<Word> = keep.difference(&as_imports).copied().collect();
        let aspects: Vec<u32> = set_aspects[set.as_str()].iter().copied().collect();
        let requirements = Requirements { aspects: aspects.clone(), ..Requirements::default() };
        let image = extract(&module, &index, &keep, &as_imports, &own);
        let vf = VirtualFunctions { set: Some(set.clone()), ..VirtualFunctions::default() };
        // Exported, so that a binary that calls into the set from elsewhere finds it; the
        // runtime links a set's image (or its dummy) by set, never by name alone.
        let mut names: Vec<String> = functions.iter().filter_map(|f| symbols.linkage.get(f).map(|(n, _)| n.clone())).collect();
        names.sort();
        images.push(finish(image, vec![], names.clone(), requirements, vf, options, &ic_names));
        if !aspects.is_empty() {
            let emptied = vfunc::with_empty_bodies(&module, functions);
            let dummy_index = ModuleIndex::of(&emptied);
            let image = extract(&emptied, &dummy_index, &own, &HashSet::new(), &own);
            let vf = VirtualFunctions { set: Some(set.clone()), dummy: true, ..VirtualFunctions::default() };
            images.push(finish(image, vec![], names, Requirements::default(), vf, options, &ic_names));
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
        let aspect = sycl_format::aspects::aspect_number("function_pointers").expect("known aspect");
        if !requirements.aspects.contains(&aspect) {
            requirements.aspects.push(aspect);
            requirements.aspects.sort_unstable();
        }
    }
    // Virtual functions are linked in by set, not resolved by name.
    let mut imported = Symbols::of(&module).imports(&module);
    imported.retain(|name| !virtual_names.contains(name));
    let spec_constants = constants_of(&module, options.spec_constants);
    PostLinkImage { kernels, exported, imported, requirements, spec_constants, virtual_functions, spirv: assemble(&module) }
}

/// Which functions each function refers to: by calling them, by taking their address, or
/// through module-scope values it uses (a table of function pointers), transitively.
struct CallGraph {
    edges: HashMap<Word, Vec<Word>>,
}

impl CallGraph {
    fn of(module: &Module) -> CallGraph {
        let functions: HashSet<Word> = module.functions.iter().filter_map(|f| f.def_id()).collect();
        let globals: HashMap<Word, &Instruction> =
            module.types_global_values.iter().filter_map(|g| Some((g.result_id?, g))).collect();
        // Functions each module-scope value leads to, memoised (values only refer to earlier
        // values, so the recursion ends).
        let mut via_global: HashMap<Word, Vec<Word>> = HashMap::new();
        fn functions_of(
            id: Word,
            globals: &HashMap<Word, &Instruction>,
            functions: &HashSet<Word>,
            memo: &mut HashMap<Word, Vec<Word>>,
        ) -> Vec<Word> {
            if let Some(known) = memo.get(&id) {
                return known.clone();
            }
            memo.insert(id, vec![]);
            let mut out = Vec::new();
            if let Some(g) = globals.get(&id) {
                for op in &g.operands {
                    if let Operand::IdRef(x) = op {
                        if functions.contains(x) {
                            out.push(*x);
                        } else if globals.contains_key(x) {
                            out.extend(functions_of(*x, globals, functions, memo));
                        }
                    }
                }
            }
            out.sort_unstable();
            out.dedup();
            memo.insert(id, out.clone());
            out
        }
        let mut edges = HashMap::new();
        for f in &module.functions {
            let Some(id) = f.def_id() else { continue };
            let mut out = Vec::new();
            for op in f.all_inst_iter().skip(1).flat_map(|i| i.operands.iter()) {
                if let Operand::IdRef(x) = op {
                    if functions.contains(x) {
                        out.push(*x);
                    } else if globals.contains_key(x) {
                        out.extend(functions_of(*x, &globals, &functions, &mut via_global));
                    }
                }
            }
            out.sort_unstable();
            out.dedup();
            edges.insert(id, out);
        }
        // An entry point's interface variables are kept with its kernel, so the functions
        // their initializers point to are reached from it even if its body never names them.
        for entry in &module.entry_points {
            let Some(Operand::IdRef(kernel)) = entry.operands.get(1) else { continue };
            let mut reached = Vec::new();
            for op in entry.operands.iter().skip(3) {
                if let Operand::IdRef(x) = op {
                    if globals.contains_key(x) {
                        reached.extend(functions_of(*x, &globals, &functions, &mut via_global));
                    }
                }
            }
            if let Some(out) = edges.get_mut(kernel) {
                out.extend(reached);
                out.sort_unstable();
                out.dedup();
            }
        }
        CallGraph { edges }
    }

    /// Functions reachable from `roots`; those in `stop` are reached but not entered.
    fn reachable(&self, roots: impl IntoIterator<Item = Word>, stop: &HashSet<Word>) -> HashSet<Word> {
        let mut seen = HashSet::new();
        let mut stack: Vec<Word> = roots.into_iter().collect();
        while let Some(f) = stack.pop() {
            if seen.insert(f) && !stop.contains(&f) {
                stack.extend(self.edges.get(&f).into_iter().flatten().copied());
            }
        }
        seen
    }
}

/// Where things are in the linked module, computed once so that each image is built in time
/// proportional to its own size rather than the module's.
struct ModuleIndex {
    /// Function id → position in `module.functions`.
    functions: HashMap<Word, usize>,
    /// Module-scope value id → position in `types_global_values`.
    globals: HashMap<Word, usize>,
    /// Target id → positions in `annotations` / `debug_names`.
    annotations: HashMap<Word, Vec<usize>>,
    names: HashMap<Word, Vec<usize>>,
    /// Annotations that target no id (decoration groups and the like): kept everywhere.
    other_annotations: Vec<usize>,
}

impl ModuleIndex {
    fn of(module: &Module) -> ModuleIndex {
        let functions = module.functions.iter().enumerate().filter_map(|(i, f)| Some((f.def_id()?, i))).collect();
        let globals = module.types_global_values.iter().enumerate().filter_map(|(i, g)| Some((g.result_id?, i))).collect();
        let mut annotations: HashMap<Word, Vec<usize>> = HashMap::new();
        let mut other_annotations = Vec::new();
        for (i, a) in module.annotations.iter().enumerate() {
            match (a.class.opcode, a.operands.first()) {
                (Op::Decorate | Op::MemberDecorate | Op::DecorateId | Op::DecorateString | Op::MemberDecorateString, Some(Operand::IdRef(t))) => {
                    annotations.entry(*t).or_default().push(i)
                }
                _ => other_annotations.push(i),
            }
        }
        let mut names: HashMap<Word, Vec<usize>> = HashMap::new();
        for (i, n) in module.debug_names.iter().enumerate() {
            if let Some(Operand::IdRef(t)) = n.operands.first() {
                names.entry(*t).or_default().push(i);
            }
        }
        ModuleIndex { functions, globals, annotations, names, other_annotations }
    }
}

/// An image of `module` with the definitions in `keep`, the functions in `as_imports` turned
/// into imported declarations, the entry points among them, the module-scope values they
/// use, and export linkage only on `exports` (every other definition is internalized).
fn extract(
    module: &Module,
    index: &ModuleIndex,
    keep: &HashSet<Word>,
    as_imports: &HashSet<Word>,
    exports: &HashSet<Word>,
) -> Module {
    let stub = |f: &Function| Function { def: f.def.clone(), end: f.end.clone(), parameters: f.parameters.clone(), blocks: vec![] };
    let mut positions: Vec<usize> = keep.iter().chain(as_imports).filter_map(|f| index.functions.get(f).copied()).collect();
    positions.sort_unstable();
    positions.dedup();
    let mut functions: Vec<Function> = positions
        .iter()
        .map(|&i| {
            let f = &module.functions[i];
            if f.def_id().is_some_and(|id| as_imports.contains(&id)) {
                stub(f)
            } else {
                f.clone()
            }
        })
        .collect();

    // Ids present in the image: those the functions define, and the module-scope values they
    // use, closed over what those values use in turn.
    let mut present: HashSet<Word> = HashSet::new();
    let mut pending: Vec<Word> = Vec::new();
    let uses = |inst: &Instruction, pending: &mut Vec<Word>| {
        pending.extend(inst.result_type);
        for op in &inst.operands {
            if let Operand::IdRef(id) | Operand::IdScope(id) | Operand::IdMemorySemantics(id) = op {
                pending.push(*id);
            }
        }
    };
    for f in &functions {
        for inst in f.all_inst_iter() {
            present.extend(inst.result_id);
            uses(inst, &mut pending);
        }
    }
    let entry_points: Vec<Instruction> = module
        .entry_points
        .iter()
        .filter(|e| matches!(e.operands.get(1), Some(Operand::IdRef(id)) if keep.contains(id)))
        .cloned()
        .collect();
    for e in &entry_points {
        uses(e, &mut pending);
    }
    let mut globals: Vec<usize> = Vec::new();
    while let Some(id) = pending.pop() {
        if let Some(&g) = index.globals.get(&id) {
            if present.insert(id) {
                globals.push(g);
                uses(&module.types_global_values[g], &mut pending);
            }
        }
    }
    globals.sort_unstable();

    let targeted = |map: &HashMap<Word, Vec<usize>>| -> Vec<usize> {
        let mut out: Vec<usize> = present.iter().filter_map(|id| map.get(id)).flatten().copied().collect();
        out.sort_unstable();
        out
    };
    let mut annotation_positions = targeted(&index.annotations);
    annotation_positions.extend(&index.other_annotations);
    annotation_positions.sort_unstable();
    let mut annotations = Vec::with_capacity(annotation_positions.len());
    for i in annotation_positions {
        let mut a = module.annotations[i].clone();
        match linkage_of(&a) {
            Some((id, _, _)) if as_imports.contains(&id) => a.operands[3] = Operand::LinkageType(LinkageType::Import),
            Some((id, _, Linkage::Export | Linkage::LinkOnceOdr)) if !exports.contains(&id) => continue,
            _ => {}
        }
        // Our own markers (`sycl-external`, `sycl-device-has:…`) have served once the post-link
        // has read them; left in, they come back from SPIR-V as `llvm.global.annotations`
        // referring to the kernel, which PoCL's kernel compiler aborts on.
        if matches!(a.operands.as_slice(), [_, Operand::Decoration(Decoration::UserSemantic), Operand::LiteralString(s)] if s.starts_with("sycl-")) {
            continue;
        }
        annotations.push(a);
    }

    // SPIR-V's layout: every declaration before the first definition.
    functions.sort_by_key(|f| !f.blocks.is_empty());
    Module {
        header: module.header.clone(),
        capabilities: module.capabilities.clone(),
        extensions: module.extensions.clone(),
        ext_inst_imports: module.ext_inst_imports.clone(),
        memory_model: module.memory_model.clone(),
        execution_modes: module
            .execution_modes
            .iter()
            .filter(|m| matches!(m.operands.first(), Some(Operand::IdRef(id)) if keep.contains(id)))
            .cloned()
            .collect(),
        entry_points,
        debug_string_source: module.debug_string_source.clone(),
        debug_names: targeted(&index.names).into_iter().map(|i| module.debug_names[i].clone()).collect(),
        debug_module_processed: module.debug_module_processed.clone(),
        annotations,
        types_global_values: globals.into_iter().map(|g| module.types_global_values[g].clone()).collect(),
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
        let mut b = Builder::new();
        b.capability(spirv::Capability::Kernel);
        b.capability(spirv::Capability::Linkage);
        b.memory_model(spirv::AddressingModel::Physical64, spirv::MemoryModel::OpenCL);
        let void = b.type_void();
        let int = b.type_int(32, 0);
        let void_fn = b.type_function(void, vec![]);
        let int_fn = b.type_function(int, vec![int]);
        let link = |b: &mut Builder, id, name: &str, kind| {
            b.decorate(id, Decoration::LinkageAttributes, vec![Operand::LiteralString(name.into()), Operand::LinkageType(kind)])
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
        b.decorate(f, Decoration::UserSemantic, vec![Operand::LiteralString("sycl-external".into())]);

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
        assert!(symbols.linkage.values().all(|(name, kind)| name == "g" && *kind == Linkage::Import));

        assert!(exports.kernels.is_empty());
        assert_eq!(exports.exported, ["f"]);
        assert_eq!(exports.imported, ["g"]);
        let module = load(&exports.spirv).unwrap();
        let symbols = Symbols::of(&module);
        let names: Vec<&str> = symbols.linkage.values().map(|(n, _)| n.as_str()).collect();
        assert!(!names.contains(&"h"), "h is neither SYCL_EXTERNAL nor reachable: dropped");
    }

    #[test]
    fn post_link_is_deterministic() {
        for split in [SplitMode::PerKernel, SplitMode::PerSource, SplitMode::Off, SplitMode::Auto] {
            assert_eq!(run(unit(), split), run(unit(), split));
        }
    }

    #[test]
    fn a_unit_without_kernels_or_exports_gives_no_image() {
        let mut m = unit();
        m.entry_points.clear();
        m.annotations.retain(|a| !matches!(a.operands.get(1), Some(Operand::Decoration(Decoration::UserSemantic))));
        assert!(run(m, SplitMode::Auto).images.is_empty());
    }
}
