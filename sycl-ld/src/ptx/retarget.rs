//! SPIR LLVM IR (what `llvm-spirv-15 -r` gives back, as `llvm-dis-16` prints it) rewritten
//! for NVPTX, as text. Each rewrite answers one difference between the two targets:
//!
//! - **Target.** The triple becomes `nvptx64-nvidia-cuda` (the CUDA driver's flavour: only
//!   it writes `.extern` and `.visible`, which a link across modules needs) and the data
//!   layout NVPTX's.
//! - **Calling conventions.** `spir_kernel` becomes `ptx_kernel` (a `.entry`); `spir_func` is
//!   dropped from definitions, declarations and call sites alike: libclc's functions use the C
//!   convention, and a call whose convention differs from its callee's is undefined, which
//!   the optimiser turns into `unreachable`.
//! - **Address spaces.** SPIR numbers private 0, global 1, constant 2, local 3, generic 4;
//!   NVPTX generic 0, global 1, shared 3, const 4 (and local 5, which only its back end uses).
//!   So 4 becomes 0, and 2 becomes 1, global, not NVPTX's const: a `constant` pointer
//!   parameter receives a buffer that `cuMemAlloc` made, in global memory, which `ld.const`
//!   does not read (it read zeros on an H100), and the same function may get a pointer to a
//!   module-scope `constant` table, so those tables are global variables too. In types,
//!   global variables and intrinsic names (`llvm.memcpy.p4.p1.i64`); an `addrspacecast`
//!   between private and generic, both 0 now, becomes a `bitcast`, and so does one between
//!   constant and global.
//! - **Builtin names.** A builtin's mangled name carries its pointer parameters' address
//!   spaces (`_Z5fractfPU3AS4f` for SPIR, `_Z5fractfPf` in libclc): declarations that are not
//!   the image's imports are renamed through [`super::mangle`]. Two SPIR declarations can
//!   become one NVPTX name (a private and a generic `fract`); the second is dropped.
//! - **Linkage.** Only kernels and exports stay visible: every other definition, functions
//!   and module-scope variables alike, becomes `internal`, or two modules' helpers (or
//!   constant tables) would collide when the CUDA driver links them.
//! - **Local pointer parameters.** A CUDA launch cannot pass a pointer to shared memory: it
//!   sizes one dynamic shared array per launch. So a kernel with `local` pointer parameters
//!   becomes an internal function called by a new kernel of the same name, which takes each
//!   such parameter as a byte offset (`i64`, the pointer's size, so `SYCL/kernel arguments`
//!   still holds) into [`LOCAL_MEMORY`], the dynamic shared array, and passes the pointers on.
//! - **Kernels called as functions.** OpenCL C lets a kernel call another; a `.entry` cannot
//!   be called. A kernel that device code calls is split the same way, and the calls go to
//!   its body.
//!
//! The text is rewritten token by token outside string literals and comments, so a string
//! that happens to hold `addrspace(4)` is left alone.

use std::collections::{BTreeSet, HashMap, HashSet};

use super::mangle;

/// The dynamic shared array (`.extern .shared .align 16 .b8 __sycl_local_mem[]`) that a
/// kernel's `local` pointer parameters point into, at the offsets the launch passes.
pub(crate) const LOCAL_MEMORY: &str = "__sycl_local_mem";

pub(crate) const TRIPLE: &str = "nvptx64-nvidia-cuda";
pub(crate) const DATA_LAYOUT: &str = "e-i64:64-i128:128-v16:16-v32:32-n16:32:64";

/// What the image says about its symbols.
pub(crate) struct Symbols<'a> {
    pub kernels: &'a [String],
    pub exported: &'a [String],
    /// The functions its SPIR-V declares: its imports, and the members of virtual-function
    /// sets its kernels call. Their names are another module's definitions' names, so they
    /// are never renamed (a C++ function's mangled name keeps SPIR's address spaces on both
    /// sides).
    pub declared: &'a [String],
}

/// A builtin the image declares, by its NVPTX name, with its signature as NVPTX types.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Declaration {
    pub name: String,
    pub ret: String,
    pub params: Vec<String>,
}

/// The rewritten module, and the builtins it declares (after renaming, before any
/// redirection to our own definitions).
pub(crate) struct Retargeted {
    pub module: String,
    pub builtins: Vec<Declaration>,
}

/// SPIR address space → NVPTX address space: constant is global (see the module's comment).
pub(crate) fn address_space(spir: u32) -> u32 {
    match spir {
        2 => 1,
        4 => 0,
        other => other,
    }
}

/// A builtin's SPIR name → its NVPTX name (`None`: not a builtin name we read).
pub(crate) fn builtin_name(spir: &str) -> Option<String> {
    let name = mangle::demangle(spir)?;
    let map = |space: u32| Some(address_space(space)).filter(|&s| s != 0);
    let params = name.params.iter().map(|p| p.map_address_spaces(&map)).collect();
    Some(mangle::mangle(&mangle::Name { base: name.base, params }))
}

