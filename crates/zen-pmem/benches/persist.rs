//! Micro-benchmarks of zen-pmem: persist cost per backend, fence cost, the
//! latency model's accuracy, and crash-simulator throughput.
//!
//! What: four groups. `persist_1k`: one 1 KiB tuple (16 lines) written,
//! flushed and fenced on `fs` (pool in /dev/shm when it exists), `emu`
//! (optane model) and `sim`. `fence`: a fence after flushing one dirty line
//! and after none, on `fs`. `latency_model`: an 8-byte NVM read and a 16-line
//! persist on `emu` against `fs`; the extra time is printed next to the
//! configured delay (220 ns, 100 + 16 × 30 = 580 ns) with their ratio.
//! `sim_throughput`: crash images checked per second on a 16 MiB pool whose
//! trace holds 100 toy transactions (strict, budget 256 per point).
//!
//! How: criterion with short runs (2 s measurement, 20 samples) so the whole
//! file finishes in a couple of minutes; `--quick` shortens it further.
//! Invariant: every measured operation changes the bytes it persists (the
//! simulator elides stores of unchanged bytes, which would flatter it).

use std::hint::black_box;
use std::path::PathBuf;
use std::time::{Duration, Instant};

use criterion::{Criterion, Throughput, criterion_group, criterion_main};
use zen_pmem::sim::{CrashMode, SimBackend, Trace};
use zen_pmem::{
    BackendOptions, EmuBackend, FsBackend, NvmProfile, PageOwner, PersistenceDomain, PmemBackend,
    Pool, PoolOptions,
};

const PAGE_BYTES: u64 = 64 << 10;
const TUPLE_BYTES: u64 = 1024;

fn options() -> PoolOptions {
    PoolOptions { page_size: PAGE_BYTES, ..PoolOptions::default() }
}

/// A directory for pool files: /dev/shm when present (no disk writeback).
fn scratch_dir() -> tempfile::TempDir {
    let shm = PathBuf::from("/dev/shm");
    if shm.is_dir() { tempfile::tempdir_in(shm) } else { tempfile::tempdir() }
        .expect("temporary directory")
}

fn file_pool<B: PmemBackend>(dir: &tempfile::TempDir, name: &str) -> (Pool<B>, u64) {
    let opts = BackendOptions::new(dir.path().join(name));
    let pool = Pool::<B>::create(&opts, 8 * PAGE_BYTES, &options()).expect("create pool");
    let page = pool.allocate_page(1, PageOwner { table: 1, worker: 0 }).expect("page");
    let base = pool.page_offset(page);
    (pool, base)
}

/// Write a 1 KiB tuple whose bytes depend on `i`, flush it, fence.
fn persist_tuple<B: PmemBackend>(pool: &Pool<B>, base: u64, i: u64, tuple: &mut [u8]) {
    tuple[..8].copy_from_slice(&i.to_le_bytes());
    tuple[8] = i as u8;
    tuple[TUPLE_BYTES as usize - 1] = (i >> 8) as u8;
    let offset = base + (i % (PAGE_BYTES / TUPLE_BYTES)) * TUPLE_BYTES;
    let p = pool.persister(1);
    p.write(offset, tuple);
    p.persist(offset, TUPLE_BYTES);
}

fn bench_persist(c: &mut Criterion) {
    let dir = scratch_dir();
    let mut group = c.benchmark_group("persist_1k");
    group.throughput(Throughput::Bytes(TUPLE_BYTES));
    let mut tuple = vec![0x5Au8; TUPLE_BYTES as usize];
    let (fs, fs_base) = file_pool::<FsBackend>(&dir, "fs.pool");
    let mut i = 0u64;
    group.bench_function("fs", |b| {
        b.iter(|| {
            i += 1;
            persist_tuple(&fs, fs_base, i, &mut tuple)
        })
    });
    let (emu, emu_base) = file_pool::<EmuBackend>(&dir, "emu.pool");
    group.bench_function("emu_optane", |b| {
        b.iter(|| {
            i += 1;
            persist_tuple(&emu, emu_base, i, &mut tuple)
        })
    });
    let sim = SimBackend::new(8 * PAGE_BYTES, PersistenceDomain::Adr);
    let pool = Pool::format(sim.clone(), &options()).expect("format");
    let base = pool.page_offset(pool.allocate_page(1, PageOwner { table: 1, worker: 0 }).unwrap());
    group.bench_function("sim", |b| {
        b.iter(|| {
            i += 1;
            persist_tuple(&pool, base, i, &mut tuple);
            if i.is_multiple_of(4096) {
                sim.reset_trace(); // keep the recorded trace bounded
            }
        })
    });
    group.finish();
}

