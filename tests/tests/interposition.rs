//! One definition per device symbol, chosen as the host's loader chooses (issue 42), on both
//! CPU devices. libodr_a.so and libodr_b.so (fixtures `odr-a`, `odr-b`) both define
//! `odr_shared`, differently, and each exports a user of it (`odr_a_use`, `odr_b_use`);
//! `odr-app` (linked a before b) and `odr-app-ba` (b before a) call the three from a kernel and
//! from the host, where the libraries hold the same functions, interposable as C's are, and
//! print both. For each loader order (link order, `LD_PRELOAD`) the device's values are the
//! host's, and the host's are what the loader does: the first definition serves every caller,
//! the other library's own calls included. A kernel whose image imports only from libodr_b.so
//! gets libodr_a.so's `odr_shared` where libodr_a.so comes first. Strict mode refuses the
//! duplicate, naming both libraries, and builds nothing. A persistent cache shared by runs
//! with different winners never serves one winner's program to the other.

use sycl_tests::{events, fixtures, run_fixture_args, stderr, stdout, Device, Run, DEVICES};

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

    /// What it prints: the winner named as the host loader's choice, then each function's
    /// values, the same on the device and on the host, as the libraries' sources define them
    /// with the winner's `odr_shared` under every call.
    fn expected(&self) -> String {
        let a_wins = self.winner == "a";
        let shared = |x: i32| if a_wins { x * 10 + 1 } else { x * 20 + 2 };
        let line = |name: &str, f: &dyn Fn(i32) -> i32| {
            let values: Vec<i32> = (0..N).map(f).collect();
            format!("{name}: device {values:?} host {values:?} match\n")
        };
        let mut out = format!("host loader's odr_shared: libodr_{}.so\n", self.winner);
        if self.only_b {
            out += &line("odr_b_use alone", &|x| shared(x) + 200);
        } else {
            out += &line("odr_shared", &shared);
            out += &line("odr_a_use", &|x| shared(x) + 100);
            out += &line("odr_b_use", &|x| shared(x) + 200);
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