/// Rewrites `ir`; `redirect` names, for an NVPTX builtin name, the function that is to
/// define it instead (ours, where libclc has none or one that fails), if any.
pub(crate) fn retarget(
    ir: &str,
    symbols: &Symbols,
    redirect: &dyn Fn(&Declaration) -> Option<String>,
) -> Retargeted {
    let visible: HashSet<&str> =
        symbols.kernels.iter().chain(symbols.exported).map(String::as_str).collect();
    let declared_functions: HashSet<&str> = symbols.declared.iter().map(String::as_str).collect();

    // Names first: every declaration's new name, and the bodies of the kernels that get a
    // kernel around them.
    let wrapped = kernels_to_wrap(ir, symbols.kernels);
    let mut renames: HashMap<String, String> =
        wrapped.iter().map(|k| (k.clone(), format!("{k}{BODY}"))).collect();
    for line in ir.lines().filter(|l| l.starts_with("declare ")) {
        let Some(name) = declared_name(line) else { continue };
        if declared_functions.contains(name) {
            continue;
        }
        let new = if name.starts_with("llvm.") {
            intrinsic_name(name)
        } else if name.starts_with("_Z") {
            builtin_name(name).unwrap_or_else(|| name.to_string())
        } else {
            continue;
        };
        if new != name {
            renames.insert(name.to_string(), new);
        }
    }

    let mut builtins: Vec<Declaration> = Vec::new();
    let mut redirects: HashMap<String, String> = HashMap::new();
    let mut declared: BTreeSet<String> = BTreeSet::new();
    let mut out = String::with_capacity(ir.len() + 256);
    let mut wrappers = String::new();
    for line in ir.lines() {
        if line.starts_with("target datalayout") {
            out.push_str(&format!("target datalayout = \"{DATA_LAYOUT}\"\n"));
            continue;
        }
        if line.starts_with("target triple") {
            out.push_str(&format!("target triple = \"{TRIPLE}\"\n"));
            continue;
        }
        let mut line = fix_casts(&rewrite_tokens(line, &renames, true));
        if line.starts_with("define ") {
            if let Some(name) = declared_name(&line).map(str::to_string) {
                if let Some(kernel) = name.strip_suffix(BODY).filter(|k| wrapped.contains(*k)) {
                    let (body, wrapper) = kernel_wrapper(&line, kernel);
                    line = body;
                    wrappers.push_str(&wrapper);
                } else if !visible.contains(name.as_str()) {
                    line = with_linkage(&line, "define ", "internal");
                }
            }
        } else if line.starts_with('@') {
            line = internalize_variable(&line);
        } else if line.starts_with("declare ") {
            let Some(name) = declared_name(&line).map(str::to_string) else { continue };
            if !declared.insert(name.clone()) {
                continue; // two SPIR declarations became one NVPTX name
            }
            if !name.starts_with("llvm.") && !declared_functions.contains(name.as_str()) {
                if let Some(declaration) = signature(&line, &name) {
                    if let Some(target) = redirect(&declaration) {
                        redirects.insert(name.clone(), target);
                    }
                    builtins.push(declaration);
                }
            }
        }
        out.push_str(&line);
        out.push('\n');
    }
    if wrappers.contains(LOCAL_MEMORY) {
        out.push_str(&format!(
            "\n@{LOCAL_MEMORY} = external addrspace(3) global [0 x i8], align 16\n"
        ));
    }
    out.push_str(&wrappers);
    // Calls to builtins we define go to our definitions, under names libclc cannot clash with.
    let module = if redirects.is_empty() {
        out
    } else {
        out.lines().map(|l| rewrite_tokens(l, &redirects, false) + "\n").collect()
    };
    Retargeted { module, builtins }
}

/// What a wrapped kernel's body is called: its name and this.
const BODY: &str = ".sycl.body";

const LOCAL: &str = "ptr addrspace(3)";

/// The kernels that become a body and a kernel calling it: those with `local` pointer
/// parameters, and those the module refers to elsewhere than in their definition.
fn kernels_to_wrap(ir: &str, kernels: &[String]) -> HashSet<String> {
    let kernels: HashSet<&str> = kernels.iter().map(String::as_str).collect();
    let mut wrapped = HashSet::new();
    for line in ir.lines().filter(|l| !l.starts_with(';')) {
        let defined = line.starts_with("define ").then(|| declared_name(line)).flatten();
        if let Some(kernel) = defined.filter(|d| kernels.contains(d)) {
            if parameters(line, kernel).iter().any(|p| param_type(p).as_deref() == Some(LOCAL)) {
                wrapped.insert(kernel.to_string());
            }
        }
        for name in global_names(line) {
            if kernels.contains(name) && Some(name) != defined {
                wrapped.insert(name.to_string());
            }
        }
    }
    wrapped
}

/// The `@name`s of a line, outside strings and comments.
fn global_names(line: &str) -> Vec<&str> {
    let mut names = Vec::new();
    let mut in_string = false;
    for (i, c) in line.char_indices() {
        match c {
            '"' => in_string = !in_string,
            ';' if !in_string => break,
            '@' if !in_string => {
                let rest = &line[i + 1..];
                let end = rest.find(|c: char| !is_ident_char(c)).unwrap_or(rest.len());
                names.push(&rest[..end]);
            }
            _ => {}
        }
    }
    names
}

