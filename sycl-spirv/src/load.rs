//! Loading SPIR-V into `rspirv`'s data representation, and writing it back.
//!
//! `rspirv::dr::Loader` refuses instructions it does not expect at module scope, such as
//! `OpConstantFunctionPointerINTEL`, so this module sorts instructions into sections itself:
//! by opcode for the module-scope sections, and into blocks inside functions.

use std::collections::HashSet;

use rspirv::binary::{Assemble, Consumer, ParseAction};
use rspirv::dr::{Block, Function, Instruction, Module, ModuleHeader, Operand};
use rspirv::spirv::{Op, OpenclStd100Op as Cl, Word};

use crate::Error;

/// Parses a SPIR-V binary. Any structural problem (bad magic, truncated words, an unknown
/// opcode, a function that never ends) is an [`Error::Malformed`].
pub fn load(bytes: &[u8]) -> Result<Module, Error> {
    if !bytes.len().is_multiple_of(4) {
        return Err(Error::Malformed(format!("length {} is not a multiple of 4", bytes.len())));
    }
    check_framing(bytes)?;
    let mut loader = Loader::default();
    // rspirv's decoder can still panic on some malformed operands; a panic here is the
    // input's fault, so it becomes an error like any other.
    let parsed = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        rspirv::binary::parse_bytes(bytes, &mut loader).map_err(|e| Error::Malformed(e.to_string()))
    }));
    match parsed {
        Ok(result) => result?,
        Err(_) => return Err(Error::Malformed("the SPIR-V decoder gave up on an operand".into())),
    }
    if let Some(error) = loader.error {
        return Err(Error::Malformed(error));
    }
    if loader.function.is_some() {
        return Err(Error::Malformed("the last function has no OpFunctionEnd".into()));
    }
    check_ids(&loader.module)?;
    Ok(loader.module)
}

/// Every result id is defined once, below the header's bound, and every id an instruction
/// uses is one it can see: module-scope ids (types, constants, globals, functions) anywhere,
/// an id defined inside a function only in that function (module-scope annotations and names
/// may still name it), and the callee of an `OpFunctionCall` is a function. The linker gives
/// each input the id range up to its bound, and the post-link drops functions nothing calls;
/// an id past the bound, used but never defined, or borrowed from another function ends up in
/// another input's range or dangling in an image. Findings of the `spirv_postlink` fuzz
/// target: an id defined twice (as a type and as a value), an operand near 2^32, a call to an
/// id nothing defines, a call through a type passing another function's parameter, a constant
/// typed by a function's value, an entry point naming a constant, a pointer to a function
/// (see [`check_type_operands`]), linkage on a function parameter (see
/// [`check_functions_and_linkage`]), a constant built from itself (see
/// [`check_declaration_order`]); each made the post-link, the linker or the lowering of
/// function pointers write invalid SPIR-V.
fn check_ids(module: &Module) -> Result<(), Error> {
    let Definitions { all, global, functions, locals } = Definitions::of(module)?;
    let types: HashSet<u32> = module
        .types_global_values
        .iter()
        .filter(|inst| inst.class.opname.starts_with("Type"))
        .filter_map(|inst| inst.result_id)
        .collect();
    check_names_and_decorations(module, &types, &all, &global)?;
    let declarations = (module
        .capabilities
        .iter()
        .chain(&module.extensions)
        .chain(&module.ext_inst_imports))
    .chain(module.memory_model.iter().chain(&module.entry_points).chain(&module.execution_modes))
    .chain(
        module
            .debug_string_source
            .iter()
            .chain(&module.debug_module_processed)
            .chain(&module.types_global_values),
    );
    for inst in declarations {
        check_uses(inst, &types, |id| global.contains(&id))?;
    }
    for inst in &module.types_global_values {
        check_type_operands(inst, &types, &functions)?;
    }
    check_functions_and_linkage(module, &functions)?;
    check_declaration_order(module)?;
    check_entry_point_targets(module, &functions)?;
    for (function, local) in module.functions.iter().zip(&locals) {
        for inst in function.all_inst_iter() {
            check_uses(inst, &types, |id| global.contains(&id) || local.contains(&id))?;
            if inst.class.opcode == Op::FunctionCall {
                match inst.operands.first() {
                    Some(rspirv::dr::Operand::IdRef(callee)) if functions.contains(callee) => {}
                    _ => {
                        return Err(Error::Malformed(
                            "OpFunctionCall calls something that is not a function".into(),
                        ))
                    }
                }
            }
        }
    }
    Ok(())
}

