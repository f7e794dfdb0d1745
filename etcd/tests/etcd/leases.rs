//! The replica's side: a registration's lease keeps its key; a killed
//! replica leaves when the lease expires, a dropped one at once, and one
//! whose lease was lost comes back.

use std::time::{Duration, Instant};

use tower_lb::discover::Source;
use tower_lb_etcd::{Endpoint, register};

use crate::support::{addr, balancer, etcd, figure, members, source, until};

const TARGET: &str = "services/pay";

#[tokio::test(flavor = "current_thread")]
async fn a_killed_replicas_lease_expires_and_it_leaves_the_pool() {
    let Some(etcd) = etcd().await else { return };
    let (lb, make) = balancer();
    let h = lb.handle();
    let etcd_source = source(etcd.client().await.unwrap(), TARGET)
        .build()
        .unwrap();
    let stats = etcd_source.stats();
    let _driver = etcd_source.spawn(lb.handle(), make);

    // Each replica has its own client, as its own process would.
    let ttl = Duration::from_secs(2);
    let crashing = etcd.client().await.unwrap();
    let crashed = register(&crashing, TARGET, Endpoint::new(addr(1)), ttl)
        .await
        .unwrap();
    let leaving = register(
        &etcd.client().await.unwrap(),
        TARGET,
        Endpoint::new(addr(2)),
        ttl,
    )
    .await
    .unwrap();
    assert_eq!(crashed.key(), format!("{TARGET}/{}", addr(1)));
    until("both registered", || members(&h) == [addr(1), addr(2)]).await;

    // Kept alive across several TTLs: renewals work.
    tokio::time::sleep(ttl * 2).await;
    assert_eq!(members(&h), [addr(1), addr(2)], "renewed past its TTL");

    // The crash: renewals stop, nothing revokes; the lease expires.
    let lease = crashed.lease();
    let at = Instant::now();
    crashed.let_expire();
    drop(crashing);
    let mut admin = etcd.client().await.unwrap();
    let alive = admin.lease_time_to_live(lease, None).await.unwrap();
    assert!(
        alive.ttl() > 0,
        "the lease outlives the crash until it expires"
    );
    until("the expired replica left", || members(&h) == [addr(2)]).await;
    figure(
        &format!("renewals stopped -> out of the pool (TTL {ttl:?})"),
        at.elapsed(),
    );
    let gone = admin.lease_time_to_live(lease, None).await.unwrap();
    assert_eq!(gone.ttl(), -1, "it left because the lease expired");

    // A graceful leave: the lease is revoked, the key goes with it.
    let at = Instant::now();
    drop(leaving);
    until("the dropped replica left", || members(&h).is_empty()).await;
    figure("registration dropped -> out of the pool", at.elapsed());
    assert_eq!(stats.errors(), 0);
}

#[tokio::test(flavor = "current_thread")]
async fn a_registration_whose_lease_was_lost_registers_again() {
    let Some(etcd) = etcd().await else { return };
    let (lb, make) = balancer();
    let h = lb.handle();
    let _driver = source(etcd.client().await.unwrap(), TARGET)
        .build()
        .unwrap()
        .spawn(lb.handle(), make);
    let me = Endpoint::new(addr(3)).zone("z1");
    let replica = register(
        &etcd.client().await.unwrap(),
        TARGET,
        me.clone(),
        Duration::from_secs(2),
    )
    .await
    .unwrap();
    until("registered", || members(&h) == [addr(3)]).await;

    // The lease is gone (as after a partition longer than the TTL): the
    // key goes; the next renewal finds out and registers again.
    let lost = replica.lease();
    let mut admin = etcd.client().await.unwrap();
    admin.lease_revoke(lost).await.unwrap();
    until("the key went with the lease", || members(&h).is_empty()).await;
    until("registered again", || members(&h) == [addr(3)]).await;
    // The rejoin is counted once its write returns, which the watch may
    // beat: wait for the count rather than read it at once.
    until("the rejoin counted", || replica.rejoins() == 1).await;
    assert_ne!(replica.lease(), lost);

    // An update rewrites the value under the same key and lease.
    replica.update(me.draining(true)).await.unwrap();
    let state = h.endpoints()[0].1.clone();
    until("draining", || state.is_draining()).await;
    assert_eq!(state.meta().locality().zone(), "z1");

    replica.revoke().await.unwrap();
    until("revoked", || members(&h).is_empty()).await;
    let left = admin.get(
        format!("{TARGET}/"),
        Some(etcd_client::GetOptions::new().with_prefix()),
    );
    assert_eq!(left.await.unwrap().kvs().len(), 0, "no key left behind");
}
