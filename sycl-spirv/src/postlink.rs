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

    #[test]
    fn kernel_images_are_self_contained_and_export_nothing() {
        let images = post_link(unit()).unwrap();
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
        assert_eq!(post_link(unit()).unwrap(), post_link(unit()).unwrap());
    }

    #[test]
    fn a_unit_without_kernels_or_exports_gives_no_image() {
        let mut m = unit();
        m.entry_points.clear();
        m.annotations.retain(|a| !matches!(a.operands.get(1), Some(Operand::Decoration(Decoration::UserSemantic))));
        assert!(post_link(m).unwrap().is_empty());
    }
}
