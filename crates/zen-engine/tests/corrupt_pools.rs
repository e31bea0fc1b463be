//! A corpus of corrupt Zen pools (VERIFICATION.md §4): opened through
//! `zen_engine::open` and through the CLI (`zen recover` / `zen check`), each
//! must give a typed error or a nonzero exit code, never a panic, and a
//! refused pool file must be left byte for byte as it was.
//!
//! How: the test builds one small pool on `fs` (64 KiB pages, two tables,
//! inserts, updates and deletes), leaves it as a crash would (`abandon`), and
//! derives each case from its bytes: bad slot header words, page header
//! garbage, page-table owners of an unknown table or worker, catalog JSON
//! garbage behind a correct checksum, catalog fields that point nowhere,
//! truncated files. Cases marked `Refused` must fail to open; the others are
//! corruptions recovery cannot tell from a valid state, which must still not
//! panic (opening, checking invariants, reading every row and committing a
//! write).
//!
//! The CLI half runs the `zen` binary of the same target directory when it
//! has been built (a workspace-wide `cargo test` builds it); otherwise it is
//! skipped with a note.

mod common;

use std::panic::{AssertUnwindSafe, catch_unwind};
use std::path::{Path, PathBuf};

use common::*;
use zen_engine::{CcKind, EngineConfig, TableId, TxnOptions};

const SYSTEM_TABLE: u64 = 0xFFFF_FFFF;
const HEADER_CATALOG_ROOT: usize = 64;
const PAGE_TABLE: usize = 4096;

fn config(path: &Path, create: bool) -> EngineConfig {
    EngineConfig {
        pool: Some(path.to_path_buf()),
        pool_size_bytes: 2 << 20,
        max_workers: 4,
        ..fs_config(path.parent().unwrap(), create, CcKind::Silo)
    }
}

/// The base pool: two tables, committed inserts, updates and deletes,
/// abandoned as a crash would leave it.
fn base_pool(dir: &Path) -> Vec<u8> {
    let path = dir.join("base.pool");
    let engine = zen_engine::open(&config(&path, true)).unwrap();
    let a = engine.create_table(&accounts()).unwrap();
    let b = engine
        .create_table(
            &zen_engine::TableSchema::new("orders")
                .column("amount", zen_engine::ColumnType::I64)
                .column("pad", zen_engine::ColumnType::Bytes(24)),
        )
        .unwrap();
    {
        let mut w = engine.worker().unwrap();
        w.run(&TxnOptions::default(), |tx| (0..40).try_for_each(|k| tx.insert(a, k, &row(100))))
            .unwrap();
        for k in 0..10 {
            w.run(&TxnOptions::default(), |tx| {
                tx.update(a, k, &row(k as i64))?;
                tx.insert(b, k, &row(7))
            })
            .unwrap();
        }
        w.run(&TxnOptions::default(), |tx| (30..35).try_for_each(|k| tx.delete(a, k))).unwrap();
        w.sync().unwrap();
    }
    engine.abandon();
    std::fs::read(&path).unwrap()
}

fn word(b: &[u8], at: usize) -> u64 {
    u64::from_le_bytes(b[at..at + 8].try_into().unwrap())
}

fn put(b: &mut [u8], at: usize, v: u64) {
    b[at..at + 8].copy_from_slice(&v.to_le_bytes());
}

/// Byte offset of the first heap page.
fn first_heap(b: &[u8]) -> usize {
    let l = layout(b);
    l.heap[0].0 * l.page_size
}

struct Layout {
    page_size: usize,
    catalog: usize,
    /// (page, table, worker) of every heap page.
    heap: Vec<(usize, u64, u64)>,
}

fn layout(b: &[u8]) -> Layout {
    let page_size = word(b, 24) as usize;
    let count = word(b, 32) as usize;
    let catalog = (word(b, HEADER_CATALOG_ROOT) & 0xFFFF_FFFF) as usize;
    let heap = (1..count)
        .filter_map(|p| {
            let e = word(b, PAGE_TABLE + 8 * p);
            let table = e & 0xFFFF_FFFF;
            (e != 0 && table != SYSTEM_TABLE).then_some((p, table, (e >> 32) & 0xFFFF))
        })
        .collect();
    Layout { page_size, catalog, heap }
}

/// Replace the catalog's JSON (and fix its length and checksum).
fn set_catalog_json(b: &mut [u8], json: &[u8]) {
    let l = layout(b);
    let base = l.catalog * l.page_size;
    put(b, base + 8, json.len() as u64);
    put(b, base + 16, u64::from(crc32c::crc32c(json)));
    b[base + 64..base + 64 + json.len()].copy_from_slice(json);
}

fn catalog_json(b: &[u8]) -> serde_json::Value {
    let l = layout(b);
    let base = l.catalog * l.page_size;
    let len = word(b, base + 8) as usize;
    serde_json::from_slice(&b[base + 64..base + 64 + len]).unwrap()
}

