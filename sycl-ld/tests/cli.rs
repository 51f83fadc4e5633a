//! `sycl-ld` as cargo runs it: exact pass-through without device code, images appended with
//! it, device-link errors reported without running the linker, an `ld` command line refused
//! with the configuration that fixes it. And as a person runs it: its own help, each
//! command's, and what wrong arguments get. The real linker is replaced by a script that
//! records its arguments.

use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use object::{Object, ObjectSection};

struct Fixture {
    dir: tempfile::TempDir,
}

impl Fixture {
    fn new() -> Fixture {
        let dir = tempfile::tempdir().unwrap();
        let script = dir.path().join("fake-cc");
        std::fs::write(
            &script,
            // Records its arguments and, like a real linker, writes the file the last -o names.
            "#!/bin/sh\nout=\"\"; prev=\"\"\nfor a in \"$@\"; do printf '%s\\n' \"$a\"; [ \"$prev\" = \"-o\" ] && out=\"$a\"; prev=\"$a\"; done > \"$(dirname \"$0\")/args\"\n[ -n \"$out\" ] && echo linked > \"$out\"\nexit ${FAKE_EXIT:-0}\n",
        )
        .unwrap();
        Command::new("chmod").arg("+x").arg(&script).status().unwrap();
        Fixture { dir }
    }

    fn path(&self, name: &str) -> PathBuf {
        self.dir.path().join(name)
    }

    /// An executable shell script `name` in the fixture's directory.
    fn script(&self, name: &str, text: &str) -> PathBuf {
        let path = self.path(name);
        std::fs::write(&path, text).unwrap();
        Command::new("chmod").arg("+x").arg(&path).status().unwrap();
        path
    }

    /// `sycl-ld` in the fixture's directory, with the fake linker and none of the caller's
    /// RUSTFLAGS (which the `ld` command line's error mentions).
    fn sycl_ld(&self) -> Command {
        let mut command = Command::new(env!("CARGO_BIN_EXE_sycl-ld"));
        command
            .env("SYCL_LD_LINKER", self.path("fake-cc"))
            .env_remove("RUSTFLAGS")
            .env_remove("CARGO_ENCODED_RUSTFLAGS")
            .current_dir(self.dir.path());
        command
    }

    fn link(&self, args: &[&str], exit: i32) -> Output {
        self.sycl_ld().args(args).env("FAKE_EXIT", exit.to_string()).output().unwrap()
    }

    /// What the fake linker was given, or None when it did not run.
    fn linker_args(&self) -> Option<Vec<String>> {
        let text = std::fs::read_to_string(self.path("args")).ok()?;
        Some(text.lines().map(str::to_string).collect())
    }

    /// Compiles device sources into a device archive, as a build script would.
    fn device_archive(&self, name: &str, sources: &[(&str, &str)]) -> PathBuf {
        let mut build = sycl_build::Build::new();
        build.cargo_metadata(false).out_dir(self.path(&format!("out-{name}")));
        for (file, text) in sources {
            let path = self.path(file);
            std::fs::write(&path, text).unwrap();
            build.file(path);
        }
        build.try_compile(name).unwrap().archive
    }
}

#[test]
fn without_device_code_the_linker_gets_the_exact_command_line() {
    let f = Fixture::new();
    std::fs::write(f.path("cmds.rsp"), "-lfoo\n'with space.o'\n").unwrap();
    let args =
        ["-m64", "missing.o", "@cmds.rsp", "-Wl,--as-needed", "-o", "out bin", "-nodefaultlibs"];
    let out = f.link(&args, 0);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    assert_eq!(f.linker_args().unwrap(), args, "nothing added, nothing changed");
    assert_eq!(std::fs::read_to_string(f.path("out bin")).unwrap(), "linked\n");
}

