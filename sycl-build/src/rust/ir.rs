//! rustc's LLVM IR for `nvptx64-nvidia-cuda`, after fat LTO, rewritten as text into IR for
//! `spirv64-unknown-unknown` that `llc-22` makes OpenCL SPIR-V of:
//!
//! - the triple is SPIR-V's and the data layout is left to the back end;
//! - every pointer is generic (`ptr` → `ptr addrspace(4)`), as an OpenCL C 2.0 pointer without
//!   an address space is; a stack slot stays private (address space 0) behind a cast, a global
//!   goes to address space 1 (`CrossWorkgroup`) and is cast where it is used; intrinsics that
//!   name pointer types are renamed (`llvm.memcpy.p0.p0.i64` → `.p4.p4`), lifetime markers,
//!   which must name a stack slot itself, are dropped;
//! - every function that is not an intrinsic, its declarations and its calls, takes OpenCL's
//!   `spir_func` calling convention (a call whose convention differs from its callee's is
//!   undefined, and LLVM deletes it);
//! - a kernel (a function in the `.sycl.kernel` section, which `sycl_device::kernel!` puts it
//!   in) becomes an internal body and a `spir_kernel` of its name that takes its pointers in
//!   global memory (`CrossWorkgroup`), casts them, and calls it; its parameters'
//!   `kernel_arg_*` metadata, from the Rust signature, give the back end their pointee types;
//! - a panic (`__sycl_device_panic`, which `sycl_device`'s panic handler calls, and
//!   `llvm.trap`) is a volatile store to the null global address: a fault on every device
//!   (docs/DESIGN.md, "Device code in Rust"), never code the optimiser may assume unreachable;
//! - the target's attributes (`"target-cpu"="sm_70"`) are dropped.

use std::collections::{HashMap, HashSet};
use std::fmt::Write as _;

use super::signature::{RustType, Signatures};

/// The link section `sycl_device::kernel!` puts a kernel in.
pub(crate) const KERNEL_SECTION: &str = ".sycl.kernel";

/// The function a device panic calls, defined by [`rewrite`].
pub(crate) const PANIC_FUNCTION: &str = "__sycl_device_panic";

/// What [`rewrite`] made: the IR and what it found.
#[derive(Debug, Default)]
pub(crate) struct Rewritten {
    /// The IR for `llc-22`.
    pub(crate) ir: String,
    /// Kernels, in the order of their definitions.
    pub(crate) kernels: Vec<Kernel>,
    /// Functions defined with external linkage that are not kernels: the exported device
    /// functions (`#[no_mangle] pub extern "C" fn`).
    pub(crate) exports: Vec<String>,
}

/// A kernel's parameters as the build saw them.
#[derive(Debug, Clone)]
pub(crate) struct Kernel {
    /// Its name (the entry point's).
    pub(crate) name: String,
    /// Whether each parameter is a pointer to `const` memory (`*const T`, `&T`).
    pub(crate) const_pointers: Vec<bool>,
}

/// Why rustc's IR cannot be made SPIR-V's.
#[derive(Debug)]
pub(crate) struct RewriteError(pub(crate) String);

/// Words that may come between `define`/`declare` and the calling convention.
const LINKAGE_WORDS: &[&str] = &[
    "private",
    "internal",
    "available_externally",
    "linkonce",
    "weak",
    "common",
    "appending",
    "extern_weak",
    "linkonce_odr",
    "weak_odr",
    "external",
    "dso_local",
    "dso_preemptable",
    "hidden",
    "protected",
    "default",
    "dllimport",
    "dllexport",
];

