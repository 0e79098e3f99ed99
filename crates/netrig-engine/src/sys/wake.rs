//! An eventfd a thread can be woken through while it sleeps in `poll(2)` ([`WakeFd`]).
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};

/// An eventfd that ends an RX worker's sleep in `poll(2)` before its timeout: whoever wants the
/// worker's attention (a reader asking for a snapshot) calls [`WakeFd::wake`]; the worker calls
/// [`WakeFd::clear`] when it has looked, so an idle worker's next `poll(2)` sleeps again.
#[derive(Debug)]
pub struct WakeFd(OwnedFd);

impl WakeFd {
    pub fn new() -> std::io::Result<WakeFd> {
        // SAFETY: eventfd takes no pointers; a non-negative result is a new descriptor we own.
        let fd = unsafe { libc::eventfd(0, libc::EFD_NONBLOCK | libc::EFD_CLOEXEC) };
        if fd < 0 {
            return Err(std::io::Error::last_os_error());
        }
        // SAFETY: fd was just returned by eventfd and nothing else owns it.
        Ok(WakeFd(unsafe { OwnedFd::from_raw_fd(fd) }))
    }

    /// Make the descriptor readable (a full counter only stays readable: nothing to handle).
    pub fn wake(&self) {
        let one = 1u64;
        // SAFETY: writes 8 bytes from a valid u64 to our eventfd.
        unsafe { libc::write(self.0.as_raw_fd(), (&one as *const u64).cast(), 8) };
    }

    /// Make it unreadable again (nothing to do when it was not woken).
    pub fn clear(&self) {
        let mut v = 0u64;
        // SAFETY: reads at most 8 bytes into a valid u64 from our non-blocking eventfd.
        unsafe { libc::read(self.0.as_raw_fd(), (&mut v as *mut u64).cast(), 8) };
    }

    pub fn raw(&self) -> RawFd {
        self.0.as_raw_fd()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::{Duration, Instant};

    use crate::sys::af_packet::poll_in;

    /// A pipe nobody writes: its read end never becomes readable.
    fn quiet_fd() -> (OwnedFd, OwnedFd) {
        let mut fds = [0; 2];
        // SAFETY: pipe2 writes two descriptors into a valid array of two.
        assert_eq!(unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC) }, 0);
        // SAFETY: both were just returned by pipe2 and nothing else owns them.
        unsafe { (OwnedFd::from_raw_fd(fds[0]), OwnedFd::from_raw_fd(fds[1])) }
    }

    #[test]
    fn a_wake_ends_a_poll_at_once_and_a_cleared_one_sleeps_again() {
        let (quiet, _w) = quiet_fd();
        let wake = std::sync::Arc::new(WakeFd::new().unwrap());
        let w2 = wake.clone();
        let waker = std::thread::spawn(move || {
            std::thread::sleep(Duration::from_millis(50));
            w2.wake();
        });
        let t = Instant::now();
        assert!(poll_in(quiet.as_raw_fd(), Some(&wake), Duration::from_secs(60)).unwrap());
        assert!(t.elapsed() < Duration::from_secs(30), "the wake ended the 60-s wait");
        waker.join().unwrap();
        // Still woken until cleared; cleared, a wait runs to its timeout.
        assert!(poll_in(quiet.as_raw_fd(), Some(&wake), Duration::ZERO).unwrap());
        wake.clear();
        assert!(!poll_in(quiet.as_raw_fd(), Some(&wake), Duration::from_millis(20)).unwrap());
        wake.clear(); // nothing to clear: no error, no block
    }
}
