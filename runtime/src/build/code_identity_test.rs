//! The code identity compiled into the runtime ([`super::CODE_IDENTITY`]) is that of the
//! sources it was built from, and changes with any of their bytes.

include!("../../code_identity.rs");

#[test]
fn the_compiled_code_identity_is_that_of_the_sources() {
    let dirs = identity_dirs(std::path::Path::new(env!("CARGO_MANIFEST_DIR")));
    assert!(
        dirs.iter().any(|d| d.ends_with("sycl-spirv/src")),
        "built from a checkout: the linker's sources are part of it: {dirs:?}"
    );
    assert_eq!(code_identity(&dirs).unwrap(), super::CODE_IDENTITY);
}

#[test]
fn any_change_to_a_source_changes_the_code_identity() {
    let dir = tempfile::tempdir().unwrap();
    let src = dir.path().join("src");
    std::fs::create_dir_all(src.join("build")).unwrap();
    std::fs::write(src.join("lib.rs"), "fn a() {}").unwrap();
    std::fs::write(src.join("build/spir.rs"), "fn rewrite() {}").unwrap();
    let dirs = [src.clone()];
    let before = code_identity(&dirs).unwrap();
    assert_eq!(code_identity(&dirs).unwrap(), before, "the same sources, the same identity");
    std::fs::write(src.join("build/spir.rs"), "fn rewrite() { }").unwrap();
    let edited = code_identity(&dirs).unwrap();
    assert_ne!(edited, before, "one byte more in a nested file");
    std::fs::rename(src.join("build/spir.rs"), src.join("build/spir2.rs")).unwrap();
    assert_ne!(code_identity(&dirs).unwrap(), edited, "a file renamed");
}
