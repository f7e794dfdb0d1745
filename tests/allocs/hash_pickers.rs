//! The hash pickers driven through a real `Balance`: affinity, golden values
//! that pin the hash definition, disruption on membership changes, bounded
//! load, fallbacks, the request-key extractors, and configuration errors.

use std::convert::Infallible;
use std::future::{Future, Ready, ready};
use std::net::IpAddr;
use std::pin::pin;
use std::sync::Arc;
use std::task::{Context, Poll, Waker};

use proptest::prelude::*;
use tower::Service;
use tower_lb::balance::call_avoiding;
use tower_lb::pick::hash::{Hashed, Lookup, MAX_TABLE_SIZE, MAX_VNODES, SUGGESTED_BOUNDED_LOAD};
use tower_lb::pick::key::{ForwardedFor, Header, Path, RequestKey, hash_bytes, hash_ip, key_fn};
use tower_lb::pick::{self, KeyHash, Maglev, Pick, Picker, RingHash, RoundRobin};
use tower_lb::{Balance, ConfigError, Error};
use xxhash_rust::xxh64::xxh64;

// ---------------------------------------------------------------- harness

// Heap allocations per thread, to check that picks allocate nothing (the
// binary's counting allocator, `counting.rs`).
use crate::counting::allocations;

/// Polls a future that must be ready at once (every endpoint here answers
/// immediately).
fn now<F: Future>(f: F) -> F::Output {
    let mut f = pin!(f);
    match f.as_mut().poll(&mut Context::from_waker(Waker::noop())) {
        Poll::Ready(v) => v,
        Poll::Pending => panic!("future not ready"),
    }
}

/// An endpoint that answers with its own name (a `service_fn` in spirit, but
/// nameable, so that helpers can spell the balancer's type).
#[derive(Clone)]
struct Named(Arc<str>);

impl<R> Service<R> for Named {
    type Response = Arc<str>;
    type Error = Infallible;
    type Future = Ready<Result<Arc<str>, Infallible>>;
    fn poll_ready(&mut self, _: &mut Context<'_>) -> Poll<Result<(), Infallible>> {
        Poll::Ready(Ok(()))
    }
    fn call(&mut self, _: R) -> Self::Future {
        ready(Ok(Arc::clone(&self.0)))
    }
}

type Lb<P> = Balance<String, Named, P>;

fn names(n: usize) -> Vec<String> {
    (0..n).map(|i| format!("10.0.0.{i}:8080")).collect()
}

fn build<P: pick::Picker>(picker: P, names: &[String]) -> Lb<P> {
    let mut b = Balance::builder().picker(picker).seed(7);
    for n in names {
        b = b.endpoint(n.clone(), Named(n.as_str().into()));
    }
    b.build().expect("valid config")
}

fn route<R, P: Pick<R>>(lb: &mut Lb<P>, req: R) -> Arc<str> {
    now(lb.call(req)).expect("an endpoint")
}

fn by_id() -> pick::key::KeyFn<fn(&u64) -> Option<u64>> {
    key_fn((|k: &u64| Some(*k)) as fn(&u64) -> Option<u64>)
}

fn map_keys<P: Pick<u64>>(lb: &mut Lb<P>, keys: std::ops::Range<u64>) -> Vec<Arc<str>> {
    keys.map(|k| route(lb, k)).collect()
}

fn moved(a: &[Arc<str>], b: &[Arc<str>]) -> usize {
    a.iter().zip(b).filter(|(x, y)| x != y).count()
}

// ------------------------------------------------------------ golden values

fn five() -> Vec<String> {
    ["a", "b", "c", "d", "e"].map(String::from).to_vec()
}

fn user(name: &str) -> http::Request<()> {
    http::Request::builder()
        .header("x-user", name)
        .body(())
        .expect("valid request")
}

const GOLDEN_KEYS: [u64; 7] = [0, 1, 2, 3, 42, 1000, u64::MAX];
const GOLDEN_USERS: [&str; 6] = ["alice", "bob", "carol", "dave", "erin", "frank"];

