//! A thousand endpoints under one lease: the transaction that writes them,
//! a list of them and the revocation that removes them each apply as one
//! update.

use std::time::Instant;

use etcd_client::{PutOptions, Txn, TxnOp};
use tower_lb::discover::Source;
use tower_lb_etcd::Endpoint;

use crate::support::{addr, balancer, etcd, figure, source, until};

const TARGET: &str = "services/feed";
const N: usize = 1_000;

#[tokio::test(flavor = "current_thread")]
async fn a_thousand_endpoints_apply_in_one_update() {
    let Some(etcd) = etcd().await else { return };
    let (lb, make) = balancer();
    let h = lb.handle();
    let watching = source(etcd.client().await.unwrap(), TARGET)
        .build()
        .unwrap();
    let stats = watching.stats();
    let _driver = watching.spawn(lb.handle(), make);
    until("the empty list", || stats.updates() == 1).await;

    // One transaction under one lease: one revision, one watch response,
    // one update.
    let mut kv = etcd.client().await.unwrap();
    let lease = kv.lease_grant(60, None).await.unwrap().id();
    let puts: Vec<TxnOp> = (0..N)
        .map(|i| {
            let e = Endpoint::new(addr(i)).zone(format!("z{}", i % 3));
            let leased = PutOptions::new().with_lease(lease);
            TxnOp::put(format!("{TARGET}/{}", addr(i)), e.to_json(), Some(leased))
        })
        .collect();
    let at = Instant::now();
    kv.txn(Txn::new().and_then(puts)).await.unwrap();
    until("a thousand endpoints", || h.len() == N).await;
    figure("1,000 keys in one transaction -> in the pool", at.elapsed());
    assert_eq!(stats.updates(), 2, "one update for the transaction");
    assert_eq!(stats.endpoints(), N);

    // A new balancer lists them: one update.
    let (fresh, make) = balancer();
    let listing = source(etcd.client().await.unwrap(), TARGET)
        .build()
        .unwrap();
    let listed = listing.stats();
    let at = Instant::now();
    let _second = listing.spawn(fresh.handle(), make);
    until("listed", || fresh.handle().len() == N).await;
    figure("1,000 keys listed -> in a new pool", at.elapsed());
    assert_eq!(listed.updates(), 1, "one update for the list");
    assert_eq!(listed.errors(), 0);

    // The lease revoked: the thousand keys go in one revision, one update.
    let at = Instant::now();
    kv.lease_revoke(lease).await.unwrap();
    until("all gone", || h.is_empty()).await;
    figure(
        "a lease of 1,000 keys revoked -> out of the pool",
        at.elapsed(),
    );
    assert_eq!(stats.updates(), 3, "one update for the revocation");
}
