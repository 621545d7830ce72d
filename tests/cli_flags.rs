//! The command line as a user meets it (issue 37 item 6, issue 36 item 2): the main command's
//! options sit in sections a user thinks in (what to bisect, how to probe, where to run, what to
//! publish; GitHub and CI runner options last, in `--help` only), and no flag spelling that the
//! README, the docs, the scripts or the benchmarks use, or that the tool ever accepted, goes
//! away.

use clap::CommandFactory;
use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

/// The sections of `setrows-bisect [bisect] --help`, in order (clap's own `Options` first: help
/// and version only).
const SECTIONS: &[&str] = &[
    "Options",
    "What to bisect",
    "How to probe",
    "How to probe (configuration)",
    "How to probe (decode settings)",
    "How to probe (flaky faults)",
    "Where to run",
    "What to publish",
    "GitHub",
    "CI runners",
];

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

fn help(args: &[&str]) -> String {
    let out = assert_cmd::Command::cargo_bin("setrows-bisect")
        .unwrap()
        .args(args)
        .output()
        .unwrap();
    assert!(out.status.success(), "{args:?}: {out:?}");
    String::from_utf8(out.stdout).unwrap()
}

/// (section, flags in it), in the order the help prints them; a flag is its long name (or its
/// short one when it has no long name).
fn sections(help: &str) -> Vec<(String, Vec<String>)> {
    let heading = regex::Regex::new(r"^([A-Z][^:]*):$").unwrap();
    // `  -j, --jobs <N>` or `      --good <GOOD>`; descriptions are indented further.
    let option = regex::Regex::new(r"^(?:  -\w, |      )(--[a-z][a-z0-9-]*)").unwrap();
    let mut out: Vec<(String, Vec<String>)> = Vec::new();
    for line in help.lines() {
        if let Some(c) = heading.captures(line) {
            out.push((c[1].to_string(), Vec::new()));
        } else if let Some(c) = option.captures(line) {
            if let Some((_, flags)) = out.last_mut() {
                flags.push(c[1].to_string());
            }
        }
    }
    out.retain(|(s, _)| s != "Usage" && s != "Commands");
    out
}

/// The main command's options, as clap knows them: long names of every argument but
/// help/version and positionals.
fn bisect_flags() -> BTreeSet<String> {
    let cli = setrows_bisect::cli::Cli::command();
    let bisect = cli.find_subcommand("bisect").unwrap();
    bisect
        .get_arguments()
        .filter(|a| !a.is_positional() && !a.is_hide_set())
        .filter_map(|a| a.get_long().map(|l| format!("--{l}")))
        .filter(|l| l != "--help" && l != "--version")
        .collect()
}

fn check_sections(what: &str, text: &str, want: &[&str]) {
    let got = sections(text);
    let names: Vec<&str> = got.iter().map(|(s, _)| s.as_str()).collect();
    assert_eq!(names, want, "{what}: the sections\n{text}");
    let (options, rest) = got.split_first().unwrap();
    for f in &options.1 {
        assert!(
            ["--help", "--version"].contains(&f.as_str()),
            "{what}: {f} sits in no section of its own (`Options`)"
        );
    }
    let mut seen = BTreeMap::new();
    for (section, flags) in rest {
        for f in flags {
            if let Some(other) = seen.insert(f.clone(), section.clone()) {
                panic!("{what}: {f} is in both {other} and {section}");
            }
        }
    }
}

/// Where a few options sit: the issue's four questions, each answered by its own section.
const PLACES: &[(&str, &str)] = &[
    ("--good", "What to bisect"),
    ("--repo", "What to bisect"),
    ("--path", "What to bisect"),
    ("--first-parent", "What to bisect"),
    ("--regress", "What to bisect"),
    ("--probe-kind", "How to probe"),
    ("--backend", "How to probe"),
    ("--graph", "How to probe"),
    ("--repro-arg", "How to probe"),
    ("--config", "How to probe"),
    ("--gpu-target", "How to probe (configuration)"),
    ("--cache-type-k", "How to probe (decode settings)"),
    ("--confidence", "How to probe (flaky faults)"),
    ("--engine", "Where to run"),
    ("--image", "Where to run"),
    ("--work-dir", "Where to run"),
    ("--jobs", "Where to run"),
    ("--json", "What to publish"),
    ("--report", "What to publish"),
    ("--post-to", "GitHub"),
    ("--token-file", "GitHub"),
    ("--resume-from-issue", "GitHub"),
    ("--plan-only", "CI runners"),
    ("--probe", "CI runners"),
    ("--run-index", "CI runners"),
];