/// The parameters of the function a `define` or `declare` line names, as written.
fn parameters<'a>(line: &'a str, name: &str) -> Vec<&'a str> {
    let Some(open) = line.find(&format!("@{name}(")).map(|at| at + name.len() + 2) else {
        return vec![];
    };
    let Some(close) = matching_paren(&line[open..]).map(|c| open + c) else { return vec![] };
    split_top_level(&line[open..close])
        .into_iter()
        .map(str::trim)
        .filter(|p| !p.is_empty())
        .collect()
}

/// A parameter without its name: `ptr addrspace(1) align 4 %out` → `ptr addrspace(1) align 4`.
fn without_name(param: &str) -> &str {
    match param.rsplit_once(' ') {
        Some((head, last)) if last.starts_with('%') => head,
        _ => param,
    }
}

fn param_type(param: &str) -> Option<String> {
    parse_type(without_name(param)).map(|(t, _)| t)
}

/// For the `define` line of the body of wrapped kernel `kernel` (`@KERNEL.sycl.body`, still a
/// kernel): the line as an internal function's, and the kernel that calls it, which takes
/// `local` pointer parameters as offsets into [`LOCAL_MEMORY`].
fn kernel_wrapper(line: &str, kernel: &str) -> (String, String) {
    let body_name = format!("{kernel}{BODY}");
    let open =
        line.find(&format!("@{body_name}(")).expect("the body's define line") + body_name.len() + 2;
    let body = format!("define internal void @{body_name}({}", &line[open..]);
    let (mut signature, mut setup, mut args) = (Vec::new(), String::new(), Vec::new());
    for (i, param) in parameters(line, &body_name).into_iter().enumerate() {
        // The kernel's parameter keeps the type and attributes (`byval(%struct.Pt)` decides how
        // the launch passes a struct).
        let declared = without_name(param);
        if param_type(param).as_deref() == Some(LOCAL) {
            signature.push(format!("i64 %p{i}"));
            setup += &format!("  %l{i} = getelementptr inbounds i8, ptr addrspace(3) @{LOCAL_MEMORY}, i64 %p{i}\n");
            args.push(format!("{LOCAL} %l{i}"));
        } else {
            signature.push(format!("{declared} %p{i}"));
            args.push(format!("{declared} %p{i}"));
        }
    }
    let wrapper = format!(
        "define ptx_kernel void @{kernel}({}) {{\nentry:\n{setup}  call void @{body_name}({})\n  ret void\n}}\n\n",
        signature.join(", "),
        args.join(", ")
    );
    (body, wrapper)
}

/// The function name a `declare` or `define` line declares.
fn declared_name(line: &str) -> Option<&str> {
    let at = find_code(line, "@")?;
    let rest = &line[at + 1..];
    let end = rest.find(|c: char| !is_ident_char(c)).unwrap_or(rest.len());
    (end > 0 && rest[end..].starts_with('(')).then(|| &rest[..end])
}

fn is_ident_char(c: char) -> bool {
    c.is_ascii_alphanumeric() || matches!(c, '-' | '$' | '.' | '_')
}

/// `llvm.memcpy.p4.p1.i64` → `llvm.memcpy.p0.p1.i64`: address spaces in an intrinsic's
/// overloaded types (`.p<N>`, `.v<K>p<N>`).
fn intrinsic_name(name: &str) -> String {
    let part = |part: &str| -> Option<String> {
        let (prefix, space) = match part.strip_prefix('v') {
            Some(rest) => {
                let p = rest.find('p')?;
                (rest[..p].chars().all(|c| c.is_ascii_digit()) && p > 0)
                    .then(|| (&part[..p + 2], &rest[p + 1..]))?
            }
            None => ("p", part.strip_prefix('p')?),
        };
        let space: u32 =
            space.parse().ok().filter(|_| space.chars().all(|c| c.is_ascii_digit()))?;
        Some(format!("{prefix}{}", address_space(space)))
    };
    name.split('.').map(|p| part(p).unwrap_or_else(|| p.to_string())).collect::<Vec<_>>().join(".")
}

