//! An ELF writer, just enough for one device object: an x86-64 relocatable object whose only
//! content is one section, with an empty symbol table (so that linkers and `ar` treat it as
//! any object), like `archive.rs` is just enough `ar`.
//!
//! A general object writer (the `object` crate) would be compiled and linked into the build
//! script of every crate with device code, for a few hundred bytes of headers; see
//! `docs/BUILD-WEIGHT.md`. The output is byte for byte what `object::write` makes of the same
//! section (a test checks it), so nothing downstream can tell the difference.

const EHDR_SIZE: usize = 64;
const SHDR_SIZE: usize = 64;
const SYM_SIZE: usize = 24;
const ET_REL: u16 = 1;
const EM_X86_64: u16 = 62;
const SHT_PROGBITS: u32 = 1;
const SHT_SYMTAB: u32 = 2;
const SHT_STRTAB: u32 = 3;

/// An x86-64 little-endian ELF relocatable object with one section `name` of `flags`, holding
/// `data` aligned to `align` (a power of two).
pub(crate) fn relocatable_with_section(name: &str, flags: u64, data: &[u8], align: u64) -> Vec<u8> {
    // .shstrtab: NUL, the content section's name, then the fixed names (the order `object`
    // writes them in).
    let mut shstrtab = vec![0u8];
    shstrtab.extend_from_slice(name.as_bytes());
    shstrtab.push(0);
    let fixed = shstrtab.len() as u32;
    shstrtab.extend_from_slice(b".shstrtab\0.strtab\0.symtab\0");
    let (shstrtab_name, strtab_name, symtab_name) = (fixed, fixed + 10, fixed + 18);

    // Layout: header, section data, .symtab (one null symbol), .strtab (one NUL), .shstrtab,
    // section headers.
    let data_offset = align_to(EHDR_SIZE, align as usize);
    let symtab_offset = align_to(data_offset + data.len(), 8);
    let strtab_offset = symtab_offset + SYM_SIZE;
    let shstrtab_offset = strtab_offset + 1;
    let shdr_offset = align_to(shstrtab_offset + shstrtab.len(), 8);
    let section_count = 5u16;

    let mut out = Vec::with_capacity(shdr_offset + SHDR_SIZE * usize::from(section_count));
    out.extend_from_slice(&[0x7f, b'E', b'L', b'F', 2, 1, 1, 0]); // ELF64, little endian, v1, SysV
    out.resize(16, 0);
    out.extend_from_slice(&ET_REL.to_le_bytes());
    out.extend_from_slice(&EM_X86_64.to_le_bytes());
    out.extend_from_slice(&1u32.to_le_bytes()); // e_version
    out.extend_from_slice(&0u64.to_le_bytes()); // e_entry
    out.extend_from_slice(&0u64.to_le_bytes()); // e_phoff
    out.extend_from_slice(&(shdr_offset as u64).to_le_bytes());
    out.extend_from_slice(&0u32.to_le_bytes()); // e_flags
    out.extend_from_slice(&(EHDR_SIZE as u16).to_le_bytes());
    out.extend_from_slice(&0u16.to_le_bytes()); // e_phentsize
    out.extend_from_slice(&0u16.to_le_bytes()); // e_phnum
    out.extend_from_slice(&(SHDR_SIZE as u16).to_le_bytes());
    out.extend_from_slice(&section_count.to_le_bytes());
    out.extend_from_slice(&(section_count - 1).to_le_bytes()); // e_shstrndx: .shstrtab
    debug_assert_eq!(out.len(), EHDR_SIZE);

    out.resize(data_offset, 0);
    out.extend_from_slice(data);
    out.resize(symtab_offset + SYM_SIZE, 0); // the null symbol
    out.push(0); // .strtab
    out.extend_from_slice(&shstrtab);
    out.resize(shdr_offset, 0);

    let header = |out: &mut Vec<u8>, s: SectionHeader| {
        out.extend_from_slice(&s.name.to_le_bytes());
        out.extend_from_slice(&s.kind.to_le_bytes());
        out.extend_from_slice(&s.flags.to_le_bytes());
        out.extend_from_slice(&0u64.to_le_bytes()); // sh_addr
        out.extend_from_slice(&(s.offset as u64).to_le_bytes());
        out.extend_from_slice(&(s.size as u64).to_le_bytes());
        out.extend_from_slice(&s.link.to_le_bytes());
        out.extend_from_slice(&s.info.to_le_bytes());
        out.extend_from_slice(&s.align.to_le_bytes());
        out.extend_from_slice(&s.entsize.to_le_bytes());
    };
    let none = SectionHeader::default();
    header(&mut out, none);
    header(
        &mut out,
        SectionHeader {
            name: 1,
            kind: SHT_PROGBITS,
            flags,
            offset: data_offset,
            size: data.len(),
            align,
            ..none
        },
    );
    // sh_link: the string table (section 3); sh_info: one past the last local symbol.
    header(
        &mut out,
        SectionHeader {
            name: symtab_name,
            kind: SHT_SYMTAB,
            offset: symtab_offset,
            size: SYM_SIZE,
            link: 3,
            info: 1,
            align: 8,
            entsize: SYM_SIZE as u64,
            ..none
        },
    );
    header(
        &mut out,
        SectionHeader {
            name: strtab_name,
            kind: SHT_STRTAB,
            offset: strtab_offset,
            size: 1,
            align: 1,
            ..none
        },
    );
    header(
        &mut out,
        SectionHeader {
            name: shstrtab_name,
            kind: SHT_STRTAB,
            offset: shstrtab_offset,
            size: shstrtab.len(),
            align: 1,
            ..none
        },
    );
    out
}

