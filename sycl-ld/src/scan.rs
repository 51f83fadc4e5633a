//! Finding device code among the link inputs: device objects inside relocatable objects,
//! archives and rlibs (nested archives too), and the images already embedded in the shared
//! libraries the link names.
//!
//! Every link runs this, build scripts' and proc macros' included, and almost none of them has
//! device code, so it reads only what decides. Inputs are read with positioned reads into
//! buffers reused from member to member: mapping them cost a page fault for each page touched,
//! dearer than the read, and most of an rlib is never looked at. An archive member costs one
//! read of its header; an object the reads of its ELF header, section headers and section
//! names. What cannot hold a device object is never opened or read: the Rust sysroot's
//! libraries and rustc's codegen units (`*.rcgu.o`, loose or in rlibs), since device objects
//! only come from `sycl-build`'s archives, as members named `sycl-device-*` (rlibs carry the
//! members of bundled native libraries under their own names). It never writes anything.

use std::borrow::Cow;
use std::collections::{BTreeSet, HashSet};
use std::fmt;
use std::fs::File;
use std::io;
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::FileExt;
use std::path::Path;

use anyhow::{anyhow, Context, Result};
use object::{Object, ObjectSection};
use sycl_format::{
    DeviceObject, ImageSet, DEVICE_OBJECT_MEMBER_PREFIX, DEVICE_OBJECT_SECTION, IMAGE_NOTE_SECTION,
};

use crate::args::{find_library, Input, LinkLine};

/// A device object and where it was found (`file` or `archive(member)`).
#[derive(Debug)]
pub(crate) struct FoundObject {
    pub origin: String,
    pub object: DeviceObject,
}

/// A shared library on the link line that carries device images.
#[derive(Debug)]
pub(crate) struct DeviceLibrary {
    /// What to name it to the linker so that `DT_NEEDED` is its file name (`-l:FILE`).
    pub file_name: String,
    pub exports: BTreeSet<String>,
    /// Its images, for the `ptx64` target's compiled-in imports.
    pub images: Vec<sycl_format::Image>,
}

#[derive(Debug, Default)]
pub(crate) struct Found {
    pub objects: Vec<FoundObject>,
    pub libraries: Vec<DeviceLibrary>,
}

pub(crate) fn scan(line: &LinkLine) -> Result<Found> {
    let mut scanner = Scanner::default();
    let mut seen_files = HashSet::new();
    for input in &line.inputs {
        let path: Cow<'_, Path> = match input {
            Input::File(path) => Cow::Borrowed(path),
            Input::Lib { name, verbatim, static_only } => {
                // A library the linker cannot find is the linker's error to report.
                match find_library(&line.search_paths, name, *verbatim, *static_only) {
                    Some(path) => Cow::Owned(path),
                    None => continue,
                }
            }
        };
        // The Rust toolchain's own libraries never hold device code, and std's are large.
        let name = path.file_name().unwrap_or_default().as_bytes();
        if is_rust_sysroot(&path) || is_codegen_unit(name) || !seen_files.insert(path.clone()) {
            continue;
        }
        // A missing or unreadable input, or one that is no file, is the linker's to report.
        let Ok(file) = File::open(&path) else { continue };
        let Ok(metadata) = file.metadata() else { continue };
        if !metadata.is_file() {
            continue;
        }
        let origin = path.display().to_string();
        scanner.scan_file(Span { file: &file, start: 0, len: metadata.len() }, &origin, &path)?;
    }
    Ok(scanner.found)
}

/// Whether an object or archive member of this name is one that rustc generated from Rust
/// code (a codegen unit, `<crate>-<hash>.<cgu>.rcgu.o`), which never holds a device object.
fn is_codegen_unit(name: &[u8]) -> bool {
    name.ends_with(b".rcgu.o") && !name.starts_with(DEVICE_OBJECT_MEMBER_PREFIX.as_bytes())
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

/// A byte range of an open file: a whole input, or an archive member's data.
#[derive(Clone, Copy)]
struct Span<'f> {
    file: &'f File,
    start: u64,
    len: u64,
}

