//! The work dir as a user browses it, against a real bisect of a generated repository: `log`,
//! `show` (re-rendered from the store, nothing probed), `gc`; the report with its recorded
//! command line, links and pictures; golden renderings of a committed result; the help.
mod common;
use assert_cmd::Command;
use common::*;
use setrows_bisect::core::result::BisectResult;
use setrows_bisect::report::escape::outside_code;
use std::path::Path;

fn bin() -> Command {
    let mut c = Command::cargo_bin("setrows-bisect").unwrap();
    c.env_remove("SETROWS_WORK_DIR");
    c
}

fn stdout(c: &mut Command) -> String {
    let out = c.output().unwrap();
    assert!(
        out.status.success(),
        "{:?}: {}",
        c,
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap()
}

const ZERO_WIDTH: [char; 6] = [
    '\u{200B}', '\u{200C}', '\u{200D}', '\u{2060}', '\u{FEFF}', '\u{200E}',
];

fn assert_no_zero_width_outside_code(md: &str) {
    let visible = outside_code(md);
    for c in ZERO_WIDTH {
        assert!(!visible.contains(c), "{c:?} outside code spans in:\n{md}");
    }
    assert!(
        !visible.contains('\\'),
        "backslash escapes outside code in:\n{visible}"
    );
}

/// The id of the one bisection in `work`.
fn only_id(work: &Path) -> String {
    let names: Vec<String> = std::fs::read_dir(work.join("journal"))
        .unwrap()
        .flatten()
        .filter_map(|e| {
            e.file_name()
                .to_str()?
                .strip_suffix(".jsonl")
                .map(str::to_string)
        })
        .collect();
    assert_eq!(names.len(), 1, "{names:?}");
    names[0].clone()
}

#[test]
fn log_show_and_gc_browse_a_real_work_dir() {
    if !have_cmake() {
        return;
    }
    let f = Fixture::new(&spec(40, 23));
    let git = |args: &[&str]| {
        let ok = std::process::Command::new("git")
            .arg("-C")
            .arg(f.repo())
            .args(args)
            .status()
            .unwrap()
            .success();
        assert!(ok, "git {args:?}");
    };
    git(&[
        "remote",
        "add",
        "origin",
        "git@github.com:ggml-org/ggml.git",
    ]);
    // No subcommand: `setrows-bisect --good X --bad Y` is still `bisect`.
    f.bisect(0, 39).assert().code(0);
    let work = f.work();
    let id = only_id(&work);

    // From the journal alone (no saved result yet): the answer and the configuration.
    let log = stdout(bin().args(["log", "--work-dir"]).arg(&work));
    let line = log
        .lines()
        .find(|l| l.starts_with(&id))
        .unwrap_or_else(|| panic!("{log}"));
    assert!(
        line.contains(&f.sha(23)[..12]) && line.contains("script="),
        "{line}"
    );

    // The bisect itself stamped its result and saved it next to the journal.
    let saved = setrows_bisect::run::stamp::result_path(&work, &id);
    assert!(saved.exists(), "{} was not written", saved.display());
    let r: BisectResult = serde_json::from_str(&std::fs::read_to_string(&saved).unwrap()).unwrap();
    assert_eq!(
        r.invocation.repo_url.as_deref(),
        Some("https://github.com/ggml-org/ggml")
    );
    assert!(r.invocation.tool.is_some());
    // The exact command line that reproduces it, as the binary saw it.
    assert!(
        r.invocation
            .argv
            .windows(2)
            .any(|w| w[0] == "--good" && w[1] == f.sha(0)),
        "{:?}",
        r.invocation.argv
    );
    assert!(
        r.invocation.provenance.contains_key("kernel"),
        "{:?}",
        r.invocation.provenance
    );

    // log: one line per bisection with range, state and answer
    let log = stdout(bin().args(["log", "--work-dir"]).arg(&work));
    let line = log
        .lines()
        .find(|l| l.starts_with(&id))
        .unwrap_or_else(|| panic!("{log}"));
    assert!(
        line.contains(&format!("{}..{}", &f.sha(0)[..10], &f.sha(39)[..10])),
        "{line}"
    );
    assert!(
        line.contains("done") && line.contains(&f.sha(23)[..12]),
        "{line}"
    );
    assert!(
        line.contains("script="),
        "configuration from the command line: {line}"
    );
    let json = stdout(bin().args(["log", "--json", "--work-dir"]).arg(&work));
    let v: serde_json::Value = serde_json::from_str(json.lines().next().unwrap()).unwrap();
    assert_eq!(v["first_bad"], f.sha(23));

    // show: the report again, by a prefix of the id, nothing probed
    let probes_before = std::fs::read_dir(work.join("logs")).unwrap().count();
    let md = stdout(bin().args(["show", &id[..6], "--work-dir"]).arg(&work));
    assert_eq!(
        std::fs::read_dir(work.join("logs")).unwrap().count(),
        probes_before
    );
    let sha = f.sha(23);
    assert!(
        md.contains(&format!("](https://github.com/ggml-org/ggml/commit/{sha})")),
        "culprit linked: {md}"
    );
    assert!(
        md.contains(&format!(
            "https://github.com/ggml-org/ggml/compare/{}...{}",
            f.sha(0),
            f.sha(39)
        )),
        "{md}"
    );
    assert!(
        md.contains("good |") && md.contains("<- first bad commit"),
        "text timeline: {md}"
    );
    assert!(
        md.contains("--good") && md.contains("--work-dir"),
        "recorded command line: {md}"
    );
    assert!(md.contains(&format!("setrows-bisect show {id}")), "{md}");
    assert!(
        md.contains("confidence:") && md.contains("kernel `"),
        "{md}"
    );
    let tail = md.trim_end().lines().last().unwrap();
    assert!(
        tail.starts_with("<sub>setrows-bisect "),
        "ends with the tool version: {tail}"
    );
    let log_line = md
        .lines()
        .find(|l| l.starts_with("Its log:"))
        .unwrap_or_else(|| panic!("{md}"));
    assert!(
        log_line.starts_with("Its log: `logs/") && !log_line.contains(&work.display().to_string()),
        "the log is named relative to the work dir: {log_line}"
    );
    let gh = stdout(
        bin()
            .args(["show", &id, "--format", "github", "--work-dir"])
            .arg(&work),
    );
    assert!(
        gh.contains("```mermaid\n%%{init") && gh.contains("gitGraph"),
        "{gh}"
    );
    assert!(gh.contains("type: HIGHLIGHT"), "{gh}");
    assert_no_zero_width_outside_code(&gh);
    let unknown = bin()
        .args(["show", "zzzz", "--work-dir"])
        .arg(&work)
        .output()
        .unwrap();
    assert_eq!(unknown.status.code(), Some(2));

    // the comment, copied as text: no zero-width characters or backslashes outside code
    let body = stdout(bin().args(["report", "--results"]).arg(&saved));
    assert_no_zero_width_outside_code(&body);
    let other = stdout(
        bin()
            .args([
                "report",
                "--repo-url",
                "https://github.com/me/fork",
                "--results",
            ])
            .arg(&saved),
    );
    assert!(
        other.contains(&format!("https://github.com/me/fork/commit/{sha}")),
        "{other}"
    );

    // gc: a dry run removes nothing; recently used checkouts stay; --older-than 0 removes them
    let checkouts = || {
        std::fs::read_dir(work.join("checkouts"))
            .map(|d| {
                d.flatten()
                    .flat_map(|e| std::fs::read_dir(e.path()).unwrap().flatten())
                    .count()
            })
            .unwrap_or(0)
    };
    let slot_dirs = |p: &Path| walk_dirs(p);
    let before = slot_dirs(&work.join("checkouts"));
    assert!(checkouts() > 0 && before > 0);
    let dry = stdout(
        bin()
            .args(["gc", "--older-than", "0", "--dry-run", "--work-dir"])
            .arg(&work),
    );
    assert!(dry.contains("would remove checkout"), "{dry}");
    assert_eq!(
        slot_dirs(&work.join("checkouts")),
        before,
        "dry run removed something"
    );
    let kept = stdout(
        bin()
            .args(["gc", "--older-than", "1", "--work-dir"])
            .arg(&work),
    );
    assert!(kept.contains("removed 0 item(s)"), "{kept}");
    let gone = stdout(
        bin()
            .args(["gc", "--older-than", "0", "--work-dir"])
            .arg(&work),
    );
    assert!(gone.contains("removed checkout"), "{gone}");
    assert!(slot_dirs(&work.join("checkouts")) < before);
    assert!(
        work.join("results").read_dir().unwrap().count() > 0,
        "results stay"
    );
    // results and journal survive: show still works, and a re-run answers from the store
    stdout(bin().args(["show", &id, "--work-dir"]).arg(&work));
    f.bisect(0, 39).assert().code(0);
    assert_eq!(
        f.result()["executed"],
        0,
        "every probe answered by the store after gc"
    );
}

fn walk_dirs(p: &Path) -> usize {
    let Ok(rd) = std::fs::read_dir(p) else {
        return 0;
    };
    rd.flatten()
        .filter(|e| e.path().is_dir())
        .map(|e| 1 + walk_dirs(&e.path()))
        .sum()
}

/// Renders `tests/golden/NAME` from the committed result; `UPDATE_GOLDEN=1` rewrites it.
fn golden(name: &str, got: &str) {
    let path = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/golden")
        .join(name);
    if std::env::var_os("UPDATE_GOLDEN").is_some() {
        std::fs::write(&path, got).unwrap();
    }
    let want = std::fs::read_to_string(&path).unwrap_or_default();
    assert!(
        want == got,
        "{} differs (UPDATE_GOLDEN=1 to accept):\n--- want\n{want}\n--- got\n{got}",
        path.display()
    );
}

fn fixture() -> BisectResult {
    let p = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/golden/bisect-result.json");
    serde_json::from_str(&std::fs::read_to_string(p).unwrap()).unwrap()
}

#[test]
fn report_and_comment_match_their_golden_renderings() {
    let r = fixture();
    let terminal = setrows_bisect::report::bisect::markdown(&r);
    golden("bisect-report.md", &terminal);
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/golden/bisect-result.json");
    let comment = stdout(bin().args(["report", "--results"]).arg(&path));
    golden("bisect-comment.md", &comment);
    assert_no_zero_width_outside_code(&comment);
    assert!(comment.contains("```mermaid"), "{comment}");
}

#[test]
fn no_arguments_show_the_subcommands_and_help_has_headings() {
    let out = bin().output().unwrap();
    let text =
        String::from_utf8_lossy(&out.stdout).to_string() + &String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2));
    for c in ["Commands:", "log ", "show ", "gc ", "completions", "man "] {
        assert!(text.contains(c), "{c} missing: {text}");
    }
    assert!(!text.contains("error:"), "{text}");
    let report = stdout(bin().args(["report", "--help"]));
    for h in ["GitHub:", "Input:", "Output:", "--repo-url <URL>"] {
        assert!(report.contains(h), "{h}: {report}");
    }
    assert!(!report.contains("matrix --json"), "{report}");
    // every flag of the commands this file covers is described and uses the one vocabulary
    use clap::CommandFactory;
    let cli = setrows_bisect::cli::Cli::command();
    let vocabulary = [
        "REGEX",
        "SECS",
        "FILE",
        "DIR",
        "N",
        "ID",
        "KEY",
        "URL",
        "LOGIN",
        "OWNER/REPO#N",
        "SHELL",
        "FORMAT",
        "KIND",
    ];
    for sub in [
        "log",
        "show",
        "gc",
        "report",
        "demo",
        "schema",
        "completions",
        "man",
    ] {
        let cmd = cli.find_subcommand(sub).unwrap_or_else(|| panic!("{sub}"));
        for a in cmd.get_arguments() {
            let id = a.get_id().as_str();
            if id == "help" || id == "version" {
                continue;
            }
            assert!(a.get_help().is_some(), "{sub} {id}: no description");
            if a.get_num_args().is_some_and(|n| n.takes_values()) {
                for v in a.get_value_names().unwrap_or_default() {
                    assert!(
                        vocabulary.contains(&v.as_str()),
                        "{sub} {id}: value name <{v}> is not in the vocabulary"
                    );
                }
            }
        }
    }
    let bash = stdout(bin().args(["completions", "bash"]));
    assert!(
        bash.contains("setrows-bisect") && bash.contains("gc"),
        "{bash}"
    );
    let man = stdout(bin().args(["man"]));
    assert!(man.starts_with(".ie") || man.contains(".TH"), "{man}");
}

