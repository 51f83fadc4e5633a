//! The tidy checks of the documents a reader reads, the README and `docs/*.md`: that they
//! hold what they show, so that a snippet or a link cannot drift from the code and the files.
//!
//! - Every Rust snippet of the README and of `docs/*.md` (a fenced block whose info string
//!   starts with `rust`) is compiled code: one `.rs` file of the repository (an example, a
//!   test, a doctest in a doc comment, a fixture program or build script: all three
//!   workspaces' files, build scripts included) holds its lines. Lines are compared as code:
//!   each without its `//` comment and its indentation, blank and comment-only lines dropped,
//!   so a snippet's comments are its own; in the sources, a doc comment's `///` or `//!` is
//!   taken off first, and rustdoc's hidden lines (`# …`) are dropped. A snippet line that is
//!   only `…` or `...`, or a comment starting with one, elides: the pieces between elisions
//!   must each stand on consecutive code lines of one file, in the snippet's order. So a
//!   snippet cannot drift from the code it shows (see [`snippet_problems`]).
//! - Every relative link of the README and of `docs/*.md` leads to a file of the repository
//!   (never outside it: the docs stand alone), and its anchor, if any, to a heading of the
//!   document it names (anchors made as GitHub makes them, see [`anchors`]).

use std::fs;
use std::path::{Path, PathBuf};

use super::{assert_no_problems, is_web, markdown_links, rust_files, texts};
use crate::repo_root;

#[test]
fn the_documents_links_lead_somewhere() {
    let root = repo_root();
    let texts = texts(&root, &documents(&root));
    let exists = |path: &str| root.join(path).exists();
    let anchors_of =
        |path: &str| texts.iter().find(|(name, _)| name == path).map(|(_, text)| anchors(text));
    let problems: Vec<String> = texts
        .iter()
        .flat_map(|(name, text)| link_problems(name, text, &exists, &anchors_of))
        .collect();
    assert_no_problems("links of the README and docs/ that lead nowhere", &problems);
}

#[test]
fn every_rust_snippet_is_compiled_code() {
    let root = repo_root();
    let mut files = Vec::new();
    rust_files(&root, true, &mut files);
    let sources: Vec<(String, Vec<String>)> = texts(&root, &files)
        .into_iter()
        .map(|(name, text)| (name, source_code_lines(&text)))
        .collect();
    let mut problems = Vec::new();
    let mut snippets = 0;
    for (name, text) in texts(&root, &documents(&root)) {
        snippets += rust_snippets(&text).len();
        problems.extend(snippet_problems(&name, &text, &sources));
    }
    assert!(snippets >= 10, "found only {snippets} Rust snippets in the README and docs/");
    assert_no_problems("Rust snippets that no compiled source holds", &problems);
}

/// The README and every Markdown document under `docs/`, in a stable order: what a reader
/// reads, whose links and snippets the tidy tests check.
fn documents(root: &Path) -> Vec<PathBuf> {
    let mut documents = vec![root.join("README.md")];
    for entry in fs::read_dir(root.join("docs")).expect("listing docs/") {
        let path = entry.expect("listing docs/").path();
        if path.extension().is_some_and(|e| e == "md") {
            documents.push(path);
        }
    }
    documents.sort();
    documents
}

