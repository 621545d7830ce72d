//! The `--build CMD` / `--script CMD` prober: `git bisect run` semantics, so an existing bisect
//! script works unchanged.
//!
//! The build step runs in the persistent build directory (`$WORK`), the test in the checkout
//! (`$SRC`), both through `sh -c` via a `Launcher` (the host, or a container). A build failure is
//! `BuildFailed` (a skip, never a verdict), unless the machinery failed (a full disk, an engine
//! error: `InfraError`, retried and never stored). The test's exit status maps as git maps it: 0 good,
//! 125 skip, 1..=127 bad (`WrongResult`), killed by a signal or >= 128 bad (`Crash`), and past
//! `--timeout` `Hang`. A crash or wrong result whose output carries a GPU fault message is
//! reported as `GpuFault` so `--regress crash` and reports can tell them apart.
//!
//! Build-only (`--regress build`, `matrix --build-only`): the build step is the whole probe. A
//! build that succeeds is `Built` and the test never starts; one that fails is `BuildFailed`,
//! which the build predicate judges new.

use crate::core::ccache::Ccache;
use crate::core::outcome::Outcome;
use crate::probe::ccache::StatsLog;
use crate::probe::launch::{Launcher, ShellJob};
use crate::probe::{artifacts, exec};
use crate::probe::{build_steps, Phase, ProbeReport, ProbeRequest, Prober};
use std::path::Path;
use std::time::Duration;

/// Environment variables that change what a build produces: part of the store key, so
/// results from a differently configured build are never reused.
pub const RELEVANT_ENV: &[&str] = &[
    "CC",
    "CXX",
    "CFLAGS",
    "CXXFLAGS",
    "LDFLAGS",
    "CMAKE_GENERATOR",
    "CMAKE_BUILD_TYPE",
    "HIP_VISIBLE_DEVICES",
    "CUDA_VISIBLE_DEVICES",
    "ROCR_VISIBLE_DEVICES",
    "HSA_OVERRIDE_GFX_VERSION",
];

pub struct ScriptProber {
    pub build: Option<String>,
    pub script: String,
    pub timeout: Option<Duration>,
    pub launcher: Box<dyn Launcher>,
    /// Extra environment for both steps (ccache settings, ...), not part of the identity.
    pub env: Vec<(String, String)>,
    /// Stop after the build (`Built`); `script` is never run and not part of the identity.
    pub build_only: bool,
}

impl ScriptProber {
    /// A prober with ccache wired in where the steps run have it (CMake compiler launchers
    /// set; the build step's cache is this run's own, `probe::ccache`), so rebuilding a
    /// revision seen before in this run is cheap.
    pub fn new(
        build: Option<String>,
        script: String,
        timeout: Option<Duration>,
        launcher: Box<dyn Launcher>,
    ) -> Self {
        let mut env = Vec::new();
        let in_container = launcher.identity() != "host";
        if crate::probe::ccache::used(in_container) {
            // Where the build's cache lives is the launcher's to say (`probe::ccache`): this
            // run's own, never one another run's probes wrote.
            env.push(("CMAKE_C_COMPILER_LAUNCHER".into(), "ccache".into()));
            env.push(("CMAKE_CXX_COMPILER_LAUNCHER".into(), "ccache".into()));
        }
        ScriptProber {
            build,
            script,
            timeout,
            launcher,
            env,
            build_only: false,
        }
    }

    /// Whether builds go through ccache: the constructors set CMake's compiler launchers
    /// exactly when it is installed where the steps run.
    fn ccache_wired(&self) -> bool {
        self.env.iter().any(|(k, v)| {
            (k == "CMAKE_C_COMPILER_LAUNCHER" || k == "CMAKE_CXX_COMPILER_LAUNCHER")
                && v == "ccache"
        })
    }

    /// A shell snippet a person can run to reproduce one probe by hand.
    pub fn reproduce_hint(&self, repo: &Path, sha: &str) -> String {
        let mut s = format!(
            "git -C {} worktree add --detach /tmp/setrows-repro {sha}\ncd /tmp/setrows-repro && export SRC=$PWD WORK=$PWD/build && mkdir -p \"$WORK\"\n",
            crate::core::shell::word(&repo.to_string_lossy())
        );
        // What the probe's steps are given ($SETROWS_CMAKE_ARGS and the rest), spelled out:
        // a shell of one's own defines none of it.
        for (k, v) in &self.env {
            s.push_str(&format!("export {k}={}\n", crate::core::shell::word(v)));
        }
        if let Some(b) = &self.build {
            s.push_str(&format!(
                "(cd \"$WORK\" && sh -c {})",
                crate::core::shell::word(b)
            ));
            if self.build_only {
                s.push_str("; echo \"build exit $?\"");
                return s;
            }
            s.push('\n');
        }
        s.push_str(&format!(
            "sh -c {}; echo \"exit $?\"",
            crate::core::shell::word(&self.script)
        ));
        s
    }
}

