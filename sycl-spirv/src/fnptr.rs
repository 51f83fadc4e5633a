//! Calls through function pointers, lowered to direct calls, for devices whose compilers
//! cannot take them: PoCL 3.1's kernel compiler leaves out functions that only a pointer
//! refers to, and aborts.
//!
//! Run on a whole program (every image a kernel needs, linked into one module), where every
//! function whose address is taken is in sight. Each such function gets a number, from 1 (0
//! stays the null pointer); function-pointer values become 64-bit integers holding it, so
//! tables of pointers, selects between them and pointers passed to other functions only move
//! numbers; and each `OpFunctionPointerCallINTEL` becomes a switch on the number with a direct
//! call in each case, over the address-taken functions of the pointer's function type. A
//! number no case knows (a null or corrupted pointer) gives an undefined result, as the call
//! would have.

use std::collections::{HashMap, HashSet};

use rspirv::dr::{Block, Instruction, Module, Operand};
use rspirv::spirv::{Capability, Decoration, Op, Word};

use crate::Error;

/// Lowers every function pointer of `module` (see the module's documentation). Returns
/// whether there was anything to lower; a module without function pointers is unchanged.
pub fn lower_function_pointers(module: &mut Module) -> Result<bool, Error> {
    let function_types: HashSet<Word> = module
        .types_global_values
        .iter()
        .filter(|i| i.class.opcode == Op::TypeFunction)
        .filter_map(|i| i.result_id)
        .collect();
    // Pointer type → the function type it points to.
    let pointers: HashMap<Word, Word> = module
        .types_global_values
        .iter()
        .filter(|i| i.class.opcode == Op::TypePointer)
        .filter_map(|i| match i.operands.get(1) {
            Some(Operand::IdRef(to)) if function_types.contains(to) => Some((i.result_id?, *to)),
            _ => None,
        })
        .collect();
    let uses_pointers = module.all_inst_iter().any(|i| {
        matches!(i.class.opcode, Op::ConstantFunctionPointerINTEL | Op::FunctionPointerCallINTEL)
            || i.result_type.is_some_and(|t| pointers.contains_key(&t))
    });
    if !uses_pointers {
        return Ok(false);
    }
    let mut lowering = Lowering::new(module, pointers);
    lowering.module_scope(module)?;
    for f in 0..module.functions.len() {
        lowering.function(module, f)?;
    }
    lowering.finish(module);
    Ok(true)
}

struct Lowering {
    /// Function-pointer type → its function type.
    pointers: HashMap<Word, Word>,
    /// The type of every value, as it was before lowering.
    types: HashMap<Word, Word>,
    /// Address-taken function → its number, and function → its function type.
    numbers: HashMap<Word, u64>,
    function_type: HashMap<Word, Word>,
    /// Ids that now mean another id (a cast between pointer types that are both numbers now).
    alias: HashMap<Word, Word>,
    /// Ids whose definition is gone: their names and decorations go too.
    removed: HashSet<Word>,
    /// `OpUndef` of each return type, for the switch's default case.
    undef: HashMap<Word, Word>,
    /// Module-scope instructions to add: constants moved out of functions, undefined values.
    added: Vec<Instruction>,
    int64: Word,
    void: Option<Word>,
    next: Word,
}