/// The ids a module defines, by where, each checked to be below the bound and defined once.
struct Definitions {
    /// Every id defined.
    all: HashSet<u32>,
    /// The ids defined at module scope, functions included.
    global: HashSet<u32>,
    /// The functions.
    functions: HashSet<u32>,
    /// Each function's own ids (parameters, labels, results), in module order.
    locals: Vec<HashSet<u32>>,
}

impl Definitions {
    fn of(module: &Module) -> Result<Definitions, Error> {
        let bound = module.header.as_ref().map_or(0, |h| h.bound);
        let mut all = HashSet::new();
        let mut define = |id: u32| {
            if id == 0 || id >= bound {
                return Err(Error::Malformed(format!("id {id} outside the bound {bound}")));
            }
            if !all.insert(id) {
                return Err(Error::Malformed(format!("id {id} is defined more than once")));
            }
            Ok(())
        };
        let mut global = HashSet::new();
        let mut functions = HashSet::new();
        for inst in module.global_inst_iter() {
            if let Some(id) = inst.result_id {
                define(id)?;
                global.insert(id);
            }
        }
        for function in &module.functions {
            if let Some(id) = function.def.as_ref().and_then(|def| def.result_id) {
                define(id)?;
                global.insert(id);
                functions.insert(id);
            }
        }
        let mut locals = Vec::with_capacity(module.functions.len());
        for function in &module.functions {
            let mut local = HashSet::new();
            let body = function
                .parameters
                .iter()
                .chain(function.blocks.iter().flat_map(|b| b.label.iter().chain(&b.instructions)));
            for id in body.filter_map(|inst| inst.result_id) {
                define(id)?;
                local.insert(id);
            }
            locals.push(local);
        }
        Ok(Definitions { all, global, functions, locals })
    }
}

/// Names and decorations may name a function's parameters and values as what they name or
/// decorate; nothing else at module scope may use them (a decoration's own operands, such as
/// `OpDecorateId`'s, are module-scope values).
fn check_names_and_decorations(
    module: &Module,
    types: &HashSet<u32>,
    all: &HashSet<u32>,
    global: &HashSet<u32>,
) -> Result<(), Error> {
    for inst in module.debug_names.iter().chain(&module.annotations) {
        check_uses(inst, types, |id| all.contains(&id))?;
        // What it names or decorates may be any id; its other id operands may not.
        let operands = match inst.class.opcode {
            Op::GroupDecorate | Op::GroupMemberDecorate => {
                &inst.operands[..inst.operands.len().min(1)]
            }
            _ => inst.operands.get(1..).unwrap_or(&[]),
        };
        for op in operands {
            if let Some(id) = operand_id(op) {
                if !global.contains(&id) {
                    return Err(Error::Malformed(format!(
                        "{:?} has id {id}, defined inside a function, as an operand",
                        inst.class.opcode
                    )));
                }
            }
        }
    }
    Ok(())
}

/// Every entry point and execution mode names a function.
fn check_entry_point_targets(module: &Module, functions: &HashSet<u32>) -> Result<(), Error> {
    let targets = module
        .entry_points
        .iter()
        .map(|e| e.operands.get(1))
        .chain(module.execution_modes.iter().map(|m| m.operands.first()));
    for target in targets {
        match target {
            Some(rspirv::dr::Operand::IdRef(f)) if functions.contains(f) => {}
            _ => {
                return Err(Error::Malformed(
                    "an entry point or execution mode names something that is not a function"
                        .into(),
                ))
            }
        }
    }
    Ok(())
}