/// Rewrites rustc's IR (the module doc says how); `signatures` give kernels' parameters their
/// types and names.
pub(crate) fn rewrite(ir: &str, signatures: &Signatures) -> Result<Rewritten, RewriteError> {
    // First pass: globals and functions by name, kernels.
    let mut globals = HashSet::new();
    let mut functions = HashSet::new();
    let mut kernel_names = Vec::new();
    let mut max_metadata = 0u64;
    for line in ir.lines() {
        if let Some(name) = line.strip_prefix('@').and_then(|l| l.split_once(" = ")).map(|(n, _)| n)
        {
            globals.insert(name.trim_matches('"').to_string());
        } else if line.starts_with("define ") || line.starts_with("declare ") {
            let header = Header::parse(line)?;
            functions.insert(header.name.to_string());
            if line.starts_with("define ")
                && line.contains(&format!("section \"{KERNEL_SECTION}\""))
            {
                kernel_names.push(header.name.to_string());
            }
        } else if let Some(id) = line.strip_prefix('!').and_then(|l| l.split_once(" = ")) {
            if let Ok(n) = id.0.parse::<u64>() {
                max_metadata = max_metadata.max(n);
            }
        }
    }
    let renames: HashMap<String, String> =
        kernel_names.iter().map(|k| (k.clone(), body_name(k))).collect();

    let mut out = Rewritten::default();
    let mut text = String::with_capacity(ir.len() + 4096);
    let mut wrappers = String::new();
    let mut metadata = String::new();
    let mut next_metadata = max_metadata + 1;
    for line in ir.lines() {
        if line.starts_with("target datalayout") {
            continue;
        }
        if line.starts_with("target triple") {
            text.push_str("target triple = \"spirv64-unknown-unknown\"\n");
            continue;
        }
        let line = retype_pointers(line, &globals, &functions, &renames);
        if line.starts_with('@') && !line.starts_with("@llvm.") {
            text.push_str(&global_in_address_space_1(&line));
        } else if line.starts_with("declare ") {
            let header = Header::parse(&line)?;
            if header.name.starts_with("llvm.lifetime.") {
                continue;
            }
            if header.name == PANIC_FUNCTION || header.name == "llvm.trap" {
                continue;
            }
            if header.name.starts_with("llvm.") {
                text.push_str(&rename_intrinsics(&line));
            } else {
                text.push_str(&header.with_spir_func(&line));
            }
        } else if line.starts_with("define ") {
            let header = Header::parse(&line)?;
            let original = header.name.strip_suffix(".sycl.body").unwrap_or(header.name);
            if kernel_names.iter().any(|k| k == original) {
                let kernel = original.to_string();
                let (wrapper, md, k) =
                    kernel_wrapper(&kernel, &header, signatures, &mut next_metadata)?;
                wrappers.push_str(&wrapper);
                metadata.push_str(&md);
                out.kernels.push(k);
                let internal = header.internal(&line);
                text.push_str(
                    &Header::parse(&internal)?
                        .with_spir_func(&internal)
                        .replace(&format!(" section \"{KERNEL_SECTION}\""), ""),
                );
            } else {
                if header.is_external() {
                    out.exports.push(header.name.to_string());
                }
                text.push_str(&header.with_spir_func(&line));
            }
        } else if line.starts_with("attributes #") {
            text.push_str(&without_target_attributes(&line));
        } else if let Some(rest) = alloca(&line) {
            let (value, instruction) = rest;
            let private =
                format!("%sycl.private.{}", value.trim_start_matches('%').trim_matches('"'));
            let _ = write!(
                text,
                "  {private} = {instruction}\n  {value} = addrspacecast ptr {private} to ptr addrspace(4)"
            );
        } else if let Some(call) = call_site(&line)? {
            match call {
                Call::Dropped => continue,
                Call::Panic(indent) => {
                    let _ = write!(text, "{indent}call spir_func void @{PANIC_FUNCTION}()");
                }
                Call::Rewritten(l) => text.push_str(&l),
            }
        } else {
            text.push_str(&line);
        }
        text.push('\n');
    }
    text.push_str(&wrappers);
    // The panic function, whether or not anything calls it: llc drops it when nothing does.
    let _ = write!(
        text,
        "\ndefine internal spir_func void @{PANIC_FUNCTION}() #{PANIC_ATTRIBUTES} {{\n  \
         store volatile i32 0, ptr addrspace(1) null, align 4\n  unreachable\n}}\n\
         attributes #{PANIC_ATTRIBUTES} = {{ cold noinline noreturn nounwind }}\n"
    );
    text.push_str(&metadata);
    out.ir = text;
    Ok(out)
}

/// The attribute group of the panic function: a number rustc's IR does not reach.
const PANIC_ATTRIBUTES: u32 = 9999;

/// What a kernel's body is renamed to.
fn body_name(kernel: &str) -> String {
    format!("{kernel}.sycl.body")
}

/// A `define` or `declare` line taken apart: where the words before the result type end, the
/// function's name, and its parameters' text.
struct Header<'a> {
    /// Byte offset after `define`/`declare` and the linkage words, where the calling
    /// convention goes.
    cc_at: usize,
    /// The linkage words.
    linkage: Vec<&'a str>,
    /// The name, without `@` and quotes.
    name: &'a str,
    /// The parameters, each as written (`ptr addrspace(4) noundef %x`).
    params: Vec<&'a str>,
}

