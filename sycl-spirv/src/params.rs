//! Kernel parameters as `clSetKernelArg` sees them: for each kernel, its parameters in order,
//! each with its kind, its size in bytes, its type in OpenCL C's words and its name when the
//! SPIR-V names it. The post-link records them in `SYCL/kernel arguments` so that the runtime
//! can check a launch's arguments before the driver sees them.
//!
//! What clang-15 and llvm-spirv-15 make of a kernel: an entry point whose function takes the
//! kernel's parameters and calls a plain function of the kernel's name with them. Both carry
//! the same parameter types and decorations; the entry function's are what the driver sets,
//! so they are what we read. Pointers keep their address space as a storage class
//! (`CrossWorkgroup` for `global`, `UniformConstant` for `constant`, `Workgroup` for
//! `local`); a struct passed by value is a `Function` pointer to it decorated `FuncParamAttr
//! ByVal`; integers have no signedness. Parameter names come from `OpName`: llvm-spirv
//! puts them on the entry function's parameters when clang ran with `-cl-kernel-arg-info`, and
//! on the plain function's with `-fno-discard-value-names`.
//!
//! SPIR-V has no `const` on a pointer's pointee. llvm-spirv-15 keeps clang's
//! `kernel_arg_type_qual` metadata when `sycl-build` asks it to
//! (`--preserve-ocl-kernel-arg-type-metadata-through-string`), as one `OpString` per kernel:
//! `kernel_arg_type_qual.KERNEL.` then each parameter's qualifiers (`const`, `volatile`,
//! `restrict`, `pipe`, space-separated in any order), each followed by a comma. A pointer
//! parameter whose list has `const` reads `global const int*`. Without the string (SPIR-V of
//! other compilers, or an earlier `sycl-build`), or when its count of parameters is not the
//! kernel's, no parameter reads `const`.
//!
//! Type sizes follow OpenCL C's layout: scalars as wide as their values and aligned to their
//! size, vectors of 3 padded to 4 and aligned to their padded size, structs laid out as C
//! does (`CPacked`: no padding). They are computed in one pass over the module's types, in
//! order (types are declared before use), so nothing here recurses on how deeply types nest.

use std::collections::{HashMap, HashSet};

use rspirv::dr::{Function, Module, Operand};
use rspirv::spirv::{
    AccessQualifier, AddressingModel, Decoration, Dim, FunctionParameterAttribute, Op,
    StorageClass, Word,
};
use sycl_format::{KernelParam, ParamKind};

/// Size of the handle `clSetKernelArg` takes for an image, a sampler, a pipe or a queue
/// (`cl_mem`, `cl_sampler`, … on a 64-bit host).
const HANDLE_SIZE: u32 = 8;

/// How the `OpString` that keeps a kernel's `kernel_arg_type_qual` metadata starts; the
/// kernel's name and a `.` follow.
const TYPE_QUAL_PREFIX: &str = "kernel_arg_type_qual.";

/// How many pointers or arrays deep a type's text goes before it is cut short: kernels take
/// `global float*`, and a type that nests further is not one people wrote.
const TEXT_DEPTH: usize = 8;

/// The parameters of each of `kernels` that is an entry point of `module`, in the order of
/// `kernels`; a kernel without an entry point is left out. The post-link records them for
/// each image; they are the same for any module that holds the kernel.
pub fn kernel_params(module: &Module, kernels: &[String]) -> Vec<(String, Vec<KernelParam>)> {
    let types = Types::of(module);
    let reader = Reader::of(module, &types);
    let mut entries: HashMap<&str, Word> = HashMap::new();
    for e in &module.entry_points {
        if let (Some(Operand::IdRef(id)), Some(Operand::LiteralString(name))) =
            (e.operands.get(1), e.operands.get(2))
        {
            entries.entry(name.as_str()).or_insert(*id);
        }
    }
    let functions: HashMap<Word, &Function> =
        module.functions.iter().filter_map(|f| Some((f.def_id()?, f))).collect();
    let qualifiers = type_qualifiers(module);
    kernels
        .iter()
        .filter_map(|kernel| {
            let entry = functions.get(entries.get(kernel.as_str())?)?;
            let qualifiers = qualifiers.get(kernel.as_str()).map(Vec::as_slice);
            Some((kernel.clone(), reader.params(entry, &functions, qualifiers)))
        })
        .collect()
}

/// Each kernel's parameter qualifiers (`const`, `restrict const`, empty), from the
/// `kernel_arg_type_qual` strings llvm-spirv keeps (the module doc says how), by kernel name;
/// the first string of a kernel counts. No qualifier holds a `.` or a `,`, so the kernel's name
/// ends at the last `.`.
fn type_qualifiers(module: &Module) -> HashMap<&str, Vec<&str>> {
    let mut out = HashMap::new();
    for inst in &module.debug_string_source {
        let (Op::String, Some(Operand::LiteralString(text))) =
            (inst.class.opcode, inst.operands.first())
        else {
            continue;
        };
        let Some((kernel, list)) =
            text.strip_prefix(TYPE_QUAL_PREFIX).and_then(|rest| rest.rsplit_once('.'))
        else {
            continue;
        };
        out.entry(kernel).or_insert_with(|| list.split_terminator(',').collect());
    }
    out
}

