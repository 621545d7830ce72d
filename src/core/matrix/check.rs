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

pub(super) fn check_type(
    cx: &Ctx<'_>,
    axis: &str,
    v: &Value,
    span: Range<usize>,
) -> Result<(), MatrixError> {
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
