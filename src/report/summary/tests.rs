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

/// The shape `bisect --json` writes (src/report.rs `json`).
#[test]
fn bisect_json_as_written_by_the_driver() {
    let v = json!({
        "first_bad": "d00dfeed00000000000000000000000000000001",
        "term": "first bad commit",
        "conclusion": {"kind": "found", "index": 3},
        "exit_code": 0,
        "candidates": ["d00dfeed00000000000000000000000000000001"],
        "candidate_classes": [{"sha": "d00dfeed00000000000000000000000000000001", "tree": "t", "members": []}],
        "range": {"good": "aaaa000000", "bad": "bbbb000000", "first_parent": true, "path": null, "commits": 40, "candidates": 31},
        "steps": 5, "executed": 5,
        "probes": [{"sha": "d00dfeed00000000000000000000000000000001", "outcome": "gpu_fault", "verdict": "new",
                    "duration_s": 9.5, "log": "/w/logs/1.log", "signature": "HSA_STATUS_ERROR", "cached": false}],
        "predicate": "regress=crash match=Memory access fault",
        "policy": "single run",
        "elapsed_s": 300.0,
        "commits": [{"sha": "d00dfeed00000000000000000000000000000001", "title": "set-rows: use int64 blocks", "author": "x", "date": "2026-01-01"}]
    });
    let r = parse(v, "b.json").unwrap();
    let md = render(&[&r], None).to_markdown(None);
    assert!(
        md.contains("**First bad commit: `d00dfeed0000`** — set\\-rows\\: use int64 blocks"),
        "{md}"
    );
    assert!(
        md.contains("31 candidate commit(s)") && md.contains("policy single run"),
        "{md}"
    );
    assert!(
        md.contains("| ❌ gpu\\_fault | new | HSA\\_STATUS\\_ERROR |"),
        "{md}"
    );
    assert!(
        md.contains("--regress crash --match 'Memory access fault'"),
        "{md}"
    );
    let ResultKind::Bisect(b) = &r.kind else {
        panic!()
    };
    assert_eq!(b.conclusion.as_deref(), Some("found"));
}

/// The shape `matrix` writes (src/matrix_run.rs `MatrixResults`).
#[test]
fn matrix_json_as_written_by_the_runner() {
    let v = json!({
        "matrix": "matrix.toml", "engine": "podman",
        "revisions": [{"rev": "master", "sha": "53859c2000"}],
        "configs": [{"id": "1f2e3d4c", "label": "hip rocm=6.4.1 wave_size=32", "backend": "hip", "image": "x"}],
        "cells": [{"config": "1f2e3d4c", "rev": "master", "sha": "53859c2000", "outcome": "crash",
                   "signature": null, "duration_s": 5.0, "build_s": 4.0, "test_s": 1.0, "attempts": 1,
                   "log": "logs/a.log", "provenance": {"engine": "podman"}}]
    });
    let r = parse(v, "m.json").unwrap();
    assert_eq!(r.key(), "matrix");
    let md = render(&[&r], None).to_markdown(None);
    assert!(
        md.contains(
            "| hip rocm\\=6\\.4\\.1 wave\\_size\\=32 (`1f2e3d4c`) | `53859c2000` | ❌ crash |"
        ),
        "{md}"
    );
}

#[test]
fn large_state_is_compacted_to_fit() {
    let cells: Vec<Value> = (0..300)
        .map(|i| json!({"config": format!("cfg{i:03}"), "sha": "53859c2000", "outcome": "pass",
                        "signature": null, "duration_s": 1.0, "log": format!("logs/{i}.log"),
                        "provenance": {"image": "localhost/setrows-rocm:6.4.1", "digest": "sha256:".to_string() + &"0".repeat(64)}}))
        .collect();
    let r = parse(json!({"cells": cells}), "m").unwrap();
    let st = state("matrix", &[&r]);
    assert_eq!(st["compacted"], 1);
    assert_eq!(st["results"][0]["cells"].as_array().unwrap().len(), 300);
    assert!(st["results"][0]["cells"][0].get("provenance").is_none());
    assert_eq!(st["results"][0]["cells"][299]["outcome"], "pass");
    let b = body::assemble("matrix", &render(&[&r], None), Some(&st), None).unwrap();
    assert!(b.len() <= body::MAX_BODY);

    let huge: Vec<Value> = (0..3000)
        .map(|i| json!({"config": format!("c{i}"), "sha": "x", "outcome": "pass"}))
        .collect();
    let r = parse(json!({"cells": huge}), "m").unwrap();
    let st = state("matrix", &[&r]);
    assert_eq!(st["compacted"], 2);
    assert!(
        body::assemble("matrix", &render(&[&r], None), Some(&st), None)
            .unwrap()
            .len()
            <= body::MAX_BODY
    );

    let small = parse(matrix_json("7.0"), "s").unwrap();
    assert!(state("matrix", &[&small]).get("compacted").is_none());
}
