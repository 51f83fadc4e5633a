//! C99 `inline` definitions as llvm-spirv-15 writes them.
//!
//! OpenCL C follows C99: a function declared `inline` (neither `static` nor `extern`) is an
//! *inline definition*, which clang emits `available_externally`: a body for the optimiser to
//! inline, while the program must hold an external definition elsewhere. llvm-spirv-15 writes
//! such a function as a body decorated `LinkageAttributes … Import`, which SPIR-V does not allow
//! (an import is a declaration) and which [`crate::load`] refuses. OpenCL drivers compile
//! these programs all the same (Rodinia, SHOC and Parboil kernels are full of `inline`
//! helpers): they optimise, inline every call and drop the body. We make SPIR-V from the front
//! end's IR without optimising, so the calls remain; the body becomes an ordinary definition
//! local to its module, which is what the driver's inlining amounts to.

use std::collections::HashSet;

use rspirv::spirv::{Decoration, LinkageType, Op};

const HEADER_WORDS: usize = 5;

/// Drops the `Import` linkage of every function that has a body, making it a definition local
/// to its module. Returns the rewritten module, or `None` when there is nothing to drop (or
/// the bytes are not well-framed SPIR-V, which [`crate::load`] then reports).
pub fn localize_inline_definitions(bytes: &[u8]) -> Option<Vec<u8>> {
    if !bytes.len().is_multiple_of(4) || bytes.len() < HEADER_WORDS * 4 {
        return None;
    }
    let word = |at: usize| u32::from_le_bytes(bytes[at * 4..at * 4 + 4].try_into().unwrap());
    if word(0) != rspirv::spirv::MAGIC_NUMBER {
        return None;
    }
    let words = bytes.len() / 4;
    let mut defined = HashSet::new();
    let mut imports = Vec::new(); // (first word, word count, target)
    let mut function = None;
    let mut at = HEADER_WORDS;
    while at < words {
        let count = (word(at) >> 16) as usize;
        if count == 0 || count > words - at {
            return None;
        }
        let opcode = word(at) & 0xffff;
        if opcode == Op::Function as u32 && count >= 3 {
            function = Some(word(at + 2));
        } else if opcode == Op::Label as u32 {
            defined.extend(function.take());
        } else if opcode == Op::FunctionEnd as u32 {
            function = None;
        } else if opcode == Op::Decorate as u32
            && count >= 4
            && word(at + 2) == Decoration::LinkageAttributes as u32
            && word(at + count - 1) == LinkageType::Import as u32
        {
            imports.push((at, count, word(at + 1)));
        }
        at += count;
    }
    let drop: Vec<(usize, usize)> = imports
        .into_iter()
        .filter(|(_, _, target)| defined.contains(target))
        .map(|(at, count, _)| (at, count))
        .collect();
    if drop.is_empty() {
        return None;
    }
    let mut out = Vec::with_capacity(bytes.len());
    let mut from = 0;
    for (at, count) in drop {
        out.extend_from_slice(&bytes[from * 4..at * 4]);
        from = at + count;
    }
    out.extend_from_slice(&bytes[from * 4..]);
    Some(out)
}

#[cfg(test)]
mod tests {
    use rspirv::dr::Operand;
    use rspirv::spirv::{self, Decoration, LinkageType};

    use super::localize_inline_definitions;
    use crate::{assemble, load, Symbols};

    /// A kernel calling `twice`, which has a body and, as llvm-spirv-15 writes a C99 inline
    /// definition, `Import` linkage; and `other`, a real import without a body.
    fn inline_module() -> Vec<u8> {
        let mut b = crate::test_support::kernel_builder(&[
            spirv::Capability::Addresses,
            spirv::Capability::Linkage,
        ]);
        let int = b.type_int(32, 0);
        let void = b.type_void();
        let int_fn = b.type_function(int, vec![int]);
        let kernel_fn = b.type_function(void, vec![]);
        let twice = b.begin_function(int, None, spirv::FunctionControl::INLINE, int_fn).unwrap();
        let x = b.function_parameter(int).unwrap();
        b.begin_block(None).unwrap();
        let y = b.i_add(int, None, x, x).unwrap();
        b.ret_value(y).unwrap();
        b.end_function().unwrap();
        let other = b.begin_function(int, None, spirv::FunctionControl::NONE, int_fn).unwrap();
        b.function_parameter(int).unwrap();
        b.end_function().unwrap();
        let kernel = b.begin_function(void, None, spirv::FunctionControl::NONE, kernel_fn).unwrap();
        b.begin_block(None).unwrap();
        let one = b.constant_bit32(int, 1);
        let t = b.function_call(int, None, twice, vec![one]).unwrap();
        b.function_call(int, None, other, vec![t]).unwrap();
        b.ret().unwrap();
        b.end_function().unwrap();
        b.entry_point(spirv::ExecutionModel::Kernel, kernel, "k", vec![]);
        for (target, name) in [(twice, "twice"), (other, "other")] {
            b.decorate(
                target,
                Decoration::LinkageAttributes,
                vec![
                    Operand::LiteralString(name.into()),
                    Operand::LinkageType(LinkageType::Import),
                ],
            );
        }
        assemble(&b.module())
    }

    #[test]
    fn an_inline_definition_becomes_a_local_definition() {
        let bytes = inline_module();
        assert!(load(&bytes).is_err(), "the loader refuses an import with a body");
        let fixed = localize_inline_definitions(&bytes).expect("something to fix");
        let module = load(&fixed).expect("loads once localized");
        let symbols = Symbols::of(&module);
        let names: Vec<&str> = symbols.linkage.values().map(|(n, _)| n.as_str()).collect();
        assert_eq!(names, ["other"], "the real import keeps its linkage");
        assert_eq!(symbols.defined_functions.len(), 2, "twice and the kernel keep their bodies");
    }

    #[test]
    fn modules_without_inline_definitions_are_left_alone() {
        let fixed = localize_inline_definitions(&inline_module()).unwrap();
        assert_eq!(localize_inline_definitions(&fixed), None);
        assert_eq!(localize_inline_definitions(&[1, 2, 3]), None);
        assert_eq!(localize_inline_definitions(&[0; 64]), None);
        let mut overlong = inline_module();
        let last = overlong.len() - 4; // OpFunctionEnd: one word
        overlong[last + 2] = 2; // now claims two
        assert_eq!(localize_inline_definitions(&overlong), None, "bad framing is load's to report");
    }
}
