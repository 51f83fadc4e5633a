//! What a failure of llvm-spirv-15 means for the person who wrote the source: the cause in
//! words, the source lines involved, and what to try.
//!
//! The translator names an LLVM instruction or intrinsic, never a source line. To find the
//! line, the source is compiled once more with the same flags to textual IR with line tables
//! (`-gline-tables-only -S`, which numbers values the same way), and the instruction the
//! translator named is looked up there by its text; its `!dbg` location gives file, line and
//! column.

use std::collections::HashMap;
use std::path::{Path, PathBuf};

/// Why llvm-spirv-15 could not translate a source, in the words of [`Error::Translate`](crate::Error::Translate).
#[derive(Debug, thiserror::Error)]
#[error(
    "{source_path}: llvm-spirv-15 cannot translate it to SPIR-V: {cause}{}\nto try: {remedy}\ntranslator: {message}\ncommand: {command}",
    .locations.iter().map(|l| format!("\n{l}")).collect::<String>()
)]
pub struct Untranslatable {
    /// The source that did not translate.
    pub source_path: PathBuf,
    /// The source lines involved, each as `FILE:LINE:COL` with the line and a caret.
    pub locations: Vec<String>,
    /// The cause in words: the construct the translator could not take (an LLVM intrinsic, a
    /// vector width, an instruction).
    pub cause: String,
    /// What to try instead.
    pub remedy: String,
    /// The translator's own message, without a stack dump.
    pub message: String,
    /// The translator's command line.
    pub command: String,
}

impl Untranslatable {
    /// From the translator's `stderr` and the source's textual IR with line tables (`ir`,
    /// empty when it could not be made).
    pub(crate) fn new(
        source_path: PathBuf,
        command: String,
        stderr: &str,
        ir: &str,
    ) -> Untranslatable {
        let message = message(stderr);
        let (cause, remedy) = explain(&message);
        let locations = locate(&message, ir).iter().map(render).collect();
        Untranslatable { source_path, locations, cause, remedy, message, command }
    }
}

/// What the translator's message names as the construct it could not take.
#[derive(Debug, PartialEq)]
enum Culprit {
    /// An instruction, as LLVM prints it (`%6 = freeze i32 %5`).
    Instruction(String),
    /// A call of an LLVM intrinsic or another function (`llvm.readcyclecounter`).
    Function(String),
    /// A vector of a width SPIR-V lacks: of this many elements, or any such width.
    Vector(Option<u32>),
}

/// A place in the sources.
#[derive(Debug, PartialEq)]
pub(crate) struct Location {
    pub file: PathBuf,
    pub line: u32,
    pub column: u32,
}

/// The translator's message without the stack dump of an abort (`PLEASE submit a bug
/// report…`, `Stack dump:`, frames) and without the translator's own source positions; a
/// line that continues the one before (`Unexpected llvm intrinsic:` then the name) is joined
/// to it.
pub(crate) fn message(stderr: &str) -> String {
    let mut out = String::new();
    for line in stderr.lines() {
        if line.starts_with("PLEASE submit") || line.starts_with("Stack dump:") {
            break;
        }
        let line = match line.find(" [Src: ") {
            Some(at) => &line[..at],
            None => line,
        };
        if line.trim().is_empty() {
            continue;
        }
        if !out.is_empty() {
            out.push(if out.ends_with(':') { ' ' } else { '\n' });
        }
        out.push_str(line.trim());
    }
    out
}

/// The cause in words and what to try, from the translator's message.
pub(crate) fn explain(message: &str) -> (String, String) {
    let culprit = culprit(message);
    if let Some(Culprit::Function(name)) = &culprit {
        if name.starts_with("llvm.") {
            return (
                format!("the source uses LLVM intrinsic `{name}` (a clang `__builtin_…`), which has no SPIR-V form"),
                "use an OpenCL C builtin that does the same, or keep the code that needs it out of device code".into(),
            );
        }
        return (
            format!("the call of `{name}` has no SPIR-V form"),
            "call it another way (a direct call of a function the source declares), or keep it out of device code".into(),
        );
    }
    if let Some(Culprit::Vector(Some(count))) = culprit {
        return (
            format!("a vector of {count} elements: SPIR-V vectors have 2, 3, 4, 8 or 16"),
            "use a vector of 2, 3, 4, 8 or 16 elements, or an array".into(),
        );
    }
    if let Some(Culprit::Vector(None)) = culprit {
        return (
            "a value the translator cannot reinterpret, such as a vector of more than 16 elements (SPIR-V vectors have 2, 3, 4, 8 or 16)"
                .into(),
            "use vectors of 2, 3, 4, 8 or 16 elements, or arrays".into(),
        );
    }
    if let Some(bits) = number_after(message, "Invalid bit width in input: ") {
        return (
            format!("an integer or boolean vector of {bits} bits, which SPIR-V for OpenCL does not have (8, 16, 32 and 64 bits)"),
            "use char, short, int or long (and their vectors), not _BitInt or vectors of bool".into(),
        );
    }
    if let Some(Culprit::Instruction(text)) = &culprit {
        let opcode =
            text.split('=').next_back().unwrap_or(text).split_whitespace().next().unwrap_or("?");
        return (
            format!("LLVM instruction `{opcode}` has no SPIR-V form in llvm-spirv-15"),
            "write the construct at the line shown another way; if it is plain OpenCL C, please report it with this message".into(),
        );
    }
    (
        "llvm-spirv-15 cannot translate what clang made of this source".into(),
        "simplify the construct the translator names; if it is plain OpenCL C, please report it with this message".into(),
    )
}

