//! Device pointers: [`Queue::malloc_device`] (SYCL 2020's name) gives a [`UsmBuffer`], a
//! [`Buffer`] whose memory has a fixed device address ([`UsmBuffer::addr`]) that a program may
//! store in device memory and a kernel may follow. Everything else is the buffer's: reads,
//! writes, copies, fills, views, maps, launches, ordering and graphs go through the one path
//! of [`Buffer`], which a `UsmBuffer` dereferences to.
//!
//! Where the memory comes from is the backend's (`backend::Device::alloc_device`): on CUDA
//! a buffer's memory already is a device pointer; on OpenCL a device allocation of
//! `cl_intel_unified_shared_memory`, or else OpenCL 2.0's coarse-grained buffer SVM
//! (`backend/opencl/usm.rs`); a device without any refuses, as `Error::Unsupported`.

use std::ops::Deref;

use super::host::{Mapped, MappedMut};
use super::kernel::{ArgValue, KernelArg};
use super::queue::{byte_size, Buffer, Pod, Queue};
use super::typed::{DeviceMemory, OfType};
use super::view::{AsView, BufferView};
use crate::Error;

/// The aspect of the devices that have device allocations (SYCL 2020's name).
const ASPECT: &str = "usm_device_allocations";

/// Device memory of `len` values of `T` at a fixed device address, for pointer-linked data:
/// lists, trees, graphs of nodes, arrays of arrays, whose links are device addresses stored in
/// device memory. Made by [`Queue::malloc_device`]. `Send + Sync`.
///
/// It is a [`Buffer`] (it dereferences to one): read, written, copied (to and from any buffer
/// of its device), filled, viewed, mapped, passed to a pointer parameter (`.arg(&usm)`, and to
/// a generated launcher) and ordered as a buffer is, and recorded into graphs (on OpenCL,
/// while one lives in a device's context, graphs there are replayed by the runtime command by
/// command: OpenCL's command buffers cannot name device allocations). Its views may start at
/// any value.
///
/// [`UsmBuffer::addr`] is the device address of its first value: a kernel may follow it, and
/// addresses within the memory ([`UsmBuffer::addr_of`]), wherever it finds them (in an
/// argument, or stored in any memory of the device, this buffer's included). An address is
/// valid only inside kernels on this buffer's device, and only while the `UsmBuffer` lives:
/// device code that follows an address of memory that was freed reads or writes whatever is
/// there now, as a stale pointer does in CUDA (a bug of the program's device code, which
/// the host side cannot see; nothing on the host ever reads through the address). On the host
/// it is a number, for the device.
///
/// The automatic ordering sees the buffers a command names: a kernel that follows addresses
/// into a `UsmBuffer` it is not given as an argument is not ordered with that buffer's other
/// commands (blocking writes are done when they return; otherwise pass the buffer too, or
/// order with events), and a `UsmBuffer` is freed after the commands that name it.
///
/// ```no_run
/// use sycl_runtime::{Queue, UsmBuffer};
///
/// /// A list node as the device code declares it: `struct node { int value; ulong next; }`.
/// #[repr(C)]
/// #[derive(Clone, Copy)]
/// struct Node {
///     value: i32,
///     pad: u32,
///     next: u64,
/// }
/// // SAFETY: four numbers, laid out without padding.
/// unsafe impl sycl_runtime::Pod for Node {}
///
/// let q = Queue::new()?;
/// let nodes: UsmBuffer<Node> = q.malloc_device(3)?;
/// // Each node links to the next by its device address; 0 ends the list.
/// let list: Vec<Node> = (0..3)
///     .map(|i| Node { value: i as i32, pad: 0, next: if i < 2 { nodes.addr_of(i + 1) } else { 0 } })
///     .collect();
/// nodes.write(&list)?;
/// // A kernel `sum_list(global struct node* head, global int* out)` now walks it.
/// # Ok::<(), sycl_runtime::Error>(())
/// ```
pub struct UsmBuffer<T: Pod> {
    buffer: Buffer<T>,
    /// The device address of value 0.
    addr: u64,
}

