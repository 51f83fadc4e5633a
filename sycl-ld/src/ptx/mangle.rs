//! Itanium-mangled names of OpenCL C builtins, read into types and written back, so that a
//! name can move from SPIR's address spaces to NVPTX's.
//!
//! Clang mangles a pointer's address space as a vendor qualifier with the *target's* number:
//! `fract(float, float *)` with a generic pointer is `_Z5fractfPU3AS4f` for SPIR and
//! `_Z5fractfPf` for NVPTX, where generic and private are address space 0 and have no
//! qualifier. Replacing text is not enough, because a mangled name refers back to types it
//! already spelled (`S_`, `S0_`, …) by their position, and dropping a qualifier changes which
//! types count. So the name is read into a tree, its address-space qualifiers are mapped, and
//! the tree is written again, substitutions recomputed.
//!
//! The grammar is the part of Itanium's that OpenCL C builtins use: a plain name (`_Z` and a
//! length-prefixed identifier, never nested), then parameter types built from builtin types,
//! `Dv<n>_` vectors, `P` pointers, `U<name>`/`r`/`V`/`K` qualifiers, named types (`9ocl_event`,
//! `12memory_order`) and substitutions. As clang does (and the tests check on libclc's own
//! names), a vector, a pointer, a named type and a qualified type (all its qualifiers at once)
//! are substitution candidates, in the order they are completed; builtin types are not.
//! Anything else (a nested name, a template) is not a builtin and is left alone.

/// A parameter type.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Type {
    /// A builtin type's code: `i`, `f`, `Dh`, ….
    Builtin(String),
    Vector(u32, Box<Type>),
    /// `P` (pointer), or `R`/`O` (references, from C++ for OpenCL).
    Pointer(char, Box<Type>),
    /// Qualifiers in the order they were written (`U3AS1`, `V`, `K`, …), and the type.
    Qualified(Vec<Qualifier>, Box<Type>),
    /// A named type: `ocl_event`, `memory_order`, ….
    Named(String),
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Qualifier {
    /// `U<len><name>`: `AS1` (an address space), `_Atomic`, ….
    Vendor(String),
    /// `r`, `V` or `K`.
    Cv(char),
}

/// A builtin's mangled name, read.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Name {
    pub base: String,
    pub params: Vec<Type>,
}

const BUILTIN_CODES: &str = "vwbcahstijlmxynofdegz";
const BUILTIN_D_CODES: &str = "hfdesian";

/// Reads `_Z<name><params>`; `None` for anything outside the grammar above.
pub(crate) fn demangle(mangled: &str) -> Option<Name> {
    let mut r = Reader { s: mangled.as_bytes(), pos: 0, subs: Vec::new() };
    r.expect("_Z")?;
    let base = r.source_name()?;
    let mut params = Vec::new();
    if r.rest() == b"v" {
        return Some(Name { base, params });
    }
    while r.pos < r.s.len() {
        params.push(r.ty()?);
    }
    (!params.is_empty()).then_some(Name { base, params })
}

/// Writes a name back, with the substitutions clang would write.
pub(crate) fn mangle(name: &Name) -> String {
    let mut w = Writer { out: format!("_Z{}{}", name.base.len(), name.base), subs: Vec::new() };
    if name.params.is_empty() {
        w.out.push('v');
    }
    for p in &name.params {
        w.ty(p);
    }
    w.out
}

struct Reader<'a> {
    s: &'a [u8],
    pos: usize,
    subs: Vec<Type>,
}

