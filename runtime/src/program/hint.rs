//! What to try after a driver refused device code: a hint from the step that failed, whether
//! the driver refused the options, and its log.

/// The driver step that failed, for [`hint`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Step {
    Compile,
    Link,
    Build,
}

/// What to try after the driver refused device code, from the step, whether it refused the
/// options, and its log.
pub(super) fn hint(step: Step, bad_options: bool, log: &str, flags: &str) -> String {
    let lower = log.to_lowercase();
    if bad_options {
        return format!(
            "the build options `{flags}` are not valid for this device: check the options given to the launch or the bundle"
        );
    }
    if lower.contains("symbols not found")
        || lower.contains("undefined")
        || lower.contains("unresolved")
    {
        return "a function these images call is defined by none of them: the library that exports it must be loaded \
                and visible to them (SYCL_TRACE=1 shows how each import resolved; `sycl-ld inspect FILE` lists what a \
                binary exports and imports)"
            .into();
    }
    if lower.contains("recurs") {
        return "device code may not call itself, directly or through other functions (OpenCL C forbids recursion): \
                remove the call cycle the log names"
            .into();
    }
    let flags =
        if flags.is_empty() { String::new() } else { format!(" with the options `{flags}`") };
    match step {
        Step::Compile => format!(
            "the device's compiler refused this image{flags}: the log names what it could not take; `sycl-ld inspect \
             BINARY` shows the image, and SYCL_TRACE=1 which kernel needed it"
        ),
        Step::Link => format!(
            "the driver could not link these images{flags}: SYCL_TRACE=1 shows which images were collected and how each \
             import resolved; a symbol defined twice or with different types in two libraries is a common cause"
        ),
        Step::Build => format!(
            "the driver could not build this program{flags}: the log names what it could not take; SYCL_TRACE=1 shows \
             which images it was made from"
        ),
    }
}
