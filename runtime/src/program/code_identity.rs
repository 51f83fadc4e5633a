//! The identity of the code that shapes a program besides its images: a digest of this
//! crate's sources (resolution, the SPIR-V rewrites, the link for PoCL, the options) and,
//! where they are built from the same checkout, `sycl-spirv`'s (the linker and its rewrites)
//! and `sycl-format`'s. The build script computes it (it includes this file as a module of its
//! own) and compiles it in as `SYCL_RUNTIME_CODE_IDENTITY`, which every persistent cache key
//! holds; the tests here check that what was compiled in is the sources'. A crate from a
//! registry is immutable for its version, which the key holds as well. Change detection, not a
//! defence against forgery.

/// The directories whose files make up the identity: `src/` of this crate, and of its sibling
/// crates `sycl-spirv` and `sycl-format` where they sit beside it (a checkout of the
/// repository, not a package).
pub(crate) fn identity_dirs(manifest_dir: &std::path::Path) -> Vec<std::path::PathBuf> {
    let mut dirs = vec![manifest_dir.join("src")];
    let parent = manifest_dir.parent().unwrap_or(manifest_dir);
    for sibling in ["sycl-spirv", "sycl-format"] {
        let dir = parent.join(sibling);
        if dir.join("Cargo.toml").is_file() && dir.join("src").is_dir() {
            dirs.push(dir.join("src"));
        }
    }
    dirs
}

/// A hex digest over every file under `dirs`, each as its path relative to its directory and
/// its bytes, in sorted order: any change to any of them changes it.
pub(crate) fn code_identity(dirs: &[std::path::PathBuf]) -> std::io::Result<String> {
    use std::hash::Hasher;
    // Two independent 64-bit digests (SipHash with fixed keys, the same in the build script and
    // the crate) over the same stream: change detection, not a defence against forgery.
    let mut hashers = [std::hash::DefaultHasher::new(), std::hash::DefaultHasher::new()];
    hashers[1].write(b"second digest");
    for dir in dirs {
        let mut files = Vec::new();
        let mut pending = vec![dir.clone()];
        while let Some(next) = pending.pop() {
            for entry in std::fs::read_dir(&next)? {
                let path = entry?.path();
                if path.is_dir() {
                    pending.push(path);
                } else {
                    files.push(path);
                }
            }
        }
        files.sort();
        for file in files {
            let relative = file.strip_prefix(dir).unwrap_or(&file).to_string_lossy().into_owned();
            let bytes = std::fs::read(&file)?;
            for hasher in &mut hashers {
                hasher.write_usize(relative.len());
                hasher.write(relative.as_bytes());
                hasher.write_usize(bytes.len());
                hasher.write(&bytes);
            }
        }
    }
    Ok(format!("{:016x}{:016x}", hashers[0].finish(), hashers[1].finish()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_compiled_code_identity_is_that_of_the_sources() {
        let dirs = identity_dirs(std::path::Path::new(env!("CARGO_MANIFEST_DIR")));
        assert!(
            dirs.iter().any(|d| d.ends_with("sycl-spirv/src")),
            "built from a checkout: the linker's sources are part of it: {dirs:?}"
        );
        assert_eq!(code_identity(&dirs).unwrap(), super::super::CODE_IDENTITY);
    }

    #[test]
    fn any_change_to_a_source_changes_the_code_identity() {
        let dir = tempfile::tempdir().unwrap();
        let src = dir.path().join("src");
        std::fs::create_dir_all(src.join("program")).unwrap();
        std::fs::write(src.join("lib.rs"), "fn a() {}").unwrap();
        std::fs::write(src.join("program/spir.rs"), "fn rewrite() {}").unwrap();
        let dirs = [src.clone()];
        let before = code_identity(&dirs).unwrap();
        assert_eq!(code_identity(&dirs).unwrap(), before, "the same sources, the same identity");
        std::fs::write(src.join("program/spir.rs"), "fn rewrite() { }").unwrap();
        let edited = code_identity(&dirs).unwrap();
        assert_ne!(edited, before, "one byte more in a nested file");
        std::fs::rename(src.join("program/spir.rs"), src.join("program/spir2.rs")).unwrap();
        assert_ne!(code_identity(&dirs).unwrap(), edited, "a file renamed");
    }
}
