//! Tidy checks, run as tests (`cargo test -p xtask`, which `cargo xtask test` runs with the
//! workspace's): what the docs say about the code stays true of it, as rust-analyzer's
//! `xtask/src/tidy.rs` keeps its own docs.
//!
//! - Every path `docs/ARCHITECTURE.md` names exists. A path is a code span that reads as one:
//!   only letters, digits and `_ . - /`, with a `/` in it or a source file's extension
//!   ([`SOURCE_EXTENSIONS`]). It is looked up from the repository root and, under a heading
//!   that names a crate (with a code span ending in `/`, as `runtime/`), from that crate's
//!   directory and its `src/`, so `resolve/mod.rs` and `lib.rs` can be named as the crate's
//!   own. Spans in fenced code blocks and paths under a `target/` directory (build outputs)
//!   are not checked; relative link targets are, from `docs/`.
//! - Every Rust file starts with its `//!` doc: every `.rs` file of the repository (the three
//!   workspaces: this one, `fixtures/`, `fuzz/`) but build scripts and what lies under a
//!   `target/` or hidden directory.
//! - Every `SYCL_TRACE` event the runtime prints (`trace!("event", …)` under `runtime/src/`,
//!   outside comments; `log::trace!` is not one) has a row in the guide's `SYCL_TRACE` events
//!   table ([`GUIDE`]), and every event that table lists is printed somewhere.
//! - The README and `docs/*.md` hold what they show: every Rust snippet is a piece of
//!   compiled code, every link leads somewhere (see `documents.rs`).
//! - The runtime's imports read one way: its rooms are the modules `runtime/src/lib.rs`
//!   declares, in the order it declares them, and a room uses (`crate::ROOM`) only rooms
//!   declared before it; inside a room, a module uses (`super::MODULE`) only the modules its
//!   `mod.rs` declares before it.
//! - Every crate of the workspace declares the workspace's `rust-version`
//!   (`rust-version.workspace = true`), and no dependency in `Cargo.lock` needs a newer Rust.
//!   `[workspace.package]` alone sets it for no crate, and clippy's `incompatible_msrv`, which
//!   the style step runs with `-D warnings`, holds each crate's code to the crate's own
//!   `rust-version` (a standard library item stabilized later is an error); what a dependency
//!   needs no lint sees.
//! - No function of library code (the `src/` of the crates the workspace publishes, unit tests
//!   left out) is over [`MAX_FUNCTION_LINES`] lines, but those [`LONG_FUNCTIONS_ALLOWED`]
//!   lists with the reason.
//!
//! Each check is a function from text to the problems it finds, each naming the file and what
//! to do, so the unit tests below feed each one a bad input and see it fail.

use std::fs;
use std::path::{Path, PathBuf};

use crate::repo_root;

mod documents;

/// The extensions that make a code span with no `/` a file name (`lib.rs`, `Cargo.toml`).
const SOURCE_EXTENSIONS: &[&str] = &["rs", "md", "toml", "cl", "clcpp", "h", "c", "cu", "sh"];

/// The architecture map, relative to the repository root.
const ARCHITECTURE: &str = "docs/ARCHITECTURE.md";

/// The user's guide, relative to the repository root: it holds the table of trace events.
const GUIDE: &str = "docs/GUIDE.md";

/// The heading above the guide's table of trace events.
const TRACE_TABLE_HEADING: &str = "`SYCL_TRACE` events";

#[test]
fn architecture_names_only_paths_that_exist() {
    let root = repo_root();
    let text = read(&root.join(ARCHITECTURE));
    let problems = architecture_problems(&text, &|path| root.join(path).exists());
    assert_no_problems("docs/ARCHITECTURE.md names paths that do not exist", &problems);
}

#[test]
fn every_rust_file_has_a_module_doc() {
    let root = repo_root();
    let mut files = Vec::new();
    rust_files(&root, false, &mut files);
    assert!(files.len() > 50, "found only {} Rust files under {}", files.len(), root.display());
    let problems: Vec<String> = files
        .iter()
        .filter_map(|file| {
            let name = file.strip_prefix(&root).unwrap_or(file).display().to_string();
            module_doc_problem(&name, &read(file))
        })
        .collect();
    assert_no_problems("Rust files without their `//!` doc", &problems);
}

#[test]
fn every_trace_event_is_in_the_guide() {
    let root = repo_root();
    let mut files = Vec::new();
    rust_files(&root.join("runtime/src"), false, &mut files);
    let problems = trace_problems(&read(&root.join(GUIDE)), &texts(&root, &files));
    assert_no_problems("the guide's `SYCL_TRACE` table and the runtime disagree", &problems);
}

#[test]
fn the_runtimes_imports_read_one_way() {
    let root = repo_root();
    let src = root.join("runtime/src");
    let mut files = Vec::new();
    rust_files(&src, false, &mut files);
    let sources: Vec<(String, String)> = files
        .iter()
        .map(|file| {
            let name = file.strip_prefix(&src).unwrap_or(file).display().to_string();
            (name, read(file))
        })
        .collect();
    let problems = layering_problems("runtime/src/", &sources);
    assert_no_problems("a runtime module imports one declared after it", &problems);
}

