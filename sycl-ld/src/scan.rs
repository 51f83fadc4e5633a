//! Finding device code among the link inputs: device objects inside relocatable objects,
//! archives and rlibs (nested archives too), and the images already embedded in the shared
//! libraries the link names. Inputs are memory-mapped and only their headers and our sections
//! are read, so a link without device code costs a few header parses per input.

use std::collections::{BTreeSet, HashSet};
use std::fs::File;
use std::path::Path;

use anyhow::{anyhow, Context, Result};
use memmap2::Mmap;
use object::read::archive::ArchiveFile;
use object::{Object, ObjectKind, ObjectSection};
use sycl_format::{DeviceObject, ImageSet, DEVICE_OBJECT_SECTION};

use crate::args::{find_library, Input, LinkLine};

/// A device object and where it was found (`file` or `archive(member)`).
#[derive(Debug)]
pub struct FoundObject {
    pub origin: String,
    pub object: DeviceObject,
}

/// A shared library on the link line that carries device images.
#[derive(Debug)]
pub struct DeviceLibrary {
    /// What to name it to the linker so that `DT_NEEDED` is its file name (`-l:FILE`).
    pub file_name: String,
    pub exports: BTreeSet<String>,
}

#[derive(Debug, Default)]
pub struct Found {
    pub objects: Vec<FoundObject>,
    pub libraries: Vec<DeviceLibrary>,
}

pub fn scan(line: &LinkLine) -> Result<Found> {
    let mut found = Found::default();
    let mut seen_payloads = HashSet::new();
    let mut seen_files = HashSet::new();
    for input in &line.inputs {
        let path = match input {
            Input::File(path) => path.clone(),
            Input::Lib { name, verbatim, static_only } => {
                // A library the linker cannot find is the linker's error to report.
                match find_library(&line.search_paths, name, *verbatim, *static_only) {
                    Some(path) => path,
                    None => continue,
                }
            }
        };
        if !seen_files.insert(path.clone()) {
            continue;
        }
        let Ok(file) = File::open(&path) else { continue };
        // SAFETY: the map is read-only and private; inputs are not modified while the linker
        // runs (the same assumption every linker makes about its inputs).
        let Ok(map) = (unsafe { Mmap::map(&file) }) else { continue };
        let origin = path.display().to_string();
        scan_bytes(&map, &origin, &path, &mut found, &mut seen_payloads)?;
    }
    Ok(found)
}

fn scan_bytes(
    bytes: &[u8],
    origin: &str,
    path: &Path,
    found: &mut Found,
    seen: &mut HashSet<Vec<u8>>,
) -> Result<()> {
    if bytes.starts_with(b"!<arch>\n") || bytes.starts_with(b"!<thin>\n") {
        let archive =
            ArchiveFile::parse(bytes).map_err(|e| anyhow!("{origin}: malformed archive: {e}"))?;
        for member in archive.members() {
            let member = member.map_err(|e| anyhow!("{origin}: malformed archive member: {e}"))?;
            let name = String::from_utf8_lossy(member.name());
            let Ok(data) = member.data(bytes) else { continue }; // thin archives: not ours
            scan_bytes(data, &format!("{origin}({name})"), path, found, seen)?;
        }
        return Ok(());
    }
    if !bytes.starts_with(b"\x7fELF") {
        return Ok(()); // linker scripts (libc.so), rmeta and anything else: not device code
    }
    // The ELF reader wants its headers aligned; archive members are only 2-aligned.
    let copy;
    let bytes = if bytes.as_ptr().align_offset(8) == 0 {
        bytes
    } else {
        copy = aligned_copy(bytes);
        &bytemuck_bytes(&copy)[..bytes.len()]
    };
    let Ok(file) = object::File::parse(bytes) else { return Ok(()) };
    match file.kind() {
        ObjectKind::Relocatable => {
            let Some(section) = file.section_by_name(DEVICE_OBJECT_SECTION) else { return Ok(()) };
            let payload = section
                .data()
                .map_err(|e| anyhow!("{origin}: unreadable {DEVICE_OBJECT_SECTION} section: {e}"))?;
            let object = DeviceObject::decode(payload)
                .with_context(|| format!("{origin}: malformed device object"))?;
            if seen.insert(payload.to_vec()) {
                found.objects.push(FoundObject { origin: origin.to_string(), object });
            }
        }
        ObjectKind::Dynamic => {
            let Some(set) = embedded_images(&file).with_context(|| format!("{origin}: malformed embedded device images"))?
            else {
                return Ok(());
            };
            let exports = set
                .images
                .iter()
                .flat_map(|i| i.exported_symbols().map(str::to_string))
                .collect();
            let file_name = path.file_name().unwrap_or_default().to_string_lossy().into_owned();
            found.libraries.push(DeviceLibrary { file_name, exports });
        }
        _ => {}
    }
    Ok(())
}

/// The image set embedded in a linked binary, if it has one.
pub fn embedded_images(file: &object::File<'_>) -> Result<Option<ImageSet>> {
    let Some(section) = file.section_by_name(sycl_format::IMAGE_NOTE_SECTION) else {
        return Ok(None);
    };
    let data = section.data().map_err(|e| anyhow!("unreadable note section: {e}"))?;
    let notes = sycl_format::find_notes(data, sycl_format::NOTE_TYPE_IMAGES, section.align())?;
    let mut set = ImageSet::default();
    for desc in notes {
        set.images.extend(ImageSet::decode(desc)?.images);
    }
    Ok(Some(set))
}

fn aligned_copy(bytes: &[u8]) -> Vec<u64> {
    let mut words = vec![0u64; bytes.len().div_ceil(8)];
    for (word, chunk) in words.iter_mut().zip(bytes.chunks(8)) {
        let mut buf = [0u8; 8];
        buf[..chunk.len()].copy_from_slice(chunk);
        *word = u64::from_ne_bytes(buf);
    }
    words
}

fn bytemuck_bytes(words: &[u64]) -> &[u8] {
    // SAFETY: a `u64` slice is readable as bytes: same memory, no padding, `u8` has align 1.
    unsafe { std::slice::from_raw_parts(words.as_ptr().cast(), std::mem::size_of_val(words)) }
}
