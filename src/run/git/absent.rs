//! Blobs a checkout finds absent from the object store (a partial clone, a snapshot missing its
//! large data files, a pruned object). One absent outside what the probe reads is not written
//! and said once; one the probe reads is fetched from the repository's remotes by the git CLI,
//! because libgit2 cannot fetch from a promisor remote (git's lazy fetch is git's own); when no
//! remote gives it, the checkout stops with one line that names the paths and what to run.

use crate::probe::Reads;
use git2::{ErrorCode, Oid, Repository};
use std::collections::BTreeSet;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::Mutex;

/// What one checkout could not read: the blobs the probe needs (fetched, or the checkout
/// fails) and the paths outside the tested tree (left unwritten).
pub(super) struct Absent<'s> {
    reads: Reads,
    /// The tested tree (`--path`, or the subtree the layout detected); `None`: all of it.
    scope: Option<&'s str>,
    pub needed: Vec<Needed>,
    pub outside: Vec<PathBuf>,
}

pub(super) struct Needed {
    pub rel: PathBuf,
    pub id: Oid,
    pub mode: i32,
}

impl<'s> Absent<'s> {
    pub fn new(reads: Reads, scope: Option<&'s str>) -> Self {
        Absent {
            reads,
            scope: scope.filter(|s| !s.is_empty() && *s != "."),
            needed: Vec::new(),
            outside: Vec::new(),
        }
    }

    /// Whether the probe reads `rel`: all a `Reads::Ggml` checkout writes is the prober's own
    /// input; of a whole tree, the tested subtree is (commits outside it were already judged
    /// the same test when the range was planned, so the user said the rest does not matter).
    fn reads_path(&self, rel: &Path) -> bool {
        match (self.reads, self.scope) {
            (Reads::Ggml, _) | (Reads::Tree, None) => true,
            (Reads::Tree, Some(s)) => rel.starts_with(s),
        }
    }

    /// Looks `id` up; `None` when it is absent, after recording where it belongs.
    pub fn read<'r>(
        &mut self,
        repo: &'r Repository,
        rel: &Path,
        id: Oid,
        mode: i32,
    ) -> Result<Option<git2::Blob<'r>>, git2::Error> {
        match repo.find_blob(id) {
            Ok(b) => Ok(Some(b)),
            Err(e) if e.code() == ErrorCode::NotFound => {
                if self.reads_path(rel) {
                    self.needed.push(Needed {
                        rel: rel.to_path_buf(),
                        id,
                        mode,
                    });
                } else {
                    self.outside.push(rel.to_path_buf());
                }
                Ok(None)
            }
            Err(e) => Err(e),
        }
    }

    /// Says once per path and process which files were left out, so a user whose test does
    /// read one knows why it is missing from `$SRC`.
    pub fn announce_outside(&self, repo: &Repository) {
        static SAID: Mutex<BTreeSet<PathBuf>> = Mutex::new(BTreeSet::new());
        let mut said = SAID.lock().unwrap_or_else(|p| p.into_inner());
        let new: Vec<&PathBuf> = self
            .outside
            .iter()
            .filter(|p| said.insert((*p).clone()))
            .collect();
        if new.is_empty() {
            return;
        }
        crate::run::events::note(format!(
            "not written, absent from {} and outside the tested tree `{}`: {}",
            repo_dir(repo).display(),
            self.scope.unwrap_or(""),
            listing(new.iter().map(|p| p.display().to_string()))
        ));
    }
}

/// Asks the repository's remotes for `ids` with the git CLI, promisor remotes first (with the
/// filter git's own lazy fetch passes), until every one is in the object store. Returns what
/// was tried, for the message when some are still absent.
pub(super) fn fetch(repo: &Repository, ids: &[Oid]) -> Vec<String> {
    let mut tried = Vec::new();
    let present = |ids: &[Oid]| -> bool {
        let Ok(odb) = repo.odb() else { return false };
        ids.iter().all(|id| odb.exists(*id))
    };
    for (remote, promisor) in remotes(repo) {
        let mut cmd = Command::new("git");
        cmd.arg("--git-dir")
            .arg(repo.path())
            .args(["-c", "fetch.negotiationAlgorithm=noop", "fetch"])
            .args([
                "--no-tags",
                "--no-write-fetch-head",
                "--recurse-submodules=no",
            ]);
        if promisor {
            cmd.arg("--filter=blob:none");
        }
        cmd.arg(&remote)
            .arg("--stdin")
            .env("GIT_TERMINAL_PROMPT", "0")
            .stdin(Stdio::piped())
            .stdout(Stdio::null())
            .stderr(Stdio::piped());
        let outcome = cmd.spawn().and_then(|mut child| {
            if let Some(mut stdin) = child.stdin.take() {
                for id in ids {
                    writeln!(stdin, "{id}")?;
                }
            }
            child.wait_with_output()
        });
        let said = match outcome {
            Ok(out) if out.status.success() => {
                if present(ids) {
                    return tried;
                }
                "fetched, still absent".to_string()
            }
            Ok(out) => last_line(&String::from_utf8_lossy(&out.stderr)),
            Err(e) => format!("running git: {e}"),
        };
        tried.push(format!("`git fetch {remote}`: {said}"));
    }
    tried
}