#[test]
fn every_option_of_the_main_command_sits_in_a_users_section() {
    for args in [&["bisect", "--help"][..], &["--help"][..]] {
        let text = help(args);
        check_sections(&format!("{args:?}"), &text, SECTIONS);
        let got = sections(&text);
        let place: BTreeMap<&str, &str> = got
            .iter()
            .flat_map(|(s, fs)| fs.iter().map(move |f| (f.as_str(), s.as_str())))
            .collect();
        for (flag, section) in PLACES {
            assert_eq!(place.get(flag), Some(section), "{args:?}: {flag}");
        }
        // Every option clap knows is shown, in a section that is not `Options`.
        for f in bisect_flags() {
            let s = place.get(f.as_str()).copied();
            assert!(
                s.is_some_and(|s| s != "Options"),
                "{args:?}: {f} is in {s:?}"
            );
        }
    }
}

/// What `-h` shows a newcomer: the flags of a first bisect, nothing that only CI, GitHub
/// publishing or one probe kind uses, on one screen (at most 50 lines), and where the rest is.
const FIRST_BISECT: &[&str] = &[
    "--good",
    "--bad",
    "--repo",
    "--regress",
    "--script",
    "--build",
    "--timeout",
    "--probe-kind",
    "--config",
    "--confidence",
    "--jobs",
    "--dry-run",
    "--json",
    "--report",
];

#[test]
fn short_help_is_one_screen_with_the_first_bisect_and_says_where_the_rest_is() {
    for args in [&["bisect", "-h"][..], &["-h"][..]] {
        let text = help(args);
        let lines = text.lines().count();
        assert!(lines <= 50, "{args:?}: {lines} lines\n{text}");
        let got = sections(&text);
        let shown: BTreeSet<&str> = got
            .iter()
            .flat_map(|(_, fs)| fs.iter().map(String::as_str))
            .filter(|f| !["--help", "--version"].contains(f))
            .collect();
        let want: BTreeSet<&str> = FIRST_BISECT.iter().copied().collect();
        assert_eq!(shown, want, "{args:?}\n{text}");
        // One line per flag: nothing wraps into a second line of its own.
        for f in FIRST_BISECT {
            let at = text
                .lines()
                .position(|l| l.contains(&format!("{f} ")))
                .unwrap();
            let next = text.lines().nth(at + 1).unwrap_or("");
            assert!(
                !next.starts_with("                        "),
                "{args:?}: {f} wraps\n{text}"
            );
        }
        for f in ["--help", "setrows-bisect help COMMAND", "docs/SUMMARY.md"] {
            assert!(text.contains(f), "{args:?}: the note names {f}\n{text}");
        }
    }
    // The matrix commands' `-h` is a first run of each, the rest in `--help`.
    for (cmd, shown, long_only) in [
        ("matrix", "--list", "--time-limit"),
        ("bisect-config", "--axis", "--max-runs"),
    ] {
        let short = help(&[cmd, "-h"]);
        assert!(short.lines().count() <= 25, "{cmd} -h\n{short}");
        assert!(
            short.contains(shown) && !short.contains(long_only),
            "{cmd} -h\n{short}"
        );
        assert!(short.contains("--help") && short.contains("docs/SUMMARY.md"));
        assert!(help(&[cmd, "--help"]).contains(long_only), "{cmd} --help");
    }
}

