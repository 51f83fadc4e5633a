//! OpenCL programs: made from SPIR-V, a binary or source, compiled, linked and built, with
//! the driver's log when it refuses them.

use std::ffi::CString;
use std::ptr;

use cl3::types::{cl_int, cl_program};

use super::{cl_err, Context, Kernel, OpenCl};
use crate::backend::api::{self, DeviceId};
use crate::Error;

handle!(Program, cl_program, cl3::program::release_program);

// SAFETY: OpenCL programs are thread-safe (OpenCL 2.x, appendix A.2).
unsafe impl Send for Program {}
// SAFETY: as above.
unsafe impl Sync for Program {}

impl Program {
    pub(crate) fn from_binary(
        context: &Context,
        device: DeviceId,
        binary: &[u8],
    ) -> Result<Program, Error> {
        // SAFETY: one binary for the one device of the context; the driver validates it.
        unsafe { cl3::program::create_program_with_binary(context.0, &[device.0], &[binary]) }
            .map(Program)
            .map_err(cl_err("clCreateProgramWithBinary"))
    }

    /// Builds an executable from source, IL or binary; on failure, the build log.
    pub(crate) fn build(&self, device: DeviceId, options: &str) -> Result<(), (cl_int, String)> {
        let options = CString::new(options).unwrap_or_default();
        cl3::program::build_program(self.0, &[device.0], &options, None, ptr::null_mut())
            .map_err(|code| (code, self.build_log(device)))
    }

    /// A program from OpenCL C source (tests only: device code reaches the runtime as images).
    pub(crate) fn from_source(context: &Context, source: &str) -> Result<Program, Error> {
        cl3::program::create_program_with_source(context.0, &[source])
            .map(Program)
            .map_err(cl_err("clCreateProgramWithSource"))
    }

    pub(crate) fn from_il(context: &Context, il: &[u8]) -> Result<Program, Error> {
        cl3::program::create_program_with_il(context.0, il)
            .map(Program)
            .map_err(cl_err("clCreateProgramWithIL"))
    }

    pub(crate) fn set_spec_constant(&self, id: u32, value: &[u8]) -> Result<(), Error> {
        // SAFETY: the driver copies `value.len()` bytes and checks the size against the
        // constant's type.
        unsafe {
            cl3::program::set_program_specialization_constant(
                self.0,
                id,
                value.len(),
                value.as_ptr().cast(),
            )
        }
        .map_err(cl_err("clSetProgramSpecializationConstant"))
    }

    /// Compiles to an object; on failure, the build log.
    pub(crate) fn compile(&self, device: DeviceId, options: &str) -> Result<(), (cl_int, String)> {
        let options = CString::new(options).unwrap_or_default();
        cl3::program::compile_program(
            self.0,
            &[device.0],
            &options,
            &[],
            &[],
            None,
            ptr::null_mut(),
        )
        .map_err(|code| (code, self.build_log(device)))
    }

    /// Links compiled objects into an executable; on failure, the code and the link log.
    ///
    /// Called through the loaded library rather than `cl3::program::link_program`, which drops
    /// the program `clLinkProgram` returns with `CL_LINK_PROGRAM_FAILURE`, and with it the log.
    pub(crate) fn link(
        context: &Context,
        device: DeviceId,
        objects: &[&Program],
        options: &str,
    ) -> Result<Program, (cl_int, String)> {
        let options = CString::new(options).unwrap_or_default();
        let raw: Vec<cl_program> = objects.iter().map(|p| p.0).collect();
        let library = cl3::load_library()
            .as_ref()
            .map_err(|e| (cl3::error_codes::DLOPEN_RUNTIME_LOAD_FAILED, e.to_string()))?;
        let mut status = cl3::error_codes::CL_INVALID_VALUE;
        // The wrapper's method is not marked unsafe, but it is a raw FFI call: the device is
        // the context's device, every input program was compiled in this context, `raw`
        // holds `raw.len()` live programs, the options string is NUL-terminated, and with no
        // callback the call is synchronous.
        let linked = library.clLinkProgram(
            context.0,
            1,
            &device.0,
            options.as_ptr(),
            raw.len() as u32,
            raw.as_ptr(),
            None,
            ptr::null_mut(),
            &mut status,
        );
        let Some(linked) = linked else {
            return Err((
                cl3::error_codes::DLOPEN_FUNCTION_NOT_AVAILABLE,
                "the OpenCL library has no clLinkProgram".into(),
            ));
        };
        // A failed link may still return a program: it holds the log, and is released here.
        let program = (!linked.is_null()).then_some(Program(linked));
        match (status, program) {
            (cl3::error_codes::CL_SUCCESS, Some(program)) => Ok(program),
            (code, program) => {
                Err((code, program.map(|p| p.build_log(device)).unwrap_or_default()))
            }
        }
    }

    /// The program's binary for its one device (`CL_PROGRAM_BINARIES`).
    pub(crate) fn binary(&self) -> Result<Vec<u8>, Error> {
        match cl3::program::get_program_info(self.0, cl3::program::CL_PROGRAM_BINARIES)
            .map_err(cl_err("clGetProgramInfo"))?
        {
            cl3::info_type::InfoType::VecVecUchar(mut binaries) if !binaries.is_empty() => {
                Ok(binaries.swap_remove(0))
            }
            _ => Err(cl_err("clGetProgramInfo")(cl3::error_codes::CL_INVALID_PROGRAM)),
        }
    }

    pub(crate) fn build_log(&self, device: DeviceId) -> String {
        cl3::program::get_program_build_info(self.0, device.0, cl3::program::CL_PROGRAM_BUILD_LOG)
            .map(String::from)
            .unwrap_or_default()
            .trim_end_matches('\0')
            .trim()
            .to_string()
    }
}

impl api::Object for Program {
    fn binary(&self) -> Result<Vec<u8>, Error> {
        Program::binary(self)
    }
}

impl api::Program<OpenCl> for Program {
    fn binary(&self) -> Result<Vec<u8>, Error> {
        Program::binary(self)
    }

    fn kernel(&self, name: &str) -> Result<Kernel, Error> {
        Kernel::new(self, name)
    }
}
