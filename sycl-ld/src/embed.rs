//! Device link and post-link of this link unit, ahead-of-time images for the requested
//! targets, and the object file that carries the result into the output: one allocated,
//! retained `SHT_NOTE` section, which the static linker puts in a `PT_NOTE` segment where the
//! runtime finds it in memory.

use std::collections::BTreeSet;
use std::time::Instant;

use anyhow::{anyhow, bail, Context, Result};
use object::write::Object;
use object::{Architecture, BinaryFormat, Endianness, SectionKind};
use sycl_format::{
    sets, DeviceConfig, DeviceRequirements, Image, ImageFormat, ImageSet, Property, PropertySet,
    PropertyValue, SplitMode, Target, IMAGE_NOTE_SECTION, NOTE_TYPE_IMAGES, NOTE_TYPE_PAYLOAD_HASH,
};
use sycl_spirv::{LinkInput, PostLink, PostLinkImage, PostLinkOptions, Source};

use crate::scan::{DeviceLibrary, FoundObject};
use crate::{aot, ptx};

/// Environment variable that overrides the split mode at link time.
pub(crate) const SPLIT_ENV: &str = "SYCL_LD_SPLIT";

/// Environment variable naming targets (comma-separated) every link adds to those its crate's
/// build.rs chose: how a whole build is made for another device (`SYCL_LD_TARGETS=ptx64`)
/// without changing any build script.
pub(crate) const TARGETS_ENV: &str = "SYCL_LD_TARGETS";

/// The settings of a link unit: those of the crate being linked, which is the first device
/// object on the command line (rustc passes a crate's own libraries before its
/// dependencies'), with `SYCL_LD_SPLIT` over the split mode and `SYCL_LD_TARGETS` added to its
/// targets.
pub(crate) struct Settings {
    pub split: SplitMode,
    pub targets: Vec<Target>,
    pub config: DeviceConfig,
}

impl Settings {
    pub(crate) fn of(objects: &[FoundObject]) -> Result<Settings> {
        let first = &objects[0].object;
        let split = match std::env::var(SPLIT_ENV).ok().filter(|v| !v.is_empty()) {
            Some(v) => SplitMode::parse(&v).ok_or_else(|| {
                anyhow!("{SPLIT_ENV}={v}: unknown split mode (per_kernel, per_source, off, auto)")
            })?,
            None => first.split.unwrap_or(SplitMode::Auto),
        };
        let config = match &first.device_config {
            Some(text) => {
                // Its message is whole: as a chain, the TOML error's would come twice.
                DeviceConfig::parse(text, &format!("the device configuration of {}", first.package))
                    .map_err(|e| anyhow!("{e}"))?
            }
            None => DeviceConfig::default_config(),
        };
        let targets = if first.targets.is_empty() {
            vec![Target::DEFAULT]
        } else {
            let asked = first.targets.iter().map(|t| Target::buildable(t));
            asked.collect::<Result<_, _>>().with_context(|| {
                format!("the targets of {} ({})", first.package, first.targets.join(", "))
            })?
        };
        Ok(Settings { split, targets: with_added_targets(targets)?, config })
    }
}

/// `targets` and those `SYCL_LD_TARGETS` adds.
pub(crate) fn with_added_targets(mut targets: Vec<Target>) -> Result<Vec<Target>> {
    for added in std::env::var(TARGETS_ENV)
        .unwrap_or_default()
        .split(',')
        .map(str::trim)
        .filter(|t| !t.is_empty())
    {
        let added = Target::buildable(added).map_err(|e| anyhow!("{TARGETS_ENV}: {e}"))?;
        if !targets.contains(&added) {
            targets.push(added);
        }
    }
    Ok(targets)
}

/// Links the unit's device objects, post-links them, and makes the images of every target.
/// Returns the images and the warnings: a call cycle in the unit's code (the link goes on, as
/// a C linker's would; the runtime refuses the kernels that reach it), then the post-link's.
pub(crate) fn device_link(
    objects: &[FoundObject],
    settings: &Settings,
    libraries: &[DeviceLibrary],
) -> Result<(ImageSet, Vec<String>)> {
    let mut modules = Vec::with_capacity(objects.len());
    let mut sources = Vec::with_capacity(objects.len());
    for found in objects {
        let name = format!("{} ({})", found.object.source, found.object.package);
        let module = sycl_spirv::load(&found.object.spirv)
            .with_context(|| format!("device object {} from {}", name, found.origin))?;
        sources.push(Source { name, fixed_targets: found.object.fixed_targets.clone() });
        modules.push(module);
    }
    let spec_constants = sycl_spirv::spec::assign_ids(&mut modules);
    let inputs = modules
        .into_iter()
        .zip(&sources)
        .map(|(module, s)| LinkInput { name: s.name.clone(), module })
        .collect();
    let linked = sycl_spirv::link(inputs).context("device link failed")?;
    // Before the split, which may copy a cycle's functions into several images.
    let mut warnings: Vec<String> = sycl_spirv::call_cycle(&linked.module)
        .map(|cycle| sycl_spirv::cycle_warning(&linked.module, &cycle))
        .into_iter()
        .collect();
    let options = PostLinkOptions {
        split: settings.split,
        sources: &sources,
        config: &settings.config,
        spec_constants: &spec_constants,
    };
    let post = sycl_spirv::post_link(linked, &options).context("device post-link failed")?;
    let PostLink { images, warnings: post_link_warnings, .. } = post;
    warnings.extend(post_link_warnings);
    Ok((images_for_targets(&images, settings, libraries)?, warnings))
}

