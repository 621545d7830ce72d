use super::*;

// Real outputs, captured from the bundled reproducers (see testdata/README.md for the
// commands that produced each one).
const PASS: &str = include_str!("../testdata/replay-pass-cpu.txt");
const CORRUPT: &str = include_str!("../testdata/replay-inject-corrupt-cpu.txt");
const UNSUPPORTED: &str = include_str!("../testdata/replay-unsupported-cpu.txt");
const USAGE: &str = include_str!("../testdata/replay-usage.txt");
const ASSERT: &str = include_str!("../testdata/replay-ggml-assert-cpu.txt");
const CUDA_FAULT: &str = include_str!("../testdata/kernel-cuda-fault-h200.txt");

#[test]
fn pass_needs_the_result_line() {
    let c = classify(Some(0), None, false, PASS);
    assert_eq!(c.outcome, Outcome::Pass);
    assert_eq!(c.signature, None);
    let r = parse_result(PASS).expect("result line");
    assert_eq!(r.status, "pass");
    assert!(r.steps_run > 0);
    assert!(r.timings.expect("timings").steps_per_s > 0.0);
    // exit 0 with the result line removed is not a pass
    let cut: String = PASS
        .lines()
        .filter(|l| !l.starts_with("SETROWS_RESULT"))
        .collect();
    assert_eq!(
        classify(Some(0), None, false, &cut).outcome,
        Outcome::InfraError
    );
}

#[test]
fn mismatch_signature_is_the_first_difference() {
    let c = classify(Some(1), None, false, CORRUPT);
    assert_eq!(c.outcome, Outcome::WrongResult);
    let sig = c.signature.expect("signature");
    assert!(sig.starts_with("step="), "{sig}");
    assert!(sig.contains("buffer=raw_kv"), "{sig}");
    let r = parse_result(CORRUPT).expect("result");
    assert_eq!(r.status, "mismatch");
    assert!(r.first_failing_step.is_some());
}

#[test]
fn unsupported_and_usage_are_skips_with_reasons() {
    let c = classify(Some(3), None, false, UNSUPPORTED);
    assert_eq!(c.outcome, Outcome::Untestable);
    assert!(c
        .signature
        .as_deref()
        .unwrap_or("")
        .starts_with("unsupported: "));
    let c = classify(Some(2), None, false, USAGE);
    assert_eq!(c.outcome, Outcome::Untestable);
    assert!(c
        .signature
        .as_deref()
        .unwrap_or("")
        .starts_with("usage error: "));
}

#[test]
fn abort_signature_is_the_assert_text() {
    let c = classify(None, Some(libc::SIGABRT), false, ASSERT);
    assert_eq!(c.outcome, Outcome::Crash);
    let sig = c.signature.expect("signature");
    assert_eq!(
        sig,
        "ggml.c:3410: GGML_ASSERT(c->type == GGML_TYPE_I64) failed"
    );
    // a shell reporting 128+6 means the same
    assert_eq!(
        classify(Some(134), None, false, ASSERT).outcome,
        Outcome::Crash
    );
    // a bare signal with no text still names it
    let c = classify(None, Some(libc::SIGSEGV), false, "");
    assert_eq!(c.signature.as_deref(), Some("killed by SIGSEGV (11)"));
}

/// AddressSanitizer's report as the decode probe printed it at llama.cpp 01612b740 (#14482) with
/// `LLAMA_SET_ROWS=1` (bench/real/README.md case 23), shortened; paths as a checkout has them.
const ASAN: &str = "decode-probe: settings {}
=================================================================
==1693==ERROR: AddressSanitizer: stack-use-after-return on address 0x7f8c54613da9 at pc 0x7f8c56a3189c bp 0x7fffa9448b60 sp 0x7fffa9448b50
READ of size 1 at 0x7f8c54613da9 thread T0
    #0 0x7f8c56a3189b in llm_graph_input_attn_kv_unified::set_input(llama_ubatch const*) /tmp/w/checkouts/ab/0/src/llama-graph.cpp:312
    [32, 7832) 'gparams' (line 709) <== Memory access at offset 7593 is inside this variable
SUMMARY: AddressSanitizer: stack-use-after-return /tmp/w/checkouts/ab/0/src/llama-graph.cpp:312 in llm_graph_input_attn_kv_unified::set_input(llama_ubatch const*)
==1693==ABORTING
";

