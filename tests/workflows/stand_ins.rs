//! The programs a hosted runner would bring, replaced by named local equivalents (written into
//! the harness's tools dir, first on every step's PATH after `$GITHUB_PATH` entries):
//! - `cargo build --release --locked` writes `target/release/setrows-bisect`, a two-line
//!   launcher of the test build's binary (the artifact that travels between jobs stays small),
//!   and `cargo run --locked --quiet -- ARGS` runs the binary; both append the runner's name to
//!   `cargo-builds` in the harness dir, so a test counts builds per workflow run and sees where.
//!   Any other use fails the step.
//! - `rustup` does nothing (the toolchain is the test's).
//! - `gh run list --workflow W --event E --limit N --json databaseId --jq '.[].databaseId'`
//!   lists the harness's runs of W for event E newest first (the one in progress too); `gh run download ID --name N
//!   --dir D` copies that run's artifact N (exit 1 when it has none). Other forms fail.
//! - `gh workflow run WF [--ref R] -f k=v ...` checks the call as the API would (the target has
//!   `workflow_dispatch`, every `-f` is a declared input, required inputs are given, choices are
//!   options; otherwise gh's own 422 line and exit 1) and appends its arguments to `dispatches`.

use serde_json::{json, Map, Value};
use serde_yaml_ng::Value as Y;
use std::path::Path;

fn write_exec(p: &Path, text: &str) {
    std::fs::write(p, text).unwrap();
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(p, std::fs::Permissions::from_mode(0o755)).unwrap();
}

/// `workflow_dispatch` inputs of every workflow of the project, for the gh stand-in.
fn dispatch_inputs(project: &Path) -> Value {
    let mut out = Map::new();
    let dir = project.join(".github/workflows");
    for e in std::fs::read_dir(&dir).into_iter().flatten() {
        let p = e.unwrap().path();
        let Ok(text) = std::fs::read_to_string(&p) else {
            continue;
        };
        let Ok(wf) = serde_yaml_ng::from_str::<Y>(&text) else {
            continue;
        };
        let name = p.file_name().unwrap().to_string_lossy().into_owned();
        let Some(d) = wf.get("on").and_then(|on| on.get("workflow_dispatch")) else {
            out.insert(name, Value::Null);
            continue;
        };
        let mut inputs = Map::new();
        if let Some(m) = d.get("inputs").and_then(Y::as_mapping) {
            for (k, v) in m {
                inputs.insert(
                    k.as_str().unwrap().to_string(),
                    json!({
                        "required": v.get("required").and_then(Y::as_bool).unwrap_or(false),
                        "has_default": v.get("default").is_some(),
                        "options": v.get("options").map(|o| serde_json::to_value(o).unwrap()),
                    }),
                );
            }
        }
        out.insert(name, Value::Object(inputs));
    }
    Value::Object(out)
}

