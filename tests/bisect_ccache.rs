//! Whether ccache hit, as the user sees it (issue 13): a real bisect of a real CMake + C
//! history through the binary, with ccache wired in. Each commit changes one compiled file;
//! the first midpoint's full build compiles every file, so a later probe whose files are back
//! at content compiled before (a file the newer probe changed and this one does not) must
//! hit. The counts come from each probe's own stats log, so they are exact.

mod common;

use common::git;

use common::tools;
use std::fs;
use std::path::Path;
use std::process::Command;

const FILES: [&str; 8] = ["a", "b", "c", "d", "e", "f", "g", "h"];

/// `name.c` defining `int name(void)`, returning `value`.
fn unit(name: &str, value: u32) -> (String, String) {
    (
        format!("{name}.c"),
        format!("int {name}(void) {{ return {value}; }}\n"),
    )
}

/// c0 (good) .. c8 (bad): commit k sets file k-1 to 1; the culprit is where `e` becomes 1,
/// since the program fails when e() != 0.
fn history(repo: &Path) -> Vec<String> {
    fs::create_dir_all(repo).unwrap();
    git(repo, &["init", "-q", "-b", "main"]);
    let decls: String = FILES.iter().map(|f| format!("int {f}(void);\n")).collect();
    let srcs: Vec<String> = FILES.iter().map(|f| format!("{f}.c")).collect();
    fs::write(
        repo.join("CMakeLists.txt"),
        format!(
            "cmake_minimum_required(VERSION 3.17)\nproject(p C)\nadd_executable(prog main.c {})\n",
            srcs.join(" ")
        ),
    )
    .unwrap();
    fs::write(
        repo.join("main.c"),
        format!("{decls}int main(void) {{ return e() == 0 ? 0 : 1; }}\n"),
    )
    .unwrap();
    let mut shas = Vec::new();
    for k in 0..=FILES.len() {
        if k > 0 {
            let (p, text) = unit(FILES[k - 1], 1);
            fs::write(repo.join(p), text).unwrap();
        } else {
            for f in FILES {
                let (p, text) = unit(f, 0);
                fs::write(repo.join(p), text).unwrap();
            }
        }
        git(repo, &["add", "-A"]);
        git(repo, &["commit", "-q", "-m", &format!("c{k}")]);
        shas.push(git(repo, &["rev-parse", "HEAD"]));
    }
    shas
}

fn bisect(repo: &Path, shas: &[String], work: &Path, cache: &Path, out: &Path) -> String {
    bisect_with_path(repo, shas, work, cache, out, None)
}

fn bisect_with_path(
    repo: &Path,
    shas: &[String],
    work: &Path,
    cache: &Path,
    out: &Path,
    path: Option<&Path>,
) -> String {
    let json = out.join("r.json");
    let report = out.join("r.md");
    let mut cmd = Command::new(assert_cmd::cargo::cargo_bin("setrows-bisect"));
    if let Some(p) = path {
        cmd.env("PATH", p);
    }
    let run = cmd
        .arg("--repo")
        .arg(repo)
        .args(["--good", &shas[0], "--bad", shas.last().unwrap()])
        .args([
            "--build",
            "test -f build.ninja -o -f Makefile || cmake -S \"$SRC\" -B . -G Ninja >/dev/null; cmake --build .",
        ])
        .args(["--script", "\"$WORK/prog\""])
        .arg("--work-dir")
        .arg(work)
        .arg("--json")
        .arg(&json)
        .arg("--report")
        .arg(&report)
        .env_remove("SETROWS_WORK_DIR")
        // Never the user's cache, nor their ccache settings.
        .env("CCACHE_DIR", cache)
        .env_remove("CCACHE_DISABLE")
        .env_remove("CCACHE_STATSLOG")
        .env_remove("CCACHE_CONFIGPATH")
        .output()
        .unwrap();
    let log = String::from_utf8_lossy(&run.stderr).to_string();
    assert!(json.is_file(), "{log}");
    log
}

