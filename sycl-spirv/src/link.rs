//! Linking relocatable SPIR-V modules into one, in time linear in their size.
//!
//! Each input's ids are shifted into a range of their own, then one substitution map folds
//! together what must be unique: extended instruction sets by name, types and constants by
//! structure (hash-consed, decorations included), and every import that some input exports
//! onto the exporting definition. What no input defines stays an import; imports of the same
//! name collapse into one declaration. `spirv-link` compares types pairwise, which is where its
//! quadratic time comes from; a hash map keyed by structure avoids that.

use std::collections::{HashMap, HashSet};

use rspirv::dr::{Instruction, Module, ModuleHeader, Operand};
use rspirv::spirv::{Op, Word};

use crate::load::untyped_sets;
use crate::symbols::{linkage_of, Linkage};
use crate::Error;

/// One module to link, with a name for messages (its source path).
pub struct LinkInput {
    /// The name that errors give this input: its source path.
    pub name: String,
    /// The relocatable module (as [`crate::load`] reads it).
    pub module: Module,
}

/// The linked module, and which input each function definition came from (by index).
#[derive(Debug)]
pub struct Linked {
    /// The linked module: an import that some input exports now refers to that definition;
    /// the others stay imports, one declaration per name.
    pub module: Module,
    /// The input (an index into the `inputs` given to [`link`]) that each function
    /// definition's id in `module` came from.
    pub origins: HashMap<Word, usize>,
}

/// Links `inputs`, in order, into one module (see the module documentation). With more than
/// one input, extended-instruction debug information is dropped, since renumbered ids would
/// make it name the wrong values; line information stays.
pub fn link(inputs: Vec<LinkInput>) -> Result<Linked, Error> {
    let mut names = Vec::with_capacity(inputs.len());
    let mut origins = HashMap::new();
    let mut modules = Vec::with_capacity(inputs.len());
    let mut offset: Word = 0;
    let several = inputs.len() > 1;
    for input in inputs {
        let mut module = input.module;
        if several {
            drop_debug_info(&mut module);
        }
        let bound = module.header.as_ref().map_or(0, |h| h.bound);
        if offset != 0 {
            shift_ids(&mut module, offset);
        }
        offset = offset
            .checked_add(bound)
            .ok_or_else(|| Error::Malformed("combined id bound exceeds 2^32".into()))?;
        for f in &module.functions {
            if let (Some(id), false) = (f.def_id(), f.blocks.is_empty()) {
                origins.insert(id, names.len());
            }
        }
        names.push(input.name);
        modules.push(module);
    }
    let untyped_sets = modules.iter().flat_map(untyped_sets).collect();
    let module = Linker { names, subst: HashMap::new(), untyped_sets }.run(modules)?;
    Ok(Linked { module, origins })
}

struct Linker {
    /// Extended instruction sets whose operands rspirv cannot type (see [`untyped_sets`]).
    untyped_sets: HashSet<Word>,
    names: Vec<String>,
    /// Ids folded onto another id. Targets are never themselves folded, so one lookup suffices.
    subst: HashMap<Word, Word>,
}

impl Linker {
    fn id(&self, id: Word) -> Word {
        self.subst.get(&id).copied().unwrap_or(id)
    }

    fn rewrite(&self, inst: &mut Instruction) {
        if self.subst.is_empty() {
            return;
        }
        for_each_id(inst, &self.untyped_sets, |id| *id = self.id(*id));
    }

    fn run(mut self, mut modules: Vec<Module>) -> Result<Module, Error> {
        let mut out = Module::new();
        let version = modules.iter().filter_map(|m| m.header.as_ref()).map(|h| h.version).max();
        let generator = modules.iter().find_map(|m| m.header.as_ref()).map_or(0, |h| h.generator);
        self.merge_module_scope(&mut modules, &mut out)?;
        self.intern_types(&mut modules, &mut out);
        let dropped = self.resolve_symbols(&modules)?;

        // Module-scope values were rewritten before imports were resolved: imported variables
        // that now fold onto a definition go, and a function-pointer constant may refer to an
        // import that now folds onto its definition.
        out.types_global_values.retain(|i| !i.result_id.is_some_and(|id| dropped.contains(&id)));
        for inst in &mut out.types_global_values {
            self.rewrite(inst);
        }
        self.emit_rest(&mut modules, &mut out, &dropped);

        let bound = max_id(&out) + 1;
        out.header = Some(ModuleHeader {
            magic_number: rspirv::spirv::MAGIC_NUMBER,
            version: version.unwrap_or(0x0001_0000),
            generator,
            bound,
            reserved_word: 0,
        });
        Ok(out)
    }

