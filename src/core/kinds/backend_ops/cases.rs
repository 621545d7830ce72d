//! ggml's own `test-backend-ops` as a probe (issue 46): what its output says, read without
//! running anything. The program compares every case of an op (one type and shape each) on a
//! device with the CPU and prints one line a case; a maintainer asks a reporter for exactly
//! that line (`test-backend-ops -o SET_ROWS -b ROCm0`), so the failing case, not the exit
//! status, is the signature a bisect follows.
//!
//! The probe (`probe::kinds::backend_ops`) runs the program once per requested op and ends each run
//! with a `MARKER` line carrying its exit status; `parse` reads the runs back and `classify`
//! turns them into the one outcome vocabulary. Pure: text in, values out.

use crate::core::outcome::Outcome;
use serde::{Deserialize, Serialize};

use super::PROGRAM;

/// The line the probe's test step prints after each run: `<MARKER> op=NAME exit=N`.
pub const MARKER: &str = "setrows-backend-ops:";

/// How many failing case lines a result keeps (the report shows the first few; the counts
/// say how many there were).
pub const KEPT_FAILURES: usize = 20;

/// One case line: `  SET_ROWS(type=f16,ne=[...]): [SET_ROWS] NMSE = 0.5 > 0.0000001 FAIL`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Case {
    pub op: String,
    pub params: String,
    /// `None`: the case passed. Else what failed, without the run's numbers (the NMSE value
    /// changes from commit to commit; the kind of failure does not): `NMSE over its limit`,
    /// `NaN`, `crash (GGML_ASSERT(...) failed)`, ...
    pub error: Option<String>,
}

impl Case {
    /// `OP(params)`, as the program prints it and as `-p` matches it.
    pub fn name(&self) -> String {
        format!("{}({})", self.op, self.params)
    }

    /// The signature of a failing case: `SET_ROWS(type=f16,...): NMSE over its limit`.
    pub fn signature(&self) -> String {
        format!(
            "{}: {}",
            self.name(),
            self.error.as_deref().unwrap_or("passed")
        )
    }
}

/// Cases of one op on the device.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct OpCount {
    pub op: String,
    pub passed: u32,
    pub failed: u32,
    /// Cases the device's backend declined (`not supported`) or the program skipped.
    pub not_run: u32,
}

/// What one probe's runs of the program said: the result document's `backend_ops` (additive).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct BackendOpsRun {
    /// The device the cases ran on (`CPU`, `CUDA0`, `ROCm0`, `Vulkan0`).
    pub device: String,
    /// The requested ops, each with its counts (an op that ran nothing has zeros).
    pub ops: Vec<OpCount>,
    /// The first failing cases (`KEPT_FAILURES`), in the order they ran.
    pub failures: Vec<Case>,
    /// Devices the program listed (`Backend 1/2: CUDA0`).
    pub devices: Vec<String>,
    /// `-p`, when given.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub op_params: Option<String>,
}

impl BackendOpsRun {
    /// The line a user pastes in the built tree to see the first failing case again; the
    /// whole request when nothing failed.
    pub fn reproducer(&self) -> String {
        match self.failures.first() {
            Some(c) => reproducer(&c.op, Some(&regex_quote(&c.params)), &self.device),
            // One line per op, as the probe ran them.
            None => self
                .ops
                .iter()
                .map(|o| reproducer(&o.op, self.op_params.as_deref(), &self.device))
                .collect::<Vec<_>>()
                .join("\n"),
        }
    }
}

/// `test-backend-ops test -o OP [-p 'RE'] -b DEVICE`.
pub fn reproducer(op: &str, params: Option<&str>, device: &str) -> String {
    let args = super::run_args(op, params, device);
    crate::core::shell::line(
        &std::iter::once(PROGRAM.to_string())
            .chain(args)
            .collect::<Vec<_>>(),
    )
}

/// A case's parameter string as a `-p` regex that matches it alone (`-p` is a regex search
/// over the parameters).
pub fn regex_quote(params: &str) -> String {
    format!("^{}$", regex::escape(params))
}