impl Lowering {
    fn new(module: &mut Module, pointers: HashMap<Word, Word>) -> Lowering {
        let mut next = crate::link::next_id(module);
        // A 64-bit integer type ahead of every other declaration, so that whatever used a
        // pointer type can use it instead.
        let is_int64 = |i: &Instruction| {
            i.class.opcode == Op::TypeInt
                && matches!(
                    i.operands.as_slice(),
                    [Operand::LiteralBit32(64), Operand::LiteralBit32(0)]
                )
        };
        let int64 = match module.types_global_values.iter().position(is_int64) {
            Some(at) => {
                let inst = module.types_global_values.remove(at);
                let id = inst.result_id.expect("OpTypeInt has a result");
                module.types_global_values.insert(0, inst);
                id
            }
            None => {
                let id = next;
                next += 1;
                let operands = vec![Operand::LiteralBit32(64), Operand::LiteralBit32(0)];
                module
                    .types_global_values
                    .insert(0, Instruction::new(Op::TypeInt, None, Some(id), operands));
                if !module.capabilities.iter().any(|c| {
                    matches!(c.operands.first(), Some(Operand::Capability(Capability::Int64)))
                }) {
                    module.capabilities.push(Instruction::new(
                        Op::Capability,
                        None,
                        None,
                        vec![Operand::Capability(Capability::Int64)],
                    ));
                }
                id
            }
        };
        let void = module
            .types_global_values
            .iter()
            .find(|i| i.class.opcode == Op::TypeVoid)
            .and_then(|i| i.result_id);
        let types =
            module.all_inst_iter().filter_map(|i| Some((i.result_id?, i.result_type?))).collect();
        let function_type = module
            .functions
            .iter()
            .filter_map(|f| {
                let def = f.def.as_ref()?;
                match def.operands.get(1) {
                    Some(Operand::IdRef(t)) => Some((def.result_id?, *t)),
                    _ => None,
                }
            })
            .collect();
        // Numbers in the order the addresses are first taken: the same module, the same numbers.
        let mut numbers = HashMap::new();
        for inst in
            module.all_inst_iter().filter(|i| i.class.opcode == Op::ConstantFunctionPointerINTEL)
        {
            if let Some(Operand::IdRef(f)) = inst.operands.first() {
                let n = numbers.len() as u64 + 1;
                numbers.entry(*f).or_insert(n);
            }
        }
        let mut alias = HashMap::new();
        for &pointer in pointers.keys() {
            alias.insert(pointer, int64);
        }
        let removed = pointers.keys().copied().collect();
        Lowering {
            pointers,
            types,
            numbers,
            function_type,
            alias,
            removed,
            undef: HashMap::new(),
            added: Vec::new(),
            int64,
            void,
            next,
        }
    }

    fn id(&mut self) -> Word {
        self.next += 1;
        self.next - 1
    }

    fn is_pointer(&self, value: Word) -> bool {
        self.types.get(&value).is_some_and(|t| self.pointers.contains_key(t))
    }

    /// The number standing for a pointer to `function`.
    fn constant(&self, inst: &Instruction) -> Result<Instruction, Error> {
        let number = match inst.operands.first() {
            Some(Operand::IdRef(f)) => self.numbers[f],
            _ => {
                return Err(Error::Malformed(
                    "OpConstantFunctionPointerINTEL without a function".into(),
                ))
            }
        };
        Ok(Instruction::new(
            Op::Constant,
            Some(self.int64),
            inst.result_id,
            vec![Operand::LiteralBit64(number)],
        ))
    }

    /// Pointer types and constants at module scope: the types go (their uses become the
    /// integer type), the constants become numbers, casts between pointers become aliases.
    fn module_scope(&mut self, module: &mut Module) -> Result<(), Error> {
        let mut kept = Vec::with_capacity(module.types_global_values.len());
        for inst in std::mem::take(&mut module.types_global_values) {
            let id = inst.result_id.unwrap_or(0);
            match inst.class.opcode {
                Op::TypePointer if self.pointers.contains_key(&id) => continue,
                Op::ConstantFunctionPointerINTEL => kept.push(self.constant(&inst)?),
                // The null pointer is number 0 (SPIR-V has no null of an integer).
                Op::ConstantNull
                    if inst.result_type.is_some_and(|t| self.pointers.contains_key(&t)) =>
                {
                    kept.push(Instruction::new(
                        Op::Constant,
                        Some(self.int64),
                        inst.result_id,
                        vec![Operand::LiteralBit64(0)],
                    ))
                }
                Op::SpecConstantOp
                    if inst.result_type.is_some_and(|t| self.pointers.contains_key(&t)) =>
                {
                    match inst.operands.get(1) {
                        Some(Operand::IdRef(from)) if self.is_pointer(*from) => {
                            self.alias.insert(id, *from);
                            self.removed.insert(id);
                        }
                        _ => kept.push(inst),
                    }
                }
                _ => kept.push(inst),
            }
        }
        module.types_global_values = kept;
        Ok(())
    }

