//! Builtin functions rewritten for devices that take SPIR bitcode made by `llvm-spirv -r`
//! (PoCL 3.1), whose kernel libraries lack some of what that bitcode calls.
//!
//! **Builtins on generic pointers** ([`lower_generic_builtins`]). Under OpenCL C 2.0
//! (`sycl-build`'s default), clang declares the builtins that take a pointer (`vload4`,
//! `vstore_half`, `fract`, `sincos`, `atomic_fetch_add`, `get_fence`, …) for generic pointers
//! only, so every call passes one, however specific the pointer was: llvm-spirv writes
//! `OpenCL.std` instructions and atomics on `Generic` pointers, `llvm-spirv -r` turns them into
//! calls such as `_Z6vload4mPU3AS4Kf` and `_Z10atomic_addPU3AS4Vii`, and PoCL 3.1's kernel
//! library defines no builtin for the generic address space (but `wait_group_events`). Each
//! such instruction is given a pointer of a specific storage class instead: the pointer that
//! the generic one was cast from, when the cast is in sight (a global, local or private pointer
//! handed straight to the builtin, the usual case); otherwise the instruction is repeated in
//! branches on `to_global` and `to_local` (`OpGenericCastToPtrExplicit`), each copy on the
//! pointer cast to its storage class, the last one private (atomics: local, as OpenCL C allows
//! atomics on global and local memory only). `get_fence` (`OpGenericPtrMemSemantics`) becomes
//! selects over the same tests. Each copy calls the device's own builtin, so results are those
//! of the device's own build of the source.
//!
//! **`mad`** ([`fuse_mad`]). clang writes a contractible `a * b + c` as `llvm.fmuladd`, which
//! a compiler fuses where the hardware has FMA; llvm-spirv writes it as `OpenCL.std` `mad`,
//! which PoCL's library computes unfused (`a * b` rounded, then `+ c`). On a device with FMA,
//! `mad` becomes `fma`, as PoCL's own build of the source computes it.
//!
//! **Builtins under other names** ([`lower_renamed_builtins`]). PoCL 3.1's library defines
//! `mem_fence`, `read_mem_fence` and `write_mem_fence` only as `_cl_mem_fence`, … and the
//! `half_*` math functions only as `_cl_half_*` (its C header maps the names with macros, which
//! SPIR bitcode never goes through), so `llvm-spirv -r`'s `_Z9mem_fencej` (every
//! `OpMemoryBarrier`) and `_Z9half_sqrtf`, … are not found. Each `half_*` instruction becomes
//! the full-precision builtin (`half_cos` → `cos`, …, `half_divide` → `OpFDiv`, `half_recip` →
//! `OpFDiv` of 1.0), which OpenCL allows, as `half_*` only bounds the error; and the module gets
//! a `_Z9mem_fencej` of its own that calls `_Z13_cl_mem_fencej`, which the call `llvm-spirv -r`
//! writes for each `OpMemoryBarrier` binds to.

use std::collections::{BTreeSet, HashMap, HashSet};

use rspirv::dr::{Block, Function, Instruction, Module, Operand};
use rspirv::spirv::{
    AddressingModel, Capability, Decoration, FunctionControl, LinkageType, Op,
    OpenclStd100Op as Cl, StorageClass, Word,
};

use crate::Error;

/// Gives every builtin on a generic pointer a pointer of a specific storage class (see the
/// module's documentation). Returns how many instructions were rewritten; a module without
/// such builtins is unchanged.
pub fn lower_generic_builtins(module: &mut Module) -> Result<usize, Error> {
    let mut lowering = Lowering::new(module);
    let sites = module.all_inst_iter().filter(|i| lowering.site(i).is_some()).count();
    if sites == 0 {
        return Ok(0);
    }
    for f in 0..module.functions.len() {
        lowering.function(&mut module.functions[f])?;
    }
    lowering.finish(module);
    Ok(sites)
}

/// Makes every `OpenCL.std` `mad` an `fma` (see the module's documentation). Returns how many
/// there were.
pub fn fuse_mad(module: &mut Module) -> usize {
    let sets: HashSet<Word> = opencl_std(module);
    let mut count = 0;
    for inst in module.all_inst_iter_mut().filter(|i| i.class.opcode == Op::ExtInst) {
        if let [Operand::IdRef(set), op @ Operand::LiteralExtInstInteger(_), ..] =
            inst.operands.as_mut_slice()
        {
            if sets.contains(set) && *op == Operand::LiteralExtInstInteger(Cl::mad as u32) {
                *op = Operand::LiteralExtInstInteger(Cl::fma as u32);
                count += 1;
            }
        }
    }
    count
}

/// The full-precision `OpenCL.std` instruction of a `half_*` one that has one (PoCL 3.1's
/// library defines each, `_Z3cosf` to `_Z5rsqrtf`, for float and its vectors).
fn full_precision(op: Cl) -> Option<Cl> {
    Some(match op {
        Cl::half_cos => Cl::cos,
        Cl::half_exp => Cl::exp,
        Cl::half_exp2 => Cl::exp2,
        Cl::half_exp10 => Cl::exp10,
        Cl::half_log => Cl::log,
        Cl::half_log2 => Cl::log2,
        Cl::half_log10 => Cl::log10,
        Cl::half_powr => Cl::powr,
        Cl::half_rsqrt => Cl::rsqrt,
        Cl::half_sin => Cl::sin,
        Cl::half_sqrt => Cl::sqrt,
        Cl::half_tan => Cl::tan,
        _ => return None,
    })
}

/// The name `llvm-spirv -r` calls for every `OpMemoryBarrier` (`mem_fence(flags)`, whatever
/// fence the source wrote), and the one PoCL 3.1's library defines.
const MEM_FENCE: &str = "_Z9mem_fencej";
const POCL_MEM_FENCE: &str = "_Z13_cl_mem_fencej";

