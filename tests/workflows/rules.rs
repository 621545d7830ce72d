//! What GitHub checks about a workflow before or while it runs, as far as the harness models it:
//! which keys exist (anything the harness does not model fails instead of being ignored),
//! `permissions:` (the job's GITHUB_TOKEN gets exactly these), `runs-on:` labels, and which
//! jobs a job may read from (`needs.X` only for a direct need; artifacts only from its `needs`
//! closure, since anything else is a race GitHub does not order).

use serde_json::{Map, Value};
use serde_yaml_ng::Value as Y;
use std::collections::{BTreeMap, BTreeSet};

/// Keys the harness models, per level. Everything else panics: the harness's promise is that a
/// key that changes execution is either simulated or refused.
const WORKFLOW_KEYS: &[&str] = &["name", "on", "permissions", "concurrency", "env", "jobs"];
const JOB_KEYS: &[&str] = &[
    "name",
    "needs",
    "if",
    "runs-on",
    "timeout-minutes",
    "permissions",
    "concurrency",
    "environment",
    "env",
    "outputs",
    "strategy",
    "steps",
];
const CALLER_KEYS: &[&str] = &[
    "name",
    "needs",
    "if",
    "uses",
    "with",
    "permissions",
    "concurrency",
];
const STRATEGY_KEYS: &[&str] = &["matrix", "fail-fast"];
const STEP_KEYS: &[&str] = &[
    "name",
    "id",
    "if",
    "run",
    "uses",
    "with",
    "env",
    "shell",
    "timeout-minutes",
];
const CONCURRENCY_KEYS: &[&str] = &["group", "cancel-in-progress"];
const ENVIRONMENT_KEYS: &[&str] = &["name", "url"];

fn keys(m: &Y) -> Vec<String> {
    m.as_mapping()
        .map(|m| {
            m.keys()
                .map(|k| k.as_str().unwrap_or("?").to_string())
                .collect()
        })
        .unwrap_or_default()
}

fn only(what: &str, m: &Y, allowed: &[&str]) {
    for k in keys(m) {
        assert!(
            allowed.contains(&k.as_str()),
            "{what}: `{k}` is not simulated by the harness (it models {allowed:?})"
        );
    }
}

pub fn check_workflow(name: &str, wf: &Y) {
    only(name, wf, WORKFLOW_KEYS);
    if let Some(c) = wf.get("concurrency").filter(|c| c.is_mapping()) {
        only(&format!("{name}: concurrency"), c, CONCURRENCY_KEYS);
    }
}

pub fn check_job(path: &str, job: &Y) {
    let caller = job.get("uses").is_some();
    only(path, job, if caller { CALLER_KEYS } else { JOB_KEYS });
    if let Some(s) = job.get("strategy") {
        only(&format!("{path}: strategy"), s, STRATEGY_KEYS);
    }
    if let Some(c) = job.get("concurrency").filter(|c| c.is_mapping()) {
        only(&format!("{path}: concurrency"), c, CONCURRENCY_KEYS);
    }
    if let Some(e) = job.get("environment") {
        environment_name(path, e);
    }
}

/// The (unevaluated) name of a job's `environment:`, in either of GitHub's spellings: a string,
/// or `{name, url}` (the url is only shown on the run page). Anything else panics: an
/// environment decides which secrets a job gets, so a misspelt one must not pass silently.
pub fn environment_name<'a>(path: &str, e: &'a Y) -> &'a str {
    match e {
        Y::String(s) => s,
        Y::Mapping(_) => {
            only(&format!("{path}: environment"), e, ENVIRONMENT_KEYS);
            e.get("name")
                .and_then(Y::as_str)
                .unwrap_or_else(|| panic!("{path}: environment without a string `name`"))
        }
        o => panic!("{path}: environment must be a name or {{name, url}}, not {o:?}"),
    }
}

pub fn check_step(label: &str, step: &Y) {
    only(label, step, STEP_KEYS);
}

