//! The work dir as something to browse and clean: the bisections it holds (from their
//! journals and saved results) for `log` and `show`, and what `gc` may remove (checkouts,
//! build dirs and ccache not used for a while). Results, logs and journals are never removed:
//! they are what later runs reuse and what `show` renders.

use crate::core::outcome::{Outcome, Verdict};
use crate::core::result::{AnyResult, BisectResult, Conclusion};
use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime};

#[derive(Debug, thiserror::Error)]
pub enum WorkDirError {
    #[error("{path}: {source}")]
    Io {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("no bisection {0:?} in the work dir (`setrows-bisect log` lists them)")]
    NotFound(String),
    #[error("{id:?} is ambiguous: it starts {} ids ({})", ids.len(), ids.join(", "))]
    Ambiguous { id: String, ids: Vec<String> },
}

/// One probe as the journal recorded it.
#[derive(Debug, Clone, PartialEq)]
pub struct JournalProbe {
    pub sha: String,
    pub outcome: Option<Outcome>,
    pub verdict: Option<Verdict>,
    pub cached: bool,
}

/// One bisection in the work dir.
#[derive(Debug, Clone)]
pub struct Bisection {
    pub id: String,
    pub journal: PathBuf,
    pub started: String,
    pub good: String,
    pub bad: String,
    pub candidates: u64,
    pub predicate: String,
    /// The last run's conclusion, when it finished (a resumed run that did not finish is not).
    pub conclusion: Option<Conclusion>,
    /// The probes of the last run of the command (what its report counts: a re-run journals
    /// the stored probes it replays again, so summing every run counts them twice).
    pub probes: Vec<JournalProbe>,
    /// Runs of the same command before the last one, and the probes they journaled.
    pub earlier_runs: usize,
    pub earlier_probes: usize,
    /// The commits the conclusion names (the culprit, or the suspects), as journaled.
    pub answer: Vec<String>,
    /// The command line, as journaled at the start.
    pub argv: Vec<String>,
    /// The saved result (`journal/<id>.result.json`), when the bisect wrote one.
    pub result: Option<BisectResult>,
}

impl Bisection {
    pub fn state(&self) -> &'static str {
        match &self.conclusion {
            Some(_) => "done",
            None => "unfinished",
        }
    }

    /// The answer in a few words: the culprit's short id, the suspects, or what stopped it.
    pub fn answer(&self) -> String {
        let Some(c) = &self.conclusion else {
            return "-".into();
        };
        let r = self.result.as_ref();
        match c {
            Conclusion::Found { index } => match r
                .and_then(|r| r.first_bad.as_deref())
                .or(self.answer.first().map(String::as_str))
            {
                Some(sha) => format!(
                    "{} {}",
                    r.map(|r| r.term.as_str()).unwrap_or("found"),
                    &sha[..sha.len().min(12)]
                ),
                None => format!("found (candidate {index})"),
            },
            Conclusion::Ambiguous { indices } => format!("one of {} commits", indices.len()),
            Conclusion::BadEndpoint { which, .. } => {
                format!("{which:?} endpoint wrong").to_lowercase()
            }
        }
    }

    /// The configuration asked for, from the recorded command line: `--config`, `--backend`,
    /// `--image`, else `--script` (shortened), else the bundled reproducer's default.
    pub fn configuration(&self) -> String {
        let argv = match &self.result {
            Some(r) if !r.invocation.argv.is_empty() => &r.invocation.argv,
            _ => &self.argv,
        };
        let value = |flag: &str| {
            argv.iter().enumerate().find_map(|(i, a)| {
                a.strip_prefix(&format!("{flag}="))
                    .map(str::to_string)
                    .or_else(|| (a == flag).then(|| argv.get(i + 1).cloned()).flatten())
            })
        };
        let mut parts = Vec::new();
        for flag in ["--config", "--backend", "--image"] {
            if let Some(v) = value(flag) {
                parts.push(format!("{}={v}", &flag[2..]));
            }
        }
        if parts.is_empty() {
            if let Some(s) = value("--script") {
                let s: String = s.chars().take(40).collect();
                parts.push(format!("script={s}"));
            } else if argv.len() > 1 {
                parts.push("bundled reproducer (cpu)".into());
            }
        }
        if parts.is_empty() {
            "-".into()
        } else {
            parts.join(" ")
        }
    }
}

fn io(path: &Path) -> impl FnOnce(std::io::Error) -> WorkDirError + '_ {
    move |source| WorkDirError::Io {
        path: path.to_path_buf(),
        source,
    }
}

