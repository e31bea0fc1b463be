//! What a workload keeps in the pool besides its own tables, and the helpers
//! every workload uses to load and to read whole tables.
//!
//! SPEC ROW. `zen load` and `zen run` are separate processes, so the
//! parameters that define a population (YCSB's record count, TPC-C's scale,
//! SmallBank's initial total) are written by `load` as JSON into row 0 of
//! table `zen_workload`; `zen run` and `zen check` read it back
//! ([`read_spec`]) instead of trusting flags to match.
//!
//! LOAD STATE. A load can stop part-way: the pool fills up, the process is
//! killed or crashes. What it committed stays and the pool opens as valid;
//! with nothing more to go on, `zen run` would fail later with "key 54333 not
//! found" and `zen check` with rows missing. So the spec table holds a second
//! row, [`LOAD_STATE_KEY`],
//! whose first word says whether the load finished: [`write_spec`] inserts it
//! as [`LOAD_RUNNING`] in the same transaction as the spec row, before any
//! population row, and [`finish_load`] sets it to [`LOAD_COMPLETE`] in its
//! own transaction, after every loader has committed and synced its rows.
//! [`read_spec`] (what `zen run` and `zen check` start with) refuses a pool
//! whose load is still running with [`Error::LoadUnfinished`]. Pools loaded
//! before this row existed have no such row and are taken as complete, as
//! they were before.
//!
//! ```text
//! zen_workload   key 0: spec_bytes | spec JSON          (written at load start)
//!                key 1: LOAD_RUNNING → LOAD_COMPLETE    (flipped at load end)
//! ```
//!
//! LEDGER. Some checks need to know what committed transactions did in
//! total: SmallBank's money conservation needs the net money deposited and
//! withdrawn, TPC-C's condition 11 holds only until the first Delivery. Each
//! driver worker owns one row of table `zen_ledger` (key = worker index) and
//! updates it *inside* the transaction it accounts for, so the ledger commits
//! or aborts with it, survives the process and any crash the transaction
//! survives, and never conflicts between workers.
//!
//! WHOLE-TABLE READS. Checks read every row of a table. One transaction
//! doing that would exceed any access-set limit, so [`scan_all`] reads in
//! read-only transactions of up to [`SCAN_CHUNK_ROWS`] rows, resuming after
//! the last key: consistent because checks run on a quiescent engine.
//!
//! LOADING. [`Loader`] batches inserts into transactions of
//! [`LOAD_BATCH_ROWS`] rows, or fewer once they hold [`LOAD_BATCH_BYTES`]
//! (so a batch of 1 KiB YCSB rows fits falcon's default 64 KiB log window),
//! and syncs at the end; [`load_parallel`] spreads
//! independent parts of a population over worker threads
//! ([`load_parallel_by`]: onto the thread whose worker will run them).

use std::ops::RangeInclusive;

use serde::{Deserialize, Serialize};
use zen_engine::schema::{MAX_KEY, row};
use zen_engine::{
    AbortReason, ColumnType, Engine, EngineWorker, TableId, TableSchema, Transaction, TxnOptions,
};

use crate::error::{Error, Result};
use crate::smallbank::SmallBankSpec;
use crate::tpcc::TpccSpec;
use crate::ycsb::YcsbSpec;

/// The table holding the spec row.
pub const SPEC_TABLE: &str = "zen_workload";
/// The table holding one ledger row per driver worker.
pub const LEDGER_TABLE: &str = "zen_ledger";
/// Ledger rows created at load: the most driver workers a run may use.
pub const LEDGER_ROWS: u64 = 256;
/// Rows per transaction of [`scan_all`] (halved on `CacheFull`, see `ChunkReader::read`).
pub const SCAN_CHUNK_ROWS: usize = 1024;
/// The smallest chunk [`scan_all`] halves down to.
pub const MIN_SCAN_CHUNK_ROWS: usize = 16;
/// Attempts of one chunk that end in `CacheFull` before it is halved.
const CACHE_FULL_RETRIES: u32 = 8;
/// Rows per transaction of [`Loader`].
pub const LOAD_BATCH_ROWS: usize = 64;
/// Row bytes at which [`Loader`] commits a batch before it has
/// [`LOAD_BATCH_ROWS`] rows (half of falcon's default log window).
pub const LOAD_BATCH_BYTES: usize = 32 << 10;

