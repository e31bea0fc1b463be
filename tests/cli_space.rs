//! Pools and the space under them (issue 20): a pool larger than its file
//! system's free space used to be created sparse, die with SIGBUS part of
//! the way through its load, and leave a pool that opened as valid with
//! rows missing.
//!
//! What: `zen` refuses a pool its file system cannot hold, naming the path,
//! the bytes needed and the bytes free, and leaves nothing behind; a pool
//! that fits is reserved whole, loads, runs and checks; a full file system
//! cannot stop a run (a full *pool* aborts with `out_of_space`) and the pool
//! checks clean afterwards; a sparse pool on a full file system is refused
//! on open and reserved once there is room; an unfinished load is named by
//! `run` and `check`; a SIGBUS in a pool is reported with the pool's path.
//!
//! How: a small tmpfs, mounted by `unshare` in a private mount namespace
//! and reached through `/proc/PID/root` of the process holding it, so that
//! nothing stays mounted if a test dies (the namespace goes with its last
//! process). Where no namespace can be made (no `unshare`, no user
//! namespaces), the tmpfs tests print why and skip; the others run anywhere.

mod common;

use std::fs::{self, File};
use std::io::{BufRead, BufReader, Read, Seek, SeekFrom, Write};
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use common::{ok, run};
use zen_engine::{EngineConfig, TxnOptions};
use zen_pmem::BackendKind;

const MIB: u64 = 1 << 20;

/// A tmpfs of a given size in a private mount namespace; unmounted (with the
/// namespace) when dropped.
struct SmallFs {
    /// `sleep`, exec'd by the shell that mounted the tmpfs: the namespace's
    /// only process.
    holder: Child,
    /// Mount point as seen from the holder's namespace.
    _mount_point: tempfile::TempDir,
    /// The mount point as seen from here.
    root: PathBuf,
}

impl SmallFs {
    /// Mount a tmpfs of `bytes`, or say why it cannot be done here.
    fn new(bytes: u64) -> Result<SmallFs, String> {
        let mount_point = tempfile::tempdir().map_err(|e| e.to_string())?;
        let script = format!(
            "mount -t tmpfs -o size={bytes} zen-test '{}' && echo ready && exec sleep 120",
            mount_point.path().display()
        );
        let mut reasons = Vec::new();
        // As root a mount namespace is enough; otherwise map ourselves to
        // root in a user namespace first.
        for flags in [&["--mount"][..], &["--map-root-user", "--mount"][..]] {
            let spawned = Command::new("unshare")
                .args(flags)
                .args(["sh", "-c", &script])
                .stdin(Stdio::null())
                .stdout(Stdio::piped())
                .stderr(Stdio::piped())
                .spawn();
            let mut holder = match spawned {
                Ok(child) => child,
                Err(e) => return Err(format!("cannot run unshare: {e}")),
            };
            let mut line = String::new();
            let stdout = holder.stdout.take().expect("piped stdout");
            let _ = BufReader::new(stdout).read_line(&mut line);
            if line.trim() == "ready" {
                let root = PathBuf::from(format!(
                    "/proc/{}/root{}",
                    holder.id(),
                    mount_point.path().display()
                ));
                let fs = SmallFs { holder, _mount_point: mount_point, root };
                return match zen_pmem::backend::free_bytes(&fs.root) {
                    Some(free) if free == bytes => Ok(fs),
                    other => Err(format!("the tmpfs shows {other:?} bytes free, not {bytes}")),
                };
            }
            let mut err = String::new();
            if let Some(mut stderr) = holder.stderr.take() {
                let _ = stderr.read_to_string(&mut err);
            }
            let _ = holder.wait();
            reasons.push(format!("unshare {}: {}", flags.join(" "), err.trim()));
        }
        Err(reasons.join("; "))
    }

    fn path(&self, name: &str) -> PathBuf {
        self.root.join(name)
    }

    fn free(&self) -> u64 {
        zen_pmem::backend::free_bytes(&self.root).expect("statvfs of the tmpfs")
    }

