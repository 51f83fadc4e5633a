//! `cargo xtask pack PROGRAM... [--lib LIBRARY]... --out DIR [--tar ARCHIVE]`: built programs
//! copied with the shared libraries they need into one directory that runs wherever it is
//! copied, with no `LD_LIBRARY_PATH`.
//!
//! The layout is the one `sycl_build::RUN_PATH` (`$ORIGIN/deps:$ORIGIN`, examples `$ORIGIN/../deps`)
//! expects, cargo's own: each program in `DIR/`, each library in `DIR/deps/`. A program's
//! libraries are the `DT_NEEDED` entries its run path finds in the build tree (device
//! libraries linked with `link_device_library`), then theirs, and so on; what no run path
//! finds (`libc.so.6`, `libgcc_s.so.1`, the loader) comes from the target machine and is
//! listed. `--lib` adds a library no binary names, one that a program opens with `dlopen` or
//! that is `LD_PRELOAD`ed, with what it needs. After copying, every packed binary's run path
//! is checked against the packed tree: a binary linked with a run path into a build directory
//! (before run paths were relative) is refused, naming it. `--tar` then writes the directory
//! as an archive (`tar -a`: compressed as its name says, `.tar.gz`, `.tar.xz`, or plain
//! `.tar`) whose one top-level folder is `DIR`'s name.

use std::collections::BTreeMap;
use std::ffi::OsString;
use std::fs;
use std::path::{Path, PathBuf};
use std::process::Command;

use anyhow::{bail, Context, Result};
use object::elf;
use object::read::elf::{Dyn, ElfFile64, FileHeader};
use object::Endianness;

use crate::run_captured;

/// The command's usage, for `cargo xtask help` and argument errors.
const USAGE: &str = "\
usage: cargo xtask pack PROGRAM... [--lib LIBRARY]... --out DIR [--tar ARCHIVE]
  PROGRAM        a built executable (target/<profile>/NAME); copied to DIR/NAME
  --lib LIBRARY  a shared library a program opens with dlopen or one to LD_PRELOAD;
                 copied to DIR/deps/ with what it needs
  --out DIR      the directory to write (new, or empty)
  --tar ARCHIVE  also write DIR as ARCHIVE (.tar, .tar.gz, .tar.xz, ...)";

/// What `pack` was asked to do.
#[derive(Debug, PartialEq)]
struct Request {
    programs: Vec<PathBuf>,
    libraries: Vec<PathBuf>,
    out: PathBuf,
    tar: Option<PathBuf>,
}

/// Reads the command line after `pack`.
fn parse(args: &[OsString]) -> Result<Request> {
    let (mut programs, mut libraries, mut out, mut tar) = (Vec::new(), Vec::new(), None, None);
    let mut args = args.iter();
    while let Some(arg) = args.next() {
        let mut value = |name: &str| {
            args.next().map(PathBuf::from).with_context(|| format!("{name} needs a value\n{USAGE}"))
        };
        match arg.to_str() {
            Some("--lib") => libraries.push(value("--lib")?),
            Some("--out") => out = Some(value("--out")?),
            Some("--tar") => tar = Some(value("--tar")?),
            Some(flag) if flag.starts_with('-') => bail!("unknown option {flag}\n{USAGE}"),
            _ => programs.push(PathBuf::from(arg)),
        }
    }
    let out = out.with_context(|| format!("--out DIR is missing\n{USAGE}"))?;
    if programs.is_empty() {
        bail!("no PROGRAM given\n{USAGE}");
    }
    Ok(Request { programs, libraries, out, tar })
}

/// `cargo xtask pack ARGS`.
pub(crate) fn pack(args: &[OsString]) -> Result<()> {
    let request = parse(args)?;
    let packed = pack_into(&request.programs, &request.libraries, &request.out)?;
    for (name, size) in &packed.files {
        println!("xtask: packed {name} ({} KiB)", size >> 10);
    }
    println!(
        "xtask: from the target machine: {} (and at run time an OpenCL ICD loader with each \
         device's runtime, or the NVIDIA driver: docs/DEPLOYMENT.md)",
        packed.system.join(", ")
    );
    if let Some(archive) = &request.tar {
        write_tar(&request.out, archive)?;
        let size = fs::metadata(archive)?.len();
        println!("xtask: wrote {} ({} KiB)", archive.display(), size >> 10);
    }
    Ok(())
}

