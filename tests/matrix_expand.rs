//! matrix.toml parsing and expansion: GitHub Actions include/exclude semantics, stable ids,
//! and errors that name file, line, column and key.

use setrows_bisect::core::build::Backend;
use setrows_bisect::core::matrix::{self, Value};

fn labels(text: &str) -> Vec<String> {
    let m = matrix::parse("m.toml", text).unwrap_or_else(|e| panic!("{e}"));
    m.configs.iter().map(|c| c.label()).collect()
}

/// The example from GitHub's documentation ("Expanding or adding matrix configurations"),
/// transposed onto our axes: fruit -> rocm, animal -> gfx, color -> launch, shape -> params.
#[test]
fn include_follows_github_actions_semantics() {
    let text = r#"
[launch.green]
[launch.pink]
[params.circle]
[matrix]
rocm = ["apple", "pear"]
gfx = ["cat", "dog"]
include = [
  { launch = "green" },
  { launch = "pink", gfx = "cat" },
  { rocm = "apple", params = "circle" },
  { rocm = "banana" },
  { rocm = "banana", gfx = "cat" },
]
"#;
    assert_eq!(
        labels(text),
        [
            "rocm=apple gfx=cat launch=pink params=circle",
            "rocm=apple gfx=dog launch=green params=circle",
            "rocm=pear gfx=cat launch=pink",
            "rocm=pear gfx=dog launch=green",
            "rocm=banana",
            "rocm=banana gfx=cat",
        ]
    );
}

#[test]
fn exclude_matches_on_all_its_keys_and_include_can_add_back() {
    let text = r#"
[launch.a]
[launch.b]
[matrix]
rocm = ["6.4.1", "7.0.2"]
wave_size = [32, 64]
launch = ["a", "b"]
exclude = [{ rocm = "6.4.1", wave_size = 64 }]
include = [{ rocm = "6.4.1", wave_size = 64, launch = "b" }]
"#;
    let got = labels(text);
    assert_eq!(got.len(), 6 + 1, "{got:#?}");
    assert_eq!(got[0], "rocm=6.4.1 wave_size=32 launch=a");
    assert!(!got[..6].iter().any(|l| l.contains("6.4.1 wave_size=64")));
    assert_eq!(got[6], "rocm=6.4.1 wave_size=64 launch=b");
}

#[test]
fn ids_are_stable_and_depend_only_on_a_configs_own_values() {
    let a = matrix::parse("a.toml", "[matrix]\nrocm = [\"6.4.1\", \"7.0.2\"]\n").unwrap();
    let b = matrix::parse(
        "b.toml",
        "[matrix]\nrocm = [\"7.0.2\", \"7.1.1\", \"6.4.1\"]\n",
    )
    .unwrap();
    let id = |m: &matrix::Matrix, v: &str| {
        m.configs
            .iter()
            .find(|c| c.values.get("rocm") == Some(&Value::Str(v.into())))
            .map(|c| c.id.clone())
            .unwrap()
    };
    assert_eq!(id(&a, "6.4.1"), id(&b, "6.4.1"));
    assert_eq!(id(&a, "7.0.2"), id(&b, "7.0.2"));
    assert_ne!(id(&a, "6.4.1"), id(&a, "7.0.2"));
    assert_eq!(id(&a, "6.4.1").len(), 8);
    // Order follows the file: the ladder bisect-config walks.
    assert_eq!(
        b.axis_values["rocm"],
        ["7.0.2", "7.1.1", "6.4.1"].map(|s| Value::Str(s.into()))
    );
}

#[test]
fn configs_resolve_images_recipes_and_presets() {
    let text = r#"
[images]
hip = "reg/setrows-rocm:{rocm}"
cpu = "reg/cpu"
[launch.ser]
hip_launch_blocking = true
amd_serialize_kernel = 3
[params.p]
args = ["--steps", "10"]
[matrix]
backend = ["hip"]
rocm = ["6.4.1"]
gfx = ["gfx1151"]
wave_size = [32]
hip_no_vmm = [true]
launch = ["ser"]
params = ["p"]
include = [{ backend = "cpu" }]
"#;
    let m = matrix::parse("m.toml", text).unwrap();
    let hip = &m.configs[0];
    assert_eq!(hip.backend, Backend::Hip);
    assert_eq!(hip.image.as_deref(), Some("reg/setrows-rocm:6.4.1"));
    assert_eq!(hip.recipe.gpu_target.as_deref(), Some("gfx1151"));
    assert_eq!(
        (hip.recipe.wave_size, hip.recipe.hip_no_vmm),
        (Some(32), Some(true))
    );
    assert_eq!(hip.launch.amd_serialize_kernel, Some(3));
    assert_eq!(hip.repro_args, ["--steps", "10"]);
    let cpu = &m.configs[1];
    assert_eq!(
        (cpu.backend, cpu.image.as_deref()),
        (Backend::Cpu, Some("reg/cpu"))
    );
    assert_eq!(cpu.recipe.wave_size, None);
    // An axis value swapped in re-resolves the image and the id.
    let other = m
        .with_value(hip, "rocm", &Value::Str("7.0.2".into()))
        .unwrap();
    assert_eq!(other.image.as_deref(), Some("reg/setrows-rocm:7.0.2"));
    assert_ne!(other.id, hip.id);
}

