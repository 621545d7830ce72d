//! ggml's q8_0 and q4_0 block formats, byte for byte as ggml's reference quantizers write them
//! (`quantize_row_q8_0_ref`, `quantize_row_q4_0_ref` in ggml/src/ggml-quants.c, which
//! `ggml_quantize_chunk` runs without an importance matrix): the tiny model's quantized weights
//! must be what llama.cpp's own quantizer would have written, or a kernel fault could hide
//! behind (or be faked by) a format only this tool writes. tests/gguf_ggml.rs checks both
//! directions against a real ggml.
//!
//! q8_0 block (34 bytes): f16 scale d = amax/127, then 32 i8 q = round(x/d); x = q*d.
//! q4_0 block (18 bytes): f16 scale d = max/-8 (max: the value of largest magnitude, signed),
//! then 16 bytes whose low nibble is value j and high nibble value j+16, q = min(15, trunc(x/d +
//! 8.5)); x = (q-8)*d.

use super::{f16_to_f32, f32_to_f16};

/// Values per block (QK8_0 = QK4_0 = 32).
pub const QK: usize = 32;
pub const Q8_0_BLOCK: usize = 2 + QK;
pub const Q4_0_BLOCK: usize = 2 + QK / 2;

/// `x.len()` must be a multiple of `QK` (every row of the tiny model is).
pub fn quantize_q8_0(x: &[f32]) -> Vec<u8> {
    assert_eq!(x.len() % QK, 0, "q8_0 rows are whole blocks");
    let mut out = Vec::with_capacity(x.len() / QK * Q8_0_BLOCK);
    for b in x.chunks(QK) {
        let amax = b.iter().fold(0f32, |m, v| m.max(v.abs()));
        let d = amax / 127.0;
        let id = if d != 0.0 { 1.0 / d } else { 0.0 };
        out.extend_from_slice(&f32_to_f16(d).to_le_bytes());
        // roundf: half away from zero, as f32::round
        out.extend(b.iter().map(|v| (v * id).round() as i8 as u8));
    }
    out
}

pub fn quantize_q4_0(x: &[f32]) -> Vec<u8> {
    assert_eq!(x.len() % QK, 0, "q4_0 rows are whole blocks");
    let mut out = Vec::with_capacity(x.len() / QK * Q4_0_BLOCK);
    for b in x.chunks(QK) {
        let (mut amax, mut max) = (0f32, 0f32);
        for &v in b {
            if amax < v.abs() {
                amax = v.abs();
                max = v;
            }
        }
        let d = max / -8.0;
        let id = if d != 0.0 { 1.0 / d } else { 0.0 };
        out.extend_from_slice(&f32_to_f16(d).to_le_bytes());
        // (int8_t)(x + 8.5f) truncates toward zero, as `as i8` does
        let q = |v: f32| ((v * id + 8.5) as i8).min(15) as u8;
        out.extend((0..QK / 2).map(|j| q(b[j]) | (q(b[QK / 2 + j]) << 4)));
    }
    out
}

/// The values ggml's `to_float` reads back (`dequantize_row_q8_0`).
pub fn dequantize_q8_0(bytes: &[u8]) -> Vec<f32> {
    bytes
        .chunks(Q8_0_BLOCK)
        .flat_map(|b| {
            let d = f16_to_f32(u16::from_le_bytes([b[0], b[1]]));
            b[2..].iter().map(move |&q| f32::from(q as i8) * d)
        })
        .collect()
}

/// `dequantize_row_q4_0`.
pub fn dequantize_q4_0(bytes: &[u8]) -> Vec<f32> {
    bytes
        .chunks(Q4_0_BLOCK)
        .flat_map(|b| {
            let d = f16_to_f32(u16::from_le_bytes([b[0], b[1]]));
            let qs = &b[2..];
            let lo = qs.iter().map(move |q| (i32::from(q & 0xf) - 8) as f32 * d);
            let hi = qs.iter().map(move |q| (i32::from(q >> 4) - 8) as f32 * d);
            lo.chain(hi).collect::<Vec<_>>()
        })
        .collect()
}
