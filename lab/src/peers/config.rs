//! The config files the lab writes for a peer: one proxy, one policy, the
//! run's backends, keep-alive on both sides as a tuned deployment has it.
//! Pure functions of their inputs, so tests pin the exact text.
//!
//! Only addresses and numbers go into the text (backends are `s1`, `s2`, …
//! by position), so no scenario name ever needs quoting. nginx's relative
//! paths resolve against the `-p` prefix, the run's temporary directory.

use std::fmt::Write as _;
use std::net::SocketAddr;

use crate::scenario::proxy::{Peer, Policy, Proxy};

/// What a peer's config depends on.
#[derive(Debug, Clone)]
pub struct Setup<'a> {
    /// Where the proxy listens.
    pub listen: SocketAddr,
    /// The backends, in the scenario's order.
    pub backends: &'a [SocketAddr],
    /// The most users active at once: the most requests in flight through
    /// the proxy, and so the idle upstream connections worth keeping.
    pub users: u32,
}

/// A connection kept alive serves this many requests before it is closed
/// (nginx closes after 1000 by default since 1.19.10; haproxy never does).
const KEEPALIVE_REQUESTS: u32 = 100_000;

/// The config for `peer`; `without` lists the modules the nginx build left
/// out (`http_upstream_random`, from `nginx -V`). The error names the
/// missing module.
pub fn text(peer: Peer, setup: &Setup<'_>, without: &[String]) -> Result<String, String> {
    match peer.proxy {
        Proxy::Nginx => nginx(peer, setup, without),
        Proxy::Haproxy => Ok(haproxy(peer, setup)),
    }
}

fn nginx(peer: Peer, setup: &Setup<'_>, without: &[String]) -> Result<String, String> {
    let has = |m: &str| !without.iter().any(|w| w == m);
    let mut needs = vec![
        "http_proxy",
        "http_upstream_keepalive",
        "http_upstream_zone",
    ];
    let policy = match peer.policy {
        Policy::RoundRobin => "# round robin: nginx's default, no directive",
        Policy::LeastConn => {
            needs.push("http_upstream_least_conn");
            "least_conn;"
        }
        Policy::RandomTwo => {
            needs.push("http_upstream_random");
            "random two least_conn;"
        }
        Policy::Hash => {
            needs.push("http_upstream_hash");
            "hash $http_x_forwarded_for consistent;"
        }
    };
    if let Some(m) = needs.iter().find(|m| !has(m)) {
        return Err(format!(
            "this nginx was built --without-{m}_module, which {} needs",
            peer.label()
        ));
    }
    // Per worker: up to `users` client connections, as many upstream ones
    // in use and as many kept idle.
    let worker_connections = peer.settings.conns.unwrap_or((4 * setup.users).max(1024));
    // Without keep-alive nginx opens a connection to the backend for each
    // request and closes it after the answer (its default without
    // `keepalive`).
    let upstream_keepalive = if peer.settings.keepalive {
        format!(
            "        keepalive {};\n        keepalive_requests {KEEPALIVE_REQUESTS};\n        keepalive_timeout 60s;\n",
            setup.users.max(1)
        )
    } else {
        "        # keep-alive to the backends off: a connection per request\n".to_string()
    };
    let mut temp = String::new();
    for (module, directive, dir) in [
        ("http_proxy", "proxy_temp_path", "proxy"),
        ("http_fastcgi", "fastcgi_temp_path", "fastcgi"),
        ("http_uwsgi", "uwsgi_temp_path", "uwsgi"),
        ("http_scgi", "scgi_temp_path", "scgi"),
    ] {
        if has(module) {
            let _ = writeln!(temp, "    {directive} {dir};");
        }
    }
    let mut servers = String::new();
    for b in setup.backends {
        let _ = writeln!(servers, "        server {b};");
    }
    Ok(format!(
        r#"# tower-lb lab: {label}, written for one run.
daemon off;
master_process on;
# One worker per core, as deployed; `zone` shares the upstream's
# connection counts between the workers.
worker_processes auto;
pid nginx.pid;
error_log stderr warn;

events {{
    worker_connections {worker_connections};
}}

http {{
    access_log off;
    client_body_temp_path client_body;
{temp}    keepalive_requests {KEEPALIVE_REQUESTS};

    upstream backends {{
        {policy}
        zone backends 64k;
{servers}{upstream_keepalive}    }}

    server {{
        listen {listen};
        location / {{
            proxy_pass http://backends;
            proxy_http_version 1.1;
            proxy_set_header Connection "";
        }}
    }}
}}
"#,
        label = peer.label(),
        listen = setup.listen,
    ))
}

fn haproxy(peer: Peer, setup: &Setup<'_>) -> String {
    let balance = match peer.policy {
        Policy::RoundRobin => "balance roundrobin",
        Policy::LeastConn => "balance leastconn",
        Policy::RandomTwo => "balance random(2)",
        Policy::Hash => "balance hdr(X-Forwarded-For)\n    hash-type consistent",
    };
    let mut servers = String::new();
    for (i, b) in setup.backends.iter().enumerate() {
        let _ = writeln!(servers, "    server s{} {b}", i + 1);
    }
    let maxconn = peer
        .settings
        .conns
        .map_or_else(String::new, |n| format!("    maxconn {n}\n"));
    let reuse = if peer.settings.keepalive {
        "    # idle backend connections are shared by every client connection\n    http-reuse always"
    } else {
        "    # keep-alive to the backends off: a connection per request\n    option http-server-close\n    http-reuse never"
    };
    format!(
        r#"# tower-lb lab: {label}, written for one run.
global
    # threads: haproxy's default, one per core
{maxconn}
defaults
    mode http
{maxconn}    timeout connect 5s
    timeout client 60s
    timeout server 60s
    timeout http-keep-alive 60s
{reuse}

frontend lab
    bind {listen}
    default_backend backends

backend backends
    {balance}
{servers}"#,
        label = peer.label(),
        listen = setup.listen,
    )
}

/// The config file's name in the run's directory.
pub fn file_name(proxy: Proxy) -> &'static str {
    match proxy {
        Proxy::Nginx => "nginx.conf",
        Proxy::Haproxy => "haproxy.cfg",
    }
}