/// Reads one journal (and its saved result, if any).
pub fn read_bisection(journal: &Path) -> Result<Bisection, WorkDirError> {
    let text = std::fs::read_to_string(journal).map_err(io(journal))?;
    let id = journal
        .file_name()
        .and_then(|n| n.to_str())
        .and_then(|n| n.strip_suffix(".jsonl"))
        .unwrap_or("?")
        .to_string();
    let mut b = Bisection {
        id: id.clone(),
        journal: journal.to_path_buf(),
        started: String::new(),
        good: String::new(),
        bad: String::new(),
        candidates: 0,
        predicate: String::new(),
        conclusion: None,
        probes: Vec::new(),
        earlier_runs: 0,
        earlier_probes: 0,
        answer: Vec::new(),
        argv: Vec::new(),
        result: None,
    };
    for line in text.lines() {
        let Ok(v) = serde_json::from_str::<serde_json::Value>(line) else {
            continue; // a line cut by a kill: the rest of the journal still counts
        };
        let s = |k: &str| v.get(k).and_then(|x| x.as_str()).unwrap_or("").to_string();
        match v.get("event").and_then(|e| e.as_str()) {
            Some("start") => {
                if b.started.is_empty() {
                    b.started = s("at");
                } else {
                    b.earlier_runs += 1;
                    b.earlier_probes += b.probes.len();
                    b.probes.clear();
                }
                b.good = s("good");
                b.bad = s("bad");
                b.predicate = s("predicate");
                b.candidates = v.get("candidates").and_then(|c| c.as_u64()).unwrap_or(0);
                b.argv = v
                    .get("argv")
                    .and_then(|a| serde_json::from_value(a.clone()).ok())
                    .unwrap_or_default();
                b.conclusion = None;
                b.answer.clear();
            }
            Some("probe") => b.probes.push(JournalProbe {
                sha: s("sha"),
                outcome: v
                    .get("outcome")
                    .and_then(|o| serde_json::from_value(o.clone()).ok()),
                verdict: v
                    .get("verdict")
                    .and_then(|o| serde_json::from_value(o.clone()).ok()),
                cached: v.get("cached").and_then(|c| c.as_bool()).unwrap_or(false),
            }),
            Some("done") => {
                b.conclusion = v
                    .get("conclusion")
                    .and_then(|c| serde_json::from_value(c.clone()).ok());
                b.answer = v
                    .get("answer")
                    .and_then(|a| serde_json::from_value(a.clone()).ok())
                    .unwrap_or_default();
            }
            _ => {}
        }
    }
    let saved = journal.with_file_name(format!("{id}.result.json"));
    if let Ok(text) = std::fs::read_to_string(&saved) {
        if let Ok(AnyResult::Bisect(r)) = serde_json::from_str::<serde_json::Value>(&text)
            .map_err(|e| e.to_string())
            .and_then(|v| crate::core::result::read(v).map_err(|e| e.to_string()))
        {
            b.result = Some(*r);
        }
    }
    Ok(b)
}

/// Every bisection in `work_dir`, oldest first.
pub fn list(work_dir: &Path) -> Result<Vec<Bisection>, WorkDirError> {
    let dir = work_dir.join("journal");
    let entries = match std::fs::read_dir(&dir) {
        Ok(e) => e,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(e) => return Err(io(&dir)(e)),
    };
    let mut out = Vec::new();
    for e in entries.flatten() {
        let p = e.path();
        if p.extension().is_some_and(|x| x == "jsonl") {
            out.push(read_bisection(&p)?);
        }
    }
    out.sort_by(|a, b| a.started.cmp(&b.started).then(a.id.cmp(&b.id)));
    Ok(out)
}

/// The bisection whose id starts with `prefix` (unique).
pub fn find(work_dir: &Path, prefix: &str) -> Result<Bisection, WorkDirError> {
    let mut hits: Vec<Bisection> = list(work_dir)?
        .into_iter()
        .filter(|b| !prefix.is_empty() && b.id.starts_with(prefix))
        .collect();
    match hits.len() {
        0 => Err(WorkDirError::NotFound(prefix.into())),
        1 => Ok(hits.remove(0)),
        _ => Err(WorkDirError::Ambiguous {
            id: prefix.into(),
            ids: hits.into_iter().map(|b| b.id).collect(),
        }),
    }
}

/// Something `gc` may remove.
#[derive(Debug, Clone)]
pub struct GcItem {
    pub path: PathBuf,
    /// `checkout` (a slot: private checkout and its build dir) or `ccache`.
    pub kind: &'static str,
    pub last_used: SystemTime,
    pub bytes: u64,
}