/// Rewrites the builtins PoCL 3.1's library defines only under other names (see the module's
/// documentation): `half_*` instructions become full-precision ones, and a module with
/// `OpMemoryBarrier` gets a `mem_fence` that calls PoCL's. Returns how many instructions
/// (`half_*` and `OpMemoryBarrier`) were provided for; a module with none is unchanged.
pub fn lower_renamed_builtins(module: &mut Module) -> usize {
    let sets = opencl_std(module);
    let mut made = Made::new(module);
    let mut count = 0;
    let mut fences = false;
    for inst in module
        .functions
        .iter_mut()
        .flat_map(|f| f.blocks.iter_mut())
        .flat_map(|b| b.instructions.iter_mut())
    {
        if inst.class.opcode == Op::MemoryBarrier {
            fences = true;
            count += 1;
            continue;
        }
        let op = match inst.operands.as_slice() {
            [Operand::IdRef(set), Operand::LiteralExtInstInteger(n), ..]
                if inst.class.opcode == Op::ExtInst && sets.contains(set) =>
            {
                Cl::from_u32(*n)
            }
            _ => None,
        };
        let Some(op) = op else { continue };
        let args = inst.operands[2..].to_vec();
        match (op, full_precision(op), inst.result_type) {
            (_, Some(full), _) => inst.operands[1] = Operand::LiteralExtInstInteger(full as u32),
            (Cl::half_divide, _, Some(_)) if args.len() == 2 => {
                *inst = Instruction::new(Op::FDiv, inst.result_type, inst.result_id, args);
            }
            (Cl::half_recip, _, Some(ty)) if args.len() == 1 => {
                let Some(one) = made.one(ty) else { continue };
                let operands = vec![Operand::IdRef(one), args[0].clone()];
                *inst = Instruction::new(Op::FDiv, inst.result_type, inst.result_id, operands);
            }
            _ => continue,
        }
        count += 1;
    }
    if fences && linked_function(module, MEM_FENCE).is_none() {
        made.mem_fence(module);
    }
    module.types_global_values.extend(made.added);
    if let Some(h) = &mut module.header {
        h.bound = made.next;
    }
    count
}

/// The function whose linkage name is `name`.
fn linked_function(module: &Module, name: &str) -> Option<Word> {
    module.annotations.iter().find_map(|i| match i.operands.as_slice() {
        [Operand::IdRef(f), Operand::Decoration(Decoration::LinkageAttributes), Operand::LiteralString(n), ..]
            if n == name =>
        {
            Some(*f)
        }
        _ => None,
    })
}

/// Types, constants and ids made for [`lower_renamed_builtins`].
struct Made {
    /// The module's types and constants.
    defined: Vec<Instruction>,
    added: Vec<Instruction>,
    next: Word,
}

impl Made {
    fn new(module: &Module) -> Made {
        let next = crate::link::next_id(module);
        Made { defined: module.types_global_values.clone(), added: Vec::new(), next }
    }

    fn id(&mut self) -> Word {
        self.next += 1;
        self.next - 1
    }

    fn def(&self, id: Word) -> Option<&Instruction> {
        self.defined.iter().chain(&self.added).find(|i| i.result_id == Some(id))
    }

    /// A module-scope type or constant: the module's first, or one made.
    fn intern(&mut self, opcode: Op, ty: Option<Word>, operands: Vec<Operand>) -> Word {
        let same = |i: &&Instruction| {
            i.class.opcode == opcode && i.result_type == ty && i.operands == operands
        };
        if let Some(id) =
            self.defined.iter().chain(&self.added).find(same).and_then(|i| i.result_id)
        {
            return id;
        }
        let id = self.id();
        self.added.push(Instruction::new(opcode, ty, Some(id), operands));
        id
    }

    /// 1.0 of a float type or a vector of floats.
    fn one(&mut self, ty: Word) -> Option<Word> {
        let float_one = |def: Option<&Instruction>| match def
            .map(|d| (d.class.opcode, d.operands.as_slice()))
        {
            Some((Op::TypeFloat, [Operand::LiteralBit32(32), ..])) => {
                Some(Operand::LiteralBit32(1f32.to_bits()))
            }
            Some((Op::TypeFloat, [Operand::LiteralBit32(64), ..])) => {
                Some(Operand::LiteralBit64(1f64.to_bits()))
            }
            _ => None,
        };
        if let Some(one) = float_one(self.def(ty)) {
            return Some(self.intern(Op::Constant, Some(ty), vec![one]));
        }
        let Some([Operand::IdRef(component), Operand::LiteralBit32(n)]) = self
            .def(ty)
            .filter(|d| d.class.opcode == Op::TypeVector)
            .map(|d| d.operands.as_slice())
        else {
            return None;
        };
        let (component, n) = (*component, *n as usize);
        let one = float_one(self.def(component))?;
        let one = self.intern(Op::Constant, Some(component), vec![one]);
        Some(self.intern(Op::ConstantComposite, Some(ty), vec![Operand::IdRef(one); n]))
    }

    /// Adds `void mem_fence(uint flags) { _cl_mem_fence(flags); }`, exported, to `module`.
    fn mem_fence(&mut self, module: &mut Module) {
        let uint = self.intern(
            Op::TypeInt,
            None,
            vec![Operand::LiteralBit32(32), Operand::LiteralBit32(0)],
        );
        let void = self.intern(Op::TypeVoid, None, vec![]);
        let fn_ty =
            self.intern(Op::TypeFunction, None, vec![Operand::IdRef(void), Operand::IdRef(uint)]);
        let function = |id: Word, parameter: Word| {
            let mut f = Function::new();
            let control = Operand::FunctionControl(FunctionControl::NONE);
            f.def = Some(Instruction::new(
                Op::Function,
                Some(void),
                Some(id),
                vec![control, Operand::IdRef(fn_ty)],
            ));
            f.end = Some(Instruction::new(Op::FunctionEnd, None, None, vec![]));
            f.parameters.push(Instruction::new(
                Op::FunctionParameter,
                Some(uint),
                Some(parameter),
                vec![],
            ));
            f
        };
        let pocl = match linked_function(module, POCL_MEM_FENCE) {
            Some(f) => f,
            None => {
                let (f, parameter) = (self.id(), self.id());
                // A declaration: before every definition.
                module.functions.insert(0, function(f, parameter));
                set_linkage(module, f, POCL_MEM_FENCE, LinkageType::Import);
                f
            }
        };
        let (f, parameter, label, call) = (self.id(), self.id(), self.id(), self.id());
        let mut fence = function(f, parameter);
        let operands = vec![Operand::IdRef(pocl), Operand::IdRef(parameter)];
        let code = vec![
            Instruction::new(Op::FunctionCall, Some(void), Some(call), operands),
            Instruction::new(Op::Return, None, None, vec![]),
        ];
        fence.blocks.push(block(label, code));
        module.functions.push(fence);
        set_linkage(module, f, MEM_FENCE, LinkageType::Export);
        let linkage = Operand::Capability(Capability::Linkage);
        if !module.capabilities.iter().any(|c| c.operands.first() == Some(&linkage)) {
            module.capabilities.push(Instruction::new(Op::Capability, None, None, vec![linkage]));
        }
    }
}

/// Names function `f` `name` and gives it that linkage.
fn set_linkage(module: &mut Module, f: Word, name: &str, linkage: LinkageType) {
    let named = vec![Operand::IdRef(f), Operand::LiteralString(name.into())];
    module.debug_names.push(Instruction::new(Op::Name, None, None, named));
    module.annotations.push(Instruction::new(
        Op::Decorate,
        None,
        None,
        vec![
            Operand::IdRef(f),
            Operand::Decoration(Decoration::LinkageAttributes),
            Operand::LiteralString(name.into()),
            Operand::LinkageType(linkage),
        ],
    ));
}

