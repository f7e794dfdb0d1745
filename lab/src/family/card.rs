//! The scorecard: every case's rows against the references, reduced per
//! picker over the family.

use serde::Serialize;

use super::lab::Report;
use super::score::{Balance, Figures, Spread, geomean, ratio};

/// The row every picker is compared with first: a bound, not a rival.
pub const ORACLE: &str = "oracle";
/// tower's own balancer: the rival every picker must not lose to.
pub const TOWER: &str = "tower_p2c";
/// A case is "behind" `tower_p2c` when its p99 ratio is over `1 + TIE`
/// and its p99 more than [`TIE_MS`] over tower's: closer is a tie (the
/// same arrivals routed a little differently; the sim's timer ticks in
/// milliseconds).
pub const TIE: f64 = 0.02;
/// See [`TIE`].
pub const TIE_MS: f64 = 1.0;

/// One row of one case, over its seeds.
#[derive(Debug, Clone, Serialize)]
pub struct RowResult {
    /// The row's name.
    pub picker: String,
    /// Each seed's figures and ratios, in seed order (`None`: the row did
    /// not run for that seed).
    pub seeds: Vec<Option<SeedResult>>,
    /// Scored p99 over the oracle's, over the seeds.
    pub vs_oracle: Option<Spread>,
    /// Scored p99 over `tower_p2c`'s, over the seeds.
    pub vs_tower: Option<Spread>,
    /// Mean over the seeds of the scored p99 less `tower_p2c`'s, ms.
    pub over_tower_ms: Option<f64>,
}

/// One row in one run.
#[derive(Debug, Clone, Serialize)]
pub struct SeedResult {
    /// The run's seed.
    pub seed: u64,
    /// Its figures.
    #[serde(flatten)]
    pub figures: Figures,
    /// Scored p99 over the oracle's.
    pub vs_oracle: Option<f64>,
    /// Scored p99 over `tower_p2c`'s.
    pub vs_tower: Option<f64>,
    /// Scored p99 less `tower_p2c`'s, ms.
    pub over_tower_ms: Option<f64>,
}

/// The rows of one case, from its runs (one per seed).
pub fn rows(runs: &[Report], seeds: &[u64], identical: bool) -> Vec<RowResult> {
    let mut names: Vec<&str> = Vec::new();
    for r in runs {
        for x in &r.runs {
            if !names.contains(&x.picker.as_str()) {
                names.push(&x.picker);
            }
        }
    }
    names
        .iter()
        .map(|&name| {
            let per_seed: Vec<Option<SeedResult>> = runs
                .iter()
                .zip(seeds)
                .map(|(r, &seed)| {
                    let f = Figures::of(r.run(name)?, identical);
                    let scored = |to: &str| r.run(to).map(|t| Figures::of(t, false).scored_ms);
                    let tower = scored(TOWER);
                    Some(SeedResult {
                        seed,
                        figures: f,
                        vs_oracle: scored(ORACLE).map(|o| ratio(f.scored_ms, o)),
                        vs_tower: tower.map(|t| ratio(f.scored_ms, t)),
                        over_tower_ms: tower.map(|t| f.scored_ms - t),
                    })
                })
                .collect();
            let got: Vec<&SeedResult> = per_seed.iter().flatten().collect();
            let of = |f: fn(&SeedResult) -> Option<f64>| {
                got.iter().filter_map(|s| f(s)).collect::<Vec<_>>()
            };
            let over = of(|s| s.over_tower_ms);
            RowResult {
                picker: name.to_string(),
                vs_oracle: Spread::of(&of(|s| s.vs_oracle)),
                vs_tower: Spread::of(&of(|s| s.vs_tower)),
                over_tower_ms: (!over.is_empty())
                    .then(|| over.iter().sum::<f64>() / over.len() as f64),
                seeds: per_seed,
            }
        })
        .collect()
}

/// A ratio reduced over the family.
#[derive(Debug, Clone, Serialize)]
pub struct Reduced {
    /// Geometric mean over the cases (of each case's mean over seeds).
    pub geomean: f64,
    /// The worst case's mean over seeds.
    pub worst: f64,
    /// Its case, `id name`.
    pub worst_case: String,
    /// That case's worst seed.
    pub worst_seed: f64,
    /// Cases compared.
    pub cases: usize,
}

