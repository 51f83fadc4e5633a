//! One definition per device symbol, chosen as the host's loader chooses (issue 42), on both
//! CPU devices. libodr_a.so and libodr_b.so (fixtures `odr-a`, `odr-b`) both define
//! `odr_shared`, differently, and each exports a user of it (`odr_a_use`, `odr_b_use`);
//! `odr-app` (linked a before b) and `odr-app-ba` (b before a) call the three from a kernel and
//! from the host, where the libraries hold the same functions, interposable as C's are, and
//! print both. For each loader order (link order, `LD_PRELOAD`) the device's values are the
//! host's, and the host's are what the loader does: the first definition serves every caller,
//! the other library's own calls included (the same functions in C, compiled with `-fPIC`,
//! give the same values). A kernel whose image imports only from libodr_b.so gets
//! libodr_a.so's `odr_shared` where libodr_a.so comes first. Strict mode refuses the
//! duplicate, naming both libraries, and builds nothing. A persistent cache shared by runs
//! with different winners never serves one winner's program to the other.

use std::process::Command;

use sycl_tests::{
    events, fixtures, output, run_fixture_args, stderr, stdout, Device, Run, DEVICES,
};

/// Work-items of the fixture's launches (its `N`).
const N: i32 = 8;

/// One way to run the fixture, and the library that then comes first in the loader's order.
#[derive(Debug)]
struct Scenario {
    /// `odr-app` (a before b) or `odr-app-ba` (b before a).
    program: &'static str,
    /// `only-b`: the kernel whose image imports `odr_b_use` alone; else the kernel calling
    /// all three functions.
    only_b: bool,
    /// A library (in the fixtures' `deps/`) to `LD_PRELOAD`, which puts it first.
    preload: Option<&'static str>,
    /// The library whose `odr_shared` serves every caller: `a` or `b`.
    winner: &'static str,
}

const A_BEFORE_B: Scenario =
    Scenario { program: "odr-app", only_b: false, preload: None, winner: "a" };
const B_BEFORE_A: Scenario =
    Scenario { program: "odr-app-ba", only_b: false, preload: None, winner: "b" };
const B_PRELOADED: Scenario =
    Scenario { program: "odr-app", only_b: false, preload: Some("libodr_b.so"), winner: "b" };
const ONLY_B_A_BEFORE_B: Scenario = Scenario { only_b: true, ..A_BEFORE_B };
const ONLY_B_B_BEFORE_A: Scenario = Scenario { only_b: true, ..B_BEFORE_A };
const ONLY_B_B_PRELOADED: Scenario = Scenario { only_b: true, ..B_PRELOADED };

impl Scenario {
    /// Runs it on `device` with `env` added; it must succeed (the fixture fails on a
    /// mismatch of device and host).
    fn run(&self, device: Device, env: &[(&str, &str)]) -> Run {
        let preload = self.preload.map(|lib| fixtures().join("deps").join(lib));
        let mut env = env.to_vec();
        if let Some(path) = &preload {
            env.push(("LD_PRELOAD", path.to_str().unwrap()));
        }
        let args: &[&str] = if self.only_b { &["only-b"] } else { &[] };
        Run::new(device, self.program, args, &env)
    }

