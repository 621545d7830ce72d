use super::tiny_llama::{file_name, tiny_llama, Shape};
use super::*;
use proptest::prelude::*;

/// A reader of just enough GGUF to check the writer against the layout in gguf.h.
struct Reader<'a> {
    b: &'a [u8],
    at: usize,
}

impl Reader<'_> {
    fn take(&mut self, n: usize) -> &[u8] {
        let s = &self.b[self.at..self.at + n];
        self.at += n;
        s
    }
    fn u32(&mut self) -> u32 {
        u32::from_le_bytes(self.take(4).try_into().unwrap())
    }
    fn u64(&mut self) -> u64 {
        u64::from_le_bytes(self.take(8).try_into().unwrap())
    }
    fn string(&mut self) -> String {
        let n = self.u64() as usize;
        String::from_utf8(self.take(n).to_vec()).unwrap()
    }
}

/// A tensor info as written: (name, dims, ggml type, offset).
type Info = (String, Vec<u64>, u32, u64);

/// (kv keys, tensor infos, data start)
fn read(b: &[u8]) -> (Vec<String>, Vec<Info>, usize) {
    let mut r = Reader { b, at: 0 };
    assert_eq!(r.take(4), b"GGUF");
    assert_eq!(r.u32(), 3);
    let n_tensors = r.u64();
    let n_kv = r.u64();
    let mut keys = vec![];
    for _ in 0..n_kv {
        keys.push(r.string());
        match r.u32() {
            4 | 6 => {
                r.u32();
            }
            7 => {
                r.take(1);
            }
            8 => {
                r.string();
            }
            t => panic!("unexpected type {t}"),
        }
    }
    let mut infos = vec![];
    for _ in 0..n_tensors {
        let name = r.string();
        let nd = r.u32();
        let dims = (0..nd).map(|_| r.u64()).collect();
        let ty = r.u32();
        let off = r.u64();
        infos.push((name, dims, ty, off));
    }
    (keys, infos, r.at.div_ceil(ALIGNMENT) * ALIGNMENT)
}

#[test]
fn the_model_reads_back_as_gguf_3_with_aligned_tensors_and_its_exact_size() {
    for dtype in [DType::F32, DType::F16] {
        let g = tiny_llama(Shape::default(), 42, dtype);
        let bytes = g.to_bytes();
        let (keys, infos, data_start) = read(&bytes);
        assert_eq!(keys[0], "general.architecture");
        assert!(keys.iter().any(|k| k == "tokenizer.ggml.model"));
        assert_eq!(infos.len(), 3 + 9 * 2);
        let mut end = 0;
        for ((name, dims, ty, off), t) in infos.iter().zip(&g.tensors) {
            assert_eq!(name, &t.name);
            assert_eq!(off % ALIGNMENT as u64, 0, "{name}");
            let elem = if *ty == 0 { 4 } else { 2 };
            let n: u64 = dims.iter().product();
            assert_eq!(n * elem, t.data.len() as u64, "{name}");
            let at = data_start + *off as usize;
            assert_eq!(&bytes[at..at + t.data.len()], &t.data[..], "{name}");
            end = at + t.data.len();
        }
        assert_eq!(bytes.len(), end.div_ceil(ALIGNMENT) * ALIGNMENT);
        // "a few MB": 2 layers of 256x256 attention and 256x384 FFN plus embeddings
        let mb = bytes.len() as f64 / 1e6;
        assert!((1.0..6.0).contains(&mb), "{dtype:?}: {mb} MB");
    }
}

#[test]
fn the_f16_variant_holds_exactly_the_f32_weights() {
    let a = tiny_llama(Shape::default(), 7, DType::F32);
    let b = tiny_llama(Shape::default(), 7, DType::F16);
    for (x, y) in a.tensors.iter().zip(&b.tensors) {
        if y.dtype == DType::F32 {
            assert_eq!(x.data, y.data);
            continue;
        }
        for (f, h) in x.data.chunks(4).zip(y.data.chunks(2)) {
            let f = f32::from_le_bytes(f.try_into().unwrap());
            let h = f16_to_f32(u16::from_le_bytes(h.try_into().unwrap()));
            assert_eq!(f, h, "{}", x.name);
        }
    }
}

#[test]
fn the_seed_decides_the_weights_and_nothing_else_does() {
    let a = tiny_llama(Shape::default(), 1, DType::F16).to_bytes();
    assert_eq!(a, tiny_llama(Shape::default(), 1, DType::F16).to_bytes());
    assert_ne!(a, tiny_llama(Shape::default(), 2, DType::F16).to_bytes());
}

