//! Links the `sycl-ld` executable as position-dependent (`-no-pie`), and tells it the target
//! it is built for (`SYCL_LD_TARGET`).
//!
//! Cargo runs `sycl-ld` for every link, build scripts' and proc macros' included, and most
//! of those are pass-throughs whose whole cost is this process's start. A position-independent
//! executable of this size carries thousands of relative relocations (about 5,000 in a release
//! build, 21,000 in a debug one) that the dynamic loader applies at every start, touching and
//! copying a page for each page they land on; a position-dependent one has them resolved at
//! link time. A linker is not a program whose address layout needs hiding.

fn main() {
    let target_os = std::env::var("CARGO_CFG_TARGET_OS").unwrap_or_default();
    let target_env = std::env::var("CARGO_CFG_TARGET_ENV").unwrap_or_default();
    if target_os == "linux" && target_env == "gnu" {
        // rustc passes `-pie` to its `cc`; the last of `-pie`/`-no-pie` wins.
        println!("cargo:rustc-link-arg-bin=sycl-ld=-no-pie");
    }
    // The `[target.…]` table that sycl-ld's help shows, and its errors when a command line
    // does not tell.
    println!("cargo:rustc-env=SYCL_LD_TARGET={}", std::env::var("TARGET").unwrap_or_default());
    println!("cargo:rerun-if-changed=build.rs");
}
