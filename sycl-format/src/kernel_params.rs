//! Kernel parameter lists (`SYCL/kernel arguments`): what each kernel of an image takes, in
//! order, so that the runtime can check a launch's arguments before the driver answers a
//! mistake with a bare `CL_INVALID_KERNEL_ARGS`, `CL_INVALID_ARG_SIZE` or
//! `CL_INVALID_ARG_INDEX`. This module owns the value's line format
//! ([`sets::KERNEL_ARGUMENTS`](crate::sets::KERNEL_ARGUMENTS)) and its typed form; `sycl-spirv`
//! reads the parameters from SPIR-V. Parsing is for untrusted bytes: it returns an error,
//! never panics, and allocates no more than the value's own lines justify.

use std::fmt;

use crate::c_types;
use crate::sets::{
    KERNEL_ARGUMENTS_FIELD_SEPARATOR as FIELD, KERNEL_ARGUMENTS_LINE_SEPARATOR as LINE,
};

/// What a kernel parameter is, as far as setting it with `clSetKernelArg` goes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ParamKind {
    /// A `global` pointer: a buffer (`cl_mem`) or an SVM pointer.
    Global,
    /// A `constant` pointer: a buffer.
    Constant,
    /// A `local` pointer: set with the size to allocate and no value.
    Local,
    /// An integer, a floating-point number or a vector of them, passed by value.
    Scalar,
    /// A struct (or union) passed by value.
    Struct,
    /// An image object (`cl_mem`).
    Image,
    /// A sampler (`cl_sampler`).
    Sampler,
    /// Anything else: pipes, queues, pointers of other address spaces.
    Other,
}

impl ParamKind {
    /// Every kind, in the order of the enum.
    pub const ALL: [ParamKind; 8] = [
        ParamKind::Global,
        ParamKind::Constant,
        ParamKind::Local,
        ParamKind::Scalar,
        ParamKind::Struct,
        ParamKind::Image,
        ParamKind::Sampler,
        ParamKind::Other,
    ];

    /// The kind's word in the line format.
    pub fn name(self) -> &'static str {
        match self {
            ParamKind::Global => "global",
            ParamKind::Constant => "constant",
            ParamKind::Local => "local",
            ParamKind::Scalar => "scalar",
            ParamKind::Struct => "struct",
            ParamKind::Image => "image",
            ParamKind::Sampler => "sampler",
            ParamKind::Other => "other",
        }
    }

    /// The kind whose [`name`](Self::name) is `word`; `None` for a word no kind has.
    pub fn parse(word: &str) -> Option<ParamKind> {
        ParamKind::ALL.into_iter().find(|k| k.name() == word)
    }

    /// Whether the parameter is a pointer to memory (`global`, `constant`, `local`).
    pub fn is_pointer(self) -> bool {
        matches!(self, ParamKind::Global | ParamKind::Constant | ParamKind::Local)
    }
}

impl fmt::Display for ParamKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// One kernel parameter.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct KernelParam {
    /// How `clSetKernelArg` sets it: the line's first field.
    pub kind: ParamKind,
    /// Bytes, as `clSetKernelArg`'s `arg_size` expects them: the value's size for scalars,
    /// vectors (a 3-vector padded to 4 elements) and structs (OpenCL C's layout); a pointer's
    /// size for `global` and `constant` pointers (8 on 64-bit devices); 8 for images,
    /// samplers and other handles. For a `local` pointer this is the pointer's size too,
    /// although `clSetKernelArg` takes the bytes to allocate there. 0: unknown.
    pub size: u32,
    /// The type in OpenCL C's words: `global int*`, `global const int*`, `constant float*`,
    /// `local float*`, `int`, `float4`, `struct Pt`, `read_only image2d_t`, `sampler_t`. SPIR-V
    /// has no signedness, so unsigned types read as their signed twins (`uint` as `int`,
    /// `uchar` as `char`).
    ///
    /// A pointer's `const` is part of the type, in OpenCL C's order (`global const int*`),
    /// rather than a field of its own: it is what the kernel declared and what people read
    /// in a signature, and the line format stays as it was. A `constant` pointer is written
    /// without it: its address space already says that nothing writes there. `volatile` and
    /// `restrict` are left out; nothing on the host depends on them. Records written before
    /// `const` was recorded have none: see [`reads_only`](Self::reads_only).
    pub ty: String,
    /// The parameter's name, empty when the SPIR-V does not name it (clang names kernel
    /// parameters only with `-cl-kernel-arg-info` or `-fno-discard-value-names`).
    pub name: String,
}

