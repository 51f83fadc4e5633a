//! Source locations in SPIR-V: the `OpLine` a function's instructions are under, and the
//! `OpString` file names it refers to. Below both the call graph (`calls.rs`), which records
//! where each call is, and the feature analysis (`features.rs`), which shows call chains with
//! them.

use std::collections::HashMap;
use std::fmt;

use rspirv::dr::{Instruction, Module, Operand};
use rspirv::spirv::{Op, Word};

/// A source location from `OpLine`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Location {
    /// The file name: the `OpString` that `OpLine` names, or `?` when there is none.
    pub file: String,
    /// The line number, as `OpLine` gives it.
    pub line: u32,
    /// The column number, as `OpLine` gives it.
    pub column: u32,
}

impl Location {
    /// Follows `OpLine` and `OpNoLine` through a function: updates `current` and says whether
    /// `inst` was one of them. `files` names the `OpString` ids ([`file_names`]).
    pub(crate) fn track(
        current: &mut Option<Location>,
        inst: &Instruction,
        files: &HashMap<Word, &str>,
    ) -> bool {
        match (inst.class.opcode, inst.operands.as_slice()) {
            (
                Op::Line,
                [Operand::IdRef(file), Operand::LiteralBit32(line), Operand::LiteralBit32(column)],
            ) => {
                *current = Some(Location {
                    file: files.get(file).copied().unwrap_or("?").to_string(),
                    line: *line,
                    column: *column,
                });
                true
            }
            (Op::Line, _) => true,
            (Op::NoLine, _) => {
                *current = None;
                true
            }
            _ => false,
        }
    }
}

/// The module's `OpString`s by id: the file names of `OpLine`.
pub(crate) fn file_names(module: &Module) -> HashMap<Word, &str> {
    module
        .debug_string_source
        .iter()
        .filter(|i| i.class.opcode == Op::String)
        .filter_map(|i| match i.operands.first() {
            Some(Operand::LiteralString(s)) => Some((i.result_id?, s.as_str())),
            _ => None,
        })
        .collect()
}

impl fmt::Display for Location {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}:{}:{}", self.file, self.line, self.column)
    }
}
