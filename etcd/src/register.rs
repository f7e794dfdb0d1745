//! The replica's side: register under the target with a lease, and keep
//! the lease alive until the guard is dropped.

use std::fmt;
use std::sync::atomic::{AtomicI64, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use etcd_client::{Client, PutOptions};
use tokio::sync::watch;
use tokio::task::JoinHandle;
use tower_lb::ConfigError;
use tower_lb::retry::Backoff;

use crate::source::DEFAULT_REQUEST_TIMEOUT;
use crate::value::Endpoint;

/// etcd's longest lease TTL (`MaxLeaseTTL` in its lessor: 9,000,000,000 s).
pub const MAX_TTL: Duration = Duration::from_secs(9_000_000_000);

/// Bound on revoking at shutdown: a replica that cannot reach etcd leaves
/// when its lease expires instead.
const REVOKE_TIMEOUT: Duration = Duration::from_secs(2);

/// Delays between attempts to reach etcd again when keeping alive fails:
/// 100 ms doubling to 1 s, so a registration is back within a second of
/// etcd, well inside any TTL.
const RETRY_BACKOFF: (Duration, Duration) = (Duration::from_millis(100), Duration::from_secs(1));

/// Why [`register`] failed.
#[derive(Debug)]
pub enum RegisterError {
    /// The target or the TTL was refused.
    Config(ConfigError),
    /// etcd refused the lease or the key, or could not be reached.
    Etcd(etcd_client::Error),
}

impl fmt::Display for RegisterError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            RegisterError::Config(e) => write!(f, "{e}"),
            RegisterError::Etcd(e) => write!(f, "registering in etcd: {e}"),
        }
    }
}

impl std::error::Error for RegisterError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            RegisterError::Config(e) => Some(e),
            RegisterError::Etcd(e) => Some(e),
        }
    }
}

impl From<etcd_client::Error> for RegisterError {
    fn from(e: etcd_client::Error) -> Self {
        RegisterError::Etcd(e)
    }
}

/// What the guard tells its keep-alive task.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Stop {
    Running,
    /// Revoke the lease (the key goes with it), then end.
    Revoke,
    /// End without revoking: the lease runs out as if the replica died.
    Expire,
}

/// What the guard and its task share.
struct Shared {
    client: Client,
    key: String,
    value: Mutex<Vec<u8>>,
    lease: AtomicI64,
    ttl: i64,
    rejoins: AtomicU64,
}

impl Shared {
    /// Grants a lease and writes the key under it, within
    /// [`DEFAULT_REQUEST_TIMEOUT`].
    async fn join(&self) -> Result<(), etcd_client::Error> {
        let bound = DEFAULT_REQUEST_TIMEOUT;
        match tokio::time::timeout(bound, self.grant_and_put()).await {
            Ok(joined) => joined,
            Err(_) => Err(etcd_client::Error::Internal(format!(
                "registering {:?} timed out after {bound:?}",
                self.key
            ))),
        }
    }

    async fn grant_and_put(&self) -> Result<(), etcd_client::Error> {
        let mut client = self.client.clone();
        let lease = client.lease_grant(self.ttl, None).await?.id();
        let value = self.value.lock().unwrap_or_else(|p| p.into_inner()).clone();
        let put = PutOptions::new().with_lease(lease);
        if let Err(e) = client.put(self.key.as_str(), value, Some(put)).await {
            let _ = client.lease_revoke(lease).await;
            return Err(e);
        }
        self.lease.store(lease, Ordering::Relaxed);
        Ok(())
    }
}