const SPEC_BYTES: u16 = 2048;
const SPEC_KEY: u64 = 0;
/// The row of [`SPEC_TABLE`] that says whether the load finished (its first
/// word; the rest of the row is zero). See LOAD STATE in the module docs.
pub const LOAD_STATE_KEY: u64 = 1;
/// Load state: the load started and has not finished ("LOADING" in ASCII).
pub const LOAD_RUNNING: u64 = 0x0047_4e49_4441_4f4c;
/// Load state: every row of the population is committed and durable ("LOADED!").
pub const LOAD_COMPLETE: u64 = 0x0021_4445_4441_4f4c;
pub(crate) const LEDGER_AMOUNT_AT: usize = 0;
pub(crate) const LEDGER_EVENTS_AT: usize = 8;

/// The population parameters stored in the pool. See the module docs.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "workload", rename_all = "lowercase")]
pub enum WorkloadSpec {
    Ycsb(YcsbSpec),
    Tpcc(TpccSpec),
    SmallBank(SmallBankSpec),
}

impl WorkloadSpec {
    pub fn name(&self) -> &'static str {
        match self {
            WorkloadSpec::Ycsb(_) => "ycsb",
            WorkloadSpec::Tpcc(_) => "tpcc",
            WorkloadSpec::SmallBank(_) => "smallbank",
        }
    }
}

/// Schemas of the spec and ledger tables.
pub fn meta_tables() -> Vec<TableSchema> {
    vec![
        TableSchema::new(SPEC_TABLE)
            .column("spec_bytes", ColumnType::U64)
            .column("spec", ColumnType::Bytes(SPEC_BYTES)),
        TableSchema::new(LEDGER_TABLE)
            .column("amount", ColumnType::I64)
            .column("events", ColumnType::I64),
    ]
}

/// Create `schemas` (and the meta tables) and return the ids of `schemas`.
pub fn create_tables(engine: &dyn Engine, schemas: &[TableSchema]) -> Result<Vec<TableId>> {
    for meta in meta_tables() {
        engine.create_table(&meta)?;
    }
    schemas.iter().map(|s| Ok(engine.create_table(s)?)).collect()
}

/// Look up a workload table, with a clear error when the pool lacks it.
pub fn table(engine: &dyn Engine, name: &str) -> Result<TableId> {
    engine.table_id(name).map_err(|_| Error::NotLoaded { table: name.to_string() })
}

/// Write the spec row and the ledger rows (once, at load).
pub fn write_spec(engine: &dyn Engine, spec: &WorkloadSpec) -> Result<()> {
    let json = serde_json::to_vec(spec)?;
    if json.len() > usize::from(SPEC_BYTES) {
        return Err(Error::Metadata(format!("spec of {} bytes exceeds {SPEC_BYTES}", json.len())));
    }
    let mut spec_row = vec![0u8; 8 + usize::from(SPEC_BYTES)];
    row::put_u64(&mut spec_row, 0, json.len() as u64);
    spec_row[8..8 + json.len()].copy_from_slice(&json);
    let spec_table = table(engine, SPEC_TABLE)?;
    let mut loader = Loader::new(engine)?;
    // One batch, so one transaction: no pool has a spec without a load state.
    loader.insert(spec_table, SPEC_KEY, &spec_row)?;
    loader.insert(spec_table, LOAD_STATE_KEY, &load_state_row(LOAD_RUNNING))?;
    let ledger = table(engine, LEDGER_TABLE)?;
    for worker in 0..LEDGER_ROWS {
        loader.insert(ledger, worker, &[0u8; 16])?;
    }
    loader.finish()
}