/// The line with globals renamed and (with `retarget`) calling conventions and address
/// spaces rewritten, outside strings and comments.
fn rewrite_tokens(line: &str, renames: &HashMap<String, String>, retarget: bool) -> String {
    let mut out = String::with_capacity(line.len());
    let bytes = line.as_bytes();
    let mut i = 0;
    while i < line.len() {
        let rest = &line[i..];
        let c = bytes[i];
        if c == b'"' {
            let end = rest[1..].find('"').map_or(line.len(), |e| i + e + 2);
            out.push_str(&line[i..end]);
            i = end;
        } else if c == b';' {
            out.push_str(rest);
            break;
        } else if c == b'@' {
            let name_len = rest[1..].find(|c: char| !is_ident_char(c)).unwrap_or(rest.len() - 1);
            let name = &rest[1..1 + name_len];
            out.push('@');
            out.push_str(renames.get(name).map_or(name, String::as_str));
            i += 1 + name_len;
        } else if retarget
            && is_word_start(bytes, i)
            && rest.starts_with("spir_kernel")
            && !continues_word(rest, 11)
        {
            out.push_str("ptx_kernel");
            i += 11;
        } else if retarget
            && is_word_start(bytes, i)
            && rest.starts_with("spir_func")
            && !continues_word(rest, 9)
        {
            i += 9;
            if line[i..].starts_with(' ') {
                i += 1;
            }
        } else if retarget && is_word_start(bytes, i) && rest.starts_with("addrspace(") {
            let close = rest.find(')').unwrap_or(rest.len() - 1);
            match rest[10..close].parse::<u32>() {
                Ok(space) => {
                    match address_space(space) {
                        0 => {
                            // `ptr addrspace(4) %p` → `ptr %p`, `(ptr addrspace(4))` → `(ptr)`,
                            // `@g = addrspace(4) global` → `@g = global`.
                            if out.ends_with(' ') {
                                out.pop();
                            }
                        }
                        n => out.push_str(&format!("addrspace({n})")),
                    }
                    i += close + 1;
                }
                Err(_) => {
                    out.push_str("addrspace(");
                    i += 10;
                }
            }
        } else {
            let ch = rest.chars().next().expect("not at the end");
            out.push(ch);
            i += ch.len_utf8();
        }
    }
    out
}

fn is_word_start(bytes: &[u8], i: usize) -> bool {
    i == 0
        || !(bytes[i - 1].is_ascii_alphanumeric()
            || matches!(bytes[i - 1], b'_' | b'.' | b'%' | b'@' | b'$' | b'-'))
}

fn continues_word(rest: &str, len: usize) -> bool {
    rest[len..].chars().next().is_some_and(|c| c.is_ascii_alphanumeric() || c == '_')
}

/// The position of `needle` in `line` outside string literals and comments.
fn find_code(line: &str, needle: &str) -> Option<usize> {
    let mut in_string = false;
    for (i, c) in line.char_indices() {
        match c {
            '"' => in_string = !in_string,
            ';' if !in_string => return None,
            _ if !in_string && line[i..].starts_with(needle) => return Some(i),
            _ => {}
        }
    }
    None
}

/// Every `addrspacecast` whose two types are the same now (private and generic are both 0 for
/// NVPTX) becomes a `bitcast`, in instructions and constant expressions.
pub(crate) fn fix_casts(line: &str) -> String {
    const CAST: &str = "addrspacecast";
    let mut out = line.to_string();
    let mut from = 0;
    while let Some(at) = find_code(&out[from..], CAST).map(|p| p + from) {
        from = at + CAST.len();
        if !is_word_start(out.as_bytes(), at) {
            continue;
        }
        let mut pos = from;
        let body = &out[pos..];
        let skip = body.len() - body.trim_start().len();
        pos += skip;
        let parenthesized = out[pos..].starts_with('(');
        if parenthesized {
            pos += 1;
        }
        let Some((source, after_source)) = parse_type(&out[pos..]) else { continue };
        let value_start = pos + after_source;
        let Some(to) = find_top_level(&out[value_start..], " to ") else { continue };
        let Some((target, _)) = parse_type(out[value_start + to + 4..].trim_start()) else {
            continue;
        };
        if source == target {
            out.replace_range(at..at + CAST.len(), "bitcast");
            from = at + "bitcast".len();
        }
    }
    out
}

/// The first occurrence of `needle` in `text` outside brackets and strings.
fn find_top_level(text: &str, needle: &str) -> Option<usize> {
    let mut depth = 0i32;
    let mut in_string = false;
    for (i, c) in text.char_indices() {
        match c {
            '"' => in_string = !in_string,
            _ if in_string => {}
            '(' | '[' | '{' | '<' => depth += 1,
            ')' | ']' | '}' | '>' => {
                depth -= 1;
                if depth < 0 {
                    return None;
                }
            }
            ',' if depth == 0 => return None,
            _ if depth == 0 && text[i..].starts_with(needle) => return Some(i),
            _ => {}
        }
    }
    None
}

/// An LLVM type at the start of `text` (leading spaces skipped): its text, normalised, and
/// where it ends. Pointers, integers, floating-point types, vectors, arrays, structs and
/// named types.
pub(crate) fn parse_type(text: &str) -> Option<(String, usize)> {
    let start = text.len() - text.trim_start().len();
    let t = &text[start..];
    let (ty, len) = if let Some(rest) = t.strip_prefix("ptr") {
        if rest.starts_with(" addrspace(") {
            let close = rest.find(')')?;
            (format!("ptr{}", &rest[..close + 1]), 3 + close + 1)
        } else if rest.starts_with(|c: char| c.is_ascii_alphanumeric() || c == '_') {
            return None;
        } else {
            ("ptr".to_string(), 3)
        }
    } else if t.starts_with('<') || t.starts_with('[') || t.starts_with('{') {
        let (open, close) = match t.as_bytes()[0] {
            b'<' => ('<', '>'),
            b'[' => ('[', ']'),
            _ => ('{', '}'),
        };
        let mut depth = 0;
        let mut end = None;
        for (i, c) in t.char_indices() {
            if c == open {
                depth += 1;
            } else if c == close {
                depth -= 1;
                if depth == 0 {
                    end = Some(i + 1);
                    break;
                }
            }
        }
        let end = end?;
        (t[..end].to_string(), end)
    } else {
        let end = t
            .find(|c: char| {
                !(c.is_ascii_alphanumeric() || matches!(c, '_' | '.' | '%' | '$' | '-'))
            })
            .unwrap_or(t.len());
        if end == 0 {
            return None;
        }
        (t[..end].to_string(), end)
    };
    Some((ty, start + len))
}