#[test]
fn every_crate_declares_a_rust_version_its_dependencies_allow() {
    let root = repo_root();
    let manifest = read(&root.join("Cargo.toml"));
    let ours = workspace_rust_version(&manifest)
        .expect("the root Cargo.toml's [workspace.package] has a `rust-version`");
    let output = crate::cargo()
        .args(["metadata", "--format-version", "1", "--all-features", "--locked"])
        .current_dir(&root)
        .output()
        .expect("running cargo metadata");
    assert!(output.status.success(), "cargo metadata: {}", String::from_utf8_lossy(&output.stderr));
    let metadata: serde_json::Value = serde_json::from_slice(&output.stdout).unwrap();
    let members = metadata["workspace_members"].as_array().unwrap();
    let crates: Vec<Crate> = metadata["packages"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| Crate {
            name: p["name"].as_str().unwrap().to_string(),
            version: p["version"].as_str().unwrap().to_string(),
            rust_version: p["rust_version"].as_str().map(str::to_string),
            member: members.contains(&p["id"]),
        })
        .collect();
    assert!(crates.iter().filter(|c| c.member).count() >= 7, "cargo metadata lists no members");
    let problems = rust_version_problems(ours, &crates);
    assert_no_problems("the workspace's `rust-version` is not the true minimum", &problems);
}

/// A crate as `cargo metadata` lists it: the Rust it says it needs (its `rust-version`), and
/// whether it is one of the workspace's.
struct Crate {
    name: String,
    version: String,
    rust_version: Option<String>,
    member: bool,
}

/// The `rust-version` of a root manifest's `[workspace.package]`.
fn workspace_rust_version(manifest: &str) -> Option<&str> {
    let mut section = "";
    for line in manifest.lines().map(str::trim) {
        if line.starts_with('[') {
            section = line;
        } else if section == "[workspace.package]" {
            if let Some(value) = line.strip_prefix("rust-version") {
                return Some(value.trim_start().strip_prefix('=')?.trim().trim_matches('"'));
            }
        }
    }
    None
}

/// Every problem with the workspace's `rust-version`, `ours`: a member that does not declare
/// it, a dependency that needs a newer Rust.
fn rust_version_problems(ours: &str, crates: &[Crate]) -> Vec<String> {
    let mut problems = Vec::new();
    for c in crates {
        let theirs = c.rust_version.as_deref();
        if c.member && theirs != Some(ours) {
            problems.push(format!(
                "{}: declares rust-version {}, not the workspace's {ours}: add \
                 `rust-version.workspace = true` under its [package], so that cargo and clippy's \
                 `incompatible_msrv` hold it to {ours}",
                c.name,
                theirs.unwrap_or("(none)")
            ));
        } else if let Some(theirs) = theirs.filter(|v| !c.member && version(v) > version(ours)) {
            problems.push(format!(
                "{} {} needs Rust {theirs}, newer than the workspace's rust-version {ours}: raise \
                 `rust-version` in the root Cargo.toml's [workspace.package] to {theirs}, or keep \
                 an older {} in Cargo.lock (`cargo update -p {} --precise VERSION`)",
                c.name, c.version, c.name, c.name
            ));
        }
    }
    problems
}

/// A Rust version's numbers, a missing one as 0: `1.88` is `[1, 88, 0]`.
fn version(text: &str) -> [u32; 3] {
    let mut parts = text.split('.').map(|n| n.parse().unwrap_or(0));
    [(); 3].map(|()| parts.next().unwrap_or(0))
}

/// Panics with every problem, one a line, under `title`.
fn assert_no_problems(title: &str, problems: &[String]) {
    if !problems.is_empty() {
        panic!("\n{title}:\n\n{}\n", problems.join("\n"));
    }
}

/// Each file with its text, named by its path from `root`.
fn texts(root: &Path, files: &[PathBuf]) -> Vec<(String, String)> {
    files
        .iter()
        .map(|file| (file.strip_prefix(root).unwrap_or(file).display().to_string(), read(file)))
        .collect()
}

fn read(path: &Path) -> String {
    fs::read_to_string(path).unwrap_or_else(|e| panic!("reading {}: {e}", path.display()))
}

/// Every `.rs` file under `dir`, build scripts (a `build.rs` beside a `Cargo.toml`) only with
/// `build_scripts`, skipping `target/` and hidden directories, in a stable order.
fn rust_files(dir: &Path, build_scripts: bool, files: &mut Vec<PathBuf>) {
    let mut entries: Vec<PathBuf> = fs::read_dir(dir)
        .unwrap_or_else(|e| panic!("listing {}: {e}", dir.display()))
        .map(|entry| entry.unwrap_or_else(|e| panic!("listing {}: {e}", dir.display())).path())
        .collect();
    entries.sort();
    for path in entries {
        let name = path.file_name().and_then(|n| n.to_str()).unwrap_or("");
        if path.is_dir() {
            if name != "target" && !name.starts_with('.') {
                rust_files(&path, build_scripts, files);
            }
        } else if name.ends_with(".rs")
            && (build_scripts || !(name == "build.rs" && dir.join("Cargo.toml").exists()))
        {
            files.push(path);
        }
    }
}

/// The problem with a Rust file whose first non-blank line is not a `//!` doc, if it has one.
fn module_doc_problem(name: &str, text: &str) -> Option<String> {
    let first = text.lines().map(str::trim).find(|line| !line.is_empty());
    match first {
        Some(line) if line.starts_with("//!") => None,
        _ => Some(format!(
            "{name}: starts without a `//!` doc: begin it with a short `//!` paragraph saying \
             what the module owns (and what it must never do)"
        )),
    }
}

