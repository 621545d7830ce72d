//! Applied patches (`--apply REV:PATH`, `--apply PATCH_FILE`): a diff applied to every probed
//! tree before its build. Pure: which source an argument names, the files a diff touches, and
//! the identity the patches add to the tested tree's (so the store never answers a patched
//! tree with an unpatched one's result). The diff text itself is read once, in `run::apply`.

use serde::{Deserialize, Serialize};

/// What one `--apply` argument names.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Source {
    /// `REV:PATH`: the change commit REV made to PATH (`git diff REV^ REV -- PATH`).
    Commit { rev: String, path: String },
    /// A patch file (`git diff` or `git format-patch` output).
    File(String),
}

/// `REV:PATH` or a patch file: an existing file is a file (a path may hold a colon), else a
/// colon with text on both sides is a commit's change, else a file (that the caller finds
/// missing).
pub fn source(arg: &str, is_file: impl Fn(&str) -> bool) -> Source {
    if is_file(arg) {
        return Source::File(arg.to_string());
    }
    match arg.split_once(':') {
        Some((rev, path)) if !rev.is_empty() && !path.is_empty() => Source::Commit {
            rev: rev.to_string(),
            path: path.trim_start_matches("./").to_string(),
        },
        _ => Source::File(arg.to_string()),
    }
}

/// One applied patch, read: what the user named, the commit it resolved to, and the bytes
/// every probed tree gets.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct AppliedPatch {
    /// The argument as given (`abc123:tests/test-backend-ops.cpp`, `fix.patch`).
    pub given: String,
    /// `REV:PATH`: the full sha of REV (`None`: a patch file).
    pub commit: Option<String>,
    /// The diff, byte for byte as applied.
    pub text: String,
    /// `REV:PATH`: each touched file as REV's parent and REV have it, so a tree the diff's
    /// context no longer matches gets a three-way merge, as `git cherry-pick -n` would do it.
    /// Read with the diff; not part of the identity (the diff decides both) nor of documents.
    #[serde(skip)]
    pub sides: Vec<FileSides>,
}

/// One file of a commit's change: its text before (`None`: the commit adds it) and after
/// (`None`: the commit deletes it).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct FileSides {
    pub path: String,
    pub before: Option<String>,
    pub after: Option<String>,
}

impl AppliedPatch {
    /// SHA-256 of the diff text, 16 hex digits: the patch's identity.
    pub fn id(&self) -> String {
        crate::core::id::of_text(&self.text, 16)
    }

    /// The files the diff touches (both sides of a rename).
    pub fn files(&self) -> Vec<String> {
        touched_files(&self.text)
    }

    /// The saved copy's file name under the work dir's `patches/`.
    pub fn file_name(&self) -> String {
        format!("{}.patch", self.id())
    }
}

/// The paths a unified diff touches, sorted, from its `---`/`+++` lines (`a/`/`b/` stripped,
/// `/dev/null` left out) and `diff --git` headers (a mode-only or binary change has no `---`).
pub fn touched_files(diff: &str) -> Vec<String> {
    let mut out = Vec::new();
    for line in diff.lines() {
        if let Some(rest) = line.strip_prefix("diff --git ") {
            // `a/X b/X`: unquoted paths without spaces are the common case; the `---`/`+++`
            // lines name the rest.
            let mut parts = rest.split(' ');
            if let (Some(a), Some(b), None) = (parts.next(), parts.next(), parts.next()) {
                out.extend(a.strip_prefix("a/").map(str::to_string));
                out.extend(b.strip_prefix("b/").map(str::to_string));
            }
        } else if let Some(p) = line
            .strip_prefix("--- ")
            .or_else(|| line.strip_prefix("+++ "))
        {
            let p = p.split('\t').next().unwrap_or(p).trim_end();
            if p == "/dev/null" {
                continue;
            }
            let p = p
                .strip_prefix("a/")
                .or_else(|| p.strip_prefix("b/"))
                .unwrap_or(p);
            out.push(p.to_string());
        }
    }
    out.sort();
    out.dedup();
    out
}

/// Whether `text` is a patch `git apply` can read: at least one file header with a hunk, or a
/// `diff --git` header (a mode change or a new empty file has no hunk).
pub fn is_patch(text: &str) -> bool {
    let header = text.lines().any(|l| l.starts_with("diff --git "));
    let hunk = text.lines().any(|l| l.starts_with("@@ "));
    let files = text.lines().any(|l| l.starts_with("+++ "));
    header || (hunk && files)
}

/// What the patches add to a configuration's identity (empty for none, so every key written
/// without patches stays the same): each patch's id, in the order applied.
pub fn identity(patches: &[AppliedPatch]) -> String {
    if patches.is_empty() {
        return String::new();
    }
    let ids: Vec<String> = patches.iter().map(AppliedPatch::id).collect();
    format!("applied={}\n", ids.join(","))
}

