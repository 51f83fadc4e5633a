//! Device link and post-link of this link unit, and the object file that carries the result
//! into the output: one allocated, retained `SHT_NOTE` section, which the static linker puts
//! in a `PT_NOTE` segment where the runtime finds it in memory.

use std::collections::BTreeSet;

use anyhow::{Context, Result};
use object::write::Object;
use object::{Architecture, BinaryFormat, Endianness, SectionKind};
use sycl_format::{sets, Image, ImageFormat, ImageSet, PropertySet, IMAGE_NOTE_SECTION, NOTE_TYPE_IMAGES};
use sycl_spirv::LinkInput;

use crate::scan::FoundObject;

/// Links the unit's device objects and post-links them into images.
pub fn device_link(objects: &[FoundObject]) -> Result<ImageSet> {
    let mut inputs = Vec::with_capacity(objects.len());
    for found in objects {
        let name = format!("{} ({})", found.object.source, found.object.package);
        let module = sycl_spirv::load(&found.object.spirv)
            .with_context(|| format!("device object {} from {}", name, found.origin))?;
        inputs.push(LinkInput { name, module });
    }
    let linked = sycl_spirv::link(inputs).context("device link failed")?;
    let images = sycl_spirv::post_link(linked).context("device post-link failed")?;
    Ok(ImageSet {
        images: images
            .into_iter()
            .map(|image| {
                let mut property_sets = Vec::new();
                if !image.exported.is_empty() {
                    property_sets.push(PropertySet::symbols(sets::EXPORTED_SYMBOLS, image.exported));
                }
                if !image.imported.is_empty() {
                    property_sets.push(PropertySet::symbols(sets::IMPORTED_SYMBOLS, image.imported));
                }
                Image {
                    format: ImageFormat::SpirV,
                    target: "spir64".into(),
                    kernels: image.kernels,
                    property_sets,
                    data: image.spirv,
                }
            })
            .collect(),
    })
}

/// Symbols the unit's images import.
pub fn imports(set: &ImageSet) -> BTreeSet<String> {
    set.images.iter().flat_map(|i| i.imported_symbols().map(str::to_string)).collect()
}

/// An x86-64 relocatable object holding `set` as an ELF note in [`IMAGE_NOTE_SECTION`].
pub fn note_object(set: &ImageSet) -> Vec<u8> {
    let mut obj = Object::new(BinaryFormat::Elf, Architecture::X86_64, Endianness::Little);
    let section = obj.add_section(vec![], IMAGE_NOTE_SECTION.as_bytes().to_vec(), SectionKind::Note);
    // Allocated, so it is mapped at run time; retained, so --gc-sections keeps it although
    // nothing refers to it.
    obj.section_mut(section).flags = object::SectionFlags::Elf {
        sh_flags: u64::from(object::elf::SHF_ALLOC | object::elf::SHF_GNU_RETAIN),
    };
    obj.append_section_data(section, &sycl_format::elf_note(NOTE_TYPE_IMAGES, &set.encode()), 4);
    obj.write().expect("writing an in-memory ELF object cannot fail")
}