/// The ids an instruction surely uses: its result type and id operands. An extended
/// instruction's operands past its set are typed by that set's grammar, which rspirv does not
/// know: debug-info literals read as ids there. Only the set itself is surely an id.
fn used_ids(inst: &Instruction) -> impl Iterator<Item = u32> + '_ {
    let operands = match inst.class.opcode {
        Op::ExtInst => &inst.operands[..inst.operands.len().min(1)],
        _ => &inst.operands[..],
    };
    inst.result_type.into_iter().chain(operands.iter().filter_map(operand_id))
}

/// The id an operand holds, whatever kind of id it is.
pub(crate) fn operand_id(op: &rspirv::dr::Operand) -> Option<u32> {
    match op {
        rspirv::dr::Operand::IdRef(id)
        | rspirv::dr::Operand::IdScope(id)
        | rspirv::dr::Operand::IdMemorySemantics(id) => Some(*id),
        _ => None,
    }
}

/// Checks that module-scope values use only values declared before them (a pointer type may
/// be announced by `OpTypeForwardPointer`; functions may be named anywhere), so that no value
/// is built from itself or from a later one. Found by the `spirv_postlink` fuzz target: a
/// cast of a function pointer to itself, which lowering function pointers turned into a
/// constant referring to nothing.
fn check_declaration_order(module: &Module) -> Result<(), Error> {
    let values: HashSet<u32> =
        module.types_global_values.iter().filter_map(|i| i.result_id).collect();
    let announced: HashSet<u32> = module
        .types_global_values
        .iter()
        .filter(|i| i.class.opcode == Op::TypeForwardPointer)
        .filter_map(|i| match i.operands.first() {
            Some(rspirv::dr::Operand::IdRef(p)) => Some(*p),
            _ => None,
        })
        .collect();
    let mut declared = HashSet::with_capacity(values.len());
    for inst in &module.types_global_values {
        if let Some(id) = used_ids(inst)
            .find(|id| values.contains(id) && !declared.contains(id) && !announced.contains(id))
        {
            return Err(Error::Malformed(format!(
                "{:?} uses id {id}, which is declared after it",
                inst.class.opcode
            )));
        }
        declared.extend(inst.result_id);
    }
    Ok(())
}

/// Checks that every function has a function type, that group decorations apply decoration
/// groups, and that linkage names only functions and module-scope variables: the linker folds
/// an import onto its definition and drops the import's declaration, which only those have.
/// Found by the `spirv_postlink` fuzz target: an imported function parameter, folded across
/// two inputs, was defined twice in the output; an imported function with a body, dropped by
/// the linker, left decorations of its parameters behind.
fn check_functions_and_linkage(module: &Module, functions: &HashSet<u32>) -> Result<(), Error> {
    let by_opcode = |op: Op| -> HashSet<u32> {
        module
            .types_global_values
            .iter()
            .filter(|i| i.class.opcode == op)
            .filter_map(|i| i.result_id)
            .collect()
    };
    let (function_types, variables) = (by_opcode(Op::TypeFunction), by_opcode(Op::Variable));
    for def in module.functions.iter().filter_map(|f| f.def.as_ref()) {
        if !matches!(def.operands.get(1), Some(rspirv::dr::Operand::IdRef(t)) if function_types.contains(t))
        {
            return Err(Error::Malformed(format!(
                "function {:?} does not have a function type",
                def.result_id
            )));
        }
    }
    // A group decoration applies a decoration group (what an image keeps of it follows the
    // group). Found by the `spirv_postlink` fuzz target: one applying a type.
    let groups: HashSet<u32> = module
        .annotations
        .iter()
        .filter(|a| a.class.opcode == Op::DecorationGroup)
        .filter_map(|a| a.result_id)
        .collect();
    for a in module
        .annotations
        .iter()
        .filter(|a| matches!(a.class.opcode, Op::GroupDecorate | Op::GroupMemberDecorate))
    {
        if !matches!(a.operands.first(), Some(rspirv::dr::Operand::IdRef(g)) if groups.contains(g))
        {
            return Err(Error::Malformed(format!(
                "{:?} applies something that is not a decoration group",
                a.class.opcode
            )));
        }
    }
    let defined: HashSet<u32> = module
        .functions
        .iter()
        .filter(|f| !f.blocks.is_empty())
        .filter_map(|f| f.def_id())
        .collect();
    for (target, name, linkage) in module.annotations.iter().filter_map(crate::symbols::linkage_of)
    {
        if !functions.contains(&target) && !variables.contains(&target) {
            return Err(Error::Malformed(format!(
                "linkage `{name}` on id {target}, which is neither a function nor a module-scope variable"
            )));
        }
        // An import is a declaration: the linker replaces it by its definition.
        if linkage == crate::symbols::Linkage::Import && defined.contains(&target) {
            return Err(Error::Malformed(format!("function `{name}` is imported but has a body")));
        }
    }
    Ok(())
}