impl<'f> Span<'f> {
    /// The `len` bytes at `offset` into this span, or `None` if they do not all lie inside it.
    fn sub(&self, offset: u64, len: u64) -> Option<Span<'f>> {
        let end = offset.checked_add(len)?;
        (end <= self.len).then_some(Span { file: self.file, start: self.start + offset, len })
    }

    /// Reads the whole span into `buf`, replacing what it held. The span lies inside the file
    /// (checked against its length when opened), so the read asks for no more than is there.
    fn read_into(&self, buf: &mut Vec<u8>) -> io::Result<()> {
        let len =
            usize::try_from(self.len).map_err(|_| io::Error::from(io::ErrorKind::OutOfMemory))?;
        buf.clear();
        buf.resize(len, 0);
        self.file.read_exact_at(buf, self.start)
    }

    /// Reads the span's first bytes into `buf`, as many as fit; returns how many.
    fn read_head(&self, buf: &mut [u8]) -> io::Result<usize> {
        let len = buf.len().min(usize::try_from(self.len).unwrap_or(usize::MAX));
        self.file.read_exact_at(&mut buf[..len], self.start)?;
        Ok(len)
    }
}

/// Where bytes come from, for messages: a file, or a member of an archive (`file(member)`).
#[derive(Clone, Copy)]
struct Origin<'a> {
    outer: &'a str,
    member: Option<&'a [u8]>,
}

impl fmt::Display for Origin<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.member {
            Some(member) => write!(f, "{}({})", self.outer, String::from_utf8_lossy(member)),
            None => f.write_str(self.outer),
        }
    }
}

const AR_MAGIC: &[u8] = b"!<arch>\n";
const AR_THIN_MAGIC: &[u8] = b"!<thin>\n";
const AR_HEADER: usize = 60;
const ELF_HEADER: usize = 64;
const SECTION_HEADER: u64 = 64;
const ET_REL: u16 = 1;
const ET_DYN: u16 = 3;

/// What has been found so far, and the buffers that reads go into.
#[derive(Default)]
struct Scanner {
    found: Found,
    /// Device-object payloads already taken (the same archive can be named twice).
    seen_payloads: HashSet<Vec<u8>>,
    section_headers: Vec<u8>,
    section_names: Vec<u8>,
}

impl Scanner {
    fn scan_file(&mut self, span: Span<'_>, origin: &str, path: &Path) -> Result<()> {
        let mut head = [0u8; ELF_HEADER];
        let n = span.read_head(&mut head).with_context(|| format!("reading {origin}"))?;
        self.scan_bytes(span, &head[..n], Origin { outer: origin, member: None }, path)
    }

    /// Scans `span`, whose first bytes (up to an ELF header's worth) are `head`.
    fn scan_bytes(
        &mut self,
        span: Span<'_>,
        head: &[u8],
        origin: Origin<'_>,
        path: &Path,
    ) -> Result<()> {
        if head.starts_with(AR_MAGIC) {
            let outer = origin.to_string();
            self.scan_archive(span, &outer, path)
        } else if head.starts_with(AR_THIN_MAGIC) {
            Ok(()) // the members of thin archives live in other files: not ours
        } else {
            self.scan_elf(span, head, origin, path)
                .with_context(|| format!("reading {origin}"))
                .and_then(|r| r)
        }
    }

