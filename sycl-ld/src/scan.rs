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
use object::{Object, ObjectSection};
use sycl_format::{DeviceObject, ImageSet, DEVICE_OBJECT_SECTION, IMAGE_NOTE_SECTION};

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
        // The Rust toolchain's own libraries never hold device code, and std's are large.
        if !seen_files.insert(path.clone()) || is_rust_sysroot(&path) {
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
            if archive.is_thin() {
                continue; // members of thin archives live in other files: not ours
            }
            let data = member.data(bytes).map_err(|e| anyhow!("{origin}({name}): malformed archive member: {e}"))?;
            scan_bytes(data, &format!("{origin}({name})"), path, found, seen)?;
        }
        return Ok(());
    }
    let Some(elf) = Elf64::parse(bytes) else {
        return Ok(()); // linker scripts (libc.so), rmeta and anything else: not device code
    };
    match elf.e_type {
        ET_REL => {
            let Some(payload) = elf.section(DEVICE_OBJECT_SECTION) else { return Ok(()) };
            let payload = payload.ok_or_else(|| anyhow!("{origin}: {DEVICE_OBJECT_SECTION} lies outside the file"))?;
            let object = DeviceObject::decode(payload)
                .with_context(|| format!("{origin}: malformed device object"))?;
            if seen.insert(payload.to_vec()) {
                found.objects.push(FoundObject { origin: origin.to_string(), object });
            }
        }
        ET_DYN => {
            let Some(notes) = elf.section(IMAGE_NOTE_SECTION) else { return Ok(()) };
            let notes = notes.ok_or_else(|| anyhow!("{origin}: {IMAGE_NOTE_SECTION} lies outside the file"))?;
            let set = decode_notes(notes, 4).with_context(|| format!("{origin}: malformed embedded device images"))?;
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

/// Whether `path` lies in a Rust sysroot (`…/lib/rustlib/<target>/lib/…`).
fn is_rust_sysroot(path: &Path) -> bool {
    let mut previous = None;
    for c in path.components().map(|c| c.as_os_str()) {
        if c == "rustlib" && previous == Some(std::ffi::OsStr::new("lib")) {
            return true;
        }
        previous = Some(c);
    }
    false
}

const ET_REL: u16 = 1;
const ET_DYN: u16 = 3;

/// Just enough of a 64-bit little-endian ELF file to find a section by name, reading only the
/// file header, the section headers and the section-name table, all bounds-checked. It runs
/// on every member of every archive of every link, so it must cost next to nothing.
struct Elf64<'a> {
    bytes: &'a [u8],
    e_type: u16,
    shoff: usize,
    shnum: usize,
    names: &'a [u8],
}

impl<'a> Elf64<'a> {
    fn parse(bytes: &'a [u8]) -> Option<Elf64<'a>> {
        // ELFCLASS64, ELFDATA2LSB: the only kind sycl-build writes and x86-64 links read.
        if !bytes.starts_with(b"\x7fELF\x02\x01") || bytes.len() < 64 {
            return None;
        }
        let shoff = u64le(bytes, 40)? as usize;
        let mut shnum = usize::from(u16le(bytes, 60)?);
        let mut shstrndx = usize::from(u16le(bytes, 62)?);
        if shoff == 0 {
            return None;
        }
        let mut elf = Elf64 { bytes, e_type: u16le(bytes, 16)?, shoff, shnum: 1, names: &[] };
        // Extended numbering: the real counts live in section header 0.
        if shnum == 0 {
            shnum = elf.header_u64(0, 32)? as usize;
        }
        if shstrndx == 0xffff {
            shstrndx = elf.header_u32(0, 40)? as usize;
        }
        elf.shnum = shnum;
        elf.names = elf.data(shstrndx)??;
        Some(elf)
    }

    fn header_u32(&self, index: usize, field: usize) -> Option<u32> {
        u32le(self.bytes, self.shoff.checked_add(index.checked_mul(64)?)?.checked_add(field)?)
    }

    fn header_u64(&self, index: usize, field: usize) -> Option<u64> {
        u64le(self.bytes, self.shoff.checked_add(index.checked_mul(64)?)?.checked_add(field)?)
    }

    /// Section `index`'s bytes: `None` if there is no such header, `Some(None)` if its data
    /// lies outside the file.
    fn data(&self, index: usize) -> Option<Option<&'a [u8]>> {
        if index >= self.shnum {
            return None;
        }
        const SHT_NOBITS: u32 = 8;
        if self.header_u32(index, 4)? == SHT_NOBITS {
            return Some(Some(&[]));
        }
        let offset = self.header_u64(index, 24)? as usize;
        let size = self.header_u64(index, 32)? as usize;
        Some(offset.checked_add(size).and_then(|end| self.bytes.get(offset..end)))
    }

    /// The section called `name`, as [`Elf64::data`] gives it.
    fn section(&self, name: &str) -> Option<Option<&'a [u8]>> {
        (1..self.shnum).find_map(|i| {
            let start = self.header_u32(i, 0)? as usize;
            let rest = self.names.get(start..)?;
            (rest.strip_prefix(name.as_bytes())?.first() == Some(&0)).then(|| self.data(i))?
        })
    }
}

fn u16le(b: &[u8], at: usize) -> Option<u16> {
    Some(u16::from_le_bytes(b.get(at..at.checked_add(2)?)?.try_into().ok()?))
}

fn u32le(b: &[u8], at: usize) -> Option<u32> {
    Some(u32::from_le_bytes(b.get(at..at.checked_add(4)?)?.try_into().ok()?))
}

fn u64le(b: &[u8], at: usize) -> Option<u64> {
    Some(u64::from_le_bytes(b.get(at..at.checked_add(8)?)?.try_into().ok()?))
}

/// Every image of every note of our type in a note section's bytes.
fn decode_notes(notes: &[u8], align: u64) -> Result<ImageSet> {
    let mut set = ImageSet::default();
    for desc in sycl_format::find_notes(notes, sycl_format::NOTE_TYPE_IMAGES, align)? {
        set.images.extend(ImageSet::decode(desc)?.images);
    }
    Ok(set)
}

/// The image set embedded in a linked binary, if it has one.
pub fn embedded_images(file: &object::File<'_>) -> Result<Option<ImageSet>> {
    let Some(section) = file.section_by_name(sycl_format::IMAGE_NOTE_SECTION) else {
        return Ok(None);
    };
    let data = section.data().map_err(|e| anyhow!("unreadable note section: {e}"))?;
    decode_notes(data, section.align()).map(Some)
}