/// What the module says about parameters: their names and which are passed by value.
struct Reader<'m> {
    types: &'m Types,
    names: HashMap<Word, &'m str>,
    by_value: HashSet<Word>,
}

impl<'m> Reader<'m> {
    fn of(module: &'m Module, types: &'m Types) -> Reader<'m> {
        let mut names = HashMap::new();
        for n in &module.debug_names {
            if let (Op::Name, [Operand::IdRef(id), Operand::LiteralString(name)]) =
                (n.class.opcode, n.operands.as_slice())
            {
                names.entry(*id).or_insert(name.as_str());
            }
        }
        const BY_VAL: Operand =
            Operand::FunctionParameterAttribute(FunctionParameterAttribute::ByVal);
        let by_value = module
            .annotations
            .iter()
            .filter_map(|a| match (a.class.opcode, a.operands.as_slice()) {
                (
                    Op::Decorate,
                    [Operand::IdRef(id), Operand::Decoration(Decoration::FuncParamAttr), attr],
                ) if *attr == BY_VAL => Some(*id),
                _ => None,
            })
            .collect();
        Reader { types, names, by_value }
    }

    /// The parameters of kernel `entry`, with `qualifiers` (one per parameter, as
    /// [`type_qualifiers`] reads them) where known.
    fn params(
        &self,
        entry: &Function,
        functions: &HashMap<Word, &Function>,
        qualifiers: Option<&[&str]>,
    ) -> Vec<KernelParam> {
        let ids: Vec<Word> = entry.parameters.iter().filter_map(|p| p.result_id).collect();
        let qualifiers = qualifiers.filter(|q| q.len() == entry.parameters.len());
        // The plain function the entry function hands its parameters to, in order: its
        // parameters are the same ones, and may be the ones with names.
        let wrapped = entry
            .all_inst_iter()
            .filter(|i| i.class.opcode == Op::FunctionCall)
            .find(|call| {
                call.operands.len() == ids.len() + 1
                    && call.operands[1..]
                        .iter()
                        .zip(&ids)
                        .all(|(op, id)| *op == Operand::IdRef(*id))
            })
            .and_then(|call| functions.get(&call.operands[0].id_ref_any()?))
            .filter(|f| f.parameters.len() == ids.len());
        entry
            .parameters
            .iter()
            .enumerate()
            .map(|(i, p)| {
                let id = p.result_id.unwrap_or_default();
                let name = self
                    .names
                    .get(&id)
                    .or_else(|| {
                        wrapped.and_then(|f| self.names.get(&f.parameters.get(i)?.result_id?))
                    })
                    .copied()
                    .unwrap_or_default();
                let is_const =
                    qualifiers.is_some_and(|q| q[i].split_ascii_whitespace().any(|w| w == "const"));
                let mut param = self.types.param(
                    p.result_type.unwrap_or_default(),
                    self.by_value.contains(&id),
                    is_const,
                );
                param.name = name.to_string();
                param
            })
            .collect()
    }
}

/// A type as far as parameters go.
#[derive(Debug, Clone)]
enum Type {
    Int(u32),
    Float(u32),
    Bool,
    Vector(Word, u32),
    Array(Word, Option<u64>),
    Struct(Vec<Word>),
    Pointer(StorageClass, Word),
    Image {
        dim: Dim,
        depth: bool,
        arrayed: bool,
        multisampled: bool,
        access: Option<AccessQualifier>,
    },
    Sampler,
    /// Other opaque types, by their OpenCL C name (`queue_t`, `read_only pipe`).
    Opaque(String),
}

/// Bytes and alignment.
#[derive(Debug, Clone, Copy)]
struct Layout {
    size: u64,
    align: u64,
}

/// The module's types with their layouts and struct names, read once.
struct Types {
    types: HashMap<Word, Type>,
    layouts: HashMap<Word, Layout>,
    struct_names: HashMap<Word, String>,
    pointer_size: u64,
}

