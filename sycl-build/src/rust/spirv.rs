//! `llc-22`'s SPIR-V of a Rust device crate made what the rest of the toolkit reads, as
//! `llvm-spirv-15` writes OpenCL C's:
//!
//! - an exported or imported function's pointer parameters point at what the Rust signature
//!   says (`float`, not the `uchar` the back end guessed from byte offsets): the linker matches
//!   an import's type with the export's exactly. A definition takes the new type and casts it
//!   back to the old one (`OpBitcast`) before its body, which is left as it was; a call to an
//!   import casts its arguments;
//! - an exported function carries `sycl-external` (`UserSemantic`), `SYCL_EXTERNAL`'s marker;
//! - a scalar zero is an `OpConstant` (`OpConstantFalse` for `bool`), not the `OpConstantNull`
//!   `llc-22` writes, on which `llvm-spirv-15 -r` (the `ptx64` and PoCL paths) fails an
//!   assertion;
//! - a comparison of pointers (`OpPtrEqual`, `OpPtrNotEqual`, SPIR-V 1.4's, which an iterator's
//!   end test makes) compares their addresses as integers: `llvm-spirv-15 -r` has no reader for
//!   them;
//! - a kernel's `kernel_arg_type_qual` string says which pointers are `const`, as
//!   `--preserve-ocl-kernel-arg-type-metadata-through-string` has llvm-spirv say it.

use std::collections::HashMap;

use sycl_spirv::dr::{Instruction, Module, Operand};
use sycl_spirv::spirv::{Capability, Decoration, LinkageType, Op, StorageClass, Word};

use super::ir::Kernel;
use super::signature::{RustType, Scalar, Signatures};

/// The `UserSemantic` string `SYCL_EXTERNAL` puts on a definition.
const SYCL_EXTERNAL: &str = "sycl-external";

/// Fixes `module` up (the module doc says how): `exports` are the functions the crate
/// exports. Returns the kernels and the exported and imported functions with pointer
/// parameters whose Rust signature was not found: they keep llc-22's guess.
pub(crate) fn fix_up(
    module: &mut Module,
    signatures: &Signatures,
    exports: &[String],
    kernels: &[Kernel],
) -> Vec<String> {
    let mut unsigned = Vec::new();
    scalar_zeros(module);
    let mut types = TypeTable::of(module);
    pointer_comparisons(module, &mut types);
    let linkage = linkage(module);
    // Kernels take global pointers, other functions generic ones.
    let mut retyped: Vec<(Word, &str, StorageClass, bool)> = linkage
        .iter()
        .map(|(id, (name, kind))| {
            (*id, name.as_str(), StorageClass::Generic, *kind == LinkageType::Import)
        })
        .collect();
    let entries: Vec<(Word, String)> = module
        .entry_points
        .iter()
        .filter_map(|e| match (e.operands.get(1), e.operands.get(2)) {
            (Some(Operand::IdRef(id)), Some(Operand::LiteralString(name))) => {
                Some((*id, name.clone()))
            }
            _ => None,
        })
        .collect();
    retyped.extend(
        entries.iter().map(|(id, name)| (*id, name.as_str(), StorageClass::CrossWorkgroup, false)),
    );
    for (id, name, class, import) in retyped {
        let Some(index) = module.functions.iter().position(|f| f.def_id() == Some(id)) else {
            continue;
        };
        let current: Vec<Option<Word>> =
            module.functions[index].parameters.iter().map(|p| p.result_type).collect();
        let pointers: Vec<bool> = current
            .iter()
            .map(|t| {
                t.is_some_and(|t| types.pointers.iter().any(|((c, _), id)| *c == class && *id == t))
            })
            .collect();
        let Some(signature) = signatures.get(name, current.len()) else {
            if pointers.iter().any(|p| *p) {
                unsigned.push(name.to_string());
            }
            continue;
        };
        // Types made only for the parameters that are pointers of this class.
        let mut wanted = Vec::with_capacity(pointers.len());
        for ((_, ty), pointer) in signature.params.iter().zip(&pointers) {
            wanted.push(match pointer {
                true => pointer_type(ty, class, &mut types, module),
                false => None,
            });
        }
        retype_params(module, index, &wanted, import, class, &mut types);
    }
    for (id, (name, kind)) in &linkage {
        if *kind == LinkageType::Export && exports.contains(name) {
            module.annotations.push(Instruction::new(
                Op::Decorate,
                None,
                None,
                vec![
                    Operand::IdRef(*id),
                    Operand::Decoration(Decoration::UserSemantic),
                    Operand::LiteralString(SYCL_EXTERNAL.into()),
                ],
            ));
        }
    }
    for kernel in kernels {
        let list: String =
            kernel.const_pointers.iter().map(|c| if *c { "const," } else { "," }).collect();
        let id = next_id(module);
        module.debug_string_source.push(Instruction::new(
            Op::String,
            None,
            Some(id),
            vec![Operand::LiteralString(format!("kernel_arg_type_qual.{}.{list}", kernel.name))],
        ));
    }
    unsigned
}

