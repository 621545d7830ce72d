//! `--apply REV:PATH` and `--apply PATCH_FILE` with the real binary on generated histories:
//! the fix's own test applied to every probed tree finds a regression nothing else sees; a
//! tree the patch does not apply to is a skip with git apply's reason; the patch is part of
//! the store key; the files it touches are read (no grouping across them); bad input is one
//! line and exit 2 before anything is made; the report names the patch and its hand-run
//! applies it.

mod common;

use common::{git, read_json};
use serde_json::Value;
use std::fs;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

/// The test every tree carries: it checks nothing until the fix adds its check.
const CHECK_OLD: &str = "#!/bin/sh\n# the project's checks\nexit 0\n";
/// The fix's version: the line the regression breaks is checked.
const CHECK_NEW: &str =
    "#!/bin/sh\n# the project's checks\ngrep -q 'value=1' lib.txt || exit 1\nexit 0\n";
/// `sh tests/check.sh`, run in the checkout.
const SCRIPT: &str = "sh tests/check.sh";

struct Repo {
    dir: tempfile::TempDir,
    shas: Vec<String>,
}

impl Repo {
    fn new() -> Repo {
        let dir = tempfile::tempdir().unwrap();
        fs::create_dir_all(dir.path().join("repo")).unwrap();
        git(&dir.path().join("repo"), &["init", "-q", "-b", "main"]);
        Repo {
            dir,
            shas: Vec::new(),
        }
    }
    fn path(&self) -> PathBuf {
        self.dir.path().join("repo")
    }
    fn commit(&mut self, files: &[(&str, &str)], msg: &str) -> String {
        let r = self.path();
        for (p, text) in files {
            let full = r.join(p);
            fs::create_dir_all(full.parent().unwrap()).unwrap();
            fs::write(full, text).unwrap();
        }
        git(&r, &["add", "-A"]);
        git(&r, &["commit", "-q", "--allow-empty", "-m", msg]);
        let sha = git(&r, &["rev-parse", "HEAD"]);
        self.shas.push(sha.clone());
        sha
    }
    /// `setrows-bisect` over `good..bad` with `--script SCRIPT`, work dir `work`, JSON to
    /// `<work>.json`.
    fn bisect(&self, good: usize, bad: usize, work: &str, extra: &[&str]) -> (Output, Value) {
        let json = self.dir.path().join(format!("{work}.json"));
        let _ = fs::remove_file(&json);
        let out = Command::new(assert_cmd::cargo::cargo_bin("setrows-bisect"))
            .arg("--repo")
            .arg(self.path())
            .args(["--good", &self.shas[good], "--bad", &self.shas[bad]])
            .args(["--script", SCRIPT])
            .arg("--work-dir")
            .arg(self.dir.path().join(work))
            .arg("--json")
            .arg(&json)
            .args(extra)
            .env_remove("SETROWS_WORK_DIR")
            .env("SETROWS_PROGRESS", "none")
            .output()
            .unwrap();
        let v = if json.is_file() {
            read_json(&json)
        } else {
            Value::Null
        };
        (out, v)
    }
}

fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

/// c0 good; c1, c2 docs; c3 the regression (value=2), which tests/check.sh does not check;
/// c4, c5 docs (c5 is --bad); c6 the fix: value=1 again and the check that sees it.
fn regression_history() -> Repo {
    let mut r = Repo::new();
    r.commit(
        &[("lib.txt", "value=1\n"), ("tests/check.sh", CHECK_OLD)],
        "initial",
    );
    r.commit(&[("docs/a.md", "a\n")], "docs a");
    r.commit(&[("docs/b.md", "b\n")], "docs b");
    r.commit(&[("lib.txt", "value=2\n")], "lib: the regression");
    r.commit(&[("docs/c.md", "c\n")], "docs c");
    r.commit(&[("docs/d.md", "d\n")], "docs d");
    r.commit(
        &[("lib.txt", "value=1\n"), ("tests/check.sh", CHECK_NEW)],
        "fix lib, with its test",
    );
    r
}

fn fix_test(r: &Repo) -> String {
    format!("{}:tests/check.sh", r.shas[6])
}