/// A `define` line with its linkage replaced by `linkage` (visibility dropped, which a local
/// symbol may not have).
fn with_linkage(line: &str, keyword: &str, linkage: &str) -> String {
    const DROP: &[&str] = &[
        "external",
        "linkonce_odr",
        "linkonce",
        "weak_odr",
        "weak",
        "common",
        "available_externally",
        "hidden",
        "protected",
        "default",
    ];
    let mut rest = &line[keyword.len()..];
    loop {
        let word = rest.split(' ').next().unwrap_or("");
        if matches!(word, "internal" | "private") {
            return line.to_string();
        }
        if DROP.contains(&word) {
            rest = rest[word.len()..].trim_start();
        } else {
            break;
        }
    }
    format!("{keyword}{linkage} {rest}")
}

/// A module-scope variable made internal, unless it is a declaration (`external`), already
/// local, or LLVM's own (`@llvm.used`, `appending`).
fn internalize_variable(line: &str) -> String {
    let Some(eq) = find_code(line, " = ") else { return line.to_string() };
    let name = &line[1..eq];
    let rest = &line[eq + 3..];
    let first = rest.split(' ').next().unwrap_or("");
    if name.starts_with("llvm.")
        || matches!(
            first,
            "external" | "extern_weak" | "internal" | "private" | "appending" | "alias" | "ifunc"
        )
        || rest.contains(" alias ")
    {
        return line.to_string();
    }
    with_linkage(line, &line[..eq + 3], "internal")
}

/// A declaration's NVPTX signature, from its rewritten line: return type and parameter types,
/// without attributes.
fn signature(line: &str, name: &str) -> Option<Declaration> {
    let at = line.find(&format!("@{name}("))?;
    // The return type is what is left once attributes (`zeroext`, `noundef`) are skipped; it
    // may be several words (`ptr addrspace(1)`, `<4 x float>`).
    let mut before = &line["declare ".len()..at];
    let ret = loop {
        let t = before.trim_start();
        match parse_type(t) {
            Some((ty, _)) if is_type_text(&ty) => break ty,
            _ => before = &t[t.find(' ')?..],
        }
    };
    let params = parameters(line, name)
        .into_iter()
        .filter(|p| *p != "...")
        .map(param_type)
        .collect::<Option<Vec<_>>>()?;
    Some(Declaration { name: name.to_string(), ret, params })
}

fn is_type_text(t: &str) -> bool {
    t == "void"
        || t == "ptr"
        || t.starts_with("ptr addrspace(")
        || t.starts_with('<')
        || t.starts_with('{')
        || t.starts_with('[')
        || t.starts_with('%')
        || matches!(t, "half" | "bfloat" | "float" | "double" | "fp128")
        || (t.starts_with('i') && t[1..].chars().all(|c| c.is_ascii_digit()) && t.len() > 1)
}

/// The position of the `)` that closes the list `text` starts inside of.
fn matching_paren(text: &str) -> Option<usize> {
    let mut depth = 0;
    for (i, c) in text.char_indices() {
        match c {
            '(' | '<' | '[' | '{' => depth += 1,
            ')' if depth == 0 => return Some(i),
            ')' | '>' | ']' | '}' => depth -= 1,
            _ => {}
        }
    }
    None
}

fn split_top_level(text: &str) -> Vec<&str> {
    let mut parts = Vec::new();
    let (mut depth, mut start) = (0, 0);
    for (i, c) in text.char_indices() {
        match c {
            '(' | '<' | '[' | '{' => depth += 1,
            ')' | '>' | ']' | '}' => depth -= 1,
            ',' if depth == 0 => {
                parts.push(&text[start..i]);
                start = i + 1;
            }
            _ => {}
        }
    }
    parts.push(&text[start..]);
    parts
}

#[cfg(test)]
mod tests {
    use super::*;

    fn retarget_text(
        ir: &str,
        kernels: &[&str],
        exported: &[&str],
        declared: &[&str],
    ) -> Retargeted {
        let own = |v: &[&str]| v.iter().map(|s| s.to_string()).collect::<Vec<_>>();
        let (k, e, i) = (own(kernels), own(exported), own(declared));
        retarget(ir, &Symbols { kernels: &k, exported: &e, declared: &i }, &|_| None)
    }

