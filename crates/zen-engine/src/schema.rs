//! Table schemas: fixed-size rows of typed columns, a u64 primary key, and
//! optional secondary indexes over columns.
//!
//! Rows are plain byte arrays of `row_size()` bytes; columns are at fixed
//! offsets, little-endian. Composite primary keys (TPC-C) are packed into the
//! u64 by the caller; keys must be below 2^63 because the heap header keeps
//! the key in 63 bits (the top bit is the deleted flag, see `heap.rs`).

use serde::{Deserialize, Serialize};

use crate::error::{Error, Result};

/// Largest key a table accepts (the heap header stores keys in 63 bits).
pub const MAX_KEY: u64 = (1 << 63) - 1;
/// Largest row a table accepts, in bytes.
pub const MAX_ROW_BYTES: usize = 64 << 10;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ColumnType {
    I32,
    I64,
    U64,
    F64,
    /// Fixed-width bytes / char(n).
    Bytes(u16),
}

impl ColumnType {
    pub fn width(self) -> usize {
        match self {
            ColumnType::I32 => 4,
            ColumnType::I64 | ColumnType::U64 | ColumnType::F64 => 8,
            ColumnType::Bytes(n) => usize::from(n),
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Column {
    pub name: String,
    pub ty: ColumnType,
}

/// A secondary index: key = the named columns' bytes, concatenated; value = primary key.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SecondaryIndex {
    pub name: String,
    pub columns: Vec<String>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct TableSchema {
    pub name: String,
    pub columns: Vec<Column>,
    #[serde(default)]
    pub secondary: Vec<SecondaryIndex>,
    /// Partition key = `key >> partition_shift` (H-Store partitions, NUMA soft
    /// partitions); 0 = the whole key.
    #[serde(default)]
    pub partition_shift: u8,
}

impl TableSchema {
    pub fn new(name: impl Into<String>) -> Self {
        TableSchema {
            name: name.into(),
            columns: Vec::new(),
            secondary: Vec::new(),
            partition_shift: 0,
        }
    }

    pub fn column(mut self, name: impl Into<String>, ty: ColumnType) -> Self {
        self.columns.push(Column { name: name.into(), ty });
        self
    }

    pub fn secondary_index(mut self, name: impl Into<String>, columns: &[&str]) -> Self {
        let columns = columns.iter().map(|c| (*c).to_string()).collect();
        self.secondary.push(SecondaryIndex { name: name.into(), columns });
        self
    }

    /// Partition by the key's bits above `shift` (e.g. a warehouse id packed high).
    pub fn partition_by_high_bits(mut self, shift: u8) -> Self {
        self.partition_shift = shift;
        self
    }

    pub fn row_size(&self) -> usize {
        self.columns.iter().map(|c| c.ty.width()).sum()
    }

    /// Byte offset and type of a column.
    pub fn column_offset(&self, name: &str) -> Result<(usize, ColumnType)> {
        let mut offset = 0;
        for c in &self.columns {
            if c.name == name {
                return Ok((offset, c.ty));
            }
            offset += c.ty.width();
        }
        Err(Error::UnknownColumn { table: self.name.clone(), column: name.to_string() })
    }

    /// (offset, width) of each column of secondary index `index`.
    pub fn secondary_layout(&self, index: usize) -> Result<Vec<(usize, usize)>> {
        let def = self.secondary.get(index).ok_or_else(|| Error::InvalidSchema {
            table: self.name.clone(),
            detail: format!("no secondary index #{index}"),
        })?;
        def.columns
            .iter()
            .map(|c| self.column_offset(c).map(|(off, ty)| (off, ty.width())))
            .collect()
    }

    /// Check names, sizes and index definitions.
    pub fn validate(&self) -> Result<()> {
        let invalid = |detail: String| Error::InvalidSchema { table: self.name.clone(), detail };
        if self.name.is_empty() || self.name.len() > 64 {
            return Err(invalid("name must be 1..=64 bytes".into()));
        }
        if self.columns.is_empty() {
            return Err(invalid("a table needs at least one column".into()));
        }
        let mut names = std::collections::HashSet::new();
        for c in &self.columns {
            if !names.insert(c.name.as_str()) {
                return Err(invalid(format!("duplicate column `{}`", c.name)));
            }
            if c.ty.width() == 0 {
                return Err(invalid(format!("column `{}` has zero width", c.name)));
            }
        }
        if self.partition_shift >= 64 {
            return Err(invalid(format!(
                "partition shift {} must be below 64",
                self.partition_shift
            )));
        }
        if self.row_size() > MAX_ROW_BYTES {
            return Err(invalid(format!(
                "row of {} bytes exceeds {MAX_ROW_BYTES}",
                self.row_size()
            )));
        }
        for (i, idx) in self.secondary.iter().enumerate() {
            if idx.columns.is_empty() {
                return Err(invalid(format!("secondary index `{}` has no columns", idx.name)));
            }
            let width: usize = self.secondary_layout(i)?.iter().map(|l| l.1).sum();
            if width > crate::index::MAX_SECONDARY_KEY_BYTES {
                return Err(invalid(format!(
                    "secondary index `{}` has a key of {width} bytes; at most {} are supported",
                    idx.name,
                    crate::index::MAX_SECONDARY_KEY_BYTES
                )));
            }
        }
        Ok(())
    }
}

/// Little helpers to read and write columns of a row at known offsets.
pub mod row {
    pub fn get_u64(row: &[u8], at: usize) -> u64 {
        u64::from_le_bytes(row[at..at + 8].try_into().expect("8 bytes"))
    }
    pub fn put_u64(row: &mut [u8], at: usize, v: u64) {
        row[at..at + 8].copy_from_slice(&v.to_le_bytes());
    }
    pub fn get_i64(row: &[u8], at: usize) -> i64 {
        i64::from_le_bytes(row[at..at + 8].try_into().expect("8 bytes"))
    }
    pub fn put_i64(row: &mut [u8], at: usize, v: i64) {
        row[at..at + 8].copy_from_slice(&v.to_le_bytes());
    }
    pub fn get_i32(row: &[u8], at: usize) -> i32 {
        i32::from_le_bytes(row[at..at + 4].try_into().expect("4 bytes"))
    }
    pub fn put_i32(row: &mut [u8], at: usize, v: i32) {
        row[at..at + 4].copy_from_slice(&v.to_le_bytes());
    }
    pub fn get_f64(row: &[u8], at: usize) -> f64 {
        f64::from_le_bytes(row[at..at + 8].try_into().expect("8 bytes"))
    }
    pub fn put_f64(row: &mut [u8], at: usize, v: f64) {
        row[at..at + 8].copy_from_slice(&v.to_le_bytes());
    }
}