impl Reader<'_> {
    fn rest(&self) -> &[u8] {
        &self.s[self.pos..]
    }

    fn peek(&self) -> Option<u8> {
        self.s.get(self.pos).copied()
    }

    fn next(&mut self) -> Option<u8> {
        let c = self.peek()?;
        self.pos += 1;
        Some(c)
    }

    fn expect(&mut self, text: &str) -> Option<()> {
        self.rest().starts_with(text.as_bytes()).then(|| self.pos += text.len())
    }

    fn number(&mut self) -> Option<usize> {
        let start = self.pos;
        while self.peek().is_some_and(|c| c.is_ascii_digit()) {
            self.pos += 1;
        }
        std::str::from_utf8(&self.s[start..self.pos]).ok()?.parse().ok()
    }

    fn source_name(&mut self) -> Option<String> {
        let len = self.number()?;
        let end = self.pos.checked_add(len).filter(|&e| e <= self.s.len() && len > 0)?;
        let name = std::str::from_utf8(&self.s[self.pos..end]).ok()?.to_string();
        self.pos = end;
        Some(name)
    }

    fn ty(&mut self) -> Option<Type> {
        let c = self.peek()?;
        let ty = match c {
            b'S' => {
                self.pos += 1;
                let index = if self.peek() == Some(b'_') {
                    0
                } else {
                    let start = self.pos;
                    while self.peek().is_some_and(|c| c.is_ascii_digit() || c.is_ascii_uppercase())
                    {
                        self.pos += 1;
                    }
                    let seq = std::str::from_utf8(&self.s[start..self.pos]).ok()?;
                    usize::from_str_radix(seq, 36).ok()?.checked_add(1)?
                };
                self.expect("_")?;
                return self.subs.get(index).cloned();
            }
            b'P' | b'R' | b'O' => {
                self.pos += 1;
                Type::Pointer(c as char, Box::new(self.ty()?))
            }
            b'U' | b'r' | b'V' | b'K' => {
                let mut quals = Vec::new();
                while let Some(q) = self.peek() {
                    match q {
                        b'U' => {
                            self.pos += 1;
                            quals.push(Qualifier::Vendor(self.source_name()?));
                        }
                        b'r' | b'V' | b'K' => {
                            self.pos += 1;
                            quals.push(Qualifier::Cv(q as char));
                        }
                        _ => break,
                    }
                }
                Type::Qualified(quals, Box::new(self.ty()?))
            }
            b'D' => {
                self.pos += 1;
                match self.next()? {
                    b'v' => {
                        let n = u32::try_from(self.number()?).ok()?;
                        self.expect("_")?;
                        Type::Vector(n, Box::new(self.ty()?))
                    }
                    d if BUILTIN_D_CODES.as_bytes().contains(&d) => {
                        return Some(Type::Builtin(format!("D{}", d as char)))
                    }
                    _ => return None,
                }
            }
            b'0'..=b'9' => Type::Named(self.source_name()?),
            c if BUILTIN_CODES.as_bytes().contains(&c) => {
                self.pos += 1;
                return Some(Type::Builtin((c as char).to_string()));
            }
            _ => return None,
        };
        self.subs.push(ty.clone());
        Some(ty)
    }
}

struct Writer {
    out: String,
    subs: Vec<Type>,
}

impl Writer {
    fn ty(&mut self, ty: &Type) {
        if let Type::Builtin(code) = ty {
            self.out.push_str(code);
            return;
        }
        if let Some(index) = self.subs.iter().position(|s| s == ty) {
            match index {
                0 => self.out.push_str("S_"),
                i => {
                    self.out.push('S');
                    self.out.push_str(&base36(i - 1));
                    self.out.push('_');
                }
            }
            return;
        }
        match ty {
            Type::Builtin(_) => unreachable!("written above"),
            Type::Vector(n, element) => {
                self.out.push_str(&format!("Dv{n}_"));
                self.ty(element);
            }
            Type::Pointer(kind, pointee) => {
                self.out.push(*kind);
                self.ty(pointee);
            }
            Type::Qualified(quals, inner) => {
                for q in quals {
                    match q {
                        Qualifier::Vendor(name) => {
                            self.out.push_str(&format!("U{}{name}", name.len()))
                        }
                        Qualifier::Cv(c) => self.out.push(*c),
                    }
                }
                self.ty(inner);
            }
            Type::Named(name) => self.out.push_str(&format!("{}{name}", name.len())),
        }
        self.subs.push(ty.clone());
    }
}

