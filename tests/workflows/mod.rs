//! Size: one executor of GitHub Actions workflows (jobs, matrices, reusable workflows,
//! composite actions, artifacts, re-runs, tokens, timeouts) is one unit; splitting it further
//! would scatter one model (rules.rs holds the checks, stand_ins.rs the runner's programs).
//!
//! Runs this repository's workflow files on this machine, the way GitHub would: ready jobs (every
//! `needs` done) start in a seeded shuffled order (the seed is printed; `HARNESS_SEED=N` replays
//! it), since GitHub starts them at once and a job that relies on file order is a race; `if:`
//! conditions and `needs.*` results and outputs, `strategy.matrix` expansion (with `fromJSON` of
//! an earlier job's output) and `fail-fast`, reusable workflows (`uses:
//! ./.github/workflows/X.yml`, `workflow_call` inputs and outputs), composite actions (`uses:
//! ./.github/actions/X`, whose `run` steps must name a `shell:` as GitHub requires),
//! `$GITHUB_OUTPUT`, `$GITHUB_ENV`, `$GITHUB_PATH`, `$GITHUB_STEP_SUMMARY`, and artifacts as
//! directory copies. Every `run:` script is the YAML's own text, run with the shell GitHub uses
//! (`bash -e` or, with `shell: bash`, `bash --noprofile --norc -eo pipefail`).
//!
//! Modelled rather than ignored:
//! - `permissions:` (workflow, job, capped by a calling job): each job gets its own
//!   GITHUB_TOKEN (`github.token`, `secrets.GITHUB_TOKEN`), registered in `tokens.json` with
//!   exactly those permissions and scoped to this repository, for the API stand-in
//!   (scripts/fault-injection/fake_github.py --tokens) to enforce as GitHub does.
//! - `timeout-minutes:` (job and step; `minute` is how long a minute lasts here): a job past its
//!   limit has its step killed and is cancelled (result `cancelled`; `cancelled()` is true and
//!   only `always()`/`cancelled()` steps still run); a step past its own limit fails.
//! - `concurrency:` groups are evaluated with the contexts GitHub allows there and recorded in
//!   `concurrency` for the tests. `queue_together` queues several runs at one moment, before
//!   any finishes (the worst case GitHub allows, e.g. a job dispatching one run per
//!   configuration): per group one runs and one is pending, and a newer pending run or job
//!   cancels the older (concurrency.rs); the runs then execute one after another, a cancelled
//!   run not at all and a cancelled job with result `cancelled`.
//! - `runs-on:` labels are recorded per job and checked (self-hosted labels must be ones
//!   .github/actionlint.yaml declares); every job still runs on this machine.
//! - Reads across jobs: `needs.X` must name a direct need, and a job may download only
//!   artifacts uploaded by jobs in its `needs` closure (on GitHub anything else is a race).
//! - Unknown keys at workflow, job, strategy, step and concurrency level panic (rules.rs).
//! - `offline`: every leg of a job fails with no step run (its runner lost or reset).
//! - `environment:` (a name or `{name, url}`) gives the job that environment's secrets
//!   (`environments`) over the repository's; a job without it never sees them.
//!
//! What a hosted runner would bring is replaced by named local equivalents, and nothing else:
//! - `actions/checkout` without `repository:` copies the project checkout the test prepared;
//!   with `repository:` it clones the local repository the test mapped to that name.
//! - `cargo`, `rustup`, `gh`: see stand_ins.rs.
//! - `actions/upload-artifact` / `download-artifact` copy directories in the run's store with
//!   v4's rules (a name is uploaded once per run unless `overwrite: true`; `if-no-files-found`;
//!   `name`, `pattern`, `merge-multiple`; hidden files left out; file names with `":<>|*?`
//!   refused; file permissions not kept, so a downloaded program is not executable).
//!   Artifacts belong to the run, so a re-run sees them.
//! - Not simulated, and named here: `persist-credentials`.
//!
//! Any other `uses:`, an expression outside expr.rs's subset or an unknown key panics, so the
//! harness never quietly runs something else than the YAML says.

#![allow(dead_code)] // each test crate uses its own part of the harness

pub mod concurrency;
pub mod expr;
pub mod rules;
pub mod stand_ins;

use expr::Ctx;
use rules::Perms;
use serde_json::{json, Map, Value};
use serde_yaml_ng::Value as Y;
use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

/// Kill one runner mid-step: the step's whole process group gets SIGKILL as soon as its log
/// shows `once_logged` (a point inside the work, not a time: a fast machine would finish a
/// timed step before the kill), and the job ends there (a lost runner runs no further step,
/// not even `if: always()`).
#[derive(Clone)]
pub struct Kill {
    /// Job path, e.g. `round2/probe`.
    pub job: String,
    pub leg: usize,
    pub step: String,
    pub once_logged: String,
}

/// One job (or one matrix leg) as it ended.
#[derive(Clone, Debug)]
pub struct JobRun {
    pub result: String,
    pub outputs: Map<String, Value>,
    /// The matrix values of the leg (`null` for a job without a matrix).
    pub matrix: Value,
    pub runner_dir: Option<PathBuf>,
    /// `runs-on` labels (empty for a reusable-workflow call or a job that did not run).
    pub runs_on: Vec<String>,
    /// The runner's name (`RUNNER_NAME`), `harness-N`.
    pub runner: String,
    /// The environment the job declared (evaluated), whose secrets it got.
    pub environment: Option<String>,
}

pub struct Harness {
    /// The project checkout that `actions/checkout` (no `repository:`) copies.
    pub project: PathBuf,
    /// `owner/name` → a local git repository to clone for `actions/checkout` with `repository:`.
    pub repos: BTreeMap<String, PathBuf>,
    /// The tool binary the `cargo` stand-in hands out.
    pub bin: PathBuf,
    /// Where runners, artifacts and logs of this harness live.
    pub base: PathBuf,
    /// The runner machine's own environment (e.g. CONTAINERS_CONF, GITHUB_API_URL).
    pub runner_env: Vec<(String, String)>,
    pub vars: Map<String, Value>,
    pub secrets: Map<String, Value>,
    /// Environment name → its own secrets: only a job that declares `environment: NAME` sees
    /// them (over repository secrets of the same name), as on GitHub.
    pub environments: BTreeMap<String, Map<String, Value>>,
    pub run_id: u64,
    /// Fires once per harness (a re-run does not lose the same runner again).
    pub kill: Option<Kill>,
    /// Job paths whose runners are all offline: each leg fails without running a step (no
    /// checkout, no upload, not even `if: always()`), as a job whose machine was reset.
    pub offline: BTreeSet<String>,
    /// Every job and leg of the latest attempt, by `path[leg]`.
    pub jobs: BTreeMap<String, JobRun>,
    /// What the harness did instead of an action, and every step it ran, in order.
    pub log: Vec<String>,
    /// Seed of the order ready jobs start in (HARNESS_SEED overrides it).
    pub seed: u64,
    /// How long one `timeout-minutes` minute lasts here.
    pub minute: Duration,
    /// The same, for one job's own `timeout-minutes` (by job path): a test can make one job's
    /// long limit fire in seconds while the short limits of the others keep their slack.
    pub job_minute: BTreeMap<String, Duration>,
    /// Every GITHUB_TOKEN minted for a job (all of them are in `tokens.json`).
    pub minted: Vec<String>,
    /// (job path or `workflow NAME`, group, cancel-in-progress) of every `concurrency:` met.
    pub concurrency: Vec<(String, String, bool)>,
    /// The repository the workflows run in (`github.repository`).
    pub repository: String,
    rng: u64,
    self_hosted: Vec<String>,
    runners: usize,
    killed: bool,
    /// The previous attempt's jobs, for `rerun_failed`.
    previous: Option<BTreeMap<String, JobRun>>,
    /// Jobs the current attempt re-ran (so their dependents run again too).
    rerun: BTreeSet<String>,
    /// Artifact name → the job (path, no leg) that uploaded it in this run.
    artifact_owner: BTreeMap<String, String>,
    /// The `needs` closure of the job running now (for artifact downloads).
    closure_now: BTreeSet<String>,
    /// (job, its closure, name or pattern) of every download this run, so an upload that a
    /// job outside the closure makes later is caught as the race it is.
    downloads: Vec<(String, BTreeSet<String>, String)>,
    /// Job-level groups that `queue_together` cancelled for the run executing now.
    cancel_groups: BTreeSet<String>,
}

