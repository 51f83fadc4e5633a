//! Finding the compiler, the translator and the LLVM tools that make PTX: explicit setter, then
//! environment variable, then PATH (for a file a tool reads, such as libclc's library, its place
//! in the Debian package). A missing tool is an error that names it and the Debian package that
//! provides it.

use std::path::{Path, PathBuf};

use crate::{env_path, Error};

/// A tool the build runs.
#[derive(Debug, Clone, Copy)]
pub struct Tool {
    /// The executable's name on PATH (`clang-15`).
    pub name: &'static str,
    /// The environment variable that names it instead (`SYCL_CLANG`).
    pub env: &'static str,
    /// The Debian package that provides it, for the error when it is missing.
    pub debian_package: &'static str,
}

impl Tool {
    /// The front end: OpenCL C and C++ for OpenCL to LLVM bitcode.
    pub const CLANG: Tool =
        Tool { name: "clang-15", env: "SYCL_CLANG", debian_package: "clang-15" };
    /// LLVM 15's optimiser, run between the front end and the translator.
    pub const OPT: Tool = Tool { name: "opt-15", env: "SYCL_OPT", debian_package: "llvm-15" };
    /// The translator between LLVM 15 bitcode and SPIR-V, both ways.
    pub const LLVM_SPIRV: Tool =
        Tool { name: "llvm-spirv-15", env: "SYCL_LLVM_SPIRV", debian_package: "llvm-spirv-15" };
    /// LLVM 16's tools make the `ptx64` target's images (`sycl-ld`): LLVM 15's NVPTX back end
    /// stops at sm_86 and PTX 7.5, and LLVM 16 reads `llvm-spirv-15 -r`'s typed-pointer
    /// bitcode as opaque pointers, which libclc's library has.
    pub const LLVM_DIS: Tool =
        Tool { name: "llvm-dis-16", env: "SYCL_LLVM_DIS", debian_package: "llvm-16" };
    /// LLVM 16's bitcode linker, which links our builtins and libclc into a `ptx64` image (see
    /// [`Tool::LLVM_DIS`]).
    pub const LLVM_LINK: Tool =
        Tool { name: "llvm-link-16", env: "SYCL_LLVM_LINK", debian_package: "llvm-16" };
    /// LLVM 16's optimiser, for `ptx64` images (see [`Tool::LLVM_DIS`]).
    pub const OPT_16: Tool = Tool { name: "opt-16", env: "SYCL_OPT_16", debian_package: "llvm-16" };
    /// LLVM 16's code generator, which writes a `ptx64` image's PTX (see [`Tool::LLVM_DIS`]).
    pub const LLC: Tool = Tool { name: "llc-16", env: "SYCL_LLC", debian_package: "llvm-16" };

    /// The tool's path: `explicit` (a setter's), else `$env`, else PATH; an error naming the
    /// Debian package when none is an executable file. With `cargo`, prints
    /// `cargo:rerun-if-env-changed` for the variable.
    pub fn find(&self, explicit: Option<&Path>, cargo: bool) -> Result<PathBuf, Error> {
        if let Some(path) = explicit {
            return self.check(path.to_path_buf(), "set with the builder");
        }
        if let Some(path) = env_path(self.env, cargo) {
            return self.check(PathBuf::from(path), &format!("named by ${}", self.env));
        }
        which::which(self.name).map_err(|_| Error::ToolNotFound {
            tool: self.name,
            hint: format!(
                "not on PATH; install the Debian package `{}` (apt-get install {}) or set ${} to its path",
                self.debian_package, self.debian_package, self.env
            ),
        })
    }

    fn check(&self, path: PathBuf, how: &str) -> Result<PathBuf, Error> {
        which::which(&path).map_err(|_| Error::ToolNotFound {
            tool: self.name,
            hint: format!(
                "`{}` ({how}) is not an executable file; install the Debian package `{}`",
                path.display(),
                self.debian_package
            ),
        })
    }
}

/// A file a tool reads, found as tools are, with its place in the Debian package instead of a
/// PATH search.
#[derive(Debug, Clone, Copy)]
pub struct ToolFile {
    /// What the file is, in messages (`libclc for NVPTX`).
    pub name: &'static str,
    /// The environment variable that names it instead (`SYCL_LIBCLC_NVPTX`).
    pub env: &'static str,
    /// Where the Debian package installs it.
    pub path: &'static str,
    /// The Debian package that provides it, for the error when it is missing.
    pub debian_package: &'static str,
}

impl ToolFile {
    /// libclc's OpenCL C library for NVPTX (`nvptx64--nvidiacl`: the one with the work-item
    /// functions), linked into every `ptx64` image.
    pub const LIBCLC_NVPTX: ToolFile = ToolFile {
        name: "libclc for NVPTX",
        env: "SYCL_LIBCLC_NVPTX",
        path: "/usr/lib/clc/nvptx64--nvidiacl.bc",
        debian_package: "libclc-16",
    };

    /// The file's path: `explicit`, else `$env`, else [`path`](Self::path); an error naming
    /// the Debian package when that is not a file. With `cargo`, prints
    /// `cargo:rerun-if-env-changed` for the variable.
    pub fn find(&self, explicit: Option<&Path>, cargo: bool) -> Result<PathBuf, Error> {
        let (path, how) = match (explicit, env_path(self.env, cargo)) {
            (Some(path), _) => (path.to_path_buf(), "set with the builder".to_string()),
            (None, Some(path)) => (PathBuf::from(path), format!("named by ${}", self.env)),
            (None, None) => (PathBuf::from(self.path), "its place in the package".to_string()),
        };
        if path.is_file() {
            return Ok(path);
        }
        Err(Error::ToolNotFound {
            tool: self.name,
            hint: format!(
                "`{}` ({how}) is not a file; install the Debian package `{}` (apt-get install {}) or set ${} to its path",
                path.display(),
                self.debian_package,
                self.debian_package,
                self.env
            ),
        })
    }
}
