//! The configuration a commit bisect ran in (`--config ID` and/or explicit flags), with every
//! flag that changed it: a result people act on must say what was tested, not only where.

use super::escape;
use crate::core::result::BisectResult;

/// Which configuration the probes ran in, and which explicit flags changed it.
pub fn render(b: &BisectResult) -> Option<String> {
    let c = b.configuration.as_ref()?;
    let name = match (&c.id, &c.label) {
        (Some(id), Some(l)) => format!(
            "`{}` ({})",
            escape::inline_short(id, 40),
            escape::inline_short(l, 200)
        ),
        (Some(id), None) => format!("`{}`", escape::inline_short(id, 40)),
        _ => String::new(),
    };
    // "`ID` (label) from matrix.toml, in image X" or "set by flags, on the host".
    let origin = if c.id.is_some() {
        format!("{name} from {}", escape::inline_short(&c.source, 200))
    } else {
        "set by flags".into()
    };
    let place = c.image.as_deref().map_or("on the host".into(), |i| {
        format!("in image {}", escape::inline_short(i, 200))
    });
    let mut md = format!(
        "**Configuration:** {origin}, {place}\n\n- settings: {}\n",
        escape::inline_short(&c.settings.join(" "), 600)
    );
    if let Some(r) = &b.reproducer {
        md.push_str(&format!(
            "- reproducer: {} ({})\n",
            escape::inline_short(&r.command(), 600),
            escape::inline_short(&r.extent(), 200)
        ));
    }
    for o in &c.overrides {
        md.push_str(&format!(
            "- overridden by flag: {}\n",
            escape::inline_short(o, 300)
        ));
    }
    Some(md)
}