impl Types {
    fn of(module: &Module) -> Types {
        let pointer_size = match module.memory_model.as_ref().and_then(|m| m.operands.first()) {
            Some(Operand::AddressingModel(AddressingModel::Physical32)) => 4,
            _ => 8,
        };
        let packed: HashSet<Word> = module
            .annotations
            .iter()
            .filter_map(|a| match (a.class.opcode, a.operands.as_slice()) {
                (Op::Decorate, [Operand::IdRef(id), Operand::Decoration(Decoration::CPacked)]) => {
                    Some(*id)
                }
                _ => None,
            })
            .collect();
        let constants: HashMap<Word, u64> = module
            .types_global_values
            .iter()
            .filter(|i| i.class.opcode == Op::Constant)
            .filter_map(|i| {
                let value = match i.operands.first()? {
                    Operand::LiteralBit32(v) => u64::from(*v),
                    Operand::LiteralBit64(v) => *v,
                    _ => return None,
                };
                Some((i.result_id?, value))
            })
            .collect();

        let mut out = Types {
            types: HashMap::new(),
            layouts: HashMap::new(),
            struct_names: HashMap::new(),
            pointer_size,
        };
        let pointer = Layout { size: pointer_size, align: pointer_size };
        for inst in &module.types_global_values {
            // A pointer announced ahead may be a struct's member before it is declared.
            if let (Op::TypeForwardPointer, Some(Operand::IdRef(id))) =
                (inst.class.opcode, inst.operands.first())
            {
                out.layouts.insert(*id, pointer);
                continue;
            }
            let Some(id) = inst.result_id else { continue };
            let ops = inst.operands.as_slice();
            let ty = match (inst.class.opcode, ops) {
                (Op::TypeInt, [Operand::LiteralBit32(width), ..]) => Type::Int(*width),
                (Op::TypeFloat, [Operand::LiteralBit32(width), ..]) => Type::Float(*width),
                (Op::TypeBool, _) => Type::Bool,
                (Op::TypeVector, [Operand::IdRef(element), Operand::LiteralBit32(n)]) => {
                    Type::Vector(*element, *n)
                }
                (Op::TypeArray, [Operand::IdRef(element), Operand::IdRef(length)]) => {
                    Type::Array(*element, constants.get(length).copied())
                }
                (Op::TypeStruct, members) => {
                    Type::Struct(members.iter().filter_map(Operand::id_ref_any).collect())
                }
                (Op::TypePointer, [Operand::StorageClass(class), Operand::IdRef(pointee)]) => {
                    Type::Pointer(*class, *pointee)
                }
                (Op::TypeImage, [_, Operand::Dim(dim), depth, arrayed, ms, rest @ ..]) => {
                    let flag = |op: &Operand| matches!(op, Operand::LiteralBit32(1));
                    let access = rest.iter().find_map(|op| match op {
                        Operand::AccessQualifier(q) => Some(*q),
                        _ => None,
                    });
                    Type::Image {
                        dim: *dim,
                        depth: flag(depth),
                        arrayed: flag(arrayed),
                        multisampled: flag(ms),
                        access,
                    }
                }
                (Op::TypeSampler, _) => Type::Sampler,
                (Op::TypePipe, ops) => {
                    let access = ops.iter().find_map(|op| match op {
                        Operand::AccessQualifier(q) => Some(*q),
                        _ => None,
                    });
                    Type::Opaque(
                        access.map_or("pipe".to_string(), |q| format!("{} pipe", access_text(q))),
                    )
                }
                (Op::TypeQueue, _) => Type::Opaque("queue_t".into()),
                (Op::TypeEvent, _) => Type::Opaque("event_t".into()),
                (Op::TypeDeviceEvent, _) => Type::Opaque("clk_event_t".into()),
                (Op::TypeReserveId, _) => Type::Opaque("reserve_id_t".into()),
                _ => continue,
            };
            let layout = out.layout_of(&ty, packed.contains(&id));
            if let Some(layout) = layout {
                out.layouts.insert(id, layout);
            }
            out.types.insert(id, ty);
        }
        for n in &module.debug_names {
            if let (Op::Name, [Operand::IdRef(id), Operand::LiteralString(name)]) =
                (n.class.opcode, n.operands.as_slice())
            {
                if matches!(out.types.get(id), Some(Type::Struct(_)))
                    && !out.struct_names.contains_key(id)
                {
                    out.struct_names.insert(*id, struct_text(name));
                }
            }
        }
        out
    }

    /// A type's layout from its parts' layouts, already known (`None`: unknown, or larger
    /// than 64 bits can count).
    fn layout_of(&self, ty: &Type, packed: bool) -> Option<Layout> {
        let scalar = |bits: u32| {
            let size = u64::from(bits.div_ceil(8)).max(1).next_power_of_two();
            Layout { size, align: size }
        };
        Some(match ty {
            Type::Int(bits) | Type::Float(bits) => scalar(*bits),
            Type::Bool => Layout { size: 1, align: 1 },
            Type::Vector(element, n) => {
                let element = self.layouts.get(element)?;
                let n = if *n == 3 { 4 } else { u64::from(*n) };
                let size = element.size.checked_mul(n)?;
                Layout { size, align: size.checked_next_power_of_two()? }
            }
            Type::Array(element, length) => {
                let element = self.layouts.get(element)?;
                Layout { size: element.size.checked_mul((*length)?)?, align: element.align }
            }
            Type::Struct(members) => {
                let (mut size, mut align) = (0u64, 1u64);
                for member in members {
                    let m = self.layouts.get(member)?;
                    let m_align = if packed { 1 } else { m.align.max(1) };
                    size = size.checked_next_multiple_of(m_align)?.checked_add(m.size)?;
                    align = align.max(m_align);
                }
                Layout { size: size.checked_next_multiple_of(align)?, align }
            }
            Type::Pointer(..) => Layout { size: self.pointer_size, align: self.pointer_size },
            Type::Image { .. } | Type::Sampler | Type::Opaque(_) => return None,
        })
    }