    /// The module-scope sections that only need union or first-wins: capabilities,
    /// extensions, extended instruction sets (folded by name), the memory model (which must
    /// agree).
    fn merge_module_scope(
        &mut self,
        modules: &mut [Module],
        out: &mut Module,
    ) -> Result<(), Error> {
        let mut seen_caps = HashSet::new();
        let mut seen_exts = HashSet::new();
        let mut ext_sets: HashMap<String, Word> = HashMap::new();
        for (i, m) in modules.iter_mut().enumerate() {
            for cap in m.capabilities.drain(..) {
                if seen_caps.insert(cap.operands.clone()) {
                    out.capabilities.push(cap);
                }
            }
            for ext in m.extensions.drain(..) {
                if seen_exts.insert(ext.operands.clone()) {
                    out.extensions.push(ext);
                }
            }
            for set in m.ext_inst_imports.drain(..) {
                let (Some(id), Some(Operand::LiteralString(name))) =
                    (set.result_id, set.operands.first())
                else {
                    continue;
                };
                match ext_sets.get(name) {
                    Some(&first) => {
                        self.subst.insert(id, first);
                    }
                    None => {
                        ext_sets.insert(name.clone(), id);
                        out.ext_inst_imports.push(set);
                    }
                }
            }
            match (&out.memory_model, m.memory_model.take()) {
                (None, model) => out.memory_model = model,
                (Some(first), Some(model)) if first.operands != model.operands => {
                    return Err(Error::MemoryModel {
                        first: self.names[0].clone(),
                        second: self.names[i].clone(),
                    })
                }
                _ => {}
            }
        }
        Ok(())
    }

    /// Types and constants, hash-consed in definition order (operands are always defined
    /// before use, so each key is built from already-folded ids), with their decorations, so
    /// that two types differing only in decorations stay apart.
    fn intern_types(&mut self, modules: &mut [Module], out: &mut Module) {
        let mut decorations: HashMap<Word, Vec<Vec<Operand>>> = HashMap::new();
        for m in modules.iter() {
            for a in &m.annotations {
                if let Some(Operand::IdRef(target)) = a.operands.first() {
                    decorations.entry(*target).or_default().push(a.operands[1..].to_vec());
                }
            }
        }
        let mut interned: HashMap<TypeKey, Word> = HashMap::new();
        for m in modules.iter_mut() {
            for mut inst in std::mem::take(&mut m.types_global_values) {
                self.rewrite(&mut inst);
                let (Some(id), true) = (inst.result_id, is_interned(inst.class.opcode)) else {
                    out.types_global_values.push(inst);
                    continue;
                };
                let mut decos = decorations.get(&id).cloned().unwrap_or_default();
                for d in &mut decos {
                    d.iter_mut().for_each(|op| map_operand_id(op, |x| *x = self.id(*x)));
                }
                decos.sort_by_key(|d| format!("{d:?}"));
                let key = (inst.class.opcode, inst.result_type, inst.operands.clone(), decos);
                match interned.get(&key) {
                    Some(&first) => {
                        self.subst.insert(id, first);
                    }
                    None => {
                        interned.insert(key, id);
                        out.types_global_values.push(inst);
                    }
                }
            }
        }
    }

