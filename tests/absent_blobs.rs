//! Histories whose object store lacks blobs, as a real user's may (issue 34 item 3): a
//! snapshot missing a data file (lucebox's lacks `server/eval/humaneval_plus/humanevalplus.jsonl`)
//! and a partial clone (`git clone --filter`), through the real binary with `--script`.
//!
//! A blob absent outside the tested tree (`--path`, or the subtree the layout detected) is left
//! out and the bisection completes; one inside it is fetched from a promisor remote by git; when
//! that remote is unreachable the run stops with one line naming the path and what to run, and
//! after the fix the same command finishes from the probes it kept.

mod common;
mod lucebox_history;

use common::git;
use lucebox_history::{build, Step, DATA, GGML};
use serde_json::Value;
use std::path::Path;
use std::process::{Command, Output};

fn bisect(repo: &Path, good: &str, bad: &str, work: &Path, json: &Path, extra: &[&str]) -> Output {
    Command::new(assert_cmd::cargo::cargo_bin("setrows-bisect"))
        .arg("--repo")
        .arg(repo)
        .args(["--good", good, "--bad", bad])
        .arg("--work-dir")
        .arg(work)
        .arg("--json")
        .arg(json)
        .args(extra)
        .env_remove("SETROWS_WORK_DIR")
        .output()
        .expect("run setrows-bisect")
}

fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

fn read_json(p: &Path) -> Value {
    serde_json::from_str(&std::fs::read_to_string(p).expect("written")).expect("json")
}

/// The `setrows-bisect: error:` lines: a stop is exactly one.
fn error_lines(text: &str) -> Vec<&str> {
    text.lines()
        .filter(|l| l.starts_with("setrows-bisect: error:"))
        .collect()
}

fn missing(repo: &Path) -> Vec<String> {
    git(repo, &["rev-list", "--objects", "--all", "--missing=print"])
        .lines()
        .filter_map(|l| l.strip_prefix('?').map(str::to_string))
        .collect()
}

#[test]
fn a_lucebox_shaped_snapshot_without_its_data_blob_bisects_with_a_script() {
    const STEPS: [Step; 8] = [
        Step::Start,
        Step::Vendor,
        Step::App,
        Step::Ggml,
        Step::Fault,
        Step::App,
        Step::Ggml,
        Step::App,
    ];
    const FAULT_AT: usize = 4;
    let tmp = tempfile::tempdir().unwrap();
    // A ggml directory the layout recognises; the fault is a line the script looks for.
    let ggml = |dir: &Path, n: usize, fault: bool| {
        std::fs::create_dir_all(dir.join("include")).unwrap();
        std::fs::create_dir_all(dir.join("src")).unwrap();
        std::fs::write(dir.join("CMakeLists.txt"), "project(ggml C)\n").unwrap();
        std::fs::write(dir.join("include/ggml.h"), format!("// step {n}\n")).unwrap();
        let state = if fault { "broken" } else { "fine" };
        std::fs::write(dir.join("src/state.txt"), format!("{state} at {n}\n")).unwrap();
    };
    let h = build(&tmp.path().join("repo"), &STEPS, &ggml);
    h.delete_data_blob();
    let script = format!("! grep -q broken {GGML}/src/state.txt");
    let (good, bad) = (h.shas[1].as_str(), h.shas.last().unwrap().as_str());

    // The subtree detected, then named: the data file is outside it.
    for (name, extra) in [
        ("auto", vec!["--script", script.as_str()]),
        ("path", vec!["--script", script.as_str(), "--path", GGML]),
    ] {
        let json = tmp.path().join(format!("{name}.json"));
        let out = bisect(&h.repo, good, bad, &tmp.path().join(name), &json, &extra);
        let t = stderr(&out);
        assert_eq!(out.status.code(), Some(0), "{name}: {t}");
        let r = read_json(&json);
        assert_eq!(r["first_bad"], h.shas[FAULT_AT].as_str(), "{name}: {t}");
        assert_eq!(r["range"]["path"], GGML, "{name}");
        let said: Vec<&str> = t.lines().filter(|l| l.contains(DATA)).collect();
        assert_eq!(said.len(), 1, "said once, whatever the probes: {t}");
        assert!(said[0].contains("not written"), "{t}");
    }

    // The whole tree tested: the data file is read, no remote has it: one line, nothing else.
    let json = tmp.path().join("whole.json");
    let out = bisect(
        &h.repo,
        good,
        bad,
        &tmp.path().join("whole"),
        &json,
        &["--script", &script, "--path", "."],
    );
    let t = stderr(&out);
    assert_eq!(out.status.code(), Some(3), "{t}");
    let errors = error_lines(&t);
    assert_eq!(errors.len(), 1, "{t}");
    for part in [
        DATA,
        &h.data_blob,
        "no remote",
        "remote add origin",
        "--path DIR",
    ] {
        assert!(errors[0].contains(part), "`{part}` in {}", errors[0]);
    }
}