/// Without device code sycl-ld becomes the real linker (`exec`): no second process, and
/// nothing done after it, so whatever the linker leaves, a failed link's output included,
/// is what cc alone would have left.
#[test]
fn without_device_code_sycl_ld_becomes_the_linker() {
    let f = Fixture::new();
    let linker = f.script(
        "pid-cc",
        "#!/bin/sh\necho $$ > \"$(dirname \"$0\")/pid\"\necho half > \"$3\"\nexit 1\n",
    );
    std::fs::write(f.path("out"), "previous build").unwrap();
    let child =
        f.sycl_ld().args(["main.o", "-o", "out"]).env("SYCL_LD_LINKER", linker).spawn().unwrap();
    let pid = child.id();
    let out = child.wait_with_output().unwrap();
    assert_eq!(out.status.code(), Some(1), "the linker's exit status");
    let linker_pid: u32 = std::fs::read_to_string(f.path("pid")).unwrap().trim().parse().unwrap();
    assert_eq!(linker_pid, pid, "the linker runs as sycl-ld's own process");
    assert_eq!(
        std::fs::read_to_string(f.path("out")).unwrap(),
        "half\n",
        "the output as the linker left it"
    );
    let names: Vec<String> = std::fs::read_dir(f.dir.path())
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    assert!(!names.iter().any(|n| n.ends_with(".tmp")), "nothing staged: {names:?}");
}

#[test]
fn a_missing_linker_is_named() {
    let f = Fixture::new();
    let out = f
        .sycl_ld()
        .args(["main.o", "-o", "out"])
        .env("SYCL_LD_LINKER", f.path("no-such-cc"))
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("running the linker") && err.contains("no-such-cc"), "{err}");
}

#[test]
fn a_linker_that_writes_nothing_succeeds_and_leaves_the_previous_output() {
    let f = Fixture::new();
    let archive =
        f.device_archive("quiet", &[("q.cl", "__kernel void k(__global int *o) { o[0] = 1; }\n")]);
    let linker = f.script("quiet-cc", "#!/bin/sh\nexit 0\n");
    std::fs::write(f.path("out"), "previous build").unwrap();
    // With device code, so that the output is staged: there is nothing to move into place.
    let out = f
        .sycl_ld()
        .args([archive.to_str().unwrap(), "-o", "out"])
        .env("SYCL_LD_LINKER", linker)
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    assert_eq!(std::fs::read_to_string(f.path("out")).unwrap(), "previous build");
}

#[test]
fn the_linker_exit_status_is_returned() {
    let f = Fixture::new();
    assert_eq!(f.link(&["x.o", "-o", "out"], 3).status.code(), Some(3));
}

#[test]
fn device_images_are_appended_as_a_note_object() {
    let f = Fixture::new();
    let archive = f.device_archive(
        "app",
        &[("k.cl", "#include <sycl/device.h>\nSYCL_EXTERNAL int g(int);\n__kernel void k(__global int *o) { o[0] = g(1); }\n")],
    );
    let dir = archive.parent().unwrap().display().to_string();
    let args =
        ["main.o", "-Wl,-Bstatic", "-L", &dir, "-lsycl_device_app", "-Wl,-Bdynamic", "-o", "out"];
    let out = f.link(&args, 0);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let got = f.linker_args().unwrap();
    assert_eq!(&got[..args.len()], &args[..], "rustc's arguments come first, unchanged");
    assert_eq!(got.len(), args.len() + 3);
    // The temporary object is gone after the link; what matters is that one was added, named
    // like the note object. Its content is checked by the next test through a kept copy.
    assert!(got[args.len()].ends_with("sycl-images.o"));
    // The linker writes beside the output, and the result is renamed into place.
    assert_eq!(got[args.len() + 1], "-o");
    assert!(got[args.len() + 2].starts_with(".out.sycl-ld-"), "{got:?}");
    assert_eq!(std::fs::read_to_string(f.path("out")).unwrap(), "linked\n");
    let leftovers: Vec<_> = std::fs::read_dir(f.dir.path())
        .unwrap()
        .filter_map(|e| e.ok())
        .filter(|e| e.file_name().to_string_lossy().ends_with(".tmp"))
        .collect();
    assert!(leftovers.is_empty());
}

