//! `zen probe`: an Intel-MLC-like calibration of the NVM the engines see.
//!
//! It measures, through the same persist primitives the engines use
//! (`Pool` + `Persister` on the chosen backend), and prints each figure
//! beside the target the device model (or the profile's published figure)
//! says it should have:
//!
//! ```text
//!   read latency, random       dependent 8-byte loads chasing a random cycle of lines
//!   read latency, sequential   the same chase through consecutive lines
//!   persist latency            write 64 B, flush, fence, wait for it to complete, at random
//!                              lines (1 thread): dependent persists, as the chase's loads are
//!   write bandwidth            1..=T threads: 64-byte writes to scattered XPLines, and
//!                              256-byte writes of consecutive XPLines; flush each, fence every 16
//!   read bandwidth             1..=T threads reading 4 KiB sequentially
//! ```
//!
//! On `--pmem emu` the latency rows also run with the model turned off
//! ([`EmuBackend::set_modelled`]), on the same pool, so that the target is
//! this machine's own figure plus the model's extra (the model adds latency
//! over DRAM). Model off and on take turns, [`ROUNDS`] slices each, and each
//! side's figure is the median of its slices: this machine's own random
//! chase differs by up to ±8 % between two pools of one run (where the
//! pages landed) and drifts within a run, so a baseline on another pool, or
//! measured seconds before, moved the target by as much as the 10 % the
//! model is held to. A bandwidth row's target is the model's bandwidth for
//! that many threads. On `--pmem dax`
//! nothing is modelled: the figures are the real device's, printed beside
//! the `--nvm-profile` (default optane) published figures.
//!
//! A target the threads cannot reach because the CPU, not the model, is the
//! limit (a shared device of 13.9 GB/s and two threads) is reported as
//! `cpu-bound`: the bandwidth-wait counter says which it was.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use clap::Args;
use serde::Serialize;
use zen_pmem::{
    BackendKind, BackendOptions, CounterSnapshot, DaxBackend, DeviceParams, DramBackend,
    EmuBackend, FsBackend, NvmProfile, PageOwner, PmemBackend, Pool, PoolOptions,
};

use crate::cli::Format;
use crate::error::{CliError, CliResult};
use crate::nvm_args::NvmArgs;
use crate::resolve::{self, parse_duration, parse_size};

/// Published total read latency of a random Optane load and of DRAM
/// (Izraelevitz et al. 2019), for the `published` column.
const OPTANE_RANDOM_READ_NS: f64 = 305.0;
const OPTANE_DEVICE_WRITE_GB_PER_S: f64 = 13.9;
const OPTANE_DEVICE_READ_GB_PER_S: f64 = 39.4;
/// Slices of each latency row; on emu the model is off and on in turns
/// (off, on, off, …), each side's median kept.
const ROUNDS: u32 = 5;
/// Writes between two fences in the bandwidth rows.
const WRITES_PER_FENCE: u64 = 16;
const PAGE_BYTES: u64 = 2 << 20;

#[derive(Debug, Args)]
pub struct ProbeArgs {
    /// Backend to measure: emu (the model), dax (a real device; needs --pool on an fsdax mount), fs or dram.
    #[arg(long, default_value = "emu")]
    pub pmem: String,
    /// Device model of --pmem emu (dram, optane, cxl; default optane); with dax, whose published figures to print.
    #[arg(long)]
    pub nvm_profile: Option<String>,
    #[command(flatten)]
    pub nvm: NvmArgs,
    /// Pool file to create for the probe (removed afterwards; default: a temporary file in /dev/shm or $TMPDIR).
    #[arg(long)]
    pub pool: Option<PathBuf>,
    /// Bytes the probe touches (the latency chase's working set), e.g. 128MiB.
    #[arg(long, default_value = "128MiB")]
    pub size: String,
    /// Most threads of the bandwidth rows (each row runs 1..=N).
    #[arg(long, default_value_t = 2)]
    pub threads: usize,
    /// Time each row measures, e.g. 300ms.
    #[arg(long, default_value = "300ms")]
    pub duration: String,
    /// text or json.
    #[arg(long, value_enum, default_value_t = Format::Text)]
    pub format: Format,
}

