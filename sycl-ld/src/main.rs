//! `sycl-ld`: the linker cargo calls. It device-links the unit's device code, embeds the
//! images, then runs the real linker, whose output appears complete or not at all; without
//! device code it becomes the real linker (`exec`), on the command line as given.
//!
//! Commands (a linker is never given these words first), each described in `usage.rs`:
//! - `sycl-ld inspect FILE [--json] [--extract DIR]` lists the images embedded in a binary (and
//!   writes their code out);
//! - `sycl-ld post-link [--split MODE] -o DIR INPUT...` writes a unit's images as a file table;
//! - `sycl-ld aspect-filter --target T [--device-config FILE] [-o OUT] TABLE` keeps the rows
//!   a target can run (DPC++'s `sycl-aspect-filter`);
//! - `sycl-ld device-lib [--split MODE] -o OUT INPUT...` makes a device library file;
//! - `sycl-ld help [COMMAND]`, `--help`, `-h` or no arguments: sycl-ld's own help, never the
//!   real linker's (a `--help` among other link arguments is the linker's); `--version`.

mod aot;
mod args;
mod devlib;
mod embed;
mod inspect;
mod native;
mod ptx;
mod scan;
mod table;
mod usage;

use std::ffi::{OsStr, OsString};
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Command, ExitCode};

use anyhow::{Context, Result};

/// Environment variable naming the real linker (default `cc`).
const LINKER_ENV: &str = "SYCL_LD_LINKER";

fn main() -> ExitCode {
    let args: Vec<OsString> = std::env::args_os().skip(1).collect();
    let result = match args.first().and_then(|a| a.to_str()) {
        // What a person types to learn what this is; rustc never calls a linker so.
        None => {
            eprint!("{}", usage::help(&this_executable()));
            return ExitCode::from(2);
        }
        Some("--help" | "-h") if args.len() == 1 => print(usage::help(&this_executable())),
        Some("--version") if args.len() == 1 => print(usage::version(
            &real_linker(),
            std::env::var_os(LINKER_ENV).is_some_and(|v| !v.is_empty()),
        )),
        Some("help") => command(&usage::HELP, &args[1..], help),
        Some("inspect") => command(&usage::INSPECT, &args[1..], inspect::run),
        Some("post-link") => command(&usage::POST_LINK, &args[1..], table::post_link),
        Some("aspect-filter") => command(&usage::ASPECT_FILTER, &args[1..], table::aspect_filter),
        Some("device-lib") => command(&usage::DEVICE_LIB, &args[1..], devlib::run),
        _ => link(args),
    };
    match result {
        Ok(code) => code,
        Err(e) => {
            eprintln!("sycl-ld: error: {e:#}");
            match e.downcast_ref::<usage::UsageError>() {
                Some(usage) => {
                    eprintln!("{}", usage.command.usage());
                    ExitCode::from(2)
                }
                None => ExitCode::FAILURE,
            }
        }
    }
}

fn print(text: String) -> Result<ExitCode> {
    print!("{text}");
    Ok(ExitCode::SUCCESS)
}

/// A command, or its help when `--help` or `-h` is among its arguments.
fn command(
    usage: &'static usage::Command,
    args: &[OsString],
    run: fn(&[OsString]) -> Result<ExitCode>,
) -> Result<ExitCode> {
    if args.iter().any(|a| a == "--help" || a == "-h") {
        return print(usage.help());
    }
    run(args)
}

/// `sycl-ld help [COMMAND]`.
fn help(args: &[OsString]) -> Result<ExitCode> {
    match args {
        [] => print(usage::help(&this_executable())),
        [name] => match name.to_str().and_then(usage::command) {
            Some(command) => print(command.help()),
            None => {
                let names: Vec<&str> = usage::COMMANDS.iter().map(|c| c.name).collect();
                Err(usage::HELP.error(format!(
                    "no command `{}` (commands: {})",
                    name.to_string_lossy(),
                    names.join(", ")
                )))
            }
        },
        _ => Err(usage::HELP.error("one command at most")),
    }
}

/// This executable's path, for the configuration that the help shows.
fn this_executable() -> String {
    std::env::current_exe().map_or_else(|_| "path/to/sycl-ld".into(), |p| p.display().to_string())
}

