//! Native NVIDIA images (the `nvidia_gpu_sm_XX` targets) read in place: a relocatable cubin
//! is an ELF64 `ET_REL` object for machine `EM_CUDA` whose header flags name its architecture
//! and whose symbol table names its kernels (functions), the functions it imports (undefined)
//! and its variables, a specialization constant's included. What `sycl-ld inspect` shows, the
//! checks of the images `sycl-ld` makes, and the runtime's writing of specialization values
//! into a copy of the object before the CUDA link all read it here, bounds-checked: a
//! malformed object is a [`DecodeError`], never a panic.

use crate::DecodeError;

/// `EM_CUDA`: the ELF machine of NVIDIA GPU code.
pub const EM_CUDA: u16 = 190;
const ET_REL: u16 = 1;
const ET_EXEC: u16 = 2;
const SHT_SYMTAB: u32 = 2;
const SHT_NOBITS: u32 = 8;
const STT_FUNC: u8 = 2;

/// A cubin's header and symbols, borrowed from its bytes.
#[derive(Debug, Clone)]
pub struct Cubin<'a> {
    /// The architecture the SASS is for, as a number: 90 for `sm_90`.
    pub arch: u32,
    /// Whether the object is relocatable (`ET_REL`: what `ptxas -c` makes, linkable), rather
    /// than a linked executable cubin.
    pub relocatable: bool,
    /// The symbols, in table order.
    pub symbols: Vec<Symbol<'a>>,
    sections: Vec<Section>,
    /// How many bytes the object has: a section's data must lie within them.
    len: u64,
}

/// A symbol of a cubin.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Symbol<'a> {
    /// Its name.
    pub name: &'a str,
    /// Whether it is a function (a kernel or a device function), not a variable.
    pub function: bool,
    /// Whether the object defines it (an undefined one is an import the link resolves).
    pub defined: bool,
    /// Whether other objects see it (binding global or weak, not local).
    pub global: bool,
    section: u16,
    value: u64,
    size: u64,
}

#[derive(Debug, Clone, Copy)]
struct Section {
    kind: u32,
    offset: u64,
    size: u64,
}

fn read<const N: usize>(bytes: &[u8], at: u64) -> Result<[u8; N], DecodeError> {
    let start = usize::try_from(at).map_err(|_| truncated(at))?;
    bytes
        .get(start..start.checked_add(N).ok_or_else(|| truncated(at))?)
        .and_then(|b| b.try_into().ok())
        .ok_or_else(|| truncated(at))
}

fn truncated(at: u64) -> DecodeError {
    DecodeError::Invalid(format!("the cubin ends before offset {at}"))
}

fn u16_at(bytes: &[u8], at: u64) -> Result<u16, DecodeError> {
    read::<2>(bytes, at).map(u16::from_le_bytes)
}

fn u32_at(bytes: &[u8], at: u64) -> Result<u32, DecodeError> {
    read::<4>(bytes, at).map(u32::from_le_bytes)
}

fn u64_at(bytes: &[u8], at: u64) -> Result<u64, DecodeError> {
    read::<8>(bytes, at).map(u64::from_le_bytes)
}

/// Whether `bytes` are a whole program (an `ET_EXEC` cubin for `EM_CUDA`, which the driver
/// loads without a link), from the header alone.
pub fn is_whole_program(bytes: &[u8]) -> bool {
    bytes.starts_with(b"\x7fELF\x02\x01")
        && u16_at(bytes, 18).is_ok_and(|m| m == EM_CUDA)
        && u16_at(bytes, 16).is_ok_and(|t| t == ET_EXEC)
}