/// Every problem with the paths the architecture map names; `exists` says whether a path,
/// relative to the repository root, exists.
fn architecture_problems(text: &str, exists: &dyn Fn(&str) -> bool) -> Vec<String> {
    let markdown = Markdown::parse(text);
    let mut problems = Vec::new();
    for span in &markdown.spans {
        if !looks_like_path(&span.text) || is_build_output(&span.text) {
            continue;
        }
        let mut tried = vec![span.text.clone()];
        if let Some(dir) = markdown.crate_dir(span.line).filter(|dir| *dir != span.text) {
            tried.push(format!("{dir}{}", span.text));
            tried.push(format!("{dir}src/{}", span.text));
        }
        if !tried.iter().any(|path| exists(path)) {
            problems.push(format!(
                "{ARCHITECTURE}:{}: `{}` names nothing in the repository (looked for {}): \
                 correct the path, or, where the code moved or went, the map's entry",
                span.line,
                span.text,
                tried.join(", ")
            ));
        }
    }
    for (line, target) in link_targets(text) {
        if !exists(&format!("docs/{target}")) {
            problems.push(format!(
                "{ARCHITECTURE}:{line}: the link to `{target}` leads nowhere (looked for \
                 docs/{target}): correct the link"
            ));
        }
    }
    problems
}

/// Whether a code span reads as a repository path (see the module doc).
fn looks_like_path(span: &str) -> bool {
    let allowed = |c: char| c.is_ascii_alphanumeric() || matches!(c, '_' | '.' | '-' | '/');
    if span.is_empty()
        || !span.chars().all(allowed)
        || span.starts_with(['.', '-', '/'])
        || span.contains("//")
        || span.contains("..")
    {
        return false;
    }
    span.contains('/')
        || span.rsplit_once('.').is_some_and(|(_, ext)| SOURCE_EXTENSIONS.contains(&ext))
}

/// Whether a path lies under a `target/` directory: what a build makes, absent from a checkout.
fn is_build_output(path: &str) -> bool {
    path.split('/').any(|component| component == "target")
}

/// What the checks read of a Markdown text: its code spans and its headings, outside fenced
/// code blocks.
#[derive(Debug, Default)]
struct Markdown {
    spans: Vec<CodeSpan>,
    /// Each heading's line (from 1) and level (its number of `#`).
    headings: Vec<(usize, usize)>,
}

/// A code span of a Markdown text.
#[derive(Debug)]
struct CodeSpan {
    text: String,
    /// The line (from 1) it starts on.
    line: usize,
}

impl Markdown {
    /// Reads the code spans and headings of `text`. A span opens with a run of backticks and
    /// closes with a run as long (so ``` `` `x` `` ``` holds `` `x` ``), and may run over line
    /// breaks, which become spaces.
    fn parse(text: &str) -> Markdown {
        let mut markdown = Markdown::default();
        let mut fenced = false;
        // An open span: its opening run's length, its text so far, the line it started on.
        let mut open: Option<(usize, String, usize)> = None;
        for (index, line) in text.lines().enumerate() {
            if open.is_none() && line.trim_start().starts_with("```") {
                fenced = !fenced;
                continue;
            }
            if fenced {
                continue;
            }
            let level = line.len() - line.trim_start_matches('#').len();
            if open.is_none() && level > 0 && line[level..].starts_with(' ') {
                markdown.headings.push((index + 1, level));
            }
            if let Some((_, text, _)) = open.as_mut() {
                text.push(' ');
            }
            let mut rest = line;
            while let Some(start) = rest.find('`') {
                let run = rest[start..].len() - rest[start..].trim_start_matches('`').len();
                open = match open.take() {
                    Some((length, mut text, line)) => {
                        text.push_str(&rest[..start]);
                        if run == length {
                            markdown.spans.push(CodeSpan { text: text.trim().to_string(), line });
                            None
                        } else {
                            text.push_str(&rest[start..start + run]);
                            Some((length, text, line))
                        }
                    }
                    None => Some((run, String::new(), index + 1)),
                };
                rest = &rest[start + run..];
            }
            if let Some((_, text, _)) = open.as_mut() {
                text.push_str(rest);
            }
        }
        markdown
    }

    /// The crate directory a line is under: that of the nearest heading above it that names
    /// one (its first code span ending in `/`), unless a heading of the same or a higher
    /// level comes between them.
    fn crate_dir(&self, line: usize) -> Option<&str> {
        let mut dirs: Vec<(usize, Option<&str>)> = Vec::new();
        for &(heading, level) in self.headings.iter().take_while(|(at, _)| *at <= line) {
            dirs.retain(|&(outer, _)| outer < level);
            let dir = self
                .spans
                .iter()
                .filter(|span| span.line == heading)
                .map(|span| span.text.as_str())
                .find(|text| text.ends_with('/') && looks_like_path(text));
            dirs.push((level, dir));
        }
        dirs.iter().rev().find_map(|&(_, dir)| dir)
    }
}

/// The relative targets of the Markdown links of a text, outside fenced code blocks and
/// code spans, with their lines; anchors dropped, web and in-page links left out.
fn link_targets(text: &str) -> Vec<(usize, String)> {
    markdown_links(text)
        .into_iter()
        .filter_map(|(line, target)| {
            let path = target.split('#').next().unwrap_or("");
            (!path.is_empty() && !is_web(path)).then(|| (line, path.to_string()))
        })
        .collect()
}

/// Whether a link target is a web (or mail) address rather than a path.
fn is_web(target: &str) -> bool {
    target.contains("://") || target.starts_with("mailto:")
}

