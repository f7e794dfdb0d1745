//! Running a proxy for one row: its own temporary directory, a free port,
//! started in the foreground, stopped when the guard is dropped (also
//! while a panic unwinds). On Ctrl-C the terminal signals the whole
//! foreground process group, the proxies included, and both exit on it.

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use super::binary::Installed;
use super::config;
use crate::scenario::proxy::Proxy;

/// How long a proxy may take to listen.
const READY_TIMEOUT: Duration = Duration::from_secs(10);

/// Attempts with a fresh port: the port is free when the lab picks it, but
/// another process may take it before the proxy binds it.
const ATTEMPTS: usize = 3;

/// A running proxy; dropping it stops it and removes its directory.
pub struct Running {
    child: Option<Child>,
    proxy: Proxy,
    bin: PathBuf,
    /// The arguments it was started with (nginx's `-s stop` needs them too).
    args: Vec<std::ffi::OsString>,
    dir: TempDir,
    /// Where it listens.
    pub addr: SocketAddr,
    /// The config it runs.
    pub config: String,
}

/// Starts `inst` with the config `make` writes for a listen address, and
/// waits until it accepts connections. The error is a message for the
/// table's notes (the config's own error, or the proxy's last words).
pub async fn start(
    inst: &Installed,
    make: impl Fn(SocketAddr) -> Result<String, String>,
) -> Result<Running, String> {
    let mut last = String::new();
    for _ in 0..ATTEMPTS {
        let addr = free_port()?;
        let config = make(addr)?;
        let dir = TempDir::new(inst.proxy)
            .map_err(|e| format!("cannot create a temporary directory: {e}"))?;
        let mut running = spawn(inst, dir, addr, config)?;
        match running.ready().await {
            Ok(()) => return Ok(running),
            Err((retry, why)) => {
                last = why;
                if !retry {
                    break;
                }
            }
        }
    }
    Err(last)
}

fn free_port() -> Result<SocketAddr, String> {
    std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map_err(|e| format!("cannot find a free port on 127.0.0.1: {e}"))
}

fn spawn(
    inst: &Installed,
    dir: TempDir,
    addr: SocketAddr,
    config: String,
) -> Result<Running, String> {
    let conf = dir.0.join(config::file_name(inst.proxy));
    std::fs::write(&conf, &config).map_err(|e| format!("{}: cannot write: {e}", conf.display()))?;
    let log = std::fs::File::create(dir.log())
        .map_err(|e| format!("{}: cannot create: {e}", dir.log().display()))?;
    let out = log
        .try_clone()
        .map_err(|e| format!("{}: {e}", dir.log().display()))?;
    let args = args(inst, &dir.0);
    let mut cmd = Command::new(&inst.path);
    cmd.args(&args)
        .current_dir(&dir.0)
        .stdin(Stdio::null())
        .stdout(out)
        .stderr(log);
    let child = cmd
        .spawn()
        .map_err(|e| format!("cannot start {}: {e}", inst.path.display()))?;
    Ok(Running {
        child: Some(child),
        proxy: inst.proxy,
        bin: inst.path.clone(),
        args,
        dir,
        addr,
        config,
    })
}

/// Foreground, config in `dir`, errors on stderr (nginx: `dir` is the prefix
/// its relative paths resolve against).
fn args(inst: &Installed, dir: &Path) -> Vec<std::ffi::OsString> {
    let conf = dir.join(config::file_name(inst.proxy));
    match inst.proxy {
        Proxy::Nginx => {
            let mut prefix = dir.as_os_str().to_owned();
            prefix.push("/");
            let mut v = vec!["-p".into(), prefix, "-c".into(), conf.into()];
            // Errors before the config is read go to the built-in log path
            // unless `-e` (nginx 1.19.5+) says otherwise.
            if version_at_least(&inst.version, (1, 19, 5)) {
                v.extend(["-e".into(), "stderr".into()]);
            }
            v
        }
        Proxy::Haproxy => vec!["-db".into(), "-f".into(), conf.into()],
    }
}

/// Whether a dotted version (`1.22.1`) is at least `min`; a version that
/// does not parse counts as recent.
pub fn version_at_least(version: &str, min: (u32, u32, u32)) -> bool {
    let mut parts = version
        .split(|c: char| !c.is_ascii_digit())
        .map(|p| p.parse::<u32>());
    match (parts.next(), parts.next(), parts.next()) {
        (Some(Ok(a)), Some(Ok(b)), Some(Ok(c))) => (a, b, c) >= min,
        _ => true,
    }
}

impl Running {
    /// Waits until the port accepts; `Err((retry, why))` when the proxy
    /// exited (`retry` if its port was taken) or did not listen in time.
    async fn ready(&mut self) -> Result<(), (bool, String)> {
        let deadline = tokio::time::Instant::now() + READY_TIMEOUT;
        loop {
            if let Some(child) = self.child.as_mut()
                && let Ok(Some(status)) = child.try_wait()
            {
                let log = self.log_tail();
                let taken = log.contains("Address already in use") || log.contains("cannot bind");
                return Err((
                    taken,
                    format!("{} exited ({status}) at start: {log}", self.proxy),
                ));
            }
            if tokio::net::TcpStream::connect(self.addr).await.is_ok() {
                return Ok(());
            }
            if tokio::time::Instant::now() >= deadline {
                return Err((
                    false,
                    format!(
                        "{} did not listen on {} within {READY_TIMEOUT:?}: {}",
                        self.proxy,
                        self.addr,
                        self.log_tail()
                    ),
                ));
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }

    /// The proxy's last lines of output, on one line.
    pub fn log_tail(&self) -> String {
        let text = std::fs::read_to_string(self.dir.log()).unwrap_or_default();
        let lines: Vec<&str> = text.lines().filter(|l| !l.trim().is_empty()).collect();
        let tail = lines[lines.len().saturating_sub(5)..].join(" | ");
        if tail.is_empty() {
            "(no output)".into()
        } else {
            tail
        }
    }
}

impl Drop for Running {
    fn drop(&mut self) {
        let Some(mut child) = self.child.take() else {
            return;
        };
        if self.proxy == Proxy::Nginx && matches!(child.try_wait(), Ok(None)) {
            // SIGKILL would stop the master only and orphan its workers
            // (still holding the port); `-s stop` asks the master, which
            // stops them and exits.
            let _ = Command::new(&self.bin)
                .args(&self.args)
                .args(["-s", "stop"])
                .stdin(Stdio::null())
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .status();
            for _ in 0..100 {
                if !matches!(child.try_wait(), Ok(None)) {
                    break;
                }
                std::thread::sleep(Duration::from_millis(20));
            }
        }
        let _ = child.kill();
        let _ = child.wait();
    }
}

/// A directory under the system's temporary directory, removed on drop.
struct TempDir(PathBuf);

impl TempDir {
    fn new(proxy: Proxy) -> std::io::Result<Self> {
        static N: AtomicU64 = AtomicU64::new(0);
        loop {
            let n = N.fetch_add(1, Ordering::Relaxed);
            let path = std::env::temp_dir().join(format!(
                "tower-lb-lab-{}-{}-{n}",
                proxy.name(),
                std::process::id()
            ));
            match std::fs::create_dir(&path) {
                Ok(()) => return Ok(Self(path)),
                Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => continue,
                Err(e) => return Err(e),
            }
        }
    }

    fn log(&self) -> PathBuf {
        self.0.join("output.log")
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}