fn culprit(message: &str) -> Option<Culprit> {
    let after = |prefix: &str| {
        Some(message[message.find(prefix)? + prefix.len()..].lines().next()?.trim().to_string())
    };
    if let Some(text) = after("Can't translate llvm instruction:") {
        return Some(Culprit::Instruction(text));
    }
    if let Some(name) =
        after("Unexpected llvm intrinsic:").or_else(|| after("Unsupported function call:"))
    {
        return Some(Culprit::Function(name.trim_start_matches('@').to_string()));
    }
    if let Some(count) = number_after(message, "Unsupported vector type with ") {
        return Some(Culprit::Vector(Some(count)));
    }
    message.contains("Cannot translate source of bitcast").then_some(Culprit::Vector(None))
}

/// Whether `line` of IR uses a vector of `count` elements (of any width SPIR-V lacks when
/// `None`).
fn uses_vector(line: &str, count: Option<u32>) -> bool {
    line.match_indices('<').any(|(at, _)| {
        let rest = &line[at + 1..];
        let digits: String = rest.chars().take_while(char::is_ascii_digit).collect();
        let Ok(n) = digits.parse::<u32>() else { return false };
        rest[digits.len()..].starts_with(" x ")
            && count.map_or(![2, 3, 4, 8, 16].contains(&n), |c| c == n)
    })
}

fn number_after(message: &str, prefix: &str) -> Option<u32> {
    let at = message.find(prefix)? + prefix.len();
    let digits: String = message[at..].chars().take_while(char::is_ascii_digit).collect();
    digits.parse().ok()
}

/// The places in `ir` (textual LLVM IR with line tables) of the construct the translator's
/// message names; empty when it names none or the IR has no location for it.
pub(crate) fn locate(message: &str, ir: &str) -> Vec<Location> {
    let Some(culprit) = culprit(message) else { return Vec::new() };
    let metadata: HashMap<&str, &str> = ir
        .lines()
        .filter_map(|l| l.strip_prefix('!')?.split_once(" = "))
        .filter(|(id, _)| id.bytes().all(|b| b.is_ascii_digit()))
        .collect();
    let mut out: Vec<Location> = Vec::new();
    for line in ir.lines().map(str::trim) {
        let matches = match &culprit {
            Culprit::Instruction(text) => line
                .strip_prefix(text.as_str())
                .is_some_and(|rest| rest.is_empty() || rest.starts_with(',')),
            Culprit::Function(name) => {
                line.contains("call ") && line.contains(&format!("@{name}("))
            }
            Culprit::Vector(count) => uses_vector(line, *count),
        };
        let Some(id) = matches.then(|| line.rsplit_once("!dbg !")).flatten().map(|(_, id)| id)
        else {
            continue;
        };
        if let Some(location) =
            location(&metadata, id.trim_end_matches(|c: char| !c.is_ascii_digit()))
        {
            if !out.contains(&location) && out.len() < 3 {
                out.push(location);
            }
        }
    }
    out
}

/// `!ID = !DILocation(line: L, column: C, scope: !S)`, with the file of its scope.
fn location(metadata: &HashMap<&str, &str>, id: &str) -> Option<Location> {
    let text = metadata.get(id)?;
    let line = field(text, "line: ")?.parse().ok()?;
    let column = field(text, "column: ").and_then(|c| c.parse().ok()).unwrap_or(0);
    let mut scope = field(text, "scope: !")?;
    // Lexical blocks and subprograms name their file; follow scopes until one does.
    for _ in 0..64 {
        let scope_text = metadata.get(scope)?;
        if let Some(file) = field(scope_text, "file: !") {
            let file_text = metadata.get(file)?;
            let name = quoted(file_text, "filename: \"")?;
            let dir = quoted(file_text, "directory: \"").unwrap_or_default();
            let file = Path::new(&dir).join(name).components().collect();
            return Some(Location { file, line, column });
        }
        scope = field(scope_text, "scope: !")?;
    }
    None
}