/// The post-linked images in the form of every target: SPIR-V for `spir64`, and for each
/// ahead-of-time target the images its configuration entry accepts, compiled for it. For
/// `ptx64` and the native NVIDIA targets, each image whose imports the shared `libraries` on
/// the link line export also gets a twin with those functions compiled in ([`inlined_twins`]).
pub(crate) fn images_for_targets(
    images: &[PostLinkImage],
    settings: &Settings,
    libraries: &[DeviceLibrary],
) -> Result<ImageSet> {
    let mut set = ImageSet::default();
    let mut gpu = aot::Gpu::default();
    for &target in &settings.targets {
        let entry = if target.is_ahead_of_time() {
            Some(settings.config.target(target).ok_or_else(|| {
                anyhow!("target `{target}` has no entry in the device configuration")
            })?)
        } else {
            None
        };
        // DPC++'s aspect filter: the images this target can run.
        let accepted: Vec<(&PostLinkImage, DeviceRequirements)> = images
            .iter()
            .map(|image| (image, requirements_of(image)))
            .filter(|(_, requirements)| entry.is_none_or(|e| requirements.accepted_by(e)))
            .collect();
        let started = Instant::now();
        let data: Vec<Vec<u8>> = if target.is_ahead_of_time() {
            let images: Vec<&PostLinkImage> = accepted.iter().map(|(image, _)| *image).collect();
            aot::compile(target, &images, &mut gpu)?
        } else {
            accepted.iter().map(|(image, _)| image.spirv.clone()).collect()
        };
        report_cost(target, data.iter().map(Vec::len), started);
        if let Some(twin) = target.inlined() {
            let started = Instant::now();
            let twins = inlined_twins(&accepted, libraries, target, &mut gpu)?;
            report_cost(twin, twins.iter().map(|t| t.data.len()), started);
            set.images.extend(twins);
        }
        for ((image, requirements), data) in accepted.into_iter().zip(data) {
            set.images.push(Image {
                format: target.format(),
                target: target.name().into(),
                kernels: image.kernels.clone(),
                property_sets: property_sets(image, &requirements),
                data,
            });
        }
    }
    if set.images.is_empty() && !images.is_empty() {
        let names: Vec<&str> = settings.targets.iter().map(|t| t.name()).collect();
        bail!("no target among {} can run any of this unit's device images", names.join(", "));
    }
    Ok(set)
}

/// With `SYCL_LD_VERBOSE`, what a target's images cost: how many, their bytes, the time
/// they took to make.
fn report_cost(target: Target, sizes: impl Iterator<Item = usize>, started: Instant) {
    if crate::verbose() {
        let (count, bytes) = sizes.fold((0, 0), |(n, b), size| (n + 1, b + size));
        if count > 0 {
            eprintln!(
                "sycl-ld: {target}: {count} image(s), {bytes} bytes, made in {:.0} ms",
                started.elapsed().as_secs_f64() * 1e3
            );
        }
    }
}