fn y_str(v: &Y) -> Option<&str> {
    v.as_str()
}

fn get<'a>(m: &'a Y, k: &str) -> Option<&'a Y> {
    m.as_mapping().and_then(|m| m.get(Y::String(k.into())))
}

fn to_json(v: &Y) -> Value {
    serde_json::to_value(v).unwrap()
}

/// How a step ended when it did not simply exit.
enum Stop {
    /// The runner was lost (`Kill`).
    Lost,
    /// The job's `timeout-minutes` passed: the job is cancelled.
    JobTimeout,
    /// The step's own `timeout-minutes` passed: the step failed.
    StepTimeout,
}

impl Harness {
    pub fn new(project: &Path, bin: &Path, base: &Path) -> Self {
        std::fs::create_dir_all(base.join("artifacts")).unwrap();
        let tools = base.join("tools");
        std::fs::create_dir_all(&tools).unwrap();
        stand_ins::install(&tools, base, bin, project);
        std::fs::write(base.join("tokens.json"), "{}").unwrap();
        let seed = std::env::var("HARNESS_SEED")
            .ok()
            .map(|s| s.parse().expect("HARNESS_SEED is a number"))
            .unwrap_or_else(|| {
                std::time::SystemTime::now()
                    .duration_since(std::time::UNIX_EPOCH)
                    .unwrap()
                    .subsec_nanos() as u64
                    ^ std::process::id() as u64
            });
        eprintln!(
            "workflow harness {}: ready jobs start in seeded order {seed} (HARNESS_SEED={seed} replays it)",
            base.display()
        );
        let mut self_hosted = vec!["self-hosted".to_string(), "linux".into(), "x64".into()];
        if let Ok(t) = std::fs::read_to_string(project.join(".github/actionlint.yaml")) {
            let c: Y = serde_yaml_ng::from_str(&t).unwrap();
            if let Some(l) = get(&c, "self-hosted-runner")
                .and_then(|r| get(r, "labels"))
                .and_then(Y::as_sequence)
            {
                self_hosted.extend(l.iter().filter_map(y_str).map(String::from));
            }
        }
        Harness {
            project: project.into(),
            repos: BTreeMap::new(),
            bin: bin.into(),
            base: base.into(),
            runner_env: Vec::new(),
            vars: Map::new(),
            secrets: Map::new(),
            environments: BTreeMap::new(),
            run_id: 4242,
            kill: None,
            offline: BTreeSet::new(),
            jobs: BTreeMap::new(),
            log: vec![format!("job order seed {seed}")],
            seed,
            minute: Duration::from_secs(60),
            job_minute: BTreeMap::new(),
            minted: Vec::new(),
            concurrency: Vec::new(),
            repository: "harness/setrows-bisect".into(),
            rng: seed ^ 0x9E37_79B9_7F4A_7C15,
            self_hosted,
            runners: 0,
            killed: false,
            previous: None,
            rerun: Default::default(),
            artifact_owner: BTreeMap::new(),
            closure_now: BTreeSet::new(),
            downloads: Vec::new(),
            cancel_groups: BTreeSet::new(),
        }
    }

    /// Replaces the seed of the job order (tests that compare orders).
    pub fn with_seed(mut self, seed: u64) -> Self {
        self.seed = seed;
        self.rng = seed ^ 0x9E37_79B9_7F4A_7C15;
        self.log.push(format!("job order seed {seed}"));
        self
    }

    /// The token registry the API stand-in reads (`fake_github.py --tokens`).
    pub fn tokens_file(&self) -> PathBuf {
        self.base.join("tokens.json")
    }

    /// Tells the API stand-in about a token (e.g. a secret's personal token).
    pub fn register_token(&self, token: &str, spec: Value) {
        let p = self.tokens_file();
        let mut all: Map<String, Value> =
            serde_json::from_str(&std::fs::read_to_string(&p).unwrap()).unwrap();
        all.insert(token.into(), spec);
        let tmp = p.with_extension("tmp");
        std::fs::write(&tmp, Value::Object(all).to_string()).unwrap();
        std::fs::rename(tmp, p).unwrap();
    }

    /// A test's own stand-in program on every step's PATH.
    pub fn stand_in(&self, name: &str, text: &str) {
        stand_ins::add(&self.base.join("tools"), name, text);
    }

    /// The runners (`RUNNER_NAME`) that ran `cargo build` / `cargo run`, in order.
    pub fn cargo_builds(&self) -> Vec<String> {
        std::fs::read_to_string(self.base.join("cargo-builds"))
            .unwrap_or_default()
            .lines()
            .map(String::from)
            .collect()
    }

