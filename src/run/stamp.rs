//! What a result records about how it was asked, filled in by the command that writes it: the
//! exact command line, this build of the tool, the repository's web address (for commit and
//! compare links) and the environment the answer's probe ran in. A bisection's result is also
//! saved next to its journal (`journal/<id>.result.json`), so `setrows-bisect show ID`
//! re-renders it later without running anything.

use crate::core::result::{BisectResult, Invocation};
use crate::run::store::{Store, StoreError, StoreKey};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

/// This process's invocation: its argv, this build, and the web address of `repo`'s `origin`.
pub fn invocation(repo: &Path) -> Invocation {
    let mut inv = Invocation::new(std::env::args().collect());
    inv.repo_url = remote_web_url(repo);
    inv
}

/// The https address of `repo`'s `origin` remote (`git@github.com:o/r.git`,
/// `ssh://git@host/o/r`, `https://user:token@host/o/r.git` all become `https://host/o/r`;
/// credentials never survive). `None` without such a remote.
pub fn remote_web_url(repo: &Path) -> Option<String> {
    let r = git2::Repository::open(repo).ok()?;
    let remote = r.find_remote("origin").ok()?;
    web_url(remote.url()?)
}

/// See [`remote_web_url`]; `None` for local paths and anything not of the form host/owner/repo.
pub fn web_url(remote: &str) -> Option<String> {
    let rest = if let Some(r) = remote
        .strip_prefix("https://")
        .or_else(|| remote.strip_prefix("http://"))
        .or_else(|| remote.strip_prefix("ssh://"))
        .or_else(|| remote.strip_prefix("git://"))
    {
        r.to_string()
    } else if let Some((user_host, path)) = remote.split_once(':') {
        // scp-like: git@github.com:owner/repo.git
        if user_host.contains('/') {
            return None;
        }
        format!("{user_host}/{path}")
    } else {
        return None;
    };
    let (host, path) = rest.split_once('/')?;
    let host = host.rsplit('@').next()?;
    let host = host.split(':').next()?; // drop ssh ports
    let path = path.trim_end_matches('/').trim_end_matches(".git");
    let url = format!("https://{host}/{path}");
    crate::core::result::web_url(Some(&url)).map(str::to_string)
}

/// Where a bisection's result is kept in the work dir.
pub fn result_path(work_dir: &Path, id: &str) -> PathBuf {
    Store::at(work_dir).result_path(id)
}

/// Fills `result`'s invocation (argv, tool, repo URL, id, the answer probe's provenance) and
/// saves it as `journal/<id>.result.json` in `store`'s work dir (atomically). Call it once the
/// result is final (after validation), before rendering it.
pub fn finish_bisect(
    result: &mut BisectResult,
    store: &Store,
    repo: &Path,
    id: &str,
) -> Result<PathBuf, StoreError> {
    let mut inv = invocation(repo);
    inv.id = Some(id.to_string());
    inv.provenance = answer_provenance(result, store);
    result.invocation = inv;
    save(store.root(), id, result)
}

/// Writes `result` to [`result_path`] (atomically, like every result file).
pub fn save(work_dir: &Path, id: &str, result: &BisectResult) -> Result<PathBuf, StoreError> {
    let path = result_path(work_dir, id);
    let io = |source| StoreError::Io {
        path: path.clone(),
        source,
    };
    let dir = Store::at(work_dir).journal_dir();
    std::fs::create_dir_all(&dir).map_err(io)?;
    let text = serde_json::to_string_pretty(result).unwrap_or_default() + "\n";
    crate::run::store::write_atomic(&path, text.as_bytes()).map_err(io)?;
    Ok(path)
}

/// The stored provenance of the run behind the answer (the culprit's, a suspect's or the wrong
/// endpoint's), plus the host kernel when the probe ran on the host and did not record one.
fn answer_provenance(result: &BisectResult, store: &Store) -> BTreeMap<String, String> {
    let target = result
        .first_bad
        .clone()
        .or_else(|| result.candidates.last().cloned())
        .or_else(|| result.probes.last().map(|p| p.sha.clone()));
    let Some(runs) = &result.store_runs else {
        return BTreeMap::new();
    };
    let entry = runs
        .runs
        .iter()
        .rev()
        .find(|r| Some(&r.commit) == target.as_ref())
        .or(runs.runs.last());
    let mut facts = entry
        .and_then(|e| {
            let key = StoreKey::new(&e.tree, &runs.identity);
            store.load(&key).ok()?.into_iter().nth(e.run)
        })
        .map(|r| r.report.provenance)
        .unwrap_or_default();
    if !facts.contains_key("image") && !facts.contains_key("kernel") {
        if let Ok(k) = std::fs::read_to_string("/proc/sys/kernel/osrelease") {
            facts.insert("kernel".into(), k.trim().to_string());
        }
    }
    facts
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn remotes_become_web_addresses_without_credentials() {
        for (remote, want) in [
            (
                "git@github.com:ggml-org/ggml.git",
                Some("https://github.com/ggml-org/ggml"),
            ),
            (
                "https://github.com/ggml-org/ggml.git",
                Some("https://github.com/ggml-org/ggml"),
            ),
            (
                "https://x:ghp_secret@github.com/o/r",
                Some("https://github.com/o/r"),
            ),
            (
                "ssh://git@github.com:22/o/r.git/",
                Some("https://github.com/o/r"),
            ),
            ("/home/me/src/ggml", None),
            ("../ggml", None),
            ("https://github.com/o/r/extra", None),
        ] {
            assert_eq!(web_url(remote).as_deref(), want, "{remote}");
        }
    }
}
