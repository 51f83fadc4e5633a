//! The command line rustc gives a `cc`-style linker: response files expanded, then the inputs
//! (files and `-l` libraries) and search paths picked out. Nothing here changes the command
//! line; the linker is later given exactly what rustc wrote, plus what `sycl-ld` adds.

use std::borrow::Cow;
use std::ffi::{OsStr, OsString};
use std::os::unix::ffi::{OsStrExt, OsStringExt};
use std::path::{Path, PathBuf};

use anyhow::{Context, Result};
use sycl_format::SplitMode;

use crate::usage::Command;

/// An input of the link, in command-line order.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Input {
    /// A file named on the command line (object, archive, rlib, shared library).
    File(PathBuf),
    /// `-lNAME` (or `-l:FILE` when `verbatim`), searched along the `-L` paths;
    /// `static_only` after `-Bstatic` / `-static`.
    Lib { name: String, verbatim: bool, static_only: bool },
}

#[derive(Debug, Default, PartialEq, Eq)]
pub(crate) struct LinkLine {
    pub output: Option<PathBuf>,
    pub inputs: Vec<Input>,
    pub search_paths: Vec<PathBuf>,
    pub shared: bool,
    /// Where the command line has an argument that only `ld` takes, bare: the line was
    /// written for `ld` (rustc's `ld` flavor, which it picks for a linker named `*-ld`), and
    /// `cc` would refuse it. An index into the parsed arguments.
    pub ld_only_arg: Option<usize>,
}

/// Driver options whose value is the next argument.
const TAKES_VALUE: &[&str] = &[
    "-o", "-L", "-l", "-x", "-Xlinker", "-T", "-e", "-u", "-z", "-B", "-I", "-isystem", "-MF",
    "-MT",
];

/// Arguments that rustc's `ld` and `ld.lld` flavors pass bare and its `cc` flavor behind
/// `-Wl,`, and that `cc` refuses: every `ld`-flavored link of rustc 1.95 (executables, shared
/// libraries, build scripts and proc macros, debug or release) has `--as-needed` and
/// `--eh-frame-hdr`; shared libraries have `--no-undefined-version` first. Only arguments `cc`
/// refuses, so that no command line `cc` would take is taken for `ld`'s (`-Bstatic`,
/// `-z relro` and `-pie` are accepted by both).
const LD_ONLY: &[&[u8]] = &[
    b"--as-needed",
    b"--no-as-needed",
    b"--eh-frame-hdr",
    b"--gc-sections",
    b"--no-undefined-version",
    b"--strip-debug",
];

/// Expands `@file` arguments recursively, as GCC does: a response file holds arguments
/// separated by white space, with quotes and backslash escapes. An `@name` that is not a
/// readable file stays as it is. A command line without any is borrowed as it is.
pub(crate) fn expand_response_files(args: &[OsString]) -> Result<Cow<'_, [OsString]>> {
    if !args.iter().any(|a| a.as_bytes().starts_with(b"@")) {
        return Ok(Cow::Borrowed(args));
    }
    let mut out = Vec::with_capacity(args.len());
    expand_into(args, &mut out, 0)?;
    Ok(Cow::Owned(out))
}

fn expand_into(args: &[OsString], out: &mut Vec<OsString>, depth: usize) -> Result<()> {
    for arg in args {
        let bytes = arg.as_bytes();
        match bytes.strip_prefix(b"@") {
            Some(path) if depth < 16 && Path::new(OsStr::from_bytes(path)).is_file() => {
                let path = Path::new(OsStr::from_bytes(path));
                let text = std::fs::read(path)
                    .with_context(|| format!("reading response file {}", path.display()))?;
                expand_into(&split_response_file(&text), out, depth + 1)?;
            }
            _ => out.push(arg.clone()),
        }
    }
    Ok(())
}

/// Splits response-file text the way libiberty's `buildargv` does.
pub(crate) fn split_response_file(text: &[u8]) -> Vec<OsString> {
    let mut args = Vec::new();
    let mut current = Vec::new();
    let mut in_arg = false;
    let mut quote: Option<u8> = None;
    let mut i = 0;
    while i < text.len() {
        let c = text[i];
        i += 1;
        match (c, quote) {
            (b'\\', _) if i < text.len() => {
                current.push(text[i]);
                i += 1;
                in_arg = true;
            }
            (q, Some(open)) if q == open => quote = None,
            (_, Some(_)) => current.push(c),
            (b'\'' | b'"', None) => {
                quote = Some(c);
                in_arg = true;
            }
            (c, None) if c.is_ascii_whitespace() => {
                if in_arg {
                    args.push(OsString::from_vec(std::mem::take(&mut current)));
                    in_arg = false;
                }
            }
            (c, None) => {
                current.push(c);
                in_arg = true;
            }
        }
    }
    if in_arg {
        args.push(OsString::from_vec(current));
    }
    args
}