fn opencl_std(module: &Module) -> HashSet<Word> {
    let sets = &module.ext_inst_imports;
    sets.iter()
        .filter_map(|i| i.result_id)
        .filter(|&id| crate::load::is_opencl_std(sets, id))
        .collect()
}

/// The operand index (in `operands`, after the set and the instruction) of the pointer an
/// `OpenCL.std` instruction reads or writes, for those that take a pointer of any storage
/// class. (`prefetch` takes global pointers only, `printf` a constant one.)
fn pointer_operand(op: Cl) -> Option<usize> {
    match op {
        // (x, out) and (offset, p, …)
        Cl::fract | Cl::frexp | Cl::lgamma_r | Cl::modf | Cl::sincos => Some(3),
        Cl::vloadn | Cl::vload_half | Cl::vload_halfn | Cl::vloada_halfn => Some(3),
        // (x, y, quo) and (data, offset, p, …)
        Cl::remquo => Some(4),
        Cl::vstoren
        | Cl::vstore_half
        | Cl::vstore_half_r
        | Cl::vstore_halfn
        | Cl::vstore_halfn_r
        | Cl::vstorea_halfn
        | Cl::vstorea_halfn_r => Some(4),
        _ => None,
    }
}

/// What kind of builtin an instruction on a generic pointer is.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Kind {
    /// An `OpenCL.std` instruction: global, local or private memory.
    Builtin,
    /// An atomic: global or local memory.
    Atomic,
    /// `get_fence`: no memory access, a value from the pointer's storage class.
    MemSemantics,
}

/// Where the storage classes a generic pointer may point into are tried, in order.
const BUILTIN_CLASSES: [StorageClass; 3] =
    [StorageClass::CrossWorkgroup, StorageClass::Workgroup, StorageClass::Function];
const ATOMIC_CLASSES: [StorageClass; 2] = [StorageClass::CrossWorkgroup, StorageClass::Workgroup];

struct Lowering {
    opencl_std: HashSet<Word>,
    /// The type of every value.
    types: HashMap<Word, Word>,
    /// Pointer type → (storage class, pointee), and back.
    pointers: HashMap<Word, (StorageClass, Word)>,
    pointer_types: HashMap<(StorageClass, Word), Word>,
    /// A generic pointer → the value it was made from: `OpPtrCastToGeneric` of a specific
    /// pointer, or `OpBitcast` of another generic pointer.
    casts: HashMap<Word, (Op, Word)>,
    /// Scalar types and constants found or made: (opcode, operands) → id.
    interned: HashMap<(Op, Option<Word>, Vec<Operand>), Word>,
    /// Module-scope instructions to add.
    added: Vec<Instruction>,
    add_capabilities: BTreeSet<Capability>,
    void: Option<Word>,
    pointer_bits: u32,
    next: Word,
}

impl Lowering {
    fn new(module: &Module) -> Lowering {
        let types =
            module.all_inst_iter().filter_map(|i| Some((i.result_id?, i.result_type?))).collect();
        let mut pointers = HashMap::new();
        let mut pointer_types = HashMap::new();
        let mut interned = HashMap::new();
        let mut casts = HashMap::new();
        for inst in &module.types_global_values {
            let Some(id) = inst.result_id else { continue };
            match (inst.class.opcode, inst.operands.as_slice()) {
                (Op::TypePointer, [Operand::StorageClass(class), Operand::IdRef(to)]) => {
                    pointers.insert(id, (*class, *to));
                    pointer_types.entry((*class, *to)).or_insert(id);
                }
                (
                    Op::SpecConstantOp,
                    [Operand::LiteralSpecConstantOpInteger(
                        op @ (Op::PtrCastToGeneric | Op::Bitcast),
                    ), Operand::IdRef(from)],
                ) => {
                    casts.insert(id, (*op, *from));
                }
                (Op::TypeBool | Op::TypeInt | Op::Constant, _) => {
                    interned
                        .entry((inst.class.opcode, inst.result_type, inst.operands.clone()))
                        .or_insert(id);
                }
                _ => {}
            }
        }
        for inst in module.functions.iter().flat_map(|f| f.all_inst_iter()) {
            if let (Op::PtrCastToGeneric | Op::Bitcast, Some(id), [Operand::IdRef(from)]) =
                (inst.class.opcode, inst.result_id, inst.operands.as_slice())
            {
                casts.insert(id, (inst.class.opcode, *from));
            }
        }
        let pointer_bits = match module.memory_model.as_ref().and_then(|m| m.operands.first()) {
            Some(Operand::AddressingModel(AddressingModel::Physical32)) => 32,
            _ => 64,
        };
        let void = module
            .types_global_values
            .iter()
            .find(|i| i.class.opcode == Op::TypeVoid)
            .and_then(|i| i.result_id);
        let next = crate::link::next_id(module);
        Lowering {
            opencl_std: opencl_std(module),
            types,
            pointers,
            pointer_types,
            casts,
            interned,
            added: Vec::new(),
            add_capabilities: BTreeSet::new(),
            void,
            pointer_bits,
            next,
        }
    }

    fn id(&mut self) -> Word {
        self.next += 1;
        self.next - 1
    }

    /// The pointee of `value`'s type when it is a generic pointer.
    fn generic_pointee(&self, value: Word) -> Option<Word> {
        match self.types.get(&value).and_then(|t| self.pointers.get(t)) {
            Some(&(StorageClass::Generic, to)) => Some(to),
            _ => None,
        }
    }

    /// The generic pointer operand of a builtin this module rewrites, and its kind.
    fn site(&self, inst: &Instruction) -> Option<(usize, Kind)> {
        let (at, kind) = match inst.class.opcode {
            Op::ExtInst => match inst.operands.as_slice() {
                [Operand::IdRef(set), Operand::LiteralExtInstInteger(n), ..]
                    if self.opencl_std.contains(set) =>
                {
                    (pointer_operand(Cl::from_u32(*n)?)?, Kind::Builtin)
                }
                _ => return None,
            },
            op if crate::features::is_atomic(op) => (0, Kind::Atomic),
            Op::GenericPtrMemSemantics => (0, Kind::MemSemantics),
            _ => return None,
        };
        match inst.operands.get(at) {
            Some(Operand::IdRef(p)) if self.generic_pointee(*p).is_some() => Some((at, kind)),
            _ => None,
        }
    }

    /// The specific pointer a generic one was cast from, through bitcasts between generic
    /// pointers, and whether a bitcast stood between.
    fn cast_from(&self, mut value: Word) -> Option<(Word, bool)> {
        let mut bitcast = false;
        for _ in 0..=self.casts.len() {
            match self.casts.get(&value) {
                Some(&(Op::Bitcast, from)) if self.generic_pointee(from).is_some() => {
                    value = from;
                    bitcast = true;
                }
                Some(&(Op::PtrCastToGeneric, from)) => return Some((from, bitcast)),
                _ => return None,
            }
        }
        None
    }

