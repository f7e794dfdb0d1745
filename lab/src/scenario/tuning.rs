//! `[picker.NAME]`: a picker's settings, so that a comparison of settings
//! is a scenario (or `--set NAME.FIELD=VALUE`), not an edit of the lab's
//! source. Each field is the library's builder setting of the same name;
//! a field the picker does not read is refused, and a value the library
//! refuses is refused with the field's path.

use std::fmt::Write as _;
use std::time::Duration;

use serde::Deserialize;
use tower_lb::Balance;
use tower_lb::balance::Builder;
use tower_lb::pick::{AnyPicker, PeakEwma, Prequal};

use super::picker::PickerName;
use super::units::Dur;

/// The settings of one picker's rows (every field optional: absent keeps
/// the library's default).
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Tuning {
    /// `PeakEwma::choices` (peak-EWMA pickers).
    pub choices: Option<usize>,
    /// `PeakEwma::spread_factor` (peak-EWMA pickers).
    pub spread_factor: Option<f64>,
    /// `PeakEwma::learn_parallelism` (peak-EWMA pickers).
    pub learn_parallelism: Option<bool>,
    /// `PeakEwma::utilization_fade` (peak-EWMA pickers).
    pub utilization_fade: Option<Dur>,
    /// `Builder::decay`: the endpoints' latency model (any picker).
    pub decay: Option<Dur>,
    /// `Builder::sample_decay` (any picker).
    pub sample_decay: Option<Dur>,
    /// `Builder::default_rtt` (any picker).
    pub default_rtt: Option<Dur>,
    /// `Builder::failure_penalty` (any picker).
    pub failure_penalty: Option<Dur>,
    /// `Builder::failure_decay` (any picker).
    pub failure_decay: Option<Dur>,
    /// `Prequal::probes_per_request` (`prequal`).
    pub probes_per_request: Option<f64>,
    /// `Prequal::rif_quantile` (`prequal`).
    pub rif_quantile: Option<f64>,
    /// `Prequal::pool_size` (`prequal`).
    pub pool_size: Option<usize>,
    /// `Prequal::max_age` (`prequal`).
    pub max_age: Option<Dur>,
    /// `Prequal::max_uses` (`prequal`).
    pub max_uses: Option<u32>,
}

/// The fields of [`Tuning`] by the pickers that read them.
const PEAK_EWMA: &[&str] = &[
    "choices",
    "spread_factor",
    "learn_parallelism",
    "utilization_fade",
];
const PREQUAL: &[&str] = &[
    "probes_per_request",
    "rif_quantile",
    "pool_size",
    "max_age",
    "max_uses",
];

impl Tuning {
    /// The fields set, as `(name, value)` in the struct's order, values as
    /// a scenario writes them.
    pub fn fields(&self) -> Vec<(&'static str, String)> {
        let d = |d: &Option<Dur>| d.map(|d| fmt_dur(d.0));
        let s = |x: Option<String>| x;
        [
            ("choices", s(self.choices.map(|x| x.to_string()))),
            (
                "spread_factor",
                s(self.spread_factor.map(|x| x.to_string())),
            ),
            (
                "learn_parallelism",
                s(self.learn_parallelism.map(|x| x.to_string())),
            ),
            ("utilization_fade", d(&self.utilization_fade)),
            ("decay", d(&self.decay)),
            ("sample_decay", d(&self.sample_decay)),
            ("default_rtt", d(&self.default_rtt)),
            ("failure_penalty", d(&self.failure_penalty)),
            ("failure_decay", d(&self.failure_decay)),
            (
                "probes_per_request",
                s(self.probes_per_request.map(|x| x.to_string())),
            ),
            ("rif_quantile", s(self.rif_quantile.map(|x| x.to_string()))),
            ("pool_size", s(self.pool_size.map(|x| x.to_string()))),
            ("max_age", d(&self.max_age)),
            ("max_uses", s(self.max_uses.map(|x| x.to_string()))),
        ]
        .into_iter()
        .filter_map(|(k, v)| v.map(|v| (k, v)))
        .collect()
    }