/// The device a backend's first GPU (or the CPU) is called in a tree: ggml names the HIP build
/// of ggml-cuda `ROCm` (`GGML_CUDA_NAME`), unless the tree's sources spell it otherwise.
/// `cuda_sources`: the text of the files that define `GGML_CUDA_NAME` (empty: not read).
pub fn device_name(backend: crate::core::build::Backend, cuda_sources: &str) -> String {
    use crate::core::build::Backend;
    match backend {
        Backend::Cpu => "CPU".into(),
        Backend::Cuda => "CUDA0".into(),
        Backend::Hip => {
            // The define that follows a HIP condition; the first one wins.
            let mut in_hip = false;
            for line in cuda_sources.lines().map(str::trim) {
                if line.starts_with("#if") || line.starts_with("#elif") {
                    in_hip = line.contains("HIP");
                }
                if let Some(rest) = line.strip_prefix("#define GGML_CUDA_NAME") {
                    if in_hip {
                        let name = rest.trim().trim_matches('"');
                        if !name.is_empty() {
                            return format!("{name}0");
                        }
                    }
                }
            }
            "ROCm0".into()
        }
    }
}

/// The op names `-o` takes in a tree, from its `ggml.c`: the op table, the unary ops and the
/// GLU ops (`ggml_op_desc` names a unary op by its own name). Empty when the text has none.
pub fn op_names(ggml_c: &str) -> Vec<String> {
    let mut names = Vec::new();
    for table in ["GGML_OP_NAME[", "GGML_UNARY_OP_NAME[", "GGML_GLU_OP_NAME["] {
        let Some(at) = ggml_c.find(table) else {
            continue;
        };
        let body = &ggml_c[at..];
        let Some(open) = body.find('{') else { continue };
        let Some(close) = body[open..].find("};") else {
            continue;
        };
        let mut rest = &body[open + 1..open + close];
        while let Some(q) = rest.find('"') {
            let after = &rest[q + 1..];
            let Some(end) = after.find('"') else { break };
            names.push(after[..end].to_string());
            rest = &after[end + 1..];
        }
    }
    names.retain(|n| !n.is_empty() && n != "NONE");
    names
}

/// The names test-backend-ops' own cases give themselves (`op_desc` overridden, e.g.
/// `MUL_MAT_HADAMARD`), which `-o` matches as it matches ggml's: from its source text.
pub fn case_op_names(test_src: &str) -> Vec<String> {
    let mut names = Vec::new();
    let mut rest = test_src;
    while let Some(at) = rest.find("std::string op_desc(ggml_tensor * t) override") {
        rest = &rest[at + 1..];
        let body = &rest[..rest.len().min(400)];
        let name = body
            .find("return \"")
            .map(|r| &body[r + 8..])
            .and_then(|b| b.find('"').map(|e| &b[..e]));
        if let Some(n) = name.filter(|n| {
            n.chars()
                .all(|c| c.is_ascii_uppercase() || c.is_ascii_digit() || c == '_')
        }) {
            if !n.is_empty() && !names.iter().any(|x| x == n) {
                names.push(n.to_string());
            }
        }
    }
    names
}

/// The requested ops a tree does not have, with the list to choose from.
pub fn unknown_ops<'a>(requested: &'a [String], known: &[String]) -> Vec<&'a str> {
    requested
        .iter()
        .filter(|o| !known.contains(o))
        .map(String::as_str)
        .collect()
}

/// One run of the program as `parse` read it.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Run {
    pub op: String,
    /// The exit status the marker carried (a shell's: 128 + N for signal N).
    pub exit: Option<i32>,
    pub cases: Vec<Case>,
    /// Cases declined by the device (`not supported`) or skipped.
    pub not_run: Vec<String>,
    pub devices: Vec<String>,
    /// The devices the program tested (not `Skipping`).
    pub tested: Vec<String>,
    /// Lines after the last case that was started and not finished: what a crash said.
    pub crash_text: Vec<String>,
}

