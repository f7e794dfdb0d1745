//! The churn harness: endpoints whose calls wait for the sequence, the
//! balancer, and the books kept on every pick.

use std::collections::{HashMap, HashSet, VecDeque};
use std::future::Future;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, OnceLock};
use std::task::{Context, Poll, Waker};
use std::time::Duration;

use proptest::prelude::*;
use tokio::sync::oneshot;
use tokio::task::JoinSet;
use tokio::time::Instant;
use tower::util::BoxCloneSyncService;
use tower::{Layer, Service, ServiceExt, service_fn};
use tower_lb::breaker::State;
use tower_lb::endpoint::EndpointState;
use tower_lb::health::HealthChange;
use tower_lb::outlier::OutlierDetection;
use tower_lb::pick::{AnyPicker, key_fn};
use tower_lb::retry::{self, CloneRequest, RetryLayer};
use tower_lb::{Balance, Handle};

use super::{Op, Req, Rule, Svc, rule};
use crate::stack;

/// One endpoint's service instance: what it received.
struct Backend {
    instance: u64,
    fail: AtomicBool,
    calls: AtomicU64,
}

/// The balancer's current members, read by the endpoints.
type Members = Box<dyn Fn() -> Vec<Arc<EndpointState>> + Send + Sync>;

/// Everything the endpoints share with the test.
#[derive(Default)]
struct World {
    /// Calls waiting for the sequence to complete them.
    waiting: Mutex<VecDeque<oneshot::Sender<()>>>,
    /// Which instance each call id reached first (its first attempt).
    received: Mutex<HashMap<u64, u64>>,
    /// Answer by themselves, in 1 ms (after churn stops).
    auto: AtomicBool,
    /// Each instance's endpoint state.
    states: Mutex<HashMap<u64, Arc<EndpointState>>>,
    /// The balancer's members now.
    members: OnceLock<Members>,
    /// Whether the balancer routes in panic (from its health events).
    in_panic: AtomicBool,
    /// Calls an endpoint should not have taken, and why.
    violations: Mutex<Vec<String>>,
}

impl World {
    /// Checks, as an attempt reaches `instance`, that it could take it. An
    /// attempt reaches its endpoint's service in the same poll that picked
    /// it (the harness polls each call once as it is made; the retry layer
    /// polls each new attempt at once), so what is read here is what the
    /// pick saw.
    fn check(&self, instance: u64) {
        let Some(state) = self
            .states
            .lock()
            .expect("not poisoned")
            .get(&instance)
            .cloned()
        else {
            return;
        };
        let members = self.members.get().map(|m| m()).unwrap_or_default();
        let mut why = Vec::new();
        if !members.iter().any(|s| Arc::ptr_eq(s, &state)) {
            why.push("removed");
        }
        if state.is_draining() && !members.iter().all(|s| s.is_draining()) {
            why.push("draining while another serves");
        }
        match state.breaker().map(|b| b.state()) {
            Some(State::ForcedOpen) => why.push("forced open"),
            Some(State::Open) => why.push("breaker open"),
            _ => {}
        }
        if state.is_ejected(Instant::now()) && !self.in_panic.load(Ordering::SeqCst) {
            why.push("ejected, outside panic");
        }
        if !why.is_empty() {
            self.violations
                .lock()
                .expect("not poisoned")
                .push(format!("instance {instance}: {}", why.join(", ")));
        }
    }
}

fn backend_service(b: Arc<Backend>, world: Arc<World>) -> Svc {
    BoxCloneSyncService::new(service_fn(move |req: Req| {
        world.check(b.instance);
        let (b, world) = (b.clone(), world.clone());
        async move {
            b.calls.fetch_add(1, Ordering::SeqCst);
            world
                .received
                .lock()
                .expect("not poisoned")
                .entry(req.id)
                .or_insert(b.instance);
            if b.fail.load(Ordering::SeqCst) {
                return Err(std::io::Error::other("down"));
            }
            if world.auto.load(Ordering::SeqCst) {
                // Equal, non-zero latencies: a latency-aware picker sees
                // endpoints that cost the same, not free ones.
                tokio::time::sleep(Duration::from_millis(1)).await;
            } else {
                let (tx, rx) = oneshot::channel();
                world.waiting.lock().expect("not poisoned").push_back(tx);
                let _ = rx.await;
            }
            Ok(b.instance)
        }
    }))
}
type Picker = AnyPicker<tower_lb::pick::KeyFn<fn(&Req) -> Option<u64>>>;
type Lb = Balance<u8, Svc, Picker>;
/// The README's retry layer over the balancer.
type Stack = <RetryLayer<CloneRequest> as Layer<Lb>>::Service;
type Outcome = Result<u64, retry::Error<tower_lb::Error<std::io::Error>>>;