/// One measured figure beside its target.
#[derive(Debug, Clone, Serialize)]
pub struct ProbeRow {
    pub name: String,
    pub threads: usize,
    pub unit: &'static str,
    pub measured: f64,
    /// What the model should give here (emu), or the profile's figure (dax).
    pub target: Option<f64>,
    /// The profile's published figure, where there is one.
    pub published: Option<f64>,
    /// `measured / target`.
    pub ratio: Option<f64>,
    /// `|ratio − 1| ≤ 0.10`.
    pub within_10_percent: Option<bool>,
    /// Bytes the modelled medium wrote per byte the threads wrote.
    pub media_per_byte: Option<f64>,
    /// Share of the threads' time spent waiting for modelled bandwidth.
    pub bandwidth_wait_share: Option<f64>,
    pub note: String,
}

#[derive(Debug, Serialize)]
pub struct ProbeReport {
    pub pmem: String,
    pub device: Option<DeviceParams>,
    pub model_note: Option<String>,
    pub size_bytes: u64,
    pub rows: Vec<ProbeRow>,
}

struct Settings {
    size: u64,
    threads: usize,
    duration: Duration,
}

pub fn probe(args: &ProbeArgs) -> CliResult {
    let pmem = resolve::backend(&args.pmem)?;
    let profile = match &args.nvm_profile {
        None => NvmProfile::Optane,
        Some(p) => NvmProfile::parse(p).ok_or_else(|| {
            CliError::usage(format!(
                "invalid value `{p}` for --nvm-profile: one of dram, optane, cxl"
            ))
        })?,
    };
    let params = crate::nvm_args::device_params(&args.nvm, profile, pmem)?;
    if args.threads == 0 || args.threads > 64 {
        return Err(CliError::usage(format!(
            "invalid value `{}` for --threads: 1..=64",
            args.threads
        )));
    }
    let settings = Settings {
        size: parse_size("--size", &args.size)?.max(PAGE_BYTES),
        threads: args.threads,
        duration: parse_duration("--duration", &args.duration)?.max(Duration::from_millis(10)),
    };
    if pmem == BackendKind::Dax && args.pool.is_none() {
        return Err(CliError::usage(
            "--pmem dax measures a real device: give --pool PATH on an fsdax mount",
        ));
    }
    let scratch = scratch_dir()?;
    let path = args.pool.clone().unwrap_or_else(|| scratch.path().join("probe.pool"));
    let rows = match pmem {
        BackendKind::Emu => {
            let mut model = Probe::<EmuBackend>::create(&with_path(&path, params), &settings)?;
            let (base, latency) = model_off_and_on(&mut model, &settings);
            let measured = model.finish(latency, &settings)?;
            emu_rows(&measured, &base, &params)
        }
        BackendKind::Dax => {
            device_rows(measure::<DaxBackend>(&with_path(&path, params), &settings)?, profile)
        }
        BackendKind::Fs => {
            device_rows(measure::<FsBackend>(&with_path(&path, params), &settings)?, profile)
        }
        _ => device_rows(measure::<DramBackend>(&BackendOptions::anonymous(), &settings)?, profile),
    };
    if args.pool.is_some() && pmem != BackendKind::Dram {
        std::fs::remove_file(&path).map_err(|e| {
            CliError::Failed(format!("removing the probe's pool {}: {e}", path.display()))
        })?;
    }
    let report = ProbeReport {
        pmem: pmem.name().to_string(),
        device: (pmem == BackendKind::Emu).then_some(params),
        model_note: params
            .share_threads
            .filter(|_| pmem == BackendKind::Emu)
            .map(zen_workload::report::share_note),
        size_bytes: settings.size,
        rows,
    };
    match args.format {
        Format::Json => println!(
            "{}",
            serde_json::to_string_pretty(&report)
                .map_err(|e| CliError::Failed(format!("serialising the probe report: {e}")))?
        ),
        _ => print!("{}", render(&report)),
    }
    Ok(())
}