    fn next_rand(&mut self) -> u64 {
        // splitmix64
        self.rng = self.rng.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.rng;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    /// A job's GITHUB_TOKEN: new per job, this repository only, exactly `perms`.
    fn mint(&mut self, perms: &Perms) -> String {
        let token = format!(
            "ghs_{:016x}{:016x}",
            self.next_rand(),
            self.next_rand() & 0xffff_ffff
        );
        self.register_token(
            &token,
            json!({"kind": "installation", "login": "github-actions[bot]",
                   "repos": [self.repository], "permissions": rules::perms_json(perms)}),
        );
        self.minted.push(token.clone());
        token
    }

    fn github(&self, event: &str, token: &str) -> Value {
        json!({
            "event_name": event,
            "token": token,
            "run_id": self.run_id.to_string(),
            "repository": self.repository,
            "ref_name": "main",
        })
    }

    /// Runs `.github/workflows/NAME` of the project for `event` with `inputs` (defaults from
    /// the workflow fill the rest). Returns the workflow's result (`success` / `failure` /
    /// `cancelled`).
    pub fn dispatch(&mut self, name: &str, event: &str, inputs: Value) -> String {
        if self.previous.is_none() {
            self.start_run(name, event);
        }
        self.jobs.clear();
        let wf = self.load(&format!(".github/workflows/{name}"));
        rules::check_workflow(name, &wf);
        let inputs = run_inputs(&wf, event, inputs);
        let contexts = self.run_contexts(event, &inputs);
        self.record_concurrency(
            &format!("workflow {name}"),
            get(&wf, "concurrency"),
            contexts,
        );
        let (result, _) = self.workflow(&wf, "", inputs, event, &BTreeSet::new(), None);
        result
    }

    /// A new run of workflow `name` for `event`: its own id and an empty artifact store. The
    /// finished run's artifacts stay readable by run id (`gh run download ID`), and the run is
    /// listed newest first for `gh run list`, this one included, as GitHub lists a run in
    /// progress.
    fn start_run(&mut self, name: &str, event: &str) {
        let store = self.base.join("artifacts");
        let past = self.base.join("runs").join(self.run_id.to_string());
        std::fs::create_dir_all(past.parent().unwrap()).unwrap();
        if !past.exists() {
            std::fs::rename(&store, &past).unwrap();
        } else {
            std::fs::remove_dir_all(&store).unwrap();
        }
        self.run_id += 1;
        std::fs::create_dir_all(&store).unwrap();
        let list = self.base.join("runs.txt");
        let before = std::fs::read_to_string(&list).unwrap_or_default();
        std::fs::write(&list, format!("{} {name} {event}\n{before}", self.run_id)).unwrap();
        self.artifact_owner.clear();
        self.downloads.clear();
    }

    /// A finished run of `name` for `event` that left these artifacts (name, folder) and ran
    /// nothing here: what a fork's pull request run of its own copy of a workflow leaves in this
    /// repository's run list.
    pub fn plant_run(&mut self, name: &str, event: &str, artifacts: &[(&str, &Path)]) {
        self.previous = None;
        self.start_run(name, event);
        for (artifact, from) in artifacts {
            copy_tree(from, &self.base.join("artifacts").join(artifact));
        }
    }

    /// The contexts GitHub allows in a workflow-level `concurrency:` (and, with an empty
    /// `needs`, in a job's).
    fn run_contexts(&self, event: &str, inputs: &Value) -> BTreeMap<String, Value> {
        let mut c = BTreeMap::new();
        c.insert("github".into(), self.github(event, ""));
        c.insert("inputs".into(), inputs.clone());
        c.insert("vars".into(), Value::Object(self.vars.clone()));
        c.insert("needs".into(), json!({}));
        c
    }

    /// Which of these runs (workflow, event, inputs), queued at one moment before any of them
    /// finishes, GitHub cancels: (run index, `None` for the whole run or the job-level group
    /// of a cancelled job). Every grouped job of the surviving runs is taken to reach its group
    /// at one moment too, in run order (e.g. N bisections finishing together).
    pub fn queue_plan(&mut self, runs: &[(&str, &str, Value)]) -> Vec<(usize, Option<String>)> {
        let first = self.run_id + 1;
        let saved = self.run_id;
        let mut out = vec![];
        let mut level = concurrency::Groups::default();
        let mut wfs = vec![];
        for (i, (name, event, inputs)) in runs.iter().enumerate() {
            let wf = self.load(&format!(".github/workflows/{name}"));
            let inputs = run_inputs(&wf, event, inputs.clone());
            self.run_id = first + i as u64;
            let c = self.run_contexts(event, &inputs);
            if let Some(cc) = get(&wf, "concurrency") {
                let (g, _) = self.eval_concurrency(name, cc, &c);
                if let Some(old) = level.arrive(i, &g) {
                    out.push((old, None));
                }
            }
            wfs.push((wf, c));
        }
        let mut jobs = concurrency::Groups::default();
        for (i, (wf, c)) in wfs.iter().enumerate() {
            if out.contains(&(i, None)) {
                continue;
            }
            for (k, job) in get(wf, "jobs")
                .and_then(Y::as_mapping)
                .into_iter()
                .flatten()
            {
                if let Some(cc) = get(job, "concurrency") {
                    let (g, _) = self.eval_concurrency(y_str(k).unwrap_or(""), cc, c);
                    if let Some((old, g)) = jobs.arrive((i, g.clone()), &g) {
                        out.push((old, Some(g)));
                    }
                }
            }
        }
        self.run_id = saved;
        out.sort();
        out
    }

    /// Queues these runs at one moment (see [`Self::queue_plan`]), then executes the ones
    /// GitHub would keep, in order, with the jobs it would cancel cancelled. Returns each
    /// run's result (`cancelled` for a run cancelled while pending).
    pub fn queue_together(&mut self, runs: &[(&str, &str, Value)]) -> Vec<String> {
        let plan = self.queue_plan(runs);
        for (i, g) in &plan {
            self.log.push(format!(
                "queued run {i} ({}): GitHub cancels {}",
                runs[*i].0,
                g.as_deref().map_or("the whole run".into(), |g| format!(
                    "its job in group `{g}`"
                ))
            ));
        }
        let mut results = vec![];
        for (i, (name, event, inputs)) in runs.iter().enumerate() {
            if plan.contains(&(i, None)) {
                self.run_id += 1;
                results.push("cancelled".to_string());
                continue;
            }
            self.cancel_groups = plan
                .iter()
                .filter(|(r, _)| *r == i)
                .filter_map(|(_, g)| g.clone())
                .collect();
            results.push(self.dispatch(name, event, inputs.clone()));
            self.cancel_groups.clear();
        }
        results
    }

    /// GitHub's "Re-run failed jobs" of the last attempt: failed and cancelled jobs (matrix
    /// legs one by one) and every job that depends on one run again; the rest keeps its result
    /// and outputs, and the run's artifacts stay.
    pub fn rerun_failed(&mut self, name: &str, event: &str, inputs: Value) -> String {
        self.previous = Some(std::mem::take(&mut self.jobs));
        self.rerun.clear();
        let r = self.dispatch(name, event, inputs);
        self.previous = None;
        r
    }

    fn load(&self, rel: &str) -> Y {
        let p = self.project.join(rel);
        let text = std::fs::read_to_string(&p).unwrap_or_else(|e| panic!("{}: {e}", p.display()));
        serde_yaml_ng::from_str(&text).unwrap_or_else(|e| panic!("{}: {e}", p.display()))
    }

    /// Evaluates a `concurrency:` value with only the contexts GitHub allows there (a context
    /// outside them panics in expr.rs) and records it.
    fn record_concurrency(&mut self, at: &str, c: Option<&Y>, contexts: BTreeMap<String, Value>) {
        let Some(c) = c else { return };
        let (group, cancel) = self.eval_concurrency(at, c, &contexts);
        self.log.push(format!(
            "{at}: concurrency group `{group}` (cancel-in-progress: {cancel})"
        ));
        self.concurrency.push((at.into(), group, cancel));
    }

    fn eval_concurrency(
        &self,
        at: &str,
        c: &Y,
        contexts: &BTreeMap<String, Value>,
    ) -> (String, bool) {
        let ctx = Ctx {
            contexts,
            success: true,
            failure: false,
            cancelled: false,
        };
        let (group, cancel) = match c {
            Y::String(g) => (g.clone(), Y::Bool(false)),
            m => (
                get(m, "group")
                    .and_then(y_str)
                    .unwrap_or_else(|| panic!("{at}: concurrency without group"))
                    .to_string(),
                get(m, "cancel-in-progress")
                    .cloned()
                    .unwrap_or(Y::Bool(false)),
            ),
        };
        let group = expr::to_string(&expr::template(&group, &ctx));
        let cancel = match cancel {
            Y::Bool(b) => b,
            Y::String(s) => expr::truthy(&expr::template(&s, &ctx)),
            o => panic!("{at}: cancel-in-progress: {o:?}"),
        };
        (group, cancel)
    }

    fn workflow(
        &mut self,
        wf: &Y,
        prefix: &str,
        inputs: Value,
        event: &str,
        inherited: &BTreeSet<String>,
        cap: Option<&Perms>,
    ) -> (String, Value) {
        let jobs = get(wf, "jobs").and_then(Y::as_mapping).expect("jobs:");
        let wf_env = get(wf, "env");
        let wf_perms = get(wf, "permissions").map(|p| rules::parse_perms(prefix, p));
        let mut done: BTreeMap<String, (String, Map<String, Value>)> = BTreeMap::new();
        let ids: Vec<String> = jobs.keys().map(|k| y_str(k).unwrap().to_string()).collect();
        let needs_of = |id: &str| -> Vec<String> {
            match get(&jobs[Y::String(id.into())], "needs") {
                None => vec![],
                Some(Y::String(s)) => vec![s.clone()],
                Some(Y::Sequence(s)) => s.iter().map(|x| y_str(x).unwrap().into()).collect(),
                Some(other) => panic!("needs: {other:?}"),
            }
        };
        for id in &ids {
            for n in needs_of(id) {
                assert!(ids.contains(&n), "{prefix}{id}: needs unknown job {n}");
            }
        }
        // The closure of a job: every job it transitively needs, plus what the calling job
        // of this workflow could rely on.
        let mut closures: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
        while closures.len() < ids.len() {
            let before = closures.len();
            for id in &ids {
                let needs = needs_of(id);
                if closures.contains_key(id) || !needs.iter().all(|n| closures.contains_key(n)) {
                    continue;
                }
                let mut c = inherited.clone();
                for n in &needs {
                    c.insert(format!("{prefix}{n}"));
                    c.extend(closures[n].iter().cloned());
                }
                closures.insert(id.clone(), c);
            }
            assert!(closures.len() > before, "needs: cycle in {prefix}");
        }
        while done.len() < ids.len() {
            // GitHub starts every ready job at once; here one at a time, in a seeded order.
            let ready: Vec<&String> = ids
                .iter()
                .filter(|id| {
                    !done.contains_key(*id) && needs_of(id).iter().all(|n| done.contains_key(n))
                })
                .collect();
            let id = ready[(self.next_rand() % ready.len() as u64) as usize].clone();
            let job = &jobs[Y::String(id.clone())];
            let needs = needs_of(&id);
            let path = format!("{prefix}{id}");
            rules::check_job(&path, job);
            rules::check_needs_refs(&path, job, &needs);
            let needs_ctx: Map<String, Value> = needs
                .iter()
                .map(|n| {
                    let (r, o) = &done[n];
                    (n.clone(), json!({"result": r, "outputs": o}))
                })
                .collect();
            let all_ok = needs.iter().all(|n| done[n].0 == "success");
            let any_failed = needs.iter().any(|n| done[n].0 == "failure");
            let any_cancelled = needs.iter().any(|n| done[n].0 == "cancelled");
            let rerun_need = needs
                .iter()
                .any(|n| self.rerun.contains(&format!("{prefix}{n}")));
            let r = self.job(
                &path,
                job,
                JobIn {
                    inputs: &inputs,
                    needs: Value::Object(needs_ctx),
                    wf_env,
                    event,
                    success: all_ok,
                    failure: any_failed,
                    cancelled: any_cancelled,
                    rerun_need,
                    closure: closures[&id].clone(),
                    perms: wf_perms.clone().or_else(|| cap.cloned()),
                    cap,
                },
            );
            done.insert(id.clone(), r);
        }
        let result = if done.values().any(|(r, _)| r == "failure") {
            "failure"
        } else if done.values().any(|(r, _)| r == "cancelled") {
            "cancelled"
        } else {
            "success"
        };
        let jobs_ctx: Map<String, Value> = done
            .iter()
            .map(|(k, (r, o))| (k.clone(), json!({"result": r, "outputs": o})))
            .collect();
        let mut outputs = Map::new();
        if let Some(decl) = get(wf, "on")
            .and_then(|on| get(on, "workflow_call"))
            .and_then(|c| get(c, "outputs"))
            .and_then(Y::as_mapping)
        {
            let mut c = BTreeMap::new();
            c.insert("jobs".to_string(), Value::Object(jobs_ctx));
            let ctx = Ctx {
                contexts: &c,
                success: true,
                failure: false,
                cancelled: false,
            };
            for (k, v) in decl {
                let src = get(v, "value").and_then(y_str).expect("output value");
                outputs.insert(
                    y_str(k).unwrap().into(),
                    Value::String(expr::to_string(&expr::template(src, &ctx))),
                );
            }
        }
        (result.into(), Value::Object(outputs))
    }

    fn base_contexts(
        &self,
        inputs: &Value,
        needs: &Value,
        event: &str,
        token: &str,
    ) -> BTreeMap<String, Value> {
        let mut c = BTreeMap::new();
        c.insert("inputs".into(), inputs.clone());
        c.insert("needs".into(), needs.clone());
        c.insert("github".into(), self.github(event, token));
        c.insert("vars".into(), Value::Object(self.vars.clone()));
        let mut secrets = self.secrets.clone();
        secrets.insert("GITHUB_TOKEN".into(), Value::String(token.into()));
        c.insert("secrets".into(), Value::Object(secrets));
        c
    }

    fn job(&mut self, path: &str, job: &Y, j: JobIn) -> (String, Map<String, Value>) {
        let mut c = self.base_contexts(j.inputs, &j.needs, j.event, "");
        let ctx = Ctx {
            contexts: &c,
            success: j.success,
            failure: j.failure,
            cancelled: j.cancelled,
        };
        let cond = get(job, "if").map(|v| match v {
            Y::String(s) => s.clone(),
            Y::Bool(b) => b.to_string(),
            o => panic!("if: {o:?}"),
        });
        let prev = self.previous.as_ref().and_then(|p| p.get(path)).cloned();
        // A job the previous attempt finished well, with no re-run job before it, is kept.
        if let Some(p) = &prev {
            if !j.rerun_need && (p.result == "success" || p.result == "skipped") {
                self.jobs.insert(path.into(), p.clone());
                self.copy_legs(path);
                return (p.result.clone(), p.outputs.clone());
            }
        }
        if self.previous.is_some() {
            self.rerun.insert(path.into());
        }
        if !expr::condition(cond.as_deref(), &ctx) {
            self.log.push(format!("{path}: skipped (if)"));
            self.jobs.insert(path.into(), skipped());
            return ("skipped".into(), Map::new());
        }
        {
            let mut cc = BTreeMap::new();
            for k in ["github", "inputs", "vars", "needs"] {
                cc.insert(k.to_string(), c[k].clone());
            }
            self.record_concurrency(path, get(job, "concurrency"), cc);
            let held = get(job, "concurrency").is_some()
                && self
                    .concurrency
                    .last()
                    .is_some_and(|(_, g, _)| self.cancel_groups.contains(g));
            if held {
                self.log.push(format!(
                    "{path}: cancelled while pending in its concurrency group"
                ));
                let mut r = skipped();
                r.result = "cancelled".into();
                self.jobs.insert(path.into(), r);
                return ("cancelled".into(), Map::new());
            }
        }
        let perms = get(job, "permissions")
            .map(|p| rules::parse_perms(path, p))
            .or_else(|| j.perms.clone())
            .unwrap_or_else(|| {
                // GitHub's restricted default for a repository that sets none.
                [
                    ("contents", "read"),
                    ("packages", "read"),
                    ("metadata", "read"),
                ]
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect()
            });
        let perms = rules::cap(perms, j.cap);
        if let Some(uses) = get(job, "uses").and_then(y_str) {
            let rel = uses
                .strip_prefix("./")
                .unwrap_or_else(|| panic!("{path}: only local reusable workflows: {uses}"));
            let wf = self.load(rel);
            rules::check_workflow(rel, &wf);
            let declared = get(&wf, "on")
                .and_then(|on| get(on, "workflow_call"))
                .and_then(|d| get(d, "inputs"));
            let mut with = Map::new();
            if let Some(m) = get(job, "with").and_then(Y::as_mapping) {
                for (k, v) in m {
                    let v = match v {
                        Y::String(s) => expr::template(s, &ctx),
                        other => to_json(other),
                    };
                    with.insert(y_str(k).unwrap().into(), v);
                }
            }
            let inputs = typed_inputs(declared, Value::Object(with));
            self.log.push(format!("{path}: calls {rel}"));
            let (r, o) = self.workflow(
                &wf,
                &format!("{path}/"),
                inputs,
                j.event,
                &j.closure,
                Some(&perms),
            );
            let o = o.as_object().cloned().unwrap_or_default();
            self.jobs.insert(
                path.into(),
                JobRun {
                    result: r.clone(),
                    outputs: o.clone(),
                    ..skipped()
                },
            );
            return (r, o);
        }
        let legs: Vec<Value> = match get(job, "strategy").and_then(|s| get(s, "matrix")) {
            None => vec![Value::Null],
            Some(m) => expand_matrix(m, &ctx),
        };
        let fail_fast = get(job, "strategy")
            .and_then(|s| get(s, "fail-fast"))
            .map(|v| v.as_bool().expect("fail-fast: a boolean"))
            .unwrap_or(true);
        assert!(!legs.is_empty(), "{path}: the matrix expands to no job");
        let total = legs.len();
        let mut result = "success".to_string();
        let mut outputs = Map::new();
        self.closure_now = j.closure.clone();
        for (i, leg) in legs.into_iter().enumerate() {
            let key = format!("{path}[{i}]");
            if let Some(p) = self.previous.as_ref().and_then(|p| p.get(&key)) {
                if !j.rerun_need && p.result == "success" {
                    let p = p.clone();
                    merge_outputs(&mut outputs, &p.outputs);
                    self.jobs.insert(key, p);
                    continue;
                }
            }
            if fail_fast && result != "success" {
                // fail-fast: GitHub cancels the legs still queued once one fails.
                self.log.push(format!("{key}: cancelled (fail-fast)"));
                self.jobs.insert(
                    key,
                    JobRun {
                        result: "cancelled".into(),
                        matrix: leg,
                        ..skipped()
                    },
                );
                continue;
            }
            let token = self.mint(&perms);
            c = self.base_contexts(j.inputs, &j.needs, j.event, &token);
            c.insert("matrix".into(), leg.clone());
            c.insert(
                "strategy".into(),
                json!({"job-index": i, "job-total": total}),
            );
            let environment = get(job, "environment").map(|e| {
                let raw = rules::environment_name(path, e);
                let ctx = Ctx {
                    contexts: &c,
                    success: j.success,
                    failure: j.failure,
                    cancelled: j.cancelled,
                };
                expr::to_string(&expr::template(raw, &ctx))
            });
            if let Some(name) = &environment {
                self.log.push(format!("{path}[{i}]: environment {name}"));
                let own = self.environments.get(name).cloned().unwrap_or_default();
                if let Some(Value::Object(s)) = c.get_mut("secrets") {
                    s.extend(own);
                }
            }
            let mut run = self.leg(path, i, job, &c, &j);
            run.environment = environment;
            if run.result != "success" && result != "failure" {
                result = run.result.clone();
            }
            merge_outputs(&mut outputs, &run.outputs);
            self.jobs.insert(key, run);
        }
        self.jobs.insert(
            path.into(),
            JobRun {
                result: result.clone(),
                outputs: outputs.clone(),
                ..skipped()
            },
        );
        (result, outputs)
    }

    fn copy_legs(&mut self, path: &str) {
        let Some(prev) = &self.previous else { return };
        let legs: Vec<(String, JobRun)> = prev
            .iter()
            .filter(|(k, _)| {
                k.starts_with(&format!("{path}[")) || k.starts_with(&format!("{path}/"))
            })
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect();
        self.jobs.extend(legs);
    }

    /// One runner: a fresh workspace and RUNNER_TEMP, the job's steps in order.
    fn leg(
        &mut self,
        path: &str,
        leg: usize,
        job: &Y,
        c: &BTreeMap<String, Value>,
        j: &JobIn,
    ) -> JobRun {
        self.runners += 1;
        let name = format!("harness-{}", self.runners);
        let dir = self.base.join(format!("runner-{:03}", self.runners));
        let ws = dir.join("work");
        let temp = dir.join("temp");
        std::fs::create_dir_all(&ws).unwrap();
        std::fs::create_dir_all(&temp).unwrap();
        let mut c = c.clone();
        c.insert(
            "runner".into(),
            json!({"temp": temp, "os": "Linux", "arch": "X64", "name": name}),
        );
        let ctx = Ctx {
            contexts: &c,
            success: true,
            failure: false,
            cancelled: false,
        };
        let runs_on = rules::runs_on(
            path,
            &get(job, "runs-on")
                .map(|v| match v {
                    Y::String(s) => expr::template(s, &ctx),
                    o => to_json(o),
                })
                .unwrap_or_else(|| panic!("{path}: no runs-on")),
            &self.self_hosted,
        );
        if let Some(n) = get(job, "name").and_then(y_str) {
            let shown = expr::to_string(&expr::template(n, &ctx));
            self.log.push(format!(
                "{path}[{leg}]: job '{shown}' on {runs_on:?} ({name})"
            ));
        }
        if self.offline.contains(path) {
            self.log.push(format!(
                "{path}[{leg}]: runner offline: no step ran ({name})"
            ));
            return JobRun {
                result: "failure".into(),
                outputs: Map::new(),
                matrix: c.get("matrix").cloned().unwrap_or(Value::Null),
                runner_dir: Some(dir),
                runs_on,
                runner: name,
                environment: None,
            };
        }
        let deadline = get(job, "timeout-minutes").map(|t| {
            let minute = self.job_minute.get(path).copied().unwrap_or(self.minute);
            let whole = self.minutes(path, t);
            Instant::now() + whole.mul_f64(minute.as_secs_f64() / self.minute.as_secs_f64())
        });
        let mut env: Vec<(String, String)> = vec![("RUNNER_NAME".into(), name.clone())];
        for scope in [j.wf_env, get(job, "env")].into_iter().flatten() {
            env.extend(eval_env(scope, &ctx));
        }
        let mut r = Runner {
            ws,
            temp,
            env,
            path: Vec::new(),
            steps: Map::new(),
            ok: true,
            lost: false,
            cancelled: false,
            deadline,
        };
        let steps = get(job, "steps").and_then(Y::as_sequence).expect("steps:");
        self.steps(
            &format!("{path}[{leg}]"),
            path,
            leg,
            steps,
            &mut r,
            &mut c,
            false,
        );
        let mut outputs = Map::new();
        if let Some(m) = get(job, "outputs").and_then(Y::as_mapping) {
            c.insert("steps".into(), Value::Object(r.steps.clone()));
            let ctx = Ctx {
                contexts: &c,
                success: r.ok,
                failure: !r.ok,
                cancelled: r.cancelled,
            };
            for (k, v) in m {
                let v = expr::to_string(&expr::template(y_str(v).unwrap(), &ctx));
                outputs.insert(y_str(k).unwrap().into(), Value::String(v));
            }
        }
        let result = if r.cancelled {
            "cancelled"
        } else if r.ok {
            "success"
        } else {
            "failure"
        };
        JobRun {
            result: result.into(),
            outputs,
            matrix: c.get("matrix").cloned().unwrap_or(Value::Null),
            runner_dir: Some(dir),
            runs_on,
            runner: name,
            environment: None,
        }
    }

    fn minutes(&self, at: &str, v: &Y) -> Duration {
        let m = v
            .as_u64()
            .unwrap_or_else(|| panic!("{at}: timeout-minutes must be a positive integer: {v:?}"));
        assert!(m > 0, "{at}: timeout-minutes must be positive");
        self.minute * m as u32
    }

    #[allow(clippy::too_many_arguments)]
    fn steps(
        &mut self,
        label: &str,
        path: &str,
        leg: usize,
        steps: &[Y],
        r: &mut Runner,
        c: &mut BTreeMap<String, Value>,
        composite: bool,
    ) {
        for (n, step) in steps.iter().enumerate() {
            if r.lost {
                return;
            }
            c.insert("steps".into(), Value::Object(r.steps.clone()));
            let ctx = Ctx {
                contexts: c,
                success: r.ok && !r.cancelled,
                failure: !r.ok && !r.cancelled,
                cancelled: r.cancelled,
            };
            let name = get(step, "name")
                .and_then(y_str)
                .map(|s| expr::to_string(&expr::template(s, &ctx)))
                .unwrap_or_else(|| {
                    get(step, "uses")
                        .or_else(|| get(step, "run"))
                        .and_then(y_str)
                        .unwrap_or("?")
                        .lines()
                        .next()
                        .unwrap_or("")
                        .to_string()
                });
            rules::check_step(&format!("{label}: step '{name}'"), step);
            if !expr::condition(get(step, "if").and_then(y_str), &ctx) {
                self.log
                    .push(format!("{label}: step '{name}': skipped (if)"));
                continue;
            }
            let mut env = r.env.clone();
            if let Some(e) = get(step, "env") {
                env.extend(eval_env(e, &ctx));
            }
            let id = get(step, "id").and_then(y_str).map(String::from);
            let step_deadline =
                get(step, "timeout-minutes").map(|t| Instant::now() + self.minutes(label, t));
            let (ok, outputs) = if let Some(script) = get(step, "run").and_then(y_str) {
                let shell = get(step, "shell").and_then(y_str);
                if composite && shell.is_none() {
                    // GitHub refuses to load such an action ("Required property is missing: shell").
                    self.log.push(format!(
                        "{label}: step '{name}': a composite action's run step needs `shell:`"
                    ));
                    r.ok = false;
                    continue;
                }
                let script = expr::to_string(&expr::template(script, &ctx));
                let kill = self
                    .kill
                    .clone()
                    .filter(|k| !self.killed && k.job == path && k.leg == leg && k.step == name);
                self.log.push(format!("{label}: step '{name}': run"));
                let deadlines = Deadlines {
                    job: if r.cancelled { None } else { r.deadline },
                    step: step_deadline,
                };
                let (ok, outputs, stop) =
                    self.run_script(label, n, &script, shell, &env, r, kill, deadlines);
                match stop {
                    Some(Stop::Lost) => {
                        self.killed = true;
                        self.log
                            .push(format!("{label}: runner killed during '{name}'"));
                        r.lost = true;
                        r.ok = false;
                        return;
                    }
                    Some(Stop::JobTimeout) => {
                        self.log.push(format!(
                            "{label}: step '{name}': the job's timeout-minutes passed; job cancelled"
                        ));
                        r.cancelled = true;
                        r.ok = false;
                    }
                    Some(Stop::StepTimeout) => {
                        self.log.push(format!(
                            "{label}: step '{name}': its timeout-minutes passed"
                        ));
                    }
                    None => {}
                }
                (ok, outputs)
            } else if let Some(uses) = get(step, "uses").and_then(y_str) {
                let with: Map<String, Value> = get(step, "with")
                    .and_then(Y::as_mapping)
                    .map(|m| {
                        m.iter()
                            .map(|(k, v)| {
                                let v = match v {
                                    Y::String(s) => expr::template(s, &ctx),
                                    o => to_json(o),
                                };
                                (y_str(k).unwrap().to_string(), v)
                            })
                            .collect()
                    })
                    .unwrap_or_default();
                self.uses(label, path, leg, &name, uses, with, &env, r, c)
            } else {
                panic!("{label}: step '{name}' has neither run nor uses")
            };
            if let Some(id) = id {
                r.steps.insert(
                    id,
                    json!({"outputs": outputs, "outcome": if ok {"success"} else {"failure"}}),
                );
            }
            if !ok {
                self.log.push(format!("{label}: step '{name}': failed"));
                r.ok = false;
            }
        }
    }

    #[allow(clippy::too_many_arguments)]
    fn uses(
        &mut self,
        label: &str,
        path: &str,
        leg: usize,
        name: &str,
        uses: &str,
        with: Map<String, Value>,
        env: &[(String, String)],
        r: &mut Runner,
        c: &mut BTreeMap<String, Value>,
    ) -> (bool, Map<String, Value>) {
        let w = |k: &str| with.get(k).map(expr::to_string);
        let action = uses.split('@').next().unwrap();
        let note =
            |s: &mut Self, what: String| s.log.push(format!("{label}: step '{name}': {what}"));
        match action {
            "actions/checkout" => {
                let dest = r.ws.join(w("path").unwrap_or_default());
                if let Some(repo) = w("repository") {
                    let src = self
                        .repos
                        .get(&repo)
                        .unwrap_or_else(|| panic!("{label}: no local repository for {repo}"))
                        .clone();
                    assert_eq!(
                        w("fetch-depth").as_deref(),
                        Some("0"),
                        "{label}: only full clones"
                    );
                    let out = Command::new("git")
                        .args(["clone", "--quiet"])
                        .arg(&src)
                        .arg(&dest)
                        .output()
                        .unwrap();
                    assert!(out.status.success(), "{label}: clone {repo}: {out:?}");
                    note(
                        self,
                        format!("checkout {repo}: git clone of {}", src.display()),
                    );
                } else {
                    copy_tree(&self.project, &dest);
                    note(self, "checkout: copy of the project checkout".into());
                }
                (true, Map::new())
            }
            "actions/upload-artifact" => {
                let aname = w("name").unwrap_or_else(|| "artifact".into());
                let src = r.ws.join(w("path").expect("upload path"));
                let store = self.base.join("artifacts").join(&aname);
                let empty = !src.exists()
                    || (src.is_dir() && std::fs::read_dir(&src).unwrap().next().is_none());
                if empty {
                    let mode = w("if-no-files-found").unwrap_or_else(|| "warn".into());
                    note(self, format!("upload {aname}: no files ({mode})"));
                    return (mode != "error", Map::new());
                }
                if store.exists() {
                    if w("overwrite").as_deref() != Some("true") {
                        note(self, format!("upload {aname}: the name exists in this run"));
                        return (false, Map::new());
                    }
                    std::fs::remove_dir_all(&store).unwrap();
                }
                std::fs::create_dir_all(&store).unwrap();
                if src.is_dir() {
                    copy_tree(&src, &store);
                } else {
                    std::fs::copy(&src, store.join(src.file_name().unwrap())).unwrap();
                }
                // v4 refuses paths with these characters (NTFS rules, for every runner OS).
                let out = Command::new("find").arg(&store).output().unwrap();
                let bad = String::from_utf8_lossy(&out.stdout)
                    .lines()
                    .filter(|l| l.contains(['"', ':', '<', '>', '|', '*', '?', '\r']))
                    .map(String::from)
                    .collect::<Vec<_>>();
                if !bad.is_empty() {
                    note(self, format!("upload {aname}: invalid file names {bad:?}"));
                    return (false, Map::new());
                }
                // v4.4 and later leave hidden files and folders out unless include-hidden-files.
                if w("include-hidden-files").as_deref() != Some("true") {
                    let out = Command::new("find")
                        .arg(&store)
                        .args([
                            "-mindepth",
                            "1",
                            "-name",
                            ".*",
                            "-prune",
                            "-exec",
                            "rm",
                            "-rf",
                            "{}",
                            "+",
                        ])
                        .output()
                        .unwrap();
                    assert!(out.status.success(), "{out:?}");
                }
                // The zip upload-artifact makes keeps no file modes: downloads are 0644.
                let out = Command::new("find")
                    .arg(&store)
                    .args(["-type", "f", "-exec", "chmod", "644", "{}", "+"])
                    .output()
                    .unwrap();
                assert!(out.status.success(), "{out:?}");
                // An earlier download this upload could have changed is a race unless `needs`
                // orders the two jobs (either way round).
                for (job, closure, want) in &self.downloads {
                    if glob(want, &aname)
                        && job != path
                        && !rules::in_closure(closure, path)
                        && !rules::in_closure(&self.closure_now, job)
                    {
                        panic!("{label}: uploads {aname}, which {job} (unordered with {path} by needs) already tried to download as `{want}`: on GitHub that download races this upload");
                    }
                }
                self.artifact_owner.insert(aname.clone(), path.to_string());
                note(self, format!("upload {aname}"));
                (true, Map::new())
            }
            "actions/download-artifact" => {
                let dest = r.ws.join(w("path").unwrap_or_default());
                let all: Vec<String> = std::fs::read_dir(self.base.join("artifacts"))
                    .unwrap()
                    .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
                    .collect();
                // Only what a job in the `needs` closure uploaded is sure to be there: GitHub
                // starts jobs as soon as their needs are done, so anything else is a race.
                let outside = |s: &Self, a: &str| {
                    s.artifact_owner
                        .get(a)
                        .filter(|o| *o != path && !rules::in_closure(&s.closure_now, o))
                        .cloned()
                };
                let want = w("name")
                    .or_else(|| w("pattern"))
                    .unwrap_or_else(|| "*".into());
                self.downloads
                    .push((path.to_string(), self.closure_now.clone(), want));
                if let Some(n) = w("name") {
                    if let Some(o) = outside(self, &n) {
                        panic!("{label}: downloads artifact {n} of job {o}, which is outside its needs closure {:?}", self.closure_now);
                    }
                    if !all.contains(&n) {
                        note(self, format!("download {n}: not found"));
                        return (false, Map::new());
                    }
                    copy_tree(&self.base.join("artifacts").join(&n), &dest);
                    note(self, format!("download {n}"));
                    return (true, Map::new());
                }
                let pattern = w("pattern").unwrap_or_else(|| "*".into());
                let merge = w("merge-multiple").as_deref() == Some("true");
                let mut got = Vec::new();
                for a in all.iter().filter(|a| glob(&pattern, a)) {
                    if let Some(o) = outside(self, a) {
                        panic!("{label}: pattern {pattern} downloads artifact {a} of job {o}, which is outside its needs closure {:?}", self.closure_now);
                    }
                    let to = if merge { dest.clone() } else { dest.join(a) };
                    copy_tree(&self.base.join("artifacts").join(a), &to);
                    got.push(a.clone());
                }
                got.sort();
                note(self, format!("download {pattern}: {}", got.join(" ")));
                (true, Map::new())
            }
            local if local.starts_with("./.github/actions/") => {
                let a = self.load(&format!("{}/action.yml", &local[2..]));
                let runs = get(&a, "runs").expect("runs:");
                assert_eq!(get(runs, "using").and_then(y_str), Some("composite"));
                let mut inputs = Map::new();
                if let Some(decl) = get(&a, "inputs").and_then(Y::as_mapping) {
                    for (k, d) in decl {
                        let k = y_str(k).unwrap().to_string();
                        let v = with
                            .get(&k)
                            .cloned()
                            .or_else(|| get(d, "default").map(to_json));
                        if v.is_none() && get(d, "required").and_then(Y::as_bool) == Some(true) {
                            panic!("{label}: {local}: input {k} is required");
                        }
                        inputs.insert(k, v.unwrap_or(Value::String(String::new())));
                    }
                }
                let mut inner = c.clone();
                inner.insert("inputs".into(), Value::Object(inputs));
                let mut sub = Runner {
                    ws: r.ws.clone(),
                    temp: r.temp.clone(),
                    env: env.to_vec(),
                    path: r.path.clone(),
                    steps: Map::new(),
                    ok: true,
                    lost: false,
                    cancelled: r.cancelled,
                    deadline: r.deadline,
                };
                let steps = get(runs, "steps").and_then(Y::as_sequence).unwrap();
                self.steps(
                    &format!("{label} > {local}"),
                    path,
                    leg,
                    steps,
                    &mut sub,
                    &mut inner,
                    true,
                );
                r.lost = sub.lost;
                r.cancelled = sub.cancelled;
                r.path = sub.path.clone();
                // $GITHUB_ENV written inside the action holds for the rest of the job.
                r.env.extend(sub.env[env.len()..].iter().cloned());
                let mut outputs = Map::new();
                if let Some(decl) = get(&a, "outputs").and_then(Y::as_mapping) {
                    inner.insert("steps".into(), Value::Object(sub.steps.clone()));
                    let ctx = Ctx {
                        contexts: &inner,
                        success: sub.ok,
                        failure: !sub.ok,
                        cancelled: sub.cancelled,
                    };
                    for (k, d) in decl {
                        let v = get(d, "value").and_then(y_str).unwrap();
                        outputs.insert(
                            y_str(k).unwrap().into(),
                            Value::String(expr::to_string(&expr::template(v, &ctx))),
                        );
                    }
                }
                (sub.ok, outputs)
            }
            other => panic!("{label}: `uses: {other}` has no local equivalent in the harness"),
        }
    }

    #[allow(clippy::too_many_arguments)]
    fn run_script(
        &mut self,
        label: &str,
        n: usize,
        script: &str,
        shell: Option<&str>,
        env: &[(String, String)],
        r: &mut Runner,
        kill: Option<Kill>,
        deadlines: Deadlines,
    ) -> (bool, Map<String, Value>, Option<Stop>) {
        let stepdir = r
            .temp
            .parent()
            .unwrap()
            .join(format!("step-{n:02}-{}", self.log.len()));
        std::fs::create_dir_all(&stepdir).unwrap();
        let file = stepdir.join("script.sh");
        std::fs::write(&file, script).unwrap();
        let (output, genv, summary, gpath) = (
            stepdir.join("output"),
            stepdir.join("env"),
            stepdir.join("summary.md"),
            stepdir.join("path"),
        );
        for f in [&output, &genv, &summary, &gpath] {
            std::fs::write(f, "").unwrap();
        }
        let mut cmd = Command::new("bash");
        match shell {
            None => cmd.arg("-e"),
            Some("bash") => cmd.args(["--noprofile", "--norc", "-eo", "pipefail"]),
            Some(s) => panic!("{label}: shell `{s}` is not simulated"),
        };
        // $GITHUB_PATH entries come first, the latest added first (the runner prepends each).
        let mut path: Vec<String> = r.path.iter().rev().cloned().collect();
        path.push(self.base.join("tools").display().to_string());
        path.push(std::env::var("PATH").unwrap_or_default());
        cmd.arg(&file)
            .current_dir(&r.ws)
            .env_clear()
            .env("PATH", path.join(":"))
            .env(
                "HOME",
                std::env::var("HOME").unwrap_or_else(|_| "/root".into()),
            )
            .env("CI", "true")
            .env("GITHUB_ACTIONS", "true")
            .env("GITHUB_WORKSPACE", &r.ws)
            .env("RUNNER_TEMP", &r.temp)
            // Every runner is its own machine: caches (the tool's default work dirs) are not
            // shared between jobs, nor with other tests running at the same time.
            .env("XDG_CACHE_HOME", r.temp.parent().unwrap().join("cache"))
            .env("GITHUB_RUN_ID", self.run_id.to_string())
            .env("GITHUB_REPOSITORY", &self.repository)
            .env("GITHUB_SERVER_URL", "http://127.0.0.1:9")
            .env("GITHUB_OUTPUT", &output)
            .env("GITHUB_ENV", &genv)
            .env("GITHUB_STEP_SUMMARY", &summary)
            .env("GITHUB_PATH", &gpath)
            .envs(self.runner_env.iter().cloned())
            .envs(env.iter().cloned())
            .stdout(std::fs::File::create(stepdir.join("log")).unwrap())
            .stderr(std::process::Stdio::from(
                std::fs::OpenOptions::new()
                    .append(true)
                    .open(stepdir.join("log"))
                    .unwrap(),
            ));
        use std::os::unix::process::CommandExt;
        cmd.process_group(0);
        let mut child = cmd.spawn().unwrap();
        let mut stop = None;
        let status = loop {
            if let Some(s) = child.try_wait().unwrap() {
                break Some(s);
            }
            let now = Instant::now();
            if let Some(k) = &kill {
                let log = std::fs::read_to_string(stepdir.join("log")).unwrap_or_default();
                if log.contains(&k.once_logged) {
                    stop = Some(Stop::Lost);
                }
            }
            if stop.is_none() && deadlines.job.is_some_and(|d| now >= d) {
                stop = Some(Stop::JobTimeout);
            }
            if stop.is_none() && deadlines.step.is_some_and(|d| now >= d) {
                stop = Some(Stop::StepTimeout);
            }
            if stop.is_some() {
                // SAFETY: signalling the process group this harness created.
                unsafe { libc::kill(-(child.id() as i32), libc::SIGKILL) };
                let _ = child.wait();
                break None;
            }
            std::thread::sleep(Duration::from_millis(20));
        };
        let log = std::fs::read_to_string(stepdir.join("log")).unwrap_or_default();
        let Some(status) = status else {
            if !matches!(stop, Some(Stop::Lost)) {
                self.log.push(format!("{label}: killed; log:\n{log}"));
            }
            return (false, Map::new(), stop);
        };
        if !status.success() {
            self.log
                .push(format!("{label}: exit {:?}; log:\n{log}", status.code()));
        }
        for (k, v) in parse_kv(&std::fs::read_to_string(&genv).unwrap()) {
            r.env.push((k, v));
        }
        for l in std::fs::read_to_string(&gpath).unwrap().lines() {
            if !l.trim().is_empty() {
                r.path.push(l.trim().to_string());
            }
        }
        let s = std::fs::read_to_string(&summary).unwrap();
        if !s.is_empty() {
            let all = self.base.join("step-summary.md");
            let mut prev = std::fs::read_to_string(&all).unwrap_or_default();
            prev.push_str(&s);
            std::fs::write(all, prev).unwrap();
        }
        let outputs = parse_kv(&std::fs::read_to_string(&output).unwrap())
            .into_iter()
            .map(|(k, v)| (k, Value::String(v)))
            .collect();
        (status.success(), outputs, None)
    }
}

/// When the running step must stop: the job's `timeout-minutes` and the step's own.
struct Deadlines {
    job: Option<Instant>,
    step: Option<Instant>,
}

struct Runner {
    ws: PathBuf,
    temp: PathBuf,
    env: Vec<(String, String)>,
    /// `$GITHUB_PATH` entries, in the order they were added.
    path: Vec<String>,
    steps: Map<String, Value>,
    ok: bool,
    lost: bool,
    /// The job was cancelled (its timeout passed): `cancelled()` is true from here on.
    cancelled: bool,
    deadline: Option<Instant>,
}

struct JobIn<'a> {
    inputs: &'a Value,
    needs: Value,
    wf_env: Option<&'a Y>,
    event: &'a str,
    success: bool,
    failure: bool,
    cancelled: bool,
    rerun_need: bool,
    /// Every job this one transitively needs (paths; a called workflow's jobs by prefix).
    closure: BTreeSet<String>,
    /// The workflow's `permissions:` (or the calling job's), for jobs without their own.
    perms: Option<Perms>,
    /// A calling job's permissions: the most a called workflow's job may have.
    cap: Option<&'a Perms>,
}

