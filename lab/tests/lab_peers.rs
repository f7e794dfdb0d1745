//! The lab's peers (issue 15): the config text the lab writes for each
//! proxy and policy, the `--peers` list, and a short http-mode run through
//! real nginx and haproxy processes.
//!
//! The tests that start the proxies need `nginx` and `haproxy` (Debian:
//! `apt-get install nginx-light haproxy`, which `.ci/run` does). Without
//! them they are skipped with a notice on the terminal, so that
//! `cargo test` on a fresh machine needs nothing but cargo; with
//! `TOWER_LB_REQUIRE_PEERS=1` (set by `.ci/run`) a missing proxy fails.
//!
//! Real time on a shared machine is noisy: these tests check structure
//! (every row there, every backend reached, shares summing to 100%), never
//! which row is faster.

use tower_lb_lab as lab;

use std::io::Write as _;
use std::net::SocketAddr;
use std::process::Command;
use std::time::Duration;

use lab::driver::{Options, run_scenario};
use lab::peers::binary::{self, Installed};
use lab::peers::config::{self, Setup};
use lab::report::Report;
use lab::scenario::proxy::{Peer, PeerSpec, Policy, Proxy, Settings, parse_list, rows};
use lab::scenario::{PickerName, Scenario};

fn addr(s: &str) -> SocketAddr {
    s.parse().expect("test address")
}

fn setup(backends: &[SocketAddr]) -> Setup<'_> {
    Setup {
        listen: addr("127.0.0.1:8080"),
        backends,
        users: 100,
    }
}

const BACKENDS: &[&str] = &["127.0.0.1:9001", "127.0.0.1:9002"];

fn config_text(proxy: Proxy, policy: Policy, without: &[&str]) -> Result<String, String> {
    let backends: Vec<SocketAddr> = BACKENDS.iter().map(|b| addr(b)).collect();
    let without: Vec<String> = without.iter().map(|m| m.to_string()).collect();
    config::text(
        Peer {
            proxy,
            policy,
            settings: Settings::default(),
        },
        &setup(&backends),
        &without,
    )
}

// ------------------------------------------------------------------- configs

const NGINX_LEAST_CONN: &str = r#"# tower-lb lab: nginx least_conn, written for one run.
daemon off;
master_process on;
# One worker per core, as deployed; `zone` shares the upstream's
# connection counts between the workers.
worker_processes auto;
pid nginx.pid;
error_log stderr warn;

events {
    worker_connections 1024;
}

http {
    access_log off;
    client_body_temp_path client_body;
    proxy_temp_path proxy;
    fastcgi_temp_path fastcgi;
    uwsgi_temp_path uwsgi;
    scgi_temp_path scgi;
    keepalive_requests 100000;

    upstream backends {
        least_conn;
        zone backends 64k;
        server 127.0.0.1:9001;
        server 127.0.0.1:9002;
        keepalive 100;
        keepalive_requests 100000;
        keepalive_timeout 60s;
    }

    server {
        listen 127.0.0.1:8080;
        location / {
            proxy_pass http://backends;
            proxy_http_version 1.1;
            proxy_set_header Connection "";
        }
    }
}
"#;

#[test]
fn nginx_config_is_exact_for_every_policy() {
    let text = |p| config_text(Proxy::Nginx, p, &[]).expect("every module present");
    assert_eq!(text(Policy::LeastConn), NGINX_LEAST_CONN);
    // The others differ in the row's name and the upstream's first line
    // only, which must come before `keepalive` (nginx's rule).
    for (policy, label, line) in [
        (
            Policy::RoundRobin,
            "nginx round robin",
            "# round robin: nginx's default, no directive",
        ),
        (
            Policy::RandomTwo,
            "nginx random two least_conn",
            "random two least_conn;",
        ),
        (
            Policy::Hash,
            "nginx hash xff consistent",
            "hash $http_x_forwarded_for consistent;",
        ),
    ] {
        let expected = NGINX_LEAST_CONN
            .replace("nginx least_conn,", &format!("{label},"))
            .replace("        least_conn;\n", &format!("        {line}\n"));
        assert_eq!(text(policy), expected, "{policy:?}");
    }
}

