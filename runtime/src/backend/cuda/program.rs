//! CUDA programs: an image's code as the driver's linker takes it (PTX with its specialization
//! values written in, or a native object), linked by `cuLink` and loaded as modules, whose
//! cubins the persistent cache keeps.

use std::ffi::c_void;
use std::ptr;
use std::sync::Arc;

use cudarc::driver::sys::{self, CUresult};
use sycl_format::PtxSpecConstant;

use super::context::Context;
use super::{check, Cuda, Device, Kernel};
use crate::backend::api::{self, Failure, SpecValue};
use crate::{DriverCode, Error};

/// `ptx` with each value of `spec` as the initialiser of its constant's variable,
/// `.weak .const .align 4 .b8 __sycl_spec_constant_scale[4] = {2, 0, 0, 0};` (the form
/// `sycl-ld` writes); a constant the PTX does not read has no variable and is skipped.
pub(super) fn specialize(ptx: &[u8], spec: &[SpecValue]) -> Result<Vec<u8>, String> {
    if spec.is_empty() {
        return Ok(ptx.to_vec());
    }
    let text = std::str::from_utf8(ptx).map_err(|_| "the PTX is not UTF-8 text".to_string())?;
    let mut out = String::with_capacity(text.len() + 16 * spec.len());
    for line in text.split_inclusive('\n') {
        let declared = PtxSpecConstant::of(line);
        let Some((value, constant)) =
            declared.and_then(|c| Some((spec.iter().find(|v| v.name == c.name)?, c)))
        else {
            out.push_str(line);
            continue;
        };
        if constant.size != value.bytes.len() {
            return Err(format!(
                "specialization constant `{}`: {} byte(s) given, the image's holds {}",
                value.name,
                value.bytes.len(),
                constant.size
            ));
        }
        out.push_str(&constant.with_value(value.bytes));
        if line.ends_with('\n') {
            out.push('\n');
        }
    }
    Ok(out.into_bytes())
}

/// An image's code as the driver's linker takes it: PTX (NUL-terminated), or a native
/// relocatable object.
pub(crate) struct Code {
    pub(super) input: sys::CUjitInputType,
    pub(super) bytes: Arc<[u8]>,
    /// A native object with no undefined symbol of ours: loadable without a link.
    pub(super) complete: bool,
}

/// A program: its loaded modules (one linked module, and a module of each native whole
/// program), kernels looked up in each.
pub(crate) struct Module(pub(super) Vec<Arc<Loaded>>);

/// What [`Module::image`] starts with when a program is several modules: then a `u32` count
/// and each module's cubin as a `u64` length and its bytes, little-endian.
const MODULES_MAGIC: &[u8; 8] = b"SYCLMODS";

/// The cubins of a program's image: one cubin, or those [`MODULES_MAGIC`] frames.
pub(super) fn split_modules(image: &[u8]) -> Result<Vec<&[u8]>, Error> {
    let Some(mut rest) = image.strip_prefix(MODULES_MAGIC) else { return Ok(vec![image]) };
    let malformed = || Error::Driver {
        call: "cuModuleLoadData",
        // The code the driver gives an image it cannot load.
        code: DriverCode::Cuda(CUresult::CUDA_ERROR_INVALID_IMAGE as i32),
        error: "a malformed program of modules".into(),
    };
    let mut take = |n: usize| -> Result<&[u8], Error> {
        let (head, tail) = rest.split_at_checked(n).ok_or_else(malformed)?;
        rest = tail;
        Ok(head)
    };
    let count = u32::from_le_bytes(take(4)?.try_into().map_err(|_| malformed())?);
    let mut cubins = Vec::new();
    for _ in 0..count {
        let len = u64::from_le_bytes(take(8)?.try_into().map_err(|_| malformed())?);
        cubins.push(take(usize::try_from(len).map_err(|_| malformed())?)?);
    }
    Ok(cubins)
}

pub(super) struct Loaded {
    pub(super) context: Arc<Context>,
    raw: sys::CUmodule,
    /// The cubin loaded, for the persistent cache: shared with the object it was loaded from
    /// when that was a whole program.
    cubin: Arc<[u8]>,
}

// SAFETY: a module handle may be used from any thread with its context current.
unsafe impl Send for Loaded {}

// SAFETY: as above; nothing in it changes after loading.
unsafe impl Sync for Loaded {}

impl Drop for Loaded {
    fn drop(&mut self) {
        if self.context.bind().is_ok() {
            // SAFETY: loaded once, unloaded once; no kernel of it outlives it (each holds it).
            unsafe {
                let _ = sys::cuModuleUnload(self.raw);
            }
        }
    }
}

