//! Cache prefetch hints: ask the CPU to start loading a cache line that will be read soon.
//!
//! A prefetch is a hint. It reads no bytes the program can see, does not fault, and does not change
//! what the program computes. The reference it takes only names the address.

/// Starts loading the cache line that holds `*r` into every cache level (x86-64: `PREFETCHT0`;
/// other architectures: nothing).
#[inline(always)]
pub fn prefetch<T>(r: &T) {
    #[cfg(target_arch = "x86_64")]
    // SAFETY: PREFETCHT0 only hints the cache. It reads nothing architecturally and cannot fault,
    // and the address comes from a live reference. SSE, which provides it, is in x86-64's baseline.
    unsafe {
        use std::arch::x86_64::{_mm_prefetch, _MM_HINT_T0};
        _mm_prefetch::<_MM_HINT_T0>((r as *const T).cast::<i8>());
    }
    #[cfg(not(target_arch = "x86_64"))]
    let _ = r;
}

#[cfg(test)]
mod tests {
    #[test]
    fn a_prefetch_leaves_the_value_alone() {
        let v = vec![7u64; 1 << 16];
        for i in (0..v.len()).step_by(8) {
            super::prefetch(&v[i]);
        }
        assert!(v.iter().all(|&x| x == 7));
    }
}