/// Every link of the Markdown `text` (the document `name`, a path from the repository root)
/// that leads nowhere: a path (from the document's directory) that does not exist or lies
/// outside the repository (the docs stand alone), or an anchor that no heading of its document
/// makes. `exists` says whether a path from the root exists; `anchors_of` gives the anchors of
/// a document of the set (`None` for another file, whose anchors are not checked).
fn link_problems(
    name: &str,
    text: &str,
    exists: &dyn Fn(&str) -> bool,
    anchors_of: &dyn Fn(&str) -> Option<Vec<String>>,
) -> Vec<String> {
    let dir = Path::new(name).parent().unwrap_or(Path::new(""));
    let mut problems = Vec::new();
    for (line, target) in markdown_links(text) {
        if is_web(&target) {
            continue;
        }
        let (path, anchor) = target.split_once('#').unwrap_or((&target, ""));
        let file = if path.is_empty() {
            name.to_string()
        } else {
            // The path from the root, `..` taken lexically; `None` when it climbs out.
            let mut parts: Vec<String> = Vec::new();
            let mut inside = true;
            for part in dir.join(path).components() {
                match part {
                    std::path::Component::ParentDir => inside &= parts.pop().is_some(),
                    std::path::Component::Normal(p) => parts.push(p.to_string_lossy().into()),
                    _ => {}
                }
            }
            let file = parts.join("/");
            if !inside {
                problems.push(format!(
                    "{name}:{line}: the link to `{target}` leaves the repository: the docs stand \
                     alone; say it here, or link a document of the repository"
                ));
                continue;
            }
            if !exists(&file) {
                problems.push(format!(
                    "{name}:{line}: the link to `{target}` leads nowhere (looked for {file}): \
                     correct the link"
                ));
                continue;
            }
            file
        };
        if anchor.is_empty() {
            continue;
        }
        if let Some(anchors) = anchors_of(&file) {
            if !anchors.iter().any(|a| a == anchor) {
                problems.push(format!(
                    "{name}:{line}: the link to `{target}` names no heading of {file} (its \
                     anchors: {}): correct the anchor, or the heading it meant",
                    anchors.join(", ")
                ));
            }
        }
    }
    problems
}

/// The anchors the headings of a Markdown text make, as GitHub makes them: lowercase, spaces
/// as `-`, every character but letters, digits, `-` and `_` dropped.
fn anchors(text: &str) -> Vec<String> {
    let mut anchors = Vec::new();
    let mut fenced = false;
    for line in text.lines() {
        if line.trim_start().starts_with("```") {
            fenced = !fenced;
            continue;
        }
        let heading = line.trim_start_matches('#');
        if fenced || heading.len() == line.len() || !heading.starts_with(' ') {
            continue;
        }
        let anchor = heading
            .trim()
            .to_lowercase()
            .chars()
            .filter_map(|c| match c {
                ' ' => Some('-'),
                c if c.is_alphanumeric() || c == '-' || c == '_' => Some(c),
                _ => None,
            })
            .collect();
        anchors.push(anchor);
    }
    anchors
}

/// A Rust snippet of a Markdown text: the line (from 1) its fence opens on, and its pieces,
/// each a run of code lines (see [`code_of`]) between elisions.
#[derive(Debug, PartialEq)]
struct Snippet {
    line: usize,
    pieces: Vec<Vec<(usize, String)>>,
}

/// The Rust snippets of a Markdown text: the fenced blocks whose info string starts with
/// `rust` (```` ```rust ````, ```` ```rust,no_run ````), each line with its number.
fn rust_snippets(text: &str) -> Vec<Snippet> {
    let mut snippets = Vec::new();
    let mut open: Option<Snippet> = None;
    let mut fenced = false;
    for (index, line) in text.lines().enumerate() {
        let trimmed = line.trim();
        if let Some(info) = trimmed.strip_prefix("```") {
            if let Some(snippet) = open.take() {
                snippets.push(snippet);
            } else if !fenced && info.split([',', ' ']).next() == Some("rust") {
                open = Some(Snippet { line: index + 1, pieces: vec![Vec::new()] });
            } else {
                fenced = !fenced;
            }
            continue;
        }
        let Some(snippet) = open.as_mut() else { continue };
        let comment = trimmed.strip_prefix("//").map(str::trim_start);
        let elided = matches!(trimmed, "…" | "...")
            || comment.is_some_and(|c| c.starts_with('…') || c.starts_with("..."));
        if elided {
            snippet.pieces.push(Vec::new());
            continue;
        }
        let code = code_of(line);
        if !code.is_empty() {
            snippet.pieces.last_mut().expect("a snippet has a piece").push((index + 1, code));
        }
    }
    for snippet in &mut snippets {
        snippet.pieces.retain(|piece| !piece.is_empty());
    }
    snippets
}

/// A line as code: without its `//` comment (one outside a string literal) and without the
/// whitespace around it.
fn code_of(line: &str) -> String {
    let mut in_string = false;
    let mut escaped = false;
    let mut previous = ' ';
    for (at, c) in line.char_indices() {
        if in_string {
            match c {
                _ if escaped => escaped = false,
                '\\' => escaped = true,
                '"' => in_string = false,
                _ => {}
            }
        } else if c == '"' && previous != '\'' {
            in_string = true;
        } else if c == '/' && previous == '/' {
            return line[..at - 1].trim().to_string();
        }
        previous = c;
    }
    line.trim().to_string()
}

