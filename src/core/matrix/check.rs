//! One axis value checked against its axis: its type, and for the named axes a known name.

use super::*;

pub(super) fn scalar(
    cx: &Ctx<'_>,
    key: &str,
    v: &Spanned<toml::Value>,
) -> Result<Value, MatrixError> {
    match v.get_ref() {
        toml::Value::String(s) => Ok(Value::Str(s.clone())),
        toml::Value::Integer(i) => Ok(Value::Int(*i)),
        toml::Value::Boolean(b) => Ok(Value::Bool(*b)),
        other => Err(cx.err(
            v.span(),
            key,
            format!(
                "expected a string, integer or boolean, found {}",
                other.type_str()
            ),
        )),
    }
}

/// A value of `axis` as a command line gives it (`bisect-config --values`): an integer where the
/// axis takes integers, a boolean for `true`/`false`, else the word.
pub fn typed(axis: &str, raw: &str) -> Value {
    let int_axis =
        axis == "wave_size" || crate::core::settings::by_axis(axis).is_some_and(|s| s.integer());
    match (raw.parse::<i64>(), raw) {
        (Ok(i), _) if int_axis => Value::Int(i),
        (_, "true") => Value::Bool(true),
        (_, "false") => Value::Bool(false),
        _ => Value::Str(raw.into()),
    }
}

pub(super) fn check_type(
    cx: &Ctx<'_>,
    axis: &str,
    v: &Value,
    span: Range<usize>,
) -> Result<(), MatrixError> {
    if let Some(s) = crate::core::settings::by_axis(axis) {
        // integers as TOML integers, words as strings; `n_gpu_layers` and `n_head_kv` take
        // both (`all`, `auto`)
        let raw = match v {
            Value::Int(_) if s.integer() => Some(v.to_string()),
            Value::Str(w) if !s.integer() || s.word() == Some(w.as_str()) => Some(w.clone()),
            _ => None,
        };
        return match raw.map(|r| s.parse(&r)) {
            Some(Ok(_)) => Ok(()),
            Some(Err(why)) => Err(cx.err(span, axis, format!("`{axis}` = {v}: {why}"))),
            None => Err(cx.err(
                span,
                axis,
                format!(
                    "`{axis}` takes {}, not `{v}`",
                    if s.integer() {
                        "an integer"
                    } else {
                        "a string"
                    }
                ),
            )),
        };
    }
    let want = match axis {
        "wave_size" => "integer",
        "graphs" | "hip_no_vmm" | "rocwmma_fattn" => "boolean",
        _ => "string",
    };
    let ok = matches!(
        (want, v),
        ("integer", Value::Int(_)) | ("boolean", Value::Bool(_)) | ("string", Value::Str(_))
    );
    if !ok {
        return Err(cx.err(span, axis, format!("`{axis}` takes a {want}, not `{v}`")));
    }
    if axis == "wave_size" && !matches!(v, Value::Int(32) | Value::Int(64)) {
        return Err(cx.err(span, axis, format!("wave size must be 32 or 64, not {v}")));
    }
    if axis == "memory" && Memory::parse(&v.to_string()).is_none() {
        return Err(cx.err(
            span,
            axis,
            format!("unknown memory placement `{v}` (device, unified or host)"),
        ));
    }
    if axis == "backend" && Backend::parse(&v.to_string()).is_none() {
        return Err(cx.err(
            span,
            axis,
            format!("unknown backend `{v}` (hip, cuda or cpu)"),
        ));
    }
    Ok(())
}