    fn function(&mut self, module: &mut Module, f: usize) -> Result<(), Error> {
        let mut b = 0;
        while b < module.functions[f].blocks.len() {
            let mut i = 0;
            while i < module.functions[f].blocks[b].instructions.len() {
                let inst = module.functions[f].blocks[b].instructions[i].clone();
                match self.rewrite(&inst)? {
                    Rewrite::Keep => {}
                    Rewrite::Replace(new) => module.functions[f].blocks[b].instructions[i] = new,
                    Rewrite::Remove => {
                        module.functions[f].blocks[b].instructions.remove(i);
                        continue;
                    }
                    Rewrite::Dispatch => {
                        self.dispatch(module, f, b, i)?;
                        // The rest of the block is now the merge block, the last one added.
                        break;
                    }
                }
                i += 1;
            }
            b += 1;
        }
        Ok(())
    }

    fn rewrite(&mut self, inst: &Instruction) -> Result<Rewrite, Error> {
        let result = inst.result_id.unwrap_or(0);
        let operand = |n: usize| match inst.operands.get(n) {
            Some(Operand::IdRef(id)) => Some(*id),
            _ => None,
        };
        let to_pointer = inst.result_type.is_some_and(|t| self.pointers.contains_key(&t));
        let from_pointer = operand(0).is_some_and(|x| self.is_pointer(x));
        Ok(match inst.class.opcode {
            Op::ConstantFunctionPointerINTEL => {
                let constant = self.constant(inst)?;
                self.added.push(constant);
                Rewrite::Remove
            }
            Op::FunctionPointerCallINTEL => Rewrite::Dispatch,
            Op::PtrCastToGeneric
            | Op::GenericCastToPtr
            | Op::GenericCastToPtrExplicit
            | Op::Bitcast
                if to_pointer && from_pointer =>
            {
                self.alias.insert(result, operand(0).unwrap_or(0));
                self.removed.insert(result);
                Rewrite::Remove
            }
            // A pointer to data from a number, or a number from a pointer to data.
            Op::Bitcast if from_pointer => Rewrite::Replace(Instruction::new(
                Op::ConvertUToPtr,
                inst.result_type,
                inst.result_id,
                inst.operands.clone(),
            )),
            Op::Bitcast if to_pointer => Rewrite::Replace(Instruction::new(
                Op::ConvertPtrToU,
                Some(self.int64),
                inst.result_id,
                inst.operands.clone(),
            )),
            Op::ConvertPtrToU | Op::ConvertUToPtr if from_pointer || to_pointer => {
                let source = operand(0).unwrap_or(0);
                let source_type = self.types.get(&source).copied();
                let target_type = inst.result_type;
                let same_width = |t: Option<Word>| {
                    t.is_some_and(|t| t == self.int64 || self.pointers.contains_key(&t))
                };
                if same_width(source_type) && same_width(target_type) {
                    self.alias.insert(result, source);
                    self.removed.insert(result);
                    Rewrite::Remove
                } else {
                    Rewrite::Replace(Instruction::new(
                        Op::UConvert,
                        inst.result_type,
                        inst.result_id,
                        inst.operands.clone(),
                    ))
                }
            }
            Op::PtrEqual if from_pointer => Rewrite::Replace(Instruction::new(
                Op::IEqual,
                inst.result_type,
                inst.result_id,
                inst.operands.clone(),
            )),
            Op::PtrNotEqual if from_pointer => Rewrite::Replace(Instruction::new(
                Op::INotEqual,
                inst.result_type,
                inst.result_id,
                inst.operands.clone(),
            )),
            _ => Rewrite::Keep,
        })
    }

