//! The decode probe's files on disk: the bundled `repro-kernels/decode-probe` sources and the
//! tiny model (`core::gguf::tiny_llama`), written into a probe's work directory. The bytes are
//! made in the core; this is the edge that writes them, once, atomically, under names that carry
//! their content hash, so a probe never runs a half-written or stale file.

use crate::core::gguf::tiny_llama::{self, Shape};
use crate::core::gguf::DType;
use crate::core::settings::DecodeSettings;
use sha2::{Digest, Sha256};
use std::path::{Path, PathBuf};

/// The decode probe's sources, embedded: (path relative to the folder they are written to,
/// contents). Laid out as in `repro-kernels/`, so the placement report the replay uses
/// (`setrows-replay/placement.h`, `placement.cmake`) and the way ggml is added (`ggml-source.cmake`)
/// are the same files for both programs.
pub const SOURCES: [(&str, &str); 5] = [
    (
        "decode-probe/CMakeLists.txt",
        include_str!("../../repro-kernels/decode-probe/CMakeLists.txt"),
    ),
    (
        "decode-probe/decode-probe.cpp",
        include_str!("../../repro-kernels/decode-probe/decode-probe.cpp"),
    ),
    (
        "ggml-source.cmake",
        include_str!("../../repro-kernels/ggml-source.cmake"),
    ),
    (
        "setrows-replay/placement.h",
        include_str!("../../repro-kernels/setrows-replay/placement.h"),
    ),
    (
        "setrows-replay/placement.cmake",
        include_str!("../../repro-kernels/setrows-replay/placement.cmake"),
    ),
];

/// The CMake source folder inside the written sources.
const CMAKE_ROOT: &str = "decode-probe";

/// The model every decode probe runs unless told otherwise.
pub const DEFAULT_SEED: u64 = 42;
pub const DEFAULT_DTYPE: DType = DType::F16;

/// The CMake target and program name (the result names it, so core holds the name).
pub const TARGET: &str = crate::core::result::DECODE_PROGRAM;

/// Whether a tree (given a test for "this relative path exists") is llama.cpp, the only kind of
/// tree the decode probe builds against (`include/llama.h` beside a top-level CMakeLists.txt).
pub fn is_llama_tree(has: impl Fn(&str) -> bool) -> bool {
    has("include/llama.h") && has("CMakeLists.txt")
}

/// What one probe needs under its work directory: the sources' folder and the model's file,
/// both named by their content.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DecodeInputs {
    pub sources_dir: String,
    pub model: Model,
}

/// Writes the sources and the model of `settings` under `work` (once each).
pub fn prepare(work: &Path, settings: &DecodeSettings) -> std::io::Result<DecodeInputs> {
    let (dtype, shape) = settings.model();
    Ok(DecodeInputs {
        sources_dir: materialize_sources(work)?,
        model: write_model(work, DEFAULT_SEED, dtype, shape)?,
    })
}

/// The decode probe's comparison with another tree's logits (`--compare-good`): the one
/// reference that does not share a fault every path of the probed tree has (a wrong mask, a
/// lost hyperparameter), since another tree's code computed it.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub enum GoodLogits {
    /// No comparison (every probe but `--compare-good`'s).
    #[default]
    Off,
    /// Write the probe stream's logits to `$WORK/RECORDED` (the `--good` commit's probe).
    Record,
    /// Compare with a recorded file: its path here and its hex sha256 (the identity: probes
    /// compared with other logits are other tests).
    Compare {
        file: std::path::PathBuf,
        sha256: String,
    },
}

impl GoodLogits {
    /// Where a recording probe's logits are, under its work directory.
    pub const RECORDED: &'static str = "good-logits.bin";

    /// The file name a compared-with file is copied to under a probe's work directory.
    pub fn compared_name(sha256: &str) -> String {
        format!("good-logits-{}.bin", &sha256[..16])
    }
}

/// Copies the logits a `--compare-good` probe compares with under `work`, under the name its
/// run line gives (`GoodLogits::compared_name`): the work directory is what a container sees.
pub fn place_good_logits(work: &Path, good: &GoodLogits) -> std::io::Result<()> {
    if let GoodLogits::Compare { file, sha256 } = good {
        let bytes = std::fs::read(file)?;
        let name = GoodLogits::compared_name(sha256);
        write_once(work, &name, &bytes)?;
    }
    Ok(())
}

/// The default model's bytes and their hex sha256, made once per process.
fn default_model() -> &'static (Vec<u8>, String) {
    static MODEL: std::sync::OnceLock<(Vec<u8>, String)> = std::sync::OnceLock::new();
    MODEL.get_or_init(|| {
        let bytes =
            tiny_llama::tiny_llama(Shape::default(), DEFAULT_SEED, DEFAULT_DTYPE).to_bytes();
        let sha = hex::encode(Sha256::digest(&bytes));
        (bytes, sha)
    })
}

/// The model's bytes and hex sha256 (the default's made once per process).
fn model_bytes(seed: u64, dtype: DType, shape: Shape) -> (std::borrow::Cow<'static, [u8]>, String) {
    if (seed, dtype, shape) == (DEFAULT_SEED, DEFAULT_DTYPE, Shape::default()) {
        let (b, s) = default_model();
        return (std::borrow::Cow::Borrowed(b), s.clone());
    }
    let b = tiny_llama::tiny_llama(shape, seed, dtype).to_bytes();
    let s = hex::encode(Sha256::digest(&b));
    (std::borrow::Cow::Owned(b), s)
}

/// The file name `prepare` writes the model of `settings` under.
pub fn model_file_name(settings: &DecodeSettings) -> String {
    let (dtype, shape) = settings.model();
    let (_, sha) = model_bytes(DEFAULT_SEED, dtype, shape);
    model_name(DEFAULT_SEED, dtype, shape, &sha)
}