/// For each image with imports that the shared libraries on the link line export (the first
/// that exports each, in link order, as the loader would pick them), from images of `target`
/// with no imports and no specialization constants of their own: a twin image, of `target`'s
/// twin target ([`Target::inlined`]), with those functions compiled in and inlined where LLVM
/// would inline them, no imports, and `SYCL/inlined imports` naming the provider images of
/// `target` by hash. A call into another module costs a real call on the GPU (twice the time
/// of an n-body step with its body interaction in another library); the twin costs none, and
/// the runtime uses it only when resolution picks those very images (no `LD_PRELOAD` or
/// earlier library replaced them).
fn inlined_twins(
    accepted: &[(&PostLinkImage, DeviceRequirements)],
    libraries: &[DeviceLibrary],
    target: Target,
    gpu: &mut aot::Gpu,
) -> Result<Vec<Image>> {
    let Some(twin_target) = target.inlined() else { return Ok(Vec::new()) };
    let planned: Vec<Twin> = accepted
        .iter()
        .filter_map(|(image, requirements)| {
            Some((*image, requirements, providers_of(image, libraries, target)?))
        })
        .collect();
    if planned.is_empty() {
        return Ok(Vec::new());
    }
    let providers: Vec<Vec<ptx::Provider>> = planned
        .iter()
        .map(|(_, _, imports)| {
            let mut providers: Vec<ptx::Provider> = Vec::new();
            for (_, _, spirv) in imports {
                if !providers.iter().any(|p| std::ptr::eq(p.spirv, spirv.data.as_slice())) {
                    providers.push(ptx::Provider {
                        spirv: &spirv.data,
                        exported: spirv.exported_symbols().map(str::to_string).collect(),
                    });
                }
            }
            providers
        })
        .collect();
    let items: Vec<(&PostLinkImage, &[ptx::Provider])> =
        planned.iter().zip(&providers).map(|((image, _, _), p)| (*image, p.as_slice())).collect();
    let data = match target.cuda_arch() {
        Some(arch) => gpu.native(&items, arch, twin_target)?,
        None => gpu.ptx(&items, twin_target)?,
    };
    Ok(planned
        .into_iter()
        .zip(data)
        .map(|((image, requirements, imports), data)| {
            let mut property_sets: Vec<PropertySet> = property_sets(image, requirements)
                .into_iter()
                .filter(|s| s.name != sets::IMPORTED_SYMBOLS)
                .collect();
            let hashes = imports.iter().map(|(symbol, provider, _)| {
                Property::new(
                    *symbol,
                    PropertyValue::String(format!(
                        "{:016x}",
                        sycl_format::payload_hash(&provider.data)
                    )),
                )
            });
            property_sets.push(PropertySet {
                name: sets::INLINED_IMPORTS.into(),
                properties: hashes.collect(),
            });
            Image {
                format: twin_target.format(),
                target: twin_target.name().into(),
                kernels: image.kernels.clone(),
                property_sets,
                data,
            }
        })
        .collect())
}

/// An image, its requirements, and each import with the provider image (of the twin's base
/// target) and its SPIR-V form that export it.
type Twin<'a> = (&'a PostLinkImage, &'a DeviceRequirements, Vec<(&'a str, &'a Image, &'a Image)>);

/// Each of `image`'s imports with the image of `target` and its SPIR-V form that export it,
/// from the first library that exports it, if every import has one that can be compiled in.
fn providers_of<'a>(
    image: &'a PostLinkImage,
    libraries: &'a [DeviceLibrary],
    target: Target,
) -> Option<Vec<(&'a str, &'a Image, &'a Image)>> {
    if image.imported.is_empty() {
        return None;
    }
    let mut providers = Vec::new();
    for symbol in &image.imported {
        let library = libraries.iter().find(|l| l.exports.contains(symbol))?;
        let exports = |i: &Image| i.exported_symbols().any(|e| e == symbol);
        let provider = library
            .images
            .iter()
            .find(|i| i.format == target.format() && i.target == target && exports(i))?;
        let self_contained = provider.imported_symbols().next().is_none()
            && provider.property_set(sets::SPECIALIZATION_CONSTANTS).is_none()
            && provider.property_set(sets::VIRTUAL_FUNCTIONS).is_none();
        if !self_contained {
            return None;
        }
        let spirv = library.images.iter().find(|i| {
            i.format == ImageFormat::SpirV
                && i.exported_symbols().eq(provider.exported_symbols())
                && i.kernels == provider.kernels
        })?;
        providers.push((symbol.as_str(), provider, spirv));
    }
    Some(providers)
}

pub(crate) fn requirements_of(image: &PostLinkImage) -> DeviceRequirements {
    let r = &image.requirements;
    DeviceRequirements {
        aspects: r.aspects.clone(),
        reqd_sub_group_sizes: r.reqd_sub_group_size.into_iter().collect(),
        reqd_work_group_sizes: r.reqd_work_group_size.into_iter().map(|s| s.to_vec()).collect(),
        fixed_target: r.fixed_target.clone(),
    }
}

