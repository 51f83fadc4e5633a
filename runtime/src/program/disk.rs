//! The persistent program cache: built programs on disk, keyed by SHA-256 over everything
//! that determines them (the bytes of every image in the program, sorted; the device and its
//! driver; options; specialization constants; this runtime's version and the digest of the
//! sources that shape a program, `CODE_IDENTITY`).
//!
//! A cache failure never fails a launch: every error here is logged and counts as a miss.
//! Entries are written to a temporary file and renamed (not synced: the disk's pace is not
//! the launch's), carry their key and a checksum of their content, and are never opened
//! through a symlink; a corrupt, truncated or foreign entry is removed and rebuilt. The
//! directory must be private (created 0700); one owned by another user or writable by others
//! is refused with a warning, and the cache is off.
//! Least-recently-used entries (by modification time, refreshed on every hit) are evicted
//! past the size cap, which each process checks against its own running count (a look at the
//! directory at its first store and whenever the count passes the cap, not at every store).
//!
//! Environment: `SYCL_CACHE_DISABLE=1`, `SYCL_CACHE_DIR=path` (default
//! `$XDG_CACHE_HOME/sycl-rs` or `~/.cache/sycl-rs`), `SYCL_CACHE_MAX_BYTES=n` (default 1 GiB).

use std::fs::{self, OpenOptions};
use std::io::{Read, Write};
use std::os::unix::fs::{MetadataExt, OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::sync::{Condvar, Mutex};
use std::time::SystemTime;

use sha2::{Digest, Sha256};

use super::CODE_IDENTITY;
use crate::trace::trace;

/// Environment variable that turns the persistent cache off (`1`).
pub const DISABLE_ENV: &str = "SYCL_CACHE_DISABLE";
/// Environment variable that names the persistent cache's directory.
pub const DIR_ENV: &str = "SYCL_CACHE_DIR";
/// Environment variable that caps the persistent cache's size in bytes.
pub const MAX_BYTES_ENV: &str = "SYCL_CACHE_MAX_BYTES";

const MAGIC: &[u8; 8] = b"SYCLCACH";
const VERSION: u32 = 1;
const HEADER_LEN: usize = 8 + 4 + 64 + 8 + 32;
const DEFAULT_MAX_BYTES: u64 = 1 << 30;

/// The keys of the programs being built in the process, and a signal when one is done.
struct Builds {
    keys: Mutex<Vec<String>>,
    done: Condvar,
}

static BUILDING: Builds = Builds { keys: Mutex::new(Vec::new()), done: Condvar::new() };

/// A program being built ([`DiskCache::building`]): other threads wait for its key until it
/// goes.
pub(crate) struct Building(String);

impl Drop for Building {
    fn drop(&mut self) {
        BUILDING.keys.lock().unwrap_or_else(|e| e.into_inner()).retain(|k| *k != self.0);
        BUILDING.done.notify_all();
    }
}

pub(crate) struct DiskCache {
    dir: PathBuf,
    max_bytes: u64,
    /// What this process takes the entries to total: counted by its first store's look at the
    /// directory, then grown by each store; past the cap, a look evicts and counts again. A
    /// store no longer stats every entry, and what other processes store shows at this one's
    /// next look, so the cap is exceeded by at most what they store meanwhile.
    stored: std::sync::Mutex<Option<u64>>,
}

/// Builds a key from length-prefixed parts, starting with what every entry's key holds: this
/// runtime's version and [`CODE_IDENTITY`], the digest of the sources that shape a program, so
/// that no entry made by other code is ever read.
pub(crate) struct KeyBuilder(Sha256);

impl KeyBuilder {
    pub(crate) fn new() -> Self {
        let mut key = KeyBuilder(Sha256::new());
        key.part(env!("CARGO_PKG_VERSION").as_bytes()).part(CODE_IDENTITY.as_bytes());
        key
    }

    pub(crate) fn part(&mut self, bytes: &[u8]) -> &mut Self {
        self.0.update((bytes.len() as u64).to_le_bytes());
        self.0.update(bytes);
        self
    }

    pub(crate) fn finish(self) -> String {
        hex(&self.0.finalize())
    }
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

impl DiskCache {
    /// The cache the environment asks for, or `None` when it is off or unusable.
    pub(crate) fn open() -> Option<DiskCache> {
        if std::env::var(DISABLE_ENV).is_ok_and(|v| !v.is_empty() && v != "0") {
            return None;
        }
        let dir = match std::env::var_os(DIR_ENV).filter(|v| !v.is_empty()) {
            Some(d) => PathBuf::from(d),
            None => match std::env::var_os("XDG_CACHE_HOME").filter(|v| !v.is_empty()) {
                Some(x) => PathBuf::from(x).join("sycl-rs"),
                None => PathBuf::from(std::env::var_os("HOME")?).join(".cache").join("sycl-rs"),
            },
        };
        let max_bytes = match std::env::var(MAX_BYTES_ENV) {
            Ok(v) if !v.trim().is_empty() => v.trim().parse().unwrap_or_else(|_| {
                eprintln!(
                    "sycl: warning: {MAX_BYTES_ENV}={v:?} is not a number of bytes (such as \
                     2147483648); the persistent cache keeps its default, {DEFAULT_MAX_BYTES} bytes"
                );
                DEFAULT_MAX_BYTES
            }),
            _ => DEFAULT_MAX_BYTES,
        };
        match prepare_dir(&dir) {
            Ok(()) => Some(DiskCache { dir, max_bytes, stored: Default::default() }),
            Err(reason) => {
                eprintln!("sycl: warning: persistent cache off: {}: {reason}", dir.display());
                None
            }
        }
    }

    fn entry_path(&self, key: &str) -> PathBuf {
        self.dir.join(format!("{key}.bin"))
    }

    /// Keeps other threads of the process from building the program of `key` until the
    /// guard goes: two devices of one kind (two GPUs of one model) that ask for the same
    /// program at once build it once, the second waiting for the first and then loading what
    /// it stored. Programs of other keys build meanwhile.
    pub(crate) fn building(&self, key: &str) -> Building {
        let mut keys = BUILDING.keys.lock().unwrap_or_else(|e| e.into_inner());
        while keys.iter().any(|k| k == key) {
            keys = BUILDING.done.wait(keys).unwrap_or_else(|e| e.into_inner());
        }
        keys.push(key.to_string());
        Building(key.to_string())
    }

    /// The entry for `key`, if one is there and intact; anything else is removed.
    pub(crate) fn get(&self, key: &str) -> Option<Vec<u8>> {
        let path = self.entry_path(key);
        let mut file =
            match OpenOptions::new().read(true).custom_flags(libc::O_NOFOLLOW).open(&path) {
                Ok(f) => f,
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => return None,
                Err(e) => {
                    log::warn!("{}: {e}", path.display());
                    return None;
                }
            };
        let mut bytes = Vec::new();
        if let Err(e) = file.read_to_end(&mut bytes) {
            log::warn!("{}: {e}", path.display());
            return None;
        }
        match decode_entry(&bytes, key) {
            Ok(payload) => {
                // Refresh the modification time: the eviction order is least recently used.
                let _ = file.set_modified(SystemTime::now());
                Some(payload.to_vec())
            }
            Err(reason) => {
                trace!("cache-corrupt", "{}: {reason}; rebuilding", path.display());
                let _ = fs::remove_file(&path);
                None
            }
        }
    }

    /// Stores `payload` under `key`: written in full to a temporary file, then renamed.
    pub(crate) fn put(&self, key: &str, payload: &[u8]) {
        if let Err(e) = self.try_put(key, payload) {
            log::warn!("persistent cache: storing {key}: {e}");
            trace!("cache-error", "storing {key}: {e}");
            return;
        }
        trace!("persist-store", "{key} ({} bytes)", payload.len());
        let mut stored = self.stored.lock().unwrap_or_else(|e| e.into_inner());
        let size = (HEADER_LEN + payload.len()) as u64;
        *stored = Some(match *stored {
            Some(total) if total + size <= self.max_bytes => total + size,
            _ => self.evict(),
        });
    }

    fn try_put(&self, key: &str, payload: &[u8]) -> std::io::Result<()> {
        let tmp = self.dir.join(format!(".{key}.{}.{}.tmp", std::process::id(), unique()));
        let mut file = OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(0o600)
            .custom_flags(libc::O_NOFOLLOW)
            .open(&tmp)?;
        // Not synced to the disk: a first launch would wait milliseconds for it, and an entry
        // that a crash leaves damaged fails its checksum when read, and is rebuilt.
        let result = file.write_all(&encode_entry(key, payload));
        drop(file);
        match result.and_then(|_| fs::rename(&tmp, self.entry_path(key))) {
            Ok(()) => Ok(()),
            Err(e) => {
                let _ = fs::remove_file(&tmp);
                Err(e)
            }
        }
    }

    /// Removes the temporary files of writers that died before renaming them (killed, or
    /// crashed), then least-recently-used entries until the total is under the cap; returns
    /// the total.
    fn evict(&self) -> u64 {
        let Ok(dir) = fs::read_dir(&self.dir) else { return 0 };
        let files: Vec<fs::DirEntry> = dir.filter_map(Result::ok).collect();
        for file in &files {
            let name = file.file_name();
            if orphan_of_dead_writer(&name.to_string_lossy()) {
                let _ = fs::remove_file(file.path());
            }
        }
        let mut entries: Vec<(SystemTime, u64, PathBuf)> = files
            .into_iter()
            .filter(|e| e.file_name().to_string_lossy().ends_with(".bin"))
            .filter_map(|e| {
                let meta = e.metadata().ok()?;
                Some((meta.modified().ok()?, meta.len(), e.path()))
            })
            .collect();
        let mut total: u64 = entries.iter().map(|e| e.1).sum();
        if total <= self.max_bytes {
            return total;
        }
        entries.sort();
        for (_, len, path) in entries {
            if total <= self.max_bytes {
                break;
            }
            if fs::remove_file(&path).is_ok() {
                trace!("evict", "{} ({len} bytes)", path.display());
                total -= len;
            }
        }
        total
    }
}

/// Whether `name` is a temporary file (`.KEY.PID.N.tmp`, see `try_put`) whose writer, another
/// process, no longer runs: it would never be renamed nor removed. A reused process id only
/// keeps such a file longer.
fn orphan_of_dead_writer(name: &str) -> bool {
    let Some(rest) = name.strip_prefix('.').and_then(|n| n.strip_suffix(".tmp")) else {
        return false;
    };
    let mut parts = rest.rsplitn(3, '.');
    let (_n, pid) = (parts.next(), parts.next().and_then(|p| p.parse::<libc::pid_t>().ok()));
    match pid {
        Some(pid) if pid > 0 && pid as u32 != std::process::id() => {
            // SAFETY: `kill` with signal 0 sends nothing and takes no pointers: it asks whether
            // the process exists.
            let alive = unsafe { libc::kill(pid, 0) } == 0
                || std::io::Error::last_os_error().raw_os_error() != Some(libc::ESRCH);
            !alive
        }
        _ => false,
    }
}

fn unique() -> u64 {
    use std::sync::atomic::{AtomicU64, Ordering};
    static N: AtomicU64 = AtomicU64::new(0);
    N.fetch_add(1, Ordering::Relaxed)
}

/// Creates the directory private, or checks that an existing one is: a directory (not a
/// symlink), owned by this user, not writable by group or others.
fn prepare_dir(dir: &Path) -> Result<(), String> {
    if !dir.exists() {
        fs::create_dir_all(dir).map_err(|e| e.to_string())?;
        fs::set_permissions(dir, fs::Permissions::from_mode(0o700)).map_err(|e| e.to_string())?;
    }
    let meta = fs::symlink_metadata(dir).map_err(|e| e.to_string())?;
    if !meta.is_dir() {
        return Err("not a directory".into());
    }
    // SAFETY: getuid has no preconditions and cannot fail.
    let uid = unsafe { libc::getuid() };
    if meta.uid() != uid {
        return Err(format!("owned by uid {}, not by this user (uid {uid})", meta.uid()));
    }
    if meta.mode() & 0o022 != 0 {
        return Err(format!("writable by others (mode {:o})", meta.mode() & 0o777));
    }
    Ok(())
}

pub(crate) fn encode_entry(key: &str, payload: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(HEADER_LEN + payload.len());
    out.extend_from_slice(MAGIC);
    out.extend_from_slice(&VERSION.to_le_bytes());
    out.extend_from_slice(key.as_bytes());
    out.extend_from_slice(&(payload.len() as u64).to_le_bytes());
    out.extend_from_slice(&Sha256::digest(payload));
    out.extend_from_slice(payload);
    out
}

/// The payload of an entry, checked: magic, version, that it is the entry of `key`, length
/// and checksum.
pub(crate) fn decode_entry<'a>(bytes: &'a [u8], key: &str) -> Result<&'a [u8], String> {
    if bytes.len() < HEADER_LEN || &bytes[..8] != MAGIC {
        return Err("not a cache entry".into());
    }
    let version = u32::from_le_bytes(bytes[8..12].try_into().unwrap());
    if version != VERSION {
        return Err(format!("entry version {version}"));
    }
    if &bytes[12..76] != key.as_bytes() {
        return Err("entry of another key".into());
    }
    let len = u64::from_le_bytes(bytes[76..84].try_into().unwrap());
    let payload = &bytes[HEADER_LEN..];
    if payload.len() as u64 != len {
        return Err(format!("truncated: {} of {len} bytes", payload.len()));
    }
    if Sha256::digest(payload).as_slice() != &bytes[84..116] {
        return Err("checksum mismatch".into());
    }
    Ok(payload)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::fs::File;

    fn cache(dir: &Path, max_bytes: u64) -> DiskCache {
        prepare_dir(dir).unwrap();
        DiskCache { dir: dir.to_path_buf(), max_bytes, stored: Default::default() }
    }

    fn key(n: u8) -> String {
        let mut k = KeyBuilder::new();
        k.part(&[n]);
        k.finish()
    }

    /// A second build of one key waits for the first; a build of another key does not.
    #[test]
    fn one_program_is_built_once_at_a_time_in_the_process() {
        use std::sync::atomic::{AtomicBool, Ordering};
        use std::sync::Arc;
        let dir = tempfile::tempdir().unwrap();
        let c = Arc::new(cache(dir.path(), 1 << 20));
        let first = c.building(&key(1));
        let done = Arc::new(AtomicBool::new(false));
        let waiter = {
            let (c, done) = (c.clone(), done.clone());
            std::thread::spawn(move || {
                let _second = c.building(&key(1));
                done.load(Ordering::SeqCst)
            })
        };
        drop(c.building(&key(2))); // another program: not held up
        std::thread::sleep(std::time::Duration::from_millis(50));
        done.store(true, Ordering::SeqCst);
        drop(first);
        assert!(waiter.join().unwrap(), "the second build of one key began before the first ended");
    }

    #[test]
    fn every_key_starts_with_the_runtimes_version_and_code_identity() {
        let mut expected = Sha256::new();
        for part in [env!("CARGO_PKG_VERSION"), CODE_IDENTITY] {
            expected.update((part.len() as u64).to_le_bytes());
            expected.update(part);
        }
        assert_eq!(KeyBuilder::new().finish(), hex(&expected.finalize()));
    }

    #[test]
    fn a_dead_writers_temporary_file_is_removed_at_the_next_look_and_a_live_ones_kept() {
        let dir = tempfile::tempdir().unwrap();
        let c = cache(dir.path(), 1 << 20);
        // A process that has exited: its id is free until reused, which the test cannot see.
        let mut child = std::process::Command::new("true").spawn().unwrap();
        let dead = child.id();
        child.wait().unwrap();
        let orphan = dir.path().join(format!(".{}.{dead}.0.tmp", key(1)));
        let mine = dir.path().join(format!(".{}.{}.7.tmp", key(2), std::process::id()));
        let parent =
            dir.path().join(format!(".{}.{}.0.tmp", key(3), std::os::unix::process::parent_id()));
        for file in [&orphan, &mine, &parent] {
            fs::write(file, b"half an entry").unwrap();
        }
        c.put(&key(4), b"program");
        assert!(!orphan.exists(), "the dead writer's file is gone");
        assert!(mine.exists() && parent.exists(), "live writers' files are theirs to rename");
        assert_eq!(c.get(&key(4)).as_deref(), Some(&b"program"[..]));
    }

    #[test]
    fn store_and_load() {
        let dir = tempfile::tempdir().unwrap();
        let c = cache(&dir.path().join("c"), 1 << 20);
        assert_eq!(c.get(&key(1)), None);
        c.put(&key(1), b"program");
        assert_eq!(c.get(&key(1)).as_deref(), Some(&b"program"[..]));
        let mode = fs::metadata(dir.path().join("c")).unwrap().mode() & 0o777;
        assert_eq!(mode, 0o700);
    }

    #[test]
    fn damaged_entries_are_misses_and_removed() {
        let dir = tempfile::tempdir().unwrap();
        let c = cache(dir.path(), 1 << 20);
        let path = c.entry_path(&key(1));
        for damage in [
            |b: &mut Vec<u8>| b.truncate(b.len() - 1),
            |b: &mut Vec<u8>| *b.last_mut().unwrap() ^= 1,
            |b: &mut Vec<u8>| b[0] = b'X',
            |b: &mut Vec<u8>| b.truncate(10),
        ] {
            c.put(&key(1), b"program bytes");
            let mut bytes = fs::read(&path).unwrap();
            damage(&mut bytes);
            fs::write(&path, bytes).unwrap();
            assert_eq!(c.get(&key(1)), None);
            assert!(!path.exists(), "a damaged entry is removed");
        }
        // An intact entry of another key, swapped in, is foreign.
        c.put(&key(2), b"other");
        fs::rename(c.entry_path(&key(2)), &path).unwrap();
        assert_eq!(c.get(&key(1)), None);
    }

    #[test]
    fn entries_are_not_read_through_symlinks() {
        let dir = tempfile::tempdir().unwrap();
        let c = cache(&dir.path().join("c"), 1 << 20);
        let elsewhere = dir.path().join("elsewhere");
        fs::write(&elsewhere, encode_entry(&key(1), b"planted")).unwrap();
        std::os::unix::fs::symlink(&elsewhere, c.entry_path(&key(1))).unwrap();
        assert_eq!(c.get(&key(1)), None);
    }

    #[test]
    fn directories_others_can_write_are_refused() {
        let dir = tempfile::tempdir().unwrap();
        let d = dir.path().join("open");
        fs::create_dir(&d).unwrap();
        fs::set_permissions(&d, fs::Permissions::from_mode(0o777)).unwrap();
        assert!(prepare_dir(&d).unwrap_err().starts_with("writable by others"));
        let link = dir.path().join("link");
        std::os::unix::fs::symlink(dir.path(), &link).unwrap();
        assert_eq!(prepare_dir(&link).unwrap_err(), "not a directory");
    }

    #[test]
    fn least_recently_used_entries_go_first() {
        let dir = tempfile::tempdir().unwrap();
        let c = cache(dir.path(), 2 * (HEADER_LEN as u64 + 100));
        let old = SystemTime::now() - std::time::Duration::from_secs(100);
        c.put(&key(1), &[1; 100]);
        File::options().write(true).open(c.entry_path(&key(1))).unwrap().set_modified(old).unwrap();
        c.put(&key(2), &[2; 100]);
        File::options().write(true).open(c.entry_path(&key(2))).unwrap().set_modified(old).unwrap();
        assert!(c.get(&key(1)).is_some(), "a hit makes entry 1 the most recent");
        c.put(&key(3), &[3; 100]);
        assert!(c.get(&key(2)).is_none(), "entry 2 was least recently used");
        assert!(c.get(&key(1)).is_some() && c.get(&key(3)).is_some());
    }
}