    /// Walks a GNU or BSD archive's members (the symbol table and the long-name table are not
    /// members), reading only their headers unless they can hold device code.
    fn scan_archive(&mut self, span: Span<'_>, origin: &str, path: &Path) -> Result<()> {
        let malformed = |offset: u64, what: &str| {
            anyhow!("{origin}: malformed archive member at offset {offset}: {what}")
        };
        let mut long_names = Vec::new();
        let mut bsd_name = Vec::new();
        // A member's header and what an ELF header needs of its data, in one read.
        let mut head = [0u8; AR_HEADER + ELF_HEADER];
        let mut next = AR_MAGIC.len() as u64;
        while next < span.len {
            let at = next;
            let rest = span.sub(at, span.len - at).expect("the member lies inside the span");
            let n = rest.read_head(&mut head).with_context(|| format!("reading {origin}"))?;
            if n < AR_HEADER || &head[58..60] != b"`\n" {
                return Err(malformed(at, "no member header"));
            }
            let size = decimal(&head[48..58]).ok_or_else(|| malformed(at, "bad size"))?;
            let mut data = span
                .sub(at + AR_HEADER as u64, size)
                .ok_or_else(|| malformed(at, "its data runs past the end of the file"))?;
            // Members start at even offsets.
            next = at + AR_HEADER as u64 + size + (size & 1);
            let field = &head[..16];
            let mut prefetched = &head[AR_HEADER..n.min(AR_HEADER + size as usize)];
            let name: &[u8] = if field.starts_with(b"// ") {
                data.read_into(&mut long_names).with_context(|| format!("reading {origin}"))?;
                continue;
            } else if field.starts_with(b"/ ") || field.starts_with(b"/SYM64/ ") {
                continue; // the symbol table
            } else if let Some(index) = field.strip_prefix(b"/") {
                // GNU: `/N` is the name at offset N of the long-name table, ended by "/\n".
                let index = decimal(index).ok_or_else(|| malformed(at, "bad name"))?;
                let names = long_names
                    .get(index as usize..)
                    .ok_or_else(|| malformed(at, "bad long name"))?;
                let end = names.iter().position(|&b| b == b'\n').unwrap_or(names.len());
                let name = &names[..end];
                name.strip_suffix(b"/").unwrap_or(name)
            } else if let Some(len) = field.strip_prefix(b"#1/") {
                // BSD: `#1/N` puts the name in the data's first N bytes.
                let len = decimal(len).ok_or_else(|| malformed(at, "bad name"))?;
                let name = data.sub(0, len).ok_or_else(|| malformed(at, "bad name"))?;
                name.read_into(&mut bsd_name).with_context(|| format!("reading {origin}"))?;
                data = data.sub(len, size - len).expect("the name lies inside the member");
                prefetched = &[];
                let end = bsd_name.iter().position(|&b| b == 0).unwrap_or(bsd_name.len());
                &bsd_name[..end]
            } else {
                // GNU ends short names with '/', BSD pads them with spaces.
                let end = field.iter().position(|&b| b == b'/').unwrap_or(field.len());
                field[..end].trim_ascii_end()
            };
            if is_codegen_unit(name) || name.starts_with(b"__.SYMDEF") {
                continue;
            }
            let origin = Origin { outer: origin, member: Some(name) };
            if prefetched.len() < ELF_HEADER.min(data.len as usize) {
                let mut member_head = [0u8; ELF_HEADER];
                let n = data
                    .read_head(&mut member_head)
                    .with_context(|| format!("reading {origin}"))?;
                self.scan_bytes(data, &member_head[..n], origin, path)?;
            } else {
                self.scan_bytes(data, prefetched, origin, path)?;
            }
        }
        Ok(())
    }

    /// Takes the device object of a relocatable object, or the images of a shared library.
    /// I/O errors are the outer result, malformed device code the inner one.
    fn scan_elf(
        &mut self,
        span: Span<'_>,
        head: &[u8],
        origin: Origin<'_>,
        path: &Path,
    ) -> io::Result<Result<()>> {
        let Some(header) = ElfHeader::parse(head) else {
            return Ok(Ok(())); // linker scripts (libc.so), rmeta and anything else: not device code
        };
        let wanted = match header.e_type {
            ET_REL => DEVICE_OBJECT_SECTION,
            ET_DYN => IMAGE_NOTE_SECTION,
            _ => return Ok(Ok(())),
        };
        let Some(section) = self.section(span, &header, wanted)? else { return Ok(Ok(())) };
        let Some(section) = section else {
            return Ok(Err(anyhow!("{origin}: {wanted} lies outside the file")));
        };
        let mut payload = Vec::new();
        section.read_into(&mut payload)?;
        Ok(self.take(header.e_type, payload, origin, path))
    }

    fn take(
        &mut self,
        e_type: u16,
        payload: Vec<u8>,
        origin: Origin<'_>,
        path: &Path,
    ) -> Result<()> {
        if e_type == ET_REL {
            let object = DeviceObject::decode(&payload)
                .with_context(|| format!("{origin}: malformed device object"))?;
            if self.seen_payloads.insert(payload) {
                self.found.objects.push(FoundObject { origin: origin.to_string(), object });
            }
        } else {
            let set = decode_notes(&payload, 4)
                .with_context(|| format!("{origin}: malformed embedded device images"))?;
            let exports =
                set.images.iter().flat_map(|i| i.exported_symbols().map(str::to_string)).collect();
            let file_name = path.file_name().unwrap_or_default().to_string_lossy().into_owned();
            self.found.libraries.push(DeviceLibrary { file_name, exports, images: set.images });
        }
        Ok(())
    }