#[test]
fn the_fixs_test_applied_finds_the_regression_and_not_without() {
    let r = regression_history();
    // Without the fix's test every tree passes: --bad passes, no answer.
    let (out, v) = r.bisect(0, 5, "work", &[]);
    assert_ne!(out.status.code(), Some(0), "{}", stderr(&out));
    assert_ne!(v["first_bad"], Value::String(r.shas[3].clone()), "{v}");
    // With it, the regression is found, and the result names the patch.
    let arg = fix_test(&r);
    let (out, v) = r.bisect(0, 5, "work", &["--apply", &arg]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert_eq!(v["first_bad"], Value::String(r.shas[3].clone()), "{v}");
    let applied = &v["applied"][0];
    assert_eq!(applied["given"], Value::String(arg.clone()));
    assert_eq!(applied["commit"], Value::String(r.shas[6].clone()));
    assert_eq!(applied["files"], serde_json::json!(["tests/check.sh"]));
    // The checkout holds the commit's own file again after the probe: no patch leaks into
    // the next probe (the slot is reused).
    let leaked: Vec<PathBuf> = walk(&r.dir.path().join("work").join("checkouts"))
        .into_iter()
        .filter(|p| p.ends_with("tests/check.sh"))
        .filter(|p| fs::read_to_string(p).unwrap() != CHECK_OLD)
        .collect();
    assert!(
        leaked.is_empty(),
        "patched files left in a checkout: {leaked:?}"
    );
}

fn walk(dir: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        for e in fs::read_dir(&d).into_iter().flatten().flatten() {
            let p = e.path();
            if p.is_dir() {
                stack.push(p);
            } else {
                out.push(p);
            }
        }
    }
    out
}

#[test]
fn a_tree_the_patch_does_not_apply_to_is_a_skip_with_the_reason() {
    let mut r = Repo::new();
    r.commit(
        &[("lib.txt", "value=1\n"), ("tests/check.sh", CHECK_OLD)],
        "initial",
    );
    // c1 rewrites the lines the fix's hunk stands on: the patch does not apply there.
    r.commit(
        &[("tests/check.sh", "#!/bin/sh\n# other checks\nexit 0\n")],
        "tests: reworded",
    );
    r.commit(&[("tests/check.sh", CHECK_OLD)], "tests: back");
    r.commit(&[("lib.txt", "value=2\n")], "lib: the regression");
    r.commit(
        &[("lib.txt", "value=1\n"), ("tests/check.sh", CHECK_NEW)],
        "fix lib, with its test",
    );
    let arg = format!("{}:tests/check.sh", r.shas[4]);
    let (out, v) = r.bisect(0, 3, "work", &["--apply", &arg]);
    let probes = v["probes"].as_array().unwrap_or_else(|| panic!("{v}"));
    let c1 = probes
        .iter()
        .find(|p| p["sha"] == Value::String(r.shas[1].clone()))
        .unwrap_or_else(|| panic!("c1 was not probed: {v}"));
    assert_eq!(c1["outcome"], "untestable", "{c1}");
    assert_eq!(c1["verdict"], "skip", "{c1}");
    let why = c1["signature"].as_str().unwrap_or("");
    assert!(
        why.contains("does not apply") && why.contains(&arg),
        "{why}"
    );
    // The skip is no verdict: the answer is the regression, found around it.
    assert_eq!(
        v["first_bad"],
        Value::String(r.shas[3].clone()),
        "{v}\n{}",
        stderr(&out)
    );
}

/// The fix's test file as the fix's parent has it, with the line two above the fix's hunk
/// (`a=…`) as given: older trees had `a=0`, so the diff's context does not match them.
fn check_with(a: &str, checked: bool) -> String {
    let check = if checked {
        "grep -q 'value=1' lib.txt || exit 1\n"
    } else {
        ""
    };
    format!("#!/bin/sh\n# the project's checks\na={a}\nb=2\n{check}exit 0\n")
}

