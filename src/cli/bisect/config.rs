//! `--config ID` and the configuration flags -> one `core::config::Resolved`, the value every
//! prober is built from (`run::probers`).

use super::BisectArgs;
use crate::cli::choices::{Graph, Switch, WaveSize};
use crate::cli::matrix_file::{load_matrix, EMBEDDED_MATRIX, EMBEDDED_NAME};
use crate::core::build::Backend;
use crate::core::config::{Flags, ProbeKind, Resolved};
use crate::core::matrix;
use crate::error::CliError;
use crate::run::bisect::{Chosen, Naming};

/// The `[params.*]` of the built-in matrix every bundled-reproducer probe runs when nothing
/// names other arguments: the upstream report's pattern (a cached decode graph reused many
/// times, checked every step). The replay's own default, 2,000 steps, misses a fault that
/// starts after tens of thousands of reuses, and a pass there says nothing about it.
pub const DEFAULT_PARAMS: &str = Graph::DecodeReuse.params();

/// The arguments of `DEFAULT_PARAMS` in the built-in matrix: one definition for the matrix's
/// decode-reuse configurations and for a bisect, `--probe` and `--validate` without
/// `--config` or `--repro-arg` (they all resolve through `choose`).
pub fn default_repro_args() -> Vec<String> {
    matrix::parse(EMBEDDED_NAME, EMBEDDED_MATRIX)
        .ok()
        .and_then(|m| m.params(DEFAULT_PARAMS).map(<[String]>::to_vec))
        .unwrap_or_default()
}

/// The configuration flags as values (`--launch-env` must be `K=V`).
pub fn flags(args: &BisectArgs) -> anyhow::Result<Flags> {
    let c = &args.cfg;
    let launch_env = c
        .launch_env
        .iter()
        .map(|kv| match kv.split_once('=') {
            Some((k, v)) if !k.is_empty() && !k.contains(char::is_whitespace) => {
                Ok((k.to_string(), v.to_string()))
            }
            _ => Err(CliError::usage(format!(
                "--launch-env {kv:?}: expected NAME=VALUE, e.g. HIP_LAUNCH_BLOCKING=1"
            ))),
        })
        .collect::<anyhow::Result<Vec<_>>>()?;
    let crate::core::build::sanitize::Sanitize {
        cmake_args,
        launch_env,
    } = with_sanitizer(&c.sanitize, &c.cmake_args, launch_env)?;
    Ok(Flags {
        backend: args.backend,
        image: args.image.clone(),
        gpu_target: c.gpu_target.clone(),
        wave_size: c.wave_size.map(WaveSize::lanes),
        graphs: c.graphs.map(Switch::is_on),
        memory: c.memory,
        launch_env,
        cmake_args,
        repro_args: args.repro_args.clone(),
        timeout_s: args.timeout.timeout,
        probe: crate::cli::flags::chosen_probe(
            args.script.as_deref(),
            args.build.as_deref(),
            args.probe_kind,
            &args.ops,
        )?,
        settings: c.settings.given(),
    })
}

/// `--sanitize`'s CMake arguments before the user's own and its environment under theirs (a
/// `--launch-env` of the same name wins); a `--cmake-arg` setting the flags it sets is refused,
/// as one of the two would be dropped without a word.
fn with_sanitizer(
    kinds: &[String],
    cmake_args: &[String],
    mut launch_env: Vec<(String, String)>,
) -> anyhow::Result<crate::core::build::sanitize::Sanitize> {
    use crate::core::build::sanitize::{self, Sanitize};
    let s = sanitize::sanitize(kinds).map_err(CliError::usage)?;
    if s.cmake_args.is_empty() {
        return Ok(Sanitize {
            cmake_args: cmake_args.to_vec(),
            launch_env,
        });
    }
    if let Some(a) = cmake_args.iter().find(|a| {
        sanitize::SETS
            .iter()
            .any(|v| a.starts_with(&format!("-D{v}=")))
    }) {
        return Err(CliError::usage(format!(
            "--cmake-arg {a} and --sanitize both set the compile flags: give the sanitizer in one of them"
        )));
    }
    for (k, v) in s.launch_env.into_iter().rev() {
        if !launch_env.iter().any(|(n, _)| *n == k) {
            launch_env.insert(0, (k, v));
        }
    }
    Ok(Sanitize {
        cmake_args: s
            .cmake_args
            .into_iter()
            .chain(cmake_args.iter().cloned())
            .collect(),
        launch_env,
    })
}

