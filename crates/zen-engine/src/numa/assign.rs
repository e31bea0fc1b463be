//! Alg. 3 (transaction assignment), the decision part, as a pure function.
//!
//! ```text
//!   if max(load) - min(load) > δ      → the least-loaded node  (load is very unbalanced)
//!   else votes = one per request whose partition key is known, for the
//!        node its partition is mapped to
//!        if every vote is 0            → a random node          (complex transaction)
//!        else                          → argmax(votes)          (affinity)
//! ```
//!
//! Only ELIGIBLE nodes (nodes with at least one worker; `group` binding may
//! leave a node empty) take part: their loads are compared, their votes
//! counted, and the random node is drawn among them. A tie in votes goes to
//! the least-loaded of the tied nodes, and at equal loads to a random one (a
//! transaction with 16 uniform keys ties often: always taking the lowest
//! node would pile work on it, and preferring the lighter node is the
//! restoring force that keeps loads within δ most of the time). A tie in
//! load for the least-loaded rule goes to the lowest node number. Loads are fractions in 0..=1 (the driver uses the occupancy
//! of the nodes' request queues; the paper reads CPU utilisation from
//! `/proc/stat`). Choosing the worker inside the node (round-robin) and
//! counting the accesses is [`super::SoftPartitioner::route`]'s job.

/// Which rule of Alg. 3 chose the node.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Choice {
    /// Line 6: loads differed by more than δ.
    LeastLoaded(usize),
    /// Line 22: the node with the most votes.
    Affinity(usize),
    /// Line 20: no request's partition was known.
    Random(usize),
}

impl Choice {
    pub fn node(self) -> usize {
        match self {
            Choice::LeastLoaded(n) | Choice::Affinity(n) | Choice::Random(n) => n,
        }
    }
}

/// Alg. 3 lines 5–8 and 12–22. `loads`, `votes` and `eligible` are indexed
/// by node; at least one node must be eligible; `random` is any random number.
pub fn choose_node(
    loads: &[f64],
    votes: &[u32],
    eligible: &[bool],
    delta: f64,
    random: u64,
) -> Choice {
    let nodes = || (0..eligible.len()).filter(|&n| eligible[n]);
    assert!(nodes().next().is_some(), "Alg. 3 needs a node with workers");
    let load = |n: usize| loads.get(n).copied().unwrap_or(0.0);
    let (mut low, mut high) = (f64::INFINITY, f64::NEG_INFINITY);
    let mut least = usize::MAX;
    for n in nodes() {
        if load(n) < low {
            low = load(n);
            least = n;
        }
        high = high.max(load(n));
    }
    if high - low > delta {
        return Choice::LeastLoaded(least);
    }
    let vote = |n: usize| votes.get(n).copied().unwrap_or(0);
    let best_votes = nodes().map(vote).max().unwrap_or(0);
    if best_votes > 0 {
        let tied = || nodes().filter(|&n| vote(n) == best_votes);
        let lightest = tied().map(load).fold(f64::INFINITY, f64::min);
        let candidates = || tied().filter(|&n| load(n) <= lightest);
        let pick = (random % candidates().count() as u64) as usize;
        return Choice::Affinity(candidates().nth(pick).expect("pick < candidates"));
    }
    let count = nodes().count() as u64;
    Choice::Random(nodes().nth((random % count) as usize).expect("random < count"))
}

#[cfg(test)]
mod tests {
    use super::*;

    const BOTH: [bool; 2] = [true, true];

    #[test]
    fn a_skewed_transaction_goes_to_the_node_most_of_its_keys_map_to() {
        // 16 requests: 15 keys in partitions of node 1, one in node 0.
        assert_eq!(choose_node(&[0.1, 0.2], &[1, 15], &BOTH, 0.3, 7), Choice::Affinity(1));
    }

    #[test]
    fn unbalanced_loads_override_affinity() {
        // Node 0's queues are 90 % full, node 1's 20 %: 0.7 > δ = 0.3.
        assert_eq!(choose_node(&[0.9, 0.2], &[16, 0], &BOTH, 0.3, 7), Choice::LeastLoaded(1));
        // A difference of exactly δ is not "more than δ".
        assert_eq!(choose_node(&[0.5, 0.25], &[16, 0], &BOTH, 0.25, 7), Choice::Affinity(0));
    }

    #[test]
    fn a_tie_in_votes_goes_to_the_lighter_node_then_at_random() {
        assert_eq!(choose_node(&[0.2, 0.1], &[8, 8], &BOTH, 0.3, 8), Choice::Affinity(1));
        assert_eq!(choose_node(&[0.0, 0.0], &[8, 8], &BOTH, 0.3, 7), Choice::Affinity(1));
        assert_eq!(choose_node(&[0.0, 0.0], &[8, 8], &BOTH, 0.3, 8), Choice::Affinity(0));
        // Only the tied nodes take part: node 2 has fewer votes.
        let three = [true, true, true];
        assert_eq!(choose_node(&[0.0; 3], &[8, 3, 8], &three, 0.3, 1), Choice::Affinity(2));
    }

    #[test]
    fn a_complex_transaction_goes_to_a_random_node() {
        assert_eq!(choose_node(&[0.0, 0.0], &[0, 0], &BOTH, 0.3, 7), Choice::Random(1));
        assert_eq!(choose_node(&[0.0, 0.0], &[0, 0], &BOTH, 0.3, 8), Choice::Random(0));
    }

    #[test]
    fn nodes_without_workers_neither_vote_nor_win() {
        let only_zero = [true, false, false];
        // Node 1 has no workers: its votes and its (idle) load are ignored.
        assert_eq!(
            choose_node(&[0.9, 0.0, 0.0], &[0, 5, 0], &only_zero, 0.3, 5),
            Choice::Random(0)
        );
        let zero_and_two = [true, false, true];
        assert_eq!(
            choose_node(&[0.0, 0.0, 0.0], &[0, 0, 0], &zero_and_two, 0.3, 1),
            Choice::Random(2)
        );
    }
}
