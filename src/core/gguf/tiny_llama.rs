//! The decode probe's model: a llama-architecture network with random weights, the shape of
//! llama.cpp's own `tests/test-llama-archs.cpp` (256-dim, 2 layers, 2 heads, FFN 384, vocab 128,
//! tokenizer `no_vocab`), a few MB, the same bytes for the same seed on every machine.
//!
//! Weights are multiples of 1/1024 with |w| <= 176/1024 (uniform, standard deviation ~0.1 as in
//! llama.cpp's test): a half holds every one of them exactly, so the f32 and f16 variants are the
//! same network and differ only in how ggml reads it. The q8_0 and q4_0 variants quantize those
//! same values with ggml's reference quantizers (`super::quant`). Every 2-D weight takes the
//! weight type (token_embd, output, attn_q/k/v/output, ffn_gate/down/up); the norm weights are 1
//! and always f32, as llama.cpp's converters and `llama-quantize` keep 1-D tensors.
//!
//! The attention shape a kernel path depends on (head size, GQA ratio, K/V heads) is
//! `Shape::with_kv_heads`; its default is the 256-dim, 2-head model above.
//!
//! With a sliding window (`Shape::n_swa`, `--sliding-window N`) the same weights become an
//! interleaved sliding-window (iSWA) model, the attention of gpt-oss and Gemma 2/3: llama.cpp
//! has no llama-architecture key for a window, so the file is a `gemma2` model, whose loader
//! reads `gemma2.attention.sliding_window` and alternates its layers (layer 0 sliding, layer 1
//! full, `set_swa_pattern(2)`), and whose KV cache is llama.cpp's iSWA pair of caches. Gemma 2
//! adds post-norms (ones, as every norm here) and ties the output to the token embedding.

use super::{f32_to_f16, quant, DType, Gguf, Tensor, Value};

/// The model's shape; `Default` is the probe's.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Shape {
    pub n_vocab: u32,
    pub n_embd: u32,
    pub n_head: u32,
    pub n_head_kv: u32,
    pub n_ff: u32,
    pub n_layer: u32,
    /// `llama.context_length`: the training context the file claims (positions past it still
    /// decode; the probe's KV cache is sized by the probe).
    pub n_ctx_train: u32,
    /// The sliding window of the iSWA layers; 0: none (the llama architecture).
    pub n_swa: u32,
}

impl Default for Shape {
    fn default() -> Self {
        Shape {
            n_vocab: 128,
            n_embd: 256,
            n_head: 2,
            n_head_kv: 2,
            n_ff: 384,
            n_layer: 2,
            n_ctx_train: 256,
            n_swa: 0,
        }
    }
}

/// Head sizes `Shape::with_heads` takes (flash attention and the attention kernels specialise
/// on these).
pub const HEAD_DIMS: [u32; 3] = [64, 128, 256];
/// GQA ratios (n_head / n_head_kv) `Shape::with_heads` takes: 1 to 8, the range of real models
/// (Llama 3 and Qwen 8 or less, Granite 3.0's 3, Qwen2.5-7B's 7), powers of 2 or not.
pub const GQA_RATIOS: [u32; 8] = [1, 2, 3, 4, 5, 6, 7, 8];
pub const DEFAULT_HEAD_DIM: u32 = 128;
pub const DEFAULT_GQA: u32 = 1;
/// The widest model (n_embd = head_dim x n_head) a shape may make: the widest the head sizes
/// and ratios made before K/V heads could be asked for (head 256, ratio 8), about 90 MB as f32.
pub const MAX_EMBD: u32 = 2048;

impl Shape {
    /// The model with heads of `head_dim` and `gqa` query heads per K/V head, and the K/V heads
    /// that fit the 256-dim width (`auto_kv_heads`). `None`: a value outside `HEAD_DIMS` /
    /// `GQA_RATIOS`. `with_heads(128, 1)` is the default.
    pub fn with_heads(head_dim: u32, gqa: u32) -> Option<Shape> {
        Shape::with_kv_heads(head_dim, gqa, None).ok()
    }

    /// The K/V heads a shape has when none are asked for: as many groups of `gqa` query heads
    /// as the 256-dim width holds with at least two heads (`max(256 / head_dim, 2) / gqa`),
    /// and at least one. So 64 gives 4 heads, a ratio above that one K/V head of `gqa` heads;
    /// every shape of the power-of-2 ratios keeps the heads it always had.
    pub fn auto_kv_heads(head_dim: u32, gqa: u32) -> u32 {
        ((256 / head_dim).max(2) / gqa).max(1)
    }

