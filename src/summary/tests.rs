use super::*;
use crate::github::body;
use serde_json::json;

/// The markdown outside fenced code blocks (where mentions, references and HTML would render).
fn outside_fences(md: &str) -> String {
    let mut out = String::new();
    let mut fence: Option<usize> = None;
    for line in md.lines() {
        let ticks = line.len() - line.trim_start_matches('`').len();
        match fence {
            None if ticks >= 3 => fence = Some(ticks),
            Some(n) if ticks >= n && line[ticks..].trim().is_empty() => fence = None,
            None => {
                out.push_str(line);
                out.push('\n');
            }
            Some(_) => {}
        }
    }
    out
}

fn bisect_json() -> Value {
    json!({
        "first_bad": {"sha": "0123456789abcdef0123456789abcdef01234567", "subject": "HIP: @someone set_rows tweak #42"},
        "candidates": 37,
        "steps": 6,
        "range": {"good": "aaaaaaaaaaaa", "bad": "bbbbbbbbbbbb"},
        "regress": "error",
        "confidence": "0.97",
        "extra_field_from_the_future": [1, 2, 3],
        "probes": [
            {"sha": "cccccccccccc", "outcome": "pass", "duration_s": 12.5, "log_path": "/l/1.log"},
            {"sha": "0123456789abcdef0123456789abcdef01234567", "outcome": "gpu_fault",
             "duration_s": 3.25, "log_path": "/l/2.log", "signature": "Memory access fault by GPU node-1",
             "output_tail": "line\n```\n@everyone <img src=x>\nMemory access fault by GPU node-1\n"}
        ]
    })
}

fn matrix_json(rocm: &str) -> Value {
    json!({
        "kind": "matrix",
        "command": "setrows-bisect matrix --config matrix.toml",
        "cells": [
            {"config_id": format!("rocm-{rocm}/wave32"), "revision": "53859c2aaaaa", "outcome": "gpu_fault",
             "signature": "HSA_STATUS_ERROR_MEMORY_APERTURE_VIOLATION", "duration_s": 40.0,
             "provenance": {"image": format!("rocm/dev-ubuntu-24.04:{rocm}"), "gpu": "gfx1151"},
             "output_tail": "boom"},
            {"config_id": format!("rocm-{rocm}/wave64"), "revision": "53859c2aaaaa", "outcome": "pass",
             "duration_s": 30.0, "provenance": {"gpu": "gfx1151"}}
        ]
    })
}

#[test]
fn bisect_verdict_renders_escaped() {
    let r = parse(bisect_json(), "b.json").unwrap();
    let ResultKind::Bisect(b) = &r.kind else {
        panic!("not bisect")
    };
    assert_eq!(b.candidate_count, Some(37));
    assert_eq!(b.probes.len(), 2);
    let doc = render(&[&r], None);
    let md = body::assemble(&r.key(), &doc, None, None).unwrap();
    assert!(md.contains("**First bad commit: `0123456789ab`**"), "{md}");
    assert!(md.contains("confidence 0\\.97"), "{md}");
    assert!(md.contains("6 step(s)") && md.contains("37 candidate commit(s)"));
    let prose = outside_fences(&md);
    assert!(prose.contains("Memory access fault"), "{prose}");
    assert!(
        !prose.contains("@someone") && !prose.contains("@everyone"),
        "{prose}"
    );
    assert!(!prose.contains("#42"), "{prose}");
    assert!(!prose.contains("<img"), "{prose}");
    assert!(md.contains("setrows-bisect --good aaaaaaaaaaaa --bad bbbbbbbbbbbb --regress error"));
    assert!(
        md.contains("````text\nline\n```\n"),
        "log fenced longer than its backticks: {md}"
    );
}

#[test]
fn bisect_key_is_stable_and_valid() {
    let a = parse(bisect_json(), "a").unwrap();
    let b = parse(bisect_json(), "b").unwrap();
    assert_eq!(a.key(), b.key());
    assert!(a.key().starts_with("bisect:"));
    body::validate_key(&a.key()).unwrap();
    let mut v = bisect_json();
    v["id"] = json!("rocm 6.4 / wave32 -->");
    let k = parse(v, "c").unwrap().key();
    body::validate_key(&k).unwrap();
    assert_eq!(k, "bisect:rocm-6.4-wave32");
}

#[test]
fn matrix_files_merge_into_one_table() {
    let a = parse(matrix_json("6.4.1"), "a").unwrap();
    let b = parse(matrix_json("7.0"), "b").unwrap();
    assert_eq!(a.key(), "matrix");
    let doc = render(&[&a, &b], Some("https://github.com/o/r/actions/runs/9"));
    let md = doc.to_markdown(None);
    assert!(
        md.contains("**4 cell(s):** ❌ 2 gpu\\_fault · ✅ 2 pass"),
        "{md}"
    );
    assert!(
        md.contains("| rocm\\-6\\.4\\.1/wave32 |") || md.contains("rocm\\-6\\.4\\.1\\/wave32"),
        "{md}"
    );
    assert!(md.contains("rocm\\/dev\\-ubuntu\\-24\\.04\\:7\\.0"), "{md}");
    assert_eq!(md.matches("(log tail)").count(), 2);
    assert!(md.contains("[this workflow run](https://github.com/o/r/actions/runs/9)"));
    let st = state("matrix", &[&a, &b]);
    assert_eq!(st["results"].as_array().unwrap().len(), 2);
    assert!(!st.to_string().contains("output_tail"));
}

#[test]
fn inconclusive_and_unknown_shapes() {
    let v = json!({"probes": [{"report": {"outcome": "build_failed", "duration_s": 1}, "commit": "dddd"}],
                   "candidates": ["aaaa", "bbbb"], "range": "aaaa..bbbb"});
    let r = parse(v, "x").unwrap();
    let md = render(&[&r], None).to_markdown(None);
    assert!(
        md.contains("**Inconclusive:**") && md.contains("`aaaa`, `bbbb`"),
        "{md}"
    );
    assert!(md.contains("| 1 | `dddd` | ⏭️ build\\_failed |"), "{md}");
    let err = parse(json!({"hello": 1}), "weird.json").unwrap_err();
    assert!(err.to_string().contains("weird.json"));
    assert!(parse(json!([1]), "arr.json").is_err());
}
