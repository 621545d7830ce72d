//! The one renderer, fed typed results as the writers build them; fixtures shared with the
//! JUnit and state-block tests.
use sha2::Digest;

use super::*;
use crate::core::outcome::Verdict;
use crate::core::range::CommitInfo;
use crate::core::result::{
    read, BisectProbe, BisectRange, BisectResult, Cell, Conclusion, ConfigRow, Kind, Rev,
};
use std::collections::BTreeMap;

pub(crate) const CULPRIT: &str = "0123456789abcdef0123456789abcdef01234567";

pub(crate) fn cell(config: &str, sha: &str, outcome: Outcome) -> Cell {
    Cell {
        config: config.into(),
        rev: "master".into(),
        sha: sha.into(),
        outcome,
        signature: None,
        duration_s: 40.0,
        build_s: 30.0,
        test_s: 10.0,
        attempts: 1,
        log: "logs/x.log".into(),
        provenance: BTreeMap::new(),
        cached: false,
        ccache: None,
    }
}

pub(crate) fn matrix(cells: Vec<Cell>) -> MatrixResults {
    MatrixResults {
        schema: Kind::Matrix.tag(),
        matrix: "matrix.toml".into(),
        engine: "podman".into(),
        revisions: vec![],
        configs: vec![],
        cells,
        build_only: false,
        applied: Vec::new(),
        invocation: Default::default(),
    }
}

fn probe(sha: &str, outcome: Outcome, verdict: Verdict) -> BisectProbe {
    BisectProbe {
        sha: sha.into(),
        outcome,
        verdict,
        duration_s: 3.25,
        log: "/l/2.log".into(),
        signature: None,
        cached: false,
        candidate: None,
        ccache: None,
        reused_from: None,
    }
}

/// A found culprit whose title and signature try to ping, link and inject HTML.
pub(crate) fn bisect_found() -> BisectResult {
    let mut culprit = probe(CULPRIT, Outcome::GpuFault, Verdict::New);
    culprit.signature = Some("Memory access fault by GPU node-1 @everyone <img src=x>".into());
    BisectResult {
        schema: Kind::Bisect.tag(),
        first_bad: Some(CULPRIT.into()),
        term: "first bad commit".into(),
        conclusion: Conclusion::Found { index: 3 },
        exit_code: 0,
        candidates: vec![CULPRIT.into()],
        candidate_classes: vec![],
        range: BisectRange {
            good: "aaaaaaaaaaaa".into(),
            bad: "bbbbbbbbbbbb".into(),
            first_parent: true,
            path: None,
            commits: 40,
            candidates: 37,
        },
        steps: 6,
        executed: 2,
        probes: vec![probe("cccccccccccc", Outcome::Pass, Verdict::Old), culprit],
        predicate: "regress=crash match=Memory access fault".into(),
        policy: "single run".into(),
        elapsed_s: 300.0,
        answer_s: None,
        commits: vec![CommitInfo {
            sha: CULPRIT.into(),
            title: "HIP: @someone set_rows tweak #42 <b>".into(),
            author: "a".into(),
            date: "2026-01-01".into(),
        }],
        reproduce: None,
        flaky: None,
        validation: None,
        store_runs: None,
        configuration: None,
        budget: None,
        grouping: None,
        reproducer: None,
        endpoint: None,
        backend_ops: None,
        applied: Vec::new(),
        invocation: Default::default(),
    }
}

