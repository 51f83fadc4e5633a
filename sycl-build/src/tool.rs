//! Finding the compiler and the translator: explicit setter, then environment variable, then
//! PATH. A missing tool is an error that names it and the Debian package that provides it.

use std::path::{Path, PathBuf};

use crate::{env_path, Error};

/// A tool the build runs.
#[derive(Debug, Clone, Copy)]
pub struct Tool {
    pub name: &'static str,
    pub env: &'static str,
    pub debian_package: &'static str,
}

impl Tool {
    pub const CLANG: Tool =
        Tool { name: "clang-15", env: "SYCL_CLANG", debian_package: "clang-15" };
    pub const OPT: Tool = Tool { name: "opt-15", env: "SYCL_OPT", debian_package: "llvm-15" };
    pub const LLVM_SPIRV: Tool =
        Tool { name: "llvm-spirv-15", env: "SYCL_LLVM_SPIRV", debian_package: "llvm-spirv-15" };

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
