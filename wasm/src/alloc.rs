//! The js build's global allocator (single-threaded wasm32 only): free lists of small
//! blocks in front of talc.
//!
//! Every input allocates and frees a handful of small blocks (the request's strings,
//! an event's message, name and fields, the values of its fields); the std's dlmalloc,
//! built for size in this build, spends more time on them than the policy spends on
//! its decision. Here a block of up to [`LARGEST`] bytes comes from a free list per
//! 8-byte size class: a pop and a push, a few instructions. A class's list grows from
//! talc when it is empty and never gives memory back (it is reused by the next block
//! of that class: the memory held is the peak of small blocks in use). Larger blocks,
//! and blocks aligned beyond 8, go to talc directly.

use std::alloc::{GlobalAlloc, Layout};
use std::cell::UnsafeCell;
use std::ptr::null_mut;

/// The largest block served from the free lists.
const LARGEST: usize = 512;
const CLASSES: usize = LARGEST / 8;

pub struct Allocator {
    talc: talc::wasm::WasmDynamicTalc,
    /// The head of each class's free list; a free block holds the next one's address.
    free: UnsafeCell<[*mut u8; CLASSES]>,
}

// SAFETY: this allocator is only compiled for wasm32 without the `atomics` target
// feature (see lib.rs): one thread, no shared memory, so `free` is never accessed
// from two threads. (talc's own cell makes the same argument.)
unsafe impl Sync for Allocator {}

impl Allocator {
    pub const fn new() -> Allocator {
        Allocator {
            talc: talc::wasm::new_wasm_dynamic_allocator(),
            free: UnsafeCell::new([null_mut(); CLASSES]),
        }
    }
}

/// The size class of a layout the free lists serve.
#[inline(always)]
fn class(layout: Layout) -> Option<usize> {
    let size = layout.size();
    (size <= LARGEST && layout.align() <= 8).then(|| size.saturating_sub(1) / 8)
}

/// The layout of every block of a class: its full size, 8-aligned.
#[inline(always)]
fn block(class: usize) -> Layout {
    // SAFETY: (class + 1) * 8 is at most LARGEST, non-zero, a multiple of the power of
    // two 8, far below isize::MAX.
    unsafe { Layout::from_size_align_unchecked((class + 1) * 8, 8) }
}

unsafe impl GlobalAlloc for Allocator {
    #[inline]
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        let Some(c) = class(layout) else {
            return self.talc.alloc(layout);
        };
        // SAFETY: one thread (see `Sync`), and no reference to `free` outlives a call:
        // this exclusive borrow is the only one while it lives (talc never calls back).
        let free = &mut *self.free.get();
        let head = free[c];
        if head.is_null() {
            return self.talc.alloc(block(c));
        }
        // SAFETY: `head` is a free block of this class (at least 8 bytes, 8-aligned)
        // whose first word `dealloc` wrote: the next free block, or null.
        free[c] = head.cast::<*mut u8>().read();
        head
    }

    #[inline]
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        let Some(c) = class(layout) else {
            return self.talc.dealloc(ptr, layout);
        };
        // SAFETY: `ptr` came from `alloc` with a layout of the same class (the caller
        // passes the layout it allocated with), so it is a block of `block(c)`: 8-aligned
        // and at least 8 bytes, no longer used by the caller. See `alloc` for `free`.
        let free = &mut *self.free.get();
        ptr.cast::<*mut u8>().write(free[c]);
        free[c] = ptr;
    }

    #[inline]
    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        // SAFETY: the caller guarantees `layout` is `ptr`'s and `new_size` is valid for
        // its alignment.
        let new = Layout::from_size_align_unchecked(new_size, layout.align());
        match (class(layout), class(new)) {
            // The block already has room for it.
            (Some(a), Some(b)) if a == b => ptr,
            // Both large: talc may grow or shrink in place.
            (None, None) => self.talc.realloc(ptr, layout, new_size),
            _ => {
                let moved = self.alloc(new);
                if !moved.is_null() {
                    std::ptr::copy_nonoverlapping(ptr, moved, layout.size().min(new_size));
                    self.dealloc(ptr, layout);
                }
                moved
            }
        }
    }
}
