//! The bundled reproducers (`repro-kernels/`) as a `Prober`: what `setrows-bisect --good X --bad Y`
//! runs when the user gives no `--script`.
//!
//! For each probed revision it builds ggml from the checkout together with `setrows-replay`
//! (CMake `add_subdirectory`, so the reproducer is compiled against exactly the probed revision
//! with the probed backend flags), runs it, and classifies the run (`classify`). The sources are
//! compiled into this binary, so the reproducer is the same wherever the tool runs and its hash
//! is part of every stored result's key.
//!
//! Every bisect, matrix cell and configuration bisect makes one through `run::probers` (per
//! checked-out tree: `PerTreeRepro` sets `ggml_subdir` from `core::layout` and the CMake
//! arguments from that tree's spellings). By hand, for a llama.cpp checkout:
//! ```no_run
//! use std::sync::Arc;
//! use setrows_bisect::core::layout::Layout;
//! use setrows_bisect::probe::repro::{ReproOptions, ReproProber};
//! let mut opts = ReproOptions::new(Arc::new(setrows_bisect::probe::launch::HostLauncher));
//! opts.ggml_subdir = Layout::LlamaCpp.ggml_dir().into();
//! opts.cmake_args = vec!["-DGGML_CUDA=ON".into()]; // core::build's recipe for this tree
//! opts.repro_args = vec!["--steps".into(), "20000".into()]; // --repro-arg values
//! let prober = ReproProber::new(opts);
//! ```
//! One probe (`steps`): build, prove, test, provenance.
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
mod steps;

pub use classify::{classify, classify_expected, parse_result, Classified, ReproSummary};
pub use expect::{CompileDefs, Expectations};
pub use options::{ReproOptions, Reproducer};
pub use sources::{materialize_sources, sources_hash, SOURCES};

use crate::core::ccache::Ccache;
use crate::core::outcome::{Outcome, SkipScope};
use crate::probe::ccache::StatsLog;
use crate::probe::decode::GoodLogits;
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
        format!(
            "setrows-repro-build-{}",
            crate::core::id::cut(&h.finalize(), 12)
        )
    }

    /// The configure + build script; paths only through `$SRC` and `$WORK`.
    pub fn build_script(&self, src_dir_name: &str) -> String {
        let q = crate::core::shell::word;
        let sub = if self.opts.ggml_subdir.is_empty() {
            "$SRC".to_string()
        } else {
            format!("$SRC/{}", self.opts.ggml_subdir)
        };
        let bdir = format!("$WORK/{}", self.build_dir_name());
        let extra: Vec<String> = self.opts.cmake_args.iter().map(|a| q(a)).collect();
        let jobs = self
            .opts
            .jobs
            .map(|j| format!(" -j {j}"))
            .unwrap_or_default();
        // The decode probe builds the whole llama.cpp tree (its ggml comes with it).
        let source_def = match self.opts.reproducer {
            Reproducer::Decode => "-DLLAMA_SOURCE_DIR=$SRC".to_string(),
            _ => format!("-DGGML_SOURCE_DIR={sub}"),
        };
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
            .map(|a| crate::core::shell::word(a))
            .collect();
        if self.opts.reproducer == Reproducer::Decode {
            // the model `probe::decode::prepare` wrote into the work directory
            let model = crate::probe::decode::model_file_name(&self.opts.settings);
            args.insert(0, format!("--model \"$WORK/{model}\""));
            match &self.opts.good_logits {
                GoodLogits::Off => {}
                GoodLogits::Record => {
                    args.push(format!("--logits-out \"$WORK/{}\"", GoodLogits::RECORDED))
                }
                // the copy `probe::decode::place_good_logits` put there
                GoodLogits::Compare { sha256, .. } => args.push(format!(
                    "--logits-ref \"$WORK/{}\"",
                    GoodLogits::compared_name(sha256)
                )),
            }
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
            ccache: false,
            host_ccache_env: Vec::new(),
        }
    }

    /// Runs one step; `watch` sees its output lines as they come (the build's progress).
    fn run_job(
        &self,
        job: &ShellJob,
        log: &Path,
        watch: Option<&dyn Fn(&str)>,
    ) -> std::io::Result<exec::RunResult> {
        let cmd = self.opts.launcher.command(job);
        let launcher = self.opts.launcher.clone();
        let j = job.clone();
        exec::run_watched(&cmd, job.timeout, log, &move || launcher.cleanup(&j), watch)
    }
}

impl Prober for ReproProber {
    fn identity(&self) -> String {
        // The logits a decode probe records or compares with are another test of the same
        // build (named by their content).
        let good = match &self.opts.good_logits {
            GoodLogits::Off => String::new(),
            GoodLogits::Record => " good-logits=record".to_string(),
            GoodLogits::Compare { sha256, .. } => format!(" good-logits={}", &sha256[..16]),
        };
        format!("{}{good}", self.slot_identity())
    }

    fn slot_identity(&self) -> String {
        let env = crate::probe::identity_env;
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
        // A model other than the default one is another test of the same build.
        let model = match self.opts.reproducer {
            Reproducer::Decode => crate::probe::decode::model_identity(&self.opts.settings)
                .map(|m| format!(" {m}"))
                .unwrap_or_default(),
            _ => String::new(),
        };
        format!(
            "repro:v1 {built} run_env=[{}] args={:?} run_timeout_s={} launcher={launcher}{expect}{model}",
            env(&self.opts.run_env),
            self.opts.repro_args,
            self.opts.run_timeout.map(|t| t.as_secs()).unwrap_or(0),
        )
    }

    fn probe(&self, req: &ProbeRequest<'_>, phase: &dyn Fn(Phase)) -> ProbeReport {
        self.probe_steps(req, phase)
    }
}

#[cfg(test)]
mod tests;