fn leftover_stats_logs(dir: &Path, out: &mut Vec<String>) {
    for e in fs::read_dir(dir).into_iter().flatten().flatten() {
        let p = e.path();
        if p.is_dir() && !p.is_symlink() {
            leftover_stats_logs(&p, out);
        } else if e
            .file_name()
            .to_string_lossy()
            .starts_with(".setrows-ccache-")
        {
            out.push(p.display().to_string());
        }
    }
}

#[test]
fn the_report_says_how_often_ccache_hit_counting_only_builds_run_now() {
    let ccache = setrows_bisect::probe::exec::which("ccache");
    let tools_there = common::have_ninja();
    if tools::require(ccache, "ccache", "scripts/setup.d/00-base.sh").is_none() || !tools_there {
        return;
    }
    let d = tempfile::tempdir().unwrap();
    let (repo, work, cache) = (
        d.path().join("repo"),
        d.path().join("work"),
        d.path().join("cache"),
    );
    let shas = history(&repo);
    let log = bisect(&repo, &shas, &work, &cache, d.path());
    let r = common::read_json(&d.path().join("r.json"));
    assert_eq!(r["first_bad"].as_str(), Some(shas[5].as_str()), "{log}");
    let probes = r["probes"].as_array().unwrap();
    assert!(probes.len() >= 3, "{r:#}");
    let (mut hits, mut misses) = (0, 0);
    for p in probes {
        assert_eq!(p["cached"], false, "{p:#}");
        let c = &p["ccache"];
        assert_eq!(
            c["state"], "used",
            "every build ran through ccache: {p:#}\n{log}"
        );
        hits += c["hits"].as_u64().unwrap();
        misses += c["misses"].as_u64().unwrap();
    }
    // The first build (the first midpoint) meets a cold cache: all misses. Later probes
    // recompile only the files that differ from the build dir's last tree; those back at
    // content an earlier probe compiled hit.
    assert_eq!(probes[0]["ccache"]["hits"], 0, "{r:#}");
    assert!(
        probes[0]["ccache"]["misses"].as_u64().unwrap() >= 9,
        "{r:#}"
    );
    assert!(
        probes[1..]
            .iter()
            .any(|p| p["ccache"]["hits"].as_u64() > Some(0)),
        "a rebuild of content compiled before must hit: {r:#}"
    );
    let md = fs::read_to_string(d.path().join("r.md")).unwrap();
    let pct = (hits * 100 + (hits + misses) / 2) / (hits + misses);
    let plural = |n: u64, one: &str, many: &str| format!("{n} {}", if n == 1 { one } else { many });
    let line = format!(
        "- ccache: {}, {} ({pct}% hit) over {} builds\n",
        plural(hits, "hit", "hits"),
        plural(misses, "miss", "misses"),
        probes.len()
    );
    assert!(md.contains(&line), "{line}not in:\n{md}");
    let mut left = Vec::new();
    leftover_stats_logs(&work, &mut left);
    assert!(left.is_empty(), "stats logs are removed: {left:?}");

    // The same question again: every probe comes from the store, no build ran, nothing to say.
    let again = d.path().join("again");
    fs::create_dir_all(&again).unwrap();
    let log = bisect(&repo, &shas, &work, &cache, &again);
    let r = common::read_json(&again.join("r.json"));
    for p in r["probes"].as_array().unwrap() {
        assert_eq!(p["cached"], true, "{p:#}\n{log}");
        assert!(
            p.get("ccache").is_none(),
            "stored probes carry no counts: {p:#}"
        );
    }
    let md = fs::read_to_string(again.join("r.md")).unwrap();
    assert!(!md.contains("ccache:"), "{md}");
}

