//! The Rust signatures of a device crate's functions, read from its sources: what SPIR-V cannot
//! learn from LLVM's IR. rustc's IR has opaque pointers (`ptr`), and LLVM's SPIR-V back end
//! guesses a pointer parameter's pointee from how the body uses it (a `*const f32` read
//! through byte offsets comes out `uchar*`); a definition in another library declares
//! `float*`, and a linker matches types exactly. Integers have no sign in SPIR-V either way.
//!
//! This is a scanner, not a parser: it finds `fn NAME(PARAMS) -> RET` wherever it is written
//! (an `extern "C"` block, an item, a `kernel!` invocation), skipping comments, strings and
//! character literals, and reads each parameter's type as far as SPIR-V needs it: a scalar,
//! a pointer (`*const T`, `*mut T`, `&T`, `&mut T`) to one, or something else. A name written
//! twice with different signatures is ambiguous, and left to the back end's guess.

use std::collections::HashMap;

/// A type as far as a device function's SPIR-V type goes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum RustType {
    /// A primitive number: `f32`, `u32`, `usize`, …
    Scalar(Scalar),
    /// A pointer or reference; `mutable` is false for `*const T` and `&T`.
    Pointer { pointee: Box<RustType>, mutable: bool },
    /// Anything else: a struct, an array, a type alias, a generic.
    Other(String),
}

/// The primitive numbers, with their width in bits.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Scalar {
    /// An integer of this many bits (signedness is lost in SPIR-V), `bool` as 8.
    Int { bits: u32, signed: bool },
    /// A floating-point number of this many bits.
    Float { bits: u32 },
}

impl RustType {
    /// The type's name in OpenCL C, as a kernel's `kernel_arg_type` writes it (`float*`,
    /// `uint`); `None` for what OpenCL C has no name for.
    pub(crate) fn c_name(&self) -> Option<String> {
        match self {
            RustType::Scalar(Scalar::Float { bits: 32 }) => Some("float".into()),
            RustType::Scalar(Scalar::Float { bits: 64 }) => Some("double".into()),
            RustType::Scalar(Scalar::Float { .. }) => None,
            RustType::Scalar(Scalar::Int { bits, signed }) => {
                let name = match bits {
                    8 => "char",
                    16 => "short",
                    32 => "int",
                    64 => "long",
                    _ => return None,
                };
                Some(if *signed { name.to_string() } else { format!("u{name}") })
            }
            RustType::Pointer { pointee, .. } => Some(format!("{}*", pointee.c_name()?)),
            RustType::Other(_) => None,
        }
    }
}

/// One function's parameters (name, type) and result.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Signature {
    /// Each parameter's pattern (`x`, `mut x`, `_`) and type.
    pub(crate) params: Vec<(String, RustType)>,
    /// The result, `None` for `()` and `!`.
    pub(crate) result: Option<RustType>,
}

/// Every function signature found in some sources, by name.
#[derive(Debug, Default)]
pub(crate) struct Signatures {
    by_name: HashMap<String, Vec<Signature>>,
}

impl Signatures {
    /// Reads the signatures of every `fn` in `source`.
    pub(crate) fn add_source(&mut self, source: &str) {
        let tokens = tokens(source);
        let mut i = 0;
        while i < tokens.len() {
            // A function whose symbol is not its name (`#[link_name]`, `#[export_name]`) is
            // not the symbol's signature: left to the back end rather than matched wrongly.
            let renamed = tokens[..i]
                .iter()
                .rev()
                .take_while(|t| !matches!(**t, ";" | "}" | "{"))
                .any(|t| matches!(*t, "link_name" | "export_name"));
            if tokens[i] == "fn" && !renamed {
                if let Some((name, signature, next)) = function(&tokens, i + 1) {
                    let known = self.by_name.entry(name).or_default();
                    if !known.contains(&signature) {
                        known.push(signature);
                    }
                    i = next;
                    continue;
                }
            }
            i += 1;
        }
    }

    /// The one signature of `name` with `arity` parameters; `None` when there is none, or
    /// several that differ.
    pub(crate) fn get(&self, name: &str, arity: usize) -> Option<&Signature> {
        let mut matching = self.by_name.get(name)?.iter().filter(|s| s.params.len() == arity);
        let first = matching.next()?;
        matching.next().is_none().then_some(first)
    }
}