fn request_key(r: &Req) -> Option<u64> {
    Some(r.key)
}

/// The harness: the balancer, its endpoints and what was checked.
pub(super) struct Churn {
    name: &'static str,
    svc: Stack,
    handle: Handle<u8, Svc, Picker, tower_lb::classify::ErrIsFailure>,
    world: Arc<World>,
    /// Current members' backends by key.
    members: HashMap<u8, Arc<Backend>>,
    /// Every instance ever made: its backend and endpoint state.
    instances: HashMap<u64, (Arc<Backend>, Arc<EndpointState>)>,
    /// The instance each call's first attempt was picked for.
    picked: HashMap<u64, u64>,
    /// Calls whose first attempt no endpoint took (the balancer refused
    /// it; a retry may reach one later).
    refused_first: HashSet<u64>,
    calls: JoinSet<Outcome>,
    /// Current members' weights by key.
    weights: HashMap<u8, u8>,
    next_id: u64,
    next_instance: u64,
}

impl Churn {
    /// A balancer with the final endpoints and weights of `other`, built
    /// afresh, its endpoints answering by themselves.
    fn fresh_like(other: &Churn) -> Self {
        let mut fresh = Churn::new(other.name);
        fresh.world.auto.store(true, Ordering::SeqCst);
        let mut keys: Vec<_> = other.weights.iter().map(|(&k, &w)| (k, w)).collect();
        keys.sort_unstable();
        for (k, w) in keys {
            fresh.insert(k, w);
            fresh.weights.insert(k, w);
        }
        fresh
    }

    pub(super) fn new(name: &'static str) -> Self {
        let key: fn(&Req) -> Option<u64> = request_key;
        let picker = AnyPicker::by_name(name, key_fn(key)).expect("a known picker");
        let outlier = OutlierDetection::builder()
            .interval(Duration::from_secs(1))
            .base_ejection_time(Duration::from_secs(2))
            .max_ejection_time(Duration::from_secs(10))
            .build()
            .expect("a valid config");
        let world = Arc::new(World::default());
        let events = world.clone();
        let lb: Lb = stack::balance()
            .picker(picker)
            .outlier_detection(outlier)
            .on_health_change(move |e| match e.change {
                HealthChange::PanicEntered { .. } => events.in_panic.store(true, Ordering::SeqCst),
                HealthChange::PanicLeft { .. } => events.in_panic.store(false, Ordering::SeqCst),
                _ => {}
            })
            .seed(5)
            .build()
            .expect("a valid balancer");
        let handle = lb.handle();
        let members = lb.handle();
        let _ = world.members.set(Box::new(move || {
            members.endpoints().into_iter().map(|(_, s)| s).collect()
        }));
        Self {
            name,
            svc: stack::retry_clone().layer(lb),
            handle,
            world,
            members: HashMap::new(),
            instances: HashMap::new(),
            picked: HashMap::new(),
            refused_first: HashSet::new(),
            calls: JoinSet::new(),
            weights: HashMap::new(),
            next_id: 0,
            next_instance: 0,
        }
    }

    fn state(&self, key: u8) -> Option<Arc<EndpointState>> {
        let b = self.members.get(&key)?;
        self.instances.get(&b.instance).map(|(_, s)| s.clone())
    }

    fn insert(&mut self, key: u8, weight: u8) {
        let b = Arc::new(Backend {
            instance: self.next_instance,
            fail: AtomicBool::new(false),
            calls: AtomicU64::new(0),
        });
        self.next_instance += 1;
        let svc = backend_service(b.clone(), self.world.clone());
        self.handle
            .insert_weighted(key, svc, f64::from(weight))
            .expect("a valid weight");
        let state = self
            .handle
            .endpoints()
            .into_iter()
            .find(|(k, _)| *k == key)
            .map(|(_, s)| s)
            .expect("the inserted endpoint");
        self.world
            .states
            .lock()
            .expect("not poisoned")
            .insert(b.instance, state.clone());
        self.instances.insert(b.instance, (b.clone(), state));
        self.members.insert(key, b);
    }

