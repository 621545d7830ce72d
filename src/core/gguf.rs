//! GGUF bytes (ggml's model file format, version 3), written here so that the decode probe needs
//! no downloaded model: `tiny_llama` is the model the probe runs, this module the container.
//!
//! The layout (ggml/include/gguf.h of the probed trees): magic `GGUF`, version u32, tensor count
//! i64, KV count i64, the KV pairs (key string, type i32, value; arrays as element type i32,
//! count u64, elements), the tensor infos (name, n_dims u32, dims i64 each, ggml type i32, offset
//! u64 into the data blob), padding to the alignment, then the data blob with every tensor's data
//! starting at a multiple of the alignment. Strings are u64 length + bytes, no terminator; all
//! little-endian. Pure: bytes in, bytes out; the file is written at the edge (`probe::decode`).

pub mod quant;
pub mod tiny_llama;

/// `general.alignment` when a file does not set it (GGUF_DEFAULT_ALIGNMENT).
pub const ALIGNMENT: usize = 32;
const MAGIC: &[u8; 4] = b"GGUF";
const VERSION: u32 = 3;

/// A metadata value; only the kinds a llama model needs.
#[derive(Debug, Clone, PartialEq)]
pub enum Value {
    U32(u32),
    F32(f32),
    Bool(bool),
    Str(String),
}

impl Value {
    /// The `gguf_type` code.
    fn type_code(&self) -> u32 {
        match self {
            Value::U32(_) => 4,
            Value::F32(_) => 6,
            Value::Bool(_) => 7,
            Value::Str(_) => 8,
        }
    }
}

/// The tensor element types written here (`ggml_type` codes); the two block formats are
/// ggml's own (`quant`), the ones people run small models in.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum DType {
    F32,
    F16,
    Q8_0,
    Q4_0,
}

impl DType {
    pub const ALL: [DType; 4] = [DType::F32, DType::F16, DType::Q8_0, DType::Q4_0];

    /// GGML_TYPE_*.
    pub fn ggml_code(self) -> u32 {
        match self {
            DType::F32 => 0,
            DType::F16 => 1,
            DType::Q4_0 => 2,
            DType::Q8_0 => 8,
        }
    }

    /// ggml's type name (`ggml_type_name`), the `--weight-type` spelling.
    pub fn name(self) -> &'static str {
        match self {
            DType::F32 => "f32",
            DType::F16 => "f16",
            DType::Q8_0 => "q8_0",
            DType::Q4_0 => "q4_0",
        }
    }

    pub fn parse(s: &str) -> Option<DType> {
        DType::ALL.into_iter().find(|d| d.name() == s)
    }

    /// `general.file_type` (llama_ftype): LLAMA_FTYPE_ALL_F32 = 0, MOSTLY_F16 = 1,
    /// MOSTLY_Q4_0 = 2, MOSTLY_Q8_0 = 7.
    pub fn file_type(self) -> u32 {
        match self {
            DType::F32 => 0,
            DType::F16 => 1,
            DType::Q4_0 => 2,
            DType::Q8_0 => 7,
        }
    }

    /// Bytes of `n` values (a multiple of the block size for the block formats).
    pub fn row_bytes(self, n: u64) -> u64 {
        match self {
            DType::F32 => 4 * n,
            DType::F16 => 2 * n,
            DType::Q8_0 => n / quant::QK as u64 * quant::Q8_0_BLOCK as u64,
            DType::Q4_0 => n / quant::QK as u64 * quant::Q4_0_BLOCK as u64,
        }
    }
}

/// One tensor: `dims` in ggml order (ne0 first, the contiguous one).
#[derive(Debug, Clone, PartialEq)]
pub struct Tensor {
    pub name: String,
    pub dims: Vec<u64>,
    pub dtype: DType,
    pub data: Vec<u8>,
}

/// A whole file's content before serialisation.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Gguf {
    pub kv: Vec<(String, Value)>,
    pub tensors: Vec<Tensor>,
}

fn put_str(out: &mut Vec<u8>, s: &str) {
    out.extend_from_slice(&(s.len() as u64).to_le_bytes());
    out.extend_from_slice(s.as_bytes());
}