impl<'a> Header<'a> {
    fn parse(line: &'a str) -> Result<Header<'a>, RewriteError> {
        let bad = || RewriteError(format!("unexpected function header in rustc's IR: {line}"));
        let keyword_end = line.find(' ').ok_or_else(bad)? + 1;
        let mut cc_at = keyword_end;
        let mut linkage = Vec::new();
        for word in line[keyword_end..].split(' ') {
            if LINKAGE_WORDS.contains(&word) {
                linkage.push(word);
                cc_at += word.len() + 1;
            } else {
                break;
            }
        }
        let at = line[cc_at..]
            .find(" @")
            .map(|k| cc_at + k + 2)
            .or_else(|| line[cc_at..].starts_with('@').then_some(cc_at + 1));
        let at = at.ok_or_else(bad)?;
        let open = if line[at..].starts_with('"') {
            at + 1 + line[at + 1..].find('"').ok_or_else(bad)? + 1
        } else {
            at + line[at..].find('(').ok_or_else(bad)?
        };
        let name = line[at..open].trim_matches('"');
        let close = close_paren(line, open).ok_or_else(bad)?;
        let params =
            split_top(&line[open + 1..close]).into_iter().map(str::trim).filter(|p| !p.is_empty());
        Ok(Header { cc_at, linkage, name, params: params.collect() })
    }

    /// Whether the function is visible outside the module (no `internal` or `private`).
    fn is_external(&self) -> bool {
        !self.linkage.iter().any(|w| matches!(*w, "internal" | "private"))
    }

    /// `line` with `spir_func` as its calling convention.
    fn with_spir_func(&self, line: &str) -> String {
        format!("{}spir_func {}", &line[..self.cc_at], without_convention(&line[self.cc_at..]))
    }

    /// `line` (a definition) with internal linkage.
    fn internal(&self, line: &str) -> String {
        let keyword_end = line.find(' ').map_or(0, |k| k + 1);
        let kept: Vec<&str> = self
            .linkage
            .iter()
            .copied()
            .filter(|w| {
                !matches!(
                    *w,
                    "external"
                        | "dso_local"
                        | "dso_preemptable"
                        | "hidden"
                        | "protected"
                        | "default"
                        | "dllexport"
                )
            })
            .collect();
        let mut out = line[..keyword_end].to_string();
        out.push_str("internal ");
        for w in kept {
            out.push_str(w);
            out.push(' ');
        }
        out.push_str(&line[self.cc_at..]);
        out
    }
}

/// The index of the `)` closing the `(` at `open`.
fn close_paren(line: &str, open: usize) -> Option<usize> {
    let mut depth = 0usize;
    let mut in_string = false;
    for (k, c) in line[open..].char_indices() {
        match c {
            '"' => in_string = !in_string,
            '(' | '{' | '[' | '<' if !in_string => depth += 1,
            ')' | '}' | ']' | '>' if !in_string => {
                depth -= 1;
                if depth == 0 {
                    return Some(open + k);
                }
            }
            _ => {}
        }
    }
    None
}

/// `text` split at the commas outside brackets and strings.
fn split_top(text: &str) -> Vec<&str> {
    let mut out = Vec::new();
    let (mut depth, mut start, mut in_string) = (0usize, 0, false);
    for (k, c) in text.char_indices() {
        match c {
            '"' => in_string = !in_string,
            '(' | '{' | '[' | '<' if !in_string => depth += 1,
            ')' | '}' | ']' | '>' if !in_string => depth = depth.saturating_sub(1),
            ',' if depth == 0 && !in_string => {
                out.push(&text[start..k]);
                start = k + 1;
            }
            _ => {}
        }
    }
    out.push(&text[start..]);
    out
}

/// A parameter's type: its first type token (`ptr addrspace(4)`, `i32`, `{ float, float }`).
fn param_type(param: &str) -> &str {
    let param = param.trim();
    if let Some(rest) = param.strip_prefix("ptr addrspace(") {
        let end = rest.find(')').map_or(param.len(), |k| "ptr addrspace(".len() + k + 1);
        return &param[..end];
    }
    if param.starts_with(['{', '<', '[']) {
        let mut depth = 0usize;
        for (k, c) in param.char_indices() {
            match c {
                '{' | '<' | '[' => depth += 1,
                '}' | '>' | ']' => {
                    depth -= 1;
                    if depth == 0 {
                        return &param[..=k];
                    }
                }
                _ => {}
            }
        }
    }
    param.split(' ').next().unwrap_or(param)
}

/// The `spir_kernel` that stands for kernel `name` (whose body is `header`, renamed), its
/// metadata, and what the build keeps of it.
fn kernel_wrapper(
    name: &str,
    header: &Header,
    signatures: &Signatures,
    next_metadata: &mut u64,
) -> Result<(String, String, Kernel), RewriteError> {
    let signature = signatures.get(name, header.params.len());
    let mut params = Vec::new();
    let mut casts = String::new();
    let mut args = Vec::new();
    let (mut spaces, mut access, mut types, mut quals, mut names) =
        (Vec::new(), Vec::new(), Vec::new(), Vec::new(), Vec::new());
    let mut const_pointers = Vec::new();
    let mut used = HashSet::new();
    for (i, param) in header.params.iter().enumerate() {
        let ty = param_type(param);
        let rust = signature.map(|s| &s.params[i]);
        let pname = rust
            .map(|(p, _)| p.trim_start_matches("mut ").to_string())
            .filter(|p| {
                p.chars().all(|c| c.is_ascii_alphanumeric() || c == '_')
                    && !p.is_empty()
                    && p != "_"
            })
            .unwrap_or_else(|| format!("arg{i}"));
        // `_` and a parameter named `arg0` would both be `%arg0`.
        let pname = match used.insert(pname.clone()) {
            true => pname,
            false => format!("{pname}.{i}"),
        };
        let rust_type = rust.map(|(_, t)| t);
        let number = matches!(ty, "i8" | "i16" | "i32" | "i64" | "half" | "float" | "double");
        let pointer = ty == "ptr addrspace(4)" && !param.contains(" byval(");
        if !(number || pointer) {
            return Err(RewriteError(format!(
                "kernel `{name}`: parameter {} is neither a number nor a pointer; kernels take numbers (`u32`, `f32`, …) and pointers to global memory (`*const T`, `*mut T`)",
                i + 1
            )));
        }
        let is_pointer = ty == "ptr addrspace(4)";
        let constant = matches!(rust_type, Some(RustType::Pointer { mutable: false, .. }));
        const_pointers.push(is_pointer && constant);
        let c_name = rust_type.and_then(RustType::c_name).unwrap_or_else(|| {
            if is_pointer {
                "char*".to_string()
            } else {
                llvm_c_name(ty).to_string()
            }
        });
        if is_pointer {
            params.push(format!("ptr addrspace(1) %{pname}"));
            let _ = writeln!(
                casts,
                "  %{pname}.generic = addrspacecast ptr addrspace(1) %{pname} to ptr addrspace(4)"
            );
            args.push(format!("ptr addrspace(4) %{pname}.generic"));
            spaces.push("i32 1".to_string());
        } else {
            params.push(format!("{ty} %{pname}"));
            args.push(format!("{ty} %{pname}"));
            spaces.push("i32 0".to_string());
        }
        access.push("!\"none\"".to_string());
        types.push(format!("!{c_name:?}"));
        quals.push(if is_pointer && constant { "!\"const\"" } else { "!\"\"" }.to_string());
        names.push(format!("!{pname:?}"));
    }
    let mut md = String::new();
    let mut ids = Vec::new();
    for list in [&spaces, &access, &types, &types, &quals, &names] {
        let id = *next_metadata;
        *next_metadata += 1;
        let _ = writeln!(md, "!{id} = !{{{}}}", list.join(", "));
        ids.push(id);
    }
    let wrapper = format!(
        "\ndefine spir_kernel void @{name}({}) !kernel_arg_addr_space !{} !kernel_arg_access_qual !{} !kernel_arg_type !{} !kernel_arg_base_type !{} !kernel_arg_type_qual !{} !kernel_arg_name !{} {{\nsycl.entry:\n{casts}  call spir_func void {}({})\n  ret void\n}}\n",
        params.join(", "),
        ids[0],
        ids[1],
        ids[2],
        ids[3],
        ids[4],
        ids[5],
        quoted(&body_name(name)),
        args.join(", "),
    );
    Ok((wrapper, md, Kernel { name: name.to_string(), const_pointers }))
}

/// An LLVM scalar type's OpenCL C name, for a parameter whose Rust type is not known.
fn llvm_c_name(ty: &str) -> &'static str {
    match ty {
        "i8" => "char",
        "i16" => "short",
        "i32" => "int",
        "i64" => "long",
        "float" => "float",
        "double" => "double",
        "half" => "half",
        _ => "void",
    }
}