#[test]
fn a_failed_link_leaves_no_output_at_all() {
    let f = Fixture::new();
    let archive =
        f.device_archive("fail", &[("k.cl", "__kernel void k(__global int *o) { o[0] = 1; }\n")]);
    std::fs::write(f.path("out"), "previous build").unwrap();
    let out = f.link(&[archive.to_str().unwrap(), "-o", "out"], 1);
    assert_eq!(out.status.code(), Some(1));
    assert_eq!(std::fs::read_to_string(f.path("out")).unwrap(), "previous build", "untouched");
    let names: Vec<String> = std::fs::read_dir(f.dir.path())
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    assert!(!names.iter().any(|n| n.ends_with(".tmp")), "no half-written file: {names:?}");
}

#[test]
fn the_note_object_holds_the_post_linked_images() {
    let f = Fixture::new();
    let archive = f.device_archive(
        "lib",
        &[(
            "lib.cl",
            "#include <sycl/device.h>\nSYCL_EXTERNAL int twice(int i) { return 2 * i; }\n",
        )],
    );
    // Keep the note object by having the fake linker copy it.
    std::fs::write(
        f.path("fake-cc"),
        "#!/bin/sh\nprev=\"\"\nfor a in \"$@\"; do case \"$a\" in *sycl-images.o) cp \"$a\" \"$(dirname \"$0\")/kept.o\";; esac; [ \"$prev\" = \"-o\" ] && out=\"$a\"; prev=\"$a\"; done\necho linked > \"$out\"\n",
    )
    .unwrap();
    let out = f.link(&[archive.to_str().unwrap(), "-shared", "-o", "libx.so"], 0);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let bytes = std::fs::read(f.path("kept.o")).unwrap();
    let file = object::File::parse(&*bytes).unwrap();
    let section = file.section_by_name(sycl_format::IMAGE_NOTE_SECTION).unwrap();
    let notes =
        sycl_format::find_notes(section.data().unwrap(), sycl_format::NOTE_TYPE_IMAGES, 4).unwrap();
    let set = sycl_format::ImageSet::decode(notes[0]).unwrap();
    assert_eq!(set.images.len(), 1);
    assert_eq!(set.images[0].exported_symbols().collect::<Vec<_>>(), ["twice"]);
}

#[test]
fn a_multiple_definition_fails_before_the_linker_runs() {
    let f = Fixture::new();
    let def = "#include <sycl/device.h>\nSYCL_EXTERNAL int f(int i) { return i; }\n";
    let archive = f.device_archive("dup", &[("a.cl", def), ("b.cl", def)]);
    let out = f.link(&[archive.to_str().unwrap(), "-o", "out"], 0);
    assert_eq!(out.status.code(), Some(1));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("symbol `f` is defined in both")
            && err.contains("a.cl")
            && err.contains("b.cl"),
        "{err}"
    );
    assert!(f.linker_args().is_none(), "the linker must not run");
}

#[test]
fn a_corrupt_device_object_is_named() {
    let f = Fixture::new();
    let archive =
        f.device_archive("bad", &[("x.cl", "__kernel void k(__global int *o) { o[0] = 1; }\n")]);
    let mut bytes = std::fs::read(&archive).unwrap();
    let at = find(&bytes, sycl_format::DEVICE_OBJECT_MAGIC).unwrap();
    bytes[at + 8] = 99; // a version from the future
    let corrupt = f.path("libcorrupt.a");
    std::fs::write(&corrupt, bytes).unwrap();
    let out = f.link(&[corrupt.to_str().unwrap(), "-o", "out"], 0);
    assert_eq!(out.status.code(), Some(1));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("libcorrupt.a(sycl-device-0-x.o): malformed device object"), "{err}");
    assert!(err.contains("unknown version 99"), "{err}");
}