    /// The model with heads of `head_dim`, `gqa` query heads per K/V head and `n_head_kv` K/V
    /// heads (`None`: `auto_kv_heads`): n_head = gqa x n_head_kv, n_embd = head_dim x n_head.
    /// Several K/V heads are what tells apart a kernel that pairs a query head with another
    /// group's K/V head (with one K/V head every pairing is right). `Err`: why not, one phrase
    /// naming the flags (a value outside `HEAD_DIMS` / `GQA_RATIOS`, no K/V head, or wider than
    /// `MAX_EMBD`).
    pub fn with_kv_heads(head_dim: u32, gqa: u32, n_head_kv: Option<u32>) -> Result<Shape, String> {
        if !HEAD_DIMS.contains(&head_dim) {
            return Err(format!("--head-dim {head_dim}: expected 64, 128 or 256"));
        }
        if !GQA_RATIOS.contains(&gqa) {
            return Err(format!("--gqa {gqa}: expected 1 to 8"));
        }
        let n_head_kv = n_head_kv.unwrap_or_else(|| Shape::auto_kv_heads(head_dim, gqa));
        let n_head = gqa * n_head_kv;
        let n_embd = head_dim.saturating_mul(n_head);
        if n_head_kv == 0 || n_embd > MAX_EMBD {
            let most = match MAX_EMBD / (head_dim * gqa) {
                1 => "1 K/V head".to_string(),
                n => format!("1 to {n} K/V heads"),
            };
            return Err(format!(
                "--n-head-kv {n_head_kv} with --gqa {gqa} and --head-dim {head_dim} makes {n_head} heads, {n_embd} wide: the tiny model takes {most} of this ratio and head size (at most {MAX_EMBD} wide)"
            ));
        }
        Ok(Shape {
            n_embd,
            n_head,
            n_head_kv,
            ..Shape::default()
        })
    }

    pub fn head_dim(&self) -> u32 {
        self.n_embd / self.n_head
    }

    pub fn gqa(&self) -> u32 {
        self.n_head / self.n_head_kv
    }
}

/// Largest weight magnitude in 1/1024 steps.
const WEIGHT_STEPS: i64 = 176;

/// splitmix64: tiny, fixed, and good enough for weights that only need to be reproducible.
struct SplitMix(u64);

impl SplitMix {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    /// k/1024 with k uniform in -WEIGHT_STEPS..=WEIGHT_STEPS.
    fn weight(&mut self) -> f32 {
        let k = (self.next() % (2 * WEIGHT_STEPS as u64 + 1)) as i64 - WEIGHT_STEPS;
        k as f32 / 1024.0
    }
}

/// FNV-1a of the tensor name, so a tensor's values depend on (seed, name) only and adding a
/// tensor never changes another one.
fn name_seed(seed: u64, name: &str) -> u64 {
    let mut h = 0xcbf2_9ce4_8422_2325u64 ^ seed;
    for b in name.bytes() {
        h ^= u64::from(b);
        h = h.wrapping_mul(0x0100_0000_01b3);
    }
    h
}

fn random_tensor(seed: u64, name: &str, dims: &[u64], dtype: DType) -> Tensor {
    let n: u64 = dims.iter().product();
    let mut rng = SplitMix(name_seed(seed, name));
    let w: Vec<f32> = (0..n).map(|_| rng.weight()).collect();
    let data = match dtype {
        DType::F32 => w.iter().flat_map(|w| w.to_le_bytes()).collect(),
        DType::F16 => w
            .iter()
            .flat_map(|w| f32_to_f16(*w).to_le_bytes())
            .collect(),
        // blocks run along ne0, the contiguous dimension: a multiple of 32 in every tensor
        DType::Q8_0 => quant::quantize_q8_0(&w),
        DType::Q4_0 => quant::quantize_q4_0(&w),
    };
    Tensor {
        name: name.into(),
        dims: dims.to_vec(),
        dtype,
        data,
    }
}

fn ones(name: &str, n: u64) -> Tensor {
    Tensor {
        name: name.into(),
        dims: vec![n],
        dtype: DType::F32,
        data: (0..n).flat_map(|_| 1f32.to_le_bytes()).collect(),
    }
}