#[test]
fn a_sanitizer_report_is_a_crash_named_without_addresses() {
    let want = "AddressSanitizer: stack-use-after-return in llm_graph_input_attn_kv_unified::set_input(llama_ubatch const*)";
    // ASan's own exit status (1) is the probe's "mismatch" code: the report decides, not the code
    let c = classify(Some(1), None, false, ASAN);
    assert_eq!(c.outcome, Outcome::Crash);
    assert_eq!(c.signature.as_deref(), Some(want));
    // abort_on_error=1: the same fault by SIGABRT, the same signature at every commit
    let other_run = ASAN
        .replace("0x7f8c54613da9", "0x7f0000001234")
        .replace("/ab/", "/cd/");
    let c = classify(None, Some(libc::SIGABRT), false, &other_run);
    assert_eq!(
        (c.outcome, c.signature.as_deref()),
        (Outcome::Crash, Some(want))
    );
    // UBSan names the check; its path and line are the checkout's
    let ub = "src/llama-graph.cpp:312:9: runtime error: load of value 190, which is not a valid value for type 'bool'";
    let c = classify(Some(1), None, false, ub);
    assert_eq!(
        c.signature.as_deref(),
        Some("UndefinedBehaviorSanitizer: runtime error: load of value 190, which is not a valid value for type 'bool'")
    );
    // a report that did not fail the run (UBSan without halt_on_error) is no verdict of its own
    assert_eq!(
        classify(Some(0), None, false, ub).outcome,
        Outcome::InfraError
    );
}

#[test]
fn gpu_fault_text_wins_over_the_signal() {
    // HIP's wording (no HIP machine was available to capture one; this is the text ROCm prints)
    let hip = "step 3\nMemory access fault by GPU node-1 (Agent handle: 0x55) on address 0x7f. Reason: Page not present or supervisor privilege.\n";
    let c = classify(None, Some(libc::SIGABRT), false, hip);
    assert_eq!(c.outcome, Outcome::GpuFault);
    assert!(c
        .signature
        .unwrap_or_default()
        .starts_with("Memory access fault by GPU"));
    // captured on the H200: setrows-kernel --offset-math i32 (a planted 32-bit offset bug)
    let c = classify(None, Some(libc::SIGABRT), false, CUDA_FAULT);
    assert_eq!(c.outcome, Outcome::GpuFault);
    let sig = c.signature.unwrap_or_default();
    assert!(
        sig.starts_with("cudaError 700 (an illegal memory access"),
        "{sig}"
    );
    assert!(
        sig.contains(" at setrows-kernel.cu:279: "),
        "directories stripped: {sig}"
    );
    // the same words in a passing run's chatter are not a fault
    let chatter = format!("note: cudaError checks enabled\n{PASS}");
    assert_eq!(
        classify(Some(0), None, false, &chatter).outcome,
        Outcome::Pass
    );
}

#[test]
fn bare_loop_is_no_pass() {
    // the result line of `setrows-replay --check-every 0` (captured on the CPU, shortened)
    let bare = "SETROWS_RESULT {\"tool\":\"setrows-replay\",\"format\":2,\"status\":\"unchecked\",\"exit_code\":0,\"message\":\"bare loop (--check-every 0): 3000 steps computed, nothing checked; a timing baseline, not a verdict\",\"steps_run\":3000,\"checks_run\":0}\n";
    let c = classify(Some(0), None, false, bare);
    assert_eq!(c.outcome, Outcome::Untestable);
    let sig = c.signature.unwrap_or_default();
    assert!(sig.starts_with("unchecked: bare loop"), "{sig}");
    assert!(sig.contains("nothing checked"), "{sig}");
    // the same flags give the same non-answer at every commit: the run stops
    assert_eq!(c.scope, SkipScope::Systematic);
}

#[test]
fn timeout_is_a_hang_even_with_partial_output() {
    let c = classify(None, Some(libc::SIGKILL), true, CORRUPT);
    assert_eq!(c.outcome, Outcome::Hang);
}

#[test]
fn odd_exit_codes() {
    assert_eq!(
        classify(Some(127), None, false, "").outcome,
        Outcome::InfraError
    );
    assert_eq!(
        classify(Some(5), None, false, "").outcome,
        Outcome::WrongResult
    );
    assert_eq!(classify(None, None, false, "").outcome, Outcome::InfraError);
    assert_eq!(parse_result("SETROWS_RESULT {not json"), None);
}

/// A decode setting the tree cannot express (decode-probe's configure-time API probe found no
/// field for it): exit 3 with the reason, the same rule as the replay's unsupported run, so it
/// is a skip of this commit (an older tree cannot, a newer one can) naming the setting, never a
/// verdict and never the end of the search.
#[test]
fn a_decode_setting_the_tree_cannot_express_skips_the_commit_with_the_reason() {
    let why = "this tree's llama_context_params has no flash_attn_type/flash_attn";
    let out = format!(
        "decode-probe: {why}\nSETROWS_RESULT {{\"tool\":\"decode-probe\",\"format\":2,\"status\":\"untestable\",\"exit_code\":3,\"message\":\"{}\",\"backend\":\"CPU\",\"device\":\"\",\"steps_run\":0,\"first_failing_step\":null}}\n",
        why
    );
    let c = classify(Some(3), None, false, &out);
    assert_eq!(c.outcome, Outcome::Untestable);
    assert_eq!(c.scope, crate::core::outcome::SkipScope::Commit);
    assert_eq!(
        c.signature.as_deref(),
        Some(format!("unsupported: {why}").as_str())
    );
}