/// Computed once and asserted forever: a change here means every deployed
/// gateway would route these keys elsewhere after an upgrade.
#[test]
fn golden_ring_hash() {
    let mut lb = build(RingHash::new(by_id()), &five());
    let got: Vec<_> = GOLDEN_KEYS.map(|k| route(&mut lb, k)).to_vec();
    assert_eq!(got, ["c", "b", "c", "b", "b", "e", "b"].map(Arc::from));
    let mut lb = build(RingHash::new(Header::named("x-user").unwrap()), &five());
    let got: Vec<_> = GOLDEN_USERS.map(|u| route(&mut lb, user(u))).to_vec();
    assert_eq!(got, ["e", "b", "c", "e", "d", "c"].map(Arc::from));
}

#[test]
fn golden_maglev() {
    let mut lb = build(Maglev::new(by_id()), &five());
    let got: Vec<_> = GOLDEN_KEYS.map(|k| route(&mut lb, k)).to_vec();
    assert_eq!(got, ["d", "b", "e", "c", "a", "b", "c"].map(Arc::from));
    let mut lb = build(Maglev::new(Header::named("x-user").unwrap()), &five());
    let got: Vec<_> = GOLDEN_USERS.map(|u| route(&mut lb, user(u))).to_vec();
    assert_eq!(got, ["d", "c", "a", "b", "b", "b"].map(Arc::from));
}

#[test]
fn golden_key_hash() {
    let mut lb = build(KeyHash::new(by_id()), &five());
    let got: Vec<_> = GOLDEN_KEYS.map(|k| route(&mut lb, k)).to_vec();
    assert_eq!(got, ["e", "e", "b", "b", "a", "d", "d"].map(Arc::from));
}

#[test]
fn golden_endpoint_and_key_hashes() {
    // The endpoint hash of a `String` key: XXH64 of its bytes and 0xFF.
    let lb = build(RingHash::new(by_id()), &five());
    for (name, state) in lb.handle().endpoints() {
        let mut bytes = name.clone().into_bytes();
        bytes.push(0xFF);
        assert_eq!(state.key_hash(), xxh64(&bytes, 0), "{name}");
    }
    assert_eq!(hash_bytes(b"alice"), xxh64(b"alice", 0));
    assert_eq!(
        hash_ip("192.0.2.1".parse().unwrap()),
        xxh64(&[192, 0, 2, 1], 0)
    );
}

// ----------------------------------------------- the documented definition

/// The hash definition of `tower_lb::pick::hash`'s docs, written out
/// naively; the pickers must agree with it on every key.
mod reference {
    use super::*;

    pub fn point(key: u64) -> u64 {
        xxh64(&key.to_le_bytes(), 0)
    }

    /// (endpoint hash, name, weight), sorted by hash.
    pub fn endpoints<P: pick::Picker>(lb: &Lb<P>) -> Vec<(u64, String, f64)> {
        let mut v: Vec<_> = lb
            .handle()
            .endpoints()
            .into_iter()
            .map(|(k, s)| (s.key_hash(), k, s.weight()))
            .collect();
        v.sort_by_key(|e| e.0);
        v
    }

    /// The ring's owners from the key's point on, once around.
    pub fn ring_walk(eps: &[(u64, String, f64)], vnodes: usize, key: u64) -> Vec<String> {
        let mut points = Vec::new();
        for (h, name, w) in eps {
            let count = ((vnodes as f64 * w).round() as u64).max(1);
            for r in 0..count {
                let mut buf = h.to_le_bytes().to_vec();
                buf.extend_from_slice(&r.to_le_bytes());
                points.push((xxh64(&buf, 0), *h, name.clone()));
            }
        }
        points.sort();
        let p = point(key);
        let start = points.iter().position(|q| q.0 >= p).unwrap_or(0);
        (0..points.len())
            .map(|k| points[(start + k) % points.len()].2.clone())
            .collect()
    }

    pub fn ring(eps: &[(u64, String, f64)], vnodes: usize, key: u64) -> String {
        ring_walk(eps, vnodes, key).swap_remove(0)
    }