    /// The parameter of type `ty` (`by_value`: decorated `FuncParamAttr ByVal`; `is_const`:
    /// its qualifiers have `const`), unnamed.
    fn param(&self, ty: Word, by_value: bool, is_const: bool) -> KernelParam {
        let size =
            |id: Word| self.layouts.get(&id).map_or(0, |l| u32::try_from(l.size).unwrap_or(0));
        let (kind, size) = match self.types.get(&ty) {
            Some(Type::Pointer(_, pointee)) if by_value => {
                let kind = match self.types.get(pointee) {
                    Some(Type::Int(_) | Type::Float(_) | Type::Bool | Type::Vector(..)) => {
                        ParamKind::Scalar
                    }
                    Some(Type::Struct(_)) => ParamKind::Struct,
                    _ => ParamKind::Other,
                };
                return KernelParam {
                    kind,
                    size: size(*pointee),
                    ty: self.text(*pointee, false),
                    name: String::new(),
                };
            }
            Some(Type::Pointer(class, _)) => {
                let kind = match class {
                    StorageClass::CrossWorkgroup => ParamKind::Global,
                    StorageClass::UniformConstant => ParamKind::Constant,
                    StorageClass::Workgroup => ParamKind::Local,
                    _ => ParamKind::Other,
                };
                (kind, size(ty))
            }
            Some(Type::Int(_) | Type::Float(_) | Type::Bool | Type::Vector(..)) => {
                (ParamKind::Scalar, size(ty))
            }
            Some(Type::Struct(_)) => (ParamKind::Struct, size(ty)),
            Some(Type::Image { .. }) => (ParamKind::Image, HANDLE_SIZE),
            Some(Type::Sampler) => (ParamKind::Sampler, HANDLE_SIZE),
            Some(Type::Opaque(_)) => (ParamKind::Other, HANDLE_SIZE),
            Some(Type::Array(..)) | None => (ParamKind::Other, size(ty)),
        };
        KernelParam { kind, size, ty: self.text(ty, is_const), name: String::new() }
    }

    /// A type in OpenCL C's words: `global int*`, `float4`, `struct Pt`, `char[16]`; with
    /// `pointee_const`, a pointer's pointee is `const` (`global const int*`), except where
    /// the text stays as it is: a `constant` pointer (read-only by its address space), a
    /// pointer to a pointer or an array (no kernel takes one), and a type that is not a
    /// pointer (clang gives a value no `const`).
    fn text(&self, ty: Word, pointee_const: bool) -> String {
        // Pointers and arrays wrap a base type: `global` + `int` + `*`, `char` + `[16]`.
        let (mut id, mut space, mut suffix) = (ty, None, String::new());
        for _ in 0..TEXT_DEPTH {
            match self.types.get(&id) {
                Some(Type::Pointer(class, pointee)) => {
                    space.get_or_insert(*class);
                    suffix.insert(0, '*');
                    id = *pointee;
                }
                Some(Type::Array(element, length)) => {
                    suffix.push_str(&length.map_or("[]".to_string(), |n| format!("[{n}]")));
                    id = *element;
                }
                _ => break,
            }
        }
        let base = match self.types.get(&id) {
            Some(Type::Int(bits)) => int_text(*bits),
            Some(Type::Float(bits)) => float_text(*bits),
            Some(Type::Bool) => "bool".to_string(),
            Some(Type::Vector(element, n)) => {
                let element = match self.types.get(element) {
                    Some(Type::Int(bits)) => int_text(*bits),
                    Some(Type::Float(bits)) => float_text(*bits),
                    Some(Type::Bool) => "bool".to_string(),
                    _ => "?".to_string(),
                };
                format!("{element}{n}")
            }
            Some(Type::Struct(_)) => {
                self.struct_names.get(&id).cloned().unwrap_or_else(|| "struct".to_string())
            }
            Some(Type::Image { dim, depth, arrayed, multisampled, access }) => {
                image_text(*dim, *depth, *arrayed, *multisampled, *access)
            }
            Some(Type::Sampler) => "sampler_t".to_string(),
            Some(Type::Opaque(name)) => name.clone(),
            // Nested deeper than we follow.
            Some(Type::Pointer(..) | Type::Array(..)) => "...".to_string(),
            // `void` as a pointee, or a type kernels never take.
            None => "void".to_string(),
        };
        let qualifier = match space {
            Some(class)
                if pointee_const && class != StorageClass::UniformConstant && suffix == "*" =>
            {
                "const "
            }
            _ => "",
        };
        let space = space.map(|class| match class {
            StorageClass::CrossWorkgroup => "global ".to_string(),
            StorageClass::UniformConstant => "constant ".to_string(),
            StorageClass::Workgroup => "local ".to_string(),
            StorageClass::Function => "private ".to_string(),
            StorageClass::Generic => "generic ".to_string(),
            other => format!("{other:?} "),
        });
        format!("{}{qualifier}{base}{suffix}", space.unwrap_or_default())
    }
}

fn int_text(bits: u32) -> String {
    match bits {
        8 => "char".into(),
        16 => "short".into(),
        32 => "int".into(),
        64 => "long".into(),
        n => format!("i{n}"),
    }
}

fn float_text(bits: u32) -> String {
    match bits {
        16 => "half".into(),
        32 => "float".into(),
        64 => "double".into(),
        n => format!("f{n}"),
    }
}

fn access_text(access: AccessQualifier) -> &'static str {
    match access {
        AccessQualifier::ReadOnly => "read_only",
        AccessQualifier::WriteOnly => "write_only",
        AccessQualifier::ReadWrite => "read_write",
    }
}