fn bench_fence(c: &mut Criterion) {
    let dir = scratch_dir();
    let (fs, base) = file_pool::<FsBackend>(&dir, "fence.pool");
    let mut group = c.benchmark_group("fence_fs");
    let mut i = 0u64;
    group.bench_function("after_1_dirty_line", |b| {
        let p = fs.persister(1);
        b.iter(|| {
            i += 1;
            p.write_u64_atomic(base + (i % 64) * 64, i);
            p.flush(base + (i % 64) * 64, 8);
            p.fence();
        })
    });
    group.bench_function("after_0_lines", |b| {
        let p = fs.persister(1);
        b.iter(|| p.fence())
    });
    group.finish();
}

/// Mean nanoseconds of `op` over `n` runs, the best of 5 rounds (filters
/// out rounds slowed by other work on the machine).
fn mean_ns(n: u64, mut op: impl FnMut(u64)) -> f64 {
    (0..5)
        .map(|_| {
            let start = Instant::now();
            for i in 0..n {
                op(i);
            }
            start.elapsed().as_nanos() as f64 / n as f64
        })
        .fold(f64::INFINITY, f64::min)
}

/// Flush 16 clean lines (no stores) and fence: isolates the fence's modelled charge.
fn flush_clean_and_fence<B: PmemBackend>(pool: &Pool<B>, base: u64) {
    let p = pool.persister(1);
    p.flush(base, TUPLE_BYTES);
    p.fence();
}

/// Print measured extra latency of `emu` over `fs` next to the configured delays.
fn print_model_accuracy(fs: &Pool<FsBackend>, fs_base: u64, emu: &Pool<EmuBackend>, emu_base: u64) {
    let model = NvmProfile::Optane.model();
    let n = 100_000;
    let read = |pool: &dyn Fn(&mut [u8; 8]), _| {
        let mut buf = [0u8; 8];
        pool(&mut buf);
        black_box(buf);
    };
    let read_extra =
        mean_ns(n, |i| read(&|b| emu.persister(1).read(emu_base + (i % 512) * 64, b), i))
            - mean_ns(n, |i| read(&|b| fs.persister(1).read(fs_base + (i % 512) * 64, b), i));
    let fence_extra = mean_ns(n / 4, |_| flush_clean_and_fence(emu, emu_base))
        - mean_ns(n / 4, |_| flush_clean_and_fence(fs, fs_base));
    let mut tuple = vec![0u8; TUPLE_BYTES as usize];
    let persist_extra = mean_ns(n / 4, |i| persist_tuple(emu, emu_base, i, &mut tuple))
        - mean_ns(n / 4, |i| persist_tuple(fs, fs_base, i, &mut tuple));
    let wait = mean_ns(n / 4, |_| {
        black_box(zen_pmem::cpu::busy_wait_ns(580));
    });
    let read_ns = model.read_cost_ns(0, 8) as f64;
    let fence_ns = model.fence_cost_ns(TUPLE_BYTES / 64) as f64;
    println!("latency model (measured extra over fs vs configured):");
    println!(
        "  8-byte read:                 +{read_extra:.0} ns vs {read_ns} ns (ratio {:.2})",
        read_extra / read_ns
    );
    println!(
        "  fence after 16 clean lines:  +{fence_extra:.0} ns vs {fence_ns} ns (ratio {:.2})",
        fence_extra / fence_ns
    );
    println!(
        "  1 KiB persist (16 dirty):    +{persist_extra:.0} ns vs {fence_ns} ns (ratio {:.2}; the wait overlaps real write-back)",
        persist_extra / fence_ns
    );
    println!("  busy_wait_ns(580) itself:    {wait:.0} ns");
}

