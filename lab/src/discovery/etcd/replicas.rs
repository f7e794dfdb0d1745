//! A row's replicas in etcd: each one's registration (granted, kept alive,
//! revoked or left to expire) and the times of what happened to it.

use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use etcd_client::Client;
use tokio::time::Instant;
use tower_lb_etcd::{Endpoint, Registration, register};

use crate::report::registry::Registered;
use crate::report::round;

/// When things happened to one replica.
#[derive(Debug, Default, Clone)]
pub struct Times {
    /// Its registration was sent (stamped once `register` succeeded).
    pub registered: Option<Instant>,
    /// Every balancer that may have it had it.
    pub in_pool: Option<Instant>,
    /// A balancer had sent it a request.
    pub first_pick: Option<Instant>,
    /// It crashed (`"crash"`) or revoked its lease (`"revoke"`).
    pub left: Option<(&'static str, Instant)>,
    /// A watch saw its key deleted.
    pub deleted: Option<Instant>,
    /// No balancer had it any more (after its leave).
    pub out_of_pool: Option<Instant>,
}

/// The row's replicas: their keys' values, registrations and times.
pub struct Replicas {
    client: Client,
    /// The key prefix.
    pub target: String,
    ttl: Duration,
    /// Each backend's address (what its key names).
    pub addrs: Vec<SocketAddr>,
    values: Vec<Endpoint>,
    regs: Mutex<Vec<Option<Registration>>>,
    times: Mutex<Vec<Times>>,
    errors: Mutex<Vec<String>>,
}

impl Replicas {
    /// Replicas at `addrs` whose keys will hold `values`.
    pub fn new(
        client: Client,
        target: String,
        ttl: Duration,
        addrs: Vec<SocketAddr>,
        values: Vec<Endpoint>,
    ) -> Self {
        let n = addrs.len();
        Self {
            client,
            target,
            ttl,
            addrs,
            values,
            regs: Mutex::new((0..n).map(|_| None).collect()),
            times: Mutex::new(vec![Times::default(); n]),
            errors: Mutex::new(Vec::new()),
        }
    }

    /// The backend whose key names `addr`.
    pub fn index(&self, addr: SocketAddr) -> Option<usize> {
        self.addrs.iter().position(|a| *a == addr)
    }

    /// Registers backend `i` under a lease (its keep-alive runs until it
    /// is revoked or crashes).
    ///
    /// # Errors
    ///
    /// tower-lb-etcd's, as text (also kept for the report).
    pub async fn join(&self, i: usize) -> Result<(), String> {
        // Stamped when the registration is sent, not when its answer comes
        // back: a watcher may see the key before the registering side hears
        // that its put succeeded.
        let sent = Instant::now();
        match register(&self.client, &self.target, self.values[i].clone(), self.ttl).await {
            Ok(reg) => {
                self.edit(i, |t| t.registered = Some(sent));
                lock(&self.regs)[i] = Some(reg);
                Ok(())
            }
            Err(e) => {
                let e = format!("registering backend {i}: {e}");
                self.error(e.clone());
                Err(e)
            }
        }
    }

    /// Keeps an error for the report.
    pub fn error(&self, e: String) {
        lock(&self.errors).push(e);
    }

    /// Backend `i` crashes: its keep-alive stops and the lease is never
    /// revoked.
    pub fn crash(&self, i: usize) {
        if let Some(reg) = lock(&self.regs)[i].take() {
            reg.let_expire();
        }
        self.edit(i, |t| t.left = Some(("crash", Instant::now())));
    }

    /// Backend `i` leaves as a replica shutting down does: it revokes its
    /// lease (the key goes at once).
    pub fn revoke(&self, i: usize) {
        self.edit(i, |t| t.left = Some(("revoke", Instant::now())));
        if let Some(reg) = lock(&self.regs)[i].take() {
            // Dropping it revokes the lease in the background.
            drop(reg);
        }
    }

    /// Records something about backend `i`.
    pub fn edit(&self, i: usize, f: impl FnOnce(&mut Times)) {
        if let Some(t) = lock(&self.times).get_mut(i) {
            f(t);
        }
    }

    /// The times so far.
    pub fn times(&self) -> Vec<Times> {
        lock(&self.times).clone()
    }

    /// Revokes every registration left, and returns what happened, in
    /// seconds from `measured`, with the backends' `names`.
    pub fn finish(&self, measured: Instant, names: &[String]) -> (Vec<Registered>, Vec<String>) {
        lock(&self.regs).clear();
        let s = |t: Option<Instant>| {
            t.map(|t| {
                let x = match t.checked_duration_since(measured) {
                    Some(d) => d.as_secs_f64(),
                    None => -(measured - t).as_secs_f64(),
                };
                round(x, 3)
            })
        };
        let out = lock(&self.times)
            .iter()
            .zip(names)
            .filter(|(t, _)| t.registered.is_some())
            .map(|(t, name)| Registered {
                backend: name.clone(),
                registered_s: s(t.registered),
                in_pool_s: s(t.in_pool),
                first_pick_s: s(t.first_pick),
                leave: t.left.map(|(how, _)| how.to_string()),
                left_s: s(t.left.map(|(_, at)| at)),
                key_deleted_s: s(t.deleted),
                out_of_pool_s: s(t.out_of_pool),
            })
            .collect();
        (out, lock(&self.errors).clone())
    }
}

/// The lock's data, poisoned or not (nothing here panics while holding it).
fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

/// Keeps `replicas` shared with the tasks that act on them.
pub type Shared = Arc<Replicas>;