/// Each `OpConstantNull` of an integer, a float or `bool` made an `OpConstant` 0
/// (`OpConstantFalse`).
fn scalar_zeros(module: &mut Module) {
    let mut widths: HashMap<Word, (Op, u32)> = HashMap::new();
    for inst in &mut module.types_global_values {
        match (inst.class.opcode, inst.result_id, inst.operands.first()) {
            (Op::TypeInt | Op::TypeFloat, Some(id), Some(Operand::LiteralBit32(bits))) => {
                widths.insert(id, (inst.class.opcode, *bits));
            }
            (Op::TypeBool, Some(id), _) => {
                widths.insert(id, (Op::TypeBool, 1));
            }
            (Op::ConstantNull, _, _) => {
                let Some(&(kind, bits)) = inst.result_type.and_then(|t| widths.get(&t)) else {
                    continue;
                };
                *inst = match (kind, bits) {
                    (Op::TypeBool, _) => Instruction::new(
                        Op::ConstantFalse,
                        inst.result_type,
                        inst.result_id,
                        vec![],
                    ),
                    (_, 64) => Instruction::new(
                        Op::Constant,
                        inst.result_type,
                        inst.result_id,
                        vec![Operand::LiteralBit64(0)],
                    ),
                    _ => Instruction::new(
                        Op::Constant,
                        inst.result_type,
                        inst.result_id,
                        vec![Operand::LiteralBit32(0)],
                    ),
                };
            }
            _ => {}
        }
    }
}

/// Each `OpPtrEqual`/`OpPtrNotEqual` made `OpIEqual`/`OpINotEqual` of the two addresses
/// (`OpConvertPtrToU`, 64 bits: the module's addressing is `Physical64`).
fn pointer_comparisons(module: &mut Module, types: &mut TypeTable) {
    let compares = |op: Op| matches!(op, Op::PtrEqual | Op::PtrNotEqual);
    let any = module
        .functions
        .iter()
        .flat_map(|f| &f.blocks)
        .any(|b| b.instructions.iter().any(|i| compares(i.class.opcode)));
    if !any {
        return;
    }
    let ulong = types.scalar(Scalar::Int { bits: 64, signed: false }, module);
    let mut bound = module.header.as_ref().map_or(0, |h| h.bound);
    for block in module.functions.iter_mut().flat_map(|f| &mut f.blocks) {
        let mut k = 0;
        while k < block.instructions.len() {
            let inst = &block.instructions[k];
            if !compares(inst.class.opcode) {
                k += 1;
                continue;
            }
            let op = if inst.class.opcode == Op::PtrEqual { Op::IEqual } else { Op::INotEqual };
            let (ty, id) = (inst.result_type, inst.result_id);
            let mut operands = Vec::new();
            let mut converts = Vec::new();
            for operand in &inst.operands {
                let Operand::IdRef(pointer) = operand else { continue };
                converts.push(Instruction::new(
                    Op::ConvertPtrToU,
                    Some(ulong),
                    Some(bound),
                    vec![Operand::IdRef(*pointer)],
                ));
                operands.push(Operand::IdRef(bound));
                bound += 1;
            }
            let n = converts.len();
            block.instructions[k] = Instruction::new(op, ty, id, operands);
            block.instructions.splice(k..k, converts);
            k += n + 1;
        }
    }
    if let Some(header) = module.header.as_mut() {
        header.bound = bound;
    }
}

/// Functions with linkage attributes: (id, (name, kind)), in the order of their ids, so that
/// what is added for them gets the same ids every build.
fn linkage(module: &Module) -> Vec<(Word, (String, LinkageType))> {
    module
        .annotations
        .iter()
        .filter_map(|a| match (a.class.opcode, a.operands.as_slice()) {
            (
                Op::Decorate,
                [Operand::IdRef(id), Operand::Decoration(Decoration::LinkageAttributes), Operand::LiteralString(name), Operand::LinkageType(kind)],
            ) => Some((*id, (name.clone(), *kind))),
            _ => None,
        })
        .collect::<std::collections::BTreeMap<_, _>>()
        .into_iter()
        .collect()
}