    /// The Maglev table's owners from the key's entry on, once around.
    pub fn maglev_walk(eps: &[(u64, String, f64)], m: u64, key: u64) -> Vec<String> {
        let w_max = eps.iter().map(|e| e.2).fold(0.0, f64::max);
        let mut table: Vec<Option<usize>> = vec![None; m as usize];
        let mut next = vec![0u64; eps.len()];
        let mut taken = vec![0.0; eps.len()];
        let mut filled = 0;
        let mut t = 0.0;
        while filled < m {
            t += 1.0;
            for (e, (h, _, w)) in eps.iter().enumerate() {
                if filled == m || t * w / w_max < taken[e] {
                    continue;
                }
                taken[e] += 1.0;
                let (offset, skip) = ((h >> 32) % m, (h & 0xFFFF_FFFF) % (m - 1) + 1);
                loop {
                    let slot = ((offset + skip * next[e]) % m) as usize;
                    next[e] += 1;
                    if table[slot].is_none() {
                        table[slot] = Some(e);
                        filled += 1;
                        break;
                    }
                }
            }
        }
        let start = point(key) % m;
        (0..m)
            .map(|k| eps[table[((start + k) % m) as usize].unwrap()].1.clone())
            .collect()
    }

    pub fn maglev(eps: &[(u64, String, f64)], m: u64, key: u64) -> String {
        maglev_walk(eps, m, key).swap_remove(0)
    }

    pub fn key_hash(eps: &[(u64, String, f64)], key: u64) -> String {
        eps[(point(key) % eps.len() as u64) as usize].1.clone()
    }
}

#[test]
fn pickers_follow_the_documented_definition() {
    let eps_names = names(7);
    let mut ring = build(RingHash::new(by_id()).vnodes(20), &[]);
    let mut maglev = build(Maglev::new(by_id()).table_size(1_009), &[]);
    let mut modulo = build(KeyHash::new(by_id()), &[]);
    for (i, n) in eps_names.iter().enumerate() {
        let w = 0.5 + i as f64 * 0.75;
        ring.handle()
            .insert_weighted(n.clone(), Named(n.as_str().into()), w)
            .unwrap();
        maglev
            .handle()
            .insert_weighted(n.clone(), Named(n.as_str().into()), w)
            .unwrap();
        modulo.handle().insert(n.clone(), Named(n.as_str().into()));
    }
    let (r_eps, m_eps, k_eps) = (
        reference::endpoints(&ring),
        reference::endpoints(&maglev),
        reference::endpoints(&modulo),
    );
    for key in (0..2_000u64).chain([u64::MAX, u64::MAX / 3]) {
        assert_eq!(
            &*route(&mut ring, key),
            reference::ring(&r_eps, 20, key),
            "ring {key}"
        );
        assert_eq!(
            &*route(&mut maglev, key),
            reference::maglev(&m_eps, 1_009, key),
            "maglev {key}"
        );
        assert_eq!(
            &*route(&mut modulo, key),
            reference::key_hash(&k_eps, key),
            "key_hash {key}"
        );
    }
}

/// The endpoint a call went to, and the id the balancer reported.
type Routed = (Arc<str>, Option<u64>);

#[test]
fn a_retry_skips_tried_endpoints_by_walking_on() {
    let mut ring = build(RingHash::new(by_id()).vnodes(20), &names(7));
    let mut maglev = build(Maglev::new(by_id()).table_size(1_009), &names(7));
    let ids: std::collections::HashMap<String, u64> = ring
        .handle()
        .endpoints()
        .into_iter()
        .map(|(k, s)| (k, s.id()))
        .collect();
    let (r_eps, m_eps) = (reference::endpoints(&ring), reference::endpoints(&maglev));
    for key in 0..300u64 {
        let check = |walk: Vec<String>, call: &mut dyn FnMut(&[u64]) -> Routed| {
            let first = walk[0].clone();
            let second = walk.iter().find(|n| **n != first).unwrap().clone();
            let third = walk
                .iter()
                .find(|n| **n != first && **n != second)
                .unwrap()
                .clone();
            let (got, picked) = call(&[ids[&first]]);
            assert_eq!(
                (&*got, picked),
                (second.as_str(), Some(ids[&second])),
                "key {key}"
            );
            let (got, _) = call(&[ids[&first], ids[&second]]);
            assert_eq!(&*got, third.as_str(), "key {key}");
        };
        check(reference::ring_walk(&r_eps, 20, key), &mut |avoid| {
            let (f, picked) = call_avoiding(avoid, || ring.call(key));
            (now(f).unwrap(), picked)
        });
        check(reference::maglev_walk(&m_eps, 1_009, key), &mut |avoid| {
            let (f, picked) = call_avoiding(avoid, || maglev.call(key));
            (now(f).unwrap(), picked)
        });
    }
}

