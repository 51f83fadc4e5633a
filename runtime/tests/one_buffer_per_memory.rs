//! One `Buffer` per memory object, on each CPU OpenCL device: a second buffer of a live
//! buffer's memory (its own `to_opencl3()`, the same memory adopted twice, a sub-buffer of it)
//! would keep a second record of uses, so commands on it would not be ordered with the first's,
//! and two maps could hand out `&mut [T]` and `&[T]` of the same bytes. Adoption refuses it;
//! once the first buffer is gone, the memory may be adopted again.
#![cfg(feature = "opencl3")]

use sycl_runtime::{Buffer, ErrorKind, NativeBuffer, Queue};

const DEVICES: [&str; 2] = ["intel", "pocl"];

#[test]
fn memory_a_live_buffer_holds_is_not_adopted_again() {
    for device in DEVICES {
        let q = Queue::with_device(device).unwrap();
        let ours = q.buffer_from(&[1i32; 64]).unwrap();
        let theirs = ours.to_opencl3().unwrap();
        let again = Buffer::<i32>::from_opencl3(&q, &theirs).err().expect("adopted twice");
        assert_eq!(again.kind(), ErrorKind::InvalidArgument, "{device}: {again}");
        assert!(again.to_string().contains("is a live Buffer's already"), "{device}: {again}");
        // SAFETY: the live memory object of `ours`, of 64 values.
        let native = unsafe { Buffer::<i32>::from_native(&q, ours.native(), 64) };
        assert!(native.is_err(), "{device}: the same memory through from_native");
        // A sub-buffer of it, made by opencl3.
        let NativeBuffer::OpenCl(mem) = ours.native() else { panic!("an OpenCL buffer") };
        let region = [0usize, 128];
        // SAFETY: a live memory object and a region within it (the first 128 bytes).
        let sub = unsafe {
            cl3::memory::create_sub_buffer(
                mem,
                cl3::memory::CL_MEM_READ_WRITE,
                cl3::memory::CL_BUFFER_CREATE_TYPE_REGION,
                region.as_ptr().cast(),
            )
        }
        .unwrap();
        let sub = opencl3::memory::Buffer::<i32>::new(sub);
        let part = Buffer::<i32>::from_opencl3(&q, &sub).err().expect("a sub-buffer adopted");
        assert_eq!(part.kind(), ErrorKind::InvalidArgument, "{device}: {part}");
        // Once the buffer is gone, its memory (kept by opencl3) may become a buffer again.
        drop(ours);
        let adopted = Buffer::<i32>::from_opencl3(&q, &theirs).unwrap();
        assert_eq!(adopted.read().unwrap(), vec![1; 64], "{device}");
    }
}
