//! What `sycl-ld` says about how to call it: its own help (`--help`, `-h`, no arguments),
//! each command's usage and help, the error for a command's arguments it cannot use, and the
//! error for a link command line written for a bare `ld`. A link reaches this module only
//! when it fails, so nothing here may cost a passing link anything; and a link's own
//! `--help` (one among other link arguments) is the real linker's business, never ours.

use std::ffi::OsString;
use std::fmt;
use std::os::unix::ffi::OsStrExt;
use std::path::Path;

/// The target `sycl-ld` was built for: the `[target.…]` table to name when a command line
/// does not say which target it links for.
const BUILT_FOR: &str = env!("SYCL_LD_TARGET");

/// A command of `sycl-ld` (`sycl-ld NAME ARGS...`), as its help and its errors describe it.
#[derive(Debug)]
pub(crate) struct Command {
    pub name: &'static str,
    /// The arguments, as the usage line shows them after `sycl-ld NAME`.
    pub args: &'static str,
    /// What it does, in one line.
    pub summary: &'static str,
    /// The rest of its help: what it reads and writes, then its options.
    pub details: &'static str,
}

pub(crate) const INSPECT: Command = Command {
    name: "inspect",
    args: "FILE [--json] [--extract DIR]",
    summary: "list the device images embedded in a binary",
    details: "\
For each image: its format and target, its kernels, exported and imported symbols, and every
property set, with the device requirements decoded; for a PTX image, also what its directives
declare (.version, .target, .visible .entry and .func, .extern .func, visible variables). FILE
is an executable, a shared library, an object file or a device library file (device-lib's);
one without images lists none. For device objects not linked yet (an object, a static archive
or an rlib that sycl-build made) it names each, then lists the spir64 images a link makes of
them.

options:
    --json           print JSON instead of text
    --extract DIR    also write each image's code to DIR as image-N.TARGET.EXT (spv, ptx,
                     cubin for an NVIDIA object, bc, bin), for spirv-dis, ptxas or cuobjdump
",
};

pub(crate) const POST_LINK: Command = Command {
    name: "post-link",
    args: "[--split MODE] -o DIR INPUT...",
    summary: "write a unit's device images as a file table",
    details: "\
Device-links the device objects found in the INPUTs (objects, archives and rlibs that
sycl-build made) and post-links them as a link would, then writes DIR/table.txt, a
[Code|Properties|Symbols] table, with each image's SPIR-V, property sets and symbols beside it.

options:
    --split MODE    per_kernel, per_source, off or auto (default: the split mode of the
                    crate whose device object comes first)
    -o DIR          the directory to write (made if missing)
",
};

pub(crate) const ASPECT_FILTER: Command = Command {
    name: "aspect-filter",
    args: "--target T [--device-config FILE] [-o OUT] TABLE",
    summary: "keep the rows of a file table that a target can run",
    details: "\
DPC++'s sycl-aspect-filter: a row of TABLE stays when its image has no device requirements,
or when target T's entry in the device configuration accepts them. A table without a
Properties column passes whole.

options:
    --target T              an entry of the device configuration (intel_cpu_x86_64, pocl_cpu)
    --device-config FILE    the device configuration (default: sycl-build's)
    -o OUT                  write the table to OUT instead of standard output
",
};

pub(crate) const DEVICE_LIB: Command = Command {
    name: "device-lib",
    args: "[--split MODE] [COMPILER OPTION...] -o OUT INPUT...",
    summary: "make a standalone device library file",
    details: "\
Compiles the .cl and .clcpp INPUTs with sycl-build, device-links them with the device objects
found in the other INPUTs (objects and archives that sycl-build made), and writes the images
to OUT: a file that a program loads with sycl_runtime::load_device_library, or adds to a
link with --sycl-add-images=OUT. The compiler's warnings go to standard error.

options:
    --split MODE    per_kernel, per_source, off or auto (default: auto)
    -o OUT          the file to write
    -D NAME[=VALUE], -U NAME, -I DIR
                    a macro defined or undefined, a directory searched for #include
    -cl-std=VERSION the language (default: CL2.0 for .cl, clc++2021 for .clcpp)
    -cl-OPTION      an OpenCL compiler option (-cl-fast-relaxed-math, -cl-mad-enable, ...)
    -W..., -w       the compiler's warnings, as clang takes them
    -g              debug information, as clang makes it
",
};

pub(crate) const HELP: Command = Command {
    name: "help",
    args: "[COMMAND]",
    summary: "this help, or a command's",
    details: "\
The same as `sycl-ld --help`, or `sycl-ld COMMAND --help`.
",
};

pub(crate) const COMMANDS: [&Command; 5] =
    [&INSPECT, &POST_LINK, &ASPECT_FILTER, &DEVICE_LIB, &HELP];

/// The command named `name`, if `sycl-ld` has one.
pub(crate) fn command(name: &str) -> Option<&'static Command> {
    COMMANDS.into_iter().find(|c| c.name == name)
}

