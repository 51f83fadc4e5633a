//! The loaded objects of this process, from the dynamic loader's own list (`dl_iterate_phdr`),
//! in its order: the executable, then the shared libraries as they were loaded. Our image
//! notes are read from the mapped `PT_NOTE` segments in memory; no file is opened.
//!
//! This is one of the two modules with `unsafe` code (the other is `cl`).

use std::ffi::CStr;

use sycl_format::{find_notes, DecodeError, NOTE_TYPE_IMAGES};

/// One loaded object and the image-set payloads found in its note segments (copied out, so
/// they stay valid whatever happens to the mapping later).
pub(crate) struct LoadedObject {
    pub name: String,
    /// Load address: with the name, tells two loads of one file apart.
    pub base: usize,
    pub payloads: Result<Vec<Vec<u8>>, DecodeError>,
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

unsafe extern "C" fn counters_callback(info: *mut libc::dl_phdr_info, size: libc::size_t, data: *mut libc::c_void) -> libc::c_int {
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

pub(crate) fn loaded_objects() -> Vec<LoadedObject> {
    let mut out: Vec<LoadedObject> = Vec::new();
    // SAFETY: the callback only reads what the loader hands it for the duration of the call,
    // and `data` is the `Vec` above, alive and exclusively borrowed for the whole iteration.
    unsafe {
        libc::dl_iterate_phdr(Some(callback), (&mut out as *mut Vec<LoadedObject>).cast());
    }
    out
}

unsafe extern "C" fn callback(info: *mut libc::dl_phdr_info, _size: libc::size_t, data: *mut libc::c_void) -> libc::c_int {
    // SAFETY: `data` is the `&mut Vec` passed by `loaded_objects`; `info` is valid during the
    // call, as the loader guarantees.
    let (out, info) = unsafe { (&mut *data.cast::<Vec<LoadedObject>>(), &*info) };
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
    let mut payloads = Ok(Vec::new());
    for ph in phdrs.iter().filter(|ph| ph.p_type == libc::PT_NOTE) {
        let start = info.dlpi_addr.wrapping_add(ph.p_vaddr) as *const u8;
        // SAFETY: a PT_NOTE segment lies inside a loaded PT_LOAD segment of this object (the
        // static linker places allocated note sections there), so `p_memsz` bytes from its
        // run-time address are mapped and readable while the object stays loaded.
        let segment = unsafe { std::slice::from_raw_parts(start, ph.p_memsz as usize) };
        match find_notes(segment, NOTE_TYPE_IMAGES, ph.p_align) {
            Ok(descs) => {
                if let Ok(list) = &mut payloads {
                    list.extend(descs.into_iter().map(<[u8]>::to_vec));
                }
            }
            Err(e) => payloads = Err(e),
        }
    }
    let name = if name.is_empty() && out.is_empty() {
        std::env::current_exe().map(|p| p.display().to_string()).unwrap_or_else(|_| "<executable>".into())
    } else {
        name
    };
    out.push(LoadedObject { name, base: info.dlpi_addr as usize, payloads });
    0
}
