//! [`LocalEtcd`] (feature `local`): a real etcd on 127.0.0.1, for tests,
//! labs and examples.

use std::fmt;
use std::fs::File;
use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use etcd_client::Client;
use tempfile::TempDir;

/// Where Debian's `etcd-server` package installs the binary.
pub const DEFAULT_BINARY: &str = "/usr/bin/etcd";

/// Longest wait for a started etcd to answer: its own start takes well
/// under a second; a loaded machine gets twenty.
const READY_TIMEOUT: Duration = Duration::from_secs(20);

/// Why a local etcd could not be started.
#[derive(Debug)]
pub enum LocalError {
    /// No etcd binary: neither `$ETCD_BIN`, [`DEFAULT_BINARY`] nor `etcd`
    /// on the `PATH`.
    NotInstalled,
    /// Creating the data directory, finding free ports or spawning failed.
    Io(std::io::Error),
    /// etcd exited, or did not answer within 20 s; its log's last lines.
    NotReady(String),
}

impl fmt::Display for LocalError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            LocalError::NotInstalled => f.write_str(
                "no etcd binary ($ETCD_BIN, /usr/bin/etcd or etcd on the PATH; \
                 Debian: apt-get install etcd-server)",
            ),
            LocalError::Io(e) => write!(f, "starting etcd: {e}"),
            LocalError::NotReady(log) => write!(f, "etcd did not start: {log}"),
        }
    }
}

impl std::error::Error for LocalError {}

impl From<std::io::Error> for LocalError {
    fn from(e: std::io::Error) -> Self {
        LocalError::Io(e)
    }
}

/// One etcd member on 127.0.0.1 with free ports and a temporary data
/// directory; killed, and its directory removed, on drop. It can be
/// [killed](Self::kill) and [restarted](Self::restart) on the same
/// directory and ports, as a crash and a restart would.
///
/// ```no_run
/// # async fn run() -> Result<(), Box<dyn std::error::Error>> {
/// use tower_lb_etcd::local::LocalEtcd;
/// let etcd = LocalEtcd::start().await?;
/// let client = etcd.client().await?;
/// # drop(client); Ok(()) }
/// ```
#[derive(Debug)]
pub struct LocalEtcd {
    binary: PathBuf,
    dir: TempDir,
    client_port: u16,
    peer_port: u16,
    child: Option<Child>,
}

impl LocalEtcd {
    /// The etcd binary this would run: `$ETCD_BIN`, else
    /// [`DEFAULT_BINARY`], else `etcd` on the `PATH`.
    pub fn binary() -> Option<PathBuf> {
        if let Some(bin) = std::env::var_os("ETCD_BIN") {
            return Some(PathBuf::from(bin)).filter(|p| p.is_file());
        }
        let default = Path::new(DEFAULT_BINARY);
        if default.is_file() {
            return Some(default.to_path_buf());
        }
        std::env::split_paths(&std::env::var_os("PATH")?)
            .map(|dir| dir.join("etcd"))
            .find(|p| p.is_file())
    }

    /// Starts etcd and waits until it answers.
    ///
    /// # Errors
    ///
    /// [`LocalError`]: no binary, an I/O error, or etcd not answering.
    pub async fn start() -> Result<Self, LocalError> {
        let binary = Self::binary().ok_or(LocalError::NotInstalled)?;
        let dir = tempfile::Builder::new()
            .prefix("tower-lb-etcd-")
            .tempdir()?;
        let mut etcd = Self {
            binary,
            dir,
            client_port: free_port()?,
            peer_port: free_port()?,
            child: None,
        };
        etcd.spawn().await?;
        Ok(etcd)
    }

    /// The client URL, `http://127.0.0.1:<port>`.
    pub fn endpoint(&self) -> String {
        format!("http://127.0.0.1:{}", self.client_port)
    }