fn base36(mut n: usize) -> String {
    const DIGITS: &[u8] = b"0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZ";
    let mut out = Vec::new();
    loop {
        out.push(DIGITS[n % 36]);
        n /= 36;
        if n == 0 {
            break;
        }
    }
    out.reverse();
    String::from_utf8(out).expect("ASCII digits")
}

impl Type {
    /// The type with every address-space qualifier (`U3AS<n>`) mapped by `map` (`None`: no
    /// qualifier), and qualified types left without qualifiers unwrapped.
    pub(crate) fn map_address_spaces(&self, map: &impl Fn(u32) -> Option<u32>) -> Type {
        match self {
            Type::Builtin(_) | Type::Named(_) => self.clone(),
            Type::Vector(n, e) => Type::Vector(*n, Box::new(e.map_address_spaces(map))),
            Type::Pointer(k, p) => Type::Pointer(*k, Box::new(p.map_address_spaces(map))),
            Type::Qualified(quals, inner) => {
                let quals: Vec<Qualifier> = quals
                    .iter()
                    .filter_map(|q| match q {
                        Qualifier::Vendor(v) => match v
                            .strip_prefix("AS")
                            .and_then(|n| n.parse().ok())
                        {
                            Some(space) => map(space).map(|s| Qualifier::Vendor(format!("AS{s}"))),
                            None => Some(q.clone()),
                        },
                        Qualifier::Cv(_) => Some(q.clone()),
                    })
                    .collect();
                let inner = inner.map_address_spaces(map);
                if quals.is_empty() {
                    inner
                } else {
                    Type::Qualified(quals, Box::new(inner))
                }
            }
        }
    }

    /// The type with builtin type `from` made `to` wherever it is (`PU3AS1KDv4_Dh` →
    /// `PU3AS1KDv4_t`).
    pub(crate) fn with_builtin(&self, from: &str, to: &str) -> Type {
        match self {
            Type::Builtin(code) if code == from => Type::Builtin(to.to_string()),
            Type::Builtin(_) | Type::Named(_) => self.clone(),
            Type::Vector(n, e) => Type::Vector(*n, Box::new(e.with_builtin(from, to))),
            Type::Pointer(k, p) => Type::Pointer(*k, Box::new(p.with_builtin(from, to))),
            Type::Qualified(q, t) => Type::Qualified(q.clone(), Box::new(t.with_builtin(from, to))),
        }
    }

    /// The type under qualifiers and pointers: `PU3AS1Vi` → `i`.
    pub(crate) fn innermost(&self) -> &Type {
        match self {
            Type::Pointer(_, t) | Type::Qualified(_, t) => t.innermost(),
            _ => self,
        }
    }