/// Newest modification time under `p` (the file itself for a file), and the total size.
fn newest_and_size(p: &Path) -> (SystemTime, u64) {
    let mut newest = SystemTime::UNIX_EPOCH;
    let mut bytes = 0;
    let mut stack = vec![p.to_path_buf()];
    while let Some(d) = stack.pop() {
        let Ok(md) = std::fs::symlink_metadata(&d) else {
            continue;
        };
        if let Ok(m) = md.modified() {
            newest = newest.max(m);
        }
        if md.is_dir() {
            if let Ok(rd) = std::fs::read_dir(&d) {
                stack.extend(rd.flatten().map(|e| e.path()));
            }
        } else {
            bytes += md.len();
        }
    }
    (newest, bytes)
}

fn size(p: &Path) -> u64 {
    newest_and_size(p).1
}

/// A slot's last use: its lock file's modification time (touched whenever a run locks it).
fn slot_used(slot: &Path) -> Option<SystemTime> {
    std::fs::metadata(slot.join("lock"))
        .or_else(|_| std::fs::metadata(slot))
        .and_then(|m| m.modified())
        .ok()
}

fn subdirs(p: &Path) -> Vec<PathBuf> {
    let mut v: Vec<PathBuf> = std::fs::read_dir(p)
        .map(|rd| {
            rd.flatten()
                .map(|e| e.path())
                .filter(|p| p.is_dir())
                .collect()
        })
        .unwrap_or_default();
    v.sort();
    v
}

/// What `gc` would remove: checkout slots (`checkouts/*/*`, the matrix slot `matrix/`) and
/// ccache dirs (`ccache/`, `matrix/ccache/*`) not used since `now - older_than`.
pub fn gc_plan(work_dir: &Path, older_than: Duration, now: SystemTime) -> Vec<GcItem> {
    let cutoff = now
        .checked_sub(older_than)
        .unwrap_or(SystemTime::UNIX_EPOCH);
    let mut items = Vec::new();
    let mut slots: Vec<PathBuf> = subdirs(&work_dir.join("checkouts"))
        .iter()
        .flat_map(|d| subdirs(d))
        .collect();
    if work_dir.join("matrix/lock").exists() {
        slots.push(work_dir.join("matrix"));
    }
    for slot in slots {
        if let Some(t) = slot_used(&slot).filter(|t| *t < cutoff) {
            let bytes = subdirs(&slot)
                .iter()
                .filter(|d| !d.ends_with("ccache"))
                .map(|d| size(d))
                .sum();
            items.push(GcItem {
                path: slot,
                kind: "checkout",
                last_used: t,
                bytes,
            });
        }
    }
    let mut caches = vec![work_dir.join("ccache")];
    caches.extend(subdirs(&work_dir.join("matrix/ccache")));
    for c in caches.into_iter().filter(|c| c.is_dir()) {
        let (t, bytes) = newest_and_size(&c);
        if t < cutoff {
            items.push(GcItem {
                path: c,
                kind: "ccache",
                last_used: t,
                bytes,
            });
        }
    }
    items
}

/// Removes one item. A checkout slot is locked first (as a run would): one in use by a running
/// bisect is left alone (`Ok(false)`), and its `ccache` subdir (the matrix slot's) is kept.
pub fn gc_remove(item: &GcItem) -> Result<bool, WorkDirError> {
    if item.kind == "checkout" {
        use std::os::fd::AsRawFd;
        let lock = item.path.join("lock");
        let f = std::fs::OpenOptions::new()
            .write(true)
            .create(true)
            .truncate(false)
            .open(&lock)
            .map_err(io(&lock))?;
        // SAFETY: flock on a file descriptor we own; released when it is closed.
        if unsafe { libc::flock(f.as_raw_fd(), libc::LOCK_EX | libc::LOCK_NB) } != 0 {
            return Ok(false);
        }
        for d in subdirs(&item.path) {
            if !d.ends_with("ccache") {
                std::fs::remove_dir_all(&d).map_err(io(&d))?;
            }
        }
        // the checkout's record of what it holds goes with it (the next run checks out afresh)
        let state = item.path.join("checkout.state");
        if state.exists() {
            std::fs::remove_file(&state).map_err(io(&state))?;
        }
        return Ok(true);
    }
    std::fs::remove_dir_all(&item.path).map_err(io(&item.path))?;
    Ok(true)
}