#[test]
fn bisect_verdict_renders_escaped_everywhere() {
    let r = AnyResult::Bisect(Box::new(bisect_found()));
    let md = render(&[&r]).to_markdown(None);
    assert!(
        md.contains("## setrows-bisect: first bad commit found"),
        "{md}"
    );
    assert!(
        md.contains(
            "**First bad commit:** `0123456789ab` HIP: `@someone set_rows` tweak `#42 <b>`"
        ),
        "{md}"
    );
    assert!(
        md.contains("40 commits (first-parent), 37 candidates"),
        "{md}"
    );
    assert!(md.contains("2 probes in 6 steps (2 run now, 0 from the result store)"));
    assert!(md.contains("| 2 | `0123456789` | HIP: "), "{md}");
    assert!(
        md.contains("| ❌ gpu_fault | new | 3.2 s | `Memory access fault"),
        "{md}"
    );
    let prose = crate::report::escape::outside_code(&md);
    for bad in [
        "@someone",
        "@everyone",
        "#42",
        "<img",
        "<b>",
        "\\",
        "\u{200B}",
    ] {
        assert!(!prose.contains(bad), "{bad} in {prose}");
    }
    assert!(
        md.contains("setrows-bisect --good aaaaaaaaaaaa --bad bbbbbbbbbbbb --regress crash --match 'Memory access fault'"),
        "{md}"
    );
    // The terminal gets the same text as the comment (no picture without probe positions).
    let AnyResult::Bisect(b) = &r else { panic!() };
    assert_eq!(bisect::markdown(b), md);
}

#[test]
fn inconclusive_and_bad_endpoint_say_so() {
    let mut b = bisect_found();
    b.first_bad = None;
    b.conclusion = Conclusion::Ambiguous {
        indices: vec![2, 3],
    };
    b.candidates = vec!["aaaa".into(), "bbbb".into()];
    let md = bisect::markdown(&b);
    assert!(
        md.contains("inconclusive: the first bad commit is one of 2 commits")
            && md.contains("one of these 2:\n\n- `aaaa`")
            && md.contains("- `bbbb`"),
        "{md}"
    );
    b.conclusion = Conclusion::BadEndpoint {
        which: crate::core::search::Endpoint::Bad,
        got: Verdict::Old,
    };
    b.probes[0].verdict = Verdict::Old;
    let md = bisect::markdown(&b);
    assert!(
        md.contains("stopped: an endpoint does not behave as claimed"),
        "{md}"
    );
    assert!(
        md.contains("\\-\\-bad bbbbbbbbbbbb shows the old behaviour (pass)")
            || md.contains("--bad bbbbbbbbbbbb shows the old behaviour (pass)"),
        "{md}"
    );
    // A decode bisect's advice speaks of tokens and decode-probe's own defaults, not the replay's.
    b.reproducer = Some(crate::core::result::ReproducerInfo {
        program: crate::core::result::DECODE_PROGRAM.into(),
        args: ["--steps", "600"].map(String::from).to_vec(),
        source: crate::core::result::FROM_REPRO_ARG.into(),
        env: Vec::new(),
        build_args: Vec::new(),
        more_runs: Vec::new(),
    });
    b.endpoint = None;
    let line = bisect::endpoint_message(&b).unwrap();
    assert!(
        line.contains("600 tokens, every token checked against a decode without graph reuse")
            && line.contains("--repro-arg=--steps --repro-arg=2400")
            && line
                .contains("the default run: no --repro-arg (10000 tokens (decode-probe's default)")
            && !line.contains("replay")
            && !line.contains("decode-reuse"),
        "{line}"
    );
    let md = bisect::markdown(&b);
    assert!(
        md.contains("decode-probe --model MODEL.gguf --steps 600")
            && md.contains("`MODEL.gguf`: the tiny random-weight llama model"),
        "{md}"
    );
    // A kind that takes no --repro-arg (test-backend-ops, ctest) is advised no longer run in
    // them; what ran is its kind's own line, one per run.
    b.reproducer = Some(crate::core::result::ReproducerInfo {
        program: "test-backend-ops".into(),
        args: ["test", "-o", "ADD", "-b", "CPU"]
            .map(String::from)
            .to_vec(),
        source: "--probe-kind backend-ops --op ADD --op MUL".into(),
        env: Vec::new(),
        build_args: Vec::new(),
        more_runs: vec![["test", "-o", "MUL", "-b", "CPU"]
            .map(String::from)
            .to_vec()],
    });
    let line = bisect::endpoint_message(&b).unwrap();
    assert!(
        !line.contains("--repro-arg")
            && line.contains(
                "test-backend-ops test -o ADD -b CPU; test-backend-ops test -o MUL -b CPU"
            ),
        "{line}"
    );
}