/// The value of `key` in a metadata node's fields: up to the next `,` or `)`.
fn field<'a>(text: &'a str, key: &str) -> Option<&'a str> {
    let at = text.find(key)? + key.len();
    text[at..].split([',', ')']).next()
}

fn quoted(text: &str, key: &str) -> Option<String> {
    let at = text.find(key)? + key.len();
    Some(text[at..].split('"').next()?.to_string())
}

/// `FILE:LINE:COL`, the source line and a caret under the column, as compilers show them.
pub(crate) fn render(location: &Location) -> String {
    let mut out = format!("{}:{}:{}", location.file.display(), location.line, location.column);
    let text = std::fs::read_to_string(&location.file).ok();
    if let Some(source_line) =
        text.as_deref().and_then(|t| t.lines().nth(location.line.saturating_sub(1) as usize))
    {
        let caret = " ".repeat(location.column.saturating_sub(1) as usize);
        out.push_str(&format!("\n    {source_line}\n    {caret}^"));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    const IR: &str = r#"define spir_kernel void @k(ptr addrspace(1) %out) !dbg !8 {
  %6 = freeze i32 %5, !dbg !19
  %7 = add i32 %6, 1, !dbg !20
  %9 = call i64 @llvm.readcyclecounter(), !dbg !34
  %10 = insertelement <32 x float> undef, float %8, i32 0, !dbg !20
}
!1 = !DIFile(filename: "k.cl", directory: "/src")
!8 = distinct !DISubprogram(name: "k", scope: !1, file: !1, line: 2, type: !9)
!19 = !DILocation(line: 3, column: 12, scope: !8)
!20 = !DILocation(line: 4, column: 3, scope: !8)
!30 = !DIFile(filename: "/inc/h.h", directory: "/src")
!31 = distinct !DISubprogram(name: "cyc", scope: !30, file: !30, line: 1, type: !9)
!32 = distinct !DILexicalBlock(scope: !31, file: !30, line: 1, column: 20)
!34 = !DILocation(line: 1, column: 33, scope: !32)
"#;

    #[test]
    fn an_instruction_is_found_by_its_text() {
        let message = message("InvalidInstruction: Can't translate llvm instruction:\n   %6 = freeze i32 %5 [Src: ./lib/SPIRV/SPIRVWriter.cpp:2140 false ]\n");
        assert_eq!(
            locate(&message, IR),
            [Location { file: "/src/k.cl".into(), line: 3, column: 12 }]
        );
        assert!(explain(&message).0.contains("`freeze`"), "{:?}", explain(&message));
    }

    #[test]
    fn an_intrinsic_is_found_by_its_calls_through_lexical_blocks() {
        let message = message("InvalidFunctionCall: Unexpected llvm intrinsic:\n llvm.readcyclecounter [Src: ./lib/SPIRV/SPIRVWriter.cpp:3837 false ]\n");
        assert_eq!(
            message,
            "InvalidFunctionCall: Unexpected llvm intrinsic: llvm.readcyclecounter"
        );
        assert_eq!(
            locate(&message, IR),
            [Location { file: "/inc/h.h".into(), line: 1, column: 33 }]
        );
        let (cause, remedy) = explain(&message);
        assert!(
            cause.contains("`llvm.readcyclecounter`") && remedy.contains("OpenCL C builtin"),
            "{cause} / {remedy}"
        );
    }

    #[test]
    fn an_abort_keeps_the_message_and_drops_the_stack_dump() {
        let stderr = "LLVM ERROR: Unsupported vector type with 64 elements\nPLEASE submit a bug report to https://github.com/llvm/llvm-project/issues/\nStack dump:\n #0 0x0 llvm::sys::PrintStackTrace\n";
        assert_eq!(message(stderr), "LLVM ERROR: Unsupported vector type with 64 elements");
        assert!(explain(&message(stderr)).0.starts_with("a vector of 64 elements"));
        assert!(locate(&message(stderr), IR).is_empty());
    }

    #[test]
    fn a_vector_too_wide_is_found_where_it_is_used() {
        let message = message("LLVM ERROR: Cannot translate source of bitcast instruction.\nPLEASE submit a bug report\n");
        assert_eq!(
            locate(&message, IR),
            [Location { file: "/src/k.cl".into(), line: 4, column: 3 }]
        );
        assert!(explain(&message).0.contains("more than 16 elements"));
    }

    #[test]
    fn odd_bit_widths_are_explained() {
        assert!(explain("InvalidBitWidth: Invalid bit width in input: 4").0.contains("of 4 bits"));
    }
}
