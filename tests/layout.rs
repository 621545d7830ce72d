//! The architecture, checked: the folders under src/ are the data flow (DESIGN.md), and the
//! `crate::` paths in each file may only point down it.
//!
//! cli -> {github -> {report, run}, run -> probe} -> core; report -> core; github may
//! name probe types (stored runs) directly. `core` is pure:
//! it names nothing of the crate outside itself and uses no clap, git, processes, files, clock
//! or network. `error` (exit codes) may be used by every layer but core. Modules (the first two
//! path segments, e.g. `run::driver`) form no import cycles. Files are split by concern, not
//! by length, so no size is checked.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

fn allowed(from: &str) -> &'static [&'static str] {
    match from {
        "core" => &["core"],
        "probe" => &["core", "probe", "error"],
        "run" => &["core", "probe", "run", "error"],
        "report" => &["core", "report", "error"],
        "github" => &["core", "probe", "report", "run", "github", "error"],
        "cli" => &["core", "probe", "run", "report", "github", "cli", "error"],
        "error" => &[],
        other => panic!(
            "src/{other}: a folder the layout test does not know; add it to DESIGN.md and here"
        ),
    }
}

fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    for e in std::fs::read_dir(dir).unwrap() {
        let p = e.unwrap().path();
        if p.is_dir() {
            rust_files(&p, out);
        } else if p.extension().is_some_and(|x| x == "rs") {
            out.push(p);
        }
    }
}

/// (layer, module) of a file: `src/run/driver.rs` -> ("run", "run::driver").
fn node_of(rel: &Path) -> Option<(String, String)> {
    let parts: Vec<String> = rel
        .iter()
        .map(|c| c.to_string_lossy().trim_end_matches(".rs").to_string())
        .collect();
    match parts.as_slice() {
        [f] if f == "lib" || f == "main" => None,
        [f] => Some((f.clone(), f.clone())),
        [layer, m, ..] => Some((layer.clone(), format!("{layer}::{m}"))),
        _ => None,
    }
}

/// Every `crate::a::b` path in code (comments stripped), as (a, "a::b").
fn crate_paths(text: &str) -> BTreeSet<(String, String)> {
    let re = regex::Regex::new(r"\bcrate::([a-z_]+)(?:::([a-z_]+))?").unwrap();
    let mut out = BTreeSet::new();
    for line in text.lines() {
        let code = line.split("//").next().unwrap_or("");
        for c in re.captures_iter(code) {
            let a = c[1].to_string();
            let b = c.get(2).map(|m| m.as_str().to_string());
            let node = match b {
                Some(b) if a != "error" => format!("{a}::{b}"),
                _ => a.clone(),
            };
            out.insert((a, node));
        }
    }
    out
}

fn src() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("src")
}

#[test]
fn imports_point_down_the_data_flow() {
    let mut files = Vec::new();
    rust_files(&src(), &mut files);
    let mut bad = Vec::new();
    for f in &files {
        let rel = f.strip_prefix(src()).unwrap();
        let Some((layer, _)) = node_of(rel) else {
            continue;
        };
        let text = std::fs::read_to_string(f).unwrap();
        for (to, _) in crate_paths(&text) {
            if !allowed(&layer).contains(&to.as_str()) {
                bad.push(format!("src/{}: {layer} -> crate::{to}", rel.display()));
            }
        }
    }
    assert!(
        bad.is_empty(),
        "imports against the layout:\n{}",
        bad.join("\n")
    );
}

#[test]
fn core_is_pure() {
    let mut files = Vec::new();
    rust_files(&src().join("core"), &mut files);
    assert!(!files.is_empty());
    let forbidden = [
        "clap::",
        "std::fs",
        "std::process",
        "git2::",
        "Instant::now",
        "SystemTime",
        "Utc::now",
        "tokio::",
        "octocrab",
        "std::net",
        "std::env",
    ];
    let mut bad = Vec::new();
    for f in &files {
        let text = std::fs::read_to_string(f).unwrap();
        for (n, line) in text.lines().enumerate() {
            let code = line.split("//").next().unwrap_or("");
            for word in forbidden {
                if code.contains(word) {
                    bad.push(format!("{}:{}: {word}", f.display(), n + 1));
                }
            }
        }
    }
    assert!(
        bad.is_empty(),
        "effects in the pure core:\n{}",
        bad.join("\n")
    );
}