#[test]
fn a_tree_whose_lines_near_the_hunk_moved_gets_the_fix_by_a_three_way_merge() {
    let mut r = Repo::new();
    r.commit(
        &[
            ("lib.txt", "value=1\n"),
            ("tests/check.sh", &check_with("0", false)),
        ],
        "initial",
    );
    r.commit(&[("docs/a.md", "a\n")], "docs a");
    r.commit(&[("lib.txt", "value=2\n")], "lib: the regression");
    r.commit(&[("tests/check.sh", &check_with("1", false))], "tests: a=1");
    r.commit(&[("docs/b.md", "b\n")], "docs b");
    r.commit(
        &[
            ("lib.txt", "value=1\n"),
            ("tests/check.sh", &check_with("1", true)),
        ],
        "fix lib, with its test",
    );
    // git apply alone refuses c0..c2 (the context line a=1 is a=0 there).
    let arg = format!("{}:tests/check.sh", r.shas[5]);
    let (out, v) = r.bisect(0, 4, "work", &["--apply", &arg]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert_eq!(v["first_bad"], Value::String(r.shas[2].clone()), "{v}");
    let probes = v["probes"].as_array().unwrap_or_else(|| panic!("{v}"));
    assert!(
        probes.iter().all(|p| p["outcome"] != "untestable"),
        "a tree a three-way merge takes is no skip: {v}"
    );
    // Both sides of the answer are trees the plain diff does not fit: c2 failed ("new"), a tree
    // before it (c0 or c1) passed ("old"), so the merge is what decided the answer.
    let verdict = |i: usize| {
        probes
            .iter()
            .find(|p| p["sha"] == Value::String(r.shas[i].clone()))
            .map(|p| p["verdict"].as_str().unwrap_or("").to_string())
    };
    assert_eq!(verdict(2).as_deref(), Some("new"), "{v}");
    assert!(
        [verdict(0), verdict(1)].contains(&Some("old".to_string())),
        "no tree before the regression was probed: {v}"
    );
}

#[test]
fn the_patch_is_part_of_the_store_key() {
    let r = regression_history();
    let arg = fix_test(&r);
    // The same trees, probed first without the patch, then with it, in one work dir.
    let (_, plain) = r.bisect(0, 5, "work", &[]);
    assert!(
        plain["probes"].as_array().is_some_and(|p| !p.is_empty()),
        "{plain}"
    );
    let (out, patched) = r.bisect(0, 5, "work", &["--apply", &arg]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let probes = patched["probes"].as_array().unwrap();
    assert!(
        probes.iter().all(|p| p["cached"] != Value::Bool(true)),
        "a patched tree was answered from the unpatched tree's result: {patched}"
    );
    // The same patched question again is answered from the store.
    let (_, again) = r.bisect(0, 5, "work", &["--apply", &arg]);
    let probes = again["probes"].as_array().unwrap();
    assert!(!probes.is_empty());
    assert!(
        probes.iter().all(|p| p["cached"] == Value::Bool(true)),
        "{again}"
    );
    assert_eq!(again["first_bad"], patched["first_bad"]);
    // A patch file with the same diff is the same patch: its key is its text.
    let file = r.dir.path().join("fix.patch");
    let diff = git(
        &r.path(),
        &[
            "diff",
            &format!("{}^", r.shas[6]),
            &r.shas[6],
            "--",
            "tests/check.sh",
        ],
    );
    fs::write(&file, diff + "\n").unwrap();
    let (out, by_file) = r.bisect(0, 5, "work", &["--apply", file.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert_eq!(by_file["first_bad"], Value::String(r.shas[3].clone()));
}

/// A CMake project whose program reads nothing of `t/list.txt`; c1..c4 change only that file
/// (far from its first line), c5 breaks the program. The fix's patch changes the first line
/// of `t/list.txt`.
fn grouping_history() -> Repo {
    let mut r = Repo::new();
    let list = |n: usize| {
        let mut s = String::from("head\n");
        for i in 0..12 {
            s.push_str(&format!("line {i}\n"));
        }
        s.push_str(&format!("tail {n}\n"));
        s
    };
    r.commit(
        &[
            (
                "CMakeLists.txt",
                "cmake_minimum_required(VERSION 3.10)\nproject(p C)\nadd_executable(prog main.c)\n",
            ),
            ("main.c", "int main(void) { return 0; }\n"),
            ("t/list.txt", &list(0)),
        ],
        "initial",
    );
    for n in 1..5 {
        r.commit(&[("t/list.txt", &list(n))], "list");
    }
    r.commit(
        &[("main.c", "int main(void) { return 1; }\n")],
        "the regression",
    );
    // Only the first line: the hunk applies to every tree of the range.
    let fixed = list(4).replacen("head\n", "head, checked\n", 1);
    r.commit(&[("t/list.txt", &fixed)], "fix: the list's head");
    r
}

fn bisect_cmake(r: &Repo, work: &str, extra: &[&str]) -> (Output, Value) {
    let json = r.dir.path().join(format!("{work}.json"));
    let out = Command::new(assert_cmd::cargo::cargo_bin("setrows-bisect"))
        .arg("--repo")
        .arg(r.path())
        .args(["--good", &r.shas[0], "--bad", &r.shas[5]])
        .args(["--build", "test -f build.ninja -o -f Makefile || cmake -S \"$SRC\" -B . -G Ninja >/dev/null; cmake --build ."])
        .args(["--script", "\"$WORK/prog\""])
        .arg("--work-dir")
        .arg(r.dir.path().join(work))
        .arg("--json")
        .arg(&json)
        .args(extra)
        .env_remove("SETROWS_WORK_DIR")
        .env("SETROWS_PROGRESS", "none")
        .output()
        .unwrap();
    let v = read_json(&json);
    (out, v)
}

#[test]
fn files_the_patch_touches_are_read_so_no_group_spans_them() {
    assert!(common::have_ninja(), "cmake and ninja build the project");
    let r = grouping_history();
    // Without the patch the list is read by nothing: the commits that change only it fold.
    let (out, plain) = bisect_cmake(&r, "plain", &[]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert_eq!(plain["first_bad"], Value::String(r.shas[5].clone()));
    let g = &plain["grouping"];
    assert!(
        g["groups"].as_u64() < g["candidates"].as_u64(),
        "the unpatched range should fold: {g}"
    );
    // With it, the list is read: every commit that changes it stays its own.
    let arg = format!("{}:t/list.txt", r.shas[6]);
    let (out, patched) = bisect_cmake(&r, "patched", &["--apply", &arg]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert_eq!(patched["first_bad"], Value::String(r.shas[5].clone()));
    let probes = patched["probes"].as_array().unwrap();
    assert!(
        probes.iter().all(|p| p["outcome"] != "untestable"),
        "the patch applies to every tree here: {patched}"
    );
    let g = &patched["grouping"];
    assert_eq!(g["groups"], g["candidates"], "{g}");
}

fn expect_one_line(out: &Output, needle: &str) {
    assert_eq!(out.status.code(), Some(2), "{}", stderr(out));
    let err = stderr(out);
    let lines: Vec<&str> = err.lines().filter(|l| !l.trim().is_empty()).collect();
    assert_eq!(lines.len(), 1, "one line expected: {err}");
    assert!(
        lines[0].starts_with("setrows-bisect: error: --apply"),
        "{err}"
    );
    assert!(lines[0].contains(needle), "{needle:?} not in {err}");
}

#[test]
fn bad_apply_input_is_one_line_and_exit_2_before_any_work() {
    let r = regression_history();
    let text = r.dir.path().join("notes.txt");
    fs::write(&text, "not a diff at all\n").unwrap();
    let text = text.to_str().unwrap().to_string();
    let on_path = format!("{}:no/such/file.c", r.shas[6]);
    let cases: [(&str, &str); 4] = [
        ("no-such-rev:tests/check.sh", "no revision `no-such-rev`"),
        (&on_path, "does not change `no/such/file.c`"),
        (&text, "not a patch"),
        ("missing.patch", "cannot read it as a patch file"),
    ];
    for (arg, needle) in cases {
        let (out, _) = r.bisect(0, 5, "work", &["--apply", arg]);
        expect_one_line(&out, needle);
        assert!(
            !r.dir.path().join("work").exists(),
            "--apply {arg}: the work dir was made"
        );
    }
    // matrix takes the same flag, checked the same way.
    let out = Command::new(assert_cmd::cargo::cargo_bin("setrows-bisect"))
        .args(["matrix", "--repo"])
        .arg(r.path())
        .args(["--rev", "HEAD", "--apply", "no-such-rev:x"])
        .arg("--work-dir")
        .arg(r.dir.path().join("work"))
        .arg("--out")
        .arg(r.dir.path().join("out"))
        .env_remove("SETROWS_WORK_DIR")
        .output()
        .unwrap();
    expect_one_line(&out, "no revision `no-such-rev`");
    assert!(!r.dir.path().join("work").exists());
}

#[test]
fn the_report_names_the_patch_and_its_hand_run_applies_it() {
    let r = regression_history();
    let arg = fix_test(&r);
    let report = r.dir.path().join("report.md");
    let (out, v) = r.bisect(
        0,
        5,
        "work",
        &["--apply", &arg, "--report", report.to_str().unwrap()],
    );
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let md = fs::read_to_string(&report).unwrap();
    let saved = v["applied"][0]["saved"].as_str().unwrap().to_string();
    assert!(Path::new(&saved).is_file(), "{saved}");
    assert_eq!(
        fs::read_to_string(&saved).unwrap(),
        git(
            &r.path(),
            &[
                "diff",
                &format!("{}^", r.shas[6]),
                &r.shas[6],
                "--",
                "tests/check.sh"
            ]
        ) + "\n"
    );
    assert!(md.contains(&arg), "{md}");
    // A dry run names it too, and makes nothing.
    let dry = Command::new(assert_cmd::cargo::cargo_bin("setrows-bisect"))
        .arg("--repo")
        .arg(r.path())
        .args([
            "--good", &r.shas[0], "--bad", &r.shas[5], "--script", SCRIPT,
        ])
        .args(["--apply", &arg, "--dry-run"])
        .arg("--work-dir")
        .arg(r.dir.path().join("dry-work"))
        .env_remove("SETROWS_WORK_DIR")
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&dry.stdout);
    assert!(
        text.contains(&format!("applied before every build: {arg}")),
        "{text}{}",
        stderr(&dry)
    );
    assert!(!r.dir.path().join("dry-work").exists());
    assert!(md.contains(&format!("git apply -3 {saved}")), "{md}");
    // The hand-run of one probe applies it after its cd into the checkout, before the test.
    let hand = v["reproduce"].as_str().unwrap();
    let cd = hand.find("\ncd ").unwrap();
    let apply = hand.find(&format!("git apply -3 {saved}")).unwrap();
    let test = hand.find("sh -c").unwrap();
    assert!(cd < apply && apply < test, "{hand}");
}

/// `matrix` applies the patch to every cell's tree: the bad revision's cell passes without the
/// fix's test and fails with it, and the patched cell is not the unpatched cell's stored result.
#[test]
fn matrix_cells_get_the_patch_too() {
    let r = regression_history();
    let conf = r.dir.path().join("m.toml");
    fs::write(
        &conf,
        "[probe]\nkind = \"script\"\nscript = 'sh tests/check.sh'\n[matrix]\nbackend = [\"cpu\"]\n",
    )
    .unwrap();
    let out = r.dir.path().join("out");
    let run = |extra: &[&str]| -> Value {
        let o = Command::new(assert_cmd::cargo::cargo_bin("setrows-bisect"))
            .args(["matrix", "--rev", &r.shas[5], "--engine", "none"])
            .arg("--matrix")
            .arg(&conf)
            .arg("--repo")
            .arg(r.path())
            .arg("--out")
            .arg(&out)
            .arg("--work-dir")
            .arg(r.dir.path().join("work"))
            .args(extra)
            .env_remove("SETROWS_WORK_DIR")
            .output()
            .unwrap();
        assert!(o.status.code().is_some_and(|c| c < 2), "{}", stderr(&o));
        read_json(&out.join("matrix-results.json"))
    };
    let plain = run(&[]);
    assert_eq!(plain["cells"][0]["outcome"], "pass", "{plain}");
    let arg = fix_test(&r);
    let patched = run(&["--apply", &arg]);
    assert_eq!(patched["cells"][0]["outcome"], "wrong_result", "{patched}");
    assert_eq!(patched["cells"][0]["cached"], false, "{patched}");
    assert_eq!(patched["applied"][0]["given"], Value::String(arg.clone()));
    let md = fs::read_to_string(out.join("matrix-results.md")).unwrap();
    assert!(md.contains(&arg) && md.contains("git apply "), "{md}");
}
