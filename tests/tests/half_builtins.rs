//! Every OpenCL C builtin on half (`fixtures/half-app`), against host references: within
//! OpenCL's bounds on Intel's CPU runtime, which has fp16; `kernel_not_supported` on PoCL,
//! which has none. The GPU suite runs the same program on an NVIDIA GPU, where `sycl-ld`'s
//! `ptx64` target defines what libclc lacks on half.

use sycl_tests::{run_fixture_with, stdout};

const TABLES: [&str; 6] = [
    "math and common functions (scalar and half4): 2432 results",
    "functions with pointers, and nan (scalar and half4): 448 results",
    "relational functions, select and bitselect (scalar and half4): 544 results",
    "geometric functions (half to half4): 64 results",
    "conversions (scalar and half4): 560 results",
    "vload, vstore, vload_half, vstore_half, shuffle (half2 to half8): 272 results",
];

#[test]
fn every_half_builtin_is_within_opencls_bounds_on_intels_runtime() {
    let out = run_fixture_with("half-app", &[("SYCL_DEVICE", "intel")]);
    let text = stdout(&out);
    let expected: Vec<String> =
        TABLES.iter().map(|t| format!("{t}, all within OpenCL's bounds")).collect();
    assert_eq!(text.lines().collect::<Vec<_>>(), expected, "{text}");
    assert!(out.status.success());
}

#[test]
fn half_builtins_are_not_supported_on_pocl_which_has_no_fp16() {
    let out = run_fixture_with("half-app", &[("SYCL_DEVICE", "pocl")]);
    let text = stdout(&out);
    let expected: Vec<String> =
        ["math", "pointers", "relational", "geometric", "conversions", "memory"]
            .iter()
            .map(|k| format!("{k}: kernel_not_supported without fp16"))
            .collect();
    assert_eq!(text.lines().collect::<Vec<_>>(), expected, "{text}");
    assert!(out.status.success());
}