    /// Symbol resolution: each export once; each import onto its export, or onto the first
    /// import of the same name. The imports folded so, whose declarations go.
    fn resolve_symbols(&mut self, modules: &[Module]) -> Result<HashSet<Word>, Error> {
        let mut exports: HashMap<String, (Word, usize)> = HashMap::new();
        let mut imports: Vec<(Word, String, usize)> = Vec::new();
        for (i, m) in modules.iter().enumerate() {
            for a in &m.annotations {
                match linkage_of(a) {
                    Some((id, name, Linkage::Import)) => imports.push((id, name.to_string(), i)),
                    Some((id, name, kind)) => match exports.get(name) {
                        Some(&(_, first)) if kind == Linkage::Export => {
                            return Err(Error::MultipleDefinition {
                                symbol: name.to_string(),
                                first: self.names[first].clone(),
                                second: self.names[i].clone(),
                            })
                        }
                        Some(_) => {} // link-once: the first definition stands
                        None => {
                            exports.insert(name.to_string(), (id, i));
                        }
                    },
                    None => {}
                }
            }
        }
        let function_types = function_types(modules);
        let mut first_import: HashMap<String, Word> = HashMap::new();
        let mut dropped: HashSet<Word> = HashSet::new();
        for (id, name, i) in imports {
            let target = match exports.get(&name) {
                Some(&(export, exporter)) => {
                    let (want, have) = (function_types.get(&id), function_types.get(&export));
                    if let (Some(&want), Some(&have)) = (want, have) {
                        if self.id(want) != self.id(have) {
                            return Err(Error::TypeMismatch {
                                symbol: name,
                                importer: self.names[i].clone(),
                                exporter: self.names[exporter].clone(),
                            });
                        }
                    }
                    export
                }
                None => match first_import.get(&name) {
                    Some(&first) => first,
                    None => {
                        first_import.insert(name, id);
                        continue;
                    }
                },
            };
            self.subst.insert(id, target);
            dropped.insert(id);
        }
        Ok(dropped)
    }

    /// Everything else emitted with ids folded, leaving out the `dropped` declarations.
    fn emit_rest(&self, modules: &mut [Module], out: &mut Module, dropped: &HashSet<Word>) {
        let mut named = HashSet::new();
        let mut seen_annotations = HashSet::new();
        let mut seen_processed = HashSet::new();
        for m in modules.iter_mut() {
            let sections = [
                (&mut m.entry_points, &mut out.entry_points),
                (&mut m.execution_modes, &mut out.execution_modes),
                (&mut m.debug_string_source, &mut out.debug_string_source),
            ];
            for (from, to) in sections {
                for mut inst in from.drain(..) {
                    self.rewrite(&mut inst);
                    to.push(inst);
                }
            }
            for mut inst in m.debug_names.drain(..) {
                let target = target_of(&inst);
                if target.is_some_and(|t| dropped.contains(&t)) {
                    continue;
                }
                self.rewrite(&mut inst);
                // One name per id: folded types keep the first name they were given.
                let key = (target_of(&inst), inst.class.opcode, member_index(&inst));
                if named.insert(key) {
                    out.debug_names.push(inst);
                }
            }
            for inst in m.debug_module_processed.drain(..) {
                if seen_processed.insert(inst.operands.clone()) {
                    out.debug_module_processed.push(inst);
                }
            }
            for mut inst in m.annotations.drain(..) {
                if target_of(&inst).is_some_and(|t| dropped.contains(&t)) {
                    continue;
                }
                self.rewrite(&mut inst);
                if seen_annotations.insert(inst.clone()) {
                    out.annotations.push(inst);
                }
            }
            for mut f in m.functions.drain(..) {
                let id = f.def.as_ref().and_then(|d| d.result_id);
                if id.is_some_and(|id| dropped.contains(&id)) {
                    continue;
                }
                f.all_inst_iter_mut().for_each(|inst| self.rewrite(inst));
                out.functions.push(f);
            }
        }
    }
}

/// A type or constant by structure: opcode, result type, operands, decorations.
type TypeKey = (Op, Option<Word>, Vec<Operand>, Vec<Vec<Operand>>);

/// Opcodes whose results are values fixed by their operands, so equal ones can be folded.
fn is_interned(op: Op) -> bool {
    matches!(
        op,
        Op::TypeVoid
            | Op::TypeBool
            | Op::TypeInt
            | Op::TypeFloat
            | Op::TypeVector
            | Op::TypeMatrix
            | Op::TypeImage
            | Op::TypeSampler
            | Op::TypeSampledImage
            | Op::TypeArray
            | Op::TypeRuntimeArray
            | Op::TypeStruct
            | Op::TypeOpaque
            | Op::TypePointer
            | Op::TypeFunction
            | Op::TypeEvent
            | Op::TypeDeviceEvent
            | Op::TypeReserveId
            | Op::TypeQueue
            | Op::TypePipe
            | Op::TypePipeStorage
            | Op::TypeNamedBarrier
            | Op::ConstantTrue
            | Op::ConstantFalse
            | Op::Constant
            | Op::ConstantComposite
            | Op::ConstantSampler
            | Op::ConstantNull
    )
}