/// Removes terminal colour sequences (`\x1b[1;32mOK\x1b[0m`).
fn plain(line: &str) -> String {
    let mut out = String::with_capacity(line.len());
    let mut chars = line.chars().peekable();
    while let Some(c) = chars.next() {
        if c == '\u{1b}' && chars.peek() == Some(&'[') {
            chars.next();
            for d in chars.by_ref() {
                if d.is_ascii_alphabetic() {
                    break;
                }
            }
            continue;
        }
        out.push(c);
    }
    out
}

/// `  NAME(params): rest` -> (NAME, params, rest). The parameters may hold brackets and
/// parentheses of their own; they end where the opening parenthesis closes before `: `.
fn case_line(line: &str) -> Option<(&str, &str, &str)> {
    let t = line.strip_prefix("  ")?;
    let open = t.find('(')?;
    let name = &t[..open];
    if name.is_empty()
        || !name
            .chars()
            .all(|c| c.is_ascii_uppercase() || c.is_ascii_digit() || c == '_')
    {
        return None;
    }
    let mut depth = 0usize;
    for (i, c) in t[open..].char_indices() {
        match c {
            '(' => depth += 1,
            ')' => {
                depth -= 1;
                if depth == 0 {
                    let close = open + i;
                    let rest = t[close + 1..].strip_prefix(':')?;
                    return Some((name, &t[open + 1..close], rest.trim()));
                }
            }
            _ => {}
        }
    }
    None
}

/// The case a line holds, wherever it starts (`None` when it holds none), with what came
/// before it on the line.
fn find_case(line: &str) -> Option<(&str, (&str, &str, &str))> {
    let mut from = 0;
    while let Some(at) = line[from..].find("  ").map(|i| from + i) {
        if let Some(c) = case_line(&line[at..]) {
            return Some((&line[..at], c));
        }
        from = at + 1;
    }
    None
}

/// What a finished case line's tail says: `Some(None)` passed, `Some(Some(kind))` failed,
/// `None` not finished (the program died inside it) or not run.
fn verdict(rest: &str) -> Option<Option<String>> {
    if rest.ends_with("OK") {
        return Some(None);
    }
    if !rest.ends_with("FAIL") {
        return None;
    }
    const KINDS: &[(&str, &str)] = &[
        ("NMSE =", "NMSE over its limit"),
        ("NaN at index", "NaN"),
        ("inf sign mismatch", "inf mismatch"),
        ("inf mismatch", "inf mismatch"),
        ("ERR =", "ERR over its limit"),
        ("MAA =", "MAA over its limit"),
        ("nonfinite gradient", "nonfinite gradient"),
        ("sentinel mismatch", "sentinel mismatch"),
        ("failed to allocate", "allocation failed"),
        ("compare failed", "compare failed"),
    ];
    let kind = KINDS
        .iter()
        .find(|(k, _)| rest.contains(k))
        .map_or("FAIL", |(_, v)| v);
    Some(Some(kind.to_string()))
}

