//! Writes the decode probe's tiny model and says how big it is and how long writing took
//! (BENCHMARKS.md, "Decode probe"): `cargo run --release --example decode_model -- DIR [f32|f16|q8_0|q4_0] [SEED]`.
use setrows_bisect::core::gguf::DType;
use std::time::Instant;

fn main() -> std::io::Result<()> {
    let args: Vec<String> = std::env::args().collect();
    let dir = std::path::PathBuf::from(args.get(1).map_or(".", String::as_str));
    let dtype = args
        .get(2)
        .and_then(|d| DType::parse(d))
        .unwrap_or(DType::F16);
    let seed = args.get(3).and_then(|s| s.parse().ok()).unwrap_or(42);
    let t = Instant::now();
    let m = setrows_bisect::probe::decode::write_model(&dir, seed, dtype, Default::default())?;
    let s = t.elapsed().as_secs_f64();
    println!("{} {} bytes {:.3} ms", m.path.display(), m.bytes, s * 1e3);
    Ok(())
}