    #[test]
    fn target_and_calling_conventions() {
        let ir = "target datalayout = \"e-p:64:64:64\"\ntarget triple = \"spir64-unknown-unknown\"\n\
define spir_kernel void @k(ptr addrspace(1) %o) #0 {\n  %v = call spir_func i32 @lib(i32 1)\n  %w = tail call spir_func i64 @_Z13get_global_idj(i32 0) #2\n  ret void\n}\n\
declare spir_func i32 @lib(i32) #0\ndeclare spir_func i64 @_Z13get_global_idj(i32) #1\n";
        let out = retarget_text(ir, &["k"], &[], &["lib"]).module;
        assert!(out.contains(&format!("target triple = \"{TRIPLE}\"")), "{out}");
        assert!(out.contains(&format!("target datalayout = \"{DATA_LAYOUT}\"")));
        assert!(out.contains("define ptx_kernel void @k(ptr addrspace(1) %o) #0 {"), "{out}");
        assert!(out.contains("%v = call i32 @lib(i32 1)"));
        assert!(out.contains("%w = tail call i64 @_Z13get_global_idj(i32 0) #2"));
        assert!(out.contains("declare i32 @lib(i32) #0"));
        assert!(!out.contains("spir"), "{out}");
    }

    #[test]
    fn address_spaces_map_in_types_variables_and_intrinsics() {
        let ir = "@tbl = internal addrspace(2) constant [2 x float] [float 1.0, float 2.0], align 4\n\
@scratch = internal addrspace(3) global [4 x i32] undef, align 4\n\
define internal void @f(ptr addrspace(4) %g, ptr %p, ptr addrspace(1) %d) {\n\
  call void @llvm.memcpy.p4.p1.i64(ptr addrspace(4) %g, ptr addrspace(1) %d, i64 4, i1 false)\n\
  %s = load float, ptr addrspace(2) @tbl, align 4\n  ret void\n}\n\
declare void @llvm.memcpy.p4.p1.i64(ptr addrspace(4) noalias nocapture writeonly, ptr addrspace(1) noalias nocapture readonly, i64, i1 immarg)\n";
        let out = retarget_text(ir, &[], &[], &[]).module;
        // Constant is global: the tables and the buffers a `constant` pointer receives alike.
        assert!(out.contains("@tbl = internal addrspace(1) constant [2 x float]"), "{out}");
        assert!(out.contains("@scratch = internal addrspace(3) global"));
        assert!(
            out.contains("define internal void @f(ptr %g, ptr %p, ptr addrspace(1) %d)"),
            "{out}"
        );
        assert!(
            out.contains(
                "call void @llvm.memcpy.p0.p1.i64(ptr %g, ptr addrspace(1) %d, i64 4, i1 false)"
            ),
            "{out}"
        );
        assert!(out.contains("load float, ptr addrspace(1) @tbl"));
        assert!(out.contains("declare void @llvm.memcpy.p0.p1.i64(ptr noalias"), "{out}");
    }

    /// A `constant` pointer parameter receives a `cuMemAlloc` buffer: global memory, which
    /// NVPTX's const space (`ld.const`) does not read (on an H100 it read zeros). And a global
    /// and a constant `vload` are one builtin now.
    #[test]
    fn constant_pointer_parameters_are_global_pointers() {
        let ir = "define spir_kernel void @k(ptr addrspace(2) %in, ptr addrspace(1) %out) {\n\
  %v = call spir_func <2 x float> @_Z6vload2mPU3AS2Kf(i64 0, ptr addrspace(2) %in)\n\
  %w = call spir_func <2 x float> @_Z6vload2mPU3AS1Kf(i64 0, ptr addrspace(1) %out)\n  ret void\n}\n\
declare spir_func <2 x float> @_Z6vload2mPU3AS2Kf(i64, ptr addrspace(2))\n\
declare spir_func <2 x float> @_Z6vload2mPU3AS1Kf(i64, ptr addrspace(1))\n";
        let r = retarget_text(ir, &["k"], &[], &[]);
        assert!(
            r.module
                .contains("define ptx_kernel void @k(ptr addrspace(1) %in, ptr addrspace(1) %out)"),
            "{}",
            r.module
        );
        assert!(
            r.module
                .contains("%v = call <2 x float> @_Z6vload2mPU3AS1Kf(i64 0, ptr addrspace(1) %in)"),
            "{}",
            r.module
        );
        assert!(
            !r.module.contains("addrspace(4)") && !r.module.contains("addrspace(2)"),
            "{}",
            r.module
        );
        assert_eq!(
            r.builtins.iter().map(|d| d.name.as_str()).collect::<Vec<_>>(),
            ["_Z6vload2mPU3AS1Kf"]
        );
    }