/// `read_only image2d_array_depth_t` and the like.
fn image_text(
    dim: Dim,
    depth: bool,
    arrayed: bool,
    multisampled: bool,
    access: Option<AccessQualifier>,
) -> String {
    let dim = match dim {
        Dim::Dim1D => "1d",
        Dim::Dim2D => "2d",
        Dim::Dim3D => "3d",
        Dim::DimBuffer => "1d_buffer",
        Dim::DimCube => "cube",
        _ => "",
    };
    let mut text = access.map(|a| format!("{} ", access_text(a))).unwrap_or_default();
    text.push_str("image");
    text.push_str(dim);
    if arrayed {
        text.push_str("_array");
    }
    if multisampled {
        text.push_str("_msaa");
    }
    if depth {
        text.push_str("_depth");
    }
    text.push_str("_t");
    text
}

/// A struct's `OpName` as OpenCL C writes the type: clang names struct types `struct.NAME`
/// (`class.NAME`, `union.NAME` in C++ for OpenCL), and LLVM adds `.N` to tell apart types of
/// one name; a C identifier has no dot, so both go.
fn struct_text(name: &str) -> String {
    let (keyword, rest) = ["struct.", "class.", "union."]
        .iter()
        .find_map(|prefix| Some((prefix.trim_end_matches('.'), name.strip_prefix(prefix)?)))
        .unwrap_or(("struct", name));
    let rest = match rest.rsplit_once('.') {
        Some((base, n))
            if !base.is_empty() && !n.is_empty() && n.bytes().all(|b| b.is_ascii_digit()) =>
        {
            base
        }
        _ => rest,
    };
    format!("{keyword} {rest}")
}

#[cfg(test)]
mod tests {
    use super::*;
    use rspirv::dr::Builder;
    use rspirv::spirv::{Capability, ExecutionModel, FunctionControl, ImageFormat, MemoryModel};

    fn builder(addressing: AddressingModel) -> Builder {
        let mut b = Builder::new();
        b.capability(Capability::Kernel);
        b.capability(Capability::Addresses);
        b.memory_model(addressing, MemoryModel::OpenCL);
        b
    }

    /// Adds kernel `name` as clang makes it: a plain function of the kernel's name taking
    /// `params` (named by `plain_names` where given), and an entry function taking the same
    /// ones (named by `entry_names` where given) that calls it with them. `by_value` lists
    /// positions decorated `FuncParamAttr ByVal` on both.
    fn kernel(
        b: &mut Builder,
        name: &str,
        params: &[Word],
        plain_names: &[&str],
        entry_names: &[&str],
        by_value: &[usize],
    ) {
        let void = b.type_void();
        let fn_type = b.type_function(void, params.to_vec());
        let add = |b: &mut Builder, names: &[&str], call: Option<Word>| -> (Word, Vec<Word>) {
            let f = b.begin_function(void, None, FunctionControl::NONE, fn_type).unwrap();
            let ids: Vec<Word> = params.iter().map(|p| b.function_parameter(*p).unwrap()).collect();
            b.begin_block(None).unwrap();
            if let Some(callee) = call {
                b.function_call(void, None, callee, ids.clone()).unwrap();
            }
            b.ret().unwrap();
            b.end_function().unwrap();
            for (id, n) in ids.iter().zip(names) {
                b.name(*id, *n);
            }
            for &i in by_value {
                let attr = Operand::FunctionParameterAttribute(FunctionParameterAttribute::ByVal);
                b.decorate(ids[i], Decoration::FuncParamAttr, vec![attr]);
            }
            (f, ids)
        };
        let (plain, _) = add(b, plain_names, None);
        b.name(plain, name);
        let (entry, _) = add(b, entry_names, Some(plain));
        b.entry_point(ExecutionModel::Kernel, entry, name, vec![]);
    }

    fn params_of(module: &Module, name: &str) -> Vec<KernelParam> {
        let mut all = kernel_params(module, &[name.to_string()]);
        assert_eq!(all.len(), 1, "{name} has an entry point");
        all.pop().unwrap().1
    }

    /// (kind, size, type) of each parameter.
    fn shapes(params: &[KernelParam]) -> Vec<(ParamKind, u32, &str)> {
        params.iter().map(|p| (p.kind, p.size, p.ty.as_str())).collect()
    }

    #[test]
    fn buffers_scalars_and_local_scratch() {
        let mut b = builder(AddressingModel::Physical64);
        let int = b.type_int(32, 0);
        let float = b.type_float(32, None);
        let global_int = b.type_pointer(None, StorageClass::CrossWorkgroup, int);
        let constant_float = b.type_pointer(None, StorageClass::UniformConstant, float);
        let local_float = b.type_pointer(None, StorageClass::Workgroup, float);
        let params = [global_int, constant_float, local_float, int];
        kernel(&mut b, "k", &params, &[], &[], &[]);
        let m = b.module();
        assert_eq!(
            shapes(&params_of(&m, "k")),
            [
                (ParamKind::Global, 8, "global int*"),
                (ParamKind::Constant, 8, "constant float*"),
                (ParamKind::Local, 8, "local float*"),
                (ParamKind::Scalar, 4, "int"),
            ]
        );
        assert!(params_of(&m, "k").iter().all(|p| p.name.is_empty()), "nothing names them");
        assert_eq!(
            sycl_format::kernel_signature(&params_of(&m, "k")),
            "(global int*, constant float*, local float*, int)"
        );
    }