#[test]
fn bisect_key_is_stable_and_a_signature_is_another_question() {
    let a = key(&AnyResult::Bisect(Box::new(bisect_found())));
    assert_eq!(
        a,
        bisect_key(
            "aaaaaaaaaaaa",
            "bbbbbbbbbbbb",
            "regress=crash match=Memory access fault",
            None
        )
    );
    assert!(
        a.starts_with("bisect:") && a.len() == "bisect:".len() + 12,
        "{a}"
    );
    // Without --match the key is the one comments were posted under before signatures counted.
    let plain = bisect_key("aaaaaaaaaaaa", "bbbbbbbbbbbb", "regress=crash", None);
    let old = format!(
        "bisect:{}",
        hex::encode(&sha2::Sha256::digest(b"aaaaaaaaaaaa|bbbbbbbbbbbb||crash")[..6])
    );
    assert_eq!(plain, old);
    assert_ne!(
        plain,
        bisect_key("aaaaaaaaaaaa", "bbbbbbbbbbbb", "regress=error", None)
    );
    // Another --match must not overwrite this bisect's comment (issue 12, item 6).
    let m2 = bisect_key(
        "aaaaaaaaaaaa",
        "bbbbbbbbbbbb",
        "regress=crash match=illegal",
        None,
    );
    assert_ne!(a, plain);
    assert_ne!(a, m2);
}

#[test]
fn matrix_files_merge_into_one_table() {
    let file = |rocm: &str, outcome: Outcome| {
        let mut c = cell(&format!("rocm{rocm}"), "53859c2aaaaa", outcome);
        c.provenance = BTreeMap::from([
            ("image".into(), format!("rocm/dev-ubuntu-24.04:{rocm}")),
            ("gpu".into(), "gfx1151 @oncall".into()),
            ("throughput".into(), "9".into()),
        ]);
        if outcome != Outcome::Pass {
            c.signature = Some("HSA_STATUS_ERROR_MEMORY_APERTURE_VIOLATION | x".into());
        }
        let mut m = matrix(vec![c]);
        m.revisions = vec![Rev {
            rev: "master".into(),
            sha: "53859c2aaaaa".into(),
            tree: String::new(),
            checkout: Default::default(),
            facts: Default::default(),
        }];
        m.configs = vec![ConfigRow {
            id: format!("rocm{rocm}"),
            label: format!("hip rocm={rocm} wave_size=32"),
            backend: crate::core::build::Backend::Hip,
            image: None,
        }];
        AnyResult::Matrix(m)
    };
    let a = file("6.4.1", Outcome::GpuFault);
    let b = file("7.0", Outcome::Pass);
    assert_eq!(key(&a), "matrix");
    let md = render(&[&a, &b]).to_markdown(None);
    assert!(
        md.contains("**2 cell(s):** ✅ 1 pass · ❌ 1 gpu_fault"),
        "{md}"
    );
    assert_eq!(
        md.matches("| `rocm").count(),
        2,
        "one row per configuration: {md}"
    );
    assert!(
        md.contains("| id | configuration | master (`53859c2aaa`) |"),
        "{md}"
    );
    assert!(
        md.contains("| `rocm6.4.1` | hip rocm=6.4.1 `wave_size=32` | ❌ gpu_fault [1] |"),
        "{md}"
    );
    assert!(
        md.contains("1. `rocm6.4.1` at `53859c2aaa`: ❌`HSA_STATUS_ERROR_MEMORY_APERTURE_VIOLATION | x` (40.0 s)"),
        "signatures go below the table: {md}"
    );
    assert!(
        md.contains("- **rocm/dev-ubuntu-24.04:7.0**: gpu: `gfx1151 @oncall`, image:"),
        "{md}"
    );
    assert!(
        !md.contains("throughput"),
        "per-run facts stay in the JSON: {md}"
    );
    // The terminal/`matrix-results.md` table of one file is the same renderer.
    let AnyResult::Matrix(m) = &a else { panic!() };
    assert!(m.markdown().contains("| `rocm6.4.1` | hip rocm=6.4.1"));
    assert!(!crate::report::escape::outside_code(&md).contains('\u{200B}'));
}