    /// The functions it calls, each with its values at `0..N`, as the libraries' sources define
    /// them with the winner's `odr_shared` under every call.
    fn values(&self) -> Vec<(&'static str, Vec<i32>)> {
        let a_wins = self.winner == "a";
        let shared = |x: i32| if a_wins { x * 10 + 1 } else { x * 20 + 2 };
        let functions: &[(&'static str, i32)] = if self.only_b {
            &[("odr_b_use", 200)]
        } else {
            &[("odr_shared", 0), ("odr_a_use", 100), ("odr_b_use", 200)]
        };
        let values = |plus| (0..N).map(|x| shared(x) + plus).collect();
        functions.iter().map(|&(name, plus)| (name, values(plus))).collect()
    }

    /// What it prints: the winner named as the host loader's choice, then each function's
    /// [`Scenario::values`], the same on the device and on the host.
    fn expected(&self) -> String {
        let mut out = format!("host loader's odr_shared: libodr_{}.so\n", self.winner);
        for (name, values) in self.values() {
            let name = if self.only_b { "odr_b_use alone" } else { name };
            out += &format!("{name}: device {values:?} host {values:?} match\n");
        }
        out
    }

    /// Runs it on `device` with `env` added and checks what it printed; the run.
    fn check(&self, device: Device, env: &[(&str, &str)]) -> Run {
        let run = self.run(device, env);
        assert_eq!(
            run.out,
            self.expected(),
            "{self:?}: libodr_{}.so's odr_shared serves every caller {}",
            self.winner,
            run.say()
        );
        run
    }
}

#[test]
fn linked_a_before_b_as_odr_shared_serves_every_caller() {
    for device in DEVICES {
        A_BEFORE_B.check(device, &[]);
    }
}

#[test]
fn linked_b_before_a_or_b_preloaded_bs_odr_shared_serves_every_caller() {
    for device in DEVICES {
        B_BEFORE_A.check(device, &[]);
        B_PRELOADED.check(device, &[]);
    }
}

/// The image of `odr_only_b` imports only `odr_b_use`, from libodr_b.so, which defines its own
/// `odr_shared`; where libodr_a.so comes first, its `odr_shared` is linked in all the same.
#[test]
fn a_kernel_needing_only_libodr_b_gets_the_first_odr_shared() {
    for device in DEVICES {
        ONLY_B_A_BEFORE_B.check(device, &[]);
        ONLY_B_B_BEFORE_A.check(device, &[]);
        ONLY_B_B_PRELOADED.check(device, &[]);
    }
}

#[test]
fn strict_mode_refuses_the_duplicate_naming_both_libraries_and_builds_nothing() {
    for device in DEVICES {
        let on = device.selector;
        for scenario in [A_BEFORE_B, B_BEFORE_A] {
            let env = [("SYCL_DEVICE", on), ("SYCL_STRICT_EXPORTS", "1")];
            let out = run_fixture_args(scenario.program, &[], &env);
            let (printed, err) = (stdout(&out), stderr(&out));
            let winner = format!("host loader's odr_shared: libodr_{}.so\n", scenario.winner);
            assert_eq!(
                (out.status.code(), printed.as_str()),
                (Some(1), winner.as_str()),
                "strict, {scenario:?} on {on}: {err}"
            );
            let said: Vec<&str> = err.lines().filter(|l| !l.starts_with("sycl: ")).collect();
            let names_both = |l: &str| {
                l.starts_with("error: ")
                    && ["`odr_shared`", "libodr_a.so", "libodr_b.so", "strict"]
                        .iter()
                        .all(|word| l.contains(word))
            };
            assert!(
                matches!(said[..], [line] if names_both(line)),
                "strict, {scenario:?} on {on}: one error naming both libraries: {err}"
            );
            assert!(events(&err, "link").is_empty(), "strict, {scenario:?} on {on}: {err}");
        }
    }
}

/// Every scenario twice in one persistent cache, winners alternating: each run's values follow
/// its own winner, whatever the run before it stored, and the second round finds the first
/// round's programs (the cache is in play).
#[test]
fn a_persistent_cache_shared_by_runs_with_different_winners_follows_the_winner() {
    let rounds = [
        A_BEFORE_B,
        B_PRELOADED,
        ONLY_B_A_BEFORE_B,
        B_BEFORE_A,
        ONLY_B_B_PRELOADED,
        ONLY_B_B_BEFORE_A,
    ];
    for device in DEVICES {
        let dir = tempfile::tempdir().unwrap();
        let cache = [("SYCL_CACHE_DISABLE", "0"), ("SYCL_CACHE_DIR", dir.path().to_str().unwrap())];
        for round in 0..2 {
            for scenario in &rounds {
                let run = scenario.check(device, &cache);
                if round == 1 {
                    assert!(
                        !run.events("persist-hit").is_empty(),
                        "{scenario:?}, second round: from the cache {}",
                        run.say()
                    );
                }
            }
        }
    }
}

/// The libraries again as C, compiled as gcc compiles a shared library's host code (`-fPIC`,
/// default visibility; `-fsemantic-interposition`, which is gcc's default, for a `cc` that is
/// clang), and a program printing the three functions: what the host's loader does with them
/// (the first definition serves every caller, calls inside the other library included) is
/// what [`Scenario::values`] says, for each order. The libraries' Rust host side, which asks
/// the loader by name, is checked against the same values by the tests above.
#[test]
fn the_expected_values_are_what_the_loader_does_with_the_functions_in_c() {
    const SOURCES: [(&str, &str); 3] = [
        (
            "a.c",
            "int odr_shared(int x) { return x * 10 + 1; }
int odr_a_use(int x) { return odr_shared(x) + 100; }
",
        ),
        (
            "b.c",
            "int odr_shared(int x) { return x * 20 + 2; }
int odr_b_use(int x) { return odr_shared(x) + 200; }
",
        ),
        (
            "main.c",
            r#"#include <stdio.h>
int odr_shared(int), odr_a_use(int), odr_b_use(int);
static void show(const char *name, int (*f)(int)) {
    printf("%s: [", name);
    for (int x = 0; x < 8; x++) printf(x ? ", %d" : "%d", f(x));
    printf("]\n");
}
int main(void) {
    show("odr_shared", odr_shared);
    show("odr_a_use", odr_a_use);
    show("odr_b_use", odr_b_use);
    return 0;
}
"#,
        ),
    ];
    let dir = tempfile::tempdir().unwrap();
    let cc = |args: &[&str]| {
        let out = output(Command::new("cc").args(["-O2", "-fPIC"]).args(args).current_dir(&dir));
        assert!(out.status.success(), "cc {args:?}: {}", stderr(&out));
    };
    for (file, text) in SOURCES {
        std::fs::write(dir.path().join(file), text).unwrap();
    }
    for library in ["a", "b"] {
        let so = format!("libodr_{library}.so");
        cc(&["-fsemantic-interposition", "-shared", "-o", &so, &format!("{library}.c")]);
    }
    let rpath = "-Wl,-rpath,$ORIGIN";
    cc(&["-o", "odr-app", "main.c", "-L.", "-lodr_a", "-lodr_b", rpath]);
    cc(&["-o", "odr-app-ba", "main.c", "-L.", "-lodr_b", "-lodr_a", rpath]);
    for scenario in [A_BEFORE_B, B_BEFORE_A, B_PRELOADED] {
        let mut program = Command::new(dir.path().join(scenario.program));
        if let Some(library) = scenario.preload {
            program.env("LD_PRELOAD", dir.path().join(library));
        }
        let out = output(&mut program);
        let values = scenario.values();
        let want: String = values.iter().map(|(name, v)| format!("{name}: {v:?}\n")).collect();
        assert_eq!(stdout(&out), want, "{scenario:?} in C: {}", stderr(&out));
    }
}
