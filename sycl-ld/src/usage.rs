//! What `sycl-ld` says about how to call it. For now, the error for a link command line
//! written for a bare `ld`. A link reaches this module only when it fails, so nothing here
//! may cost a passing link anything.

use std::ffi::OsString;
use std::os::unix::ffi::OsStrExt;

/// The target `sycl-ld` was built for: the `[target.…]` table to name when a command line
/// does not say which target it links for.
const BUILT_FOR: &str = env!("SYCL_LD_TARGET");

fn config_lines(target: &str, linker: &str) -> String {
    format!(
        "    [target.{target}]\n    linker = \"{linker}\"\n    rustflags = [\"-C\", \"linker-flavor=gcc\"]\n"
    )
}

/// The error for a link command line written for a bare `ld` (rustc's `ld` and `ld.lld`
/// flavors): `arg` is the first argument only `ld` takes, `args` the whole (expanded) command
/// line, `linker` how rustc named sycl-ld.
pub fn ld_flavor_error(arg: &OsString, args: &[OsString], linker: &str) -> anyhow::Error {
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
}