fn skipped() -> JobRun {
    JobRun {
        result: "skipped".into(),
        outputs: Map::new(),
        matrix: Value::Null,
        runner_dir: None,
        runs_on: Vec::new(),
        runner: String::new(),
        environment: None,
    }
}
fn merge_outputs(into: &mut Map<String, Value>, from: &Map<String, Value>) {
    for (k, v) in from {
        if v.as_str().is_some_and(|s| !s.is_empty()) {
            into.insert(k.clone(), v.clone());
        }
    }
}

/// `inputs` as the workflow declares them: defaults filled in, booleans and numbers typed.
/// The inputs a run of `wf` sees: none for a scheduled run, else `given` typed as declared.
fn run_inputs(wf: &Y, event: &str, given: Value) -> Value {
    let declared = get(wf, "on")
        .and_then(|on| get(on, "workflow_dispatch"))
        .and_then(|d| get(d, "inputs"));
    if event == "schedule" {
        Value::Object(Map::new())
    } else {
        typed_inputs(declared, given)
    }
}

fn typed_inputs(declared: Option<&Y>, given: Value) -> Value {
    let given = given.as_object().cloned().unwrap_or_default();
    let mut out = Map::new();
    if let Some(decl) = declared.and_then(Y::as_mapping) {
        for (k, d) in decl {
            let k = y_str(k).unwrap().to_string();
            let ty = get(d, "type").and_then(y_str).unwrap_or("string");
            let v = given
                .get(&k)
                .cloned()
                .or_else(|| get(d, "default").map(to_json));
            let v = match (ty, v) {
                (_, None) => {
                    assert!(
                        get(d, "required").and_then(Y::as_bool) != Some(true),
                        "input {k} is required"
                    );
                    Value::Null
                }
                ("boolean", Some(Value::String(s))) => Value::Bool(s == "true"),
                ("number", Some(Value::String(s))) => {
                    json!(s
                        .parse::<f64>()
                        .unwrap_or_else(|_| panic!("input {k}: {s}")))
                }
                ("choice", Some(v)) => {
                    let options: Vec<Value> = get(d, "options")
                        .and_then(Y::as_sequence)
                        .unwrap()
                        .iter()
                        .map(to_json)
                        .collect();
                    assert!(options.contains(&v), "input {k}: {v} is not an option");
                    v
                }
                (_, Some(v)) => v,
            };
            out.insert(k, v);
        }
    }
    for k in given.keys() {
        assert!(out.contains_key(k), "input {k} is not declared");
    }
    Value::Object(out)
}