fn scratch_dir() -> CliResult<tempfile::TempDir> {
    let shm = Path::new("/dev/shm");
    let dir = if shm.is_dir() { tempfile::tempdir_in(shm) } else { tempfile::tempdir() };
    dir.map_err(|e| CliError::Failed(format!("creating a temporary directory for the probe: {e}")))
}

fn with_path(path: &Path, params: DeviceParams) -> BackendOptions {
    BackendOptions { latency: params, ..BackendOptions::new(path) }
}

/// SplitMix64: the probe's addresses need no more than a fast, seeded
/// sequence (the main crate keeps its dependencies few).
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }
    /// Uniform enough in `0..n` for addresses (n ≪ 2⁶⁴).
    fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }
}

/// The latency rows of one backend (medians of [`ROUNDS`] slices).
#[derive(Debug, Clone, Copy)]
struct Latency {
    read_random_ns: f64,
    read_sequential_ns: f64,
    persist_ns: f64,
}

/// Raw figures of one backend.
struct Measured {
    latency: Latency,
    /// Per thread count 1..=T: (scattered 64 B, sequential 256 B, read 4 KiB).
    bandwidth: Vec<[Throughput; 3]>,
}

#[derive(Debug, Clone, Copy, Default)]
struct Throughput {
    gb_per_s: f64,
    media_per_byte: f64,
    bandwidth_wait_share: f64,
}

/// The probe's region: page offsets of a fresh pool, addressed by line.
struct Region {
    pages: Vec<u64>,
}

impl Region {
    fn lines(&self) -> u64 {
        self.pages.len() as u64 * PAGE_BYTES / 64
    }
    fn line(&self, i: u64) -> u64 {
        let per_page = PAGE_BYTES / 64;
        self.pages[(i / per_page) as usize] + (i % per_page) * 64
    }
}

/// A fresh pool with the probe's region, and where each latency row's
/// slices go on from (so that one slice does not replay the last).
struct Probe<B: PmemBackend> {
    pool: Pool<B>,
    region: Region,
    random: Vec<u64>,
    chase_at: u64,
    persist_rng: Rng,
}

impl<B: PmemBackend> Probe<B> {
    fn create(opts: &BackendOptions, s: &Settings) -> CliResult<Self> {
        let pages = s.size.div_ceil(PAGE_BYTES);
        let pool_opts = PoolOptions { page_size: PAGE_BYTES, ..PoolOptions::default() };
        let pool = Pool::<B>::create(opts, (pages + 2) * PAGE_BYTES, &pool_opts)?;
        let owner = PageOwner { table: 1, worker: 0 };
        let pages = (0..pages)
            .map(|_| pool.allocate_page(1, owner).map(|page| pool.page_offset(page)))
            .collect::<Result<_, _>>()?;
        let region = Region { pages };
        // The same cycle on every pool: the baseline chases what the model does.
        let random = random_cycle(&region, &mut Rng(0x5eed));
        Ok(Probe { pool, region, random, chase_at: 0, persist_rng: Rng(7) })
    }

    /// Write the cycle `order` into the region; the chase starts at its head.
    fn lay(&mut self, order: &[u64]) {
        let p = self.pool.persister(1);
        for (i, &line) in order.iter().enumerate() {
            let next = order[(i + 1) % order.len()];
            p.write(self.region.line(line), &self.region.line(next).to_le_bytes());
        }
        self.chase_at = self.region.line(order[0]);
    }

    fn lay_random(&mut self) {
        let order = std::mem::take(&mut self.random);
        self.lay(&order);
        self.random = order;
    }

    fn lay_sequential(&mut self) {
        self.lay(&sequential_cycle(&self.region));
    }

    /// Chase the laid cycle for `duration`; nanoseconds per dependent load.
    fn chase(&mut self, duration: Duration) -> f64 {
        let p = self.pool.persister(1);
        let mut offset = self.chase_at;
        let mut buf = [0u8; 8];
        let (started, mut loads) = (Instant::now(), 0u64);
        while started.elapsed() < duration {
            for _ in 0..256 {
                p.read(offset, &mut buf);
                offset = u64::from_le_bytes(buf);
            }
            loads += 256;
        }
        self.chase_at = std::hint::black_box(offset);
        started.elapsed().as_nanos() as f64 / loads as f64
    }