/// The targets of the Markdown links of a text (`[text](target)`, anchors kept), outside
/// fenced code blocks and code spans, with their lines.
fn markdown_links(text: &str) -> Vec<(usize, String)> {
    let mut targets = Vec::new();
    let mut fenced = false;
    for (index, line) in text.lines().enumerate() {
        if line.trim_start().starts_with("```") {
            fenced = !fenced;
            continue;
        }
        if fenced {
            continue;
        }
        // Code spans are the odd pieces between backticks.
        let prose: String = line.split('`').step_by(2).collect::<Vec<_>>().join(" ");
        let mut rest = prose.as_str();
        while let Some(start) = rest.find("](") {
            rest = &rest[start + 2..];
            let Some(end) = rest.find(')') else { break };
            targets.push((index + 1, rest[..end].to_string()));
            rest = &rest[end..];
        }
    }
    targets
}

/// Every disagreement between the guide's `SYCL_TRACE` events table and the events the
/// runtime's `sources` (file name, text) print.
fn trace_problems(guide: &str, sources: &[(String, String)]) -> Vec<String> {
    let mut problems = Vec::new();
    let Some(documented) = trace_table(guide) else {
        return vec![format!(
            "{GUIDE}: no table under a heading `{TRACE_TABLE_HEADING}`: restore it, one row per \
             event the runtime prints"
        )];
    };
    let mut printed: Vec<String> = Vec::new();
    for (name, text) in sources {
        for (line, event) in trace_events(text) {
            match event {
                Ok(event) => {
                    if !documented.contains(&event) {
                        problems.push(format!(
                            "{GUIDE}: the `SYCL_TRACE` table lacks `{event}`, which {name}:{line} \
                             prints: add a row saying when the runtime prints it"
                        ));
                    }
                    printed.push(event);
                }
                Err(found) => problems.push(format!(
                    "{name}:{line}: `trace!` with `{found}` for its event: give the event as a \
                     string literal, so that this check can find it"
                )),
            }
        }
    }
    for event in documented {
        if !printed.contains(&event) {
            problems.push(format!(
                "{GUIDE}: the `SYCL_TRACE` table lists `{event}`, which nothing under \
                 runtime/src prints: remove its row, or name the event the code prints now"
            ));
        }
    }
    problems
}

/// The events the guide's `SYCL_TRACE` table lists: the code spans of its rows' first
/// cells. `None` when there is no such table.
fn trace_table(guide: &str) -> Option<Vec<String>> {
    let mut lines =
        guide.lines().skip_while(|l| !(l.starts_with('#') && l.contains(TRACE_TABLE_HEADING)));
    lines.next()?;
    let rows: Vec<&str> = lines
        .skip_while(|l| l.trim().is_empty())
        .take_while(|l| l.trim_start().starts_with('|'))
        .skip(2) // the header and the delimiter row
        .collect();
    if rows.is_empty() {
        return None;
    }
    let mut events = Vec::new();
    for row in rows {
        let first = row.trim_start().trim_start_matches('|').split('|').next().unwrap_or("");
        events.extend(first.split('`').skip(1).step_by(2).map(str::to_string));
    }
    Some(events)
}

/// Each `trace!` call's event in a source, with the line it is on: the string literal the
/// call starts with, or, as an error, what stands there instead. A `trace!(` in a comment, in
/// a longer name or as `log::trace!` is not a call of ours.
fn trace_events(text: &str) -> Vec<(usize, Result<String, String>)> {
    let mut events = Vec::new();
    let mut rest = text;
    while let Some(at) = rest.find("trace!(") {
        let before = &text[..text.len() - rest.len() + at];
        let after = &rest[at + "trace!(".len()..];
        rest = after;
        let line_start = before.rsplit('\n').next().unwrap_or("");
        let ours = !before.ends_with(|c: char| c.is_alphanumeric() || c == '_')
            && !before.ends_with("log::")
            && !line_start.contains("//");
        if !ours {
            continue;
        }
        let arguments = after.trim_start();
        let line = text[..text.len() - arguments.len()].matches('\n').count() + 1;
        let event = match arguments.strip_prefix('"').and_then(|s| s.split_once('"')) {
            Some((event, _)) => Ok(event.to_string()),
            None => Err(arguments.split([',', ')']).next().unwrap_or("").trim().to_string()),
        };
        events.push((line, event));
    }
    events
}

/// The modules a `lib.rs` or `mod.rs` declares (`mod name;`, any visibility), in order.
fn declared_modules(text: &str) -> Vec<String> {
    text.lines()
        .map(|line| line.trim())
        .filter(|line| !line.starts_with("//"))
        .filter_map(|line| {
            let rest =
                line.strip_prefix("pub(crate) ").or(line.strip_prefix("pub ")).unwrap_or(line);
            let name = rest.strip_prefix("mod ")?.strip_suffix(';')?;
            Some(name.to_string())
        })
        .collect()
}

/// The names used after `prefix` (`crate::`, `super::`) in `text`'s code, outside comments,
/// with their line numbers.
fn paths_after(text: &str, prefix: &str) -> Vec<(usize, String)> {
    let mut found = Vec::new();
    for (n, line) in text.lines().enumerate() {
        let code = line.split("//").next().unwrap_or("");
        let mut rest = code;
        while let Some(at) = rest.find(prefix) {
            let before = rest[..at].chars().next_back();
            rest = &rest[at + prefix.len()..];
            if before.is_some_and(|c| c.is_alphanumeric() || c == '_' || c == '$') {
                continue;
            }
            let name: String =
                rest.chars().take_while(|c| c.is_ascii_alphanumeric() || *c == '_').collect();
            if !name.is_empty() {
                found.push((n + 1, name));
            }
        }
    }
    found
}