    /// Fill every free byte with a file of its own.
    fn fill(&self) {
        let mut filler = File::create(self.path("filler")).unwrap();
        for chunk in [MIB as usize, 4096] {
            let zeros = vec![0u8; chunk];
            while filler.write_all(&zeros).is_ok() {}
        }
        assert_eq!(self.free(), 0, "the tmpfs is full");
    }

    fn names(&self) -> Vec<String> {
        let mut names: Vec<String> = fs::read_dir(&self.root)
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        names.sort();
        names
    }
}

impl Drop for SmallFs {
    fn drop(&mut self) {
        let _ = self.holder.kill();
        let _ = self.holder.wait();
    }
}

/// A tmpfs of `bytes`, or `None` after printing why the test is skipped.
fn small_fs(bytes: u64) -> Option<SmallFs> {
    match SmallFs::new(bytes) {
        Ok(fs) => Some(fs),
        Err(reason) => {
            eprintln!("skipped: no small tmpfs can be mounted here ({reason})");
            None
        }
    }
}

fn text(path: &Path) -> &str {
    path.to_str().expect("a UTF-8 temporary path")
}

/// The issue's own reproduction: `zen load` of a 1 GiB pool on a 16 MiB
/// file system used to create a sparse file and die with SIGBUS mid-load.
#[test]
fn a_pool_bigger_than_its_file_system_is_refused_with_the_numbers_and_leaves_nothing() {
    let Some(fs) = small_fs(16 * MIB) else { return };
    let pool = fs.path("p.pool");
    let (code, _, err) = run(&["load", "ycsb", "--pool", text(&pool), "--records", "100000"]);
    assert_eq!(code, 1, "{err}");
    assert!(err.contains(&format!("{}: not enough space", pool.display())), "{err}");
    assert!(err.contains(&format!("needs {} more bytes", 1u64 << 30)), "bytes needed: {err}");
    assert!(err.contains(&format!("has {} bytes", 16 * MIB)), "bytes free: {err}");
    assert!(fs.names().is_empty(), "left behind: {:?}", fs.names());
    assert_eq!(fs.free(), 16 * MIB);
}

/// Every member file of a per-node pool is counted before the first is
/// created: two 12 MiB members do not fit 16 MiB, although each would.
#[test]
fn a_per_node_pool_bigger_than_its_file_system_leaves_no_member_behind() {
    let Some(fs) = small_fs(16 * MIB) else { return };
    let pool = fs.path("pn.pool");
    let (code, _, err) = run(&[
        "load",
        "ycsb",
        "--pool",
        text(&pool),
        "--records",
        "500",
        "--pool-size",
        "24MiB",
        "--pool-per-node",
        "--numa-nodes",
        "2",
    ]);
    assert_eq!(code, 1, "{err}");
    assert!(err.contains("pn.pool.node0: not enough space"), "{err}");
    assert!(err.contains(&format!("needs {} more bytes", 24 * MIB)), "{err}");
    assert!(fs.names().is_empty(), "left behind: {:?}", fs.names());
}

#[test]
fn a_pool_that_fits_is_reserved_whole_then_loads_runs_and_checks() {
    let Some(fs) = small_fs(32 * MIB) else { return };
    let pool = fs.path("p.pool");
    let pool = text(&pool);
    ok(&["load", "ycsb", "--pool", pool, "--records", "2000", "--pool-size", "16MiB"]);
    assert!(fs.free() <= 16 * MIB, "the 16 MiB pool holds its blocks: {} bytes free", fs.free());
    assert!(fs::metadata(pool).unwrap().blocks() * 512 >= 16 * MIB, "not sparse");
    let out = ok(&["run", "--pool", pool, "-w", "a", "--txns", "2000", "--warmup", "0s"]);
    assert!(out.contains("throughput"), "{out}");
    let checked = ok(&["check", "--pool", pool]);
    assert!(checked.contains("all 3 conditions hold"), "{checked}");
}