/// The demo's last line is a command that works: with --out, `show` finds the run in the kept
/// work dir (the report's own `show ID` hint names the default work dir); without, the temp dir
/// is gone, and the suggested repeat with --out plants and finds the same commit.
#[test]
fn the_demos_last_line_is_a_command_that_works() {
    if !have_cmake() {
        return;
    }
    let run_line = |line: &str, after: &str| {
        let (_, cmd) = line
            .split_once(after)
            .unwrap_or_else(|| panic!("{after:?} not in {line:?}"));
        // Temp paths need no quoting: a quoted word here would be a change this test must see.
        assert!(!cmd.contains('\''), "{cmd}");
        let words: Vec<&str> = cmd.split_whitespace().collect();
        let mut c = Command::new(words[0]);
        c.args(&words[1..]).env_remove("SETROWS_WORK_DIR");
        c
    };
    let d = tempfile::tempdir().unwrap();
    let kept = stdout(
        bin()
            .args(["demo", "--commits", "40", "--seed", "3", "--out"])
            .arg(d.path().join("kept")),
    );
    let last = kept.lines().last().unwrap();
    let report = stdout(&mut run_line(last, "its report again: "));
    assert!(report.contains("first bad commit found"), "{report}");

    let out = bin()
        .args(["demo", "--commits", "40", "--seed", "3"])
        .output()
        .unwrap();
    assert!(out.status.success(), "{out:?}");
    let (text, err) = (
        String::from_utf8(out.stdout).unwrap(),
        String::from_utf8(out.stderr).unwrap(),
    );
    let tmp = err
        .split_once(" in ")
        .and_then(|(_, r)| r.split_once(" (seed"))
        .map(|(p, _)| std::path::PathBuf::from(p))
        .unwrap_or_else(|| panic!("no repository path in {err}"));
    assert!(tmp.is_absolute() && !tmp.exists(), "{} kept", tmp.display());
    let last = text.lines().last().unwrap();
    assert!(!last.contains(" show "), "{last}");
    let again = d.path().join("again");
    let repeat = last.replace(" --out DIR", &format!(" --out {}", again.display()));
    let repeated = stdout(&mut run_line(&repeat, "the same run, kept: "));
    let planted = |t: &str| {
        t.lines()
            .find(|l| l.starts_with("demo: the change was planted"))
            .map(str::to_string)
    };
    assert!(planted(&text).is_some(), "{text}");
    assert_eq!(planted(&repeated), planted(&text));
    assert!(again.join("work/journal").is_dir(), "{repeated}");
}