    /// Splits block `b` of function `f` at the call through a pointer at `i`: the block ends in
    /// a switch on the pointer's number, each case calls its function directly, and a merge
    /// block takes the result (an `OpPhi`) and the rest of the block.
    fn dispatch(&mut self, module: &mut Module, f: usize, b: usize, i: usize) -> Result<(), Error> {
        let block = &mut module.functions[f].blocks[b];
        let call = block.instructions[i].clone();
        let rest = block.instructions.split_off(i + 1);
        block.instructions.truncate(i);
        let this = block.label.as_ref().and_then(|l| l.result_id).unwrap_or(0);
        let (Some(Operand::IdRef(pointer)), Some(result), Some(ret)) =
            (call.operands.first(), call.result_id, call.result_type)
        else {
            return Err(Error::Malformed(
                "OpFunctionPointerCallINTEL without a pointer or a result".into(),
            ));
        };
        let pointer = *pointer;
        let function_type =
            self.types.get(&pointer).and_then(|t| self.pointers.get(t)).copied().ok_or_else(
                || {
                    Error::Malformed(format!(
                    "OpFunctionPointerCallINTEL through {pointer}, which is not a function pointer"
                ))
                },
            )?;
        let arguments = call.operands[1..].to_vec();
        let mut candidates: Vec<(u64, Word)> = self
            .numbers
            .iter()
            .filter(|(g, _)| self.function_type.get(g) == Some(&function_type))
            .map(|(g, n)| (*n, *g))
            .collect();
        candidates.sort_unstable();

        let merge = self.id();
        let default = self.id();
        let returns_value = Some(ret) != self.void;
        let mut switch = vec![Operand::IdRef(pointer), Operand::IdRef(default)];
        let mut cases = Vec::with_capacity(candidates.len() + 2);
        let mut incoming = Vec::new();
        for (number, callee) in candidates {
            let (label, value) = (self.id(), self.id());
            switch.extend([Operand::LiteralBit64(number), Operand::IdRef(label)]);
            let mut operands = vec![Operand::IdRef(callee)];
            operands.extend(arguments.iter().cloned());
            cases.push(Block {
                label: Some(Instruction::new(Op::Label, None, Some(label), vec![])),
                instructions: vec![
                    Instruction::new(Op::FunctionCall, Some(ret), Some(value), operands),
                    Instruction::new(Op::Branch, None, None, vec![Operand::IdRef(merge)]),
                ],
            });
            incoming.extend([Operand::IdRef(value), Operand::IdRef(label)]);
        }
        cases.push(Block {
            label: Some(Instruction::new(Op::Label, None, Some(default), vec![])),
            instructions: vec![Instruction::new(
                Op::Branch,
                None,
                None,
                vec![Operand::IdRef(merge)],
            )],
        });
        let mut merged = Vec::with_capacity(rest.len() + 1);
        if returns_value {
            let undef = self.undef_of(ret);
            incoming.extend([Operand::IdRef(undef), Operand::IdRef(default)]);
            merged.push(Instruction::new(Op::Phi, Some(ret), Some(result), incoming));
        }
        merged.extend(rest);
        module.functions[f].blocks[b].instructions.push(Instruction::new(
            Op::Switch,
            None,
            None,
            switch,
        ));

        // Whatever followed this block now follows the merge block.
        crate::builtins::retarget_phis(&mut module.functions[f], this, merge);
        cases.push(Block {
            label: Some(Instruction::new(Op::Label, None, Some(merge), vec![])),
            instructions: merged,
        });
        let at = b + 1;
        module.functions[f].blocks.splice(at..at, cases);
        Ok(())
    }

    fn undef_of(&mut self, ty: Word) -> Word {
        if let Some(&id) = self.undef.get(&ty) {
            return id;
        }
        let id = self.id();
        self.added.push(Instruction::new(Op::Undef, Some(ty), Some(id), vec![]));
        self.undef.insert(ty, id);
        id
    }

