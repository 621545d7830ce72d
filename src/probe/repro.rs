//! The bundled reproducers (`repro-kernels/`) as a `Prober`: what `setrows-bisect --good X --bad Y`
//! runs when the user gives no `--script`.
//!
//! For each probed revision it builds ggml from the checkout together with `setrows-replay`
//! (CMake `add_subdirectory`, so the reproducer is compiled against exactly the probed revision
//! with the probed backend flags), runs it, and classifies the run (`classify`). The sources are
//! compiled into this binary, so the reproducer is the same wherever the tool runs and its hash
//! is part of every stored result's key.
//!
//! Constructing one (the bisect driver and the matrix runner):
//! ```no_run
//! use std::sync::Arc;
//! use setrows_bisect::probe::repro::{ReproOptions, ReproProber};
//! let mut opts = ReproOptions::new(Arc::new(setrows_bisect::probe::launch::HostLauncher));
//! opts.ggml_subdir = "ggml".into(); // a llama.cpp checkout; "" for ggml-org/ggml
//! opts.cmake_args = vec!["-DGGML_CUDA=ON".into()]; // the recipe from build.rs
//! opts.repro_args = vec!["--steps".into(), "20000".into()]; // --repro-arg values
//! let prober = ReproProber::new(opts);
//! ```
//! Steps run through the launcher, so the same prober works on the host or in a container: the
//! scripts only name `$SRC` (the checkout) and `$WORK` (the persistent build directory, where the
//! embedded sources are written to a content-hashed folder and the CMake build tree lives).

pub mod classify;
pub mod expect;
pub mod offload;
mod options;
mod proof;
mod reasons;
mod sources;

pub use classify::{classify, classify_expected, parse_result, Classified, ReproResult};
pub use expect::{CompileDefs, Expectations};
pub use options::{ReproOptions, Reproducer};
pub use sources::{materialize_sources, sources_hash, SOURCES};

use crate::core::ccache::Ccache;
use crate::core::outcome::{Outcome, SkipScope};
use crate::probe::ccache::StatsLog;
use crate::probe::launch::ShellJob;
use crate::probe::{artifacts, exec};
use crate::probe::{Phase, ProbeReport, ProbeRequest, Prober};
use sha2::{Digest, Sha256};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::Duration;

#[derive(Debug)]
pub struct ReproProber {
    opts: ReproOptions,
    sources: String,
}

impl ReproProber {
    pub fn new(opts: ReproOptions) -> Self {
        // The decode probe's identity is its own sources and model, not the replay's.
        let sources = match opts.reproducer {
            Reproducer::Decode => hex::encode(Sha256::digest(crate::probe::decode::identity())),
            _ => sources_hash(),
        };
        ReproProber { opts, sources }
    }

    /// The build tree, keyed by what changes the build (not by commit: consecutive probes reuse
    /// it, ninja and ccache make them incremental).
    fn build_dir_name(&self) -> String {
        let mut h = Sha256::new();
        h.update(self.sources.as_bytes());
        h.update(self.opts.ggml_subdir.as_bytes());
        for a in &self.opts.cmake_args {
            h.update([0]);
            h.update(a.as_bytes());
        }
        for (k, v) in &self.opts.build_env {
            h.update([1]);
            h.update(k.as_bytes());
            h.update([b'=']);
            h.update(v.as_bytes());
        }
        format!("setrows-repro-build-{}", &hex::encode(h.finalize())[..12])
    }

    /// The configure + build script; paths only through `$SRC` and `$WORK`.
    pub fn build_script(&self, src_dir_name: &str) -> String {
        let q = exec::shell_quote;
        let sub = if self.opts.ggml_subdir.is_empty() {
            "$SRC".to_string()
        } else {
            format!("$SRC/{}", self.opts.ggml_subdir)
        };
        // The decode probe builds the whole llama.cpp tree (its ggml comes with it).
        let source_def = match self.opts.reproducer {
            Reproducer::Decode => "-DLLAMA_SOURCE_DIR=$SRC".to_string(),
            _ => format!("-DGGML_SOURCE_DIR={sub}"),
        };
        let bdir = format!("$WORK/{}", self.build_dir_name());
        let extra: Vec<String> = self.opts.cmake_args.iter().map(|a| q(a)).collect();
        let jobs = self
            .opts
            .jobs
            .map(|j| format!(" -j {j}"))
            .unwrap_or_default();
        format!(
            "set -e\n\
             launcher=''\n\
             if command -v ccache >/dev/null 2>&1; then\n  \
               launcher='-DCMAKE_C_COMPILER_LAUNCHER=ccache -DCMAKE_CXX_COMPILER_LAUNCHER=ccache -DCMAKE_CUDA_COMPILER_LAUNCHER=ccache -DCMAKE_HIP_COMPILER_LAUNCHER=ccache'\n  \
               [ -z \"${{CCACHE_STATSLOG:-}}\" ] || : > \"$CCACHE_STATSLOG\"\n\
             fi\n\
             gen=''\n\
             if command -v ninja >/dev/null 2>&1 && [ ! -f \"{bdir}/Makefile\" ]; then gen='-G Ninja'; fi\n\
             cmake -S \"$WORK/{src_dir_name}\" -B \"{bdir}\" $gen -DCMAKE_BUILD_TYPE=Release -DCMAKE_EXPORT_COMPILE_COMMANDS=ON \"{source_def}\" $launcher {extra}\n\
             cmake --build \"{bdir}\" --target {target}{jobs}\n",
            extra = extra.join(" "),
            target = self.opts.reproducer.target(),
        )
    }