#[test]
fn nginx_config_follows_the_build() {
    // A build without the random module cannot run `random two`, and says
    // which module is missing.
    let err = config_text(Proxy::Nginx, Policy::RandomTwo, &["http_upstream_random"])
        .expect_err("no random module");
    assert!(
        err.contains("--without-http_upstream_random_module"),
        "{err}"
    );
    let err = config_text(
        Proxy::Nginx,
        Policy::LeastConn,
        &["http_upstream_keepalive"],
    )
    .expect_err("keep-alive is part of every row");
    assert!(err.contains("http_upstream_keepalive"), "{err}");
    // Temp paths of modules left out are not written (nginx would reject
    // the directive).
    let text = config_text(
        Proxy::Nginx,
        Policy::LeastConn,
        &["http_fastcgi", "http_scgi"],
    )
    .expect("least_conn present");
    let expected = NGINX_LEAST_CONN
        .replace("    fastcgi_temp_path fastcgi;\n", "")
        .replace("    scgi_temp_path scgi;\n", "");
    assert_eq!(text, expected);
}

const HAPROXY_LEASTCONN: &str = r#"# tower-lb lab: haproxy leastconn, written for one run.
global
    # threads: haproxy's default, one per core

defaults
    mode http
    timeout connect 5s
    timeout client 60s
    timeout server 60s
    timeout http-keep-alive 60s
    # idle backend connections are shared by every client connection
    http-reuse always

frontend lab
    bind 127.0.0.1:8080
    default_backend backends

backend backends
    balance leastconn
    server s1 127.0.0.1:9001
    server s2 127.0.0.1:9002
"#;

#[test]
fn haproxy_config_is_exact_for_every_policy() {
    let text = |p| config_text(Proxy::Haproxy, p, &[]).expect("haproxy has every policy");
    assert_eq!(text(Policy::LeastConn), HAPROXY_LEASTCONN);
    for (policy, label, lines) in [
        (
            Policy::RoundRobin,
            "haproxy roundrobin",
            "balance roundrobin",
        ),
        (Policy::RandomTwo, "haproxy random(2)", "balance random(2)"),
        (
            Policy::Hash,
            "haproxy hdr(xff) consistent",
            "balance hdr(X-Forwarded-For)\n    hash-type consistent",
        ),
    ] {
        let expected = HAPROXY_LEASTCONN
            .replace("haproxy leastconn,", &format!("{label},"))
            .replace("balance leastconn", lines);
        assert_eq!(text(policy), expected, "{policy:?}");
    }
}

// ------------------------------------------------------------ the peer list

#[test]
fn peer_lists_expand_to_rows_in_order_each_once() {
    let all = rows(&parse_list("nginx,haproxy").expect("parses"));
    assert_eq!(all.len(), 8);
    let labels: Vec<String> = all.iter().map(|p| p.label()).collect();
    assert_eq!(
        labels,
        [
            "nginx round robin",
            "nginx least_conn",
            "nginx random two least_conn",
            "nginx hash xff consistent",
            "haproxy roundrobin",
            "haproxy leastconn",
            "haproxy random(2)",
            "haproxy hdr(xff) consistent",
        ]
    );
    let some = rows(&parse_list("haproxy:hash, nginx:least_conn,haproxy").expect("parses"));
    assert_eq!(some.len(), 5);
    assert_eq!(some[0].label(), "haproxy hdr(xff) consistent");
    assert_eq!(some[1].label(), "nginx least_conn");
    assert_eq!(some[2].label(), "haproxy roundrobin");
    assert!(parse_list("none").expect("parses").is_empty());
    for bad in ["apache", "nginx:leastconn", "nginx:", ",", ""] {
        let err = parse_list(bad).expect_err(bad);
        assert!(
            err.contains("nginx, haproxy"),
            "{bad}: lists the known ones: {err}"
        );
    }
}