    #[test]
    fn const_comes_from_the_qualifier_strings_llvm_spirv_keeps() {
        let mut b = builder(AddressingModel::Physical64);
        let int = b.type_int(32, 0);
        let float = b.type_float(32, None);
        let global_int = b.type_pointer(None, StorageClass::CrossWorkgroup, int);
        let constant_float = b.type_pointer(None, StorageClass::UniformConstant, float);
        let local_int = b.type_pointer(None, StorageClass::Workgroup, int);
        let global_global_int = b.type_pointer(None, StorageClass::CrossWorkgroup, global_int);
        let pt = b.type_struct([int, float]);
        b.name(pt, "struct.Pt");
        let by_value = b.type_pointer(None, StorageClass::Function, pt);
        let global_pt = b.type_pointer(None, StorageClass::CrossWorkgroup, pt);
        let params = [
            global_int,
            global_int,
            global_int,
            global_int,
            constant_float,
            local_int,
            int,
            by_value,
            global_global_int,
            global_pt,
        ];
        kernel(&mut b, "k", &params, &[], &[], &[7]);
        // As clang writes them: `const global int* a`, `global int* restrict b`,
        // `const global int* restrict c`, `volatile global int* d`, `constant float* e`,
        // `local const int* f`, `const int n`, `struct Pt p`, and two more.
        b.string(
            "kernel_arg_type_qual.k.const,restrict,restrict const,volatile,const,const,,,const,const,",
        );
        kernel(&mut b, "kk", &[global_int], &[], &[], &[]);
        b.string("kernel_arg_type_qual.kk.,");
        // Counts that are not the kernel's: the strings are not trusted.
        kernel(&mut b, "short", &[global_int, global_int], &[], &[], &[]);
        b.string("kernel_arg_type_qual.short.const,");
        kernel(&mut b, "long", &[global_int], &[], &[], &[]);
        b.string("kernel_arg_type_qual.long.const,const,");
        kernel(&mut b, "none", &[global_int], &[], &[], &[]);
        kernel(&mut b, "empty", &[], &[], &[], &[]);
        b.string("kernel_arg_type_qual.empty.");
        b.string("kernel_arg_type.k.int*,int*,int*,int*,float*,int*,int,Pt,int**,Pt*,");
        let m = b.module();
        let k = params_of(&m, "k");
        assert_eq!(
            shapes(&k),
            [
                (ParamKind::Global, 8, "global const int*"),
                (ParamKind::Global, 8, "global int*"),
                (ParamKind::Global, 8, "global const int*"),
                (ParamKind::Global, 8, "global int*"),
                (ParamKind::Constant, 8, "constant float*"),
                (ParamKind::Local, 8, "local const int*"),
                (ParamKind::Scalar, 4, "int"),
                (ParamKind::Struct, 8, "struct Pt"),
                (ParamKind::Global, 8, "global int**"),
                (ParamKind::Global, 8, "global const struct Pt*"),
            ]
        );
        let reads: Vec<bool> = k.iter().map(KernelParam::reads_only).collect();
        assert_eq!(reads, [true, false, true, false, true, false, false, false, false, true]);
        for other in ["kk", "short", "long", "none"] {
            let params = params_of(&m, other);
            assert!(
                params.iter().all(|p| p.ty == "global int*" && !p.reads_only()),
                "{other}: {params:?}"
            );
        }
        assert_eq!(params_of(&m, "empty"), []);
    }

    #[test]
    fn scalars_and_vectors_take_their_size_with_three_padded_to_four() {
        let mut b = builder(AddressingModel::Physical64);
        let (char_, short, int, long) =
            (b.type_int(8, 0), b.type_int(16, 0), b.type_int(32, 0), b.type_int(64, 0));
        let (half, float, double) =
            (b.type_float(16, None), b.type_float(32, None), b.type_float(64, None));
        let float4 = b.type_vector(float, 4);
        let float3 = b.type_vector(float, 3);
        let char3 = b.type_vector(char_, 3);
        let double2 = b.type_vector(double, 2);
        let half16 = b.type_vector(half, 16);
        let int8 = b.type_vector(int, 8);
        let params = [
            char_, short, int, long, half, float, double, float4, float3, char3, double2, half16,
            int8,
        ];
        kernel(&mut b, "k", &params, &[], &[], &[]);
        assert_eq!(
            shapes(&params_of(&b.module(), "k")),
            [
                (ParamKind::Scalar, 1, "char"),
                (ParamKind::Scalar, 2, "short"),
                (ParamKind::Scalar, 4, "int"),
                (ParamKind::Scalar, 8, "long"),
                (ParamKind::Scalar, 2, "half"),
                (ParamKind::Scalar, 4, "float"),
                (ParamKind::Scalar, 8, "double"),
                (ParamKind::Scalar, 16, "float4"),
                (ParamKind::Scalar, 16, "float3"),
                (ParamKind::Scalar, 4, "char3"),
                (ParamKind::Scalar, 16, "double2"),
                (ParamKind::Scalar, 32, "half16"),
                (ParamKind::Scalar, 32, "int8"),
            ]
        );
    }