fn find(haystack: &[u8], needle: &[u8]) -> Option<usize> {
    haystack.windows(needle.len()).position(|w| w == needle)
}

#[test]
fn a_truncated_archive_is_named() {
    let f = Fixture::new();
    let archive =
        f.device_archive("trunc", &[("t.cl", "__kernel void k(__global int *o) { o[0] = 1; }\n")]);
    let bytes = std::fs::read(&archive).unwrap();
    let cut = f.path("libcut.a");
    std::fs::write(&cut, &bytes[..bytes.len() - 100]).unwrap();
    let out = f.link(&[cut.to_str().unwrap(), "-o", "out"], 0);
    assert_eq!(out.status.code(), Some(1));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("libcut.a") && err.contains("malformed"), "{err}");
    assert!(f.linker_args().is_none(), "the linker must not run");
}

/// The section headers of the first ELF object in `bytes` (an archive's first member):
/// the offset of each header, and of the section-name table's data.
fn section_headers(bytes: &[u8]) -> (Vec<usize>, usize) {
    let elf = bytes.windows(4).position(|w| w == b"\x7fELF").unwrap();
    let u16_at = |at: usize| u16::from_le_bytes(bytes[at..at + 2].try_into().unwrap()) as usize;
    let shoff = u64::from_le_bytes(bytes[elf + 40..elf + 48].try_into().unwrap()) as usize;
    let (shnum, shstrndx) = (u16_at(elf + 60), u16_at(elf + 62));
    let headers: Vec<usize> = (0..shnum).map(|i| elf + shoff + i * 64).collect();
    let names = elf
        + u64::from_le_bytes(
            bytes[headers[shstrndx] + 24..headers[shstrndx] + 32].try_into().unwrap(),
        ) as usize;
    (headers, names)
}

/// Points the data of section header `at` (its `sh_offset`) far past the end of the file.
fn point_outside(bytes: &mut [u8], at: usize) {
    bytes[at + 24..at + 32].copy_from_slice(&(1u64 << 40).to_le_bytes());
}

#[test]
fn an_object_whose_device_section_lies_outside_the_file_is_named() {
    let f = Fixture::new();
    let archive =
        f.device_archive("lie", &[("l.cl", "__kernel void k(__global int *o) { o[0] = 1; }\n")]);
    let mut bytes = std::fs::read(&archive).unwrap();
    // The first member's device-object section, and it alone: its names still read.
    let (headers, names) = section_headers(&bytes);
    let wanted = format!("{}\0", sycl_format::DEVICE_OBJECT_SECTION);
    let device: Vec<usize> = headers
        .iter()
        .copied()
        .filter(|&at| {
            let name = u32::from_le_bytes(bytes[at..at + 4].try_into().unwrap()) as usize;
            bytes[names + name..].starts_with(wanted.as_bytes())
        })
        .collect();
    assert_eq!(device.len(), 1, "one device-object section in the member");
    point_outside(&mut bytes, device[0]);
    let lying = f.path("liblying.a");
    std::fs::write(&lying, bytes).unwrap();
    let out = f.link(&[lying.to_str().unwrap(), "-o", "out"], 0);
    assert_eq!(out.status.code(), Some(1), "{}", String::from_utf8_lossy(&out.stdout));
    assert_eq!(
        String::from_utf8_lossy(&out.stderr),
        format!(
            "sycl-ld: error: {}(sycl-device-0-l.o): .sycl.device_object lies outside the file\n",
            lying.display()
        )
    );
    assert!(f.linker_args().is_none(), "the linker must not run");
}