    /// Write 64 B, flush, fence at random lines for `duration`, each persist
    /// waited for (`mfence`) before the next is issued; nanoseconds per
    /// persist. Without the wait the figure is a pipelined one: the next
    /// persist's store miss overlaps the last one's write-back, which this
    /// machine's `fs` loop does or does not do depending on how much code
    /// lies between them (214–260 ns or ~470 ns per persist here, the same
    /// loop), and which no busy-wait after a fence can keep. A latency is
    /// what the model adds to, so the row measures one
    /// (docs/design/nvm-emulation.md, "Calibration", 4).
    fn persist(&mut self, duration: Duration) -> f64 {
        let p = self.pool.persister(1);
        let line = [0x5au8; 64];
        let (started, mut ops) = (Instant::now(), 0u64);
        while started.elapsed() < duration {
            for _ in 0..64 {
                let offset = self.region.line(self.persist_rng.below(self.region.lines()));
                p.write(offset, &line);
                p.persist(offset, 64);
                // `mfence`: the next store waits for this persist's
                // write-back (a `SeqCst` fence, a locked instruction, waits
                // for the store but not for the write-back).
                zen_pmem::cpu::full_fence();
            }
            ops += 64;
        }
        started.elapsed().as_nanos() as f64 / ops as f64
    }

    /// The bandwidth rows, then close the pool.
    fn finish(self, latency: Latency, s: &Settings) -> CliResult<Measured> {
        let (pool, region) = (&self.pool, &self.region);
        let bandwidth = (1..=s.threads)
            .map(|t| {
                [
                    write_bandwidth(pool, region, t, Pattern::Scattered64, s.duration),
                    write_bandwidth(pool, region, t, Pattern::Sequential256, s.duration),
                    read_bandwidth(pool, region, t, s.duration),
                ]
            })
            .collect();
        self.pool.close()?;
        Ok(Measured { latency, bandwidth })
    }
}

fn median(mut xs: Vec<f64>) -> f64 {
    xs.sort_by(f64::total_cmp);
    let n = xs.len();
    if n % 2 == 1 { xs[n / 2] } else { (xs[n / 2 - 1] + xs[n / 2]) / 2.0 }
}

/// Every figure of one backend with nothing beside it (dax, fs, dram).
fn measure<B: PmemBackend>(opts: &BackendOptions, s: &Settings) -> CliResult<Measured> {
    let mut probe = Probe::<B>::create(opts, s)?;
    let slice = s.duration / ROUNDS;
    probe.lay_random();
    let read_random_ns = median((0..ROUNDS).map(|_| probe.chase(slice)).collect());
    probe.lay_sequential();
    let read_sequential_ns = median((0..ROUNDS).map(|_| probe.chase(slice)).collect());
    let persist_ns = median((0..ROUNDS).map(|_| probe.persist(slice)).collect());
    probe.finish(Latency { read_random_ns, read_sequential_ns, persist_ns }, s)
}

/// The latency rows of `probe` with the model off (this machine's own
/// figures, on the same memory) and on, in alternating slices: (off, on).
fn model_off_and_on(probe: &mut Probe<EmuBackend>, s: &Settings) -> (Latency, Latency) {
    let slice = s.duration / ROUNDS;
    let turns = |probe: &mut Probe<EmuBackend>,
                 row: fn(&mut Probe<EmuBackend>, Duration) -> f64| {
        let (mut off, mut on) = (Vec::new(), Vec::new());
        for _ in 0..ROUNDS {
            // Each slice ends with its last fence, so no flush straddles the switch.
            probe.pool.backend().set_modelled(false);
            off.push(row(probe, slice));
            probe.pool.backend().set_modelled(true);
            on.push(row(probe, slice));
        }
        (median(off), median(on))
    };
    probe.lay_random();
    let random = turns(probe, Probe::chase);
    probe.lay_sequential();
    let sequential = turns(probe, Probe::chase);
    let persist = turns(probe, Probe::persist);
    (
        Latency {
            read_random_ns: random.0,
            read_sequential_ns: sequential.0,
            persist_ns: persist.0,
        },
        Latency {
            read_random_ns: random.1,
            read_sequential_ns: sequential.1,
            persist_ns: persist.1,
        },
    )
}