fn error(text: &str) -> String {
    matrix::parse("conf/m.toml", text).unwrap_err().to_string()
}

#[test]
fn errors_name_file_line_column_and_key() {
    let e = error("[matrix]\nrocm = [\"6.4.1\"]\nwavesize = [32]\n");
    assert!(
        e.starts_with("conf/m.toml:3:1: key `wavesize`: unknown field `wavesize`"),
        "{e}"
    );
    let e = error("[matrix]\nrocm = [\"6.4.1\"]\nwave_size = [32, 48]\n");
    assert!(
        e.starts_with("conf/m.toml:3:18: key `wave_size`: wave size must be 32 or 64"),
        "{e}"
    );
    let e = error("[matrix]\nrocm = [\"6.4.1\"]\nlaunch = [\"fast\"]\n");
    assert!(
        e.starts_with("conf/m.toml:3:11: key `launch`: no [launch.fast] table"),
        "{e}"
    );
    let e = error("[launch.x]\nhip_launch_blocking = \"yes\"\n");
    assert!(
        e.starts_with("conf/m.toml:2:23: key `hip_launch_blocking`:"),
        "{e}"
    );
    let e = error("[launch.x]\nhip_blocking = true\n");
    assert!(
        e.starts_with("conf/m.toml:2:1: key `hip_blocking`: unknown field"),
        "{e}"
    );
    let e = error("[matrix]\nrocm = [\"6.4.1\"]\nexclude = [{ gfx = \"gfx1151\" }]\n");
    assert!(
        e.starts_with("conf/m.toml:3:20: key `matrix.exclude[0].gfx`:"),
        "{e}"
    );
    let e = error("[images]\nhip = \"r/rocm:{rocm}\"\n[matrix]\ngfx = [\"gfx1151\"]\n");
    assert!(
        e.contains("key `images.hip`") && e.contains("needs `rocm`"),
        "{e}"
    );
    let e = error("[matrix]\nbackend = [\"metal\"]\n");
    assert!(
        e.starts_with("conf/m.toml:2:12: key `backend`: unknown backend `metal`"),
        "{e}"
    );
    // The probe kind is typed: an unknown one is refused where it is written, naming the kinds.
    let e = error("[probe]\nkind = \"decoed\"\n[matrix]\nbackend = [\"cpu\"]\n");
    assert!(
        e.starts_with("conf/m.toml:2:8: key `kind`: unknown variant `decoed`")
            && e.contains("decoed")
            && e.contains("replay")
            && e.contains("decode")
            && e.contains("script"),
        "{e}"
    );
    let e = error("[matrix\nbackend = [\"hip\"]\n");
    assert_eq!(e.lines().count(), 1, "one line: {e}");
    let e = error("revisions = [\"a\"\n");
    assert!(
        e.starts_with("conf/m.toml:2:1: key `revisions`: invalid array"),
        "syntax errors have positions too: {e}"
    );
}

#[test]
fn the_shipped_matrix_parses() {
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("matrix.toml");
    let m = setrows_bisect::cli::matrix::read_matrix(&path).unwrap_or_else(|e| panic!("{e}"));
    assert!(m.configs.len() > 10);
    assert!(m.configs.iter().any(|c| c.backend == Backend::Cuda));
    assert!(m.configs.iter().all(|c| c.image.is_some()));
    let ids: std::collections::HashSet<_> = m.configs.iter().map(|c| &c.id).collect();
    assert_eq!(ids.len(), m.configs.len());
}

fn arg(args: &[String], flag: &str) -> Option<i64> {
    let i = args.iter().position(|a| a == flag)?;
    args.get(i + 1)?.parse().ok()
}