#[derive(Clone, Copy, Default)]
struct SectionHeader {
    name: u32,
    kind: u32,
    flags: u64,
    offset: usize,
    size: usize,
    link: u32,
    info: u32,
    align: u64,
    entsize: u64,
}

fn align_to(offset: usize, align: usize) -> usize {
    offset.next_multiple_of(align.max(1))
}

#[cfg(test)]
mod tests {
    use super::*;
    use object::read::elf::{ElfFile64, FileHeader as _};
    use object::{Object as _, ObjectSection as _};

    /// What `object::write` makes of one section, the writer this module replaced.
    fn written_by_object(name: &str, flags: u64, data: &[u8], align: u64) -> Vec<u8> {
        use object::{write, Architecture, BinaryFormat, Endianness, SectionKind};
        let mut obj =
            write::Object::new(BinaryFormat::Elf, Architecture::X86_64, Endianness::Little);
        let section = obj.add_section(vec![], name.as_bytes().to_vec(), SectionKind::Metadata);
        obj.section_mut(section).flags = object::SectionFlags::Elf { sh_flags: flags };
        obj.append_section_data(section, data, align);
        obj.write().unwrap()
    }

    #[test]
    fn same_bytes_as_the_object_crate() {
        let flags = u64::from(object::elf::SHF_EXCLUDE);
        for len in [0, 1, 7, 8, 12, 1721] {
            let data: Vec<u8> = (0..len).map(|i| i as u8).collect();
            for name in [".sycl.device_object", ".x"] {
                assert_eq!(
                    relocatable_with_section(name, flags, &data, 8),
                    written_by_object(name, flags, &data, 8),
                    "section {name} of {len} bytes"
                );
            }
        }
    }

    #[test]
    fn reads_back_as_a_relocatable_x86_64_object() {
        let bytes = relocatable_with_section(".sycl.device_object", 0x8000_0000, b"payload!", 8);
        let file = ElfFile64::<object::LittleEndian>::parse(&*bytes).unwrap();
        assert_eq!(file.elf_header().e_type(object::LittleEndian), object::elf::ET_REL);
        assert_eq!(file.architecture(), object::Architecture::X86_64);
        let section = file.section_by_name(".sycl.device_object").unwrap();
        assert_eq!(section.data().unwrap(), b"payload!");
        assert_eq!(section.elf_section_header().sh_flags.get(object::LittleEndian), 0x8000_0000);
        assert_eq!(file.symbols().count(), 0);
    }
}
