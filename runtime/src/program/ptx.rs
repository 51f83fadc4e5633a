//! PTX as the CUDA driver gets it when another binary's image wins one of its definitions: the
//! definition made an `.extern` declaration, so that every call, the module's own included,
//! reaches the winner's through the driver's link (what `sycl_spirv::import_definitions` does
//! for SPIR-V).

use crate::Error;

/// `ptx` with each function of `names` that it defines (`.visible .func`) declared `.extern`
/// instead: its first declaration or definition becomes the declaration, any later one (the
/// definition after a prototype) is dropped. An error when a name is not defined there: the
/// image's records and its PTX disagree, and no incomplete program is handed to the driver.
pub(crate) fn import_definitions(ptx: &str, names: &[String], what: &str) -> Result<String, Error> {
    let mut out = String::with_capacity(ptx.len());
    let mut declared: Vec<&str> = Vec::new();
    let mut defined: Vec<&str> = Vec::new();
    let mut rest = ptx;
    while let Some(at) = find_visible_func(rest) {
        out.push_str(&rest[..at]);
        let func = &rest[at..];
        let header = parse_header(func).ok_or_else(|| malformed(what, "a function's header"))?;
        let name = &func[header.name.clone()];
        if !names.iter().any(|n| n == name) {
            out.push_str(&func[..header.end]);
            rest = &func[header.end..];
            continue;
        }
        let end = match header.body {
            false => header.end,
            true => {
                defined.push(name);
                body_end(func, header.end).ok_or_else(|| malformed(what, "a function's body"))?
            }
        };
        if !declared.contains(&name) {
            declared.push(name);
            out.push_str(".extern");
            out.push_str(&func[".visible".len()..header.signature_end]);
            out.push_str("\n;");
        }
        rest = &func[end..];
    }
    out.push_str(rest);
    if let Some(missing) = names.iter().find(|n| !defined.contains(&n.as_str())) {
        return Err(malformed(
            what,
            &format!("a definition of `{missing}`, which its records say it exports"),
        ));
    }
    Ok(out)
}

fn malformed(what: &str, missing: &str) -> Error {
    Error::InvalidObject(format!("{what}: the PTX lacks {missing}; rebuild it with sycl-ld"))
}

/// Where a line starting `.visible .func` begins in `text`.
fn find_visible_func(text: &str) -> Option<usize> {
    let mut from = 0;
    while let Some(found) = text[from..].find(".visible") {
        let at = from + found;
        let line_start = text[..at].rfind('\n').map_or(0, |n| n + 1);
        let after = text[at + ".visible".len()..].trim_start_matches([' ', '\t']);
        if text[line_start..at].trim().is_empty() && after.starts_with(".func") {
            return Some(at);
        }
        from = at + 1;
    }
    None
}

/// A `.visible .func` header: the function's name, where its parameter list closes, and
/// whether a body (`{`) or the end of a declaration (`;`) follows.
struct Header {
    name: std::ops::Range<usize>,
    /// Just past the `)` closing the parameters.
    signature_end: usize,
    /// Just past the `;` of a declaration, or the `{` of a body.
    end: usize,
    body: bool,
}

fn parse_header(func: &str) -> Option<Header> {
    let bytes = func.as_bytes();
    let mut at = func.find(".func")? + ".func".len();
    let skip_space = |mut at: usize| {
        while at < bytes.len() && bytes[at].is_ascii_whitespace() {
            at += 1;
        }
        at
    };
    let close = |at: usize| func[at..].find(')').map(|p| at + p + 1);
    at = skip_space(at);
    if bytes.get(at) == Some(&b'(') {
        at = skip_space(close(at)?);
    }
    let start = at;
    while at < bytes.len() && (bytes[at].is_ascii_alphanumeric() || b"_$.".contains(&bytes[at])) {
        at += 1;
    }
    let name = start..at;
    at = skip_space(at);
    if name.is_empty() || bytes.get(at) != Some(&b'(') {
        return None;
    }
    let signature_end = close(at)?;
    at = signature_end;
    loop {
        at = skip_space(at);
        if func[at..].starts_with("//") {
            at += func[at..].find('\n')?;
            continue;
        }
        return match bytes.get(at)? {
            b';' => Some(Header { name, signature_end, end: at + 1, body: false }),
            b'{' => Some(Header { name, signature_end, end: at + 1, body: true }),
            _ => None,
        };
    }
}