impl KernelParam {
    /// Whether a launch only reads the memory this parameter points at, as the kernel
    /// declares it: `true` for a `constant` pointer and for a `global` pointer to `const`
    /// (`global const int*`); `false` for every other pointer (`global int*`, and `local`
    /// memory, which no buffer backs) and for every parameter that is not a pointer (a value
    /// is copied when it is set; images, samplers and other handles are not buffers). This is
    /// what ordering per buffer asks of a launch: one that only reads a buffer need wait only
    /// for the buffer's last write, and others may read it meanwhile.
    ///
    /// The declaration is trusted: a kernel that casts `const` away and writes breaks its own
    /// signature. A record written before `const` was recorded (see [`ty`](Self::ty)) has no
    /// `global` pointer to `const`, so its `global` pointers count as written: more ordering
    /// than needed, never less.
    pub fn reads_only(&self) -> bool {
        match self.kind {
            ParamKind::Constant => true,
            ParamKind::Global => c_types::points_to_const(&self.ty),
            _ => false,
        }
    }

    /// The parameter as declared: `global int* out`, or the type alone when it has no name.
    pub fn declaration(&self) -> String {
        if self.name.is_empty() {
            self.ty.clone()
        } else {
            format!("{} {}", self.ty, self.name)
        }
    }
}

/// The type text (`global int*`).
impl fmt::Display for KernelParam {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.ty)
    }
}

/// A parameter list as people read it: `(global int*, int)`; `()` for none.
pub fn kernel_signature(params: &[KernelParam]) -> String {
    let types: Vec<&str> = params.iter().map(|p| p.ty.as_str()).collect();
    format!("({})", types.join(", "))
}

/// A kernel's parameters as a `SYCL/kernel arguments` value. Tabs and line breaks, which no
/// OpenCL C type or identifier contains, become spaces, so that every parameter stays one
/// line of four fields.
pub fn encode_kernel_params(params: &[KernelParam]) -> String {
    let clean = |s: &str| s.replace([FIELD, LINE], " ");
    let lines: Vec<String> = params
        .iter()
        .map(|p| {
            format!(
                "{}{FIELD}{}{FIELD}{}{FIELD}{}",
                p.kind.name(),
                p.size,
                clean(&p.ty),
                clean(&p.name)
            )
        })
        .collect();
    lines.join(&LINE.to_string())
}

/// Why a kernel's `SYCL/kernel arguments` record cannot be read.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum KernelParamsError {
    /// A line without its four fields.
    Fields {
        /// The parameter's index (the line's).
        parameter: usize,
        /// The line as written.
        line: String,
    },
    /// A kind no [`ParamKind`] has.
    UnknownKind {
        /// The parameter's index.
        parameter: usize,
        /// The kind as written.
        kind: String,
    },
    /// A size that is not a `u32`.
    Size {
        /// The parameter's index.
        parameter: usize,
        /// The size as written.
        size: String,
    },
    /// The record is not a string.
    NotAString {
        /// The kernel whose record it is.
        kernel: String,
    },
}

impl fmt::Display for KernelParamsError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            KernelParamsError::Fields { parameter, line } => write!(
                f,
                "parameter {parameter}: expected 4 tab-separated fields (kind, size, type, name), found `{line}`"
            ),
            KernelParamsError::UnknownKind { parameter, kind } => {
                write!(f, "parameter {parameter}: unknown kind `{kind}`")
            }
            KernelParamsError::Size { parameter, size } => {
                write!(f, "parameter {parameter}: size `{size}` is not a number of bytes")
            }
            KernelParamsError::NotAString { kernel } => write!(
                f,
                "the `{}` record of kernel `{kernel}` is not a string",
                crate::sets::KERNEL_ARGUMENTS
            ),
        }
    }
}

impl std::error::Error for KernelParamsError {}

