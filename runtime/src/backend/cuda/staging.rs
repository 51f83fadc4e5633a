//! Page-locked staging: blocks of a context's, reused from map to map and read to read, and
//! the staged read, which copies a large read into pageable memory through two chunks, the
//! host's copy out of one overlapping the device's copy into the other.

use std::ffi::c_void;
use std::ptr;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

use cudarc::driver::sys::{self, CUresult};

use super::context::Context;
use super::event::RawEvent;
use super::{check, Stream};
use crate::backend::api::Queue as _;
use crate::Error;

/// A block of page-locked host memory (`cuMemAllocHost`), `size` bytes from `at`.
pub(super) struct Block {
    pub(super) at: *mut c_void,
    size: usize,
}

/// The smallest staging block: maps and reads of fewer bytes share blocks of this size.
const STAGING_MIN: usize = 64 << 10;

/// The most page-locked memory a context keeps idle for staging; a block given back beyond
/// it is freed (which waits for the device).
const STAGING_KEEP: usize = 128 << 20;

/// The size of each chunk of a staged read ([`Stream::read_staged`]): a huge page (2 MiB) for
/// each of [`COPY_THREADS`], so that no two threads fault one huge page in.
const STAGED_CHUNK: usize = COPY_THREADS * (2 << 20);

/// The smallest read into pageable memory that is staged: two chunks, one copied out while
/// the other comes in.
pub(super) const STAGED_READ_MIN: usize = 2 * STAGED_CHUNK;

/// The most threads that copy a staged read's chunks out of staging. Copying into memory
/// never touched is the faults' speed, which grows with threads: 1 GiB from page-locked
/// memory into new huge-page-advised memory on an H200 host (16 cores, 2026-11-28) took 3.4
/// GB/s on one thread, 15.8 on 8, 26.8 on 16 (`memcpy` into memory touched before: 32–38).
const COPY_THREADS: usize = 16;

/// The size of the staging block for `size` bytes: the next power of two, and at least
/// [`STAGING_MIN`] (a few sizes, so that blocks are reused across sizes).
fn staging_size(size: usize) -> usize {
    let size = size.max(STAGING_MIN);
    size.checked_next_power_of_two().unwrap_or(size)
}

/// Which of the idle blocks (by size) serves a need of `size` bytes: the smallest that holds
/// them.
fn best_block(sizes: impl Iterator<Item = usize>, size: usize) -> Option<usize> {
    sizes.enumerate().filter(|&(_, s)| s >= size).min_by_key(|&(_, s)| s).map(|(i, _)| i)
}

/// Whether a block of `size` bytes given back is kept, `idle` bytes being idle already.
fn keeps(idle: usize, size: usize) -> bool {
    idle.saturating_add(size) <= STAGING_KEEP
}

/// Which bytes of a chunk of `size` bytes copying thread `thread` of `threads` copies: the
/// chunk split evenly, on page boundaries (4 KiB) but for the end, so that no two threads
/// touch one page.
fn stripe(size: usize, thread: usize, threads: usize) -> (usize, usize) {
    let at = |k: usize| if k >= threads { size } else { (size / threads * k) & !4095 };
    (at(thread), at(thread + 1))
}

/// Copies `chunks` chunks out of staging on `threads` threads (this one among them): chunk
/// `i` once `ready(i)` returned (on this thread; it may also refill the staging of chunks
/// copied before `i`), each thread its own stripe of it (`copy(i, thread, threads)`), all
/// threads done with it before `ready(i + 1)`. Stops at the first error of `ready`.
fn copy_out(
    chunks: usize,
    threads: usize,
    mut ready: impl FnMut(usize) -> Result<(), Error>,
    copy: impl Fn(usize, usize, usize) + Sync,
) -> Result<(), Error> {
    let threads = threads.max(1);
    // The other threads copy chunk `current` between two waits at the barrier, until `done`.
    let barrier = std::sync::Barrier::new(threads);
    let current = AtomicUsize::new(0);
    let done = std::sync::atomic::AtomicBool::new(false);
    std::thread::scope(|scope| {
        for thread in 1..threads {
            let (barrier, current, done, copy) = (&barrier, &current, &done, &copy);
            scope.spawn(move || loop {
                barrier.wait();
                if done.load(Ordering::Acquire) {
                    break;
                }
                copy(current.load(Ordering::Acquire), thread, threads);
                barrier.wait();
            });
        }
        let copied = (|| {
            for i in 0..chunks {
                ready(i)?;
                current.store(i, Ordering::Release);
                barrier.wait();
                copy(i, 0, threads);
                barrier.wait();
            }
            Ok(())
        })();
        done.store(true, Ordering::Release);
        barrier.wait();
        copied
    })
}