/// A row of [`SPEC_TABLE`] holding load state `state`.
fn load_state_row(state: u64) -> Vec<u8> {
    let mut state_row = vec![0u8; 8 + usize::from(SPEC_BYTES)];
    row::put_u64(&mut state_row, 0, state);
    state_row
}

/// Record that the load finished: every loader has committed and synced its
/// rows. The last step of a workload's `load`.
pub fn finish_load(engine: &dyn Engine) -> Result<()> {
    let spec_table = table(engine, SPEC_TABLE)?;
    let complete = load_state_row(LOAD_COMPLETE);
    let mut worker = engine.worker()?;
    worker.run(&TxnOptions::default(), |tx| tx.update(spec_table, LOAD_STATE_KEY, &complete))?;
    Ok(worker.sync()?)
}

/// Read the spec row written by the load; a pool whose load did not finish
/// is refused with [`Error::LoadUnfinished`].
pub fn read_spec(engine: &dyn Engine) -> Result<WorkloadSpec> {
    let spec_table = table(engine, SPEC_TABLE)?;
    let mut spec_row = vec![0u8; 8 + usize::from(SPEC_BYTES)];
    let mut state_row = vec![0u8; 8 + usize::from(SPEC_BYTES)];
    let mut worker = engine.worker()?;
    let (found, state) = worker.run(&TxnOptions::read_only(), |tx| {
        let found = tx.get(spec_table, SPEC_KEY, &mut spec_row)?;
        let state = tx.get(spec_table, LOAD_STATE_KEY, &mut state_row)?;
        Ok((found, state.then(|| row::get_u64(&state_row, 0))))
    })?;
    if !found {
        return Err(Error::NotLoaded { table: format!("{SPEC_TABLE} (row {SPEC_KEY})") });
    }
    let len = row::get_u64(&spec_row, 0) as usize;
    let json = spec_row
        .get(8..8 + len)
        .ok_or_else(|| Error::Metadata(format!("spec length {len} exceeds the row")))?;
    let spec: WorkloadSpec =
        serde_json::from_slice(json).map_err(|e| Error::Metadata(format!("spec row: {e}")))?;
    match state {
        // Loaded before the load state existed: complete, as it always was.
        None | Some(LOAD_COMPLETE) => Ok(spec),
        Some(LOAD_RUNNING) => Err(Error::LoadUnfinished { workload: spec.name() }),
        Some(other) => Err(Error::Metadata(format!(
            "load state {other:#018x} is neither running nor complete"
        ))),
    }
}

/// Add to ledger row `worker` inside the calling transaction.
pub fn ledger_add(
    tx: &mut dyn Transaction,
    ledger: TableId,
    worker: usize,
    amount: i64,
    events: i64,
) -> zen_engine::Result<()> {
    let mut entry = [0u8; 16];
    if !tx.get_for_update(ledger, worker as u64, &mut entry)? {
        return Err(zen_engine::Error::KeyNotFound {
            table: LEDGER_TABLE.into(),
            key: worker as u64,
        });
    }
    let amount = row::get_i64(&entry, LEDGER_AMOUNT_AT) + amount;
    let events = row::get_i64(&entry, LEDGER_EVENTS_AT) + events;
    row::put_i64(&mut entry, LEDGER_AMOUNT_AT, amount);
    row::put_i64(&mut entry, LEDGER_EVENTS_AT, events);
    tx.update(ledger, worker as u64, &entry)
}

/// Sums of the ledger over every worker: (amount, events).
pub fn ledger_totals(engine: &dyn Engine) -> Result<(i64, i64)> {
    let ledger = table(engine, LEDGER_TABLE)?;
    let (mut amount, mut events) = (0i64, 0i64);
    scan_all(engine, ledger, 0..=MAX_KEY, &mut |_, entry| {
        amount += row::get_i64(entry, LEDGER_AMOUNT_AT);
        events += row::get_i64(entry, LEDGER_EVENTS_AT);
        Ok(())
    })?;
    Ok((amount, events))
}