/// `NAME(PARAMS) [-> RET]` from `tokens[at..]`; the index after the result type. `None` for a
/// generic function or what does not read as a signature.
fn function(tokens: &[&str], at: usize) -> Option<(String, Signature, usize)> {
    let name = *tokens.get(at)?;
    if !is_ident(name) {
        return None;
    }
    let mut open = at + 1;
    // Lifetimes alone do not make a function generic.
    if tokens.get(open) == Some(&"<") {
        let close = matching(tokens, open)?;
        if !tokens[open + 1..close].iter().all(|t| t.starts_with('\'') || *t == ",") {
            return None;
        }
        open = close + 1;
    }
    if tokens.get(open) != Some(&"(") {
        return None;
    }
    let close = matching(tokens, open)?;
    let mut params = Vec::new();
    for param in split_commas(&tokens[open + 1..close]) {
        if param.is_empty() {
            continue;
        }
        // `self` and friends: a method, not an `extern "C"` function.
        let colon = param.iter().position(|t| *t == ":")?;
        let pattern = param[..colon].join(" ");
        params.push((pattern, rust_type(&param[colon + 1..])));
    }
    let mut next = close + 1;
    let mut result = None;
    if tokens.get(next) == Some(&"-") && tokens.get(next + 1) == Some(&">") {
        let start = next + 2;
        let end = (start..tokens.len())
            .find(|&k| matches!(tokens[k], "{" | ";" | "where"))
            .unwrap_or(tokens.len());
        let ty = &tokens[start..end];
        result = (ty != ["!"] && ty != ["(", ")"]).then(|| rust_type(ty));
        next = end;
    }
    let name = name.strip_prefix("r#").unwrap_or(name);
    Some((name.to_string(), Signature { params, result }, next))
}

/// A type's tokens read: pointers and references to what they point at, primitive names (the
/// last segment of a path, so `core::ffi::c_int` too); anything else as its text.
fn rust_type(tokens: &[&str]) -> RustType {
    match tokens {
        ["*", "const", rest @ ..] => pointer(rest, false),
        ["*", "mut", rest @ ..] => pointer(rest, true),
        ["&", rest @ ..] | ["&&", rest @ ..] => {
            let rest = match rest {
                [lifetime, rest @ ..] if lifetime.starts_with('\'') => rest,
                rest => rest,
            };
            match rest {
                ["mut", rest @ ..] => pointer(rest, true),
                rest => pointer(rest, false),
            }
        }
        _ => {
            let last = tokens.rsplit(|t| *t == "::").next().unwrap_or(tokens);
            match last {
                [name] => {
                    scalar(name).map_or_else(|| RustType::Other(name.to_string()), RustType::Scalar)
                }
                _ => RustType::Other(tokens.join(" ")),
            }
        }
    }
}

fn pointer(pointee: &[&str], mutable: bool) -> RustType {
    RustType::Pointer { pointee: Box::new(rust_type(pointee)), mutable }
}

/// A primitive's width: Rust's own names and `core::ffi`'s for C's types on these devices.
fn scalar(name: &str) -> Option<Scalar> {
    let int = |bits, signed| Some(Scalar::Int { bits, signed });
    match name {
        "f32" | "c_float" => Some(Scalar::Float { bits: 32 }),
        "f64" | "c_double" => Some(Scalar::Float { bits: 64 }),
        "i8" | "c_char" | "c_schar" => int(8, true),
        "u8" | "c_uchar" | "bool" => int(8, false),
        "i16" | "c_short" => int(16, true),
        "u16" | "c_ushort" => int(16, false),
        "i32" | "c_int" => int(32, true),
        "u32" | "c_uint" => int(32, false),
        "i64" | "isize" | "c_long" | "c_longlong" => int(64, true),
        "u64" | "usize" | "c_ulong" | "c_ulonglong" => int(64, false),
        _ => None,
    }
}