    /// The compile definitions of this prober's build tree (`compile_commands.json`, exported by
    /// every configure): the proof of what the features cannot show (HIP graphs).
    pub fn compile_defs(&self, build_dir: &Path) -> CompileDefs {
        let path = build_dir
            .join(self.build_dir_name())
            .join("compile_commands.json");
        let source = format!("{}/compile_commands.json", self.build_dir_name());
        std::fs::read_to_string(&path)
            .ok()
            .and_then(|t| CompileDefs::from_compile_commands(&source, &t))
            .unwrap_or(CompileDefs {
                source: format!("{source} missing or unreadable"),
                ..CompileDefs::default()
            })
    }

    pub fn run_script(&self) -> String {
        let mut args: Vec<String> = self
            .opts
            .repro_args
            .iter()
            .map(|a| exec::shell_quote(a))
            .collect();
        if self.opts.reproducer == Reproducer::Decode {
            // the model `probe::decode::prepare` wrote into the work directory
            let model = crate::probe::decode::model_file_name();
            args.insert(0, format!("--model \"$WORK/{model}\""));
        }
        format!(
            "exec \"$WORK/{}/{}\" {}\n",
            self.build_dir_name(),
            self.opts.reproducer.target(),
            args.join(" ")
        )
    }

    /// What the run executes (`probe::artifacts`): the run line, the reproducer and the ggml
    /// libraries of its build tree, and the compile definitions when the expectations read them.
    fn artifact_digest(&self, build_dir: &Path) -> Option<String> {
        let tree = build_dir.join(self.build_dir_name());
        let defs = tree.join("compile_commands.json");
        let needs_defs = self.opts.expect.needs_compile_defs();
        let extra: Vec<&Path> = needs_defs.then_some(defs.as_path()).into_iter().collect();
        let run = format!("{}\n{:?}", self.run_script(), self.opts.run_env);
        let program = tree.join(self.opts.reproducer.target());
        artifacts::build_digest(&run, &program, &tree, &extra)
    }

    fn job(
        &self,
        req: &ProbeRequest<'_>,
        script: String,
        env: &[(String, String)],
        timeout: Option<Duration>,
        step: &str,
    ) -> ShellJob {
        ShellJob {
            script,
            src: req.checkout.to_path_buf(),
            work: req.build_dir.to_path_buf(),
            cwd_is_work: true,
            env: env.to_vec(),
            timeout,
            name: format!("{}-{step}", req.run_name),
        }
    }

    fn run_job(&self, job: &ShellJob, log: &Path) -> std::io::Result<exec::RunResult> {
        let cmd = self.opts.launcher.command(job);
        let launcher = self.opts.launcher.clone();
        let j = job.clone();
        exec::run(&cmd, job.timeout, log, &move || launcher.cleanup(&j))
    }
}

