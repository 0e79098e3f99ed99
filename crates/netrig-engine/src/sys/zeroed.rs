//! Zeroed per-flow arrays straight from the kernel: an anonymous private mapping, whose pages are
//! resident only once written. The rarely touched per-flow counters (`flowstate`) live here so a
//! trial whose flows never reorder or lose takes no memory for them. A zeroed `Vec` does not keep
//! that promise: below glibc's mmap threshold (dynamic, up to 32 MiB once a large block was freed)
//! `calloc` reuses freed heap memory and clears it, touching every page (measured: 1 M flows took
//! 99-149 B per flow from one trial to the next, 24 MiB each for the cold counters and the gaps).
use std::io;
use std::marker::PhantomData;
use std::ops::{Deref, DerefMut};
use std::ptr::{self, NonNull};

/// Element types whose all-zero bytes are a valid value.
///
/// # Safety
/// Implement only for plain integers and arrays of them.
pub unsafe trait Zeroable: Copy {}
// SAFETY: integers and arrays of integers are valid as all-zero bytes.
unsafe impl Zeroable for u64 {}
// SAFETY: as above.
unsafe impl<const N: usize> Zeroable for [u64; N] {}

/// `len` zeroed `T`s in their own anonymous mapping (see the module documentation).
pub struct ZeroedPages<T: Zeroable> {
    ptr: NonNull<T>,
    len: usize,
    _owns: PhantomData<T>,
}

// SAFETY: the mapping is owned by this value alone, like a `Box<[T]>`.
unsafe impl<T: Zeroable + Send> Send for ZeroedPages<T> {}
// SAFETY: shared access only reads, like `&[T]`.
unsafe impl<T: Zeroable + Sync> Sync for ZeroedPages<T> {}

impl<T: Zeroable> ZeroedPages<T> {
    pub fn new(len: usize) -> io::Result<Self> {
        let bytes =
            len.checked_mul(std::mem::size_of::<T>()).ok_or_else(|| io::Error::from(io::ErrorKind::OutOfMemory))?;
        if bytes == 0 {
            return Ok(ZeroedPages { ptr: NonNull::dangling(), len, _owns: PhantomData });
        }
        // SAFETY: a fresh private anonymous mapping; no existing memory is affected. The kernel
        // zero-fills it and aligns it to a page, enough for any `T` here.
        let p = unsafe {
            libc::mmap(
                ptr::null_mut(),
                bytes,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_PRIVATE | libc::MAP_ANONYMOUS,
                -1,
                0,
            )
        };
        if p == libc::MAP_FAILED {
            return Err(io::Error::last_os_error());
        }
        Ok(ZeroedPages { ptr: NonNull::new(p.cast()).expect("mmap returned NULL"), len, _owns: PhantomData })
    }

    fn bytes(&self) -> usize {
        self.len * std::mem::size_of::<T>()
    }
}

impl<T: Zeroable> Deref for ZeroedPages<T> {
    type Target = [T];
    fn deref(&self) -> &[T] {
        // SAFETY: `ptr` is the start of `len` zero-initialised (valid, `Zeroable`) `T`s owned by
        // this value, or dangling with `len * size_of::<T>() == 0`.
        unsafe { std::slice::from_raw_parts(self.ptr.as_ptr(), self.len) }
    }
}

impl<T: Zeroable> DerefMut for ZeroedPages<T> {
    fn deref_mut(&mut self) -> &mut [T] {
        // SAFETY: as in `deref`, and `&mut self` makes the access exclusive.
        unsafe { std::slice::from_raw_parts_mut(self.ptr.as_ptr(), self.len) }
    }
}

impl<T: Zeroable> Drop for ZeroedPages<T> {
    fn drop(&mut self) {
        if self.bytes() > 0 {
            // SAFETY: unmaps exactly the mapping `new` created; no reference to it outlives `self`.
            unsafe { libc::munmap(self.ptr.as_ptr().cast(), self.bytes()) };
        }
    }
}

impl<T: Zeroable + std::fmt::Debug> std::fmt::Debug for ZeroedPages<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "ZeroedPages<{}>[{}]", std::any::type_name::<T>(), self.len)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The array reads zero, takes writes, and its pages become resident only where written. The
    /// mapping's own pages are counted (`mincore`): the process's RSS also moves with the tests the
    /// harness runs beside this one, in other threads (it once grew by more than 1 MiB between two reads).
    #[test]
    fn zeroed_and_resident_only_where_written() {
        let n = 4 << 20; // 96 MiB of [u64; 3]
        let mut a = ZeroedPages::<[u64; 3]>::new(n).unwrap();
        assert_eq!(a.len(), n);
        assert_eq!(resident_pages(&a), 0, "nothing is resident before it is touched");
        assert!(a[..1024].iter().chain(a[n - 1024..].iter()).all(|w| *w == [0; 3]));
        let read = resident_pages(&a); // the kernel's zero page, mapped where read: 24 KiB at each end
        assert!(read <= 2 * (24 / 4 + 1), "reading 48 KiB mapped {read} pages");
        a[n / 2][1] = 7;
        a[n - 1][2] = 9;
        assert_eq!((a[n / 2], a[n - 1]), ([0, 7, 0], [0, 0, 9]));
        let written = resident_pages(&a);
        assert!((1..=read + 2).contains(&written), "writing two elements: {read} -> {written} pages");
        let empty = ZeroedPages::<u64>::new(0).unwrap();
        assert!(empty.is_empty());
    }

    /// Pages of the mapping present in memory (`mincore`).
    fn resident_pages<T: Zeroable>(a: &ZeroedPages<T>) -> usize {
        // SAFETY: sysconf has no preconditions.
        let page = usize::try_from(unsafe { libc::sysconf(libc::_SC_PAGESIZE) }).unwrap();
        let mut v = vec![0u8; a.bytes().div_ceil(page)];
        // SAFETY: the range is exactly the mapping `a` owns; `v` has one byte per page of it.
        let rc = unsafe { libc::mincore(a.ptr.as_ptr().cast(), a.bytes(), v.as_mut_ptr()) };
        assert_eq!(rc, 0, "mincore: {}", io::Error::last_os_error());
        v.iter().filter(|b| **b & 1 == 1).count()
    }
}