    /// The section called `name`: `None` if there is none, or if the section headers or their
    /// names do not lie inside the span (not an object of ours to read); `Some(None)` if the
    /// section's data lies outside the span.
    fn section<'f>(
        &mut self,
        span: Span<'f>,
        header: &ElfHeader,
        name: &str,
    ) -> io::Result<Option<Option<Span<'f>>>> {
        if header.shoff == 0 {
            return Ok(None);
        }
        let (mut count, mut names_index) = (u64::from(header.shnum), u32::from(header.shstrndx));
        // Extended numbering: the real counts live in section header 0.
        if count == 0 || names_index == 0xffff {
            let Some(first) = span.sub(header.shoff, SECTION_HEADER) else { return Ok(None) };
            first.read_into(&mut self.section_headers)?;
            if count == 0 {
                count = field_u64(&self.section_headers, 32);
            }
            if names_index == 0xffff {
                names_index = field_u32(&self.section_headers, 40);
            }
        }
        let Some(table) =
            count.checked_mul(SECTION_HEADER).and_then(|len| span.sub(header.shoff, len))
        else {
            return Ok(None);
        };
        table.read_into(&mut self.section_headers)?;
        let headers = &self.section_headers;
        let Some(Some(names)) = section_data(span, headers, names_index as usize) else {
            return Ok(None);
        };
        names.read_into(&mut self.section_names)?;
        let names = &self.section_names;
        let found = (1..count as usize).find(|&i| {
            let start = field_u32(&headers[i * 64..], 0) as usize;
            names
                .get(start..)
                .and_then(|rest| rest.strip_prefix(name.as_bytes()))
                .is_some_and(|rest| rest.first() == Some(&0))
        });
        Ok(found.and_then(|i| section_data(span, headers, i)))
    }
}

/// The fields of a 64-bit little-endian ELF file header that finding a section needs: the
/// only kind `sycl-build` writes and x86-64 links read.
struct ElfHeader {
    e_type: u16,
    shoff: u64,
    shnum: u16,
    shstrndx: u16,
}

impl ElfHeader {
    fn parse(head: &[u8]) -> Option<ElfHeader> {
        if !head.starts_with(b"\x7fELF\x02\x01") || head.len() < ELF_HEADER {
            return None;
        }
        let u16_at = |at: usize| u16::from_le_bytes([head[at], head[at + 1]]);
        Some(ElfHeader {
            e_type: u16_at(16),
            shoff: field_u64(head, 40),
            shnum: u16_at(60),
            shstrndx: u16_at(62),
        })
    }
}

/// Section `index`'s data, given the section header table `headers`: `None` if there is no
/// such header, `Some(None)` if its data lies outside the span.
fn section_data<'f>(span: Span<'f>, headers: &[u8], index: usize) -> Option<Option<Span<'f>>> {
    let header = headers.get(index.checked_mul(64)?..)?.get(..64)?;
    const SHT_NOBITS: u32 = 8;
    if field_u32(header, 4) == SHT_NOBITS {
        return Some(span.sub(0, 0));
    }
    Some(span.sub(field_u64(header, 24), field_u64(header, 32)))
}

/// The little-endian fields of a header the caller has checked to be long enough.
fn field_u32(b: &[u8], at: usize) -> u32 {
    u32::from_le_bytes(b[at..at + 4].try_into().unwrap())
}

fn field_u64(b: &[u8], at: usize) -> u64 {
    u64::from_le_bytes(b[at..at + 8].try_into().unwrap())
}

