//! Read buffers of the data path, recycled.
//!
//! An application read and a path read land in a buffer of [`BUF_LEN`] bytes, and the
//! payloads in it are handed to the session as slices of that buffer: no copy between the
//! socket and the frames. When the last slice is gone (the peer acknowledged the frames,
//! or the application took the payload) the buffer goes back to a free list instead of to
//! the allocator. A buffer fresh from the allocator costs a page fault and a zeroed page
//! per 4 KiB the first time a read touches it, and the allocator gives freed pages back
//! to the system within milliseconds (`main.rs`), so without the list nearly every read
//! of a busy path paid that.
//!
//! What bounds the memory: the list keeps at most [`KEEP`] buffers; an application read
//! keeps its buffer only when it filled half of it ([`Buf::into_bytes`]), so what a
//! session holds for the peer takes at most twice its send buffer. A path read's payload
//! stays a slice of its buffer only on its way to an application that keeps up: the
//! session copies a payload that must wait (behind a gap, or behind unread bytes of its
//! stream) out at its size, so what waits is what the receive budget counts, and a peer
//! that fills a key's budget with payloads no application reads holds no buffer for them
//! (`crates/mpflex/tests/e2e_hostile_uploads.rs`). The buffers that the payloads in
//! transit still hold count against [`PINNED_BUDGET`], beyond which a path read's
//! payloads are copied out at once ([`Buf::pinnable`]).
//!
use std::ops::{Deref, DerefMut};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Mutex;

use bytes::Bytes;

/// Bytes of one read buffer: the most one read takes.
pub const BUF_LEN: usize = 256 * 1024;
/// Free buffers kept for the next reads (8 MiB); more are given back to the allocator.
const KEEP: usize = 32;
/// Bytes of path-read buffers that payloads may keep at once, over all sessions.
const PINNED_BUDGET: usize = 32 << 20;

static FREE: Mutex<Vec<Vec<u8>>> = Mutex::new(Vec::new());
static PINNED: AtomicUsize = AtomicUsize::new(0);

/// A read buffer of [`BUF_LEN`] bytes, back on the free list when dropped.
pub struct Buf {
    v: Vec<u8>,
    /// Counted in [`PINNED`] (a path read's buffer that payloads hold).
    pinned: bool,
}

impl Buf {
    /// A buffer from the free list, or a new one.
    pub fn take() -> Buf {
        let free = FREE.lock().expect("free list").pop();
        Buf {
            v: free.unwrap_or_else(|| vec![0; BUF_LEN]),
            pinned: false,
        }
    }

    /// Whether a path read's payloads may stay slices of their buffer: the buffers they
    /// hold are within [`PINNED_BUDGET`].
    pub fn pinnable() -> bool {
        PINNED.load(Ordering::Relaxed) < PINNED_BUDGET
    }

    /// The buffer as shared bytes, counted against [`PINNED_BUDGET`] until the last
    /// slice of it is dropped (a path read's payloads are sliced off it).
    pub fn pin(mut self) -> Bytes {
        PINNED.fetch_add(BUF_LEN, Ordering::Relaxed);
        self.pinned = true;
        Bytes::from_owner(self)
    }

    /// The first `n` bytes (an application read): the buffer itself if they fill at
    /// least half of it, else a copy at their size (the buffer goes back to the list).
    pub fn into_bytes(self, n: usize) -> Bytes {
        if n >= BUF_LEN / 2 {
            Bytes::from_owner(self).slice(..n)
        } else {
            Bytes::copy_from_slice(&self.v[..n])
        }
    }
}

impl Deref for Buf {
    type Target = [u8];
    fn deref(&self) -> &[u8] {
        &self.v
    }
}

impl DerefMut for Buf {
    fn deref_mut(&mut self) -> &mut [u8] {
        &mut self.v
    }
}

impl AsRef<[u8]> for Buf {
    fn as_ref(&self) -> &[u8] {
        &self.v
    }
}

impl Drop for Buf {
    fn drop(&mut self) {
        if self.pinned {
            PINNED.fetch_sub(BUF_LEN, Ordering::Relaxed);
        }
        let mut free = FREE.lock().expect("free list");
        if free.len() < KEEP {
            free.push(std::mem::take(&mut self.v));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_buffer_comes_back_once_its_last_slice_is_gone() {
        let mut b = Buf::take();
        b[..3].copy_from_slice(b"abc");
        let whole = b.pin();
        let s = whole.slice(1..3);
        drop(whole);
        assert_eq!(&s[..], b"bc");
        assert!(
            PINNED.load(Ordering::Relaxed) >= BUF_LEN,
            "a held buffer counts as pinned"
        );
    }

    #[test]
    fn a_short_application_read_is_copied_at_its_size() {
        let mut b = Buf::take();
        b[..5].copy_from_slice(b"hello");
        let short = b.into_bytes(5);
        assert_eq!(&short[..], b"hello");
        let mut b = Buf::take();
        b[BUF_LEN / 2 - 1] = 9;
        let long = b.into_bytes(BUF_LEN / 2);
        assert_eq!(long.len(), BUF_LEN / 2);
        assert_eq!(long[BUF_LEN / 2 - 1], 9);
    }
}
