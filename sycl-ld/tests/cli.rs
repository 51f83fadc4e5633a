//! `sycl-ld` as cargo runs it: exact pass-through without device code, images appended with
//! it, device-link errors reported without running the linker. The real linker is replaced
//! by a script that records its arguments.

use std::path::PathBuf;
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

    fn link(&self, args: &[&str], exit: i32) -> Output {
        Command::new(env!("CARGO_BIN_EXE_sycl-ld"))
            .args(args)
            .env("SYCL_LD_LINKER", self.path("fake-cc"))
            .env("FAKE_EXIT", exit.to_string())
            .current_dir(self.dir.path())
            .output()
            .unwrap()
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
    let args = ["-m64", "missing.o", "@cmds.rsp", "-Wl,--as-needed", "-o", "out bin", "-nodefaultlibs"];
    let out = f.link(&args, 0);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    // Untouched, but for the output staged beside its place (the last -o wins).
    let got = f.linker_args().unwrap();
    assert_eq!(&got[..args.len()], &args[..]);
    assert_eq!(got.len(), args.len() + 2);
    assert_eq!(got[args.len()], "-o");
    assert!(got[args.len() + 1].starts_with(".out bin.sycl-ld-"), "{got:?}");
    assert_eq!(std::fs::read_to_string(f.path("out bin")).unwrap(), "linked\n");
}

#[test]
fn a_linker_that_writes_nothing_succeeds_and_leaves_the_previous_output() {
    let f = Fixture::new();
    std::fs::write(f.path("quiet-cc"), "#!/bin/sh\nexit 0\n").unwrap();
    Command::new("chmod").arg("+x").arg(f.path("quiet-cc")).status().unwrap();
    std::fs::write(f.path("out"), "previous build").unwrap();
    let out = Command::new(env!("CARGO_BIN_EXE_sycl-ld"))
        .args(["main.o", "-o", "out"])
        .env("SYCL_LD_LINKER", f.path("quiet-cc"))
        .current_dir(f.dir.path())
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    assert_eq!(std::fs::read_to_string(f.path("out")).unwrap(), "previous build");
}

#[test]
fn a_failed_link_without_device_code_leaves_the_previous_output() {
    let f = Fixture::new();
    std::fs::write(f.path("out"), "previous build").unwrap();
    let out = f.link(&["main.o", "-o", "out"], 1);
    assert_eq!(out.status.code(), Some(1));
    assert_eq!(std::fs::read_to_string(f.path("out")).unwrap(), "previous build", "untouched");
    let names: Vec<String> = std::fs::read_dir(f.dir.path()).unwrap().map(|e| e.unwrap().file_name().to_string_lossy().into_owned()).collect();
    assert!(!names.iter().any(|n| n.ends_with(".tmp")), "no half-written file: {names:?}");
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
    let args = ["main.o", "-Wl,-Bstatic", "-L", &dir, "-lsycl_device_app", "-Wl,-Bdynamic", "-o", "out"];
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
    let leftovers: Vec<_> = std::fs::read_dir(f.dir.path()).unwrap().filter_map(|e| e.ok()).filter(|e| e.file_name().to_string_lossy().ends_with(".tmp")).collect();
    assert!(leftovers.is_empty());
}

#[test]
fn a_failed_link_leaves_no_output_at_all() {
    let f = Fixture::new();
    let archive = f.device_archive("fail", &[("k.cl", "__kernel void k(__global int *o) { o[0] = 1; }\n")]);
    std::fs::write(f.path("out"), "previous build").unwrap();
    let out = f.link(&[archive.to_str().unwrap(), "-o", "out"], 1);
    assert_eq!(out.status.code(), Some(1));
    assert_eq!(std::fs::read_to_string(f.path("out")).unwrap(), "previous build", "untouched");
    let names: Vec<String> = std::fs::read_dir(f.dir.path()).unwrap().map(|e| e.unwrap().file_name().to_string_lossy().into_owned()).collect();
    assert!(!names.iter().any(|n| n.ends_with(".tmp")), "no half-written file: {names:?}");
}