#[test]
fn every_kind_round_trips_and_others_are_refused() {
    let b = bisect_found();
    let v = serde_json::to_value(&b).unwrap();
    assert_eq!(v["schema"], "setrows-bisect/bisect/1");
    assert_eq!(read(v).unwrap(), AnyResult::Bisect(Box::new(b)));
    let m = matrix(vec![cell("c", "abc", Outcome::Crash)]);
    assert_eq!(
        read(serde_json::to_value(&m).unwrap()).unwrap(),
        AnyResult::Matrix(m)
    );
    let none = read(serde_json::json!({"first_bad": "abc", "probes": []})).unwrap_err();
    assert!(none.to_string().contains("no \"schema\" field"), "{none}");
    let future = read(serde_json::json!({"schema": "setrows-bisect/bisect/2"})).unwrap_err();
    assert!(
        future
            .to_string()
            .contains("\"setrows-bisect/bisect/2\" is not one"),
        "{future}"
    );
    let broken = read(serde_json::json!({"schema": "setrows-bisect/matrix/1", "cells": 3}));
    assert!(broken
        .unwrap_err()
        .to_string()
        .contains("not a valid setrows-bisect/matrix/1"));
}

/// A probe answered by identical artifacts says whose outcome it is (the build ran, the test
/// did not), and the field survives the document's round trip.
#[test]
fn a_skipped_test_names_the_commit_whose_artifacts_were_identical() {
    let mut b = bisect_found();
    b.probes[0].reused_from = Some("dddddddddddd0000".into());
    let md = super::bisect::markdown(&b);
    assert!(
        md.contains("(test skipped: artifacts identical to `dddddddddd`)"),
        "{md}"
    );
    assert_eq!(md.matches("test skipped").count(), 1, "{md}");
    let v = serde_json::to_value(&b).unwrap();
    assert_eq!(v["probes"][0]["reused_from"], "dddddddddddd0000");
    assert!(v["probes"][1].get("reused_from").is_none());
    assert_eq!(read(v).unwrap(), AnyResult::Bisect(Box::new(b)));
}

/// The timeline and JUnit say so too: a CI reader or a glance at the picture must not take a
/// skipped test for a run one.
#[test]
fn timeline_and_junit_mark_a_skipped_test() {
    let mut b = bisect_found();
    b.probes[0].candidate = Some(1);
    b.probes[1].candidate = Some(3);
    b.probes[0].reused_from = Some("dddddddddddd0000".into());
    let (mermaid, text) = super::timeline::render(&b).expect("a timeline");
    let marked: Vec<&str> = text
        .lines()
        .filter(|l| l.contains("test skipped"))
        .collect();
    assert_eq!(marked.len(), 1, "{text}");
    assert!(
        marked[0].contains("1] cccccccccc ")
            && marked[0].ends_with("(test skipped: artifacts = dddddddddd)"),
        "{text}"
    );
    assert_eq!(
        mermaid.matches("same artifacts as dddddddddd").count(),
        1,
        "{mermaid}"
    );
    assert!(
        mermaid
            .lines()
            .any(|l| l.contains("cccccccccc") && l.contains("same artifacts as dddddddddd")),
        "{mermaid}"
    );
    let x = super::junit::render(&[&AnyResult::Bisect(Box::new(b))]);
    assert!(
        x.contains("pass (old) [test skipped: artifacts identical to dddddddddddd]"),
        "{x}"
    );
    assert_eq!(x.matches("test skipped").count(), 1, "{x}");
    assert!(
        x.contains("errors=\"0\" failures=\"0\""),
        "the verdict stays: {x}"
    );
}