// ------------------------------------------------------------- affinity

#[test]
fn same_key_same_endpoint_across_builds_and_insertion_orders() {
    let forward = names(9);
    let mut backward = forward.clone();
    backward.reverse();
    fn check<P: Pick<u64>>(make: impl Fn() -> P, forward: &[String], backward: &[String]) {
        let mut a = build(make(), forward);
        let mut b = build(make(), backward);
        // A third process learned the endpoints one by one, at run time.
        let mut c = build(make(), &[]);
        for n in backward {
            c.handle().insert(n.clone(), Named(n.as_str().into()));
        }
        let (ka, kb, kc) = (
            map_keys(&mut a, 0..3_000),
            map_keys(&mut b, 0..3_000),
            map_keys(&mut c, 0..3_000),
        );
        assert_eq!(ka, kb);
        assert_eq!(ka, kc);
        // And the same balancer sends a key to the same place every time.
        assert_eq!(ka, map_keys(&mut a, 0..3_000));
    }
    check(|| RingHash::new(by_id()), &forward, &backward);
    check(|| Maglev::new(by_id()), &forward, &backward);
    check(|| KeyHash::new(by_id()), &forward, &backward);
}

#[test]
fn weights_shape_keyed_shares() {
    let eps = names(3);
    for weights in [[1.0, 2.0, 3.0], [0.5, 0.5, 2.0]] {
        let total: f64 = weights.iter().sum();
        let mut ring = build(RingHash::new(by_id()), &[]);
        let mut maglev = build(Maglev::new(by_id()), &[]);
        for (n, w) in eps.iter().zip(weights) {
            ring.handle()
                .insert_weighted(n.clone(), Named(n.as_str().into()), w)
                .unwrap();
            maglev
                .handle()
                .insert_weighted(n.clone(), Named(n.as_str().into()), w)
                .unwrap();
        }
        let (r, m) = (
            map_keys(&mut ring, 0..30_000),
            map_keys(&mut maglev, 0..30_000),
        );
        for (n, w) in eps.iter().zip(weights) {
            let share = |v: &[Arc<str>]| v.iter().filter(|x| ***x == **n).count() as f64 / 30_000.0;
            // 150 points per weight unit: shares within ~3 deviations of 1/√150.
            assert!(
                (share(&r) - w / total).abs() < 0.06,
                "ring {n}: {}",
                share(&r)
            );
            assert!(
                (share(&m) - w / total).abs() < 0.015,
                "maglev {n}: {}",
                share(&m)
            );
        }
    }
}

// ----------------------------------------------------------- disruption

/// Keys remapped when one endpoint joins a pool of `n`.
fn moved_on_join<P: Pick<u64>>(picker: P, n: usize, salt: u64) -> f64 {
    let all = names(n + 1);
    let mut lb = build(picker, &all[..n]);
    let keys = salt..salt + 10_000;
    let before = map_keys(&mut lb, keys.clone());
    lb.handle()
        .insert(all[n].clone(), Named(all[n].as_str().into()));
    let after = map_keys(&mut lb, keys);
    // Consistent hashing moves keys only to the newcomer.
    let to_new = after.iter().filter(|a| ***a == *all[n]).count();
    let m = moved(&before, &after);
    assert!(m >= to_new);
    m as f64 / 10_000.0
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(24))]

    #[test]
    fn adding_one_endpoint_moves_about_one_share(n in 3usize..40, salt in any::<u64>()) {
        let bound = 1.3 / (n + 1) as f64 + 0.01;
        let ring = moved_on_join(RingHash::new(by_id()), n, salt);
        prop_assert!(ring <= bound, "ring moved {ring} of keys, bound {bound}");
        let maglev = moved_on_join(Maglev::new(by_id()), n, salt);
        prop_assert!(maglev <= bound, "maglev moved {maglev} of keys, bound {bound}");
    }

    #[test]
    fn removing_one_endpoint_from_the_ring_moves_only_its_keys(
        n in 3usize..40,
        gone in any::<prop::sample::Index>(),
        salt in any::<u64>(),
    ) {
        let all = names(n);
        let gone = &all[gone.index(n)];
        let mut lb = build(RingHash::new(by_id()), &all);
        let keys = salt..salt + 10_000;
        let before = map_keys(&mut lb, keys.clone());
        prop_assert!(lb.handle().remove(gone));
        let after = map_keys(&mut lb, keys);
        for (b, a) in before.iter().zip(&after) {
            if **b == **gone {
                prop_assert_ne!(&**a, gone.as_str());
            } else {
                prop_assert_eq!(a, b);
            }
        }
    }
}

