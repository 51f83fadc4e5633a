//! Post-link: from one link unit's linked module to device images with their symbol lists.
//!
//! The seed's rules: entry points are kernels and SYCL_EXTERNAL functions; SYCL_EXTERNAL
//! definitions are exported; every other function is internalized (kernels too: only host
//! code calls them); declarations that pass canBeImportedFunction are recorded as imports.

use std::collections::HashSet;

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

/// Turns a link unit's linked module into device images. A unit with neither kernels nor
/// exports gives none.
pub fn post_link(mut module: Module) -> Result<Vec<PostLinkImage>, Error> {
    let symbols = Symbols::of(&module);
    let exported = symbols.exports();
    let kernels: Vec<String> = symbols.kernels.iter().map(|(name, _)| name.clone()).collect();
    if kernels.is_empty() && exported.is_empty() {
        return Ok(vec![]);
    }
    let keep: HashSet<Word> = exported.iter().map(|(_, id)| *id).collect();
    internalize(&mut module, &keep);
    remove_dead_string_globals(&mut module);
    let imported = symbols.imports(&module);
    let bound = max_id(&module) + 1;
    if let Some(header) = &mut module.header {
        header.bound = bound;
    }
    Ok(vec![PostLinkImage {
        kernels,
        exported: exported.into_iter().map(|(name, _)| name).collect(),
        imported,
        spirv: assemble(&module),
    }])
}

/// Drops the export linkage of every definition not in `keep`.
fn internalize(module: &mut Module, keep: &HashSet<Word>) {
    module.annotations.retain(|a| match linkage_of(a) {
        Some((id, _, Linkage::Export | Linkage::LinkOnceOdr)) => keep.contains(&id),
        _ => true,
    });
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
