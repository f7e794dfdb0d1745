//! Finding a proxy's binary and what it was built with.

use std::path::{Path, PathBuf};
use std::process::Command;

use crate::scenario::proxy::Proxy;

/// Directories searched after `PATH`: Debian installs both proxies in
/// `/usr/sbin`, which is not in a regular user's `PATH`.
const SBIN: &[&str] = &["/usr/sbin", "/usr/local/sbin", "/sbin"];

/// A proxy binary found on this machine.
#[derive(Debug, Clone)]
pub struct Installed {
    /// Which proxy.
    pub proxy: Proxy,
    /// Its path.
    pub path: PathBuf,
    /// Its version (`1.22.1`, `2.6.12-1+deb12u4`).
    pub version: String,
    /// nginx only: the modules its build left out (`http_upstream_random`),
    /// from `--without-..._module` in `nginx -V`.
    pub without: Vec<String>,
}

/// What to tell a user whose machine lacks `proxy`.
pub fn missing_message(proxy: Proxy) -> String {
    format!(
        "`{}` not found in PATH nor in {}: install it (Debian/Ubuntu: `apt-get install {}`)",
        proxy.name(),
        SBIN.join(", "),
        proxy.package()
    )
}

/// `proxy`'s binary: the first executable named like it in `PATH`, then in
/// the sbin directories.
pub fn find(proxy: Proxy) -> Option<PathBuf> {
    let path = std::env::var_os("PATH").unwrap_or_default();
    find_in(
        proxy,
        std::env::split_paths(&path).chain(SBIN.iter().map(PathBuf::from)),
    )
}

/// `proxy`'s binary in the first of `dirs` that has it.
pub fn find_in(proxy: Proxy, dirs: impl IntoIterator<Item = PathBuf>) -> Option<PathBuf> {
    dirs.into_iter()
        .map(|dir| dir.join(proxy.name()))
        .find(|p| executable(p))
}

#[cfg(unix)]
fn executable(p: &Path) -> bool {
    use std::os::unix::fs::PermissionsExt;
    std::fs::metadata(p).is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
}

#[cfg(not(unix))]
fn executable(p: &Path) -> bool {
    p.is_file()
}

/// Finds `proxy` and asks it its version (and nginx its build options);
/// the error is a message for the table's notes.
pub fn installed(proxy: Proxy) -> Result<Installed, String> {
    let path = find(proxy).ok_or_else(|| missing_message(proxy))?;
    // nginx prints `-V` on stderr, haproxy `-v` on stdout.
    let flag = match proxy {
        Proxy::Nginx => "-V",
        Proxy::Haproxy => "-v",
    };
    let out = Command::new(&path)
        .arg(flag)
        .output()
        .map_err(|e| format!("cannot run {} {flag}: {e}", path.display()))?;
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    let version = parse_version(proxy, &text).ok_or_else(|| {
        format!(
            "{} {flag} printed no version: {}",
            path.display(),
            text.trim()
        )
    })?;
    let without = match proxy {
        Proxy::Nginx => nginx_without(&text),
        Proxy::Haproxy => Vec::new(),
    };
    Ok(Installed {
        proxy,
        path,
        version,
        without,
    })
}

/// The version in `nginx -V` (`nginx version: nginx/1.22.1`) or
/// `haproxy -v` (`HAProxy version 2.6.12-1+deb12u4 2026/10/17 - …`).
pub fn parse_version(proxy: Proxy, text: &str) -> Option<String> {
    let line = text.lines().find(|l| l.contains("version"))?;
    let v = match proxy {
        Proxy::Nginx => line.split_once("nginx/")?.1.split_whitespace().next()?,
        Proxy::Haproxy => line.split_once("version ")?.1.split_whitespace().next()?,
    };
    Some(v.to_string())
}

/// The modules an nginx build left out: `--without-http_upstream_random_module`
/// gives `http_upstream_random`.
pub fn nginx_without(text: &str) -> Vec<String> {
    text.split_whitespace()
        .filter_map(|w| w.strip_prefix("--without-")?.strip_suffix("_module"))
        .map(str::to_string)
        .collect()
}