impl Queue {
    /// Device memory of `len` values of `T` at a fixed device address (SYCL 2020's
    /// `malloc_device`), uninitialised: see [`UsmBuffer`]. A CUDA GPU's memory is a device
    /// pointer; an OpenCL device gives it through `cl_intel_unified_shared_memory` (Intel's
    /// OpenCL runtimes), or else through shared virtual memory (SVM: OpenCL 2.0 devices that
    /// report coarse-grained buffer SVM, such as PoCL's). On a device without either
    /// (NVIDIA's OpenCL) the error is
    /// [`ErrorKind::Unsupported`](crate::ErrorKind::Unsupported), naming the device; a device
    /// has it where [`DeviceInfo::aspects`](crate::DeviceInfo::aspects) lists
    /// `usm_device_allocations`. It is freed when dropped, once no command uses it, without
    /// the host waiting.
    pub fn malloc_device<T: Pod>(&self, len: usize) -> Result<UsmBuffer<T>, Error> {
        let device = &self.inner.device;
        if !device.info.has_aspect(ASPECT) {
            return Err(Error::Unsupported(format!(
                "Queue::malloc_device on {}: the device has no device allocations (no \
                 {ASPECT} among DeviceInfo::aspects; on OpenCL, neither \
                 cl_intel_unified_shared_memory nor SVM); CUDA GPUs, Intel's OpenCL runtimes \
                 and OpenCL devices with SVM (PoCL's) have them; elsewhere store indices into \
                 a Buffer in place of addresses",
                device.describe()
            )));
        }
        let bytes = byte_size::<T>(len)?;
        let (mem, addr) = device.device.alloc_device(bytes)?;
        Ok(UsmBuffer { buffer: Buffer::made(self, mem, len), addr })
    }
}

impl<T: Pod> UsmBuffer<T> {
    /// The device address of its first value: valid inside kernels on its device while the
    /// buffer lives (see [`UsmBuffer`]).
    pub fn addr(&self) -> u64 {
        self.addr
    }

    /// The device address of value `index` (at most [`Buffer::len`]: the address just past
    /// the last value is one too, as in C).
    ///
    /// # Panics
    /// When `index` is past the end.
    pub fn addr_of(&self, index: usize) -> u64 {
        assert!(
            index <= self.buffer.len(),
            "UsmBuffer::addr_of({index}) of a buffer of {} values",
            self.buffer.len()
        );
        self.addr + (index * size_of::<T>()) as u64
    }

    /// [`Buffer::map`]: its values in host memory, to read, until the guard goes (a copy on
    /// every device: device memory at an address is not host memory in general).
    pub fn map(&mut self) -> Result<Mapped<'_, T>, Error> {
        self.buffer.map()
    }

    /// [`Buffer::map_mut`]: its values in host memory, to read and write, copied back when
    /// the guard goes.
    pub fn map_mut(&mut self) -> Result<MappedMut<'_, T>, Error> {
        self.buffer.map_mut()
    }
}

impl<T: Pod> Deref for UsmBuffer<T> {
    type Target = Buffer<T>;

    fn deref(&self) -> &Buffer<T> {
        &self.buffer
    }
}

/// A pointer argument, as its buffer.
impl<T: Pod> AsView<T> for UsmBuffer<T> {
    fn as_view(&self) -> BufferView<'_, T> {
        self.buffer.as_view()
    }
}

impl<'a, T: Pod> KernelArg<'a> for &'a UsmBuffer<T> {
    fn to_arg(&self) -> ArgValue<'a> {
        let buffer: &'a Buffer<T> = &self.buffer;
        buffer.to_arg()
    }
}

/// A generated launcher's pointer parameter, as its buffer.
impl<'a, C, T: Pod + OfType<C>> DeviceMemory<'a, C> for &'a UsmBuffer<T> {
    fn memory_arg(&self) -> ArgValue<'a> {
        self.to_arg()
    }
}

// The concurrency contract, checked by the compiler.
const _: () = {
    const fn send_sync<T: Send + Sync>() {}
    send_sync::<UsmBuffer<f32>>();
};

#[cfg(test)]
mod tests {
    use super::*;
    use crate::test_support::run_source;

    /// A list node, as `[value, next]`, and the kernel that sums a list from its head.
    const LIST: &str = "struct node { long value; ulong next; };
        kernel void sum_list(global struct node* head, ulong also, global long* out) {
            long sum = 0;
            for (global struct node* n = head; n; n = (global struct node*)n->next)
                sum += n->value;
            out[0] = sum;
            out[1] = ((global struct node*)also)->value;
        }";

    /// The queues on the CPU devices, each with device allocations (Intel's, and SVM on
    /// PoCL); those a machine lacks skipped, the reason printed.
    fn queues() -> Vec<Queue> {
        let mut queues = Vec::new();
        for selector in ["intel", "pocl"] {
            match Queue::with_device(selector) {
                Ok(q) => {
                    assert!(q.inner.device.info.has_aspect(ASPECT), "{selector}: no {ASPECT}");
                    queues.push(q);
                }
                Err(e) => println!("skipped on {selector}: {e}"),
            }
        }
        queues
    }

