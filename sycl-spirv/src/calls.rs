//! The static call graph of a module: which functions each function calls directly
//! (`OpFunctionCall`) and which it only refers to (takes the address of), each with the
//! `OpLine` location of the reference; the names users see for functions; call cycles, since
//! OpenCL C and SYCL forbid recursion in device code (PoCL's kernel compiler overflows its
//! stack on one, the Intel runtime fails the link); and each image's reduced call graph,
//! which the post-link records in `SYCL/call graph` so that the runtime can find a cycle that
//! crosses images without reading SPIR-V.
//!
//! This is the one walk that finds calls: [`Features`](crate::Features) builds on it. Nothing
//! here recurses: device code may nest calls thousands deep, and how deep our own stack goes
//! must not depend on it. Every algorithm is linear in the size of the graph and visits
//! functions in module order and calls in instruction order, so its answers are deterministic.

use std::collections::{BTreeMap, HashMap, HashSet};

use rspirv::dr::{Module, Operand};
use rspirv::spirv::{Op, Word};

use crate::load::operand_id;
use crate::load::untyped_sets;
use crate::location::{file_names, Location};
use crate::symbols::{linkage_of, Linkage};

/// One reference from a function's body to a function.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Call {
    pub callee: Word,
    /// The last `OpLine` before the reference, when the module has line information.
    pub at: Option<Location>,
    /// Whether it is a direct call (the callee of an `OpFunctionCall`); otherwise the body takes
    /// the function's address.
    pub direct: bool,
}

/// The functions of a module and what each one's body calls or refers to.
#[derive(Debug, Default)]
pub(crate) struct CallGraph {
    /// Every function, defined or only declared, in module order.
    functions: Vec<Word>,
    position: HashMap<Word, usize>,
    defined: Vec<bool>,
    /// Each function's references to functions, in instruction order (none for declarations).
    calls: Vec<Vec<Call>>,
}

impl CallGraph {
    pub(crate) fn of(module: &Module) -> CallGraph {
        let files = file_names(module);
        let untyped: HashSet<Word> = untyped_sets(module).into_iter().collect();
        let mut graph = CallGraph::default();
        for f in &module.functions {
            if let Some(id) = f.def_id() {
                graph.position.entry(id).or_insert(graph.functions.len());
                graph.functions.push(id);
                graph.defined.push(!f.blocks.is_empty());
            }
        }
        for f in &module.functions {
            if f.def_id().is_none() {
                continue;
            }
            let mut calls = Vec::new();
            let mut line = None;
            for inst in f.all_inst_iter() {
                if Location::track(&mut line, inst, &files) {
                    continue;
                }
                // rspirv reads the operands of an extended instruction from a set it has no
                // grammar for as ids; they are literals, never functions.
                let untyped = inst.class.opcode == Op::ExtInst
                    && matches!(inst.operands.first(), Some(Operand::IdRef(set)) if untyped.contains(set));
                let operands = if untyped { &inst.operands[..1] } else { &inst.operands[..] };
                for (i, op) in operands.iter().enumerate() {
                    if let Some(callee) =
                        operand_id(op).filter(|id| graph.position.contains_key(id))
                    {
                        let direct = inst.class.opcode == Op::FunctionCall && i == 0;
                        calls.push(Call { callee, at: line.clone(), direct });
                    }
                }
            }
            graph.calls.push(calls);
        }
        graph
    }

    /// Every function, defined or declared, in module order.
    pub(crate) fn functions(&self) -> &[Word] {
        &self.functions
    }

    /// What `function`'s body calls or refers to, in instruction order.
    pub(crate) fn calls(&self, function: Word) -> &[Call] {
        self.position.get(&function).map_or(&[], |&p| &self.calls[p])
    }

    /// Direct calls between defined functions, by position.
    fn direct_successors(&self) -> Vec<Vec<usize>> {
        self.calls
            .iter()
            .map(|calls| {
                calls
                    .iter()
                    .filter(|c| c.direct)
                    .map(|c| self.position[&c.callee])
                    .filter(|&p| self.defined[p])
                    .collect()
            })
            .collect()
    }

