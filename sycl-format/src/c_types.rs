//! OpenCL C's types as kernel parameters name them (`int`, `float4`, `struct Pt`, the pointee
//! of `global int*`), and the Rust types that match them. One table serves every caller: the
//! build script's typed launchers and specialization-constant handles, and the runtime's check
//! of a launch's arguments.
//!
//! SPIR-V has no signedness, so a kernel's `uint` reads as `int`: each integer type matches
//! its signed and unsigned Rust types alike. A vector of 3 is as wide as one of 4, as OpenCL C
//! lays it out, so `float3` matches `[f32; 4]`.

/// A scalar type of OpenCL C.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Scalar {
    /// Its name in OpenCL C, the signed one for integers (as SPIR-V reads them back).
    pub c: &'static str,
    /// Its size in bytes.
    pub size: u32,
    /// The Rust types that match it, as `std::any::type_name` writes them; the first is the
    /// one a generated signature declares.
    pub rust: &'static [&'static str],
    /// Whether it is a floating-point type (a literal such as `2.0` defaults to `f64`, so a
    /// signature declares the matching type itself rather than accepting several).
    pub float: bool,
}

/// Every scalar type a kernel parameter can have, by its OpenCL C name.
pub const SCALARS: &[Scalar] = &[
    Scalar { c: "char", size: 1, rust: &["i8", "u8"], float: false },
    Scalar { c: "short", size: 2, rust: &["i16", "u16"], float: false },
    Scalar { c: "int", size: 4, rust: &["i32", "u32"], float: false },
    // `usize` and `isize` are 64 bits on every host and device the toolkit serves.
    Scalar { c: "long", size: 8, rust: &["i64", "u64", "usize", "isize"], float: false },
    // `half`'s bits as `u16` too: programs without the `half` crate keep them so.
    Scalar { c: "half", size: 2, rust: &["half::binary16::f16", "u16"], float: true },
    Scalar { c: "float", size: 4, rust: &["f32"], float: true },
    Scalar { c: "double", size: 8, rust: &["f64"], float: true },
];

/// Unsigned and spelled-out names, and the scalar each is.
const ALIASES: &[(&str, &str)] = &[
    ("uchar", "char"),
    ("signed char", "char"),
    ("unsigned char", "char"),
    ("ushort", "short"),
    ("unsigned short", "short"),
    ("uint", "int"),
    ("unsigned int", "int"),
    ("unsigned", "int"),
    ("ulong", "long"),
    ("unsigned long", "long"),
];

/// The vector widths OpenCL C has.
pub const VECTOR_LANES: [u32; 5] = [2, 3, 4, 8, 16];

/// A type of OpenCL C, as far as matching Rust types goes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CType<'a> {
    /// A scalar, or a vector of them.
    Number {
        /// The scalar, or the vector's element.
        scalar: &'static Scalar,
        /// 1 for a scalar; a vector's width (2, 3, 4, 8 or 16).
        lanes: u32,
    },
    /// A struct or union, by its name (`Pt` of `struct Pt`).
    Struct(&'a str),
    /// Anything else: `void`, an array, an image, a pointer to a pointer.
    Other,
}

impl CType<'_> {
    /// The type that `text` names: `int`, `uint`, `float4`, `struct Pt`.
    pub fn parse(text: &str) -> CType<'_> {
        let text = text.trim();
        if let Some(name) = text.strip_prefix("struct ").or_else(|| text.strip_prefix("union ")) {
            return CType::Struct(name.trim());
        }
        if let Some(scalar) = scalar(text) {
            return CType::Number { scalar, lanes: 1 };
        }
        let digits = text.len() - text.trim_end_matches(|c: char| c.is_ascii_digit()).len();
        let (base, lanes) = text.split_at(text.len() - digits);
        match (scalar(base), lanes.parse::<u32>()) {
            (Some(scalar), Ok(lanes)) if VECTOR_LANES.contains(&lanes) => {
                CType::Number { scalar, lanes }
            }
            _ => CType::Other,
        }
    }

    /// The Rust types that match it, as `std::any::type_name` writes them (`[f32; 4]` for
    /// `float4` and `float3`); empty for a struct or another type.
    pub fn rust_names(&self) -> Vec<String> {
        match *self {
            CType::Number { scalar, lanes: 1 } => {
                scalar.rust.iter().map(|r| r.to_string()).collect()
            }
            CType::Number { scalar, lanes } => {
                let width = if lanes == 3 { 4 } else { lanes };
                scalar.rust.iter().map(|r| format!("[{r}; {width}]")).collect()
            }
            CType::Struct(_) | CType::Other => Vec::new(),
        }
    }

    /// Its name in OpenCL C, as the parameter lists write it (`int`, `float4`, `struct Pt`).
    pub fn name(&self) -> String {
        match *self {
            CType::Number { scalar, lanes: 1 } => scalar.c.to_string(),
            CType::Number { scalar, lanes } => format!("{}{lanes}", scalar.c),
            CType::Struct(name) => format!("struct {name}"),
            CType::Other => "another type".to_string(),
        }
    }
}