/// Checks that a type declaration is built from types: what a pointer points to, the members
/// of a struct, the parameters of a function type and so on; an array's length is a constant.
/// Found by the `spirv_postlink` fuzz target: a pointer to a function.
fn check_type_operands(
    inst: &Instruction,
    types: &HashSet<u32>,
    functions: &HashSet<u32>,
) -> Result<(), Error> {
    let ids = inst.operands.iter().enumerate().filter_map(|(i, op)| match op {
        rspirv::dr::Operand::IdRef(id) => Some((i, *id)),
        _ => None,
    });
    for (i, id) in ids {
        let ok = match (inst.class.opcode, i) {
            (Op::TypeArray, 1) => !types.contains(&id) && !functions.contains(&id),
            (
                Op::TypeVector
                | Op::TypeMatrix
                | Op::TypeImage
                | Op::TypeSampledImage
                | Op::TypeArray
                | Op::TypeRuntimeArray
                | Op::TypeStruct
                | Op::TypePointer
                | Op::TypeFunction
                | Op::TypeForwardPointer,
                _,
            ) => types.contains(&id),
            _ => true,
        };
        if !ok {
            return Err(Error::Malformed(format!(
                "{:?} is built from id {id}, which is not {}",
                inst.class.opcode,
                if (inst.class.opcode, i) == (Op::TypeArray, 1) { "a constant" } else { "a type" }
            )));
        }
    }
    Ok(())
}

/// Checks that every id `inst` uses is visible to it, and that its result type is a type.
fn check_uses(
    inst: &Instruction,
    types: &HashSet<u32>,
    visible: impl Fn(u32) -> bool,
) -> Result<(), Error> {
    if let Some(ty) = inst.result_type {
        if !types.contains(&ty) {
            return Err(Error::Malformed(format!(
                "{:?} has result type {ty}, which is not a type",
                inst.class.opcode
            )));
        }
    }
    for id in used_ids(inst) {
        if !visible(id) {
            return Err(Error::Malformed(format!(
                "{:?} uses id {id}, which nothing it can see defines",
                inst.class.opcode
            )));
        }
    }
    Ok(())
}

/// Checks that every instruction's word count is at least 1 and stays inside the module, so
/// that no decoder reads past the end (rspirv's string decoder trusts the count). Found by
/// the `spirv_postlink` fuzz target.
fn check_framing(bytes: &[u8]) -> Result<(), Error> {
    const HEADER_WORDS: usize = 5;
    let words = bytes.len() / 4;
    if words < HEADER_WORDS {
        return Err(Error::Malformed(format!("{words} words, shorter than the header")));
    }
    let magic = u32::from_le_bytes(bytes[..4].try_into().unwrap());
    if magic != rspirv::spirv::MAGIC_NUMBER {
        return Err(Error::Malformed(format!(
            "bad magic {magic:#x} (big-endian modules are not supported)"
        )));
    }
    let mut at = HEADER_WORDS;
    while at < words {
        let first = u32::from_le_bytes(bytes[at * 4..at * 4 + 4].try_into().unwrap());
        let count = (first >> 16) as usize;
        if count == 0 || count > words - at {
            return Err(Error::Malformed(format!(
                "instruction at word {at} claims {count} words; {} remain",
                words - at
            )));
        }
        at += count;
    }
    Ok(())
}

/// Ids of a module's extended instruction sets other than those rspirv has grammars for.
pub(crate) fn untyped_sets(m: &Module) -> Vec<Word> {
    m.ext_inst_imports
        .iter()
        .filter(|i| !matches!(i.operands.first(), Some(Operand::LiteralString(name)) if name == "OpenCL.std" || name == "GLSL.std.450"))
        .filter_map(|i| i.result_id)
        .collect()
}