/// Just past the `}` that closes the body whose `{` ends just before `from`; braces in
/// comments do not count.
fn body_end(func: &str, from: usize) -> Option<usize> {
    let bytes = func.as_bytes();
    let mut depth = 1usize;
    let mut at = from;
    while at < bytes.len() {
        match bytes[at] {
            b'/' if bytes.get(at + 1) == Some(&b'/') => {
                at += func[at..].find('\n').unwrap_or(func.len() - at);
                continue;
            }
            b'{' => depth += 1,
            b'}' => {
                depth -= 1;
                if depth == 0 {
                    return Some(at + 1);
                }
            }
            _ => {}
        }
        at += 1;
    }
    None
}

#[cfg(test)]
mod tests {
    use super::import_definitions;

    /// As `llc-16` writes a library image: `later` declared before its use and defined after,
    /// `shared` defined before `user` calls it.
    const LIBRARY: &str = r#"
.version 6.0
.target sm_70
.address_size 64

	// .globl	shared                  // -- Begin function shared
.visible .func  (.param .b32 func_retval0) later
(
	.param .b32 later_param_0
)
;
                                        // @shared
.visible .func  (.param .b32 func_retval0) shared(
	.param .b32 shared_param_0
)
{
	.reg .b32 	%r<4>;
	ld.param.u32 	%r1, [shared_param_0];
	mul.lo.s32 	%r2, %r1, 20;
	st.param.b32 	[func_retval0+0], %r2;
	ret;
                                        // -- End function
}
	// .globl	user                    // -- Begin function user
.visible .func  (.param .b32 func_retval0) user(
	.param .b32 user_param_0
)                                       // @user
{
	.reg .b32 	%r<5>;
	ld.param.u32 	%r1, [user_param_0];
	{ // callseq 0, 0
	.param .b32 param0;
	st.param.b32 	[param0+0], %r1;
	.param .b32 retval0;
	call.uni (retval0), 
	shared, 
	(
	param0
	);
	ld.param.b32 	%r2, [retval0+0];
	} // callseq 0
	st.param.b32 	[func_retval0+0], %r2;
	ret;
}
.visible .func  (.param .b32 func_retval0) later(
	.param .b32 later_param_0
)                                       // @later
{
	.reg .b32 	%r<3>;
	ret;
}
"#;

    fn names(list: &[&str]) -> Vec<String> {
        list.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn a_definition_becomes_an_extern_declaration_and_its_callers_stay() {
        let out = import_definitions(LIBRARY, &names(&["shared"]), "lib image 0").unwrap();
        assert!(out.contains(
            ".extern .func  (.param .b32 func_retval0) shared(\n\t.param .b32 shared_param_0\n)\n;"
        ));
        assert!(!out.contains("mul.lo.s32"), "the body is gone:\n{out}");
        assert!(out.contains("\tshared, \n"), "user still calls it:\n{out}");
        assert!(out.contains(".visible .func  (.param .b32 func_retval0) user("));
        assert_eq!(out.matches(".visible .func").count(), 3, "later's prototype and body stay");
    }

    #[test]
    fn a_prototype_becomes_the_declaration_and_the_later_definition_goes() {
        let out = import_definitions(LIBRARY, &names(&["later", "shared"]), "lib").unwrap();
        assert_eq!(out.matches(" later\n(").count(), 1, "{out}");
        assert!(out.contains(".extern .func  (.param .b32 func_retval0) later\n("), "{out}");
        assert!(!out.contains("later(\n"), "the definition is gone:\n{out}");
        assert_eq!(out.matches(".visible .func").count(), 1, "only user is defined:\n{out}");
        assert!(out.trim_end().ends_with("ret;\n}"), "user's body is whole:\n{out}");
    }

    #[test]
    fn nothing_changes_without_names_and_a_name_not_defined_is_an_error() {
        assert_eq!(import_definitions(LIBRARY, &[], "lib").unwrap(), LIBRARY);
        let e = import_definitions(LIBRARY, &names(&["absent"]), "lib image 0").unwrap_err();
        assert!(
            e.to_string().contains("lib image 0: the PTX lacks a definition of `absent`"),
            "{e}"
        );
        let cut =
            &LIBRARY[..LIBRARY.find("ret;\n                                        //").unwrap()];
        assert!(import_definitions(cut, &names(&["shared"]), "lib").is_err(), "an open body");
    }
}