#[test]
fn modulo_hashing_moves_about_n_over_n_plus_one() {
    for n in [3usize, 8, 20, 39] {
        let expected = n as f64 / (n + 1) as f64;
        let got = moved_on_join(KeyHash::new(by_id()), n, 99);
        assert!(
            (got - expected).abs() < 0.05,
            "n = {n}: moved {got}, expected ~{expected}"
        );
        // Against the consistent pickers on the same change.
        assert!(moved_on_join(RingHash::new(by_id()), n, 99) < 1.3 / (n + 1) as f64 + 0.01);
    }
}

// ---------------------------------------------------------- bounded load

/// Holds `keys.len()` requests in flight (response futures kept, not
/// polled) and checks after each pick that no endpoint carries more than
/// `ceil(c · total / n)`.
fn check_bound<P: Pick<u64>>(
    picker: P,
    n: usize,
    c: f64,
    keys: &[u64],
) -> Result<(), TestCaseError> {
    let mut lb = build(picker, &names(n));
    let handle = lb.handle();
    let mut held = Vec::new();
    for &k in keys {
        held.push(lb.call(k));
        let loads: Vec<usize> = handle
            .endpoints()
            .iter()
            .map(|(_, s)| s.in_flight())
            .collect();
        let total: usize = loads.iter().sum();
        prop_assert_eq!(total, held.len());
        let cap = (c * total as f64 / n as f64).ceil() as usize;
        prop_assert!(
            loads.iter().all(|&l| l <= cap),
            "loads {:?} over cap {}",
            loads,
            cap
        );
    }
    drop(held);
    prop_assert!(handle.endpoints().iter().all(|(_, s)| s.in_flight() == 0));
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(48))]

    #[test]
    fn bounded_load_never_exceeds_the_cap(
        n in 2usize..12,
        c in 1.0f64..3.0,
        // Few distinct keys: hot keys are what the bound is for.
        keys in prop::collection::vec(0u64..6, 1..150),
    ) {
        check_bound(RingHash::new(by_id()).bounded_load(c), n, c, &keys)?;
        check_bound(Maglev::new(by_id()).table_size(1_009).bounded_load(c), n, c, &keys)?;
        check_bound(KeyHash::new(by_id()).bounded_load(c), n, c, &keys)?;
    }
}

#[test]
fn a_hot_key_spreads_under_bounded_load_and_sinks_one_endpoint_without() {
    let mut plain = build(RingHash::new(by_id()), &names(4));
    let mut bounded = build(
        RingHash::new(by_id()).bounded_load(SUGGESTED_BOUNDED_LOAD),
        &names(4),
    );
    let held_plain: Vec<_> = (0..100).map(|_| plain.call(42)).collect();
    let held_bounded: Vec<_> = (0..100).map(|_| bounded.call(42)).collect();
    let loads = |lb: &Lb<_>| -> Vec<usize> {
        lb.handle()
            .endpoints()
            .iter()
            .map(|(_, s)| s.in_flight())
            .collect()
    };
    let mut p = loads(&plain);
    p.sort();
    assert_eq!(p, [0, 0, 0, 100]);
    let b = loads(&bounded);
    assert!(b.iter().all(|&l| l <= 32), "{b:?}"); // ceil(1.25 · 100 / 4)
    drop((held_plain, held_bounded));
    // Idle again: the key goes home.
    assert_eq!(route(&mut bounded, 42), route(&mut plain, 42));
}

// ------------------------------------------------------------- fallbacks

