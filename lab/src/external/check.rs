//! The check before a run: one request to every replica, at once, each
//! within [`CHECK_TIMEOUT`]. A replica that cannot be reached, or answers
//! 400 or more, refuses the whole run: nothing else is sent.

use std::time::{Duration, Instant};

use bytes::Bytes;
use http::uri::{Scheme, Uri};
use http_body_util::{BodyExt, Full};
use hyper_util::client::legacy::Client;
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::rt::TokioExecutor;
use tokio::task::JoinSet;

use super::error::{TargetError, Unreached, Why};
use crate::run::endpoint::{CONNECT_TIMEOUT, HttpClient};
use crate::scenario::target::{Replica, TargetSpec, replica};

/// How long one replica has to answer the check, body included: a replica
/// that takes longer for one request is not one to load-test blind.
pub const CHECK_TIMEOUT: Duration = Duration::from_secs(2);

/// A replica that answered the check.
#[derive(Debug, Clone)]
pub struct Reached {
    /// Its name, `host:port`.
    pub name: String,
    /// The answer's status.
    pub status: u16,
    /// The answer's time, body included.
    pub took: Duration,
}

/// The check's request as a person reads it: `GET /health`.
pub fn request_line(t: &TargetSpec) -> String {
    format!("{} {}", t.method.http(), t.path)
}

/// Sends `t`'s request once to every replica, at once, each within
/// `timeout`; their answers in URL order, or every replica that failed.
///
/// # Errors
///
/// [`TargetError::BadUrl`] for a URL that cannot be sent to (nothing is
/// sent then), [`TargetError::BadRequest`] for a path or header that is
/// not one, [`TargetError::Unreachable`] naming every replica that could
/// not be reached, did not answer within `timeout` or answered 400 or
/// more.
pub async fn reach(t: &TargetSpec, timeout: Duration) -> Result<Vec<Reached>, TargetError> {
    for url in &t.urls {
        replica(url).map_err(|problem| TargetError::BadUrl {
            url: url.clone(),
            problem,
        })?;
    }
    // Each URL parses: what is left is the list's (none, or one twice).
    let replicas = t.replicas().map_err(|problem| TargetError::BadUrl {
        url: t.urls.join(","),
        problem,
    })?;
    let path = t.path_and_query().map_err(TargetError::BadRequest)?;
    let headers = t.header_map().map_err(TargetError::BadRequest)?;
    let mut connector = HttpConnector::new();
    connector.set_connect_timeout(Some(CONNECT_TIMEOUT));
    let client: HttpClient = Client::builder(TokioExecutor::new()).build(connector);
    let mut set = JoinSet::new();
    for (i, r) in replicas.iter().enumerate() {
        let mut req = http::Request::new(Full::new(Bytes::from(t.body.clone())));
        *req.method_mut() = t.method.http();
        *req.headers_mut() = headers.clone();
        let mut uri = Uri::from(path.clone()).into_parts();
        uri.scheme = Some(Scheme::HTTP);
        uri.authority = Some(r.authority.clone());
        *req.uri_mut() = Uri::from_parts(uri).map_err(|e| TargetError::BadUrl {
            url: r.url.clone(),
            problem: format!("\"{}\" with path {}: {e}", r.url, t.path),
        })?;
        let client = client.clone();
        set.spawn(async move { (i, one(&client, req, timeout).await) });
    }
    let mut answers = vec![Err(Why::Timeout(timeout)); replicas.len()];
    while let Some(Ok((i, r))) = set.join_next().await {
        answers[i] = r;
    }
    sort(t, &replicas, answers)
}

/// The answers in URL order, or the failures.
fn sort(
    t: &TargetSpec,
    replicas: &[Replica],
    answers: Vec<Result<(u16, Duration), Why>>,
) -> Result<Vec<Reached>, TargetError> {
    let mut reached = Vec::new();
    let mut failed = Vec::new();
    for (r, a) in replicas.iter().zip(answers) {
        match a {
            Ok((status, _)) if status >= 400 => failed.push(Unreached {
                url: r.url.clone(),
                why: Why::Status(status),
            }),
            Ok((status, took)) => reached.push(Reached {
                name: r.name.clone(),
                status,
                took,
            }),
            Err(why) => failed.push(Unreached {
                url: r.url.clone(),
                why,
            }),
        }
    }
    if failed.is_empty() {
        return Ok(reached);
    }
    Err(TargetError::Unreachable {
        request: request_line(t),
        failed,
        of: replicas.len(),
    })
}

/// One check: the status and time of the answer, body read.
async fn one(
    client: &HttpClient,
    req: http::Request<Full<Bytes>>,
    timeout: Duration,
) -> Result<(u16, Duration), Why> {
    let start = Instant::now();
    let answer = async {
        let res = client
            .request(req)
            .await
            .map_err(|e| Why::Connect(chain(&e)))?;
        let status = res.status().as_u16();
        res.into_body()
            .collect()
            .await
            .map_err(|e| Why::Connect(chain(&e)))?;
        Ok(status)
    };
    match tokio::time::timeout(timeout, answer).await {
        Ok(Ok(status)) => Ok((status, start.elapsed())),
        Ok(Err(why)) => Err(why),
        Err(_) => Err(Why::Timeout(timeout)),
    }
}

/// An error and its causes, innermost last: hyper-util's "client error
/// (Connect)" says little; the cause ("Connection refused") says what.
fn chain(e: &(dyn std::error::Error + 'static)) -> String {
    let mut parts = vec![e.to_string()];
    let mut cause = e.source();
    while let Some(c) = cause {
        let s = c.to_string();
        if !parts.iter().any(|p| p.contains(&s)) {
            parts.push(s);
        }
        cause = c.source();
    }
    parts.join(": ")
}