fn expand_matrix(m: &Y, ctx: &Ctx) -> Vec<Value> {
    let m = match m {
        Y::String(s) => expr::template(s, ctx),
        Y::Mapping(map) => Value::Object(
            map.iter()
                .map(|(k, v)| {
                    let v = match v {
                        Y::String(s) => expr::template(s, ctx),
                        o => to_json(o),
                    };
                    (y_str(k).unwrap().to_string(), v)
                })
                .collect(),
        ),
        o => panic!("strategy.matrix: {o:?}"),
    };
    let m = m.as_object().expect("matrix object").clone();
    let mut legs: Vec<Map<String, Value>> = vec![Map::new()];
    for (k, vals) in &m {
        if k == "include" || k == "exclude" {
            continue;
        }
        let vals = vals.as_array().expect("matrix axis is a list");
        legs = legs
            .iter()
            .flat_map(|l| {
                vals.iter().map(move |v| {
                    let mut l = l.clone();
                    l.insert(k.clone(), v.clone());
                    l
                })
            })
            .collect();
    }
    assert!(
        m.get("exclude").is_none(),
        "matrix exclude is not simulated"
    );
    let axes = m.keys().any(|k| k != "include");
    let mut out: Vec<Value> = if axes {
        legs.into_iter().map(Value::Object).collect()
    } else {
        vec![]
    };
    if let Some(inc) = m.get("include") {
        assert!(!axes, "include next to axes is not simulated");
        out.extend(inc.as_array().expect("include list").iter().cloned());
    }
    out
}

