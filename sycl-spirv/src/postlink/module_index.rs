//! The linked module indexed once, so that each image is built in time proportional to its own
//! size rather than the module's; and the one notion of what a definition uses, behind both
//! which functions an image must hold and which module-scope values. A function uses what its
//! instructions, its entry point, its execution modes and the decorations on its ids use; a
//! module-scope value (type, constant, variable, decoration group), what its instruction and its
//! decorations use. Deciding the two questions from separate notions let them drift apart: the
//! `spirv_postlink` fuzz target found images holding a type or an interface variable that
//! named a function the image had dropped.

use std::collections::{HashMap, HashSet};

use rspirv::dr::{Instruction, Module, Operand};
use rspirv::spirv::{Op, Word};

use crate::load::{operand_id, untyped_sets};

/// Where a module's definitions are and what each uses (see the module documentation).
pub(super) struct ModuleIndex {
    /// Function id → position in `module.functions`.
    pub(super) functions: HashMap<Word, usize>,
    /// Module-scope value id → position in `types_global_values`.
    pub(super) globals: HashMap<Word, usize>,
    /// Pointer type id → position of the `OpTypeForwardPointer` that announces it.
    pub(super) forward_pointers: HashMap<Word, usize>,
    /// Id → positions of the annotations that decorate it (for a decoration group, also the
    /// `OpDecorationGroup` itself) and of the names that name it.
    pub(super) annotations: HashMap<Word, Vec<usize>>,
    pub(super) names: HashMap<Word, Vec<usize>>,
    /// What each function's whole definition uses, what its declaration alone uses (type,
    /// parameters and their decorations), and what each module-scope value uses: functions and
    /// module-scope values only, each list without repeats.
    body_uses: HashMap<Word, Vec<Word>>,
    declaration_uses: HashMap<Word, Vec<Word>>,
    value_uses: HashMap<Word, Vec<Word>>,
}

/// What one image holds: functions with their bodies, functions only declared, and module-scope
/// values (decoration groups included).
pub(super) struct Contents {
    pub(super) defined: HashSet<Word>,
    pub(super) declared: HashSet<Word>,
    pub(super) values: HashSet<Word>,
}

impl ModuleIndex {
    pub(super) fn of(module: &Module) -> ModuleIndex {
        let functions: HashMap<Word, usize> = module
            .functions
            .iter()
            .enumerate()
            .filter_map(|(i, f)| Some((f.def_id()?, i)))
            .collect();
        let globals: HashMap<Word, usize> = module
            .types_global_values
            .iter()
            .enumerate()
            .filter_map(|(i, g)| Some((g.result_id?, i)))
            .collect();
        let forward_pointers = module
            .types_global_values
            .iter()
            .enumerate()
            .filter(|(_, g)| g.class.opcode == Op::TypeForwardPointer)
            .filter_map(|(i, g)| match g.operands.first() {
                Some(Operand::IdRef(p)) => Some((*p, i)),
                _ => None,
            })
            .collect();
        let groups: HashSet<Word> = module
            .annotations
            .iter()
            .filter(|a| a.class.opcode == Op::DecorationGroup)
            .filter_map(|a| a.result_id)
            .collect();
        let nodes = Nodes {
            functions: &functions,
            globals: &globals,
            groups: &groups,
            untyped: untyped_sets(module).into_iter().collect(),
        };
        let mut uses = Uses::of_definitions(module, &nodes);
        uses.add_entry_points(module, &nodes);
        let annotations = uses.add_annotations(module, &nodes);
        let Uses { body: body_uses, declaration: declaration_uses, value: value_uses, .. } =
            uses.without_repeats();
        let mut names: HashMap<Word, Vec<usize>> = HashMap::new();
        for (i, n) in module.debug_names.iter().enumerate() {
            if let Some(Operand::IdRef(t)) = n.operands.first() {
                names.entry(*t).or_default().push(i);
            }
        }
        ModuleIndex {
            functions,
            globals,
            forward_pointers,
            annotations,
            names,
            body_uses,
            declaration_uses,
            value_uses,
        }
    }