/// `@name`, quoted when it needs to be.
fn quoted(name: &str) -> String {
    if name.chars().all(|c| c.is_ascii_alphanumeric() || "._$-".contains(c)) {
        format!("@{name}")
    } else {
        format!("@\"{name}\"")
    }
}

/// A global variable's definition with `addrspace(1)` before `global`/`constant`.
fn global_in_address_space_1(line: &str) -> String {
    let Some((name, rest)) = line.split_once(" = ") else { return line.to_string() };
    let mut out = String::new();
    let mut done = false;
    for word in rest.split(' ') {
        if !done && (word == "global" || word == "constant") {
            out.push_str("addrspace(1) ");
            done = true;
        }
        out.push_str(word);
        out.push(' ');
    }
    out.pop();
    format!("{name} = {out}")
}

/// An attribute group without the target's own attributes.
fn without_target_attributes(line: &str) -> String {
    let mut out = String::new();
    let mut rest = line;
    while let Some(k) = rest.find("\"target-") {
        out.push_str(&rest[..k]);
        let after = &rest[k + 1..];
        // "target-cpu"="sm_70": skip the key, `=`, and the quoted value.
        let key_end = after.find('"').map_or(after.len(), |e| e + 1);
        let mut skip = k + 1 + key_end;
        if rest[skip..].starts_with("=\"") {
            skip += 2 + rest[skip + 2..].find('"').map_or(0, |e| e + 1);
        }
        rest = &rest[skip..];
    }
    out.push_str(rest);
    out
}

