//! Device selection: what `SYCL_DEVICE` and `Queue::with_device` mean, modelled on DPC++'s
//! `ONEAPI_DEVICE_SELECTOR` (`backend:filter`).
//!
//! A selector is `PLATFORM`, `PLATFORM:N`, `PLATFORM:TYPE`, `TYPE` or `*`:
//! - `PLATFORM` is a word of an OpenCL platform's name or vendor, case-insensitive (`intel`,
//!   `pocl`, `nvidia`): it picks every device of the platforms it names. Device names never
//!   count: PoCL names its device after the host CPU (`pthread-skylake-avx512-Intel(R) Xeon(R)
//!   …`), so matching device names would give PoCL to whoever asks for Intel on an Intel host.
//!   A backend's name picks its devices: `cuda` the GPUs of the CUDA backend (which NVIDIA's
//!   OpenCL platform, `nvidia`, is not), `opencl` every OpenCL device; `*` every device.
//! - `N` is the N-th of those devices (from 0, in the ICD loader's order), `TYPE` is `cpu`,
//!   `gpu` or `accelerator`.
//!
//! A selector must pick exactly one device: one that picks none or several is an error that
//! lists every device with the selector that picks it. This module decides over a plain table
//! of devices, so it is tested over the tables of machines we do not have.

use super::caps::{CL_DEVICE_TYPE_ACCELERATOR, CL_DEVICE_TYPE_CPU, CL_DEVICE_TYPE_GPU};
use super::Backend;

/// What selection needs to know of a device.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Candidate<'a> {
    pub backend: Backend,
    pub platform: &'a str,
    pub vendor: &'a str,
    pub name: &'a str,
    pub device_type: u64,
}

/// Platform words that name a platform when several of its words would: the short names
/// people use.
const KNOWN_PLATFORMS: &[&str] = &["intel", "pocl", "nvidia", "amd", "rusticl", "clover", "arm"];

/// Words that stand for a backend's devices.
const BACKENDS: &[(&str, Backend)] = &[("opencl", Backend::OpenCl), ("cuda", Backend::Cuda)];

const TYPES: &[(&str, u64)] = &[
    ("cpu", CL_DEVICE_TYPE_CPU),
    ("gpu", CL_DEVICE_TYPE_GPU),
    ("accelerator", CL_DEVICE_TYPE_ACCELERATOR),
];

#[derive(Debug, Clone, PartialEq, Eq)]
enum Filter {
    Any,
    Index(usize),
    Type(u64),
}

/// The devices the part before `:` names.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Scope {
    Every,
    Backend(Backend),
    /// OpenCL platforms that have this word in their name or vendor.
    Platform(String),
}

#[derive(Debug, Clone, PartialEq, Eq)]
struct Selector {
    scope: Scope,
    filter: Filter,
}

/// Why no single device was picked (`Error::NoDevice` shows it).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct SelectionError {
    pub problem: String,
    /// One line per device: its selector, then platform / device (type).
    pub available: Vec<String>,
}

/// The words of a name, lowercased: `Intel(R) OpenCL` → `intel`, `opencl` (one-letter words
/// such as the `r` of `(R)` are no names).
fn words(text: &str) -> impl Iterator<Item = String> + '_ {
    text.split(|c: char| !c.is_ascii_alphanumeric())
        .filter(|w| w.len() > 1)
        .map(str::to_ascii_lowercase)
}

fn in_scope(scope: &Scope, d: &Candidate<'_>) -> bool {
    match scope {
        Scope::Every => true,
        Scope::Backend(b) => d.backend == *b,
        Scope::Platform(word) => {
            d.backend == Backend::OpenCl
                && words(d.platform).chain(words(d.vendor)).any(|w| w == *word)
        }
    }
}

fn type_name(device_type: u64) -> &'static str {
    TYPES.iter().find(|(_, bit)| device_type & bit != 0).map_or("other", |(name, _)| name)
}