/// The runs in a test step's output, one per `MARKER` line (output after the last marker is a
/// run that never printed one: the step itself was killed).
pub fn parse(output: &str) -> Vec<Run> {
    let mut runs = Vec::new();
    let mut cur = Run::default();
    // A case whose line has not ended in a verdict yet, and what came after it.
    let mut open: Option<Case> = None;
    let mut last_device: Option<String> = None;
    for raw in output.lines() {
        let line = plain(raw);
        if let Some(m) = line.trim().strip_prefix(MARKER) {
            for w in m.split_whitespace() {
                if let Some(op) = w.strip_prefix("op=") {
                    cur.op = op.to_string();
                }
                if let Some(e) = w.strip_prefix("exit=") {
                    cur.exit = e.parse().ok();
                }
            }
            if let Some(mut c) = open.take() {
                c.error = Some(crash_kind(&cur.crash_text, cur.exit));
                cur.cases.push(c);
            }
            runs.push(std::mem::take(&mut cur));
            last_device = None;
            continue;
        }
        if let Some(d) = line.strip_prefix("Backend ").and_then(|r| {
            let (count, name) = r.split_once(": ")?;
            count.contains('/').then(|| name.trim().to_string())
        }) {
            cur.devices.push(d.clone());
            last_device = Some(d);
            continue;
        }
        if let Some(d) = &last_device {
            let t = line.trim();
            if t.starts_with("Skipping") {
                last_device = None;
            } else if t.starts_with("Device description") || find_case(&line).is_some() {
                if !cur.tested.contains(d) {
                    cur.tested.push(d.clone());
                }
                last_device = None;
            }
        }
        if let Some((prefix, (op, params, rest))) = find_case(&line) {
            // A tree that prints what failed while it compares, before the case line: the
            // error text leads the line, the verdict ends it.
            let rest_owned = format!("{prefix} {rest}");
            let rest = if prefix.trim().is_empty() {
                rest
            } else {
                rest_owned.trim()
            };
            // A new case line ends the one before it unfinished only if that one never got
            // a verdict: then the program went on after it, so it is not a crash; it is kept
            // as not run.
            if let Some(c) = open.take() {
                cur.not_run.push(c.name());
            }
            cur.crash_text.clear();
            let case = Case {
                op: op.to_string(),
                params: params.to_string(),
                error: None,
            };
            match verdict(rest) {
                Some(error) => cur.cases.push(Case { error, ..case }),
                None if rest.starts_with("not supported") || rest.starts_with("skipping") => {
                    cur.not_run.push(case.name())
                }
                None => {
                    if !rest.is_empty() {
                        cur.crash_text.push(rest.to_string());
                    }
                    open = Some(case);
                }
            }
            continue;
        }
        let t = line.trim();
        if open.is_some() {
            // The verdict of a case may come on a later line (a message the program or a
            // backend printed first).
            if let Some(v) = verdict(t) {
                let mut c = open.take().expect("open case");
                c.error = v;
                cur.cases.push(c);
                cur.crash_text.clear();
                continue;
            }
        }
        // After the last case: what the program said before it ended (a summary, or, from a
        // tree that prints a case only once it finished, the assert that killed it inside
        // the next one).
        if !t.is_empty() && (!cur.devices.is_empty() || open.is_some()) {
            cur.crash_text.push(t.to_string());
        }
    }
    // Output after the last marker: the step itself was cut off inside a case.
    if let Some(mut c) = open.take() {
        c.error = Some(crash_kind(&cur.crash_text, None));
        cur.cases.push(c);
    }
    if !cur.cases.is_empty() || !cur.devices.is_empty() || !cur.not_run.is_empty() {
        runs.push(cur);
    }
    runs
}

/// `crash (GGML_ASSERT(x) failed)`, `crash (fatal error)`, `crash (signal 6)`: the message
/// without its file path and line (they move with every commit), so one crash keeps one
/// signature across the range.
fn crash_kind(text: &[String], exit: Option<i32>) -> String {
    let said = text.iter().find_map(|l| {
        let l = l.trim();
        if let Some(at) = l.find("GGML_ASSERT(") {
            // Up to its own `failed`: a shell's "Aborted" may follow on the same line.
            let rest = &l[at..];
            let end = rest
                .find(") failed")
                .map_or(rest.len(), |e| e + ") failed".len());
            return Some(rest[..end].to_string());
        }
        for k in ["GGML_ABORT", "fatal error", "Segmentation fault", "Aborted"] {
            if l.contains(k) {
                return Some(k.to_string());
            }
        }
        if l.contains("error: ") && (l.contains("CUDA") || l.contains("HIP") || l.contains("ROCm"))
        {
            return Some(l[l.find("error: ").unwrap_or(0)..].to_string());
        }
        None
    });
    match (said, exit) {
        (Some(s), _) => format!("crash ({s})"),
        (None, Some(e)) if e > 128 => format!("crash (signal {})", e - 128),
        (None, Some(e)) => format!("crash (exit {e})"),
        (None, None) => "crash".into(),
    }
}

/// What a probe's runs come to: the outcome, its signature (the first failing case, or why
/// nothing was tested), the lines `--match` sees, and the counts for the result.
#[derive(Debug, Clone, PartialEq)]
pub struct Classified {
    pub outcome: Outcome,
    pub signature: Option<String>,
    /// One line per failing case (`Case::signature`), then the reason when nothing failed:
    /// what `--match` is asked of, so a regex naming one case follows that case.
    pub match_text: String,
    pub run: BackendOpsRun,
}