/// The one line a checkout stops with when the probe needs blobs no remote gave.
pub(super) fn message(
    repo: &Repository,
    commit: &str,
    absent: &Absent<'_>,
    tried: &[String],
) -> String {
    let needed = &absent.needed;
    let dir = repo_dir(repo);
    let git = format!("git -C {}", dir.display());
    let paths = listing(
        needed
            .iter()
            .map(|n| format!("{} (blob {})", n.rel.display(), n.id)),
    );
    let ids: Vec<String> = needed.iter().take(3).map(|n| n.id.to_string()).collect();
    let (remote, promisor) = remotes(repo)
        .into_iter()
        .next()
        .unwrap_or_else(|| ("origin".into(), false));
    // A refetch from a promisor remote applies the clone's filter again, leaving them out.
    let refetch = match promisor {
        true => String::new(),
        false => format!(" or `{git} fetch --refetch {remote}`"),
    };
    let todo = if tried.is_empty() {
        format!(
            "it has no remote to fetch them from: add one that has them (`{git} remote add origin URL`), then `{git} fetch origin {}`",
            ids.join(" ")
        )
    } else {
        format!(
            "{}; make the remote reachable (`{git} remote set-url {remote} URL`), then `{git} fetch {remote} {}`{refetch}",
            tried.join("; "),
            ids.join(" ")
        )
    };
    // A whole tree is read only because no subtree was named: naming one is the other way out.
    let scoped = match (absent.reads, absent.scope) {
        (Reads::Tree, None) => {
            " (or, if the test reads none of them, name the tree it tests with --path DIR)"
        }
        _ => "",
    };
    format!(
        "commit {}: {} file(s) the probe reads are absent from {}: {paths}; {todo}{scoped}; finished probes are kept: the same command resumes",
        &commit[..commit.len().min(10)],
        needed.len(),
        dir.display()
    )
}

/// The repository's remotes, promisor remotes (`remote.<name>.promisor`, or the one
/// `extensions.partialClone` names, as git before 2.4x records it) first.
fn remotes(repo: &Repository) -> Vec<(String, bool)> {
    let Ok(names) = repo.remotes() else {
        return Vec::new();
    };
    let config = repo.config().ok();
    let partial = config
        .as_ref()
        .and_then(|c| c.get_string("extensions.partialclone").ok());
    let mut out: Vec<(String, bool)> = names
        .iter()
        .flatten()
        .map(|n| {
            let promisor = partial.as_deref() == Some(n)
                || config
                    .as_ref()
                    .and_then(|c| c.get_bool(&format!("remote.{n}.promisor")).ok())
                    .unwrap_or(false);
            (n.to_string(), promisor)
        })
        .collect();
    out.sort_by_key(|(_, promisor)| !promisor);
    out
}

/// The directory a user's `git -C` names: the work tree above a `.git`, else the git dir
/// itself (a bare repository or a mirror, which libgit2 may give a guessed work tree).
fn repo_dir(repo: &Repository) -> PathBuf {
    let git_dir = repo.path();
    match (git_dir.file_name(), git_dir.parent()) {
        (Some(name), Some(parent)) if name == ".git" => parent.to_path_buf(),
        _ => git_dir.to_path_buf(),
    }
}

fn listing(items: impl Iterator<Item = String>) -> String {
    let all: Vec<String> = items.collect();
    match all.len() {
        0..=5 => all.join(", "),
        n => format!("{}, and {} more", all[..5].join(", "), n - 5),
    }
}

/// What git said went wrong, with any `user:password@` of a URL in it dropped: the line reaches the
/// terminal and CI logs, and a remote's URL may carry a token.
fn last_line(text: &str) -> String {
    // git's first fatal line says what failed; the lines after it are general advice.
    let lines: Vec<&str> = text
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty())
        .collect();
    let line = lines
        .iter()
        .find(|l| l.starts_with("fatal:") || l.starts_with("error:"))
        .or(lines.last())
        .copied()
        .unwrap_or("failed");
    let mut out = String::new();
    let mut rest = line;
    while let Some(at) = rest.find("://") {
        let (head, tail) = rest.split_at(at + 3);
        out.push_str(head);
        let host_end = tail
            .find(|c: char| c == '/' || c.is_whitespace() || c == '\'')
            .unwrap_or(tail.len());
        rest = match tail[..host_end].rfind('@') {
            Some(userinfo) => &tail[userinfo + 1..],
            None => tail,
        };
    }
    out.push_str(rest);
    out
}

#[cfg(test)]
mod tests {
    #[test]
    fn git_lines_lose_the_credentials_of_urls() {
        let said = "fatal: unable to access 'https://user:ghp_secret@example.com/o/r.git/': Could not resolve host: example.com\nhint: more\n";
        assert_eq!(
            super::last_line(said),
            "fatal: unable to access 'https://example.com/o/r.git/': Could not resolve host: example.com"
        );
        assert_eq!(
            super::last_line("fatal: 'file:///tmp/x' does not appear to be a git repository"),
            "fatal: 'file:///tmp/x' does not appear to be a git repository"
        );
    }
}