/// Registers `endpoint` under `target` (the key `target/<addr>`, as
/// gRPC-go's endpoint manager writes it) with a lease of `ttl`, and keeps
/// the lease alive from a spawned task until the returned guard is dropped
/// or [revoked](Registration::revoke).
///
/// The key lives only while its lease does: a replica that crashes (or
/// loses etcd for longer than `ttl`) leaves every balancer's pool when the
/// lease expires. The task renews the lease every third of its TTL, as
/// etcd's Go client does; when a renewal finds the lease gone (it expired
/// while etcd was unreachable), it grants a new one and writes the key
/// again ([`rejoins`](Registration::rejoins) counts those).
///
/// etcd rounds `ttl` up to whole seconds and raises it to its minimum
/// (1.5 × its election timeout: 2 s with default timings).
///
/// ```no_run
/// # async fn run() -> Result<(), Box<dyn std::error::Error>> {
/// use std::time::Duration;
/// use tower_lb_etcd::{Endpoint, register};
///
/// let client = etcd_client::Client::connect(["http://127.0.0.1:2379"], None).await?;
/// let me = Endpoint::new("10.0.0.7:8080".parse()?).zone("eu-west-1a");
/// let registration = register(&client, "services/cart", me, Duration::from_secs(10)).await?;
/// // ... serve ...
/// registration.revoke().await?; // leave every pool now
/// # Ok(()) }
/// ```
///
/// Needs a tokio runtime.
///
/// # Errors
///
/// [`RegisterError::Config`] naming `etcd.target` (see
/// [`Builder::build`](crate::Builder::build)) or `etcd.ttl` (under a
/// second or over [`MAX_TTL`]); [`RegisterError::Etcd`] if the lease or the
/// key could not be written.
pub async fn register(
    client: &Client,
    target: &str,
    endpoint: Endpoint,
    ttl: Duration,
) -> Result<Registration, RegisterError> {
    crate::check_target(target).map_err(RegisterError::Config)?;
    if ttl < Duration::from_secs(1) || ttl > MAX_TTL {
        return Err(RegisterError::Config(ConfigError::new(
            "etcd.ttl",
            ttl,
            "a duration from 1 s to 9,000,000,000 s",
        )));
    }
    // Whole seconds, rounded up; bounded by MAX_TTL, so it fits.
    let ttl = i64::try_from(ttl.as_secs() + u64::from(ttl.subsec_nanos() > 0)).unwrap_or(i64::MAX);
    let shared = Arc::new(Shared {
        client: client.clone(),
        key: format!("{target}/{}", endpoint.addr()),
        value: Mutex::new(endpoint.to_json()),
        lease: AtomicI64::new(0),
        ttl,
        rejoins: AtomicU64::new(0),
    });
    shared.join().await?;
    let (stop, stopped) = watch::channel(Stop::Running);
    let task = tokio::spawn(keep_alive(shared.clone(), stopped));
    Ok(Registration {
        shared,
        stop,
        task: Some(task),
    })
}

/// A replica's registration: the key stays while this guard lives.
/// Dropping it stops renewing and revokes the lease in the background
/// (the key is deleted at once); [`revoke`](Self::revoke) does the same
/// and waits; [`let_expire`](Self::let_expire) only stops renewing, as a
/// crash would.
#[must_use = "dropping a Registration removes the endpoint"]
pub struct Registration {
    shared: Arc<Shared>,
    stop: watch::Sender<Stop>,
    task: Option<JoinHandle<Result<(), etcd_client::Error>>>,
}

impl fmt::Debug for Registration {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Registration")
            .field("key", &self.shared.key)
            .field("lease", &self.lease())
            .field("rejoins", &self.rejoins())
            .finish_non_exhaustive()
    }
}

impl Registration {
    /// The key written: `target/<addr>`.
    pub fn key(&self) -> &str {
        &self.shared.key
    }

    /// The lease the key is held by now (a new one after a rejoin).
    pub fn lease(&self) -> i64 {
        self.shared.lease.load(Ordering::Relaxed)
    }

    /// The TTL etcd was asked for, in seconds.
    pub fn ttl_secs(&self) -> i64 {
        self.shared.ttl
    }

    /// How often the lease was found gone and the key written again.
    pub fn rejoins(&self) -> u64 {
        self.shared.rejoins.load(Ordering::Relaxed)
    }

    /// Writes a new value under the same key and lease (to mark the
    /// endpoint draining before leaving, or change its weight); a rejoin
    /// writes it too. The key keeps the address it was registered with.
    ///
    /// # Errors
    ///
    /// etcd's, if the write failed (the new value is still kept for the
    /// next rejoin).
    pub async fn update(&self, endpoint: Endpoint) -> Result<(), etcd_client::Error> {
        let value = endpoint.to_json();
        *self.shared.value.lock().unwrap_or_else(|p| p.into_inner()) = value.clone();
        let put = PutOptions::new().with_lease(self.lease());
        let mut client = self.shared.client.clone();
        client.put(self.key(), value, Some(put)).await.map(drop)
    }