/// matrix.toml says what is true: ROCm tags that are published (and that containers/README.md
/// builds), HIP graphs both ways, and a high-offset preset that really writes past 2^31 elements
/// within a 128 GB unified-memory APU.
#[test]
fn the_shipped_matrix_says_what_is_true() {
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR"));
    let m = setrows_bisect::cli::matrix::read_matrix(&root.join("matrix.toml"))
        .unwrap_or_else(|e| panic!("{e}"));
    // rocm/dev-ubuntu-24.04:<v>-complete tags that exist (7.1.0-complete was never published)
    const PUBLISHED: [&str; 5] = ["6.4.1", "6.4.3", "6.4.4", "7.0.2", "7.1.1"];
    let readme = std::fs::read_to_string(root.join("containers/README.md")).unwrap();
    let hip: Vec<_> = m
        .configs
        .iter()
        .filter(|c| c.backend == Backend::Hip)
        .collect();
    // <version>-<suite>: Debian's own ROCm, built by scripts/rocm-image.sh for exactly these.
    let debian = std::fs::read_to_string(root.join("scripts/rocm-image.sh")).unwrap();
    for c in &hip {
        let v = c.values["rocm"].to_string();
        if let Some((version, suite)) = v.split_once('-') {
            assert!(
                debian.contains(&format!("  {suite}) rocm={version} ")),
                "scripts/rocm-image.sh does not build rocm {v}"
            );
            assert!(
                readme.contains(&format!("localhost/setrows-rocm:{v} ")),
                "containers/README.md does not name {v}"
            );
        } else {
            assert!(
                PUBLISHED.contains(&v.as_str()),
                "rocm {v} is not a published tag"
            );
            assert!(
                readme.contains(&format!(" {v} ")) || readme.contains(&format!(" {v};")),
                "containers/README.md does not build rocm {v}"
            );
        }
        assert!(c.image.as_deref().is_some_and(|i| i.ends_with(&v)));
    }
    assert!(!readme.contains("7.1.0;"), "7.1.0-complete is not a tag");
    for g in [false, true] {
        assert!(
            hip.iter().any(|c| c.recipe.graphs == Some(g)),
            "HIP graphs={g} is in the matrix"
        );
    }
    let high = m
        .configs
        .iter()
        .find(|c| {
            c.values
                .get("params")
                .is_some_and(|p| p.to_string() == "high-offset")
        })
        .expect("a high-offset configuration");
    let a = &high.repro_args;
    let (rows, width, start, steps) = (
        arg(a, "--ring-rows").unwrap(),
        arg(a, "--width").unwrap_or(128),
        arg(a, "--start-row").unwrap(),
        arg(a, "--steps").unwrap(),
    );
    assert_eq!(arg(a, "--buffers"), Some(1));
    // raw_kv's row = (start + step) % rows; its destination offset is row * width elements
    let top_row = (0..steps).map(|s| (start + s) % rows).max().unwrap();
    assert!(top_row * width > 1i64 << 31, "offsets stay below 2^31");
    assert!(
        (0..steps).any(|s| (start + s) % rows == 0),
        "the ring wraps within the run"
    );
    // f32 ring on the device + whole-ring get_rows + host model (2x) + initial + read-back
    let bytes = rows * width * 4 * 6;
    assert!(
        bytes < 64_000_000_000,
        "{bytes} B does not fit a 128 GB APU"
    );
}

#[test]
fn a_non_utf8_byte_is_pointed_at() {
    let d = tempfile::tempdir().unwrap();
    let p = d.path().join("m.toml");
    std::fs::write(
        &p,
        b"revisions = [\"master\"]\n[matrix]\nbackend = [\"cp\xffu\"]\n",
    )
    .unwrap();
    let e = setrows_bisect::cli::matrix::read_matrix(&p)
        .unwrap_err()
        .to_string();
    assert!(e.contains("m.toml:3:15:") && e.contains("UTF-8"), "{e}");
}

/// The matrix's axes (a macro of identifiers) end with exactly the decode settings' table, so
/// every setting is an axis and no axis is a setting the table does not know.
#[test]
fn the_decode_settings_are_the_last_axes() {
    use setrows_bisect::core::settings::SETTINGS;
    let axes = matrix::AXES;
    let tail = &axes[axes.len() - SETTINGS.len()..];
    let table: Vec<&str> = SETTINGS.iter().map(|s| s.axis).collect();
    assert_eq!(tail, table.as_slice());
}
