//! The README's first program ("Any tower service"): run as written (the
//! copy below must be the README's block, line for line, so the two cannot
//! drift), and the same balancer over real TCP servers on 127.0.0.1.

use std::convert::Infallible;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};
use tokio::net::{TcpListener, TcpStream};
use tower::{Service, ServiceExt, service_fn};
use tower_lb::Balance;

const README: &str = include_str!("../../README.md");
const THIS_FILE: &str = include_str!("readme_any_service.rs");

/// A line with its runs of whitespace made one space (rustfmt may align a
/// trailing comment differently from the README).
fn normalise(line: &str) -> String {
    line.split_whitespace().collect::<Vec<_>>().join(" ")
}

/// The README's Rust block under `## Any tower service`, without its
/// hidden (`# `) lines and blank lines.
fn readme_program() -> Vec<String> {
    let section = README
        .split_once("## Any tower service")
        .expect("the README has the section")
        .1;
    let block = section
        .split_once("```rust\n")
        .expect("a Rust block")
        .1
        .split_once("```")
        .expect("the block ends")
        .0;
    block
        .lines()
        .filter(|l| !l.starts_with("# ") && !l.trim().is_empty())
        .map(normalise)
        .collect()
}

/// The program in [`the_readme_any_service_program_runs`], between its
/// markers.
fn our_copy() -> Vec<String> {
    let start = "// The README's program, from here";
    let end = "// to here.";
    let body = THIS_FILE
        .rsplit_once(start)
        .expect("start marker")
        .1
        .split_once(end)
        .expect("end marker")
        .0;
    body.lines()
        .filter(|l| !l.trim().is_empty())
        .map(normalise)
        .collect()
}

#[test]
fn the_copy_below_is_the_readme_program() {
    let readme = readme_program();
    let (uses, body): (Vec<String>, Vec<String>) =
        readme.into_iter().partition(|l| l.starts_with("use "));
    assert!(!body.is_empty() && !uses.is_empty());
    // The README's imports are this file's.
    for u in &uses {
        assert!(THIS_FILE.lines().any(|l| normalise(l) == *u), "{u}");
    }
    assert_eq!(our_copy(), body);
}

// The README clones the replica, as any service but this closure needs.
#[allow(clippy::clone_on_copy)]
#[tokio::test]
async fn the_readme_any_service_program_runs() -> Result<(), Box<dyn std::error::Error>> {
    // The README's program, from here
    let replica = service_fn(|req: String| async move { Ok::<_, Infallible>(req.len()) });
    let mut lb = Balance::builder() // PeakEwma, the latency-aware default
        .endpoint("10.0.0.1:80", replica.clone())
        .weighted_endpoint("10.0.0.2:80", replica, 2.0)
        .build()?; // a ConfigError names any bad setting
    assert_eq!(lb.ready().await?.call("hello".to_string()).await?, 5);
    lb.handle().remove(&"10.0.0.1:80"); // membership changes at run time
    // to here.
    assert_eq!(lb.handle().len(), 1);
    assert_eq!(lb.ready().await?.call("hi".to_string()).await?, 2);
    Ok(())
}

/// A TCP server on 127.0.0.1 that answers each line with its length, and
/// the count of lines it answered.
async fn length_server() -> (String, Arc<AtomicUsize>) {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap().to_string();
    let served = Arc::new(AtomicUsize::new(0));
    let count = served.clone();
    tokio::spawn(async move {
        while let Ok((tcp, _)) = listener.accept().await {
            let count = count.clone();
            tokio::spawn(async move {
                let (read, mut write) = tcp.into_split();
                let mut lines = BufReader::new(read).lines();
                while let Ok(Some(line)) = lines.next_line().await {
                    count.fetch_add(1, Ordering::Relaxed);
                    let answer = format!("{}\n", line.len());
                    if write.write_all(answer.as_bytes()).await.is_err() {
                        return;
                    }
                }
            });
        }
    });
    (addr, served)
}

/// The replica of the README's program as a client of a real server: one
/// connection per call, the request as a line, the answer parsed.
fn replica_at(
    addr: String,
) -> impl Service<String, Response = usize, Error = std::io::Error, Future: Send> + Clone + Send + Sync
{
    service_fn(move |req: String| {
        let addr = addr.clone();
        async move {
            let mut tcp = TcpStream::connect(&addr).await?;
            tcp.write_all(format!("{req}\n").as_bytes()).await?;
            let mut answer = String::new();
            BufReader::new(tcp).read_line(&mut answer).await?;
            answer
                .trim()
                .parse::<usize>()
                .map_err(|e| std::io::Error::new(std::io::ErrorKind::InvalidData, e))
        }
    })
}

/// The same builder lines over two real servers: every answer comes from
/// one of them, and after the first endpoint is removed every call goes to
/// the second.
#[tokio::test]
async fn the_same_balancer_runs_over_real_servers() -> Result<(), Box<dyn std::error::Error>> {
    let (a, served_a) = length_server().await;
    let (b, served_b) = length_server().await;
    let mut lb = Balance::builder()
        .endpoint(a.clone(), replica_at(a.clone()))
        .weighted_endpoint(b.clone(), replica_at(b.clone()), 2.0)
        .build()?;
    for _ in 0..30 {
        assert_eq!(lb.ready().await?.call("hello".to_string()).await?, 5);
    }
    let (before_a, before_b) = (
        served_a.load(Ordering::Relaxed),
        served_b.load(Ordering::Relaxed),
    );
    assert_eq!(before_a + before_b, 30);
    assert!(lb.handle().remove(&a));
    for _ in 0..10 {
        assert_eq!(lb.ready().await?.call("hi".to_string()).await?, 2);
    }
    assert_eq!(served_a.load(Ordering::Relaxed), before_a);
    assert_eq!(served_b.load(Ordering::Relaxed), before_b + 10);
    Ok(())
}
