//! Hand-enumerated crash-image sets: the simulator's own validation.
//!
//! What: small runs whose every crash image can be listed by hand (2 lines × 2
//! stores: 9 strict, 16 paranoid, 5 eADR images), per-thread fence semantics,
//! flush marks that cover only earlier stores, the budget fallback, the lints,
//! and trace bookkeeping (markers, reset). How: drive [`SimBackend`] through
//! the `PmemBackend` trait directly and compare image sets exactly.
//! Invariant checked throughout: reads see the visible image, crash images
//! only ever hold durable bytes plus allowed pending atoms.

use std::collections::BTreeSet;

use zen_pmem::sim::{CrashAt, CrashMode, SimBackend, Trace};
use zen_pmem::{Marker, PersistenceDomain, PmemBackend};

const ADR: PersistenceDomain = PersistenceDomain::Adr;
const A1: u64 = 0xA1;
const A2: u64 = 0xA2;
const B1: u64 = 0xB1;
const B2: u64 = 0xB2;

fn word(image: &[u8], offset: usize) -> u64 {
    u64::from_le_bytes(image[offset..offset + 8].try_into().unwrap())
}

/// Words 0 and 8 (line 0) and 64 and 72 (line 1) of an image.
fn four_words(image: &[u8]) -> [u64; 4] {
    [word(image, 0), word(image, 8), word(image, 64), word(image, 72)]
}

/// Thread 1 stores A1, A2 to line 0 and B1, B2 to line 1, then flushes both.
fn two_lines_two_stores(domain: PersistenceDomain) -> SimBackend {
    let sim = SimBackend::new(4096, domain);
    sim.store_u64(1, 0, A1);
    sim.store_u64(1, 8, A2);
    sim.store_u64(1, 64, B1);
    sim.store_u64(1, 72, B2);
    sim.flush(1, 0, 128);
    sim
}

fn image_set(trace: &Trace, point: usize, mode: CrashMode, budget: u64) -> Vec<[u64; 4]> {
    let point = trace.crash_points().nth(point).expect("crash point exists");
    point.images(mode, budget, 1).map(|img| four_words(&img.bytes)).collect()
}

#[test]
fn two_lines_two_stores_give_9_strict_and_16_paranoid_images() {
    let sim = two_lines_two_stores(ADR);
    sim.fence(1, 2);
    let trace = sim.trace();
    assert_eq!(trace.fence_count(), 1);
    let strict = image_set(&trace, 0, CrashMode::Strict, 256);
    let mut want = BTreeSet::new();
    for line0 in [[0, 0], [A1, 0], [A1, A2]] {
        for line1 in [[0, 0], [B1, 0], [B1, B2]] {
            want.insert([line0[0], line0[1], line1[0], line1[1]]);
        }
    }
    assert_eq!(strict.len(), 9);
    assert_eq!(strict.iter().copied().collect::<BTreeSet<_>>(), want);

    let paranoid = image_set(&trace, 0, CrashMode::Paranoid, 256);
    let mut want = BTreeSet::new();
    for bits in 0..16u32 {
        let pick = |i: u32, v: u64| if bits & (1 << i) != 0 { v } else { 0 };
        want.insert([pick(0, A1), pick(1, A2), pick(2, B1), pick(3, B2)]);
    }
    assert_eq!(paranoid.len(), 16);
    assert_eq!(paranoid.iter().copied().collect::<BTreeSet<_>>(), want);

    let after = image_set(&trace, 1, CrashMode::Strict, 256);
    assert_eq!(after, vec![[A1, A2, B1, B2]], "after the fence only one image remains");
    assert_eq!(image_set(&trace, 1, CrashMode::Paranoid, 256), after);
}

#[test]
fn eadr_images_are_the_prefixes_of_the_global_atom_order() {
    let sim = two_lines_two_stores(PersistenceDomain::Eadr);
    sim.fence(1, 0);
    assert_eq!(sim.pending_atoms(), 0, "nothing is ever pending under eADR");
    sim.store_u64(1, 256, 1);
    sim.marker(1, Marker::Ack { txn: 1 });
    assert!(sim.lints().is_clean(), "under eADR a visible store is durable: no ack lint");
    let trace = sim.trace();
    let images = image_set(&trace, 0, CrashMode::Eadr, 256);
    let want = vec![[0, 0, 0, 0], [A1, 0, 0, 0], [A1, A2, 0, 0], [A1, A2, B1, 0], [A1, A2, B1, B2]];
    assert_eq!(images, want);
    let end = trace.crash_points().last().unwrap();
    assert_eq!(end.eadr_atoms(), 1, "the store after the fence");
    assert_eq!(image_set(&trace, 1, CrashMode::Eadr, 256).len(), 2);
    assert!(image_set(&trace, 1, CrashMode::Eadr, 256).iter().all(|w| *w == [A1, A2, B1, B2]));
    // The same trace judged under ADR: the fence persisted the flushed lines,
    // and the last store (never flushed) may or may not survive.
    assert_eq!(end.pending_atoms(), 1);
    assert_eq!(image_set(&trace, 1, CrashMode::Strict, 256), vec![[A1, A2, B1, B2]; 2]);
}

