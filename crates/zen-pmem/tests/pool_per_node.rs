//! Per-node pools (`--pool-per-node`): one pool striped over member files.
//!
//! What: a pool of two member files round-trips through write, flush, close
//! and reopen; each member's page range is backed by its own file (checked
//! through the files' bytes); and a missing, foreign, swapped, truncated or
//! miscounted member is refused with its typed error naming the file, with
//! every file left byte-for-byte as it was.
//!
//! How: `FsBackend` pools of 64 KiB pages in temporary directories; members
//! are named `p.node0`, `p.node1` as the CLI names them.

use std::collections::BTreeMap;
use std::fs;
use std::path::{Path, PathBuf};

use zen_pmem::header::{self, FEATURE_PER_NODE};
use zen_pmem::{
    BackendOptions, DramBackend, FsBackend, PageOwner, PmemBackend, PmemError, Pool, PoolOptions,
};

const PAGE_BYTES: u64 = 64 << 10;
const MEMBER_PAGES: u64 = 4;

fn options() -> PoolOptions {
    PoolOptions { page_size: PAGE_BYTES, ..PoolOptions::default() }
}

fn members(dir: &Path, name: &str, count: usize) -> Vec<PathBuf> {
    (0..count).map(|n| dir.join(format!("{name}.node{n}"))).collect()
}

fn create(paths: &[PathBuf]) -> Pool<FsBackend> {
    let len = MEMBER_PAGES * PAGE_BYTES * paths.len() as u64;
    Pool::create(&BackendOptions::per_node(paths.to_vec()), len, &options()).expect("create")
}

fn open(paths: &[PathBuf]) -> Result<Pool<FsBackend>, PmemError> {
    Pool::open(&BackendOptions::per_node(paths.to_vec()))
}

/// Every file of `dir` and its bytes.
fn snapshot(dir: &Path) -> BTreeMap<PathBuf, Vec<u8>> {
    fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .map(|p| {
            let bytes = fs::read(&p).unwrap();
            (p, bytes)
        })
        .collect()
}

/// Open `paths`, expect a refusal accepted by `matches`, and check that it
/// names `culprit` and changed no file of `dir`.
fn refused(dir: &Path, paths: &[PathBuf], culprit: &Path, matches: fn(&PmemError) -> bool) {
    let before = snapshot(dir);
    let err = match open(paths) {
        Err(e) => e,
        Ok(_) => panic!("{paths:?} should be refused"),
    };
    assert!(matches(&err), "unexpected error: {err}");
    assert!(err.to_string().contains(&culprit.display().to_string()), "{err} names no culprit");
    assert_eq!(snapshot(dir), before, "a refused open changed a file ({err})");
}