#[test]
fn peer_settings_parse_and_label_their_rows() {
    let list = parse_list("nginx:round_robin,nginx:round_robin:keepalive=off,haproxy:least_conn:conns=256:keepalive=off")
        .expect("parses");
    let labels: Vec<String> = rows(&list).iter().map(|p| p.label()).collect();
    assert_eq!(
        labels,
        [
            "nginx round robin",
            "nginx round robin keepalive=off",
            "haproxy leastconn keepalive=off conns=256",
        ]
    );
    // Keep-alive off and a connection limit only on the rows that ask.
    let off = rows(&list)[1];
    assert!(!off.settings.keepalive && off.settings.conns.is_none());
    let backends: Vec<SocketAddr> = BACKENDS.iter().map(|b| addr(b)).collect();
    let nginx = config::text(off, &setup(&backends), &[]).unwrap();
    assert!(!nginx.contains("keepalive 100;") && !nginx.contains("keepalive_timeout 60s"));
    let on = config::text(rows(&list)[0], &setup(&backends), &[]).unwrap();
    assert!(on.contains("keepalive_timeout 60s"));
    let ha = config::text(rows(&list)[2], &setup(&backends), &[]).unwrap();
    assert!(
        ha.contains("option http-server-close") && ha.contains("maxconn 256"),
        "{ha}"
    );
    for bad in [
        "nginx:keepalive=maybe",
        "nginx:conns=0",
        "nginx:colour=red",
        "nginx:hash:least_conn",
    ] {
        assert!(parse_list(bad).is_err(), "{bad}");
    }
}

#[test]
fn a_scenario_can_name_its_peers_and_bad_ones_are_named() {
    let sc = Scenario::load("hop").expect("hop parses");
    assert_eq!(
        sc.peers,
        [
            PeerSpec {
                proxy: Proxy::Nginx,
                policy: None,
                settings: Settings::default(),
            },
            PeerSpec {
                proxy: Proxy::Haproxy,
                policy: None,
                settings: Settings::default(),
            }
        ]
    );
    let text = lab::scenario::SHIPPED
        .iter()
        .find(|(n, _)| *n == "hop")
        .map(|(_, t)| t.replace("\"haproxy\"]", "\"envoy\"]"))
        .expect("hop is shipped");
    let err = Scenario::parse(&text, "hop.toml").expect_err("envoy is no peer");
    assert!(err.message.contains("unknown peer \"envoy\""), "{err}");
    assert!(err.message.contains("hop.toml"), "{err}");
}

#[test]
fn versions_and_builds_are_read_from_the_binaries_words() {
    let nginx = "nginx version: nginx/1.22.1\nbuilt with OpenSSL 3.0.11\nconfigure arguments: \
                 --with-debug --without-http_upstream_random_module --with-threads";
    assert_eq!(
        binary::parse_version(Proxy::Nginx, nginx).as_deref(),
        Some("1.22.1")
    );
    assert_eq!(binary::nginx_without(nginx), ["http_upstream_random"]);
    let haproxy = "HAProxy version 2.6.12-1+deb12u4 2026/10/17 - https://haproxy.org/\n\
                   Status: long-term supported branch";
    assert_eq!(
        binary::parse_version(Proxy::Haproxy, haproxy).as_deref(),
        Some("2.6.12-1+deb12u4")
    );
    assert_eq!(
        binary::parse_version(Proxy::Nginx, "command not found"),
        None
    );
    // nginx learnt `-e` (the early error log) in 1.19.5; Ubuntu 22.04 has 1.18.
    use lab::peers::process::version_at_least;
    assert!(version_at_least("1.22.1", (1, 19, 5)));
    assert!(version_at_least("1.19.5", (1, 19, 5)));
    assert!(!version_at_least("1.18.0", (1, 19, 5)));
    assert!(version_at_least("2.6.12-1+deb12u4", (2, 6, 0)));
    assert!(version_at_least("unknown", (1, 19, 5)));
}

#[test]
fn a_missing_proxy_names_its_package() {
    let empty = std::env::temp_dir().join(format!("lab-peers-empty-{}", std::process::id()));
    std::fs::create_dir_all(&empty).expect("temp dir");
    assert!(binary::find_in(Proxy::Nginx, [empty.clone()]).is_none());
    let _ = std::fs::remove_dir(&empty);
    for (proxy, package) in [(Proxy::Nginx, "nginx-light"), (Proxy::Haproxy, "haproxy")] {
        let msg = binary::missing_message(proxy);
        assert!(msg.contains(&format!("apt-get install {package}")), "{msg}");
    }
}

// ------------------------------------------------------ with the real proxies