/// Page allocation at run time hands out pages inside the reserved file, so
/// a full file system cannot fault it; the pool filling up is an
/// `out_of_space` abort, and what committed checks clean.
#[test]
fn a_run_on_a_full_file_system_aborts_with_out_of_space_and_checks_clean() {
    let Some(fs) = small_fs(24 * MIB) else { return };
    let pool = fs.path("p.pool");
    let pool = text(&pool);
    ok(&["load", "ycsb", "--pool", pool, "--records", "2000", "--pool-size", "16MiB"]);
    fs.fill();
    // Workload D inserts new keys (5 %) until the pool has no page left. One
    // worker: with two, the other worker can commit key k + 1 after key k's
    // insert failed for good, and YCSB's check (keys dense) reports the hole.
    let (code, _, err) = run(&[
        "run",
        "--pool",
        pool,
        "-w",
        "d",
        "--txns",
        "1000000",
        "--warmup",
        "0s",
        "--threads",
        "1",
    ]);
    assert_eq!(code, 1, "ended by an error, not by a signal: {err}");
    assert!(err.contains("transaction aborted: out_of_space"), "{err}");
    assert!(!err.contains("SIGBUS"), "{err}");
    let checked = ok(&["check", "--pool", pool]);
    assert!(checked.contains("all 3 conditions hold"), "{checked}");
    assert!(checked.contains("engine invariants hold"), "{checked}");
}

/// Copy `from` to `to`, leaving a hole wherever a 4 KiB block is all zero
/// (what a pool made before reservation, or copied carelessly, looks like).
fn copy_sparse(from: &Path, to: &Path) {
    let bytes = fs::read(from).unwrap();
    let mut out = File::create(to).unwrap();
    for (index, block) in bytes.chunks(4096).enumerate() {
        if block.iter().any(|&b| b != 0) {
            out.seek(SeekFrom::Start(index as u64 * 4096)).unwrap();
            out.write_all(block).unwrap();
        }
    }
    out.set_len(bytes.len() as u64).unwrap();
}

#[test]
fn a_sparse_pool_on_a_full_file_system_is_refused_then_reserved_once_there_is_room() {
    let Some(fs) = small_fs(24 * MIB) else { return };
    let dir = tempfile::tempdir().unwrap();
    let original = dir.path().join("p.pool");
    ok(&["load", "ycsb", "--pool", text(&original), "--records", "1000", "--pool-size", "16MiB"]);
    let pool = fs.path("p.pool");
    copy_sparse(&original, &pool);
    let allocated = fs::metadata(&pool).unwrap().blocks() * 512;
    assert!(allocated < 16 * MIB, "the copy is sparse ({allocated} bytes allocated)");
    fs.fill();

    let (code, _, err) = run(&["check", "--pool", text(&pool)]);
    assert_eq!(code, 4, "the pool cannot be opened: {err}");
    assert!(err.contains(&format!("{}: not enough space", pool.display())), "{err}");
    assert!(err.contains(&format!("needs {} more bytes", 16 * MIB - allocated)), "{err}");
    assert!(err.contains("has 0 bytes"), "{err}");
    assert_eq!(fs::read(&pool).unwrap(), fs::read(&original).unwrap(), "refused open wrote");

    fs::remove_file(fs.path("filler")).unwrap();
    let checked = ok(&["check", "--pool", text(&pool)]);
    assert!(checked.contains("all 3 conditions hold"), "{checked}");
    assert!(fs::metadata(&pool).unwrap().blocks() * 512 >= 16 * MIB, "reserved on open");
}