/// The arguments of `[params.NAME]` in the built-in matrix.
fn builtin_params(name: &str) -> Vec<String> {
    matrix::parse(EMBEDDED_NAME, EMBEDDED_MATRIX)
        .ok()
        .and_then(|m| m.params(name).map(<[String]>::to_vec))
        .unwrap_or_default()
}

/// Two flags where one would drop or replace the other without a word: refused naming both
/// (issue 37 item 2), before anything is made.
fn contradictions(args: &BisectArgs) -> anyhow::Result<()> {
    let kind = args.probe_kind.map(ProbeKind::name);
    let pairs = [
        (args.script.is_some() && kind.is_some(), format!("--script and --probe-kind {} both choose the probe: --script runs your test, --probe-kind a bundled one; drop one", kind.unwrap_or(""))),
        (args.build.is_some() && kind.is_some(), format!("--build and --probe-kind {} both choose what is built: --build is your build, --probe-kind a bundled probe's; drop one", kind.unwrap_or(""))),
        (args.graph.graph.is_some() && args.script.is_some(), "--graph and --script: --graph is the bundled replay's graph, --script runs your own test instead; drop one".to_string()),
    ];
    if let Some((_, why)) = pairs.into_iter().find(|(hit, _)| *hit) {
        return Err(CliError::usage(why));
    }
    // What the kind `--probe-kind` chose refuses (its definition says), in its order.
    let given = |flag: &str| match flag {
        "--graph" => args.graph.graph.is_some(),
        "--repro-arg" => !args.repro_args.is_empty(),
        _ => false,
    };
    let refused = args
        .probe_kind
        .into_iter()
        .flat_map(|k| k.def().refuses_flags());
    match refused.into_iter().find(|(flag, _)| given(flag)) {
        Some((_, why)) => Err(CliError::usage(*why)),
        None => Ok(()),
    }
}