/// Serialises a module to SPIR-V bytes (little-endian words).
pub fn assemble(module: &Module) -> Vec<u8> {
    module.assemble().iter().flat_map(|w| w.to_le_bytes()).collect()
}

#[derive(Default)]
struct Loader {
    module: Module,
    function: Option<Function>,
    error: Option<String>,
}

impl Loader {
    fn fail(&mut self, message: String) -> ParseAction {
        self.error = Some(message);
        ParseAction::Stop
    }
}

impl Consumer for Loader {
    fn initialize(&mut self) -> ParseAction {
        ParseAction::Continue
    }

    fn finalize(&mut self) -> ParseAction {
        ParseAction::Continue
    }

    fn consume_header(&mut self, header: ModuleHeader) -> ParseAction {
        self.module.header = Some(header);
        ParseAction::Continue
    }

    fn consume_instruction(&mut self, inst: Instruction) -> ParseAction {
        let opcode = inst.class.opcode;
        if let Some(function) = &mut self.function {
            match opcode {
                Op::FunctionParameter => function.parameters.push(inst),
                Op::Label => {
                    function.blocks.push(Block { label: Some(inst), instructions: vec![] })
                }
                Op::FunctionEnd => {
                    let mut function = self.function.take().unwrap();
                    function.end = Some(inst);
                    self.module.functions.push(function);
                }
                Op::Function => return self.fail("OpFunction inside a function".into()),
                _ => match function.blocks.last_mut() {
                    Some(block) => {
                        block.instructions.push(type_literals(&self.module.ext_inst_imports, inst))
                    }
                    // Debug line information may precede the first label; it carries no meaning
                    // there, so it is dropped rather than refused.
                    None if matches!(opcode, Op::Line | Op::NoLine | Op::ExtInst) => {}
                    None => {
                        return self
                            .fail(format!("{opcode:?} before the first block of a function"))
                    }
                },
            }
            return ParseAction::Continue;
        }
        let m = &mut self.module;
        match opcode {
            Op::Capability => m.capabilities.push(inst),
            Op::Extension => m.extensions.push(inst),
            Op::ExtInstImport => m.ext_inst_imports.push(inst),
            Op::MemoryModel => m.memory_model = Some(inst),
            Op::EntryPoint => m.entry_points.push(inst),
            Op::ExecutionMode | Op::ExecutionModeId => m.execution_modes.push(inst),
            Op::String | Op::Source | Op::SourceExtension | Op::SourceContinued => {
                m.debug_string_source.push(inst)
            }
            Op::Name | Op::MemberName => m.debug_names.push(inst),
            Op::ModuleProcessed => m.debug_module_processed.push(inst),
            Op::Decorate
            | Op::MemberDecorate
            | Op::DecorationGroup
            | Op::GroupDecorate
            | Op::GroupMemberDecorate
            | Op::DecorateId
            | Op::DecorateString
            | Op::MemberDecorateString => m.annotations.push(inst),
            Op::Function => {
                self.function = Some(Function { def: Some(inst), ..Function::default() })
            }
            Op::FunctionParameter | Op::FunctionEnd | Op::Label => {
                return self.fail(format!("{opcode:?} outside a function"))
            }
            _ => m.types_global_values.push(inst),
        }
        ParseAction::Continue
    }
}

/// An `OpenCL.std` instruction with its literal operands as literals. rspirv reads every
/// operand of an extended instruction as an id, and the few literals of `OpenCL.std` (the `n`
/// of `vloadn`, `vload_halfn` and `vloada_halfn`, the rounding mode of the `vstore*_r`
/// instructions) would then be renumbered with the ids: linked after another module,
/// `vstore_half_rte`'s mode 0 became 74, and `vload4`'s 4 became whatever id 4 was folded onto.
fn type_literals(sets: &[Instruction], mut inst: Instruction) -> Instruction {
    let literal_at = match inst.operands.as_slice() {
        [Operand::IdRef(set), Operand::LiteralExtInstInteger(n), ..]
            if inst.class.opcode == Op::ExtInst && is_opencl_std(sets, *set) =>
        {
            match Cl::from_u32(*n) {
                // (offset, p, n)
                Some(Cl::vloadn | Cl::vload_halfn | Cl::vloada_halfn) => 4,
                // (data, offset, p, mode)
                Some(Cl::vstore_half_r | Cl::vstore_halfn_r | Cl::vstorea_halfn_r) => 5,
                _ => return inst,
            }
        }
        _ => return inst,
    };
    if let Some(op) = inst.operands.get_mut(literal_at) {
        if let Operand::IdRef(word) = *op {
            *op = Operand::LiteralBit32(word);
        }
    }
    inst
}

