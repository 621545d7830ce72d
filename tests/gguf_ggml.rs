//! The tiny model's quantized weights and its GGUF file, checked by the real ggml (the libggml
//! wheel of scripts/setup.d/20-ggml.sh): a small C program (gguf_ggml/check.c) compiled against
//! it quantizes the same f32 values with `ggml_quantize_chunk` and must write our q8_0 and q4_0
//! bytes exactly, dequantizes ours with ggml's `to_float` to our dequantizer's values, and loads
//! whole model files of every weight type and head shape with ggml's own GGUF reader.

#[path = "tools/mod.rs"]
mod tools;

use setrows_bisect::core::gguf::quant;
use setrows_bisect::core::gguf::tiny_llama::{tiny_llama, Shape};
use setrows_bisect::core::gguf::{f16_to_f32, DType};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::OnceLock;

/// `<prefix>/lib64/cmake/ggml` of the wheel.
fn ggml_dir() -> Option<PathBuf> {
    tools::require(
        std::env::var_os("SETROWS_GGML_DIR").map(PathBuf::from),
        "libggml-python (SETROWS_GGML_DIR)",
        "scripts/setup.d/20-ggml.sh",
    )
}

/// check.c built once against the wheel's headers and ggml-base.
fn checker() -> Option<&'static Path> {
    static BIN: OnceLock<PathBuf> = OnceLock::new();
    let dir = ggml_dir()?;
    Some(BIN.get_or_init(|| {
        let lib = dir.ancestors().nth(2).expect("<prefix>/lib64");
        let include = dir.ancestors().nth(3).expect("<prefix>").join("include");
        let out = Path::new(env!("CARGO_TARGET_TMPDIR")).join("gguf-ggml-check");
        let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/gguf_ggml/check.c");
        let st = Command::new("cc")
            .arg("-O1")
            .arg(&src)
            .arg("-I")
            .arg(&include)
            .arg("-L")
            .arg(lib)
            .arg(format!("-Wl,-rpath,{}", lib.display()))
            .args(["-lggml-base", "-lm", "-o"])
            .arg(&out)
            .status()
            .expect("run cc");
        assert!(st.success(), "cc check.c against {}", include.display());
        out
    }))
}

fn tmp(name: &str) -> PathBuf {
    let d = Path::new(env!("CARGO_TARGET_TMPDIR")).join("gguf-ggml");
    std::fs::create_dir_all(&d).unwrap();
    d.join(name)
}

fn f32s(bytes: &[u8]) -> Vec<f32> {
    bytes
        .chunks(4)
        .map(|c| f32::from_le_bytes(c.try_into().unwrap()))
        .collect()
}

fn check(bin: &Path, args: &[&Path]) -> String {
    let out = Command::new(bin)
        .args(args)
        .env("GGML_NO_BACKTRACE", "1")
        .output()
        .expect("run check");
    let text = String::from_utf8_lossy(&out.stderr).into_owned();
    assert!(out.status.success(), "{args:?}: {text}");
    text
}

/// Values that probe the formats' corners: an all-zero block, a block whose largest magnitude
/// is negative (q4_0's scale takes its sign), exact halves of the step (rounding ties), tiny
/// and large magnitudes, and blocks of one repeated value.
fn corner_values() -> Vec<f32> {
    let mut v = vec![0.0f32; 32];
    v.extend((0..32).map(|i| if i == 7 { -1.0 } else { i as f32 / 40.0 }));
    v.extend((0..32).map(|i| (i as f32 - 15.5) / 2.0));
    v.extend((0..32).map(|i| 127.0 / 2.0 * if i % 2 == 0 { 1.0 } else { -1.0 } + i as f32 * 0.5));
    v.extend((0..32).map(|i| 1e-6 * (i as f32 - 16.0)));
    v.extend((0..32).map(|i| 3e4 * ((i * 37 % 32) as f32 - 16.0) / 16.0));
    v.extend([0.375f32; 32]);
    v.extend([-2.5f32; 32]);
    v
}