/// Every spelling of every flag of every command: long names, aliases, short names. A spelling
/// the tool accepted once must stay (a workflow, a script or a user's shell history has it);
/// tests/golden/cli-flags.txt holds them (UPDATE_GOLDEN=1 adds new ones; removing a line is a
/// decision to break someone).
fn spellings() -> BTreeSet<String> {
    fn walk(cmd: &clap::Command, path: &str, out: &mut BTreeSet<String>) {
        for a in cmd.get_arguments() {
            if a.is_positional() {
                continue;
            }
            for l in a.get_long_and_visible_aliases().unwrap_or_default() {
                out.insert(format!("{path} --{l}"));
            }
            for l in a.get_all_aliases().unwrap_or_default() {
                out.insert(format!("{path} --{l}"));
            }
            if let Some(s) = a.get_short() {
                out.insert(format!("{path} -{s}"));
            }
        }
        for sub in cmd.get_subcommands() {
            walk(sub, &format!("{path} {}", sub.get_name()), out);
        }
    }
    let mut out = BTreeSet::new();
    walk(
        &setrows_bisect::cli::Cli::command(),
        "setrows-bisect",
        &mut out,
    );
    out
}

#[test]
fn no_flag_spelling_goes_away() {
    let path = root().join("tests/golden/cli-flags.txt");
    let now = spellings();
    let text: String = now.iter().map(|s| format!("{s}\n")).collect();
    if std::env::var_os("UPDATE_GOLDEN").is_some() {
        let kept = std::fs::read_to_string(&path).unwrap_or_default();
        let mut all: BTreeSet<String> = kept.lines().map(str::to_string).collect();
        all.extend(now.iter().cloned());
        let merged: String = all.iter().map(|s| format!("{s}\n")).collect();
        std::fs::write(&path, merged).unwrap();
    }
    let want = std::fs::read_to_string(&path).unwrap_or_default();
    let gone: Vec<&str> = want.lines().filter(|l| !now.contains(*l)).collect();
    assert!(
        gone.is_empty(),
        "spellings the tool accepted and no longer does (keep them as aliases):\n{}",
        gone.join("\n")
    );
    assert_eq!(
        want,
        text,
        "new spellings: accept them with UPDATE_GOLDEN=1 ({})",
        path.display()
    );
}

/// Command lines in a markdown file: logical lines (backslash continuations joined) of its code
/// blocks and its inline code spans.
fn markdown_lines(text: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut in_code = false;
    let mut pending = String::new();
    for line in text.lines() {
        if line.trim_start().starts_with("```") {
            in_code = !in_code;
            continue;
        }
        if in_code {
            let t = line.trim();
            if let Some(head) = t.strip_suffix('\\') {
                pending.push_str(head);
                pending.push(' ');
                continue;
            }
            pending.push_str(t);
            out.push(std::mem::take(&mut pending));
        } else {
            let mut parts = line.split('`');
            parts.next();
            while let Some(span) = parts.next() {
                out.push(span.to_string());
                parts.next();
            }
        }
    }
    out
}