impl Prober for ScriptProber {
    fn identity(&self) -> String {
        let mut id = if self.build_only {
            // The test is never run: only what the build is names the result.
            format!(
                "script-prober v1 build-only (no test runs)\nlauncher={}\nbuild={}\n",
                self.launcher.identity(),
                self.build.as_deref().unwrap_or(""),
            )
        } else {
            format!(
                "script-prober v1\nlauncher={}\nbuild={}\nscript={}\ntimeout={}\n",
                self.launcher.identity(),
                self.build.as_deref().unwrap_or(""),
                self.script,
                self.timeout.map(|t| t.as_secs_f64()).unwrap_or(0.0)
            )
        };
        for k in RELEVANT_ENV {
            if let Ok(v) = std::env::var(k) {
                id.push_str(&format!("env {k}={v}\n"));
            }
        }
        id
    }

    /// The build's own reads come from its build system; here only the checkout paths the
    /// commands name (`$SRC/x`, or a relative path in the test, which runs in `$SRC`). The test
    /// must be a program the build made (`$WORK/...`), a script of the checkout, or a few shell
    /// words that read nothing (`exit`, `echo`, `test`, `!`): a test run through `make`,
    /// `ctest`, `python`, ... may read any file of the checkout, so it gets `None` (whole tree).
    fn named_inputs(&self) -> Option<Vec<String>> {
        // A test that never runs reads nothing.
        let script = if self.build_only { "" } else { &self.script };
        named_inputs(self.build.as_deref(), script)
    }

    fn probe(&self, req: &ProbeRequest<'_>, phase: &dyn Fn(Phase)) -> ProbeReport {
        let job =
            |script: &str, cwd_is_work: bool, timeout: Option<Duration>, step: &str| ShellJob {
                script: script.to_string(),
                src: req.checkout.to_path_buf(),
                work: req.build_dir.to_path_buf(),
                cwd_is_work,
                env: self.env.clone(),
                timeout,
                name: format!("{}-{step}", req.run_name),
                ccache: false,
                host_ccache_env: Vec::new(),
            };
        let steps = build_steps(phase);
        let run = |j: &ShellJob, watch: Option<&dyn Fn(&str)>| {
            let cmd = self.launcher.command(j);
            exec::run_watched(
                &cmd,
                j.timeout,
                req.log_path,
                &|| self.launcher.cleanup(j),
                watch,
            )
        };
        let mut report = ProbeReport::infra("not run", req.log_path);
        report.provenance = self.launcher.provenance();
        if let Err(e) = std::fs::create_dir_all(req.build_dir) {
            report.signature = Some(format!("cannot create {}: {e}", req.build_dir.display()));
            return report;
        }
        if self.build_only && self.build.is_none() {
            // The command line refuses this; a prober built otherwise must not report `built`
            // for a build that never ran.
            report.outcome = Outcome::Untestable;
            report.signature = Some("build-only probe without a build command".into());
            return report;
        }
        if let Some(build) = &self.build {
            phase(Phase::Build);
            let mut build_job = job(build, true, None, "build");
            let stats = self
                .ccache_wired()
                .then(|| StatsLog::for_step(&*self.launcher, &mut build_job));
            let ran = run(&build_job, Some(&steps));
            report.ccache = Some(match stats {
                Some(log) => log.take().unwrap_or(Ccache::Used { hits: 0, misses: 0 }),
                None => Ccache::NotInstalled,
            });
            match ran {
                Err(e) => {
                    report.signature = Some(format!("build step could not run: {e}"));
                    return report;
                }
                Ok(r) => {
                    if let Some(why) = crate::probe::step_infra_failure(&*self.launcher, &r) {
                        report.signature = Some(format!("build step: {why}"));
                        return report;
                    }
                    report.build_s = r.duration.as_secs_f64();
                    report.duration_s = report.build_s;
                    if !r.success() {
                        report.outcome = Outcome::BuildFailed;
                        report.exit_code = r.exit_code;
                        report.signal = r.signal;
                        report.signature = portable_signature(&r.output, req.checkout);
                        report.output_tail = tail(&r.output);
                        return report;
                    }
                    if self.build_only {
                        report.outcome = Outcome::Built;
                        report.exit_code = r.exit_code;
                        report.signature = None;
                        report.output_tail = tail(&r.output);
                        return report;
                    }
                }
            }
        }
        let digest = req.artifacts.and_then(|_| {
            // The environment is not in the identity (it may be spelled per tree), and the
            // test's program reads it: it is part of what the test is.
            let text = format!("{}\0{:?}", self.script, self.env);
            let cmds = commands(&self.script);
            artifacts::script_digest(&text, &cmds, req.checkout, req.build_dir)
        });
        if artifacts::reuse_or_note(req.artifacts, digest, &mut report) {
            return report;
        }
        phase(Phase::Test);
        let Some(r) = crate::probe::test_step(
            &mut report,
            &*self.launcher,
            run(&job(&self.script, false, self.timeout, "test"), None),
        ) else {
            return report;
        };
        report.outcome = classify(r.exit_code, r.signal, r.timed_out, &r.output);
        report.signature = match report.outcome {
            Outcome::Pass => None,
            Outcome::Hang => Some(format!(
                "timeout after {:.0}s",
                self.timeout.map(|t| t.as_secs_f64()).unwrap_or(0.0)
            )),
            _ => portable_signature(&r.output, req.checkout),
        };
        report.output_tail = tail(&r.output);
        report
    }
}