/// Check a driver worker index against the ledger's size.
pub fn check_worker_count(threads: usize) -> Result<()> {
    if threads == 0 || threads as u64 > LEDGER_ROWS {
        return Err(Error::invalid("threads", threads, format!("1..={LEDGER_ROWS}")));
    }
    Ok(())
}

/// Visit every row of `table` with a key in `range`, in key order, in chunks
/// of read-only transactions. Returns the number of rows visited.
pub fn scan_all(
    engine: &dyn Engine,
    table: TableId,
    range: RangeInclusive<u64>,
    f: &mut dyn FnMut(u64, &[u8]) -> Result<()>,
) -> Result<u64> {
    let row_bytes = engine.schema(table)?.row_size();
    let mut reader = ChunkReader {
        worker: engine.worker()?,
        table,
        chunk_rows: SCAN_CHUNK_ROWS,
        keys: Vec::with_capacity(SCAN_CHUNK_ROWS),
        rows: Vec::new(),
    };
    let (mut from, end) = (*range.start(), *range.end());
    let mut visited = 0u64;
    while from <= end {
        let full = reader.read(from..=end)?;
        for (i, key) in reader.keys.iter().enumerate() {
            f(*key, &reader.rows[i * row_bytes..(i + 1) * row_bytes])?;
        }
        visited += reader.keys.len() as u64;
        match reader.keys.last() {
            Some(&last) if full && last < end => from = last + 1,
            _ => break,
        }
    }
    Ok(visited)
}

/// Reads one chunk of a table per read-only transaction for [`scan_all`].
struct ChunkReader<'e> {
    worker: Box<dyn EngineWorker + 'e>,
    table: TableId,
    chunk_rows: usize,
    keys: Vec<u64>,
    rows: Vec<u8>,
}

impl ChunkReader<'_> {
    /// Read up to `chunk_rows` rows of `range`; true when the chunk was full.
    ///
    /// Every row a transaction reads occupies a cache entry until it ends, so
    /// a chunk larger than the worker's cache share of the table aborts with
    /// `CacheFull` however often it is retried. `CacheFull` is often
    /// transient (retired entries are reclaimed a little later), so after
    /// every [`CACHE_FULL_RETRIES`] attempts the chunk is halved (down to
    /// [`MIN_SCAN_CHUNK_ROWS`]). Other retryable aborts are retried as they
    /// are; at most `MAX_ATTEMPTS` attempts in all.
    fn read(&mut self, range: RangeInclusive<u64>) -> Result<bool> {
        let (table, keys, rows) = (self.table, &mut self.keys, &mut self.rows);
        for attempt in 1..=zen_engine::api::MAX_ATTEMPTS {
            let limit = self.chunk_rows;
            let result = self.worker.execute(&TxnOptions::read_only(), &mut |tx| {
                keys.clear();
                rows.clear();
                tx.scan(table, range.clone(), limit, &mut |key, data| {
                    keys.push(key);
                    rows.extend_from_slice(data);
                    true
                })
                .map(|_| ())
            });
            let error = match result {
                Ok(_) => return Ok(keys.len() == limit),
                Err(e) => e,
            };
            match error.abort_reason() {
                Some(AbortReason::CacheFull)
                    if attempt % CACHE_FULL_RETRIES == 0
                        && self.chunk_rows > MIN_SCAN_CHUNK_ROWS =>
                {
                    self.chunk_rows /= 2;
                }
                Some(reason)
                    if reason.is_retryable() && attempt < zen_engine::api::MAX_ATTEMPTS =>
                {
                    std::thread::yield_now();
                }
                _ => return Err(error.into()),
            }
        }
        unreachable!("the last attempt returns")
    }
}

