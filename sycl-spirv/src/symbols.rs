//! What a module defines and needs: kernels, linkage attributes, SYCL_EXTERNAL markers, and
//! DPC++'s canBeImportedFunction rule.

use std::collections::{HashMap, HashSet};

use rspirv::dr::{Instruction, Module, Operand};
use rspirv::spirv::{Decoration, LinkageType, Op, Word};

/// The `UserSemantic` string that `SYCL_EXTERNAL` (in `sycl/device.h`) puts on a definition.
pub(crate) const SYCL_EXTERNAL_SEMANTIC: &str = "sycl-external";

/// The kind of a `LinkageAttributes` decoration.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Linkage {
    /// `Export`: a definition other modules may use.
    Export,
    /// `Import`: a declaration, resolved against an export of another module when the link
    /// has one.
    Import,
    /// `LinkOnceODR`: a definition that other modules may repeat; the link keeps the first.
    LinkOnceOdr,
}

/// The symbols of one module, by id.
#[derive(Debug, Default)]
pub struct Symbols {
    /// Entry-point names with the id of their function, in module order.
    pub kernels: Vec<(String, Word)>,
    /// Linkage name and kind of every decorated id.
    pub linkage: HashMap<Word, (String, Linkage)>,
    /// Ids that carry the `SYCL_EXTERNAL` marker.
    pub sycl_external: HashSet<Word>,
    /// Ids of functions that have a body.
    pub defined_functions: HashSet<Word>,
}

impl Symbols {
    /// Reads the symbols of `module`.
    pub fn of(module: &Module) -> Symbols {
        let mut symbols = Symbols::default();
        for ep in &module.entry_points {
            if let (Some(Operand::IdRef(id)), Some(Operand::LiteralString(name))) =
                (ep.operands.get(1), ep.operands.get(2))
            {
                symbols.kernels.push((name.clone(), *id));
            }
        }
        for inst in &module.annotations {
            if let Some((target, name, linkage)) = linkage_of(inst) {
                symbols.linkage.insert(target, (name.to_string(), linkage));
            } else if let Some(target) = user_semantic(inst, SYCL_EXTERNAL_SEMANTIC) {
                symbols.sycl_external.insert(target);
            }
        }
        for f in &module.functions {
            if !f.blocks.is_empty() {
                if let Some(id) = f.def.as_ref().and_then(|d| d.result_id) {
                    symbols.defined_functions.insert(id);
                }
            }
        }
        symbols
    }

    /// SYCL_EXTERNAL functions this module defines, by linkage name, in name order.
    pub fn exports(&self) -> Vec<(String, Word)> {
        let mut out: Vec<_> = self
            .linkage
            .iter()
            .filter(|(id, (_, kind))| {
                *kind != Linkage::Import
                    && self.sycl_external.contains(id)
                    && self.defined_functions.contains(id)
            })
            .map(|(id, (name, _))| (name.clone(), *id))
            .collect();
        out.sort();
        out
    }

    /// Functions declared but not defined that pass [`can_be_imported`], in name order.
    pub fn imports(&self, module: &Module) -> Vec<String> {
        let mut out = self.declared_functions(module);
        out.retain(|name| can_be_imported(name));
        out
    }

    /// Functions declared with import linkage but not defined, in name order: the imports,
    /// and in a kernel image the members of the virtual-function sets its kernels call,
    /// which come from the sets' images rather than through imports.
    pub fn declared_functions(&self, module: &Module) -> Vec<String> {
        let declared: HashSet<Word> = module
            .functions
            .iter()
            .filter(|f| f.blocks.is_empty())
            .filter_map(|f| f.def.as_ref().and_then(|d| d.result_id))
            .collect();
        let mut out: Vec<String> = self
            .linkage
            .iter()
            .filter(|(id, (_, kind))| *kind == Linkage::Import && declared.contains(id))
            .map(|(_, (name, _))| name.clone())
            .collect();
        out.sort();
        out.dedup();
        out
    }
}

/// `(target, name, kind)` when `inst` is `OpDecorate %target LinkageAttributes "name" kind`.
pub(crate) fn linkage_of(inst: &Instruction) -> Option<(Word, &str, Linkage)> {
    if inst.class.opcode != Op::Decorate {
        return None;
    }
    match inst.operands.as_slice() {
        [Operand::IdRef(target), Operand::Decoration(Decoration::LinkageAttributes), Operand::LiteralString(name), Operand::LinkageType(kind)] =>
        {
            let kind = match kind {
                LinkageType::Export => Linkage::Export,
                LinkageType::Import => Linkage::Import,
                _ => Linkage::LinkOnceOdr,
            };
            Some((*target, name.as_str(), kind))
        }
        _ => None,
    }
}

/// The target of `OpDecorateString %target UserSemantic "semantic"`.
fn user_semantic(inst: &Instruction, semantic: &str) -> Option<Word> {
    if !matches!(inst.class.opcode, Op::Decorate | Op::DecorateString) {
        return None;
    }
    match inst.operands.as_slice() {
        [Operand::IdRef(target), Operand::Decoration(Decoration::UserSemantic), Operand::LiteralString(s)]
            if s == semantic =>
        {
            Some(*target)
        }
        _ => None,
    }
}

/// DPC++'s canBeImportedFunction, for a declaration that is already known to be a function
/// (SPIR-V has no intrinsics, and declarations carry no SYCL_EXTERNAL marker: in device code
/// only a SYCL_EXTERNAL function may be called without a definition, so every remaining
/// declaration is one):
/// - its name does not start with `__` (this excludes `__spirv_*` operations and builtins);
/// - its demangled name does not start with `__`;
/// - it is not an LLVM intrinsic (`llvm.*`) that survived translation.
pub fn can_be_imported(name: &str) -> bool {
    !name.starts_with("__")
        && !name.starts_with("llvm.")
        && !demangled_prefix(name).is_some_and(|n| n.starts_with("__"))
}

/// The first identifier of an Itanium-mangled name (`_ZN2ns1fEi` → `ns`), which is where its
/// demangled form starts.
fn demangled_prefix(name: &str) -> Option<&str> {
    let mut rest = name.strip_prefix("_Z")?;
    rest = rest.strip_prefix('N').unwrap_or(rest);
    rest = rest.trim_start_matches(['K', 'V', 'r']);
    rest = rest.strip_prefix("St").map(|_| "3std").unwrap_or(rest);
    let digits = rest.bytes().take_while(u8::is_ascii_digit).count();
    let len: usize = rest[..digits].parse().ok()?;
    rest.get(digits..digits + len)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn import_rules_follow_dpcpp() {
        assert!(can_be_imported("LibDeviceFunc"));
        assert!(can_be_imported("_ZN2ns1fEi"));
        assert!(!can_be_imported("__spirv_BuiltInGlobalInvocationId"));
        assert!(!can_be_imported("__devicelib_foo"));
        assert!(!can_be_imported("_ZN6__impl3fooEv"));
        assert!(!can_be_imported("_Z9__privatei"));
        assert!(!can_be_imported("llvm.memcpy.p0.p0.i64"));
    }

    #[test]
    fn demangled_prefix_reads_the_first_identifier() {
        assert_eq!(demangled_prefix("_ZN2ns1fEi"), Some("ns"));
        assert_eq!(demangled_prefix("_Z1gi"), Some("g"));
        assert_eq!(demangled_prefix("plain"), None);
        assert_eq!(demangled_prefix("_Z99x"), None);
    }
}