/// Logical lines of a shell script, each array expansion `"${A[@]}"` replaced by the words of
/// the script's `A=(...)` (all of them, if it is assigned more than once).
fn shell_lines(text: &str) -> Vec<String> {
    let mut logical = Vec::new();
    let mut pending = String::new();
    for line in text.lines() {
        let t = line.trim();
        if t.starts_with('#') {
            continue;
        }
        if let Some(head) = t.strip_suffix('\\') {
            pending.push_str(head);
            pending.push(' ');
            continue;
        }
        pending.push_str(t);
        logical.push(std::mem::take(&mut pending));
    }
    let assign = regex::Regex::new(r"(?s)\b([A-Za-z_][A-Za-z0-9_]*)\+?=\(([^)]*)\)").unwrap();
    let mut arrays: BTreeMap<String, String> = BTreeMap::new();
    for c in assign.captures_iter(text) {
        let e = arrays.entry(c[1].to_string()).or_default();
        e.push(' ');
        e.push_str(&c[2].replace("\\\n", " ").replace('\n', " "));
    }
    let expansion = regex::Regex::new(r#""?\$\{([A-Za-z_][A-Za-z0-9_]*)\[@\]\}"?"#).unwrap();
    logical
        .into_iter()
        .map(|l| {
            // Twice: an array may expand another (A holds "${SETTINGS[@]}").
            let mut l = l;
            for _ in 0..2 {
                l = expansion
                    .replace_all(&l, |c: &regex::Captures| {
                        arrays.get(&c[1]).cloned().unwrap_or_default()
                    })
                    .to_string();
            }
            l
        })
        .collect()
}

/// The words after the tool's name in `line` (up to a pipe, `;`, `&&`, a redirection or a
/// comment), or `None` when the line does not run the tool.
fn invocation(line: &str) -> Option<Vec<String>> {
    let words: Vec<String> = line
        .split_whitespace()
        .map(|w| {
            w.trim_start_matches(['[', '('])
                .trim_matches(|c| c == '"' || c == '\'')
                .to_string()
        })
        .collect();
    let at = words.iter().position(|w| {
        w == "setrows-bisect" || w.ends_with("/setrows-bisect") || w == "$BIN" || w == "$bin"
    })?;
    // A message that names the tool (`echo "no binary at $BIN (run: cargo build --release)"`).
    if words[..at].iter().any(|w| w == "echo" || w == "printf") {
        return None;
    }
    let mut out = Vec::new();
    for w in &words[at + 1..] {
        if ["|", ";", "&&", "||", "#", ")", "2>&1"].contains(&w.as_str())
            || w.starts_with('>')
            || w.starts_with("2>")
            || w.starts_with('<')
        {
            break;
        }
        out.push(w.clone());
    }
    Some(out)
}

/// The long flags (and aliases) of each command, and which of them take a value that may start
/// with `-` (the word after them is that value).
struct Known {
    flags: BTreeMap<String, BTreeSet<String>>,
    hyphen_values: BTreeSet<String>,
}

fn known() -> Known {
    let cli = setrows_bisect::cli::Cli::command();
    let mut flags = BTreeMap::new();
    let mut hyphen_values = BTreeSet::new();
    let mut add = |name: &str, cmd: &clap::Command| {
        let mut set = BTreeSet::new();
        for a in cmd.get_arguments() {
            for l in a.get_long_and_visible_aliases().unwrap_or_default() {
                set.insert(format!("--{l}"));
            }
            for l in a.get_all_aliases().unwrap_or_default() {
                set.insert(format!("--{l}"));
            }
            if a.is_allow_hyphen_values_set() {
                if let Some(l) = a.get_long() {
                    hyphen_values.insert(format!("--{l}"));
                }
            }
        }
        set.insert("--help".into());
        set.insert("--version".into());
        flags.insert(name.to_string(), set);
    };
    add("", &cli);
    for sub in cli.get_subcommands() {
        add(sub.get_name(), sub);
    }
    Known {
        flags,
        hyphen_values,
    }
}

/// (file, subcommand, flag) for every flag a documented command line hands the tool.
fn documented_uses() -> Vec<(String, String, String)> {
    let mut files: Vec<PathBuf> = vec![
        root().join("README.md"),
        root().join("BENCHMARKS.md"),
        root().join("DESIGN.md"),
    ];
    fn walk(dir: &Path, out: &mut Vec<PathBuf>) {
        let Ok(rd) = std::fs::read_dir(dir) else {
            return;
        };
        let mut entries: Vec<PathBuf> = rd.flatten().map(|e| e.path()).collect();
        entries.sort();
        for p in entries {
            if p.is_dir() {
                if p.file_name().is_some_and(|n| n != "evidence") {
                    walk(&p, out);
                }
            } else if p.extension().is_some_and(|e| e == "md" || e == "sh") {
                out.push(p);
            }
        }
    }
    for d in ["docs", "scripts", "bench"] {
        walk(&root().join(d), &mut files);
    }
    let subcommands: BTreeSet<String> = known().flags.keys().cloned().collect();
    let flag = regex::Regex::new(r"^--[a-z][a-z0-9-]*").unwrap();
    let sourced =
        regex::Regex::new(r#"source "\$\(dirname "\$0"\)/([A-Za-z0-9_.-]+\.sh)""#).unwrap();
    let mut uses = Vec::new();
    for f in files {
        let mut text = std::fs::read_to_string(&f).unwrap();
        // A case script names its settings and sources the steps it shares with others
        // (bench/real/cuda_case.sh): the shared command lines run with this file's arrays.
        let shared: Vec<String> = sourced
            .captures_iter(&text)
            .filter_map(|c| std::fs::read_to_string(f.with_file_name(&c[1])).ok())
            .collect();
        for t in shared {
            text.push('\n');
            text.push_str(&t);
        }
        let lines = if f.extension().is_some_and(|e| e == "md") {
            markdown_lines(&text)
        } else {
            shell_lines(&text)
        };
        let name = f.strip_prefix(root()).unwrap().display().to_string();
        for l in lines {
            let Some(words) = invocation(&l) else {
                continue;
            };
            let sub = match words.first() {
                Some(w) if subcommands.contains(w) && !w.is_empty() => w.clone(),
                _ => String::new(),
            };
            let mut skip_next = false;
            for w in &words {
                if std::mem::take(&mut skip_next) {
                    continue;
                }
                if let Some(m) = flag.find(w) {
                    let f = m.as_str().to_string();
                    skip_next = known().hyphen_values.contains(&f) && !w.contains('=');
                    uses.push((name.clone(), sub.clone(), f));
                }
            }
        }
    }
    uses
}

#[test]
fn every_flag_the_readme_docs_scripts_and_benchmarks_use_parses() {
    let known = known();
    let uses = documented_uses();
    // The scan sees what it checks: flags of each kind of file.
    for (file, flag) in [
        ("README.md", "--config"),
        ("docs/strix-halo.md", "--graph"),
        ("docs/configurations.md", "--only"),
        ("docs/github.md", "--post-to"),
        ("bench/real/fwht_pdl_cuda.sh", "--cache-type-k"),
        ("bench/flaky-wall.sh", "--jobs"),
        ("scripts/fault-injection.sh", "--good"),
    ] {
        assert!(
            uses.iter().any(|(f, _, x)| f == file && x == flag),
            "the scan missed {flag} in {file}"
        );
    }
    let mut unknown = Vec::new();
    for (file, sub, flag) in &uses {
        // Without a subcommand the main command is `bisect`.
        let cmd = if sub.is_empty() { "bisect" } else { sub };
        if !known.flags[cmd].contains(flag) {
            unknown.push(format!("{file}: setrows-bisect {sub} {flag}"));
        }
    }
    unknown.dedup();
    assert!(
        unknown.is_empty(),
        "documented flags the tool does not take:\n{}",
        unknown.join("\n")
    );
}

/// Options the docs name in prose that belong to other programs: the bundled reproducers and
/// simulators (`--steps`, `--mode`, ...), cmake (`--target`), the fault-injection script
/// (`--quick`), the fake GitHub server (`--content-limit`), GitHub's runner (`--ephemeral`), the
/// overhead benchmark's sampler (`--no-inherit`) and llama.cpp (`--split-mode`).
const OTHER_PROGRAMS: &[&str] = &[
    "--check",
    "--check-every",
    "--content-limit",
    "--cpu-nmse",
    "--cpu-reference",
    "--cpu-threads",
    "--ephemeral",
    "--good-nmse",
    "--inject",
    "--lie-prior",
    "--logits-out",
    "--logits-ref",
    "--mode",
    "--model",
    "--no-inherit",
    "--path-nmse",
    "--quick",
    "--ref-workers",
    "--split-mode",
    "--steps",
    "--target",
    "--threads",
];

/// A flag the README or the docs name in prose (`` `--post-to` ``, `` `--regress build` ``) is
/// one some command takes, unless it is another program's.
#[test]
fn every_flag_the_docs_name_in_prose_exists() {
    let all: BTreeSet<String> = known().flags.into_values().flatten().collect();
    let mut files = vec![
        root().join("README.md"),
        root().join("BENCHMARKS.md"),
        root().join("DESIGN.md"),
        root().join("bench/real/README.md"),
    ];
    for e in std::fs::read_dir(root().join("docs")).unwrap().flatten() {
        files.push(e.path());
    }
    let code = regex::Regex::new(r"(?s)```.*?```").unwrap();
    let span = regex::Regex::new(r"`(--[a-z][a-z0-9-]*)[^`\n]*`").unwrap();
    let mut named = 0;
    let mut unknown = Vec::new();
    for f in files {
        let text = std::fs::read_to_string(&f).unwrap();
        let prose = code.replace_all(&text, "");
        for c in span.captures_iter(&prose) {
            named += 1;
            let flag = &c[1];
            if !all.contains(flag) && !OTHER_PROGRAMS.contains(&flag) {
                unknown.push(format!("{}: {flag}", f.display()));
            }
        }
    }
    assert!(named > 100, "the scan found {named} flags");
    assert!(
        unknown.is_empty(),
        "flags the docs name that no command takes:\n{}",
        unknown.join("\n")
    );
}
