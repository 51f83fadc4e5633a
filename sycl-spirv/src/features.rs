//! Optional kernel features (DPC++'s design of that name) on SPIR-V: the aspects each function uses, from the
//! value types it touches (half → fp16, double → fp64, 64-bit atomics → atomic64, images →
//! image), propagated up the static call graph; the aspects it declares with
//! `SYCL_DEVICE_HAS(...)`; the required work-group and sub-group sizes of kernels; and the call
//! chains (with source locations when compiled with `-g`) that the diagnostics show.
//!
//! Pointer types are not followed: OpenCL C lets code hold `half *` without `cl_khr_fp16`
//! (`vload_half`), and only values of a type make its aspect necessary.

use std::collections::{BTreeMap, BTreeSet, HashMap, VecDeque};

use rspirv::dr::{Instruction, Module, Operand};
use rspirv::spirv::{Decoration, ExecutionMode, Op, Word};
use sycl_format::aspects::{aspect_name, aspect_number};

use crate::calls::{CallGraph, Names};
use crate::location::{file_names, Location};

/// The `UserSemantic` prefix that `SYCL_DEVICE_HAS(...)` (in `sycl/device.h`) writes.
pub const DEVICE_HAS_SEMANTIC: &str = "sycl-device-has:";

const FP16: &str = "fp16";
const FP64: &str = "fp64";
const ATOMIC64: &str = "atomic64";
const IMAGE: &str = "image";

/// A call chain: each function with where its caller calls it (none for the first).
pub(crate) type CallChain = Vec<(Word, Option<Location>)>;

/// What a module's functions use and declare.
#[derive(Debug, Default)]
pub struct Features {
    /// Aspects a function uses itself, with where it first does.
    direct: HashMap<Word, BTreeMap<u32, Option<Location>>>,
    /// Aspects a function declares with `SYCL_DEVICE_HAS`.
    declared: HashMap<Word, BTreeSet<u32>>,
    /// Aspect names in `SYCL_DEVICE_HAS` that no aspect has, per function.
    unknown_declared: HashMap<Word, Vec<String>>,
    /// Functions each function calls (or takes the address of), with where.
    calls: CallGraph,
    names: Names,
    /// Aspects used by a function and everything it reaches.
    used: HashMap<Word, BTreeSet<u32>>,
    /// `reqd_work_group_size` of entry-point functions (their `LocalSize` execution mode).
    pub reqd_work_group_size: HashMap<Word, [u32; 3]>,
    /// `intel_reqd_sub_group_size` of entry-point functions (their `SubgroupSize` execution
    /// mode).
    pub reqd_sub_group_size: HashMap<Word, u32>,
    /// Whether the module calls through function pointers or takes function addresses.
    pub has_function_pointers: bool,
}