/// The scalar type `name` names (an alias such as `uint` gives `int`).
pub fn scalar(name: &str) -> Option<&'static Scalar> {
    let name = ALIASES.iter().find(|(alias, _)| *alias == name).map_or(name, |(_, c)| c);
    SCALARS.iter().find(|s| s.c == name)
}

/// The one Rust type a declaration of the OpenCL C scalar type `c` names, where a single type
/// must be named (a specialization constant's handle): `int` → `i32`, `uint`, `unsigned int`
/// → `u32`, `uchar` → `u8`, `float` → `f32`, `double` → `f64`. `None` for a type whose Rust
/// counterpart is not in the standard library (`half`), vectors, structs and other types.
pub fn declared_rust(c: &str) -> Option<&'static str> {
    let c = c.trim();
    let scalar = scalar(c)?;
    let unsigned = c.starts_with('u');
    let rust = if unsigned { scalar.rust.get(1)? } else { scalar.rust.first()? };
    (!rust.contains("::")).then_some(*rust)
}

/// Whether values of the Rust type `type_name` (as `std::any::type_name` writes it) can be
/// what a kernel sees as `c` (a parameter's type, or a pointer parameter's pointee). `false`
/// only when they certainly cannot: a number for another number, a user's type for a number.
/// Anything for a struct, and anything for a type the table does not
/// know (`void`), is left to the size check.
pub fn matches(c: &str, type_name: &str) -> bool {
    match CType::parse(c) {
        number @ CType::Number { .. } => number.rust_names().iter().any(|r| r == type_name),
        // A struct's layout is the program's to match: by value its size is checked, and
        // memory of structs is often kept as numbers (a `Buffer<i32>` of objects).
        CType::Struct(_) | CType::Other => true,
    }
}

/// Whether memory of Rust values of `type_name` can be what a kernel's pointer to `pointee`
/// points at: as [`matches()`], and for a vector pointee also its element's type (a flat
/// `Buffer<f32>` is how programs keep the values a `global float4*` reads four at a time).
pub fn matches_memory(pointee: &str, type_name: &str) -> bool {
    match CType::parse(pointee) {
        CType::Number { scalar, lanes } if lanes > 1 => {
            scalar.rust.contains(&type_name) || matches(pointee, type_name)
        }
        _ => matches(pointee, type_name),
    }
}

/// The pointee of a pointer parameter's type, as far as matching goes: `int` of `global int*`
/// and of `global const int*`, `struct Pt` of `constant struct Pt*`; `None` for a type that
/// is not one pointer. A `const` pointee is the same type to match: memory a kernel only
/// reads holds values of the type it reads.
pub fn pointee(ty: &str) -> Option<&str> {
    let (_, pointee) = split_pointer(ty)?;
    Some(pointee)
}

/// Whether a pointer parameter's type points at `const` memory, as the parameter lists write
/// it: `global const int*`. `false` for any other type, a `constant` pointer among them (its
/// address space says it is read-only; the lists do not repeat that with `const`).
pub fn points_to_const(ty: &str) -> bool {
    split_pointer(ty).is_some_and(|(is_const, _)| is_const)
}