    /// The row's mark: `{sample_decay=2s, choices=4}`; empty without
    /// settings.
    pub fn label(&self) -> String {
        let f = self.fields();
        if f.is_empty() {
            return String::new();
        }
        let mut out = String::from("{");
        for (k, (name, v)) in f.iter().enumerate() {
            let sep = if k == 0 { "" } else { ", " };
            let _ = write!(out, "{sep}{name}={v}");
        }
        out.push('}');
        out
    }

    /// `picker` with these settings (the registry's picker called `name`
    /// for a crate picker).
    pub fn apply<E>(&self, picker: &mut AnyPicker<E>) {
        match picker {
            AnyPicker::PeakEwma(p) | AnyPicker::P2cPeakEwma(p) | AnyPicker::PeakEwmaOrca(p) => {
                *p = self.peak_ewma(*p);
            }
            AnyPicker::Prequal(p) => {
                let q = std::mem::replace(p, Prequal::new());
                *p = self.prequal(q);
            }
            _ => {}
        }
    }

    fn peak_ewma(&self, mut p: PeakEwma) -> PeakEwma {
        if let Some(n) = self.choices {
            p = p.choices(n);
        }
        if let Some(k) = self.spread_factor {
            p = p.spread_factor(k);
        }
        if let Some(on) = self.learn_parallelism {
            p = p.learn_parallelism(on);
        }
        if let Some(f) = self.utilization_fade {
            p = p.utilization_fade(f.0);
        }
        p
    }

    fn prequal(&self, mut p: Prequal) -> Prequal {
        if let Some(n) = self.probes_per_request {
            p = p.probes_per_request(n);
        }
        if let Some(q) = self.rif_quantile {
            p = p.rif_quantile(q);
        }
        if let Some(n) = self.pool_size {
            p = p.pool_size(n);
        }
        if let Some(a) = self.max_age {
            p = p.max_age(a.0);
        }
        if let Some(n) = self.max_uses {
            p = p.max_uses(n);
        }
        p
    }

    /// `b` with the endpoints' latency-model settings.
    pub fn builder<K, S, P, C>(&self, mut b: Builder<K, S, P, C>) -> Builder<K, S, P, C> {
        if let Some(d) = self.decay {
            b = b.decay(d.0);
        }
        if let Some(d) = self.sample_decay {
            b = b.sample_decay(d.0);
        }
        if let Some(d) = self.default_rtt {
            b = b.default_rtt(d.0);
        }
        if let Some(d) = self.failure_penalty {
            b = b.failure_penalty(d.0);
        }
        if let Some(d) = self.failure_decay {
            b = b.failure_decay(d.0);
        }
        b
    }

    /// Checks that `picker` reads every field set and that the library
    /// takes each value: `(field, problem)` with the field's path
    /// (`picker.peak_ewma.choices`).
    pub fn validate(&self, picker: PickerName) -> Result<(), (String, String)> {
        let path = |f: &str| format!("picker.{picker}.{f}");
        let PickerName::Crate(name) = picker else {
            return Err((
                format!("picker.{picker}"),
                "settings are for tower-lb's pickers (a rival runs as its authors set it)".into(),
            ));
        };
        let reads: &[&str] = match name {
            "peak_ewma" | "p2c_peak_ewma" | "peak_ewma_orca" => PEAK_EWMA,
            "prequal" => PREQUAL,
            _ => &[],
        };
        for (f, _) in self.fields() {
            let own = PEAK_EWMA.contains(&f) || PREQUAL.contains(&f);
            if own && !reads.contains(&f) {
                return Err((path(f), format!("{name} has no such setting")));
            }
        }
        let mut p = AnyPicker::by_name(name, ()).map_err(|e| (path("name"), e.to_string()))?;
        self.apply(&mut p);
        let b = Balance::<usize, ()>::builder().picker(p);
        self.builder(b)
            .build()
            .map(drop)
            .map_err(|e| (path(e.field()), e.to_string()))
    }
}