/// A Rust source's code lines, as a snippet's are compared with them: a doc comment's `///`
/// or `//!` taken off (so that doctests count), rustdoc's hidden lines (`#` alone, or `# `
/// and code) dropped, then each line as [`code_of`] makes it, empty ones dropped.
fn source_code_lines(text: &str) -> Vec<String> {
    text.lines()
        .map(|line| {
            let line = line.trim_start();
            line.strip_prefix("///").or(line.strip_prefix("//!")).unwrap_or(line)
        })
        .filter(|line| {
            let line = line.trim();
            line != "#" && !line.starts_with("# ")
        })
        .map(code_of)
        .filter(|code| !code.is_empty())
        .collect()
}

/// Where `snippet` stands in a source's code lines: `Ok` when every piece does, each on
/// consecutive lines after the one before; else how many of the snippet's lines matched before
/// the first that does not (each piece placed as early as it goes, which leaves the most room
/// for the rest).
fn match_snippet(snippet: &Snippet, source: &[String]) -> Result<(), usize> {
    let mut from = 0;
    let mut matched = 0;
    for piece in &snippet.pieces {
        let code: Vec<&str> = piece.iter().map(|(_, c)| c.as_str()).collect();
        let found = (from..source.len()).find(|&at| {
            source
                .get(at..at + code.len())
                .is_some_and(|run| run.iter().zip(&code).all(|(s, c)| s == c))
        });
        match found {
            Some(at) => {
                from = at + code.len();
                matched += code.len();
            }
            None => {
                // The longest start of the piece that stands somewhere after `from`.
                let longest = (from..source.len())
                    .map(|at| source[at..].iter().zip(&code).take_while(|(s, c)| s == *c).count())
                    .max()
                    .unwrap_or(0);
                return Err(matched + longest);
            }
        }
    }
    Ok(())
}

