//! One probe of the bundled reproducer, in the order its evidence is earned: build (ggml and
//! the reproducer against the probed tree), prove (what the build must be before any result
//! of it counts), test (run and classify), provenance (what the run said about itself).
//!
//! Each step returns what the next one needs or the report that ends the probe, so one more
//! proven property is one more check in `prove` and another kind of probe reuses the same
//! ending (`Ending`) and steps.

use super::*;
use crate::probe::repro::expect::{Mismatch, TreeOptions};

/// What every report of one probe shares, whichever step ends it: the clock, the log, and
/// what ccache did once the build ran.
struct Ending<'r> {
    started: std::time::Instant,
    log_path: &'r Path,
    ccache: Option<Ccache>,
}

impl Ending<'_> {
    fn report(
        &self,
        outcome: Outcome,
        signature: Option<String>,
        step: Option<&exec::RunResult>,
        times: (f64, f64),
        provenance: BTreeMap<String, String>,
    ) -> ProbeReport {
        ProbeReport {
            outcome,
            signature,
            exit_code: step.and_then(|r| r.exit_code),
            signal: step.and_then(|r| r.signal),
            duration_s: self.started.elapsed().as_secs_f64(),
            build_s: times.0,
            test_s: times.1,
            output_tail: exec::tail_bytes(step.map_or("", |r| &r.output), 8192),
            provenance,
            ccache: self.ccache,
            ..ProbeReport::infra(String::new(), self.log_path)
        }
    }

    /// The build ran and is kept in the report; the test cannot answer (`why`, `scope`).
    fn untestable(
        &self,
        why: String,
        scope: SkipScope,
        built: &exec::RunResult,
        provenance: BTreeMap<String, String>,
    ) -> ProbeReport {
        ProbeReport {
            skip_scope: scope,
            ..self.report(
                Outcome::Untestable,
                Some(why),
                Some(built),
                (built.duration.as_secs_f64(), 0.0),
                provenance,
            )
        }
    }
}

/// What the build proved, which the test's classification reads again.
struct Proven {
    defs: Option<CompileDefs>,
    options: TreeOptions,
}

impl ReproProber {
    pub(super) fn probe_steps(&self, req: &ProbeRequest<'_>, phase: &dyn Fn(Phase)) -> ProbeReport {
        let mut end = Ending {
            started: std::time::Instant::now(),
            log_path: req.log_path,
            ccache: None,
        };
        let mut provenance: BTreeMap<String, String> = self.opts.launcher.provenance();
        provenance.insert("repro_sources".into(), self.sources[..16].to_string());
        let ggml_root: PathBuf = req.checkout.join(&self.opts.ggml_subdir);
        if let Some(why) = self.not_ggml(req, &ggml_root) {
            return end.report(Outcome::Untestable, Some(why), None, (0.0, 0.0), provenance);
        }
        // A knob this tree cannot spell (e.g. unified memory before both knobs): this commit
        // cannot answer, a later one may.
        if let Some(why) = &self.opts.unavailable {
            return ProbeReport {
                skip_scope: SkipScope::Commit,
                ..end.report(
                    Outcome::Untestable,
                    Some(why.clone()),
                    None,
                    (0.0, 0.0),
                    provenance,
                )
            };
        }
        phase(Phase::Build);
        let built = match self.build(req, &mut end, &provenance, phase) {
            Ok(b) => b,
            Err(report) => return *report,
        };
        let build_s = built.duration.as_secs_f64();
        let proven = match self.prove(req, &ggml_root, &mut provenance) {
            Ok(p) => p,
            Err(m) => return end.untestable(m.reason, m.scope, &built, provenance),
        };
        if self.opts.build_only {
            let times = (build_s, 0.0);
            return end.report(Outcome::Built, None, Some(&built), times, provenance);
        }
        // No GPU for the backend here: the build stands, the test cannot run (and must not
        // run, or a runtime abort would read as the commit's crash).
        if let Some(why) = crate::probe::device::missing(self.opts.expect.backend) {
            return end.untestable(why, SkipScope::Systematic, &built, provenance);
        }
        let digest = req
            .artifacts
            .and_then(|_| self.artifact_digest(req.build_dir));
        let mut reused = end.report(
            Outcome::Pass,
            None,
            None,
            (build_s, 0.0),
            provenance.clone(),
        );
        if artifacts::reuse_or_note(req.artifacts, digest, &mut reused) {
            return reused;
        }
        phase(Phase::Test);
        let ran = match self.test(req) {
            Ok(r) => r,
            Err(report) => return *report,
        };
        let c = classify_expected(
            ran.exit_code,
            ran.signal,
            ran.timed_out,
            &ran.output,
            &self.opts.expect,
            proven.defs.as_ref(),
            &proven.options,
        );
        record_provenance(&ran.output, &mut provenance);
        let times = (build_s, ran.duration.as_secs_f64());
        ProbeReport {
            artifact_digest: reused.artifact_digest,
            skip_scope: c.scope,
            ..end.report(c.outcome, c.signature, Some(&ran), times, provenance)
        }
    }

    /// Why the configured ggml directory cannot be built against, if it cannot; for the decode
    /// probe, why the checkout is not a llama.cpp tree.
    fn not_ggml(&self, req: &ProbeRequest<'_>, ggml_root: &Path) -> Option<String> {
        if self.opts.reproducer == Reproducer::Decode {
            let llama = crate::probe::decode::is_llama_tree(|p| req.checkout.join(p).is_file());
            return (!llama).then(|| {
                format!(
                    "commit {} is not a llama.cpp tree (no include/llama.h beside CMakeLists.txt): the decode probe cannot build it",
                    req.commit
                )
            });
        }
        let present = ggml_root.join("include/ggml.h").is_file()
            && ggml_root.join("CMakeLists.txt").is_file();
        (!present).then(|| {
            format!(
                "no ggml source tree at {:?} in commit {} (include/ggml.h or CMakeLists.txt missing); ggml_subdir is where core::layout puts ggml: \"\" for ggml-org/ggml, \"ggml\" for llama.cpp, \"server/deps/llama.cpp/ggml\" for lucebox",
                self.opts.ggml_subdir, req.commit
            )
        })
    }