    /// One call cycle among the defined functions (direct calls only), as the functions in call
    /// order, the first not repeated at the end: the first that a depth-first search from each
    /// function in module order, following calls in instruction order, closes.
    pub(crate) fn cycle(&self) -> Option<Vec<Word>> {
        const NEW: u8 = 0;
        const OPEN: u8 = 1;
        const DONE: u8 = 2;
        let successors = self.direct_successors();
        let mut state = vec![NEW; self.functions.len()];
        for root in 0..self.functions.len() {
            if state[root] != NEW {
                continue;
            }
            state[root] = OPEN;
            let mut path: Vec<(usize, usize)> = vec![(root, 0)];
            while let Some((v, next)) = path.last_mut() {
                let v = *v;
                let Some(&w) = successors[v].get(*next) else {
                    state[v] = DONE;
                    path.pop();
                    continue;
                };
                *next += 1;
                match state[w] {
                    NEW => {
                        state[w] = OPEN;
                        path.push((w, 0));
                    }
                    OPEN => {
                        // `w` is on the path: the path from it to `v`, then back to `w`.
                        let start = path
                            .iter()
                            .position(|&(u, _)| u == w)
                            .expect("an open function is on the path");
                        return Some(
                            path[start..].iter().map(|&(u, _)| self.functions[u]).collect(),
                        );
                    }
                    _ => {}
                }
            }
        }
        None
    }
}

/// One call cycle among `module`'s defined functions (direct `OpFunctionCall`s only), as the
/// function ids in call order (the first not repeated at the end), or `None`.
pub fn call_cycle(module: &Module) -> Option<Vec<Word>> {
    CallGraph::of(module).cycle()
}

/// The name to show a user for function `id`: its linkage name, else its entry-point name
/// (for a kernel's entry function), else its `OpName`, else `%ID`.
pub fn function_name(module: &Module, id: Word) -> String {
    Names::of(module).get(id)
}

/// The warning for a call cycle that [`call_cycle`] found: the functions by name, and, when
/// the module has line information, where each call is (in the shape of
/// [`Features::chain_warning`](crate::Features::chain_warning)).
pub fn cycle_warning(module: &Module, cycle: &[Word]) -> String {
    let graph = CallGraph::of(module);
    let names = Names::of(module);
    let mut chain: Vec<String> = cycle.iter().map(|f| names.get(*f)).collect();
    chain.extend(chain.first().cloned());
    let mut out = format!(
        "warning: call cycle in device code (recursion is not allowed in OpenCL C or SYCL device code; \
         the runtime will refuse kernels that reach it): {}",
        chain.join(" -> ")
    );
    // Where each function of the cycle calls the next one.
    let sites: Vec<Option<&Location>> = cycle
        .iter()
        .zip(cycle.iter().cycle().skip(1))
        .map(|(caller, callee)| {
            graph
                .calls(*caller)
                .iter()
                .find(|c| c.direct && c.callee == *callee)
                .and_then(|c| c.at.as_ref())
        })
        .collect();
    if sites.iter().any(Option::is_some) {
        out.push_str("\ncycle of calls:");
        out.push_str(&format!("\n  {}()", chain[0]));
        for (name, site) in chain.iter().skip(1).zip(&sites) {
            out.push_str(&format!("\n  {name}()"));
            if let Some(at) = site {
                out.push_str(&format!(" {at}"));
            }
        }
    } else {
        out.push_str("\ncompile with '-g' to get source location");
    }
    out
}

/// The names of a module's functions, read once.
#[derive(Debug, Default)]
pub(crate) struct Names {
    linkage: HashMap<Word, (String, Linkage)>,
    entry: HashMap<Word, String>,
    debug: HashMap<Word, String>,
}

