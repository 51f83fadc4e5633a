//! Our own definitions of the builtins that libclc's NVPTX library lacks, or has in a form that
//! fails or is slow on NVPTX, written as LLVM IR for the builtins an image declares and linked
//! before libclc. Each is named [`PREFIX`] + its NVPTX mangled name, so it never clashes with
//! libclc's; they are external here, so that the link resolves the image's calls to them, and
//! `llvm-link --internalize` makes them local to the image.
//!
//! | builtins | libclc 16 on NVPTX | here |
//! |---|---|---|
//! | `get_global_offset` | missing | 0: the runtime launches without offsets (so libclc's `get_global_id`, which ignores them, is right) |
//! | `get_work_dim` | missing | the two low bits of `%dynamic_smem_size`, plus one: the runtime launches with [`sycl_format::ptx_dynamic_shared_size`] |
//! | `get_local_linear_id`, `get_global_linear_id`, `get_enqueued_local_size` | missing | from the work-item functions |
//! | `native_sin`, `cos`, `tan`, `exp`, `exp2`, `exp10`, `log`, `log2`, `log10`, `powr` (float) | `llc` fails (`fsin` cannot be selected, `expf` undefined) | PTX's `.approx` instructions, as CUDA's fast math |
//! | `rsqrt`, `native_rsqrt`, `half_rsqrt` (float) | IEEE `1/sqrt` (2.26 times slower on n-body) | `rsqrt.approx.f32` (within OpenCL's 2 ulp) |
//! | `atomic_*`, `atom_*` | 32-bit global and local only | `atomicrmw`/`cmpxchg` on any address space (generic: what OpenCL 2.0's `atomic_*_explicit` come back as), 32 and 64 bits |
//! | `work_group_all`, `any`, `broadcast`, `reduce_*`, `scan_*` | missing | through a shared scratch array, between barriers |
//! | sub-groups: `get_sub_group_*`, `get_num_sub_groups`, `sub_group_all`, `any`, `broadcast`, `reduce_*`, `scan_*`, `sub_group_barrier`; `sub_group_shuffle`, `_xor`, `_up`, `_down` (cl_khr_subgroup_shuffle, `_relative`) | missing | CUDA's warps: sub-groups of 32 in linear local-id order, through `shfl.sync`, `vote.sync` and `bar.warp.sync`; shuffles and broadcasts move bits (char, short and half as the low bits of an i32, never through float) |
//! | builtins on `half` and its vectors (`sqrt`, `fmax`, `isnan`, `fract(half, half *)`, `nan(ushort)`, `convert_int_sat_rtz(half)`, `work_group_reduce_add`, …) | missing (only `vload_half`/`vstore_half` are there; the latter ours, below) | through the float twin: [`half_twin`] |
//! | `fma`, `mad` on half | missing | `llvm.fma`, `llvm.fmuladd` on half: `fma.rn.f16` |
//! | `vloadN`, `vstoreN` of half vectors; `async_work_group_copy`, `prefetch` of half | missing | a load or store of the vector; the same builtin on `ushort` |
//! | `convert_halfN{_rte,_rtz,_rtp,_rtn}` from any type | missing | LLVM's conversions; PTX's `cvt.rz`, `cvt.rp`, `cvt.rm` |
//! | `vstore_half`, `vstore_halfN`, `vstorea_halfN` (and `_rte`, `_rtz`, `_rtp`, `_rtn`) from float and double | wrong: its rounding code flushes float subnormals (`vstore_half_rtp` of a tiny positive float stores 0, not 0x0001) | each element through PTX's `cvt.rn`, `cvt.rz`, `cvt.rp`, `cvt.rm` (`.f16.f32`, `.f16.f64`; no `.ftz`), stored as `i16`s: [`Builtin::StoreHalf`] |
//! | `select`, `bitselect`, `isnormal`, `nextafter` on half | missing | on the halves' bits: [`HalfBits`] |
//!
//! Plain half arithmetic, comparisons and conversions are LLVM instructions, which NVPTX
//! compiles natively from sm_53 on (`add.rn.f16`, `mul.rn.f16x2`, `setp.lt.f16`, `cvt`).
//! What is not here and not in libclc (`printf`; Intel's sub-group shuffles, which the
//! builtin declarations clang-15's driver gives OpenCL C lack, as they lack bf16) stays an
//! undefined function, which `super::compile` reports as a builtin the target lacks. `fixtures/half-app` runs every OpenCL C builtin on
//! half against host references.

use std::collections::BTreeSet;
use std::fmt::Write as _;

use super::mangle::{self, Type};
use super::retarget::{Declaration, DATA_LAYOUT, TRIPLE};

/// The prefix of our definitions' names.
pub(crate) const PREFIX: &str = "__sycl_ptx.";

/// The function a sub-group barrier calls once `sycl_spirv::sub_group_barriers_to_calls` has
/// made it one (`llvm-spirv -r` would write it as a work-group `barrier`).
pub(crate) const SUB_GROUP_BARRIER: &str = "__sycl_sub_group_barrier";

/// Work-group size limit of the scratch array the collectives use (CUDA's limit per block).
const MAX_WORK_GROUP: u32 = 1024;

/// The name our definition of `decl` goes by, if we define it.
pub(crate) fn redirect(decl: &Declaration) -> Option<String> {
    Builtin::of(decl).map(|_| format!("{PREFIX}{}", decl.name))
}

/// The module of our definitions of `decls` (those we define).
pub(crate) fn shim(decls: &[Declaration]) -> String {
    let mut m = Module::default();
    for decl in decls {
        // A half builtin's float twin may be among them, and defined already.
        if let Some(builtin) = Builtin::of(decl) {
            builtin.define(decl, &mut m);
        }
    }
    let mut module =
        format!("target datalayout = \"{DATA_LAYOUT}\"\ntarget triple = \"{TRIPLE}\"\n\n");
    for g in &m.globals {
        module.push_str(g);
        module.push('\n');
    }
    module.push_str(&m.functions);
    for d in &m.declarations {
        module.push_str(d);
        module.push('\n');
    }
    module.push_str("\nattributes #0 = { convergent nounwind }\n");
    module
}

#[derive(Default)]
struct Module {
    functions: String,
    /// The builtins defined so far (a half builtin's float twin can be one the image declares).
    defined: BTreeSet<String>,
    globals: BTreeSet<String>,
    declarations: BTreeSet<String>,
    helpers: BTreeSet<&'static str>,
}

impl Module {
    /// A function, from its header and body.
    fn add(&mut self, header: &str, body: Body) {
        self.functions.push_str(header);
        self.functions.push_str(&body.text);
        self.functions.push_str("}\n\n");
    }

    fn declare(&mut self, declaration: &str) {
        self.declarations.insert(declaration.to_string());
    }

    /// `%lid`, `%n`: the work-item's linear index in its work-group and the work-group's size,
    /// from PTX's special registers.
    fn work_group_helpers(&mut self) {
        if !self.helpers.insert("work-group") {
            return;
        }
        for r in ["tid.x", "tid.y", "tid.z", "ntid.x", "ntid.y", "ntid.z"] {
            self.declare(&format!("declare i32 @llvm.nvvm.read.ptx.sreg.{r}()"));
        }
        self.declare("declare void @llvm.nvvm.barrier0()");
        self.globals.insert(format!(
            "@{PREFIX}scratch = internal addrspace(3) global [{MAX_WORK_GROUP} x i64] undef, align 8"
        ));
        let _ = write!(
            self.functions,
            "define i32 @{PREFIX}local_linear_id() {{\n\
  %x = call i32 @llvm.nvvm.read.ptx.sreg.tid.x()\n  %y = call i32 @llvm.nvvm.read.ptx.sreg.tid.y()\n\
  %z = call i32 @llvm.nvvm.read.ptx.sreg.tid.z()\n  %nx = call i32 @llvm.nvvm.read.ptx.sreg.ntid.x()\n\
  %ny = call i32 @llvm.nvvm.read.ptx.sreg.ntid.y()\n  %zy = mul i32 %z, %ny\n  %row = add i32 %zy, %y\n\
  %rows = mul i32 %row, %nx\n  %id = add i32 %rows, %x\n  ret i32 %id\n}}\n\n\
define i32 @{PREFIX}local_linear_size() {{\n\
  %nx = call i32 @llvm.nvvm.read.ptx.sreg.ntid.x()\n  %ny = call i32 @llvm.nvvm.read.ptx.sreg.ntid.y()\n\
  %nz = call i32 @llvm.nvvm.read.ptx.sreg.ntid.z()\n  %nxy = mul i32 %nx, %ny\n  %n = mul i32 %nxy, %nz\n  ret i32 %n\n}}\n\n"
        );
    }
}

impl Module {
    /// The work-item's lane in its sub-group, its sub-group's index, size and the mask of its
    /// lanes (all 32, or the low ones of a shorter last sub-group), for `shfl.sync`,
    /// `vote.sync` and `bar.warp.sync`.
    fn sub_group_helpers(&mut self) {
        self.work_group_helpers();
        if !self.helpers.insert("sub-group") {
            return;
        }
        self.declare("declare i32 @llvm.umin.i32(i32, i32)");
        let _ = write!(
            self.functions,
            "define i32 @{PREFIX}sub_group_lane() {{\n  %lid = call i32 @{PREFIX}local_linear_id()\n  %lane = and i32 %lid, 31\n  ret i32 %lane\n}}\n\n\
define i32 @{PREFIX}sub_group_id() {{\n  %lid = call i32 @{PREFIX}local_linear_id()\n  %id = lshr i32 %lid, 5\n  ret i32 %id\n}}\n\n\
define i32 @{PREFIX}sub_group_size() {{\n  %n = call i32 @{PREFIX}local_linear_size()\n  %id = call i32 @{PREFIX}sub_group_id()\n\
  %first = shl i32 %id, 5\n  %rest = sub i32 %n, %first\n  %size = call i32 @llvm.umin.i32(i32 %rest, i32 32)\n  ret i32 %size\n}}\n\n\
define i32 @{PREFIX}sub_group_mask() {{\n  %size = call i32 @{PREFIX}sub_group_size()\n  %full = icmp eq i32 %size, 32\n\
  %bit = shl i32 1, %size\n  %low = sub i32 %bit, 1\n  %mask = select i1 %full, i32 -1, i32 %low\n  ret i32 %mask\n}}\n\n"
        );
    }
}