/// Whether `set` is an `OpExtInstImport` of `OpenCL.std`.
pub(crate) fn is_opencl_std(sets: &[Instruction], set: Word) -> bool {
    sets.iter().any(|i| {
        i.result_id == Some(set) && matches!(i.operands.first(), Some(Operand::LiteralString(name)) if name == "OpenCL.std")
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use rspirv::dr::Builder;
    use rspirv::spirv;

    #[test]
    fn round_trip_is_byte_identical() {
        let mut b = crate::test_support::kernel_builder(&[spirv::Capability::Addresses]);
        let void = b.type_void();
        let fn_ty = b.type_function(void, vec![]);
        b.begin_function(void, None, spirv::FunctionControl::NONE, fn_ty).unwrap();
        b.begin_block(None).unwrap();
        b.ret().unwrap();
        b.end_function().unwrap();
        let bytes = assemble(&b.module());
        assert_eq!(assemble(&load(&bytes).unwrap()), bytes);
    }

    #[test]
    fn a_word_count_past_the_end_is_malformed() {
        // The fuzzer's first find: a string operand whose instruction claims more words than
        // the module has made rspirv slice out of bounds.
        let mut b = crate::test_support::kernel_builder(&[]);
        b.source_extension("some text");
        let mut bytes = assemble(&b.module());
        let last = bytes.len() - 4 * 4; // OpSourceExtension: 1 word + 3 words of text
        bytes[last + 2] = 0xff; // its word count's low byte
        let result = load(&bytes);
        assert!(matches!(&result, Err(Error::Malformed(m)) if m.contains("claims")), "{result:?}");
    }

    #[test]
    fn linkage_only_names_functions_and_module_scope_variables() {
        let mut b = crate::test_support::kernel_builder(&[spirv::Capability::Linkage]);
        let int = b.type_int(32, 0);
        let int_fn = b.type_function(int, vec![int]);
        let f = b.begin_function(int, None, spirv::FunctionControl::NONE, int_fn).unwrap();
        let p = b.function_parameter(int).unwrap();
        b.end_function().unwrap();
        let base = b.module();
        let linked = |target| {
            let mut b = Builder::new_from_module(base.clone());
            let kind = rspirv::dr::Operand::LinkageType(spirv::LinkageType::Import);
            b.decorate(
                target,
                spirv::Decoration::LinkageAttributes,
                vec![rspirv::dr::Operand::LiteralString("f".into()), kind],
            );
            assemble(&b.module())
        };
        assert!(load(&linked(f)).is_ok());
        let result = load(&linked(p));
        assert!(
            matches!(&result, Err(Error::Malformed(m)) if m.contains("linkage `f` on id")),
            "{result:?}"
        );
    }

    #[test]
    fn garbage_is_malformed() {
        assert!(matches!(load(&[1, 2, 3]), Err(Error::Malformed(_))));
        assert!(matches!(load(&[0; 64]), Err(Error::Malformed(_))));
    }
}

#[cfg(test)]
mod fuzz_regressions {
    /// Every input the fuzzers found a crash with is refused by the loader now.
    #[test]
    fn crash_inputs_are_errors_now() {
        let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fuzz_regressions");
        let mut count = 0;
        for entry in std::fs::read_dir(dir).unwrap() {
            let path = entry.unwrap().path();
            let bytes = std::fs::read(&path).unwrap();
            assert!(super::load(&bytes).is_err(), "{} loads", path.display());
            count += 1;
        }
        assert_eq!(count, 15);
    }
}
