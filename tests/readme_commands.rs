//! Every command the README shows, run verbatim by bash from an empty directory with a fresh
//! HOME, as a new user would after `cargo install --path .`: the binary is the test build's,
//! put on PATH under its installed name (installing would compile every crate again on the
//! 2-core CI machine). Commands that cannot run here are listed in SKIP with the reason; a
//! README command that is in neither list runs, so a new one cannot go untested by accident.

use std::path::Path;
use std::process::Command;

/// (command prefix, why it does not run here).
const SKIP: &[(&str, &str)] = &[
    (
        "./scripts/demo.sh",
        "a script of the checkout, not of the installed binary; `setrows-bisect demo` runs",
    ),
    (
        "./scripts/test.sh",
        "the whole CI suite, which runs this test",
    ),
    (
        "cargo install --path .",
        "would compile every crate again; the test build's binary is on PATH instead",
    ),
    (
        "cargo build --release && bash scripts/fault-injection.sh",
        "a script of the checkout (CI runs it)",
    ),
    (
        "git clone https://github.com/ggml-org/ggml ~/src/ggml",
        "the network (tests talk to loopback only); the quick start's other lines check its revisions",
    ),
    (
        "podman build -f containers/rocm.Dockerfile",
        "pulls the multi-GB ROCm base image; no network under CI",
    ),
    (
        "setrows-bisect --repo ~/src/ggml",
        "needs a ggml checkout in ~/src/ggml (and, with --config, a gfx1151 GPU)",
    ),
    (
        "setrows-bisect --repo ~/src/llama.cpp",
        "needs a llama.cpp checkout with July 2025's history (real case 23: bench/real/stackreuse_asan.sh runs it on a window)",
    ),
    (
        "setrows-bisect matrix --matrix matrix.toml --repo ggml",
        "the nightly workflow's line: tests/github_actions_run executes it in matrix.yml",
    ),
    (
        "setrows-bisect bisect --repo ggml",
        "the bisect workflow's line: tests/github_actions_run executes it in bisect.yml",
    ),
    (
        "setrows-bisect matrix --build-only --repo ~/src/ggml",
        "needs a ggml checkout in ~/src/ggml and the shipped matrix's ROCm images",
    ),
    (
        "setrows-bisect matrix --repo ~/src/ggml",
        "a synopsis ([--only ID,...]) over ggml and the ROCm images",
    ),
    (
        "setrows-bisect bisect-config",
        "needs ggml and the shipped matrix's ROCm images",
    ),
    ("setrows-bisect show ID", "ID is a placeholder"),
    (
        "setrows-bisect gc --older-than 14 [--dry-run]",
        "a synopsis (the brackets)",
    ),
    (
        "setrows-bisect report --issue OWNER/REPO#N",
        "a synopsis; tests/github_report_cli runs report",
    ),
];

/// A README command that is exactly this text names a run elsewhere (the evidence table).
const SKIP_EXACT: &[(&str, &str)] = &[
    (
        "setrows-bisect matrix",
        "the evidence table's H200 run: the whole built-in matrix needs podman and GPU images",
    ),
    (
        "setrows-bisect",
        "the program's name in prose, not a command line",
    ),
    (
        "setrows-bisect show",
        "prose naming the command that reads `id`; it needs the ID",
    ),
];

fn readme() -> String {
    std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("README.md")).unwrap()
}

/// Commands of the ```sh blocks (continuation lines joined, comment lines dropped), then the
/// inline `setrows-bisect ...` spans, in README order, without repeats.
fn commands(text: &str) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    let mut in_sh = false;
    let mut pending = String::new();
    for line in text.lines() {
        if line.starts_with("```") {
            in_sh = !in_sh && line.trim() == "```sh";
            continue;
        }
        if in_sh {
            let t = line.trim();
            if t.is_empty() || t.starts_with('#') {
                continue;
            }
            if let Some(head) = t.strip_suffix('\\') {
                pending.push_str(head);
                continue;
            }
            pending.push_str(t);
            out.push(std::mem::take(&mut pending));
        } else {
            let mut rest = line;
            while let Some(i) = rest.find("`setrows-bisect") {
                let span = &rest[i + 1..];
                let end = span.find('`').unwrap_or(span.len());
                // A command line, not the program's name in prose or a quoted message.
                let c = &span[..end];
                if c == "setrows-bisect" || c.starts_with("setrows-bisect ") {
                    out.push(c.to_string());
                }
                rest = &span[end.min(span.len())..];
                rest = rest.strip_prefix('`').unwrap_or(rest);
            }
        }
    }
    let mut seen = std::collections::BTreeSet::new();
    out.retain(|c| seen.insert(c.clone()));
    out
}

fn skip_reason(cmd: &str) -> Option<&'static str> {
    SKIP_EXACT
        .iter()
        .find(|(c, _)| *c == cmd)
        .or_else(|| SKIP.iter().find(|(p, _)| cmd.starts_with(p)))
        .map(|(_, why)| *why)
}

