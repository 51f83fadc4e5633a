//! Device library files loaded at run time (the `device_dlopen` of DPC++'s dynamic-linking design):
//! an image set in the same encoding as embedded images (as `sycl-ld device-lib` writes it), read
//! from disk and placed in resolution order after everything already loaded. A library in a scope
//! of its own resolves its imports against everything, and serves only itself.

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use sycl_format::{Image, ImageSet};

use crate::trace::trace;
use crate::Error;

/// Where a loaded device library's exports may be used.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LibraryScope {
    /// By every binary, after everything loaded before it.
    Global,
    /// By its own images only.
    Own,
}

pub(crate) struct FileLibrary {
    pub id: u64,
    pub path: PathBuf,
    pub images: Arc<[Image]>,
    pub scope: LibraryScope,
}

#[derive(Default)]
pub(crate) struct Files {
    pub list: Vec<FileLibrary>,
    next_id: u64,
}

pub(crate) static FILES: Mutex<Files> = Mutex::new(Files { list: Vec::new(), next_id: 0 });

/// Changes whenever a library is loaded or unloaded (under the `FILES` lock); read without
/// it on every launch.
static GENERATION: AtomicU64 = AtomicU64::new(0);

pub(crate) fn files() -> std::sync::MutexGuard<'static, Files> {
    FILES.lock().unwrap_or_else(|e| e.into_inner())
}

pub(crate) fn generation() -> u64 {
    GENERATION.load(Ordering::Acquire)
}

/// A device library file loaded into the process; dropping it (or [`DeviceLibrary::unload`])
/// unloads it, and every program built from it is dropped at the next launch.
#[derive(Debug)]
pub struct DeviceLibrary {
    pub(crate) id: u64,
    path: PathBuf,
}

/// Loads a device library file, its exports serving every binary ([`LibraryScope::Global`]).
pub fn load_device_library(path: impl AsRef<Path>) -> Result<DeviceLibrary, Error> {
    load_device_library_with(path, LibraryScope::Global)
}

/// Loads a device library file with the given scope. A missing, unreadable or malformed file
/// is an error naming it.
pub fn load_device_library_with(
    path: impl AsRef<Path>,
    scope: LibraryScope,
) -> Result<DeviceLibrary, Error> {
    let path = path.as_ref().to_path_buf();
    let error = |reason: String, source| Error::DeviceLibrary {
        path: path.display().to_string(),
        reason,
        source,
    };
    let fail = |reason| error(reason, None);
    let bytes = std::fs::read(&path).map_err(|e| error(e.to_string(), Some(e)))?;
    let set =
        ImageSet::decode(&bytes).map_err(|e| fail(format!("malformed device library: {e}")))?;
    if set.images.is_empty() {
        return Err(fail("no device images".into()));
    }
    let mut files = files();
    let id = files.next_id;
    files.next_id += 1;
    GENERATION.fetch_add(1, Ordering::Release);
    trace!(
        "load",
        "{}: {} image(s){}",
        path.display(),
        set.images.len(),
        if scope == LibraryScope::Own { " (own scope)" } else { "" }
    );
    files.list.push(FileLibrary { id, path: path.clone(), images: set.images.into(), scope });
    Ok(DeviceLibrary { id, path })
}

impl DeviceLibrary {
    /// The file the library was loaded from.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Unloads the library (as dropping it does).
    pub fn unload(self) {}
}

impl Drop for DeviceLibrary {
    fn drop(&mut self) {
        let mut files = files();
        files.list.retain(|f| f.id != self.id);
        GENERATION.fetch_add(1, Ordering::Release);
        trace!("unload", "{}", self.path.display());
    }
}