impl Prober for ReproProber {
    fn identity(&self) -> String {
        // Cache locations (CCACHE_DIR sits under the work dir) change nothing that is tested; keeping
        // them out lets runners with different work dirs share results (`--resume-from-issue`).
        let env = |v: &[(String, String)]| {
            v.iter()
                .filter(|(k, _)| !k.starts_with("CCACHE_"))
                .map(|(k, v)| format!("{k}={v}"))
                .collect::<Vec<_>>()
                .join(",")
        };
        // Asked-for facts change the outcome, so they are part of the identity; nothing asked
        // keeps the identity (and every stored result) of before the guard.
        let expect = if self.opts.expect.is_empty() {
            String::new()
        } else {
            format!(" expect={:?}", self.opts.expect)
        };
        let built = format!(
            "sources={} reproducer={} ggml_subdir={:?} cmake_args={:?} build_env=[{}]",
            &self.sources[..16],
            self.opts.reproducer.target(),
            self.opts.ggml_subdir,
            self.opts.cmake_args,
            env(&self.opts.build_env),
        );
        let launcher = self.opts.launcher.identity();
        if self.opts.build_only {
            // What only the run reads (environment, arguments, timeout, expectations) is out.
            return format!("repro:v1 build-only (no test runs) {built} launcher={launcher}");
        }
        format!(
            "repro:v1 {built} run_env=[{}] args={:?} run_timeout_s={} launcher={launcher}{expect}",
            env(&self.opts.run_env),
            self.opts.repro_args,
            self.opts.run_timeout.map(|t| t.as_secs()).unwrap_or(0),
        )
    }