/// What was packed: each file (relative to the directory) with its size, and the libraries
/// left to the target machine.
struct Packed {
    files: BTreeMap<String, u64>,
    system: Vec<String>,
}

/// A binary's dynamic section: what it needs, and where it looks (`DT_RUNPATH`, or
/// `DT_RPATH` when it has no run path), as written.
#[derive(Debug, Default)]
struct Dynamic {
    needed: Vec<String>,
    run_path: Vec<String>,
}

fn dynamic_of(path: &Path) -> Result<Dynamic> {
    let data = fs::read(path).with_context(|| format!("reading {}", path.display()))?;
    let file = ElfFile64::<Endianness>::parse(&*data)
        .with_context(|| format!("{}: not a 64-bit ELF file", path.display()))?;
    let endian = file.endian();
    let sections = file.elf_header().sections(endian, &*data)?;
    let mut dynamic = Dynamic::default();
    let Some((entries, link)) = sections.dynamic(endian, &*data)? else {
        return Ok(dynamic);
    };
    let strings = sections.strings(endian, &*data, link)?;
    let (mut run_path, mut rpath) = (None, None);
    for entry in entries {
        let string = || -> Result<String> {
            Ok(String::from_utf8_lossy(entry.string(endian, strings)?).into_owned())
        };
        match entry.tag32(endian) {
            Some(elf::DT_NEEDED) => dynamic.needed.push(string()?),
            Some(elf::DT_RUNPATH) => run_path = Some(string()?),
            Some(elf::DT_RPATH) => rpath = Some(string()?),
            _ => {}
        }
    }
    let path = run_path.or(rpath).unwrap_or_default();
    dynamic.run_path = path.split(':').filter(|p| !p.is_empty()).map(str::to_string).collect();
    Ok(dynamic)
}

/// A run-path entry as the loader reads it for a binary in `dir`: `$ORIGIN` (or `${ORIGIN}`)
/// is the binary's directory.
fn expand(entry: &str, dir: &Path) -> PathBuf {
    let origin = dir.to_string_lossy();
    PathBuf::from(entry.replace("${ORIGIN}", &origin).replace("$ORIGIN", &origin))
}

/// Where `binary` (at `path`) finds the library `name` through its run path, if anywhere.
fn find(dynamic: &Dynamic, path: &Path, name: &str) -> Option<PathBuf> {
    let dir = path.parent().unwrap_or(Path::new("."));
    dynamic.run_path.iter().map(|e| expand(e, dir).join(name)).find(|p| p.is_file())
}

fn file_name(path: &Path) -> Result<String> {
    let name = path.file_name().with_context(|| format!("{}: no file name", path.display()))?;
    Ok(name.to_string_lossy().into_owned())
}

/// Copies `programs` into `out` and libraries (`extra`, and every library a packed binary's
/// run path finds) into `out/deps`, then checks that each packed binary's run path finds its
/// libraries in the packed tree.
fn pack_into(programs: &[PathBuf], extra: &[PathBuf], out: &Path) -> Result<Packed> {
    if out.exists() && fs::read_dir(out)?.next().is_some() {
        bail!("{} exists and is not empty: pack writes a new directory", out.display());
    }
    fs::create_dir_all(out.join("deps"))?;
    // Relative name in `out` → the file it is a copy of.
    let mut sources: BTreeMap<String, PathBuf> = BTreeMap::new();
    let mut queue: Vec<(String, PathBuf)> = Vec::new();
    for program in programs {
        queue.push((file_name(program)?, program.clone()));
    }
    for library in extra {
        queue.push((format!("deps/{}", file_name(library)?), library.clone()));
    }
    let mut system = Vec::new();
    while let Some((name, source)) = queue.pop() {
        if !source.is_file() {
            bail!("{}: no such file (build it first)", source.display());
        }
        if let Some(earlier) = sources.get(&name) {
            if fs::canonicalize(earlier)? != fs::canonicalize(&source)?
                && fs::read(earlier)? != fs::read(&source)?
            {
                bail!(
                    "two different files would be {name}: {} and {}",
                    earlier.display(),
                    source.display()
                );
            }
            continue;
        }
        let dynamic = dynamic_of(&source)?;
        for needed in &dynamic.needed {
            match find(&dynamic, &source, needed) {
                Some(found) => queue.push((format!("deps/{needed}"), found)),
                None if !system.contains(needed) => system.push(needed.clone()),
                None => {}
            }
        }
        sources.insert(name, source);
    }
    let mut files = BTreeMap::new();
    for (name, source) in &sources {
        let to = out.join(name);
        let size = fs::copy(source, &to)
            .with_context(|| format!("copying {} to {}", source.display(), to.display()))?;
        files.insert(name.clone(), size);
    }
    for name in sources.keys() {
        check_run_path(out, name, &sources)?;
    }
    system.sort();
    Ok(Packed { files, system })
}