    /// What an image with `roots` must hold: everything they use, transitively; the functions
    /// in `stop` only as declarations.
    pub(super) fn contents(
        &self,
        roots: impl IntoIterator<Item = Word>,
        stop: &HashSet<Word>,
    ) -> Contents {
        let mut contents =
            Contents { defined: HashSet::new(), declared: HashSet::new(), values: HashSet::new() };
        let mut seen = HashSet::new();
        let mut pending: Vec<Word> = roots.into_iter().collect();
        while let Some(id) = pending.pop() {
            if !seen.insert(id) {
                continue;
            }
            let (set, uses) = if stop.contains(&id) && self.functions.contains_key(&id) {
                (&mut contents.declared, self.declaration_uses.get(&id))
            } else if self.functions.contains_key(&id) {
                (&mut contents.defined, self.body_uses.get(&id))
            } else {
                (&mut contents.values, self.value_uses.get(&id))
            };
            if let Some(uses) = uses {
                set.insert(id);
                pending.extend(uses);
            }
        }
        contents
    }
}

/// The ids the index follows, functions, module-scope values and decoration groups, and the
/// extended-instruction sets whose operands it cannot type.
struct Nodes<'a> {
    functions: &'a HashMap<Word, usize>,
    globals: &'a HashMap<Word, usize>,
    groups: &'a HashSet<Word>,
    untyped: HashSet<Word>,
}

impl Nodes<'_> {
    /// Adds to `out` the functions and module-scope values an instruction uses. The operands
    /// of an extended instruction from a set rspirv has no grammar for may be literals read as
    /// ids: they keep a module-scope value they happen to name, never a function.
    fn uses(&self, inst: &Instruction, out: &mut Vec<Word>) {
        let untyped_from = match (inst.class.opcode, inst.operands.first()) {
            (Op::ExtInst, Some(Operand::IdRef(set))) if self.untyped.contains(set) => 1,
            _ => usize::MAX,
        };
        let operands =
            inst.operands.iter().enumerate().filter_map(|(i, op)| Some((i, operand_id(op)?)));
        for (i, id) in inst.result_type.map(|t| (0, t)).into_iter().chain(operands) {
            let node = self.globals.contains_key(&id) || self.groups.contains(&id);
            if node || (i < untyped_from && self.functions.contains_key(&id)) {
                out.push(id);
            }
        }
    }

    /// What an instruction uses, as [`Nodes::uses`] finds it.
    fn used_by(&self, inst: &Instruction) -> Vec<Word> {
        let mut used = Vec::new();
        self.uses(inst, &mut used);
        used
    }
}

/// Where the uses of an id go: a value's own list, or its function's body (and declaration).
enum Owner {
    Value,
    Body(Word),
    Declaration(Word),
}

/// What each definition uses, as the index is built: [`ModuleIndex`]'s three lists, and the
/// owner of each id whose decorations add to them.
struct Uses {
    owner: HashMap<Word, Owner>,
    body: HashMap<Word, Vec<Word>>,
    declaration: HashMap<Word, Vec<Word>>,
    value: HashMap<Word, Vec<Word>>,
}