#[test]
fn the_note_object_holds_the_post_linked_images() {
    let f = Fixture::new();
    let archive = f.device_archive(
        "lib",
        &[("lib.cl", "#include <sycl/device.h>\nSYCL_EXTERNAL int twice(int i) { return 2 * i; }\n")],
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
    let notes = sycl_format::find_notes(section.data().unwrap(), sycl_format::NOTE_TYPE_IMAGES, 4).unwrap();
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
    assert!(err.contains("symbol `f` is defined in both") && err.contains("a.cl") && err.contains("b.cl"), "{err}");
    assert!(f.linker_args().is_none(), "the linker must not run");
}

#[test]
fn a_corrupt_device_object_is_named() {
    let f = Fixture::new();
    let archive = f.device_archive("bad", &[("x.cl", "__kernel void k(__global int *o) { o[0] = 1; }\n")]);
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
    let archive = f.device_archive("trunc", &[("t.cl", "__kernel void k(__global int *o) { o[0] = 1; }\n")]);
    let bytes = std::fs::read(&archive).unwrap();
    let cut = f.path("libcut.a");
    std::fs::write(&cut, &bytes[..bytes.len() - 100]).unwrap();
    let out = f.link(&[cut.to_str().unwrap(), "-o", "out"], 0);
    assert_eq!(out.status.code(), Some(1));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("libcut.a") && err.contains("malformed"), "{err}");
    assert!(f.linker_args().is_none(), "the linker must not run");
}

#[test]
fn an_object_whose_section_lies_outside_the_file_is_named() {
    let f = Fixture::new();
    let archive = f.device_archive("lie", &[("l.cl", "__kernel void k(__global int *o) { o[0] = 1; }\n")]);
    let mut bytes = std::fs::read(&archive).unwrap();
    // The first member's ELF: point every section header's offset far past the end.
    let elf = bytes.windows(4).position(|w| w == b"\x7fELF").unwrap();
    let shoff = u64::from_le_bytes(bytes[elf + 40..elf + 48].try_into().unwrap()) as usize;
    let shnum = u16::from_le_bytes(bytes[elf + 60..elf + 62].try_into().unwrap()) as usize;
    for i in 1..shnum {
        let at = elf + shoff + i * 64 + 24;
        bytes[at..at + 8].copy_from_slice(&(1u64 << 40).to_le_bytes());
    }
    let lying = f.path("liblying.a");
    std::fs::write(&lying, bytes).unwrap();
    let out = f.link(&[lying.to_str().unwrap(), "-o", "out"], 0);
    let err = String::from_utf8_lossy(&out.stderr);
    // The section-name table itself now lies outside the file: the member is not ours to
    // read, so the link goes on without it (the real linker then judges the archive).
    assert!(out.status.success() || err.contains("liblying.a"), "{err}");
}

#[test]
fn garbage_spirv_in_a_device_object_is_named() {
    let f = Fixture::new();
    let archive = f.device_archive("garbage", &[("g.cl", "__kernel void k(__global int *o) { o[0] = 1; }\n")]);
    let mut bytes = std::fs::read(&archive).unwrap();
    let spirv = bytes.windows(4).position(|w| w == [0x03, 0x02, 0x23, 0x07]).unwrap();
    bytes[spirv + 20..spirv + 24].copy_from_slice(&0xffff_0011u32.to_le_bytes()); // first instruction: 65535 words
    let bad = f.path("libbadspirv.a");
    std::fs::write(&bad, bytes).unwrap();
    let out = f.link(&[bad.to_str().unwrap(), "-o", "out"], 0);
    assert_eq!(out.status.code(), Some(1));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("libbadspirv.a(sycl-device-0-g.o)") && err.contains("malformed SPIR-V"), "{err}");
}

#[test]
fn an_unwritable_output_is_the_linkers_error_and_leaves_nothing() {
    let f = Fixture::new();
    let archive = f.device_archive("unw", &[("u.cl", "__kernel void k(__global int *o) { o[0] = 1; }\n")]);
    let out = Command::new(env!("CARGO_BIN_EXE_sycl-ld"))
        .arg(&archive)
        .args(["-shared", "-nostdlib", "-o", "/nonexistent-dir/libx.so"])
        .env_remove("SYCL_LD_LINKER")
        .output()
        .unwrap();
    assert!(!out.status.success());
    assert!(!std::path::Path::new("/nonexistent-dir").exists());
}
