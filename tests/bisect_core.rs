//! End-to-end bisections of real generated C repositories built with CMake.
mod common;
use common::*;

#[test]
fn regression_is_found() {
    if !have_cmake() {
        return;
    }
    let f = Fixture::new(&spec(60, 37));
    let out = f.bisect(0, 59).assert().code(0);
    let stdout = String::from_utf8_lossy(&out.get_output().stdout).to_string();
    let r = f.result();
    assert_eq!(r["first_bad"], f.sha(37));
    assert!(stdout.contains("first bad commit"), "{stdout}");
    assert!(stdout.contains("ringbuf: speed up index wrap"), "{stdout}");
    assert!(stdout.contains(f.sha(37)), "{stdout}");
    let probes = r["probes"].as_array().unwrap();
    // The first midpoint (below 37: old), then midpoints only: the answer (37, its parent
    // tested old) never touches an endpoint, so neither is built (until issue 22 --bad was
    // built right after the old first midpoint); at most ceil(log2(59)) = 6 probes.
    assert_ne!(probes[0]["sha"], f.sha(59));
    assert_eq!(probes[0]["outcome"], "pass");
    // (--bad's build-aware group, asked through its first member: 58 and 59 build the same.)
    let last = r["range"]["candidates"].as_u64().unwrap() - 1;
    assert!(
        probes
            .iter()
            .all(|p| p["candidate"].as_u64().unwrap() + 1 < last && p["sha"] != f.sha(0)),
        "{:#}",
        r["probes"]
    );
    assert!(probes.len() <= 6, "{} probes", probes.len());
}

#[test]
fn fix_is_found_with_regress_success() {
    if !have_cmake() {
        return;
    }
    let mut s = spec(60, 10);
    s.fix_at = Some(41);
    let f = Fixture::new(&s);
    let out = f
        .bisect(20, 59)
        .args(["--regress", "success"])
        .assert()
        .code(0);
    let stdout = String::from_utf8_lossy(&out.get_output().stdout).to_string();
    assert_eq!(f.result()["first_bad"], f.sha(41));
    assert!(stdout.contains("first fixed commit"), "{stdout}");
}

#[test]
fn skips_next_to_the_culprit_give_the_honest_set() {
    if !have_cmake() {
        return;
    }
    let mut s = spec(50, 30);
    s.broken = Some((27, 30));
    let f = Fixture::new(&s);
    let out = f.bisect(0, 49).assert().code(1);
    let stdout = String::from_utf8_lossy(&out.get_output().stdout).to_string();
    let r = f.result();
    assert!(r["first_bad"].is_null());
    let want: Vec<&str> = (27..=30).map(|i| f.sha(i)).collect();
    let got: Vec<&str> = r["candidates"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v.as_str().unwrap())
        .collect();
    assert_eq!(got, want);
    assert!(stdout.contains("one of these 4"), "{stdout}");
}

#[test]
fn broken_build_range_is_skipped_not_judged() {
    if !have_cmake() {
        return;
    }
    let mut s = spec(64, 45);
    s.broken = Some((5, 40));
    let f = Fixture::new(&s);
    f.bisect(0, 63).assert().code(0);
    let r = f.result();
    assert_eq!(r["first_bad"], f.sha(45));
    let probes = r["probes"].as_array().unwrap();
    assert!(
        probes
            .iter()
            .any(|p| p["outcome"] == "build_failed" && p["verdict"] == "skip"),
        "{probes:?}"
    );
}

#[test]
fn match_requires_the_failure_signature() {
    if !have_cmake() {
        return;
    }
    let mut s = spec(60, 40);
    s.unrelated_at = Some(20);
    let f = Fixture::new(&s);
    f.bisect(0, 59).assert().code(0);
    assert_eq!(
        f.result()["first_bad"],
        f.sha(20),
        "without --match any failure counts"
    );
    f.bisect(0, 59)
        .args(["--match", "mismatch at step"])
        .assert()
        .code(0);
    let r = f.result();
    assert_eq!(r["first_bad"], f.sha(40));
    // The unrelated failure's probes were reused from the store, judged differently.
    assert!(r["probes"]
        .as_array()
        .unwrap()
        .iter()
        .any(|p| p["cached"] == true));
}

#[test]
fn llama_cpp_layout_collapses_commits_outside_ggml() {
    if !have_cmake() {
        return;
    }
    let mut s = spec(90, 61);
    s.layout = Layout::LlamaCpp;
    let f = Fixture::new(&s);
    let out = f.bisect(0, 89).assert().code(0);
    let stderr = String::from_utf8_lossy(&out.get_output().stderr).to_string();
    assert!(stderr.contains("llama.cpp layout detected"), "{stderr}");
    let r = f.result();
    assert_eq!(r["first_bad"], f.sha(61));
    assert_eq!(r["range"]["path"], "ggml");
    assert_eq!(r["range"]["commits"], 90);
    let classes = r["range"]["candidates"].as_u64().unwrap();
    assert!(classes < 60, "{classes} candidates for 90 commits");
    // Commits after the culprit that leave ggml/ alone are members of its class.
    let members = r["candidate_classes"][0]["members"].as_array().unwrap();
    assert_eq!(members[0], f.sha(61));
    for (k, m) in members.iter().enumerate() {
        assert_eq!(m, f.sha(61 + k));
    }
    // --path . tests the whole tree: every commit is its own candidate.
    f.bisect(0, 89).args(["--path", "."]).assert().code(0);
    assert_eq!(f.result()["range"]["candidates"], 90);
}

