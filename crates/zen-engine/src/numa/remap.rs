//! Alg. 4 (dynamic mapping of partitions to nodes) as a pure function.
//!
//! ```text
//!   pt_cnt[p]    = Σ_t access[t][p]              (how hot p is)
//!   nd_pt[n][p]  = Σ_{t on n} access[t][p]       (how much node n uses p)
//!   for p in partitions, hottest first:
//!       candidates = nodes n with mapped_cnt[n] ≤ 1.1 · min(mapped_cnt)   (balance within 10 %)
//!                    and mapped_pt[n] < ⌈P / nodes⌉                       (equal partition counts)
//!       node = the candidate with the largest nd_pt[n][p]
//!       if nd_pt[node][p] > η · nd_pt[map[p]][p]: map[p] = node   (remap)
//!       else node = map[p]                                       (unchanged)
//!       mapped_pt[node] += 1; mapped_cnt[node] += nd_pt[node][p]
//! ```
//!
//! Deviations, both needed for the algorithm to do anything from a cold
//! start: the balance test is `≤` where the paper writes `<` (with every
//! `mapped_cnt` at 0 the strict test admits no node), and when no node is a
//! candidate the mapping is left unchanged. Only ELIGIBLE nodes (with
//! workers) are candidates. Ties between candidates go to the lowest node;
//! equally hot partitions are taken in partition order. The cost is
//! O(P log P + P·T) for P partitions and T workers, as in the paper.

/// What one round of Alg. 4 did.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct RemapOutcome {
    /// Partitions whose node changed.
    pub moved: usize,
}

/// One round of Alg. 4 over `access` (`workers` rows of `map.len()` counts)
/// with `worker_node[t]` the node of worker `t`. Updates `map` in place.
pub fn map_partitions(
    access: &[u32],
    worker_node: &[u8],
    eligible: &[bool],
    map: &mut [u8],
    eta: f64,
) -> RemapOutcome {
    let parts = map.len();
    let nodes = eligible.len();
    let workers = worker_node.len();
    assert_eq!(access.len(), workers * parts, "access is workers × partitions");
    let mut pt_cnt = vec![0u64; parts];
    let mut nd_pt = vec![0u64; nodes * parts];
    for t in 0..workers {
        let node = usize::from(worker_node[t]);
        for (p, &count) in access[t * parts..(t + 1) * parts].iter().enumerate() {
            pt_cnt[p] += u64::from(count);
            nd_pt[node * parts + p] += u64::from(count);
        }
    }
    let mut order: Vec<usize> = (0..parts).collect();
    order.sort_by(|&a, &b| pt_cnt[b].cmp(&pt_cnt[a]).then(a.cmp(&b)));
    let eligible_count = eligible.iter().filter(|&&e| e).count().max(1);
    let quota = parts.div_ceil(eligible_count) as u64;
    let mut mapped_pt = vec![0u64; nodes];
    let mut mapped_cnt = vec![0u64; nodes];
    let mut outcome = RemapOutcome::default();
    for p in order {
        let uses = |n: usize| nd_pt[n * parts + p];
        let min_load =
            (0..nodes).filter(|&n| eligible[n]).map(|n| mapped_cnt[n]).min().unwrap_or(0);
        let mut node: Option<usize> = None;
        for nd in (0..nodes).filter(|&n| eligible[n]) {
            let balanced = mapped_cnt[nd] as f64 <= 1.1 * min_load as f64;
            if balanced && mapped_pt[nd] < quota && node.is_none_or(|best| uses(nd) > uses(best)) {
                node = Some(nd);
            }
        }
        let orig = usize::from(map[p]).min(nodes - 1);
        let chosen = match node {
            Some(nd) if nd != orig && uses(nd) as f64 > uses(orig) as f64 * eta => {
                map[p] = nd as u8;
                outcome.moved += 1;
                nd
            }
            _ => orig,
        };
        mapped_pt[chosen] += 1;
        mapped_cnt[chosen] += uses(chosen);
    }
    outcome
}

#[cfg(test)]
mod tests {
    use super::*;

    const BOTH: [bool; 2] = [true, true];

    /// Access counts for 2 workers (worker 0 on node 0, worker 1 on node 1).
    fn access(node0: &[u32], node1: &[u32]) -> Vec<u32> {
        node0.iter().chain(node1).copied().collect()
    }

    #[test]
    fn partitions_a_remote_node_uses_move_there() {
        // Worked by hand in docs/design/numa.md: hottest-first order p0 (10),
        // p2 (9), p1 (8), p3 (7); p2 and p3 move to node 1, whose workers use them.
        let mut map = [0u8; 4];
        let a = access(&[10, 8, 0, 0], &[0, 0, 9, 7]);
        let out = map_partitions(&a, &[0, 1], &BOTH, &mut map, 1.2);
        assert_eq!(map, [0, 0, 1, 1]);
        assert_eq!(out.moved, 2);
    }

    #[test]
    fn a_partition_moves_only_when_the_candidate_sees_eta_times_more() {
        // p0: node 1 uses it 11 times, node 0 (its node) 10 times: 11 ≤ 12.
        let mut map = [0u8, 1];
        let out = map_partitions(&access(&[10, 0], &[11, 0]), &[0, 1], &BOTH, &mut map, 1.2);
        assert_eq!((map, out.moved), ([0, 1], 0));
        // 13 > 1.2 · 10: it moves.
        let out = map_partitions(&access(&[10, 0], &[13, 0]), &[0, 1], &BOTH, &mut map, 1.2);
        assert_eq!((map, out.moved), ([1, 1], 1));
    }

    #[test]
    fn hot_partitions_are_spread_to_balance_the_nodes() {
        // Node 1 uses all four partitions, node 0 none. The hottest (p0, 40)
        // moves to node 1; after that node 1's load (40) is more than 10 %
        // above node 0's (0), so node 1 is no candidate for the rest, and
        // node 0 (no accesses) is not η times better than their node: they stay.
        let mut map = [0u8; 4];
        let out = map_partitions(
            &access(&[0, 0, 0, 0], &[40, 30, 20, 10]),
            &[0, 1],
            &BOTH,
            &mut map,
            1.2,
        );
        assert_eq!((map, out.moved), ([1, 0, 0, 0], 1));
    }

    #[test]
    fn equal_partition_counts_cap_a_node() {
        // p0 stays on node 0 (20); p1 and p2 move to node 1 (10 each, loads
        // now 20 : 20). p3 is used only by node 1, and the loads are balanced,
        // but node 1 already holds ⌈4/2⌉ = 2 partitions: p3 stays on node 0.
        let mut map = [0u8; 4];
        let a = access(&[20, 0, 0, 0], &[0, 10, 10, 5]);
        let out = map_partitions(&a, &[0, 1], &BOTH, &mut map, 1.2);
        assert_eq!((map, out.moved), ([0, 1, 1, 0], 2));
    }

    #[test]
    fn cold_partitions_and_empty_nodes_never_move() {
        let mut map = [0u8, 1];
        let out = map_partitions(&access(&[0, 0], &[0, 0]), &[0, 1], &BOTH, &mut map, 1.2);
        assert_eq!((map, out.moved), ([0, 1], 0));
        // Node 1 has no workers: nothing moves to it, even with counts.
        let mut map = [0u8, 0];
        map_partitions(&[5, 5], &[0], &[true, false], &mut map, 1.2);
        assert_eq!(map, [0, 0]);
    }
}