#[test]
fn requests_without_a_key_use_the_fallback() {
    let picker = RingHash::new(Header::named("x-user").unwrap()).fallback(RoundRobin::new());
    let mut lb = build(picker, &five());
    let anon = || http::Request::new(());
    let rotation: Vec<_> = (0..6).map(|_| route(&mut lb, anon())).collect();
    assert_eq!(rotation, ["a", "b", "c", "d", "e", "a"].map(Arc::from));
    // Keyed requests stick, and do not disturb the fallback's rotation.
    let home = route(&mut lb, user("alice"));
    for _ in 0..5 {
        assert_eq!(route(&mut lb, user("alice")), home);
    }
    assert_eq!(&*route(&mut lb, anon()), "b");
    // An empty header value is no key either.
    assert_eq!(&*route(&mut lb, user("")), "c");

    for picker_name in ["key_hash", "maglev"] {
        let mut kh = build(KeyHash::new(Path).fallback(RoundRobin::new()), &five());
        let mut mg = build(
            Maglev::new(ForwardedFor).fallback(RoundRobin::new()),
            &five(),
        );
        let connect = || {
            http::Request::builder()
                .method("CONNECT")
                .uri("example.com:443")
                .body(())
                .unwrap()
        };
        let got: Vec<_> = match picker_name {
            "key_hash" => (0..3).map(|_| route(&mut kh, connect())).collect(),
            _ => (0..3).map(|_| route(&mut mg, anon())).collect(),
        };
        assert_eq!(got, ["a", "b", "c"].map(Arc::from), "{picker_name}");
    }
}

#[test]
fn default_fallback_is_peak_ewma_and_serves_keyless_requests() {
    let mut lb = build(Maglev::new(Header::named("x-user").unwrap()), &five());
    let mut seen = std::collections::HashSet::new();
    for _ in 0..200 {
        seen.insert(route(&mut lb, http::Request::new(())));
    }
    assert!(seen.len() >= 3, "{seen:?}");
}

// ------------------------------------------------------------ extractors

/// Routes each request with `key`, and checks that it lands where a
/// `u64`-keyed ring sends the key the extractor is documented to produce.
fn routes_like<E>(key: E, cases: Vec<(http::Request<()>, Option<u64>)>)
where
    E: RequestKey<http::Request<()>> + Clone,
{
    let mut lb = build(
        RingHash::new(key.clone()).fallback(RoundRobin::new()),
        &names(16),
    );
    let mut by_key = build(RingHash::new(by_id()), &names(16));
    for (req, want) in cases {
        assert_eq!(key.key(&req), want, "{:?}", req.headers());
        let got = route(&mut lb, req);
        if let Some(k) = want {
            assert_eq!(got, route(&mut by_key, k));
        }
    }
}

fn xff(lines: &[&str]) -> http::Request<()> {
    let mut b = http::Request::builder();
    for l in lines {
        b = b.header("x-forwarded-for", *l);
    }
    b.body(()).unwrap()
}

#[test]
fn header_extractor_hashes_the_value_bytes() {
    let mut cases: Vec<_> = (0..40)
        .map(|i| {
            let v = format!("user-{i}");
            (user(&v), Some(hash_bytes(v.as_bytes())))
        })
        .collect();
    cases.push((user(""), None));
    cases.push((http::Request::new(()), None));
    routes_like(Header::named("X-User").unwrap(), cases);
    let by_name = Header::new(http::header::HeaderName::from_static("x-user"));
    assert_eq!(by_name.name().as_str(), "x-user");
}

#[test]
fn forwarded_for_extractor_takes_the_first_hop() {
    let client = hash_ip("203.0.113.7".parse().unwrap());
    let v6 = hash_ip("2001:db8::7".parse().unwrap());
    routes_like(
        ForwardedFor,
        vec![
            (xff(&["203.0.113.7"]), Some(client)),
            (xff(&["  203.0.113.7 , 10.0.0.1"]), Some(client)),
            (xff(&["203.0.113.7,10.0.0.2, 10.0.0.3"]), Some(client)),
            (xff(&["203.0.113.7:51234, 10.0.0.2"]), Some(client)),
            (xff(&[" , ", "203.0.113.7, 10.1.1.1"]), Some(client)),
            (
                xff(&["10.0.0.1, 203.0.113.7"]),
                Some(hash_ip("10.0.0.1".parse().unwrap())),
            ),
            (xff(&["2001:DB8:0::7, 10.0.0.1"]), Some(v6)),
            (xff(&["[2001:db8::7]:443"]), Some(v6)),
            (xff(&["unknown, 10.0.0.1"]), Some(hash_bytes(b"unknown"))),
            (xff(&[""]), None),
            (xff(&[" ,  ,"]), None),
            (http::Request::new(()), None),
        ],
    );
}

