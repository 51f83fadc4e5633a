//! The loaded objects of this process, from the dynamic loader's own list (`dl_iterate_phdr`),
//! in its order: the executable, then the shared libraries as they were loaded. Our image
//! notes are read from the mapped `PT_NOTE` segments in memory; no file is opened.
//!
//! Its `unsafe` blocks read what the loader hands out; see `docs/ARCHITECTURE.md` for the modules that have any.

use std::collections::HashMap;
use std::ffi::CStr;
use std::sync::Arc;

use crate::registry::Payload;
use sycl_format::{
    find_notes, payload_hash, DecodeError, NOTE_TYPE_IMAGES, NOTE_TYPE_PAYLOAD_HASH,
};

/// One loaded object, as the loader lists it now.
pub(crate) struct LoadedObject {
    /// The loader's name for it (`dlpi_name`): empty for the executable.
    pub name: String,
    /// Load address: with the name, tells two loads of one file apart.
    pub base: usize,
    /// The hash of each image-set payload ([`payload_hash`]): with the name and the address,
    /// the object's identity; and the name of its scope marker symbol.
    pub payload_hashes: Vec<u64>,
    /// What else was read of it: `None` for an object the caller already knew.
    pub contents: Option<Contents>,
}

/// What is read of an object the first time it is seen.
pub(crate) struct Contents {
    /// The payloads: a shared library's copied out of the mapping (so they stay valid
    /// whatever happens to it later), the executable's where they are mapped; or why the
    /// notes could not be read.
    pub payloads: Result<Vec<Payload>, DecodeError>,
    /// Address ranges of its loaded segments.
    pub ranges: Vec<(usize, usize)>,
}

/// The global scope's symbols, looked up through the main program's handle, whose search list
/// is the global scope. (`dlsym(RTLD_DEFAULT)` would search the same list but also record a
/// dependency of the caller on the library, which then never unloads on `dlclose`.)
pub(crate) struct GlobalScope(*mut libc::c_void);

impl GlobalScope {
    pub(crate) fn open() -> Option<GlobalScope> {
        // SAFETY: dlopen(NULL) returns the main program's handle and loads nothing.
        let main = unsafe { libc::dlopen(std::ptr::null(), libc::RTLD_LAZY) };
        (!main.is_null()).then_some(GlobalScope(main))
    }

    /// Whether `symbol`, looked up in the global scope, lies in `ranges` (an object's loaded
    /// segments): false for a library opened `RTLD_LOCAL`, whose symbols only it and the
    /// libraries it loaded see.
    pub(crate) fn defines(&self, ranges: &[(usize, usize)], symbol: &str) -> bool {
        let Ok(name) = std::ffi::CString::new(symbol) else { return false };
        // SAFETY: dlsym on a live handle with a NUL-terminated name only looks the name up.
        let address = unsafe { libc::dlsym(self.0, name.as_ptr()) } as usize;
        address != 0 && ranges.iter().any(|&(start, end)| (start..end).contains(&address))
    }
}

impl Drop for GlobalScope {
    fn drop(&mut self) {
        // SAFETY: the handle came from dlopen and is closed once.
        unsafe {
            libc::dlclose(self.0);
        }
    }
}

/// The loader's counts of objects ever loaded and unloaded (`dlpi_adds`, `dlpi_subs`): when
/// they change, a library was opened or closed since the last look.
pub(crate) fn loader_counters() -> (u64, u64) {
    let mut counters = (0u64, 0u64);
    // SAFETY: the callback reads the counters from the first object's info, which the loader
    // provides for the duration of the call (`size` says the fields are there), and stops.
    unsafe {
        libc::dl_iterate_phdr(Some(counters_callback), (&mut counters as *mut (u64, u64)).cast());
    }
    counters
}

unsafe extern "C" fn counters_callback(
    info: *mut libc::dl_phdr_info,
    size: libc::size_t,
    data: *mut libc::c_void,
) -> libc::c_int {
    // SAFETY: `data` is the `&mut (u64, u64)` of `loader_counters`; `info` is valid for the
    // call, and `size` covers `dlpi_subs` before it is read.
    unsafe {
        let end = std::mem::offset_of!(libc::dl_phdr_info, dlpi_subs) + std::mem::size_of::<u64>();
        if size >= end {
            *data.cast::<(u64, u64)>() = ((*info).dlpi_adds, (*info).dlpi_subs);
        }
    }
    1 // stop after the first object
}