/// Writes arguments back in response-file form (each on its own line, escaped).
pub(crate) fn quote_response_file(args: &[OsString]) -> Vec<u8> {
    let mut out = Vec::new();
    for arg in args {
        for &b in arg.as_bytes() {
            if b.is_ascii_whitespace() || matches!(b, b'\\' | b'\'' | b'"') {
                out.push(b'\\');
            }
            out.push(b);
        }
        out.push(b'\n');
    }
    out
}

/// Picks the inputs, search paths and output out of an expanded command line. It reads the
/// arguments as bytes, where they are, since every link (build scripts' too) comes here.
pub(crate) fn parse(args: &[OsString]) -> LinkLine {
    let mut line = LinkLine::default();
    let mut static_only = false;
    let mut i = 0;
    while i < args.len() {
        let arg = args[i].as_bytes();
        i += 1;
        // `-o VALUE` or `-oVALUE`.
        let mut value = |flag: &[u8]| -> Option<&[u8]> {
            if arg == flag {
                let v = args.get(i).map(|v| v.as_bytes());
                i += 1;
                v
            } else {
                arg.strip_prefix(flag)
            }
        };
        if let Some(v) = value(b"-o") {
            line.output = Some(path(v));
        } else if let Some(v) = value(b"-L") {
            line.search_paths.push(path(v));
        } else if let Some(v) = value(b"-l") {
            line.inputs.push(lib(v, static_only));
        } else if let Some(v) = arg.strip_prefix(b"-Wl,") {
            linker_options(v.split(|&b| b == b','), &mut line, &mut static_only);
        } else if arg == b"-Xlinker" {
            if let Some(v) = args.get(i) {
                linker_options(std::iter::once(v.as_bytes()), &mut line, &mut static_only);
            }
            i += 1;
        } else if arg == b"-static" {
            static_only = true;
        } else if arg == b"-shared" {
            line.shared = true;
        } else if TAKES_VALUE.iter().any(|t| t.as_bytes() == arg) {
            i += 1;
        } else if !arg.starts_with(b"-") || arg == b"-" {
            line.inputs.push(Input::File(path(arg)));
        } else if line.ld_only_arg.is_none() && LD_ONLY.contains(&arg) {
            // Only the options nothing above took reach here: a handful per rustc link.
            line.ld_only_arg = Some(i - 1);
        }
    }
    line
}

fn path(bytes: &[u8]) -> PathBuf {
    PathBuf::from(OsStr::from_bytes(bytes))
}

fn lib(name: &[u8], static_only: bool) -> Input {
    let (name, verbatim) = match name.strip_prefix(b":") {
        Some(file) => (file, true),
        None => (name, false),
    };
    Input::Lib { name: String::from_utf8_lossy(name).into_owned(), verbatim, static_only }
}

/// Options passed through to the linker itself (`-Wl,a,b` or `-Xlinker a`).
fn linker_options<'a>(
    parts: impl Iterator<Item = &'a [u8]>,
    line: &mut LinkLine,
    static_only: &mut bool,
) {
    let mut parts = parts.peekable();
    while let Some(part) = parts.next() {
        match part {
            b"-Bstatic" | b"-static" | b"-dn" | b"-non_shared" => *static_only = true,
            b"-Bdynamic" | b"-dy" | b"-call_shared" => *static_only = false,
            b"-shared" | b"-Bshareable" => line.shared = true,
            b"-L" | b"-l" | b"-o" if parts.peek().is_some() => {
                let v = parts.next().unwrap_or_default();
                match part {
                    b"-L" => line.search_paths.push(path(v)),
                    b"-l" => line.inputs.push(lib(v, *static_only)),
                    _ => line.output = Some(path(v)),
                }
            }
            p => {
                if let Some(v) =
                    p.strip_prefix(b"-L").or_else(|| p.strip_prefix(b"--library-path="))
                {
                    line.search_paths.push(path(v));
                } else if let Some(v) =
                    p.strip_prefix(b"-l").or_else(|| p.strip_prefix(b"--library="))
                {
                    line.inputs.push(lib(v, *static_only));
                }
            }
        }
    }
}