impl Names {
    pub(crate) fn of(module: &Module) -> Names {
        let mut names = Names::default();
        for a in &module.annotations {
            if let Some((id, name, kind)) = linkage_of(a) {
                names.linkage.entry(id).or_insert_with(|| (name.to_string(), kind));
            }
        }
        for e in &module.entry_points {
            if let (Some(Operand::IdRef(id)), Some(Operand::LiteralString(name))) =
                (e.operands.get(1), e.operands.get(2))
            {
                names.entry.entry(*id).or_insert_with(|| name.clone());
            }
        }
        for n in &module.debug_names {
            if let (Op::Name, Some(Operand::IdRef(id)), Some(Operand::LiteralString(name))) =
                (n.class.opcode, n.operands.first(), n.operands.get(1))
            {
                names.debug.entry(*id).or_insert_with(|| name.clone());
            }
        }
        names
    }

    pub(crate) fn get(&self, id: Word) -> String {
        let name = self
            .linkage
            .get(&id)
            .map(|(n, _)| n)
            .or_else(|| self.entry.get(&id))
            .or_else(|| self.debug.get(&id));
        name.cloned().unwrap_or_else(|| format!("%{id}"))
    }
}

/// An image's reduced call graph: node name → the names of its callees that are nodes or
/// imports, sorted. The nodes are the image's defined functions that reach an import (a
/// declaration whose linkage name is in `imported`) through direct calls, or that lie on a
/// call cycle of the image.
///
/// A kernel's entry function and the function it wraps (clang makes both: the entry point and
/// a plain function of the kernel's name) are one node, named by the entry point. A node is
/// named like [`function_name`], but a name that a kernel, an export or an import of the image
/// already has, or that an earlier node took, gets `#2`, `#3`, … so that names are unique and a
/// name the runtime follows to another image always means the exported function.
// Only the post-link (feature `link`) writes call graphs.
#[cfg_attr(not(feature = "link"), allow(dead_code))]
pub(crate) fn reduced_call_graph(
    module: &Module,
    imported: &[String],
) -> BTreeMap<String, Vec<String>> {
    let graph = CallGraph::of(module);
    let names = Names::of(module);
    let n = graph.functions.len();
    let imported: HashSet<&str> = imported.iter().map(String::as_str).collect();
    let import_name = |p: usize| -> Option<&str> {
        match names.linkage.get(&graph.functions[p]) {
            Some((name, Linkage::Import))
                if !graph.defined[p] && imported.contains(name.as_str()) =>
            {
                Some(name)
            }
            _ => None,
        }
    };

    let (node_of, kernel_name) = kernel_nodes(module, &graph, &names);

    // Direct calls between nodes (the entry function's call of its kernel dropped), and calls of
    // imports.
    let mut successors: Vec<Vec<usize>> = vec![Vec::new(); n];
    let mut imports_called: Vec<Vec<&str>> = vec![Vec::new(); n];
    for (caller, calls) in graph.calls.iter().enumerate() {
        for call in calls.iter().filter(|c| c.direct) {
            let callee = graph.position[&call.callee];
            if graph.defined[callee] {
                if !(node_of[caller] == callee && caller != callee) {
                    successors[node_of[caller]].push(node_of[callee]);
                }
            } else if let Some(name) = import_name(callee) {
                imports_called[node_of[caller]].push(name);
            }
        }
    }

    // Nodes: on a cycle, or reaching an import.
    let mut node = on_cycle(&successors);
    let reaches = reaching_imports(&successors, &imports_called);
    for v in 0..n {
        node[v] = (node[v] || reaches[v]) && graph.defined[v] && node_of[v] == v;
    }
    if !node.contains(&true) {
        return BTreeMap::new();
    }

    // Names: imports, kernels and exports keep theirs; other nodes, in module order, take theirs
    // unless it is taken.
    let mut namer = Namer::default();
    for name in &imported {
        namer.take(name.to_string());
    }
    let public = |v: usize| -> Option<String> {
        if let Some(name) = kernel_name.get(&v) {
            return Some(name.to_string());
        }
        match names.linkage.get(&graph.functions[v]) {
            Some((name, Linkage::Export | Linkage::LinkOnceOdr)) if graph.defined[v] => {
                Some(name.clone())
            }
            _ => None,
        }
    };
    let mut name_of: Vec<Option<String>> = vec![None; n];
    for v in (0..n).filter(|&v| node_of[v] == v) {
        if let Some(name) = public(v) {
            name_of[v] = Some(namer.take(name));
        }
    }
    for v in 0..n {
        if !node[v] || name_of[v].is_some() {
            continue;
        }
        name_of[v] = Some(namer.take(names.get(graph.functions[v])));
    }

    let mut out = BTreeMap::new();
    for v in (0..n).filter(|&v| node[v]) {
        let mut callees: Vec<String> = successors[v]
            .iter()
            .filter(|&&w| node[w])
            .filter_map(|&w| name_of[w].clone())
            .collect();
        callees.extend(imports_called[v].iter().map(|s| s.to_string()));
        callees.sort();
        callees.dedup();
        out.insert(name_of[v].clone().expect("every node is named"), callees);
    }
    out
}