/// Function id → its function type id, for checking that an import matches its export.
fn function_types(modules: &[Module]) -> HashMap<Word, Word> {
    let mut out = HashMap::new();
    for m in modules {
        for f in &m.functions {
            if let Some(def) = &f.def {
                if let (Some(id), Some(Operand::IdRef(ty))) = (def.result_id, def.operands.get(1)) {
                    out.insert(id, *ty);
                }
            }
        }
    }
    out
}

fn target_of(inst: &Instruction) -> Option<Word> {
    match inst.operands.first() {
        Some(Operand::IdRef(id)) => Some(*id),
        _ => None,
    }
}

fn member_index(inst: &Instruction) -> Option<u32> {
    match inst.operands.get(1) {
        Some(Operand::LiteralBit32(i)) if inst.class.opcode == Op::MemberName => Some(*i),
        _ => None,
    }
}

fn map_operand_id(op: &mut Operand, mut f: impl FnMut(&mut Word)) {
    match op {
        Operand::IdRef(id) | Operand::IdScope(id) | Operand::IdMemorySemantics(id) => f(id),
        _ => {}
    }
}

/// Calls `f` on every id an instruction defines or uses. For an extended instruction of a set
/// in `untyped_sets`, only the set is an id: rspirv reads that set's other operands (debug
/// information: lines, flags) as ids without knowing, and they must stay as they are.
pub(crate) fn for_each_id(
    inst: &mut Instruction,
    untyped_sets: &HashSet<Word>,
    mut f: impl FnMut(&mut Word),
) {
    if let Some(id) = &mut inst.result_type {
        f(id);
    }
    if let Some(id) = &mut inst.result_id {
        f(id);
    }
    let untyped = inst.class.opcode == Op::ExtInst
        && matches!(inst.operands.first(), Some(Operand::IdRef(set)) if untyped_sets.contains(set));
    let operands = if untyped { &mut inst.operands[..1] } else { &mut inst.operands[..] };
    for op in operands {
        map_operand_id(op, &mut f);
    }
}

/// Removes the extended instructions of sets whose operands rspirv cannot type (debug
/// information: `OpenCL.DebugInfo.100` and the like) and the sets themselves. A link renumbers
/// ids and folds imports onto exports, and these instructions' ids cannot be told from their
/// literals, so after a link they would name the wrong values: `llvm-spirv -r` refuses them
/// (`Id is not in map`). Line information (`OpLine`) is core SPIR-V and stays.
fn drop_debug_info(m: &mut Module) {
    let sets: HashSet<Word> = untyped_sets(m).into_iter().collect();
    if sets.is_empty() {
        return;
    }
    let keep = |i: &Instruction| {
        !(i.class.opcode == Op::ExtInst
            && matches!(i.operands.first(), Some(Operand::IdRef(set)) if sets.contains(set)))
    };
    m.types_global_values.retain(keep);
    for block in m.functions.iter_mut().flat_map(|f| f.blocks.iter_mut()) {
        block.instructions.retain(keep);
    }
    m.ext_inst_imports.retain(|i| !i.result_id.is_some_and(|id| sets.contains(&id)));
}

fn shift_ids(m: &mut Module, offset: Word) {
    let untyped: HashSet<Word> = untyped_sets(m).into_iter().collect();
    for inst in m.all_inst_iter_mut() {
        // Ids are below the bound (checked when loaded), and bounds add up without overflow
        // (checked by the caller).
        for_each_id(inst, &untyped, |id| *id += offset);
    }
}

/// The largest id a module uses (its bound is one more).
/// The first id a pass may make in `m`: past its header's bound and every id it uses.
pub(crate) fn next_id(m: &Module) -> Word {
    m.header.as_ref().map_or(1, |h| h.bound).max(max_id(m) + 1)
}