/// The command line of `sycl-ld post-link` and `sycl-ld device-lib`.
pub(crate) struct ToolArgs {
    pub split: Option<SplitMode>,
    pub out: PathBuf,
    pub inputs: Vec<PathBuf>,
    /// Options for the compiler of the sources among the inputs (`device-lib` only): `-D`,
    /// `-U`, `-I`, `-cl-*` (`-cl-std=` included), `-W*`, `-w` and `-g`, each as clang takes it.
    pub compiler_options: Vec<String>,
}

/// `[--split MODE] [COMPILER OPTION...] -o OUT INPUT...`. Inputs must exist: the scan passes
/// over what it cannot open, as a link must, and would report only "no device code".
pub(crate) fn parse_tool_args(args: &[OsString], command: &'static Command) -> Result<ToolArgs> {
    let compiles = command.name == crate::usage::DEVICE_LIB.name;
    let (mut split, mut out, mut inputs, mut compiler_options) =
        (None, None, Vec::new(), Vec::new());
    let mut it = args.iter();
    while let Some(arg) = it.next() {
        match arg.to_str() {
            Some("--split") => {
                let v = it.next().ok_or_else(|| {
                    command.error(format!("`--split` needs a mode ({})", split_modes()))
                })?;
                let v = v.to_string_lossy();
                let mode = SplitMode::parse(&v).ok_or_else(|| {
                    command.error(format!("unknown split mode `{v}` ({})", split_modes()))
                })?;
                split = Some(mode);
            }
            Some("-o") => {
                out = Some(PathBuf::from(
                    it.next().ok_or_else(|| command.error("`-o` needs a path"))?,
                ))
            }
            Some(flag @ ("-D" | "-U" | "-I")) if compiles => {
                let value =
                    it.next().ok_or_else(|| command.error(format!("`{flag}` needs a value")))?;
                compiler_options.push(format!("{flag}{}", value.to_string_lossy()));
            }
            Some(s) if compiles && is_compiler_option(s) => compiler_options.push(s.to_string()),
            Some(s) if s.starts_with('-') => {
                return Err(command.error(format!("unknown option `{s}`")))
            }
            _ => inputs.push(command.existing(Path::new(arg))?.to_path_buf()),
        }
    }
    let out = out.ok_or_else(|| command.error("no output given (`-o`)"))?;
    if inputs.is_empty() {
        return Err(command.error("no inputs given"));
    }
    Ok(ToolArgs { split, out, inputs, compiler_options })
}

/// An option `device-lib` hands to the compiler in one argument: `-DNAME[=VALUE]`, `-UNAME`,
/// `-IDIR`, `-cl-*`, `-W*`, `-w`, and `-g` (debug information, an OpenCL build option too).
fn is_compiler_option(arg: &str) -> bool {
    ["-D", "-U", "-I", "-cl-", "-W"].iter().any(|p| arg.len() > p.len() && arg.starts_with(p))
        || arg == "-w"
        || arg == "-g"
}

/// The split modes, as a list for messages.
pub(crate) fn split_modes() -> String {
    [SplitMode::PerKernel, SplitMode::PerSource, SplitMode::Off, SplitMode::Auto]
        .map(SplitMode::name)
        .join(", ")
}

/// The inputs, as a list for messages.
pub(crate) fn list(paths: &[PathBuf]) -> String {
    paths.iter().map(|p| p.display().to_string()).collect::<Vec<_>>().join(", ")
}

