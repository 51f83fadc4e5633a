//! Misuses that must not compile, each with its own error: a launcher `include_kernels!`
//! generated called with the wrong arguments, a struct of the wrong size, a launch without a
//! global range, and the borrows of a map and of a copy in flight.
//!
//! rustdoc on the stable toolchain does not check a `compile_fail` doctest's error code, so
//! those doctests (in `runtime/src/launch/`) pass on any error, a typo included. Here each case
//! is an example of the fixture crate `fixtures/misuse` (whose library holds the same uses,
//! right, and must build), and one `cargo build` builds them all in the fixtures' target
//! directory: a build, not a check, because a launcher's size assertion of a struct parameter
//! fails only when the launcher is instantiated. Each case must fail with exactly one error, of
//! its code, at its place, saying what the case says.

use std::collections::BTreeMap;
use std::process::Command;

/// One example of `fixtures/misuse/examples/`, and the one error it must fail with.
struct Case {
    /// The example's name (its file's, less `.rs`).
    name: &'static str,
    /// The error code.
    code: &'static str,
    /// Text the rendered error must hold: its message, its labels and notes, and its place.
    words: &'static [&'static str],
}

const CASES: &[Case] = &[
    Case {
        name: "float_for_int",
        code: "E0277",
        words: &[
            "the trait bound `f32: OfType<int>` is not satisfied",
            "required by a bound in `misuse::kernels::block_sum`",
            "misuse/examples/float_for_int.rs:10:65",
        ],
    },
    Case {
        name: "long_for_int",
        code: "E0277",
        words: &[
            "the trait bound `u64: OfType<int>` is not satisfied",
            "but trait `OfType<long>` is implemented for it",
            "misuse/examples/long_for_int.rs:10:65",
        ],
    },
    Case {
        name: "double_for_float",
        code: "E0308",
        words: &[
            "mismatched types",
            "expected `f32`, found `f64`",
            "misuse/examples/double_for_float.rs:11:27",
        ],
    },
    Case {
        name: "float_buffer_for_int_pointer",
        code: "E0277",
        words: &[
            "the trait bound `f32: OfType<int>` is not satisfied",
            "required for `&Buffer<f32>` to implement `DeviceMemory<'_, int>`",
            "misuse/examples/float_buffer_for_int_pointer.rs:10:29",
        ],
    },
    Case {
        name: "value_for_buffer",
        code: "E0277",
        words: &[
            "the trait bound `i32: DeviceMemory<'_, int>` is not satisfied",
            "misuse/examples/value_for_buffer.rs:9:28",
        ],
    },
    Case {
        name: "buffer_for_local",
        code: "E0308",
        words: &[
            "mismatched types",
            "expected `Local<_>`, found `&Buffer<i32>`",
            "misuse/examples/buffer_for_local.rs:10:42",
        ],
    },
    Case {
        name: "local_of_floats_for_ints",
        code: "E0277",
        words: &[
            "the trait bound `f32: OfType<int>` is not satisfied",
            "misuse/examples/local_of_floats_for_ints.rs:10:42",
        ],
    },
    Case {
        name: "too_few_arguments",
        code: "E0061",
        words: &[
            "this function takes 5 arguments but 4 arguments were supplied",
            "argument #4 of type `Local<_>` is missing",
            "misuse/examples/too_few_arguments.rs:10:5",
        ],
    },
    Case {
        name: "too_many_arguments",
        code: "E0061",
        words: &[
            "this function takes 2 arguments but 3 arguments were supplied",
            "unexpected argument #3",
            "misuse/examples/too_many_arguments.rs:9:5",
        ],
    },
    Case {
        // The assertion is the launcher's, in the module sycl-build wrote: the case's own
        // code holds none.
        name: "struct_of_another_size",
        code: "E0080",
        words: &[
            "evaluation panicked: kernel `shift` parameter `by` (struct Pt) takes 8 bytes",
            "misuse::kernels::shift::<'_, sycl_runtime::Queue, [f32; 3],",
            "/sycl-kernels-misuse.rs:",
        ],
    },
    Case {
        name: "run_without_global_range",
        code: "E0599",
        words: &[
            "no method named `run` found for struct `Launch<'_, NoGlobalRange>`",
            "misuse/examples/run_without_global_range.rs:9:33",
        ],
    },
    Case {
        name: "launch_while_mapped",
        code: "E0502",
        words: &[
            "cannot borrow `data` as immutable because it is also borrowed as mutable",
            "when `values` is dropped and runs the `Drop` code for type `Mapped`",
            "misuse/examples/launch_while_mapped.rs:10:26",
        ],
    },
    Case {
        name: "read_before_transfer_waited",
        code: "E0502",
        words: &[
            "cannot borrow `host` as immutable because it is also borrowed as mutable",
            "mutable borrow later used here",
            "misuse/examples/read_before_transfer_waited.rs:10:20",
        ],
    },
];