/// Reads a `SYCL/kernel arguments` value; the error says which line is wrong and why.
pub fn parse_kernel_params(value: &str) -> Result<Vec<KernelParam>, KernelParamsError> {
    if value.is_empty() {
        return Ok(Vec::new());
    }
    value
        .split(LINE)
        .enumerate()
        .map(|(parameter, line)| {
            let mut fields = line.split(FIELD);
            let (Some(kind), Some(size), Some(ty), Some(name)) =
                (fields.next(), fields.next(), fields.next(), fields.next())
            else {
                return Err(KernelParamsError::Fields { parameter, line: line.to_string() });
            };
            let kind = ParamKind::parse(kind).ok_or_else(|| KernelParamsError::UnknownKind {
                parameter,
                kind: kind.to_string(),
            })?;
            let size = size
                .parse::<u32>()
                .map_err(|_| KernelParamsError::Size { parameter, size: size.to_string() })?;
            Ok(KernelParam { kind, size, ty: ty.to_string(), name: name.to_string() })
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn param(kind: ParamKind, size: u32, ty: &str, name: &str) -> KernelParam {
        KernelParam { kind, size, ty: ty.into(), name: name.into() }
    }

    #[test]
    fn lines_round_trip_and_read_as_documented() {
        let params = vec![
            param(ParamKind::Global, 8, "global int*", "out"),
            param(ParamKind::Scalar, 4, "int", ""),
            param(ParamKind::Struct, 12, "struct Pt", "p"),
            param(ParamKind::Image, 8, "read_only image2d_t", "img"),
        ];
        let value = encode_kernel_params(&params);
        assert_eq!(value, "global\t8\tglobal int*\tout\nscalar\t4\tint\t\nstruct\t12\tstruct Pt\tp\nimage\t8\tread_only image2d_t\timg");
        assert_eq!(parse_kernel_params(&value).unwrap(), params);
        assert_eq!(parse_kernel_params("").unwrap(), [], "no parameters: an empty value");
        assert_eq!(encode_kernel_params(&[]), "");
        for kind in ParamKind::ALL {
            assert_eq!(ParamKind::parse(kind.name()), Some(kind));
        }
    }

    #[test]
    fn const_pointers_round_trip_and_say_that_launches_only_read_them() {
        let params = vec![
            param(ParamKind::Global, 8, "global const int*", "in"),
            param(ParamKind::Global, 8, "global int*", "out"),
            param(ParamKind::Constant, 8, "constant float*", "lut"),
            param(ParamKind::Local, 8, "local const int*", "scratch"),
            param(ParamKind::Scalar, 4, "int", "n"),
            param(ParamKind::Image, 8, "read_only image2d_t", "img"),
            param(ParamKind::Other, 8, "private const int*", "p"),
        ];
        let value = encode_kernel_params(&params);
        assert_eq!(
            value.lines().next(),
            Some("global\t8\tglobal const int*\tin"),
            "const is part of the type's text"
        );
        let back = parse_kernel_params(&value).unwrap();
        assert_eq!(back, params);
        let reads: Vec<bool> = back.iter().map(KernelParam::reads_only).collect();
        assert_eq!(reads, [true, false, true, false, false, false, false]);
        assert_eq!(
            kernel_signature(&back[..2]),
            "(global const int*, global int*)",
            "signatures show const"
        );
        assert_eq!(back[0].declaration(), "global const int* in");
    }

    #[test]
    fn separators_in_text_become_spaces() {
        let odd = [param(ParamKind::Struct, 4, "struct A\tB", "x\ny")];
        let back = parse_kernel_params(&encode_kernel_params(&odd)).unwrap();
        assert_eq!(back, [param(ParamKind::Struct, 4, "struct A B", "x y")]);
    }

    #[test]
    fn later_fields_are_ignored_and_malformed_lines_are_named() {
        assert_eq!(
            parse_kernel_params("scalar\t4\tint\tn\tfuture").unwrap(),
            [param(ParamKind::Scalar, 4, "int", "n")]
        );
        let err = |v: &str| parse_kernel_params(v).unwrap_err().to_string();
        assert_eq!(err("scalar\t4\tint"), "parameter 0: expected 4 tab-separated fields (kind, size, type, name), found `scalar\t4\tint`");
        assert_eq!(
            err("scalar\t4\tint\tn\npointer\t8\tint*\tp"),
            "parameter 1: unknown kind `pointer`"
        );
        assert_eq!(err("scalar\t-1\tint\tn"), "parameter 0: size `-1` is not a number of bytes");
        assert_eq!(
            err("scalar\t4294967296\tint\tn"),
            "parameter 0: size `4294967296` is not a number of bytes"
        );
        assert!(
            parse_kernel_params("scalar\t4\tint\tn\n").is_err(),
            "a trailing line break is an empty line"
        );
    }

    #[test]
    fn signatures_and_declarations() {
        let params = [
            param(ParamKind::Global, 8, "global int*", "out"),
            param(ParamKind::Scalar, 4, "int", ""),
        ];
        assert_eq!(kernel_signature(&params), "(global int*, int)");
        assert_eq!(kernel_signature(&[]), "()");
        assert_eq!(params[0].to_string(), "global int*");
        assert_eq!(params[0].declaration(), "global int* out");
        assert_eq!(params[1].declaration(), "int");
    }
}