/// The index of the bracket closing the one at `open`.
fn matching(tokens: &[&str], open: usize) -> Option<usize> {
    let mut depth = 0usize;
    for (k, t) in tokens.iter().enumerate().skip(open) {
        match *t {
            // The `>` of `->` closes nothing.
            ">" if k > 0 && tokens[k - 1] == "-" => {}
            "(" | "[" | "{" | "<" => depth += 1,
            ")" | "]" | "}" | ">" => {
                depth = depth.checked_sub(1)?;
                if depth == 0 {
                    return Some(k);
                }
            }
            _ => {}
        }
    }
    None
}

/// `tokens` split at the commas outside brackets.
fn split_commas<'a, 't>(tokens: &'t [&'a str]) -> Vec<&'t [&'a str]> {
    let mut out = Vec::new();
    let (mut depth, mut start) = (0usize, 0);
    for (k, t) in tokens.iter().enumerate() {
        match *t {
            ">" if k > 0 && tokens[k - 1] == "-" => {}
            "(" | "[" | "{" | "<" => depth += 1,
            ")" | "]" | "}" | ">" => depth = depth.saturating_sub(1),
            "," if depth == 0 => {
                out.push(&tokens[start..k]);
                start = k + 1;
            }
            _ => {}
        }
    }
    out.push(&tokens[start..]);
    out
}

fn is_ident(token: &str) -> bool {
    let token = token.strip_prefix("r#").unwrap_or(token);
    token.chars().next().is_some_and(|c| c.is_alphabetic() || c == '_')
        && token.chars().all(|c| c.is_alphanumeric() || c == '_')
}

/// Rust source as tokens: identifiers, lifetimes, `::`, `->` as two, and single punctuation;
/// comments, string and character literals and numbers dropped.
fn tokens(source: &str) -> Vec<&str> {
    let bytes = source.as_bytes();
    let mut out = Vec::new();
    let mut i = 0;
    while i < bytes.len() {
        let c = bytes[i];
        let rest = &source[i..];
        if c.is_ascii_whitespace() {
            i += 1;
        } else if rest.starts_with("//") {
            i += rest.find('\n').unwrap_or(rest.len());
        } else if rest.starts_with("/*") {
            // Block comments nest in Rust.
            let mut depth = 0usize;
            let mut k = i;
            while k < bytes.len() {
                if source[k..].starts_with("/*") {
                    depth += 1;
                    k += 2;
                } else if source[k..].starts_with("*/") {
                    depth -= 1;
                    k += 2;
                    if depth == 0 {
                        break;
                    }
                } else {
                    k += 1;
                }
            }
            i = k;
        } else if rest.starts_with("r#")
            && rest[2..].starts_with(|ch: char| ch.is_alphabetic() || ch == '_')
        {
            let len = 2 + rest[2..]
                .find(|ch: char| !(ch.is_alphanumeric() || ch == '_'))
                .unwrap_or(rest.len() - 2);
            out.push(&source[i..i + len]);
            i += len;
        } else if let Some(len) = raw_string(rest) {
            i += len;
        } else if c == b'"' || (c == b'b' && rest[1..].starts_with('"')) {
            let mut k = i + if c == b'b' { 2 } else { 1 };
            while k < bytes.len() && bytes[k] != b'"' {
                k += if bytes[k] == b'\\' { 2 } else { 1 };
            }
            i = k + 1;
        } else if c == b'\'' {
            // A character literal ('a', '\n', '\u{..}') or a lifetime ('a).
            let lit = if rest[1..].starts_with('\\') {
                rest[2..].find('\'').map(|k| k + 3)
            } else {
                let ch = rest[1..].chars().next().map_or(0, char::len_utf8);
                (rest[1 + ch..].starts_with('\'')).then_some(ch + 2)
            };
            match lit {
                Some(len) => i += len,
                None => {
                    let len = 1 + rest[1..]
                        .find(|ch: char| !(ch.is_alphanumeric() || ch == '_'))
                        .unwrap_or(rest.len() - 1);
                    out.push(&source[i..i + len]);
                    i += len;
                }
            }
        } else if c.is_ascii_alphabetic() || c == b'_' || !c.is_ascii() {
            let len =
                rest.find(|ch: char| !(ch.is_alphanumeric() || ch == '_')).unwrap_or(rest.len());
            out.push(&source[i..i + len]);
            i += len;
        } else if c.is_ascii_digit() {
            i += rest
                .find(|ch: char| !(ch.is_alphanumeric() || ch == '_' || ch == '.'))
                .unwrap_or(rest.len());
        } else if rest.starts_with("::") {
            out.push("::");
            i += 2;
        } else {
            out.push(&source[i..i + 1]);
            i += 1;
        }
    }
    out
}