/// Kernels: each entry function stands for the function of the kernel's name it calls. The
/// node each function's calls count for (its own position but for an entry function), and
/// each kernel's node with the kernel's name.
#[cfg_attr(not(feature = "link"), allow(dead_code))]
fn kernel_nodes<'m>(
    module: &'m Module,
    graph: &CallGraph,
    names: &Names,
) -> (Vec<usize>, HashMap<usize, &'m str>) {
    let mut node_of: Vec<usize> = (0..graph.functions.len()).collect();
    let mut kernel_name: HashMap<usize, &str> = HashMap::new();
    for e in &module.entry_points {
        let (Some(Operand::IdRef(id)), Some(Operand::LiteralString(name))) =
            (e.operands.get(1), e.operands.get(2))
        else {
            continue;
        };
        let Some(&entry) = graph.position.get(id) else { continue };
        if !graph.defined[entry] || kernel_name.contains_key(&entry) {
            continue;
        }
        let wrapped =
            graph.calls[entry].iter().filter(|c| c.direct).map(|c| graph.position[&c.callee]).find(
                |&p| {
                    p != entry
                        && graph.defined[p]
                        && !names.entry.contains_key(&graph.functions[p])
                        && !kernel_name.contains_key(&p)
                        && names.get(graph.functions[p]) == *name
                },
            );
        let node = wrapped.unwrap_or(entry);
        node_of[entry] = node;
        kernel_name.insert(node, name);
    }
    (node_of, kernel_name)
}

/// Which nodes reach an import through `successors`: those that call one (`imports_called`
/// not empty), and backwards from them their callers.
#[cfg_attr(not(feature = "link"), allow(dead_code))]
fn reaching_imports(successors: &[Vec<usize>], imports_called: &[Vec<&str>]) -> Vec<bool> {
    let mut callers: Vec<Vec<usize>> = vec![Vec::new(); successors.len()];
    for (v, list) in successors.iter().enumerate() {
        for &w in list {
            callers[w].push(v);
        }
    }
    let mut reaches: Vec<bool> = imports_called.iter().map(|i| !i.is_empty()).collect();
    let mut pending: Vec<usize> = (0..reaches.len()).filter(|&v| reaches[v]).collect();
    while let Some(v) = pending.pop() {
        for &u in &callers[v] {
            if !reaches[u] {
                reaches[u] = true;
                pending.push(u);
            }
        }
    }
    reaches
}

/// Unique names: each name asked for, or when it is taken, the first of `name#2`, `name#3`, …
/// that is free. Each base name remembers where its search stopped, so a thousand functions
/// of one name cost a thousand tries, not half a million.
#[cfg_attr(not(feature = "link"), allow(dead_code))]
#[derive(Default)]
struct Namer {
    taken: HashSet<String>,
    next_suffix: HashMap<String, usize>,
}