/// Batched inserts through one worker. See the module docs.
pub struct Loader<'e> {
    worker: Box<dyn EngineWorker + 'e>,
    /// (table, key, start of the row in `bytes`, row length)
    pending: Vec<(TableId, u64, usize, usize)>,
    bytes: Vec<u8>,
}

impl<'e> Loader<'e> {
    pub fn new(engine: &'e dyn Engine) -> Result<Loader<'e>> {
        Ok(Loader {
            worker: engine.worker()?,
            pending: Vec::with_capacity(LOAD_BATCH_ROWS),
            bytes: Vec::new(),
        })
    }

    /// The engine's id of this loader's worker.
    pub fn worker_id(&self) -> usize {
        self.worker.id()
    }

    /// Queue one insert; commits a batch when it is full.
    pub fn insert(&mut self, table: TableId, key: u64, data: &[u8]) -> Result<()> {
        self.pending.push((table, key, self.bytes.len(), data.len()));
        self.bytes.extend_from_slice(data);
        if self.pending.len() >= LOAD_BATCH_ROWS || self.bytes.len() >= LOAD_BATCH_BYTES {
            self.flush()
        } else {
            Ok(())
        }
    }

    /// Commit the queued inserts.
    pub fn flush(&mut self) -> Result<()> {
        if self.pending.is_empty() {
            return Ok(());
        }
        let (pending, bytes) = (&self.pending, &self.bytes);
        self.worker.run(&TxnOptions::default(), |tx| {
            for &(table, key, at, len) in pending {
                tx.insert(table, key, &bytes[at..at + len])?;
            }
            Ok(())
        })?;
        self.pending.clear();
        self.bytes.clear();
        Ok(())
    }

    /// Commit what is queued and make it durable.
    pub fn finish(mut self) -> Result<()> {
        self.flush()?;
        Ok(self.worker.sync()?)
    }
}

/// Run `part(loader, i)` for every `i` in `0..parts` on up to `threads`
/// threads, each with its own [`Loader`]; the first error wins. Part `i`
/// goes to thread `i % threads`.
pub fn load_parallel(
    engine: &dyn Engine,
    threads: usize,
    parts: usize,
    part: &(dyn Fn(&mut Loader<'_>, usize) -> Result<()> + Sync),
) -> Result<()> {
    load_parallel_by(engine, threads, parts, &|i, threads| i % threads, part)
}

/// [`load_parallel`] with part `i` on thread `owner(i, threads) % threads`
/// (`threads` after clamping to `1..=parts`). The loaders register their
/// workers in thread order before any thread starts, as the benchmark
/// driver does (`driver::run_benchmark`), so on an engine with no other
/// worker, thread `t` loads as worker `t`: the rows a workload's thread `t`
/// will work on (TPC-C's home warehouses) are then written by, and cached
/// in the regions of, the worker that runs them (Zen's heap and Met-Cache
/// regions, its spares: slots are rewritten only by their owner).
pub fn load_parallel_by(
    engine: &dyn Engine,
    threads: usize,
    parts: usize,
    owner: &(dyn Fn(usize, usize) -> usize + Sync),
    part: &(dyn Fn(&mut Loader<'_>, usize) -> Result<()> + Sync),
) -> Result<()> {
    let threads = threads.clamp(1, parts.max(1));
    let loaders = (0..threads).map(|_| Loader::new(engine)).collect::<Result<Vec<_>>>()?;
    std::thread::scope(|scope| {
        let handles: Vec<_> = loaders
            .into_iter()
            .enumerate()
            .map(|(t, mut loader)| {
                scope.spawn(move || -> Result<()> {
                    for i in (0..parts).filter(|&i| owner(i, threads) % threads == t) {
                        part(&mut loader, i)?;
                    }
                    loader.finish()
                })
            })
            .collect();
        let mut first = Ok(());
        for (t, handle) in handles.into_iter().enumerate() {
            let result = handle.join().unwrap_or(Err(Error::WorkerPanicked(t)));
            if first.is_ok() {
                first = result;
            }
        }
        first
    })
}
