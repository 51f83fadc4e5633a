//! Call cycles across the images linked for a kernel, found before any driver sees them.
//!
//! Device code may not recurse (OpenCL C and SYCL forbid it), and drivers take it badly: PoCL's
//! kernel compiler overflows its stack and kills the process, the Intel runtime fails the link.
//! A cycle can cross binaries (a function of one library calls one of another that calls back),
//! so no single link unit sees it: `sycl-ld` records each image's reduced call graph
//! (`SYCL/call graph`: the functions on a path to an import or on a cycle, and what they call),
//! and here the graphs of the collected images are joined through their imports and exports,
//! as the driver's link would join them.

use std::collections::HashMap;

use crate::registry::{ImageId, Registry};
use crate::Error;

/// A function of one of the images: which image (index into the collected list), and its
/// name in that image's call graph.
type Node<'a> = (usize, &'a str);

/// Image `id`'s reduced call graph, read in place: each function with its callees.
fn graph_of(registry: &Registry, id: ImageId) -> HashMap<&str, Vec<&str>> {
    registry.view(id).call_graph().map(|(node, callees)| (node, callees.collect())).collect()
}

/// Fails with [`Error::CallCycle`] when the functions of `images` call each other in a cycle.
pub(crate) fn check(registry: &Registry, kernel: &str, images: &[ImageId]) -> Result<(), Error> {
    let graphs: Vec<HashMap<&str, Vec<&str>>> =
        images.iter().map(|&id| graph_of(registry, id)).collect();
    if graphs.iter().all(HashMap::is_empty) {
        return Ok(());
    }
    // Each symbol resolves to the first collected image that exports it, as it did when the
    // images were collected.
    let mut exporter: HashMap<&str, usize> = HashMap::new();
    for (i, &id) in images.iter().enumerate() {
        for symbol in registry.view(id).exported_symbols() {
            exporter.entry(symbol).or_insert(i);
        }
    }
    let edges = |(i, name): Node<'_>| -> Vec<Node<'_>> {
        let Some(callees) = graphs[i].get(name) else { return Vec::new() };
        callees
            .iter()
            .filter_map(|&callee| {
                if graphs[i].contains_key(callee) {
                    return Some((i, callee));
                }
                // An import: the exporting image's function of that name, if it calls on.
                let j = *exporter.get(callee)?;
                graphs[j].contains_key(callee).then_some((j, callee))
            })
            .collect()
    };
    let Some(cycle) = find_cycle(&graphs, edges) else { return Ok(()) };
    let describe = |(i, name): Node<'_>| {
        let binary = &registry.binary(images[i].binary).name;
        format!("{name} ({})", binary.rsplit('/').next().unwrap_or(binary))
    };
    let mut path: Vec<String> = cycle.iter().map(|&n| describe(n)).collect();
    path.push(describe(cycle[0]));
    Err(Error::CallCycle { kernel: kernel.to_string(), cycle: path })
}

/// One cycle of the graph, its nodes in call order; iterative, so a deep call graph cannot
/// overflow our own stack.
fn find_cycle<'a>(
    graphs: &[HashMap<&'a str, Vec<&'a str>>],
    edges: impl Fn(Node<'a>) -> Vec<Node<'a>>,
) -> Option<Vec<Node<'a>>> {
    #[derive(Clone, Copy, PartialEq)]
    enum State {
        OnPath,
        Done,
    }
    let mut state: HashMap<Node<'a>, State> = HashMap::new();
    let mut roots: Vec<Node<'a>> =
        graphs.iter().enumerate().flat_map(|(i, g)| g.keys().map(move |&n| (i, n))).collect();
    roots.sort_unstable();
    for root in roots {
        if state.contains_key(&root) {
            continue;
        }
        // The current path, each node with the callees still to visit.
        let mut path: Vec<(Node<'a>, Vec<Node<'a>>)> = vec![(root, edges(root))];
        state.insert(root, State::OnPath);
        while let Some((_, pending)) = path.last_mut() {
            match pending.pop() {
                Some(next) => match state.get(&next) {
                    Some(State::OnPath) => {
                        let start =
                            path.iter().position(|(n, _)| *n == next).expect("a node on the path");
                        return Some(path[start..].iter().map(|(n, _)| *n).collect());
                    }
                    Some(State::Done) => {}
                    None => {
                        state.insert(next, State::OnPath);
                        path.push((next, edges(next)));
                    }
                },
                None => {
                    let (done, _) = path.pop().expect("a node on the path");
                    state.insert(done, State::Done);
                }
            }
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    fn graph<'a>(entries: &[(&'a str, &[&'a str])]) -> HashMap<&'a str, Vec<&'a str>> {
        entries.iter().map(|(n, c)| (*n, c.to_vec())).collect()
    }

    fn within(graphs: &[HashMap<&'static str, Vec<&'static str>>]) -> Option<Vec<Node<'static>>> {
        // Edges inside each image only, and across by name to the first image defining it.
        find_cycle(graphs, |(i, n)| {
            graphs[i][n]
                .iter()
                .filter_map(|&c| {
                    if graphs[i].contains_key(c) {
                        Some((i, c))
                    } else {
                        graphs.iter().position(|g| g.contains_key(c)).map(|j| (j, c))
                    }
                })
                .collect()
        })
    }

    #[test]
    fn cycles_within_and_across_images() {
        let a = graph(&[("k", &["f"]), ("f", &["g"])]);
        let b = graph(&[("g", &["h"]), ("h", &["f"])]);
        let cycle = within(&[a.clone(), b]).unwrap();
        assert_eq!(cycle, [(0, "f"), (1, "g"), (1, "h")]);
        let self_call = graph(&[("fib", &["fib"])]);
        assert_eq!(within(&[self_call]).unwrap(), [(0, "fib")]);
        // A diamond is not a cycle.
        let diamond = graph(&[("k", &["l", "r"]), ("l", &["x"]), ("r", &["x"]), ("x", &[])]);
        assert_eq!(within(&[diamond]), None);
        assert_eq!(within(&[a]), None, "an import nobody defines ends the path");
    }

    #[test]
    fn a_long_chain_does_not_overflow() {
        let names: Vec<&'static str> =
            (0..50_000).map(|i| &*Box::leak(format!("f{i}").into_boxed_str())).collect();
        let chain: Vec<(&str, Vec<&str>)> = names
            .iter()
            .enumerate()
            .map(|(i, n)| (*n, names.get(i + 1).into_iter().copied().collect()))
            .collect();
        let g: HashMap<&str, Vec<&str>> = chain.into_iter().collect();
        assert_eq!(within(std::slice::from_ref(&g)), None);
        let mut looped = g;
        looped.insert(names[names.len() - 1], vec![names[0]]);
        assert_eq!(within(&[looped]).map(|c| c.len()), Some(names.len()));
    }
}