/// Every import against the declared order in `sources` (paths relative to the crate's
/// `src/`, shown after `shown`): a room's `crate::ROOM` of a room declared after it in
/// `lib.rs`, and a module's `super::MODULE` of a sibling declared after it in its `mod.rs`.
fn layering_problems(shown: &str, sources: &[(String, String)]) -> Vec<String> {
    let text_of = |name: &str| sources.iter().find(|(n, _)| n == name).map(|(_, t)| t.as_str());
    let rooms = declared_modules(text_of("lib.rs").unwrap_or(""));
    let mut problems = Vec::new();
    for (name, text) in sources {
        let mut parts: Vec<&str> = name.trim_end_matches(".rs").split('/').collect();
        if parts == ["lib"] {
            continue;
        }
        if parts.last() == Some(&"mod") {
            parts.pop();
        }
        let Some(room) = rooms.iter().position(|r| r == parts[0]) else { continue };
        for (line, used) in paths_after(text, "crate::") {
            if let Some(at) = rooms.iter().position(|r| *r == used) {
                if at > room {
                    problems.push(format!(
                        "{shown}{name}:{line}: the `{}` room uses `crate::{used}`, which lib.rs \
                         declares after it: move what it needs up, or the code down",
                        rooms[room]
                    ));
                }
            }
        }
        // A module inside a room, at any depth, against the modules its parents declare after
        // it: `super::X` (or `crate::ROOM::…::X`) of a sibling declared later in the parent's
        // `mod.rs`, `super::super::X` of one declared after its parent, and so on up. A folder
        // below a room's (a driver's: `backend/cuda/`) is one unit: its files may use each
        // other, but nothing declared after the folder.
        for up in 1..parts.len() {
            if up == 1 && parts.len() > 2 {
                continue;
            }
            let (parent, me) = (&parts[..parts.len() - up], parts[parts.len() - up]);
            let parent_file = format!("{}/mod.rs", parent.join("/"));
            let siblings = declared_modules(text_of(&parent_file).unwrap_or(""));
            let Some(mine) = siblings.iter().position(|m| m == me) else { continue };
            let prefixes = ["super::".repeat(up), format!("crate::{}::", parent.join("::"))];
            for prefix in &prefixes {
                for (line, used) in paths_after(text, prefix) {
                    if siblings.iter().position(|m| *m == used).is_some_and(|at| at > mine) {
                        problems.push(format!(
                            "{shown}{name}:{line}: `{me}` uses `{prefix}{used}`, which \
                             {shown}{parent_file} declares after it: reorder the declarations \
                             or move the code"
                        ));
                    }
                }
            }
        }
    }
    problems
}

/// The most lines a function of library code may have, from its `fn` line to its closing
/// brace: past it, a function does several things, which want names of their own.
const MAX_FUNCTION_LINES: usize = 120;

/// The functions of library code allowed past [`MAX_FUNCTION_LINES`]: the file (from the
/// repository root), the function's name (every function of that name in the file), and why.
/// Issue 39 allows one: a `match` of IR text generators, should splitting it read worse; none
/// needs it now (`sycl-ld/src/ptx/shim.rs`'s `Builtin::define` gives each builtin family a
/// function). An entry whose function is no longer long is reported, so the list only shrinks.
const LONG_FUNCTIONS_ALLOWED: &[(&str, &str, &str)] = &[];

#[test]
fn no_library_function_is_over_the_length_bound() {
    let root = repo_root();
    let mut sources = Vec::new();
    for dir in library_source_dirs(&root) {
        let mut files = Vec::new();
        rust_files(&dir, false, &mut files);
        for file in files {
            let name = file.strip_prefix(&root).unwrap_or(&file).display().to_string();
            sources.push((name, read(&file)));
        }
    }
    assert!(
        sources.len() > 50,
        "found only {} library files under {}",
        sources.len(),
        root.display()
    );
    let problems = long_function_problems(&sources, LONG_FUNCTIONS_ALLOWED);
    assert_no_problems("functions of library code over the length bound", &problems);
}

/// The `src/` of every crate of the workspace that is published: library code, as against the
/// tools (`xtask`) and the end-to-end tests (`sycl-tests`), which say `publish = false`.
fn library_source_dirs(root: &Path) -> Vec<PathBuf> {
    let manifest = read(&root.join("Cargo.toml"));
    let members = manifest
        .lines()
        .find_map(|line| line.trim().strip_prefix("members"))
        .expect("the root Cargo.toml lists its members on one line");
    members
        .split('"')
        .skip(1)
        .step_by(2)
        .map(|member| root.join(member))
        .filter(|dir| {
            let manifest = read(&dir.join("Cargo.toml"));
            !manifest.lines().any(|line| line.replace(' ', "") == "publish=false")
        })
        .map(|dir| dir.join("src"))
        .collect()
}

/// Every function of `sources` (name, text) over [`MAX_FUNCTION_LINES`] that `allowed` does
/// not list, and every entry of `allowed` whose function is not over it.
fn long_function_problems(
    sources: &[(String, String)],
    allowed: &[(&str, &str, &str)],
) -> Vec<String> {
    let mut problems = Vec::new();
    let mut still_long = Vec::new();
    for (name, text) in sources {
        for function in function_lengths(text) {
            if function.lines <= MAX_FUNCTION_LINES {
                continue;
            }
            if allowed.iter().any(|(file, f, _)| file == name && *f == function.name) {
                still_long.push((name.as_str(), function.name));
                continue;
            }
            problems.push(format!(
                "{name}:{}: `fn {}` is {} lines, over {MAX_FUNCTION_LINES}: split it by concern \
                 (or, if that reads worse, list it in LONG_FUNCTIONS_ALLOWED in \
                 xtask/src/tidy.rs with the reason)",
                function.line, function.name, function.lines
            ));
        }
    }
    for (file, f, _) in allowed {
        if !still_long.iter().any(|(name, long)| name == file && long == f) {
            problems.push(format!(
                "LONG_FUNCTIONS_ALLOWED in xtask/src/tidy.rs lists `fn {f}` of {file}, which is \
                 no longer over {MAX_FUNCTION_LINES} lines (or is gone): drop the entry"
            ));
        }
    }
    problems
}