#[test]
fn an_object_whose_section_names_lie_outside_the_file_is_not_ours_and_goes_to_the_linker() {
    let f = Fixture::new();
    let archive =
        f.device_archive("lie", &[("l.cl", "__kernel void k(__global int *o) { o[0] = 1; }\n")]);
    let mut bytes = std::fs::read(&archive).unwrap();
    // Every section of the first member, the section-name table included, points past the
    // end: sycl-ld cannot tell what the member holds, so it is not an object of ours to read
    // (scan.rs), and the link goes to the real linker exactly as given, to judge the archive.
    let (headers, _) = section_headers(&bytes);
    for &at in &headers[1..] {
        point_outside(&mut bytes, at);
    }
    let lying = f.path("liblying.a");
    std::fs::write(&lying, bytes).unwrap();
    let args = [lying.to_str().unwrap(), "-o", "out"];
    let out = f.link(&args, 0);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    assert_eq!(String::from_utf8_lossy(&out.stderr), "", "nothing said");
    assert_eq!(f.linker_args().unwrap(), args, "nothing added, nothing changed");
}

#[test]
fn garbage_spirv_in_a_device_object_is_named() {
    let f = Fixture::new();
    let archive = f
        .device_archive("garbage", &[("g.cl", "__kernel void k(__global int *o) { o[0] = 1; }\n")]);
    let mut bytes = std::fs::read(&archive).unwrap();
    let spirv = bytes.windows(4).position(|w| w == [0x03, 0x02, 0x23, 0x07]).unwrap();
    bytes[spirv + 20..spirv + 24].copy_from_slice(&0xffff_0011u32.to_le_bytes()); // first instruction: 65535 words
    let bad = f.path("libbadspirv.a");
    std::fs::write(&bad, bytes).unwrap();
    let out = f.link(&[bad.to_str().unwrap(), "-o", "out"], 0);
    assert_eq!(out.status.code(), Some(1));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("libbadspirv.a(sycl-device-0-g.o)") && err.contains("malformed SPIR-V"),
        "{err}"
    );
}

#[test]
fn an_unwritable_output_is_the_linkers_error_and_leaves_nothing() {
    let f = Fixture::new();
    let archive =
        f.device_archive("unw", &[("u.cl", "__kernel void k(__global int *o) { o[0] = 1; }\n")]);
    let out = Command::new(env!("CARGO_BIN_EXE_sycl-ld"))
        .arg(&archive)
        .args(["-shared", "-nostdlib", "-o", "/nonexistent-dir/libx.so"])
        .env_remove("SYCL_LD_LINKER")
        .output()
        .unwrap();
    assert!(!out.status.success());
    assert!(!std::path::Path::new("/nonexistent-dir").exists());
}

/// A command line rustc 1.95 passed to a linker for a hello world, one argument a line:
/// captured with a script as the linker (named `sycl-ld`), without and with
/// `-C linker-flavor=gcc`; the checkout's paths replaced by `/home/user/...`.
fn captured(name: &str) -> Vec<OsString> {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data").join(name);
    std::fs::read_to_string(&path).unwrap().lines().map(OsString::from).collect()
}

/// Compares `actual` with `tests/expected/NAME`, or rewrites the file under `SYCL_TEST_BLESS=1`.
fn assert_expected(name: &str, actual: &str) {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/expected").join(name);
    if std::env::var_os("SYCL_TEST_BLESS").is_some() {
        std::fs::write(&path, actual).unwrap();
        return;
    }
    let expected = std::fs::read_to_string(&path).unwrap_or_else(|e| {
        panic!("{}: {e} (run with SYCL_TEST_BLESS=1 to create it)", path.display())
    });
    assert_eq!(
        actual,
        expected,
        "output differs from {} (SYCL_TEST_BLESS=1 rewrites it)",
        path.display()
    );
}

/// sycl-ld's output with its own path as `SYCL_LD`, so that the expected files hold anywhere.
fn normalized(bytes: &[u8]) -> String {
    let exe = env!("CARGO_BIN_EXE_sycl-ld");
    let canonical = std::fs::canonicalize(exe).unwrap();
    String::from_utf8_lossy(bytes)
        .replace(&*canonical.to_string_lossy(), "SYCL_LD")
        .replace(exe, "SYCL_LD")
}