#[derive(Debug, Clone, Copy, PartialEq)]
enum Expect {
    /// Opening must fail with a typed error and leave the file unchanged.
    Refused,
    /// Undetectable by design (looks like a valid state): no panic.
    NoPanic,
}

type Mutate = fn(&mut Vec<u8>);

fn cases() -> Vec<(&'static str, Expect, Mutate)> {
    use Expect::*;
    vec![
        ("truncated to half", Refused, |b| b.truncate(b.len() / 2)),
        ("truncated to the page table", Refused, |b| b.truncate(8192)),
        ("heap page header garbage", Refused, |b| {
            let at = first_heap(b);
            b[at..at + 24].fill(0xAB);
        }),
        ("heap page header with another slot size", Refused, |b| {
            let at = first_heap(b);
            put(b, at + 16, 4096);
        }),
        ("heap page header of another table", Refused, |b| {
            let at = first_heap(b);
            let w = word(b, at + 8);
            put(b, at + 8, w ^ 1);
        }),
        ("page-table owner is an unknown table", Refused, |b| {
            let p = layout(b).heap[0].0;
            let e = word(b, PAGE_TABLE + 8 * p);
            put(b, PAGE_TABLE + 8 * p, (e & !0xFFFF_FFFF) | 77);
        }),
        ("page-table owner is worker 300", Refused, |b| {
            let p = layout(b).heap[0].0;
            let e = word(b, PAGE_TABLE + 8 * p);
            put(b, PAGE_TABLE + 8 * p, (e & !(0xFFFF << 32)) | (300 << 32));
        }),
        ("catalog JSON garbage with a correct checksum", Refused, |b| {
            set_catalog_json(b, b"{\"engine\": \"zen\", \"floor_page\": [garbage");
        }),
        ("catalog JSON of another engine", Refused, |b| {
            let mut doc = catalog_json(b);
            doc["engine"] = "mmdb".into();
            set_catalog_json(b, &serde_json::to_vec(&doc).unwrap());
        }),
        ("catalog floor page out of range", Refused, |b| {
            let mut doc = catalog_json(b);
            doc["floor_page"] = 1_000_000.into();
            set_catalog_json(b, &serde_json::to_vec(&doc).unwrap());
        }),
        ("catalog floor page is a heap page", Refused, |b| {
            let heap = layout(b).heap[0].0;
            let mut doc = catalog_json(b);
            doc["floor_page"] = heap.into();
            set_catalog_json(b, &serde_json::to_vec(&doc).unwrap());
        }),
        ("catalog without the tables the pages belong to", Refused, |b| {
            let mut doc = catalog_json(b);
            doc["tables"] = serde_json::json!([]);
            set_catalog_json(b, &serde_json::to_vec(&doc).unwrap());
        }),
        ("catalog length beyond its page", Refused, |b| {
            let l = layout(b);
            put(b, l.catalog * l.page_size + 8, 1 << 40);
        }),
        ("catalog checksum wrong", Refused, |b| {
            let l = layout(b);
            let at = l.catalog * l.page_size + 16;
            let v = word(b, at);
            put(b, at, v ^ 0x55);
        }),
        ("catalog magic wrong", Refused, |b| {
            let l = layout(b);
            b[l.catalog * l.page_size] ^= 0xFF;
        }),
        ("catalog root names a heap page", Refused, |b| {
            let p = layout(b).heap[0].0 as u64;
            put(b, HEADER_CATALOG_ROOT, p | (!p << 32));
        }),
        ("slot word 1 all ones (Tx-CTS beyond the maximum, LP)", Refused, |b| {
            let at = first_heap(b) + 64 + 8;
            put(b, at, u64::MAX);
        }),
        ("slot word 0 all ones (deleted, key 2^63-1)", NoPanic, |b| {
            let at = first_heap(b) + 64;
            put(b, at, u64::MAX);
        }),
        ("every slot of a heap page all ones", Refused, |b| {
            let at = first_heap(b);
            let l = layout(b);
            b[at + 64..at + l.page_size].fill(0xFF);
        }),
        ("every slot of a heap page 0x01 bytes", NoPanic, |b| {
            let at = first_heap(b);
            let l = layout(b);
            b[at + 64..at + l.page_size].fill(0x01);
        }),
        ("a slot duplicated into an empty slot", NoPanic, |b| {
            let at = first_heap(b) + 64;
            let slot: Vec<u8> = b[at..at + 48].to_vec();
            let l = layout(b);
            let last = first_heap(b) + l.page_size - 2 * 48;
            b[last..last + 48].copy_from_slice(&slot);
        }),
        ("commit floor of worker 0 all ones", Refused, |b| {
            let l = layout(b);
            let doc = catalog_json(b);
            let floor = doc["floor_page"].as_u64().unwrap() as usize;
            put(b, floor * l.page_size, u64::MAX);
        }),
    ]
}

