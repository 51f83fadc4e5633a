//! Specialization constants by name.
//!
//! Device code declares one with `SYCL_SPEC_CONSTANT(type, name, default)` (`sycl/device.h`),
//! which compiles to an `OpSpecConstant` with a placeholder `SpecId` (unique within its source)
//! returned by a function marked `UserSemantic "sycl-spec-constant:NAME:TYPE"`. Before the
//! link, [`assign_ids`] gives every name of the link unit one id (names in order, from 0) and
//! rewrites each module's placeholders, so that one name is one constant across sources.
//! After the post-link, [`constants_of`] lists the constants an image uses with their ids and
//! default values, for the `SYCL/specialization constants` property sets.

use std::collections::{BTreeMap, HashMap};

#[cfg(feature = "link")]
use rspirv::dr::Instruction;
use rspirv::dr::{Module, Operand};
#[cfg(feature = "link")]
use rspirv::spirv::StorageClass;
use rspirv::spirv::{Decoration, Op, Word};

/// The marker prefix `SYCL_SPEC_CONSTANT` writes.
pub const SPEC_CONSTANT_SEMANTIC: &str = "sycl-spec-constant:";

/// A named specialization constant of a source or an image.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SpecConstant {
    /// The name given to `SYCL_SPEC_CONSTANT`, one constant per name across a link unit.
    pub name: String,
    /// The C type as written in the declaration (`int`, `float`, …).
    pub c_type: String,
    /// The `SpecId`: the source's placeholder as [`declared`] reads it, the unit's id once
    /// [`assign_ids`] has run.
    pub id: u32,
    /// The default value's bytes, little-endian, as wide as the type.
    pub default: Vec<u8>,
}

/// The named constants a module declares: name, C type, and the `SpecId` each uses now.
pub fn declared(module: &Module) -> Vec<SpecConstant> {
    let spec_ids = spec_ids(module);
    let defaults = defaults(module);
    let mut out = Vec::new();
    for a in &module.annotations {
        let [Operand::IdRef(function), Operand::Decoration(Decoration::UserSemantic), Operand::LiteralString(s)] =
            a.operands.as_slice()
        else {
            continue;
        };
        let Some(rest) = s.strip_prefix(SPEC_CONSTANT_SEMANTIC) else { continue };
        let (name, c_type) = rest.split_once(':').unwrap_or((rest, ""));
        // The marked function returns the constant.
        let returned = module
            .functions
            .iter()
            .find(|f| f.def_id() == Some(*function))
            .and_then(|f| f.all_inst_iter().find(|i| i.class.opcode == Op::ReturnValue))
            .and_then(|i| match i.operands.first() {
                Some(Operand::IdRef(v)) => Some(*v),
                _ => None,
            });
        if let Some((&id, default)) =
            returned.and_then(|v| Some((spec_ids.get(&v)?, defaults.get(&v)?)))
        {
            out.push(SpecConstant {
                name: name.to_string(),
                c_type: c_type.to_string(),
                id,
                default: default.clone(),
            });
        }
    }
    out.sort_by(|a, b| a.name.cmp(&b.name));
    out.dedup_by(|a, b| a.name == b.name);
    out
}

/// Gives each name of the unit one id (in name order, from 0) and rewrites every module's
/// `SpecId`s to them. Returns the unit's constants by name.
pub fn assign_ids(modules: &mut [Module]) -> BTreeMap<String, SpecConstant> {
    let per_module: Vec<Vec<SpecConstant>> = modules.iter().map(declared).collect();
    let mut unit: BTreeMap<String, SpecConstant> = BTreeMap::new();
    for c in per_module.iter().flatten() {
        unit.entry(c.name.clone()).or_insert_with(|| c.clone());
    }
    for (id, c) in unit.values_mut().enumerate() {
        c.id = id as u32;
    }
    for (module, constants) in modules.iter_mut().zip(&per_module) {
        let renumber: HashMap<u32, u32> =
            constants.iter().map(|c| (c.id, unit[&c.name].id)).collect();
        for a in &mut module.annotations {
            if let [Operand::IdRef(_), Operand::Decoration(Decoration::SpecId), Operand::LiteralBit32(id)] =
                a.operands.as_mut_slice()
            {
                if let Some(new) = renumber.get(id) {
                    *id = *new;
                }
            }
        }
    }
    unit
}

/// The named constants an image's module uses, given the unit's constants.
pub fn constants_of(module: &Module, unit: &BTreeMap<String, SpecConstant>) -> Vec<SpecConstant> {
    let used: std::collections::HashSet<u32> = spec_ids(module).into_values().collect();
    unit.values().filter(|c| used.contains(&c.id)).cloned().collect()
}

/// `SpecId` of every decorated value.
fn spec_ids(module: &Module) -> HashMap<Word, u32> {
    module
        .annotations
        .iter()
        .filter_map(|a| match a.operands.as_slice() {
            [Operand::IdRef(v), Operand::Decoration(Decoration::SpecId), Operand::LiteralBit32(id)] => Some((*v, *id)),
            _ => None,
        })
        .collect()
}