/// See `Prober::named_inputs` on `ScriptProber`.
pub fn named_inputs(build: Option<&str>, script: &str) -> Option<Vec<String>> {
    fn src_rel(w: &str) -> Option<&str> {
        w.strip_prefix("$SRC/")
            .or_else(|| w.strip_prefix("${SRC}/"))
            .map(|r| r.trim_start_matches("./"))
    }
    let mut named = Vec::new();
    for w in build.map(commands).unwrap_or_default().iter().flatten() {
        if let Some(r) = src_rel(w) {
            named.push(r.to_string());
        }
    }
    const QUIET: &[&str] = &[
        "exit", "echo", "test", "[", "]", "!", "true", "false", "sh", "bash",
    ];
    for cmd in commands(script) {
        let first = cmd[0].as_str();
        let from_work = first.starts_with("$WORK/") || first.starts_with("${WORK}/");
        if !from_work && !QUIET.contains(&first) && src_rel(first).is_none() && !first.contains('/')
        {
            return None;
        }
        for w in &cmd {
            if w == "$SRC" || w == "${SRC}" || w == "." || w == ".." || w.contains('*') {
                return None;
            }
            if let Some(r) = src_rel(w) {
                named.push(r.to_string());
            } else if !w.starts_with(['$', '/', '-']) && w.contains(['/', '.']) {
                named.push(w.trim_start_matches("./").to_string());
            }
        }
    }
    Some(named)
}

/// A shell command line as simple commands (split at newlines, `;`, `|`, `&`), each as its
/// words with quotes and parentheses trimmed: enough to see what a test runs and names, not a
/// shell parser (what it cannot follow, its callers treat as unknown).
pub fn commands(cmd: &str) -> Vec<Vec<String>> {
    let mut out = vec![Vec::new()];
    let cmd = cmd.replace('\n', " ; ");
    for raw in cmd.split(|c: char| c.is_whitespace()) {
        let w = raw.trim_matches(|c| c == '"' || c == '\'' || c == '(' || c == ')');
        for part in w.split_inclusive([';', '|', '&']) {
            let ends = part.ends_with([';', '|', '&']);
            let t = part.trim_end_matches([';', '|', '&']);
            if !t.is_empty() {
                if let Some(last) = out.last_mut() {
                    last.push(t.to_string());
                }
            }
            if ends {
                out.push(Vec::new());
            }
        }
    }
    out.retain(|c| !c.is_empty());
    out
}

/// git bisect run's mapping of a test's exit, refined by GPU-fault messages.
pub fn classify(exit: Option<i32>, signal: Option<i32>, timed_out: bool, output: &str) -> Outcome {
    let base = if timed_out {
        Outcome::Hang
    } else {
        match (exit, signal) {
            (Some(0), _) => Outcome::Pass,
            (Some(125), _) => Outcome::Untestable,
            (Some(c), _) if (1..128).contains(&c) => Outcome::WrongResult,
            _ => Outcome::Crash,
        }
    };
    if matches!(base, Outcome::WrongResult | Outcome::Crash)
        && crate::probe::repro::classify::is_gpu_fault(output)
    {
        Outcome::GpuFault
    } else {
        base
    }
}

/// The line most likely to name the failure: the first assertion, compiler error, fault or
/// mismatch line (the cause, not the shell's trailing "Aborted"), else the last line mentioning
/// an error, else the last non-empty line. Trimmed to one table cell.
pub fn signature(output: &str) -> Option<String> {
    let lines: Vec<&str> = output
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty() && !l.starts_with("$ ") && !l.starts_with("[setrows-bisect"))
        .collect();
    const STRONG: &[&str] = &[
        "GGML_ASSERT",
        "Assertion",
        "panicked at",
        "error:",
        "Error:",
        "fault",
        "mismatch",
    ];
    let weak = |l: &&&str| {
        let low = l.to_ascii_lowercase();
        ["error", "assert", "fail", "abort", "expected"]
            .iter()
            .any(|k| low.contains(k))
    };
    let line = lines
        .iter()
        .find(|l| STRONG.iter().any(|k| l.contains(k)))
        .or_else(|| lines.iter().rev().find(weak))
        .or_else(|| lines.last())?;
    let mut s: String = line.chars().take(160).collect();
    if line.chars().count() > 160 {
        s.push('…');
    }
    Some(s)
}

/// A signature without the private checkout's path, so the same failure reads the same from
/// every slot and every work dir.
pub(crate) fn portable_signature(output: &str, checkout: &std::path::Path) -> Option<String> {
    let prefix = format!("{}/", checkout.display());
    signature(&output.replace(&prefix, ""))
}

/// The last lines of output kept with the result (for `--match` and the report).
pub(crate) fn tail(output: &str) -> String {
    exec::tail_bytes(output, 16 * 1024)
}

#[cfg(test)]
mod tests;
