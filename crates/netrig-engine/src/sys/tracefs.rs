//! The tracefs event directories (a tracepoint's id and field offsets), wherever tracefs is: the
//! mounted one (`/sys/kernel/tracing`, or under debugfs), else a private mount of our own, made
//! for the reading and gone with the [`Events`] that holds it.
//!
//! A fresh machine need not have tracefs mounted (nothing mounts it until perf or bpftrace
//! does); the stall watch and the wire clock must work there too, and leave the host as they
//! found it — so they never mount it at the shared place.
use std::ffi::CString;
use std::io;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU32, Ordering};

/// One group's event directory (`…/events/<group>`), with the private mount behind it if it
/// needed one (unmounted and removed on drop; the ids read from it stay valid).
pub struct Events {
    dir: PathBuf,
    _mount: Option<PrivateMount>,
}

impl Events {
    /// The group's directory: `<dir>/<event>/id` and `format` are the event's.
    pub fn dir(&self) -> &Path {
        &self.dir
    }
}

/// The event directory of `group` that holds `event`, or `None` when tracefs is neither mounted
/// nor mountable here (not root) or has no such event.
pub fn events(group: &str, event: &str) -> Option<Events> {
    let has = |root: &Path| root.join("events").join(group).join(event).join("id").exists();
    if let Some(root) = ["/sys/kernel/tracing", "/sys/kernel/debug/tracing"].iter().map(Path::new).find(|r| has(r)) {
        return Some(Events { dir: root.join("events").join(group), _mount: None });
    }
    let mount = PrivateMount::new().ok()?;
    has(&mount.0).then(|| Events { dir: mount.0.join("events").join(group), _mount: Some(mount) })
}

/// tracefs mounted at a directory of our own under the temporary directory.
struct PrivateMount(PathBuf);

impl PrivateMount {
    fn new() -> io::Result<PrivateMount> {
        static SEQ: AtomicU32 = AtomicU32::new(0);
        let dir = std::env::temp_dir().join(format!(
            "netrig-tracefs-{}-{}",
            std::process::id(),
            SEQ.fetch_add(1, Ordering::Relaxed)
        ));
        std::fs::create_dir(&dir)?;
        let c = |s: &str| CString::new(s).expect("no NUL");
        let target = CString::new(dir.as_os_str().as_encoded_bytes()).expect("no NUL in a temp path");
        let (src, fs) = (c("tracefs"), c("tracefs"));
        // SAFETY: every pointer is to a NUL-terminated string that outlives the call; no data.
        let r = unsafe { libc::mount(src.as_ptr(), target.as_ptr(), fs.as_ptr(), 0, std::ptr::null()) };
        if r != 0 {
            let e = io::Error::last_os_error();
            let _ = std::fs::remove_dir(&dir);
            return Err(e);
        }
        Ok(PrivateMount(dir))
    }
}

impl Drop for PrivateMount {
    fn drop(&mut self) {
        if let Ok(target) = CString::new(self.0.as_os_str().as_encoded_bytes()) {
            // SAFETY: a NUL-terminated path that outlives the call.
            unsafe { libc::umount2(target.as_ptr(), libc::MNT_DETACH) };
        }
        let _ = std::fs::remove_dir(&self.0);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn root() -> bool {
        // SAFETY: geteuid has no preconditions.
        unsafe { libc::geteuid() == 0 }
    }

    #[test]
    fn a_private_mount_reads_the_sched_events_and_leaves_nothing_behind() {
        if !root() {
            eprintln!("skipped: mounting tracefs needs root");
            return;
        }
        let m = PrivateMount::new().expect("tracefs mounts as root");
        let dir = m.0.clone();
        assert!(dir.join("events/sched/sched_switch/id").exists(), "tracefs at {dir:?} has the sched events");
        drop(m);
        assert!(!dir.exists(), "{dir:?} is removed with its mount");
        let mounts = std::fs::read_to_string("/proc/self/mounts").unwrap();
        assert!(!mounts.contains(dir.to_str().unwrap()), "{dir:?} is unmounted");
    }

    #[test]
    fn events_finds_a_group_wherever_tracefs_is() {
        if !root() {
            eprintln!("skipped: mounting tracefs needs root");
            return;
        }
        let ev = events("sched", "sched_switch").expect("the sched events, mounted or not");
        assert!(ev.dir().join("sched_switch/format").exists());
        assert!(events("sched", "no_such_event").is_none());
    }
}