/// `(value, instruction)` of `%v = alloca …`.
fn alloca(line: &str) -> Option<(&str, &str)> {
    let trimmed = line.trim_start();
    let (value, instruction) = trimmed.split_once(" = ")?;
    (value.starts_with('%') && instruction.starts_with("alloca ")).then_some((value, instruction))
}

/// What becomes of a call.
enum Call {
    /// A lifetime marker: gone.
    Dropped,
    /// `llvm.trap` or the panic function: the panic function, with this indentation.
    Panic(String),
    /// Any other call, rewritten.
    Rewritten(String),
}

/// A line with a call: its callee's calling convention made `spir_func` (intrinsics keep
/// theirs, renamed for generic pointers).
fn call_site(line: &str) -> Result<Option<Call>, RewriteError> {
    let Some(call) = call_site_of(line) else { return Ok(None) };
    let callee_text = match &call {
        Call::Rewritten(text) => text.as_str(),
        _ => return Ok(Some(call)),
    };
    let unsupported = |what: &str, remedy: &str| {
        Err(RewriteError(format!(
            "{what}, which has no SPIR-V form: {remedy} (in: {})",
            line.trim()
        )))
    };
    if callee_text.contains(" asm ") {
        return unsupported("inline assembly (`asm!`)", "device code is compiled for every device");
    }
    match callee(line) {
        Some(name) if name.starts_with("llvm.nvvm.") => unsupported(
            &format!("an NVPTX intrinsic (`{name}`, from `core::arch::nvptx`)"),
            "use sycl_device's work-item functions, barriers and atomics",
        ),
        None => unsupported(
            "a call through a function pointer (a `dyn Trait` method, a `fn` pointer)",
            "call the function directly, or through generics",
        ),
        _ => Ok(Some(call)),
    }
}

/// The callee's name of a call line (`@name(`), `None` for a call through a pointer
/// (`%f(`): the name just before the first `(` that is not an address space's.
fn callee(line: &str) -> Option<&str> {
    let mut from = 0;
    while let Some(k) = line[from..].find('(').map(|k| from + k) {
        let before = &line[..k];
        let start = before
            .rfind(|c: char| !(c.is_ascii_alphanumeric() || "._$-\"@%".contains(c)))
            .map_or(0, |p| p + 1);
        let token = &before[start..];
        if let Some(name) = token.strip_prefix('@') {
            return Some(name.trim_matches('"'));
        }
        if token.starts_with('%') {
            return None;
        }
        from = k + 1;
    }
    None
}