/// `needs.X` in a job's text must name one of its own `needs`: GitHub gives a job the results
/// and outputs of its direct needs only (anything else reads as null, silently).
pub fn check_needs_refs(path: &str, job: &Y, needs: &[String]) {
    let text = serde_yaml_ng::to_string(job).unwrap();
    let re = regex::Regex::new(r"needs\.([A-Za-z_][A-Za-z0-9_-]*)").unwrap();
    for c in re.captures_iter(&text) {
        assert!(
            needs.iter().any(|n| n == &c[1]),
            "{path}: reads `needs.{}` but needs only {needs:?}: GitHub gives it nothing (null)",
            &c[1]
        );
    }
}

/// Does `owner` (a job path, e.g. `round1/probe`) lie inside `closure` (job paths whose
/// descendants count too: a reusable-workflow call covers every job it ran)?
pub fn in_closure(closure: &BTreeSet<String>, owner: &str) -> bool {
    closure
        .iter()
        .any(|c| owner == c || owner.starts_with(&format!("{c}/")))
}

pub type Perms = BTreeMap<String, String>;

const SCOPES: &[&str] = &[
    "actions",
    "attestations",
    "checks",
    "contents",
    "deployments",
    "discussions",
    "id-token",
    "issues",
    "metadata",
    "models",
    "packages",
    "pages",
    "pull-requests",
    "repository-projects",
    "security-events",
    "statuses",
];

fn level(s: &str) -> u8 {
    match s {
        "none" => 0,
        "read" => 1,
        "write" => 2,
        o => panic!("permission level `{o}` (read, write or none)"),
    }
}

/// `permissions:` as GitHub reads it: a mapping of scopes (unknown scopes and levels refused),
/// `{}` (nothing), `read-all` / `write-all`.
pub fn parse_perms(where_: &str, v: &Y) -> Perms {
    match v {
        Y::String(s) if s == "read-all" || s == "write-all" => {
            let l = if s == "read-all" { "read" } else { "write" };
            SCOPES.iter().map(|k| (k.to_string(), l.into())).collect()
        }
        Y::Mapping(m) => m
            .iter()
            .map(|(k, l)| {
                let k = k.as_str().unwrap().to_string();
                let l = l.as_str().unwrap_or("?").to_string();
                assert!(
                    SCOPES.contains(&k.as_str()),
                    "{where_}: unknown permission `{k}`"
                );
                level(&l);
                (k, l)
            })
            .collect(),
        o => panic!("{where_}: permissions: {o:?}"),
    }
}

/// A called workflow's jobs get at most what the calling job has.
pub fn cap(p: Perms, by: Option<&Perms>) -> Perms {
    let Some(by) = by else { return p };
    p.into_iter()
        .map(|(k, l)| {
            let top = by.get(&k).map(String::as_str).unwrap_or("none");
            let l = if level(&l) <= level(top) {
                l
            } else {
                top.into()
            };
            (k, l)
        })
        .collect()
}

pub fn perms_json(p: &Perms) -> Value {
    Value::Object(
        p.iter()
            .map(|(k, v)| (k.clone(), Value::String(v.clone())))
            .collect::<Map<_, _>>(),
    )
}

/// `runs-on:` as a list of labels; a self-hosted job's labels must all be ones the repository's
/// runners have (actionlint.yaml lists them), or it would wait for a runner forever.
pub fn runs_on(path: &str, v: &Value, self_hosted: &[String]) -> Vec<String> {
    let labels: Vec<String> = match v {
        Value::String(s) => vec![s.clone()],
        Value::Array(a) => a
            .iter()
            .map(|x| x.as_str().expect("runs-on label").to_string())
            .collect(),
        o => panic!("{path}: runs-on: {o}"),
    };
    assert!(!labels.is_empty(), "{path}: runs-on is empty");
    if labels.iter().any(|l| l == "self-hosted") {
        for l in &labels {
            assert!(
                self_hosted.contains(l),
                "{path}: no self-hosted runner has label `{l}` (known: {self_hosted:?})"
            );
        }
    } else {
        assert!(
            labels.len() == 1
                && ["ubuntu-latest", "ubuntu-24.04", "ubuntu-22.04"].contains(&labels[0].as_str()),
            "{path}: hosted runner {labels:?} is not one the harness stands in for"
        );
    }
    labels
}