#[test]
fn rustcs_ld_command_line_is_refused_with_the_configuration_that_fixes_it() {
    let f = Fixture::new();
    let out = f.sycl_ld().args(captured("rustc-1.95-ld-flavor.args")).output().unwrap();
    assert_eq!(out.status.code(), Some(1));
    assert!(f.linker_args().is_none(), "cc must not run: it would refuse `--as-needed`");
    assert_expected("ld-flavor.txt", &normalized(&out.stderr));
}

#[test]
fn with_rustflags_in_the_environment_the_error_says_cargo_ignores_the_configs() {
    let f = Fixture::new();
    let out = f
        .sycl_ld()
        .args(captured("rustc-1.95-ld-flavor.args"))
        .env("RUSTFLAGS", "-C opt-level=1")
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("RUSTFLAGS is set in the environment, so cargo ignores every `rustflags`"),
        "{err}"
    );
    assert!(err.contains("add `-C linker-flavor=gcc` to RUSTFLAGS instead"), "{err}");
}

#[test]
fn rustcs_cc_command_line_passes_through_untouched() {
    let f = Fixture::new();
    let args = captured("rustc-1.95-gcc-flavor.args");
    let out = f.sycl_ld().args(&args).output().unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    assert_eq!(
        f.linker_args().unwrap(),
        args.iter().map(|a| a.to_str().unwrap()).collect::<Vec<_>>()
    );
}