/// The length of a raw string literal at the start of `text` (`r"…"`, `r#"…"#`, `br"…"`).
fn raw_string(text: &str) -> Option<usize> {
    let after_b = text.strip_prefix('b').unwrap_or(text);
    let body = after_b.strip_prefix('r')?;
    let hashes = body.len() - body.trim_start_matches('#').len();
    let open = body[hashes..].strip_prefix('"')?;
    let close = format!("\"{}", "#".repeat(hashes));
    let end = open.find(&close)?;
    Some(text.len() - open.len() + end + close.len())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ptr(pointee: RustType, mutable: bool) -> RustType {
        RustType::Pointer { pointee: Box::new(pointee), mutable }
    }
    const F32: RustType = RustType::Scalar(Scalar::Float { bits: 32 });
    const U32: RustType = RustType::Scalar(Scalar::Int { bits: 32, signed: false });

    #[test]
    fn reads_items_extern_blocks_and_macro_bodies() {
        let mut s = Signatures::default();
        s.add_source(
            r#"
            // fn commented(x: i8) {}
            extern "C" { fn scale(p: *mut f32, n: u32); }
            /* fn also /* nested */ commented() */
            #[no_mangle]
            pub extern "C" fn dot<'a>(a: &'a [f32]) -> f32 { 0.0 }
            #[no_mangle]
            pub extern "C" fn norm(v: *const f32, n: core::ffi::c_uint) -> f32 { let s = "fn fake(x: u8)"; 0.0 }
            sycl_device::kernel! { pub fn k(mut n: u32, x: &mut f32) { let c = '{'; } }
            "#,
        );
        let scale = s.get("scale", 2).unwrap();
        assert_eq!(scale.params[0].1, ptr(F32, true));
        assert_eq!(scale.params[1].1, U32);
        assert_eq!(scale.result, None);
        assert!(s.get("dot", 1).is_some(), "lifetimes alone: not generic");
        let norm = s.get("norm", 2).unwrap();
        assert_eq!(norm.params[0], ("v".into(), ptr(F32, false)));
        assert_eq!(norm.params[1].1, U32);
        assert_eq!(norm.result, Some(F32));
        assert!(s.get("fake", 1).is_none() && s.get("commented", 1).is_none());
        let k = s.get("k", 2).unwrap();
        assert_eq!(k.params[0].0, "mut n");
        assert_eq!(k.params[1].1, ptr(F32, true));
        assert_eq!(k.params[1].1.c_name().as_deref(), Some("float*"));
    }

    #[test]
    fn arrows_raw_names_generics_and_renamed_symbols() {
        let mut s = Signatures::default();
        s.add_source(
            "fn f(cb: Option<extern \"C\" fn(u32) -> u32>, p: *mut f32) {}\n\
             fn r#type(p: *const u16) {}\n\
             fn g<T>(p: *const T) {}\n\
             #[export_name = \"h\"] extern \"C\" fn h_impl(p: *mut f32) {}\n\
             fn h(p: *mut u8) {}\n\
             extern \"C\" { #[link_name = \"k\"] fn k_decl(p: *mut f64); }",
        );
        assert_eq!(s.get("f", 2).unwrap().params[1].1, ptr(F32, true));
        assert!(s.get("type", 1).is_some());
        assert!(s.get("g", 1).is_none(), "generic");
        assert!(s.get("h_impl", 1).is_none() && s.get("k_decl", 1).is_none(), "renamed");
    }

    #[test]
    fn two_different_signatures_of_one_name_are_ambiguous() {
        let mut s = Signatures::default();
        s.add_source(
            "fn f(x: *const u8) {} mod m { fn f(x: *const f32) {} } fn g(x: u8) {} fn g(x: u8) {}",
        );
        assert!(s.get("f", 1).is_none());
        assert!(s.get("g", 1).is_some());
        assert_eq!(rust_type(&["Point"]), RustType::Other("Point".into()),);
    }
}