    /// Revokes the lease, which deletes the key, and waits for it.
    ///
    /// # Errors
    ///
    /// etcd's, if the revoke failed or took over 2 s (the lease then
    /// expires on its own).
    pub async fn revoke(mut self) -> Result<(), etcd_client::Error> {
        self.stop.send_replace(Stop::Revoke);
        match self.task.take() {
            Some(task) => task
                .await
                .map_err(|e| etcd_client::Error::Internal(e.to_string()))?,
            None => Ok(()),
        }
    }

    /// Stops renewing without revoking: the key stays until the lease
    /// expires, within its TTL, as if the replica had crashed.
    pub fn let_expire(mut self) {
        self.stop.send_replace(Stop::Expire);
        self.task.take();
    }
}

impl Drop for Registration {
    fn drop(&mut self) {
        if self.task.is_some() {
            self.stop.send_replace(Stop::Revoke);
        }
    }
}

/// Renews the lease every third of its TTL until told to stop; rejoins
/// when the lease is gone; retries with backoff when etcd is away.
async fn keep_alive(
    shared: Arc<Shared>,
    mut stop: watch::Receiver<Stop>,
) -> Result<(), etcd_client::Error> {
    let backoff = Backoff::new(RETRY_BACKOFF.0, RETRY_BACKOFF.1);
    let mut retry = 0u32;
    loop {
        let outcome = tokio::select! {
            outcome = renew(&shared) => outcome,
            _ = stop.wait_for(|s| *s != Stop::Running) => break,
        };
        let delay = match outcome {
            Renewal::Gone => {
                let joined = tokio::select! {
                    joined = shared.join() => joined,
                    _ = stop.wait_for(|s| *s != Stop::Running) => break,
                };
                if joined.is_ok() {
                    shared.rejoins.fetch_add(1, Ordering::Relaxed);
                    retry = 0;
                    continue;
                }
                backoff.delay(retry)
            }
            Renewal::Failed { renewed } => {
                if renewed {
                    retry = 0;
                }
                backoff.delay(retry)
            }
        };
        retry = retry.saturating_add(1);
        tokio::select! {
            () = tokio::time::sleep(delay) => {}
            _ = stop.wait_for(|s| *s != Stop::Running) => break,
        }
    }
    if *stop.borrow() != Stop::Revoke {
        return Ok(());
    }
    let mut client = shared.client.clone();
    let lease = shared.lease.load(Ordering::Relaxed);
    match tokio::time::timeout(REVOKE_TIMEOUT, client.lease_revoke(lease)).await {
        Ok(revoked) => revoked.map(drop),
        Err(_) => Err(etcd_client::Error::Internal(format!(
            "revoking lease {lease} timed out after {REVOKE_TIMEOUT:?}"
        ))),
    }
}

/// How a keep-alive stream ended.
enum Renewal {
    /// etcd no longer has the lease (TTL 0): write the key again.
    Gone,
    /// The stream failed or stalled; `renewed` if it renewed at least once.
    Failed { renewed: bool },
}

/// Opens a keep-alive stream and renews through it every third of the
/// TTL until it fails.
async fn renew(shared: &Shared) -> Renewal {
    let third = Duration::from_secs(u64::try_from(shared.ttl).unwrap_or(1)) / 3;
    let lease = shared.lease.load(Ordering::Relaxed);
    let mut client = shared.client.clone();
    let opened = tokio::time::timeout(third, client.lease_keep_alive(lease)).await;
    let (mut keeper, mut stream) = match opened {
        Ok(Ok(opened)) => opened,
        // etcd-client's words for a keep-alive answered with TTL 0.
        Ok(Err(etcd_client::Error::LeaseKeepAliveError(e))) if e.contains("not found") => {
            return Renewal::Gone;
        }
        Ok(Err(_)) | Err(_) => return Renewal::Failed { renewed: false },
    };
    let mut renewed = false;
    loop {
        tokio::time::sleep(third).await;
        if keeper.keep_alive().await.is_err() {
            return Renewal::Failed { renewed };
        }
        match tokio::time::timeout(third, stream.message()).await {
            Ok(Ok(Some(answer))) if answer.ttl() > 0 => renewed = true,
            Ok(Ok(Some(_))) => return Renewal::Gone,
            Ok(Ok(None) | Err(_)) | Err(_) => return Renewal::Failed { renewed },
        }
    }
}