impl Command {
    pub(crate) fn usage(&self) -> String {
        format!("usage: sycl-ld {} {}", self.name, self.args)
    }

    /// `sycl-ld NAME --help`.
    pub(crate) fn help(&self) -> String {
        format!("sycl-ld {}: {}\n\n{}\n\n{}", self.name, self.summary, self.usage(), self.details)
    }

    /// The error for arguments this command cannot use: what is wrong, then the usage.
    pub(crate) fn error(&'static self, message: impl fmt::Display) -> anyhow::Error {
        UsageError { command: self, message: message.to_string() }.into()
    }

    /// `path`, when it names something that exists; otherwise the error that names it.
    pub(crate) fn existing<'a>(&'static self, path: &'a Path) -> anyhow::Result<&'a Path> {
        match std::fs::metadata(path) {
            Ok(_) => Ok(path),
            Err(e) => Err(self.error(format!("{}: {e}", path.display()))),
        }
    }
}

/// Arguments a command cannot use. `main` prints the message, then the command's usage, and
/// exits with status 2.
#[derive(Debug)]
pub(crate) struct UsageError {
    pub command: &'static Command,
    pub message: String,
}

impl fmt::Display for UsageError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.command.name, self.message)
    }
}

impl std::error::Error for UsageError {}

/// `sycl-ld --help`: what it is, how cargo is told to use it, its commands, and what it reads
/// from the environment. `linker` is the path to show in the configuration.
pub(crate) fn help(linker: &str) -> String {
    let mut commands = String::new();
    for c in COMMANDS {
        commands += &format!("    {} {}\n        {}\n", c.name, c.args, c.summary);
    }
    format!(
        "\
sycl-ld: the linker cargo calls for crates with device code

Each link's device code (sycl-build's device objects, in objects, archives and rlibs; device
images in the shared libraries it links against) is device-linked, post-linked and embedded
in the output, then the real linker runs with rustc's command line. A link without device
code runs the real linker on the command line as given.

Cargo calls it when .cargo/config.toml says so. rustc would take a linker whose name ends in
`ld` for a bare `ld`, and pass it ld's arguments instead of cc's, hence the flavor:

{config}
usage:
    sycl-ld LINK-ARGS...         link: how rustc calls it, with a cc command line
    sycl-ld COMMAND ARGS...      a tool for device code (COMMAND --help for its help)
    sycl-ld --help               this help (also -h, or no arguments)
    sycl-ld --version            its version, and the real linker it runs

commands:
{commands}
link arguments of its own (taken out before the real linker runs):
    --sycl-add-images=PATH
        add the images of a device library file or a SPIR-V module to the link
        (Build::device_image in build.rs passes it)

environment:
    SYCL_LD_LINKER      the real linker (default: cc)
    SYCL_LD_SPLIT       the split mode at link time, over the one build.rs chose:
                        per_kernel, per_source, off or auto
    SYCL_LD_TARGETS     targets every link adds to those build.rs chose, comma-separated
                        (SYCL_LD_TARGETS=ptx64 makes a whole build's PTX for NVIDIA GPUs)
    SYCL_LD_VERBOSE=1   say which device objects and device libraries each link found,
                        and per target how many images it made, their bytes and time
    SYCL_CLANG, SYCL_LLVM_SPIRV, SYCL_DEVICE_CONFIG
                        as for sycl-build: the tools and the device configuration that
                        device-lib compiles sources with (llvm-spirv also makes the
                        pocl_cpu and ptx64 images of a link)
    SYCL_LLVM_DIS, SYCL_LLVM_LINK, SYCL_OPT_16, SYCL_LLC, SYCL_LIBCLC_NVPTX
                        what makes the ptx64 images of a link (default: llvm-dis-16,
                        llvm-link-16, opt-16, llc-16 on PATH and libclc's
                        /usr/lib/clc/nvptx64--nvidiacl.bc)
    SYCL_LD_PTX_KEEP=1  keep each ptx64 image's intermediate files and say where
",
        config = config_lines(BUILT_FOR, linker),
    )
}