#[test]
fn every_readme_command_runs_verbatim_from_an_empty_directory() {
    let text = readme();
    let cmds = commands(&text);
    assert!(cmds.len() > 10, "{cmds:#?}");
    eprintln!("README commands:\n  {}", cmds.join("\n  "));
    let d = tempfile::tempdir().unwrap();
    let (home, cwd, bin) = (
        d.path().join("home"),
        d.path().join("empty"),
        d.path().join("bin"),
    );
    for p in [&home, &cwd, &bin] {
        std::fs::create_dir_all(p).unwrap();
    }
    std::os::unix::fs::symlink(
        assert_cmd::cargo::cargo_bin("setrows-bisect"),
        bin.join("setrows-bisect"),
    )
    .unwrap();
    let path = format!(
        "{}:{}",
        bin.display(),
        std::env::var("PATH").unwrap_or_default()
    );
    let mut ran = Vec::new();
    let mut skipped = Vec::new();
    for cmd in &cmds {
        if let Some(why) = skip_reason(cmd) {
            skipped.push(format!("{cmd}  -- {why}"));
            continue;
        }
        let out = Command::new("bash")
            .args(["-c", cmd])
            .current_dir(&cwd)
            .env("HOME", &home)
            .env("PATH", &path)
            .env("GGML_NO_BACKTRACE", "1")
            .env_remove("SETROWS_WORK_DIR")
            .env_remove("XDG_CACHE_HOME")
            .env_remove("GITHUB_TOKEN")
            .output()
            .unwrap();
        let (so, se) = (
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr),
        );
        assert!(
            out.status.success(),
            "`{cmd}` failed ({:?}):\n{se}\n{so}",
            out.status
        );
        // The tool's own errors; a probe's build log may say "error:" (the demo plants broken
        // builds on purpose, and which of them a bisection meets depends on its seed).
        assert!(
            !se.lines()
                .any(|l| l.starts_with("error") || l.contains("setrows-bisect: error")),
            "`{cmd}` said:\n{se}"
        );
        ran.push((cmd.clone(), so.into_owned()));
    }
    eprintln!(
        "ran {} README commands; skipped:\n  {}",
        ran.len(),
        skipped.join("\n  ")
    );
    // What the README says they print.
    let out = |c: &str| {
        &ran.iter()
            .find(|(x, _)| x == c)
            .unwrap_or_else(|| panic!("{c} did not run"))
            .1
    };
    let example = text
        .lines()
        .find_map(|l| l.strip_prefix("#   2e65ffd7"))
        .expect("the README's example line of matrix --list");
    assert!(out("setrows-bisect matrix --list").contains(&format!("2e65ffd7{example}")));
    let plan: serde_json::Value = serde_json::from_str(out(
        "setrows-bisect matrix --list --format github       # the workflow's fan-out: one job per image (= ROCm version)",
    ))
    .unwrap();
    assert!(
        plan["include"].as_array().is_some_and(|a| !a.is_empty()),
        "{plan}"
    );
    assert!(home
        .join(".local/share/bash-completion/completions/setrows-bisect")
        .is_file());
    assert!(home
        .join(".local/share/man/man1/setrows-bisect.1")
        .is_file());
    for must in ["setrows-bisect demo", "setrows-bisect log"] {
        assert!(
            ran.iter().any(|(c, _)| c == must),
            "{must} did not run: {cmds:#?}"
        );
    }
}

/// ggml revisions the README names, each looked up in ggml-org/ggml (at d99724f2: release tags,
/// and 0a8ab465, a master commit): a README revision must be one of these or `master`, so a
/// command pasted into a fresh clone resolves (lucebox's 53859c2 and a `v0.0.1` did not).
const GGML_TAGS: &[&str] = &[
    "0a8ab465", "v0.9.4", "v0.9.5", "v0.9.11", "v0.10.0", "v0.15.0", "v0.20.0", "v0.20.1",
    "v0.20.2", "v0.21.0",
];

/// The quick start pastes as is: no `<placeholder>` (bash reads `<a` as a redirection), the
/// ggml checkout it names is cloned first, and every revision it gives ggml is one ggml has.
#[test]
fn readme_ggml_commands_paste_as_is() {
    let text = readme();
    let cmds = commands(&text);
    let clone = cmds
        .iter()
        .position(|c| c.starts_with("git clone https://github.com/ggml-org/ggml ~/src/ggml"));
    let first_use = cmds
        .iter()
        .position(|c| c.contains("~/src/ggml") && !c.starts_with("git clone"));
    assert!(
        clone.is_some() && clone < first_use,
        "the README uses ~/src/ggml before saying to clone it: {clone:?} vs {first_use:?}"
    );
    for c in &cmds {
        let words: Vec<&str> = c.split_whitespace().collect();
        assert!(
            !words
                .iter()
                .any(|w| w.starts_with('<') && !w.starts_with("<<")),
            "a placeholder the shell parses as a redirection: {c}"
        );
        if !c.contains("~/src/ggml") {
            continue;
        }
        for pair in words.windows(2) {
            if ["--good", "--bad", "--rev", "--good-rev"].contains(&pair[0]) {
                let rev = pair[1];
                assert!(
                    rev == "master" || GGML_TAGS.contains(&rev),
                    "{} {rev}: not a ggml revision (master or a tag): {c}",
                    pair[0]
                );
            }
        }
    }
}
