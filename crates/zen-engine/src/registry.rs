//! Tables by id, append-only, for workers to borrow without reference counts.
//!
//! Every operation of a transaction names its table by id. Workers used to
//! clone the table's `Arc` for each operation: an atomic read-modify-write
//! on a cache line that every worker touching the table shares, i.e. a
//! global shared write per access at 16–64 cores. Tables are never dropped
//! while the engine is open and ids are never reused, so a worker can
//! instead borrow `&'e Table` for as long as it borrows the engine: the
//! registry publishes each table once, in a `OnceLock`, and a lookup is one
//! acquire load.

use std::sync::{Arc, OnceLock};

use crate::error::{Error, Result};

/// Most tables an engine holds.
pub const MAX_TABLES: usize = 1024;

/// May an engine holding `tables` tables create one more?
pub fn check_room(tables: usize) -> Result<()> {
    if tables >= MAX_TABLES {
        return Err(Error::Unsupported(format!("an engine holds at most {MAX_TABLES} tables")));
    }
    Ok(())
}

pub struct TableRegistry<T> {
    slots: Box<[OnceLock<Arc<T>>]>,
}

impl<T> Default for TableRegistry<T> {
    fn default() -> Self {
        TableRegistry { slots: (0..MAX_TABLES).map(|_| OnceLock::new()).collect() }
    }
}

impl<T> TableRegistry<T> {
    /// Publish table `id` (once; the engine's catalog lock serialises the
    /// callers). Refused past [`MAX_TABLES`], or for an id that holds
    /// another table already.
    pub fn publish(&self, id: usize, table: &Arc<T>) -> Result<()> {
        let slot = self.slots.get(id).ok_or_else(|| {
            Error::Unsupported(format!("an engine holds at most {MAX_TABLES} tables"))
        })?;
        let stored = slot.get_or_init(|| Arc::clone(table));
        if !Arc::ptr_eq(stored, table) {
            return Err(Error::Corrupt(format!("table id {id} published twice")));
        }
        Ok(())
    }

    /// Table `id`, if published.
    #[inline]
    pub fn get(&self, id: usize) -> Option<&T> {
        self.slots.get(id)?.get().map(|t| &**t)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tables_are_published_once_and_borrowed() {
        let r = TableRegistry::default();
        let a = Arc::new("a");
        r.publish(0, &a).unwrap();
        r.publish(0, &a).unwrap();
        assert!(matches!(r.publish(0, &Arc::new("b")), Err(Error::Corrupt(_))));
        assert!(matches!(r.publish(MAX_TABLES, &a), Err(Error::Unsupported(_))));
        assert_eq!(r.get(0), Some(&"a"));
        assert_eq!(r.get(1), None);
        assert_eq!(r.get(MAX_TABLES + 5), None);
    }
}
