//! Sub-group barriers made calls to a named function, for a target whose translation would
//! lose their scope. `llvm-spirv -r --spirv-target-env=CL1.2` writes every `OpControlBarrier`
//! as OpenCL 1.2's `barrier`, a work-group barrier, which hangs where only some sub-groups of a
//! work-group reach it; a call keeps the difference, and the target defines the function.

use std::collections::HashMap;

use rspirv::dr::{Function, Instruction, Module, Operand};
use rspirv::spirv::{Capability, Decoration, FunctionControl, LinkageType, Op, Scope, Word};

/// Replaces every `OpControlBarrier` whose execution scope is `Subgroup` with a call to a
/// function `name` (`void()`), declared with import linkage; returns how many it replaced.
pub fn sub_group_barriers_to_calls(module: &mut Module, name: &str) -> usize {
    let constants: HashMap<Word, u32> = module
        .types_global_values
        .iter()
        .filter(|i| i.class.opcode == Op::Constant)
        .filter_map(|i| match i.operands.as_slice() {
            [Operand::LiteralBit32(v)] => Some((i.result_id?, *v)),
            _ => None,
        })
        .collect();
    let is_sub_group_barrier = |i: &Instruction| {
        i.class.opcode == Op::ControlBarrier
            && matches!(i.operands.first(), Some(Operand::IdScope(scope) | Operand::IdRef(scope))
                if constants.get(scope) == Some(&(Scope::Subgroup as u32)))
    };
    let count: usize = module
        .functions
        .iter()
        .flat_map(|f| &f.blocks)
        .map(|b| b.instructions.iter().filter(|i| is_sub_group_barrier(i)).count())
        .sum();
    if count == 0 {
        return 0;
    }
    let mut next = crate::link::next_id(module);
    let mut fresh = || {
        next += 1;
        next - 1
    };
    let (void, signature) = void_function_type(module, &mut fresh);
    let function = fresh();
    for f in &mut module.functions {
        for block in &mut f.blocks {
            for inst in &mut block.instructions {
                if is_sub_group_barrier(inst) {
                    let call = fresh();
                    *inst = Instruction::new(
                        Op::FunctionCall,
                        Some(void),
                        Some(call),
                        vec![Operand::IdRef(function)],
                    );
                }
            }
        }
    }
    declare_import(module, function, void, signature, name);
    if let Some(h) = &mut module.header {
        h.bound = next;
    }
    count
}

/// The module's `void` type and `void()` function type, each made where the module has none.
fn void_function_type(module: &mut Module, fresh: &mut impl FnMut() -> Word) -> (Word, Word) {
    let void = match module
        .types_global_values
        .iter()
        .find(|i| i.class.opcode == Op::TypeVoid)
        .and_then(|i| i.result_id)
    {
        Some(id) => id,
        None => {
            let id = fresh();
            module
                .types_global_values
                .insert(0, Instruction::new(Op::TypeVoid, None, Some(id), vec![]));
            id
        }
    };
    let signature = module
        .types_global_values
        .iter()
        .find(|i| i.class.opcode == Op::TypeFunction && i.operands == [Operand::IdRef(void)])
        .and_then(|i| i.result_id);
    let signature = signature.unwrap_or_else(|| {
        let id = fresh();
        let at = module
            .types_global_values
            .iter()
            .position(|i| i.result_id == Some(void))
            .map_or(0, |p| p + 1);
        module.types_global_values.insert(
            at,
            Instruction::new(Op::TypeFunction, None, Some(id), vec![Operand::IdRef(void)]),
        );
        id
    });
    (void, signature)
}

/// Declares `function` (`void()`, of type `signature`) as the import `name`: its declaration
/// first among the functions, its linkage, its name, and the `Linkage` capability.
fn declare_import(module: &mut Module, function: Word, void: Word, signature: Word, name: &str) {
    // Declarations come before definitions.
    module.functions.insert(
        0,
        Function {
            def: Some(Instruction::new(
                Op::Function,
                Some(void),
                Some(function),
                vec![Operand::FunctionControl(FunctionControl::NONE), Operand::IdRef(signature)],
            )),
            end: Some(Instruction::new(Op::FunctionEnd, None, None, vec![])),
            parameters: vec![],
            blocks: vec![],
        },
    );
    module.annotations.push(Instruction::new(
        Op::Decorate,
        None,
        None,
        vec![
            Operand::IdRef(function),
            Operand::Decoration(Decoration::LinkageAttributes),
            Operand::LiteralString(name.to_string()),
            Operand::LinkageType(LinkageType::Import),
        ],
    ));
    module.debug_names.push(Instruction::new(
        Op::Name,
        None,
        None,
        vec![Operand::IdRef(function), Operand::LiteralString(name.to_string())],
    ));
    let has_linkage = module
        .capabilities
        .iter()
        .any(|c| c.operands == [Operand::Capability(Capability::Linkage)]);
    if !has_linkage {
        module.capabilities.push(Instruction::new(
            Op::Capability,
            None,
            None,
            vec![Operand::Capability(Capability::Linkage)],
        ));
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rspirv::spirv::{ExecutionModel, MemorySemantics};

    #[test]
    fn only_sub_group_barriers_become_calls() {
        let mut b = crate::test_support::kernel_builder(&[Capability::Addresses]);
        let void = b.type_void();
        let uint = b.type_int(32, 0);
        let fn_ty = b.type_function(void, vec![]);
        let work_group = b.constant_bit32(uint, Scope::Workgroup as u32);
        let sub_group = b.constant_bit32(uint, Scope::Subgroup as u32);
        let semantics = b.constant_bit32(
            uint,
            (MemorySemantics::SEQUENTIALLY_CONSISTENT | MemorySemantics::WORKGROUP_MEMORY).bits(),
        );
        let kernel = b.begin_function(void, None, FunctionControl::NONE, fn_ty).unwrap();
        b.begin_block(None).unwrap();
        b.control_barrier(sub_group, sub_group, semantics).unwrap();
        b.control_barrier(work_group, work_group, semantics).unwrap();
        b.control_barrier(sub_group, sub_group, semantics).unwrap();
        b.ret().unwrap();
        b.end_function().unwrap();
        b.entry_point(ExecutionModel::Kernel, kernel, "k", vec![]);
        let mut module = b.module();

        assert_eq!(sub_group_barriers_to_calls(&mut module, "sg_barrier"), 2);
        let reloaded = crate::load(&crate::assemble(&module)).unwrap();
        let symbols = crate::Symbols::of(&reloaded);
        assert_eq!(symbols.declared_functions(&reloaded), ["sg_barrier"]);
        let body: Vec<Op> =
            reloaded.functions[1].blocks[0].instructions.iter().map(|i| i.class.opcode).collect();
        assert_eq!(body, [Op::FunctionCall, Op::ControlBarrier, Op::FunctionCall, Op::Return]);
        assert_eq!(
            sub_group_barriers_to_calls(&mut module, "sg_barrier"),
            0,
            "nothing left to replace"
        );
    }
}