/// `capability` declared, if it is not.
fn require(module: &mut Module, capability: Capability) {
    let declared = module
        .capabilities
        .iter()
        .any(|c| c.operands.first() == Some(&Operand::Capability(capability)));
    if !declared {
        module.capabilities.push(Instruction::new(
            Op::Capability,
            None,
            None,
            vec![Operand::Capability(capability)],
        ));
    }
}

/// A fresh id.
fn next_id(module: &mut Module) -> Word {
    // A module `sycl_spirv::load` read has a header.
    let header = module.header.as_mut().expect("a loaded module has a header");
    let id = header.bound;
    header.bound += 1;
    id
}

/// The module's scalar and pointer types, found or added.
struct TypeTable {
    ints: HashMap<u32, Word>,
    floats: HashMap<u32, Word>,
    pointers: HashMap<(StorageClass, Word), Word>,
    functions: HashMap<Vec<Word>, Word>,
}

impl TypeTable {
    fn of(module: &Module) -> TypeTable {
        let mut t = TypeTable {
            ints: HashMap::new(),
            floats: HashMap::new(),
            pointers: HashMap::new(),
            functions: HashMap::new(),
        };
        for inst in &module.types_global_values {
            let Some(id) = inst.result_id else { continue };
            match (inst.class.opcode, inst.operands.as_slice()) {
                (Op::TypeInt, [Operand::LiteralBit32(bits), ..]) => {
                    t.ints.entry(*bits).or_insert(id);
                }
                (Op::TypeFloat, [Operand::LiteralBit32(bits), ..]) => {
                    t.floats.entry(*bits).or_insert(id);
                }
                (Op::TypePointer, [Operand::StorageClass(sc), Operand::IdRef(to)]) => {
                    t.pointers.entry((*sc, *to)).or_insert(id);
                }
                (Op::TypeFunction, ops) => {
                    let key = ops.iter().filter_map(Operand::id_ref_any).collect();
                    t.functions.entry(key).or_insert(id);
                }
                _ => {}
            }
        }
        t
    }

    fn add(module: &mut Module, op: Op, operands: Vec<Operand>) -> Word {
        let id = next_id(module);
        module.types_global_values.push(Instruction::new(op, None, Some(id), operands));
        id
    }

    fn scalar(&mut self, scalar: Scalar, module: &mut Module) -> Word {
        let capability = match scalar {
            Scalar::Int { bits: 8, .. } => Some(Capability::Int8),
            Scalar::Int { bits: 16, .. } => Some(Capability::Int16),
            Scalar::Int { bits: 64, .. } => Some(Capability::Int64),
            Scalar::Float { bits: 16 } => Some(Capability::Float16),
            Scalar::Float { bits: 64 } => Some(Capability::Float64),
            _ => None,
        };
        if let Some(capability) = capability {
            require(module, capability);
        }
        match scalar {
            Scalar::Int { bits, .. } => *self.ints.entry(bits).or_insert_with(|| {
                TypeTable::add(
                    module,
                    Op::TypeInt,
                    vec![Operand::LiteralBit32(bits), Operand::LiteralBit32(0)],
                )
            }),
            Scalar::Float { bits } => *self.floats.entry(bits).or_insert_with(|| {
                TypeTable::add(module, Op::TypeFloat, vec![Operand::LiteralBit32(bits)])
            }),
        }
    }

    fn pointer(&mut self, class: StorageClass, to: Word, module: &mut Module) -> Word {
        *self.pointers.entry((class, to)).or_insert_with(|| {
            TypeTable::add(
                module,
                Op::TypePointer,
                vec![Operand::StorageClass(class), Operand::IdRef(to)],
            )
        })
    }

    fn function(&mut self, result: Word, params: &[Word], module: &mut Module) -> Word {
        let mut key = vec![result];
        key.extend_from_slice(params);
        *self.functions.entry(key.clone()).or_insert_with(|| {
            TypeTable::add(module, Op::TypeFunction, key.into_iter().map(Operand::IdRef).collect())
        })
    }
}

/// The pointer type in `class` a Rust parameter type stands for, when it is a pointer to a
/// scalar (or to a generic pointer to one).
fn pointer_type(
    ty: &RustType,
    class: StorageClass,
    types: &mut TypeTable,
    module: &mut Module,
) -> Option<Word> {
    let RustType::Pointer { pointee, .. } = ty else { return None };
    let to = match &**pointee {
        RustType::Scalar(s) => types.scalar(*s, module),
        inner @ RustType::Pointer { .. } => {
            pointer_type(inner, StorageClass::Generic, types, module)?
        }
        RustType::Other(_) => return None,
    };
    Some(types.pointer(class, to, module))
}