/// `SYCL_LD_VERBOSE=1` prints what was found and what was added to the link.
fn verbose() -> bool {
    std::env::var_os("SYCL_LD_VERBOSE").is_some_and(|v| !v.is_empty() && v != "0")
}

fn real_linker() -> OsString {
    std::env::var_os(LINKER_ENV).filter(|v| !v.is_empty()).unwrap_or_else(|| "cc".into())
}

/// A link. Build scripts and proc macros are linked through here too, so the path to a
/// pass-through (no device code) does no more than read the command line, scan, and become
/// the linker: no copies of the command line, no temporary directory, no second process.
fn link(args: Vec<OsString>) -> Result<ExitCode> {
    let expanded = args::expand_response_files(&args)?;
    let line = args::parse(&expanded);
    if let Some(at) = line.ld_only_arg {
        // Before the scan: cc would refuse the line whatever the scan found.
        let named = std::env::args_os().next().unwrap_or_default();
        return Err(usage::ld_flavor_error(&expanded[at], &expanded, &named.to_string_lossy()));
    }
    let mut found = scan::scan(&line)?;
    // Our own option: prebuilt images to add. Taken out, so the real linker never sees it.
    let added: Vec<PathBuf> = expanded
        .iter()
        .filter_map(|a| a.to_str()?.strip_prefix(devlib::ADD_IMAGES).map(PathBuf::from))
        .collect();
    let linker = real_linker();
    if found.objects.is_empty() && added.is_empty() {
        if verbose() {
            print_found(&found);
        }
        return pass_through(&linker, &args);
    }

    let dir = tempfile::Builder::new()
        .prefix("sycl-ld")
        .tempdir()
        .context("creating a temporary directory")?;
    let mut expanded = expanded.into_owned();
    let mut args = args;
    if !added.is_empty() {
        // The rest of the command line, through a response file of our own (it may be long).
        expanded.retain(|a| !a.to_str().is_some_and(|a| a.starts_with(devlib::ADD_IMAGES)));
        let rsp = dir.path().join("args.rsp");
        std::fs::write(&rsp, args::quote_response_file(&expanded))
            .with_context(|| format!("writing {}", rsp.display()))?;
        args = vec![format!("@{}", rsp.display()).into()];
    }
    let (added_objects, added_set) = devlib::added_images(&added)?;
    // The unit's own device objects first: the first decides the unit's settings.
    found.objects.extend(added_objects);
    if verbose() {
        print_found(&found);
    }
    if found.objects.is_empty() && added_set.images.is_empty() {
        return link_staged(&linker, args, line.output.as_deref());
    }

    let (mut set, warnings) = if found.objects.is_empty() {
        (sycl_format::ImageSet::default(), vec![])
    } else {
        let settings = embed::Settings::of(&found.objects)?;
        embed::device_link(&found.objects, &settings, &found.libraries)?
    };
    set.images.extend(added_set.images);
    for warning in &warnings {
        for line in warning.lines() {
            eprintln!("sycl-ld: {line}");
        }
    }
    let mut full = args;
    if !set.images.is_empty() {
        let (object, marker) = embed::note_object(&set);
        let note = dir.path().join("sycl-images.o");
        std::fs::write(&note, object).with_context(|| format!("writing {}", note.display()))?;
        full.push(note.into_os_string());
        // A shared library exports the marker, so that the runtime can tell whether it was
        // opened RTLD_LOCAL. rustc's version script hides everything it does not list: add it.
        if line.shared {
            if let Some(rewritten) = export_marker(&expanded, &marker, dir.path())? {
                full = rewritten;
                full.push(dir.path().join("sycl-images.o").into_os_string());
            }
        }
    }
    // A shared library whose device code this unit imports stays a dependency even when no
    // host symbol of it is used (rustc links with --as-needed).
    let imports = embed::imports(&set);
    for lib in &found.libraries {
        if lib.exports.iter().any(|e| imports.contains(e)) {
            full.push("-Wl,--push-state,--no-as-needed".into());
            full.push(format!("-l:{}", lib.file_name).into());
            full.push("-Wl,--pop-state".into());
        }
    }
    link_staged(&linker, full, line.output.as_deref())
}