impl Uses {
    /// What the instructions of each function and of each module-scope value use.
    fn of_definitions(module: &Module, nodes: &Nodes) -> Uses {
        let mut owner: HashMap<Word, Owner> = HashMap::new();
        for id in nodes.globals.keys().chain(nodes.groups) {
            owner.insert(*id, Owner::Value);
        }
        let mut body_uses: HashMap<Word, Vec<Word>> = HashMap::new();
        let mut declaration_uses: HashMap<Word, Vec<Word>> = HashMap::new();
        for f in &module.functions {
            let Some(id) = f.def_id() else { continue };
            let (mut body, mut declaration) = (Vec::new(), Vec::new());
            for inst in f.def.iter().chain(&f.parameters) {
                nodes.uses(inst, &mut declaration);
                owner.extend(inst.result_id.map(|r| (r, Owner::Declaration(id))));
            }
            for inst in f.all_inst_iter() {
                nodes.uses(inst, &mut body);
                if let Some(r) = inst.result_id {
                    owner.entry(r).or_insert(Owner::Body(id));
                }
            }
            body_uses.insert(id, body);
            declaration_uses.insert(id, declaration);
        }
        let mut value_uses: HashMap<Word, Vec<Word>> = HashMap::new();
        for g in &module.types_global_values {
            if let Some(id) = g.result_id {
                nodes.uses(g, value_uses.entry(id).or_default());
            }
        }
        for id in nodes.groups {
            value_uses.entry(*id).or_default();
        }
        Uses { owner, body: body_uses, declaration: declaration_uses, value: value_uses }
    }

    /// Adds `used` to what `target`'s owner uses: a value's list, or its function's body, and
    /// its declaration too when `target` is part of the declaration.
    fn add(&mut self, target: Word, used: &[Word]) {
        let lists: [Option<&mut Vec<Word>>; 2] = match self.owner.get(&target) {
            Some(Owner::Value) => [self.value.get_mut(&target), None],
            Some(Owner::Body(f)) => [self.body.get_mut(f), None],
            Some(Owner::Declaration(f)) => {
                let f = *f;
                [self.body.get_mut(&f), self.declaration.get_mut(&f)]
            }
            None => [None, None],
        };
        for list in lists.into_iter().flatten() {
            list.extend_from_slice(used);
        }
    }

    /// Adds what the entry points and execution modes use to the functions they name.
    fn add_entry_points(&mut self, module: &Module, nodes: &Nodes) {
        for e in &module.entry_points {
            if let Some(Operand::IdRef(f)) = e.operands.get(1) {
                self.add(*f, &nodes.used_by(e));
            }
        }
        for m in &module.execution_modes {
            if let Some(Operand::IdRef(f)) = m.operands.first() {
                self.add(*f, &nodes.used_by(m));
            }
        }
    }

    /// Adds what each annotation uses to the ids it decorates; the positions of the
    /// annotations that decorate each id.
    fn add_annotations(&mut self, module: &Module, nodes: &Nodes) -> HashMap<Word, Vec<usize>> {
        let mut annotations: HashMap<Word, Vec<usize>> = HashMap::new();
        for (i, a) in module.annotations.iter().enumerate() {
            // An id in a group uses the group (and so the group's decorations), nothing else
            // the group names.
            let used = match (a.class.opcode, a.operands.first()) {
                (Op::GroupDecorate | Op::GroupMemberDecorate, Some(Operand::IdRef(g)))
                    if nodes.groups.contains(g) =>
                {
                    vec![*g]
                }
                (Op::GroupDecorate | Op::GroupMemberDecorate, _) => vec![],
                _ => nodes.used_by(a),
            };
            for target in annotation_targets(a) {
                self.add(target, &used);
                annotations.entry(target).or_default().push(i);
            }
        }
        annotations
    }

    /// The lists sorted, each without repeats.
    fn without_repeats(mut self) -> Uses {
        for list in self
            .body
            .values_mut()
            .chain(self.declaration.values_mut())
            .chain(self.value.values_mut())
        {
            list.sort_unstable();
            list.dedup();
        }
        self
    }
}

/// The ids an annotation decorates; an `OpDecorationGroup` counts as decorating its group.
fn annotation_targets(a: &Instruction) -> Vec<Word> {
    match a.class.opcode {
        Op::DecorationGroup => a.result_id.into_iter().collect(),
        Op::GroupDecorate | Op::GroupMemberDecorate => a
            .operands
            .iter()
            .skip(1)
            .filter_map(|op| match op {
                Operand::IdRef(t) => Some(*t),
                _ => None,
            })
            .collect(),
        _ => match a.operands.first() {
            Some(Operand::IdRef(t)) => vec![*t],
            _ => vec![],
        },
    }
}