/// Resolves `--config` and the flags.
pub fn choose(args: &BisectArgs) -> anyhow::Result<Chosen> {
    contradictions(args)?;
    let flags = flags(args)?;
    let named = args.cfg.config.is_some();
    let mut cfg = match &args.cfg.config {
        Some(id) => {
            let m = load_matrix(args.cfg.matrix.matrix.as_deref())?;
            let c = m.find(id).ok_or_else(|| {
                // A graph's name where an id goes: the flag that names it, and its configurations.
                let graph = match id.as_str() {
                    "ds4" | "decode-ds4" => Some("ds4"),
                    "decode-reuse" => Some("decode-reuse"),
                    _ => None,
                }
                .map(|g| format!("; the replay's graph is chosen with `--graph {g}` (its configurations: `setrows-bisect matrix --list --graph {g}`)"))
                .unwrap_or_default();
                CliError::usage(format!(
                    "--config {id}: no configuration with this id in {} (`setrows-bisect matrix --list` shows the ids){graph}",
                    m.file
                ))
            })?;
            Resolved::from_matrix(c, &m.probe, &m.file)
        }
        None => {
            let mut r = Resolved::for_backend(flags.backend.unwrap_or(Backend::Cpu));
            if flags.probe.is_none() {
                r.repro_args = default_repro_args();
            }
            r
        }
    };
    // `--graph`: the replay's arguments are that preset's (a configuration's own are replaced,
    // and the report says so); the user's `--repro-arg`s add to it below.
    let mut graph_override = None;
    if let Some(g) = &args.graph.graph {
        if !cfg.probe.def().takes_graph() {
            return Err(CliError::usage(format!(
                "--graph {g} and --config {}: its probe is {}, and --graph is the replay's graph; drop --graph",
                cfg.id.as_deref().unwrap_or(""),
                cfg.probe.name()
            )));
        }
        let preset = builtin_params(g.params());
        if named && preset != cfg.repro_args {
            graph_override = Some(format!(
                "--graph {g} (configuration: {})",
                cfg.repro_args.join(" ")
            ));
        }
        cfg.repro_args = preset;
    }
    // Flags that mean nothing for the backend the probes build for, then what is left of the
    // configuration once they apply (`core::config::meaning`: one rule for both).
    if let Some(why) = flags.refused(cfg.backend) {
        return Err(CliError::usage(why));
    }
    let mut overrides = cfg.apply(&flags);
    overrides.extend(graph_override);
    if let Some(why) = cfg
        .refused()
        .or_else(|| cfg.settings_refused(&flags))
        .or_else(|| cfg.repro_args_refused(&flags.repro_args))
    {
        return Err(CliError::usage(why));
    }
    let args_from = if !flags.repro_args.is_empty() {
        crate::core::result::FROM_REPRO_ARG.to_string()
    } else if let Some(g) = &args.graph.graph {
        format!(
            "--graph {g}: [params.{}] of the built-in matrix.toml{}",
            g.params(),
            if *g == Graph::Ds4 {
                " (the DeepSeek-V4-Flash decode attention of the report)"
            } else {
                ""
            }
        )
    } else if let Some(p) = flags.probe.as_ref().filter(|p| !p.def().takes_repro_args()) {
        // A kind that takes no reproducer arguments: the flag that chose it says what runs.
        p.def().flag_line(p)
    } else if named {
        format!("configuration {}", cfg.id.as_deref().unwrap_or("(unnamed)"))
    } else if let Some(own) = flags
        .probe
        .as_ref()
        .and_then(|p| p.def().own_args(&cfg.settings))
    {
        own
    } else {
        format!("default: [params.{DEFAULT_PARAMS}] of the built-in matrix.toml")
    };
    if let Some(note) = cfg.default_target() {
        errln!("setrows-bisect: {note}");
    }
    let c = &args.cfg;
    let configured = named
        || args.backend.is_some()
        || c.gpu_target.is_some()
        || c.wave_size.is_some()
        || c.graphs.is_some()
        || c.memory.is_some()
        || args.graph.graph.is_some()
        || !c.launch_env.is_empty()
        || !c.cmake_args.is_empty()
        || !c.sanitize.is_empty()
        || !flags.settings.is_empty();
    Ok(Chosen::new(
        cfg,
        Naming {
            engine: args.engine.engine,
            image_flag: args.image.is_some(),
            named,
            configured,
            overrides,
            args_from,
        },
    ))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::core::result::ReproducerInfo;

    /// Every built-in configuration means what it says for its own backend, and a flag that
    /// changes the backend under one is held to the same rule as the flags.
    #[test]
    fn built_in_configurations_are_meaningful_until_a_flag_moves_the_backend() {
        let m = matrix::parse(EMBEDDED_NAME, EMBEDDED_MATRIX).expect("built-in matrix");
        let mut refused = 0;
        for c in &m.configs {
            let mut cfg = Resolved::from_matrix(c, &m.probe, &m.file);
            assert_eq!(cfg.meaningless(), None, "{}", c.id);
            cfg.apply(&Flags {
                backend: Some(Backend::Cpu),
                ..Flags::default()
            });
            let refused_here = cfg.refused().is_some();
            assert_eq!(refused_here, c.values.contains_key("graphs"), "{}", c.id);
            refused += usize::from(refused_here);
        }
        assert!(refused > 0);
    }

    /// The default is the built-in matrix's decode-reuse parameters, which its decode-reuse
    /// configurations run too: many steps, checked every step.
    #[test]
    fn the_default_reproducer_is_the_matrix_decode_reuse() {
        let args = default_repro_args();
        let m = matrix::parse(EMBEDDED_NAME, EMBEDDED_MATRIX).expect("built-in matrix");
        let reuse: Vec<_> = m
            .configs
            .iter()
            .filter(|c| {
                c.values.get("params").map(|v| v.to_string()).as_deref() == Some(DEFAULT_PARAMS)
            })
            .collect();
        assert!(!reuse.is_empty(), "no configuration runs {DEFAULT_PARAMS}");
        assert!(reuse.iter().all(|c| c.repro_args == args));
        let info = ReproducerInfo {
            program: "setrows-replay".into(),
            args,
            source: String::new(),
            env: Vec::new(),
            build_args: Vec::new(),
            more_runs: Vec::new(),
        };
        assert_eq!(info.arg("--mode"), Some("reuse"));
        assert_eq!(info.extent(), "100000 steps, checked every step");
    }
}