/// A source repository serving partial clones: `lib/a.c` carries the fault from `fault_at` on,
/// `lib/table.dat` is a small blob before `big_from` and a 4 KB one (different at each commit)
/// from there, `data/big.bin` a 4 KB one outside `lib` at every commit.
fn served(root: &Path, commits: usize, fault_at: usize, big_from: usize) -> Vec<String> {
    std::fs::create_dir_all(root.join("lib")).unwrap();
    std::fs::create_dir_all(root.join("data")).unwrap();
    git(root, &["init", "-q", "-b", "main"]);
    git(root, &["config", "uploadpack.allowFilter", "true"]);
    let mut shas = Vec::new();
    for n in 0..commits {
        let state = if n >= fault_at { "bad" } else { "good" };
        std::fs::write(root.join("lib/a.c"), format!("{state} {n}\n")).unwrap();
        let table = match n >= big_from {
            true => format!("row {n}\n").repeat(600),
            false => format!("small {n}\n"),
        };
        std::fs::write(root.join("lib/table.dat"), table).unwrap();
        std::fs::write(root.join("data/big.bin"), format!("{n}\n").repeat(2000)).unwrap();
        git(root, &["add", "-A"]);
        git(root, &["commit", "-q", "-m", &format!("c{n}")]);
        shas.push(git(root, &["rev-parse", "HEAD"]));
    }
    shas
}

/// A partial clone of `src` leaving every blob over 1 KB on the remote, recorded as git before
/// 2.4x records one (`extensions.partialClone`, which libgit2 refuses unless told).
fn partial_clone(src: &Path, to: &Path) {
    let url = format!("file://{}", src.display());
    let parent = to.parent().unwrap();
    let name = to.file_name().unwrap().to_str().unwrap();
    git(
        parent,
        &[
            "clone",
            "-q",
            "--no-checkout",
            "--filter=blob:limit=1k",
            &url,
            name,
        ],
    );
    git(to, &["config", "core.repositoryformatversion", "1"]);
    git(to, &["config", "extensions.partialClone", "origin"]);
}

const SCRIPT: &str = "! grep -q bad lib/a.c && grep -q row lib/table.dat";

#[test]
fn a_partial_clone_fetches_the_tested_blobs_from_its_promisor_remote() {
    let tmp = tempfile::tempdir().unwrap();
    let src = tmp.path().join("src");
    // Every commit's table is big, so every probe's checkout needs a fetch.
    let shas = served(&src, 8, 5, 0);
    let pc = tmp.path().join("pc");
    partial_clone(&src, &pc);
    let table = |i: usize| git(&src, &["rev-parse", &format!("{}:lib/table.dat", shas[i])]);
    let outside = git(&src, &["rev-parse", &format!("{}:data/big.bin", shas[7])]);
    let absent = missing(&pc);
    assert!(
        absent.contains(&table(5)) && absent.contains(&outside),
        "{absent:?}"
    );

    let json = tmp.path().join("r.json");
    let out = bisect(
        &pc,
        &shas[0],
        &shas[7],
        &tmp.path().join("work"),
        &json,
        &["--script", SCRIPT, "--path", "lib"],
    );
    let t = stderr(&out);
    assert_eq!(out.status.code(), Some(0), "{t}");
    assert_eq!(read_json(&json)["first_bad"], shas[5].as_str(), "{t}");
    let absent = missing(&pc);
    assert!(
        !absent.contains(&table(5)),
        "the culprit's table was fetched"
    );
    // Outside `lib`: left out, never fetched.
    assert!(absent.contains(&outside), "{absent:?}");
    assert!(
        t.contains("not written") && t.contains("data/big.bin"),
        "{t}"
    );
}

#[test]
fn an_unreachable_promisor_remote_stops_with_one_line_and_the_rerun_keeps_the_probes() {
    let tmp = tempfile::tempdir().unwrap();
    let src = tmp.path().join("src");
    // Tables are small (in the clone) before commit 5, big (on the remote only) from it.
    let shas = served(&src, 8, 5, 5);
    let pc = tmp.path().join("pc");
    partial_clone(&src, &pc);
    let gone = tmp.path().join("src-gone");
    std::fs::rename(&src, &gone).unwrap();

    let script = "! grep -q bad lib/a.c && test -s lib/table.dat";
    let args = ["--script", script, "--path", "lib"];
    let work = tmp.path().join("work");
    let json = tmp.path().join("r.json");
    let out = bisect(&pc, &shas[0], &shas[7], &work, &json, &args);
    let t = stderr(&out);
    assert_eq!(out.status.code(), Some(3), "{t}");
    let errors = error_lines(&t);
    assert_eq!(errors.len(), 1, "{t}");
    let line = errors[0];
    for part in [
        "lib/table.dat",
        "git fetch origin",
        &format!("git -C {}", pc.display()),
        "remote set-url origin",
        // git's own word on the remote, not its advice after it
        "does not appear to be a git repository",
        "the same command resumes",
    ] {
        assert!(line.contains(part), "`{part}` in {line}");
    }
    let before: Vec<&str> = t.lines().filter(|l| l.contains(" -> ")).collect();
    assert!(!before.is_empty(), "some probes ran before the stop: {t}");

    // The remote back: the same command fetches, finishes, and re-runs none of those probes.
    std::fs::rename(&gone, &src).unwrap();
    let out = bisect(&pc, &shas[0], &shas[7], &work, &json, &args);
    let t = stderr(&out);
    assert_eq!(out.status.code(), Some(0), "{t}");
    let r = read_json(&json);
    assert_eq!(r["first_bad"], shas[5].as_str(), "{t}");
    let probes = r["probes"].as_array().unwrap().len();
    let executed = r["executed"].as_u64().unwrap() as usize;
    assert_eq!(
        probes - executed,
        before.len(),
        "the first run's probes came from the store: {r:#}"
    );
}