#[test]
fn a_fence_persists_only_the_fencing_threads_flushes() {
    let sim = SimBackend::new(4096, ADR);
    sim.store_u64(1, 128, 7);
    sim.flush(1, 128, 8);
    sim.fence(2, 0);
    assert_eq!(sim.pending_atoms(), 1, "thread 2's fence must not persist thread 1's flush");
    assert_eq!(word(&sim.durable_image(), 128), 0);
    assert_eq!(sim.load_u64(128), 7, "reads see the visible image");
    sim.fence(1, 1);
    assert_eq!(sim.pending_atoms(), 0);
    assert_eq!(word(&sim.durable_image(), 128), 7);

    let trace = sim.trace();
    let points: Vec<_> = trace.crash_points().map(|p| (p.at(), p.pending_atoms())).collect();
    assert_eq!(
        points,
        vec![
            (CrashAt::Fence { seq: 2, thread: 2 }, 1),
            (CrashAt::Fence { seq: 3, thread: 1 }, 1),
            (CrashAt::End, 0),
        ]
    );
    let end = trace.crash_points().last().unwrap();
    assert_eq!(word(&end.durable_image(), 128), 7);
}

#[test]
fn a_flush_covers_only_the_stores_before_it() {
    let sim = SimBackend::new(4096, ADR);
    sim.store_u64(1, 0, 0x11);
    sim.flush(1, 0, 8);
    sim.store_u64(1, 8, 0x22);
    sim.fence(1, 1);
    assert_eq!(sim.pending_atoms(), 1);
    let durable = sim.durable_image();
    assert_eq!((word(&durable, 0), word(&durable, 8)), (0x11, 0));
    let trace = sim.trace();
    let end: BTreeSet<_> = image_set(&trace, 1, CrashMode::Strict, 256).into_iter().collect();
    assert_eq!(end, BTreeSet::from([[0x11, 0, 0, 0], [0x11, 0x22, 0, 0]]));
}

#[test]
fn many_dirty_lines_fall_back_to_extremes_deviations_and_random_images() {
    let sim = SimBackend::new(64 * 64, ADR);
    for line in 0..40u64 {
        sim.write(3, line * 64, &[line as u8 + 1; 24]);
    }
    sim.flush(3, 0, 40 * 64);
    sim.fence(3, 40);
    let trace = sim.trace();
    let point = trace.crash_points().next().unwrap();
    assert_eq!((point.dirty_lines(), point.pending_atoms()), (40, 120));
    assert_eq!(point.image_count(CrashMode::Strict), u64::MAX, "4^40 saturates");
    for mode in [CrashMode::Strict, CrashMode::Paranoid] {
        let images: Vec<_> = point.images(mode, 100, 5).collect();
        assert_eq!(images.len(), 100, "{mode:?} uses the whole budget");
        assert!(images.iter().all(|i| !i.exhaustive));
        let durable = point.durable_image();
        let visible = sim.visible_image();
        assert!(images.iter().any(|i| i.bytes == durable), "{mode:?}: nothing-applied extreme");
        assert!(images.iter().any(|i| i.bytes == visible), "{mode:?}: everything extreme");
        let distinct: BTreeSet<_> = images.iter().map(|i| i.bytes.clone()).collect();
        assert!(distinct.len() > 90, "{mode:?}: images should mostly differ");
    }
    let seeded = |seed| point.images(CrashMode::Paranoid, 30, seed).last().unwrap().bytes;
    assert_eq!(seeded(9), seeded(9), "the same seed gives the same images");
    assert_ne!(seeded(9), seeded(10));
}

#[test]
fn lints_catch_the_three_errors() {
    let acked = SimBackend::new(4096, ADR);
    acked.store_u64(1, 0, 5);
    acked.marker(1, Marker::Ack { txn: 77 });
    let lints = acked.lints();
    assert_eq!(lints.acked_with_pending, 1);
    assert!(lints.errors()[0].contains("txn 77"), "{:?}", lints.errors());

    let shutdown = SimBackend::new(4096, ADR);
    shutdown.write(0, 64, &[1; 8]);
    shutdown.marker(0, Marker::CleanShutdown);
    assert_eq!(shutdown.lints().pending_at_clean_shutdown, 1);

    let torn = SimBackend::new(4096, ADR);
    torn.write(2, 16, &0x1234_5678u32.to_le_bytes());
    torn.write(2, 20, &0x9ABCu32.to_le_bytes());
    let lints = torn.lints();
    assert_eq!(lints.torn_commit_words, 1);
    assert!(lints.errors()[0].contains("0x10"), "{:?}", lints.errors());
    assert_eq!(torn.trace().lints(), &lints);

    let epochs = SimBackend::new(4096, ADR);
    epochs.write(2, 16, &[1; 4]);
    epochs.flush(2, 16, 4);
    epochs.fence(2, 1);
    epochs.write(2, 20, &[2; 4]);
    assert!(epochs.lints().is_clean(), "partial stores in different epochs are fine");
}