    #[test]
    fn structs_by_value_take_opencl_c_layout() {
        let mut b = builder(AddressingModel::Physical64);
        let (char_, short, int) = (b.type_int(8, 0), b.type_int(16, 0), b.type_int(32, 0));
        let (float, double) = (b.type_float(32, None), b.type_float(64, None));
        let float4 = b.type_vector(float, 4);
        let float3 = b.type_vector(float, 3);
        let global_int = b.type_pointer(None, StorageClass::CrossWorkgroup, int);
        let long = b.type_int(64, 0);
        let sixteen = b.constant_bit64(long, 16);
        let chars = b.type_array(char_, sixteen);
        // { float; int; char } = 12; { double; char; float4 } = 32 (the vector aligned to 16);
        // { float3; short } = 32; { char; global int*; char[16] } = 32; packed { char; int } = 5;
        // a struct inside a struct: { char; { double; char; float4 } } = 48.
        let pt = b.type_struct([float, int, char_]);
        let big = b.type_struct([double, char_, float4]);
        let s3 = b.type_struct([float3, short]);
        let with_pointer = b.type_struct([char_, global_int, chars]);
        let packed = b.type_struct([char_, int]);
        b.decorate(packed, Decoration::CPacked, vec![]);
        let nested = b.type_struct([char_, big]);
        for (s, name) in [
            (pt, "struct.Pt"),
            (big, "struct.Big"),
            (s3, "struct.S3.1"),
            (packed, "union.P"),
            (nested, "class.ns::N"),
        ] {
            b.name(s, name);
        }
        let structs = [pt, big, s3, with_pointer, packed, nested];
        let params: Vec<Word> =
            structs.iter().map(|s| b.type_pointer(None, StorageClass::Function, *s)).collect();
        kernel(&mut b, "k", &params, &[], &[], &(0..params.len()).collect::<Vec<_>>());
        assert_eq!(
            shapes(&params_of(&b.module(), "k")),
            [
                (ParamKind::Struct, 12, "struct Pt"),
                (ParamKind::Struct, 32, "struct Big"),
                (ParamKind::Struct, 32, "struct S3"),
                (ParamKind::Struct, 32, "struct"),
                (ParamKind::Struct, 5, "union P"),
                (ParamKind::Struct, 48, "class ns::N"),
            ]
        );
    }

    #[test]
    fn a_function_pointer_without_by_val_is_a_private_pointer() {
        let mut b = builder(AddressingModel::Physical64);
        let int = b.type_int(32, 0);
        let private_int = b.type_pointer(None, StorageClass::Function, int);
        let generic_int = b.type_pointer(None, StorageClass::Generic, int);
        kernel(&mut b, "k", &[private_int, generic_int], &[], &[], &[]);
        assert_eq!(
            shapes(&params_of(&b.module(), "k")),
            [(ParamKind::Other, 8, "private int*"), (ParamKind::Other, 8, "generic int*")]
        );
    }

    #[test]
    fn images_samplers_and_other_handles() {
        let mut b = builder(AddressingModel::Physical64);
        let void = b.type_void();
        let image = |b: &mut Builder, dim, depth, arrayed, access| {
            b.type_image(void, dim, depth, arrayed, 0, 0, ImageFormat::Unknown, Some(access))
        };
        let image2d = image(&mut b, Dim::Dim2D, 0, 0, AccessQualifier::ReadOnly);
        let image3d = image(&mut b, Dim::Dim3D, 0, 0, AccessQualifier::WriteOnly);
        let depth_array = image(&mut b, Dim::Dim2D, 1, 1, AccessQualifier::ReadWrite);
        let buffer = image(&mut b, Dim::DimBuffer, 0, 0, AccessQualifier::ReadOnly);
        let sampler = b.type_sampler();
        let pipe = b.type_pipe(AccessQualifier::ReadOnly);
        let queue = b.type_queue();
        kernel(
            &mut b,
            "k",
            &[image2d, image3d, depth_array, buffer, sampler, pipe, queue],
            &[],
            &[],
            &[],
        );
        assert_eq!(
            shapes(&params_of(&b.module(), "k")),
            [
                (ParamKind::Image, 8, "read_only image2d_t"),
                (ParamKind::Image, 8, "write_only image3d_t"),
                (ParamKind::Image, 8, "read_write image2d_array_depth_t"),
                (ParamKind::Image, 8, "read_only image1d_buffer_t"),
                (ParamKind::Sampler, 8, "sampler_t"),
                (ParamKind::Other, 8, "read_only pipe"),
                (ParamKind::Other, 8, "queue_t"),
            ]
        );
    }

    #[test]
    fn names_come_from_the_entry_function_then_the_plain_one() {
        let mut b = builder(AddressingModel::Physical64);
        let int = b.type_int(32, 0);
        let global_int = b.type_pointer(None, StorageClass::CrossWorkgroup, int);
        // -cl-kernel-arg-info names the entry function's; -fno-discard-value-names the plain one's.
        kernel(&mut b, "arg_info", &[global_int, int], &[], &["out", "n"], &[]);
        kernel(&mut b, "value_names", &[global_int, int], &["dst", "count"], &[], &[]);
        kernel(&mut b, "both", &[global_int, int], &["dst", "count"], &["out"], &[]);
        let m = b.module();
        let names = |k: &str| params_of(&m, k).into_iter().map(|p| p.name).collect::<Vec<_>>();
        assert_eq!(names("arg_info"), ["out", "n"]);
        assert_eq!(names("value_names"), ["dst", "count"]);
        assert_eq!(names("both"), ["out", "count"]);
        assert_eq!(params_of(&m, "arg_info")[0].declaration(), "global int* out");
    }