    /// Adds what was moved to module scope, renames aliased ids everywhere, drops names and
    /// decorations of what is gone, and the function-pointer capabilities.
    fn finish(mut self, module: &mut Module) {
        module.types_global_values.append(&mut self.added);
        let resolve = |mut id: Word| {
            let mut steps = 0;
            while let Some(&to) = self.alias.get(&id) {
                id = to;
                steps += 1;
                if steps > self.alias.len() {
                    break;
                }
            }
            id
        };
        let removed = &self.removed;
        let targets_removed = |i: &Instruction| matches!(i.operands.first(), Some(Operand::IdRef(t)) if removed.contains(t));
        module.debug_names.retain(|i| !targets_removed(i));
        // Decorations of pointers (`FuncParamAttr NoCapture` and the like) do not apply to the
        // numbers that replace them.
        let decorates_pointer = |i: &Instruction| matches!(i.operands.first(), Some(Operand::IdRef(t)) if self.is_pointer(*t));
        module.annotations.retain(|i| {
            !targets_removed(i)
                && !decorates_pointer(i)
                && !matches!(
                    i.operands.get(1),
                    Some(Operand::Decoration(Decoration::ReferencedIndirectlyINTEL))
                )
        });
        module.capabilities.retain(|c| {
            !matches!(
                c.operands.first(),
                Some(Operand::Capability(
                    Capability::FunctionPointersINTEL | Capability::IndirectReferencesINTEL
                ))
            )
        });
        module.extensions.retain(
            |e| !matches!(e.operands.first(), Some(Operand::LiteralString(s)) if s == "SPV_INTEL_function_pointers"),
        );
        let untyped: HashSet<Word> = crate::load::untyped_sets(module).into_iter().collect();
        for inst in module.all_inst_iter_mut() {
            crate::link::for_each_id(inst, &untyped, |id| *id = resolve(*id));
        }
        if let Some(h) = &mut module.header {
            h.bound = self.next;
        }
    }
}

enum Rewrite {
    Keep,
    Replace(Instruction),
    Remove,
    Dispatch,
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{assemble, load};
    use rspirv::dr::Builder;
    use rspirv::spirv::{ExecutionModel, FunctionControl, StorageClass};

    /// `twice` and `thrice` of type int(int), a table of pointers to them, a kernel that loads
    /// one from the table, compares it with null and calls through it; `unrelated` has another
    /// type and its address taken too.
    fn module() -> Module {
        let mut b = crate::test_support::kernel_builder(&[
            Capability::Addresses,
            Capability::Int64,
            Capability::FunctionPointersINTEL,
        ]);
        b.extension("SPV_INTEL_function_pointers");
        let void = b.type_void();
        let int = b.type_int(32, 0);
        let long = b.type_int(64, 0);
        let boolean = b.type_bool();
        let int_fn = b.type_function(int, vec![int]);
        let void_fn = b.type_function(void, vec![]);
        let int_fn_ptr = b.type_pointer(None, StorageClass::Function, int_fn);
        let void_fn_ptr = b.type_pointer(None, StorageClass::Function, void_fn);
        let two = b.constant_bit64(long, 2);
        let table_type = b.type_array(int_fn_ptr, two);
        let table_ptr = b.type_pointer(None, StorageClass::CrossWorkgroup, table_type);
        let element_ptr = b.type_pointer(None, StorageClass::CrossWorkgroup, int_fn_ptr);
        let int_ptr = b.type_pointer(None, StorageClass::CrossWorkgroup, int);
        let kernel_fn = b.type_function(void, vec![int_ptr]);
        let define = |b: &mut Builder, ty, by: u32| {
            let f = b.begin_function(int, None, FunctionControl::NONE, ty).unwrap();
            let x = b.function_parameter(int).unwrap();
            b.begin_block(None).unwrap();
            let k = b.constant_bit32(int, by);
            let r = b.i_mul(int, None, x, k).unwrap();
            b.ret_value(r).unwrap();
            b.end_function().unwrap();
            f
        };
        let twice = define(&mut b, int_fn, 2);
        let thrice = define(&mut b, int_fn, 3);
        let unrelated = b.begin_function(void, None, FunctionControl::NONE, void_fn).unwrap();
        b.begin_block(None).unwrap();
        b.ret().unwrap();
        b.end_function().unwrap();
        let pointer_to = |b: &mut Builder, ty, f| {
            let id = b.id();
            let constant = Instruction::new(
                Op::ConstantFunctionPointerINTEL,
                Some(ty),
                Some(id),
                vec![Operand::IdRef(f)],
            );
            b.module_mut().types_global_values.push(constant);
            id
        };
        let p2 = pointer_to(&mut b, int_fn_ptr, twice);
        let p3 = pointer_to(&mut b, int_fn_ptr, thrice);
        pointer_to(&mut b, void_fn_ptr, unrelated);
        let table_value = b.constant_composite(table_type, [p2, p3]);
        let table = b.variable(table_ptr, None, StorageClass::CrossWorkgroup, Some(table_value));
        let null = b.constant_null(int_fn_ptr);

        let k = b.begin_function(void, None, FunctionControl::NONE, kernel_fn).unwrap();
        let out = b.function_parameter(int_ptr).unwrap();
        b.begin_block(None).unwrap();
        let one = b.constant_bit64(long, 1);
        let slot = b.in_bounds_access_chain(element_ptr, None, table, [one]).unwrap();
        let f = b.load(int_fn_ptr, None, slot, None, []).unwrap();
        let _is_null = b.ptr_equal(boolean, None, f, null).unwrap();
        let seven = b.constant_bit32(int, 7);
        let call = b.id();
        let inst = Instruction::new(
            Op::FunctionPointerCallINTEL,
            Some(int),
            Some(call),
            vec![Operand::IdRef(f), Operand::IdRef(seven)],
        );
        b.insert_into_block(rspirv::dr::InsertPoint::End, inst).unwrap();
        b.store(out, call, None, []).unwrap();
        b.ret().unwrap();
        b.end_function().unwrap();
        b.entry_point(ExecutionModel::Kernel, k, "k", vec![]);
        b.module()
    }