impl Features {
    /// Analyses `module`: each function's used aspects (propagated up the call graph), its
    /// declared aspects, the required sizes of entry points, and whether the module uses
    /// function pointers.
    pub fn analyze(module: &Module) -> Features {
        let mut f = Features {
            calls: CallGraph::of(module),
            names: Names::of(module),
            ..Features::default()
        };
        let files = file_names(module);
        for a in &module.annotations {
            if let [Operand::IdRef(id), Operand::Decoration(Decoration::UserSemantic), Operand::LiteralString(s)] =
                a.operands.as_slice()
            {
                if let Some(list) = s.strip_prefix(DEVICE_HAS_SEMANTIC) {
                    let set = f.declared.entry(*id).or_default();
                    for name in list.split(',').map(str::trim).filter(|n| !n.is_empty()) {
                        match aspect_number(name) {
                            Some(n) => {
                                set.insert(n);
                            }
                            None => {
                                f.unknown_declared.entry(*id).or_default().push(name.to_string())
                            }
                        }
                    }
                }
            }
        }
        for em in &module.execution_modes {
            match em.operands.as_slice() {
                [Operand::IdRef(id), Operand::ExecutionMode(ExecutionMode::LocalSize), Operand::LiteralBit32(x), Operand::LiteralBit32(y), Operand::LiteralBit32(z)] =>
                {
                    f.reqd_work_group_size.insert(*id, [*x, *y, *z]);
                }
                [Operand::IdRef(id), Operand::ExecutionMode(ExecutionMode::SubgroupSize), Operand::LiteralBit32(n)] =>
                {
                    f.reqd_sub_group_size.insert(*id, *n);
                }
                _ => {}
            }
        }

        let types = TypeAspects::new(module);
        let functions: std::collections::HashSet<Word> =
            f.calls.functions().iter().copied().collect();
        // A function whose address is taken (rather than only called) is called through a
        // pointer somewhere.
        f.has_function_pointers =
            f.calls.functions().iter().any(|g| f.calls.calls(*g).iter().any(|c| !c.direct));
        let mut type_of: HashMap<Word, Word> = HashMap::new();
        for i in module.types_global_values.iter() {
            if let (Some(id), Some(ty)) = (i.result_id, i.result_type) {
                type_of.insert(id, ty);
            }
            if matches!(i.class.opcode, Op::ConstantFunctionPointerINTEL) {
                f.has_function_pointers = true;
            }
        }
        for func in &module.functions {
            let Some(id) = func.def_id() else { continue };
            for i in func.all_inst_iter() {
                if let (Some(r), Some(t)) = (i.result_id, i.result_type) {
                    type_of.insert(r, t);
                }
            }
            let mut direct: BTreeMap<u32, Option<Location>> = BTreeMap::new();
            let mut line: Option<Location> = None;
            for i in func.all_inst_iter() {
                if Location::track(&mut line, i, &files) {
                    continue;
                }
                if matches!(
                    i.class.opcode,
                    Op::FunctionPointerCallINTEL | Op::ConstantFunctionPointerINTEL
                ) {
                    f.has_function_pointers = true;
                }
                let mut add = |aspects: &BTreeSet<u32>| {
                    for a in aspects {
                        direct.entry(*a).or_insert_with(|| line.clone());
                    }
                };
                if let Some(t) = i.result_type {
                    add(&types.of(t));
                }
                // A function as an operand (called, or its address taken) is the call graph's;
                // its type is no value's here.
                for op in &i.operands {
                    if let Operand::IdRef(x) = op {
                        if let Some(t) = type_of.get(x).filter(|_| !functions.contains(x)) {
                            add(&types.of(*t));
                        }
                    }
                }
                if is_atomic(i.class.opcode) && types.is_64bit_atomic(i, &type_of) {
                    add(&BTreeSet::from([aspect_number(ATOMIC64).unwrap()]));
                }
            }
            f.direct.insert(id, direct);
        }
        f.used = f.propagate(|_, _| true);
        f
    }

    /// Used aspects of every function, following only the calls `follow(caller, callee)`
    /// allows (all of them for the unit; same-source ones for a translation unit's view).
    pub fn propagate(&self, follow: impl Fn(Word, Word) -> bool) -> HashMap<Word, BTreeSet<u32>> {
        let mut used: HashMap<Word, BTreeSet<u32>> =
            self.direct.iter().map(|(f, a)| (*f, a.keys().copied().collect())).collect();
        let mut callers: HashMap<Word, Vec<Word>> = HashMap::new();
        for caller in self.calls.functions() {
            for call in self.calls.calls(*caller) {
                if follow(*caller, call.callee) {
                    callers.entry(call.callee).or_default().push(*caller);
                }
            }
        }
        let mut queue: VecDeque<Word> = used.keys().copied().collect();
        while let Some(f) = queue.pop_front() {
            let aspects = used.get(&f).cloned().unwrap_or_default();
            for caller in callers.get(&f).into_iter().flatten() {
                let entry = used.entry(*caller).or_default();
                let before = entry.len();
                entry.extend(aspects.iter().copied());
                if entry.len() != before {
                    queue.push_back(*caller);
                }
            }
        }
        used
    }