/// A one-level pointer type's pointee, without its address space and its `const`, and whether
/// it had that `const` (OpenCL C's order: `global const int*`).
fn split_pointer(ty: &str) -> Option<(bool, &str)> {
    let ty = ty.trim().strip_suffix('*')?;
    if ty.ends_with('*') {
        return None;
    }
    let ty = ["global ", "constant ", "local ", "private ", "generic "]
        .iter()
        .find_map(|space| ty.strip_prefix(space))
        .unwrap_or(ty);
    let ty = ty.trim_start();
    Some(match ty.strip_prefix("const ") {
        Some(pointee) => (true, pointee.trim()),
        None => (false, ty.trim()),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn types_parse_by_their_opencl_names() {
        let int = scalar("int").unwrap();
        assert_eq!(CType::parse("int"), CType::Number { scalar: int, lanes: 1 });
        assert_eq!(CType::parse("uint"), CType::Number { scalar: int, lanes: 1 });
        assert_eq!(CType::parse("unsigned int"), CType::Number { scalar: int, lanes: 1 });
        let float = scalar("float").unwrap();
        assert_eq!(CType::parse("float4"), CType::Number { scalar: float, lanes: 4 });
        assert_eq!(CType::parse("float16"), CType::Number { scalar: float, lanes: 16 });
        assert_eq!(CType::parse("uchar3").name(), "char3");
        assert_eq!(CType::parse("struct Pt"), CType::Struct("Pt"));
        for other in ["float5", "void", "char[16]", "image2d_t", "int4x", ""] {
            assert_eq!(CType::parse(other), CType::Other, "{other}");
        }
    }

    #[test]
    fn rust_types_match_by_their_type_names() {
        assert_eq!(CType::parse("int").rust_names(), ["i32", "u32"]);
        assert_eq!(CType::parse("float3").rust_names(), ["[f32; 4]"]);
        assert_eq!(CType::parse("double2").rust_names(), ["[f64; 2]"]);
        assert!(matches("int", "u32") && matches("int", "i32"));
        assert!(!matches("int", "f32") && !matches("float", "i32") && !matches("float", "f64"));
        assert!(matches("float4", "[f32; 4]") && !matches("float4", "[f32; 3]"));
        assert!(!matches("int", "app::Pt"));
        assert!(matches("struct Pt", "app::Pt") && matches("struct Pt", "[f32; 2]"));
        assert!(matches("void", "f32") && matches("void", "app::Pt"));
        assert!(matches("half", "half::binary16::f16") && matches("half", "u16"));
        assert!(!matches("half", "i16") && !matches("half", "f32"));
    }

    #[test]
    fn declared_types_keep_their_signedness() {
        for (c, rust) in [
            ("char", "i8"),
            ("signed char", "i8"),
            ("uchar", "u8"),
            ("unsigned char", "u8"),
            ("short", "i16"),
            ("ushort", "u16"),
            ("unsigned short", "u16"),
            ("int", "i32"),
            (" uint ", "u32"),
            ("unsigned int", "u32"),
            ("unsigned", "u32"),
            ("long", "i64"),
            ("ulong", "u64"),
            ("unsigned long", "u64"),
            ("float", "f32"),
            ("double", "f64"),
        ] {
            assert_eq!(declared_rust(c), Some(rust), "{c}");
        }
        for none in ["half", "float4", "int2", "struct Pt", "void", "bool", ""] {
            assert_eq!(declared_rust(none), None, "{none}");
        }
    }

    #[test]
    fn memory_of_a_vector_may_hold_its_elements() {
        assert!(matches_memory("float4", "f32") && matches_memory("float4", "[f32; 4]"));
        assert!(matches_memory("double2", "f64") && !matches_memory("double2", "f32"));
        assert!(matches_memory("int", "u32") && !matches_memory("int", "f32"));
        assert!(matches_memory("struct Pt", "i32") && matches_memory("struct Pt", "app::Pt"));
    }

    #[test]
    fn pointees_lose_their_address_space() {
        assert_eq!(pointee("global int*"), Some("int"));
        assert_eq!(pointee("constant struct Pt*"), Some("struct Pt"));
        assert_eq!(pointee("local float4*"), Some("float4"));
        assert_eq!(pointee("int"), None);
        assert_eq!(pointee("global int**"), None);
    }

    #[test]
    fn const_pointees_match_as_their_type_and_say_they_are_const() {
        assert_eq!(pointee("global const int*"), Some("int"));
        assert_eq!(pointee("local const float4*"), Some("float4"));
        assert_eq!(pointee("global const struct Pt*"), Some("struct Pt"));
        assert!(matches_memory(pointee("global const float4*").unwrap(), "f32"));
        assert!(!matches_memory(pointee("global const int*").unwrap(), "f32"));
        assert!(points_to_const("global const int*") && points_to_const("local const int*"));
        for not_const in [
            "global int*",
            "constant int*",
            "global struct constant_pool*",
            "global constint*",
            "const int",
            "global const int**",
        ] {
            assert!(!points_to_const(not_const), "{not_const}");
        }
    }
}