/// The share bounds' figures over the family's cases of identical
/// replicas.
#[derive(Debug, Clone, Serialize)]
pub struct Shares {
    /// The worst max/mean share of any 1 s window.
    pub max_mean: f64,
    /// Its case.
    pub max_mean_case: String,
    /// The longest any replica was starved, seconds.
    pub starved_s: u64,
    /// Its case (the first with that figure).
    pub starved_case: String,
    /// Cases measured.
    pub cases: usize,
}

/// One picker's line of the scorecard.
#[derive(Debug, Clone, Serialize)]
pub struct Card {
    /// The row's name.
    pub picker: String,
    /// Its p99 over the oracle's (sim).
    pub vs_oracle: Option<Reduced>,
    /// Its p99 over `tower_p2c`'s.
    pub vs_tower: Option<Reduced>,
    /// Cases where it is behind `tower_p2c` (see [`TIE`]).
    pub behind: usize,
    /// Its share balance on identical replicas.
    pub shares: Option<Shares>,
}

/// A case as the scorecard names it, with its rows.
pub struct Scored<'a> {
    /// `id name`.
    pub label: String,
    /// Whether the share bounds apply.
    pub shares: bool,
    /// Its rows.
    pub rows: &'a [RowResult],
}

/// The scorecard: one card per row name, in first-seen order.
pub fn cards(cases: &[Scored<'_>]) -> Vec<Card> {
    let mut names: Vec<&str> = Vec::new();
    for c in cases {
        for r in c.rows {
            if !names.contains(&r.picker.as_str()) {
                names.push(&r.picker);
            }
        }
    }
    names.iter().map(|&n| card(n, cases)).collect()
}

fn card(name: &str, cases: &[Scored<'_>]) -> Card {
    let mine: Vec<(&Scored<'_>, &RowResult)> = cases
        .iter()
        .filter_map(|c| Some((c, c.rows.iter().find(|r| r.picker == name)?)))
        .collect();
    let reduce = |f: fn(&RowResult) -> Option<Spread>| {
        let xs: Vec<(&str, Spread)> = mine
            .iter()
            .filter_map(|(c, r)| Some((c.label.as_str(), f(r)?)))
            .collect();
        let (case, worst) = xs.iter().max_by(|a, b| a.1.mean.total_cmp(&b.1.mean))?;
        Some(Reduced {
            geomean: geomean(xs.iter().map(|x| x.1.mean))?,
            worst: worst.mean,
            worst_case: case.to_string(),
            worst_seed: worst.max,
            cases: xs.len(),
        })
    };
    let behind = mine
        .iter()
        .filter(|(_, r)| {
            r.vs_tower.is_some_and(|s| s.mean > 1.0 + TIE)
                && r.over_tower_ms.is_some_and(|d| d > TIE_MS)
        })
        .count();
    Card {
        picker: name.to_string(),
        vs_oracle: reduce(|r| r.vs_oracle),
        vs_tower: reduce(|r| r.vs_tower),
        behind,
        shares: shares(&mine),
    }
}

fn shares(mine: &[(&Scored<'_>, &RowResult)]) -> Option<Shares> {
    let per_case: Vec<(&str, Balance)> = mine
        .iter()
        .filter(|(c, _)| c.shares)
        .filter_map(|(c, r)| {
            let b: Vec<Balance> = r
                .seeds
                .iter()
                .flatten()
                .filter_map(|s| s.figures.share)
                .collect();
            let worst = Balance {
                max_mean: b.iter().map(|x| x.max_mean).reduce(f64::max)?,
                starved_s: b.iter().map(|x| x.starved_s).max()?,
            };
            Some((c.label.as_str(), worst))
        })
        .collect();
    let herd = per_case
        .iter()
        .max_by(|a, b| a.1.max_mean.total_cmp(&b.1.max_mean))?;
    let starve = per_case.iter().fold(&per_case[0], |m, x| {
        if x.1.starved_s > m.1.starved_s { x } else { m }
    });
    Some(Shares {
        max_mean: herd.1.max_mean,
        max_mean_case: herd.0.to_string(),
        starved_s: starve.1.starved_s,
        starved_case: starve.0.to_string(),
        cases: per_case.len(),
    })
}

/// The row with the lowest geometric-mean p99 over the oracle's, the
/// oracle aside.
pub fn best(cards: &[Card]) -> Option<(&str, f64)> {
    cards
        .iter()
        .filter(|c| c.picker != ORACLE)
        .filter_map(|c| Some((c.picker.as_str(), c.vs_oracle.as_ref()?.geomean)))
        .min_by(|a, b| a.1.total_cmp(&b.1))
}
