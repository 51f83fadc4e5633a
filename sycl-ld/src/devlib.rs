//! `sycl-ld device-lib`: a standalone device library file from device sources or device
//! objects, in the encoding of embedded images (the runtime's `load_device_library` reads
//! it); and the images that `--sycl-add-images=PATH` adds to a link (a device library file,
//! or SPIR-V made separately, which is post-linked with the unit like its own code).

use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use anyhow::{anyhow, bail, Context, Result};
use sycl_format::{DeviceObject, ImageSet, Target};

use crate::args::Input;
use crate::embed::{self, Settings};
use crate::scan::{self, FoundObject};

/// The linker option that adds prebuilt device images to a link; sycl-ld takes it out of the
/// command line before the real linker sees it.
pub(crate) const ADD_IMAGES: &str = "--sycl-add-images=";

/// `sycl-ld device-lib [--split MODE] [COMPILER OPTION...] -o OUT INPUT...`
pub(crate) fn run(args: &[OsString]) -> Result<ExitCode> {
    let crate::args::ToolArgs { split, out, inputs, compiler_options } =
        crate::args::parse_tool_args(args, &crate::usage::DEVICE_LIB)?;
    let work = tempfile::tempdir().context("creating a temporary directory")?;
    let sources: Vec<&PathBuf> = inputs
        .iter()
        .filter(|p| matches!(p.extension().and_then(|e| e.to_str()), Some("cl" | "clcpp")))
        .collect();
    let mut line = crate::args::parse(&[]);
    if !sources.is_empty() {
        let mut build = sycl_build::Build::new();
        for option in &compiler_options {
            build.flag(option);
        }
        let compiled = build
            .files(sources.iter().copied())
            .out_dir(work.path())
            .cargo_metadata(false)
            .try_compile("device_lib")?;
        for line in &compiled.compiler_warnings {
            eprintln!("{line}");
        }
        line.inputs.push(Input::File(compiled.archive));
    }
    line.inputs
        .extend(inputs.iter().filter(|p| !sources.contains(p)).map(|p| Input::File(p.clone())));
    let found = scan::scan(&line)?;
    if found.objects.is_empty() {
        bail!(
            "no device code in {} (device-lib takes .cl and .clcpp sources, and objects and archives that sycl-build made)",
            crate::args::list(&inputs)
        );
    }
    let mut settings = Settings::of(&found.objects)?;
    settings.split = split.unwrap_or(settings.split);
    settings.targets = embed::with_added_targets(vec![Target::Spir64])?;
    let (set, warnings) = embed::device_link(&found.objects, &settings, &[])?;
    for line in warnings.iter().flat_map(|w| w.lines()) {
        eprintln!("sycl-ld: {line}");
    }
    write_atomically(&out, &set.encode())?;
    Ok(ExitCode::SUCCESS)
}

/// Writes `bytes` to a temporary file beside `path`, then renames it into place.
fn write_atomically(path: &Path, bytes: &[u8]) -> Result<()> {
    let name = path.file_name().unwrap_or_default().to_string_lossy();
    let tmp = path.with_file_name(format!(".{name}.sycl-ld-{}.tmp", std::process::id()));
    std::fs::write(&tmp, bytes).with_context(|| format!("writing {}", path.display()))?;
    std::fs::rename(&tmp, path).map_err(|e| {
        let _ = std::fs::remove_file(&tmp);
        anyhow!("moving {} into place: {e}", path.display())
    })
}

/// Prebuilt images named by `--sycl-add-images=PATH`: a device library file's images as they
/// are, or a SPIR-V module as a device object of the unit (post-linked with it, so its exports
/// and imports are computed the same way).
pub(crate) fn added_images(paths: &[PathBuf]) -> Result<(Vec<FoundObject>, ImageSet)> {
    let (mut objects, mut set) = (Vec::new(), ImageSet::default());
    for path in paths {
        let bytes = std::fs::read(path)
            .with_context(|| format!("{ADD_IMAGES}{}: reading it", path.display()))?;
        if bytes.starts_with(sycl_format::IMAGE_SET_MAGIC) {
            let images = ImageSet::decode(&bytes)
                .with_context(|| format!("{}: malformed device library", path.display()))?;
            set.images.extend(images.images);
        } else if bytes.starts_with(&[0x03, 0x02, 0x23, 0x07]) {
            // llvm-spirv's output, as sycl-build takes it (C99 inline definitions made local).
            let bytes = sycl_spirv::localize_inline_definitions(&bytes).unwrap_or(bytes);
            sycl_spirv::load(&bytes)
                .with_context(|| format!("{}: malformed SPIR-V", path.display()))?;
            let object = DeviceObject {
                package: "(added image)".into(),
                source: path.display().to_string(),
                split: None,
                fixed_targets: vec![],
                targets: vec![],
                device_config: None,
                spirv: bytes,
            };
            objects.push(FoundObject { origin: path.display().to_string(), object });
        } else {
            bail!("{}: neither a device library file nor SPIR-V", path.display());
        }
    }
    Ok((objects, set))
}