    pub(super) async fn apply(&mut self, op: &Op) -> Result<(), TestCaseError> {
        match *op {
            Op::Insert(k, w) => {
                self.insert(k, w);
                self.weights.insert(k, w);
            }
            Op::Remove(k) => {
                self.handle.remove(&k);
                self.members.remove(&k);
                self.weights.remove(&k);
            }
            Op::Reweight(k, w) => {
                let known = self
                    .handle
                    .set_weight(&k, f64::from(w))
                    .expect("a valid weight");
                if known {
                    self.weights.insert(k, w);
                }
            }
            Op::Drain(k, on) => {
                self.handle.set_draining(&k, on);
            }
            Op::Break(k, open) => {
                if let Some(s) = self.state(k)
                    && let Some(b) = s.breaker()
                {
                    if open {
                        b.force_open();
                    } else {
                        b.reset();
                    }
                }
            }
            Op::Fail(k, on) => {
                if let Some(b) = self.members.get(&k) {
                    b.fail.store(on, Ordering::SeqCst);
                }
            }
            Op::Pick(n) => {
                for _ in 0..n {
                    self.pick().await?;
                }
            }
            Op::Complete(n) => {
                for _ in 0..n {
                    let Some(tx) = self.world.waiting.lock().expect("not poisoned").pop_front()
                    else {
                        break;
                    };
                    let _ = tx.send(());
                }
                tokio::task::yield_now().await;
            }
            Op::Advance(ms) => tokio::time::sleep(Duration::from_millis(u64::from(ms))).await,
        }
        Ok(())
    }
}

impl Churn {
    /// One call: its first attempt's pick (which endpoint its picks moved
    /// on), and its first poll at once, so that the attempt reaches the
    /// endpoint's service, which checks it could take it, before anything
    /// else runs; then the call runs on (its retries are checked the same
    /// way).
    async fn pick(&mut self) -> Result<(), TestCaseError> {
        let id = self.next_id;
        self.next_id += 1;
        let req = Req::new(id);
        let before: Vec<(u64, u64)> = self
            .instances
            .iter()
            .map(|(&i, (_, s))| (i, s.picks()))
            .collect();
        let Ok(ready) = self.svc.ready().await else {
            return Ok(());
        };
        // The first attempt's pick happens here, in `call`.
        let mut call = Box::pin(ready.call(req));
        let mut cx = Context::from_waker(Waker::noop());
        let first = call.as_mut().poll(&mut cx);
        let moved: Vec<u64> = before
            .iter()
            .filter(|(i, p)| self.instances[i].1.picks() != *p)
            .map(|(i, _)| *i)
            .collect();
        let name = self.name;
        prop_assert!(
            moved.len() <= 1,
            "{name}: one call's first attempt, picks moved on {moved:?}"
        );
        if let Some(&instance) = moved.first() {
            self.picked.insert(id, instance);
        } else {
            self.refused_first.insert(id);
        }
        match first {
            Poll::Ready(out) => {
                self.calls.spawn(std::future::ready(out));
            }
            Poll::Pending => {
                self.calls.spawn(call);
            }
        }
        // Let the call run on (the task polls it again with its waker).
        tokio::task::yield_now().await;
        Ok(())
    }