/// Every Rust snippet of the Markdown `text` (named `name`) that no source of `sources` (file
/// name, [`source_code_lines`]) holds, each named with the source it comes nearest and its
/// first line that source lacks.
fn snippet_problems(name: &str, text: &str, sources: &[(String, Vec<String>)]) -> Vec<String> {
    let mut problems = Vec::new();
    for snippet in rust_snippets(text) {
        let mut nearest: Option<(usize, &str)> = None;
        let mut held = false;
        for (source, lines) in sources {
            match match_snippet(&snippet, lines) {
                Ok(()) => {
                    held = true;
                    break;
                }
                Err(matched) if nearest.is_none_or(|(best, _)| matched > best) => {
                    nearest = Some((matched, source))
                }
                Err(_) => {}
            }
        }
        if held {
            continue;
        }
        let lines: Vec<&(usize, String)> = snippet.pieces.iter().flatten().collect();
        let (matched, source) = nearest.unwrap_or((0, "no source"));
        let (line, code) = lines.get(matched).map_or((snippet.line, ""), |(l, c)| (*l, c.as_str()));
        let nearest = if matched > 0 {
            format!(" ({source} holds the {matched} line(s) before it)")
        } else {
            String::new()
        };
        problems.push(format!(
            "{name}:{line}: a line of the Rust snippet of line {} that no compiled source holds \
             after the snippet's lines before it: `{code}`{nearest}. Copy the snippet from the \
             code it shows (fixtures/guide/examples/ has the README's and the guide's), or \
             change that code and the snippet together; text that is not Rust goes in another \
             fence (```text)",
            snippet.line
        ));
    }
    problems
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_snippet_that_drifted_from_its_source_is_reported() {
        let source = "\
//! An example.
fn main() -> Result<(), Box<dyn std::error::Error>> {
    let stream = cudarc::driver::CudaContext::new(0)?.default_stream();
    let x = stream.clone_htod(&host)?; // cudarc's memory
    let url = \"https://example.com\"; // a string with // in it

    q.launch(\"scale\").arg(&x).run()?;
    Ok(())
}
/// ```
/// # let q = Queue::new()?;
/// let out = q.buffer::<i32>(8)?;
/// # let hidden = 1;
/// out.read()?;
/// ```
";
        let sources = [
            ("examples/a.rs".to_string(), source_code_lines(source)),
            ("examples/b.rs".to_string(), source_code_lines("fn b() {}\n")),
        ];
        let doc = "\
# Guide
```rust
// A caption, and comments of the snippet's own.
let stream = cudarc::driver::CudaContext::new(0)?.default_stream();
  let x = stream.clone_htod(&host)?;   // the doc's own words
let url = \"https://example.com\";
…
Ok(())
```
```rust,no_run
let out = q.buffer::<i32>(8)?;
out.read()?;
```
```sh
let not_rust = 1;
```
```rust
let stream = cudarc::driver::CudaContext::new(0)?.default_stream();
let x = stream.memcpy_stod(&host)?;
```
```rust
Ok(())
// ... and later:
let x = stream.clone_htod(&host)?;
```
";
        let at = |text: &str| doc.lines().position(|l| l.contains(text)).unwrap() + 1;
        let problems = snippet_problems("README.md", doc, &sources);
        assert_eq!(problems.len(), 2, "{problems:#?}");
        // A line that drifted from the code, named with the source the snippet follows.
        assert!(problems[0].starts_with(&format!("README.md:{}: ", at("memcpy_stod"))));
        assert!(problems[0].contains("`let x = stream.memcpy_stod(&host)?;`"), "{}", problems[0]);
        assert!(problems[0].contains("(examples/a.rs holds the 1 line(s) before it)"));
        // Pieces out of the source's order.
        let last = doc.lines().count() - 1;
        assert!(problems[1].starts_with(&format!("README.md:{last}: ")), "{}", problems[1]);
        assert_eq!(rust_snippets(doc).len(), 4);
        assert!(snippet_problems("README.md", "```rust\nfn b() {}\n```\n", &sources).is_empty());
    }

    #[test]
    fn links_to_missing_files_headings_and_outside_the_repository_are_reported() {
        let guide =
            "# Guide\n## Running on devices\n### `SYCL_TRACE` events\n```\n# not a heading\n```\n";
        assert_eq!(anchors(guide), ["guide", "running-on-devices", "sycl_trace-events"]);
        let readme = "\
[ok](docs/GUIDE.md#running-on-devices), [here](#top) [web](https://example.com/x#y)
[gone](docs/GONE.md) and [no heading](docs/GUIDE.md#running)
`[in a span](nowhere.md)` [out](../shared/STYLE.md) [other](fixtures/x.rs#L3)
# Top
";
        let exists = |path: &str| ["docs/GUIDE.md", "fixtures/x.rs"].contains(&path);
        let anchors_of = |path: &str| {
            (path == "docs/GUIDE.md")
                .then(|| anchors(guide))
                .or_else(|| (path == "README.md").then(|| anchors(readme)))
        };
        let problems = link_problems("README.md", readme, &exists, &anchors_of);
        assert_eq!(problems.len(), 3, "{problems:#?}");
        assert!(problems[0].starts_with("README.md:2: the link to `docs/GONE.md` leads nowhere"));
        assert!(problems[1].starts_with("README.md:2: the link to `docs/GUIDE.md#running` names"));
        assert!(
            problems[2].contains("`../shared/STYLE.md` leaves the repository"),
            "{problems:#?}"
        );
        let from_docs =
            link_problems("docs/A.md", "[up](../README.md)", &|p| p == "README.md", &|_| None);
        assert!(from_docs.is_empty(), "{from_docs:#?}");
    }

    #[test]
    fn code_is_a_line_without_its_comment() {
        assert_eq!(code_of("    let u = \"a//b\"; // c"), "let u = \"a//b\";");
        assert_eq!(code_of("let c = '\"'; // q"), "let c = '\"';");
        assert_eq!(code_of("let e = \"\\\"//\"; // d"), "let e = \"\\\"//\";");
        assert_eq!(code_of("// only a comment"), "");
        assert_eq!(
            source_code_lines("/// ```\n/// # hidden\n///     shown(); // why\n"),
            ["```", "shown();"]
        );
    }
}