#[test]
fn a_correct_commit_sequence_is_lint_free_and_warnings_are_counted() {
    let sim = SimBackend::new(4096, ADR);
    sim.marker(1, Marker::Begin { txn: 1 });
    sim.write(1, 0, &[9; 100]);
    sim.flush(1, 0, 100);
    sim.fence(1, 2);
    sim.store_u64(1, 104, 3);
    sim.flush(1, 104, 8);
    sim.fence(1, 1);
    sim.marker(1, Marker::Ack { txn: 1 });
    sim.marker(1, Marker::CleanShutdown);
    let lints = sim.lints();
    assert!(lints.is_clean(), "{:?}", lints.errors());
    assert_eq!(lints.warning_count(), 0, "{}", lints.summary());

    sim.flush(1, 0, 8); // clean line
    sim.store_u64(1, 512, 1);
    sim.flush(1, 512, 8);
    sim.flush(1, 512, 8); // the same line twice before the fence
    sim.fence(1, 2);
    sim.fence(1, 0); // nothing outstanding
    let lints = sim.lints();
    assert_eq!(
        (lints.clean_line_flushes, lints.repeated_flushes, lints.empty_fences),
        (2, 1, 1),
        "{}",
        lints.summary()
    );
    assert!(lints.is_clean());
}

#[test]
fn crash_points_carry_the_markers_before_them() {
    let sim = SimBackend::new(4096, ADR);
    for txn in 0..3u64 {
        sim.store_u64(1, txn * 64, txn + 1);
        sim.flush(1, txn * 64, 8);
        sim.fence(1, 1);
        sim.marker(1, Marker::Ack { txn });
    }
    let trace = sim.trace();
    let acked: Vec<Vec<u64>> = trace.crash_points().map(|p| p.acked_txns().collect()).collect();
    assert_eq!(acked, vec![vec![], vec![0], vec![0, 1], vec![0, 1, 2]]);
    assert_eq!(trace.markers().len(), 3);
}

#[test]
fn reset_trace_makes_the_current_state_the_initial_image() {
    let sim = SimBackend::new(4096, ADR);
    sim.store_u64(1, 0, 42);
    sim.flush(1, 0, 8);
    sim.fence(1, 1);
    sim.reset_trace();
    let trace = sim.trace();
    assert!(trace.events().is_empty());
    assert_eq!(word(trace.initial_image(), 0), 42);
    let only: Vec<_> = trace.crash_points().map(|p| p.durable_image()).collect();
    assert_eq!(only.len(), 1);
    assert_eq!(word(&only[0], 0), 42);
}

#[test]
#[should_panic(expected = "reset_trace with 1 atoms pending")]
fn reset_trace_refuses_pending_atoms() {
    let sim = SimBackend::new(4096, ADR);
    sim.store_u64(1, 0, 42);
    sim.reset_trace();
}

#[test]
fn stores_of_unchanged_bytes_add_no_atoms_and_torn_words_tear() {
    let sim = SimBackend::new(4096, ADR);
    sim.write_zeros(1, 0, 4096);
    assert_eq!(sim.pending_atoms(), 0, "zeroing zeros changes no image");
    sim.write(1, 3, &[0xEE; 10]); // bytes 3..13: two partial atoms
    assert_eq!(sim.pending_atoms(), 2);
    sim.flush(1, 0, 16);
    let trace = sim.trace();
    let point = trace.crash_points().last().unwrap();
    let words: BTreeSet<(u64, u64)> = point
        .images(CrashMode::Paranoid, 256, 0)
        .map(|i| (word(&i.bytes, 0), word(&i.bytes, 8)))
        .collect();
    let w0 = u64::from_le_bytes([0, 0, 0, 0xEE, 0xEE, 0xEE, 0xEE, 0xEE]);
    let w1 = u64::from_le_bytes([0xEE, 0xEE, 0xEE, 0xEE, 0xEE, 0, 0, 0]);
    assert_eq!(words, BTreeSet::from([(0, 0), (w0, 0), (0, w1), (w0, w1)]));
}

#[test]
fn the_engine_reads_through_a_read_only_mapping() {
    let sim = SimBackend::new(8192, ADR);
    sim.write(1, 100, b"visible at once");
    let mut buf = [0u8; 15];
    assert_eq!(sim.read(100, &mut buf), 0);
    assert_eq!(&buf, b"visible at once");
    let want = format!("{:x}-", sim.view_address());
    let maps = std::fs::read_to_string("/proc/self/maps").unwrap();
    let line = maps.lines().find(|l| l.starts_with(&want)).expect("the view is mapped");
    let perms = line.split_whitespace().nth(1).unwrap();
    assert_eq!(perms, "r--s", "a stray write through the view must fault: {line}");
}
