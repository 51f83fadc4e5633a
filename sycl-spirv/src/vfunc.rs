//! Virtual-function sets (DPC++'s virtual functions design) on SPIR-V with `SPV_INTEL_function_pointers`.
//!
//! `SYCL_INDIRECTLY_CALLABLE(set)` marks a function as a member of a set
//! (`UserSemantic "sycl-indirectly-callable:SET"`); `SYCL_CALLS_INDIRECTLY(a, b)` marks a
//! kernel that calls into sets (`"sycl-calls-indirectly:a, b"`). The post-link outlines each
//! set into an image of its own and leaves declarations behind; for a set that uses optional
//! features it also makes a dummy image whose functions have empty bodies.

use std::collections::{BTreeMap, BTreeSet, HashMap};

use rspirv::dr::{Block, Instruction, Module, Operand};
use rspirv::spirv::{Decoration, Op, Word};

/// The `UserSemantic` prefix that `SYCL_INDIRECTLY_CALLABLE(set)` writes; the set's name
/// follows it.
pub const INDIRECTLY_CALLABLE_SEMANTIC: &str = "sycl-indirectly-callable:";
/// The `UserSemantic` prefix that `SYCL_CALLS_INDIRECTLY(...)` writes; a comma-separated list
/// of set names follows it.
pub const CALLS_INDIRECTLY_SEMANTIC: &str = "sycl-calls-indirectly:";

/// The sets of a module.
#[derive(Debug, Default)]
pub struct VirtualSets {
    /// Set name → its member functions, in module order.
    pub members: BTreeMap<String, Vec<Word>>,
    /// Member function → its set.
    pub set_of: HashMap<Word, String>,
    /// Function → the sets it declares it calls into.
    pub calls: HashMap<Word, BTreeSet<String>>,
}

impl VirtualSets {
    /// Reads the sets of `module` from its `UserSemantic` markers; a marked function without
    /// a body is no member.
    pub fn of(module: &Module) -> VirtualSets {
        let defined: std::collections::HashSet<Word> = module
            .functions
            .iter()
            .filter(|f| !f.blocks.is_empty())
            .filter_map(|f| f.def_id())
            .collect();
        let mut sets = VirtualSets::default();
        for a in &module.annotations {
            let [Operand::IdRef(target), Operand::Decoration(Decoration::UserSemantic), Operand::LiteralString(s)] =
                a.operands.as_slice()
            else {
                continue;
            };
            if let Some(set) = s.strip_prefix(INDIRECTLY_CALLABLE_SEMANTIC) {
                if defined.contains(target) {
                    sets.members.entry(set.trim().to_string()).or_default().push(*target);
                    sets.set_of.insert(*target, set.trim().to_string());
                }
            } else if let Some(list) = s.strip_prefix(CALLS_INDIRECTLY_SEMANTIC) {
                let names =
                    list.split(',').map(str::trim).filter(|n| !n.is_empty()).map(str::to_string);
                sets.calls.entry(*target).or_default().extend(names);
            }
        }
        let position: HashMap<Word, usize> = module
            .functions
            .iter()
            .enumerate()
            .filter_map(|(i, f)| Some((f.def_id()?, i)))
            .collect();
        for members in sets.members.values_mut() {
            members.sort_by_key(|f| position.get(f).copied().unwrap_or(usize::MAX));
        }
        sets
    }

    /// Whether the module defines no member of any set (sets it only calls into do not count).
    pub fn is_empty(&self) -> bool {
        self.members.is_empty()
    }
}

/// A copy of `module` in which every function of `functions` has an empty body: it returns an
/// undefined value of its return type (DPC++'s dummy image; nothing may rely on what a
/// dummy returns, and `OpUndef`, unlike `OpConstantNull`, is valid for every OpenCL type).
pub fn with_empty_bodies(module: &Module, functions: &[Word]) -> Module {
    let mut out = module.clone();
    let mut next = crate::link::next_id(&out);
    let void_types: std::collections::HashSet<Word> = out
        .types_global_values
        .iter()
        .filter(|i| i.class.opcode == Op::TypeVoid)
        .filter_map(|i| i.result_id)
        .collect();
    let mut nulls = Vec::new();
    for f in out.functions.iter_mut() {
        let Some(id) = f.def_id() else { continue };
        if !functions.contains(&id) {
            continue;
        }
        let ret = f.def.as_ref().and_then(|d| d.result_type).unwrap_or(0);
        let label = next;
        next += 1;
        let ret_inst = if void_types.contains(&ret) {
            Instruction::new(Op::Return, None, None, vec![])
        } else {
            let null = next;
            next += 1;
            nulls.push(Instruction::new(Op::Undef, Some(ret), Some(null), vec![]));
            Instruction::new(Op::ReturnValue, None, None, vec![Operand::IdRef(null)])
        };
        f.blocks = vec![Block {
            label: Some(Instruction::new(Op::Label, None, Some(label), vec![])),
            instructions: vec![ret_inst],
        }];
    }
    out.types_global_values.extend(nulls);
    if let Some(h) = &mut out.header {
        h.bound = next;
    }
    out
}