/// A function as [`function_lengths`] finds it.
struct FunctionLength {
    /// The line of its `fn`, from 1.
    line: usize,
    name: String,
    /// From its `fn` line to the line of its closing brace.
    lines: usize,
}

/// Every function with a body in `text`, nested ones too, but none of an item under
/// `#[cfg(test)]` (unit tests are not library code). Read as text: comments and literals are
/// blanked out first, so that no brace in them counts.
fn function_lengths(text: &str) -> Vec<FunctionLength> {
    let code: Vec<char> = blank_comments_and_literals(text).chars().collect();
    let line_at = |at: usize| 1 + code[..at].iter().filter(|c| **c == '\n').count();
    let is_ident = |c: Option<&char>| c.is_some_and(|c| c.is_alphanumeric() || *c == '_');
    let cfg_test: Vec<char> = "#[cfg(test)]".chars().collect();
    let mut functions = Vec::new();
    let mut at = 0;
    while at < code.len() {
        if code[at..].starts_with(&cfg_test) {
            // The item under the attribute, which ends with its `;` or its block.
            at = match extent(&code, at) {
                Extent::Block(close) | Extent::Declaration(close) => close + 1,
                Extent::Unclosed => code.len(),
            };
            continue;
        }
        let fn_here = code[at..].starts_with(&['f', 'n'])
            && !is_ident(at.checked_sub(1).and_then(|b| code.get(b)))
            && code.get(at + 2).is_some_and(|c| c.is_whitespace());
        if fn_here {
            let name_at = (at + 2..code.len()).find(|&i| !code[i].is_whitespace());
            let name: String = name_at
                .map(|n| code[n..].iter().take_while(|c| is_ident(Some(c))).collect())
                .unwrap_or_default();
            if let (false, Extent::Block(close)) = (name.is_empty(), extent(&code, at)) {
                let line = line_at(at);
                functions.push(FunctionLength { line, name, lines: line_at(close) - line + 1 });
            }
        }
        at += 1;
    }
    functions
}

/// How the item (or signature) starting at `from` ends.
enum Extent {
    /// With a block, whose closing brace is here.
    Block(usize),
    /// With a `;` outside brackets, here, before any block (`fn f();`, `mod m;`).
    Declaration(usize),
    /// Not before the text ends.
    Unclosed,
}

/// Where the item starting at `from` ends (see [`Extent`]).
fn extent(code: &[char], from: usize) -> Extent {
    let mut brackets = 0usize;
    let mut depth = 0usize;
    for (i, c) in code.iter().enumerate().skip(from) {
        match c {
            '(' | '[' if depth == 0 => brackets += 1,
            ')' | ']' if depth == 0 => brackets = brackets.saturating_sub(1),
            ';' if depth == 0 && brackets == 0 => return Extent::Declaration(i),
            '{' => depth += 1,
            '}' if depth > 0 => {
                depth -= 1;
                if depth == 0 {
                    return Extent::Block(i);
                }
            }
            _ => {}
        }
    }
    Extent::Unclosed
}

/// `text` with every comment, string literal and character literal made spaces (line breaks
/// kept, so lines still count): what is left is code, whose braces are the blocks'.
fn blank_comments_and_literals(text: &str) -> String {
    let chars: Vec<char> = text.chars().collect();
    let mut out = String::with_capacity(text.len());
    let blank = |out: &mut String, span: &[char]| {
        out.extend(span.iter().map(|c| if *c == '\n' { '\n' } else { ' ' }));
    };
    let mut i = 0;
    while i < chars.len() {
        let rest = &chars[i..];
        let ident_before = i > 0 && (chars[i - 1].is_alphanumeric() || chars[i - 1] == '_');
        let end = if rest.starts_with(&['/', '/']) {
            rest.iter().position(|c| *c == '\n').unwrap_or(rest.len())
        } else if rest.starts_with(&['/', '*']) {
            let mut depth = 0;
            let mut j = 0;
            while j < rest.len() {
                if rest[j..].starts_with(&['/', '*']) {
                    depth += 1;
                    j += 2;
                } else if rest[j..].starts_with(&['*', '/']) {
                    depth -= 1;
                    j += 2;
                    if depth == 0 {
                        break;
                    }
                } else {
                    j += 1;
                }
            }
            j
        } else if let Some(len) = raw_string_len(rest).filter(|_| !ident_before) {
            len
        } else if rest[0] == '"' || (rest.starts_with(&['b', '"']) && !ident_before) {
            let mut j = rest.iter().position(|c| *c == '"').unwrap_or(0) + 1;
            while j < rest.len() && rest[j] != '"' {
                j += if rest[j] == '\\' { 2 } else { 1 };
            }
            (j + 1).min(rest.len())
        } else if rest[0] == '\'' && rest.get(1) == Some(&'\\') && rest.len() > 3 {
            // An escaped character: `'\n'`, `'\''`, `'\u{7b}'`.
            3 + rest[3..].iter().position(|c| *c == '\'').map_or(rest.len() - 3, |p| p + 1)
        } else if rest[0] == '\'' && rest.get(2) == Some(&'\'') {
            3
        } else {
            // Code, a lifetime (`'a`) among it.
            out.push(rest[0]);
            i += 1;
            continue;
        };
        blank(&mut out, &rest[..end]);
        i += end;
    }
    out
}