    /// A module-scope type or constant, found or made.
    fn intern(&mut self, opcode: Op, result_type: Option<Word>, operands: Vec<Operand>) -> Word {
        let key = (opcode, result_type, operands);
        if let Some(&id) = self.interned.get(&key) {
            return id;
        }
        let id = self.id();
        self.added.push(Instruction::new(opcode, result_type, Some(id), key.2.clone()));
        self.interned.insert(key, id);
        id
    }

    fn pointer_type(&mut self, class: StorageClass, pointee: Word) -> Word {
        if let Some(&id) = self.pointer_types.get(&(class, pointee)) {
            return id;
        }
        let id = self.id();
        self.added.push(Instruction::new(
            Op::TypePointer,
            None,
            Some(id),
            vec![Operand::StorageClass(class), Operand::IdRef(pointee)],
        ));
        self.pointer_types.insert((class, pointee), id);
        self.pointers.insert(id, (class, pointee));
        id
    }

    fn constant(&mut self, ty: Word, value: u32) -> Word {
        self.intern(Op::Constant, Some(ty), vec![Operand::LiteralBit32(value)])
    }

    /// `p` cast to `class` with `to_global`/`to_local`/`to_private`, then whether the result
    /// is not null: the instructions, the cast pointer and the test. The cast is made on
    /// `char` pointers, as clang makes it: `llvm-spirv -r` declares `__to_global` with the
    /// pointer types of its first call, and a second call on other types redefined it.
    fn test(
        &mut self,
        p: Word,
        pointee: Word,
        class: StorageClass,
    ) -> (Vec<Instruction>, Word, Word) {
        let byte = self.intern(
            Op::TypeInt,
            None,
            vec![Operand::LiteralBit32(8), Operand::LiteralBit32(0)],
        );
        self.add_capabilities.insert(Capability::Int8);
        let int = self.intern(
            Op::TypeInt,
            None,
            vec![Operand::LiteralBit32(self.pointer_bits), Operand::LiteralBit32(0)],
        );
        let zero = if self.pointer_bits == 64 {
            self.add_capabilities.insert(Capability::Int64);
            self.intern(Op::Constant, Some(int), vec![Operand::LiteralBit64(0)])
        } else {
            self.constant(int, 0)
        };
        let boolean = self.intern(Op::TypeBool, None, vec![]);
        let (generic_bytes, bytes) =
            (self.pointer_type(StorageClass::Generic, byte), self.pointer_type(class, byte));
        let mut code = Vec::new();
        let bitcast =
            |lowering: &mut Lowering, code: &mut Vec<Instruction>, ty: Word, from: Word| {
                if pointee == byte {
                    return from;
                }
                let id = lowering.id();
                code.push(Instruction::new(
                    Op::Bitcast,
                    Some(ty),
                    Some(id),
                    vec![Operand::IdRef(from)],
                ));
                id
            };
        let p = bitcast(self, &mut code, generic_bytes, p);
        let (cast, address, test) = (self.id(), self.id(), self.id());
        code.extend([
            Instruction::new(
                Op::GenericCastToPtrExplicit,
                Some(bytes),
                Some(cast),
                vec![Operand::IdRef(p), Operand::StorageClass(class)],
            ),
            Instruction::new(
                Op::ConvertPtrToU,
                Some(int),
                Some(address),
                vec![Operand::IdRef(cast)],
            ),
            Instruction::new(
                Op::INotEqual,
                Some(boolean),
                Some(test),
                vec![Operand::IdRef(address), Operand::IdRef(zero)],
            ),
        ]);
        let ty = self.pointer_type(class, pointee);
        let typed = bitcast(self, &mut code, ty, cast);
        (code, typed, test)
    }

    fn function(&mut self, function: &mut Function) -> Result<(), Error> {
        let mut b = 0;
        while b < function.blocks.len() {
            let mut i = 0;
            while i < function.blocks[b].instructions.len() {
                let inst = &function.blocks[b].instructions[i];
                let Some((at, kind)) = self.site(inst) else {
                    i += 1;
                    continue;
                };
                let Some(Operand::IdRef(p)) = inst.operands.get(at).cloned() else {
                    unreachable!("a site's pointer")
                };
                let pointee = self.generic_pointee(p).unwrap_or_default();
                match (kind, self.cast_from(p)) {
                    (Kind::Builtin | Kind::Atomic, Some((from, bitcast))) => {
                        let mut specific = from;
                        if bitcast {
                            let class = self
                                .types
                                .get(&from)
                                .and_then(|t| self.pointers.get(t))
                                .map(|&(c, _)| c);
                            let class = class.ok_or_else(|| {
                                Error::Malformed(format!(
                                    "%{p} is cast from %{from}, which is not a pointer"
                                ))
                            })?;
                            let ty = self.pointer_type(class, pointee);
                            specific = self.id();
                            let cast = Instruction::new(
                                Op::Bitcast,
                                Some(ty),
                                Some(specific),
                                vec![Operand::IdRef(from)],
                            );
                            function.blocks[b].instructions.insert(i, cast);
                            i += 1;
                        }
                        function.blocks[b].instructions[i].operands[at] = Operand::IdRef(specific);
                        i += 1;
                    }
                    (Kind::MemSemantics, cast) => {
                        let known = cast.and_then(|(from, _)| {
                            self.types.get(&from).and_then(|t| self.pointers.get(t))
                        });
                        let known = known.map(|&(class, _)| class);
                        let code = self.mem_semantics(inst, p, pointee, known)?;
                        let n = code.len();
                        function.blocks[b].instructions.splice(i..=i, code);
                        i += n;
                    }
                    (kind, None) => {
                        self.dispatch(function, b, i, at, kind, p, pointee)?;
                        // The rest of the block is now the merge block, the last one added.
                        break;
                    }
                }
            }
            b += 1;
        }
        Ok(())
    }

    /// `get_fence(p)`: the memory semantics of the storage class `p` points into
    /// (`CrossWorkgroupMemory`, `WorkgroupMemory`, none for private memory): a constant when
    /// the class is `known`, otherwise selects over the tests.
    fn mem_semantics(
        &mut self,
        inst: &Instruction,
        p: Word,
        pointee: Word,
        known: Option<StorageClass>,
    ) -> Result<Vec<Instruction>, Error> {
        let (Some(ty), Some(result)) = (inst.result_type, inst.result_id) else {
            return Err(Error::Malformed("OpGenericPtrMemSemantics without a result".into()));
        };
        let (cross, work, none) =
            (self.constant(ty, 0x200), self.constant(ty, 0x100), self.constant(ty, 0));
        if let Some(class) = known {
            let value = match class {
                StorageClass::CrossWorkgroup => cross,
                StorageClass::Workgroup => work,
                _ => none,
            };
            return Ok(vec![Instruction::new(
                Op::CopyObject,
                Some(ty),
                Some(result),
                vec![Operand::IdRef(value)],
            )]);
        }
        let (mut code, _, global) = self.test(p, pointee, StorageClass::CrossWorkgroup);
        let (local_code, _, local) = self.test(p, pointee, StorageClass::Workgroup);
        code.extend(local_code);
        let not_global = self.id();
        let select = |id, test, yes, no| {
            let operands = vec![Operand::IdRef(test), Operand::IdRef(yes), Operand::IdRef(no)];
            Instruction::new(Op::Select, Some(ty), Some(id), operands)
        };
        code.push(select(not_global, local, work, none));
        code.push(select(result, global, cross, not_global));
        Ok(code)
    }