    /// Aspects `function` uses, itself or through anything it reaches.
    pub fn used(&self, function: Word) -> BTreeSet<u32> {
        self.used.get(&function).cloned().unwrap_or_default()
    }

    /// Aspects `function` declares with `SYCL_DEVICE_HAS`; `None` when it has no such marker.
    pub fn declared(&self, function: Word) -> Option<&BTreeSet<u32>> {
        self.declared.get(&function)
    }

    /// The functions `function` calls or takes the address of.
    pub fn callees(&self, function: Word) -> impl Iterator<Item = Word> + '_ {
        self.calls.calls(function).iter().map(|c| c.callee)
    }

    /// What users call `function` ([`crate::function_name`]).
    pub fn name(&self, function: Word) -> String {
        self.names.get(function)
    }

    /// The shortest call chain from `from` to a function that uses `aspect` itself, following
    /// only calls `follow` allows: each step is (function, where its caller calls it); the
    /// last item is where the use is.
    pub fn chain(
        &self,
        from: Word,
        aspect: u32,
        follow: impl Fn(Word, Word) -> bool,
    ) -> Option<(CallChain, Option<Location>)> {
        let mut parent: HashMap<Word, (Word, Option<Location>)> = HashMap::new();
        let mut queue = VecDeque::from([from]);
        let mut seen = std::collections::HashSet::from([from]);
        while let Some(f) = queue.pop_front() {
            if let Some(at) = self.direct.get(&f).and_then(|d| d.get(&aspect)) {
                let mut path = vec![(f, None)];
                let mut cur = f;
                while let Some((p, loc)) = parent.get(&cur) {
                    path.last_mut().unwrap().1 = loc.clone();
                    path.push((*p, None));
                    cur = *p;
                }
                path.reverse();
                return Some((path, at.clone()));
            }
            for call in self.calls.calls(f) {
                if follow(f, call.callee) && seen.insert(call.callee) {
                    parent.insert(call.callee, (f, call.at.clone()));
                    queue.push_back(call.callee);
                }
            }
        }
        None
    }

    /// DPC++'s front-end warning for every function that declares aspects with
    /// `SYCL_DEVICE_HAS` and uses one it did not declare (plus unknown aspect names).
    pub fn undeclared_use_warnings(&self) -> Vec<String> {
        let mut out = Vec::new();
        let mut declared: Vec<_> = self.declared.iter().collect();
        declared.sort_by_key(|(id, _)| self.name(**id));
        for (&function, list) in declared {
            for name in self.unknown_declared.get(&function).into_iter().flatten() {
                out.push(format!(
                    "warning: function '{}' lists unknown aspect '{name}' in 'SYCL_DEVICE_HAS'",
                    self.name(function)
                ));
            }
            for aspect in self.used(function).difference(list) {
                let Some((path, at)) = self.chain(function, *aspect, |_, _| true) else { continue };
                out.push(self.chain_warning(
                    &format!(
                        "function '{}' uses aspect '{}' not listed in 'SYCL_DEVICE_HAS'",
                        self.name(function),
                        aspect_name(*aspect)
                    ),
                    &path,
                    at.as_ref(),
                ));
            }
        }
        out
    }

    /// A warning in DPC++'s shape: the message, then the call chain, with locations when
    /// the module has line information.
    pub fn chain_warning(
        &self,
        message: &str,
        path: &[(Word, Option<Location>)],
        at: Option<&Location>,
    ) -> String {
        let mut out = match at {
            Some(at) => format!("{at}: warning: {message}\nuse is from this call chain:"),
            None => format!("warning: {message}\nuse is from this call chain:"),
        };
        for (function, call_site) in path {
            out.push_str(&format!("\n  {}()", self.name(*function)));
            if let Some(loc) = call_site {
                out.push_str(&format!(" {loc}"));
            }
        }
        if at.is_none() {
            out.push_str("\ncompile with '-g' to get source location");
        }
        out
    }
}