    #[test]
    fn calls_through_pointers_become_switches_over_functions_of_their_type() {
        let mut m = module();
        assert!(lower_function_pointers(&mut m).unwrap());
        let m = load(&assemble(&m)).expect("the lowered module loads");
        assert!(m.all_inst_iter().all(|i| !matches!(
            i.class.opcode,
            Op::ConstantFunctionPointerINTEL | Op::FunctionPointerCallINTEL | Op::PtrEqual
        )));
        assert!(m
            .capabilities
            .iter()
            .all(|c| c.operands[0] != Operand::Capability(Capability::FunctionPointersINTEL)));
        assert!(m.extensions.is_empty());
        // The table holds numbers 1 and 2; `unrelated` is 3.
        let numbers: Vec<u64> = m
            .types_global_values
            .iter()
            .filter_map(|i| match (i.class.opcode, i.operands.as_slice()) {
                (Op::Constant, [Operand::LiteralBit64(n)]) => Some(*n),
                _ => None,
            })
            .collect();
        for n in [1, 2, 3] {
            assert!(numbers.contains(&n), "{numbers:?}");
        }
        let kernel = m.functions.last().unwrap();
        let switch =
            kernel.all_inst_iter().find(|i| i.class.opcode == Op::Switch).expect("a switch");
        let cases: Vec<&Operand> = switch.operands[2..].iter().step_by(2).collect();
        assert_eq!(
            cases,
            [&Operand::LiteralBit64(1), &Operand::LiteralBit64(2)],
            "only the int(int) functions"
        );
        let calls: Vec<&Operand> = kernel
            .all_inst_iter()
            .filter(|i| i.class.opcode == Op::FunctionCall)
            .map(|i| &i.operands[0])
            .collect();
        assert_eq!(calls.len(), 2);
        let phi =
            kernel.all_inst_iter().find(|i| i.class.opcode == Op::Phi).expect("the call's result");
        assert_eq!(phi.operands.len(), 6, "two cases and the default");
        assert!(
            kernel.all_inst_iter().any(|i| i.class.opcode == Op::IEqual),
            "the null check compares numbers"
        );
    }

    #[test]
    fn a_module_without_function_pointers_is_unchanged() {
        let mut b = crate::test_support::kernel_builder(&[]);
        let void = b.type_void();
        let void_fn = b.type_function(void, vec![]);
        let k = b.begin_function(void, None, FunctionControl::NONE, void_fn).unwrap();
        b.begin_block(None).unwrap();
        b.ret().unwrap();
        b.end_function().unwrap();
        b.entry_point(ExecutionModel::Kernel, k, "k", vec![]);
        let mut m = b.module();
        let before = assemble(&m);
        assert!(!lower_function_pointers(&mut m).unwrap());
        assert_eq!(assemble(&m), before);
    }
}