    /// Splits block `b` of `function` at the builtin at `i`: the block ends in the first test,
    /// each storage class gets a block with a copy of the builtin on the pointer cast to it,
    /// and a merge block takes the result (an `OpPhi`) and the rest of the block.
    #[allow(clippy::too_many_arguments)]
    fn dispatch(
        &mut self,
        function: &mut Function,
        b: usize,
        i: usize,
        at: usize,
        kind: Kind,
        p: Word,
        pointee: Word,
    ) -> Result<(), Error> {
        let classes: &[StorageClass] =
            if kind == Kind::Atomic { &ATOMIC_CLASSES } else { &BUILTIN_CLASSES };
        let inst = function.blocks[b].instructions[i].clone();
        let rest = function.blocks[b].instructions.split_off(i + 1);
        function.blocks[b].instructions.truncate(i);
        let this = function.blocks[b].label.as_ref().and_then(|l| l.result_id).unwrap_or(0);
        let returns = inst.result_type.is_some_and(|t| Some(t) != self.void);

        // Block `b` ends in the first test; each later test has a block of its own.
        let merge = self.id();
        let cases: Vec<Word> = classes.iter().map(|_| self.id()).collect();
        let tests: Vec<Word> =
            (0..classes.len() - 1).map(|n| if n == 0 { this } else { self.id() }).collect();
        let mut added = Vec::new();
        let mut incoming = Vec::new();
        for (n, &class) in classes.iter().enumerate() {
            let mut case = Vec::new();
            let pointer = if n + 1 < classes.len() {
                let (mut code, cast, test) = self.test(p, pointee, class);
                let otherwise = if n + 2 < classes.len() { tests[n + 1] } else { cases[n + 1] };
                code.push(Instruction::new(
                    Op::BranchConditional,
                    None,
                    None,
                    vec![Operand::IdRef(test), Operand::IdRef(cases[n]), Operand::IdRef(otherwise)],
                ));
                if n == 0 {
                    function.blocks[b].instructions.extend(code);
                } else {
                    added.push(block(tests[n], code));
                }
                cast
            } else {
                // The last storage class is what remains: cast without a test.
                let ty = self.pointer_type(class, pointee);
                let cast = self.id();
                case.push(Instruction::new(
                    Op::GenericCastToPtr,
                    Some(ty),
                    Some(cast),
                    vec![Operand::IdRef(p)],
                ));
                cast
            };
            let mut copy = inst.clone();
            copy.operands[at] = Operand::IdRef(pointer);
            if returns || n > 0 {
                copy.result_id = copy.result_id.map(|_| self.id());
            }
            if let (true, Some(value)) = (returns, copy.result_id) {
                incoming.extend([Operand::IdRef(value), Operand::IdRef(cases[n])]);
            }
            case.push(copy);
            case.push(Instruction::new(Op::Branch, None, None, vec![Operand::IdRef(merge)]));
            added.push(block(cases[n], case));
        }
        let mut merged = Vec::with_capacity(rest.len() + 1);
        if let (true, Some(ty), Some(result)) = (returns, inst.result_type, inst.result_id) {
            merged.push(Instruction::new(Op::Phi, Some(ty), Some(result), incoming));
        }
        merged.extend(rest);
        added.push(block(merge, merged));
        retarget_phis(function, this, merge);
        function.blocks.splice(b + 1..b + 1, added);
        Ok(())
    }

    /// Adds the types and constants made, and the new bound.
    fn finish(self, module: &mut Module) {
        for capability in self.add_capabilities {
            let capability = Operand::Capability(capability);
            if !module.capabilities.iter().any(|c| c.operands.first() == Some(&capability)) {
                module.capabilities.push(Instruction::new(
                    Op::Capability,
                    None,
                    None,
                    vec![capability],
                ));
            }
        }
        module.types_global_values.extend(self.added);
        if let Some(h) = &mut module.header {
            h.bound = self.next;
        }
    }
}

fn block(label: Word, instructions: Vec<Instruction>) -> Block {
    Block { label: Some(Instruction::new(Op::Label, None, Some(label), vec![])), instructions }
}

