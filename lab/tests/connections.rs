//! `[load] connections` (issue 31): the hash pickers keyed on the users'
//! connections. One kept-alive connection per user keeps each user on one
//! backend; a new source port per request spreads every user's requests
//! (Azure's 5-tuple hash "looks like round robin"). `--sim`, deterministic.

mod common;

use common::{refused, row, sim};
use tower_lb_lab as lab;

fn hashed(connections: &str) -> lab::scenario::Scenario {
    let mut sc = lab::scenario::Scenario::load("connection-hash").unwrap();
    sc.load.connections = Some(match connections {
        "per_user" => lab::scenario::Connections::PerUser,
        _ => lab::scenario::Connections::PerRequest,
    });
    sc
}

const HASHES: [&str; 3] = ["key_hash", "ring_hash", "maglev"];

#[test]
fn one_connection_per_user_keeps_each_user_on_one_backend() {
    let r = sim(&hashed("per_user"), &HASHES, 5);
    for p in HASHES {
        let a = row(&r, p)
            .affinity
            .clone()
            .expect("affinity with connections");
        assert_eq!(a.users, 100);
        assert_eq!(a.one_backend, 1.0, "{p}: {a:?}");
        assert_eq!(a.backends_per_user, 1.0, "{p}");
    }
    assert!(r.table().contains("connection per_user"));
}

#[test]
fn a_new_source_port_per_request_spreads_each_user() {
    let r = sim(&hashed("per_request"), &HASHES, 5);
    for p in HASHES {
        let x = row(&r, p);
        let a = x.affinity.clone().unwrap();
        // About 40 requests per user over 4 backends: each reaches all 4
        // (the chance of missing one is 4 · (3/4)^40, under 1e-4).
        assert!(a.backends_per_user > 3.9, "{p}: {a:?}");
        assert_eq!(a.one_backend, 0.0, "{p}");
        // ...and the shares look like round robin's.
        assert!(
            x.share.iter().all(|s| (s - 0.25).abs() < 0.02),
            "{p}: {:?}",
            x.share
        );
    }
}

#[test]
fn without_connections_the_hash_pickers_read_x_forwarded_for() {
    let mut sc = hashed("per_user");
    sc.load.connections = None;
    sc.load.client_ips = lab::scenario::ClientIps::PerUser;
    let r = sim(&sc, &["ring_hash"], 2);
    assert!(row(&r, "ring_hash").affinity.is_none());
    assert_eq!(r.hash_key, "x-forwarded-for");
}

#[test]
fn a_bad_connections_value_is_refused_with_its_field() {
    let e = refused(
        "name = \"x\"\nduration = \"1s\"\npickers = [\"ring_hash\"]\n[load]\nvus = 1\nconnections = \"per_packet\"\n[[backend]]\nname = \"a\"\ndelay = \"1ms\"\n",
    );
    assert!(
        e.contains("connections") && e.contains("per_request"),
        "{e}"
    );
}
