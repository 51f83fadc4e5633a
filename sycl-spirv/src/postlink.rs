//! Post-link: from one link unit's linked module to device images with their symbol lists.
//!
//! The seed's rules: entry points are kernels and SYCL_EXTERNAL functions; SYCL_EXTERNAL
//! definitions are exported, from images without kernels only; every other function is
//! internalized (kernels too: only host code calls them); declarations that pass
//! canBeImportedFunction are recorded as imports, per image.

use std::collections::{HashMap, HashSet};

use rspirv::dr::{Module, Operand};
use rspirv::spirv::{Op, StorageClass, Word};

use crate::link::max_id;
use crate::symbols::{linkage_of, Linkage, Symbols};
use crate::{assemble, Error};

/// One device image that the post-link produced.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PostLinkImage {
    pub kernels: Vec<String>,
    pub exported: Vec<String>,
    pub imported: Vec<String>,
    pub spirv: Vec<u8>,
}

/// Turns a link unit's linked module into device images: one per kernel, holding the kernel
/// and every function it reaches (SYCL_EXTERNAL ones copied in and internalized, so kernel
/// images are self-contained), and one holding the SYCL_EXTERNAL functions, which alone
/// exports them. A unit with neither kernels nor exports gives none.
pub fn post_link(mut module: Module) -> Result<Vec<PostLinkImage>, Error> {
    remove_dead_string_globals(&mut module);
    let symbols = Symbols::of(&module);
    let exported = symbols.exports();
    let graph = CallGraph::of(&module);

    let mut images = Vec::new();
    for (name, entry) in &symbols.kernels {
        let functions = graph.reachable([*entry]);
        let image = extract(&module, &functions, &HashSet::new());
        images.push(finish(image, vec![name.clone()], vec![]));
    }
    if !exported.is_empty() {
        let exports: HashSet<Word> = exported.iter().map(|(_, id)| *id).collect();
        let functions = graph.reachable(exports.iter().copied());
        let image = extract(&module, &functions, &exports);
        images.push(finish(image, vec![], exported.into_iter().map(|(name, _)| name).collect()));
    }
    Ok(images)
}

fn finish(mut module: Module, kernels: Vec<String>, exported: Vec<String>) -> PostLinkImage {
    let bound = max_id(&module) + 1;
    if let Some(header) = &mut module.header {
        header.bound = bound;
    }
    let imported = Symbols::of(&module).imports(&module);
    PostLinkImage { kernels, exported, imported, spirv: assemble(&module) }
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

    fn reachable(&self, roots: impl IntoIterator<Item = Word>) -> HashSet<Word> {
        let mut seen = HashSet::new();
        let mut stack: Vec<Word> = roots.into_iter().chain(self.from_globals.iter().copied()).collect();
        while let Some(f) = stack.pop() {
            if seen.insert(f) {
                stack.extend(self.edges.get(&f).into_iter().flatten().copied());
            }
        }
        seen
    }
}

/// A copy of `module` with only `functions`, the entry points among them, and export
/// linkage only on `exports` (everything else defined is internalized).
fn extract(module: &Module, functions: &HashSet<Word>, exports: &HashSet<Word>) -> Module {
    let mut out = module.clone();
    let mut gone: HashSet<Word> = HashSet::new();
    out.functions.retain(|f| {
        let keep = f.def_id().is_some_and(|id| functions.contains(&id));
        if !keep {
            gone.extend(f.all_inst_iter().filter_map(|i| i.result_id));
        }
        keep
    });
    let targets_gone = |i: &rspirv::dr::Instruction| match i.operands.first() {
        Some(Operand::IdRef(id)) => gone.contains(id),
        _ => false,
    };
    out.entry_points.retain(|e| !matches!(e.operands.get(1), Some(Operand::IdRef(id)) if gone.contains(id)));
    out.execution_modes.retain(|i| !targets_gone(i));
    out.debug_names.retain(|i| !targets_gone(i));
    out.annotations.retain(|a| {
        !targets_gone(a)
            && match linkage_of(a) {
                Some((id, _, Linkage::Export | Linkage::LinkOnceOdr)) => exports.contains(&id),
                _ => true,
            }
    });
    out
}

/// clang leaves the strings of `__attribute__((annotate))` behind as unused module-scope
/// variables in the Function storage class, which SPIR-V does not allow there; the runtimes
/// tolerate them, validators do not, and nothing refers to them.
fn remove_dead_string_globals(module: &mut Module) {
    let dead: HashSet<Word> = module
        .types_global_values
        .iter()
        .filter(|i| {
            i.class.opcode == Op::Variable
                && matches!(i.operands.first(), Some(Operand::StorageClass(StorageClass::Function)))
        })
        .filter_map(|i| i.result_id)
        .collect();
    if dead.is_empty() {
        return;
    }
    let mut used = HashSet::new();
    for inst in module.all_inst_iter() {
        if matches!(inst.class.opcode, Op::Name | Op::Decorate | Op::DecorateString) {
            continue;
        }
        for op in &inst.operands {
            if let Operand::IdRef(id) = op {
                if dead.contains(id) {
                    used.insert(*id);
                }
            }
        }
    }
    let unused = |id: &Word| dead.contains(id) && !used.contains(id);
    module.types_global_values.retain(|i| !i.result_id.is_some_and(|id| unused(&id)));
    let targets_unused = |i: &rspirv::dr::Instruction| {
        matches!(i.operands.first(), Some(Operand::IdRef(id)) if unused(id))
    };
    module.debug_names.retain(|i| !targets_unused(i));
    module.annotations.retain(|i| !targets_unused(i));
}