/// Whether `op` is an atomic on the memory its first operand points to.
pub(crate) fn is_atomic(op: Op) -> bool {
    matches!(
        op,
        Op::AtomicLoad
            | Op::AtomicStore
            | Op::AtomicExchange
            | Op::AtomicCompareExchange
            | Op::AtomicCompareExchangeWeak
            | Op::AtomicIIncrement
            | Op::AtomicIDecrement
            | Op::AtomicIAdd
            | Op::AtomicISub
            | Op::AtomicSMin
            | Op::AtomicUMin
            | Op::AtomicSMax
            | Op::AtomicUMax
            | Op::AtomicAnd
            | Op::AtomicOr
            | Op::AtomicXor
            | Op::AtomicFAddEXT
            | Op::AtomicFMinEXT
            | Op::AtomicFMaxEXT
            | Op::AtomicFlagTestAndSet
            | Op::AtomicFlagClear
    )
}

/// Aspects implied by holding a value of each type, memoised.
struct TypeAspects<'m> {
    defs: HashMap<Word, &'m Instruction>,
    memo: std::cell::RefCell<HashMap<Word, BTreeSet<u32>>>,
}

impl<'m> TypeAspects<'m> {
    fn new(module: &'m Module) -> Self {
        let defs =
            module.types_global_values.iter().filter_map(|i| Some((i.result_id?, i))).collect();
        TypeAspects { defs, memo: Default::default() }
    }

    fn of(&self, ty: Word) -> BTreeSet<u32> {
        if let Some(known) = self.memo.borrow().get(&ty) {
            return known.clone();
        }
        // Guard against cycles through forward pointers (not followed anyway).
        self.memo.borrow_mut().insert(ty, BTreeSet::new());
        let mut out = BTreeSet::new();
        if let Some(def) = self.defs.get(&ty) {
            let named = |n: &str| aspect_number(n).unwrap();
            match def.class.opcode {
                Op::TypeFloat => match def.operands.first() {
                    Some(Operand::LiteralBit32(16)) => {
                        out.insert(named(FP16));
                    }
                    Some(Operand::LiteralBit32(64)) => {
                        out.insert(named(FP64));
                    }
                    _ => {}
                },
                Op::TypeImage | Op::TypeSampledImage | Op::TypeSampler => {
                    out.insert(named(IMAGE));
                }
                Op::TypeVector
                | Op::TypeMatrix
                | Op::TypeArray
                | Op::TypeRuntimeArray
                | Op::TypeStruct => {
                    for op in &def.operands {
                        if let Operand::IdRef(member) = op {
                            out.extend(self.of(*member));
                        }
                    }
                }
                _ => {}
            }
        }
        self.memo.borrow_mut().insert(ty, out.clone());
        out
    }

    fn is_64bit_scalar(&self, ty: Word) -> bool {
        matches!(
            self.defs.get(&ty).map(|d| (d.class.opcode, d.operands.first())),
            Some((Op::TypeInt | Op::TypeFloat, Some(Operand::LiteralBit32(64))))
        )
    }

    /// Whether an atomic instruction works on a 64-bit value: its result, or for stores the
    /// pointee of its pointer operand.
    fn is_64bit_atomic(&self, i: &Instruction, type_of: &HashMap<Word, Word>) -> bool {
        if i.result_type.is_some_and(|t| self.is_64bit_scalar(t)) {
            return true;
        }
        let Some(Operand::IdRef(pointer)) = i.operands.first() else { return false };
        let Some(def) = type_of.get(pointer).and_then(|t| self.defs.get(t)) else { return false };
        matches!(def.operands.get(1), Some(Operand::IdRef(pointee)) if self.is_64bit_scalar(*pointee))
    }
}