/// The report's `show` hint says when the run had its own work dir: `show` reads the default
/// one otherwise, and the hint would point at nothing. The path itself stays out of the log
/// line (it is in the command line).
#[test]
fn the_show_hint_names_the_runs_work_dir() {
    let mut b = bisect_found();
    b.invocation.id = Some("0123456789abcdef99".into());
    b.invocation.argv = [
        "setrows-bisect",
        "--good",
        "a",
        "--work-dir",
        "/tmp/my work",
    ]
    .map(String::from)
    .to_vec();
    let md = super::bisect::markdown(&b);
    assert!(
        md.contains("(`setrows-bisect show 0123456789abcdef` with the same `--work-dir`)"),
        "{md}"
    );
    b.invocation.argv = ["setrows-bisect", "--work-dir=/w"]
        .map(String::from)
        .to_vec();
    let md = super::bisect::markdown(&b);
    assert!(md.contains("with the same `--work-dir`"), "{md}");
    assert!(
        !md.contains("/w`"),
        "the path stays in the command line: {md}"
    );
    b.invocation.argv = ["setrows-bisect", "--good", "a"].map(String::from).to_vec();
    let md = super::bisect::markdown(&b);
    assert!(
        md.contains("`setrows-bisect show 0123456789abcdef`)"),
        "{md}"
    );
}

/// A HIP cell on a machine without an AMD GPU: its build ran and is kept, the report says so
/// with the build's time and log; a cell whose test ran says nothing of the kind.
#[test]
fn a_cell_built_but_not_run_says_so() {
    let mut no_gpu = cell("hip", CULPRIT, Outcome::Untestable);
    no_gpu.signature = Some("no AMD GPU (/dev/kfd is missing on this machine)".into());
    no_gpu.test_s = 0.0;
    no_gpu.log = "/w/logs/ab-0.log".into();
    let mut ran = cell("cpu", CULPRIT, Outcome::Untestable);
    ran.signature = Some("not as asked: graphs asked for".into());
    let md = matrix(vec![no_gpu, ran]).markdown();
    assert!(
        md.contains("(40.0 s, built in 30.0 s, log `logs/ab-0.log`, not run)"),
        "{md}"
    );
    assert_eq!(md.matches("not run)").count(), 1, "{md}");
}

/// A hand-run of the reproducer line is the run that was judged: the environment every probe had
/// is on it and the build's extra CMake arguments beside it (real case 23: without
/// `LLAMA_SET_ROWS=1` and the sanitizer build the fault does not show).
#[test]
fn the_reproducer_line_carries_the_probes_environment_and_build_arguments() {
    let mut b = bisect_found();
    b.reproducer = Some(crate::core::result::ReproducerInfo {
        program: crate::core::result::DECODE_PROGRAM.into(),
        args: Vec::new(),
        source: "default: decode-probe's own (10,000 tokens, 256 KV cells)".into(),
        env: vec![
            "LLAMA_SET_ROWS=1".into(),
            "ASAN_OPTIONS=detect_stack_use_after_return=1".into(),
        ],
        build_args: vec![
            "-DCMAKE_C_FLAGS=-fsanitize=address".into(),
            "-DCMAKE_CXX_FLAGS=-fsanitize=address".into(),
        ],
        more_runs: Vec::new(),
    });
    let md = render(&[&AnyResult::Bisect(Box::new(b.clone()))]).to_markdown(None);
    assert!(
        md.contains("```sh\nLLAMA_SET_ROWS=1 ASAN_OPTIONS=detect_stack_use_after_return=1 decode-probe --model MODEL.gguf\n```"),
        "{md}"
    );
    assert!(
        md.contains("built with these CMake arguments beside the tool's own: `-DCMAKE_C_FLAGS=-fsanitize=address -DCMAKE_CXX_FLAGS=-fsanitize=address`"),
        "{md}"
    );
    // a result written before these fields reads back without them
    let mut json = serde_json::to_value(&b).unwrap();
    let r = json["reproducer"].as_object_mut().unwrap();
    r.remove("env");
    r.remove("build_args");
    let old: crate::core::result::BisectResult = serde_json::from_value(json).unwrap();
    let info = old.reproducer.unwrap();
    assert!(info.env.is_empty() && info.build_args.is_empty());
    assert_eq!(info.command(), "decode-probe --model MODEL.gguf");
}