#[test]
fn f16_conversion_matches_known_halves() {
    for (x, h) in [
        (0.0f32, 0x0000u16),
        (-0.0, 0x8000),
        (1.0, 0x3c00),
        (-2.0, 0xc000),
        (65504.0, 0x7bff),
        (65520.0, 0x7c00), // rounds up to infinity
        (1.0 / 1024.0, 0x1400),
        (5.960_464_5e-8, 0x0001),     // smallest subnormal
        (1.0 + 1.0 / 2048.0, 0x3c00), // tie to even
        (1.0 + 3.0 / 2048.0, 0x3c02), // tie to even, upward
    ] {
        assert_eq!(f32_to_f16(x), h, "{x}");
    }
}

proptest! {
    /// Every half converts to f32 and back unchanged (finite values).
    #[test]
    fn f16_round_trips(h in 0u16..0x7c00, neg in any::<bool>()) {
        let h = h | if neg { 0x8000 } else { 0 };
        prop_assert_eq!(f32_to_f16(f16_to_f32(h)), h);
    }
}

#[test]
fn head_shapes_keep_the_default_and_give_each_asked_head_size_and_ratio() {
    assert_eq!(Shape::with_heads(128, 1), Some(Shape::default()));
    for (h, g, n_head) in [
        (64, 1, 4),
        (64, 8, 8),
        (128, 4, 4),
        (256, 1, 2),
        (256, 8, 8),
    ] {
        let s = Shape::with_heads(h, g).unwrap();
        assert_eq!((s.head_dim(), s.gqa(), s.n_head), (h, g, n_head), "{h} {g}");
        assert_eq!(s.n_embd % 32, 0);
    }
    assert_eq!(Shape::with_heads(96, 1), None);
    assert_eq!(Shape::with_heads(128, 9), None);
}

/// The heads every head size and power-of-2 ratio had before K/V heads could be asked for
/// (n_head = max(256 / head_dim, 2, gqa)): `auto` keeps each of them, so their files keep
/// their names and bytes (and the stored results keyed by them stay valid).
#[test]
fn auto_k_v_heads_keep_the_shapes_of_the_power_of_2_ratios() {
    for h in HEAD_DIMS_OF_BEFORE {
        for g in [1, 2, 4, 8] {
            let s = Shape::with_heads(h, g).unwrap();
            let n_head = (256 / h).max(2).max(g);
            assert_eq!((s.n_head, s.n_head_kv), (n_head, n_head / g), "{h} {g}");
            assert_eq!(Shape::with_kv_heads(h, g, Some(n_head / g)), Ok(s));
            assert_eq!(
                file_name(42, DType::F16, s),
                if (h, g) == (128, 1) {
                    "tiny-llama-s42-f16.gguf".to_string()
                } else {
                    format!("tiny-llama-s42-f16-h{h}-g{g}.gguf")
                }
            );
        }
    }
}
const HEAD_DIMS_OF_BEFORE: [u32; 3] = [64, 128, 256];

/// A ratio that is not a power of 2, and K/V heads asked for: the file says n_head = gqa x
/// n_head_kv heads of head_dim, its K and V projections are n_head_kv heads wide, and its name
/// says the K/V heads where they are not the width's own.
#[test]
fn k_v_heads_and_any_ratio_write_the_heads_asked_for() {
    let key = |g: &Gguf, k: &str| g.kv.iter().find(|(n, _)| n == k).map(|(_, v)| v.clone());
    let dims = |g: &Gguf, n: &str| g.tensors.iter().find(|t| t.name == n).unwrap().dims.clone();
    for (h, g, kv, n_head, n_embd, name) in [
        (
            128,
            3,
            Some(2),
            6,
            768,
            "tiny-llama-s42-f16-h128-g3-kv2.gguf",
        ),
        (
            128,
            6,
            Some(2),
            12,
            1536,
            "tiny-llama-s42-f16-h128-g6-kv2.gguf",
        ),
        (64, 3, None, 3, 192, "tiny-llama-s42-f16-h64-g3.gguf"),
        (
            64,
            5,
            Some(4),
            20,
            1280,
            "tiny-llama-s42-f16-h64-g5-kv4.gguf",
        ),
        (256, 7, None, 7, 1792, "tiny-llama-s42-f16-h256-g7.gguf"),
        (
            128,
            1,
            Some(4),
            4,
            512,
            "tiny-llama-s42-f16-h128-g1-kv4.gguf",
        ),
        (128, 1, Some(2), 2, 256, "tiny-llama-s42-f16.gguf"),
    ] {
        let s = Shape::with_kv_heads(h, g, kv).unwrap();
        let n_head_kv = n_head / g;
        assert_eq!((s.head_dim(), s.gqa(), s.n_head_kv), (h, g, n_head_kv));
        let f = tiny_llama(s, 42, DType::F16);
        assert_eq!(
            key(&f, "llama.attention.head_count"),
            Some(Value::U32(n_head))
        );
        assert_eq!(
            key(&f, "llama.attention.head_count_kv"),
            Some(Value::U32(n_head_kv))
        );
        assert_eq!(key(&f, "llama.embedding_length"), Some(Value::U32(n_embd)));
        assert_eq!(key(&f, "llama.rope.dimension_count"), Some(Value::U32(h)));
        let embd = u64::from(n_embd);
        assert_eq!(dims(&f, "blk.0.attn_q.weight"), [embd, embd]);
        assert_eq!(
            dims(&f, "blk.1.attn_k.weight"),
            [embd, u64::from(h * n_head_kv)]
        );
        assert_eq!(file_name(42, DType::F16, s), name);
    }
    let why = Shape::with_kv_heads(256, 8, Some(2)).unwrap_err();
    assert!(
        why.starts_with("--n-head-kv 2 with --gqa 8 and --head-dim 256 makes 16 heads, 4096 wide"),
        "{why}"
    );
    assert!(why.contains("takes 1 K/V head of this ratio"), "{why}");
    assert!(Shape::with_kv_heads(128, 3, Some(0)).is_err());
    assert_eq!(Shape::with_kv_heads(256, 8, None).unwrap().n_embd, 2048);
}