#[test]
fn a_two_member_pool_round_trips_and_each_page_lives_in_its_members_file() {
    let dir = tempfile::tempdir().unwrap();
    let paths = members(dir.path(), "p", 2);
    let pool = create(&paths);
    assert!(pool.is_per_node());
    assert_eq!(pool.page_count(), 2 * MEMBER_PAGES);
    // Member 1's first page holds its header: one page fewer to allocate.
    assert_eq!(pool.free_page_count(), 2 * MEMBER_PAGES - 2);
    let owner = PageOwner { table: 3, worker: 1 };
    let on_1 = pool.allocate_page_on(1, owner, 1).unwrap();
    let on_0 = pool.allocate_page_on(1, owner, 0).unwrap();
    assert_eq!((pool.page_member(on_1), pool.page_member(on_0)), (1, 0));
    let p = pool.persister(1);
    for (page, text) in [(on_0, b"node zero"), (on_1, b"node one!")] {
        let at = pool.page_offset(page) + 100;
        p.write(at, text);
        p.persist(at, text.len() as u64);
    }
    pool.close().unwrap();

    let file_0 = fs::read(&paths[0]).unwrap();
    let file_1 = fs::read(&paths[1]).unwrap();
    assert_eq!(file_0.len() as u64, MEMBER_PAGES * PAGE_BYTES);
    assert_eq!(file_1.len() as u64, MEMBER_PAGES * PAGE_BYTES);
    let in_file = |file: &[u8], page: u64| {
        let at = ((page % MEMBER_PAGES) * PAGE_BYTES + 100) as usize;
        file[at..at + 9].to_vec()
    };
    assert_eq!(in_file(&file_0, on_0), b"node zero");
    assert_eq!(in_file(&file_1, on_1), b"node one!");
    assert_eq!(&file_0[0..8], b"ZENPOOL1");
    let member_magic = header::MEMBER_HEADER_OFFSET as usize;
    assert_eq!(&file_1[member_magic..member_magic + 8], b"ZENMEMB1");

    let pool = open(&paths).unwrap();
    assert!(pool.was_clean_shutdown());
    assert_eq!(pool.header().features, FEATURE_PER_NODE | zen_pmem::header::FEATURE_FRESH_FRONTIER);
    assert_eq!(pool.page_owner(on_1).unwrap(), Some(owner));
    let mut back = [0u8; 9];
    pool.persister(1).read(pool.page_offset(on_1) + 100, &mut back);
    assert_eq!(&back, b"node one!");
    // The header page of member 1 is neither free nor reported as owned.
    let owned: Vec<u64> = pool.owned_pages().unwrap().into_iter().map(|(p, _)| p).collect();
    assert_eq!(owned, {
        let mut v = vec![on_0, on_1];
        v.sort_unstable();
        v
    });
    let info = pool.info().unwrap();
    assert_eq!(info.members.len(), 2);
    assert_eq!((info.members[1].first_page, info.members[1].pages), (MEMBER_PAGES, MEMBER_PAGES));
    assert!(pool.release_page(1, MEMBER_PAGES, PageOwner::SYSTEM).is_err());
    pool.close().unwrap();
}

#[test]
fn a_full_member_lends_pages_from_the_next_one() {
    let dir = tempfile::tempdir().unwrap();
    let pool = create(&members(dir.path(), "p", 2));
    let owner = PageOwner { table: 1, worker: 0 };
    let pages: Vec<u64> =
        (0..2 * MEMBER_PAGES - 2).map(|_| pool.allocate_page_on(0, owner, 1).unwrap()).collect();
    let members: Vec<usize> = pages.iter().map(|&p| pool.page_member(p)).collect();
    assert_eq!(members, [1, 1, 1, 0, 0, 0]);
    assert!(matches!(pool.allocate_page_on(0, owner, 1), Err(PmemError::NoFreePage { .. })));
}

#[test]
fn a_missing_member_is_refused_by_name() {
    let dir = tempfile::tempdir().unwrap();
    let paths = members(dir.path(), "p", 2);
    create(&paths).close().unwrap();
    fs::remove_file(&paths[1]).unwrap();
    refused(dir.path(), &paths, &paths[1], |e| matches!(e, PmemError::NotFound { .. }));
}

#[test]
fn a_member_of_another_pool_is_refused_by_name() {
    let dir = tempfile::tempdir().unwrap();
    let ours = members(dir.path(), "p", 2);
    let theirs = members(dir.path(), "q", 2);
    create(&ours).close().unwrap();
    create(&theirs).close().unwrap();
    let mixed = vec![ours[0].clone(), theirs[1].clone()];
    refused(dir.path(), &mixed, &theirs[1], |e| matches!(e, PmemError::ForeignMember { .. }));
}

#[test]
fn swapped_members_are_refused_by_name() {
    let dir = tempfile::tempdir().unwrap();
    let paths = members(dir.path(), "p", 2);
    create(&paths).close().unwrap();
    let swapped = vec![paths[1].clone(), paths[0].clone()];
    refused(dir.path(), &swapped, &paths[1], |e| {
        matches!(e, PmemError::SwappedMember { expected: 0, found: 1, .. })
    });
    // The second place given a copy of member 0.
    let copy = dir.path().join("copy.node0");
    fs::copy(&paths[0], &copy).unwrap();
    let twice = vec![paths[0].clone(), copy.clone()];
    refused(dir.path(), &twice, &copy, |e| {
        matches!(e, PmemError::SwappedMember { expected: 1, found: 0, .. })
    });
}