/// Open, check, read and write: `Err` text of the first typed error.
fn exercise(path: &Path) -> Result<(), String> {
    let engine = zen_engine::open(&config(path, false)).map_err(|e| e.to_string())?;
    let result = (|| -> Result<(), String> {
        engine.check_invariants().map_err(|e| e.to_string())?;
        let mut w = engine.worker().map_err(|e| e.to_string())?;
        for t in 0..2 {
            w.run(&TxnOptions::read_only(), |tx| {
                tx.scan(TableId(t), 0..=zen_engine::schema::MAX_KEY, usize::MAX, &mut |_, _| true)
                    .map(|_| ())
            })
            .map_err(|e| e.to_string())?;
        }
        w.run(&TxnOptions::default(), |tx| tx.insert(TableId(1), 5000, &row(1)))
            .map_err(|e| e.to_string())
    })();
    engine.abandon();
    result
}

/// `Ok` when a refused pool file is unchanged.
fn unchanged(what: &str, before: &[u8], after: &[u8]) -> Result<(), String> {
    if after == before {
        return Ok(());
    }
    Err(format!("{what}: refused, but {}", changed(before, after)))
}

/// Where `after` differs from `before`, in words.
fn changed(before: &[u8], after: &[u8]) -> String {
    if before.len() != after.len() {
        return format!("the file changed length: {} -> {}", before.len(), after.len());
    }
    let diffs: Vec<String> = (0..before.len() / 8)
        .filter(|i| before[i * 8..i * 8 + 8] != after[i * 8..i * 8 + 8])
        .take(6)
        .map(|i| format!("{:#x}: {:#x} -> {:#x}", i * 8, word(before, i * 8), word(after, i * 8)))
        .collect();
    format!("the file was changed at {}", diffs.join(", "))
}

/// The `zen` binary next to this test's `deps/` directory, if built.
fn zen_binary() -> Option<PathBuf> {
    let exe = std::env::current_exe().ok()?;
    let bin = exe.parent()?.parent()?.join("zen");
    bin.is_file().then_some(bin)
}

#[test]
fn corrupt_pools_give_typed_errors_and_stay_unchanged() {
    let dir = tempfile::tempdir().unwrap();
    let base = base_pool(dir.path());
    // The corpus is meaningful only if the base pool opens.
    let sane = dir.path().join("sane.pool");
    std::fs::write(&sane, &base).unwrap();
    exercise(&sane).expect("the uncorrupted pool opens");
    let zen = zen_binary();
    if zen.is_none() {
        eprintln!("note: the zen binary is not built; skipping the CLI half");
    }
    let mut refused = 0;
    let mut failures = Vec::new();
    for (i, (name, expect, mutate)) in cases().into_iter().enumerate() {
        let mut bytes = base.clone();
        mutate(&mut bytes);
        let path = dir.path().join(format!("case{i}.pool"));
        std::fs::write(&path, &bytes).unwrap();
        let outcome = catch_unwind(AssertUnwindSafe(|| exercise(&path)));
        let after = std::fs::read(&path).unwrap();
        match (&outcome, expect) {
            (Err(_), _) => failures.push(format!("{name}: the library panicked")),
            (Ok(Ok(())), Expect::Refused) => failures.push(format!("{name}: opened")),
            (Ok(Err(e)), Expect::Refused) => {
                refused += 1;
                eprintln!("{name}: refused: {e}");
                if let Err(e) = unchanged(name, &bytes, &after) {
                    failures.push(e);
                }
            }
            (Ok(r), Expect::NoPanic) => eprintln!("{name}: {r:?}"),
        }
        let Some(zen) = &zen else { continue };
        for command in ["check", "recover"] {
            std::fs::write(&path, &bytes).unwrap();
            let out = std::process::Command::new(zen)
                .args([command, "--pool", path.to_str().unwrap()])
                .output()
                .unwrap();
            let stderr = String::from_utf8_lossy(&out.stderr);
            let code = out.status.code().unwrap_or(-1);
            if stderr.contains("panicked") || code == 101 || code < 0 {
                failures.push(format!("{name}: `zen {command}` crashed ({code}): {stderr}"));
            } else if expect == Expect::Refused {
                if code != 4 {
                    failures
                        .push(format!("{name}: `zen {command}` exited {code}, not 4: {stderr}"));
                }
                if !stderr.starts_with("error: ") || stderr.trim_end().lines().count() != 1 {
                    failures.push(format!("{name}: `zen {command}` message: {stderr:?}"));
                }
                let after = std::fs::read(&path).unwrap();
                if let Err(e) = unchanged(&format!("{name} (`zen {command}`)"), &bytes, &after) {
                    failures.push(e);
                }
            }
        }
    }
    eprintln!("{refused} corrupt pools refused with typed errors, {} cases in all", cases().len());
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}