/// The installed proxies, or `None` after a notice that the test is
/// skipped; with `TOWER_LB_REQUIRE_PEERS=1`, a missing one fails the test.
fn proxies(test: &str) -> Option<Vec<Installed>> {
    let found: Vec<Result<Installed, String>> =
        Proxy::ALL.into_iter().map(binary::installed).collect();
    let missing: Vec<&String> = found.iter().filter_map(|f| f.as_ref().err()).collect();
    if missing.is_empty() {
        return Some(found.into_iter().flatten().collect());
    }
    let why = missing
        .iter()
        .map(|m| m.as_str())
        .collect::<Vec<_>>()
        .join("; ");
    if std::env::var("TOWER_LB_REQUIRE_PEERS").is_ok_and(|v| v == "1") {
        panic!(
            "{test}: TOWER_LB_REQUIRE_PEERS=1 and {why} \
             (Debian/Ubuntu: apt-get install nginx-light haproxy)"
        );
    }
    // Straight to the terminal: the test harness captures `eprintln!` of a
    // passing test, and this notice must be seen.
    let _ = writeln!(
        std::io::stderr(),
        "\n*** {test}: SKIPPED: {why}.\n*** Install both (Debian/Ubuntu: apt-get install \
         nginx-light haproxy) to run it; TOWER_LB_REQUIRE_PEERS=1 makes this a failure.\n"
    );
    None
}

#[test]
fn generated_configs_pass_the_proxies_own_check() {
    let Some(found) = proxies("generated_configs_pass_the_proxies_own_check") else {
        return;
    };
    // Every policy with the default settings, and with keep-alive off and
    // a connection limit.
    let off = Settings {
        keepalive: false,
        conns: Some(512),
    };
    for inst in &found {
        for (policy, settings) in Policy::ALL
            .into_iter()
            .flat_map(|p| [(p, Settings::default()), (p, off)])
        {
            let peer = Peer {
                proxy: inst.proxy,
                policy,
                settings,
            };
            let dir = std::env::temp_dir().join(format!(
                "lab-peers-check-{}-{}-{}-{}",
                std::process::id(),
                inst.proxy,
                policy.token(),
                settings.keepalive
            ));
            std::fs::create_dir_all(&dir).expect("temp dir");
            let backends: Vec<SocketAddr> = BACKENDS.iter().map(|b| addr(b)).collect();
            let text = config::text(peer, &setup(&backends), &inst.without)
                .unwrap_or_else(|e| panic!("{}: {e}", peer.label()));
            let conf = dir.join(config::file_name(inst.proxy));
            std::fs::write(&conf, text).expect("write config");
            let mut cmd = Command::new(&inst.path);
            match inst.proxy {
                Proxy::Nginx => {
                    cmd.arg("-t")
                        .arg("-p")
                        .arg(format!("{}/", dir.display()))
                        .arg("-c")
                        .arg(&conf);
                    if lab::peers::process::version_at_least(&inst.version, (1, 19, 5)) {
                        cmd.args(["-e", "stderr"]);
                    }
                }
                Proxy::Haproxy => {
                    cmd.arg("-c").arg("-f").arg(&conf);
                }
            }
            let out = cmd.output().expect("run the proxy's check");
            let _ = std::fs::remove_dir_all(&dir);
            assert!(
                out.status.success(),
                "{}: {}{}",
                peer.label(),
                String::from_utf8_lossy(&out.stdout),
                String::from_utf8_lossy(&out.stderr)
            );
        }
    }
}

fn hop_through_peers(peers: &str, secs: u64) -> Report {
    let sc = Scenario::load("hop").expect("hop parses");
    let opts = Options {
        duration: Some(Duration::from_secs(secs)),
        pickers: Some(vec![PickerName::Crate("peak_ewma")]),
        peers: Some(parse_list(peers).expect("peer list")),
        quiet: true,
        stream: false,
        warm_select: false,
        per_thread_load: false,
        ..Options::default()
    };
    run_scenario(&sc, &opts).expect("the run succeeds")
}