pub fn install(tools: &Path, base: &Path, bin: &Path, project: &Path) {
    let builds = base.join("cargo-builds");
    let cargo = format!(
        "#!/bin/sh\n# The harness's cargo: the test build's binary is the tool.\n\
         if [ \"$*\" = \"build --release --locked\" ]; then\n  \
         echo \"$RUNNER_NAME\" >> '{builds}'\n  \
         mkdir -p target/release && printf '#!/bin/sh\\nexec %s \"$@\"\\n' \"'{bin}'\" > target/release/setrows-bisect && \
         chmod 755 target/release/setrows-bisect && exit 0\nfi\n\
         if [ \"$1 $2 $3 $4\" = \"run --locked --quiet --\" ]; then\n  \
         echo \"$RUNNER_NAME\" >> '{builds}'\n  shift 4\n  exec '{bin}' \"$@\"\nfi\n\
         echo \"harness cargo: not supported: $*\" >&2\nexit 97\n",
        bin = bin.display(),
        builds = builds.display(),
    );
    let rustup = "#!/bin/sh\n# The harness's rustup: the toolchain is the test's own.\n\
                  case \"$1\" in toolchain|default) exit 0 ;; esac\n\
                  echo \"harness rustup: not supported: $*\" >&2\nexit 97\n";
    let spec = base.join("dispatch-inputs.json");
    std::fs::write(&spec, dispatch_inputs(project).to_string()).unwrap();
    let gh = format!(
        r#"#!/usr/bin/env python3
# The harness's gh: `gh workflow run`, checked against the target's workflow_dispatch inputs.
import json, sys
a = sys.argv[1:]
if a[:2] == ["run", "list"]:
    # Only the form the workflows use: `--workflow W --event E --limit N --json databaseId --jq '.[].databaseId'`.
    o = dict(zip(a[2::2], a[3::2]))
    if sorted(o) != ["--event", "--jq", "--json", "--limit", "--workflow"] or o["--json"] != "databaseId" or o["--jq"] != ".[].databaseId":
        sys.exit("harness gh: not supported: " + " ".join(a))
    runs = [l.split() for l in open({runs:?}).read().splitlines()] if __import__("os").path.exists({runs:?}) else []
    for rid, wf, event in [r for r in runs if r[1] == o["--workflow"] and r[2] == o["--event"]][: int(o["--limit"])]:
        print(rid)
    sys.exit(0)
if a[:2] == ["run", "download"] and len(a) == 7 and a[3] == "--name" and a[5] == "--dir":
    import os, shutil
    rid, name, to = a[2], a[4], a[6]
    cur = open({runs:?}).read().split()[0] if os.path.exists({runs:?}) else ""
    src = os.path.join({store:?} if rid == cur else os.path.join({past:?}, rid), name)
    if not os.path.isdir(src):
        sys.exit("no artifact matches any of the names or patterns provided")
    shutil.copytree(src, to, dirs_exist_ok=True)
    sys.exit(0)
if a[:2] != ["workflow", "run"] or len(a) < 3:
    sys.exit("harness gh: not supported: " + " ".join(a))
wf, rest, fields = a[2], a[3:], {{}}
i = 0
while i < len(rest):
    if rest[i] in ("-f", "--raw-field", "-F", "--field") and i + 1 < len(rest):
        k, _, v = rest[i + 1].partition("=")
        fields[k] = v
        i += 2
    elif rest[i] in ("--ref", "-r", "--repo", "-R") and i + 1 < len(rest):
        i += 2
    else:
        sys.exit("harness gh: not supported: " + rest[i])
spec = json.load(open({spec:?})).get(wf, "missing")
def fail(msg):
    print("could not create workflow dispatch event: HTTP 422: " + msg, file=sys.stderr)
    sys.exit(1)
if spec == "missing":
    print("could not find any workflows named " + wf, file=sys.stderr)
    sys.exit(1)
if spec is None:
    fail("Workflow does not have 'workflow_dispatch' trigger")
extra = sorted(k for k in fields if k not in spec)
if extra:
    fail("Unexpected inputs provided: " + json.dumps(extra))
for k, d in spec.items():
    if d["required"] and not d["has_default"] and k not in fields:
        fail("Required input '%s' not provided" % k)
    if d["options"] is not None and k in fields and fields[k] not in [str(o) for o in d["options"]]:
        fail("Provided value '%s' for input '%s' not in the list of allowed values" % (fields[k], k))
with open({dispatches:?}, "a") as f:
    f.write(" ".join(a[2:]) + "\n")
"#,
        spec = spec.display().to_string(),
        dispatches = base.join("dispatches").display().to_string(),
        runs = base.join("runs.txt").display().to_string(),
        store = base.join("artifacts").display().to_string(),
        past = base.join("runs").display().to_string(),
    );
    for (name, text) in [("cargo", cargo.as_str()), ("rustup", rustup), ("gh", &gh)] {
        write_exec(&tools.join(name), text);
    }
}

/// A test's own stand-in for a program (e.g. the HIP fixture's `podman build` and `sudo`).
pub fn add(tools: &Path, name: &str, text: &str) {
    write_exec(&tools.join(name), text);
}