#[test]
fn quantized_models_quantize_every_matrix_and_keep_the_norms_f32() {
    for dtype in [DType::Q8_0, DType::Q4_0] {
        let g = tiny_llama(Shape::with_heads(64, 2).unwrap(), 5, dtype);
        for t in &g.tensors {
            let n: u64 = t.dims.iter().product();
            let want = if t.dims.len() == 1 { DType::F32 } else { dtype };
            assert_eq!(t.dtype, want, "{}", t.name);
            assert_eq!(t.data.len() as u64, want.row_bytes(n), "{}", t.name);
        }
        let ft = g.kv.iter().find(|(k, _)| k == "general.file_type").unwrap();
        assert_eq!(ft.1, Value::U32(dtype.file_type()));
    }
}

/// A sliding window makes the gemma2 file llama.cpp's loader reads as an iSWA model: its window
/// key, the post-norms, no output tensor (tied to token_embd), the same weights under the same
/// names; without one the file is the llama model it always was (same name, same bytes).
#[test]
fn a_sliding_window_writes_the_gemma2_file_and_none_keeps_the_llama_one() {
    let plain = tiny_llama(Shape::default(), 42, DType::F16);
    let swa = tiny_llama(
        Shape {
            n_swa: 64,
            ..Shape::default()
        },
        42,
        DType::F16,
    );
    let key = |g: &Gguf, k: &str| g.kv.iter().find(|(n, _)| n == k).map(|(_, v)| v.clone());
    assert_eq!(
        key(&plain, "general.architecture"),
        Some(Value::Str("llama".into()))
    );
    assert_eq!(
        key(&swa, "general.architecture"),
        Some(Value::Str("gemma2".into()))
    );
    assert_eq!(
        key(&swa, "gemma2.attention.sliding_window"),
        Some(Value::U32(64))
    );
    assert!(plain.kv.iter().all(|(k, _)| !k.starts_with("gemma2.")));
    assert!(swa.kv.iter().all(|(k, _)| !k.starts_with("llama.")));
    let names = |g: &Gguf| g.tensors.iter().map(|t| t.name.clone()).collect::<Vec<_>>();
    let (p, s) = (names(&plain), names(&swa));
    assert!(p.contains(&"output.weight".to_string()));
    assert!(!s.contains(&"output.weight".to_string()));
    for i in 0..2 {
        assert!(s.contains(&format!("blk.{i}.post_attention_norm.weight")));
        assert!(s.contains(&format!("blk.{i}.post_ffw_norm.weight")));
    }
    // every weight the two share is the same tensor
    for t in &swa.tensors {
        if let Some(q) = plain.tensors.iter().find(|q| q.name == t.name) {
            assert_eq!(q, t, "{}", t.name);
        }
    }
    assert_eq!(
        file_name(42, DType::F16, Shape::default()),
        "tiny-llama-s42-f16.gguf"
    );
    assert_eq!(
        file_name(
            42,
            DType::F16,
            Shape {
                n_swa: 64,
                ..Shape::default()
            }
        ),
        "tiny-gemma2-s42-f16-swa64.gguf"
    );
}