/// [`call_site`] without the refusals.
fn call_site_of(line: &str) -> Option<Call> {
    let trimmed = line.trim_start();
    let indent = &line[..line.len() - trimmed.len()];
    let after_value = match trimmed.split_once(" = ") {
        Some((v, rest)) if v.starts_with('%') => rest,
        _ => trimmed,
    };
    let call = ["tail call ", "musttail call ", "notail call ", "call "]
        .iter()
        .find_map(|p| after_value.strip_prefix(p).map(|_| p.len()))?;
    let call_end = line.len() - after_value.len() + call;
    let callee = line[call_end..].split(" @").nth(1).map(|c| c.split('(').next().unwrap_or(c));
    match callee {
        Some(c) if c.starts_with("llvm.lifetime.") => Some(Call::Dropped),
        Some("llvm.trap") => Some(Call::Panic(indent.to_string())),
        Some(c) if c == PANIC_FUNCTION => Some(Call::Panic(indent.to_string())),
        Some(c) if c.starts_with("llvm.") => Some(Call::Rewritten(rename_intrinsics(line))),
        _ => {
            // The calling convention follows the fast-math flags.
            const FLAGS: [&str; 8] =
                ["fast ", "nnan ", "ninf ", "nsz ", "arcp ", "contract ", "afn ", "reassoc "];
            let mut at = call_end;
            while let Some(flag) = FLAGS.iter().find(|f| line[at..].starts_with(**f)) {
                at += flag.len();
            }
            Some(Call::Rewritten(format!(
                "{}spir_func {}",
                &line[..at],
                without_convention(&line[at..])
            )))
        }
    }
}

/// `text` without the calling convention it starts with, if any (rustc gives internal
/// functions `fastcc`, cold ones `coldcc`).
fn without_convention(text: &str) -> &str {
    for cc in ["fastcc ", "coldcc ", "ccc ", "ptx_kernel ", "ptx_device "] {
        if let Some(rest) = text.strip_prefix(cc) {
            return rest;
        }
    }
    text
}

/// Intrinsic names that say `p0` for a pointer say `p4`, the generic address space.
fn rename_intrinsics(line: &str) -> String {
    let mut out = String::new();
    let mut rest = line;
    while let Some(k) = rest.find("@llvm.") {
        out.push_str(&rest[..k]);
        let name_len = rest[k + 1..]
            .find(|c: char| !(c.is_ascii_alphanumeric() || c == '.' || c == '_'))
            .map_or(rest.len() - k, |e| e + 1);
        let name = &rest[k..k + name_len];
        let renamed: Vec<&str> =
            name.split('.').map(|part| if part == "p0" { "p4" } else { part }).collect();
        out.push_str(&renamed.join("."));
        rest = &rest[k + name_len..];
    }
    out.push_str(rest);
    out
}

