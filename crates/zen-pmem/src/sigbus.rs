//! A SIGBUS inside a pool's mapping, reported as an error that names the pool.
//!
//! WHEN IT STILL HAPPENS. A load or store to a file mapping raises SIGBUS when
//! the kernel cannot back the page. Pools reserve their blocks at create and
//! open (`backend/space.rs`), so a full file system no longer does it. What is
//! left: a media error on a DAX device (a poisoned line), an I/O error of the
//! file system under an `fs` pool, a pool file truncated by another process
//! while it is open, and copy-on-write file systems that cannot find a block
//! for an overwrite. The default action kills the process with "Bus error"
//! and nothing else; this module says which pool and where.
//!
//! HOW.
//!
//! 1. The file backends register every range they map with the file's path
//!    (`Watch`, dropped, and so unregistered, before the mapping goes).
//!    The table is a fixed array of atomics: registering allocates nothing
//!    the handler could see half-built, and the handler reads it with
//!    atomic loads only.
//! 2. [`install`] (the `zen` binary calls it first thing) sets a
//!    `SA_SIGINFO` handler for SIGBUS. The handler does only what is
//!    async-signal-safe: atomic loads, formatting into a buffer on its own
//!    stack, `write(2)` to stderr, `sigaction`, `raise` and `_exit`. It takes
//!    no lock and allocates nothing.
//! 3. A fault the kernel raised (`si_code > 0`) at an address inside a
//!    registered range: one line on stderr naming the file, the byte offset
//!    in it and what it means, then `_exit(code)` with the code given to
//!    `install`. Nothing else runs: the pool is left exactly as after
//!    `kill -9` (committed transactions durable, recovery on the next open).
//!    When several threads fault at once, the first reports and the others
//!    wait in `pause` for its `_exit`.
//! 4. Anything else (an address outside every pool, a SIGBUS sent with
//!    `kill`): the default action is restored and the signal raised again,
//!    so the process ends as it would have without this module.
//!
//! LIMITS. At most [`MAX_WATCHED`] ranges are named at once (a pool open
//! beyond that is still guarded by its reservation, only not named), paths
//! are cut at [`PATH_BYTES`] bytes, and a range unregistered while another
//! thread faults in it may be named with the path of the pool that took its
//! slot a moment later.

use std::path::Path;
use std::sync::Once;
use std::sync::atomic::{AtomicBool, AtomicI32, AtomicU8, AtomicUsize, Ordering};

/// Ranges the table can name at once.
pub const MAX_WATCHED: usize = 64;
/// Bytes of a path kept for the message.
pub const PATH_BYTES: usize = 480;

const FREE: u8 = 0;
const CLAIMED: u8 = 1;
const LIVE: u8 = 2;

/// One registered range: `start..start + len` maps file `path` from byte 0.
struct Slot {
    state: AtomicU8,
    start: AtomicUsize,
    len: AtomicUsize,
    path_len: AtomicUsize,
    path: [AtomicU8; PATH_BYTES],
}

impl Slot {
    const fn new() -> Slot {
        Slot {
            state: AtomicU8::new(FREE),
            start: AtomicUsize::new(0),
            len: AtomicUsize::new(0),
            path_len: AtomicUsize::new(0),
            path: [const { AtomicU8::new(0) }; PATH_BYTES],
        }
    }
}

static WATCHED: [Slot; MAX_WATCHED] = [const { Slot::new() }; MAX_WATCHED];
static EXIT_CODE: AtomicI32 = AtomicI32::new(1);
/// Set by the first thread that reports a fault; others wait for its `_exit`.
static REPORTING: AtomicBool = AtomicBool::new(false);
static INSTALL: Once = Once::new();

/// A registered range; unregisters itself when dropped.
pub(crate) struct Watch {
    slot: Option<usize>,
}

