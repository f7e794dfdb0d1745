//! The axes a case is a point of: replicas, client balancers, workers, the
//! service-time mix, the slowdown pattern, the load and the latency scale.

use std::fmt;
use std::time::Duration;

use serde::Serialize;

/// Replicas in a generated case (the range).
pub const REPLICAS: (u32, u32) = (3, 100);
/// Client balancers in a generated case.
pub const CLIENTS: (u32, u32) = (1, 50);
/// Workers per replica a generated case draws from.
pub const WORKERS: [u32; 5] = [1, 2, 4, 8, 16];
/// Median service time of a generated case's fastest class: sub-millisecond
/// LAN replicas up to 100 ms.
pub const SCALE: (Duration, Duration) = (Duration::from_micros(200), Duration::from_millis(100));
/// Open-loop utilization of a generated case.
pub const UTILIZATION: (f64, f64) = (0.5, 0.95);
/// A lognormal mix's p99 over its median, drawn in this range.
pub const SPREAD: (f64, f64) = (1.5, 6.0);
/// Two classes: the slow class's service time over the fast one's, drawn
/// in this range ("up to 10× apart").
pub const CLASS_RATIO: (f64, f64) = (2.0, 10.0);
/// The p99 over the median of both classes of a two-class mix
/// (`noisy-fleet`'s replicas).
pub const CLASS_SPREAD: f64 = 3.0;
/// How much slower the persistently slow replica is.
pub const SLOW_FACTOR: u32 = 10;

/// A point of the family: everything that sets a case's fleet and load.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Axes {
    /// Replicas.
    pub replicas: u32,
    /// Independent client balancers (each sees only its share of the
    /// traffic).
    pub clients: u32,
    /// Workers per replica (requests served at once; the rest queue).
    pub workers: u32,
    /// The fast class's median service time (in the JSON: `scale_ms`).
    #[serde(rename = "scale_ms", serialize_with = "as_ms")]
    pub scale: Duration,
    /// How service times differ between replicas and requests.
    pub mix: Mix,
    /// What slows replicas down, and when.
    pub pattern: Pattern,
    /// Who sends.
    pub load: Loop,
}

fn as_ms<S: serde::Serializer>(d: &Duration, s: S) -> Result<S::Ok, S::Error> {
    s.serialize_f64(d.as_secs_f64() * 1e3)
}

/// The service-time mix.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
#[serde(rename_all = "snake_case", tag = "kind")]
pub enum Mix {
    /// Every replica takes exactly the same fixed time.
    Identical,
    /// Every replica draws each service time from the same lognormal,
    /// with this p99 over its median.
    Lognormal {
        /// p99 / median.
        spread: f64,
    },
    /// Two classes of replicas, lognormal ([`CLASS_SPREAD`]); the slow
    /// class's median is `ratio` times the fast one's.
    TwoClasses {
        /// Slow median / fast median.
        ratio: f64,
        /// Share of the replicas in the slow class.
        slow_share: f64,
    },
}

/// What slows replicas down.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Pattern {
    /// Nothing: steady replicas.
    None,
    /// Every 2 s a random quarter of the pool runs 1, 2 or 4× slower
    /// (`noisy-fleet`'s `slowdown`).
    Rotating,
    /// Half the pool shares its hosts with antagonists: each of them runs
    /// 1 to 3× slower, drawn again every 500 ms.
    Antagonists,
    /// One replica [`SLOW_FACTOR`]× slower than its class for the whole
    /// run: a grey failure no health check sees.
    SlowReplica,
    /// One replica answers every request with 503 in 1 ms from a third of
    /// the measured window on.
    FailFast,
}

/// Who sends.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
#[serde(rename_all = "snake_case", tag = "kind")]
pub enum Loop {
    /// Closed loop: `users` who wait for their answer, then send again at
    /// once.
    Closed {
        /// Users.
        users: u32,
    },
    /// Open loop: Poisson arrivals at this share of the replicas'
    /// capacity (with a failing replica: of the live replicas').
    Open {
        /// Share of capacity.
        utilization: f64,
    },
    /// Open loop at a fixed rate, arrivals per second.
    Rate {
        /// Arrivals per second.
        per_s: f64,
    },
}

impl Axes {
    /// Whether the replicas are identical in distribution and nothing
    /// slows them: there every replica's fair share is `1 / replicas`, and
    /// the share bounds apply.
    pub fn identical(&self) -> bool {
        self.pattern == Pattern::None && !matches!(self.mix, Mix::TwoClasses { .. })
    }
}

impl fmt::Display for Mix {
    fn fmt(&self, f: &mut fmt::Formatter) -> fmt::Result {
        match self {
            Mix::Identical => f.write_str("identical"),
            Mix::Lognormal { spread } => write!(f, "lognormal p99 {spread:.1}x"),
            Mix::TwoClasses { ratio, slow_share } => {
                write!(
                    f,
                    "two classes {ratio:.1}x apart ({:.0}% slow)",
                    slow_share * 100.0
                )
            }
        }
    }
}

impl fmt::Display for Pattern {
    fn fmt(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str(match self {
            Pattern::None => "steady",
            Pattern::Rotating => "a quarter slowed every 2 s",
            Pattern::Antagonists => "antagonists on half",
            Pattern::SlowReplica => "one replica 10x slower",
            Pattern::FailFast => "one replica fails fast",
        })
    }
}

impl fmt::Display for Loop {
    fn fmt(&self, f: &mut fmt::Formatter) -> fmt::Result {
        match self {
            Loop::Closed { users } => write!(f, "closed loop, {users} users"),
            Loop::Open { utilization } => write!(f, "open loop at {utilization:.2}"),
            Loop::Rate { per_s } => write!(f, "open loop at {per_s:.0}/s"),
        }
    }
}

impl fmt::Display for Axes {
    fn fmt(&self, f: &mut fmt::Formatter) -> fmt::Result {
        write!(
            f,
            "{} replicas at {}, {} worker{}, {}, {}; {} client balancer{}, {}",
            self.replicas,
            super::toml::duration(self.scale),
            self.workers,
            if self.workers == 1 { "" } else { "s" },
            self.mix,
            self.pattern,
            self.clients,
            if self.clients == 1 { "" } else { "s" },
            self.load
        )
    }
}
