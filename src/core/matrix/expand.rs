//! GitHub Actions matrix semantics, on positioned values: the product of the axes in file
//! order, minus `exclude`, plus `include` merged into every combination whose original values
//! it does not contradict. Kept apart from the TOML reading so the semantics read in one place.

use super::Value;
use std::collections::BTreeMap;
use std::ops::Range;

/// A combination with where each value came from.
pub type Combo = BTreeMap<String, (Value, Range<usize>)>;

/// An axis: its name and its values, each with where it was written.
pub type Axis<'a> = (&'a str, Vec<(Value, Range<usize>)>);

/// GitHub Actions matrix expansion (pure; see the module doc).
pub fn expand(axes: &[Axis<'_>], excludes: &[Combo], includes: &[Combo]) -> Vec<Combo> {
    let mut product: Vec<Combo> = if axes.is_empty() {
        Vec::new()
    } else {
        vec![Combo::new()]
    };
    for (name, vals) in axes {
        let mut next = Vec::with_capacity(product.len() * vals.len());
        for c in &product {
            for v in vals {
                let mut c = c.clone();
                c.insert(name.to_string(), v.clone());
                next.push(c);
            }
        }
        product = next;
    }
    let matches = |c: &Combo, rule: &Combo| {
        rule.iter()
            .all(|(k, (v, _))| c.get(k).is_some_and(|(cv, _)| cv == v))
    };
    product.retain(|c| !excludes.iter().any(|ex| matches(c, ex)));
    // (original values, values added by include rules)
    let mut out: Vec<(Combo, Combo)> = product.into_iter().map(|c| (c.clone(), c)).collect();
    let originals = out.len();
    for inc in includes {
        let mut merged = false;
        for (orig, ext) in out.iter_mut().take(originals) {
            let fits = inc
                .iter()
                .all(|(k, (v, _))| orig.get(k).is_none_or(|(ov, _)| ov == v));
            if fits {
                for (k, v) in inc {
                    ext.insert(k.clone(), v.clone());
                }
                merged = true;
            }
        }
        if !merged {
            out.push((inc.clone(), inc.clone()));
        }
    }
    out.into_iter().map(|(_, ext)| ext).collect()
}