fn parse(text: &str) -> Result<Selector, String> {
    let text = text.trim().to_ascii_lowercase();
    let type_of = |word: &str| TYPES.iter().find(|(name, _)| *name == word).map(|(_, bit)| *bit);
    let scope_of = |word: &str| -> Result<Scope, String> {
        if word == "*" {
            Ok(Scope::Every)
        } else if let Some((_, backend)) = BACKENDS.iter().find(|(name, _)| *name == word) {
            Ok(Scope::Backend(*backend))
        } else if word.is_empty() {
            Err("a platform word is missing before `:`".into())
        } else {
            Ok(Scope::Platform(word.to_string()))
        }
    };
    let selector = match text.split_once(':') {
        None => match type_of(&text) {
            Some(bit) => Selector { scope: Scope::Every, filter: Filter::Type(bit) },
            None => Selector { scope: scope_of(&text)?, filter: Filter::Any },
        },
        Some((platform, filter)) => {
            let filter = if filter == "*" {
                Filter::Any
            } else if let Some(bit) = type_of(filter) {
                Filter::Type(bit)
            } else if let Ok(n) = filter.parse::<usize>() {
                Filter::Index(n)
            } else {
                return Err(format!(
                    "`{filter}` after `:` is neither a device number nor cpu, gpu or accelerator"
                ));
            };
            Selector { scope: scope_of(platform)?, filter }
        }
    };
    Ok(selector)
}