/// An archive header's decimal field (digits, padded with spaces).
fn decimal(field: &[u8]) -> Option<u64> {
    let digits = field.trim_ascii();
    if digits.is_empty() || !digits.iter().all(u8::is_ascii_digit) {
        return None;
    }
    digits.iter().try_fold(0u64, |n, &d| n.checked_mul(10)?.checked_add(u64::from(d - b'0')))
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
pub(crate) fn embedded_images(file: &object::File<'_>) -> Result<Option<ImageSet>> {
    let Some(section) = file.section_by_name(sycl_format::IMAGE_NOTE_SECTION) else {
        return Ok(None);
    };
    let data = section.data().map_err(|e| anyhow!("unreadable note section: {e}"))?;
    decode_notes(data, section.align()).map(Some)
}

#[cfg(test)]
mod tests {
    use std::path::PathBuf;

    use object::write::Object as Writer;
    use object::{Architecture, BinaryFormat, Endianness, SectionKind};

    use super::*;

    /// A relocatable object holding a device object for `source`, as sycl-build writes one.
    fn device_object(source: &str) -> Vec<u8> {
        let object = DeviceObject {
            package: "test".into(),
            source: source.into(),
            split: None,
            fixed_targets: vec![],
            targets: vec![],
            device_config: None,
            spirv: vec![0x03, 0x02, 0x23, 0x07],
        };
        let mut obj = Writer::new(BinaryFormat::Elf, Architecture::X86_64, Endianness::Little);
        let section = obj.add_section(
            vec![],
            DEVICE_OBJECT_SECTION.as_bytes().to_vec(),
            SectionKind::Metadata,
        );
        obj.append_section_data(section, &object.encode(), 8);
        obj.write().unwrap()
    }

    /// A relocatable object with code and no device object.
    fn host_object() -> Vec<u8> {
        let mut obj = Writer::new(BinaryFormat::Elf, Architecture::X86_64, Endianness::Little);
        let text = obj.add_section(vec![], b".text".to_vec(), SectionKind::Text);
        obj.append_section_data(text, &[0xc3; 100], 16);
        obj.write().unwrap()
    }

    fn ar_member(out: &mut Vec<u8>, name: &str, data: &[u8]) {
        out.extend_from_slice(
            format!("{name:<16}{:<12}{:<6}{:<6}{:<8}{:<10}`\n", 0, 0, 0, 644, data.len())
                .as_bytes(),
        );
        out.extend_from_slice(data);
        if data.len() % 2 == 1 {
            out.push(b'\n');
        }
    }

    /// A GNU archive: a symbol table, long names in `//`, short ones ended by '/'.
    fn gnu_archive(members: &[(&str, Vec<u8>)]) -> Vec<u8> {
        let mut out = AR_MAGIC.to_vec();
        ar_member(&mut out, "/", &[0; 4]);
        let mut names = String::new();
        let mut headers = Vec::new();
        for (name, _) in members {
            if name.len() < 16 {
                headers.push(format!("{name}/"));
            } else {
                headers.push(format!("/{}", names.len()));
                names.push_str(&format!("{name}/\n"));
            }
        }
        ar_member(&mut out, "//", names.as_bytes());
        for ((_, data), header) in members.iter().zip(headers) {
            ar_member(&mut out, &header, data);
        }
        out
    }

    /// A BSD archive: each name in front of its member's data (`#1/LEN`).
    fn bsd_archive(members: &[(&str, Vec<u8>)]) -> Vec<u8> {
        let mut out = AR_MAGIC.to_vec();
        for (name, data) in members {
            let mut named = name.as_bytes().to_vec();
            named.extend_from_slice(data);
            ar_member(&mut out, &format!("#1/{}", name.len()), &named);
        }
        out
    }

    fn scan_files(files: &[(&str, Vec<u8>)]) -> (tempfile::TempDir, Result<Found>) {
        let dir = tempfile::tempdir().unwrap();
        let mut line = LinkLine::default();
        for (name, bytes) in files {
            let path: PathBuf = dir.path().join(name);
            std::fs::write(&path, bytes).unwrap();
            line.inputs.push(Input::File(path));
        }
        let found = scan(&line);
        (dir, found)
    }

    fn origins(dir: &tempfile::TempDir, found: &Found) -> Vec<String> {
        let prefix = format!("{}/", dir.path().display());
        found
            .objects
            .iter()
            .map(|o| o.origin.strip_prefix(&prefix).unwrap_or(&o.origin).to_string())
            .collect()
    }

    #[test]
    fn device_objects_are_found_in_nested_gnu_and_bsd_archives() {
        let inner =
            gnu_archive(&[("host.o", host_object()), ("sycl-device-0-a.o", device_object("a.cl"))]);
        let rlib = gnu_archive(&[
            ("lib.rmeta", b"rust\0\0\0\x08metadata".to_vec()),
            ("app-1234.app.5678-cgu.0.rcgu.o", host_object()),
            ("libsycl_device_k.a", inner),
            // A device source whose stem ends like a codegen unit is still ours.
            ("sycl-device-1-odd.rcgu.o", device_object("odd.rcgu.cl")),
            ("b.o", device_object("b.cl")),
        ]);
        let bsd =
            bsd_archive(&[("host.o", host_object()), ("sycl-device-0-c.o", device_object("c.cl"))]);
        let (dir, found) = scan_files(&[
            ("libapp-1234.rlib", rlib),
            ("libbsd.a", bsd),
            ("loose.o", device_object("loose.cl")),
            ("plain.o", host_object()),
        ]);
        let found = found.unwrap();
        assert_eq!(
            origins(&dir, &found),
            [
                "libapp-1234.rlib(libsycl_device_k.a)(sycl-device-0-a.o)",
                "libapp-1234.rlib(sycl-device-1-odd.rcgu.o)",
                "libapp-1234.rlib(b.o)",
                "libbsd.a(sycl-device-0-c.o)",
                "loose.o",
            ]
        );
        assert_eq!(found.objects[0].object.source, "a.cl");
        assert!(found.libraries.is_empty());
    }

    #[test]
    fn rustc_codegen_units_are_never_read() {
        // Were they read, these would be found (or, the second, fail the scan).
        let mut garbage = device_object("x.cl");
        let len = garbage.len();
        garbage[len / 2..].fill(0xff);
        let rlib = gnu_archive(&[("dep-99.dep.1-cgu.0.rcgu.o", device_object("in-cgu.cl"))]);
        let (_dir, found) = scan_files(&[
            ("libdep-99.rlib", rlib),
            ("app-1.app.2-cgu.0.rcgu.o", device_object("loose-cgu.cl")),
            ("app-1.app.2-cgu.1.rcgu.o", garbage),
        ]);
        let found = found.unwrap();
        assert!(found.objects.is_empty(), "{:?}", found.objects);
    }

    #[test]
    fn the_same_device_object_twice_is_taken_once() {
        let archive = gnu_archive(&[("sycl-device-0-a.o", device_object("a.cl"))]);
        let (dir, found) = scan_files(&[("liba.a", archive.clone()), ("libb.a", archive)]);
        assert_eq!(origins(&dir, &found.unwrap()), ["liba.a(sycl-device-0-a.o)"]);
    }

    #[test]
    fn a_member_past_the_end_of_the_archive_is_an_error_naming_it() {
        let mut archive =
            gnu_archive(&[("host.o", host_object()), ("sycl-device-0-a.o", device_object("a.cl"))]);
        archive.truncate(archive.len() - 10);
        let (_dir, found) = scan_files(&[("libcut.a", archive)]);
        let err = format!("{:#}", found.unwrap_err());
        assert!(
            err.contains("libcut.a: malformed archive member") && err.contains("past the end"),
            "{err}"
        );
    }

    #[test]
    fn a_device_object_section_outside_the_file_is_an_error() {
        let mut object = device_object("a.cl");
        let header = ElfHeader::parse(&object).unwrap();
        let (shoff, count) = (header.shoff as usize, usize::from(header.shnum));
        let names = section_data_range(&object, shoff, usize::from(header.shstrndx));
        // Point the device object's section past the end of the file.
        for i in 1..count {
            let at = shoff + i * 64;
            let name = u32::from_le_bytes(object[at..at + 4].try_into().unwrap()) as usize;
            if object[names.0 + name..].starts_with(DEVICE_OBJECT_SECTION.as_bytes()) {
                object[at + 24..at + 32].copy_from_slice(&(1u64 << 40).to_le_bytes());
            }
        }
        let (_dir, found) = scan_files(&[("lying.o", object)]);
        let err = format!("{:#}", found.unwrap_err());
        assert!(err.contains("lying.o: .sycl.device_object lies outside the file"), "{err}");
    }

    fn section_data_range(elf: &[u8], shoff: usize, index: usize) -> (usize, usize) {
        let at = shoff + index * 64;
        (field_u64(elf, at + 24) as usize, field_u64(elf, at + 32) as usize)
    }

    #[test]
    fn the_rust_sysroot_is_recognised() {
        assert!(is_rust_sysroot(Path::new(
            "/r/lib/rustlib/x86_64-unknown-linux-gnu/lib/libstd-1.rlib"
        )));
        assert!(!is_rust_sysroot(Path::new("/r/target/debug/deps/libstd_like-1.rlib")));
    }
}