impl Module {
    /// What the persistent cache keeps: the linked cubin, or with several modules each
    /// module's, framed ([`MODULES_MAGIC`]).
    fn image(&self) -> Vec<u8> {
        if let [only] = self.0.as_slice() {
            return only.cubin.to_vec();
        }
        let mut out = MODULES_MAGIC.to_vec();
        out.extend((self.0.len() as u32).to_le_bytes());
        for part in &self.0 {
            out.extend((part.cubin.len() as u64).to_le_bytes());
            out.extend_from_slice(&part.cubin);
        }
        out
    }
}

impl api::Object for Code {
    fn binary(&self) -> Result<Vec<u8>, Error> {
        Err(Error::InvalidArgument("a CUDA object has no binary apart from its image".into()))
    }
}

impl api::Program<Cuda> for Module {
    /// [`Module::image`].
    fn binary(&self) -> Result<Vec<u8>, Error> {
        Ok(self.image())
    }

    fn kernel(&self, name: &str) -> Result<Kernel, Error> {
        let c_name = std::ffi::CString::new(name).map_err(|_| Error::KernelNotFound {
            kernel: name.into(),
            searched: vec![],
            similar: vec![],
        })?;
        let mut last = None;
        for part in &self.0 {
            part.context.bind()?;
            let mut function = ptr::null_mut();
            // SAFETY: a live module and a NUL-terminated name.
            let found = check("cuModuleGetFunction", unsafe {
                sys::cuModuleGetFunction(&mut function, part.raw, c_name.as_ptr())
            });
            match found {
                Ok(()) => {
                    let mut max_threads = 0;
                    // SAFETY: a live function of a loaded module; an out-pointer to a local.
                    check("cuFuncGetAttribute", unsafe {
                        sys::cuFuncGetAttribute(
                            &mut max_threads,
                            sys::CUfunction_attribute::CU_FUNC_ATTRIBUTE_MAX_THREADS_PER_BLOCK,
                            function,
                        )
                    })?;
                    let max_threads = u32::try_from(max_threads).unwrap_or(0);
                    return Ok(Kernel::new(part.clone(), function, name, max_threads));
                }
                Err(e) => last = Some(e),
            }
        }
        Err(last.unwrap_or_else(|| Error::KernelNotFound {
            kernel: name.into(),
            searched: vec![],
            similar: vec![],
        }))
    }
}

impl Device {
    /// `objects` linked by the driver's linker into one module.
    pub(super) fn link_objects(&self, objects: &[&Code], _flags: &str) -> Result<Module, Failure> {
        const LOG: usize = 64 << 10;
        let fail = |error: Error, log: &[u8]| Failure {
            error: error.to_string(),
            log: String::from_utf8_lossy(log.split(|&b| b == 0).next().unwrap_or_default())
                .trim()
                .to_string(),
            bad_options: false,
        };
        self.context.bind().map_err(|e| fail(e, &[]))?;
        let mut error_log = vec![0u8; LOG];
        let mut options = [
            sys::CUjit_option::CU_JIT_ERROR_LOG_BUFFER,
            sys::CUjit_option::CU_JIT_ERROR_LOG_BUFFER_SIZE_BYTES,
        ];
        let mut values = [error_log.as_mut_ptr().cast::<c_void>(), LOG as *mut c_void];
        let mut state = ptr::null_mut();
        // SAFETY: the option values are a buffer of LOG bytes and its size, alive until the
        // state is destroyed below; each PTX is NUL-terminated, and each object outlives the
        // link.
        unsafe {
            check(
                "cuLinkCreate",
                sys::cuLinkCreate_v2(
                    options.len() as u32,
                    options.as_mut_ptr(),
                    values.as_mut_ptr(),
                    &mut state,
                ),
            )
            .map_err(|e| fail(e, &[]))?;
            let linked = (|| {
                for (i, code) in objects.iter().enumerate() {
                    let name = format!("image{i}\0");
                    check(
                        "cuLinkAddData",
                        sys::cuLinkAddData_v2(
                            state,
                            code.input,
                            code.bytes.as_ptr() as *mut c_void,
                            code.bytes.len(),
                            name.as_ptr().cast(),
                            0,
                            ptr::null_mut(),
                            ptr::null_mut(),
                        ),
                    )?;
                }
                let mut cubin = ptr::null_mut();
                let mut size = 0;
                check("cuLinkComplete", sys::cuLinkComplete(state, &mut cubin, &mut size))?;
                // The cubin belongs to the link state: copied out before it is destroyed.
                Ok(Arc::from(std::slice::from_raw_parts(cubin.cast::<u8>(), size)))
            })();
            let _ = sys::cuLinkDestroy(state);
            let cubin = linked.map_err(|e| fail(e, &error_log))?;
            self.module(cubin).map_err(|e| fail(e, &[]))
        }
    }