#[test]
fn ggml_quantizes_the_models_weights_to_our_bytes_and_reads_ours_back_as_we_do() {
    let Some(bin) = checker() else { return };
    // the f32 model's weights are the values the quantized models quantize
    let shape = Shape::with_heads(64, 4).unwrap();
    let f32_model = tiny_llama(shape, 42, DType::F32);
    let mut values: Vec<f32> = f32_model
        .tensors
        .iter()
        .filter(|t| t.dims.len() == 2)
        .flat_map(|t| f32s(&t.data))
        .collect();
    values.extend(corner_values());
    let input = tmp("values.f32");
    std::fs::write(
        &input,
        values
            .iter()
            .flat_map(|v| v.to_le_bytes())
            .collect::<Vec<_>>(),
    )
    .unwrap();
    for (dtype, ours, deq) in [
        (
            DType::Q8_0,
            quant::quantize_q8_0(&values),
            quant::dequantize_q8_0 as fn(&[u8]) -> Vec<f32>,
        ),
        (
            DType::Q4_0,
            quant::quantize_q4_0(&values),
            quant::dequantize_q4_0,
        ),
    ] {
        let (ours_path, theirs) = (tmp("ours.bin"), tmp("deq.f32"));
        std::fs::write(&ours_path, &ours).unwrap();
        let ty = PathBuf::from(dtype.ggml_code().to_string());
        check(bin, &[Path::new("quant"), &ty, &input, &ours_path, &theirs]);
        let ggml_values = f32s(&std::fs::read(&theirs).unwrap());
        let mine = deq(&ours);
        assert_eq!(ggml_values.len(), values.len());
        for (i, (a, b)) in ggml_values.iter().zip(&mine).enumerate() {
            assert_eq!(
                a.to_bits(),
                b.to_bits(),
                "{dtype:?} value {i}: ggml {a}, ours {b}"
            );
        }
        // and the block formats mean what the doc says: within half a step (q8_0; q4_0 a step
        // where its largest positive value clamps) of the value, plus the scale's rounding to
        // f16 times the largest quant
        let block = match dtype {
            DType::Q8_0 => quant::Q8_0_BLOCK,
            _ => quant::Q4_0_BLOCK,
        };
        for (b, (x, y)) in ours
            .chunks(block)
            .zip(values.chunks(32).zip(mine.chunks(32)))
        {
            let d = f16_to_f32(u16::from_le_bytes([b[0], b[1]])).abs();
            let amax = x.iter().fold(0f32, |m, v| m.max(v.abs()));
            let (exact, step, qmax) = match dtype {
                DType::Q8_0 => (amax / 127.0, 0.5, 128.0),
                _ => (amax / 8.0, 1.0, 8.0),
            };
            let bound = step * exact + qmax * (d - exact).abs() + 1e-30;
            for (x, y) in x.iter().zip(y) {
                assert!(
                    (x - y).abs() <= bound,
                    "{dtype:?}: {x} read back as {y} (d {d})"
                );
            }
        }
    }
}

#[test]
fn ggml_loads_every_weight_type_and_head_shape_with_our_values() {
    let Some(bin) = checker() else { return };
    for (dtype, head_dim, gqa, n_head_kv) in [
        (DType::F32, 128, 1, None),
        (DType::F16, 256, 2, None),
        (DType::Q8_0, 128, 8, None),
        (DType::Q4_0, 64, 4, None),
        // a ratio that is not a power of 2 over several K/V heads (--gqa 3 --n-head-kv 2)
        (DType::F16, 128, 3, Some(2)),
    ] {
        let shape = Shape::with_kv_heads(head_dim, gqa, n_head_kv).unwrap();
        let g = tiny_llama(shape, 7, dtype);
        let path = tmp(&format!("model-{}.gguf", dtype.name()));
        std::fs::write(&path, g.to_bytes()).unwrap();
        let (infos, vals) = (tmp("infos.txt"), tmp("vals.f32"));
        check(bin, &[Path::new("gguf"), &path, &infos, &vals]);
        let infos = std::fs::read_to_string(&infos).unwrap();
        let mut ggml_values = f32s(&std::fs::read(&vals).unwrap()).into_iter();
        assert_eq!(infos.lines().count(), g.tensors.len());
        for (line, t) in infos.lines().zip(&g.tensors) {
            let f: Vec<&str> = line.split(' ').collect();
            assert_eq!(f[0], t.name);
            // norms stay f32, every 2-D weight is the weight type
            let want = if t.dims.len() == 1 { DType::F32 } else { dtype };
            assert_eq!(f[1], want.name(), "{line}");
            assert_eq!(f[2], t.dims[0].to_string(), "{line}");
            assert_eq!(f[4], t.data.len().to_string(), "{line}");
            let n: u64 = t.dims.iter().product();
            let mine: Vec<f32> = match t.dtype {
                DType::F32 => f32s(&t.data),
                DType::F16 => t
                    .data
                    .chunks(2)
                    .map(|h| f16_to_f32(u16::from_le_bytes([h[0], h[1]])))
                    .collect(),
                DType::Q8_0 => quant::dequantize_q8_0(&t.data),
                DType::Q4_0 => quant::dequantize_q4_0(&t.data),
            };
            assert_eq!(mine.len() as u64, n);
            for (i, m) in mine.iter().enumerate() {
                let theirs = ggml_values.next().expect("ggml's values");
                assert_eq!(theirs.to_bits(), m.to_bits(), "{} [{i}]", t.name);
            }
        }
        // the attention shape ggml reads is the one asked for
        let q = g
            .tensors
            .iter()
            .find(|t| t.name == "blk.0.attn_q.weight")
            .unwrap();
        let k = g
            .tensors
            .iter()
            .find(|t| t.name == "blk.0.attn_k.weight")
            .unwrap();
        assert_eq!(q.dims[1] / k.dims[1], u64::from(gqa));
        assert_eq!(q.dims[0], u64::from(head_dim * shape.n_head));
    }
}