/// Line `i` holds the offset of the line after it in one random cycle.
fn random_cycle(region: &Region, rng: &mut Rng) -> Vec<u64> {
    let mut order: Vec<u64> = (0..region.lines()).collect();
    for i in (1..order.len()).rev() {
        order.swap(i, rng.below(i as u64 + 1) as usize);
    }
    order
}

fn sequential_cycle(region: &Region) -> Vec<u64> {
    (0..region.lines()).collect()
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Pattern {
    /// 64 bytes at the start of a random 256-byte XPLine.
    Scattered64,
    /// 256 bytes, XPLine after XPLine.
    Sequential256,
}

fn write_bandwidth<B: PmemBackend>(
    pool: &Pool<B>,
    region: &Region,
    threads: usize,
    pattern: Pattern,
    duration: Duration,
) -> Throughput {
    let xplines = region.lines() / 4;
    let run = |t: usize| {
        let p = pool.persister(1 + t as u32);
        let mut rng = Rng(t as u64 + 1);
        let data = [t as u8; 256];
        let (len, mut next) = match pattern {
            Pattern::Scattered64 => (64, 0),
            Pattern::Sequential256 => (256, xplines / threads as u64 * t as u64),
        };
        let (started, mut bytes) = (Instant::now(), 0u64);
        while started.elapsed() < duration {
            for _ in 0..WRITES_PER_FENCE {
                let xpline = match pattern {
                    Pattern::Scattered64 => rng.below(xplines),
                    Pattern::Sequential256 => {
                        next = (next + 1) % xplines;
                        next
                    }
                };
                let offset = region.line(xpline * 4);
                p.write(offset, &data[..len as usize]);
                p.flush(offset, len);
            }
            p.fence();
            bytes += WRITES_PER_FENCE * len;
        }
        (bytes, started.elapsed())
    };
    throughput(pool, threads, run)
}

fn read_bandwidth<B: PmemBackend>(
    pool: &Pool<B>,
    region: &Region,
    threads: usize,
    duration: Duration,
) -> Throughput {
    let chunks = region.lines() / 64;
    let run = |t: usize| {
        let p = pool.persister(1 + t as u32);
        let mut buf = vec![0u8; 4096];
        let mut chunk = chunks / threads as u64 * t as u64;
        let (started, mut bytes) = (Instant::now(), 0u64);
        while started.elapsed() < duration {
            for _ in 0..16 {
                chunk = (chunk + 1) % chunks;
                p.read(region.line(chunk * 64), &mut buf);
            }
            bytes += 16 * 4096;
        }
        std::hint::black_box(&buf);
        (bytes, started.elapsed())
    };
    throughput(pool, threads, run)
}

/// Run `work(t)` on `threads` threads at once; aggregate bytes per second
/// and what the counters of their slots say about the medium.
fn throughput<B: PmemBackend>(
    pool: &Pool<B>,
    threads: usize,
    work: impl Fn(usize) -> (u64, Duration) + Sync,
) -> Throughput {
    let slots = |pool: &Pool<B>| {
        (1..=threads as u32)
            .map(|t| pool.counters(t).snapshot())
            .fold(CounterSnapshot::default(), |acc, s| acc.add(&s))
    };
    let before = slots(pool);
    let results: Vec<(u64, Duration)> = std::thread::scope(|scope| {
        let work = &work;
        let handles: Vec<_> = (0..threads).map(|t| scope.spawn(move || work(t))).collect();
        handles.into_iter().map(|h| h.join().expect("probe thread")).collect()
    });
    let d = slots(pool).since(&before);
    let bytes: u64 = results.iter().map(|r| r.0).sum();
    let seconds = results.iter().map(|r| r.1.as_secs_f64()).fold(0.0, f64::max);
    let thread_ns: f64 = results.iter().map(|r| r.1.as_nanos() as f64).sum();
    Throughput {
        gb_per_s: bytes as f64 / seconds / 1e9,
        media_per_byte: d.media_bytes_written as f64 / bytes.max(1) as f64,
        bandwidth_wait_share: d.bandwidth_wait_ns as f64 / thread_ns.max(1.0),
    }
}

fn row(
    name: &str,
    threads: usize,
    unit: &'static str,
    measured: f64,
    target: Option<f64>,
) -> ProbeRow {
    let ratio = target.filter(|t| *t > 0.0).map(|t| measured / t);
    ProbeRow {
        name: name.to_string(),
        threads,
        unit,
        measured,
        target,
        published: None,
        ratio,
        within_10_percent: ratio.map(|r| (r - 1.0).abs() <= 0.10),
        media_per_byte: None,
        bandwidth_wait_share: None,
        note: String::new(),
    }
}

/// Steady-state nanoseconds per back-to-back operation of one thread: the
/// machine's own time plus the model's latency, unless moving `media_bytes`
/// at the thread's bandwidth takes longer.
fn latency_target(base_ns: f64, extra_ns: u64, media_bytes: u64, gb_per_s: Option<f64>) -> f64 {
    let bandwidth_ns = gb_per_s.map_or(0.0, |b| media_bytes as f64 / b);
    (base_ns + extra_ns as f64).max(bandwidth_ns)
}

fn emu_rows(m: &Measured, base: &Latency, p: &DeviceParams) -> Vec<ProbeRow> {
    let l = &m.latency;
    let optane = p.profile == NvmProfile::Optane;
    let (g, read_bw) = (p.media_granularity_bytes, p.thread_read_bandwidth());
    let mut rows = vec![
        ProbeRow {
            published: optane.then_some(OPTANE_RANDOM_READ_NS),
            note: format!(
                "this machine (model off) {:.0} ns + model {} ns",
                base.read_random_ns, p.read_random_ns
            ),
            ..row(
                "read latency, random",
                1,
                "ns",
                l.read_random_ns,
                Some(latency_target(base.read_random_ns, p.read_random_ns, g, read_bw)),
            )
        },
        ProbeRow {
            note: format!(
                "this machine (model off) {:.0} ns + model {} ns",
                base.read_sequential_ns, p.read_sequential_ns
            ),
            ..row(
                "read latency, sequential",
                1,
                "ns",
                l.read_sequential_ns,
                Some(latency_target(base.read_sequential_ns, p.read_sequential_ns, 64, read_bw)),
            )
        },
        ProbeRow {
            note: format!(
                "this machine (model off) {:.0} ns + model {} ns, or one granule at the thread's write bandwidth",
                base.persist_ns, p.persist_ns
            ),
            ..row(
                "persist latency (64 B)",
                1,
                "ns",
                l.persist_ns,
                Some(latency_target(base.persist_ns, p.persist_ns, g, p.thread_write_bandwidth(1))),
            )
        },
    ];
    let granules = (g / 64) as f64;
    let all_threads = |b: f64, t: usize| if p.share_threads.is_some() { b * t as f64 } else { b };
    for (i, [scattered, sequential, read]) in m.bandwidth.iter().enumerate() {
        let t = i + 1;
        let media = p.thread_write_bandwidth(t as u32).map(|b| all_threads(b, t));
        rows.push(bandwidth_row(
            "write bandwidth, 64 B scattered",
            t,
            scattered,
            media.map(|b| b / granules),
        ));
        rows.push(bandwidth_row("write bandwidth, 256 B sequential", t, sequential, media));
        let read_target = read_bw.map(|b| all_threads(b, t));
        rows.push(bandwidth_row("read bandwidth, 4 KiB sequential", t, read, read_target));
        let ratio = sequential.gb_per_s / scattered.gb_per_s.max(1e-12);
        let mut r = row("write bandwidth ratio 256 B / 64 B", t, "×", ratio, Some(granules));
        r.note = format!("when bandwidth-bound: the medium writes {g} B for each scattered 64 B");
        rows.push(r);
    }
    rows
}

fn bandwidth_row(name: &str, t: usize, m: &Throughput, target: Option<f64>) -> ProbeRow {
    let mut r = row(name, t, "GB/s", m.gb_per_s, target);
    r.media_per_byte = Some(m.media_per_byte);
    r.bandwidth_wait_share = Some(m.bandwidth_wait_share);
    if target.is_none() {
        r.note = "unlimited in the model".into();
    } else if m.bandwidth_wait_share < 0.05 && r.within_10_percent == Some(false) {
        r.note =
            "cpu-bound: the threads cannot issue the model's bandwidth (no bandwidth wait)".into();
    }
    r
}

/// Rows of a backend with no model (dax, fs, dram): the profile's published
/// figures beside what the device does.
fn device_rows(m: Measured, profile: NvmProfile) -> Vec<ProbeRow> {
    let optane = profile == NvmProfile::Optane;
    let mut rows = vec![
        ProbeRow {
            published: optane.then_some(OPTANE_RANDOM_READ_NS),
            ..row("read latency, random", 1, "ns", m.latency.read_random_ns, None)
        },
        row("read latency, sequential", 1, "ns", m.latency.read_sequential_ns, None),
        row("persist latency (64 B)", 1, "ns", m.latency.persist_ns, None),
    ];
    for (i, [scattered, sequential, read]) in m.bandwidth.iter().enumerate() {
        let t = i + 1;
        rows.push(row("write bandwidth, 64 B scattered", t, "GB/s", scattered.gb_per_s, None));
        rows.push(ProbeRow {
            published: optane.then_some(OPTANE_DEVICE_WRITE_GB_PER_S),
            note: "published: six interleaved DIMMs, many threads".into(),
            ..row("write bandwidth, 256 B sequential", t, "GB/s", sequential.gb_per_s, None)
        });
        rows.push(ProbeRow {
            published: optane.then_some(OPTANE_DEVICE_READ_GB_PER_S),
            ..row("read bandwidth, 4 KiB sequential", t, "GB/s", read.gb_per_s, None)
        });
        let ratio = sequential.gb_per_s / scattered.gb_per_s.max(1e-12);
        rows.push(ProbeRow {
            published: optane.then_some(4.0),
            ..row("write bandwidth ratio 256 B / 64 B", t, "×", ratio, None)
        });
    }
    rows
}

fn render(r: &ProbeReport) -> String {
    use std::fmt::Write as _;
    let mut out = String::new();
    let _ = writeln!(out, "zen probe · pmem {} · {} MiB region", r.pmem, r.size_bytes >> 20);
    if let Some(d) = &r.device {
        let _ = writeln!(out, "device model  {}", d.describe());
    } else {
        let _ = writeln!(out, "no model: the figures are the medium's own");
    }
    if let Some(note) = &r.model_note {
        let _ = writeln!(out, "nvm share     {note}");
    }
    let _ = writeln!(
        out,
        "{:<36} {:>3} {:>10} {:>10} {:>10} {:>7} {:>6} {:>6}  note",
        "figure", "thr", "measured", "target", "published", "ratio", "media", "bw-wait"
    );
    let num = |v: Option<f64>| v.map_or("-".to_string(), |v| format!("{v:.2}"));
    for row in &r.rows {
        let verdict = match row.within_10_percent {
            Some(true) => "ok ",
            Some(false) => "OFF",
            None => "   ",
        };
        let _ = writeln!(
            out,
            "{:<36} {:>3} {:>10.2} {:>10} {:>10} {:>7} {:>6} {:>6}  {verdict} {} {}",
            row.name,
            row.threads,
            row.measured,
            num(row.target),
            num(row.published),
            num(row.ratio),
            num(row.media_per_byte),
            row.bandwidth_wait_share.map_or("-".to_string(), |s| format!("{:.0}%", s * 100.0)),
            row.unit,
            row.note
        );
    }
    out
}
