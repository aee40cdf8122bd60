//! One poison policy for the core's locks: a `Mutex` or `RwLock` whose
//! holder panicked is used as it is. A panic is a bug, reported where it
//! happens; the state behind each lock stays whole between the statements
//! that change it, so the daemon keeps serving other requests instead of
//! panicking again at every lock that bug left poisoned.

use std::sync::{Mutex, MutexGuard, PoisonError, RwLock, RwLockReadGuard, RwLockWriteGuard};

/// Locks `m`, poisoned or not.
pub(crate) fn lock<T: ?Sized>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

/// Locks `l` for reading, poisoned or not.
pub(crate) fn read<T: ?Sized>(l: &RwLock<T>) -> RwLockReadGuard<'_, T> {
    l.read().unwrap_or_else(PoisonError::into_inner)
}

/// Locks `l` for writing, poisoned or not.
pub(crate) fn write<T: ?Sized>(l: &RwLock<T>) -> RwLockWriteGuard<'_, T> {
    l.write().unwrap_or_else(PoisonError::into_inner)
}