/// Default value bytes of every scalar specialization constant, as wide as its type.
fn defaults(module: &Module) -> HashMap<Word, Vec<u8>> {
    let widths: HashMap<Word, usize> = module
        .types_global_values
        .iter()
        .filter_map(|i| match (i.class.opcode, i.operands.first()) {
            (Op::TypeInt | Op::TypeFloat, Some(Operand::LiteralBit32(bits))) => {
                Some((i.result_id?, *bits as usize / 8))
            }
            _ => None,
        })
        .collect();
    module
        .types_global_values
        .iter()
        .filter_map(|i| {
            let width = i.result_type.and_then(|t| widths.get(&t).copied()).unwrap_or(4);
            let mut bytes = match (i.class.opcode, i.operands.first()) {
                (Op::SpecConstant, Some(Operand::LiteralBit32(v))) => v.to_le_bytes().to_vec(),
                (Op::SpecConstant, Some(Operand::LiteralBit64(v))) => v.to_le_bytes().to_vec(),
                (Op::SpecConstantTrue, _) => vec![1],
                (Op::SpecConstantFalse, _) => vec![0],
                _ => return None,
            };
            if i.class.opcode == Op::SpecConstant {
                bytes.resize(width, 0);
            }
            Some((i.result_id?, bytes))
        })
        .collect()
}

/// The type of the specialization constant with `SpecId` `id`, as `llvm-spirv --spec-const`
/// names types (`i32`, `f64`, …).
pub fn llvm_type_of(module: &Module, id: u32) -> Option<String> {
    let value = spec_ids(module).into_iter().find(|(_, i)| *i == id)?.0;
    let ty = module.types_global_values.iter().find(|i| i.result_id == Some(value))?.result_type?;
    let def = module.types_global_values.iter().find(|i| i.result_id == Some(ty))?;
    match (def.class.opcode, def.operands.first()) {
        (Op::TypeInt, Some(Operand::LiteralBit32(bits))) => Some(format!("i{bits}")),
        (Op::TypeFloat, Some(Operand::LiteralBit32(bits))) => Some(format!("f{bits}")),
        (Op::TypeBool, _) => Some("i1".into()),
        _ => None,
    }
}

/// Each specialization constant of `globals` (`SpecId` → variable name) made a load of a
/// module-scope variable of that name, for a target that sets values after compiling, not
/// while translating: the variable (`UniformConstant`, initialised to the default; a `bool`
/// one as a `uchar`) is loaded once at the start of every function that uses the constant,
/// and the load replaces every use there. Constants the module lacks are skipped. Returns the
/// names of the variables made, or the name of a constant that a constant expression uses,
/// which no load can replace.
#[cfg(feature = "link")]
pub fn lower_to_globals(
    module: &mut Module,
    globals: &[(u32, String)],
) -> Result<Vec<String>, String> {
    let ids = spec_ids(module);
    let mut next = crate::link::next_id(module);
    let mut fresh = || {
        next += 1;
        next - 1
    };
    let mut lowered = Vec::new();
    let mut made = Vec::new();
    for (spec_id, name) in globals {
        let Some((&value, _)) = ids.iter().find(|(_, id)| *id == spec_id) else { continue };
        if let Some(constant) = lower_constant(module, value, name, &mut fresh)? {
            lowered.push(constant);
            made.push(name.clone());
        }
    }
    let zero8 =
        if lowered.iter().any(|l| l.boolean) { Some(uchar_zero(module, &mut fresh)) } else { None };
    for f in &mut module.functions {
        load_lowered(f, &lowered, zero8, &mut fresh);
    }
    if let Some(h) = &mut module.header {
        h.bound = next;
    }
    Ok(made)
}

/// A specialization constant made a variable: what a function that uses it loads instead.
#[cfg(feature = "link")]
#[derive(Clone, Copy)]
struct Lowered {
    /// The constant, whose uses go.
    constant: Word,
    /// Its type.
    ty: Word,
    /// The variable holding its value.
    variable: Word,
    /// The variable's value type: the constant's, or `uchar` for a `bool`.
    stored: Word,
    /// Whether it is a `bool` (stored as a `uchar`, compared with 0 once loaded).
    boolean: bool,
}