#[test]
fn path_extractor_hashes_the_path_without_query() {
    let req = |uri: &str| http::Request::builder().uri(uri).body(()).unwrap();
    let users42 = Some(hash_bytes(b"/users/42"));
    routes_like(
        Path,
        vec![
            (req("/users/42?x=1"), users42),
            (req("http://api.example/users/42?y=2"), users42),
            (req("/users/42"), users42),
            (req("/users/43"), Some(hash_bytes(b"/users/43"))),
            (req("http://api.example"), Some(hash_bytes(b"/"))),
        ],
    );
}

#[test]
fn closure_extractor_returns_its_key() {
    let tenant = key_fn(|req: &http::Request<()>| {
        req.headers()
            .get("x-tenant")
            .and_then(|v| v.to_str().ok())
            .and_then(|v| v.parse::<u64>().ok())
    });
    let req = |t: &str| {
        http::Request::builder()
            .header("x-tenant", t)
            .body(())
            .unwrap()
    };
    routes_like(
        tenant,
        vec![
            (req("7"), Some(7)),
            (req("12345"), Some(12345)),
            (req("not a number"), None),
            (http::Request::new(()), None),
        ],
    );
    // A socket address from the connection, hashed like ForwardedFor's.
    let peer =
        key_fn(|req: &http::Request<()>| req.extensions().get::<IpAddr>().map(|ip| hash_ip(*ip)));
    let mut from_socket = http::Request::new(());
    from_socket
        .extensions_mut()
        .insert::<IpAddr>("203.0.113.7".parse().unwrap());
    assert_eq!(
        peer.key(&from_socket),
        ForwardedFor.key(&xff(&["203.0.113.7"]))
    );
}

// ------------------------------------------------------- config errors

/// A setting to check: a parse result, or a picker (checked as
/// `Balance::build` checks it).
trait Checked {
    fn checked(self) -> Result<(), ConfigError>;
}

impl<T> Checked for Result<T, ConfigError> {
    fn checked(self) -> Result<(), ConfigError> {
        self.map(drop)
    }
}

impl<L: Lookup, E: Send + Sync + 'static, F: Picker> Checked for Hashed<L, E, F> {
    fn checked(self) -> Result<(), ConfigError> {
        self.validate()
    }
}

fn field(r: impl Checked) -> &'static str {
    match r.checked() {
        Ok(_) => "accepted",
        Err(e) => {
            assert!(e.to_string().contains(e.field()), "{e}");
            e.field()
        }
    }
}

#[test]
fn every_bad_config_is_a_config_error_naming_the_field() {
    assert_eq!(field(RingHash::new(by_id()).vnodes(0)), "vnodes");
    assert_eq!(
        field(RingHash::new(by_id()).vnodes(MAX_VNODES + 1)),
        "vnodes"
    );
    assert_eq!(field(RingHash::new(by_id()).vnodes(MAX_VNODES)), "accepted");
    for m in [
        0,
        1,
        2,
        97,
        100,
        65_536,
        65_535,
        MAX_TABLE_SIZE + 1,
        16_777_259,
        usize::MAX,
    ] {
        assert_eq!(
            field(Maglev::new(by_id()).table_size(m)),
            "table_size",
            "{m}"
        );
    }
    assert_eq!(
        field(Maglev::new(by_id()).table_size(MAX_TABLE_SIZE)),
        "accepted"
    );
    for c in [
        0.0,
        0.5,
        0.999,
        -1.0,
        f64::NAN,
        f64::INFINITY,
        f64::NEG_INFINITY,
    ] {
        assert_eq!(
            field(RingHash::new(by_id()).bounded_load(c)),
            "bounded_load",
            "{c}"
        );
        assert_eq!(
            field(Maglev::new(by_id()).bounded_load(c)),
            "bounded_load",
            "{c}"
        );
        assert_eq!(
            field(KeyHash::new(by_id()).bounded_load(c)),
            "bounded_load",
            "{c}"
        );
    }
    assert_eq!(field(KeyHash::new(by_id()).bounded_load(1.0)), "accepted");
    assert_eq!(field(Header::named("bad header")), "header");
    assert_eq!(field(Header::named("")), "header");
    // The balancer's build checks its picker.
    let e = Balance::<String, Named>::builder()
        .picker(RingHash::new(by_id()).vnodes(0))
        .build()
        .unwrap_err();
    assert_eq!(e.field(), "vnodes");
}

