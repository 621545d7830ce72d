//! `--probe-kind ctest` (issue 57): the probed tree's own CTest suite. The probe
//! (`probe::kinds::ctest`) configures the tree with its tests switched on (`GGML_BUILD_TESTS`,
//! `LLAMA_BUILD_TESTS`; ggml and llama.cpp both ship ctest suites), builds it, and runs
//! `ctest -R REGEX --output-on-failure` in the build tree; what ctest printed is read here. The
//! signature is the first failing test's name and its first error line, so a bisect follows
//! that test; a tree with no test matching the regex is a skip that says so.
//!
//! Pure: text in, values out.

use super::{Kind, Needs, ProbeSpec, Table};
use crate::core::outcome::Outcome;

/// The program, as the report names it.
pub const PROGRAM: &str = "ctest";

/// The line the probe's test step prints after ctest: `<MARKER> exit=N`.
pub const MARKER: &str = "setrows-ctest:";

pub struct Ctest;

/// ctest's arguments: the tests whose name matches `regex`, each failing test's output shown.
/// THE line the probe runs and the report prints.
pub fn run_args(regex: &str) -> Vec<String> {
    ["-R", regex, "--output-on-failure"]
        .map(String::from)
        .to_vec()
}

impl Kind for Ctest {
    fn name(&self) -> &'static str {
        "ctest"
    }
    // Which tests a tree has is learned at each probe (a tree without one is a skip).
    fn needs(&self) -> Needs {
        Needs::Nothing
    }
    // Tests live anywhere in the tree (llama.cpp's tests/ is outside its ggml/).
    fn whole_tree(&self) -> bool {
        true
    }
    fn program(&self) -> Option<&'static str> {
        Some(PROGRAM)
    }
    // The replay's arguments mean nothing to ctest.
    fn takes_repro_args(&self) -> bool {
        false
    }
    fn refuses_flags(&self) -> &'static [(&'static str, &'static str)] {
        &[
            ("--graph", "--graph and --probe-kind ctest: --graph is the replay's graph, ctest runs the tree's own tests (--ctest REGEX); drop one"),
            ("--repro-arg", "--repro-arg and --probe-kind ctest: --repro-arg is the bundled reproducer's, ctest takes --ctest REGEX; drop --repro-arg"),
        ]
    }
    fn table_lacks(&self, t: &Table) -> Option<(&'static str, &'static str)> {
        t.ctest.is_none().then_some((
            "probe.ctest",
            "probe kind `ctest` needs its test regex, which only `setrows-bisect --probe-kind ctest --ctest REGEX` gives",
        ))
    }
    fn spec(&self, t: &Table) -> ProbeSpec {
        ProbeSpec::Ctest {
            regex: t.ctest.unwrap_or_default().to_string(),
        }
    }
    // Which tests run is the test step's; a build-only probe builds the same tree.
    fn identity(&self, spec: &ProbeSpec, build_only: bool) -> String {
        match spec.ctest() {
            Some(regex) if !build_only => format!("ctest regex={regex:?}"),
            _ => self.name().to_string(),
        }
    }
    fn runs(&self, spec: &ProbeSpec, _args: &[String], _device: &str) -> Vec<Vec<String>> {
        vec![run_args(spec.ctest().unwrap_or_default())]
    }
    fn ran(&self) -> Option<(&'static str, &'static str)> {
        Some((
            "the tree's own ctest suite, in the tree built with its tests",
            "the tests ctest -R matched, each judged by the tree's own test",
        ))
    }
    fn flag_line(&self, spec: &ProbeSpec) -> String {
        format!(
            "--probe-kind ctest --ctest {}",
            crate::core::shell::word(spec.ctest().unwrap_or_default())
        )
    }
}

/// One test's line in ctest's output, and the first error line of its output.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TestRun {
    pub name: String,
    /// ctest's word for it: `Passed`, `Failed`, `Exception: SegFault`, `Timeout`, `Not Run`.
    pub status: String,
    /// The first line of its output that says what went wrong (`--output-on-failure`).
    pub error: Option<String>,
}

impl TestRun {
    pub fn outcome(&self) -> Outcome {
        let s = self.status.to_ascii_lowercase();
        if s == "passed" {
            Outcome::Pass
        } else if s.contains("timeout") {
            Outcome::Hang
        } else if s.contains("exception") || s.contains("abort") || s.contains("segfault") {
            Outcome::Crash
        } else if s.contains("not run") {
            Outcome::Untestable
        } else {
            Outcome::WrongResult
        }
    }

    /// `test-foo: the first error line` (the status when it printed none).
    pub fn signature(&self) -> String {
        format!(
            "{}: {}",
            self.name,
            self.error.as_deref().unwrap_or(&self.status)
        )
    }
}

