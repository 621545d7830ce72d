//! One expanded combination -> a `Config`: the image, recipe, launch settings and reproducer
//! arguments it names, with file:line:col errors for names that do not resolve.

use super::*;

impl Matrix {
    pub(super) fn resolve(&self, cx: &Ctx<'_>, combo: &Combo) -> Result<Config, MatrixError> {
        let values: BTreeMap<String, Value> = combo
            .iter()
            .map(|(k, (v, _))| (k.clone(), v.clone()))
            .collect();
        let get = |k: &str| values.get(k).map(|v| v.to_string());
        let span = |k: &str| combo.get(k).map(|(_, s)| s.clone()).unwrap_or(0..0);
        let any_span = combo
            .values()
            .next()
            .map(|(_, s)| s.clone())
            .unwrap_or(0..0);
        let backend = match get("backend") {
            Some(b) => Backend::parse(&b).ok_or_else(|| {
                cx.err(span("backend"), "backend", format!("unknown backend `{b}`"))
            })?,
            None => Backend::Hip,
        };
        let image = match get("image") {
            Some(i) => Some(i),
            None => match self.images.get(backend.as_str()) {
                None => None,
                Some(t) => Some(self.fill(cx, t, backend, &values, any_span.clone())?),
            },
        };
        let flag = |k: &str| match values.get(k) {
            Some(Value::Bool(b)) => Some(*b),
            _ => None,
        };
        let mut recipe = Recipe::new(backend);
        recipe.gpu_target = match backend {
            Backend::Hip => get("gfx"),
            Backend::Cuda => get("cuda_arch"),
            Backend::Cpu => None,
        };
        recipe.wave_size = match values.get("wave_size") {
            Some(Value::Int(w)) if backend == Backend::Hip => Some(*w as u32),
            _ => None,
        };
        recipe.graphs = flag("graphs");
        recipe.hip_no_vmm = flag("hip_no_vmm").filter(|_| backend == Backend::Hip);
        recipe.rocwmma_fattn = flag("rocwmma_fattn").filter(|_| backend == Backend::Hip);
        recipe.memory = get("memory")
            .and_then(|m| Memory::parse(&m))
            .unwrap_or_default();
        if let Some(why) = recipe
            .memory
            .meaningless(backend, self.probe.kind.def().no_host_memory())
        {
            return Err(cx.err(
                span("memory"),
                "memory",
                format!(
                    "memory `{}` with backend `{}` and [probe] kind = \"{}\": {why}; use device{}",
                    recipe.memory.as_str(),
                    backend.as_str(),
                    self.probe.kind.name(),
                    if backend == Backend::Cpu {
                        ""
                    } else {
                        " or unified"
                    },
                ),
            ));
        }
        let mut settings = DecodeSettings::default();
        for s in &crate::core::settings::SETTINGS {
            let Some(v) = get(s.axis) else { continue };
            let from = DecodeSettingsFrom::Axis(s.axis);
            if let Some(why) = self.probe.kind.refuses_decode_settings(from) {
                return Err(cx.err(span(s.axis), s.axis, why));
            }
            // checked by `check_type` as it was read
            settings.set(s, s.parse(&v).unwrap_or(v));
        }
        if let Some((axis, why)) = settings.conflict() {
            return Err(cx.err(span(axis), axis, why));
        }
        recipe.extra_cmake_args = self.probe.cmake_args.clone();
        let launch = match get("launch") {
            None => Launch::default(),
            Some(name) => self.launch.get(&name).cloned().ok_or_else(|| {
                cx.err(
                    span("launch"),
                    "launch",
                    format!("no [launch.{name}] table defines this preset"),
                )
            })?,
        };
        let repro_args = match get("params") {
            None => Vec::new(),
            Some(name) => self.params.get(&name).cloned().ok_or_else(|| {
                cx.err(
                    span("params"),
                    "params",
                    format!("no [params.{name}] table defines this preset"),
                )
            })?,
        };
        Ok(Config {
            id: config_id(&values),
            values,
            backend,
            image,
            recipe,
            launch,
            repro_args,
            settings,
        })
    }

    /// `{rocm}` / `{cuda}` / `{gfx}` in an image template, from the combination.
    fn fill(
        &self,
        cx: &Ctx<'_>,
        template: &str,
        backend: Backend,
        values: &BTreeMap<String, Value>,
        span: Range<usize>,
    ) -> Result<String, MatrixError> {
        let mut out = template.to_string();
        for key in ["rocm", "cuda", "gfx"] {
            let pat = format!("{{{key}}}");
            if out.contains(&pat) {
                let v = values.get(key).ok_or_else(|| {
                    cx.err(
                        span.clone(),
                        &format!("images.{}", backend.as_str()),
                        format!("the image template `{template}` needs `{key}`, which this configuration does not set"),
                    )
                })?;
                out = out.replace(&pat, &v.to_string());
            }
        }
        Ok(out)
    }
}