impl Watch {
    /// Name `len` bytes mapped at address `start` as file `path` (bytes
    /// `0..len` of it). A full table registers nothing.
    pub(crate) fn new(start: usize, len: usize, path: &Path) -> Watch {
        let slot = WATCHED.iter().position(|s| {
            s.state.compare_exchange(FREE, CLAIMED, Ordering::Acquire, Ordering::Relaxed).is_ok()
        });
        if let Some(index) = slot {
            let s = &WATCHED[index];
            let bytes = path.as_os_str().as_encoded_bytes();
            let kept = bytes.len().min(PATH_BYTES);
            for (to, from) in s.path.iter().zip(&bytes[..kept]) {
                to.store(*from, Ordering::Relaxed);
            }
            s.path_len.store(kept, Ordering::Relaxed);
            s.start.store(start, Ordering::Relaxed);
            s.len.store(len, Ordering::Relaxed);
            s.state.store(LIVE, Ordering::Release);
        }
        Watch { slot }
    }
}

impl Drop for Watch {
    fn drop(&mut self) {
        if let Some(index) = self.slot {
            WATCHED[index].state.store(FREE, Ordering::Release);
        }
    }
}

/// The live slot whose range holds `addr`, and the offset of `addr` in it.
fn find(addr: usize) -> Option<(&'static Slot, usize)> {
    WATCHED.iter().find_map(|s| {
        if s.state.load(Ordering::Acquire) != LIVE {
            return None;
        }
        let start = s.start.load(Ordering::Relaxed);
        let offset = addr.checked_sub(start)?;
        (offset < s.len.load(Ordering::Relaxed)).then_some((s, offset))
    })
}

/// Report a SIGBUS in a pool mapping and exit with `exit_code` (see the
/// module docs). Idempotent: the first call's code is kept.
pub fn install(exit_code: i32) {
    INSTALL.call_once(|| {
        EXIT_CODE.store(exit_code, Ordering::Relaxed);
        let handler: extern "C" fn(libc::c_int, *mut libc::siginfo_t, *mut libc::c_void) =
            on_sigbus;
        // SAFETY: an all-zero `sigaction` is a valid value of this plain C
        // struct; every field that matters is set below.
        let mut action: libc::sigaction = unsafe { std::mem::zeroed() };
        action.sa_sigaction = handler as libc::sighandler_t;
        action.sa_flags = libc::SA_SIGINFO;
        // The handler is an `extern "C"` function with the SA_SIGINFO
        // signature that stays valid for the life of the process.
        // SAFETY: `action.sa_mask` is a valid `sigset_t` to empty, and the
        // handler only does async-signal-safe work (module docs, step 2).
        unsafe {
            libc::sigemptyset(&mut action.sa_mask);
            libc::sigaction(libc::SIGBUS, &action, std::ptr::null_mut());
        }
    });
}

extern "C" fn on_sigbus(signal: libc::c_int, info: *mut libc::siginfo_t, _: *mut libc::c_void) {
    // `si_addr` is meaningful for the kernel-raised SIGBUS that `si_code > 0` selects.
    // SAFETY: with SA_SIGINFO the kernel passes a valid `siginfo_t` that
    // lives for the duration of the handler.
    let (code, addr) = unsafe { ((*info).si_code, (*info).si_addr() as usize) };
    let mut message = Message::new();
    match (code > 0).then(|| find(addr)).flatten() {
        Some(_) if REPORTING.swap(true, Ordering::AcqRel) => loop {
            // Another thread faulted first and is writing its report; its
            // `_exit` ends this thread too. Returning would fault again.
            // SAFETY: `pause` is async-signal-safe.
            unsafe { libc::pause() };
        },
        Some((slot, offset)) => {
            message.push(b"error: SIGBUS (bus error) at byte ");
            message.push_decimal(offset as u64);
            message.push(b" of pool file ");
            message.push_path(slot);
            message.push(
                b": the memory behind the pool could not be read or written (a media error on \
                  a DAX device, an I/O error of its file system, or the file truncated or its \
                  file system out of space under the mapping); the process stopped at once, as \
                  after kill -9: transactions that committed are durable, and the next open \
                  recovers; check the pool with `zen check` before using it again\n",
            );
            message.write_stderr();
            // SAFETY: `_exit` is async-signal-safe and never returns.
            unsafe { libc::_exit(EXIT_CODE.load(Ordering::Relaxed)) }
        }
        None => {
            if code > 0 {
                message.push(b"error: SIGBUS (bus error) at address 0x");
                message.push_hex(addr as u64);
                message.push(b", outside every open pool\n");
                message.write_stderr();
            }
            // The default action set here ends the process once the handler
            // returns and unblocks the signal raised again.
            // SAFETY: `sigaction` and `raise` are async-signal-safe.
            unsafe {
                let mut action: libc::sigaction = std::mem::zeroed();
                action.sa_sigaction = libc::SIG_DFL;
                libc::sigemptyset(&mut action.sa_mask);
                libc::sigaction(signal, &action, std::ptr::null_mut());
                libc::raise(signal);
            }
        }
    }
}

