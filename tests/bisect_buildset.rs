//! Build-aware candidates on histories built to break them: the culprit is a change the
//! first probe's read set does not contain (a new file in a globbed directory, a header
//! included only on one side, a .cmake file the configure step includes). Every bisection must
//! still name the planted commit, and the range must really have been grouped.

mod common;

use common::git;

use std::fs;
use std::process::Command;

struct Repo {
    dir: tempfile::TempDir,
    shas: Vec<String>,
}

impl Repo {
    fn new(files: &[(&str, &str)]) -> Repo {
        let dir = tempfile::tempdir().unwrap();
        let r = dir.path().join("repo");
        fs::create_dir_all(&r).unwrap();
        git(&r, &["init", "-q", "-b", "main"]);
        let mut repo = Repo {
            dir,
            shas: Vec::new(),
        };
        repo.commit(files, "initial");
        repo
    }
    fn path(&self) -> std::path::PathBuf {
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
    /// Commits that change nothing the build reads.
    fn noise(&mut self, n: usize) {
        for k in 0..n {
            let text = format!("note {} {k}\n", self.shas.len());
            self.commit(&[("docs/notes.md", &text)], "docs");
        }
    }
    /// Bisects the whole history; returns (first_bad, probes run, log).
    fn bisect(&self) -> (String, usize, String) {
        let (first, executed, log, _) = self.bisect_json();
        (first, executed, log)
    }
    /// `bisect`, with the JSON result.
    fn bisect_json(&self) -> (String, usize, String, serde_json::Value) {
        let work = self.dir.path().join("work");
        let json = self.dir.path().join("r.json");
        let out = Command::new(assert_cmd::cargo::cargo_bin("setrows-bisect"))
            .arg("--repo")
            .arg(self.path())
            .args(["--good", &self.shas[0], "--bad", self.shas.last().unwrap()])
            .args(["--build", "test -f build.ninja -o -f Makefile || cmake -S \"$SRC\" -B . -G Ninja >/dev/null; cmake --build ."])
            .args(["--script", "\"$WORK/prog\""])
            .arg("--work-dir")
            .arg(&work)
            .arg("--json")
            .arg(&json)
            .env_remove("SETROWS_WORK_DIR")
            .output()
            .unwrap();
        let log = String::from_utf8_lossy(&out.stderr).to_string()
            + &String::from_utf8_lossy(&out.stdout);
        let r = common::read_json(&json);
        let first = r["first_bad"].as_str().unwrap_or("none").to_string();
        let executed = r["executed"].as_u64().unwrap_or(0) as usize;
        (first, executed, log, r)
    }
}

const MAIN: &str = "#include \"val.h\"\nint main(void) { return VAL == 1 ? 0 : 1; }\n";

#[test]
fn a_new_file_in_a_globbed_directory_is_a_boundary() {
    if !common::have_ninja() {
        return;
    }
    let cm = "cmake_minimum_required(VERSION 3.12)\nproject(p C)\nfile(GLOB S CONFIGURE_DEPENDS src/*.c)\nadd_executable(prog ${S})\ntarget_include_directories(prog PRIVATE src)\n";
    let mut r = Repo::new(&[
        ("CMakeLists.txt", cm),
        ("src/main.c", MAIN),
        ("src/val.h", "#define VAL 1\n"),
    ]);
    r.noise(12);
    // A constructor in a new file of the globbed directory breaks the program.
    let culprit = r.commit(
        &[(
            "src/extra.c",
            "#include <stdlib.h>\n__attribute__((constructor)) static void bad(void) { exit(3); }\n",
        )],
        "add extra.c",
    );
    r.noise(12);
    let (first, _, log) = r.bisect();
    assert_eq!(first, culprit, "{log}");
    assert!(log.contains("build-aware"), "{log}");
}

#[test]
fn a_header_read_only_on_one_side_is_learned_before_the_answer() {
    if !common::have_ninja() {
        return;
    }
    let cm = "cmake_minimum_required(VERSION 3.12)\nproject(p C)\nadd_executable(prog src/main.c)\ntarget_include_directories(prog PRIVATE inc)\n";
    let mut r = Repo::new(&[
        ("CMakeLists.txt", cm),
        ("src/main.c", MAIN),
        ("inc/val.h", "#define VAL 1\n"),
        ("inc/other.h", "#define VAL 1\n"),
    ]);
    r.noise(10);
    // The culprit changes a header the bad commit no longer includes.
    let culprit = r.commit(&[("inc/val.h", "#define VAL 2\n")], "val.h: 2");
    r.noise(10);
    r.commit(
        &[
            (
                "src/main.c",
                "#include \"other.h\"\nint main(void) { return VAL == 1 ? 0 : 1; }\n",
            ),
            ("inc/other.h", "#define VAL 2\n"),
        ],
        "switch to other.h",
    );
    r.noise(10);
    let (first, _, log) = r.bisect();
    assert_eq!(first, culprit, "{log}");
    assert!(log.contains("build-aware"), "{log}");
}

#[test]
fn a_cmake_include_that_changes_an_option_is_a_boundary() {
    if !common::have_ninja() {
        return;
    }
    let cm = "cmake_minimum_required(VERSION 3.12)\nproject(p C)\ninclude(cmake/opts.cmake)\nadd_executable(prog src/main.c)\ntarget_include_directories(prog PRIVATE src)\nif(BROKEN)\n  target_compile_definitions(prog PRIVATE VAL_OVERRIDE=2)\nendif()\n";
    let main = "#include \"val.h\"\n#ifdef VAL_OVERRIDE\n#undef VAL\n#define VAL VAL_OVERRIDE\n#endif\nint main(void) { return VAL == 1 ? 0 : 1; }\n";
    let mut r = Repo::new(&[
        ("CMakeLists.txt", cm),
        ("cmake/opts.cmake", "set(BROKEN OFF)\n"),
        ("src/main.c", main),
        ("src/val.h", "#define VAL 1\n"),
        ("src/unused/x.txt", "x\n"),
    ]);
    r.noise(8);
    r.commit(&[("src/unused/x.txt", "y\n")], "unused dir");
    r.noise(8);
    let culprit = r.commit(&[("cmake/opts.cmake", "set(BROKEN ON)\n")], "BROKEN on");
    r.noise(8);
    let (first, executed, log) = r.bisect();
    assert_eq!(first, culprit, "{log}");
    assert!(log.contains("build-aware"), "{log}");
    // 27 commits, grouped into a handful: fewer runs than a whole-tree bisection's 1 + 5.
    assert!(executed <= 5, "{executed} runs\n{log}");
}

/// Two objects, `big.c` (reads `big.h`) and `small.c` (reads `small.h`); every commit changes
/// `small.h` (so each is its own candidate) and commit 8 of 40 changes `big.h`. The fault
/// shows from commit 3. The first midpoint (15, the stable choice) reproduces, so `--bad` is
/// never built; the next midpoint is chosen from 7..8 (40 commits leave no probe of slack
/// beyond an exact halving: `core::search::budget`), where 8 shares `big.h` with the build of
/// 15 and rebuilds one object, 7 two: the least expected build time takes 8, although the
/// stable key (depth 8, more trailing zeros) names 7.
#[test]
fn the_next_midpoint_is_the_one_that_rebuilds_least() {
    if !common::have_ninja() {
        return;
    }
    let cm = "cmake_minimum_required(VERSION 3.12)\nproject(p C)\nadd_executable(prog src/main.c src/big.c src/small.c)\ntarget_include_directories(prog PRIVATE src)\n";
    let main = "int big(void); int small(void);\nint main(void) { return small() >= 3 ? 1 : 0; }\n";
    let small = |v: usize| format!("#define SMALL {v}\n");
    let mut r = Repo::new(&[
        ("CMakeLists.txt", cm),
        ("src/main.c", main),
        (
            "src/big.c",
            "#include \"big.h\"\nint big(void) { return BIG; }\n",
        ),
        (
            "src/small.c",
            "#include \"small.h\"\nint small(void) { return SMALL; }\n",
        ),
        ("src/big.h", "#define BIG 1\n"),
        ("src/small.h", &small(0)),
    ]);
    for v in 1..=40 {
        let mut files = vec![("src/small.h", small(v))];
        if v == 8 {
            files.push(("src/big.h", "#define BIG 2\n".to_string()));
        }
        let files: Vec<(&str, &str)> = files.iter().map(|(p, t)| (*p, t.as_str())).collect();
        r.commit(&files, &format!("small {v}"));
    }
    let (first, _, log, json) = r.bisect_json();
    assert_eq!(first, r.shas[3], "{log}");
    let probes = json["probes"].as_array().unwrap();
    let order: Vec<usize> = probes
        .iter()
        .map(|p| {
            r.shas
                .iter()
                .position(|s| s == p["sha"].as_str().unwrap())
                .unwrap()
        })
        .collect();
    assert_eq!(
        order[0], 15,
        "the first midpoint goes first: {order:?}\n{log}"
    );
    assert!(
        !order.contains(&40),
        "a reproducing midpoint: --bad is not built: {order:?}"
    );
    assert_eq!(order[1], 8, "second midpoint {order:?}\n{log}");
}
