//! Entering a network namespace for the duration of a closure.
//!
//! Sockets belong to the namespace of the thread that created them, so a port in another
//! namespace is opened by switching this thread into it (`setns(CLONE_NEWNET)`), creating the
//! sockets, and switching back. The guard restores the original namespace even on error.
use std::fs::File;
use std::io;
use std::os::fd::AsRawFd;
use std::path::PathBuf;

use crate::error::PortError;

/// Resolve a namespace given as a name under `/run/netns` or as a path.
pub fn netns_path(netns: &str) -> PathBuf {
    if netns.contains('/') {
        PathBuf::from(netns)
    } else {
        PathBuf::from("/run/netns").join(netns)
    }
}

struct Restore(File);

impl Drop for Restore {
    fn drop(&mut self) {
        // SAFETY: setns on a valid namespace fd owned by self.0; failure leaves us in the target
        // namespace, which we cannot recover from, so abort loudly rather than continue there.
        let rc = unsafe { libc::setns(self.0.as_raw_fd(), libc::CLONE_NEWNET) };
        if rc != 0 {
            eprintln!("netrig: fatal: cannot return to the original network namespace");
            std::process::abort();
        }
    }
}

/// Run `f` inside network namespace `netns` (if given) on the calling thread.
pub fn in_netns<T>(netns: Option<&str>, f: impl FnOnce() -> Result<T, PortError>) -> Result<T, PortError> {
    let Some(ns) = netns else { return f() };
    let err = |source: io::Error| PortError::Netns { netns: ns.to_string(), source };
    let here = File::open("/proc/thread-self/ns/net").map_err(err)?;
    let target = File::open(netns_path(ns)).map_err(|e| {
        if e.kind() == io::ErrorKind::NotFound {
            err(io::Error::new(io::ErrorKind::NotFound, "no such network namespace (see `ip netns list`)"))
        } else {
            err(e)
        }
    })?;
    // SAFETY: plain syscall on a valid fd we own.
    if unsafe { libc::setns(target.as_raw_fd(), libc::CLONE_NEWNET) } != 0 {
        return Err(err(io::Error::last_os_error()));
    }
    let _restore = Restore(here);
    f()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn path_resolution() {
        assert_eq!(netns_path("a"), PathBuf::from("/run/netns/a"));
        assert_eq!(netns_path("/proc/1/ns/net"), PathBuf::from("/proc/1/ns/net"));
    }

    #[test]
    fn missing_namespace_is_a_clear_error() {
        let e = in_netns(Some("netrig-no-such-ns"), || Ok(())).unwrap_err();
        assert!(e.to_string().contains("netrig-no-such-ns"), "{e}");
    }
}