    /// Five nodes linked out of order (3, 0, 4, 1, 2) by device address; a kernel given the
    /// head as a view (from any value: a view of device memory is its address plus the
    /// offset) and another node's address as a number follows them.
    #[test]
    fn a_kernel_follows_a_list_linked_by_device_addresses() {
        for q in queues() {
            let nodes = q.malloc_device::<[u64; 2]>(5).unwrap();
            assert_eq!(nodes.addr_of(5) - nodes.addr(), 80);
            let order = [3, 0, 4, 1, 2];
            let mut list = [[0u64; 2]; 5];
            for (k, &i) in order.iter().enumerate() {
                let next = order.get(k + 1).map_or(0, |&j| nodes.addr_of(j));
                list[i] = [10u64.pow(k as u32), next];
            }
            nodes.write(&list).unwrap();
            let out = q.buffer_zeroed::<i64>(2).unwrap();
            let head = nodes.slice(3..4).unwrap();
            let also = nodes.addr_of(2);
            run_source(&q, LIST, "", "sum_list", &[&&head, &also, &&out], 1).unwrap();
            assert_eq!(out.read().unwrap(), [11111, 10000], "{}", q.device_name());
        }
    }

    /// A kernel follows addresses into allocations it is not given, made before its first
    /// launch and between launches (on SVM, each launch names the live allocations to the
    /// kernel anew when they changed), the last dropped each time.
    #[test]
    fn a_kernel_follows_addresses_into_allocations_it_is_not_given() {
        for q in queues() {
            let name = q.device_name().to_string();
            let head = q.malloc_device::<[u64; 2]>(1).unwrap();
            let out = q.buffer_zeroed::<i64>(2).unwrap();
            let mut tails = Vec::new();
            for round in 0..3u64 {
                // Each round links the head to a new allocation, dropping the last.
                let tail = q.malloc_device::<[u64; 2]>(1).unwrap();
                tail.write(&[[100 + round, 0]]).unwrap();
                head.write(&[[1, tail.addr()]]).unwrap();
                let also = tail.addr();
                run_source(&q, LIST, "", "sum_list", &[&&head, &also, &&out], 1).unwrap();
                let (sum, tail) = (101 + round as i64, 100 + round as i64);
                assert_eq!(out.read().unwrap(), [sum, tail], "{name}");
                tails.clear();
                tails.push(tail);
            }
        }
    }

    /// Reads, writes, copies both ways with a buffer and between device allocations, fills
    /// (a pattern the driver takes, and one it does not), views and maps.
    #[test]
    fn device_allocations_are_read_written_copied_filled_and_mapped_as_buffers() {
        for q in queues() {
            read_write_copy_fill_map(&q);
        }
    }

    fn read_write_copy_fill_map(q: &Queue) {
        let n = 1000;
        let host: Vec<i32> = (0..n as i32).collect();
        let mut usm = q.malloc_device::<i32>(n).unwrap();
        usm.write(&host).unwrap();
        assert_eq!(usm.read().unwrap(), host);
        let buffer = q.buffer::<i32>(n).unwrap();
        buffer.copy_from(&usm).unwrap();
        assert_eq!(buffer.read().unwrap(), host);
        buffer.fill(7).unwrap();
        usm.copy_from(&buffer).unwrap();
        assert_eq!(usm.read().unwrap(), vec![7; n]);
        let other = q.malloc_device::<i32>(n).unwrap();
        other.write(&host).unwrap();
        usm.copy_from(&other).unwrap();
        let mut part = [0; 3];
        usm.read_range(997..1000, &mut part).unwrap();
        assert_eq!(part, [997, 998, 999]);
        usm.write_at(1, &[-1, -2]).unwrap();
        usm.fill(5).unwrap();
        assert_eq!(usm.read().unwrap(), vec![5; n]);
        let triples = q.malloc_device::<[i32; 3]>(33).unwrap();
        triples.fill([1, 2, 3]).unwrap();
        assert_eq!(triples.read().unwrap(), vec![[1, 2, 3]; 33]);
        {
            let mut mapped = usm.map_mut().unwrap();
            assert_eq!(mapped[999], 5);
            mapped[0] = 42;
        }
        assert_eq!(usm.map().unwrap()[..2], [42, 5]);
        assert_eq!(usm.read().unwrap()[0], 42);
    }
}