// ------------------------------------------------------- never panics

#[test]
fn empty_saturated_and_emptied_sets_fail_fast() {
    let mut empty = build(Maglev::new(by_id()), &[]);
    assert!(matches!(now(empty.call(1)), Err(Error::NoEndpoints)));

    let mut capped = Balance::builder()
        .picker(RingHash::new(by_id()).bounded_load(1.0))
        .endpoint("a".to_string(), Named("a".into()))
        .endpoint("b".to_string(), Named("b".into()))
        .max_in_flight(1)
        .build()
        .unwrap();
    let held = [capped.call(1), capped.call(1)];
    assert!(matches!(now(capped.call(1)), Err(Error::Overloaded)));
    drop(held);
    assert!(now(capped.call(1)).is_ok());

    let mut ring = build(RingHash::new(by_id()), &five());
    for n in five() {
        assert!(now(ring.call(5)).is_ok());
        ring.handle().remove(&n);
    }
    assert!(matches!(now(ring.call(5)), Err(Error::NoEndpoints)));
}

#[test]
fn names_are_stable() {
    use tower_lb::pick::Picker;
    assert_eq!(KeyHash::new(Path).name(), "key_hash");
    assert_eq!(RingHash::new(Path).name(), "ring_hash");
    assert_eq!(Maglev::new(Path).bounded_load(2.0).name(), "maglev");
}

// ------------------------------------------------------- no allocation

/// Allocations made by `lb.call(req)` for each request (the pick, the
/// in-flight slot, the response future), with `hold` calls kept in flight so
/// that bounded load has to sum the loads.
fn allocations_per_call<R, P: Pick<R>>(picker: P, reqs: Vec<R>, hold: usize) -> usize {
    let mut lb = build(picker, &names(32));
    let mut reqs = reqs.into_iter();
    let mut held = Vec::with_capacity(hold + reqs.len());
    for req in reqs.by_ref().take(hold) {
        held.push(lb.call(req));
    }
    let before = allocations();
    for req in reqs {
        held.push(lb.call(req));
    }
    allocations() - before
}

#[test]
fn picks_do_not_allocate() {
    // The counter works: a box is one allocation.
    let before = allocations();
    drop(std::hint::black_box(Box::new(1u64)));
    assert_eq!(allocations(), before + 1);
    let ids = || (0..300u64).map(|k| k % 7).collect::<Vec<_>>();
    let c = SUGGESTED_BOUNDED_LOAD;
    assert_eq!(allocations_per_call(RingHash::new(by_id()), ids(), 1), 0);
    assert_eq!(
        allocations_per_call(RingHash::new(by_id()).bounded_load(c), ids(), 100),
        0
    );
    assert_eq!(
        allocations_per_call(Maglev::new(by_id()).bounded_load(c), ids(), 100),
        0
    );
    assert_eq!(
        allocations_per_call(KeyHash::new(by_id()).bounded_load(c), ids(), 100),
        0
    );
    let reqs = |n| {
        (0..n)
            .map(|i| match i % 3 {
                0 => user(&format!("u{}", i % 5)),
                1 => xff(&["203.0.113.7, 10.0.0.1"]),
                _ => http::Request::new(()), // keyless: the fallback's pick
            })
            .collect::<Vec<_>>()
    };
    let header = Header::named("x-user").unwrap();
    assert_eq!(
        allocations_per_call(RingHash::new(header.clone()), reqs(300), 100),
        0
    );
    assert_eq!(
        allocations_per_call(Maglev::new(ForwardedFor), reqs(300), 100),
        0
    );
    assert_eq!(allocations_per_call(KeyHash::new(Path), reqs(300), 100), 0);
}