#[test]
fn each_misuse_fails_with_its_own_error() {
    // The fixtures' build scripts link through it.
    sycl_tests::built_sycl_ld();
    let fixtures = sycl_tests::repo_root().join("fixtures");
    let manifest = fixtures.join("misuse/Cargo.toml");
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
    // The whole workspace's features, so that `sycl-runtime` is the one `cargo build` there
    // built (with `-p misuse` alone, cargo would build another, with fewer features); the
    // cases named, so that only they build.
    let mut build = Command::new(cargo);
    build.args(["build", "--workspace", "--features", "misuse/cases", "--keep-going"]);
    for case in CASES {
        build.args(["--example", case.name]);
    }
    let out = sycl_tests::output(build.arg("--message-format=json").current_dir(&fixtures));
    let stderr = sycl_tests::stderr(&out);

    // Per example, the errors' codes and rendered text; and what built.
    let mut errors: BTreeMap<String, Vec<(String, String)>> = BTreeMap::new();
    let mut built = Vec::new();
    let mut failures = Vec::new();
    for line in sycl_tests::stdout(&out).lines() {
        let Ok(message) = serde_json::from_str::<serde_json::Value>(line) else { continue };
        if message["manifest_path"].as_str() != manifest.to_str() {
            continue;
        }
        let target = &message["target"];
        let (kind, name) = (target["kind"][0].as_str(), target["name"].as_str().unwrap());
        match (message["reason"].as_str(), kind) {
            (Some("compiler-artifact"), _) => {
                built.push((kind.unwrap().to_string(), name.to_string()))
            }
            (Some("compiler-message"), Some("example"))
                if message["message"]["level"] == "error" =>
            {
                let code = message["message"]["code"]["code"].as_str().unwrap_or("no code");
                let rendered = message["message"]["rendered"].as_str().unwrap();
                errors
                    .entry(name.to_string())
                    .or_default()
                    .push((code.to_string(), rendered.to_string()));
            }
            (Some("compiler-message"), Some("lib")) if message["message"]["level"] == "error" => {
                failures.push(format!(
                    "the library, which uses the launchers right, does not build:\n{}",
                    message["message"]["rendered"].as_str().unwrap()
                ));
            }
            _ => {}
        }
    }

    assert!(
        built.iter().any(|(kind, name)| kind == "lib" && *name == "misuse"),
        "fixtures/misuse's library was not built, so no case can be judged:\n{stderr}\n{}",
        failures.join("\n\n")
    );
    for (kind, name) in &built {
        if kind == "example" {
            failures.push(format!("example {name} compiled: its misuse was accepted"));
        }
    }
    // Every example is a case, and every case an example (one `[[example]]` each in
    // fixtures/misuse/Cargo.toml, or cargo builds none of it).
    let mut examples: Vec<String> = std::fs::read_dir(fixtures.join("misuse/examples"))
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().trim_end_matches(".rs").to_string())
        .collect();
    examples.sort();
    let mut cases: Vec<&str> = CASES.iter().map(|c| c.name).collect();
    cases.sort();
    assert_eq!(examples, cases, "fixtures/misuse/examples/ and CASES name other cases");
    for name in errors.keys() {
        if !cases.contains(&name.as_str()) {
            failures.push(format!("example {name}, no case, failed: {:?}", errors[name]));
        }
    }

    for case in CASES {
        let got = errors.get(case.name).map(Vec::as_slice).unwrap_or_default();
        let [(code, rendered)] = got else {
            failures.push(format!(
                "{}: expected one error, {}, got {}:\n{}",
                case.name,
                case.code,
                got.len(),
                got.iter().map(|(_, r)| r.as_str()).collect::<String>()
            ));
            continue;
        };
        let missing: Vec<&&str> = case.words.iter().filter(|w| !rendered.contains(**w)).collect();
        if code != case.code || !missing.is_empty() {
            failures.push(format!(
                "{}: expected error[{}] saying {:?}; got error[{code}], without {missing:?}:\n\
                 {rendered}",
                case.name, case.code, case.words
            ));
        }
    }
    assert!(!out.status.success(), "the cases' build succeeded:\n{stderr}");
    assert!(failures.is_empty(), "{}", failures.join("\n\n"));
}