    #[test]
    fn casts_that_become_same_space_become_bitcasts() {
        assert_eq!(fix_casts("  %1 = addrspacecast ptr %a to ptr"), "  %1 = bitcast ptr %a to ptr");
        assert_eq!(
            fix_casts("  %1 = addrspacecast ptr addrspace(1) %a to ptr"),
            "  %1 = addrspacecast ptr addrspace(1) %a to ptr"
        );
        assert_eq!(
            fix_casts("  store ptr addrspacecast (ptr addrspace(3) @x to ptr), ptr %p, align 8"),
            "  store ptr addrspacecast (ptr addrspace(3) @x to ptr), ptr %p, align 8"
        );
        assert_eq!(
            fix_casts("  call void @f(ptr addrspacecast (ptr getelementptr inbounds ([4 x i32], ptr @a, i64 0, i64 1) to ptr))"),
            "  call void @f(ptr bitcast (ptr getelementptr inbounds ([4 x i32], ptr @a, i64 0, i64 1) to ptr))"
        );
        assert_eq!(
            fix_casts("  %v = addrspacecast <2 x ptr> %a to <2 x ptr>, !dbg !4"),
            "  %v = bitcast <2 x ptr> %a to <2 x ptr>, !dbg !4"
        );
        // Whole retarget: SPIR private → generic is a cast between two 0s for NVPTX.
        let ir = "define internal void @f() {\n  %a = alloca float\n  %g = addrspacecast ptr %a to ptr addrspace(4)\n  ret void\n}\n";
        assert!(retarget_text(ir, &[], &[], &[]).module.contains("%g = bitcast ptr %a to ptr\n"));
    }

    #[test]
    fn builtin_names_follow_nvptx_address_spaces_and_merge() {
        let ir = "define ptx_kernel void @k() {\n  %a = call spir_func float @_Z5fractfPU3AS4f(float 1.0, ptr addrspace(4) null)\n\
  %b = call spir_func float @_Z5fractfPf(float 1.0, ptr null)\n  %c = call spir_func <4 x float> @_Z6vload4mPU3AS2Kf(i64 0, ptr addrspace(2) null)\n  ret void\n}\n\
declare spir_func float @_Z5fractfPU3AS4f(float, ptr addrspace(4)) #0\n\
declare spir_func float @_Z5fractfPf(float, ptr) #0\n\
declare spir_func <4 x float> @_Z6vload4mPU3AS2Kf(i64, ptr addrspace(2)) #0\n";
        let r = retarget_text(ir, &["k"], &[], &[]);
        assert!(
            r.module.contains("%a = call float @_Z5fractfPf(float 1.0, ptr null)"),
            "{}",
            r.module
        );
        assert!(r.module.contains("%b = call float @_Z5fractfPf(float 1.0, ptr null)"));
        assert!(r
            .module
            .contains("call <4 x float> @_Z6vload4mPU3AS1Kf(i64 0, ptr addrspace(1) null)"));
        assert_eq!(
            r.module.matches("declare float @_Z5fractfPf(float, ptr) #0").count(),
            1,
            "{}",
            r.module
        );
        let names: Vec<&str> = r.builtins.iter().map(|d| d.name.as_str()).collect();
        assert_eq!(names, ["_Z5fractfPf", "_Z6vload4mPU3AS1Kf"]);
        assert_eq!(
            r.builtins[1],
            Declaration {
                name: "_Z6vload4mPU3AS1Kf".into(),
                ret: "<4 x float>".into(),
                params: vec!["i64".into(), "ptr addrspace(1)".into()]
            }
        );
    }

    #[test]
    fn imports_keep_their_names_even_when_mangled() {
        // C++ for OpenCL: an import mangled with SPIR's address spaces must match the
        // exporting module's definition, which keeps its name too.
        let ir = "declare spir_func i32 @_Z3getPU3AS1i(ptr addrspace(1)) #0\ndefine spir_func i32 @_Z3putPU3AS1i(ptr addrspace(1) %p) {\n  ret i32 0\n}\n";
        let out = retarget_text(ir, &[], &["_Z3putPU3AS1i"], &["_Z3getPU3AS1i"]).module;
        assert!(out.contains("declare i32 @_Z3getPU3AS1i(ptr addrspace(1)) #0"), "{out}");
        assert!(out.contains("define i32 @_Z3putPU3AS1i(ptr addrspace(1) %p) {"), "{out}");
    }

    #[test]
    fn only_kernels_and_exports_stay_visible() {
        let ir = "@tbl = addrspace(2) constant [1 x i32] [i32 7], align 4\n@w = weak addrspace(1) global i32 0\n@ext = external addrspace(1) global i32\n\
@str = internal unnamed_addr addrspace(2) constant [3 x i8] c\"a;\\00\", align 1\n\
define spir_func i32 @helper(i32 %x) {\n  ret i32 %x\n}\ndefine linkonce_odr hidden spir_func i32 @inl(i32 %x) {\n  ret i32 %x\n}\n\
define spir_func i32 @exported(i32 %x) {\n  ret i32 %x\n}\ndefine spir_kernel void @k() {\n  ret void\n}\n";
        let out = retarget_text(ir, &["k"], &["exported"], &[]).module;
        for expected in [
            "@tbl = internal addrspace(1) constant [1 x i32] [i32 7], align 4",
            "@w = internal addrspace(1) global i32 0",
            "@ext = external addrspace(1) global i32",
            "@str = internal unnamed_addr addrspace(1) constant [3 x i8] c\"a;\\00\", align 1",
            "define internal i32 @helper(i32 %x) {",
            "define internal i32 @inl(i32 %x) {",
            "define i32 @exported(i32 %x) {",
            "define ptx_kernel void @k() {",
        ] {
            assert!(out.contains(expected), "{expected}\n{out}");
        }
    }