    #[test]
    fn a_32_bit_module_has_4_byte_pointers() {
        let mut b = builder(AddressingModel::Physical32);
        let int = b.type_int(32, 0);
        let char_ = b.type_int(8, 0);
        let global_int = b.type_pointer(None, StorageClass::CrossWorkgroup, int);
        let s = b.type_struct([char_, global_int]);
        let by_value = b.type_pointer(None, StorageClass::Function, s);
        kernel(&mut b, "k", &[global_int, by_value], &[], &[], &[1]);
        assert_eq!(
            shapes(&params_of(&b.module(), "k")),
            [(ParamKind::Global, 4, "global int*"), (ParamKind::Struct, 8, "struct")]
        );
    }

    #[test]
    fn kernels_come_in_the_order_asked_and_unknown_ones_are_left_out() {
        let mut b = builder(AddressingModel::Physical64);
        let int = b.type_int(32, 0);
        kernel(&mut b, "a", &[int], &[], &[], &[]);
        kernel(&mut b, "b", &[], &[], &[], &[]);
        let m = b.module();
        let names = ["b", "missing", "a"].map(String::from);
        let found: Vec<(String, usize)> =
            kernel_params(&m, &names).into_iter().map(|(k, p)| (k, p.len())).collect();
        assert_eq!(found, [("b".to_string(), 0), ("a".to_string(), 1)]);
    }

    #[test]
    fn a_struct_holding_a_forward_pointer_to_itself_has_a_size() {
        let mut b = builder(AddressingModel::Physical64);
        let int = b.type_int(32, 0);
        let node_ptr = b.id();
        b.type_forward_pointer(node_ptr, StorageClass::CrossWorkgroup);
        let node = b.type_struct([int, node_ptr]);
        b.type_pointer(Some(node_ptr), StorageClass::CrossWorkgroup, node);
        let by_value = b.type_pointer(None, StorageClass::Function, node);
        b.name(node, "struct.node");
        kernel(&mut b, "k", &[node_ptr, by_value], &[], &[], &[1]);
        assert_eq!(
            shapes(&params_of(&b.module(), "k")),
            [(ParamKind::Global, 8, "global struct node*"), (ParamKind::Struct, 16, "struct node")]
        );
    }

    #[test]
    fn deep_and_huge_types_neither_overflow_the_stack_nor_the_size() {
        // 100,000 nested structs, each a char and the one before: sizes computed in one pass.
        const N: usize = 100_000;
        let mut b = builder(AddressingModel::Physical64);
        let char_ = b.type_int(8, 0);
        let mut inner = b.type_struct([char_]);
        for _ in 0..N {
            // Straight into the module: the builder's search for an equal type is linear.
            let id = b.id();
            let members = vec![Operand::IdRef(char_), Operand::IdRef(inner)];
            b.module_mut().types_global_values.push(rspirv::dr::Instruction::new(
                Op::TypeStruct,
                None,
                Some(id),
                members,
            ));
            inner = id;
        }
        let deep = b.type_pointer(None, StorageClass::Function, inner);
        // An array of 2^40 arrays of 2^40 chars does not fit in 64 bits: its size is unknown.
        let long = b.type_int(64, 0);
        let count = b.constant_bit64(long, 1 << 40);
        let row = b.type_array(char_, count);
        let table = b.type_array(row, count);
        let huge = b.type_struct([table]);
        let huge_by_value = b.type_pointer(None, StorageClass::Function, huge);
        // Pointers to pointers, 20 deep: the text is cut short.
        let mut pointer = char_;
        for _ in 0..20 {
            pointer = b.type_pointer(None, StorageClass::CrossWorkgroup, pointer);
        }
        kernel(&mut b, "k", &[deep, huge_by_value, pointer], &[], &[], &[0, 1]);
        let params = params_of(&b.module(), "k");
        assert_eq!(
            shapes(&params),
            [
                (ParamKind::Struct, (N + 1) as u32, "struct"),
                (ParamKind::Struct, 0, "struct"),
                (ParamKind::Global, 8, "global ...********"),
            ]
        );
    }

    #[test]
    fn struct_names_as_opencl_c_writes_them() {
        assert_eq!(struct_text("struct.Pt"), "struct Pt");
        assert_eq!(struct_text("struct.Pt.12"), "struct Pt");
        assert_eq!(struct_text("class.ns::Pair<int, 2>"), "class ns::Pair<int, 2>");
        assert_eq!(struct_text("union.U"), "union U");
        assert_eq!(struct_text("Thing"), "struct Thing");
        assert_eq!(struct_text("struct.anon.0"), "struct anon");
    }

    #[test]
    fn the_answer_is_deterministic() {
        let build = || {
            let mut b = builder(AddressingModel::Physical64);
            let int = b.type_int(32, 0);
            let global_int = b.type_pointer(None, StorageClass::CrossWorkgroup, int);
            kernel(&mut b, "k", &[global_int, int], &[], &["out", "n"], &[]);
            kernel(&mut b, "k2", &[int], &[], &[], &[]);
            b.module()
        };
        let names = ["k", "k2"].map(String::from);
        let first = kernel_params(&build(), &names);
        for _ in 0..5 {
            assert_eq!(kernel_params(&build(), &names), first);
        }
    }
}