/// How many threads copy a staged read's chunks: the cores there are, at most
/// [`COPY_THREADS`].
fn copy_threads() -> usize {
    std::thread::available_parallelism().map_or(1, |n| n.get()).min(COPY_THREADS)
}

/// Whether `at` is page-locked host memory the driver knows (allocated or registered with
/// it), which it copies to at full speed as it is.
pub(super) fn page_locked(at: *const u8) -> bool {
    let mut kind = 0u32;
    // SAFETY: an out-pointer of the attribute's type (a `CUmemorytype`, 32 bits); the driver
    // only looks the address up.
    let found = unsafe {
        sys::cuPointerGetAttribute(
            (&mut kind as *mut u32).cast(),
            sys::CUpointer_attribute::CU_POINTER_ATTRIBUTE_MEMORY_TYPE,
            at as sys::CUdeviceptr,
        )
    };
    found == CUresult::CUDA_SUCCESS && kind == sys::CUmemorytype::CU_MEMORYTYPE_HOST as u32
}

/// Whether the pages of `bytes` are in memory, by a sample of three (its first, middle and
/// last page; `mincore`): memory touched before, into which the driver copies at full
/// pageable speed. Memory the system cannot tell about counts as in memory.
#[cfg(target_os = "linux")]
pub(super) fn resident(bytes: &[u8]) -> bool {
    // SAFETY: `sysconf` has no preconditions.
    let page = usize::try_from(unsafe { libc::sysconf(libc::_SC_PAGESIZE) }).unwrap_or(4096);
    let start = bytes.as_ptr() as usize;
    [0, bytes.len() / 2, bytes.len().saturating_sub(1)].iter().all(|&offset| {
        let at = (start + offset) & !(page.max(1) - 1);
        let mut state = 0u8;
        // SAFETY: one page from a page boundary, of a mapping `bytes` lies in; the system
        // writes one byte into `state`.
        let asked = unsafe { libc::mincore(at as *mut libc::c_void, page, &mut state) };
        asked != 0 || state & 1 == 1
    })
}

#[cfg(not(target_os = "linux"))]
pub(super) fn resident(_bytes: &[u8]) -> bool {
    true
}

/// Asks the system to back the whole 2 MiB pages within `bytes` with huge pages
/// (`MADV_HUGEPAGE`): memory not yet touched then faults in once per 2 MiB.
#[cfg(target_os = "linux")]
fn advise_huge_pages(bytes: &mut [u8]) {
    const HUGE: usize = 2 << 20;
    let start = (bytes.as_ptr() as usize).next_multiple_of(HUGE);
    let end = (bytes.as_ptr() as usize + bytes.len()) & !(HUGE - 1);
    if end > start {
        // SAFETY: advice on whole pages within `bytes`, which are borrowed mutably: it
        // changes how the system backs them, never what they hold.
        unsafe {
            libc::madvise(start as *mut libc::c_void, end - start, libc::MADV_HUGEPAGE);
        }
    }
}

#[cfg(not(target_os = "linux"))]
fn advise_huge_pages(_bytes: &mut [u8]) {}

/// Page-locked staging taken from its context's idle blocks ([`Context::stage`]), given back
/// on drop.
pub(super) struct Staged {
    context: Arc<Context>,
    pub(super) block: Block,
}

// SAFETY: page-locked memory is plain host memory, owned by this value alone.
unsafe impl Send for Staged {}

// SAFETY: as above; `&Staged` gives out only the address.
unsafe impl Sync for Staged {}

impl Context {
    /// At least `size` bytes of page-locked staging: an idle block when one holds them, else
    /// one allocated now ([`staging_size`]). Not zeroed.
    pub(super) fn stage(self: &Arc<Context>, size: usize) -> Result<Staged, Error> {
        let size = staging_size(size);
        {
            let mut idle = self.staging.lock().unwrap_or_else(|e| e.into_inner());
            if let Some(i) = best_block(idle.iter().map(|b| b.size), size) {
                return Ok(Staged { context: self.clone(), block: idle.swap_remove(i) });
            }
        }
        self.bind()?;
        let mut at = ptr::null_mut();
        // SAFETY: an out-pointer to a local; the context is bound.
        check("cuMemAllocHost", unsafe { sys::cuMemAllocHost_v2(&mut at, size) })?;
        Ok(Staged { context: self.clone(), block: Block { at, size } })
    }
}