    #[test]
    fn local_pointer_parameters_become_offsets_into_dynamic_shared_memory() {
        let ir = "%struct.Pt = type { float, float }\n\
define spir_kernel void @k(ptr addrspace(1) align 4 %out, ptr addrspace(3) align 4 %tile, ptr byval(%struct.Pt) align 4 %pt, i32 %n) #0 !kernel_arg_addr_space !6 {\n  ret void\n}\n\
define spir_kernel void @plain(ptr addrspace(1) %out) #0 {\n  ret void\n}\n";
        let out = retarget_text(ir, &["k", "plain"], &[], &[]).module;
        for expected in [
            "define internal void @k.sycl.body(ptr addrspace(1) align 4 %out, ptr addrspace(3) align 4 %tile, ptr byval(%struct.Pt) align 4 %pt, i32 %n) #0 !kernel_arg_addr_space !6 {",
            "@__sycl_local_mem = external addrspace(3) global [0 x i8], align 16",
            "define ptx_kernel void @k(ptr addrspace(1) align 4 %p0, i64 %p1, ptr byval(%struct.Pt) align 4 %p2, i32 %p3) {\nentry:\n",
            "\n  %l1 = getelementptr inbounds i8, ptr addrspace(3) @__sycl_local_mem, i64 %p1\n",
            "\n  call void @k.sycl.body(ptr addrspace(1) align 4 %p0, ptr addrspace(3) %l1, ptr byval(%struct.Pt) align 4 %p2, i32 %p3)\n  ret void\n}",
            "define ptx_kernel void @plain(ptr addrspace(1) %out) #0 {",
        ] {
            assert!(out.contains(expected), "{expected}\n{out}");
        }
    }

    #[test]
    fn a_kernel_called_by_another_is_called_as_a_function() {
        let ir = "define spir_kernel void @inner(ptr addrspace(1) %o) #0 {\n  ret void\n}\n\
define spir_kernel void @outer(ptr addrspace(1) %o) #0 {\n  call spir_func void @inner(ptr addrspace(1) %o) #0\n  ret void\n}\n";
        let out = retarget_text(ir, &["inner", "outer"], &[], &[]).module;
        for expected in [
            "define internal void @inner.sycl.body(ptr addrspace(1) %o) #0 {",
            "define ptx_kernel void @outer(ptr addrspace(1) %o) #0 {\n  call void @inner.sycl.body(ptr addrspace(1) %o) #0\n",
            "define ptx_kernel void @inner(ptr addrspace(1) %p0) {\nentry:\n  call void @inner.sycl.body(ptr addrspace(1) %p0)\n",
        ] {
            assert!(out.contains(expected), "{expected}\n{out}");
        }
        assert!(!out.contains("__sycl_local_mem"), "no local memory without local parameters");
    }

    #[test]
    fn strings_and_comments_are_left_alone() {
        let ir = "@s = internal addrspace(2) constant [14 x i8] c\"addrspace(4);\\00\" ; spir_func addrspace(4)\n";
        let out = retarget_text(ir, &[], &[], &[]).module;
        assert_eq!(out, "@s = internal addrspace(1) constant [14 x i8] c\"addrspace(4);\\00\" ; spir_func addrspace(4)\n");
    }

    #[test]
    fn redirected_builtins_are_called_under_their_new_name() {
        let ir = "define spir_kernel void @k() {\n  %r = call spir_func float @_Z5rsqrtf(float 2.0)\n  ret void\n}\ndeclare spir_func float @_Z5rsqrtf(float) #1\n";
        let own = |v: &[&str]| v.iter().map(|s| s.to_string()).collect::<Vec<_>>();
        let k = own(&["k"]);
        let r = retarget(ir, &Symbols { kernels: &k, exported: &[], declared: &[] }, &|d| {
            (d.name == "_Z5rsqrtf").then(|| format!("__sycl_ptx.{}", d.name))
        });
        assert!(r.module.contains("call float @__sycl_ptx._Z5rsqrtf(float 2.0)"), "{}", r.module);
        assert!(r.module.contains("declare float @__sycl_ptx._Z5rsqrtf(float) #1"));
        assert_eq!(
            r.builtins,
            [Declaration {
                name: "_Z5rsqrtf".into(),
                ret: "float".into(),
                params: vec!["float".into()]
            }]
        );
    }

    #[test]
    fn intrinsic_names() {
        assert_eq!(intrinsic_name("llvm.memcpy.p4.p2.i64"), "llvm.memcpy.p0.p1.i64");
        assert_eq!(intrinsic_name("llvm.lifetime.start.p0"), "llvm.lifetime.start.p0");
        assert_eq!(intrinsic_name("llvm.masked.load.v4f32.v4p4"), "llvm.masked.load.v4f32.v4p0");
        assert_eq!(intrinsic_name("llvm.ptrmask.p1.i64"), "llvm.ptrmask.p1.i64");
        assert_eq!(intrinsic_name("llvm.fmuladd.f32"), "llvm.fmuladd.f32");
    }
}
