//! Schedule points and the engine's locks, for deterministic schedule
//! exploration (shuttle) of whole engines.
//!
//! A model checker such as `shuttle` runs the threads of a test as
//! coroutines on one OS thread and switches between them only where the code
//! tells it that it may. The engine marks those places with [`point`]: before
//! every lock-word and location-word CAS, before a lock is released, around
//! row copies between a cache entry and a transaction's buffer, and in every
//! back-off of a waiting loop. Without an installed hook a point is one load
//! of a static that never changes, so production builds pay nothing
//! measurable and no cargo feature is needed: the same engine binary is the
//! one a schedule test drives.
//!
//! A test installs a hook once ([`install_hook`]); the hook returns `true`
//! when it handed control to the scheduler (the caller runs under a model)
//! and `false` otherwise, so threads outside the model keep their normal
//! behaviour. Under a model a coroutine that blocked the OS thread would
//! block every coroutine, so the engine's mutexes and reader-writer locks
//! ([`Mutex`], [`RwLock`]) retry `try_lock` through schedule points instead
//! of parking while a model runs; outside one they are `parking_lot`'s locks
//! with the same guard types. Waiting loops yield through [`point`] too (see
//! `api::backoff`), so a waiter lets the holder run.
//!
//! The hazard this leaves: a point must never be reached while a lock that
//! is not one of ours is held (a closure run inside `crossbeam`),
//! since another coroutine could then park the OS thread on it. None is.

use std::sync::OnceLock;

pub use parking_lot::{MutexGuard, RwLockReadGuard, RwLockWriteGuard};

/// Called at every schedule point; returns whether the caller runs under a
/// model (and has just been given a chance to be preempted).
pub type Hook = fn() -> bool;

static HOOK: OnceLock<Hook> = OnceLock::new();

/// Install the process-wide schedule hook (tests only). Returns `false` when
/// a different hook is already installed.
pub fn install_hook(hook: Hook) -> bool {
    let installed = *HOOK.get_or_init(|| hook);
    std::ptr::fn_addr_eq(installed, hook)
}

/// A place where a model checker may switch threads. Returns whether it
/// could (the caller runs under a model).
#[inline(always)]
pub fn point() -> bool {
    match HOOK.get() {
        Some(hook) => hook(),
        None => false,
    }
}

/// Whether a hook is installed (a model may be running in this process).
#[inline(always)]
pub fn hooked() -> bool {
    HOOK.get().is_some()
}

/// Take a lock: `try_take` first; while it fails under a model, yield
/// through schedule points and try again; outside a model, `block`.
#[inline]
fn acquire<G>(try_take: impl Fn() -> Option<G>, block: impl FnOnce() -> G) -> G {
    if let Some(guard) = try_take() {
        return guard;
    }
    while point() {
        if let Some(guard) = try_take() {
            return guard;
        }
    }
    block()
}

/// A mutex that yields through schedule points instead of parking when a
/// model runs (see the module docs); otherwise `parking_lot::Mutex`.
#[derive(Debug, Default)]
pub struct Mutex<T>(parking_lot::Mutex<T>);

impl<T> Mutex<T> {
    pub const fn new(value: T) -> Mutex<T> {
        Mutex(parking_lot::const_mutex(value))
    }

    #[inline]
    pub fn lock(&self) -> MutexGuard<'_, T> {
        acquire(|| self.0.try_lock(), || self.0.lock())
    }

    #[inline]
    pub fn try_lock(&self) -> Option<MutexGuard<'_, T>> {
        self.0.try_lock()
    }

    pub fn into_inner(self) -> T {
        self.0.into_inner()
    }

    pub fn get_mut(&mut self) -> &mut T {
        self.0.get_mut()
    }
}

/// A reader-writer lock that yields through schedule points instead of
/// parking when a model runs; otherwise `parking_lot::RwLock`.
#[derive(Debug, Default)]
pub struct RwLock<T>(parking_lot::RwLock<T>);

impl<T> RwLock<T> {
    pub const fn new(value: T) -> RwLock<T> {
        RwLock(parking_lot::const_rwlock(value))
    }

    #[inline]
    pub fn read(&self) -> RwLockReadGuard<'_, T> {
        acquire(|| self.0.try_read(), || self.0.read())
    }

    #[inline]
    pub fn write(&self) -> RwLockWriteGuard<'_, T> {
        acquire(|| self.0.try_write(), || self.0.write())
    }

    pub fn get_mut(&mut self) -> &mut T {
        self.0.get_mut()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn without_a_model_points_do_nothing_and_locks_are_plain_locks() {
        // No hook is installed by this crate's unit tests.
        assert!(!point());
        let m = Mutex::new(1);
        *m.lock() += 1;
        assert_eq!(*m.lock(), 2);
        let l = RwLock::new(vec![1]);
        l.write().push(2);
        assert_eq!(l.read().len(), 2);
        assert_eq!(m.into_inner(), 2);
    }
}