/// The outcome of the runs of `ops` on `device`. A case that died is a crash (a GPU fault
/// when its text says so); a failing case a wrong result; a requested op that ran no case
/// on the device makes the probe `untestable` (never a pass: nothing was compared); else pass.
pub fn classify(
    runs: &[Run],
    ops: &[String],
    device: &str,
    op_params: Option<&str>,
    gpu_fault: &dyn Fn(&str) -> bool,
) -> Classified {
    let mut run = BackendOpsRun {
        device: device.to_string(),
        op_params: op_params.map(String::from),
        ..BackendOpsRun::default()
    };
    for r in runs {
        for d in &r.devices {
            if !run.devices.contains(d) {
                run.devices.push(d.clone());
            }
        }
    }
    let mut empty = Vec::new();
    for op in ops {
        let mut count = OpCount {
            op: op.clone(),
            ..OpCount::default()
        };
        for r in runs.iter().filter(|r| &r.op == op) {
            for c in &r.cases {
                match &c.error {
                    None => count.passed += 1,
                    Some(e) => {
                        count.failed += 1;
                        // A crash is kept past the cap: it is the run's signature.
                        if run.failures.len() < KEPT_FAILURES || e.starts_with("crash") {
                            run.failures.push(c.clone());
                        }
                    }
                }
            }
            count.not_run += r.not_run.len() as u32;
            // The case it died in, unprinted, failed too.
            if r.exit.is_some_and(|e| e >= 128) && r.cases.last().is_none_or(|c| c.error.is_none())
            {
                count.failed += 1;
            }
        }
        if count.passed + count.failed == 0 {
            empty.push(op.clone());
        }
        run.ops.push(count);
    }
    let crash_lines: String = runs
        .iter()
        .flat_map(|r| r.crash_text.iter())
        .cloned()
        .collect::<Vec<_>>()
        .join("\n");
    // A program that died after the last case it printed (a tree that prints each case once
    // it is done): the crash is its op's, in a case it had not printed.
    let died_outside: Vec<String> = runs
        .iter()
        .filter(|r| {
            r.exit.is_some_and(|e| e >= 128) && r.cases.last().is_none_or(|c| c.error.is_none())
        })
        .map(|r| {
            format!(
                "{}: {} in a case it had not printed",
                r.op,
                crash_kind(&r.crash_text, r.exit)
            )
        })
        .collect();
    let mut lines: Vec<String> = run.failures.iter().map(Case::signature).collect();
    lines.extend(died_outside.iter().cloned());
    let crash_case = run
        .failures
        .iter()
        .find(|c| c.error.as_deref().is_some_and(|e| e.starts_with("crash")))
        .map(Case::signature);
    let (outcome, signature) = if let Some(crash) = crash_case.or(died_outside.first().cloned()) {
        // A crash is the run's outcome and its signature, whatever failed before it.
        let outcome = if gpu_fault(&crash_lines) {
            Outcome::GpuFault
        } else {
            Outcome::Crash
        };
        (outcome, Some(crash))
    } else if let Some(first) = run.failures.first() {
        (Outcome::WrongResult, Some(first.signature()))
    } else if !empty.is_empty() {
        let listed = if run.devices.is_empty() {
            "it listed no device".to_string()
        } else {
            format!("its devices: {}", run.devices.join(", "))
        };
        let why = if !run.devices.iter().any(|d| d == device) {
            format!("{PROGRAM}: no device {device} in this build ({listed})")
        } else {
            format!(
                "{PROGRAM}: -o {} ran no case on {device}{} (declined or none matched)",
                empty.join(","),
                op_params
                    .map(|p| format!(" with -p {p}"))
                    .unwrap_or_default()
            )
        };
        lines.push(why.clone());
        (Outcome::Untestable, Some(why))
    } else {
        (Outcome::Pass, None)
    };
    Classified {
        outcome,
        signature,
        match_text: lines.join("\n"),
        run,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::core::build::Backend;

    fn ops(o: &[&str]) -> Vec<String> {
        o.iter().map(|s| s.to_string()).collect()
    }

    fn no_fault(_: &str) -> bool {
        false
    }

    // The shape of the console printer of llama.cpp b7000-era test-backend-ops (colours kept).
    const FAILING: &str = "Testing 2 devices\n\n\
Backend 1/2: CUDA0\n  Device description: NVIDIA H100\n  Device memory: 81000 MB (80000 MB free)\n\n\
\x20 SET_ROWS(type=f32,type_idx=i64,ne=[1,8,1,3],nr23=[1,1],r=1,v=0): \x1b[1;32mOK\x1b[0m\n\
\x20 SET_ROWS(type=f16,type_idx=i64,ne=[512,5,1,3],nr23=[1,1],r=1,v=0): [SET_ROWS] NMSE = 0.512000000 > 0.000000100 \x1b[1;31mFAIL\x1b[0m\n\
\x20 SET_ROWS(type=q4_0,type_idx=i32,ne=[256,5,1,3],nr23=[1,1],r=1,v=0): not supported [CUDA0] \n\
  1/2 tests passed\n  Backend CUDA0: \x1b[1;31mFAIL\x1b[0m\n\
Backend 2/2: CPU\n  Skipping\n1/2 backends passed\n\x1b[1;31mFAIL\x1b[0m\n\
setrows-backend-ops: op=SET_ROWS exit=1\n";

    #[test]
    fn a_failing_case_is_a_wrong_result_named_by_its_op_params_and_kind() {
        let runs = parse(FAILING);
        assert_eq!(runs.len(), 1);
        assert_eq!(runs[0].exit, Some(1));
        assert_eq!(runs[0].tested, ["CUDA0"]);
        let c = classify(&runs, &ops(&["SET_ROWS"]), "CUDA0", None, &no_fault);
        assert_eq!(c.outcome, Outcome::WrongResult);
        assert_eq!(
            c.signature.as_deref(),
            Some("SET_ROWS(type=f16,type_idx=i64,ne=[512,5,1,3],nr23=[1,1],r=1,v=0): NMSE over its limit")
        );
        assert_eq!(
            c.run.ops,
            [OpCount {
                op: "SET_ROWS".into(),
                passed: 1,
                failed: 1,
                not_run: 1
            }]
        );
        // A --match naming this case sees it; one naming the passing case does not.
        assert!(c.match_text.contains("SET_ROWS(type=f16"));
        assert!(!c.match_text.contains("type=f32"));
        assert_eq!(
            c.run.reproducer(),
            "test-backend-ops test -o SET_ROWS -p '^type=f16,type_idx=i64,ne=\\[512,5,1,3\\],nr23=\\[1,1\\],r=1,v=0$' -b CUDA0"
        );
    }

    #[test]
    fn a_case_the_program_dies_in_is_a_crash_without_path_or_line() {
        // ggml-org/ggml #1190: GET_ROWS_BACK bf16 on the CPU before f71d538e.
        let out = "Backend 1/1: CPU\n  Device description: x86\n\
\x20 GET_ROWS_BACK(type=f32,n=1,m=8,r=2,b=1,v=0): OK\n\
\x20 GET_ROWS_BACK(type=bf16,n=256,m=5,r=4,b=1,v=0): /src/ggml-cpu/ops.cpp:4468: fatal error\n\
Aborted (core dumped)\nsetrows-backend-ops: op=GET_ROWS_BACK exit=134\n";
        let c = classify(
            &parse(out),
            &ops(&["GET_ROWS_BACK"]),
            "CPU",
            None,
            &no_fault,
        );
        assert_eq!(c.outcome, Outcome::Crash);
        assert_eq!(
            c.signature.as_deref(),
            Some("GET_ROWS_BACK(type=bf16,n=256,m=5,r=4,b=1,v=0): crash (fatal error)")
        );
        assert_eq!(c.run.ops[0].passed, 1);
        assert_eq!(c.run.ops[0].failed, 1);
        let a = "Backend 1/1: CPU\n  Device description: x86\n\
\x20 MUL_MAT(type_a=f16,type_b=f32,m=16,n=1,k=256,bs=[1,1],nr=[1,1],per=[0,1,2,3]): ggml/src/ggml.c:123: GGML_ASSERT(ggml_can_mul_mat(a, b)) failed\n\
setrows-backend-ops: op=MUL_MAT exit=134\n";
        let c = classify(&parse(a), &ops(&["MUL_MAT"]), "CPU", None, &no_fault);
        assert_eq!(
            c.signature.as_deref(),
            Some("MUL_MAT(type_a=f16,type_b=f32,m=16,n=1,k=256,bs=[1,1],nr=[1,1],per=[0,1,2,3]): crash (GGML_ASSERT(ggml_can_mul_mat(a, b)) failed)")
        );
        // A GPU's own fault message makes it a GPU fault.
        let g = "Backend 1/2: ROCm0\n  Device description: gfx1151\n\
\x20 SET_ROWS(type=f16,ne=[5,1,1,1]): Memory access fault by GPU node-1 on address 0x7f. Reason: Page not present\n\
setrows-backend-ops: op=SET_ROWS exit=134\n";
        let c = classify(&parse(g), &ops(&["SET_ROWS"]), "ROCm0", None, &|t: &str| {
            t.contains("Memory access fault")
        });
        assert_eq!(c.outcome, Outcome::GpuFault);
    }

    /// A tree that prints a case only once it finished: the assert that killed the program
    /// comes after the last printed case, which passed; the crash is the outcome and the
    /// signature, over a NaN case that failed before it.
    #[test]
    fn a_crash_after_the_last_printed_case_is_the_ops_crash() {
        let out = "Backend 1/1: CPU\n  Device description: x\n\
\x20 SET_ROWS(type_src=f32,type_dst=f32,type_idx=i32,ne=[1,8,1,3]): [SET_ROWS] NaN at index 0 (CPU=nan CPU=nan) \x1b[1;31mFAIL\x1b[0m\n\
\x20 SET_ROWS(type_src=f16,type_dst=f32,type_idx=i64,ne=[33,5,1,7]): \x1b[1;32mOK\x1b[0m\n\
/t/src/ggml-cpu/ops.cpp:5490: GGML_ASSERT(!(dst->type == GGML_TYPE_F16)) failedsh: 1: Aborted\n\
setrows-backend-ops: op=SET_ROWS exit=134\n";
        let c = classify(&parse(out), &ops(&["SET_ROWS"]), "CPU", None, &no_fault);
        assert_eq!(c.outcome, Outcome::Crash);
        assert_eq!(
            c.signature.as_deref(),
            Some("SET_ROWS: crash (GGML_ASSERT(!(dst->type == GGML_TYPE_F16)) failed) in a case it had not printed")
        );
        assert!(
            c.match_text.contains("type_idx=i32,ne=[1,8,1,3]): NaN"),
            "{}",
            c.match_text
        );
        assert_eq!((c.run.ops[0].passed, c.run.ops[0].failed), (1, 2));
        // The NaN printed before its case line (llama.cpp b7xxx prints it while comparing).
        let early = "Backend 1/1: CPU\n  Device description: x\n\
[SET_ROWS] NaN at index 3 (CPU=nan CPU=nan)   SET_ROWS(type_src=f32,ne=[1,8,1,3]): \x1b[1;31mFAIL\x1b[0m\n\
setrows-backend-ops: op=SET_ROWS exit=1\n";
        let c = classify(&parse(early), &ops(&["SET_ROWS"]), "CPU", None, &no_fault);
        assert_eq!(
            c.signature.as_deref(),
            Some("SET_ROWS(type_src=f32,ne=[1,8,1,3]): NaN")
        );
    }

    #[test]
    fn an_op_that_ran_no_case_on_the_device_is_untestable_never_a_pass() {
        let declined = "Backend 1/2: CUDA0\n  Device description: x\n\
\x20 SET_ROWS(type=q4_0,ne=[5,1,1,1]): not supported [CUDA0]\n  0/0 tests passed\n\
Backend 2/2: CPU\n  Skipping\nsetrows-backend-ops: op=SET_ROWS exit=0\n";
        let c = classify(
            &parse(declined),
            &ops(&["SET_ROWS"]),
            "CUDA0",
            None,
            &no_fault,
        );
        assert_eq!(c.outcome, Outcome::Untestable);
        assert!(c.signature.unwrap().contains("ran no case on CUDA0"));
        // The device is not in this build: every device skipped, the program passes.
        let absent = "Backend 1/1: CPU\n  Skipping\n1/1 backends passed\nsetrows-backend-ops: op=SET_ROWS exit=0\n";
        let c = classify(
            &parse(absent),
            &ops(&["SET_ROWS"]),
            "ROCm0",
            None,
            &no_fault,
        );
        assert_eq!(c.outcome, Outcome::Untestable);
        assert_eq!(
            c.signature.as_deref(),
            Some("test-backend-ops: no device ROCm0 in this build (its devices: CPU)")
        );
        // Two ops, one passing and one with nothing to run: untestable, counts kept.
        let two = "Backend 1/1: CPU\n  Device description: x\n  ADD(type=f32,ne=[1,1,1,1]): OK\nsetrows-backend-ops: op=ADD exit=0\n\
Backend 1/1: CPU\n  Device description: x\nsetrows-backend-ops: op=SET_ROWS exit=0\n";
        let c = classify(
            &parse(two),
            &ops(&["ADD", "SET_ROWS"]),
            "CPU",
            None,
            &no_fault,
        );
        assert_eq!(c.outcome, Outcome::Untestable);
        assert_eq!(c.run.ops[0].passed, 1);
        let pass = "Backend 1/1: CPU\n  Device description: x\n  ADD(type=f32,ne=[1,1,1,1]): OK\nsetrows-backend-ops: op=ADD exit=0\n";
        let c = classify(&parse(pass), &ops(&["ADD"]), "CPU", None, &no_fault);
        assert_eq!(c.outcome, Outcome::Pass);
        assert_eq!(c.signature, None);
        assert_eq!(c.run.reproducer(), "test-backend-ops test -o ADD -b CPU");
    }

    #[test]
    fn op_names_and_device_names_are_read_as_the_tree_spells_them() {
        let ggml_c = "static const char * GGML_OP_NAME[GGML_OP_COUNT] = {\n  \"NONE\",\n  \"DUP\",\n  \"SET_ROWS\",\n};\n\
static_assert(GGML_OP_COUNT == 3);\nstatic const char * GGML_UNARY_OP_NAME[GGML_UNARY_OP_COUNT] = {\n  \"ABS\",\n  \"GELU\",\n};\n";
        let names = op_names(ggml_c);
        assert_eq!(names, ["DUP", "SET_ROWS", "ABS", "GELU"]);
        // test-backend-ops' own case names (llama.cpp c1f1e28d2's test_mul_mat_hadamard).
        let cases = "struct test_mul_mat_hadamard : public test_mul_mat {\n    std::string op_desc(ggml_tensor * t) override {\n        GGML_UNUSED(t);\n        return \"MUL_MAT_HADAMARD\";\n    }\n};\nstruct x { std::string op_desc(ggml_tensor * t) override {\n        return ggml_op_desc(t);\n    }\n};";
        assert_eq!(case_op_names(cases), ["MUL_MAT_HADAMARD"]);
        assert_eq!(
            unknown_ops(&ops(&["SET_ROWS", "SETROWS"]), &names),
            ["SETROWS"]
        );
        let common = "#if defined(GGML_USE_HIP)\n#define GGML_COMMON_DECL_HIP\n#define GGML_CUDA_NAME \"ROCm\"\n#elif defined(GGML_USE_MUSA)\n#define GGML_CUDA_NAME \"MUSA\"\n#else\n#define GGML_CUDA_NAME \"CUDA\"\n#endif\n";
        assert_eq!(device_name(Backend::Hip, common), "ROCm0");
        assert_eq!(device_name(Backend::Hip, ""), "ROCm0");
        assert_eq!(device_name(Backend::Cuda, common), "CUDA0");
        assert_eq!(device_name(Backend::Cpu, ""), "CPU");
    }
}