    pub(super) fn module(&self, cubin: Arc<[u8]>) -> Result<Module, Error> {
        self.context.bind()?;
        // A cubin is an ELF file: anything else is refused here, before the driver reads it.
        if !cubin.starts_with(b"\x7fELF") {
            return Err(Error::Driver {
                call: "cuModuleLoadData",
                // The code the driver gives an image it cannot load.
                code: DriverCode::Cuda(CUresult::CUDA_ERROR_INVALID_IMAGE as i32),
                error: "not a cubin (no ELF header)".into(),
            });
        }
        let mut raw = ptr::null_mut();
        // SAFETY: the image is a complete cubin in memory; the driver copies what it needs.
        check("cuModuleLoadData", unsafe {
            sys::cuModuleLoadData(&mut raw, cubin.as_ptr().cast())
        })?;
        Ok(Module(vec![Arc::new(Loaded { context: self.context.clone(), raw, cubin })]))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const PTX: &str =
        ".version 7.8\n.weak .const .align 4 .b8 __sycl_spec_constant_scale[4] = {2, 0, 0, 0};\n\
.weak .const .align 4 .b8 __sycl_spec_constant_scale_2[4] = {9, 0, 0, 0};\n\
.weak .const .align 8 .b8 __sycl_spec_constant_zero[8];\n\
.weak .const .align 4 .u32 __sycl_other;\n\tld.const.u32 %r5, [__sycl_spec_constant_scale];\n";

    #[test]
    fn a_program_of_several_modules_frames_each_and_malformed_frames_are_errors() {
        let cubin = b"\x7fELF one".as_slice();
        assert_eq!(split_modules(cubin).unwrap(), [cubin]);
        let mut framed = MODULES_MAGIC.to_vec();
        framed.extend(2u32.to_le_bytes());
        for part in [&b"\x7fELF a"[..], b"\x7fELF bc"] {
            framed.extend((part.len() as u64).to_le_bytes());
            framed.extend(part);
        }
        assert_eq!(split_modules(&framed).unwrap(), [&b"\x7fELF a"[..], b"\x7fELF bc"]);
        for len in MODULES_MAGIC.len()..framed.len() {
            assert!(split_modules(&framed[..len]).is_err(), "cut at {len}");
        }
    }

    #[test]
    fn specialization_values_become_the_initialisers_of_their_variables() {
        let value = |name, bytes| SpecValue { name, id: 0, bytes };
        let three = 3i32.to_le_bytes();
        let out = String::from_utf8(specialize(PTX.as_bytes(), &[value("scale", &three)]).unwrap())
            .unwrap();
        assert_eq!(
            out,
            PTX.replace("scale[4] = {2, 0, 0, 0}", "scale[4] = {3, 0, 0, 0}"),
            "only `scale`, not `scale_2`"
        );
        let minus = (-1i32).to_le_bytes();
        let out = String::from_utf8(
            specialize(PTX.as_bytes(), &[value("scale_2", &minus), value("absent", &three)])
                .unwrap(),
        )
        .unwrap();
        assert!(out.contains("scale_2[4] = {255, 255, 255, 255};\n"), "{out}");
        assert!(out.contains("scale[4] = {2, 0, 0, 0};\n"), "{out}");
        let one_and_a_half = 1.5f64.to_le_bytes();
        let out = String::from_utf8(
            specialize(PTX.as_bytes(), &[value("zero", &one_and_a_half)]).unwrap(),
        )
        .unwrap();
        assert!(out.contains("\n.weak .const .align 8 .b8 __sycl_spec_constant_zero[8] = {0, 0, 0, 0, 0, 0, 248, 63};\n"), "a default of zeros has no initialiser: {out}");
        assert_eq!(
            specialize(PTX.as_bytes(), &[value("scale", &[1, 0])]).unwrap_err(),
            "specialization constant `scale`: 2 byte(s) given, the image's holds 4"
        );
        assert_eq!(
            specialize(PTX.as_bytes(), &[]).unwrap(),
            PTX.as_bytes(),
            "nothing to write, nothing changed"
        );
    }
}