    fn probe(&self, req: &ProbeRequest<'_>, phase: &dyn Fn(Phase)) -> ProbeReport {
        let started = std::time::Instant::now();
        let mut provenance: BTreeMap<String, String> = self.opts.launcher.provenance();
        provenance.insert("repro_sources".into(), self.sources[..16].to_string());
        let ggml_root: PathBuf = req.checkout.join(&self.opts.ggml_subdir);
        let report = |outcome: Outcome,
                      signature: Option<String>,
                      r: Option<&exec::RunResult>,
                      build_s: f64,
                      test_s: f64,
                      provenance: BTreeMap<String, String>| ProbeReport {
            outcome,
            signature,
            exit_code: r.and_then(|r| r.exit_code),
            signal: r.and_then(|r| r.signal),
            duration_s: started.elapsed().as_secs_f64(),
            build_s,
            test_s,
            output_tail: exec::tail_bytes(r.map_or("", |r| &r.output), 8192),
            provenance,
            ..ProbeReport::infra(String::new(), req.log_path)
        };
        let decode = self.opts.reproducer == Reproducer::Decode;
        if decode && !crate::probe::decode::is_llama_tree(|p| req.checkout.join(p).is_file()) {
            return report(
                Outcome::Untestable,
                Some(format!(
                    "commit {} is not a llama.cpp tree (no include/llama.h beside CMakeLists.txt): the decode probe cannot build it",
                    req.commit
                )),
                None,
                0.0,
                0.0,
                provenance,
            );
        }
        if !decode
            && (!ggml_root.join("include/ggml.h").is_file()
                || !ggml_root.join("CMakeLists.txt").is_file())
        {
            return report(
                Outcome::Untestable,
                Some(format!(
                    "no ggml source tree at {:?} in commit {} (include/ggml.h or CMakeLists.txt missing); ggml_subdir is \"\" for ggml-org/ggml and \"ggml\" for llama.cpp",
                    self.opts.ggml_subdir, req.commit
                )),
                None,
                0.0,
                0.0,
                provenance,
            );
        }
        phase(Phase::Build);
        let materialized = if decode {
            crate::probe::decode::prepare(req.build_dir).map(|p| p.sources_dir)
        } else {
            materialize_sources(req.build_dir)
        };
        let src_name = match materialized {
            Ok(n) => n,
            Err(e) => {
                return ProbeReport::infra(
                    format!(
                        "cannot write the bundled reproducer sources under {}: {e}",
                        req.build_dir.display()
                    ),
                    req.log_path,
                )
            }
        };
        let mut build = self.job(
            req,
            self.build_script(&src_name),
            &self.opts.build_env,
            self.opts.build_timeout,
            "build",
        );
        // The script decides whether ccache is there (`command -v`) and then creates the log,
        // so a missing log means it was not.
        let stats = StatsLog::for_step(&*self.opts.launcher, &build);
        build.env.push(stats.env());
        let built = self.run_job(&build, req.log_path);
        let ccache = Some(stats.take().unwrap_or(Ccache::NotInstalled));
        let report = |outcome, signature, r, build_s, test_s, provenance| ProbeReport {
            ccache,
            ..report(outcome, signature, r, build_s, test_s, provenance)
        };
        let built = match built {
            Ok(r) => r,
            Err(e) => {
                return ProbeReport::infra(
                    format!("cannot run the reproducer build: {e}"),
                    req.log_path,
                )
            }
        };
        let build_s = built.duration.as_secs_f64();
        // The build ran and is kept in the report; the test cannot answer (`why`, `scope`).
        let untestable = |why: String, scope: SkipScope, provenance| ProbeReport {
            skip_scope: scope,
            ..report(
                Outcome::Untestable,
                Some(why),
                Some(&built),
                build_s,
                0.0,
                provenance,
            )
        };
        if !built.success() {
            if let Some(why) = crate::probe::step_infra_failure(&*self.opts.launcher, &built) {
                return ProbeReport::infra(why, req.log_path);
            }
            if let Some((why, scope)) = reasons::toolchain(&self.opts.expect, &built.output) {
                return untestable(why, scope, provenance);
            }
            let sig = if built.timed_out {
                "build timed out".to_string()
            } else {
                reasons::build_error_line(&built.output).unwrap_or_else(|| "build failed".into())
            };
            return report(
                Outcome::BuildFailed,
                Some(sig),
                Some(&built),
                build_s,
                0.0,
                provenance,
            );
        }
        // What the build itself proves (HIP: graphs from the compile commands, GPU targets from
        // the offload bundles), recorded before anything can run and checked even when nothing
        // will (a build-only question, a machine without the GPU): a build that is not what its
        // configuration names answers neither question.
        let tree = req.build_dir.join(self.build_dir_name());
        let options = reasons::tree_options(&self.opts.expect, &ggml_root);
        let defs = self
            .opts
            .expect
            .needs_compile_defs()
            .then(|| self.compile_defs(req.build_dir));
        let proof = proof::hip_build(
            &self.opts.expect,
            &tree,
            defs.as_ref(),
            &options,
            &mut provenance,
        );
        if let Some(m) = proof {
            return untestable(m.reason, m.scope, provenance);
        }
        if self.opts.build_only {
            return report(Outcome::Built, None, Some(&built), build_s, 0.0, provenance);
        }
        // No GPU for the backend here: the build stands, the test cannot run (and must not
        // run, or a runtime abort would read as the commit's crash).
        if let Some(why) = crate::probe::device::missing(self.opts.expect.backend) {
            return untestable(why, SkipScope::Systematic, provenance);
        }
        let digest = req
            .artifacts
            .and_then(|_| self.artifact_digest(req.build_dir));
        let mut built = report(Outcome::Pass, None, None, build_s, 0.0, provenance.clone());
        if artifacts::reuse_or_note(req.artifacts, digest, &mut built) {
            return built;
        }
        phase(Phase::Test);
        let mut env = vec![("GGML_NO_BACKTRACE".to_string(), "1".to_string())];
        env.extend(self.opts.run_env.iter().cloned());
        let test = self.job(req, self.run_script(), &env, self.opts.run_timeout, "test");
        let ran = match self.run_job(&test, req.log_path) {
            Ok(r) => r,
            Err(e) => {
                return ProbeReport::infra(format!("cannot run the reproducer: {e}"), req.log_path)
            }
        };
        if !ran.success() {
            // a container engine that failed is not the reproducer failing
            if let Some(why) = crate::probe::step_infra_failure(&*self.opts.launcher, &ran) {
                return ProbeReport::infra(why, req.log_path);
            }
        }
        let c = classify_expected(
            ran.exit_code,
            ran.signal,
            ran.timed_out,
            &ran.output,
            &self.opts.expect,
            defs.as_ref(),
            &options,
        );
        if let Some(r) = parse_result(&ran.output) {
            if let Some(f) = &r.features {
                let list: Vec<String> = f
                    .iter()
                    .map(|(k, v)| match v {
                        serde_json::Value::String(s) => format!("{k}={s}"),
                        other => format!("{k}={other}"),
                    })
                    .collect();
                provenance.insert("repro_features".into(), list.join(" "));
            }
            for (k, v) in [
                ("repro_device_name", &r.device_description),
                ("repro_compiled_archs", &r.compiled_archs),
                ("repro_arch", &r.arch),
            ] {
                if let Some(v) = v {
                    provenance.insert(k.into(), v.clone());
                }
            }
            if let Some(w) = r.wave_size {
                provenance.insert("repro_wave_size".into(), w.to_string());
            }
            for (k, v) in [
                ("device", r.device),
                ("backend", r.backend),
                ("ggml_version", r.ggml_version),
                ("repro_steps_run", r.steps_run.to_string()),
            ] {
                if !v.is_empty() {
                    provenance.insert(k.into(), v);
                }
            }
            if let Some(t) = r.timings {
                provenance.insert("repro_steps_per_s".into(), format!("{:.1}", t.steps_per_s));
            }
        }
        ProbeReport {
            artifact_digest: built.artifact_digest,
            skip_scope: c.scope,
            ..report(
                c.outcome,
                c.signature,
                Some(&ran),
                build_s,
                ran.duration.as_secs_f64(),
                provenance,
            )
        }
    }
}

#[cfg(test)]
mod tests;