    /// Churn stops: every endpoint serves again and every call ends; then
    /// the books must balance.
    pub(super) async fn settle(&mut self) -> Result<(), TestCaseError> {
        let name = self.name;
        for (&k, b) in &self.members {
            b.fail.store(false, Ordering::SeqCst);
            self.handle.set_draining(&k, false);
            if let Some((_, s)) = self.instances.get(&b.instance)
                && let Some(breaker) = s.breaker()
            {
                breaker.reset();
            }
        }
        self.world.auto.store(true, Ordering::SeqCst);
        loop {
            let waiting: Vec<_> = self
                .world
                .waiting
                .lock()
                .expect("not poisoned")
                .drain(..)
                .collect();
            for tx in waiting {
                let _ = tx.send(());
            }
            match self.calls.join_next().await {
                Some(Ok(_)) => {}
                Some(Err(e)) => prop_assert!(false, "{name}: a call panicked: {e}"),
                None => break,
            }
        }
        let violations = self.world.violations.lock().expect("not poisoned").clone();
        prop_assert!(
            violations.is_empty(),
            "{}: attempts reached endpoints that could not take them: {:?}",
            name,
            violations
        );
        // Each call's first attempt reached the endpoint picked for it; a
        // call whose first attempt was refused reached one only by a retry.
        let received = self.world.received.lock().expect("not poisoned").clone();
        for (id, instance) in &self.picked {
            prop_assert_eq!(
                received.get(id),
                Some(instance),
                "{}: call {} reached another endpoint than picked",
                name,
                id
            );
        }
        for id in received.keys() {
            prop_assert!(
                self.picked.contains_key(id) || self.refused_first.contains(id),
                "{name}: call {id} reached an endpoint nobody picked for it"
            );
        }
        for (b, s) in self.instances.values() {
            prop_assert_eq!(
                s.picks(),
                b.calls.load(Ordering::SeqCst),
                "{}: picks and calls",
                name
            );
            prop_assert_eq!(s.in_flight(), 0, "{}: a slot was kept", name);
        }
        Ok(())
    }

    /// Calls per current key over `n` calls made one at a time.
    async fn shares(&mut self, n: usize) -> HashMap<u8, usize> {
        let by_instance: HashMap<u64, u8> =
            self.members.iter().map(|(&k, b)| (b.instance, k)).collect();
        let mut counts = HashMap::new();
        for _ in 0..n {
            let id = self.next_id;
            self.next_id += 1;
            let req = Req::new(id);
            let Ok(ready) = self.svc.ready().await else {
                continue;
            };
            if let Ok(instance) = ready.call(req).await
                && let Some(&k) = by_instance.get(&instance)
            {
                *counts.entry(k).or_insert(0) += 1;
            }
        }
        counts
    }

    /// After churn: the picker's rule for the final endpoints and weights.
    pub(super) async fn check_shares(&mut self) -> Result<(), TestCaseError> {
        if self.members.is_empty() {
            return Ok(());
        }
        // Ejections (10 s at most), breakers and failure penalties behind,
        // and every latency estimate faded (a call held through the whole
        // sequence, up to 4 minutes, faded 60 decay times): the latency-
        // aware pickers explore through the idle decay (τ = 10 s) only.
        tokio::time::sleep(Duration::from_secs(600)).await;
        let n = 1_500;
        let counts = self.shares(n).await;
        let name = self.name;
        let fresh = match rule(name) {
            Rule::Fresh(_) => Some(Churn::fresh_like(self).shares(n).await),
            _ => None,
        };
        let total_w: f64 = self.weights.values().map(|&w| f64::from(w)).sum();
        let members = self.members.len() as f64;
        for &k in self.members.keys() {
            let got = *counts.get(&k).unwrap_or(&0) as f64 / n as f64;
            let w = f64::from(self.weights[&k]);
            match rule(name) {
                Rule::Weights(tol) => prop_assert!(
                    (got - w / total_w).abs() <= tol,
                    "{name}: key {k} share {got} for weight {w}/{total_w}: {counts:?} {:?}",
                    self.weights
                ),
                Rule::Even(tol) => prop_assert!(
                    (got - 1.0 / members).abs() <= tol,
                    "{name}: key {k} share {got}, even is {}: {counts:?}",
                    1.0 / members
                ),
                Rule::Fresh(tol) => {
                    let fresh = fresh.as_ref().map_or(0, |f| *f.get(&k).unwrap_or(&0));
                    let want = fresh as f64 / n as f64;
                    prop_assert!(
                        (got - want).abs() <= tol,
                        "{name}: key {k} share {got}, afresh {want}: {counts:?}"
                    );
                }
                Rule::Explores => {
                    prop_assert!(got > 0.0, "{name}: key {k} never picked: {counts:?}")
                }
            }
        }
        Ok(())
    }
}