/// Makes the `OpPhi`s of `function` that name block `from` as a parent name block `to`: what
/// followed `from` now follows `to`, after a block was split.
pub(crate) fn retarget_phis(function: &mut Function, from: Word, to: Word) {
    for block in &mut function.blocks {
        for phi in block.instructions.iter_mut().filter(|i| i.class.opcode == Op::Phi) {
            for parent in phi.operands.iter_mut().skip(1).step_by(2) {
                if *parent == Operand::IdRef(from) {
                    *parent = Operand::IdRef(to);
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{assemble, load};
    use rspirv::dr::Builder;
    use rspirv::spirv::{ExecutionModel, FunctionControl};

    /// Types every test module uses.
    struct Types {
        cl: Word,
        void: Word,
        float: Word,
        float4: Word,
        int: Word,
        long: Word,
    }

    fn builder() -> (Builder, Types) {
        let mut b = crate::test_support::kernel_builder(&[
            Capability::Addresses,
            Capability::GenericPointer,
            Capability::Int64,
        ]);
        let cl = b.ext_inst_import("OpenCL.std");
        let (void, float, int, long) =
            (b.type_void(), b.type_float(32, None), b.type_int(32, 0), b.type_int(64, 0));
        let float4 = b.type_vector(float, 4);
        (b, Types { cl, void, float, float4, int, long })
    }

    fn vload4(b: &mut Builder, t: &Types, pointer: Word) -> Word {
        let zero = b.constant_bit64(t.long, 0);
        let operands = [Operand::IdRef(zero), Operand::IdRef(pointer), Operand::LiteralBit32(4)];
        b.ext_inst(t.float4, None, t.cl, Cl::vloadn as u32, operands).unwrap()
    }

    /// `float4 get(P p) { return vload4(0, p); }`, `P` the pointer type `pointer`.
    fn getter(b: &mut Builder, t: &Types, pointer: Word) {
        let fn_ty = b.type_function(t.float4, vec![pointer]);
        b.begin_function(t.float4, None, FunctionControl::NONE, fn_ty).unwrap();
        let p = b.function_parameter(pointer).unwrap();
        b.begin_block(None).unwrap();
        let v = vload4(b, t, p);
        b.ret_value(v).unwrap();
        b.end_function().unwrap();
    }

    /// The pointer operand of each instruction with `opcode` (an `OpenCL.std` one: `ext`), and
    /// the storage class of its type.
    fn pointers_of(m: &Module, opcode: Op, ext: Option<Cl>) -> Vec<StorageClass> {
        let types: HashMap<Word, Word> =
            m.all_inst_iter().filter_map(|i| Some((i.result_id?, i.result_type?))).collect();
        let class = |p: Word| {
            let ty = types[&p];
            let def = m.types_global_values.iter().find(|i| i.result_id == Some(ty)).unwrap();
            match def.operands[0] {
                Operand::StorageClass(c) => c,
                _ => panic!("not a pointer"),
            }
        };
        m.all_inst_iter()
            .filter(|i| i.class.opcode == opcode)
            .filter_map(|i| match (ext, &i.operands[..]) {
                (None, [Operand::IdRef(p), ..]) => Some(class(*p)),
                (Some(e), [_, Operand::LiteralExtInstInteger(n), ..]) if *n == e as u32 => {
                    match i.operands[pointer_operand(e)?] {
                        Operand::IdRef(p) => Some(class(p)),
                        _ => None,
                    }
                }
                _ => None,
            })
            .collect()
    }

    fn count(m: &Module, opcode: Op) -> usize {
        m.all_inst_iter().filter(|i| i.class.opcode == opcode).count()
    }

    #[test]
    fn a_builtin_on_a_pointer_cast_to_generic_takes_the_pointer_it_was_cast_from() {
        let (mut b, t) = builder();
        let global_float = b.type_pointer(None, StorageClass::CrossWorkgroup, t.float);
        let generic_float = b.type_pointer(None, StorageClass::Generic, t.float);
        let global_int = b.type_pointer(None, StorageClass::CrossWorkgroup, t.int);
        let generic_int = b.type_pointer(None, StorageClass::Generic, t.int);
        let private_float = b.type_pointer(None, StorageClass::Function, t.float);
        let kernel_ty = b.type_function(t.void, vec![global_float, global_int]);
        let k = b.begin_function(t.void, None, FunctionControl::NONE, kernel_ty).unwrap();
        let (data, counter) = (
            b.function_parameter(global_float).unwrap(),
            b.function_parameter(global_int).unwrap(),
        );
        b.begin_block(None).unwrap();
        let whole = b.variable(private_float, None, StorageClass::Function, None);
        // vload4(0, data): straight from the cast.
        let g = b.ptr_cast_to_generic(generic_float, None, data).unwrap();
        let v = vload4(&mut b, &t, g);
        // fract(x, &whole): a private variable.
        let x = b.composite_extract(t.float, None, v, [0]).unwrap();
        let w = b.ptr_cast_to_generic(generic_float, None, whole).unwrap();
        let f = b
            .ext_inst(t.float, None, t.cl, Cl::fract as u32, [Operand::IdRef(x), Operand::IdRef(w)])
            .unwrap();
        // vstore_half(f, 0, (generic half *)data): through a bitcast between generic pointers.
        let half = b.type_float(16, None);
        let generic_half = b.type_pointer(None, StorageClass::Generic, half);
        let h = b.bitcast(generic_half, None, g).unwrap();
        let zero = b.constant_bit64(t.long, 0);
        b.ext_inst(t.void, None, t.cl, Cl::vstore_half as u32, [f, zero, h].map(Operand::IdRef))
            .unwrap();
        // atomic_fetch_add(counter, 1).
        let c = b.ptr_cast_to_generic(generic_int, None, counter).unwrap();
        let (one, scope) = (b.constant_bit32(t.int, 1), b.constant_bit32(t.int, 1));
        let semantics = b.constant_bit32(t.int, 0x10);
        b.atomic_i_add(t.int, None, c, scope, semantics, one).unwrap();
        // get_fence(counter): a constant, CrossWorkgroupMemory.
        let fence = b.generic_ptr_mem_semantics(t.int, None, c).unwrap();
        b.store(counter, fence, None, []).unwrap();
        b.ret().unwrap();
        b.end_function().unwrap();
        b.entry_point(ExecutionModel::Kernel, k, "k", vec![]);
        let mut m = load(&assemble(&b.module())).unwrap();

        assert_eq!(lower_generic_builtins(&mut m).unwrap(), 5);
        let m = load(&assemble(&m)).expect("the rewritten module loads");
        assert_eq!(pointers_of(&m, Op::ExtInst, Some(Cl::vloadn)), [StorageClass::CrossWorkgroup]);
        assert_eq!(pointers_of(&m, Op::ExtInst, Some(Cl::fract)), [StorageClass::Function]);
        assert_eq!(
            pointers_of(&m, Op::ExtInst, Some(Cl::vstore_half)),
            [StorageClass::CrossWorkgroup]
        );
        assert_eq!(pointers_of(&m, Op::AtomicIAdd, None), [StorageClass::CrossWorkgroup]);
        assert_eq!(
            count(&m, Op::GenericCastToPtrExplicit),
            0,
            "no test where the storage class is known"
        );
        let copy = m
            .all_inst_iter()
            .find(|i| i.class.opcode == Op::CopyObject)
            .expect("get_fence's value");
        let Operand::IdRef(value) = copy.operands[0] else { panic!() };
        let constant = m.types_global_values.iter().find(|i| i.result_id == Some(value)).unwrap();
        assert_eq!(constant.operands, [Operand::LiteralBit32(0x200)]);
        assert_eq!(m.functions[0].blocks.len(), 1);
    }

    /// `float4 get(const float *p) { return vload4(0, p); }`, `void put(float4 v, float *p)
    /// { vstore4(v, 0, p); }`, `int inc(atomic_int *a) { return atomic_fetch_add(a, 1); }` and
    /// `uint fence(int *p) { return get_fence(p); }`: generic parameters.
    fn helpers() -> Module {
        let (mut b, t) = builder();
        let generic_float = b.type_pointer(None, StorageClass::Generic, t.float);
        let generic_int = b.type_pointer(None, StorageClass::Generic, t.int);
        getter(&mut b, &t, generic_float);

        let put_ty = b.type_function(t.void, vec![t.float4, generic_float]);
        b.begin_function(t.void, None, FunctionControl::NONE, put_ty).unwrap();
        let (v, p) =
            (b.function_parameter(t.float4).unwrap(), b.function_parameter(generic_float).unwrap());
        b.begin_block(None).unwrap();
        let zero = b.constant_bit64(t.long, 0);
        b.ext_inst(t.void, None, t.cl, Cl::vstoren as u32, [v, zero, p].map(Operand::IdRef))
            .unwrap();
        b.ret().unwrap();
        b.end_function().unwrap();

        let inc_ty = b.type_function(t.int, vec![generic_int]);
        b.begin_function(t.int, None, FunctionControl::NONE, inc_ty).unwrap();
        let a = b.function_parameter(generic_int).unwrap();
        b.begin_block(None).unwrap();
        let (one, scope) = (b.constant_bit32(t.int, 1), b.constant_bit32(t.int, 1));
        let semantics = b.constant_bit32(t.int, 0x10);
        let old = b.atomic_i_add(t.int, None, a, scope, semantics, one).unwrap();
        b.ret_value(old).unwrap();
        b.end_function().unwrap();

        b.begin_function(t.int, None, FunctionControl::NONE, inc_ty).unwrap();
        let p = b.function_parameter(generic_int).unwrap();
        b.begin_block(None).unwrap();
        let flags = b.generic_ptr_mem_semantics(t.int, None, p).unwrap();
        b.ret_value(flags).unwrap();
        b.end_function().unwrap();
        load(&assemble(&b.module())).unwrap()
    }

    #[test]
    fn a_builtin_on_a_generic_pointer_is_repeated_for_each_storage_class() {
        let mut m = helpers();
        assert_eq!(lower_generic_builtins(&mut m).unwrap(), 4);
        let m = load(&assemble(&m)).expect("the rewritten module loads");
        let [get, put, inc, fence] = &m.functions[..] else { panic!() };
        let classes =
            [StorageClass::CrossWorkgroup, StorageClass::Workgroup, StorageClass::Function];

        // get: the test for global memory ends the first block, then global, the test for
        // local memory, local, private, and the merge block with the result.
        assert_eq!(pointers_of(&m, Op::ExtInst, Some(Cl::vloadn)), classes);
        assert_eq!(get.blocks.len(), 6);
        let phi = get.all_inst_iter().find(|i| i.class.opcode == Op::Phi).expect("the result");
        assert_eq!(phi.operands.len(), 6, "one value from each storage class");
        let ret = get.blocks[5].instructions.last().unwrap();
        assert_eq!(
            (ret.class.opcode, &ret.operands[0]),
            (Op::ReturnValue, &Operand::IdRef(phi.result_id.unwrap()))
        );
        assert_eq!(
            get.all_inst_iter().filter(|i| i.class.opcode == Op::GenericCastToPtrExplicit).count(),
            2
        );
        assert_eq!(
            get.all_inst_iter().filter(|i| i.class.opcode == Op::GenericCastToPtr).count(),
            1
        );

        // put: no result to merge.
        assert_eq!(pointers_of(&m, Op::ExtInst, Some(Cl::vstoren)), classes);
        assert_eq!(
            (put.blocks.len(), put.all_inst_iter().filter(|i| i.class.opcode == Op::Phi).count()),
            (6, 0)
        );

        // inc: global or local memory only.
        assert_eq!(
            pointers_of(&m, Op::AtomicIAdd, None),
            [StorageClass::CrossWorkgroup, StorageClass::Workgroup]
        );
        assert_eq!(inc.blocks.len(), 4);

        // fence: no branch, the memory semantics of the storage class that the tests find.
        assert_eq!(count(&m, Op::GenericPtrMemSemantics), 0);
        assert_eq!(fence.blocks.len(), 1);
        assert_eq!(fence.all_inst_iter().filter(|i| i.class.opcode == Op::Select).count(), 2);
    }

    #[test]
    fn a_phi_after_a_split_block_names_the_merge_block() {
        // if (c) v = vload4(0, p) else v = 0; return v.x: the phi after the branch named the
        // block that held the vload4, which now ends in a test.
        let (mut b, t) = builder();
        let generic_float = b.type_pointer(None, StorageClass::Generic, t.float);
        let boolean = b.type_bool();
        let fn_ty = b.type_function(t.float4, vec![generic_float, boolean]);
        b.begin_function(t.float4, None, FunctionControl::NONE, fn_ty).unwrap();
        let (p, c) =
            (b.function_parameter(generic_float).unwrap(), b.function_parameter(boolean).unwrap());
        let (then, join) = (b.id(), b.id());
        let entry = b.begin_block(None).unwrap();
        b.branch_conditional(c, then, join, []).unwrap();
        b.begin_block(Some(then)).unwrap();
        let v = vload4(&mut b, &t, p);
        b.branch(join).unwrap();
        b.begin_block(Some(join)).unwrap();
        let zero = b.constant_null(t.float4);
        let r = b.phi(t.float4, None, [(v, then), (zero, entry)]).unwrap();
        b.ret_value(r).unwrap();
        b.end_function().unwrap();
        let mut m = load(&assemble(&b.module())).unwrap();
        lower_generic_builtins(&mut m).unwrap();
        let f = &m.functions[0];
        let merge = f.blocks[f.blocks.len() - 2].label.as_ref().unwrap().result_id.unwrap();
        let phi = f
            .blocks
            .last()
            .unwrap()
            .instructions
            .iter()
            .find(|i| i.class.opcode == Op::Phi)
            .unwrap();
        assert_eq!(phi.operands[1], Operand::IdRef(merge));
        load(&assemble(&m)).expect("the rewritten module loads");
    }

    #[test]
    fn mad_becomes_fma() {
        let (mut b, t) = builder();
        let fn_ty = b.type_function(t.float, vec![t.float]);
        b.begin_function(t.float, None, FunctionControl::NONE, fn_ty).unwrap();
        let x = b.function_parameter(t.float).unwrap();
        b.begin_block(None).unwrap();
        let m1 =
            b.ext_inst(t.float, None, t.cl, Cl::mad as u32, [x, x, x].map(Operand::IdRef)).unwrap();
        let m2 = b
            .ext_inst(t.float, None, t.cl, Cl::mad as u32, [m1, x, x].map(Operand::IdRef))
            .unwrap();
        let s = b.ext_inst(t.float, None, t.cl, Cl::sqrt as u32, [Operand::IdRef(m2)]).unwrap();
        b.ret_value(s).unwrap();
        b.end_function().unwrap();
        let mut m = b.module();
        assert_eq!(fuse_mad(&mut m), 2);
        let ext = m.all_inst_iter().filter(|i| i.class.opcode == Op::ExtInst);
        let ops: Vec<&Operand> = ext.map(|i| &i.operands[1]).collect();
        let fma = Operand::LiteralExtInstInteger(Cl::fma as u32);
        assert_eq!(ops, [&fma, &fma, &Operand::LiteralExtInstInteger(Cl::sqrt as u32)]);
    }

    /// The `OpenCL.std` instruction numbers of `m`'s `OpExtInst`s.
    fn ext_insts(m: &Module) -> Vec<u32> {
        let ext = m.all_inst_iter().filter(|i| i.class.opcode == Op::ExtInst);
        ext.map(|i| match i.operands[1] {
            Operand::LiteralExtInstInteger(n) => n,
            _ => panic!("not an instruction number"),
        })
        .collect()
    }

    #[test]
    fn half_math_becomes_full_precision() {
        let (mut b, t) = builder();
        let fn_ty = b.type_function(t.float4, vec![t.float, t.float4]);
        b.begin_function(t.float4, None, FunctionControl::NONE, fn_ty).unwrap();
        let (x, v) =
            (b.function_parameter(t.float).unwrap(), b.function_parameter(t.float4).unwrap());
        b.begin_block(None).unwrap();
        let mut sum = x;
        for op in [Cl::half_sqrt, Cl::half_exp10, Cl::half_rsqrt, Cl::half_recip] {
            let y = b.ext_inst(t.float, None, t.cl, op as u32, [Operand::IdRef(sum)]).unwrap();
            sum = b.f_add(t.float, None, sum, y).unwrap();
        }
        let p = b
            .ext_inst(t.float, None, t.cl, Cl::half_powr as u32, [sum, x].map(Operand::IdRef))
            .unwrap();
        let d = b
            .ext_inst(t.float, None, t.cl, Cl::half_divide as u32, [p, x].map(Operand::IdRef))
            .unwrap();
        let w = b.composite_construct(t.float4, None, [d, d, d, d]).unwrap();
        let r =
            b.ext_inst(t.float4, None, t.cl, Cl::half_recip as u32, [Operand::IdRef(w)]).unwrap();
        let c = b.ext_inst(t.float4, None, t.cl, Cl::half_cos as u32, [Operand::IdRef(r)]).unwrap();
        let q = b
            .ext_inst(t.float4, None, t.cl, Cl::half_divide as u32, [c, v].map(Operand::IdRef))
            .unwrap();
        b.ret_value(q).unwrap();
        b.end_function().unwrap();
        let mut m = load(&assemble(&b.module())).unwrap();

        assert_eq!(lower_renamed_builtins(&mut m), 9);
        let m = load(&assemble(&m)).expect("the rewritten module loads");
        let full = [Cl::sqrt, Cl::exp10, Cl::rsqrt, Cl::powr, Cl::cos].map(|op| op as u32);
        assert_eq!(ext_insts(&m), full);
        // half_recip: 1.0 / x, a scalar and a vector 1.0; half_divide: x / y.
        let divisions: Vec<&Instruction> =
            m.all_inst_iter().filter(|i| i.class.opcode == Op::FDiv).collect();
        assert_eq!(divisions.len(), 4);
        let values = &m.types_global_values;
        let constant =
            |id: &Operand| values.iter().find(|i| Operand::IdRef(i.result_id.unwrap()) == *id);
        let one = Operand::LiteralBit32(1f32.to_bits());
        let scalar = constant(&divisions[0].operands[0]).expect("1.0");
        assert_eq!((scalar.result_type, &scalar.operands[..]), (Some(t.float), &[one][..]));
        assert_eq!(divisions[1].operands, [Operand::IdRef(p), Operand::IdRef(x)]);
        let vector = constant(&divisions[2].operands[0]).expect("(float4)(1.0)");
        let scalar = Operand::IdRef(scalar.result_id.unwrap());
        assert_eq!(
            (vector.result_type, &vector.operands[..]),
            (Some(t.float4), &vec![scalar; 4][..])
        );
        assert_eq!(divisions[2].operands[1], Operand::IdRef(w));
    }

    /// `void f(void) { mem_fence(CLK_GLOBAL_MEM_FENCE); read_mem_fence(CLK_LOCAL_MEM_FENCE); }`.
    fn fences() -> Module {
        let (mut b, t) = builder();
        let fn_ty = b.type_function(t.void, vec![]);
        b.begin_function(t.void, None, FunctionControl::NONE, fn_ty).unwrap();
        b.begin_block(None).unwrap();
        let scope = b.constant_bit32(t.int, 2);
        let (global, local) = (b.constant_bit32(t.int, 0x208), b.constant_bit32(t.int, 0x102));
        b.memory_barrier(scope, global).unwrap();
        b.memory_barrier(scope, local).unwrap();
        b.ret().unwrap();
        b.end_function().unwrap();
        load(&assemble(&b.module())).unwrap()
    }

    /// The function with linkage name `name`, and its linkage.
    fn linked<'m>(m: &'m Module, name: &str) -> Option<(&'m Function, LinkageType)> {
        m.annotations.iter().find_map(|i| match &i.operands[..] {
            [Operand::IdRef(f), _, Operand::LiteralString(n), Operand::LinkageType(l)]
                if n == name =>
            {
                Some((m.functions.iter().find(|g| g.def_id() == Some(*f))?, *l))
            }
            _ => None,
        })
    }

    #[test]
    fn a_module_with_fences_gets_a_mem_fence_calling_pocls() {
        let mut m = fences();
        assert_eq!(lower_renamed_builtins(&mut m), 2);
        let m = load(&assemble(&m)).expect("the rewritten module loads");
        assert_eq!(
            count(&m, Op::MemoryBarrier),
            2,
            "the barriers stay: llvm-spirv -r calls mem_fence for them"
        );
        let (fence, linkage) = linked(&m, "_Z9mem_fencej").expect("mem_fence");
        assert_eq!(linkage, LinkageType::Export);
        let (pocl, linkage) = linked(&m, "_Z13_cl_mem_fencej").expect("_cl_mem_fence");
        assert_eq!((linkage, pocl.blocks.len()), (LinkageType::Import, 0));
        assert_eq!(
            m.functions[0].def_id(),
            pocl.def_id(),
            "a declaration comes before every definition"
        );
        let call =
            fence.all_inst_iter().find(|i| i.class.opcode == Op::FunctionCall).expect("the call");
        let parameter = fence.parameters[0].result_id.unwrap();
        assert_eq!(
            call.operands,
            [Operand::IdRef(pocl.def_id().unwrap()), Operand::IdRef(parameter)]
        );
        let uint = m
            .types_global_values
            .iter()
            .find(|i| i.result_id == fence.parameters[0].result_type)
            .unwrap();
        assert_eq!(uint.operands, [Operand::LiteralBit32(32), Operand::LiteralBit32(0)]);
        let linkage = [Operand::Capability(Capability::Linkage)];
        assert_eq!(m.capabilities.iter().filter(|c| c.operands == linkage).count(), 1);

        // Once is enough.
        let mut again = m.clone();
        assert_eq!(lower_renamed_builtins(&mut again), 2);
        assert_eq!(assemble(&again), assemble(&m));
    }

    #[test]
    fn a_module_without_builtins_to_rewrite_is_unchanged() {
        let (mut b, t) = builder();
        let global_float = b.type_pointer(None, StorageClass::CrossWorkgroup, t.float);
        getter(&mut b, &t, global_float);
        let mut m = load(&assemble(&b.module())).unwrap();
        let before = assemble(&m);
        assert_eq!(lower_generic_builtins(&mut m).unwrap(), 0);
        assert_eq!(lower_renamed_builtins(&mut m), 0, "no half_* math, no fence");
        assert_eq!(assemble(&m), before);
    }
}
