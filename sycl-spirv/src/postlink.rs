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
    pub spirv: Vec<u8>,
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
    Features { aspects: BTreeSet<u32>, wg: Option<[u32; 3]>, sg: Option<u32> },
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
    let graph = CallGraph::of(&module);
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
        entries.push((name, id, false, vec![id]));
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
                Key::Features {
                    aspects,
                    wg: features.reqd_work_group_size.get(&function).copied(),
                    sg: features.reqd_sub_group_size.get(&function).copied(),
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
            (graph.reachable(roots.iter().copied(), &HashSet::new()), HashSet::new(), HashSet::new())
        } else {
            let own: HashSet<Word> = roots.iter().copied().collect();
            let others: HashSet<Word> = externals.difference(&own).copied().collect();
            let keep = graph.reachable(roots.iter().copied(), &others);
            let as_imports: HashSet<Word> = keep.intersection(&others).copied().collect();
            let keep: HashSet<Word> = keep.difference(&as_imports).copied().collect();
            (keep, as_imports, own)
        };

        let requirements = match &members[0].key {
            Key::Features { aspects, wg, sg } => {
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
        let spec_constants = constants_of(&image, options.spec_constants);
        images.push(finish(
            image,
            members.iter().filter(|e| e.kernel).map(|e| e.name.clone()).collect(),
            exported,
            requirements,
            spec_constants,
        ));
    }
    Ok(PostLink { images, split, warnings })
}

fn finish(
    mut module: Module,
    kernels: Vec<String>,
    exported: Vec<String>,
    requirements: Requirements,
    spec_constants: Vec<SpecConstant>,
) -> PostLinkImage {
    let bound = max_id(&module) + 1;
    if let Some(header) = &mut module.header {
        header.bound = bound;
    }
    let imported = Symbols::of(&module).imports(&module);
    PostLinkImage { kernels, exported, imported, requirements, spec_constants, spirv: assemble(&module) }
}

/// Which functions each function refers to (calls, or takes the address of), plus the
/// functions that module-scope values refer to (function-pointer constants), which every
/// image keeps so that no constant refers to a function that is gone.
struct CallGraph {
    edges: HashMap<Word, Vec<Word>>,
    from_globals: Vec<Word>,
}

impl CallGraph {
    fn of(module: &Module) -> CallGraph {
        let functions: HashSet<Word> = module.functions.iter().filter_map(|f| f.def_id()).collect();
        let refs = |insts: &mut dyn Iterator<Item = &rspirv::dr::Instruction>| -> Vec<Word> {
            let mut out: Vec<Word> = insts
                .flat_map(|i| i.operands.iter())
                .filter_map(|op| match op {
                    Operand::IdRef(id) if functions.contains(id) => Some(*id),
                    _ => None,
                })
                .collect();
            out.sort_unstable();
            out.dedup();
            out
        };
        let edges = module
            .functions
            .iter()
            .filter_map(|f| Some((f.def_id()?, refs(&mut f.all_inst_iter().skip(1)))))
            .collect();
        let from_globals = refs(&mut module.types_global_values.iter());
        CallGraph { edges, from_globals }
    }

    /// Functions reachable from `roots`; those in `stop` are reached but not entered.
    fn reachable(&self, roots: impl IntoIterator<Item = Word>, stop: &HashSet<Word>) -> HashSet<Word> {
        let mut seen = HashSet::new();
        let mut stack: Vec<Word> = roots.into_iter().chain(self.from_globals.iter().copied()).collect();
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
    let mut positions: Vec<usize> = keep.iter().chain(as_imports).filter_map(|f| index.functions.get(f).copied()).collect();
    positions.sort_unstable();
    positions.dedup();
    let functions: Vec<Function> = positions
        .iter()
        .map(|&i| {
            let f = &module.functions[i];
            if f.def_id().is_some_and(|id| as_imports.contains(&id)) {
                Function { def: f.def.clone(), end: f.end.clone(), parameters: f.parameters.clone(), blocks: vec![] }
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