/// The prober's three answers: counted when ccache is wired in (a private cache: a miss, then
/// the same compile in a second probe hits), "not installed" when it is not, nothing when no
/// build ran.
#[test]
fn a_probe_counts_its_own_build_or_says_ccache_was_not_there() {
    use setrows_bisect::core::ccache::Ccache;
    use setrows_bisect::probe::launch::HostLauncher;
    use setrows_bisect::probe::script::ScriptProber;
    use setrows_bisect::probe::{ProbeRequest, Prober};
    let found = setrows_bisect::probe::exec::which("ccache");
    if tools::require(found, "ccache", "scripts/setup.d/00-base.sh").is_none() {
        return;
    }
    let d = tempfile::tempdir().unwrap();
    let (src, work) = (d.path().join("src"), d.path().join("work"));
    fs::create_dir_all(&src).unwrap();
    fs::create_dir_all(&work).unwrap();
    fs::write(src.join("u.c"), "int u(void) { return 7; }\n").unwrap();
    let prober = |wired: bool, build: Option<&str>| {
        let mut env = vec![(
            "CCACHE_DIR".to_string(),
            d.path().join("cache").to_string_lossy().into_owned(),
        )];
        if wired {
            env.push(("CMAKE_C_COMPILER_LAUNCHER".into(), "ccache".into()));
        }
        ScriptProber {
            build: build.map(str::to_string),
            script: "true".into(),
            timeout: None,
            launcher: Box::new(HostLauncher),
            env,
            build_only: false,
        }
    };
    let probe = |p: &ScriptProber, name: &str| {
        let log = d.path().join(format!("{name}.log"));
        let req = ProbeRequest {
            commit: "abc",
            checkout: &src,
            build_dir: &work,
            log_path: &log,
            run_name: name,
            artifacts: None,
        };
        p.probe(&req, &|_| {}).ccache
    };
    let compile = Some("ccache cc -c \"$SRC/u.c\" -o u.o");
    let p = prober(true, compile);
    assert_eq!(probe(&p, "one"), Some(Ccache::Used { hits: 0, misses: 1 }));
    assert_eq!(probe(&p, "two"), Some(Ccache::Used { hits: 1, misses: 0 }));
    // Wired in, but nothing went through it (an up-to-date build): 0 and 0, not "absent".
    assert_eq!(
        probe(&prober(true, Some("true")), "three"),
        Some(Ccache::Used { hits: 0, misses: 0 })
    );
    assert_eq!(
        probe(&prober(false, Some("true")), "four"),
        Some(Ccache::NotInstalled)
    );
    assert_eq!(probe(&prober(true, None), "five"), None);
    let mut left = Vec::new();
    leftover_stats_logs(&work, &mut left);
    assert!(left.is_empty(), "{left:?}");
}

/// `PATH` with every program of the real one except ccache (symlinks in `dir`).
fn path_without_ccache(dir: &Path) -> std::path::PathBuf {
    let bin = dir.join("bin");
    fs::create_dir_all(&bin).unwrap();
    let path = std::env::var_os("PATH").unwrap_or_default();
    for d in std::env::split_paths(&path) {
        for e in fs::read_dir(&d).into_iter().flatten().flatten() {
            let name = e.file_name();
            if name != "ccache" && !bin.join(&name).exists() {
                let _ = std::os::unix::fs::symlink(e.path(), bin.join(&name));
            }
        }
    }
    bin
}

/// Without ccache where the builds run, the report says so rather than "0 hits".
#[test]
fn without_ccache_the_report_says_it_was_not_installed() {
    let tools_there = common::have_ninja();
    if !tools_there {
        return;
    }
    let d = tempfile::tempdir().unwrap();
    let (repo, work, cache) = (
        d.path().join("repo"),
        d.path().join("work"),
        d.path().join("cache"),
    );
    let shas = history(&repo);
    let bin = path_without_ccache(d.path());
    let log = bisect_with_path(&repo, &shas, &work, &cache, d.path(), Some(&bin));
    let r = common::read_json(&d.path().join("r.json"));
    assert_eq!(r["first_bad"].as_str(), Some(shas[5].as_str()), "{log}");
    for p in r["probes"].as_array().unwrap() {
        assert_eq!(p["ccache"]["state"], "not_installed", "{p:#}\n{log}");
    }
    let md = fs::read_to_string(d.path().join("r.md")).unwrap();
    assert!(
        md.contains("\n- ccache: not used (not installed)\n"),
        "{md}"
    );
    assert!(!work.join("ccache").exists(), "no cache dir without ccache");
}

