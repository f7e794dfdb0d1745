//! [`TargetError`]: a target the lab refuses before sending it anything.

use std::fmt;
use std::time::Duration;

use crate::error::LabError;

/// Why the lab will not run against a target. Every variant is bad input
/// (exit status 2): nothing has been sent but the checks.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum TargetError {
    /// A URL the lab cannot send to.
    BadUrl {
        /// The URL as given.
        url: String,
        /// What is wrong with it, and how to write it.
        problem: String,
    },
    /// A path or header that cannot be sent (its problem).
    BadRequest(String),
    /// Replicas that did not answer the check; no traffic was sent.
    Unreachable {
        /// The check's request (`GET /health`).
        request: String,
        /// Each replica that failed it, in the order given.
        failed: Vec<Unreached>,
        /// How many replicas were checked.
        of: usize,
    },
}

/// One replica that failed the check.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Unreached {
    /// Its URL as given.
    pub url: String,
    /// What happened.
    pub why: Why,
}

/// What a failed check saw.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Why {
    /// No connection, or no answer on it (the cause, e.g. "Connection
    /// refused").
    Connect(String),
    /// No answer within the check's timeout.
    Timeout(Duration),
    /// An answer of 400 or more: every request of the run would be an
    /// error.
    Status(u16),
}

impl fmt::Display for Why {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Why::Connect(e) => write!(f, "cannot reach it ({e})"),
            Why::Timeout(t) => write!(f, "no answer within {t:?}"),
            Why::Status(s) => write!(f, "answered {s}"),
        }
    }
}

impl fmt::Display for TargetError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            TargetError::BadUrl { url: _, problem } => write!(f, "--target: {problem}"),
            TargetError::BadRequest(problem) => write!(f, "--target: the request: {problem}"),
            TargetError::Unreachable {
                request,
                failed,
                of,
            } => {
                writeln!(
                    f,
                    "--target: nothing was sent: {} of {of} replica{} failed the check ({request}):",
                    failed.len(),
                    if *of == 1 { "" } else { "s" }
                )?;
                for u in failed {
                    writeln!(f, "  {}: {}", u.url, u.why)?;
                }
                let status = failed.iter().any(|u| matches!(u.why, Why::Status(_)));
                write!(
                    f,
                    "check each address and that the replica is up{}, or leave it out of --target",
                    if status {
                        " and answers this request below 400 (--method, --path, --header)"
                    } else {
                        ""
                    }
                )
            }
        }
    }
}

impl std::error::Error for TargetError {}

impl From<TargetError> for LabError {
    fn from(e: TargetError) -> Self {
        LabError::input(e.to_string())
    }
}