#[test]
fn every_peer_row_reaches_every_backend_and_its_shares_sum_to_one() {
    if proxies("every_peer_row_reaches_every_backend_and_its_shares_sum_to_one").is_none() {
        return;
    }
    // 2 s per row: nine rows, about 20 s of real time.
    let r = hop_through_peers("nginx,haproxy", 2);
    let table = r.table();
    let expected = rows(&parse_list("nginx,haproxy").expect("parses"));
    assert_eq!(r.runs.len(), 1 + expected.len(), "{table}");
    assert!(r.runs[0].peer.is_none(), "{table}");
    for peer in &expected {
        let label = peer.label();
        let x = r
            .run(&label)
            .unwrap_or_else(|| panic!("no row {label}{table}"));
        let info = x.peer.as_ref().expect("a peer row says what ran");
        assert_eq!(info.proxy, peer.proxy.name());
        assert_eq!(info.policy, peer.policy.token());
        assert!(!info.version.is_empty());
        assert!(x.requests > 0, "{label}{table}");
        assert!(
            x.picks.iter().all(|&n| n > 0),
            "{label}: a backend got nothing{table}"
        );
        let sum: f64 = x.share.iter().sum();
        assert!(
            (sum - 1.0).abs() < 1e-3,
            "{label}: shares sum to {sum}{table}"
        );
        assert_eq!(x.select_ns, None, "{label}: no selection time for a proxy");
        assert_eq!(x.rest_ns, None, "{label}: no call time for a proxy");
        assert!(table.contains(&format!("{label} (peer)")), "{table}");
    }
    // The JSON and the chart carry the peer rows like any other.
    let json: serde_json::Value = serde_json::from_str(&r.to_json()).expect("JSON parses");
    let runs = json["runs"].as_array().expect("runs");
    assert_eq!(runs.len(), r.runs.len());
    assert!(runs[0]["peer"].is_null());
    assert_eq!(runs[2]["peer"]["policy"], "least_conn");
    assert!(
        runs[2]["peer"]["config"]
            .as_str()
            .is_some_and(|c| c.contains("least_conn;")),
        "{}",
        runs[2]
    );
    let svg = lab::report::svg::chart(&r, false);
    assert_eq!(svg.matches(r#"class="latency-bar""#).count(), r.runs.len());
    assert_eq!(svg.matches(" (peer)</text>").count(), 2 * expected.len());
}

#[test]
fn a_proxy_that_cannot_run_is_a_note_and_the_other_rows_run() {
    let Some(found) = proxies("a_proxy_that_cannot_run_is_a_note_and_the_other_rows_run") else {
        return;
    };
    let haproxy = found
        .into_iter()
        .find(|i| i.proxy == Proxy::Haproxy)
        .expect("proxies() returns every proxy");
    let broken = Installed {
        path: "/nonexistent/haproxy".into(),
        ..haproxy.clone()
    };
    let sc = Scenario::load("hop").expect("hop parses");
    let rt = tokio::runtime::Runtime::new().expect("runtime");
    let mut report = Report::new(&sc, false, 1, 1.0);
    let ctx = lab::peers::run::RowCtx {
        sc: &sc,
        duration: Duration::from_secs(1),
        seed: 1,
        quiet: true,
        nth: (1, 3),
        open: None,
    };
    let rows = [
        Peer {
            proxy: Proxy::Nginx,
            policy: Policy::LeastConn,
            settings: Settings::default(),
        },
        Peer {
            proxy: Proxy::Haproxy,
            policy: Policy::LeastConn,
            settings: Settings::default(),
        },
    ];
    // nginx "not installed"; haproxy's binary gone.
    let found = [
        (Proxy::Nginx, Err(binary::missing_message(Proxy::Nginx))),
        (Proxy::Haproxy, Ok(broken)),
    ];
    rt.block_on(lab::peers::run::run_found(&ctx, &rows, &found, &mut report))
        .expect("the run itself succeeds");
    assert!(report.runs.is_empty(), "{}", report.table());
    let notes = report.notes.join("\n");
    assert!(notes.contains("apt-get install nginx-light"), "{notes}");
    assert!(
        notes.contains("haproxy leastconn (peer): skipped"),
        "{notes}"
    );
    assert!(notes.contains("/nonexistent/haproxy"), "{notes}");
    // With the real binary the same row runs.
    let found = [(Proxy::Haproxy, Ok(haproxy))];
    rt.block_on(lab::peers::run::run_found(
        &ctx,
        &rows[1..],
        &found,
        &mut report,
    ))
    .expect("the run succeeds");
    assert_eq!(report.runs.len(), 1, "{}", report.table());
}
