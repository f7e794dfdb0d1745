//! The flags of `cargo lab --family [NAME]`.

use std::path::PathBuf;
use std::time::Duration;

use super::lab::{LabError, PickerName, parse_pickers};

/// What `cargo lab --family --help` prints.
pub const USAGE: &str = "\
usage: cargo lab --family [NAME] [FLAGS]

  NAME                  all (default): issue 36's fleets, the LAN fleets and 24
                        generated cases, in sim, seeds 1-3; named: the fixed
                        cases alone; generated: the generated ones alone;
                        quick: 9 small cases (the tests' subset), seed 1;
                        http: the 6 LAN fleets over real sockets, 10 s per row
  --family-seed N       seed of the generated cases (default 1): tune on one,
                        judge on another
  --seeds A-B|A,B,..    the seeds each case runs with (default: the family's)
  --sim                 run the http family in sim too
  --pickers a,b,...     the rows (default: every picker but the hash pickers,
                        the rivals, and in sim the oracle)
  --case ID|NAME[,..]   only these cases (f02, l01, g07 or their names)
  --duration DUR        every case's measured time (default: from its rate)
  --jobs N              sim runs at once (default: the cores)
  --print               print the cases as scenario files instead of running
  --json FILE           every figure and the scorecard as JSON
  --report FILE|none    the report page (default lab-family-NAME.html)
  --quiet               no progress line
  --help                this text";

/// Parsed `--family` flags.
#[derive(Debug, Clone)]
pub struct FamilyArgs {
    /// The family's name.
    pub name: String,
    /// Seed of its generated cases.
    pub family_seed: u64,
    /// Seeds each case runs with (`None`: the family's).
    pub seeds: Option<Vec<u64>>,
    /// Sim even for the http family.
    pub sim: bool,
    /// The rows (`None`: the family's).
    pub pickers: Option<Vec<PickerName>>,
    /// Only these cases, by id or name.
    pub cases: Option<Vec<String>>,
    /// Every case's measured time.
    pub duration: Option<Duration>,
    /// Sim runs at once.
    pub jobs: usize,
    /// Print the scenario files instead of running.
    pub print: bool,
    /// `--json`.
    pub json: Option<PathBuf>,
    /// `--report`: `None` for the default path, `Some(None)` for none.
    pub report: Option<Option<PathBuf>>,
    /// No progress line.
    pub quiet: bool,
}

impl FamilyArgs {
    /// The family `name` with every default.
    pub fn new(name: &str) -> Self {
        Self {
            name: name.to_string(),
            family_seed: 1,
            seeds: None,
            sim: false,
            pickers: None,
            cases: None,
            duration: None,
            jobs: std::thread::available_parallelism().map_or(1, |n| n.get()),
            print: false,
            json: None,
            report: None,
            quiet: false,
        }
    }
}

/// Parses the command line of a family run (it holds `--family`); `None`
/// for `--help`.
pub fn parse(args: &[String]) -> Result<Option<FamilyArgs>, LabError> {
    let mut a = FamilyArgs::new("all");
    let mut it = args.iter().peekable();
    while let Some(flag) = it.next() {
        let (flag, inline) = match flag.split_once('=') {
            Some((f, v)) if f.starts_with("--") => (f, Some(v.to_string())),
            _ => (flag.as_str(), None),
        };
        if flag == "--family" {
            // The name is optional: the next word unless it is a flag.
            let next = it.next_if(|n| !n.starts_with('-')).cloned();
            if let Some(name) = inline.or(next) {
                a.name = name;
            }
            continue;
        }
        let mut value = || {
            inline
                .clone()
                .or_else(|| it.next().cloned())
                .ok_or_else(|| LabError::input(format!("{flag}: needs a value")))
        };
        match flag {
            "--help" | "-h" => return Ok(None),
            "--sim" => a.sim = true,
            "--print" => a.print = true,
            "--quiet" | "-q" => a.quiet = true,
            "--family-seed" => a.family_seed = number(flag, &value()?)?,
            "--seeds" => a.seeds = Some(seeds(&value()?)?),
            "--jobs" => {
                a.jobs = number(flag, &value()?)?.clamp(1, 256) as usize;
            }
            "--pickers" => a.pickers = Some(parse_pickers(&value()?)?),
            "--case" => {
                let v = value()?;
                a.cases = Some(v.split(',').map(|s| s.trim().to_string()).collect());
            }
            "--duration" => {
                let v = value()?;
                let d = super::super::scenario::parse_duration(&v)
                    .map_err(|e| LabError::input(format!("--duration: {e}")))?;
                if d < Duration::from_secs(1) {
                    return Err(LabError::input("--duration: at least 1s with --family"));
                }
                a.duration = Some(d);
            }
            "--json" => a.json = Some(PathBuf::from(value()?)),
            "--report" => {
                let v = value()?;
                a.report = Some((v != "none").then(|| PathBuf::from(v)));
            }
            other => {
                return Err(LabError::input(format!(
                    "unknown flag \"{other}\" with --family\n\n{USAGE}"
                )));
            }
        }
    }
    Ok(Some(a))
}

fn number(flag: &str, v: &str) -> Result<u64, LabError> {
    v.trim()
        .parse()
        .map_err(|_| LabError::input(format!("{flag}: \"{v}\" is not an integer in 0..2^64")))
}

/// `1-3` or `1,2,5` (at most 100 seeds).
fn seeds(v: &str) -> Result<Vec<u64>, LabError> {
    let list: Vec<u64> = match v.split_once('-') {
        Some((a, b)) => {
            let (a, b) = (number("--seeds", a)?, number("--seeds", b)?);
            if b < a || b - a >= 100 {
                return Err(LabError::input(format!(
                    "--seeds: \"{v}\": give A-B with A <= B and at most 100 seeds"
                )));
            }
            (a..=b).collect()
        }
        None => v
            .split(',')
            .filter(|s| !s.trim().is_empty())
            .map(|s| number("--seeds", s))
            .collect::<Result<_, _>>()?,
    };
    if list.is_empty() || list.len() > 100 {
        return Err(LabError::input("--seeds: list 1 to 100 seeds"));
    }
    Ok(list)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn args(s: &str) -> Result<Option<FamilyArgs>, LabError> {
        parse(&s.split_whitespace().map(String::from).collect::<Vec<_>>())
    }

    #[test]
    fn the_name_is_optional_and_flags_parse() {
        let a = args("--family --seeds 1-3 --quiet").unwrap().unwrap();
        assert_eq!(
            (a.name.as_str(), a.seeds, a.quiet),
            ("all", Some(vec![1, 2, 3]), true)
        );
        let a = args("--family quick --family-seed 2 --seeds 4,7 --jobs 1")
            .unwrap()
            .unwrap();
        assert_eq!((a.name.as_str(), a.family_seed, a.jobs), ("quick", 2, 1));
        assert_eq!(a.seeds, Some(vec![4, 7]));
        let a = args("--family=http --sim --case l01,lan-5-open --report none")
            .unwrap()
            .unwrap();
        assert_eq!((a.name.as_str(), a.sim), ("http", true));
        assert_eq!(a.cases.unwrap(), ["l01", "lan-5-open"]);
        assert_eq!(a.report, Some(None));
        assert!(args("--family --help").unwrap().is_none());
    }

    #[test]
    fn bad_flags_name_themselves() {
        // (command line, part of the error)
        let cases = [
            ("--family --seeds 3-1", "--seeds"),
            ("--family --seeds 1-1000", "at most 100"),
            ("--family --seeds x", "--seeds"),
            ("--family --family-seed -1", "--family-seed"),
            ("--family --duration 0s", "--duration"),
            ("--family --pickers fastest", "--pickers"),
            ("--family --peers nginx", "unknown flag \"--peers\""),
            ("--family --json", "--json: needs a value"),
        ];
        for (line, want) in cases {
            let e = args(line).expect_err(line);
            assert!(e.input && e.message.contains(want), "{line}: {}", e.message);
        }
    }
}