/// `line` with every `ptr` that names no address space made generic, every global's and
/// function's use as a generic pointer a cast, and kernels' names their bodies'. Strings,
/// comments and names are left as they are.
fn retype_pointers(
    line: &str,
    globals: &HashSet<String>,
    functions: &HashSet<String>,
    renames: &HashMap<String, String>,
) -> String {
    const GENERIC: &str = "ptr addrspace(4)";
    let bytes = line.as_bytes();
    let mut out = String::with_capacity(line.len() + 32);
    let mut i = 0;
    let is_name_char = |c: u8| c.is_ascii_alphanumeric() || b"$._-".contains(&c);
    let defining =
        line.starts_with('@') || line.starts_with("define ") || line.starts_with("declare ");
    while i < bytes.len() {
        let c = bytes[i];
        match c {
            b';' => {
                out.push_str(&line[i..]);
                break;
            }
            b'"' => {
                let end = line[i + 1..].find('"').map_or(line.len(), |e| i + 1 + e + 1);
                out.push_str(&line[i..end]);
                i = end;
            }
            b'%' | b'@' | b'!' | b'#' | b'$' => {
                let start = i;
                i += 1;
                if bytes.get(i) == Some(&b'"') {
                    i = line[i + 1..].find('"').map_or(line.len(), |e| i + 1 + e + 1);
                } else {
                    while i < bytes.len() && is_name_char(bytes[i]) {
                        i += 1;
                    }
                }
                let token = &line[start..i];
                if c == b'@' {
                    let name = token[1..].trim_matches('"');
                    // The wrapper, written later, takes the kernel's name: every mention here is
                    // the body's.
                    let name = renames.get(name).map_or(name, String::as_str);
                    let renamed = quoted(name);
                    // With opaque pointers every other mention of a global or a function is a
                    // pointer to it, where a generic one goes: cast it. Not its definition, a
                    // function's header or callee (`@f(`), nor `blockaddress(@f, …)`.
                    let named_here = (defining && start == 0)
                        || line[i..].starts_with('(')
                        || out.ends_with("blockaddress(");
                    let space = if globals.contains(name) {
                        Some("ptr addrspace(1)")
                    } else if functions.contains(name) {
                        Some("ptr")
                    } else {
                        None
                    };
                    match space {
                        Some(space) if !named_here => {
                            let _ = write!(out, "addrspacecast ({space} {renamed} to {GENERIC})");
                        }
                        _ => out.push_str(&renamed),
                    }
                } else {
                    out.push_str(token);
                }
            }
            c if c.is_ascii_alphabetic() || c == b'_' => {
                let start = i;
                while i < bytes.len()
                    && (bytes[i].is_ascii_alphanumeric() || bytes[i] == b'_' || bytes[i] == b'.')
                {
                    i += 1;
                }
                let word = &line[start..i];
                if word == "ptr" && !line[i..].starts_with(" addrspace(") {
                    out.push_str(GENERIC);
                } else {
                    out.push_str(word);
                }
            }
            _ => {
                out.push(c as char);
                i += 1;
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    const IR: &str = r#"; ModuleID = 'w'
target datalayout = "e-p6:32:32-i64:64"
target triple = "nvptx64-nvidia-cuda"

@TABLE = internal unnamed_addr constant [16 x i8] c"ptr\00\00\00@\00\00@@\00\00\80@", align 4

define noundef float @rs_dot(ptr noundef readonly captures(none) %a, i32 noundef %n) unnamed_addr #0 {
start:
  %s = alloca [4 x i8], align 4
  call void @llvm.lifetime.start.p0(ptr nonnull %s)
  %p = getelementptr inbounds nuw float, ptr @TABLE, i64 1
  call void @llvm.memcpy.p0.p0.i64(ptr %s, ptr %a, i64 4, i1 false)
  %x = load float, ptr %p, align 4
  %c = icmp eq i32 %n, 0
  br i1 %c, label %panic, label %ok
panic:
  tail call void @__sycl_device_panic() #3
  unreachable
ok:
  ret float %x
}

define void @k(i32 noundef %n, ptr noundef readonly %x, ptr noundef %y) unnamed_addr #1 section ".sycl.kernel" {
start:
  %v = tail call fast float @rs_dot(ptr %x, i32 %n)
  %i = tail call noundef i64 @_Z13get_global_idj(i32 noundef 0) #3
  store float %v, ptr %y, align 4
  ret void
}

declare noundef i64 @_Z13get_global_idj(i32 noundef) unnamed_addr #1
declare void @__sycl_device_panic() unnamed_addr #1
declare void @llvm.lifetime.start.p0(ptr captures(none))
declare void @llvm.memcpy.p0.p0.i64(ptr noalias writeonly captures(none), ptr noalias readonly captures(none), i64, i1 immarg) #2

attributes #0 = { nounwind "target-cpu"="sm_70" "target-features"="+ptx70" }
attributes #1 = { convergent nounwind "target-cpu"="sm_70" }

!0 = !{i32 8, !"PIC Level", i32 2}
"#;

    #[test]
    fn rustc_ir_becomes_spir_ir() {
        let mut sigs = Signatures::default();
        sigs.add_source("kernel! { pub fn k(n: u32, x: *const f32, y: *mut f32) {} }");
        let out = rewrite(IR, &sigs).unwrap();
        let ir = &out.ir;
        assert!(ir.contains("target triple = \"spirv64-unknown-unknown\""), "{ir}");
        assert!(
            !ir.contains("datalayout") && !ir.contains("sm_70") && !ir.contains("+ptx70"),
            "{ir}"
        );
        assert!(
            ir.contains(
                "@TABLE = internal unnamed_addr addrspace(1) constant [16 x i8] c\"ptr\\00"
            ),
            "{ir}"
        );
        assert!(ir.contains("define spir_func noundef float @rs_dot(ptr addrspace(4) noundef readonly captures(none) %a, i32 noundef %n)"), "{ir}");
        assert!(ir.contains("  %sycl.private.s = alloca [4 x i8], align 4\n  %s = addrspacecast ptr %sycl.private.s to ptr addrspace(4)\n"), "{ir}");
        assert!(!ir.contains("lifetime"), "{ir}");
        assert!(ir.contains("getelementptr inbounds nuw float, ptr addrspace(4) addrspacecast (ptr addrspace(1) @TABLE to ptr addrspace(4)), i64 1"), "{ir}");
        assert!(
            ir.contains(
                "call void @llvm.memcpy.p4.p4.i64(ptr addrspace(4) %s, ptr addrspace(4) %a"
            ),
            "{ir}"
        );
        assert!(ir.contains("declare void @llvm.memcpy.p4.p4.i64("), "{ir}");
        assert!(ir.contains("  call spir_func void @__sycl_device_panic()\n  unreachable"), "{ir}");
        assert!(ir.contains("store volatile i32 0, ptr addrspace(1) null"), "{ir}");
        assert!(ir.contains("tail call fast spir_func float @rs_dot(ptr addrspace(4) %x"), "{ir}");
        assert!(ir.contains("declare spir_func noundef i64 @_Z13get_global_idj"), "{ir}");
        assert!(ir.contains("define internal spir_func void @k.sycl.body(i32 noundef %n, ptr addrspace(4) noundef readonly %x, ptr addrspace(4) noundef %y) unnamed_addr #1 {"), "{ir}");
        assert!(
            ir.contains(
                "define spir_kernel void @k(i32 %n, ptr addrspace(1) %x, ptr addrspace(1) %y)"
            ),
            "{ir}"
        );
        assert!(ir.contains("call spir_func void @k.sycl.body(i32 %n, ptr addrspace(4) %x.generic, ptr addrspace(4) %y.generic)"), "{ir}");
        assert!(ir.contains("!{!\"uint\", !\"float*\", !\"float*\"}"), "{ir}");
        assert!(ir.contains("!{!\"\", !\"const\", !\"\"}"), "{ir}");
        assert!(ir.contains("attributes #1 = { convergent nounwind  }"), "{ir}");
        assert_eq!(out.exports, ["rs_dot"]);
        assert_eq!(out.kernels.len(), 1);
        assert_eq!(out.kernels[0].const_pointers, [false, true, false]);
    }

    #[test]
    fn pointers_returned_globals_anywhere_and_flags_in_any_order() {
        let ir = concat!(
            "@LUT = internal constant [4 x i32] zeroinitializer\n",
            "@\"odd name\" = internal global i32 0\n",
            "define noundef ptr @rs_at(ptr %p, i64 %i) unnamed_addr {\n",
            "start:\n",
            "  %q = phi ptr [ @LUT, %start ], [ @\"odd name\", %start ]\n",
            "  call void @cl_use(ptr noundef nonnull align 4 @LUT)\n",
            "  %r = call reassoc nsz float @g(float 1.0)\n",
            "  %c = icmp eq ptr %p, @LUT\n",
            "  %s = call ptr @rs_at(ptr %p, i64 0)\n",
            "  ret ptr %q\n",
            "}\n",
            "declare void @cl_use(ptr)\n",
            "declare float @g(float)\n",
        );
        let out = rewrite(ir, &Signatures::default()).unwrap();
        let ir = &out.ir;
        let lut = "addrspacecast (ptr addrspace(1) @LUT to ptr addrspace(4))";
        assert!(
            ir.contains(
                "define spir_func noundef ptr addrspace(4) @rs_at(ptr addrspace(4) %p, i64 %i)"
            ),
            "{ir}"
        );
        assert!(ir.contains(&format!("phi ptr addrspace(4) [ {lut}, %start ], [ addrspacecast (ptr addrspace(1) @\"odd name\" to ptr addrspace(4)), %start ]")), "{ir}");
        assert!(
            ir.contains(&format!(
                "call spir_func void @cl_use(ptr addrspace(4) noundef nonnull align 4 {lut})"
            )),
            "{ir}"
        );
        assert!(ir.contains("call reassoc nsz spir_func float @g(float 1.0)"), "{ir}");
        assert!(ir.contains(&format!("icmp eq ptr addrspace(4) %p, {lut}")), "{ir}");
        assert!(
            ir.contains("call spir_func ptr addrspace(4) @rs_at(ptr addrspace(4) %p, i64 0)"),
            "{ir}"
        );
        assert_eq!(out.exports, ["rs_at"]);
    }

    #[test]
    fn what_has_no_spir_v_form_is_refused_naming_it() {
        let body =
            |call: &str| format!("define void @f(ptr %fp) {{\nstart:\n  {call}\n  ret void\n}}\n");
        for (call, words) in [
            ("%t = call i32 @llvm.nvvm.read.ptx.sreg.tid.x()", "core::arch::nvptx"),
            ("call void %fp(i32 1)", "function pointer"),
            ("call void asm sideeffect \"exit;\", \"\"()", "inline assembly"),
        ] {
            let error = rewrite(&body(call), &Signatures::default()).unwrap_err();
            assert!(error.0.contains(words), "{call}: {}", error.0);
        }
    }

    #[test]
    fn a_struct_by_value_is_no_kernel_parameter() {
        let ir =
            "define void @k(ptr byval([8 x i8]) %s) #0 section \".sycl.kernel\" {\n  ret void\n}\n";
        let error = rewrite(ir, &Signatures::default()).unwrap_err();
        assert!(error.0.contains("kernel `k`: parameter 1"), "{}", error.0);
    }
}