pub(crate) fn property_sets(
    image: &PostLinkImage,
    requirements: &DeviceRequirements,
) -> Vec<PropertySet> {
    let mut sets_out = Vec::new();
    if !image.exported.is_empty() {
        sets_out.push(PropertySet::symbols(sets::EXPORTED_SYMBOLS, image.exported.iter().cloned()));
    }
    if !image.imported.is_empty() {
        sets_out.push(PropertySet::symbols(sets::IMPORTED_SYMBOLS, image.imported.iter().cloned()));
    }
    sets_out.extend(requirements.to_property_set());
    let vf = &image.virtual_functions;
    if vf.set.is_some() || !vf.uses.is_empty() {
        let mut properties = Vec::new();
        if let Some(set) = &vf.set {
            properties
                .push(Property::new("virtual-functions-set", PropertyValue::String(set.clone())));
        }
        if vf.dummy {
            properties.push(Property::new("dummy-image", PropertyValue::U32(1)));
        }
        if !vf.uses.is_empty() {
            properties.push(Property::new(
                "uses-virtual-functions-set",
                PropertyValue::String(vf.uses.join(",")),
            ));
        }
        sets_out.push(PropertySet { name: sets::VIRTUAL_FUNCTIONS.into(), properties });
    }
    if !image.call_graph.is_empty() {
        sets_out.push(PropertySet::call_graph(&image.call_graph));
    }
    if !image.kernel_params.is_empty() {
        sets_out.push(PropertySet::kernel_arguments(
            image.kernel_params.iter().map(|(kernel, params)| (kernel, params)),
        ));
    }
    if !image.spec_constants.is_empty() {
        let ids = image
            .spec_constants
            .iter()
            .map(|c| Property::new(c.name.clone(), PropertyValue::U32(c.id)));
        sets_out.push(PropertySet {
            name: sets::SPECIALIZATION_CONSTANTS.into(),
            properties: ids.collect(),
        });
        let defaults = image
            .spec_constants
            .iter()
            .map(|c| Property::new(c.name.clone(), PropertyValue::Bytes(c.default.clone())));
        sets_out.push(PropertySet {
            name: sets::SPECIALIZATION_CONSTANTS_DEFAULTS.into(),
            properties: defaults.collect(),
        });
    }
    sets_out
}

/// Symbols the unit's images import.
pub(crate) fn imports(set: &ImageSet) -> BTreeSet<String> {
    set.images.iter().flat_map(|i| i.imported_symbols().map(str::to_string)).collect()
}

/// An x86-64 relocatable object holding `set` as an ELF note in [`IMAGE_NOTE_SECTION`], and
/// defining the set's scope marker symbol (see [`sycl_format::scope_marker_symbol`]) at it.
/// Returns the object and the symbol's name.
pub(crate) fn note_object(set: &ImageSet) -> (Vec<u8>, String) {
    use object::write::{Symbol, SymbolSection};
    let payload = set.encode();
    let hash = sycl_format::payload_hash(&payload);
    let marker = sycl_format::scope_marker_symbol(hash);
    let mut obj = Object::new(BinaryFormat::Elf, Architecture::X86_64, Endianness::Little);
    let section =
        obj.add_section(vec![], IMAGE_NOTE_SECTION.as_bytes().to_vec(), SectionKind::Note);
    // Allocated, so it is mapped at run time; retained, so --gc-sections keeps it although
    // nothing refers to it.
    obj.section_mut(section).flags = object::SectionFlags::Elf {
        sh_flags: u64::from(object::elf::SHF_ALLOC | object::elf::SHF_GNU_RETAIN),
    };
    let note = sycl_format::elf_note(NOTE_TYPE_IMAGES, &payload);
    let offset = obj.append_section_data(section, &note, 4);
    obj.append_section_data(
        section,
        &sycl_format::elf_note(NOTE_TYPE_PAYLOAD_HASH, &hash.to_le_bytes()),
        4,
    );
    obj.add_symbol(Symbol {
        name: marker.clone().into_bytes(),
        value: offset,
        size: note.len() as u64,
        kind: object::SymbolKind::Data,
        scope: object::SymbolScope::Dynamic,
        weak: false,
        section: SymbolSection::Section(section),
        flags: object::SymbolFlags::None,
    });
    (obj.write().expect("writing an in-memory ELF object cannot fail"), marker)
}

/// A copy of a linker version script that also exports `symbol` (rustc's scripts for
/// `cdylib`s make every symbol but the crate's exports local).
pub(crate) fn export_in_version_script(script: &str, symbol: &str) -> String {
    match script.find("global:") {
        Some(at) => {
            let end = at + "global:".len();
            format!("{}\n    {symbol};{}", &script[..end], &script[end..])
        }
        None => match script.find('{') {
            Some(at) => {
                format!("{}\n  global:\n    {symbol};{}", &script[..=at], &script[at + 1..])
            }
            None => script.to_string(),
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn version_scripts_gain_the_marker() {
        assert_eq!(
            export_in_version_script("{\n\n  local:\n    *;\n};\n", "m"),
            "{\n  global:\n    m;\n\n  local:\n    *;\n};\n"
        );
        assert_eq!(
            export_in_version_script("{\n  global:\n    f;\n  local:\n    *;\n};\n", "m"),
            "{\n  global:\n    m;\n    f;\n  local:\n    *;\n};\n"
        );
    }
}
