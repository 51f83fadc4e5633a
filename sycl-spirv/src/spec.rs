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

use rspirv::dr::{Module, Operand};
use rspirv::spirv::{Decoration, Op, Word};

/// The marker prefix `SYCL_SPEC_CONSTANT` writes.
pub const SPEC_CONSTANT_SEMANTIC: &str = "sycl-spec-constant:";

/// A named specialization constant of a source or an image.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SpecConstant {
    pub name: String,
    /// The C type as written in the declaration (`int`, `float`, …).
    pub c_type: String,
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
        if let Some((&id, default)) = returned.and_then(|v| Some((spec_ids.get(&v)?, defaults.get(&v)?))) {
            out.push(SpecConstant { name: name.to_string(), c_type: c_type.to_string(), id, default: default.clone() });
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
        let renumber: HashMap<u32, u32> = constants.iter().map(|c| (c.id, unit[&c.name].id)).collect();
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
            (Op::TypeInt | Op::TypeFloat, Some(Operand::LiteralBit32(bits))) => Some((i.result_id?, *bits as usize / 8)),
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