#[test]
fn a_truncated_member_is_refused_by_name() {
    let dir = tempfile::tempdir().unwrap();
    let paths = members(dir.path(), "p", 2);
    create(&paths).close().unwrap();
    let file = fs::OpenOptions::new().write(true).open(&paths[1]).unwrap();
    file.set_len((MEMBER_PAGES - 1) * PAGE_BYTES).unwrap();
    drop(file);
    refused(
        dir.path(),
        &paths,
        &paths[1],
        |e| matches!(e, PmemError::Truncated { expected, .. } if *expected == MEMBER_PAGES * PAGE_BYTES),
    );
    let file = fs::OpenOptions::new().write(true).open(&paths[1]).unwrap();
    file.set_len(100).unwrap();
    drop(file);
    refused(dir.path(), &paths, &paths[1], |e| matches!(e, PmemError::TooShort { .. }));
}

#[test]
fn a_wrong_member_count_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let paths = members(dir.path(), "p", 2);
    create(&paths).close().unwrap();
    refused(dir.path(), &paths[..1], &paths[0], |e| {
        matches!(e, PmemError::MemberCount { in_pool: 2, given: 1, .. })
    });
    let extra = dir.path().join("p.node2");
    fs::copy(&paths[1], &extra).unwrap();
    let three = vec![paths[0].clone(), paths[1].clone(), extra];
    refused(dir.path(), &three, &paths[0], |e| {
        matches!(e, PmemError::MemberCount { in_pool: 2, given: 3, .. })
    });
}

#[test]
fn members_opened_as_single_files_and_single_files_opened_as_members_are_refused() {
    let dir = tempfile::tempdir().unwrap();
    let paths = members(dir.path(), "p", 2);
    create(&paths).close().unwrap();
    let single = dir.path().join("single.pool");
    Pool::<FsBackend>::create(&BackendOptions::new(&single), 4 * PAGE_BYTES, &options())
        .unwrap()
        .close()
        .unwrap();
    let before = snapshot(dir.path());
    for (index, path) in paths.iter().enumerate() {
        let err = Pool::<FsBackend>::open(&BackendOptions::new(path)).err().unwrap();
        assert!(
            matches!(err, PmemError::PerNodeMember { index: i, count: 2, .. } if i == index as u64),
            "{err}"
        );
    }
    let err = open(std::slice::from_ref(&single)).err().unwrap();
    assert!(matches!(err, PmemError::NotPerNode { .. }), "{err}");
    assert_eq!(snapshot(dir.path()), before);
}

#[test]
fn volatile_backends_refuse_member_files() {
    let dir = tempfile::tempdir().unwrap();
    let opts = BackendOptions::per_node(members(dir.path(), "p", 2));
    let err = DramBackend::create(&opts, 8 * PAGE_BYTES).err().unwrap();
    assert!(err.to_string().contains("--pool-per-node"), "{err}");
    assert!(fs::read_dir(dir.path()).unwrap().next().is_none());
}

#[test]
fn a_failed_create_leaves_no_member_behind() {
    let dir = tempfile::tempdir().unwrap();
    let paths = members(dir.path(), "p", 2);
    fs::write(&paths[1], b"user data").unwrap();
    let opts = BackendOptions::per_node(paths.clone());
    let err = Pool::<FsBackend>::create(&opts, 8 * PAGE_BYTES, &options()).err().unwrap();
    assert!(matches!(err, PmemError::AlreadyExists { .. }), "{err}");
    assert!(!paths[0].exists());
    assert_eq!(fs::read(&paths[1]).unwrap(), b"user data");
    assert!(FsBackend::open(&opts).is_err());
}