/// Each library the packed binary `name` needs that was packed must be found through its run
/// path in `out`: a binary whose run path leads only into a build directory fails here. A run
/// path entry that names a directory (not `$ORIGIN`) is said.
fn check_run_path(out: &Path, name: &str, sources: &BTreeMap<String, PathBuf>) -> Result<()> {
    let path = out.join(name);
    let dynamic = dynamic_of(&path)?;
    for needed in &dynamic.needed {
        if !sources.contains_key(&format!("deps/{needed}")) {
            continue;
        }
        if !find(&dynamic, &path, needed).is_some_and(|found| found.starts_with(out)) {
            bail!(
                "{name} needs {needed}, but its run path [{}] does not lead from {} to deps/{needed}: \
                 rebuild it with a sycl-build whose link_device_library writes run paths relative \
                 to the binary ($ORIGIN)",
                dynamic.run_path.join(":"),
                out.display()
            );
        }
    }
    for entry in
        dynamic.run_path.iter().filter(|e| !e.starts_with("$ORIGIN") && !e.starts_with("${ORIGIN}"))
    {
        println!("xtask: warning: {name}'s run path names {entry}, a directory of this machine");
    }
    Ok(())
}

/// `tar -caf ARCHIVE -C PARENT NAME`: one top-level folder, compressed as the name says.
fn write_tar(dir: &Path, archive: &Path) -> Result<()> {
    let dir = fs::canonicalize(dir)?;
    let (parent, name) = (dir.parent().unwrap_or(Path::new("/")), file_name(&dir)?);
    run_captured(Command::new("tar").arg("-caf").arg(archive).arg("-C").arg(parent).arg(name))?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn args(text: &str) -> Vec<OsString> {
        text.split_whitespace().map(OsString::from).collect()
    }

    #[test]
    fn the_command_line_is_read() {
        let request = parse(&args("a b --lib l.so --out o --tar o.tar.gz")).unwrap();
        assert_eq!(
            request,
            Request {
                programs: vec!["a".into(), "b".into()],
                libraries: vec!["l.so".into()],
                out: "o".into(),
                tar: Some("o.tar.gz".into()),
            }
        );
        assert!(parse(&args("a")).unwrap_err().to_string().contains("--out DIR is missing"));
        assert!(parse(&args("--out o")).unwrap_err().to_string().contains("no PROGRAM"));
        assert!(parse(&args("a --out")).unwrap_err().to_string().contains("--out needs a value"));
        assert!(parse(&args("a --strip --out o")).unwrap_err().to_string().contains("--strip"));
    }

    #[test]
    fn origin_is_the_binarys_directory() {
        let dir = Path::new("/opt/app");
        assert_eq!(expand("$ORIGIN/deps", dir), Path::new("/opt/app/deps"));
        assert_eq!(expand("${ORIGIN}/../deps", dir), Path::new("/opt/app/../deps"));
        assert_eq!(expand("/usr/lib", dir), Path::new("/usr/lib"));
    }

    #[test]
    fn this_binarys_dynamic_section_is_read() {
        let exe = std::env::current_exe().unwrap();
        let dynamic = dynamic_of(&exe).unwrap();
        assert!(dynamic.needed.iter().any(|n| n.starts_with("libc.so")), "{dynamic:?}");
    }
}