/// An applied patch as a result names it: `GIVEN (diff of SHA limited to its path, patch ID;
/// touches FILES)`.
pub fn describe_info(a: &AppliedInfo) -> String {
    let what = match &a.commit {
        Some(sha) => format!(
            "diff of {} limited to its path, patch {}",
            crate::core::range::short_sha(sha),
            a.id
        ),
        None => format!("patch {}", a.id),
    };
    format!("{} ({what}; touches {})", a.given, a.files.join(", "))
}

/// An applied patch as a result records it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct AppliedInfo {
    /// The `--apply` argument as given.
    pub given: String,
    /// The commit `REV:PATH` resolved to (absent: a patch file).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub commit: Option<String>,
    /// The patch's identity (SHA-256 of its text, 16 hex digits).
    pub id: String,
    /// The files it touches.
    pub files: Vec<String>,
    /// The copy every probe applied, under the work dir.
    pub saved: String,
}

impl AppliedInfo {
    pub fn of(p: &AppliedPatch, saved: &str) -> AppliedInfo {
        AppliedInfo {
            given: p.given.clone(),
            commit: p.commit.clone(),
            id: p.id(),
            files: p.files(),
            saved: saved.to_string(),
        }
    }
}

/// The shell lines that apply the saved patches in the current directory (the checkout).
pub fn apply_lines(applied: &[AppliedInfo]) -> String {
    applied
        .iter()
        .map(|a| format!("{}\n", a.apply_line()))
        .collect()
}

impl AppliedInfo {
    /// The line that applies this patch by hand in a checkout of the repository. A commit's
    /// change takes `-3`: where its context moved, git merges it as the probe did.
    pub fn apply_line(&self) -> String {
        let three_way = if self.commit.is_some() { "-3 " } else { "" };
        format!(
            "git apply {three_way}{}",
            crate::core::shell::word(&self.saved)
        )
    }
}

/// A hand-run snippet with the patches applied after its `cd` into the checkout (prepended
/// when it has none), so the tree it builds is the tree the probe built.
pub fn with_apply_lines(hint: &str, applied: &[AppliedInfo]) -> String {
    if applied.is_empty() {
        return hint.to_string();
    }
    let lines = apply_lines(applied);
    let mut out = String::new();
    let mut done = false;
    for l in hint.split_inclusive('\n') {
        out.push_str(l);
        if !done && l.starts_with("cd ") {
            if !l.ends_with('\n') {
                out.push('\n');
            }
            out.push_str(&lines);
            done = true;
        }
    }
    if done {
        out
    } else {
        format!("{lines}{hint}")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const DIFF: &str = "diff --git a/tests/t.cpp b/tests/t.cpp\nindex 1..2 100644\n--- a/tests/t.cpp\n+++ b/tests/t.cpp\n@@ -1 +1,2 @@\n a\n+b\ndiff --git a/new.txt b/new.txt\nnew file mode 100644\n--- /dev/null\n+++ b/new.txt\n@@ -0,0 +1 @@\n+x\n";

    #[test]
    fn an_existing_file_is_a_file_else_rev_colon_path() {
        assert_eq!(source("x:y", |_| true), Source::File("x:y".into()));
        assert_eq!(
            source("HEAD~1:./tests/t.cpp", |_| false),
            Source::Commit {
                rev: "HEAD~1".into(),
                path: "tests/t.cpp".into()
            }
        );
        assert_eq!(
            source("fix.patch", |_| false),
            Source::File("fix.patch".into())
        );
        assert_eq!(source(":x", |_| false), Source::File(":x".into()));
    }

    #[test]
    fn touched_files_of_a_git_diff() {
        assert_eq!(touched_files(DIFF), vec!["new.txt", "tests/t.cpp"]);
        assert!(is_patch(DIFF));
        assert!(!is_patch("hello\nworld\n"));
    }

    #[test]
    fn the_hand_run_applies_after_its_cd() {
        let a = AppliedInfo {
            given: "f.patch".into(),
            commit: None,
            id: "0123".into(),
            files: vec!["t".into()],
            saved: "/w/patches/0123.patch".into(),
        };
        let hint = "git worktree add x\ncd /tmp/r && export SRC=$PWD\nsh -c t";
        assert_eq!(
            with_apply_lines(hint, std::slice::from_ref(&a)),
            "git worktree add x\ncd /tmp/r && export SRC=$PWD\ngit apply /w/patches/0123.patch\nsh -c t"
        );
        assert_eq!(with_apply_lines(hint, &[]), hint);
    }

    #[test]
    fn identity_is_empty_without_patches_and_changes_with_the_text() {
        assert_eq!(identity(&[]), "");
        let p = |t: &str| AppliedPatch {
            given: "f".into(),
            commit: None,
            text: t.into(),
            sides: Vec::new(),
        };
        assert_ne!(identity(&[p(DIFF)]), identity(&[p("other")]));
        assert_eq!(identity(&[p(DIFF)]), identity(&[p(DIFF)]));
    }
}