/// What every probe ran is on the Configuration line and in the Reproduce section.
#[test]
fn the_reproducer_and_its_arguments_are_shown() {
    let mut b = bisect_found();
    b.configuration = Some(crate::core::result::ConfigurationInfo {
        id: Some("c0ffee01".into()),
        label: None,
        source: "embedded matrix.toml".into(),
        image: None,
        settings: vec!["backend=cpu".into()],
        overrides: vec![],
    });
    b.reproducer = Some(crate::core::result::ReproducerInfo {
        program: "setrows-replay".into(),
        args: ["--mode", "reuse", "--steps", "100000", "--check-every", "1"]
            .map(String::from)
            .to_vec(),
        source: "configuration c0ffee01".into(),
        env: Vec::new(),
        build_args: Vec::new(),
        more_runs: Vec::new(),
    });
    let md = render(&[&AnyResult::Bisect(Box::new(b))]).to_markdown(None);
    assert!(
        md.contains("- reproducer: setrows-replay --mode reuse --steps 100000 --check-every 1 (100000 steps, checked every step)"),
        "{md}"
    );
    assert!(
        md.contains("Every probe ran the bundled reproducer (100000 steps, checked every step; arguments: configuration c0ffee01)"),
        "{md}"
    );
}

/// The report gives the time to the answer beside the time to the checked answer, and says
/// nothing of it when no check followed the answer.
#[test]
fn the_time_to_the_answer_stands_beside_the_time_to_the_checked_one() {
    let mut r = bisect_found();
    assert!(!crate::report::bisect::markdown(&r).contains("the answer was known"));
    r.answer_s = Some(120.0);
    let md = crate::report::bisect::markdown(&r);
    assert!(
        md.contains("- the answer was known after 2.0 min; the endpoint check it rested on ended at 5.0 min"),
        "{md}"
    );
}

#[test]
fn a_flaky_answer_says_what_its_confirmation_took() {
    use crate::core::flaky::{Assessment, Confirmation, StopReadings};
    let mut b = bisect_found();
    b.flaky = Some(Assessment {
        confidence: 0.951,
        requested: 0.95,
        rate: 0.3,
        rate_low: 0.15,
        rate_high: 0.5,
        runs: 64,
        confirmation: Some(Confirmation {
            runs: 23,
            at_parent: 21,
            from: 0.81,
            to: 0.951,
            rule: Some(StopReadings {
                cautious: 0.962,
                robust: 0.953,
                rate_bound: 0.17,
            }),
        }),
    });
    let md = render(&[&AnyResult::Bisect(Box::new(b.clone()))]).to_markdown(None);
    assert!(
        md.contains("- confirmation: confirming the answer took 23 of 64 runs (21 at its parent): P(answer) rose from 0.81, when it became the likeliest, to 0.95 (requested 0.95); the rule also asks the requested confidence with one more pass imagined at a bad commit (0.96 at the end) and with the reproduction rate at its lower bound, 0.17 (0.95 at the end)\n"),
        "{md}"
    );
    // A document from before the readings were recorded: the line ends after P(answer).
    let mut old = b.clone();
    old.flaky
        .as_mut()
        .unwrap()
        .confirmation
        .as_mut()
        .unwrap()
        .rule = None;
    let md = render(&[&AnyResult::Bisect(Box::new(old))]).to_markdown(None);
    assert!(md.contains("to 0.95 (requested 0.95)\n"), "{md}");
    // Without one (a document from before it existed) the line is absent.
    b.flaky.as_mut().unwrap().confirmation = None;
    let md = render(&[&AnyResult::Bisect(Box::new(b))]).to_markdown(None);
    assert!(!md.contains("confirming the answer"), "{md}");
}