/// A unit without device code: this process becomes the real linker (`exec`), with the
/// command line as rustc wrote it, so the link is the real linker's alone: its exit status, its
/// signals, its output as it leaves it. Returns only when the linker could not be started.
///
/// Spawning it instead costs a fork and a wait besides the linker's own start (0.2-0.4 ms a
/// link on a 2-core VM, a fifth of what sycl-ld added to a link), on every build script's
/// and proc macro's link; and staging its output would buy nothing that the real linker does
/// not do itself: GNU ld and gold remove their output when a link fails, lld writes a
/// temporary file that it renames into place.
fn pass_through(linker: &OsStr, args: &[OsString]) -> Result<ExitCode> {
    let err = Command::new(linker).args(args).exec();
    Err(err).with_context(|| format!("running the linker `{}`", linker.to_string_lossy()))
}

fn print_found(found: &scan::Found) {
    for o in &found.objects {
        eprintln!("sycl-ld: device object {} ({})", o.object.source, o.origin);
    }
    for l in &found.libraries {
        eprintln!("sycl-ld: device library {} exports {} symbol(s)", l.file_name, l.exports.len());
    }
}

/// Runs the linker of a unit with device code (or images asked for), so that its output
/// appears complete or not at all: it writes a temporary file beside the output (an `-o`
/// appended to the command line wins over rustc's), renamed into place only when the link
/// succeeded. Returns the linker's exit status. The linker is a child, since someone has to
/// rename after it, and the note object it reads lies in a temporary directory that this
/// process removes.
fn link_staged(linker: &OsStr, args: Vec<OsString>, output: Option<&Path>) -> Result<ExitCode> {
    let staged = output.map(|out| {
        let name = out.file_name().unwrap_or_default().to_string_lossy();
        out.with_file_name(format!(".{name}.sycl-ld-{}.tmp", std::process::id()))
    });
    let mut command = Command::new(linker);
    command.args(args);
    if let Some(tmp) = &staged {
        command.arg("-o").arg(tmp);
    }
    let status = command
        .status()
        .with_context(|| format!("running the linker `{}`", linker.to_string_lossy()));
    let status = match status {
        Ok(status) => status,
        Err(e) => {
            staged.iter().for_each(|t| drop(std::fs::remove_file(t)));
            return Err(e);
        }
    };
    if let (Some(tmp), Some(out)) = (&staged, output) {
        // A linker that succeeds without writing anything (a `true` standing in for it, a
        // query) leaves nothing to move, and any previous output as it was.
        if status.success() && std::fs::symlink_metadata(tmp).is_ok() {
            std::fs::rename(tmp, out)
                .with_context(|| format!("moving the linked output to {}", out.display()))?;
        } else {
            let _ = std::fs::remove_file(tmp);
        }
    }
    Ok(match status.code() {
        Some(code) => ExitCode::from(code as u8),
        None => ExitCode::FAILURE,
    })
}

/// The command line with its `--version-script` replaced by a copy that exports `marker`
/// (passed through a response file of our own, since the original may be long); `None` when
/// the link has no version script, so every global symbol is exported anyway.
fn export_marker(
    expanded: &[OsString],
    marker: &str,
    dir: &std::path::Path,
) -> Result<Option<Vec<OsString>>> {
    const FLAG: &str = "-Wl,--version-script=";
    let Some(index) = expanded.iter().position(|a| a.to_str().is_some_and(|a| a.starts_with(FLAG)))
    else {
        return Ok(None);
    };
    let path = &expanded[index].to_str().unwrap()[FLAG.len()..];
    let script = std::fs::read_to_string(path)
        .with_context(|| format!("reading the version script {path}"))?;
    let copy = dir.join("version-script");
    std::fs::write(&copy, embed::export_in_version_script(&script, marker))
        .with_context(|| format!("writing {}", copy.display()))?;
    let mut args = expanded.to_vec();
    args[index] = format!("{FLAG}{}", copy.display()).into();
    let rsp = dir.join("link.rsp");
    std::fs::write(&rsp, args::quote_response_file(&args))
        .with_context(|| format!("writing {}", rsp.display()))?;
    Ok(Some(vec![format!("@{}", rsp.display()).into()]))
}