fn eval_env(scope: &Y, ctx: &Ctx) -> Vec<(String, String)> {
    scope
        .as_mapping()
        .expect("env mapping")
        .iter()
        .map(|(k, v)| {
            let v = match v {
                Y::String(s) => expr::to_string(&expr::template(s, ctx)),
                o => expr::to_string(&to_json(o)),
            };
            (y_str(k).unwrap().to_string(), v)
        })
        .collect()
}

/// `$GITHUB_OUTPUT` / `$GITHUB_ENV` lines: `k=v` and `k<<DELIM` ... `DELIM`.
fn parse_kv(text: &str) -> Vec<(String, String)> {
    let mut out = Vec::new();
    let mut lines = text.lines();
    while let Some(l) = lines.next() {
        if l.is_empty() {
            continue;
        }
        if let Some((k, delim)) = l.split_once("<<") {
            let mut v = Vec::new();
            for m in lines.by_ref() {
                if m == delim {
                    break;
                }
                v.push(m);
            }
            out.push((k.to_string(), v.join("\n")));
        } else {
            let (k, v) = l
                .split_once('=')
                .unwrap_or_else(|| panic!("malformed output line `{l}`"));
            out.push((k.to_string(), v.to_string()));
        }
    }
    out
}

/// `*` and literal text, as download-artifact's `pattern`.
fn glob(pattern: &str, name: &str) -> bool {
    match pattern.split_once('*') {
        None => pattern == name,
        Some((pre, rest)) => {
            name.starts_with(pre)
                && (0..=name.len() - pre.len()).any(|i| glob(rest, &name[pre.len() + i..]))
        }
    }
}

pub fn copy_tree(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    let out = Command::new("cp")
        .arg("-a")
        .arg(format!("{}/.", from.display()))
        .arg(to)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "cp {} {}: {out:?}",
        from.display(),
        to.display()
    );
}
