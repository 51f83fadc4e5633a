//! Memory on the CPU devices (`intel`, `pocl`), in this process (copies need no kernel):
//! - the heap allocations of copies between views (`BufferView::copy_from`, within a buffer
//!   and between two buffers, made and waited for) in steady state, counted by the counting
//!   allocator installed here, per device (bound: none, `<= 0`);
//! - a copy between the two CPU devices (`Buffer::copy_from`, staged through host memory: the
//!   source mapped, on a CPU device its own memory, and written into the destination) against
//!   a host `memcpy` of the same size between two vectors already touched, each direction
//!   (bound: rate of the copy / rate of the memcpy `>= 0.5`).
//!
//! Times are medians of rounds in which each side goes first in turn, the ratio the median of
//! the rounds' own. Run with `cargo bench -p sycl-runtime --bench memory`. Without `--bench`
//! (as in `cargo test --benches`) one round runs, as a smoke test.

mod common;

use std::time::Instant;

use common::{median, ms, ratio};
use sycl_runtime::bench_support::{allocations, CountingAllocator};
use sycl_runtime::Queue;

#[global_allocator]
static ALLOCATOR: CountingAllocator = CountingAllocator;

/// The CPU devices, by their `SYCL_DEVICE` selectors.
const CPU_DEVICES: [&str; 2] = ["intel", "pocl"];

/// Bytes of the copy between devices: large enough that the copy, not its set-up, is timed.
const STAGED_BYTES: usize = 256 << 20;

fn main() {
    let bench = common::bench_mode();
    for device in CPU_DEVICES {
        view_copies(device, if bench { 10_000 } else { 10 });
    }
    let rounds = if bench { 21 } else { 1 };
    staged(CPU_DEVICES[0], CPU_DEVICES[1], rounds);
    staged(CPU_DEVICES[1], CPU_DEVICES[0], rounds);
}

/// Heap allocations per view copy in steady state on `device`.
fn view_copies(device: &str, copies: u64) {
    let q = Queue::with_device(device).expect("a queue on the device");
    let a = q.buffer_from(&(0..4096).collect::<Vec<i32>>()).expect("a buffer");
    let b = q.buffer_zeroed::<i32>(4096).expect("a buffer");
    let copy = |i: u64| {
        let at = (i % 7) as usize * 100;
        let (low, high) = a.split_at(2048).expect("halves");
        // Within a buffer, then between two, from views made now.
        low.slice(at..at + 1000).unwrap().copy_from(&high.slice(at..at + 1000).unwrap()).unwrap();
        b.slice(at + 3..at + 1003).unwrap().copy_from(&a.slice(at..at + 1000).unwrap()).unwrap();
    };
    for i in 0..10 {
        copy(i); // warm: the first commands of the queue, the driver's own set-up
    }
    let before = allocations();
    for i in 0..copies {
        copy(i);
    }
    let per_copy = (allocations() - before) as f64 / (2 * copies) as f64;
    ratio(
        &format!("heap allocations per view copy in steady state, {device}"),
        per_copy,
        "<= 0",
        &format!(
            "{} copies of 1,000 values between views (made each time), waited for",
            2 * copies
        ),
    );
}

/// A staged copy from `from` to `to` against a host `memcpy` of the same size.
fn staged(from: &str, to: &str, rounds: usize) {
    let n = STAGED_BYTES / 4;
    let data: Vec<i32> = (0..n as i32).collect();
    let (qa, qb) = (Queue::with_device(from).unwrap(), Queue::with_device(to).unwrap());
    let src = qa.buffer_from(&data).unwrap();
    let dst = qb.buffer_zeroed::<i32>(n).unwrap();
    let mut host_dst = vec![1i32; n];
    let (mut ours, mut memcpy, mut ratios) = (Vec::new(), Vec::new(), Vec::new());
    let time = |f: &mut dyn FnMut()| {
        let start = Instant::now();
        f();
        start.elapsed().as_secs_f64()
    };
    dst.copy_from(&src).unwrap(); // warm: first commands, pages touched
    for round in 0..rounds {
        let mut copy = || dst.copy_from(&src).unwrap();
        let mut host = || host_dst.copy_from_slice(std::hint::black_box(&data));
        let (o, m) = if round % 2 == 0 {
            let o = time(&mut copy);
            (o, time(&mut host))
        } else {
            let m = time(&mut host);
            (time(&mut copy), m)
        };
        ours.push(o);
        memcpy.push(m);
        ratios.push(m / o);
    }
    assert!(dst.read().unwrap() == data, "the staged copy {from} -> {to} is wrong");
    std::hint::black_box(&host_dst);
    let gbs = |t: f64| STAGED_BYTES as f64 / t / 1e9;
    let (o, m) = (median(ours), median(memcpy));
    ratio(
        &format!("copy {from} -> {to} (staged through the host) / host memcpy, rate"),
        median(ratios),
        ">= 0.5",
        &format!(
            "256 MiB: {} ({:.1} GB/s) against {} ({:.1} GB/s), median of {rounds}",
            ms(o),
            gbs(o),
            ms(m),
            gbs(m)
        ),
    );
}