/// `sycl-ld --version`.
pub(crate) fn version(real_linker: &OsString, from_env: bool) -> String {
    let source = if from_env { " (SYCL_LD_LINKER)" } else { "" };
    format!(
        "sycl-ld {}\nreal linker: {}{source}\n",
        env!("CARGO_PKG_VERSION"),
        real_linker.to_string_lossy()
    )
}

fn config_lines(target: &str, linker: &str) -> String {
    format!(
        "    [target.{target}]\n    linker = \"{linker}\"\n    rustflags = [\"-C\", \"linker-flavor=gcc\"]\n"
    )
}

/// The error for a link command line written for a bare `ld` (rustc's `ld` and `ld.lld`
/// flavors): `arg` is the first argument only `ld` takes, `args` the whole (expanded) command
/// line, `linker` how rustc named sycl-ld.
pub(crate) fn ld_flavor_error(arg: &OsString, args: &[OsString], linker: &str) -> anyhow::Error {
    let arg = arg.to_string_lossy();
    let target = target_of(args).unwrap_or(BUILT_FOR);
    let mut message = format!(
        "\
rustc passed an `ld` command line (`{arg}` bare, not `-Wl,{arg}`),
as it does for a linker whose name ends in `ld` unless `-C linker-flavor=gcc` says otherwise;
sycl-ld needs the cc command line. Give the flavor beside the linker, in .cargo/config.toml:

{config}",
        config = config_lines(target, linker),
    );
    for var in ["CARGO_ENCODED_RUSTFLAGS", "RUSTFLAGS"] {
        if std::env::var_os(var).is_some() {
            message += &format!(
                "\n{var} is set in the environment, so cargo ignores every `rustflags` of \
                 .cargo/config.toml:\nadd `-C linker-flavor=gcc` to {var} instead.\n"
            );
            break;
        }
    }
    message += &format!(
        "\nWith `cargo build --target {target}`, cargo gives those rustflags to
that target's crates only, while build scripts and proc macros still link through sycl-ld:
build for the host without `--target`."
    );
    anyhow::anyhow!(message)
}

/// The target a rustc command line links for, read from the path of its target libraries
/// (`…/lib/rustlib/TRIPLE/lib`).
fn target_of(args: &[OsString]) -> Option<&str> {
    const RUSTLIB: &[u8] = b"/lib/rustlib/";
    args.iter().find_map(|arg| {
        let bytes = arg.as_bytes();
        let at = bytes.windows(RUSTLIB.len()).position(|w| w == RUSTLIB)? + RUSTLIB.len();
        let rest = &bytes[at..];
        let triple = &rest[..rest.iter().position(|&b| b == b'/')?];
        std::str::from_utf8(triple).ok().filter(|t| !t.is_empty())
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_target_is_read_from_the_sysroot_path() {
        let args: Vec<OsString> = [
            "main.o",
            "-L",
            "/home/u/.rustup/toolchains/stable-x86_64-unknown-linux-gnu/lib/rustlib/aarch64-unknown-linux-gnu/lib",
        ]
        .iter()
        .map(OsString::from)
        .collect();
        assert_eq!(target_of(&args), Some("aarch64-unknown-linux-gnu"));
        assert_eq!(target_of(&args[..1]), None);
    }

    #[test]
    fn every_command_is_found_by_name_and_its_help_starts_with_its_usage() {
        for c in COMMANDS {
            assert_eq!(command(c.name).map(|c| c.name), Some(c.name));
            assert!(c.help().contains(&format!("\n\nusage: sycl-ld {} {}\n\n", c.name, c.args)));
        }
        assert!(command("link").is_none());
    }
}