/// The length of the raw string literal (`r"…"`, `r#"…"#`, `br"…"`) that `rest` starts with.
fn raw_string_len(rest: &[char]) -> Option<usize> {
    let start =
        if rest.starts_with(&['b', 'r']) { 2 } else { usize::from(rest.first() == Some(&'r')) };
    if start == 0 {
        return None;
    }
    let hashes = rest[start..].iter().take_while(|c| **c == '#').count();
    if rest.get(start + hashes) != Some(&'"') {
        return None;
    }
    let body = start + hashes + 1;
    let closing: Vec<char> = std::iter::once('"').chain(std::iter::repeat_n('#', hashes)).collect();
    let end = (body..rest.len()).find(|&j| rest[j..].starts_with(&closing))?;
    Some(end + closing.len())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_missing_path_is_reported_with_where_it_was_looked_for() {
        let map = "\
# Architecture
Read [the design](DESIGN.md) and [gone](GONE.md#top), see <https://example.com>.
```
`not/checked.rs` in a fence
```
### `runtime/` (package `sycl-runtime`)
- `lib.rs`: the root. `resolve/mod.rs` and `resolve/gone.rs`, `target/debug/sycl-ld`,
  `sycl_runtime::Queue`, `SYCL/call graph`, `libcuda.so.1`, `runtime/src/lib.rs`.
### `sycl-ld/`
- `build.rs`, `lib.rs`, `` `odd` ``, `a
  /b.rs` over a line break.
## Invariants
- `lib.rs` under no crate.
";
        let files = [
            "docs/DESIGN.md",
            "runtime/",
            "runtime/src/lib.rs",
            "runtime/src/resolve/mod.rs",
            "sycl-ld/",
            "sycl-ld/build.rs",
        ];
        let problems = architecture_problems(map, &|path| files.contains(&path));
        let named: Vec<&str> = problems.iter().map(|p| p.split('`').nth(1).unwrap_or("")).collect();
        assert_eq!(named, ["resolve/gone.rs", "lib.rs", "lib.rs", "GONE.md"], "{problems:#?}");
        assert!(problems[0].starts_with("docs/ARCHITECTURE.md:7: `resolve/gone.rs`"));
        assert!(problems[0].contains("runtime/src/resolve/gone.rs"), "{}", problems[0]);
        assert!(problems[1].starts_with("docs/ARCHITECTURE.md:10: `lib.rs`"), "{}", problems[1]);
        assert!(problems[2].starts_with("docs/ARCHITECTURE.md:13: `lib.rs`"), "{}", problems[2]);
        assert!(problems[3].contains("docs/GONE.md"), "{}", problems[3]);
    }

    #[test]
    fn spans_are_found_across_lines_and_by_run_length() {
        let markdown =
            Markdown::parse("# A `x/`\na `b` c `` d`e `` `f\ng`\n```\n`no` fenced\n```\n`h` `i`");
        let spans: Vec<(&str, usize)> =
            markdown.spans.iter().map(|s| (s.text.as_str(), s.line)).collect();
        assert_eq!(spans, [("x/", 1), ("b", 2), ("d`e", 2), ("f g", 2), ("h", 7), ("i", 7)]);
        assert_eq!(markdown.headings, [(1, 1)]);
        assert_eq!(markdown.crate_dir(7), Some("x/"));
        assert!(looks_like_path("runtime/src/resolve/mod.rs"));
        assert!(looks_like_path("Cargo.toml"));
        assert!(!looks_like_path("sycl_runtime::Queue"));
        assert!(!looks_like_path(".note.sycl.images"));
        assert!(!looks_like_path("SYCL/call graph"));
        assert!(!looks_like_path("libcuda.so.1"));
    }

    #[test]
    fn a_module_without_its_doc_is_reported() {
        assert_eq!(module_doc_problem("a.rs", "\n//! Owns a.\nfn a() {}\n"), None);
        let problem = module_doc_problem("b.rs", "// Owns b.\nfn b() {}\n").unwrap();
        assert!(problem.starts_with("b.rs: starts without a `//!` doc"), "{problem}");
        assert!(module_doc_problem("c.rs", "").is_some());
        assert!(module_doc_problem("d.rs", "/// An item doc.\nfn d() {}\n").is_some());
    }

    #[test]
    fn trace_events_and_the_guide_table_are_compared_both_ways() {
        let guide = "\
### `SYCL_TRACE` events

| event | when |
|---|---|
| `discover` | found |
| `load`, `unload` | a file |
| `stale` | never printed |

## Next
";
        let source = "\
trace!(\"discover\", \"{x}\");
    crate::trace::trace!(
        \"inline\",
        \"{y}\"
    );
trace!(\"load\", \"a\"); trace!(\"unload\", \"b\");
trace!(EVENT, \"c\");
// trace!(\"commented\", \"d\"); log::trace!(\"logged\"); my_trace!(\"other\");
";
        let problems = trace_problems(guide, &[("runtime/src/x.rs".into(), source.into())]);
        assert_eq!(problems.len(), 3, "{problems:#?}");
        assert!(problems[0].contains("lacks `inline`, which runtime/src/x.rs:3 prints"));
        assert!(problems[1].starts_with("runtime/src/x.rs:7: `trace!` with `EVENT`"));
        assert!(problems[2].contains("lists `stale`, which nothing under runtime/src prints"));
        assert!(trace_problems("# no table\n", &[])[0].contains("no table"));
    }

    #[test]
    fn an_import_against_the_declared_order_is_reported() {
        let source = |name: &str, text: &str| (name.to_string(), text.to_string());
        let sources = [
            source("lib.rs", "mod error;\nmod registry;\n// mod commented;\nmod launch;\n"),
            source(
                "registry.rs",
                "//! r\nuse crate::error::Error; // crate::launch in a comment\n",
            ),
            source("error.rs", "//! e\nfn f() { let _ = crate::registry::X; }\n"),
            source("launch/mod.rs", "//! l\npub(crate) mod queue;\nmod driver;\nmod kernel;\n"),
            source("launch/queue.rs", "use super::kernel::Launch;\nuse crate::error::Error;\n"),
            source("launch/kernel.rs", "use super::queue::Queue;\nuse super::Item;\n"),
            // A driver's folder: its files use each other (a before b and b before a), and what
            // the room declares before the folder, not after.
            source("launch/driver/mod.rs", "//! d\nmod a;\nmod b;\nmod c;\n"),
            source("launch/driver/a.rs", "use super::b::B;\nuse crate::launch::kernel::K;\n"),
            source("launch/driver/b.rs", "use super::a::A;\nuse super::super::queue::Q;\n"),
            source("launch/driver/c.rs", "use super::super::kernel::K;\n"),
        ];
        let problems = layering_problems("src/", &sources);
        assert_eq!(problems.len(), 4, "{problems:#?}");
        assert!(problems[0].starts_with("src/error.rs:2: the `error` room uses `crate::registry`"));
        assert!(problems[1].starts_with("src/launch/queue.rs:1: `queue` uses `super::kernel`"));
        assert!(problems[2]
            .starts_with("src/launch/driver/a.rs:2: `driver` uses `crate::launch::kernel`"));
        assert!(problems[3]
            .starts_with("src/launch/driver/c.rs:1: `driver` uses `super::super::kernel`"));
    }

    #[test]
    fn a_crate_without_the_rust_version_and_a_dependency_needing_more_are_reported() {
        let manifest = "[workspace]\nmembers = [\"a\"]\n\n[workspace.package]\n\
                        edition = \"2021\"\nrust-version = \"1.88\"\n\n[lints]\n";
        assert_eq!(workspace_rust_version(manifest), Some("1.88"));
        assert_eq!(workspace_rust_version("[package]\nrust-version = \"1.80\"\n"), None);
        let c = |name: &str, rust_version: Option<&str>, member| Crate {
            name: name.into(),
            version: "0.1.0".into(),
            rust_version: rust_version.map(Into::into),
            member,
        };
        let crates = [
            c("ours", Some("1.88"), true),
            c("forgot", None, true),
            c("older", Some("1.85"), true),
            c("old-dep", Some("1.60.0"), false),
            c("same-dep", Some("1.88.0"), false),
            c("no-msrv-dep", None, false),
            c("new-dep", Some("1.89.1"), false),
        ];
        let problems = rust_version_problems("1.88", &crates);
        assert_eq!(problems.len(), 3, "{problems:#?}");
        assert!(problems[0].starts_with("forgot: declares rust-version (none), not the workspace's 1.88: add `rust-version.workspace = true`"));
        assert!(problems[1].starts_with("older: declares rust-version 1.85,"));
        assert!(problems[2].starts_with(
            "new-dep 0.1.0 needs Rust 1.89.1, newer than the workspace's rust-version 1.88: raise"
        ));
    }

    #[test]
    fn a_long_function_is_reported_unless_allowed_and_a_stale_allowance_too() {
        let function = |name: &str, lines: usize| {
            let body = "    let s = \"}\"; // }\n".repeat(lines - 2);
            format!("/// `{name}`: {{\npub(crate) fn {name}(x: [u8; 2]) -> u8 {{\n{body}}}\n")
        };
        let tests = format!("#[cfg(test)]\nmod tests {{\n{}}}\n", function("long_test", 200));
        let text = format!(
            "//! m\n{}{}#[cfg(test)]\nmod declared;\n{}{tests}{}",
            function("fits", MAX_FUNCTION_LINES),
            function("long", MAX_FUNCTION_LINES + 1),
            "fn declared(&self);\nconst C: char = '{';\nconst D: char = '\\'';\nfn r() { r#\"}\"#; }\n",
            function("allowed", 300),
        );
        let lengths: Vec<(String, usize)> =
            function_lengths(&text).into_iter().map(|f| (f.name, f.lines)).collect();
        assert_eq!(
            lengths,
            [
                ("fits".to_string(), 120),
                ("long".into(), 121),
                ("r".into(), 1),
                ("allowed".into(), 300)
            ]
        );
        let sources = [("a/src/m.rs".to_string(), text)];
        let allowed = [("a/src/m.rs", "allowed", "a match of IR text"), ("a/src/m.rs", "fits", "")];
        let problems = long_function_problems(&sources, &allowed);
        assert_eq!(problems.len(), 2, "{problems:?}");
        assert!(
            problems[0].starts_with("a/src/m.rs:124: `fn long` is 121 lines, over 120: split it"),
            "{problems:?}"
        );
        assert!(
            problems[1].contains("lists `fn fits` of a/src/m.rs, which is no longer over 120"),
            "{problems:?}"
        );
    }
}