/// The model: metadata llama.cpp's loader for its architecture reads (`llama`, or `gemma2`
/// with a sliding window), then the tensors it creates.
pub fn tiny_llama(shape: Shape, seed: u64, dtype: DType) -> Gguf {
    let s = shape;
    let (embd, ff, vocab) = (u64::from(s.n_embd), u64::from(s.n_ff), u64::from(s.n_vocab));
    let head_dim = s.n_embd / s.n_head;
    let embd_kv = u64::from(head_dim * s.n_head_kv);
    let swa = s.n_swa > 0;
    let arch = if swa { "gemma2" } else { "llama" };
    let key = |k: &str| format!("{arch}.{k}");
    let mut kv = vec![
        ("general.architecture".into(), Value::Str(arch.into())),
        (
            "general.name".into(),
            Value::Str(format!("setrows-bisect tiny {arch} seed {seed}")),
        ),
        ("general.file_type".into(), Value::U32(dtype.file_type())),
        (key("vocab_size"), Value::U32(s.n_vocab)),
        (key("context_length"), Value::U32(s.n_ctx_train)),
        (key("embedding_length"), Value::U32(s.n_embd)),
        (key("block_count"), Value::U32(s.n_layer)),
        (key("feed_forward_length"), Value::U32(s.n_ff)),
        (key("attention.head_count"), Value::U32(s.n_head)),
        (key("attention.head_count_kv"), Value::U32(s.n_head_kv)),
        (key("attention.layer_norm_rms_epsilon"), Value::F32(1e-5)),
        (key("rope.dimension_count"), Value::U32(head_dim)),
        (key("rope.freq_base"), Value::F32(10000.0)),
    ];
    if swa {
        kv.push((key("attention.sliding_window"), Value::U32(s.n_swa)));
    }
    // No tokenizer: the probe feeds token ids; llama.cpp adds `vocab_size` dummy tokens.
    kv.push(("tokenizer.ggml.model".into(), Value::Str("no_vocab".into())));
    let mut tensors = vec![
        random_tensor(seed, "token_embd.weight", &[embd, vocab], dtype),
        ones("output_norm.weight", embd),
    ];
    if !swa {
        // gemma2 has no output tensor: its loader ties the output to token_embd, and a tensor
        // it does not create fails the load ("wrong number of tensors")
        tensors.push(random_tensor(seed, "output.weight", &[embd, vocab], dtype));
    }
    for i in 0..s.n_layer {
        let t = |n: &str| format!("blk.{i}.{n}.weight");
        tensors.push(ones(&t("attn_norm"), embd));
        tensors.push(random_tensor(seed, &t("attn_q"), &[embd, embd], dtype));
        tensors.push(random_tensor(seed, &t("attn_k"), &[embd, embd_kv], dtype));
        tensors.push(random_tensor(seed, &t("attn_v"), &[embd, embd_kv], dtype));
        tensors.push(random_tensor(seed, &t("attn_output"), &[embd, embd], dtype));
        if swa {
            tensors.push(ones(&t("post_attention_norm"), embd));
        }
        tensors.push(ones(&t("ffn_norm"), embd));
        tensors.push(random_tensor(seed, &t("ffn_gate"), &[embd, ff], dtype));
        tensors.push(random_tensor(seed, &t("ffn_down"), &[ff, embd], dtype));
        tensors.push(random_tensor(seed, &t("ffn_up"), &[embd, ff], dtype));
        if swa {
            tensors.push(ones(&t("post_ffw_norm"), embd));
        }
    }
    Gguf { kv, tensors }
}

/// The file name a model is written under: its identity (the default shape adds nothing, so the
/// default model keeps the name it always had).
pub fn file_name(seed: u64, dtype: DType, shape: Shape) -> String {
    let plain = Shape { n_swa: 0, ..shape };
    let (head_dim, gqa) = (shape.head_dim(), shape.gqa());
    let heads = if plain == Shape::default() {
        String::new()
    } else if shape.n_head_kv == Shape::auto_kv_heads(head_dim, gqa) {
        format!("-h{head_dim}-g{gqa}")
    } else {
        format!("-h{head_dim}-g{gqa}-kv{}", shape.n_head_kv)
    };
    let (arch, swa) = match shape.n_swa {
        0 => ("llama", String::new()),
        w => ("gemma2", format!("-swa{w}")),
    };
    format!("tiny-{arch}-s{seed}-{}{heads}{swa}.gguf", dtype.name())
}