impl Staged {
    /// Gives up the block without freeing it or giving it back: a copy to or from it may
    /// still be under way (after a failed wait).
    pub(super) fn abandon(self) {
        let this = std::mem::ManuallyDrop::new(self);
        // SAFETY: the context is read out once and dropped; the rest (the block) is leaked.
        drop(unsafe { ptr::read(&this.context) });
    }
}

impl Drop for Staged {
    fn drop(&mut self) {
        let block = Block { at: self.block.at, size: self.block.size };
        let mut idle = self.context.staging.lock().unwrap_or_else(|e| e.into_inner());
        if keeps(idle.iter().map(|b| b.size).sum(), block.size) {
            idle.push(block);
            return;
        }
        drop(idle);
        if self.context.bind().is_ok() {
            // SAFETY: allocated once, freed once, here; no copy uses it any more (whoever
            // copied waited, or abandoned it).
            unsafe {
                let _ = sys::cuMemFreeHost(block.at);
            }
        }
    }
}

impl Stream {
    /// [`Stream::read`] through two page-locked chunks of the context's staging: the device
    /// copies each chunk while the host copies the one before out of staging into `out`,
    /// split among a few threads ([`COPY_THREADS`]). The driver's own copy into pageable
    /// memory not touched before ran at 1.4–1.8 GB/s on an H200 against 10.5–16.4 GB/s into
    /// memory touched before (`docs/DESIGN.md`): the first touch of each page (a fault, the
    /// page zeroed) is the cost, which here is spread over threads and overlaps the device's
    /// copy. `out` is asked for huge pages first (`MADV_HUGEPAGE`): a fault per 2 MiB, not
    /// per 4 KiB. The context is bound.
    pub(super) fn read_staged(&self, from: sys::CUdeviceptr, out: &mut [u8]) -> Result<(), Error> {
        advise_huge_pages(out);
        let context = &self.shared.context;
        let staging = [context.stage(STAGED_CHUNK)?, context.stage(STAGED_CHUNK)?];
        let copied = self.copy_through(from, out, &staging);
        if copied.is_err() && self.finish().is_err() {
            // A copy into staging may still be under way: neither block is used again.
            staging.into_iter().for_each(Staged::abandon);
        }
        copied
    }