#[cfg_attr(not(feature = "link"), allow(dead_code))]
impl Namer {
    fn take(&mut self, name: String) -> String {
        if !self.taken.contains(&name) {
            self.taken.insert(name.clone());
            return name;
        }
        let suffix = self.next_suffix.entry(name.clone()).or_insert(2);
        loop {
            let candidate = format!("{name}#{suffix}");
            *suffix += 1;
            if self.taken.insert(candidate.clone()) {
                return candidate;
            }
        }
    }
}

/// Which vertices lie on a cycle: those of a strongly connected component with more than one
/// vertex, or with an edge to themselves (Tarjan's algorithm, with an explicit stack).
fn on_cycle(successors: &[Vec<usize>]) -> Vec<bool> {
    const UNSEEN: usize = usize::MAX;
    let n = successors.len();
    let mut out: Vec<bool> = (0..n).map(|v| successors[v].contains(&v)).collect();
    // Per vertex: when the search first reached it, and the earliest vertex still on the
    // component stack that it reaches.
    let (mut index, mut low) = (vec![UNSEEN; n], vec![0; n]);
    let mut stacked = vec![false; n];
    let mut component: Vec<usize> = Vec::new();
    let mut path: Vec<(usize, usize)> = Vec::new();
    let mut counter = 0;
    for root in 0..n {
        if index[root] != UNSEEN {
            continue;
        }
        let mut next = Some(root);
        loop {
            if let Some(v) = next.take() {
                index[v] = counter;
                low[v] = counter;
                counter += 1;
                stacked[v] = true;
                component.push(v);
                path.push((v, 0));
            }
            let Some((v, edge)) = path.last_mut() else { break };
            let v = *v;
            if let Some(&w) = successors[v].get(*edge) {
                *edge += 1;
                if index[w] == UNSEEN {
                    next = Some(w);
                } else if stacked[w] {
                    low[v] = low[v].min(index[w]);
                }
                continue;
            }
            path.pop();
            if let Some(&(u, _)) = path.last() {
                low[u] = low[u].min(low[v]);
            }
            if low[v] == index[v] {
                let at =
                    component.iter().rposition(|&u| u == v).expect("a component's root is stacked");
                let members = component.split_off(at);
                for &u in &members {
                    stacked[u] = false;
                }
                if members.len() > 1 {
                    for u in members {
                        out[u] = true;
                    }
                }
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use rspirv::spirv::{self, Decoration, ExecutionModel, FunctionControl, LinkageType};

    /// A module of `int f(int)` functions built from a list: each with its `OpName` (if any),
    /// its linkage (if any), and the functions it calls (by their place in the list), or `None`
    /// for a declaration. `kernels` names entry points for the listed functions, each added as
    /// clang adds them: an entry function of its own that calls the listed one.
    struct Spec<'a> {
        name: Option<&'a str>,
        linkage: Option<(&'a str, LinkageType)>,
        calls: Option<Vec<usize>>,
    }

    fn def<'a>(name: &'a str, calls: &[usize]) -> Spec<'a> {
        Spec { name: Some(name), linkage: None, calls: Some(calls.to_vec()) }
    }

    fn import(name: &str) -> Spec<'_> {
        Spec { name: Some(name), linkage: Some((name, LinkageType::Import)), calls: None }
    }

    fn module(specs: &[Spec<'_>], kernels: &[(&str, usize)]) -> (Module, Vec<Word>) {
        let mut b = crate::test_support::kernel_builder(&[spirv::Capability::Linkage]);
        let int = b.type_int(32, 0);
        let int_fn = b.type_function(int, vec![int]);
        let ids: Vec<Word> = specs.iter().map(|_| b.id()).collect();
        // Declarations first, as SPIR-V lays them out.
        let mut order: Vec<usize> = (0..specs.len()).collect();
        order.sort_by_key(|&i| specs[i].calls.is_some());
        for i in order {
            let spec = &specs[i];
            b.begin_function(int, Some(ids[i]), FunctionControl::NONE, int_fn).unwrap();
            let p = b.function_parameter(int).unwrap();
            if let Some(calls) = &spec.calls {
                b.begin_block(None).unwrap();
                let mut value = p;
                for &callee in calls {
                    value = b.function_call(int, None, ids[callee], vec![value]).unwrap();
                }
                b.ret_value(value).unwrap();
            }
            b.end_function().unwrap();
            if let Some(name) = spec.name {
                b.name(ids[i], name);
            }
            if let Some((name, kind)) = spec.linkage {
                b.decorate(
                    ids[i],
                    Decoration::LinkageAttributes,
                    vec![Operand::LiteralString(name.into()), Operand::LinkageType(kind)],
                );
            }
        }
        for &(name, kernel) in kernels {
            let entry = b.begin_function(int, None, FunctionControl::NONE, int_fn).unwrap();
            let p = b.function_parameter(int).unwrap();
            b.begin_block(None).unwrap();
            let r = b.function_call(int, None, ids[kernel], vec![p]).unwrap();
            b.ret_value(r).unwrap();
            b.end_function().unwrap();
            b.entry_point(ExecutionModel::Kernel, entry, name, vec![]);
        }
        (b.module(), ids)
    }

    fn graph(
        specs: &[Spec<'_>],
        kernels: &[(&str, usize)],
        imported: &[&str],
    ) -> Vec<(String, Vec<String>)> {
        let (m, _) = module(specs, kernels);
        let imported: Vec<String> = imported.iter().map(|s| s.to_string()).collect();
        reduced_call_graph(&m, &imported).into_iter().collect()
    }

    fn node(name: &str, callees: &[&str]) -> (String, Vec<String>) {
        (name.to_string(), callees.iter().map(|c| c.to_string()).collect())
    }

    #[test]
    fn self_recursion_is_a_cycle_of_one() {
        let specs = [def("k", &[1]), def("fib", &[1, 1])];
        let (m, ids) = module(&specs, &[("k", 0)]);
        assert_eq!(call_cycle(&m), Some(vec![ids[1]]));
        assert_eq!(
            graph(&specs, &[("k", 0)], &[]),
            [node("fib", &["fib"])],
            "k reaches the cycle but is not on it"
        );
        let warning = cycle_warning(&m, &[ids[1]]);
        assert!(warning.starts_with("warning: call cycle in device code ("), "{warning}");
        assert!(warning.contains("): fib -> fib\ncompile with '-g'"), "{warning}");
    }

    #[test]
    fn mutual_recursion_is_found_in_call_order() {
        let specs = [def("k", &[1]), def("a", &[2]), def("b", &[1])];
        let (m, ids) = module(&specs, &[("k", 0)]);
        assert_eq!(call_cycle(&m), Some(vec![ids[1], ids[2]]));
        assert!(cycle_warning(&m, &[ids[1], ids[2]]).contains("): a -> b -> a\n"));
        assert_eq!(graph(&specs, &[], &[]), [node("a", &["b"]), node("b", &["a"])]);
    }

    #[test]
    fn no_cycle_is_none_and_an_image_without_imports_has_no_graph() {
        let specs = [def("k", &[1, 2]), def("a", &[2]), def("b", &[]), import("g")];
        let (m, _) = module(&specs, &[("k", 0)]);
        assert_eq!(call_cycle(&m), None);
        assert!(graph(&specs, &[("k", 0)], &[]).is_empty());
        assert!(graph(&specs, &[("k", 0)], &["g"]).is_empty(), "g is imported but never called");
    }

    #[test]
    fn a_kernel_reaching_an_import_through_a_helper_is_one_node_named_like_the_kernel() {
        // As clang makes it: an entry function (no name) calling the kernel's function `k`,
        // which calls `helper`, which calls the import `g`; `other` reaches nothing.
        let specs = [
            import("g"),
            import("__spirv_BuiltInGlobalInvocationId"),
            def("helper", &[0, 1]),
            def("k", &[2]),
            def("other", &[1]),
        ];
        assert_eq!(
            graph(&specs, &[("k", 3)], &["g"]),
            [node("helper", &["g"]), node("k", &["helper"])],
            "builtins and functions that reach no import are left out"
        );
    }

    #[test]
    fn two_internal_functions_of_one_name_get_numbered_in_module_order() {
        let specs =
            [import("g"), def("helper", &[0]), def("helper", &[0]), def("helper#2", &[1, 2])];
        assert_eq!(
            graph(&specs, &[], &["g"]),
            [
                node("helper", &["g"]),
                node("helper#2", &["g"]),
                node("helper#2#2", &["helper", "helper#2"])
            ]
        );
    }

    #[test]
    fn an_internal_function_named_like_an_import_or_an_export_is_renamed() {
        let specs = [
            import("g"),
            def("g", &[0]),
            Spec {
                name: Some("f"),
                linkage: Some(("f", LinkageType::Export)),
                calls: Some(vec![1]),
            },
            def("f", &[0]),
        ];
        assert_eq!(
            graph(&specs, &[], &["g"]),
            [node("f", &["g#2"]), node("f#2", &["g"]), node("g#2", &["g"])],
            "names the runtime follows across images keep meaning the import and the export"
        );
    }

    #[test]
    fn a_recursive_kernel_is_a_cycle_through_its_own_node() {
        let specs = [def("k", &[0])];
        let (m, ids) = module(&specs, &[("k", 0)]);
        assert_eq!(call_cycle(&m), Some(vec![ids[0]]));
        assert_eq!(graph(&specs, &[("k", 0)], &[]), [node("k", &["k"])]);
    }

    #[test]
    fn names_are_linkage_then_entry_point_then_op_name_then_id() {
        let specs = [
            Spec {
                name: Some("op"),
                linkage: Some(("linked", LinkageType::Export)),
                calls: Some(vec![]),
            },
            def("op", &[]),
            Spec { name: None, linkage: None, calls: Some(vec![]) },
        ];
        let (m, ids) = module(&specs, &[("kern", 1)]);
        assert_eq!(function_name(&m, ids[0]), "linked");
        assert_eq!(function_name(&m, ids[1]), "op");
        assert_eq!(function_name(&m, ids[2]), format!("%{}", ids[2]));
        let entry = m.entry_points[0].operands[1].unwrap_id_ref();
        assert_eq!(function_name(&m, entry), "kern");
    }

    #[test]
    fn long_call_chains_do_not_exhaust_the_stack() {
        // Recursive searches would need a frame per function: 30,000 of them overflow the
        // 2 MiB stack of a test thread.
        const N: usize = 30_000;
        let mut specs: Vec<Spec<'_>> =
            (0..N).map(|i| Spec { name: None, linkage: None, calls: Some(vec![i + 1]) }).collect();
        specs.push(import("g"));
        let (m, ids) = module(&specs, &[]);
        assert_eq!(call_cycle(&m), None);
        let g = reduced_call_graph(&m, &["g".to_string()]);
        assert_eq!(g.len(), N, "every function of the chain reaches g");
        specs[N - 1].calls = Some(vec![0]);
        let (m, _) = module(&specs, &[]);
        assert_eq!(call_cycle(&m).map(|c| c.len()), Some(N));
        assert_eq!(reduced_call_graph(&m, &[]).len(), N, "every function is on the cycle");
        assert_eq!(ids.len(), N + 1);
    }

    #[test]
    fn answers_are_deterministic() {
        let specs =
            [def("k", &[1, 2]), def("a", &[2, 1]), def("b", &[1]), import("g"), def("c", &[3, 1])];
        let first = module(&specs, &[("k", 0)]).0;
        let cycle = call_cycle(&first);
        let reduced = reduced_call_graph(&first, &["g".to_string()]);
        for _ in 0..5 {
            let again = module(&specs, &[("k", 0)]).0;
            assert_eq!(call_cycle(&again), cycle);
            assert_eq!(reduced_call_graph(&again, &["g".to_string()]), reduced);
        }
    }
}