#[test]
fn modules_form_no_cycles() {
    let mut files = Vec::new();
    rust_files(&src(), &mut files);
    let mut edges: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    for f in &files {
        let rel = f.strip_prefix(src()).unwrap();
        let Some((_, from)) = node_of(rel) else {
            continue;
        };
        let text = std::fs::read_to_string(f).unwrap();
        for (_, to) in crate_paths(&text) {
            if to != from {
                edges.entry(from.clone()).or_default().insert(to);
            }
        }
    }
    // Depth-first search for a back edge; the first cycle found is reported whole.
    fn visit(
        n: &str,
        edges: &BTreeMap<String, BTreeSet<String>>,
        state: &mut BTreeMap<String, u8>,
        stack: &mut Vec<String>,
    ) -> Option<Vec<String>> {
        state.insert(n.to_string(), 1);
        stack.push(n.to_string());
        for m in edges.get(n).into_iter().flatten() {
            match state.get(m.as_str()) {
                Some(1) => {
                    let at = stack.iter().position(|s| s == m).unwrap();
                    let mut cycle = stack[at..].to_vec();
                    cycle.push(m.clone());
                    return Some(cycle);
                }
                Some(_) => {}
                None => {
                    if let Some(c) = visit(m, edges, state, stack) {
                        return Some(c);
                    }
                }
            }
        }
        stack.pop();
        state.insert(n.to_string(), 2);
        None
    }
    let mut state = BTreeMap::new();
    for n in edges.keys() {
        if !state.contains_key(n.as_str()) {
            let cycle = visit(n, &edges, &mut state, &mut Vec::new());
            assert!(
                cycle.is_none(),
                "import cycle: {}",
                cycle.unwrap().join(" -> ")
            );
        }
    }
}

#[test]
fn the_checker_sees_what_it_checks() {
    // The parser finds paths the rules are about, so the tests above cannot pass vacuously.
    let p = crate_paths(
        "use crate::run::driver::Plan; // crate::cli::x\nlet x = crate::error::Exit::Usage;",
    );
    let got: Vec<String> = p.into_iter().map(|(_, n)| n).collect();
    assert_eq!(got, ["error", "run::driver"]);
    assert_eq!(
        node_of(Path::new("run/driver.rs")),
        Some(("run".into(), "run::driver".into()))
    );
    assert_eq!(
        node_of(Path::new("core/flaky/session.rs")),
        Some(("core".into(), "core::flaky".into()))
    );
}

/// Console output goes through `outln!`/`out!`/`errln!` (src/lib.rs): std's print macros panic
/// on a closed pipe, and the panic would skip the results not yet written (issue 37 item 1).
#[test]
fn no_std_print_macros_outside_tests() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut files = Vec::new();
    rust_files(&src, &mut files);
    let re = regex::Regex::new(r"\b(e?println|e?print)!\(").unwrap();
    let mut offenders = Vec::new();
    for f in files {
        let name = f.file_name().unwrap().to_string_lossy().to_string();
        if name == "lib.rs" || name == "tests.rs" || name.ends_with("_tests.rs") {
            continue;
        }
        let text = std::fs::read_to_string(&f).unwrap();
        let code = text.split("#[cfg(test)]").next().unwrap_or("");
        for (i, line) in code.lines().enumerate() {
            let code = line.split("//").next().unwrap_or("");
            if re.is_match(code) {
                offenders.push(format!("{}:{}: {}", f.display(), i + 1, line.trim()));
            }
        }
    }
    assert!(
        offenders.is_empty(),
        "use outln!/errln!:\n{}",
        offenders.join("\n")
    );
}

/// run emits progress events and prints nothing (issue 36 item 3): the wording of what a
/// bisection shows lives in cli (`cli::progress`), so a renderer can choose bars, lines or JSON.
#[test]
fn run_prints_nothing() {
    let mut files = Vec::new();
    rust_files(&src().join("run"), &mut files);
    let re = regex::Regex::new(r"\b(outln|out|errln)!\(").unwrap();
    let mut offenders = Vec::new();
    for f in files {
        let text = std::fs::read_to_string(&f).unwrap();
        for (i, line) in text.lines().enumerate() {
            let code = line.split("//").next().unwrap_or("");
            if re.is_match(code) {
                offenders.push(format!("{}:{}: {}", f.display(), i + 1, line.trim()));
            }
        }
    }
    assert!(
        offenders.is_empty(),
        "emit a core::progress::Event instead:\n{}",
        offenders.join("\n")
    );
}