fn bench_latency_model(c: &mut Criterion) {
    let dir = scratch_dir();
    let (fs, fs_base) = file_pool::<FsBackend>(&dir, "lat-fs.pool");
    let (emu, emu_base) = file_pool::<EmuBackend>(&dir, "lat-emu.pool");
    print_model_accuracy(&fs, fs_base, &emu, emu_base);
    let read = |pool: &dyn Fn(u64, &mut [u8; 8]), i: u64| {
        let mut buf = [0u8; 8];
        pool(i, &mut buf);
        black_box(buf);
    };
    let fs_read = |i: u64, buf: &mut [u8; 8]| fs.persister(1).read(fs_base + (i % 512) * 64, buf);
    let emu_read =
        |i: u64, buf: &mut [u8; 8]| emu.persister(1).read(emu_base + (i % 512) * 64, buf);
    let mut group = c.benchmark_group("latency_model");
    group.bench_function("emu_read_8b", |b| {
        let mut i = 0;
        b.iter(|| {
            i += 1;
            read(&emu_read, i)
        })
    });
    group.bench_function("fs_read_8b", |b| {
        let mut i = 0;
        b.iter(|| {
            i += 1;
            read(&fs_read, i)
        })
    });
    group.finish();
}

const SIM_POOL_BYTES: u64 = 16 << 20;
const SIM_TXNS: u64 = 100;
const SLOT_BYTES: u64 = 48;

fn tuple_byte(x: u64) -> u8 {
    ((x as u8) << 1) | 2
}

/// 100 toy transactions (3 tuples, then an LP word) on a 16 MiB simulated pool.
fn sim_trace() -> (Trace, u64) {
    let sim = SimBackend::new(SIM_POOL_BYTES, PersistenceDomain::Adr);
    let pool = Pool::format(sim.clone(), &options()).expect("format");
    let base = pool.page_offset(pool.allocate_page(1, PageOwner { table: 1, worker: 0 }).unwrap());
    sim.reset_trace();
    let p = pool.persister(1);
    for txn in 0..SIM_TXNS {
        let slot = base + txn * 3 * SLOT_BYTES;
        // Even bytes: the LP bit (bit 0 of the last tuple's ts word) is set only by the LP store.
        let tuple: Vec<u8> = (0..3 * SLOT_BYTES).map(|j| tuple_byte(txn + j)).collect();
        p.write(slot, &tuple);
        p.persist(slot, 3 * SLOT_BYTES);
        p.write_u64_atomic(slot + 2 * SLOT_BYTES + 8, (txn << 1) | 1);
        p.persist(slot + 2 * SLOT_BYTES + 8, 8);
    }
    let trace = sim.trace();
    pool.abandon();
    (trace, base)
}

/// Check every strict image of every point cheaply: committed txns have their first tuple.
fn check_all_images(trace: &Trace, base: u64) -> u64 {
    let mut images = 0;
    for point in trace.crash_points() {
        let mut cursor = point.cursor(CrashMode::Strict, 256, 1);
        while let Some(image) = cursor.next_image() {
            for txn in 0..SIM_TXNS {
                let slot = (base + txn * 3 * SLOT_BYTES) as usize;
                let lp = slot + 2 * SLOT_BYTES as usize + 8;
                let committed = image.bytes[lp] & 1 == 1;
                assert!(
                    !committed || image.bytes[slot] == tuple_byte(txn),
                    "{}",
                    image.description
                );
            }
            images += 1;
        }
    }
    images
}

fn bench_sim_throughput(c: &mut Criterion) {
    let (trace, base) = sim_trace();
    let images = check_all_images(&trace, base);
    let start = Instant::now();
    let passes = 3;
    for _ in 0..passes {
        black_box(check_all_images(&trace, base));
    }
    let per_second = (passes * images) as f64 / start.elapsed().as_secs_f64();
    println!(
        "simulator: {images} images at {} crash points per pass, {per_second:.0} images/s \
         on a {} MiB pool",
        trace.fence_count() + 1,
        SIM_POOL_BYTES >> 20
    );
    let mut group = c.benchmark_group("sim_throughput");
    group.throughput(Throughput::Elements(images));
    group.sample_size(10);
    group.bench_function("strict_16MiB_100txn", |b| b.iter(|| check_all_images(&trace, base)));
    group.finish();
}

fn config() -> Criterion {
    Criterion::default()
        .measurement_time(Duration::from_secs(2))
        .warm_up_time(Duration::from_millis(500))
        .sample_size(20)
}

criterion_group! {
    name = benches;
    config = config();
    targets = bench_persist, bench_fence, bench_latency_model, bench_sim_throughput
}
criterion_main!(benches);
