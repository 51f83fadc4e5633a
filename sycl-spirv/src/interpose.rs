//! Interposition: an image's own definitions of symbols that another binary's image provides
//! first in loader order made imports, so that every call, the image's own included, reaches
//! the winning definition (as the host's loader binds an interposable function).

use std::collections::HashSet;

use rspirv::dr::{Module, Operand};
use rspirv::spirv::{LinkageType, Op, Word};

use crate::symbols::{linkage_of, Linkage};

/// Makes each function of `module` that is exported under one of `names` an import: its body
/// dropped (with the names and decorations of what the body defined), its linkage `Import`,
/// the declaration moved before every definition as SPIR-V's layout asks. Returns how many
/// functions changed; names the module does not export are left alone.
pub fn import_definitions(module: &mut Module, names: &[&str]) -> usize {
    let targets: HashSet<Word> = module
        .annotations
        .iter()
        .filter_map(linkage_of)
        .filter(|(_, name, kind)| *kind == Linkage::Export && names.contains(name))
        .map(|(id, _, _)| id)
        .collect();
    if targets.is_empty() {
        return 0;
    }
    let mut dropped: HashSet<Word> = HashSet::new();
    let mut declarations = Vec::new();
    let mut rest = Vec::with_capacity(module.functions.len());
    for mut f in std::mem::take(&mut module.functions) {
        let id = f.def.as_ref().and_then(|d| d.result_id);
        if id.is_some_and(|id| targets.contains(&id)) && !f.blocks.is_empty() {
            for block in f.blocks.drain(..) {
                dropped.extend(block.label.as_ref().and_then(|l| l.result_id));
                dropped.extend(block.instructions.iter().filter_map(|i| i.result_id));
            }
            declarations.push(f);
        } else if f.blocks.is_empty() {
            declarations.push(f);
        } else {
            rest.push(f);
        }
    }
    let changed = targets.len();
    module.functions = declarations;
    module.functions.extend(rest);
    for a in &mut module.annotations {
        if let Some((id, _, Linkage::Export)) = linkage_of(a) {
            if targets.contains(&id) {
                a.operands[3] = Operand::LinkageType(LinkageType::Import);
            }
        }
    }
    let names_dropped = |i: &rspirv::dr::Instruction| !matches!(i.operands.first(), Some(Operand::IdRef(id)) if dropped.contains(id));
    module.annotations.retain(names_dropped);
    module.debug_names.retain(|i| i.class.opcode != Op::Name || names_dropped(i));
    changed
}

#[cfg(test)]
mod tests {
    use rspirv::dr::Operand;
    use rspirv::spirv::{self, Decoration, LinkageType};

    use super::import_definitions;
    use crate::{assemble, load, Linkage, Symbols};

    /// A module exporting `shared` and `user`, which calls `shared`, as a library of device
    /// functions is after post-link.
    fn library() -> rspirv::dr::Module {
        let mut b = crate::test_support::kernel_builder(&[
            spirv::Capability::Addresses,
            spirv::Capability::Linkage,
        ]);
        let int = b.type_int(32, 0);
        let int_fn = b.type_function(int, vec![int]);
        let shared = b.begin_function(int, None, spirv::FunctionControl::NONE, int_fn).unwrap();
        let x = b.function_parameter(int).unwrap();
        b.begin_block(None).unwrap();
        let y = b.i_add(int, None, x, x).unwrap();
        b.name(y, "doubled");
        b.ret_value(y).unwrap();
        b.end_function().unwrap();
        let user = b.begin_function(int, None, spirv::FunctionControl::NONE, int_fn).unwrap();
        let x = b.function_parameter(int).unwrap();
        b.begin_block(None).unwrap();
        let y = b.function_call(int, None, shared, vec![x]).unwrap();
        b.ret_value(y).unwrap();
        b.end_function().unwrap();
        for (target, name) in [(shared, "shared"), (user, "user")] {
            b.decorate(
                target,
                Decoration::LinkageAttributes,
                vec![
                    Operand::LiteralString(name.into()),
                    Operand::LinkageType(LinkageType::Export),
                ],
            );
        }
        b.module()
    }

    #[test]
    fn a_definition_another_binary_wins_becomes_an_import_its_callers_keep_calling() {
        let mut module = library();
        assert_eq!(import_definitions(&mut module, &["shared", "absent"]), 1);
        let module = load(&assemble(&module)).expect("valid after the rewrite");
        let symbols = Symbols::of(&module);
        let kinds: Vec<(&str, Linkage)> = {
            let mut k: Vec<_> = symbols.linkage.values().map(|(n, l)| (n.as_str(), *l)).collect();
            k.sort_by_key(|(n, _)| *n);
            k
        };
        assert_eq!(kinds, [("shared", Linkage::Import), ("user", Linkage::Export)]);
        assert_eq!(symbols.defined_functions.len(), 1, "only `user` keeps a body");
        assert!(module.functions[0].blocks.is_empty(), "the declaration comes first");
        assert_eq!(symbols.imports(&module), ["shared"]);
        assert!(module.debug_names.is_empty(), "no name of a dropped value is left");
    }

    #[test]
    fn nothing_changes_for_names_the_module_does_not_export() {
        let mut module = library();
        let before = assemble(&module);
        assert_eq!(import_definitions(&mut module, &["elsewhere"]), 0);
        assert_eq!(assemble(&module), before);
    }
}