/// A probe cannot change another run's outcome through ccache. Run one's build step compiles
/// every file through ccache and writes into its cache dir; its test step compiles through
/// ccache into the caller's cache and writes a file there. Run two, a separate run of the same
/// question (another work dir, the same caller, the same temp dir), reads none of it: its
/// first build meets a cold cache, and every probe counts exactly what run one's did (without
/// the rule, every compile of run two would hit run one's entries). Each run's own cache is
/// gone when it ends.
#[test]
fn a_probe_cannot_plant_a_ccache_entry_that_a_later_run_reads() {
    let ccache = setrows_bisect::probe::exec::which("ccache");
    let tools_there = common::have_ninja();
    if tools::require(ccache, "ccache", "scripts/setup.d/00-base.sh").is_none() || !tools_there {
        return;
    }
    let d = tempfile::tempdir().unwrap();
    let (repo, cache, tmp) = (
        d.path().join("repo"),
        d.path().join("cache"),
        d.path().join("tmp"),
    );
    fs::create_dir_all(&tmp).unwrap();
    let shas = history(&repo);
    let run = |name: &str| {
        let out = d.path().join(name);
        fs::create_dir_all(&out).unwrap();
        let json = out.join("r.json");
        let o = Command::new(assert_cmd::cargo::cargo_bin("setrows-bisect"))
            .arg("--repo")
            .arg(&repo)
            .args(["--good", &shas[0], "--bad", shas.last().unwrap()])
            .args([
                "--build",
                "test -f build.ninja || cmake -S \"$SRC\" -B . -G Ninja >/dev/null; cmake --build . \
                 && mkdir -p \"$CCACHE_DIR\" && echo planted > \"$CCACHE_DIR/planted-by-build\"",
            ])
            .args([
                "--script",
                "mkdir -p \"$CCACHE_DIR\" && echo planted > \"$CCACHE_DIR/planted-by-test\" \
                 && for f in \"$SRC\"/*.c; do ccache cc -c \"$f\" -o \"$WORK/planted.o\" || exit 125; done; \
                 \"$WORK/prog\"",
            ])
            .arg("--work-dir")
            .arg(out.join("work"))
            .arg("--json")
            .arg(&json)
            .env_remove("SETROWS_WORK_DIR")
            .env("CCACHE_DIR", &cache)
            .env("TMPDIR", &tmp)
            .env_remove("CCACHE_DISABLE")
            .env_remove("CCACHE_STATSLOG")
            .env_remove("CCACHE_CONFIGPATH")
            .output()
            .unwrap();
        let log = String::from_utf8_lossy(&o.stderr).to_string();
        assert!(json.is_file(), "{log}");
        let r = common::read_json(&json);
        assert_eq!(r["first_bad"].as_str(), Some(shas[5].as_str()), "{log}");
        let counts: Vec<(u64, u64)> = r["probes"]
            .as_array()
            .unwrap()
            .iter()
            .map(|p| {
                assert_eq!(p["ccache"]["state"], "used", "{p:#}\n{log}");
                (
                    p["ccache"]["hits"].as_u64().unwrap(),
                    p["ccache"]["misses"].as_u64().unwrap(),
                )
            })
            .collect();
        counts
    };
    let one = run("one");
    // The plants were made: the test step wrote and compiled into the caller's cache.
    assert!(cache.join("planted-by-test").is_file());
    assert!(
        fs::read_dir(&cache).unwrap().count() > 1,
        "the test step's compiles went through ccache into the caller's cache"
    );
    // Within one run, the run's own cache serves its later probes.
    assert!(one[1..].iter().any(|c| c.0 > 0), "{one:?}");
    let two = run("two");
    assert_eq!(
        two[0].0, 0,
        "run two's first build read another run's entries: {two:?}"
    );
    assert!(two[0].1 >= 9, "{two:?}");
    assert_eq!(two, one, "run two counts what run one did");
    let left: Vec<_> = fs::read_dir(&tmp)
        .unwrap()
        .flatten()
        .map(|e| e.path())
        .collect();
    assert!(left.is_empty(), "each run removes its own cache: {left:?}");
}

