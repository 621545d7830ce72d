//! Every command the README shows, run verbatim by bash from an empty directory with a fresh
//! HOME, as a new user would after `cargo install --path .`: the binary is the test build's,
//! put on PATH under its installed name (installing would compile every crate again on the
//! 2-core CI machine). Commands that cannot run here are listed in SKIP with the reason; a
//! README command that is in neither list runs, so a new one cannot go untested by accident.

use std::path::Path;
use std::process::Command;

/// (command prefix, why it does not run here). Every entry must match a README command
/// (checked below), so the list cannot keep reasons for commands the README no longer shows.
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
        "git clone https://github.com/ggml-org/ggml ~/src/ggml",
        "the network (tests talk to loopback only); readme_ggml_commands_paste_as_is checks the revisions the README gives it",
    ),
    (
        "podman build -f containers/rocm.Dockerfile",
        "pulls the multi-GB ROCm base image; no network under CI",
    ),
    (
        "setrows-bisect --repo ~/src/ggml",
        "needs a ggml checkout in ~/src/ggml (and, with --config or --backend hip, a gfx1151 GPU); every_cli_line_in_the_docs_parses parses it",
    ),
];

/// A README command that is exactly this text (none today; the program's name alone in an
/// inline span would go here).
const SKIP_EXACT: &[(&str, &str)] = &[];

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
    for (prefix, _) in SKIP.iter().chain(SKIP_EXACT) {
        assert!(
            cmds.iter().any(|c| c.starts_with(prefix)),
            "SKIP entry `{prefix}` matches no README command: remove it"
        );
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

/// ggml revisions the README and docs/ name, each looked up in ggml-org/ggml (at d99724f2: release
/// tags, all ancestors of master; 0a8ab465, a master commit; a1938493, the first-parent master
/// commit that added ggml_set_rows, the replay's floor): a revision must be one of these or `master`, so a
/// command pasted into a fresh clone resolves (lucebox's 53859c2 and a `v0.0.1` did not).
const GGML_TAGS: &[&str] = &[
    "0a8ab465", "a1938493", "v0.9.3", "v0.9.4", "v0.9.5", "v0.9.11", "v0.10.0", "v0.15.0",
    "v0.20.0", "v0.20.1", "v0.20.2", "v0.21.0",
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

/// README.md and every Markdown file under docs/, as (path relative to the crate, text).
fn doc_files() -> Vec<(String, String)> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut out = vec![("README.md".to_string(), readme())];
    let mut dirs = vec![root.join("docs")];
    let mut found = Vec::new();
    while let Some(d) = dirs.pop() {
        for e in std::fs::read_dir(&d).unwrap() {
            let p = e.unwrap().path();
            if p.is_dir() {
                dirs.push(p);
            } else if p.extension().is_some_and(|x| x == "md") {
                found.push(p);
            }
        }
    }
    found.sort();
    for p in found {
        let rel = p.strip_prefix(root).unwrap().to_string_lossy().into_owned();
        out.push((rel, std::fs::read_to_string(&p).unwrap()));
    }
    out
}

/// One shell token: a word (quotes removed) or an unquoted operator (`|`, `&&`, `;`, `>`, ...).
#[derive(Debug, PartialEq)]
enum Tok {
    Word(String),
    Op(String),
}

/// Splits one logical shell line the way the shell does for words: quotes, backslashes,
/// `#` comments, and control/redirection operators as their own tokens. `$VAR`, `$(...)`
/// and `~` stay literal (no expansion). An unterminated quote is an error.
fn shell_split(line: &str) -> Result<Vec<Tok>, String> {
    let mut toks = Vec::new();
    let mut cur = String::new();
    let mut in_word = false;
    let mut it = line.chars().peekable();
    let end_word = |cur: &mut String, in_word: &mut bool, toks: &mut Vec<Tok>| {
        if *in_word {
            toks.push(Tok::Word(std::mem::take(cur)));
            *in_word = false;
        }
    };
    while let Some(c) = it.next() {
        match c {
            '\'' => {
                in_word = true;
                loop {
                    match it.next() {
                        Some('\'') => break,
                        Some(x) => cur.push(x),
                        None => return Err(format!("unterminated ' in: {line}")),
                    }
                }
            }
            '"' => {
                in_word = true;
                loop {
                    match it.next() {
                        Some('"') => break,
                        Some('\\') => match it.next() {
                            Some(x @ ('"' | '\\' | '$' | '`')) => cur.push(x),
                            Some(x) => {
                                cur.push('\\');
                                cur.push(x);
                            }
                            None => return Err(format!("unterminated \" in: {line}")),
                        },
                        Some(x) => cur.push(x),
                        None => return Err(format!("unterminated \" in: {line}")),
                    }
                }
            }
            '\\' => {
                in_word = true;
                if let Some(x) = it.next() {
                    cur.push(x);
                }
            }
            '#' if !in_word => break,
            c if c.is_whitespace() => end_word(&mut cur, &mut in_word, &mut toks),
            '|' | '&' | ';' | '>' | '<' => {
                // `2>`: the digits glued to a redirection are its file descriptor.
                if c == '>' && in_word && cur.chars().all(|d| d.is_ascii_digit()) {
                    cur.clear();
                    in_word = false;
                }
                end_word(&mut cur, &mut in_word, &mut toks);
                let mut op = c.to_string();
                while let Some(&n) = it.peek() {
                    if (n == c && c != ';') || (c == '>' && n == '&') {
                        op.push(n);
                        it.next();
                    } else {
                        break;
                    }
                }
                toks.push(Tok::Op(op));
            }
            c => {
                in_word = true;
                cur.push(c);
            }
        }
    }
    end_word(&mut cur, &mut in_word, &mut toks);
    Ok(toks)
}

/// The simple commands of one logical line: split at `|`, `&&`, `||`, `;`, `&`, with
/// redirections (`> FILE`, `2>&1`, `< FILE`) and leading `VAR=value` assignments removed.
fn simple_commands(toks: Vec<Tok>) -> Vec<Vec<String>> {
    let mut out = vec![Vec::new()];
    let mut it = toks.into_iter();
    while let Some(t) = it.next() {
        match t {
            Tok::Word(w) => out.last_mut().unwrap().push(w),
            Tok::Op(op) if op.starts_with('>') || op.starts_with('<') => {
                // `>&1` names its target in the operator; others take the next word.
                if !op.contains('&') {
                    it.next();
                }
            }
            Tok::Op(_) => out.push(Vec::new()),
        }
    }
    let assignment = regex::Regex::new(r"^[A-Za-z_][A-Za-z0-9_]*=").unwrap();
    for c in &mut out {
        while c.first().is_some_and(|w| assignment.is_match(w)) {
            c.remove(0);
        }
    }
    out.retain(|c| !c.is_empty());
    out
}

/// (line number, logical line) of every ```sh / ```console block: `\` continuations joined,
/// a console prompt (`$ `) dropped, comment-only and blank lines left out.
fn code_lines(text: &str) -> Vec<(usize, String)> {
    let mut out = Vec::new();
    let mut in_block = false;
    let mut pending: Option<(usize, String)> = None;
    for (i, line) in text.lines().enumerate() {
        if line.trim_start().starts_with("```") {
            in_block = !in_block && matches!(line.trim(), "```sh" | "```console");
            if let Some(p) = pending.take() {
                out.push(p);
            }
            continue;
        }
        if !in_block {
            continue;
        }
        let t = line.trim();
        let t = t.strip_prefix("$ ").unwrap_or(t);
        if pending.is_none() && (t.is_empty() || t.starts_with('#')) {
            continue;
        }
        let (n, mut acc) = pending.take().unwrap_or((i + 1, String::new()));
        match t.strip_suffix('\\') {
            Some(head) => {
                acc.push_str(head);
                acc.push(' ');
                pending = Some((n, acc));
            }
            None => {
                acc.push_str(t);
                out.push((n, acc));
            }
        }
    }
    out
}

#[test]
fn shell_split_handles_quotes_comments_and_operators() {
    let w = |s: &str| Tok::Word(s.to_string());
    let o = |s: &str| Tok::Op(s.to_string());
    assert_eq!(
        shell_split(r#"a 'b c' "d \"e\" $X" f\ g # h"#).unwrap(),
        vec![w("a"), w("b c"), w(r#"d "e" $X"#), w("f g")]
    );
    assert_eq!(
        shell_split("x > f 2>&1 && y | z; q").unwrap(),
        vec![
            w("x"),
            o(">"),
            w("f"),
            o(">&"),
            w("1"),
            o("&&"),
            w("y"),
            o("|"),
            w("z"),
            o(";"),
            w("q")
        ]
    );
    assert!(shell_split("a 'b").is_err());
    let cmds = simple_commands(
        shell_split("K=v L='a b' setrows-bisect x > out.txt && echo 'y # z' | cat").unwrap(),
    );
    assert_eq!(
        cmds,
        vec![
            vec!["setrows-bisect".to_string(), "x".to_string()],
            vec!["echo".to_string(), "y # z".to_string()],
            vec!["cat".to_string()]
        ]
    );
    let lines = code_lines("```sh\n# c\nsetrows-bisect a \\\n  --b c\n```\n\nsetrows-bisect no\n");
    assert_eq!(lines, vec![(3, "setrows-bisect a  --b c".to_string())]);
}

/// Shell variables a docs command passes to a flag clap checks against a fixed set of values;
/// left as the literal `$NAME`, clap would refuse the line. Each gets a value its source gives it.
const SHELL_VARS: &[(&str, &str)] = &[
    // bisect.yml's `regress` input: error, success, crash or build.
    ("$REGRESS", "crash"),
];

/// Every `setrows-bisect ...` command line in a ```sh or ```console block of README.md or
/// docs/**/*.md is parsed by the real CLI definition; a line clap refuses fails the test with
/// its file and line. A `~/src/ggml` line's revisions must be ggml's (GGML_TAGS or master).
#[test]
fn every_cli_line_in_the_docs_parses() {
    use clap::error::ErrorKind;
    use clap::Parser;
    let mut parsed = 0;
    let mut errors = Vec::new();
    for (file, text) in doc_files() {
        for (n, line) in code_lines(&text) {
            let toks = match shell_split(&line) {
                Ok(t) => t,
                Err(e) => {
                    errors.push(format!("{file}:{n}: {e}"));
                    continue;
                }
            };
            for mut argv in simple_commands(toks) {
                for a in &mut argv {
                    if let Some((_, v)) = SHELL_VARS.iter().find(|(k, _)| k == a) {
                        *a = v.to_string();
                    }
                }
                if argv[0] != "setrows-bisect" {
                    continue;
                }
                parsed += 1;
                if let Err(e) = setrows_bisect::cli::Cli::try_parse_from(&argv) {
                    if !matches!(e.kind(), ErrorKind::DisplayHelp | ErrorKind::DisplayVersion) {
                        errors.push(format!("{file}:{n}: `{line}`\n{e}"));
                    }
                }
                if argv.iter().any(|a| a.starts_with("~/src/ggml")) {
                    for pair in argv.windows(2) {
                        let rev = pair[1].as_str();
                        if ["--good", "--bad", "--rev", "--good-rev"].contains(&pair[0].as_str())
                            && rev != "master"
                            && !GGML_TAGS.contains(&rev)
                        {
                            errors.push(format!(
                                "{file}:{n}: {} {rev}: not a ggml revision (master or GGML_TAGS)",
                                pair[0]
                            ));
                        }
                    }
                }
            }
        }
    }
    assert!(errors.is_empty(), "{}", errors.join("\n\n"));
    // README's quick starts and the book's examples: far more than a handful.
    assert!(parsed >= 30, "only {parsed} setrows-bisect lines found");
    eprintln!("parsed {parsed} setrows-bisect command lines");
}

/// GitHub's heading anchors: lower case, punctuation but `-` and `_` dropped, spaces to `-`,
/// a repeated heading suffixed `-1`, `-2`, ...
fn anchors(text: &str) -> std::collections::BTreeSet<String> {
    let link = regex::Regex::new(r"\[([^\]]*)\]\([^)]*\)").unwrap();
    let mut seen = std::collections::BTreeMap::<String, usize>::new();
    let mut out = std::collections::BTreeSet::new();
    let mut fence = false;
    for line in text.lines() {
        if line.trim_start().starts_with("```") {
            fence = !fence;
            continue;
        }
        let Some(h) = line.strip_prefix('#') else {
            continue;
        };
        if fence {
            continue;
        }
        let h = link.replace_all(h.trim_start_matches('#').trim(), "$1");
        let slug: String = h
            .to_lowercase()
            .chars()
            .filter(|c| c.is_alphanumeric() || matches!(c, ' ' | '-' | '_'))
            .map(|c| if c == ' ' { '-' } else { c })
            .collect();
        let k = seen.entry(slug.clone()).or_insert(0);
        out.insert(if *k == 0 {
            slug.clone()
        } else {
            format!("{slug}-{k}")
        });
        *k += 1;
    }
    out
}

/// Every relative Markdown link in README.md and docs/ names a file or directory that exists,
/// and its `#anchor`, when the target is Markdown, a heading of the target.
#[test]
fn every_relative_link_in_the_docs_resolves() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let link = regex::Regex::new(r"\[[^\]]*\]\(([^)\s]+)\)").unwrap();
    let code_span = regex::Regex::new(r"`[^`]*`").unwrap();
    let mut checked = 0;
    let mut errors = Vec::new();
    for (file, text) in doc_files() {
        let dir = root.join(&file).parent().unwrap().to_path_buf();
        let mut fence = false;
        for (i, line) in text.lines().enumerate() {
            if line.trim_start().starts_with("```") {
                fence = !fence;
                continue;
            }
            if fence {
                continue;
            }
            let line = code_span.replace_all(line, "");
            for cap in link.captures_iter(&line) {
                let target = &cap[1];
                if target.contains("://") || target.starts_with("mailto:") {
                    continue;
                }
                checked += 1;
                let (path, anchor) = match target.split_once('#') {
                    Some((p, a)) => (p, Some(a)),
                    None => (target, None),
                };
                let resolved = if path.is_empty() {
                    root.join(&file)
                } else {
                    dir.join(path)
                };
                if !resolved.exists() {
                    errors.push(format!("{file}:{}: {target}: no such file", i + 1));
                    continue;
                }
                if let Some(a) = anchor {
                    if resolved.extension().is_some_and(|x| x == "md")
                        && !anchors(&std::fs::read_to_string(&resolved).unwrap()).contains(a)
                    {
                        errors.push(format!("{file}:{}: {target}: no heading #{a}", i + 1));
                    }
                }
            }
        }
    }
    assert!(errors.is_empty(), "{}", errors.join("\n"));
    assert!(checked >= 40, "only {checked} relative links found");
    eprintln!("checked {checked} relative links");
}

/// docs/SUMMARY.md is mdBook's: `# Summary`, then `- [Title](file.md)` lines, and every
/// chapter under docs/ is in it once.
#[test]
fn the_book_summary_lists_every_chapter() {
    let docs = Path::new(env!("CARGO_MANIFEST_DIR")).join("docs");
    let summary = std::fs::read_to_string(docs.join("SUMMARY.md")).unwrap();
    let mut lines = summary.lines().filter(|l| !l.trim().is_empty());
    assert_eq!(lines.next(), Some("# Summary"));
    let item = regex::Regex::new(r"^\s*- \[[^\]]+\]\(([^)#]+\.md)\)$").unwrap();
    let mut listed = Vec::new();
    for l in lines {
        let cap = item
            .captures(l)
            .unwrap_or_else(|| panic!("not an mdBook summary line: {l}"));
        listed.push(cap[1].to_string());
    }
    let mut chapters: Vec<String> = std::fs::read_dir(&docs)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| n.ends_with(".md") && n != "SUMMARY.md")
        .collect();
    chapters.sort();
    let mut sorted = listed.clone();
    sorted.sort();
    assert_eq!(sorted, chapters, "SUMMARY.md vs the files under docs/");
}