/// Gives function `index`'s parameters the `wanted` types where they are pointers in `class`
/// to another type: a definition casts each back before its body; calls to an import cast their
/// arguments.
fn retype_params(
    module: &mut Module,
    index: usize,
    wanted: &[Option<Word>],
    import: bool,
    class: StorageClass,
    types: &mut TypeTable,
) {
    let generic: std::collections::HashSet<Word> =
        types.pointers.iter().filter(|((sc, _), _)| *sc == class).map(|(_, id)| *id).collect();
    let function = &module.functions[index];
    let changes: Vec<(usize, Word, Word)> = function
        .parameters
        .iter()
        .enumerate()
        .filter_map(|(i, p)| {
            let (old, new) = (p.result_type?, (*wanted.get(i)?)?);
            (old != new && generic.contains(&old)).then_some((i, old, new))
        })
        .collect();
    if changes.is_empty() {
        return;
    }
    let Some(def) = function.def.as_ref() else { return };
    let (Some(result), Some(fn_id)) = (def.result_type, def.result_id) else { return };
    let mut param_types: Vec<Word> =
        function.parameters.iter().filter_map(|p| p.result_type).collect();
    for (i, _, new) in &changes {
        param_types[*i] = *new;
    }
    let fn_type = types.function(result, &param_types, module);
    if let Some(def) = module.functions[index].def.as_mut() {
        if let Some(Operand::IdRef(t)) = def.operands.get_mut(1) {
            *t = fn_type;
        }
    }
    // Calls in the module pass the old types: cast, for a definition (the crate's own calls to
    // a function it exports) as for an import.
    cast_call_arguments(module, fn_id, &changes);
    if import {
        for (i, _, new) in &changes {
            module.functions[index].parameters[*i].result_type = Some(*new);
        }
        return;
    }
    // A definition: each changed parameter gets a new id; the old id is the cast's result,
    // so the body reads as before. Decorations and names move to the new parameter.
    let mut casts = Vec::new();
    let mut moved = HashMap::new();
    for (i, old_type, new) in &changes {
        let new_id = next_id(module);
        let param = &mut module.functions[index].parameters[*i];
        let old_id = param.result_id.unwrap_or_default();
        param.result_id = Some(new_id);
        param.result_type = Some(*new);
        moved.insert(old_id, new_id);
        casts.push(Instruction::new(
            Op::Bitcast,
            Some(*old_type),
            Some(old_id),
            vec![Operand::IdRef(new_id)],
        ));
    }
    for inst in module.annotations.iter_mut().chain(module.debug_names.iter_mut()) {
        if let Some(Operand::IdRef(target)) = inst.operands.first_mut() {
            if let Some(new) = moved.get(target) {
                *target = *new;
            }
        }
    }
    if let Some(block) = module.functions[index].blocks.first_mut() {
        let at = block.instructions.iter().take_while(|i| i.class.opcode == Op::Variable).count();
        block.instructions.splice(at..at, casts);
    }
}

/// Every call to `callee` casts the arguments of the `changes` parameters to their new types.
fn cast_call_arguments(module: &mut Module, callee: Word, changes: &[(usize, Word, Word)]) {
    let mut bound = module.header.as_ref().map_or(0, |h| h.bound);
    for function in &mut module.functions {
        for block in &mut function.blocks {
            let mut k = 0;
            while k < block.instructions.len() {
                let call = &block.instructions[k];
                let calls_it = call.class.opcode == Op::FunctionCall
                    && call.operands.first() == Some(&Operand::IdRef(callee));
                if !calls_it {
                    k += 1;
                    continue;
                }
                let mut casts = Vec::new();
                for (i, _, new) in changes {
                    let Some(Operand::IdRef(arg)) = block.instructions[k].operands.get(1 + i)
                    else {
                        continue;
                    };
                    let cast = bound;
                    bound += 1;
                    casts.push(Instruction::new(
                        Op::Bitcast,
                        Some(*new),
                        Some(cast),
                        vec![Operand::IdRef(*arg)],
                    ));
                    block.instructions[k].operands[1 + i] = Operand::IdRef(cast);
                }
                let n = casts.len();
                block.instructions.splice(k..k, casts);
                k += n + 1;
            }
        }
    }
    if let Some(header) = module.header.as_mut() {
        header.bound = bound;
    }
}
