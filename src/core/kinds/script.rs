//! `--script` (with `--build`): a user's own build and test, `git bisect run` exit codes; this
//! tool knows nothing of what it builds or runs.

use super::{Kind, Needs, ProbeSpec, Table};

pub struct Script;

impl Kind for Script {
    fn name(&self) -> &'static str {
        "script"
    }
    fn needs(&self) -> Needs {
        Needs::Nothing
    }
    fn is_bundled(&self) -> bool {
        false
    }
    fn program(&self) -> Option<&'static str> {
        None
    }
    fn table_lacks(&self, t: &Table) -> Option<(&'static str, &'static str)> {
        t.script
            .is_none()
            .then_some(("probe.script", "probe kind `script` needs `script`"))
    }
    fn nothing_to_build(&self, spec: &ProbeSpec) -> bool {
        spec.script().is_some_and(|(build, _)| build.is_none())
    }
    fn spec(&self, t: &Table) -> ProbeSpec {
        ProbeSpec::Script {
            build: t.build.map(str::to_string),
            script: t.script.unwrap_or_default().to_string(),
        }
    }
    // A build-only probe leaves out what only the test reads (the test script): configurations
    // that build alike share one build's result.
    fn identity(&self, spec: &ProbeSpec, build_only: bool) -> String {
        let (build, script) = spec.script().unwrap_or((None, ""));
        if build_only {
            return format!("script build={:?}", build.unwrap_or(""));
        }
        format!("script build={:?} script={script:?}", build.unwrap_or(""))
    }
    fn flag_line(&self, _: &ProbeSpec) -> String {
        "--script/--build".into()
    }
}
