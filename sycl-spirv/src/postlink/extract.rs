//! One image's module cut from the linked module: the functions, module-scope values, names
//! and decorations its contents ([`Contents`]) hold, in the linked module's order, with export
//! linkage only on what the image exports.

use std::collections::{HashMap, HashSet};

use rspirv::dr::{Function, Instruction, Module, Operand};
use rspirv::spirv::{Decoration, LinkageType, Op, Word};

use super::module_index::{Contents, ModuleIndex};
use crate::symbols::{linkage_of, Linkage};

/// An image of `module` holding `contents`, its entry points among them, and export linkage
/// only on `exports` (every other definition is internalized).
pub(super) fn extract(
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

    let annotations = annotations(module, index, contents, exports, &present);
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
        debug_names: targeted(&index.names, &present)
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

/// The positions in `map` of what targets an id in `present`, in order, without repeats.
fn targeted(map: &HashMap<Word, Vec<usize>>, present: &HashSet<Word>) -> Vec<usize> {
    let mut out: Vec<usize> =
        present.iter().filter_map(|id| map.get(id)).flatten().copied().collect();
    out.sort_unstable();
    out.dedup();
    out
}

/// The image's annotations: those of the ids it holds (`present`), a declared function's
/// linkage made `Import`, an export's dropped unless it is in `exports`, our own markers
/// dropped, and each group applied only to the ids the image holds.
fn annotations(
    module: &Module,
    index: &ModuleIndex,
    contents: &Contents,
    exports: &HashSet<Word>,
    present: &HashSet<Word>,
) -> Vec<Instruction> {
    let mut annotations = Vec::new();
    for i in targeted(&index.annotations, present) {
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
    annotations
}
