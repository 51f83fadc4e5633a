// The identity of the code that shapes a program, shared by the build script (`build.rs`,
// through `include!`, which is why this file has no inner doc) and the unit test that checks
// the identity compiled into the runtime is that of the sources it was built from.
//
// What shapes a program besides its images: this crate's sources (resolution, the SPIR-V
// rewrites, the link for PoCL, the options) and, where they are built from the same checkout,
// `sycl-spirv`'s (the linker and its rewrites) and `sycl-format`'s. A crate from a registry is
// immutable for its version, which the key holds as well.

/// The directories whose files make up the identity: `src/` of this crate, and of its sibling
/// crates `sycl-spirv` and `sycl-format` where they sit beside it (a checkout of the
/// repository, not a package).
fn identity_dirs(manifest_dir: &std::path::Path) -> Vec<std::path::PathBuf> {
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
fn code_identity(dirs: &[std::path::PathBuf]) -> std::io::Result<String> {
    use std::hash::Hasher;
    // Two independent 64-bit digests (SipHash with fixed keys, the same in the build script and
    // the crate) over the same stream: change detection, not a defence against forgery.
    let mut hashers =
        [std::hash::DefaultHasher::new(), std::hash::DefaultHasher::new()];
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