impl<'a> Cubin<'a> {
    /// The cubin in `bytes`; an error when they are not a little-endian ELF64 object for
    /// `EM_CUDA`, or a table points outside them.
    pub fn parse(bytes: &'a [u8]) -> Result<Cubin<'a>, DecodeError> {
        if !bytes.starts_with(b"\x7fELF\x02\x01") {
            return Err(DecodeError::Invalid("not a little-endian ELF64 object".into()));
        }
        let machine = u16_at(bytes, 18)?;
        if machine != EM_CUDA {
            return Err(DecodeError::Invalid(format!(
                "an ELF object for machine {machine}, not NVIDIA CUDA ({EM_CUDA})"
            )));
        }
        let abi_version = bytes.get(8).copied().unwrap_or_default();
        let flags = u32_at(bytes, 48)?;
        // ABI version 7 (up to sm_90) keeps the architecture in the flags' low byte; version 8
        // (sm_100 on) in the next one.
        let arch = if abi_version >= 8 { (flags >> 8) & 0xff } else { flags & 0xff };
        let (shoff, shentsize, shnum) =
            (u64_at(bytes, 40)?, u16_at(bytes, 58)?, u16_at(bytes, 60)?);
        if shentsize != 64 {
            return Err(DecodeError::Invalid(format!("section headers of {shentsize} bytes")));
        }
        let sections = (0..u64::from(shnum))
            .map(|i| {
                let at = shoff.checked_add(i * 64).ok_or_else(|| truncated(shoff))?;
                let section = Section {
                    kind: u32_at(bytes, at + 4)?,
                    offset: u64_at(bytes, at + 24)?,
                    size: u64_at(bytes, at + 32)?,
                };
                let link = u32_at(bytes, at + 40)?;
                Ok((section, link))
            })
            .collect::<Result<Vec<(Section, u32)>, DecodeError>>()?;
        let mut symbols = Vec::new();
        for (table, link) in sections.iter().filter(|(s, _)| s.kind == SHT_SYMTAB) {
            let (strings, _) = sections
                .get(*link as usize)
                .ok_or_else(|| DecodeError::Invalid("a symbol table without names".into()))?;
            for i in 0..table.size / 24 {
                let at = table.offset.checked_add(i * 24).ok_or_else(|| truncated(table.offset))?;
                let name_at = u64::from(u32_at(bytes, at)?);
                let info = read::<1>(bytes, at + 4)?[0];
                let section = u16_at(bytes, at + 6)?;
                let name = c_string(bytes, strings, name_at)?;
                if name.is_empty() {
                    continue;
                }
                symbols.push(Symbol {
                    name,
                    function: info & 0xf == STT_FUNC,
                    defined: section != 0,
                    global: info >> 4 != 0,
                    section,
                    value: u64_at(bytes, at + 8)?,
                    size: u64_at(bytes, at + 16)?,
                });
            }
        }
        let sections = sections.into_iter().map(|(s, _)| s).collect();
        let relocatable = u16_at(bytes, 16)? == ET_REL;
        Ok(Cubin { arch, relocatable, symbols, sections, len: bytes.len() as u64 })
    }

    /// The names of the functions the object defines and others see (kernels, exported
    /// functions), of the functions it imports, and of the variables it defines and others
    /// see; `ptxas`'s own (`.text.k`, `__UDT`, …) left out.
    pub fn summary(&self) -> [Vec<&'a str>; 3] {
        let ours = |s: &&Symbol<'a>| !s.name.starts_with('.') && !s.name.starts_with("__U");
        let pick = |f: &dyn Fn(&Symbol<'a>) -> bool| {
            self.symbols.iter().filter(ours).filter(|s| f(s)).map(|s| s.name).collect()
        };
        [
            pick(&|s| s.function && s.defined && s.global),
            pick(&|s| s.function && !s.defined),
            pick(&|s| !s.function && s.defined && s.global),
        ]
    }

    /// The symbol called `name`.
    pub fn symbol(&self, name: &str) -> Option<&Symbol<'a>> {
        self.symbols.iter().find(|s| s.name == name)
    }

    /// Where in the object's bytes the initial value of variable `name` lies, if the object
    /// defines it with initialised bytes: always a range within the bytes, an empty one (a
    /// variable of size 0) included. `None` as well where the headers place the value outside
    /// its section, or the section outside the bytes (a malformed object).
    pub fn initializer(&self, name: &str) -> Option<std::ops::Range<usize>> {
        let symbol = self.symbol(name).filter(|s| s.defined && !s.function)?;
        let section = self.sections.get(usize::from(symbol.section))?;
        if section.kind == SHT_NOBITS {
            return None;
        }
        // The value within its section, and the section's data within the bytes; then
        // `section.offset + end <= self.len`, and neither sum below can overflow.
        let end = symbol.value.checked_add(symbol.size).filter(|&end| end <= section.size)?;
        section.offset.checked_add(section.size).filter(|&last| last <= self.len)?;
        let start = usize::try_from(section.offset + symbol.value).ok()?;
        Some(start..usize::try_from(section.offset + end).ok()?)
    }
}

fn c_string<'a>(bytes: &'a [u8], strings: &Section, at: u64) -> Result<&'a str, DecodeError> {
    let start = strings.offset.checked_add(at).filter(|_| at < strings.size);
    let start = start.and_then(|s| usize::try_from(s).ok()).ok_or_else(|| truncated(at))?;
    let rest = bytes.get(start..).ok_or_else(|| truncated(at))?;
    let end = rest.iter().position(|&b| b == 0).ok_or_else(|| truncated(at))?;
    std::str::from_utf8(&rest[..end])
        .map_err(|_| DecodeError::Invalid(format!("a symbol name at {at} is not UTF-8")))
}