pub(crate) fn max_id(m: &Module) -> Word {
    // Every id used is defined, so the largest result id is the largest id.
    m.all_inst_iter().filter_map(|i| i.result_id).max().unwrap_or(0)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{assemble, load, Symbols};
    use rspirv::spirv::{self, Decoration, FunctionControl, LinkageType};

    /// A module with `int name(int)` defined (returning its argument) or only declared.
    fn module(name: &str, define: bool) -> Module {
        let mut b = crate::test_support::kernel_builder(&[spirv::Capability::Linkage]);
        let int = b.type_int(32, 0);
        let fn_ty = b.type_function(int, vec![int]);
        let f = b.begin_function(int, None, FunctionControl::NONE, fn_ty).unwrap();
        let p = b.function_parameter(int).unwrap();
        if define {
            b.begin_block(None).unwrap();
            b.ret_value(p).unwrap();
        }
        b.end_function().unwrap();
        let kind = if define { LinkageType::Export } else { LinkageType::Import };
        b.decorate(
            f,
            Decoration::LinkageAttributes,
            vec![Operand::LiteralString(name.into()), Operand::LinkageType(kind)],
        );
        b.module()
    }

    fn input(name: &str, module: Module) -> LinkInput {
        LinkInput { name: name.into(), module }
    }

    #[test]
    fn import_resolves_to_export_and_types_fold() {
        let linked = link(vec![input("a", module("f", false)), input("b", module("f", true))])
            .unwrap()
            .module;
        let symbols = Symbols::of(&linked);
        assert!(symbols.imports(&linked).is_empty());
        assert_eq!(linked.functions.len(), 1);
        let ints =
            linked.types_global_values.iter().filter(|i| i.class.opcode == Op::TypeInt).count();
        assert_eq!(ints, 1);
        // The result must load again.
        load(&assemble(&linked)).unwrap();
    }

    #[test]
    fn unresolved_imports_stay_and_collapse() {
        let linked = link(vec![input("a", module("g", false)), input("b", module("g", false))])
            .unwrap()
            .module;
        assert_eq!(Symbols::of(&linked).imports(&linked), ["g"]);
        assert_eq!(linked.functions.len(), 1);
    }

    #[test]
    fn duplicate_definition_names_both_inputs() {
        let err = link(vec![input("a.cl", module("f", true)), input("b.cl", module("f", true))])
            .unwrap_err();
        assert_eq!(err.to_string(), "symbol `f` is defined in both a.cl and b.cl");
    }

    /// A module calling `vload4` and `vstore_half_rte` on a global pointer.
    fn vector_io() -> Module {
        let mut b = crate::test_support::kernel_builder(&[spirv::Capability::Addresses]);
        let cl = b.ext_inst_import("OpenCL.std");
        let (void, float, long) = (b.type_void(), b.type_float(32, None), b.type_int(64, 0));
        let float4 = b.type_vector(float, 4);
        let global = b.type_pointer(None, spirv::StorageClass::CrossWorkgroup, float);
        let fn_ty = b.type_function(void, vec![global]);
        let zero = b.constant_bit64(long, 0);
        b.begin_function(void, None, FunctionControl::NONE, fn_ty).unwrap();
        let p = b.function_parameter(global).unwrap();
        b.begin_block(None).unwrap();
        let v = b
            .ext_inst(
                float4,
                None,
                cl,
                spirv::OpenclStd100Op::vloadn as u32,
                [p, zero, 4].map(Operand::IdRef),
            )
            .unwrap();
        let x = b.composite_extract(float, None, v, [0]).unwrap();
        let rte = spirv::FPRoundingMode::RTE as u32;
        b.ext_inst(
            void,
            None,
            cl,
            spirv::OpenclStd100Op::vstore_half_r as u32,
            [x, zero, p, rte].map(Operand::IdRef),
        )
        .unwrap();
        b.ret().unwrap();
        b.end_function().unwrap();
        b.module()
    }

    #[test]
    fn opencl_std_literals_are_not_renumbered() {
        // Loaded, `vloadn`'s count and `vstore_half_r`'s mode are literals, which the link
        // leaves as they are in every input, not only the first.
        let loaded = || load(&assemble(&vector_io())).unwrap();
        let linked =
            link(vec![input("a", module("f", true)), input("b", loaded()), input("c", loaded())])
                .unwrap()
                .module;
        let ext: Vec<&Operand> = linked
            .all_inst_iter()
            .filter(|i| i.class.opcode == spirv::Op::ExtInst)
            .map(|i| i.operands.last().unwrap())
            .collect();
        assert_eq!(ext, [&Operand::LiteralBit32(4), &Operand::LiteralBit32(0)].repeat(2));
    }

    #[test]
    fn linking_is_deterministic() {
        let run = || {
            assemble(
                &link(vec![input("a", module("f", false)), input("b", module("f", true))])
                    .unwrap()
                    .module,
            )
        };
        assert_eq!(run(), run());
    }
}