    /// A client of this member (it connects lazily, so it outlives a
    /// [`kill`](Self::kill) and reaches the member again after a
    /// [`restart`](Self::restart)).
    ///
    /// # Errors
    ///
    /// etcd-client's, if the client could not be built.
    pub async fn client(&self) -> Result<Client, etcd_client::Error> {
        Client::connect([self.endpoint()], None).await
    }

    /// Kills etcd at once (SIGKILL) and waits for it to exit, keeping its
    /// data directory.
    pub fn kill(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }

    /// Starts etcd again on the same data directory and ports (killing it
    /// first if it runs), and waits until it answers.
    ///
    /// # Errors
    ///
    /// As [`start`](Self::start).
    pub async fn restart(&mut self) -> Result<(), LocalError> {
        self.kill();
        self.spawn().await
    }

    /// Kills etcd, deletes its data and starts an empty member on the same
    /// ports: a cluster rebuilt from nothing, its revisions starting over.
    ///
    /// # Errors
    ///
    /// As [`start`](Self::start), or deleting the data failed.
    pub async fn reset(&mut self) -> Result<(), LocalError> {
        self.kill();
        let data = self.dir.path().join("data");
        if data.exists() {
            std::fs::remove_dir_all(data)?;
        }
        self.spawn().await
    }

    async fn spawn(&mut self) -> Result<(), LocalError> {
        let peer = format!("http://127.0.0.1:{}", self.peer_port);
        let log_path = self.dir.path().join("etcd.log");
        let log = File::options().create(true).append(true).open(&log_path)?;
        let child = Command::new(&self.binary)
            .arg("--name=local")
            .arg(format!(
                "--data-dir={}",
                self.dir.path().join("data").display()
            ))
            .arg(format!("--listen-client-urls={}", self.endpoint()))
            .arg(format!("--advertise-client-urls={}", self.endpoint()))
            .arg(format!("--listen-peer-urls={peer}"))
            .arg(format!("--initial-advertise-peer-urls={peer}"))
            .arg(format!("--initial-cluster=local={peer}"))
            // Room for a test's thousand endpoints in one transaction.
            .arg("--max-txn-ops=2048")
            .arg("--logger=zap")
            .arg("--log-level=warn")
            .stdin(Stdio::null())
            .stdout(log.try_clone()?)
            .stderr(log)
            .spawn()?;
        self.child = Some(child);
        let ready = tokio::time::timeout(READY_TIMEOUT, self.until_ready()).await;
        match ready {
            Ok(Ok(())) => Ok(()),
            Ok(Err(exited)) => Err(LocalError::NotReady(format!(
                "{exited}; {}",
                tail(&log_path)
            ))),
            Err(_) => {
                self.kill();
                Err(LocalError::NotReady(format!(
                    "no answer in {READY_TIMEOUT:?}; {}",
                    tail(&log_path)
                )))
            }
        }
    }

    /// Polls until a read succeeds; fails if etcd exits first.
    async fn until_ready(&mut self) -> Result<(), String> {
        loop {
            if let Some(child) = self.child.as_mut()
                && let Ok(Some(status)) = child.try_wait()
            {
                self.child = None;
                return Err(format!("etcd exited with {status}"));
            }
            if let Ok(mut client) = self.client().await {
                let read = client.get("tower-lb-ready", None);
                if let Ok(Ok(_)) = tokio::time::timeout(Duration::from_secs(1), read).await {
                    return Ok(());
                }
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }
}

impl Drop for LocalEtcd {
    fn drop(&mut self) {
        self.kill();
    }
}

/// A port that was free a moment ago (etcd binds it soon after).
fn free_port() -> std::io::Result<u16> {
    Ok(TcpListener::bind("127.0.0.1:0")?.local_addr()?.port())
}

/// The last lines of etcd's log, for an error message.
fn tail(log: &Path) -> String {
    let text = std::fs::read_to_string(log).unwrap_or_default();
    let lines: Vec<&str> = text.lines().collect();
    lines[lines.len().saturating_sub(5)..].join("\n")
}
