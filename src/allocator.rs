//! The program's memory allocator: mimalloc, asked for an alignment only
//! when an allocation needs more than every block already has.
//!
//! `mimalloc::MiMalloc` sends every allocation through
//! `mi_malloc_aligned`. Its fast path takes a block only when the size
//! class's free list is not empty and its first block happens to be
//! aligned; otherwise its general path serves any size that is not a power
//! of two by over-allocating and aligning inside the block. The simulator
//! allocates one payload per relay (an `Arc` of a few dozen bytes) and frees
//! it when the relay is delivered, so the free list is empty at almost
//! every allocation: 155 instructions per payload, about 2.5% of the default
//! scenario's run, in that path.
//!
//! [`Mimalloc`] calls `mi_malloc` instead, as std's system allocator calls
//! `malloc`, whenever the alignment asked is at most 16 bytes and at most
//! the size. That is safe because mimalloc rounds every size class above 8
//! bytes to a multiple of 16 on 64-bit targets (its `MI_MAX_ALIGN_SIZE`),
//! so all its blocks of 16 bytes or more are 16-byte aligned, and its
//! 8-byte blocks 8-byte aligned. Larger alignments still go to
//! `mi_malloc_aligned`.
//!
//! The binary (`src/main.rs`) and the benchmarks install it with
//! `#[global_allocator]`; the library itself allocates through whatever
//! allocator its user installs.

use libmimalloc_sys as mi;
use std::alloc::{GlobalAlloc, Layout};
use std::ffi::c_void;

/// The alignment every mimalloc block of at least that many bytes has.
const MIN_ALIGN: usize = 16;

/// Whether a plain (unaligned) mimalloc call gives `align` for `size`.
#[inline(always)]
fn plain(align: usize, size: usize) -> bool {
    align <= MIN_ALIGN && align <= size
}

/// mimalloc, with plain calls wherever they give the alignment asked.
pub struct Mimalloc;

// SAFETY: every pointer comes from mimalloc and goes back to it
// (`mi_free` takes blocks of either kind of call); a plain call is made
// only where its blocks have the alignment asked (see the module's text).
unsafe impl GlobalAlloc for Mimalloc {
    #[inline]
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        // SAFETY: mimalloc's allocation calls accept any size; the
        // alignment of a `Layout` is a power of two.
        unsafe {
            if plain(layout.align(), layout.size()) {
                mi::mi_malloc(layout.size()).cast()
            } else {
                mi::mi_malloc_aligned(layout.size(), layout.align()).cast()
            }
        }
    }

    #[inline]
    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        // SAFETY: as in `alloc`.
        unsafe {
            if plain(layout.align(), layout.size()) {
                mi::mi_zalloc(layout.size()).cast()
            } else {
                mi::mi_zalloc_aligned(layout.size(), layout.align()).cast()
            }
        }
    }

    #[inline]
    unsafe fn dealloc(&self, ptr: *mut u8, _layout: Layout) {
        // SAFETY: `ptr` was allocated by this allocator, so by mimalloc.
        unsafe { mi::mi_free(ptr.cast::<c_void>()) }
    }

    #[inline]
    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        // SAFETY: `ptr` was allocated by mimalloc with `layout`; the new
        // block keeps the alignment asked, as in `alloc`.
        unsafe {
            if plain(layout.align(), new_size) {
                mi::mi_realloc(ptr.cast::<c_void>(), new_size).cast()
            } else {
                mi::mi_realloc_aligned(ptr.cast::<c_void>(), new_size, layout.align()).cast()
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Blocks have the alignment asked, keep their contents through
    /// `realloc` across the plain and aligned paths, and come back zeroed
    /// from `alloc_zeroed`.
    #[test]
    fn blocks_are_aligned_and_keep_their_contents() {
        let a = Mimalloc;
        for size in [
            1usize, 7, 8, 9, 12, 16, 24, 40, 48, 56, 72, 100, 4096, 70_000,
        ] {
            for align in [1usize, 2, 4, 8, 16, 32, 64, 4096] {
                let layout = Layout::from_size_align(size, align).expect("valid layout");
                // SAFETY: a non-zero size; the block is freed below.
                unsafe {
                    let p = a.alloc(layout);
                    assert!(!p.is_null());
                    assert_eq!(p as usize % align, 0, "size {size} align {align}");
                    for i in 0..size {
                        p.add(i).write(i as u8);
                    }
                    // Grown, then shrunk below the original size.
                    let (mut q, mut old) = (p, layout);
                    for new in [size * 3 + 5, size / 2 + 1] {
                        q = a.realloc(q, old, new);
                        assert!(!q.is_null());
                        assert_eq!(q as usize % align, 0, "realloc to {new}");
                        for i in 0..size.min(new) {
                            assert_eq!(q.add(i).read(), i as u8);
                        }
                        old = Layout::from_size_align(new, align).expect("valid layout");
                    }
                    a.dealloc(q, old);
                    let z = a.alloc_zeroed(layout);
                    assert_eq!(z as usize % align, 0);
                    assert!((0..size).all(|i| z.add(i).read() == 0));
                    a.dealloc(z, layout);
                }
            }
        }
    }
}