/// The variable named `name` for the specialization constant `value` (its type, its default,
/// its name), added to the module; `None` when the module does not define the constant, the
/// name as the error when a constant expression uses it.
#[cfg(feature = "link")]
fn lower_constant(
    module: &mut Module,
    value: Word,
    name: &str,
    fresh: &mut impl FnMut() -> Word,
) -> Result<Option<Lowered>, String> {
    let Some(def) = module.types_global_values.iter().find(|i| i.result_id == Some(value)).cloned()
    else {
        return Ok(None);
    };
    let Some(ty) = def.result_type else { return Ok(None) };
    let in_constants = module
        .types_global_values
        .iter()
        .any(|i| i.result_id != Some(value) && i.operands.contains(&Operand::IdRef(value)));
    if in_constants {
        return Err(name.to_string());
    }
    let boolean = matches!(def.class.opcode, Op::SpecConstantTrue | Op::SpecConstantFalse);
    let mut new = Vec::new();
    let (stored, initial) = if boolean {
        let uchar = find_or_make_int8(module, &mut new, fresh);
        let one = def.class.opcode == Op::SpecConstantTrue;
        let initial = fresh();
        new.push(Instruction::new(
            Op::Constant,
            Some(uchar),
            Some(initial),
            vec![Operand::LiteralBit32(one as u32)],
        ));
        (uchar, initial)
    } else {
        let initial = fresh();
        new.push(Instruction::new(Op::Constant, Some(ty), Some(initial), def.operands.clone()));
        (ty, initial)
    };
    let pointer = fresh();
    let variable = fresh();
    new.push(Instruction::new(
        Op::TypePointer,
        None,
        Some(pointer),
        vec![Operand::StorageClass(StorageClass::UniformConstant), Operand::IdRef(stored)],
    ));
    new.push(Instruction::new(
        Op::Variable,
        Some(pointer),
        Some(variable),
        vec![Operand::StorageClass(StorageClass::UniformConstant), Operand::IdRef(initial)],
    ));
    module.types_global_values.extend(new);
    module.debug_names.push(Instruction::new(
        Op::Name,
        None,
        None,
        vec![Operand::IdRef(variable), Operand::LiteralString(name.to_string())],
    ));
    Ok(Some(Lowered { constant: value, ty, variable, stored, boolean }))
}

/// A `uchar` 0, which a loaded `bool` is compared with, added to the module (with the `Int8`
/// capability an 8-bit integer type needs).
#[cfg(feature = "link")]
fn uchar_zero(module: &mut Module, fresh: &mut impl FnMut() -> Word) -> Word {
    let mut new = Vec::new();
    let uchar = find_or_make_int8(module, &mut new, fresh);
    let zero = fresh();
    new.push(Instruction::new(
        Op::Constant,
        Some(uchar),
        Some(zero),
        vec![Operand::LiteralBit32(0)],
    ));
    module.types_global_values.extend(new);
    let int8 = [Operand::Capability(rspirv::spirv::Capability::Int8)];
    if !module.capabilities.iter().any(|c| c.operands == int8) {
        module.capabilities.push(Instruction::new(Op::Capability, None, None, int8.to_vec()));
    }
    zero
}

/// In `f`, each of the `lowered` constants it uses loaded once at the start of its entry block
/// (after its variables), and the load used in its place; `zero8` is the `uchar` 0 a `bool`
/// is compared with.
#[cfg(feature = "link")]
fn load_lowered(
    f: &mut rspirv::dr::Function,
    lowered: &[Lowered],
    zero8: Option<Word>,
    fresh: &mut impl FnMut() -> Word,
) {
    let uses = |value: Word| {
        f.blocks
            .iter()
            .flat_map(|b| &b.instructions)
            .any(|i| i.operands.contains(&Operand::IdRef(value)))
    };
    let here: Vec<Lowered> = lowered.iter().copied().filter(|l| uses(l.constant)).collect();
    if here.is_empty() {
        return;
    }
    let mut loads = Vec::new();
    let mut replace = HashMap::new();
    for Lowered { constant, ty, variable, stored, boolean } in here {
        let loaded = fresh();
        loads.push(Instruction::new(
            Op::Load,
            Some(stored),
            Some(loaded),
            vec![Operand::IdRef(variable)],
        ));
        let result = if boolean {
            let b = fresh();
            let zero = zero8.expect("made for bool constants");
            loads.push(Instruction::new(
                Op::INotEqual,
                Some(ty),
                Some(b),
                vec![Operand::IdRef(loaded), Operand::IdRef(zero)],
            ));
            b
        } else {
            loaded
        };
        replace.insert(constant, result);
    }
    for inst in f.blocks.iter_mut().flat_map(|b| &mut b.instructions) {
        for o in &mut inst.operands {
            if let Operand::IdRef(id) = o {
                if let Some(new) = replace.get(id) {
                    *id = *new;
                }
            }
        }
    }
    let entry = &mut f.blocks[0].instructions;
    let at = entry.iter().position(|i| i.class.opcode != Op::Variable).unwrap_or(entry.len());
    entry.splice(at..at, loads);
}

/// The module's `uchar` type (`OpTypeInt 8 0`), made (into `new`) where it has none.
#[cfg(feature = "link")]
fn find_or_make_int8(
    module: &Module,
    new: &mut Vec<Instruction>,
    fresh: &mut impl FnMut() -> Word,
) -> Word {
    let is_int8 = |i: &&Instruction| {
        i.class.opcode == Op::TypeInt
            && i.operands == [Operand::LiteralBit32(8), Operand::LiteralBit32(0)]
    };
    if let Some(id) =
        module.types_global_values.iter().chain(new.iter()).find(is_int8).and_then(|i| i.result_id)
    {
        return id;
    }
    let id = fresh();
    new.push(Instruction::new(
        Op::TypeInt,
        None,
        Some(id),
        vec![Operand::LiteralBit32(8), Operand::LiteralBit32(0)],
    ));
    id
}