fn pad_to(out: &mut Vec<u8>, align: usize) {
    out.resize(out.len().div_ceil(align) * align, 0);
}

impl Gguf {
    /// The file's bytes.
    pub fn to_bytes(&self) -> Vec<u8> {
        let mut out = Vec::with_capacity(
            4096 + self
                .tensors
                .iter()
                .map(|t| t.data.len() + ALIGNMENT)
                .sum::<usize>(),
        );
        out.extend_from_slice(MAGIC);
        out.extend_from_slice(&VERSION.to_le_bytes());
        out.extend_from_slice(&(self.tensors.len() as i64).to_le_bytes());
        out.extend_from_slice(&(self.kv.len() as i64).to_le_bytes());
        for (key, value) in &self.kv {
            put_str(&mut out, key);
            out.extend_from_slice(&value.type_code().to_le_bytes());
            match value {
                Value::U32(v) => out.extend_from_slice(&v.to_le_bytes()),
                Value::F32(v) => out.extend_from_slice(&v.to_le_bytes()),
                Value::Bool(v) => out.push(u8::from(*v)),
                Value::Str(s) => put_str(&mut out, s),
            }
        }
        let mut offset = 0u64;
        for t in &self.tensors {
            put_str(&mut out, &t.name);
            out.extend_from_slice(&(t.dims.len() as u32).to_le_bytes());
            for d in &t.dims {
                out.extend_from_slice(&(*d as i64).to_le_bytes());
            }
            out.extend_from_slice(&t.dtype.ggml_code().to_le_bytes());
            out.extend_from_slice(&offset.to_le_bytes());
            offset += (t.data.len() as u64).div_ceil(ALIGNMENT as u64) * ALIGNMENT as u64;
        }
        pad_to(&mut out, ALIGNMENT);
        for t in &self.tensors {
            out.extend_from_slice(&t.data);
            pad_to(&mut out, ALIGNMENT);
        }
        out
    }
}

/// IEEE half precision of `x`, rounded to nearest even (ggml's `ggml_fp32_to_fp16` for finite
/// values). `tiny_llama` only passes values a half holds exactly, so both variants carry the same
/// weights; the rounding is there so the function is right for any input.
pub fn f32_to_f16(x: f32) -> u16 {
    let bits = x.to_bits();
    let sign = ((bits >> 16) & 0x8000) as u16;
    let exp = ((bits >> 23) & 0xff) as i32;
    let mant = bits & 0x7f_ffff;
    if exp == 0xff {
        return sign | 0x7c00 | if mant != 0 { 0x200 } else { 0 };
    }
    let e = exp - 127 + 15;
    if e >= 0x1f {
        return sign | 0x7c00;
    }
    if e <= 0 {
        if e < -10 {
            return sign;
        }
        // subnormal half: shift the implicit-1 mantissa into place, round to nearest even
        let m = mant | 0x80_0000;
        let shift = (14 - e) as u32;
        let half = m >> shift;
        let rem = m & ((1 << shift) - 1);
        let mid = 1 << (shift - 1);
        let round = u32::from(rem > mid || (rem == mid && half & 1 == 1));
        return sign | (half + round) as u16;
    }
    let half = ((e as u32) << 10) | (mant >> 13);
    let rem = mant & 0x1fff;
    let round = u32::from(rem > 0x1000 || (rem == 0x1000 && half & 1 == 1));
    // a carry out of the mantissa correctly bumps the exponent (up to infinity)
    sign | (half + round) as u16
}

/// The value a half holds (for tests and the exactness argument).
pub fn f16_to_f32(h: u16) -> f32 {
    let sign = if h & 0x8000 != 0 { -1.0f32 } else { 1.0 };
    let exp = i32::from((h >> 10) & 0x1f);
    let mant = f32::from(h & 0x3ff);
    match exp {
        0 => sign * mant * 2f32.powi(-24),
        0x1f if mant == 0.0 => sign * f32::INFINITY,
        0x1f => f32::NAN,
        _ => sign * (1.0 + mant / 1024.0) * 2f32.powi(exp - 15),
    }
}

#[cfg(test)]
mod tests;