/// A load that ran out of pool space part-way used to leave a pool that
/// opened as valid: `zen run` then failed with "key … not found" and
/// `zen check` with rows missing.
#[test]
fn an_unfinished_load_is_refused_by_run_and_check_with_reload_advice() {
    let dir = tempfile::tempdir().unwrap();
    let pool = dir.path().join("p.pool");
    let pool = text(&pool);
    let (code, _, err) =
        run(&["load", "ycsb", "--pool", pool, "--records", "100000", "--pool-size", "16MiB"]);
    assert_eq!(code, 1, "{err}");
    assert!(err.contains("out_of_space") && err.contains("its load did not finish"), "{err}");
    for command in [&["run", "--pool", pool, "--txns", "100"][..], &["check", "--pool", pool]] {
        let (code, _, err) = run(command);
        assert_eq!(code, 1, "{command:?}: {err}");
        assert!(err.contains("this pool's load did not finish: reload it"), "{command:?}: {err}");
        assert!(!err.contains("not found"), "{command:?}: {err}");
    }
}

/// Pools loaded before the load state existed have a spec row and no state
/// row; they finished loading (or nobody can tell) and must keep working.
#[test]
fn a_pool_loaded_without_a_load_state_row_still_runs_and_checks() {
    let dir = tempfile::tempdir().unwrap();
    let pool = dir.path().join("p.pool");
    ok(&["load", "smallbank", "--pool", text(&pool), "--accounts", "500"]);
    let config = EngineConfig {
        pmem: BackendKind::Fs,
        pool: Some(pool.clone()),
        create: false,
        max_workers: 3,
        ..EngineConfig::default()
    };
    let engine = zen_engine::open(&config).unwrap();
    let spec = engine.table_id(zen_workload::meta::SPEC_TABLE).unwrap();
    let mut worker = engine.worker().unwrap();
    worker
        .run(&TxnOptions::default(), |tx| tx.delete(spec, zen_workload::meta::LOAD_STATE_KEY))
        .unwrap();
    drop(worker);
    engine.close().unwrap();
    ok(&["run", "--pool", text(&pool), "--txns", "500", "--warmup", "0s"]);
    assert!(ok(&["check", "--pool", text(&pool)]).contains("all 3 conditions hold"));
}

/// A SIGBUS that reservation cannot prevent (here: the pool file truncated
/// by another process while `zen run` has it mapped) is reported as an
/// error naming the pool file, not a bare "Bus error".
#[test]
fn a_sigbus_in_a_pool_is_reported_with_the_pool_path() {
    let dir = tempfile::tempdir().unwrap();
    let pool = dir.path().join("p.pool");
    // Room for the updates' new versions: a full pool would end the run first.
    ok(&["load", "ycsb", "--pool", text(&pool), "--records", "2000", "--pool-size", "64MiB"]);
    let mut child = Command::new(env!("CARGO_BIN_EXE_zen"))
        .args(["run", "--pool", text(&pool), "-w", "a", "--duration", "20s", "--warmup", "0s"])
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut stderr = BufReader::new(child.stderr.take().unwrap());
    let mut seen = String::new();
    while !seen.contains("  workload ") {
        assert!(stderr.read_line(&mut seen).unwrap() > 0, "zen run ended early: {seen}");
    }
    // The banner is out: the run is opening its workers and committing.
    std::thread::sleep(Duration::from_millis(100));
    let truncated_at = 2 * MIB;
    File::options().write(true).open(&pool).unwrap().set_len(truncated_at).unwrap();
    let started = Instant::now();
    let status = loop {
        if let Some(status) = child.try_wait().unwrap() {
            break status;
        }
        assert!(started.elapsed() < Duration::from_secs(15), "no SIGBUS stopped the run");
        std::thread::sleep(Duration::from_millis(20));
    };
    stderr.read_to_string(&mut seen).unwrap();
    assert_eq!(status.code(), Some(1), "exit code, not a signal: {seen}");
    let report = seen.lines().find(|l| l.contains("SIGBUS")).unwrap_or_else(|| panic!("{seen}"));
    assert!(report.contains(&format!("of pool file {}:", pool.display())), "{report}");
    let offset: u64 = report
        .split("at byte ")
        .nth(1)
        .and_then(|rest| rest.split(' ').next())
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("no offset in {report}"));
    assert!((truncated_at..64 * MIB).contains(&offset), "offset {offset} past the new end");
}