/// A duration as a scenario writes it: `2s`, `500ms`, `1.5s`.
fn fmt_dur(d: Duration) -> String {
    let ms = d.as_secs_f64() * 1e3;
    if ms >= 1000.0 {
        format!("{}s", d.as_secs_f64())
    } else if ms >= 1.0 {
        format!("{ms}ms")
    } else {
        format!("{}us", d.as_secs_f64() * 1e6)
    }
}

/// Sets `field` of `t` to `value` as a command line writes it
/// (`--set peak_ewma.sample_decay=2s`): parsed as the scenario file's
/// field would be.
pub fn set(t: &mut Tuning, field: &str, value: &str) -> Result<(), String> {
    // A number, a bool, else a string (a duration).
    let literal = if value.parse::<f64>().is_ok() || value == "true" || value == "false" {
        value.to_string()
    } else {
        format!("{value:?}")
    };
    let one: Tuning = toml::from_str(&format!("{field} = {literal}"))
        .map_err(|e| format!("{field}={value}: {}", e.message()))?;
    t.merge(one);
    Ok(())
}

impl Tuning {
    /// `self` with every field `other` sets.
    pub fn merge(&mut self, other: Tuning) {
        macro_rules! take {
            ($($f:ident),*) => {$(
                if other.$f.is_some() {
                    self.$f = other.$f;
                }
            )*};
        }
        take!(
            choices,
            spread_factor,
            learn_parallelism,
            utilization_fade,
            decay,
            sample_decay,
            default_rtt,
            failure_penalty,
            failure_decay,
            probes_per_request,
            rif_quantile,
            pool_size,
            max_age,
            max_uses
        );
    }
}

/// Reads `[picker.NAME]` tables as one setting each.
pub fn one_each<'de, D: serde::Deserializer<'de>>(
    d: D,
) -> Result<std::collections::BTreeMap<String, Vec<Tuning>>, D::Error> {
    let one = std::collections::BTreeMap::<String, Tuning>::deserialize(d)?;
    Ok(one.into_iter().map(|(k, t)| (k, vec![t])).collect())
}

/// A `--set` (or `--vary`) flag: a picker's field and its values.
#[derive(Debug, Clone, PartialEq)]
pub struct SetFlag {
    /// The picker's name.
    pub picker: String,
    /// The field of `[picker.NAME]`.
    pub field: String,
    /// One value per row.
    pub values: Vec<String>,
    /// `--vary`: rows beside the picker's own, which stays; `--set`: the
    /// picker's rows take these values.
    pub beside: bool,
}

/// `--set`'s `PICKER.FIELD=V1,V2`: the picker, the field and its values.
pub fn parse_set(v: &str, beside: bool) -> Result<SetFlag, String> {
    let bad = || format!("\"{v}\": write PICKER.FIELD=VALUE, e.g. peak_ewma.sample_decay=2s");
    let (path, values) = v.split_once('=').ok_or_else(bad)?;
    let (picker, field) = path.trim().split_once('.').ok_or_else(bad)?;
    let values: Vec<String> = values
        .split(',')
        .map(|x| x.trim().to_string())
        .filter(|x| !x.is_empty())
        .collect();
    if picker.is_empty() || field.is_empty() || values.is_empty() {
        return Err(bad());
    }
    Ok(SetFlag {
        picker: picker.to_string(),
        field: field.to_string(),
        values,
        beside,
    })
}

/// `list` (a picker's settings so far) with `field` set to each of
/// `values` in turn: one setting per value and per earlier setting.
pub fn vary(list: &[Tuning], field: &str, values: &[String]) -> Result<Vec<Tuning>, String> {
    let base = if list.is_empty() {
        vec![Tuning::default()]
    } else {
        list.to_vec()
    };
    let mut out = Vec::with_capacity(base.len() * values.len());
    for t in &base {
        for v in values {
            let mut t = t.clone();
            set(&mut t, field, v)?;
            out.push(t);
        }
    }
    Ok(out)
}
