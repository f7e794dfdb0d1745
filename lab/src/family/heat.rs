//! The scorecard's heat maps: one row per picker, one column per case, a
//! cell's colour its p99 over the reference's (on a log scale), its text
//! the ratio. Each cell is a `<rect class="heat-cell">` with a `<title>`
//! naming the case, the picker and the seeds' range.

use std::fmt::Write as _;

use super::card::RowResult;
use super::report::FamilyReport;
use super::score::Spread;

const CELL_W: f64 = 34.0;
const CELL_H: f64 = 20.0;
const TOP: f64 = 62.0;

/// What a heat map compares with.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Reference {
    /// `tower_p2c`: blue is ahead, red behind (2× either way saturates at
    /// 4×).
    Tower,
    /// The oracle: white at 1×, red from there to 16×.
    Oracle,
}

impl Reference {
    fn of(self, r: &RowResult) -> Option<Spread> {
        match self {
            Reference::Tower => r.vs_tower,
            Reference::Oracle => r.vs_oracle,
        }
    }

    fn title(self) -> &'static str {
        match self {
            Reference::Tower => "p99 / tower_p2c's (blue: ahead, red: behind)",
            Reference::Oracle => "p99 / the oracle's (white: as good, red: 16x or worse)",
        }
    }

    /// How far a ratio is from white, 0 to 1, and towards which colour.
    fn depth(self, ratio: f64) -> (f64, (f64, f64, f64)) {
        let l = ratio.max(1e-9).log2();
        match self {
            Reference::Tower if l < 0.0 => ((-l / 2.0).min(1.0), (33.0, 102.0, 172.0)),
            Reference::Tower => ((l / 2.0).min(1.0), (178.0, 24.0, 43.0)),
            Reference::Oracle => ((l / 4.0).clamp(0.0, 1.0), (178.0, 24.0, 43.0)),
        }
    }

    /// The fill of a ratio: a log scale from white.
    fn fill(self, ratio: f64) -> String {
        let (t, to) = self.depth(ratio);
        let mix = |c: f64| (255.0 + (c - 255.0) * t).round() as u8;
        format!("#{:02x}{:02x}{:02x}", mix(to.0), mix(to.1), mix(to.2))
    }

    /// The text's colour on that fill.
    fn ink(self, ratio: f64) -> &'static str {
        if self.depth(ratio).0 > 0.6 {
            "white"
        } else {
            "black"
        }
    }
}

fn esc(s: &str) -> String {
    s.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('"', "&quot;")
}

/// A ratio in a cell's few pixels.
fn cell_text(x: f64) -> String {
    if x >= 9.95 {
        format!("{x:.0}")
    } else {
        format!("{x:.2}")
    }
}

/// The heat map against `reference`; `None` when no cell has a value (no
/// oracle over real sockets).
pub fn map(r: &FamilyReport, reference: Reference) -> Option<String> {
    let pickers: Vec<&str> = r.cards.iter().map(|c| c.picker.as_str()).collect();
    let any = r.rows.iter().flatten().any(|x| reference.of(x).is_some());
    if !any {
        return None;
    }
    let label = pickers
        .iter()
        .map(|p| p.len() as f64 * 7.0 + 16.0)
        .fold(120.0, f64::max);
    // Room for the title (about 8 px a character at 15 px) too.
    let width = (label + CELL_W * r.rows.len() as f64 + 20.0)
        .max(reference.title().len() as f64 * 8.0 + 20.0);
    let height = TOP + CELL_H * pickers.len() as f64 + 20.0;
    let mut body = String::new();
    let _ = writeln!(
        body,
        r#"<text x="10" y="20" font-size="15" font-weight="bold">{}</text>"#,
        esc(reference.title())
    );
    for (j, _) in r.rows.iter().enumerate() {
        let x = label + CELL_W * (j as f64 + 0.5);
        let _ = writeln!(
            body,
            r#"<text class="heat-case" x="{x:.1}" y="{:.1}" font-size="10" text-anchor="middle"><title>{}</title>{}</text>"#,
            TOP - 6.0,
            esc(&r.label(j)),
            esc(&r.family.cases[j].id)
        );
    }
    for (i, p) in pickers.iter().enumerate() {
        let y = TOP + CELL_H * i as f64;
        let _ = writeln!(
            body,
            r#"<text x="{:.1}" y="{:.1}" text-anchor="end">{}</text>"#,
            label - 6.0,
            y + CELL_H * 0.7,
            esc(p)
        );
        for (j, rows) in r.rows.iter().enumerate() {
            let x = label + CELL_W * j as f64;
            let value = rows
                .iter()
                .find(|x| x.picker == *p)
                .and_then(|x| reference.of(x));
            cell(
                &mut body,
                (x, y),
                value,
                &format!("{} · {p}", r.label(j)),
                reference,
            );
        }
    }
    Some(format!(
        r#"<svg xmlns="http://www.w3.org/2000/svg" class="heat-map" width="{width:.0}" height="{height:.0}" font-family="sans-serif" font-size="12">
<rect width="100%" height="100%" fill="white"/>
{body}</svg>
"#
    ))
}

fn cell(
    out: &mut String,
    (x, y): (f64, f64),
    value: Option<Spread>,
    what: &str,
    reference: Reference,
) {
    let (fill, ink, text, title) = match value {
        Some(s) => (
            reference.fill(s.mean),
            reference.ink(s.mean),
            cell_text(s.mean),
            format!("{what}: {:.3} (seeds {:.3}-{:.3})", s.mean, s.min, s.max),
        ),
        None => (
            "#eeeeee".to_string(),
            "black",
            "-".to_string(),
            format!("{what}: not run"),
        ),
    };
    let _ = writeln!(
        out,
        r#"<rect class="heat-cell" x="{x:.1}" y="{y:.1}" width="{:.1}" height="{:.1}" fill="{fill}" stroke="white"><title>{}</title></rect><text x="{:.1}" y="{:.1}" font-size="9" text-anchor="middle" fill="{ink}">{text}</text>"#,
        CELL_W,
        CELL_H,
        esc(&title),
        x + CELL_W / 2.0,
        y + CELL_H * 0.68
    );
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fills_are_white_at_one_and_saturate() {
        // (reference, ratio, fill)
        let cases = [
            (Reference::Tower, 1.0, "#ffffff"),
            (Reference::Tower, 4.0, "#b2182b"),
            (Reference::Tower, 100.0, "#b2182b"),
            (Reference::Tower, 0.25, "#2166ac"),
            (Reference::Oracle, 1.0, "#ffffff"),
            (Reference::Oracle, 0.5, "#ffffff"),
            (Reference::Oracle, 16.0, "#b2182b"),
        ];
        for (r, x, want) in cases {
            assert_eq!(r.fill(x), want, "{r:?} {x}");
        }
        assert_eq!(cell_text(1.234), "1.23");
        assert_eq!(cell_text(12.3), "12");
    }
}