/// Every loaded object, in the loader's order. `known(name, base, payload_hashes)` says which
/// ones the caller has already read: of those only the identity is read again (the recorded
/// payload hashes, a few note headers), so a rediscovery reads in full only what appeared.
pub(crate) fn loaded_objects(
    known: &mut dyn FnMut(&str, usize, &[u64]) -> bool,
) -> Vec<LoadedObject> {
    let mut walk = Walk { known, out: Vec::new() };
    // SAFETY: the callback only reads what the loader hands it for the duration of the call,
    // and `data` is `walk` above, alive and exclusively borrowed for the whole iteration.
    unsafe {
        libc::dl_iterate_phdr(Some(callback), (&mut walk as *mut Walk<'_>).cast());
    }
    walk.out
}

struct Walk<'k> {
    known: &'k mut dyn FnMut(&str, usize, &[u64]) -> bool,
    out: Vec<LoadedObject>,
}

unsafe extern "C" fn callback(
    info: *mut libc::dl_phdr_info,
    _size: libc::size_t,
    data: *mut libc::c_void,
) -> libc::c_int {
    // SAFETY: `data` is the `&mut Walk` passed by `loaded_objects`; `info` is valid during the
    // call, as the loader guarantees.
    let (walk, info) = unsafe { (&mut *data.cast::<Walk<'_>>(), &*info) };
    // SAFETY: `info` is what the loader handed the callback, valid during the call.
    let (name, phdrs) = unsafe { name_and_headers(info) };
    let base = info.dlpi_addr as usize;
    // The image-set payloads of every PT_NOTE segment, read in place, and their hashes.
    let mut payloads: Vec<&[u8]> = Vec::new();
    let mut payload_hashes = Vec::new();
    let mut error = None;
    for ph in phdrs.iter().filter(|ph| ph.p_type == libc::PT_NOTE) {
        let start = info.dlpi_addr.wrapping_add(ph.p_vaddr) as *const u8;
        // SAFETY: a PT_NOTE segment lies inside a loaded PT_LOAD segment of this object (the
        // static linker places allocated note sections there), so `p_memsz` bytes from its
        // run-time address are mapped and readable while the object stays loaded, which it
        // does for the whole callback (the loader holds its lock meanwhile).
        let segment: &[u8] = unsafe { std::slice::from_raw_parts(start, ph.p_memsz as usize) };
        match find_notes(segment, NOTE_TYPE_IMAGES, ph.p_align) {
            Ok(found) if found.is_empty() => {}
            Ok(found) => {
                // Each payload's hash as sycl-ld recorded it, when every payload has one.
                let recorded: Vec<u64> = find_notes(segment, NOTE_TYPE_PAYLOAD_HASH, ph.p_align)
                    .unwrap_or_default()
                    .into_iter()
                    .filter_map(|d| Some(u64::from_le_bytes(d.try_into().ok()?)))
                    .collect();
                if recorded.len() == found.len() {
                    payload_hashes.extend(recorded);
                } else {
                    payload_hashes.extend(found.iter().map(|p| payload_hash(p)));
                }
                payloads.extend(found);
            }
            Err(e) => {
                error.get_or_insert(e);
            }
        }
    }
    if (walk.known)(&name, base, &payload_hashes) {
        walk.out.push(LoadedObject { name, base, payload_hashes, contents: None });
        return 0;
    }
    let ranges = phdrs
        .iter()
        .filter(|ph| ph.p_type == libc::PT_LOAD)
        .map(|ph| {
            let start = info.dlpi_addr.wrapping_add(ph.p_vaddr) as usize;
            (start, start + ph.p_memsz as usize)
        })
        .collect();
    let payloads = match error {
        Some(e) => Err(e),
        // The executable: the loader's first object, without a name.
        None if name.is_empty() && walk.out.is_empty() => Ok(payloads
            .into_iter()
            // SAFETY: the executable is never unmapped: its segments, and so the payloads in
            // them, stay for the life of the process.
            .map(|p| Payload::Mapped(unsafe { &*(p as *const [u8]) }))
            .collect()),
        None => Ok(payloads.into_iter().map(|p| Payload::Copied(Arc::from(p))).collect()),
    };
    walk.out.push(LoadedObject {
        name,
        base,
        payload_hashes,
        contents: Some(Contents { payloads, ranges }),
    });
    0
}

/// Each loaded object's `DT_NEEDED` entries (the libraries it depends on, each followed by a
/// NUL, which no name contains), by load address and name. Read only when some library was
/// opened `RTLD_LOCAL`, whose group they give: reading them touches every object's dynamic
/// section, a cost worth sparing the first launch of a process that has none.
pub(crate) fn needed_by_object() -> HashMap<(usize, String), String> {
    let mut out = HashMap::new();
    // SAFETY: the callback only reads what the loader hands it for the duration of the call,
    // and `data` is `out` above, alive and exclusively borrowed for the whole iteration.
    unsafe {
        libc::dl_iterate_phdr(Some(needed_callback), (&mut out as *mut NeededByObject).cast());
    }
    out
}

type NeededByObject = HashMap<(usize, String), String>;

unsafe extern "C" fn needed_callback(
    info: *mut libc::dl_phdr_info,
    _size: libc::size_t,
    data: *mut libc::c_void,
) -> libc::c_int {
    // SAFETY: `data` is the map `needed_by_object` passed; `info` is valid during the call.
    let (out, info) = unsafe { (&mut *data.cast::<NeededByObject>(), &*info) };
    // SAFETY: `info` is what the loader handed the callback, valid during the call.
    let (name, phdrs) = unsafe { name_and_headers(info) };
    let base = info.dlpi_addr as usize;
    let needed = phdrs
        .iter()
        .find(|ph| ph.p_type == libc::PT_DYNAMIC)
        .map(|ph| {
            let start = info.dlpi_addr.wrapping_add(ph.p_vaddr) as usize;
            // SAFETY: PT_DYNAMIC is mapped at its run-time address while the object is
            // loaded, which it stays for the callback (the loader holds its lock).
            unsafe { needed_libraries(start, ph.p_memsz as usize, base) }
        })
        .unwrap_or_default();
    out.insert((base, name), needed);
    0
}

/// A loaded object's name (empty for the executable) and program headers.
///
/// # Safety
/// `info` is what the loader handed a `dl_iterate_phdr` callback, used during the call.
unsafe fn name_and_headers(info: &libc::dl_phdr_info) -> (String, &[libc::Elf64_Phdr]) {
    let name = if info.dlpi_name.is_null() {
        String::new()
    } else {
        // SAFETY: a non-null `dlpi_name` is a NUL-terminated string owned by the loader.
        unsafe { CStr::from_ptr(info.dlpi_name) }.to_string_lossy().into_owned()
    };
    let phdrs: &[libc::Elf64_Phdr] = if info.dlpi_phdr.is_null() {
        &[]
    } else {
        // SAFETY: the loader gives `dlpi_phnum` program headers at `dlpi_phdr`.
        unsafe { std::slice::from_raw_parts(info.dlpi_phdr, usize::from(info.dlpi_phnum)) }
    };
    (name, phdrs)
}

/// The `DT_NEEDED` names of a loaded object's dynamic section, each followed by a NUL.
///
/// # Safety
/// `start..start + len` must be the object's mapped `PT_DYNAMIC` segment.
unsafe fn needed_libraries(start: usize, len: usize, base: usize) -> String {
    const DT_NULL: i64 = 0;
    const DT_NEEDED: i64 = 1;
    const DT_STRTAB: i64 = 5;
    /// `Elf64_Dyn`: a tag and a value or address.
    #[repr(C)]
    struct Dyn {
        tag: i64,
        value: u64,
    }
    let count = len / std::mem::size_of::<Dyn>();
    // SAFETY: the caller guarantees the segment is mapped; Elf64_Dyn entries are its content.
    let entries = unsafe { std::slice::from_raw_parts(start as *const Dyn, count) };
    let entries = entries.iter().take_while(|d| d.tag != DT_NULL);
    let mut names = String::new();
    let Some(strtab) = entries.clone().find(|d| d.tag == DT_STRTAB).map(|d| d.value as usize)
    else {
        return names;
    };
    // glibc relocates these addresses in place on x86-64; a small value is still an offset.
    let strtab = if strtab < base { base + strtab } else { strtab };
    for entry in entries.filter(|d| d.tag == DT_NEEDED) {
        // SAFETY: DT_NEEDED values are offsets of NUL-terminated names in the mapped string
        // table.
        let name =
            unsafe { CStr::from_ptr((strtab + entry.value as usize) as *const libc::c_char) };
        names.push_str(&name.to_string_lossy());
        names.push('\0');
    }
    names
}

/// Opens a library for good, for tests of what discovery makes of it.
#[cfg(test)]
pub(crate) fn open_for_test(name: &str) {
    let name = std::ffi::CString::new(name).unwrap();
    // SAFETY: a NUL-terminated name; the handle is never closed, so nothing dangles.
    let handle = unsafe { libc::dlopen(name.as_ptr(), libc::RTLD_NOW | libc::RTLD_LOCAL) };
    assert!(!handle.is_null(), "dlopen {name:?} failed");
}