#[test]
fn wrong_endpoint_stops_with_a_clear_message() {
    if !have_cmake() {
        return;
    }
    let f = Fixture::new(&spec(30, 20));
    let out = f.bisect(0, 10).assert().code(1);
    let stderr = String::from_utf8_lossy(&out.get_output().stderr).to_string();
    assert!(stderr.contains("--bad"), "{stderr}");
    assert!(stderr.contains("old behaviour"), "{stderr}");
    let r = f.result();
    assert!(r["first_bad"].is_null());
    // A lying --bad is reported, never an answer, within the walk toward it: at most the
    // midpoints of the range and --bad itself, which is the last probe.
    let probes = r["probes"].as_array().unwrap();
    assert!(probes.len() <= 5, "{:#}", r["probes"]);
    // (--bad's build-aware group, asked through its first member.)
    let last = r["range"]["candidates"].as_u64().unwrap() - 1;
    let asked = probes.last().unwrap()["candidate"].as_u64().unwrap();
    assert!(asked + 1 >= last, "{:#}", r["probes"]);
}

/// Issue 45's endpoint rule: `--bad` is trusted, as git trusts it, while the answer does not
/// depend on it; a culprit away from it costs no probe there (the dry run's "3 probes" case).
#[test]
fn a_truthful_bad_costs_no_probe_on_culprits_away_from_it() {
    if !have_cmake() {
        return;
    }
    for bug in [4, 11, 19] {
        let f = Fixture::new(&spec(30, bug));
        f.bisect(0, 29).assert().code(0);
        let r = f.result();
        assert_eq!(r["first_bad"], f.sha(bug), "{:#}", r["probes"]);
        let last = r["range"]["candidates"].as_u64().unwrap() - 1;
        let probes = r["probes"].as_array().unwrap();
        assert!(
            probes.iter().all(|p| p["candidate"].as_u64() != Some(last)),
            "culprit {bug}: --bad was built: {:#}",
            r["probes"]
        );
    }
}

/// A `--good` that already shows the new behaviour: every midpoint is new, the walk ends next
/// to it, the answer depends on it, so it is tested and reported, never an answer.
#[test]
fn a_lying_good_is_reported_once_the_answer_depends_on_it() {
    if !have_cmake() {
        return;
    }
    let f = Fixture::new(&spec(30, 10));
    let out = f.bisect(14, 29).assert().code(1);
    let stderr = String::from_utf8_lossy(&out.get_output().stderr).to_string();
    assert!(stderr.contains("--good"), "{stderr}");
    let r = f.result();
    assert!(r["first_bad"].is_null(), "{r:#}");
    assert_eq!(r["conclusion"]["kind"], "bad_endpoint", "{r:#}");
    assert_eq!(r["conclusion"]["which"], "good", "{r:#}");
    let probes = r["probes"].as_array().unwrap();
    assert_eq!(probes.last().unwrap()["candidate"], 0, "{:#}", r["probes"]);
}

#[test]
fn an_answer_next_to_bad_is_only_given_once_bad_was_tested() {
    if !have_cmake() {
        return;
    }
    // The culprit is --bad itself: the answer rests on it, so it is tested (and shows it).
    let f = Fixture::new(&spec(30, 29));
    f.bisect(0, 29).assert().code(0);
    let r = f.result();
    assert_eq!(r["first_bad"], f.sha(29));
    let probes = r["probes"].as_array().unwrap();
    assert!(
        probes.iter().any(|p| p["sha"] == f.sha(29)),
        "{:#}",
        r["probes"]
    );
}

#[test]
fn parallel_jobs_find_the_same_commit() {
    if !have_cmake() {
        return;
    }
    let f = Fixture::new(&spec(80, 53));
    f.bisect(0, 79).args(["--jobs", "3"]).assert().code(0);
    assert_eq!(f.result()["first_bad"], f.sha(53));
}

#[test]
fn a_different_build_command_never_reuses_another_commands_build_dir() {
    if !have_cmake() {
        return;
    }
    let f = Fixture::new(&spec(12, 7));
    let build = setrows_bisect::cli::demo::build_command();
    let run = |b: String| {
        let mut c = f.bisect_std(0, 11);
        let args: Vec<std::ffi::OsString> = c.get_args().map(|a| a.to_owned()).collect();
        let mut fresh = std::process::Command::new(c.get_program());
        let mut it = args.into_iter();
        while let Some(a) = it.next() {
            if a == "--build" {
                it.next();
                fresh.arg("--build").arg(&b);
            } else {
                fresh.arg(a);
            }
        }
        c = fresh;
        assert_cmd::Command::from_std(c).assert().code(0);
    };
    run(format!("touch made-by-first-command; {build}"));
    // Fails if it sees the first command's build dir.
    run(format!("test ! -e made-by-first-command && {build}"));
    assert_eq!(f.result()["first_bad"], f.sha(7));
}

#[test]
fn relative_repo_and_work_dir_paths_work() {
    if !have_cmake() {
        return;
    }
    let f = Fixture::new(&spec(20, 13));
    let c = f.bisect_raw(
        std::path::Path::new("repo"),
        f.sha(0),
        f.sha(19),
        std::path::Path::new("relative-work"),
    );
    let mut c = assert_cmd::Command::from_std(c);
    c.current_dir(f.dir.path()).assert().code(0);
    assert_eq!(f.result()["first_bad"], f.sha(13));
    assert!(f.dir.path().join("relative-work/results").is_dir());
}
