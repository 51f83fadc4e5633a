//! Finding the compiler, the translator, the LLVM tools that make PTX and `ptxas`: explicit
//! setter, then environment variable, then PATH, then (for a tool NVIDIA ships on PyPI) the
//! installed wheel; for a file a tool reads, such as libclc's library, its place in the Debian
//! package. A missing tool is an error that names it and the package that provides it.

use std::path::{Path, PathBuf};

use crate::{env_path, Error};

/// A tool the build runs.
#[derive(Debug, Clone, Copy)]
pub struct Tool {
    /// The executable's name on PATH (`clang-15`).
    pub name: &'static str,
    /// The environment variable that names it instead (`SYCL_CLANG`).
    pub env: &'static str,
    /// The package that provides it, for the error when it is missing.
    pub package: Package,
}

/// Where a tool comes from.
#[derive(Debug, Clone, Copy)]
pub enum Package {
    /// A Debian package (`clang-15`).
    Debian(&'static str),
    /// A PyPI wheel (`nvidia-cuda-nvcc-cu12`), and the tool's path inside an installation's
    /// `site-packages` (`nvidia/cuda_nvcc/bin/ptxas`), where it is looked for after PATH.
    PyPi {
        /// The wheel's name.
        name: &'static str,
        /// The tool's path below `site-packages`.
        path: &'static str,
    },
}

impl Package {
    /// How to install it, for errors: `the Debian package `x` (apt-get install x)`.
    fn install(&self) -> String {
        match self {
            Package::Debian(name) => {
                format!("the Debian package `{name}` (apt-get install {name})")
            }
            Package::PyPi { name, .. } => {
                format!("the PyPI package `{name}` (python3 -m pip install {name})")
            }
        }
    }
}

impl Tool {
    /// The front end: OpenCL C and C++ for OpenCL to LLVM bitcode.
    pub const CLANG: Tool =
        Tool { name: "clang-15", env: "SYCL_CLANG", package: Package::Debian("clang-15") };
    /// LLVM 15's optimiser, run between the front end and the translator.
    pub const OPT: Tool =
        Tool { name: "opt-15", env: "SYCL_OPT", package: Package::Debian("llvm-15") };
    /// The translator between LLVM 15 bitcode and SPIR-V, both ways.
    pub const LLVM_SPIRV: Tool = Tool {
        name: "llvm-spirv-15",
        env: "SYCL_LLVM_SPIRV",
        package: Package::Debian("llvm-spirv-15"),
    };
    /// LLVM 16's tools make the `ptx64` target's images (`sycl-ld`): LLVM 15's NVPTX back end
    /// stops at sm_86 and PTX 7.5, and LLVM 16 reads `llvm-spirv-15 -r`'s typed-pointer
    /// bitcode as opaque pointers, which libclc's library has.
    pub const LLVM_DIS: Tool =
        Tool { name: "llvm-dis-16", env: "SYCL_LLVM_DIS", package: Package::Debian("llvm-16") };
    /// LLVM 16's bitcode linker, which links our builtins and libclc into a `ptx64` image (see
    /// [`Tool::LLVM_DIS`]).
    pub const LLVM_LINK: Tool =
        Tool { name: "llvm-link-16", env: "SYCL_LLVM_LINK", package: Package::Debian("llvm-16") };
    /// LLVM 16's optimiser, for `ptx64` images (see [`Tool::LLVM_DIS`]).
    pub const OPT_16: Tool =
        Tool { name: "opt-16", env: "SYCL_OPT_16", package: Package::Debian("llvm-16") };
    /// LLVM 16's code generator, which writes a `ptx64` image's PTX (see [`Tool::LLVM_DIS`]).
    pub const LLC: Tool =
        Tool { name: "llc-16", env: "SYCL_LLC", package: Package::Debian("llvm-16") };
    /// LLVM 22's code generator, whose SPIR-V back end makes SPIR-V of a Rust device crate's
    /// IR: rustc 1.96 writes LLVM 22's IR, which no older LLVM reads.
    pub const LLC_22: Tool =
        Tool { name: "llc-22", env: "SYCL_LLC_22", package: Package::Debian("llvm-22") };
    /// NVIDIA's PTX assembler, which makes the native `nvidia_gpu_sm_XX` images (`sycl-ld`):
    /// `ptxas -c`, relocatable SASS objects. NVIDIA ships it in a PyPI wheel (the 12.9 one
    /// targets sm_50 to sm_120), which needs no CUDA toolkit or driver.
    pub const PTXAS: Tool = Tool {
        name: "ptxas",
        env: "SYCL_PTXAS",
        package: Package::PyPi {
            name: "nvidia-cuda-nvcc-cu12",
            path: "nvidia/cuda_nvcc/bin/ptxas",
        },
    };

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
        if let Ok(path) = which::which(self.name) {
            return Ok(path);
        }
        if let Package::PyPi { path, .. } = self.package {
            if let Some(found) =
                python_site_dirs().iter().map(|d| d.join(path)).find(|p| p.is_file())
            {
                return Ok(found);
            }
        }
        let looked = match self.package {
            Package::Debian(_) => "not on PATH",
            Package::PyPi { .. } => "not on PATH nor in python3's site-packages",
        };
        Err(Error::ToolNotFound {
            tool: self.name,
            hint: format!(
                "{looked}; install {} or set ${} to its path",
                self.package.install(),
                self.env
            ),
        })
    }

    fn check(&self, path: PathBuf, how: &str) -> Result<PathBuf, Error> {
        which::which(&path).map_err(|_| Error::ToolNotFound {
            tool: self.name,
            hint: format!(
                "`{}` ({how}) is not an executable file; install {}",
                path.display(),
                self.package.install()
            ),
        })
    }
}

/// The `site-packages` directories of `python3` (its own and the user's), where pip installs
/// wheels; none when there is no `python3`.
fn python_site_dirs() -> Vec<PathBuf> {
    const ASK: &str = "import site, sysconfig\nprint(sysconfig.get_paths()['purelib'])\n\
                       print(sysconfig.get_paths()['platlib'])\nprint(site.getusersitepackages())";
    std::process::Command::new("python3")
        .args(["-c", ASK])
        .stderr(std::process::Stdio::null())
        .output()
        .ok()
        .filter(|out| out.status.success())
        .map(|out| String::from_utf8_lossy(&out.stdout).lines().map(PathBuf::from).collect())
        .unwrap_or_default()
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

    /// Debian's Rust 1.96 compiler (`rustc-web`), which builds a Rust device crate and, from
    /// the library sources of the same release (`rust-web-src`), its `core` for
    /// `nvptx64-nvidia-cuda`: rustup's toolchains ship no `core` for that target, and `core`'s
    /// sources build only with the compiler of their release.
    pub const RUSTC_WEB: ToolFile = ToolFile {
        name: "rustc-web's rustc",
        env: "SYCL_DEVICE_RUSTC",
        path: "/usr/bin/rustc",
        debian_package: "rustc-web",
    };

    /// The cargo of the same release (`cargo-web`), which drives `-Zbuild-std=core`.
    pub const CARGO_WEB: ToolFile = ToolFile {
        name: "cargo-web's cargo",
        env: "SYCL_DEVICE_CARGO",
        path: "/usr/bin/cargo",
        debian_package: "cargo-web",
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