    /// Builds ggml and the reproducer; the successful build, or the report that ends the probe
    /// (a machinery failure, a toolchain that cannot build this configuration, a build error).
    fn build(
        &self,
        req: &ProbeRequest<'_>,
        end: &mut Ending<'_>,
        provenance: &BTreeMap<String, String>,
        phase: &dyn Fn(Phase),
    ) -> Result<exec::RunResult, Box<ProbeReport>> {
        let materialized = match self.opts.reproducer {
            Reproducer::Decode => crate::probe::decode::prepare(req.build_dir, &self.opts.settings)
                .and_then(|p| {
                    crate::probe::decode::place_good_logits(req.build_dir, &self.opts.good_logits)?;
                    Ok(p.sources_dir)
                }),
            _ => materialize_sources(req.build_dir),
        };
        let src_name = materialized.map_err(|e| {
            ProbeReport::infra(
                format!(
                    "cannot write the bundled reproducer sources under {}: {e}",
                    req.build_dir.display()
                ),
                req.log_path,
            )
        })?;
        let mut job = self.job(
            req,
            self.build_script(&src_name),
            &self.opts.build_env,
            self.opts.build_timeout,
            "build",
        );
        // The script decides whether ccache is there (`command -v`) and then creates the log,
        // so a missing log means it was not.
        let stats = StatsLog::for_step(&*self.opts.launcher, &mut job);
        let built = self.run_job(&job, req.log_path, Some(&crate::probe::build_steps(phase)));
        end.ccache = Some(stats.take().unwrap_or(Ccache::NotInstalled));
        let built = built.map_err(|e| {
            ProbeReport::infra(
                format!("cannot run the reproducer build: {e}"),
                req.log_path,
            )
        })?;
        if built.success() {
            return Ok(built);
        }
        if let Some(why) = crate::probe::step_infra_failure(&*self.opts.launcher, &built) {
            return Err(Box::new(ProbeReport::infra(why, req.log_path)));
        }
        if let Some((why, scope)) = reasons::toolchain(&self.opts.expect, &built.output) {
            return Err(Box::new(end.untestable(
                why,
                scope,
                &built,
                provenance.clone(),
            )));
        }
        let sig = if built.timed_out {
            "build timed out".to_string()
        } else {
            reasons::build_error_line(&built.output).unwrap_or_else(|| "build failed".into())
        };
        let times = (built.duration.as_secs_f64(), 0.0);
        Err(Box::new(end.report(
            Outcome::BuildFailed,
            Some(sig),
            Some(&built),
            times,
            provenance.clone(),
        )))
    }

    /// What the build itself proves (HIP: graphs from the compile commands, GPU targets from
    /// the offload bundles), recorded before anything can run and checked even when nothing
    /// will (a build-only question, a machine without the GPU): a build that is not what its
    /// configuration names answers neither question.
    fn prove(
        &self,
        req: &ProbeRequest<'_>,
        ggml_root: &Path,
        provenance: &mut BTreeMap<String, String>,
    ) -> Result<Proven, Mismatch> {
        let tree = req.build_dir.join(self.build_dir_name());
        let options = reasons::tree_options(&self.opts.expect, ggml_root);
        let defs = self
            .opts
            .expect
            .needs_compile_defs()
            .then(|| self.compile_defs(req.build_dir));
        match proof::hip_build(
            &self.opts.expect,
            &tree,
            defs.as_ref(),
            &options,
            provenance,
        ) {
            Some(m) => Err(m),
            None => Ok(Proven { defs, options }),
        }
    }

    /// Runs the built reproducer; its result, or the report of a machinery failure (a container
    /// engine that failed is not the reproducer failing).
    fn test(&self, req: &ProbeRequest<'_>) -> Result<exec::RunResult, Box<ProbeReport>> {
        let mut env = vec![("GGML_NO_BACKTRACE".to_string(), "1".to_string())];
        env.extend(self.opts.run_env.iter().cloned());
        let job = self.job(req, self.run_script(), &env, self.opts.run_timeout, "test");
        let ran = self.run_job(&job, req.log_path, None).map_err(|e| {
            ProbeReport::infra(format!("cannot run the reproducer: {e}"), req.log_path)
        })?;
        if !ran.success() {
            if let Some(why) = crate::probe::step_infra_failure(&*self.opts.launcher, &ran) {
                return Err(Box::new(ProbeReport::infra(why, req.log_path)));
            }
        }
        Ok(ran)
    }
}

/// What the reproducer said about itself (its `SETROWS_RESULT` line): the device and backend it
/// ran on, the features and GPU architectures it saw, its speed. The report shows them next to
/// the verdict, so a result names the hardware that produced it.
fn record_provenance(output: &str, provenance: &mut BTreeMap<String, String>) {
    let Some(r) = parse_result(output) else {
        return;
    };
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
    if let Some(m) = &r.memory {
        provenance.insert("repro_memory".into(), m.summary());
    }
    if let Some(t) = r.timings {
        provenance.insert("repro_steps_per_s".into(), format!("{:.1}", t.steps_per_s));
    }
}