/// The tests ctest ran, in its order, each with its status and first error line.
pub fn parse(output: &str) -> Vec<TestRun> {
    let result = regex::Regex::new(
        r"^\s*\d+/\d+\s+Test\s+#\d+:\s+(\S+)\s+\.*\s*(?:\*+)?(.*?)\s+[0-9.]+\s+sec\s*$",
    )
    .expect("a valid regex");
    let boundary = regex::Regex::new(r"^\s*(Start\s+\d+:|\d+% tests passed|The following tests)")
        .expect("a valid regex");
    let mut runs: Vec<TestRun> = Vec::new();
    let mut reading = false;
    for line in output.lines() {
        if let Some(c) = result.captures(line) {
            let status = c[2].trim().trim_end_matches('*').trim().to_string();
            let status = status.trim_start_matches("***").to_string();
            runs.push(TestRun {
                name: c[1].to_string(),
                status,
                error: None,
            });
            reading = true;
            continue;
        }
        if boundary.is_match(line) || line.starts_with(MARKER) {
            reading = false;
            continue;
        }
        let Some(last) = runs.last_mut() else {
            continue;
        };
        if !reading || last.outcome() == Outcome::Pass || last.error.is_some() {
            continue;
        }
        let t = line.trim();
        let lower = t.to_ascii_lowercase();
        if ["error", "fail", "assert", "abort", "fault"]
            .iter()
            .any(|w| lower.contains(w))
        {
            last.error = Some(t.chars().take(200).collect());
        }
    }
    runs
}

/// What a probe's run of ctest says.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Classified {
    pub outcome: Outcome,
    /// The first failing test's `name: error line`; the reason of a skip.
    pub signature: Option<String>,
    /// What `--match` is asked of: each failing test's signature, one a line.
    pub match_text: String,
}

/// The outcome of one run: the first failing test decides it; no test at all is a skip.
pub fn classify(output: &str, regex: &str) -> Classified {
    let runs = parse(output);
    if runs.is_empty() {
        return Classified {
            outcome: Outcome::Untestable,
            signature: Some(format!(
                "no test matches ctest -R {} in this tree",
                crate::core::shell::word(regex)
            )),
            match_text: String::new(),
        };
    }
    let failing: Vec<&TestRun> = runs
        .iter()
        .filter(|r| r.outcome() != Outcome::Pass)
        .collect();
    match failing.first() {
        None => Classified {
            outcome: Outcome::Pass,
            signature: None,
            match_text: String::new(),
        },
        Some(first) => Classified {
            outcome: first.outcome(),
            signature: Some(first.signature()),
            match_text: failing
                .iter()
                .map(|r| r.signature())
                .collect::<Vec<_>>()
                .join("\n"),
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const OUT: &str = "Test project /w/b
    Start 1: test-tokenizer
1/3 Test #1: test-tokenizer ...................   Passed    0.02 sec
    Start 2: test-rope
2/3 Test #2: test-rope ........................***Failed    0.10 sec
rope: checking n_dims=128
test-rope.cpp:42: error: rope mismatch at 3
more noise
    Start 3: test-quantize
3/3 Test #3: test-quantize ....................Subprocess aborted***Exception:   0.30 sec
GGML_ASSERT(ne0 % 32 == 0) failed

33% tests passed, 2 tests failed out of 3

The following tests FAILED:
\t  2 - test-rope (Failed)
";

    /// The failing test's name and its first error line are the signature; the first
    /// failing test decides the outcome, every failing one is what `--match` reads.
    #[test]
    fn the_first_failing_test_and_its_error_line_are_the_signature() {
        let runs = parse(OUT);
        assert_eq!(runs.len(), 3);
        assert_eq!(runs[0].outcome(), Outcome::Pass);
        assert_eq!(runs[1].status, "Failed");
        assert_eq!(
            runs[1].error.as_deref(),
            Some("test-rope.cpp:42: error: rope mismatch at 3")
        );
        assert_eq!(runs[2].outcome(), Outcome::Crash);
        let c = classify(OUT, "test-r");
        assert_eq!(c.outcome, Outcome::WrongResult);
        assert_eq!(
            c.signature.as_deref(),
            Some("test-rope: test-rope.cpp:42: error: rope mismatch at 3")
        );
        assert!(c
            .match_text
            .ends_with("test-quantize: GGML_ASSERT(ne0 % 32 == 0) failed"));
    }

    /// No test matching the regex is a skip with its reason; all passing is a pass.
    #[test]
    fn no_matching_test_is_a_skip_that_says_so() {
        let none = classify("Test project /w/b\nNo tests were found!!!\n", "^test-x$");
        assert_eq!(none.outcome, Outcome::Untestable);
        assert_eq!(
            none.signature.as_deref(),
            Some("no test matches ctest -R '^test-x$' in this tree")
        );
        let ok = "1/1 Test #1: a ....   Passed    0.01 sec\n100% tests passed, 0 tests failed out of 1\n";
        assert_eq!(classify(ok, "a").outcome, Outcome::Pass);
    }
}