/// The shared cache as a container's build step sees it (`read_only_layer`), with the real
/// ccache: an entry a trusted fill put there serves a build, and a build's new compile is
/// stored only in the run's own cache, never in the shared one.
#[test]
fn the_shared_cache_is_read_only_to_a_build() {
    let found = setrows_bisect::probe::exec::which("ccache");
    if tools::require(found, "ccache", "scripts/setup.d/00-base.sh").is_none() {
        return;
    }
    let d = tempfile::tempdir().unwrap();
    let (shared, run) = (d.path().join("shared"), d.path().join("run"));
    fs::write(d.path().join("u.c"), "int u(void) { return 7; }\n").unwrap();
    fs::write(d.path().join("v.c"), "int v(void) { return 8; }\n").unwrap();
    let compile = |file: &str, env: &[(String, String)], log: &str| {
        let ok = Command::new("ccache")
            .args(["cc", "-c", file, "-o", "x.o"])
            .current_dir(d.path())
            .env_remove("CCACHE_CONFIGPATH")
            .env_remove("CCACHE_DISABLE")
            .env_remove("CCACHE_READONLY")
            .env("CCACHE_STATSLOG", d.path().join(log))
            .envs(env.iter().map(|(k, v)| (k, v)))
            .status()
            .unwrap()
            .success();
        assert!(ok);
        setrows_bisect::core::ccache::Ccache::from_stats_log(
            &fs::read_to_string(d.path().join(log)).unwrap_or_default(),
        )
    };
    let files = |dir: &Path| {
        let mut v = Vec::new();
        leftover_files(dir, &mut v);
        v.sort();
        v
    };
    // The trusted fill: a build that may write the shared cache.
    let fill = vec![
        (
            "CCACHE_DIR".to_string(),
            d.path().join("fill").display().to_string(),
        ),
        (
            "CCACHE_SECONDARY_STORAGE".to_string(),
            format!("file:{}", shared.display()),
        ),
    ];
    compile("u.c", &fill, "fill.log");
    let before = files(&shared);
    assert!(!before.is_empty(), "the fill wrote the shared cache");
    let build = vec![
        ("CCACHE_DIR".to_string(), run.display().to_string()),
        setrows_bisect::probe::ccache::read_only_layer(&shared.display().to_string()),
    ];
    use setrows_bisect::core::ccache::Ccache;
    assert_eq!(
        compile("u.c", &build, "u.log"),
        Ccache::Used { hits: 1, misses: 0 }
    );
    assert_eq!(
        compile("v.c", &build, "v.log"),
        Ccache::Used { hits: 0, misses: 1 }
    );
    assert_eq!(files(&shared), before, "a build wrote the shared cache");
    assert!(
        !files(&run).is_empty(),
        "the run's own cache keeps its compiles"
    );
}

fn leftover_files(dir: &Path, out: &mut Vec<String>) {
    for e in fs::read_dir(dir).into_iter().flatten().flatten() {
        let p = e.path();
        if p.is_dir() {
            leftover_files(&p, out);
        } else {
            out.push(p.display().to_string());
        }
    }
}