/// `cubin` with variable `name`'s initial value replaced by `value`: how a specialization
/// constant's value reaches native code (the variable `sycl-ld` gives each constant, see
/// [`PTX_SPEC_CONSTANT_PREFIX`](crate::PTX_SPEC_CONSTANT_PREFIX), keeps its default in the
/// object's constant bank). `Ok(false)` when the object has no such variable (its code does
/// not read the constant); an error when its size is not `value`'s.
pub fn set_initializer(cubin: &mut [u8], name: &str, value: &[u8]) -> Result<bool, DecodeError> {
    let parsed = Cubin::parse(cubin)?;
    let Some(symbol) = parsed.symbol(name) else { return Ok(false) };
    if symbol.size != value.len() as u64 {
        return Err(DecodeError::Invalid(format!(
            "`{name}` holds {} byte(s), {} given",
            symbol.size,
            value.len()
        )));
    }
    let range = parsed.initializer(name).ok_or_else(|| {
        DecodeError::Invalid(format!("`{name}` has no initial value in the object to replace"))
    })?;
    cubin[range].copy_from_slice(value);
    Ok(true)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A minimal `ET_REL` object for `EM_CUDA` (sm_90): a string table, a symbol table, a
    /// constant bank holding `spec` (4 bytes = 2) and the undefined function `import`.
    fn object(abi: u8, flags: u32) -> Vec<u8> {
        let strings = b"\0spec\0kernel\0import\0";
        let bank = 2u32.to_le_bytes();
        let mut symbols = vec![0u8; 24];
        let mut symbol = |name: u32, info: u8, section: u16, value: u64, size: u64| {
            symbols.extend(name.to_le_bytes());
            symbols.extend([info, 0]);
            symbols.extend(section.to_le_bytes());
            symbols.extend(value.to_le_bytes());
            symbols.extend(size.to_le_bytes());
        };
        symbol(1, 0x21, 3, 0, 4); // spec: weak object in section 3
        symbol(6, 0x12, 4, 0, 16); // kernel: global function in section 4
        symbol(13, 0x12, 0, 0, 0); // import: undefined function
        let mut out = vec![0u8; 64];
        out[..6].copy_from_slice(b"\x7fELF\x02\x01");
        out[8] = abi;
        out[16..18].copy_from_slice(&ET_REL.to_le_bytes());
        out[18..20].copy_from_slice(&EM_CUDA.to_le_bytes());
        out[48..52].copy_from_slice(&flags.to_le_bytes());
        let mut sections = vec![(0u32, 0u64, 0u64, 0u32)];
        for (kind, data, link) in [
            (3, strings.to_vec(), 0),
            (SHT_SYMTAB, symbols, 1),
            (1, bank.to_vec(), 0),
            (1, vec![0; 16], 0),
        ] {
            sections.push((kind, out.len() as u64, data.len() as u64, link));
            out.extend(data);
        }
        let shoff = out.len() as u64;
        for (kind, offset, size, link) in sections {
            let mut header = [0u8; 64];
            header[4..8].copy_from_slice(&kind.to_le_bytes());
            header[24..32].copy_from_slice(&offset.to_le_bytes());
            header[32..40].copy_from_slice(&size.to_le_bytes());
            header[40..44].copy_from_slice(&link.to_le_bytes());
            out.extend(header);
        }
        out[40..48].copy_from_slice(&shoff.to_le_bytes());
        out[58..60].copy_from_slice(&64u16.to_le_bytes());
        out[60..62].copy_from_slice(&5u16.to_le_bytes());
        out
    }

    #[test]
    fn header_and_symbols_are_read() {
        let bytes = object(7, 0x46055a);
        let cubin = Cubin::parse(&bytes).unwrap();
        assert_eq!(cubin.arch, 90);
        assert!(cubin.relocatable);
        let names: Vec<(&str, bool, bool)> =
            cubin.symbols.iter().map(|s| (s.name, s.function, s.defined)).collect();
        assert_eq!(names, [("spec", false, true), ("kernel", true, true), ("import", true, false)]);
        assert_eq!(cubin.summary(), [vec!["kernel"], vec!["import"], vec!["spec"]]);
        assert_eq!(Cubin::parse(&object(8, 0x6007802)).unwrap().arch, 120);
        assert!(!is_whole_program(&bytes));
        let mut whole = bytes.clone();
        whole[16..18].copy_from_slice(&ET_EXEC.to_le_bytes());
        assert!(is_whole_program(&whole) && !Cubin::parse(&whole).unwrap().relocatable);
    }

    #[test]
    fn a_variable_gets_a_new_initial_value() {
        let mut bytes = object(7, 0x46055a);
        assert!(set_initializer(&mut bytes, "spec", &7u32.to_le_bytes()).unwrap());
        let range = Cubin::parse(&bytes).unwrap().initializer("spec").unwrap();
        assert_eq!(bytes[range], 7u32.to_le_bytes());
        assert!(!set_initializer(&mut bytes, "absent", &[1]).unwrap());
        assert!(set_initializer(&mut bytes, "spec", &[1, 2])
            .unwrap_err()
            .to_string()
            .contains("holds 4 byte(s), 2 given"));
        assert!(set_initializer(&mut bytes, "kernel", &[0; 16]).is_err());
    }

    /// `bytes` with section `index`'s offset and size, and symbol `spec`'s value and size, set
    /// to the given values (`None` keeps one).
    fn placed(
        bytes: &[u8],
        index: u64,
        section: [Option<u64>; 2],
        spec: [Option<u64>; 2],
    ) -> Vec<u8> {
        let mut out = bytes.to_vec();
        let mut set = |at: u64, value: Option<u64>| {
            if let Some(value) = value {
                let at = at as usize;
                out[at..at + 8].copy_from_slice(&value.to_le_bytes());
            }
        };
        let header = |i: u64| u64_at(bytes, 40).unwrap() + i * 64;
        set(header(index) + 24, section[0]);
        set(header(index) + 32, section[1]);
        // `spec` is the symbol table's (section 2's) second entry, after the null one.
        let spec_at = u64_at(bytes, header(2) + 24).unwrap() + 24;
        set(spec_at + 8, spec[0]);
        set(spec_at + 16, spec[1]);
        out
    }

    /// A variable's initial value is always a range within the bytes, an empty one included,
    /// whatever the headers say: the fuzzer's two findings (`tests/fuzz_regressions/cubin/`)
    /// were empty ranges far past the end, from a section whose data lay outside the object.
    #[test]
    fn an_initial_value_lies_within_the_bytes() {
        let bytes = object(7, 0x46055a);
        let len = bytes.len() as u64;
        let initializer = |b: &[u8]| Cubin::parse(b).unwrap().initializer("spec");
        let bank = Cubin::parse(&bytes).unwrap().sections[3];
        // A section ending exactly at the end of the bytes holds a value; one byte further
        // it does not, nor past the end, nor where its end overflows.
        let last = placed(&bytes, 3, [Some(len - 4), None], [None, None]);
        assert_eq!(initializer(&last), Some(len as usize - 4..len as usize));
        let mut written = last.clone();
        assert!(set_initializer(&mut written, "spec", &[9; 4]).unwrap());
        assert_eq!(written[..len as usize - 4], last[..len as usize - 4]);
        assert_eq!(written[len as usize - 4..], [9; 4]);
        for offset in [len - 3, len, len + 1, 0x6969_6969_6969_6969, u64::MAX - 3, u64::MAX] {
            for size in [0, 4] {
                let broken = placed(&bytes, 3, [Some(offset), None], [None, Some(size)]);
                assert_eq!(initializer(&broken), None, "section at {offset}, size {size}");
                let error = set_initializer(&mut broken.clone(), "spec", &vec![1; size as usize]);
                assert!(error.unwrap_err().to_string().contains("no initial value"));
            }
        }
        let too_big = placed(&bytes, 3, [None, Some(len)], [None, None]);
        assert_eq!(initializer(&too_big), None);
        // A variable of size 0 in a section within the bytes: an empty range there, at the
        // section's end included; one past the section's end, or whose end overflows, none.
        let at = bank.offset as usize;
        let empty = |value| initializer(&placed(&bytes, 3, [None, None], [Some(value), Some(0)]));
        assert_eq!(empty(0), Some(at..at));
        assert_eq!(empty(4), Some(at + 4..at + 4));
        assert_eq!(empty(5), None);
        assert_eq!(initializer(&placed(&bytes, 3, [None, None], [Some(2), Some(u64::MAX)])), None);
    }

    #[test]
    fn malformed_objects_are_errors_not_panics() {
        let bytes = object(7, 0x46055a);
        for len in 0..bytes.len() {
            let _ = Cubin::parse(&bytes[..len]);
        }
        for i in 0..bytes.len() {
            let mut broken = bytes.clone();
            broken[i] ^= 0xff;
            let _ = Cubin::parse(&broken).map(|c| c.initializer("spec"));
        }
        let mut host = bytes.clone();
        host[18] = 62; // EM_X86_64
        assert!(Cubin::parse(&host).unwrap_err().to_string().contains("not NVIDIA CUDA"));
    }
}