/// What a builtin we define does.
enum Builtin {
    GlobalOffset,
    WorkDim,
    EnqueuedLocalSize,
    LinearId {
        global: bool,
    },
    /// A float function through PTX's approximate instructions.
    Approx(&'static str),
    Atomic {
        op: &'static str,
        cmpxchg: bool,
    },
    WorkGroup(Collective),
    SubGroup(SubGroup),
    /// A builtin on half through its float twin (see [`half_twin`]).
    Half(Twin),
    /// `vloadN`/`vstoreN` of half vectors: one load or store of `n` halves, aligned as a half.
    HalfVector {
        store: bool,
        n: u32,
    },
    /// `fma` and `mad` on half: LLVM's `fma` and `fmuladd` on half, which NVPTX compiles to
    /// `fma.rn.f16` (`f16x2` on pairs), rounding once as `fma` must.
    HalfFma {
        intrinsic: &'static str,
    },
    /// What is about a half's bits rather than its value (which its float twin would get
    /// wrong or change): see [`HalfBits`].
    HalfBits(HalfBits),
    /// `convert_halfN` and `convert_halfN_rte`, `_rtz`, `_rtp`, `_rtn` from any type (its
    /// builtin type code): LLVM's conversions (rounding to nearest even), or PTX's `cvt` with
    /// the rounding mode.
    ToHalf {
        from: String,
        rounding: Option<&'static str>,
    },
    /// `vstore_halfN` and `vstorea_halfN` (N: none, 2, 3, 4, 8, 16) from float or double (its type
    /// code), with rounding `mode` (`rn` for no suffix and `_rte`, `rz`, `rp`, `rm`): each
    /// element through PTX's `cvt.{mode}.f16.f32` (`.f64`), never `.ftz`, stored as `i16` at
    /// `p + offset * stride`, aligned as a half (`stride` is N, but 4 for `vstorea_half3`).
    /// libclc's generic rounding code flushes float subnormals on NVPTX: `vstore_half_rtp` of
    /// a positive float below half's smallest subnormal stored 0, not 0x0001, on an H200.
    StoreHalf {
        from: String,
        mode: &'static str,
        stride: u32,
    },
}

/// Builtins on half defined on its bits: `select` and `bitselect` (which keep every value as
/// it is, NaNs too), `isnormal` (a subnormal half is a normal float) and `nextafter` (the next
/// float rounds back to the half it came from).
#[derive(Clone, Copy, PartialEq, Eq)]
enum HalfBits {
    Select,
    Bitselect,
    IsNormal,
    NextAfter,
}

/// The float twin of a builtin on half, and for each parameter that points to where the
/// builtin writes a second result (`fract(half, half *)`), the IR type it points to (`half`,
/// `<4 x i32>`).
struct Twin {
    decl: Declaration,
    pointees: Vec<Option<String>>,
}

/// A work-group or sub-group function over values.
#[derive(Clone, Copy)]
enum Collective {
    All,
    Any,
    Broadcast,
    Reduce(&'static str),
    ScanInclusive(&'static str),
    ScanExclusive(&'static str),
}

impl Collective {
    /// `all`, `broadcast`, `reduce_add`, `scan_exclusive_max`, … (what follows `work_group_`
    /// or `sub_group_`).
    fn parse(name: &str) -> Option<Collective> {
        let op = |s: &str| ["add", "min", "max"].into_iter().find(|o| *o == s);
        Some(match name {
            "all" => Collective::All,
            "any" => Collective::Any,
            "broadcast" => Collective::Broadcast,
            _ => {
                if let Some(o) = name.strip_prefix("reduce_") {
                    Collective::Reduce(op(o)?)
                } else if let Some(o) = name.strip_prefix("scan_inclusive_") {
                    Collective::ScanInclusive(op(o)?)
                } else {
                    Collective::ScanExclusive(op(name.strip_prefix("scan_exclusive_")?)?)
                }
            }
        })
    }
}

/// The sub-group functions, for sub-groups that are CUDA's warps of 32 work-items in linear
/// local-id order (the last one of a work-group possibly shorter).
#[derive(Clone, Copy)]
enum SubGroup {
    LocalId,
    Id,
    Size,
    MaxSize,
    Count,
    Barrier,
    Collective(Collective),
    /// `sub_group_shuffle`, `_xor`, `_up`, `_down` (cl_khr_subgroup_shuffle and
    /// cl_khr_subgroup_shuffle_relative): `shfl.sync` of that kind (`idx`, `bfly`, `up`,
    /// `down`).
    Shuffle(&'static str),
}

impl Builtin {
    fn of(decl: &Declaration) -> Option<Builtin> {
        if decl.name == SUB_GROUP_BARRIER {
            return Some(Builtin::SubGroup(SubGroup::Barrier));
        }
        let name = mangle::demangle(&decl.name)?;
        if let Some(builtin) = half_builtin(decl, &name) {
            return Some(builtin);
        }
        let first = name.params.first();
        let scalar = first.and_then(Type::scalar_code);
        let float = scalar == Some("f") && name.params.iter().all(|p| p.scalar_code() == Some("f"));
        let base = name.base.as_str();
        Some(match base {
            "get_global_offset" => Builtin::GlobalOffset,
            "get_work_dim" => Builtin::WorkDim,
            "get_enqueued_local_size" => Builtin::EnqueuedLocalSize,
            "get_local_linear_id" => Builtin::LinearId { global: false },
            "get_global_linear_id" => Builtin::LinearId { global: true },
            "rsqrt" | "native_rsqrt" | "half_rsqrt" if float => Builtin::Approx("rsqrt"),
            _ if float && base.starts_with("native_") => {
                let f = &base["native_".len()..];
                let known =
                    ["sin", "cos", "tan", "exp", "exp2", "exp10", "log", "log2", "log10", "powr"];
                Builtin::Approx(known.iter().find(|k| **k == f)?)
            }
            _ if base.starts_with("atomic_") || base.starts_with("atom_") => {
                let op = base.split_once('_')?.1;
                let element = first?.innermost().scalar_code()?;
                let signed = matches!(element, "i" | "l");
                let integer = matches!(element, "i" | "j" | "l" | "m");
                if !(integer || (element == "f" && op == "xchg")) {
                    return None;
                }
                let (op, cmpxchg) = match op {
                    "add" | "inc" => ("add", false),
                    "sub" | "dec" => ("sub", false),
                    "xchg" => ("xchg", false),
                    "and" => ("and", false),
                    "or" => ("or", false),
                    "xor" => ("xor", false),
                    "min" => (if signed { "min" } else { "umin" }, false),
                    "max" => (if signed { "max" } else { "umax" }, false),
                    "cmpxchg" => ("", true),
                    _ => return None,
                };
                Builtin::Atomic { op, cmpxchg }
            }
            "get_sub_group_local_id" => Builtin::SubGroup(SubGroup::LocalId),
            "get_sub_group_id" => Builtin::SubGroup(SubGroup::Id),
            "get_sub_group_size" => Builtin::SubGroup(SubGroup::Size),
            "get_max_sub_group_size" => Builtin::SubGroup(SubGroup::MaxSize),
            "get_num_sub_groups" | "get_enqueued_num_sub_groups" => {
                Builtin::SubGroup(SubGroup::Count)
            }
            _ if base == "sub_group_broadcast" || base.starts_with("sub_group_shuffle") => {
                // They move bits: any scalar of 8 to 64 bits, half included, never through
                // float (a NaN's payload stays as it is).
                let scalars = ["i8", "i16", "i32", "i64", "half", "float", "double"];
                if !scalars.contains(&decl.ret.as_str()) || decl.params.len() != 2 {
                    return None;
                }
                Builtin::SubGroup(match base {
                    "sub_group_broadcast" => SubGroup::Collective(Collective::Broadcast),
                    "sub_group_shuffle" => SubGroup::Shuffle("idx"),
                    "sub_group_shuffle_xor" => SubGroup::Shuffle("bfly"),
                    "sub_group_shuffle_up" => SubGroup::Shuffle("up"),
                    "sub_group_shuffle_down" => SubGroup::Shuffle("down"),
                    _ => return None,
                })
            }
            _ if base.starts_with("work_group_") || base.starts_with("sub_group_") => {
                if !matches!(scalar?, "i" | "j" | "l" | "m" | "f" | "d") {
                    return None;
                }
                let (group, function) = base.split_once("_group_")?;
                let collective = Collective::parse(function)?;
                match group {
                    "work" => Builtin::WorkGroup(collective),
                    _ => Builtin::SubGroup(SubGroup::Collective(collective)),
                }
            }
            _ => return None,
        })
    }

    /// Whether the builtin is a collective that every work-item of a group (or sub-group)
    /// must reach: its definition is `convergent`, so the optimiser moves no call to it
    /// across control flow.
    fn convergent(&self) -> bool {
        match self {
            Builtin::WorkGroup(_) | Builtin::SubGroup(_) => true,
            Builtin::Half(twin) => mangle::demangle(&twin.decl.name).is_some_and(|n| {
                ["work_group_", "sub_group_", "async_work_group_"]
                    .iter()
                    .any(|group| n.base.starts_with(group))
            }),
            _ => false,
        }
    }

    /// Adds our definition of `decl` to `m`, unless it is there already: its header, then the
    /// body its family writes.
    fn define(&self, decl: &Declaration, m: &mut Module) {
        if !m.defined.insert(decl.name.clone()) {
            return;
        }
        let signature: Vec<String> =
            decl.params.iter().enumerate().map(|(i, t)| format!("{t} %a{i}")).collect();
        let convergent = if self.convergent() { " #0" } else { "" };
        let header = format!(
            "define {} @{PREFIX}{}({}){convergent} {{\nentry:\n",
            decl.ret,
            decl.name,
            signature.join(", ")
        );
        let mut b = Body::default();
        match self {
            Builtin::GlobalOffset => b.line(&format!("ret {} 0", decl.ret)),
            Builtin::WorkDim => work_dim(decl, &mut b),
            Builtin::EnqueuedLocalSize => enqueued_local_size(decl, &mut b, m),
            Builtin::LinearId { global } => linear_id(*global, decl, &mut b, m),
            Builtin::Approx(f) => {
                let ret = &decl.ret;
                let result =
                    b.elementwise(ret, decl.params.len(), |b, args| approx(f, &args, b, m));
                b.line(&format!("ret {ret} {result}"));
            }
            Builtin::Atomic { op, cmpxchg } => atomic(op, *cmpxchg, decl, &mut b),
            Builtin::WorkGroup(collective) => {
                m.work_group_helpers();
                work_group(*collective, &scalar_code(decl), decl, &mut b, m);
            }
            Builtin::SubGroup(function) => {
                m.sub_group_helpers();
                sub_group(*function, &scalar_code(decl), decl, &mut b, m);
            }
            Builtin::Half(twin) => through_twin(twin, decl, &mut b, m),
            Builtin::HalfVector { store, n } => half_vector(*store, *n, decl, &mut b),
            Builtin::HalfBits(op) => half_bits(*op, decl, &mut b),
            Builtin::HalfFma { intrinsic } => half_fma(intrinsic, decl, &mut b, m),
            Builtin::ToHalf { from, rounding } => to_half(from, *rounding, decl, &mut b),
            Builtin::StoreHalf { from, mode, stride } => {
                vstore_half(from, mode, *stride, decl, &mut b)
            }
        }
        m.add(&header, b);
    }
}

/// `get_work_dim`: the inverse of `sycl_format::ptx_dynamic_shared_size`.
fn work_dim(decl: &Declaration, b: &mut Body) {
    let size = b.inst("call i32 asm \"mov.u32 $0, %dynamic_smem_size;\", \"=r\"()");
    let low = b.inst(&format!("and i32 {size}, 3"));
    let dims = b.inst(&format!("add i32 {low}, 1"));
    b.line(&format!("ret {} {dims}", decl.ret));
}

/// `get_enqueued_local_size`: the local size, as the runtime launches no partial work-groups.
fn enqueued_local_size(decl: &Declaration, b: &mut Body, m: &mut Module) {
    m.declare("declare i64 @_Z14get_local_sizej(i32)");
    let v = b.inst("call i64 @_Z14get_local_sizej(i32 %a0)");
    b.line(&format!("ret {} {v}", decl.ret));
}

/// `get_global_linear_id` (`global`) or `get_local_linear_id`, from the ids and sizes.
fn linear_id(global: bool, decl: &Declaration, b: &mut Body, m: &mut Module) {
    let (id, size) = if global {
        ("_Z13get_global_idj", "_Z15get_global_sizej")
    } else {
        ("_Z12get_local_idj", "_Z14get_local_sizej")
    };
    m.declare(&format!("declare i64 @{id}(i32)"));
    m.declare(&format!("declare i64 @{size}(i32)"));
    let ids: Vec<String> = (0..3).map(|d| b.inst(&format!("call i64 @{id}(i32 {d})"))).collect();
    let sizes: Vec<String> =
        (0..2).map(|d| b.inst(&format!("call i64 @{size}(i32 {d})"))).collect();
    // id0 + size0 * (id1 + size1 * id2)
    let t = b.inst(&format!("mul i64 {}, {}", sizes[1], ids[2]));
    let t = b.inst(&format!("add i64 {}, {t}", ids[1]));
    let t = b.inst(&format!("mul i64 {}, {t}", sizes[0]));
    let t = b.inst(&format!("add i64 {}, {t}", ids[0]));
    b.line(&format!("ret {} {t}", decl.ret));
}

/// `atomic_*` and `atom_*`: `atomicrmw` of `op`, or `cmpxchg`, on any address space.
fn atomic(op: &str, cmpxchg: bool, decl: &Declaration, b: &mut Body) {
    let (ret, ptr) = (&decl.ret, &decl.params[0]);
    let v = if cmpxchg {
        let pair = b.inst(&format!("cmpxchg {ptr} %a0, {ret} %a1, {ret} %a2 seq_cst seq_cst"));
        b.inst(&format!("extractvalue {{ {ret}, i1 }} {pair}, 0"))
    } else {
        let operand = if decl.params.len() > 1 { "%a1" } else { "1" };
        b.inst(&format!("atomicrmw {op} {ptr} %a0, {ret} {operand} seq_cst"))
    };
    b.line(&format!("ret {ret} {v}"));
}

/// A builtin on half through its float twin (see [`half_twin`]): the arguments widened, a
/// second result through a temporary of the twin's type, the result narrowed.
fn through_twin(twin: &Twin, decl: &Declaration, b: &mut Body, m: &mut Module) {
    let Twin { decl: twin, pointees } = twin;
    let ret = &decl.ret;
    // The twin is ours (a float collective, `native_sin`, …) or libclc's.
    let callee = match Builtin::of(twin) {
        Some(builtin) => {
            builtin.define(twin, m);
            format!("{PREFIX}{}", twin.name)
        }
        None => {
            m.declare(&format!("declare {} @{}({})", twin.ret, twin.name, twin.params.join(", ")));
            twin.name.clone()
        }
    };
    // A second result goes to a private temporary of the twin's type, then
    // (narrowed) where the builtin's pointer points.
    let mut written = Vec::new();
    let args: Vec<String> = decl
        .params
        .iter()
        .zip(&twin.params)
        .zip(pointees)
        .enumerate()
        .map(|(i, ((ty, wide), pointee))| {
            let arg = format!("%a{i}");
            if let Some(narrow) = pointee {
                let temp_ty = ir_widened(narrow, "half", "float").unwrap_or_else(|| narrow.clone());
                let temp = b.inst(&format!("alloca {temp_ty}"));
                written.push((arg, ty, temp.clone(), temp_ty, narrow));
                return format!("{wide} {temp}");
            }
            let v = match (ty == wide, ty.contains("half")) {
                (true, _) => arg,
                (false, true) => b.inst(&format!("fpext {ty} {arg} to {wide}")),
                (false, false) => b.inst(&format!("sext {ty} {arg} to {wide}")),
            };
            format!("{wide} {v}")
        })
        .collect();
    let call = format!("call {} @{callee}({})", twin.ret, args.join(", "));
    if twin.ret == "void" {
        b.line(&call);
        b.line("ret void");
        return;
    }
    let v = b.inst(&call);
    for (pointer, pointer_ty, temp, temp_ty, narrow) in written {
        let w = b.inst(&format!("load {temp_ty}, ptr {temp}"));
        let w = match temp_ty == *narrow {
            true => w,
            false => b.inst(&format!("fptrunc {temp_ty} {w} to {narrow}")),
        };
        b.line(&format!("store {narrow} {w}, {pointer_ty} {pointer}"));
    }
    let mut v = match (*ret == twin.ret, ret.contains("half")) {
        (true, _) => v,
        (false, true) => b.inst(&format!("fptrunc {} {v} to {ret}", twin.ret)),
        (false, false) => b.inst(&format!("trunc {} {v} to {ret}", twin.ret)),
    };
    if mangle::demangle(&decl.name).is_some_and(|n| n.base == "fract") {
        // fract's float result below 1 can round to 1 in half: the largest half
        // below 1 (0x1.ffcp-1) instead, as OpenCL has it (NaN stays NaN).
        let below_one = splat(ret, "half", "0xH3BFF");
        let above = b.inst(&format!("fcmp ogt {ret} {v}, {below_one}"));
        v = b.inst(&format!(
            "select {} {above}, {ret} {below_one}, {ret} {v}",
            ret.replace("half", "i1")
        ));
    }
    b.line(&format!("ret {ret} {v}"));
}

/// `vloadN` (`store` false) or `vstoreN` of `n` halves: one load or store, aligned as a half.
fn half_vector(store: bool, n: u32, decl: &Declaration, b: &mut Body) {
    let ret = &decl.ret;
    let (value, offset, pointer) = match store {
        true => (decl.params[0].as_str(), "%a1", &decl.params[2]),
        false => (ret.as_str(), "%a0", &decl.params[1]),
    };
    let index = b.inst(&format!("mul i64 {offset}, {n}"));
    let p = b.inst(&format!(
        "getelementptr half, {pointer} %a{}, i64 {index}",
        if store { 2 } else { 1 }
    ));
    if store {
        b.line(&format!("store {value} %a0, {pointer} {p}, align 2"));
        b.line("ret void");
    } else {
        let v = b.inst(&format!("load {value}, {pointer} {p}, align 2"));
        b.line(&format!("ret {ret} {v}"));
    }
}

/// `fma` and `mad` on half: LLVM's `intrinsic` (`fma`, `fmuladd`) on half.
fn half_fma(intrinsic: &str, decl: &Declaration, b: &mut Body, m: &mut Module) {
    let ret = &decl.ret;
    let suffix = match vector_type(ret) {
        Some((n, _)) => format!("v{n}f16"),
        None => "f16".to_string(),
    };
    m.declare(&format!("declare {ret} @llvm.{intrinsic}.{suffix}({ret}, {ret}, {ret})"));
    let v =
        b.inst(&format!("call {ret} @llvm.{intrinsic}.{suffix}({ret} %a0, {ret} %a1, {ret} %a2)"));
    b.line(&format!("ret {ret} {v}"));
}

/// `convert_halfN` from the type whose code is `from`: LLVM's conversion, or with a
/// `rounding` mode PTX's `cvt` lane by lane.
fn to_half(from: &str, rounding: Option<&str>, decl: &Declaration, b: &mut Body) {
    let (ret, source) = (&decl.ret, &decl.params[0]);
    let v = match rounding {
        None => match conversion_to_half(from) {
            Some(op) => b.inst(&format!("{op} {source} %a0 to {ret}")),
            None => "%a0".to_string(),
        },
        Some(mode) => {
            let lanes = vector_type(ret).map(|(n, _)| n);
            let element = |ty: &str| vector_type(ty).map_or(ty.to_string(), |(_, e)| e.to_string());
            let source_element = element(source);
            let mut acc = "poison".to_string();
            for lane in 0..lanes.unwrap_or(1) {
                let x = match lanes {
                    Some(_) => b.inst(&format!("extractelement {source} %a0, i32 {lane}")),
                    None => "%a0".to_string(),
                };
                let h = rounded_to_half(b, from, &source_element, &x, mode);
                if lanes.is_none() {
                    acc = h;
                } else {
                    acc = b.inst(&format!("insertelement {ret} {acc}, half {h}, i32 {lane}"));
                }
            }
            acc
        }
    };
    b.line(&format!("ret {ret} {v}"));
}

/// `vstore_halfN` and `vstorea_halfN` from the type whose code is `from`, rounding by `mode`:
/// each element through PTX's `cvt`, stored as `i16`s at `p + offset * stride` (see
/// [`Builtin::StoreHalf`]).
fn vstore_half(from: &str, mode: &str, stride: u32, decl: &Declaration, b: &mut Body) {
    let (value, pointer) = (&decl.params[0], &decl.params[2]);
    let (lanes, element) = match vector_type(value) {
        Some((n, e)) => (Some(n), e.to_string()),
        None => (None, value.clone()),
    };
    let ptx = conversion_code(from).map_or("f32", |(_, ptx)| ptx);
    let mut bits = "poison".to_string();
    for lane in 0..lanes.unwrap_or(1) {
        let x = match lanes {
            Some(_) => b.inst(&format!("extractelement {value} %a0, i32 {lane}")),
            None => "%a0".to_string(),
        };
        let h = rounded_to_half_bits(b, ptx, &element, &x, mode);
        bits = match lanes {
            Some(n) => b.inst(&format!("insertelement <{n} x i16> {bits}, i16 {h}, i32 {lane}")),
            None => h,
        };
    }
    let bits_ty = match lanes {
        Some(n) => format!("<{n} x i16>"),
        None => "i16".to_string(),
    };
    let index = b.inst(&format!("mul i64 %a1, {stride}"));
    let p = b.inst(&format!("getelementptr i16, {pointer} %a2, i64 {index}"));
    b.line(&format!("store {bits_ty} {bits}, {pointer} {p}, align 2"));
    b.line("ret void");
}

/// The builtins on half that libclc lacks, as we define them: vector loads and stores,
/// conversions to half, and the rest through their float twins.
fn half_builtin(decl: &Declaration, name: &mangle::Name) -> Option<Builtin> {
    let base = name.base.as_str();
    let first = name.params.first()?;
    if base == "sub_group_broadcast" || base.starts_with("sub_group_shuffle") {
        // Moves the halves' bits: [`Builtin::of`] defines them.
        return None;
    }
    let vector = |prefix: &str| {
        let n = base.strip_prefix(prefix)?;
        let n: u32 = n.parse().ok()?;
        [2, 3, 4, 8, 16].contains(&n).then_some(n)
    };
    if let Some(n) = vector("vload") {
        let half =
            matches!(name.params.as_slice(), [_, p] if p.innermost().scalar_code() == Some("Dh"));
        return half.then_some(Builtin::HalfVector { store: false, n });
    }
    if let Some(n) = vector("vstore") {
        return (first.scalar_code() == Some("Dh"))
            .then_some(Builtin::HalfVector { store: true, n });
    }
    if base.starts_with("vstore_half") || base.starts_with("vstorea_half") {
        return store_half(name);
    }
    if matches!(base, "async_work_group_copy" | "async_work_group_strided_copy" | "prefetch") {
        // Copies move bits: the same builtin on ushort, the same IR.
        let params: Vec<Type> = name.params.iter().map(|p| p.with_builtin("Dh", "t")).collect();
        if params == name.params {
            return None;
        }
        let twin = mangle::Name { base: base.to_string(), params };
        let decl = Declaration { name: mangle::mangle(&twin), ..decl.clone() };
        let pointees = vec![None; decl.params.len()];
        return Some(Builtin::Half(Twin { decl, pointees }));
    }
    let all_half = name.params.iter().all(|p| p.scalar_code() == Some("Dh"));
    if matches!(base, "fma" | "mad") && all_half && name.params.len() == 3 {
        let intrinsic = if base == "fma" { "fma" } else { "fmuladd" };
        return Some(Builtin::HalfFma { intrinsic });
    }
    let bits = match base {
        "select" => Some(HalfBits::Select),
        "bitselect" => Some(HalfBits::Bitselect),
        "isnormal" => Some(HalfBits::IsNormal),
        "nextafter" => Some(HalfBits::NextAfter),
        _ => None,
    };
    if let Some(bits) = bits {
        return (first.scalar_code() == Some("Dh")).then_some(Builtin::HalfBits(bits));
    }
    if let Some(rest) = base.strip_prefix("convert_half") {
        let rest = rest.trim_start_matches(|c: char| c.is_ascii_digit());
        let rounding = match rest {
            "" | "_rte" => None,
            "_rtz" => Some("rz"),
            "_rtp" => Some("rp"),
            "_rtn" => Some("rm"),
            _ => return None,
        };
        let from = first.scalar_code()?.to_string();
        (name.params.len() == 1 && conversion_code(&from).is_some())
            .then_some(Builtin::ToHalf { from, rounding })
    } else {
        half_twin(decl, name).map(Builtin::Half)
    }
}

/// `vstore_half`, `vstore_halfN`, `vstorea_halfN` and their `_rte`, `_rtz`, `_rtp`, `_rtn`
/// forms, from float or double, to a half pointer in any address space
/// (`_Z16vstore_half4_rtpDv4_fmPU3AS1Dh`): see [`Builtin::StoreHalf`].
fn store_half(name: &mangle::Name) -> Option<Builtin> {
    let base = name.base.as_str();
    let (aligned, rest) = match base.strip_prefix("vstorea_half") {
        Some(rest) => (true, rest),
        None => (false, base.strip_prefix("vstore_half")?),
    };
    let digits = rest.len() - rest.trim_start_matches(|c: char| c.is_ascii_digit()).len();
    let (n, suffix) = rest.split_at(digits);
    let n: u32 = if n.is_empty() { 1 } else { n.parse().ok()? };
    let mode = match suffix {
        "" | "_rte" => "rn",
        "_rtz" => "rz",
        "_rtp" => "rp",
        "_rtn" => "rm",
        _ => return None,
    };
    let [value, offset, pointer] = name.params.as_slice() else { return None };
    let lanes = match value {
        Type::Vector(lanes, _) => *lanes,
        _ => 1,
    };
    let from = value.scalar_code()?;
    let valid = [1, 2, 3, 4, 8, 16].contains(&n)
        && lanes == n
        && matches!(from, "f" | "d")
        && offset.scalar_code() == Some("m")
        && matches!(pointer, Type::Pointer('P', _))
        && pointer.innermost().scalar_code() == Some("Dh");
    let stride = if aligned && n == 3 { 4 } else { n };
    valid.then(|| Builtin::StoreHalf { from: from.to_string(), mode, stride })
}

/// The float twin of a builtin on half, which libclc 16's NVPTX library lacks (it has no half
/// arithmetic): the same builtin with each `half` parameter (scalar or vector, `Dh`,
/// `Dv4_Dh`) made `float`, called on the arguments widened (`fpext`, exact) and its result
/// narrowed (`fptrunc`, rounding to nearest even): `mad(half2, half2, half2)` is
/// `mad(float2, float2, float2)` between conversions, which `opt` folds to half instructions
/// where NVPTX has them. Computing in float and rounding once is within OpenCL's half
/// accuracy for every builtin (the float result is as accurate or more, relative to half's
/// ulp).
///
/// A builtin qualifies if it has a half parameter (or, as `nan(ushort)`, a half result), its
/// other parameters are integers or pointers where it writes a second result, and its result
/// is half-typed or an integer (`ldexp(half, int)`, `isnan(half)`, `select(half2, half2,
/// short2)`, `work_group_broadcast(half, size_t)`, `frexp(half4, int4 *)`). Where a half
/// builtin's integer types follow the element size, the float twin's are 32-bit:
/// `short`/`ushort` parameters (the mask of `select` and `shuffle`) are sign-extended to
/// `int`/`uint` (keeping a set top bit set), and a `shortn` result (the relational functions
/// on half vectors: 0 or -1) is the `intn` result truncated. A pointer parameter (to half or
/// int, in any address space: `fract(half, global half *)`, `remquo(half4, half4, int4 *)`) is
/// a private pointer to a temporary of the twin's type (`float`, `int4`) in the twin, whose
/// value is then narrowed and stored where the builtin's points. A conversion from half
/// (`convert_short_sat_rtz(half4)`) calls the same conversion from float (the widening is
/// exact) and keeps its result type. Vector loads and stores (`vload4(size_t, const half *)`)
/// do not qualify: [`half_builtin`] defines them.
fn half_twin(decl: &Declaration, name: &mangle::Name) -> Option<Twin> {
    let conversion = name.base.starts_with("convert_");
    if name.base.starts_with("vload")
        || name.base.starts_with("vstore")
        || decl.params.len() != name.params.len()
    {
        return None;
    }
    let widen = |ty: &Type, code: &str, wide: &str| match ty {
        Type::Builtin(c) if c == code => Some(Type::Builtin(wide.into())),
        Type::Vector(n, e) if e.scalar_code() == Some(code) => {
            Some(Type::Vector(*n, Box::new(Type::Builtin(wide.into()))))
        }
        _ => None,
    };
    let integer = |ty: &Type| {
        matches!(ty, Type::Builtin(_) | Type::Vector(..))
            && matches!(ty.scalar_code(), Some("i" | "j" | "l" | "m"))
    };
    let mut params = Vec::new();
    let mut ir_params = Vec::new();
    let mut pointees = Vec::new();
    let mut half = false;
    for (ty, ir) in name.params.iter().zip(&decl.params) {
        let mut pointee = None;
        let (wide, ir) = if let Some(wide) = widen(ty, "Dh", "f") {
            half = true;
            (wide, ir_widened(ir, "half", "float")?)
        } else if let Some(wide) = widen(ty, "s", "i").or_else(|| widen(ty, "t", "j")) {
            (wide, ir_widened(ir, "i16", "i32")?)
        } else if integer(ty) {
            (ty.clone(), ir.clone())
        } else if let Type::Pointer('P', to) = ty {
            // A pointer where the builtin writes: no `const`, no `volatile`.
            let to = match to.as_ref() {
                Type::Qualified(qualifiers, to) => {
                    let address_space_only = qualifiers
                        .iter()
                        .all(|q| matches!(q, mangle::Qualifier::Vendor(v) if v.starts_with("AS")));
                    address_space_only.then_some(to.as_ref())?
                }
                to => to,
            };
            let wide = match widen(to, "Dh", "f") {
                Some(wide) => {
                    half = true;
                    wide
                }
                None if integer(to) && to.scalar_code() == Some("i") => to.clone(),
                None => return None,
            };
            pointee = Some(ir_type(to)?);
            (Type::Pointer('P', Box::new(wide)), "ptr".to_string())
        } else {
            return None;
        };
        params.push(wide);
        ir_params.push(ir);
        pointees.push(pointee);
    }
    let half_result = ir_widened(&decl.ret, "half", "float");
    if !half && (half_result.is_none() || conversion) {
        return None;
    }
    let ret = if conversion {
        decl.ret.clone()
    } else {
        half_result
            .or_else(|| ir_widened(&decl.ret, "i16", "i32").filter(|r| r.starts_with('<')))
            .or_else(|| {
            let element = vector_type(&decl.ret).map_or(decl.ret.as_str(), |(_, e)| e);
            matches!(element, "i32" | "i64").then(|| decl.ret.clone())
        })?
    };
    let twin = mangle::Name { base: name.base.clone(), params };
    Some(Twin {
        decl: Declaration { name: mangle::mangle(&twin), ret, params: ir_params },
        pointees,
    })
}

/// The body of a builtin on half's bits (scalars or vectors alike: the instructions are
/// elementwise).
fn half_bits(op: HalfBits, decl: &Declaration, b: &mut Body) {
    let half = decl.params[0].as_str();
    let bits = half.replace("half", "i16");
    let flags = half.replace("half", "i1");
    let all = |value: &str| splat(half, "i16", value);
    let a = b.inst(&format!("bitcast {half} %a0 to {bits}"));
    let v = match op {
        HalfBits::Select => {
            // A vector's lane takes the second where its mask's top bit is set, a scalar
            // where its mask is not 0.
            let mask = &decl.params[2];
            let take = match vector_type(half) {
                Some(_) => b.inst(&format!("icmp slt {mask} %a2, zeroinitializer")),
                None => b.inst(&format!("icmp ne {mask} %a2, 0")),
            };
            b.inst(&format!("select {flags} {take}, {half} %a1, {half} %a0"))
        }
        HalfBits::Bitselect => {
            // a ^ ((a ^ b) & c): b's bits where c's are set, a's elsewhere.
            let [y, mask] = [1, 2].map(|i| b.inst(&format!("bitcast {half} %a{i} to {bits}")));
            let differ = b.inst(&format!("xor {bits} {a}, {y}"));
            let taken = b.inst(&format!("and {bits} {differ}, {mask}"));
            let v = b.inst(&format!("xor {bits} {a}, {taken}"));
            b.inst(&format!("bitcast {bits} {v} to {half}"))
        }
        HalfBits::IsNormal => {
            // An exponent neither 0 (zeros, subnormals) nor 31 (infinities, NaNs).
            let exponent = b.inst(&format!("and {bits} {a}, {}", all("31744")));
            let low = b.inst(&format!("icmp ne {bits} {exponent}, zeroinitializer"));
            let high = b.inst(&format!("icmp ne {bits} {exponent}, {}", all("31744")));
            let normal = b.inst(&format!("and {flags} {low}, {high}"));
            // 1 for a scalar, -1 (every bit set) for a vector's lane, as the twin has it.
            let extend = if vector_type(half).is_some() { "sext" } else { "zext" };
            b.inst(&format!("{extend} {flags} {normal} to {}", decl.ret))
        }
        HalfBits::NextAfter => {
            // One step of the bits away from zero where x moves away from it, toward zero
            // otherwise; from a zero, the smallest subnormal of y's sign; y where x == y;
            // a NaN where either is.
            let y = b.inst(&format!("bitcast {half} %a1 to {bits}"));
            let up = b.inst(&format!("fcmp olt {half} %a0, %a1"));
            let negative = b.inst(&format!("icmp slt {bits} {a}, zeroinitializer"));
            let away = b.inst(&format!("xor {flags} {up}, {negative}"));
            let plus = b.inst(&format!("add {bits} {a}, {}", all("1")));
            let minus = b.inst(&format!("sub {bits} {a}, {}", all("1")));
            let step = b.inst(&format!("select {flags} {away}, {bits} {plus}, {bits} {minus}"));
            let sign = b.inst(&format!("and {bits} {y}, {}", all("-32768")));
            let tiny = b.inst(&format!("or {bits} {sign}, {}", all("1")));
            let zero = b.inst(&format!("fcmp oeq {half} %a0, zeroinitializer"));
            let v = b.inst(&format!("select {flags} {zero}, {bits} {tiny}, {bits} {step}"));
            let equal = b.inst(&format!("fcmp oeq {half} %a0, %a1"));
            let v = b.inst(&format!("select {flags} {equal}, {bits} {y}, {bits} {v}"));
            let v = b.inst(&format!("bitcast {bits} {v} to {half}"));
            let unordered = b.inst(&format!("fcmp uno {half} %a0, %a1"));
            let nan = b.inst(&format!("fadd {half} %a0, %a1"));
            b.inst(&format!("select {flags} {unordered}, {half} {nan}, {half} {v}"))
        }
    };
    b.line(&format!("ret {} {v}", decl.ret));
}

/// The IR type of a half or int scalar or vector (`Dv4_Dh` → `<4 x half>`).
fn ir_type(ty: &Type) -> Option<String> {
    let element = match ty.scalar_code()? {
        "Dh" => "half",
        "i" => "i32",
        _ => return None,
    };
    Some(match ty {
        Type::Vector(n, _) => format!("<{n} x {element}>"),
        _ => element.to_string(),
    })
}

/// `value` (a scalar or a vector constant) in every lane of `ty`.
fn splat(ty: &str, element: &str, value: &str) -> String {
    match vector_type(ty) {
        Some((n, _)) => {
            let lanes = vec![format!("{element} {value}"); n as usize];
            format!("<{}>", lanes.join(", "))
        }
        None => value.to_string(),
    }
}

/// How a value of builtin type `code` converts to half: the LLVM instruction (rounding to
/// nearest even), and the PTX type it is in a `cvt` with another rounding mode (`None` for
/// half itself, and for types outside OpenCL's conversions).
fn conversion_code(code: &str) -> Option<(Option<&'static str>, &'static str)> {
    Some(match code {
        "Dh" => (None, "f16"),
        "f" => (Some("fptrunc"), "f32"),
        "d" => (Some("fptrunc"), "f64"),
        "c" | "a" | "s" | "i" => (Some("sitofp"), "s32"),
        "h" | "t" | "j" => (Some("uitofp"), "u32"),
        "l" => (Some("sitofp"), "s64"),
        "m" => (Some("uitofp"), "u64"),
        _ => return None,
    })
}

/// The LLVM instruction that converts builtin type `code` to half, rounding to nearest even.
fn conversion_to_half(code: &str) -> Option<&'static str> {
    conversion_code(code)?.0
}

/// A scalar `x` of builtin type `code` (IR type `ty`) rounded to half by PTX's `cvt` with
/// rounding `mode` (`rz`, `rp`, `rm`); 8- and 16-bit integers widened to 32 bits first.
fn rounded_to_half(b: &mut Body, code: &str, ty: &str, x: &str, mode: &str) -> String {
    let Some((_, ptx)) = conversion_code(code) else { return x.to_string() };
    if ptx == "f16" {
        return x.to_string();
    }
    let (x, ty) = match (ty, ptx) {
        ("i8" | "i16", "s32") => (b.inst(&format!("sext {ty} {x} to i32")), "i32"),
        ("i8" | "i16", _) => (b.inst(&format!("zext {ty} {x} to i32")), "i32"),
        _ => (x.to_string(), ty),
    };
    let bits = rounded_to_half_bits(b, ptx, ty, &x, mode);
    b.inst(&format!("bitcast i16 {bits} to half"))
}

/// The bits (an `i16`) of scalar `x` (IR type `ty`, PTX type `ptx`: `f32`, `f64`, `s32`,
/// `u32`, `s64`, `u64`) rounded to half by PTX's `cvt` with rounding `mode` (`rn`, `rz`,
/// `rp`, `rm`; never `.ftz`, so float subnormals round as they are).
fn rounded_to_half_bits(b: &mut Body, ptx: &str, ty: &str, x: &str, mode: &str) -> String {
    let constraint = match ptx {
        "f32" => "f",
        "f64" => "d",
        "s32" | "u32" => "r",
        _ => "l",
    };
    b.inst(&format!("call i16 asm \"cvt.{mode}.f16.{ptx} $0, $1;\", \"=h,{constraint}\"({ty} {x})"))
}

/// An IR type of element `from` (`half`, `<4 x half>`) with element `to`; `None` for others.
fn ir_widened(ty: &str, from: &str, to: &str) -> Option<String> {
    match vector_type(ty) {
        Some((n, element)) if element == from => Some(format!("<{n} x {to}>")),
        None if ty == from => Some(to.to_string()),
        _ => None,
    }
}

/// The builtin type code of a collective's value (`i`, `m`, `d`, …).
fn scalar_code(decl: &Declaration) -> String {
    let name = mangle::demangle(&decl.name);
    name.and_then(|n| n.params.first().and_then(Type::scalar_code).map(str::to_string))
        .unwrap_or_default()
}

/// Instructions of a function body, with fresh value names.
#[derive(Default)]
struct Body {
    text: String,
    next: usize,
}

impl Body {
    fn line(&mut self, line: &str) {
        self.text.push_str("  ");
        self.text.push_str(line);
        self.text.push('\n');
    }

    fn label(&mut self, label: &str) {
        let _ = writeln!(self.text, "{label}:");
    }

    fn inst(&mut self, rhs: &str) -> String {
        self.next += 1;
        let name = format!("%t{}", self.next);
        self.line(&format!("{name} = {rhs}"));
        name
    }

    /// `f` applied to the arguments element by element (scalars as they are), the result
    /// assembled as `ty`.
    fn elementwise(
        &mut self,
        ty: &str,
        arity: usize,
        mut f: impl FnMut(&mut Body, Vec<String>) -> String,
    ) -> String {
        let args =
            |i: usize| (0..arity).map(|a| format!("%a{a}")).collect::<Vec<_>>().get(i).cloned();
        let Some((n, element)) = vector_type(ty) else {
            return f(self, (0..arity).filter_map(args).collect());
        };
        let mut acc = "poison".to_string();
        for lane in 0..n {
            let lane_args = (0..arity)
                .map(|a| self.inst(&format!("extractelement {ty} %a{a}, i32 {lane}")))
                .collect();
            let r = f(self, lane_args);
            acc = self.inst(&format!("insertelement {ty} {acc}, {element} {r}, i32 {lane}"));
        }
        acc
    }
}

/// `<4 x float>` → (4, `float`).
fn vector_type(ty: &str) -> Option<(u32, &str)> {
    let inner = ty.strip_prefix('<')?.strip_suffix('>')?;
    let (n, element) = inner.split_once(" x ")?;
    Some((n.trim().parse().ok()?, element.trim()))
}

/// A float constant as LLVM IR writes it: the `f32` value, as a double's bits.
fn float_constant(value: f32) -> String {
    format!("0x{:016X}", f64::from(value).to_bits())
}

/// One float lane of an approximate function: PTX's `sin.approx`, `cos.approx`, `ex2.approx`,
/// `lg2.approx`, `rsqrt.approx`, `div.approx`, scaled where the base differs.
fn approx(f: &str, args: &[String], b: &mut Body, m: &mut Module) -> String {
    let mut call = |b: &mut Body, intrinsic: &str, args: &[&str]| {
        m.declare(&format!(
            "declare float @llvm.nvvm.{intrinsic}({})",
            vec!["float"; args.len()].join(", ")
        ));
        let list: Vec<String> = args.iter().map(|a| format!("float {a}")).collect();
        b.inst(&format!("call float @llvm.nvvm.{intrinsic}({})", list.join(", ")))
    };
    let x = args[0].as_str();
    let scaled = |b: &mut Body, v: &str, factor: f32| {
        b.inst(&format!("fmul float {v}, {}", float_constant(factor)))
    };
    match f {
        "sin" => call(b, "sin.approx.f", &[x]),
        "cos" => call(b, "cos.approx.f", &[x]),
        "tan" => {
            let s = call(b, "sin.approx.f", &[x]);
            let c = call(b, "cos.approx.f", &[x]);
            call(b, "div.approx.f", &[&s, &c])
        }
        "exp2" => call(b, "ex2.approx.f", &[x]),
        "exp" => {
            let t = scaled(b, x, std::f32::consts::LOG2_E);
            call(b, "ex2.approx.f", &[&t])
        }
        "exp10" => {
            let t = scaled(b, x, std::f32::consts::LOG2_10);
            call(b, "ex2.approx.f", &[&t])
        }
        "log2" => call(b, "lg2.approx.f", &[x]),
        "log" => {
            let t = call(b, "lg2.approx.f", &[x]);
            scaled(b, &t, std::f32::consts::LN_2)
        }
        "log10" => {
            let t = call(b, "lg2.approx.f", &[x]);
            scaled(b, &t, std::f32::consts::LOG10_2)
        }
        "powr" => {
            let l = call(b, "lg2.approx.f", &[x]);
            let t = b.inst(&format!("fmul float {}, {l}", args[1]));
            call(b, "ex2.approx.f", &[&t])
        }
        "rsqrt" => call(b, "rsqrt.approx.f", &[x]),
        _ => unreachable!("only the functions Builtin::of accepts"),
    }
}

/// A work-group collective over the shared scratch array: each work-item stores its value in
/// its slot, a barrier, then each reads the slots it needs (all of them for a reduction, those
/// before its own for a scan, one for a broadcast), and a barrier again before the array can
/// be reused. Reading the same slot across a warp is one shared-memory broadcast.
fn work_group(
    collective: Collective,
    code: &str,
    decl: &Declaration,
    b: &mut Body,
    m: &mut Module,
) {
    let ty = decl.ret.as_str();
    let scratch = format!("@{PREFIX}scratch");
    let slot = |b: &mut Body, index: &str| {
        b.inst(&format!("getelementptr inbounds [{MAX_WORK_GROUP} x i64], ptr addrspace(3) {scratch}, i32 0, i32 {index}"))
    };
    let lid = b.inst(&format!("call i32 @{PREFIX}local_linear_id()"));
    let n = b.inst(&format!("call i32 @{PREFIX}local_linear_size()"));
    if let Collective::Broadcast = collective {
        // The source work-item's linear index: x + y * size_x + z * size_x * size_y.
        let nx = b.inst("call i32 @llvm.nvvm.read.ptx.sreg.ntid.x()");
        let ny = b.inst("call i32 @llvm.nvvm.read.ptx.sreg.ntid.y()");
        let coords: Vec<String> = (1..decl.params.len())
            .map(|i| b.inst(&format!("trunc {} %a{i} to i32", decl.params[i])))
            .collect();
        let mut src = coords[0].clone();
        if let Some(y) = coords.get(1) {
            let t = b.inst(&format!("mul i32 {y}, {nx}"));
            src = b.inst(&format!("add i32 {src}, {t}"));
        }
        if let Some(z) = coords.get(2) {
            let nxy = b.inst(&format!("mul i32 {nx}, {ny}"));
            let t = b.inst(&format!("mul i32 {z}, {nxy}"));
            src = b.inst(&format!("add i32 {src}, {t}"));
        }
        let is_source = b.inst(&format!("icmp eq i32 {lid}, {src}"));
        b.line(&format!("br i1 {is_source}, label %store, label %wait"));
        b.label("store");
        let p = slot(b, "0");
        b.line(&format!("store {ty} %a0, ptr addrspace(3) {p}, align 8"));
        b.line("br label %wait");
        b.label("wait");
        b.line("call void @llvm.nvvm.barrier0()");
        let p = slot(b, "0");
        let v = b.inst(&format!("load {ty}, ptr addrspace(3) {p}, align 8"));
        b.line("call void @llvm.nvvm.barrier0()");
        b.line(&format!("ret {ty} {v}"));
        return;
    }
    // all/any: over (x != 0) as an i32 0 or 1.
    let (value, op) = match collective {
        Collective::All | Collective::Any => {
            let nonzero = b.inst(&format!("icmp ne {ty} %a0, 0"));
            let v = b.inst(&format!("zext i1 {nonzero} to {ty}"));
            (v, if matches!(collective, Collective::All) { "and" } else { "or" })
        }
        Collective::Reduce(op) | Collective::ScanInclusive(op) | Collective::ScanExclusive(op) => {
            ("%a0".to_string(), op)
        }
        Collective::Broadcast => unreachable!("handled above"),
    };
    let identity = identity(op, code);
    let limit = match collective {
        Collective::ScanInclusive(_) => b.inst(&format!("add i32 {lid}, 1")),
        Collective::ScanExclusive(_) => lid.clone(),
        _ => n.clone(),
    };
    let own = slot(b, &lid);
    b.line(&format!("store {ty} {value}, ptr addrspace(3) {own}, align 8"));
    b.line("call void @llvm.nvvm.barrier0()");
    b.line("br label %loop");
    b.label("loop");
    b.line("%i = phi i32 [ 0, %entry ], [ %i.next, %body ]");
    b.line(&format!("%acc = phi {ty} [ {identity}, %entry ], [ %acc.next, %body ]"));
    let more = b.inst(&format!("icmp ult i32 %i, {limit}"));
    b.line(&format!("br i1 {more}, label %body, label %done"));
    b.label("body");
    let p = slot(b, "%i");
    let v = b.inst(&format!("load {ty}, ptr addrspace(3) {p}, align 8"));
    b.line(&format!("%acc.next = {}", combination(op, code, ty, "%acc", &v, m)));
    b.line("%i.next = add i32 %i, 1");
    b.line("br label %loop");
    b.label("done");
    b.line("call void @llvm.nvvm.barrier0()");
    b.line(&format!("ret {ty} %acc"));
}

/// The value that leaves the others unchanged under `op` (`add`, `min`, `max`, `and`, `or`)
/// for builtin type `code`.
fn identity(op: &str, code: &str) -> String {
    let (float, signed, wide) =
        (matches!(code, "f" | "d"), matches!(code, "i" | "l"), matches!(code, "l" | "m" | "d"));
    match (op, float, signed) {
        ("add", true, _) => "-0.0".to_string(),
        ("min", true, _) => "0x7FF0000000000000".to_string(),
        ("max", true, _) => "0xFFF0000000000000".to_string(),
        ("min", false, true) if wide => i64::MAX.to_string(),
        ("min", false, true) => i32::MAX.to_string(),
        ("min", false, false) | ("and", _, _) => "-1".to_string(),
        ("max", false, true) if wide => i64::MIN.to_string(),
        ("max", false, true) => i32::MIN.to_string(),
        _ => "0".to_string(),
    }
}

/// The instruction that combines `a` and `x` of type `ty` (builtin type `code`) under `op`:
/// OpenCL's fmin/fmax and integer min/max are LLVM's minnum/maxnum, smin/umin, smax/umax.
fn combination(op: &str, code: &str, ty: &str, a: &str, x: &str, m: &mut Module) -> String {
    let (float, signed) = (matches!(code, "f" | "d"), matches!(code, "i" | "l"));
    let intrinsic = match (op, float, signed) {
        ("add", true, _) => return format!("fadd {ty} {a}, {x}"),
        ("add" | "and" | "or", _, _) => return format!("{op} {ty} {a}, {x}"),
        ("min", true, _) => format!("minnum.{}", if ty == "double" { "f64" } else { "f32" }),
        ("max", true, _) => format!("maxnum.{}", if ty == "double" { "f64" } else { "f32" }),
        ("min", false, true) => format!("smin.{ty}"),
        ("min", false, false) => format!("umin.{ty}"),
        ("max", false, true) => format!("smax.{ty}"),
        _ => format!("umax.{ty}"),
    };
    m.declare(&format!("declare {ty} @llvm.{intrinsic}({ty}, {ty})"));
    format!("call {ty} @llvm.{intrinsic}({ty} {a}, {ty} {x})")
}

/// A sub-group function, over warps: lanes, sizes and masks from the helpers; values through
/// `shfl.sync` (a scan in five `shfl.sync.up` steps, a reduction the scan's last lane
/// broadcast with `shfl.sync.idx`), votes through `vote.sync`, the barrier `bar.warp.sync`.
fn sub_group(function: SubGroup, code: &str, decl: &Declaration, b: &mut Body, m: &mut Module) {
    let ty = decl.ret.as_str();
    let helper = |b: &mut Body, name: &str| b.inst(&format!("call i32 @{PREFIX}{name}()"));
    let result = match function {
        SubGroup::LocalId => helper(b, "sub_group_lane"),
        SubGroup::Id => helper(b, "sub_group_id"),
        SubGroup::Size => helper(b, "sub_group_size"),
        SubGroup::MaxSize => {
            let n = helper(b, "local_linear_size");
            b.inst(&format!("call i32 @llvm.umin.i32(i32 {n}, i32 32)"))
        }
        SubGroup::Count => {
            let n = helper(b, "local_linear_size");
            let t = b.inst(&format!("add i32 {n}, 31"));
            b.inst(&format!("lshr i32 {t}, 5"))
        }
        SubGroup::Barrier => {
            m.declare("declare void @llvm.nvvm.bar.warp.sync(i32)");
            let mask = helper(b, "sub_group_mask");
            b.line(&format!("call void @llvm.nvvm.bar.warp.sync(i32 {mask})"));
            b.line("ret void");
            return;
        }
        SubGroup::Collective(c @ (Collective::All | Collective::Any)) => {
            let vote = if matches!(c, Collective::All) { "all" } else { "any" };
            m.declare(&format!("declare i1 @llvm.nvvm.vote.{vote}.sync(i32, i1)"));
            let mask = helper(b, "sub_group_mask");
            let p = b.inst(&format!("icmp ne {ty} %a0, 0"));
            let v = b.inst(&format!("call i1 @llvm.nvvm.vote.{vote}.sync(i32 {mask}, i1 {p})"));
            b.inst(&format!("zext i1 {v} to {ty}"))
        }
        SubGroup::Collective(Collective::Broadcast) => {
            let mask = helper(b, "sub_group_mask");
            let lane = match decl.params[1].as_str() {
                "i32" => "%a1".to_string(),
                wide => b.inst(&format!("trunc {wide} %a1 to i32")),
            };
            shuffle(b, m, "idx", ty, "%a0", &lane, &mask)
        }
        SubGroup::Shuffle(kind) => {
            // The lane, the distance (`up`, `down`) or the lane mask (`bfly`).
            let mask = helper(b, "sub_group_mask");
            shuffle(b, m, kind, ty, "%a0", "%a1", &mask)
        }
        SubGroup::Collective(
            Collective::Reduce(op) | Collective::ScanInclusive(op) | Collective::ScanExclusive(op),
        ) => {
            let mask = helper(b, "sub_group_mask");
            let lane = helper(b, "sub_group_lane");
            let mut x = "%a0".to_string();
            for offset in [1, 2, 4, 8, 16] {
                let y = shuffle(b, m, "up", ty, &x, &offset.to_string(), &mask);
                let combined = b.inst(&combination(op, code, ty, &y, &x, m));
                let has = b.inst(&format!("icmp uge i32 {lane}, {offset}"));
                x = b.inst(&format!("select i1 {has}, {ty} {combined}, {ty} {x}"));
            }
            match function {
                SubGroup::Collective(Collective::Reduce(_)) => {
                    let size = helper(b, "sub_group_size");
                    let last = b.inst(&format!("sub i32 {size}, 1"));
                    shuffle(b, m, "idx", ty, &x, &last, &mask)
                }
                SubGroup::Collective(Collective::ScanExclusive(_)) => {
                    let before = shuffle(b, m, "up", ty, &x, "1", &mask);
                    let first = b.inst(&format!("icmp eq i32 {lane}, 0"));
                    b.inst(&format!(
                        "select i1 {first}, {ty} {}, {ty} {before}",
                        identity(op, code)
                    ))
                }
                _ => x,
            }
        }
    };
    b.line(&format!("ret {ty} {result}"));
}

/// `value` of type `ty` from another lane of the sub-group: `shfl.sync.idx` from lane `lane`,
/// `shfl.sync.up` (`down`) from `lane` lanes below (above), or `shfl.sync.bfly` from the lane
/// whose index is ours xor `lane`; 64-bit values as two 32-bit halves, 8- and 16-bit ones
/// (half's bits) zero-extended to 32.
fn shuffle(
    b: &mut Body,
    m: &mut Module,
    kind: &str,
    ty: &str,
    value: &str,
    lane: &str,
    mask: &str,
) -> String {
    // The clamp operand: the lowest lane for up, the highest for the others.
    let clamp = if kind == "up" { 0 } else { 31 };
    let mut shfl32 = |b: &mut Body, t: &str, v: &str| {
        let suffix = if t == "float" { "f32" } else { "i32" };
        m.declare(&format!("declare {t} @llvm.nvvm.shfl.sync.{kind}.{suffix}(i32, {t}, i32, i32)"));
        b.inst(&format!("call {t} @llvm.nvvm.shfl.sync.{kind}.{suffix}(i32 {mask}, {t} {v}, i32 {lane}, i32 {clamp})"))
    };
    match ty {
        "i32" | "float" => shfl32(b, ty, value),
        "i8" | "i16" | "half" => {
            let (bits, bits_ty) = match ty {
                "half" => (b.inst(&format!("bitcast half {value} to i16")), "i16"),
                _ => (value.to_string(), ty),
            };
            let wide = b.inst(&format!("zext {bits_ty} {bits} to i32"));
            let v = shfl32(b, "i32", &wide);
            let v = b.inst(&format!("trunc i32 {v} to {bits_ty}"));
            match ty {
                "half" => b.inst(&format!("bitcast i16 {v} to half")),
                _ => v,
            }
        }
        _ => {
            let bits = if ty == "double" {
                b.inst(&format!("bitcast double {value} to i64"))
            } else {
                value.to_string()
            };
            let low = b.inst(&format!("trunc i64 {bits} to i32"));
            let high = b.inst(&format!("lshr i64 {bits}, 32"));
            let high = b.inst(&format!("trunc i64 {high} to i32"));
            let low = shfl32(b, "i32", &low);
            let high = shfl32(b, "i32", &high);
            let low = b.inst(&format!("zext i32 {low} to i64"));
            let high = b.inst(&format!("zext i32 {high} to i64"));
            let high = b.inst(&format!("shl i64 {high}, 32"));
            let joined = b.inst(&format!("or i64 {high}, {low}"));
            if ty == "double" {
                b.inst(&format!("bitcast i64 {joined} to double"))
            } else {
                joined
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn decl(name: &str, ret: &str, params: &[&str]) -> Declaration {
        Declaration {
            name: name.into(),
            ret: ret.into(),
            params: params.iter().map(|p| p.to_string()).collect(),
        }
    }

    /// One declaration of each kind we define, as the retargeted image declares them.
    fn ours() -> Vec<Declaration> {
        vec![
            decl("_Z17get_global_offsetj", "i64", &["i32"]),
            decl("_Z12get_work_dimv", "i32", &[]),
            decl("_Z23get_enqueued_local_sizej", "i64", &["i32"]),
            decl("_Z19get_local_linear_idv", "i64", &[]),
            decl("_Z20get_global_linear_idv", "i64", &[]),
            decl("_Z5rsqrtf", "float", &["float"]),
            decl("_Z12native_rsqrtDv4_f", "<4 x float>", &["<4 x float>"]),
            decl("_Z10half_rsqrtf", "float", &["float"]),
            decl("_Z10native_sinf", "float", &["float"]),
            decl("_Z10native_cosDv2_f", "<2 x float>", &["<2 x float>"]),
            decl("_Z10native_tanf", "float", &["float"]),
            decl("_Z10native_expf", "float", &["float"]),
            decl("_Z11native_exp2f", "float", &["float"]),
            decl("_Z12native_exp10f", "float", &["float"]),
            decl("_Z10native_logf", "float", &["float"]),
            decl("_Z11native_log2f", "float", &["float"]),
            decl("_Z12native_log10Dv3_f", "<3 x float>", &["<3 x float>"]),
            decl("_Z11native_powrff", "float", &["float", "float"]),
            decl("_Z10atomic_addPVii", "i32", &["ptr", "i32"]),
            decl("_Z10atomic_incPU3AS3Vi", "i32", &["ptr addrspace(3)"]),
            decl("_Z10atomic_minPU3AS1Vjj", "i32", &["ptr addrspace(1)", "i32"]),
            decl("_Z8atom_maxPU3AS1Vll", "i64", &["ptr addrspace(1)", "i64"]),
            decl("_Z12atom_cmpxchgPU3AS1Vlll", "i64", &["ptr addrspace(1)", "i64", "i64"]),
            decl("_Z11atomic_xchgPU3AS1Vff", "float", &["ptr addrspace(1)", "float"]),
            decl("_Z14work_group_alli", "i32", &["i32"]),
            decl("_Z14work_group_anyi", "i32", &["i32"]),
            decl("_Z20work_group_broadcastjmmm", "i32", &["i32", "i64", "i64", "i64"]),
            decl("_Z20work_group_broadcastdm", "double", &["double", "i64"]),
            decl("_Z21work_group_reduce_addf", "float", &["float"]),
            decl("_Z21work_group_reduce_minm", "i64", &["i64"]),
            decl("_Z21work_group_reduce_maxl", "i64", &["i64"]),
            decl("_Z29work_group_scan_inclusive_addi", "i32", &["i32"]),
            decl("_Z29work_group_scan_exclusive_maxd", "double", &["double"]),
            decl("_Z22get_sub_group_local_idv", "i32", &[]),
            decl("_Z16get_sub_group_idv", "i32", &[]),
            decl("_Z18get_sub_group_sizev", "i32", &[]),
            decl("_Z22get_max_sub_group_sizev", "i32", &[]),
            decl("_Z18get_num_sub_groupsv", "i32", &[]),
            decl("_Z27get_enqueued_num_sub_groupsv", "i32", &[]),
            decl(SUB_GROUP_BARRIER, "void", &[]),
            decl("_Z13sub_group_alli", "i32", &["i32"]),
            decl("_Z13sub_group_anyi", "i32", &["i32"]),
            decl("_Z19sub_group_broadcastfj", "float", &["float", "i32"]),
            decl("_Z19sub_group_broadcastmj", "i64", &["i64", "i32"]),
            decl("_Z20sub_group_reduce_addi", "i32", &["i32"]),
            decl("_Z20sub_group_reduce_maxm", "i64", &["i64"]),
            decl("_Z28sub_group_scan_exclusive_addd", "double", &["double"]),
            decl("_Z28sub_group_scan_inclusive_minf", "float", &["float"]),
            decl("_Z3madDhDhDh", "half", &["half", "half", "half"]),
            decl("_Z3madDv2_DhS_S_", "<2 x half>", &["<2 x half>", "<2 x half>", "<2 x half>"]),
            decl("_Z4fmaxDv4_DhS_", "<4 x half>", &["<4 x half>", "<4 x half>"]),
            decl("_Z4sqrtDv3_Dh", "<3 x half>", &["<3 x half>"]),
            decl("_Z3expDh", "half", &["half"]),
            decl("_Z5ldexpDhi", "half", &["half", "i32"]),
            decl("_Z5isnanDh", "i32", &["half"]),
            decl("_Z7isequalDv2_DhS_", "<2 x i16>", &["<2 x half>", "<2 x half>"]),
            decl(
                "_Z6selectDv2_DhS_Dv2_s",
                "<2 x half>",
                &["<2 x half>", "<2 x half>", "<2 x i16>"],
            ),
            decl("_Z10native_sinDh", "half", &["half"]),
            decl("_Z21work_group_reduce_addDh", "half", &["half"]),
            decl("_Z20work_group_broadcastDhm", "half", &["half", "i64"]),
            decl("_Z19sub_group_broadcastDhj", "half", &["half", "i32"]),
            decl("_Z17sub_group_shuffleDhj", "half", &["half", "i32"]),
            decl("_Z21sub_group_shuffle_xorDhj", "half", &["half", "i32"]),
            decl("_Z20sub_group_shuffle_upDhj", "half", &["half", "i32"]),
            decl("_Z22sub_group_shuffle_downDhj", "half", &["half", "i32"]),
            decl("_Z17sub_group_shufflefj", "float", &["float", "i32"]),
            decl("_Z21sub_group_shuffle_xorcj", "i8", &["i8", "i32"]),
            decl("_Z20sub_group_shuffle_uptj", "i16", &["i16", "i32"]),
            decl("_Z22sub_group_shuffle_downdj", "double", &["double", "i32"]),
            decl("_Z28sub_group_scan_inclusive_maxDh", "half", &["half"]),
            decl("_Z3fmaDhDhDh", "half", &["half", "half", "half"]),
            decl("_Z5fractDhPU3AS1Dh", "half", &["half", "ptr addrspace(1)"]),
            decl("_Z5frexpDv4_DhPDv4_i", "<4 x half>", &["<4 x half>", "ptr"]),
            decl("_Z6remquoDhDhPU3AS3i", "half", &["half", "half", "ptr addrspace(3)"]),
            decl("_Z3nant", "half", &["i16"]),
            decl("_Z17convert_short_satDh", "i16", &["half"]),
            decl("_Z16convert_int4_rtpDv4_Dh", "<4 x i32>", &["<4 x half>"]),
            decl("_Z16convert_half_rtzf", "half", &["float"]),
            decl("_Z17convert_half4_rtpDv4_i", "<4 x half>", &["<4 x i32>"]),
            decl("_Z16convert_half_rtnm", "half", &["i64"]),
            decl("_Z13convert_half2Dv2_t", "<2 x half>", &["<2 x i16>"]),
            decl("_Z6vload4mPU3AS1KDh", "<4 x half>", &["i64", "ptr addrspace(1)"]),
            decl("_Z7vstore3Dv3_DhmPDh", "void", &["<3 x half>", "i64", "ptr"]),
            decl("_Z9bitselectDv2_DhS_S_", "<2 x half>", &["<2 x half>"; 3]),
            decl("_Z8isnormalDh", "i32", &["half"]),
            decl("_Z8isnormalDv4_Dh", "<4 x i16>", &["<4 x half>"]),
            decl("_Z9nextafterDv2_DhS_", "<2 x half>", &["<2 x half>"; 2]),
            decl("_Z8prefetchPU3AS1KDhm", "void", &["ptr addrspace(1)", "i64"]),
            decl("_Z11vstore_halffmPDh", "void", &["float", "i64", "ptr"]),
            decl("_Z15vstore_half_rtpfmPU3AS1Dh", "void", &["float", "i64", "ptr addrspace(1)"]),
            decl(
                "_Z16vstore_half4_rtnDv4_fmPU3AS3Dh",
                "void",
                &["<4 x float>", "i64", "ptr addrspace(3)"],
            ),
            decl("_Z17vstorea_half3_rtzDv3_dmPDh", "void", &["<3 x double>", "i64", "ptr"]),
            decl(
                "_Z17vstorea_half2_rtpDv2_dmPU3AS1Dh",
                "void",
                &["<2 x double>", "i64", "ptr addrspace(1)"],
            ),
            decl(
                "_Z29async_work_group_strided_copyPU3AS3DhPU3AS1KDhmm9ocl_event",
                "ptr",
                &["ptr addrspace(3)", "ptr addrspace(1)", "i64", "i64", "ptr"],
            ),
        ]
    }

    #[test]
    fn what_libclc_has_and_works_is_left_to_it() {
        for (name, ret, params) in [
            ("_Z5fractfPf", "float", &["float", "ptr"][..]),
            ("_Z5rsqrtd", "double", &["double"]),
            ("_Z12native_recipf", "float", &["float"]),
            ("_Z13native_divideff", "float", &["float", "float"]),
            ("_Z8half_expf", "float", &["float"]),
            ("_Z7barrierj", "void", &["i32"]),
            ("_Z10vload_halfmPU3AS1KDh", "float", &["i64", "ptr addrspace(1)"]),
            ("_Z6vload4mPU3AS1Kf", "<4 x float>", &["i64", "ptr addrspace(1)"]),
            ("_Z14convert_float4Dv4_i", "<4 x float>", &["<4 x i32>"]),
            ("_Z6selectffi", "float", &["float", "float", "i32"]),
            ("_Z3madfff", "float", &["float", "float", "float"]),
            ("_Z17sub_group_shuffleDv2_fj", "<2 x float>", &["<2 x float>", "i32"]),
            ("printf", "i32", &["ptr addrspace(4)"]),
        ] {
            assert_eq!(redirect(&decl(name, ret, params)), None, "{name}");
        }
        for d in ours() {
            assert_eq!(redirect(&d), Some(format!("{PREFIX}{}", d.name)));
        }
    }

    #[test]
    fn half_builtins_call_their_float_twins() {
        let twin =
            |name: &str, ret: &str, params: &[&str]| match Builtin::of(&decl(name, ret, params)) {
                Some(Builtin::Half(Twin { decl: twin, .. })) => {
                    Some((twin.name, twin.ret, twin.params.join(", ")))
                }
                _ => None,
            };
        let t = |name: &str, ret: &str, params: &str| {
            Some((name.to_string(), ret.to_string(), params.to_string()))
        };
        assert_eq!(
            twin("_Z3powDv8_DhS_", "<8 x half>", &["<8 x half>"; 2]),
            t("_Z3powDv8_fS_", "<8 x float>", "<8 x float>, <8 x float>")
        );
        assert_eq!(
            twin("_Z5rootnDv2_DhDv2_i", "<2 x half>", &["<2 x half>", "<2 x i32>"]),
            t("_Z5rootnDv2_fDv2_i", "<2 x float>", "<2 x float>, <2 x i32>")
        );
        assert_eq!(
            twin("_Z7shuffleDv4_DhDv2_t", "<2 x half>", &["<4 x half>", "<2 x i16>"]),
            t("_Z7shuffleDv4_fDv2_j", "<2 x float>", "<4 x float>, <2 x i32>")
        );
        assert_eq!(
            twin("_Z9isgreaterDhDh", "i32", &["half", "half"]),
            t("_Z9isgreaterff", "i32", "float, float")
        );
        assert_eq!(
            twin("_Z5ilogbDv4_Dh", "<4 x i32>", &["<4 x half>"]),
            t("_Z5ilogbDv4_f", "<4 x i32>", "<4 x float>")
        );
        // A half result only; conversions keep their result; pointers to where a second
        // result goes become private pointers to the twin's type.
        assert_eq!(twin("_Z3nant", "half", &["i16"]), t("_Z3nanj", "float", "i32"));
        assert_eq!(
            twin("_Z18convert_ushort_satDh", "i16", &["half"]),
            t("_Z18convert_ushort_satf", "i16", "float")
        );
        assert_eq!(
            twin("_Z4modfDhPDh", "half", &["half", "ptr"]),
            t("_Z4modffPf", "float", "float, ptr")
        );
        assert_eq!(
            twin("_Z5frexpDv4_DhPU3AS1Dv4_i", "<4 x half>", &["<4 x half>", "ptr addrspace(1)"]),
            t("_Z5frexpDv4_fPDv4_i", "<4 x float>", "<4 x float>, ptr")
        );
        assert_eq!(
            twin("_Z8prefetchPU3AS1KDv4_Dhm", "void", &["ptr addrspace(1)", "i64"]),
            t("_Z8prefetchPU3AS1KDv4_tm", "void", "ptr addrspace(1), i64")
        );
        // Not half builtins, or ones defined otherwise.
        assert_eq!(twin("_Z3madfff", "float", &["float"; 3]), None);
        assert_eq!(twin("_Z3madDhDhDh", "half", &["half"; 3]), None);
        assert_eq!(twin("_Z6vload4mPKDh", "<4 x half>", &["i64", "ptr"]), None);
        assert_eq!(twin("_Z16convert_half_rtzf", "half", &["float"]), None);
        assert_eq!(twin("_Z9nextafterDhDh", "half", &["half"; 2]), None);
        assert_eq!(twin("_Z5fractDhPKDh", "half", &["half", "ptr"]), None);
        assert_eq!(twin("_Z12vstore_half2Dv2_fmPDh", "void", &["<2 x float>", "i64", "ptr"]), None);
    }

    #[test]
    fn every_vstore_half_is_ours_with_its_rounding_and_stride() {
        let store = |name: &str| match mangle::demangle(name).as_ref().and_then(store_half) {
            Some(Builtin::StoreHalf { from, mode, stride }) => Some((from, mode, stride)),
            _ => None,
        };
        let s =
            |from: &str, mode: &'static str, stride: u32| Some((from.to_string(), mode, stride));
        assert_eq!(store("_Z11vstore_halffmPDh"), s("f", "rn", 1));
        assert_eq!(store("_Z15vstore_half_rtefmPU3AS1Dh"), s("f", "rn", 1));
        assert_eq!(store("_Z15vstore_half_rtzdmPU3AS3Dh"), s("d", "rz", 1));
        assert_eq!(store("_Z15vstore_half_rtpfmPDh"), s("f", "rp", 1));
        assert_eq!(store("_Z15vstore_half_rtnfmPDh"), s("f", "rm", 1));
        assert_eq!(store("_Z12vstore_half2Dv2_fmPDh"), s("f", "rn", 2));
        assert_eq!(store("_Z12vstore_half3Dv3_fmPU3AS1Dh"), s("f", "rn", 3));
        assert_eq!(store("_Z13vstorea_half3Dv3_fmPU3AS3Dh"), s("f", "rn", 4));
        assert_eq!(store("_Z17vstorea_half4_rtpDv4_fmPU3AS1Dh"), s("f", "rp", 4));
        assert_eq!(store("_Z17vstore_half16_rtnDv16_dmPDh"), s("d", "rm", 16));
        // Lengths that disagree, other suffixes, and what is not a store of floats to halves.
        assert_eq!(store("_Z12vstore_half4Dv2_fmPDh"), None);
        assert_eq!(store("_Z15vstore_half_rtqfmPDh"), None);
        assert_eq!(store("_Z12vstore_half5Dv5_fmPDh"), None);
        assert_eq!(store("_Z11vstore_halfDhmPDh"), None);
        assert_eq!(store("_Z11vstore_halffmPf"), None);
        assert_eq!(store("_Z10vload_halfmPU3AS1KDh"), None);
        assert!(matches!(
            Builtin::of(&decl("_Z16vstore_half4_rtnDv4_fmPU3AS3Dh", "void", &[])),
            Some(Builtin::StoreHalf { .. })
        ));
    }

    #[test]
    fn the_definitions_say_what_they_do() {
        let shim = shim(&ours());
        for expected in [
            "define i64 @__sycl_ptx._Z17get_global_offsetj(i32 %a0) {\nentry:\n  ret i64 0\n}",
            "call float @llvm.nvvm.rsqrt.approx.f(float %a0)",
            "atomicrmw add ptr %a0, i32 %a1 seq_cst",
            "atomicrmw add ptr addrspace(3) %a0, i32 1 seq_cst",
            "atomicrmw umin ptr addrspace(1) %a0, i32 %a1 seq_cst",
            "atomicrmw max ptr addrspace(1) %a0, i64 %a1 seq_cst",
            "cmpxchg ptr addrspace(1) %a0, i64 %a1, i64 %a2 seq_cst seq_cst",
            "atomicrmw xchg ptr addrspace(1) %a0, float %a1 seq_cst",
            "@__sycl_ptx.scratch = internal addrspace(3) global [1024 x i64] undef, align 8",
            "define i32 @__sycl_ptx._Z14work_group_alli(i32 %a0) #0 {",
            "%acc = phi i64 [ -1, %entry ], [ %acc.next, %body ]",
            "%acc = phi i64 [ -9223372036854775808, %entry ], [ %acc.next, %body ]",
            "%acc = phi float [ -0.0, %entry ]",
            "%acc = phi double [ 0xFFF0000000000000, %entry ]",
            "call i1 @llvm.nvvm.vote.all.sync(i32 %t1, i1 %t2)",
            "call float @llvm.nvvm.shfl.sync.idx.f32(i32 %t1, float %a0, i32 %a1, i32 31)",
            "call void @llvm.nvvm.bar.warp.sync(i32 %t1)",
            "define half @__sycl_ptx._Z3madDhDhDh(half %a0, half %a1, half %a2) {\nentry:\n  \
             %t1 = call half @llvm.fmuladd.f16(half %a0, half %a1, half %a2)\n  ret half %t1\n}",
            "declare half @llvm.fmuladd.f16(half, half, half)",
            "call <2 x half> @llvm.fmuladd.v2f16(<2 x half> %a0, <2 x half> %a1, <2 x half> %a2)",
            "call half @llvm.fma.f16(half %a0, half %a1, half %a2)",
            "define half @__sycl_ptx._Z3expDh(half %a0) {\nentry:\n  \
             %t1 = fpext half %a0 to float\n  %t2 = call float @_Z3expf(float %t1)\n  \
             %t3 = fptrunc float %t2 to half\n  ret half %t3\n}",
            "declare float @_Z3expf(float)",
            "call <2 x i32> @_Z7isequalDv2_fS_(<2 x float> %t1, <2 x float> %t2)",
            "trunc <2 x i32> %t3 to <2 x i16>",
            "icmp slt <2 x i16> %a2, zeroinitializer",
            "%t2 = alloca float\n  %t3 = call float @_Z5fractfPf(float %t1, ptr %t2)\n  \
             %t4 = load float, ptr %t2\n  %t5 = fptrunc float %t4 to half\n  \
             store half %t5, ptr addrspace(1) %a1",
            "select i1 %t7, half 0xH3BFF, half %t6",
            "call <4 x float> @_Z5frexpDv4_fPDv4_i(<4 x float> %t1, ptr %t2)",
            "store <4 x i32> %t4, ptr %a1",
            "call float @_Z3nanj(i32 %t1)",
            "call i16 @_Z17convert_short_satf(float %t1)\n  ret i16 %t2",
            "call i16 asm \"cvt.rz.f16.f32 $0, $1;\", \"=h,f\"(float %a0)",
            "call i16 asm \"cvt.rm.f16.u64 $0, $1;\", \"=h,l\"(i64 %a0)",
            "call i16 asm \"cvt.rp.f16.s32 $0, $1;\", \"=h,r\"(i32 %t1)",
            "uitofp <2 x i16> %a0 to <2 x half>",
            "load <4 x half>, ptr addrspace(1) %t2, align 2",
            "store <3 x half> %a0, ptr %t2, align 2",
            "call void @_Z8prefetchPU3AS1Ktm(ptr addrspace(1) %a0, i64 %a1)\n  ret void",
            "define ptr @__sycl_ptx._Z29async_work_group_strided_copyPU3AS3DhPU3AS1KDhmm9ocl_event(\
             ptr addrspace(3) %a0, ptr addrspace(1) %a1, i64 %a2, i64 %a3, ptr %a4) #0 {",
            "define void @__sycl_ptx._Z15vstore_half_rtpfmPU3AS1Dh(float %a0, i64 %a1, \
             ptr addrspace(1) %a2) {\nentry:\n  \
             %t1 = call i16 asm \"cvt.rp.f16.f32 $0, $1;\", \"=h,f\"(float %a0)\n  \
             %t2 = mul i64 %a1, 1\n  %t3 = getelementptr i16, ptr addrspace(1) %a2, i64 %t2\n  \
             store i16 %t1, ptr addrspace(1) %t3, align 2\n  ret void\n}",
            "call i16 asm \"cvt.rn.f16.f32 $0, $1;\", \"=h,f\"(float %a0)",
            "call i16 asm \"cvt.rm.f16.f32 $0, $1;\", \"=h,f\"(float %t1)",
            "%t12 = insertelement <4 x i16> %t9, i16 %t11, i32 3",
            "%t13 = mul i64 %a1, 4\n  %t14 = getelementptr i16, ptr addrspace(3) %a2, i64 %t13\n  \
             store <4 x i16> %t12, ptr addrspace(3) %t14, align 2",
            "call i16 asm \"cvt.rz.f16.f64 $0, $1;\", \"=h,d\"(double %t1)",
            "mul i64 %a1, 4\n  %t11 = getelementptr i16, ptr %a2, i64 %t10\n  \
             store <3 x i16> %t9, ptr %t11, align 2",
            "call i16 asm \"cvt.rp.f16.f64 $0, $1;\", \"=h,d\"(double %t1)",
            "call float @_Z5ldexpfi(float %t1, i32 %a1)",
            "call i32 @_Z5isnanf(float %t1)\n  ret i32 %t2",
            "call float @__sycl_ptx._Z10native_sinf(float %t1)",
            "define half @__sycl_ptx._Z21work_group_reduce_addDh(half %a0) #0 {",
            "call float @__sycl_ptx._Z21work_group_reduce_addf(float %t1)",
            // Shuffles and broadcasts of half move its bits, through an i32.
            "define half @__sycl_ptx._Z19sub_group_broadcastDhj(half %a0, i32 %a1) #0 {\n\
             entry:\n  %t1 = call i32 @__sycl_ptx.sub_group_mask()\n  \
             %t2 = bitcast half %a0 to i16\n  %t3 = zext i16 %t2 to i32\n  \
             %t4 = call i32 @llvm.nvvm.shfl.sync.idx.i32(i32 %t1, i32 %t3, i32 %a1, i32 31)\n  \
             %t5 = trunc i32 %t4 to i16\n  %t6 = bitcast i16 %t5 to half\n  ret half %t6\n}",
            "call i32 @llvm.nvvm.shfl.sync.bfly.i32(i32 %t1, i32 %t3, i32 %a1, i32 31)",
            "call i32 @llvm.nvvm.shfl.sync.up.i32(i32 %t1, i32 %t3, i32 %a1, i32 0)",
            "call i32 @llvm.nvvm.shfl.sync.down.i32(i32 %t1, i32 %t3, i32 %a1, i32 31)",
            "call float @llvm.nvvm.shfl.sync.idx.f32(i32 %t1, float %a0, i32 %a1, i32 31)",
            "%t2 = zext i8 %a0 to i32",
            "%t2 = zext i16 %a0 to i32",
            "declare i32 @llvm.nvvm.shfl.sync.down.i32(i32, i32, i32, i32)",
            "define i32 @__sycl_ptx._Z12get_work_dimv() {\nentry:\n  \
             %t1 = call i32 asm \"mov.u32 $0, %dynamic_smem_size;\", \"=r\"()\n  \
             %t2 = and i32 %t1, 3\n  %t3 = add i32 %t2, 1\n  ret i32 %t3\n}",
        ] {
            assert!(shim.contains(expected), "{expected}\n{shim}");
        }
    }

    /// Every definition is valid IR that NVPTX compiles for the target's architecture
    /// ([`crate::ptx::cpu`], sm_70): a module calling each is linked with the shim and libclc,
    /// optimised and compiled as an image is, and no call is left undefined (so libclc has
    /// every half builtin's float twin we call). A float twin the image also declares is
    /// defined once.
    #[test]
    fn every_definition_compiles_for_the_target_cpu() {
        let tools = crate::ptx::Toolchain::find().unwrap();
        let dir = tempfile::tempdir().unwrap();
        let decls = ours();
        let mut image =
            format!("target datalayout = \"{DATA_LAYOUT}\"\ntarget triple = \"{TRIPLE}\"\n\n");
        for (i, d) in decls.iter().enumerate() {
            let params: Vec<String> =
                d.params.iter().enumerate().map(|(p, t)| format!("{t} %p{p}")).collect();
            let args: Vec<String> =
                d.params.iter().enumerate().map(|(p, t)| format!("{t} %p{p}")).collect();
            let (call, ret) = match d.ret.as_str() {
                "void" => ("call", "ret void".to_string()),
                ty => ("%r = call", format!("ret {ty} %r")),
            };
            image += &format!(
                "define {ty} @use{i}({}) {{\n  {call} {ty} @{PREFIX}{}({})\n  {ret}\n}}\ndeclare {ty} @{PREFIX}{}({})\n",
                params.join(", "),
                d.name,
                args.join(", "),
                d.name,
                d.params.join(", "),
                ty = d.ret
            );
        }
        let shim = shim(&decls);
        let (image_path, shim_path) = (dir.path().join("image.ll"), dir.path().join("shim.ll"));
        std::fs::write(&image_path, image).unwrap();
        std::fs::write(&shim_path, &shim).unwrap();
        let ptx =
            crate::ptx::link_and_compile(&tools, &[&image_path, &shim_path], dir.path()).unwrap();
        let summary = crate::ptx::Summary::of(&ptx);
        assert_eq!(summary.externs, Vec::<String>::new(), "{ptx}");
        assert_eq!(summary.functions.len(), decls.len());
        for instruction in [
            "rsqrt.approx.f32",
            "sin.approx.f32",
            "cos.approx.f32",
            "ex2.approx.f32",
            "lg2.approx.f32",
            "atom.global.cas.b64",
            "bar.sync",
            "shfl.sync.up.b32",
            "shfl.sync.idx.b32",
            "shfl.sync.bfly.b32",
            "shfl.sync.down.b32",
            "vote.sync.any.pred",
            "bar.warp.sync",
            "cvt.rn.f16.f32",
            "cvt.f32.f16",
            "cvt.rz.f16.f32",
            "cvt.rp.f16.s32",
            "cvt.rp.f16.f32",
            "cvt.rm.f16.f32",
            "cvt.rz.f16.f64",
            "cvt.rp.f16.f64",
            "fma.rn.f16",
        ] {
            assert!(ptx.contains(instruction), "{instruction}");
        }
        assert_eq!(summary.target, crate::ptx::cpu());
    }
}