/// Indices of the devices `selector` picks, in table order.
fn matches(devices: &[Candidate<'_>], selector: &Selector) -> Vec<usize> {
    let on_platform: Vec<usize> =
        (0..devices.len()).filter(|&i| in_scope(&selector.scope, &devices[i])).collect();
    match selector.filter {
        Filter::Any => on_platform,
        Filter::Index(n) => on_platform.get(n).copied().into_iter().collect(),
        Filter::Type(bit) => {
            on_platform.into_iter().filter(|&i| devices[i].device_type & bit != 0).collect()
        }
    }
}

/// The shortest selector that picks device `i` alone: `cuda` (numbered when there are several)
/// for a CUDA device; for an OpenCL one, a word of its platform (a well-known one first), with
/// the device's number on that platform when the platform has several.
pub(crate) fn selector_for(devices: &[Candidate<'_>], i: usize) -> String {
    let d = &devices[i];
    if d.backend == Backend::Cuda {
        let all = matches(
            devices,
            &Selector { scope: Scope::Backend(Backend::Cuda), filter: Filter::Any },
        );
        let n =
            all.iter().position(|&j| j == i).expect("the CUDA backend's word picks its devices");
        return if all.len() == 1 { "cuda".into() } else { format!("cuda:{n}") };
    }
    let own: Vec<String> = words(d.vendor).chain(words(d.platform)).collect();
    let mut candidates: Vec<String> = KNOWN_PLATFORMS
        .iter()
        .filter(|k| own.iter().any(|w| w == *k))
        .map(|k| k.to_string())
        .collect();
    candidates.extend(own.iter().filter(|w| !BACKENDS.iter().any(|(b, _)| b == w)).cloned());
    let mut fallback = None;
    for word in &candidates {
        let all = matches(
            devices,
            &Selector { scope: Scope::Platform(word.clone()), filter: Filter::Any },
        );
        if all == [i] {
            return word.clone();
        }
        let n = all.iter().position(|&j| j == i).expect("a device's own platform word picks it");
        let numbered = format!("{word}:{n}");
        // A word that names this platform alone is the clearest base for a number.
        let only_this_platform =
            all.iter().all(|&j| devices[j].platform == d.platform && devices[j].vendor == d.vendor);
        if only_this_platform {
            return numbered;
        }
        fallback.get_or_insert(numbered);
    }
    fallback.unwrap_or_else(|| format!("*:{i}"))
}

/// Every device, one line each, with the selector that picks it.
pub(crate) fn table(devices: &[Candidate<'_>]) -> Vec<String> {
    let selectors: Vec<String> = (0..devices.len()).map(|i| selector_for(devices, i)).collect();
    let width = selectors.iter().map(String::len).max().unwrap_or(0);
    devices
        .iter()
        .zip(&selectors)
        .map(|(d, s)| {
            format!("{s:width$}  {} / {} ({})", d.platform, d.name, type_name(d.device_type))
        })
        .collect()
}

/// The one device `text` picks; `source` says where the text came from (`SYCL_DEVICE=…`).
pub(crate) fn select(
    devices: &[Candidate<'_>],
    text: &str,
    source: &str,
) -> Result<usize, SelectionError> {
    let fail = |problem: String| SelectionError { problem, available: table(devices) };
    let selector = parse(text).map_err(|e| fail(format!("{source}: {e}")))?;
    match matches(devices, &selector)[..] {
        [one] => Ok(one),
        [] => Err(fail(format!("no device matches {source}"))),
        ref several => {
            let picked: Vec<String> =
                several.iter().map(|&i| format!("`{}`", selector_for(devices, i))).collect();
            Err(fail(format!(
                "{source} is ambiguous: it matches {} devices ({})",
                several.len(),
                picked.join(", ")
            )))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const INTEL: (&str, &str) = ("Intel(R) OpenCL", "Intel(R) Corporation");
    const POCL: (&str, &str) = ("Portable Computing Language", "The pocl project");
    const NVIDIA: (&str, &str) = ("NVIDIA CUDA", "NVIDIA Corporation");

    fn device(
        platform: (&'static str, &'static str),
        name: &'static str,
        device_type: u64,
    ) -> Candidate<'static> {
        Candidate {
            backend: Backend::OpenCl,
            platform: platform.0,
            vendor: platform.1,
            name,
            device_type,
        }
    }

    fn cuda(name: &'static str) -> Candidate<'static> {
        Candidate {
            backend: Backend::Cuda,
            platform: "CUDA",
            vendor: "NVIDIA Corporation",
            name,
            device_type: CL_DEVICE_TYPE_GPU,
        }
    }

    /// The machine of the report: an Intel Xeon host, PoCL registered first.
    fn xeon_host() -> Vec<Candidate<'static>> {
        vec![
            device(
                POCL,
                "pthread-skylake-avx512-Intel(R) Xeon(R) Processor @ 2.80GHz",
                CL_DEVICE_TYPE_CPU,
            ),
            device(INTEL, "Intel(R) Xeon(R) Processor @ 2.80GHz", CL_DEVICE_TYPE_CPU),
        ]
    }

    /// An AMD host, Intel's CPU runtime registered first.
    fn epyc_host() -> Vec<Candidate<'static>> {
        vec![
            device(INTEL, "AMD EPYC 7B13 64-Core Processor", CL_DEVICE_TYPE_CPU),
            device(POCL, "pthread-znver3-AMD EPYC 7B13 64-Core Processor", CL_DEVICE_TYPE_CPU),
        ]
    }

    fn pick(devices: &[Candidate<'_>], text: &str) -> Result<usize, SelectionError> {
        select(devices, text, &format!("SYCL_DEVICE={text}"))
    }

    #[test]
    fn platform_words_never_match_device_names() {
        let xeon = xeon_host();
        assert_eq!(pick(&xeon, "intel"), Ok(1));
        assert_eq!(pick(&xeon, "Intel"), Ok(1));
        assert_eq!(pick(&xeon, "pocl"), Ok(0));
        assert_eq!(pick(&xeon, "intel:0"), Ok(1));
        assert_eq!(pick(&xeon, "pocl:cpu"), Ok(0));
        let epyc = epyc_host();
        assert_eq!(pick(&epyc, "intel"), Ok(0));
        assert_eq!(pick(&epyc, "pocl"), Ok(1));
        // The device names hold `amd`, `xeon`, `epyc`, `skylake`: no platform is called that.
        for word in ["amd", "epyc", "xeon", "skylake", "pthread"] {
            assert!(pick(&epyc, word).is_err() && pick(&xeon, word).is_err(), "{word}");
        }
        assert!(pick(&epyc, "amd")
            .unwrap_err()
            .problem
            .starts_with("no device matches SYCL_DEVICE=amd"));
    }

    #[test]
    fn device_types_and_numbers() {
        let mixed = vec![
            device(INTEL, "Intel(R) Xeon(R) Processor", CL_DEVICE_TYPE_CPU),
            device(
                ("Intel(R) OpenCL Graphics", "Intel(R) Corporation"),
                "Intel(R) Arc(TM) A770",
                CL_DEVICE_TYPE_GPU,
            ),
            device(NVIDIA, "NVIDIA H100 80GB HBM3", CL_DEVICE_TYPE_GPU),
            device(NVIDIA, "NVIDIA H100 80GB HBM3", CL_DEVICE_TYPE_GPU),
            device(POCL, "pthread-sapphirerapids-Intel(R) Xeon(R)", CL_DEVICE_TYPE_CPU),
        ];
        assert_eq!(pick(&mixed, "intel:gpu"), Ok(1));
        assert_eq!(pick(&mixed, "intel:1"), Ok(1));
        assert_eq!(pick(&mixed, "nvidia:1"), Ok(3));
        assert_eq!(pick(&mixed, "opencl:4"), Ok(4));
        assert_eq!(pick(&mixed, "*:2"), Ok(2));
        assert_eq!(pick(&mixed, "graphics"), Ok(1));
        let ambiguous = pick(&mixed, "gpu").unwrap_err();
        assert_eq!(ambiguous.problem, "SYCL_DEVICE=gpu is ambiguous: it matches 3 devices (`graphics`, `nvidia:0`, `nvidia:1`)");
        assert!(pick(&mixed, "nvidia:2").is_err());
        // Every device's listed selector picks it, and only it.
        for (i, line) in table(&mixed).iter().enumerate() {
            let selector = line.split_whitespace().next().unwrap();
            assert_eq!(pick(&mixed, selector), Ok(i), "{line}");
        }
    }

    #[test]
    fn errors_list_every_device_with_its_selector() {
        let xeon = xeon_host();
        let err = pick(&xeon, "cpu").unwrap_err();
        assert_eq!(
            err.problem,
            "SYCL_DEVICE=cpu is ambiguous: it matches 2 devices (`pocl`, `intel`)"
        );
        assert_eq!(
            err.available,
            [
                "pocl   Portable Computing Language / pthread-skylake-avx512-Intel(R) Xeon(R) Processor @ 2.80GHz (cpu)",
                "intel  Intel(R) OpenCL / Intel(R) Xeon(R) Processor @ 2.80GHz (cpu)",
            ]
        );
        for (i, line) in table(&xeon).iter().enumerate() {
            assert_eq!(pick(&xeon, line.split_whitespace().next().unwrap()), Ok(i));
        }
        let err = pick(&xeon, "cuda").unwrap_err();
        assert_eq!(err.problem, "no device matches SYCL_DEVICE=cuda");
        let err = pick(&xeon, "intel:first").unwrap_err();
        assert!(
            err.problem.contains("neither a device number nor cpu, gpu or accelerator"),
            "{err:?}"
        );
        let err = pick(&[], "intel").unwrap_err();
        assert_eq!(
            (err.problem.as_str(), err.available.len()),
            ("no device matches SYCL_DEVICE=intel", 0)
        );
    }

    /// The GPU machine: two GPUs through CUDA, the same two through NVIDIA's OpenCL, and PoCL.
    #[test]
    fn cuda_names_the_backend_and_nvidia_its_opencl_platform() {
        let gpu_host = vec![
            cuda("NVIDIA H200"),
            cuda("NVIDIA H200"),
            device(NVIDIA, "NVIDIA H200", CL_DEVICE_TYPE_GPU),
            device(NVIDIA, "NVIDIA H200", CL_DEVICE_TYPE_GPU),
            device(POCL, "cpu-x86-64-AMD EPYC 9654", CL_DEVICE_TYPE_CPU),
        ];
        assert_eq!(pick(&gpu_host, "cuda:1"), Ok(1));
        assert!(pick(&gpu_host, "cuda:gpu").unwrap_err().problem.contains("ambiguous"));
        assert_eq!(pick(&gpu_host, "nvidia:0"), Ok(2));
        assert_eq!(pick(&gpu_host, "opencl:cpu"), Ok(4));
        assert_eq!(pick(&gpu_host, "*:0"), Ok(0));
        assert_eq!(
            pick(&gpu_host, "gpu").unwrap_err().problem,
            "SYCL_DEVICE=gpu is ambiguous: it matches 4 devices (`cuda:0`, `cuda:1`, `nvidia:0`, `nvidia:1`)"
        );
        for (i, line) in table(&gpu_host).iter().enumerate() {
            assert_eq!(pick(&gpu_host, line.split_whitespace().next().unwrap()), Ok(i), "{line}");
        }
        let one = [cuda("NVIDIA H100 80GB HBM3"), device(POCL, "cpu", CL_DEVICE_TYPE_CPU)];
        assert_eq!(pick(&one, "cuda"), Ok(0));
        assert_eq!(table(&one)[0], "cuda  CUDA / NVIDIA H100 80GB HBM3 (gpu)");
    }
}