/// The mistake itself: rustc given sycl-ld as its linker, without and with the flavor.
#[test]
fn rustc_links_through_sycl_ld_with_the_gcc_flavor_only() {
    let f = Fixture::new();
    std::fs::write(f.path("hello.rs"), "fn main() {}\n").unwrap();
    let rustc = |flavor: &[&str]| {
        Command::new(std::env::var_os("RUSTC").unwrap_or_else(|| "rustc".into()))
            .args(["hello.rs", "-o", "hello", "-C"])
            .arg(format!("linker={}", env!("CARGO_BIN_EXE_sycl-ld")))
            .args(flavor)
            .env("SYCL_LD_LINKER", f.path("fake-cc"))
            .env_remove("RUSTFLAGS")
            .env_remove("CARGO_ENCODED_RUSTFLAGS")
            .current_dir(f.dir.path())
            .output()
            .unwrap()
    };
    let out = rustc(&[]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "{err}");
    assert!(
        err.contains("rustc passed an `ld` command line")
            && err.contains(r#"rustflags = ["-C", "linker-flavor=gcc"]"#),
        "{err}"
    );
    assert!(f.linker_args().is_none(), "cc must not run");

    let out = rustc(&["-C", "linker-flavor=gcc"]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    assert!(f.linker_args().unwrap().contains(&"-Wl,--as-needed".to_string()));
    assert_eq!(std::fs::read_to_string(f.path("hello")).unwrap(), "linked\n");
}

#[test]
fn help_is_sycl_lds_own() {
    let f = Fixture::new();
    for args in [&["--help"][..], &["-h"], &["help"]] {
        let out = f.sycl_ld().args(args).output().unwrap();
        assert!(out.status.success(), "{args:?}: {}", String::from_utf8_lossy(&out.stderr));
        assert_expected("help.txt", &normalized(&out.stdout));
    }
    // Without arguments, the same on stderr, as for a wrong command line.
    let out = f.sycl_ld().output().unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert_expected("help.txt", &normalized(&out.stderr));
    assert!(f.linker_args().is_none(), "the linker must not run");
}

#[test]
fn a_help_among_link_arguments_is_the_linkers() {
    let f = Fixture::new();
    for args in [&["--help", "-o", "out"][..], &["main.o", "-h"], &["--version", "main.o"]] {
        let out = f.link(args, 0);
        assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
        assert!(out.stdout.is_empty(), "{args:?}: no help of our own");
        assert_eq!(f.linker_args().unwrap(), args);
    }
}

#[test]
fn the_version_names_the_real_linker() {
    let f = Fixture::new();
    let out = f.sycl_ld().arg("--version").output().unwrap();
    assert!(out.status.success());
    let fake = f.path("fake-cc");
    let expected = format!(
        "sycl-ld {}\nreal linker: {} (SYCL_LD_LINKER)\n",
        env!("CARGO_PKG_VERSION"),
        fake.display()
    );
    assert_eq!(String::from_utf8_lossy(&out.stdout), expected);
    let out = f.sycl_ld().arg("--version").env_remove("SYCL_LD_LINKER").output().unwrap();
    assert_eq!(
        String::from_utf8_lossy(&out.stdout),
        format!("sycl-ld {}\nreal linker: cc\n", env!("CARGO_PKG_VERSION"))
    );
}

#[test]
fn every_command_has_its_own_help() {
    let f = Fixture::new();
    let mut all = String::new();
    for name in ["inspect", "post-link", "aspect-filter", "device-lib", "help"] {
        let out = f.sycl_ld().args([name, "--help"]).output().unwrap();
        assert!(out.status.success(), "{name}: {}", String::from_utf8_lossy(&out.stderr));
        let help = String::from_utf8(out.stdout).unwrap();
        let out = f.sycl_ld().args(["help", name]).output().unwrap();
        assert_eq!(
            String::from_utf8(out.stdout).unwrap(),
            help,
            "`help {name}` is `{name} --help`"
        );
        all += &format!("$ sycl-ld {name} --help\n{help}\n");
    }
    assert_expected("command-help.txt", &all);
}

/// Each command given what it cannot use: the message names the problem (the missing file,
/// the unknown option), a wrong argument is followed by the usage, and nothing panics.
#[test]
fn wrong_arguments_are_named_and_answered_with_the_usage() {
    let f = Fixture::new();
    std::fs::write(f.path("notes.txt"), "not a table, not an object\n").unwrap();
    let cases: &[&[&str]] = &[
        &["inspect"],
        &["inspect", "--bogus"],
        &["inspect", "notes.txt", "notes.txt"],
        &["inspect", "notes.txt", "--extract"],
        &["inspect", "missing.bin"],
        &["inspect", "notes.txt"],
        &["post-link"],
        &["post-link", "-o"],
        &["post-link", "-o", "out"],
        &["post-link", "--split"],
        &["post-link", "--split", "sometimes", "-o", "out", "notes.txt"],
        &["post-link", "-o", "out", "missing.o"],
        &["post-link", "-o", "out", "notes.txt"],
        &["aspect-filter"],
        &["aspect-filter", "--target"],
        &["aspect-filter", "--target", "pocl_cpu"],
        &["aspect-filter", "--target", "pocl_cpu", "missing.txt"],
        &["aspect-filter", "--target", "pocl_cpu", "--device-config", "missing.toml", "notes.txt"],
        &["aspect-filter", "--target", "pocl_cpu", "notes.txt"],
        &["device-lib", "-o", "out.sydl"],
        &["device-lib", "-o", "out.sydl", "missing.cl"],
        &["device-lib", "-o", "out.sydl", "notes.txt"],
        &["help", "nope"],
        &["help", "inspect", "post-link"],
    ];
    let mut all = String::new();
    for args in cases {
        let out = f.sycl_ld().args(*args).output().unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(!out.status.success() && !err.contains("panicked"), "{args:?}: {err}");
        assert!(out.stdout.is_empty(), "{args:?}");
        let code = out.status.code().unwrap();
        if code == 2 {
            assert!(
                err.trim_end()
                    .lines()
                    .last()
                    .unwrap()
                    .starts_with(&format!("usage: sycl-ld {}", args[0])),
                "{err}"
            );
        }
        all += &format!("$ sycl-ld {}\n{err}[exit {code}]\n\n", args.join(" "));
    }
    assert_expected("usage-errors.txt", &all);
}