    /// The chunks of [`Stream::read_staged`], double-buffered in `staging`.
    fn copy_through(
        &self,
        from: sys::CUdeviceptr,
        out: &mut [u8],
        staging: &[Staged; 2],
    ) -> Result<(), Error> {
        let len = out.len();
        let chunks = len.div_ceil(STAGED_CHUNK);
        // Chunk `i`: where it starts in `out` and its size.
        let chunk = |i: usize| (i * STAGED_CHUNK, STAGED_CHUNK.min(len - i * STAGED_CHUNK));
        // Addresses as numbers, which the copying threads may share.
        let blocks = [staging[0].block.at as usize, staging[1].block.at as usize];
        let dst = out.as_mut_ptr() as usize;
        let enqueue = |i: usize| -> Result<Arc<RawEvent>, Error> {
            let (start, size) = chunk(i);
            // SAFETY: `size` (at most a block's) bytes into staging block `i % 2`, which
            // nothing reads until the event recorded after the copy completed, from within
            // the range the caller checked.
            check("cuMemcpyDtoHAsync", unsafe {
                sys::cuMemcpyDtoHAsync_v2(
                    blocks[i % 2] as *mut c_void,
                    from + start as u64,
                    size,
                    self.shared.raw,
                )
            })?;
            self.shared.record_raw(false)
        };
        let copy = |i: usize, thread: usize, threads: usize| {
            let (start, size) = chunk(i);
            let (lo, hi) = stripe(size, thread, threads);
            // SAFETY: bytes `lo..hi` of chunk `i`: within its staging block, whose copy from
            // the device completed, and within `out` (`start + size <= len`), borrowed
            // mutably for this call; the stripes of a chunk do not overlap, so no two threads
            // write one byte.
            unsafe {
                ptr::copy_nonoverlapping(
                    (blocks[i % 2] + lo) as *const u8,
                    (dst + start + lo) as *mut u8,
                    hi - lo,
                );
            }
        };
        // Chunk `i + 1` goes into the block chunk `i - 1` was copied out of, then chunk `i` is
        // waited for.
        let mut pending = [Some(enqueue(0)?), None];
        let ready = |i: usize| -> Result<(), Error> {
            if i + 1 < chunks {
                pending[(i + 1) % 2] = Some(enqueue(i + 1)?);
            }
            let Some(event) = &pending[i % 2] else { return Ok(()) };
            // SAFETY: a live event of the bound context.
            check("cuEventSynchronize", unsafe { sys::cuEventSynchronize(event.raw) })
        };
        copy_out(chunks, copy_threads(), ready, copy)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn staging_blocks_come_in_few_sizes_and_the_smallest_that_fits_is_reused() {
        assert_eq!(staging_size(1), STAGING_MIN);
        assert_eq!(staging_size(STAGING_MIN + 1), 2 * STAGING_MIN);
        assert_eq!(staging_size(3 << 20), 4 << 20);
        assert_eq!(staging_size(usize::MAX), usize::MAX, "no overflow");
        let idle = [8 << 20, 1 << 20, 4 << 20];
        assert_eq!(best_block(idle.into_iter(), 2 << 20), Some(2));
        assert_eq!(best_block(idle.into_iter(), 1 << 20), Some(1));
        assert_eq!(best_block(idle.into_iter(), 16 << 20), None);
        assert!(keeps(0, STAGING_KEEP));
        assert!(!keeps(STAGING_KEEP - 1, 2));
        assert!(!keeps(usize::MAX, 1), "no overflow");
    }

    #[test]
    fn stripes_split_a_chunk_on_page_boundaries_without_gaps_or_overlaps() {
        for size in [1, 4095, 4096, 10_000, STAGED_CHUNK, STAGED_CHUNK - 1] {
            for threads in 1..=COPY_THREADS {
                let stripes: Vec<_> = (0..threads).map(|t| stripe(size, t, threads)).collect();
                assert_eq!(stripes[0].0, 0);
                assert_eq!(stripes[threads - 1].1, size);
                for pair in stripes.windows(2) {
                    assert_eq!(pair[0].1, pair[1].0, "{size} bytes on {threads} threads");
                    assert_eq!(pair[0].1 % 4096, 0);
                }
                assert!(stripes.iter().all(|&(lo, hi)| lo <= hi));
            }
        }
    }

    #[test]
    fn copying_out_of_staging_on_several_threads_copies_every_chunk_whole_in_order() {
        const CHUNK: usize = 3 * 4096 + 5;
        for (len, threads) in [(0, 2), (1, 1), (CHUNK, 3), (5 * CHUNK + 17, 4), (2 * CHUNK, 2)] {
            let src: Vec<u8> = (0..len).map(|i| (i * 7 % 251) as u8).collect();
            let mut dst = vec![0u8; len];
            let (from, to) = (src.as_ptr() as usize, dst.as_mut_ptr() as usize);
            let chunks = len.div_ceil(CHUNK);
            let mut readied = Vec::new();
            let copy = |i: usize, thread: usize, threads: usize| {
                let size = CHUNK.min(len - i * CHUNK);
                let (lo, hi) = stripe(size, thread, threads);
                // SAFETY: a stripe of chunk `i`, within both vectors; stripes do not overlap.
                unsafe {
                    ptr::copy_nonoverlapping(
                        (from + i * CHUNK + lo) as *const u8,
                        (to + i * CHUNK + lo) as *mut u8,
                        hi - lo,
                    );
                }
            };
            let ready = |i| {
                readied.push(i);
                Ok(())
            };
            copy_out(chunks, threads, ready, copy).unwrap();
            assert_eq!(readied, (0..chunks).collect::<Vec<_>>());
            assert!(dst == src, "{len} bytes on {threads} threads");
        }
        // An error stops the copy (and lets the other threads go: no hang).
        let failed = copy_out(
            4,
            3,
            |i| match i {
                2 => Err(Error::InvalidArgument("the device".into())),
                _ => Ok(()),
            },
            |_, _, _| {},
        );
        assert_eq!(failed.unwrap_err().to_string(), "invalid argument: the device");
    }

    #[cfg(target_os = "linux")]
    #[test]
    fn memory_never_touched_is_not_resident_and_touched_memory_is() {
        // Beyond glibc's largest mmap threshold (32 MiB): pages of their own, untouched by
        // `calloc`.
        let fresh = vec![0u8; 64 << 20];
        assert!(!resident(&fresh));
        let touched = vec![1u8; 64 << 20];
        assert!(resident(&touched));
    }
}