/// Where the linker would find an `-l` library: along the search paths, `lib{name}.so` before
/// `lib{name}.a` unless only static libraries are allowed.
pub(crate) fn find_library(
    search_paths: &[PathBuf],
    name: &str,
    verbatim: bool,
    static_only: bool,
) -> Option<PathBuf> {
    let candidates: Vec<String> = if verbatim {
        vec![name.to_string()]
    } else if static_only {
        vec![format!("lib{name}.a")]
    } else {
        vec![format!("lib{name}.so"), format!("lib{name}.a")]
    };
    search_paths.iter().find_map(|dir| candidates.iter().map(|c| dir.join(c)).find(|p| p.is_file()))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn os(args: &[&str]) -> Vec<OsString> {
        args.iter().map(OsString::from).collect()
    }

    #[test]
    fn parses_a_rustc_command_line() {
        let line = parse(&os(&[
            "-m64",
            "/tmp/rustcX/symbols.o",
            "main.0.rcgu.o",
            "-Wl,--as-needed",
            "-Wl,-Bstatic",
            "/deps/libhelpers-123.rlib",
            "-lsycl_device_app",
            "-Wl,-Bdynamic",
            "-lhelpers",
            "-l:libexact.so",
            "-L",
            "/out/sycl",
            "-L/deps",
            "-Wl,-L,/other,-lfoo",
            "-Xlinker",
            "-lbar",
            "-o",
            "/target/debug/app",
            "-nodefaultlibs",
            "-x",
            "c",
        ]));
        assert_eq!(line.output, Some(PathBuf::from("/target/debug/app")));
        assert_eq!(
            line.search_paths,
            [PathBuf::from("/out/sycl"), "/deps".into(), "/other".into()]
        );
        let lib =
            |n: &str, verbatim, static_only| Input::Lib { name: n.into(), verbatim, static_only };
        assert_eq!(
            line.inputs,
            [
                Input::File("/tmp/rustcX/symbols.o".into()),
                Input::File("main.0.rcgu.o".into()),
                Input::File("/deps/libhelpers-123.rlib".into()),
                lib("sycl_device_app", false, true),
                lib("helpers", false, false),
                lib("libexact.so", true, false),
                lib("foo", false, false),
                lib("bar", false, false),
            ]
        );
        assert!(!line.shared);
    }

    #[test]
    fn an_ld_command_line_is_told_from_a_cc_one() {
        let lines = |text: &str| text.lines().map(OsString::from).collect::<Vec<_>>();
        let ld = lines(include_str!("../tests/data/rustc-1.95-ld-flavor.args"));
        let at = parse(&ld).ld_only_arg.expect("rustc's ld flavor");
        assert_eq!(ld[at], "--as-needed");
        let cc = lines(include_str!("../tests/data/rustc-1.95-gcc-flavor.args"));
        assert_eq!(parse(&cc).ld_only_arg, None);
        // What cc takes too is no sign of an ld command line.
        let both =
            os(&["main.o", "-Bstatic", "-z", "relro", "-pie", "--sycl-add-images=x", "-o", "out"]);
        assert_eq!(parse(&both).ld_only_arg, None);
        assert_eq!(
            parse(&os(&["-shared", "--no-undefined-version", "--as-needed"])).ld_only_arg,
            Some(1)
        );
    }

    #[test]
    fn response_files_split_like_gcc() {
        let args = split_response_file(b"-o \"out dir/app\" 'a b' c\\ d\n-lx\n\n");
        assert_eq!(args, os(&["-o", "out dir/app", "a b", "c d", "-lx"]));
    }

    #[test]
    fn response_files_round_trip_and_nest() {
        let dir = tempfile::tempdir().unwrap();
        let inner = dir.path().join("inner.rsp");
        std::fs::write(&inner, quote_response_file(&os(&["-lz", "with space.o"]))).unwrap();
        let outer = dir.path().join("outer.rsp");
        let inner_ref = format!("@{}", inner.display());
        std::fs::write(&outer, quote_response_file(&os(&["a.o", &inner_ref, "x\\y"]))).unwrap();
        let args = os(&["-m64", &format!("@{}", outer.display()), "@missing"]);
        let expanded = expand_response_files(&args).unwrap();
        assert_eq!(expanded, os(&["-m64", "a.o", "-lz", "with space.o", "x\\y", "@missing"]));
        // Without response files, nothing is copied.
        let plain = os(&["-m64", "a.o"]);
        assert!(matches!(expand_response_files(&plain).unwrap(), Cow::Borrowed(_)));
    }

    #[test]
    fn library_search_prefers_shared_unless_static() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("libq.a"), b"").unwrap();
        std::fs::write(dir.path().join("libq.so"), b"").unwrap();
        let paths = vec![PathBuf::from("/nonexistent"), dir.path().to_path_buf()];
        assert_eq!(find_library(&paths, "q", false, false), Some(dir.path().join("libq.so")));
        assert_eq!(find_library(&paths, "q", false, true), Some(dir.path().join("libq.a")));
        assert_eq!(find_library(&paths, "libq.a", true, false), Some(dir.path().join("libq.a")));
        assert_eq!(find_library(&paths, "none", false, false), None);
    }
}