fn model_name(seed: u64, dtype: DType, shape: Shape, sha256: &str) -> String {
    let base = tiny_llama::file_name(seed, dtype, shape);
    format!("{}-{}.gguf", base.trim_end_matches(".gguf"), &sha256[..12])
}

/// The identity of what the probe builds and runs by default: its sources and the default model
/// (the model's bytes are a function of this module's code, so the hash of one model stands
/// for the generator). Every stored decode result was keyed by it, and the build tree is named
/// by it: another model needs no other build.
pub fn identity() -> String {
    format!(
        "decode-sources={} model={}",
        &sources_hash()[..16],
        &default_model().1[..16]
    )
}

/// The model `settings` name when it is not the default one (a run's identity adds it; the
/// default's is in `identity` already).
pub fn model_identity(settings: &DecodeSettings) -> Option<String> {
    let (dtype, shape) = settings.model();
    let (_, sha) = model_bytes(DEFAULT_SEED, dtype, shape);
    (sha != default_model().1).then(|| format!("model={}", &sha[..16]))
}

/// Hex sha256 over the embedded sources, identical on every machine.
pub fn sources_hash() -> String {
    crate::probe::bundle::hash_of(&SOURCES)
}

/// Writes `bytes` to `dir/name` unless a complete copy is there: through a temp file and a
/// rename, so a killed run leaves either nothing or the whole file.
fn write_once(dir: &Path, name: &str, bytes: &[u8]) -> std::io::Result<PathBuf> {
    let target = dir.join(name);
    if std::fs::metadata(&target).is_ok_and(|m| m.len() == bytes.len() as u64) {
        return Ok(target);
    }
    std::fs::create_dir_all(dir)?;
    let tmp = tempfile::NamedTempFile::new_in(dir)?;
    std::fs::write(tmp.path(), bytes)?;
    tmp.persist(&target).map_err(|e| e.error)?;
    Ok(target)
}

/// Writes the sources under `dir/setrows-decode-<hash12>/` (`probe::bundle::materialize`) and
/// returns the CMake source folder in it, relative to `dir`.
pub fn materialize_sources(dir: &Path) -> std::io::Result<String> {
    let name = crate::probe::bundle::materialize(dir, "setrows-decode", &SOURCES)?;
    Ok(format!("{name}/{CMAKE_ROOT}"))
}

/// A written model: where it is and what it is.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Model {
    /// File name under the directory it was written to (its content hash is in it).
    pub file_name: String,
    pub path: PathBuf,
    pub bytes: u64,
    /// Hex sha256 of the file: part of a probe's identity.
    pub sha256: String,
}

/// Makes the model's bytes (pure) and writes them under `dir` (once per content).
pub fn write_model(dir: &Path, seed: u64, dtype: DType, shape: Shape) -> std::io::Result<Model> {
    let (bytes, sha256) = model_bytes(seed, dtype, shape);
    let file_name = model_name(seed, dtype, shape, &sha256);
    let path = write_once(dir, &file_name, &bytes)?;
    Ok(Model {
        file_name,
        path,
        bytes: bytes.len() as u64,
        sha256,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_model_is_written_once_under_its_content_hash() {
        let d = tempfile::tempdir().unwrap();
        let a = write_model(d.path(), 3, DType::F16, Shape::default()).unwrap();
        let b = write_model(d.path(), 3, DType::F16, Shape::default()).unwrap();
        assert_eq!(a, b);
        assert_eq!(std::fs::read(&a.path).unwrap().len() as u64, a.bytes);
        assert!(a.file_name.contains(&a.sha256[..12]), "{}", a.file_name);
        let c = write_model(d.path(), 3, DType::F32, Shape::default()).unwrap();
        assert_ne!(a.path, c.path);
        assert!(c.bytes > a.bytes);
        let q = write_model(d.path(), 3, DType::Q4_0, Shape::default()).unwrap();
        assert!(q.bytes < a.bytes / 3, "q4_0 is 4.5 bits a weight");
        let h64 = write_model(d.path(), 3, DType::F16, Shape::with_heads(64, 2).unwrap()).unwrap();
        assert!(h64.file_name.contains("-h64-g2-"), "{}", h64.file_name);
    }

    /// The default settings keep the default model's name and identity (the store keys of every
    /// decode result written before the settings existed); any model setting changes both.
    #[test]
    fn the_default_settings_name_the_default_model() {
        let default = DecodeSettings::default();
        assert_eq!(
            model_file_name(&default),
            model_name(
                DEFAULT_SEED,
                DEFAULT_DTYPE,
                Shape::default(),
                &default_model().1
            )
        );
        assert!(model_file_name(&default).starts_with("tiny-llama-s42-f16-"));
        let mut q = DecodeSettings::default();
        let s = crate::core::settings::by_axis("weight_type").unwrap();
        q.set(s, "q4_0".into());
        assert_eq!(model_identity(&default), None);
        assert!(model_identity(&q).is_some());
        assert!(model_file_name(&q).starts_with("tiny-llama-s42-q4_0-"));
    }

    #[test]
    fn the_sources_are_written_where_their_hash_says() {
        let d = tempfile::tempdir().unwrap();
        let root = materialize_sources(d.path()).unwrap();
        let name = root
            .strip_suffix("/decode-probe")
            .expect("the CMake folder");
        assert!(d.path().join(&root).join("CMakeLists.txt").is_file());
        for (path, text) in SOURCES {
            assert_eq!(
                std::fs::read_to_string(d.path().join(name).join(path)).unwrap(),
                text
            );
        }
    }
}