/// A message built on the handler's stack (no allocation, never panics:
/// what does not fit is dropped).
struct Message {
    bytes: [u8; 1024],
    len: usize,
}

impl Message {
    fn new() -> Message {
        Message { bytes: [0; 1024], len: 0 }
    }

    fn push(&mut self, text: &[u8]) {
        for &b in text {
            if let Some(to) = self.bytes.get_mut(self.len) {
                *to = b;
                self.len += 1;
            }
        }
    }

    fn push_path(&mut self, slot: &Slot) {
        let len = slot.path_len.load(Ordering::Relaxed).min(PATH_BYTES);
        for b in &slot.path[..len] {
            self.push(&[b.load(Ordering::Relaxed)]);
        }
    }

    fn push_decimal(&mut self, mut value: u64) {
        let mut digits = [0u8; 20];
        let mut at = digits.len();
        loop {
            at -= 1;
            digits[at] = b'0' + (value % 10) as u8;
            value /= 10;
            if value == 0 {
                break;
            }
        }
        self.push(&digits[at..]);
    }

    fn push_hex(&mut self, value: u64) {
        let mut digits = [0u8; 16];
        for (i, d) in digits.iter_mut().enumerate() {
            *d = b"0123456789abcdef"[((value >> (60 - 4 * i)) & 0xf) as usize];
        }
        self.push(&digits);
    }

    fn write_stderr(&self) {
        let mut written = 0;
        while written < self.len {
            // SAFETY: `write` is async-signal-safe; the pointer and length
            // describe initialised bytes of `self.bytes`.
            let n = unsafe {
                libc::write(
                    libc::STDERR_FILENO,
                    self.bytes[written..self.len].as_ptr().cast(),
                    self.len - written,
                )
            };
            if n <= 0 {
                return;
            }
            written += n as usize;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_watched_range_is_found_by_address_until_it_is_dropped() {
        let watch = Watch::new(0x7000_0000_0000, 4096, Path::new("/tmp/a.pool"));
        let (slot, offset) = find(0x7000_0000_0010).expect("inside the range");
        assert_eq!(offset, 0x10);
        let mut message = Message::new();
        message.push_path(slot);
        assert_eq!(&message.bytes[..message.len], b"/tmp/a.pool");
        assert!(find(0x7000_0000_1000).is_none(), "one past the end");
        drop(watch);
        assert!(find(0x7000_0000_0010).is_none());
    }

    #[test]
    fn numbers_are_formatted_without_allocating() {
        let mut message = Message::new();
        message.push_decimal(0);
        message.push(b" ");
        message.push_decimal(18_446_744_073_709_551_615);
        message.push(b" ");
        message.push_hex(0xdead_beef);
        assert_eq!(&message.bytes[..message.len], b"0 18446744073709551615 00000000deadbeef");
    }

    #[test]
    fn a_message_longer_than_the_buffer_is_cut() {
        let mut message = Message::new();
        message.push(&[b'x'; 2000]);
        assert_eq!(message.len, 1024);
    }
}