    /// The builtin code of a scalar, or of a vector's element.
    pub(crate) fn scalar_code(&self) -> Option<&str> {
        match self {
            Type::Builtin(code) => Some(code),
            Type::Vector(_, e) => e.scalar_code(),
            _ => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn round_trip(name: &str) -> String {
        mangle(&demangle(name).unwrap_or_else(|| panic!("{name} does not read")))
    }

    #[test]
    fn names_read_and_write_back_unchanged() {
        for name in [
            "_Z12get_work_dimv",
            "_Z13get_global_idj",
            "_Z5fractfPU3AS4f",
            "_Z5fractDv4_fPU3AS4S_",
            "_Z6vload4mPU3AS2Kf",
            "_Z10atomic_addPU3AS1Vii",
            "_Z21async_work_group_copyPU3AS1Dv16_cPU3AS3KS_m9ocl_event",
            "_Z17wait_group_eventsiP9ocl_event",
            // clang's own: a qualified type is one candidate (S_), its pointer the next (S0_).
            "_Z1fPU3AS1ViS0_PU3AS1iS2_",
            "_Z1gPU3AS1KDv4_fS1_S_",
            "_Z6remquoDv4_fS_PU3AS4Dv4_i",
            "_Z3madDhDhDh",
        ] {
            assert_eq!(round_trip(name), name);
        }
    }

    #[test]
    fn what_is_not_a_plain_builtin_is_not_read() {
        for name in ["lib_func", "_ZN2ns1fEi", "_Z", "_Z3fo", "_Z3fooIiEvT_", "_Z1fS_", "_Z1fQ"] {
            assert_eq!(demangle(name), None, "{name}");
        }
    }

    #[test]
    fn mapping_an_address_space_away_renumbers_substitutions() {
        let spir_to_nvptx = |s: u32| match s {
            1 => Some(1),
            2 => Some(4),
            3 => Some(3),
            _ => None,
        };
        let map = |name: &str| {
            let n = demangle(name).unwrap();
            let params = n.params.iter().map(|p| p.map_address_spaces(&spir_to_nvptx)).collect();
            mangle(&Name { base: n.base, params })
        };
        assert_eq!(map("_Z5fractfPU3AS4f"), "_Z5fractfPf");
        assert_eq!(map("_Z5fractDv4_fPU3AS4S_"), "_Z5fractDv4_fPS_");
        assert_eq!(map("_Z6vload4mPU3AS2Kf"), "_Z6vload4mPU3AS4Kf");
        assert_eq!(map("_Z6vload4mPU3AS4Kf"), "_Z6vload4mPKf");
        assert_eq!(map("_Z10atomic_addPU3AS4Vii"), "_Z10atomic_addPVii");
        // Two generic pointers: `U3AS4i` was S_ and its pointer S0_; without the qualifier
        // `i` is no candidate, so the pointer becomes S_.
        assert_eq!(map("_Z1fPU3AS4iS0_"), "_Z1fPiS_");
        // `const float4` stays qualified: still three candidates, so `S1_` again.
        assert_eq!(map("_Z1gPU3AS4KDv4_fS1_S_"), "_Z1gPKDv4_fS1_S_");
    }

    #[test]
    fn base36_sequence_ids() {
        assert_eq!(base36(0), "0");
        assert_eq!(base36(35), "Z");
        assert_eq!(base36(36), "10");
        let mut name = Name { base: "f".into(), params: vec![] };
        for n in 1..=40 {
            name.params.push(Type::Vector(n, Box::new(Type::Builtin("f".into()))));
        }
        name.params.push(Type::Vector(38, Box::new(Type::Builtin("f".into()))));
        assert!(mangle(&name).ends_with("Dv40_fS10_"), "{}", mangle(&name));
        assert_eq!(round_trip(&mangle(&name)), mangle(&name));
    }
}

#[cfg(test)]
mod libclc_tests {
    use super::*;

    /// Our reading and writing agree with clang's mangling on every name libclc's NVPTX
    /// library defines: each reads, and writes back unchanged.
    #[test]
    fn every_libclc_name_round_trips() {
        let libclc = sycl_build::ToolFile::LIBCLC_NVPTX.find(None, false).unwrap();
        let out = std::process::Command::new("llvm-nm-16")
            .args(["--defined-only", "--just-symbol-name"])
            .arg(libclc)
            .output()
            .unwrap();
        assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
        let names = String::from_utf8(out.stdout).unwrap();
        let mangled: Vec<&str> = names.lines().filter(|n| n.starts_with("_Z")).collect();
        assert!(mangled.len() > 5000, "{} names", mangled.len());
        let failures: Vec<&str> = mangled
            .iter()
            .copied()
            .filter(|n| demangle(n).map(|d| mangle(&d)).as_deref() != Some(*n))
            .collect();
        assert!(
            failures.is_empty(),
            "{} of {}: {:?}",
            failures.len(),
            mangled.len(),
            &failures[..failures.len().min(20)]
        );
    }
}
