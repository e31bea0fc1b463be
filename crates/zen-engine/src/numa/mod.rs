//! Zen+ NUMA support (§4.2): topology and thread binding, NUMA-local writes,
//! soft partitions, transaction assignment (Alg. 3), dynamic partition
//! mapping (Alg. 4) and remote-access accounting.
//!
//! Everything here is a runtime option ([`NumaConfig`], part of
//! `EngineConfig`). On a machine with fewer NUMA nodes than asked for,
//! `nodes` splits the workers into VIRTUAL nodes: placement, routing and
//! mapping run exactly as on real nodes, and every access to memory homed on
//! another node is counted as remote (and optionally charged
//! `remote_penalty_ns` of busy-waiting), so the design's effect is measurable
//! on one socket. See `docs/design/numa.md`.
//!
//! Module map: `topology` (real nodes, virtual nodes, binding → [`Layout`]),
//! `accounting` (where memory lives, per-worker local/remote counters →
//! [`Numa`]), `partition` (soft partitions, the shared map and access
//! counts → [`SoftPartitioner`]), `assign` (Alg. 3, pure), `remap` (Alg. 4,
//! pure), `bind` (`mbind` of cache regions on real nodes → [`MemoryBinder`]).

pub mod accounting;
pub mod assign;
pub mod bind;
pub mod partition;
pub mod remap;
pub mod topology;

pub use accounting::{Numa, NumaCounters, NumaStats};
pub use assign::{Choice, choose_node};
pub use bind::{MemoryBinder, MemoryBindingReport};
pub use partition::{SoftPartitioner, partition_of};
pub use remap::{RemapOutcome, map_partitions};
pub use topology::{Layout, Topology};

use serde::Serialize;

use crate::error::{Error, Result};

/// Where memory lives relative to the workers (the cases of Fig. 27/28).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum NumaMode {
    /// All workers on node 0 using node-0 memory (the upper bound, Fig. 27 `local`).
    Local,
    /// All workers on node 0, all memory on node 1 (the lower bound, Fig. 27 `remote`).
    Remote,
    /// Workers spread over the nodes, memory interleaved page by page
    /// (Fig. 7a, the NUMA-agnostic design).
    Naive,
    /// Each worker's cache region and heap pages on its own node (Fig. 7b).
    LocalWrite,
    /// NUMA-local writes plus transaction assignment (Alg. 3) and dynamic
    /// partition mapping (Alg. 4) (Fig. 7c). The default.
    SoftPartition,
}

impl NumaMode {
    pub const ALL: [NumaMode; 5] = [
        NumaMode::Local,
        NumaMode::Remote,
        NumaMode::Naive,
        NumaMode::LocalWrite,
        NumaMode::SoftPartition,
    ];
    pub fn name(self) -> &'static str {
        match self {
            NumaMode::Local => "local",
            NumaMode::Remote => "remote",
            NumaMode::Naive => "naive",
            NumaMode::LocalWrite => "local-write",
            NumaMode::SoftPartition => "soft-partition",
        }
    }
    pub fn parse(s: &str) -> Option<NumaMode> {
        NumaMode::ALL.into_iter().find(|m| m.name() == s)
    }
}

/// How workers are bound to nodes (Fig. 30).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Binding {
    /// Fill a node's CPUs before using the next node (the default).
    Group,
    /// The same number of workers on every node.
    Even,
}

impl Binding {
    pub fn name(self) -> &'static str {
        match self {
            Binding::Group => "group",
            Binding::Even => "even",
        }
    }
    pub fn parse(s: &str) -> Option<Binding> {
        [Binding::Group, Binding::Even].into_iter().find(|b| b.name() == s)
    }
}

/// Most NUMA nodes (real or virtual) a layout may have.
pub const MAX_NODES: usize = 64;
/// Default number of soft partitions (the paper's 2048).
pub const DEFAULT_PARTITIONS: usize = 2048;
/// Most soft partitions: the map and the access counts must stay cache-resident.
pub const MAX_PARTITIONS: usize = 1 << 16;
/// Largest remote penalty accepted (100 µs per access is already absurd).
pub const MAX_REMOTE_PENALTY_NS: u64 = 100_000;

/// The NUMA knobs (Zen+ §4.2). The default is "off": one node, nothing counted.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct NumaConfig {
    /// Nodes to run on (`--numa-nodes`). `None`: the machine's real nodes
    /// (NUMA is inactive on a one-node machine). More than the machine has:
    /// virtual nodes that split the workers and the CPUs.
    pub nodes: Option<usize>,
    /// CPUs per virtual node, i.e. how many workers `group` binding puts on a
    /// node before using the next (`--numa-node-cpus`; default: the machine's
    /// CPUs split over the virtual nodes, at least one). Ignored on real nodes.
    pub node_cpus: Option<usize>,
    pub binding: Binding,
    pub mode: NumaMode,
    /// Workers the binding spreads over the nodes (the driver's threads;
    /// `None`: `max_workers`). Workers above it (checkers) sit on node 0.
    pub workers: Option<usize>,
    /// Pin each worker to a CPU of its node when that CPU exists (default true).
    pub pin: bool,
    /// Busy-wait charged per remote tuple access (read or write), so that
    /// remote accesses cost something on a one-node machine (default 0).
    pub remote_penalty_ns: u64,
    /// Soft partitions P (default 2048).
    pub partitions: usize,
    /// Alg. 3 δ: node loads (0..1) differing by more than this send the
    /// transaction to the least-loaded node (default 0.3).
    pub delta: f64,
    /// Alg. 4 η: remap a partition only when the candidate node saw this many
    /// times the accesses of its current node (default 1.2).
    pub eta: f64,
    /// Period of the dynamic mapping (Alg. 4) in milliseconds (default 100).
    pub remap_interval_ms: u64,
}

impl Default for NumaConfig {
    fn default() -> Self {
        NumaConfig {
            nodes: None,
            node_cpus: None,
            binding: Binding::Group,
            mode: NumaMode::SoftPartition,
            workers: None,
            pin: true,
            remote_penalty_ns: 0,
            partitions: DEFAULT_PARTITIONS,
            delta: 0.3,
            eta: 1.2,
            remap_interval_ms: 100,
        }
    }
}

impl NumaConfig {
    /// Check every knob; `max_workers` is the engine's worker limit.
    pub fn validate(&self, max_workers: usize) -> Result<()> {
        let bad = |m: String| Err(Error::InvalidConfig(m));
        let workers = self.workers.unwrap_or(max_workers);
        if let Some(n) = self.nodes {
            if n == 0 || n > MAX_NODES {
                return bad(format!("--numa-nodes {n} is outside 1..={MAX_NODES}"));
            }
            if n > workers {
                return bad(format!(
                    "--numa-nodes {n} needs at least {n} workers (one per node); there are {workers}"
                ));
            }
        }
        if workers == 0 || workers > max_workers {
            return bad(format!("NUMA workers {workers} outside 1..={max_workers}"));
        }
        if self.node_cpus == Some(0) {
            return bad("--numa-node-cpus 0: a node needs at least one CPU".into());
        }
        if self.remote_penalty_ns > MAX_REMOTE_PENALTY_NS {
            return bad(format!(
                "--remote-penalty-ns {} exceeds {MAX_REMOTE_PENALTY_NS}",
                self.remote_penalty_ns
            ));
        }
        if self.partitions == 0 || self.partitions > MAX_PARTITIONS {
            return bad(format!(
                "--numa-partitions {} is outside 1..={MAX_PARTITIONS}",
                self.partitions
            ));
        }
        if !(self.delta.is_finite() && self.delta > 0.0 && self.delta <= 1.0) {
            return bad(format!("--numa-delta {} must be in (0, 1]", self.delta));
        }
        if !(self.eta.is_finite() && (1.0..=100.0).contains(&self.eta)) {
            return bad(format!("--numa-eta {} must be in [1, 100]", self.eta));
        }
        if self.remap_interval_ms == 0 {
            return bad("--numa-remap-interval must be at least 1 ms".into());
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn refused(config: NumaConfig, needle: &str) {
        let err = config.validate(8).unwrap_err().to_string();
        assert!(err.contains(needle), "{err} should mention {needle}");
    }

    #[test]
    fn bad_numa_settings_are_refused_with_the_flag_named() {
        NumaConfig::default().validate(8).unwrap();
        let ok = NumaConfig { nodes: Some(2), ..NumaConfig::default() };
        ok.validate(8).unwrap();
        refused(NumaConfig { nodes: Some(0), ..ok.clone() }, "--numa-nodes 0");
        refused(NumaConfig { nodes: Some(9), ..ok.clone() }, "needs at least 9 workers");
        refused(NumaConfig { node_cpus: Some(0), ..ok.clone() }, "--numa-node-cpus");
        refused(NumaConfig { delta: 0.0, ..ok.clone() }, "--numa-delta");
        refused(NumaConfig { delta: f64::NAN, ..ok.clone() }, "--numa-delta");
        refused(NumaConfig { eta: 0.9, ..ok.clone() }, "--numa-eta");
        refused(NumaConfig { partitions: 0, ..ok.clone() }, "--numa-partitions");
        refused(NumaConfig { remote_penalty_ns: 1 << 40, ..ok.clone() }, "--remote-penalty-ns");
        refused(NumaConfig { remap_interval_ms: 0, ..ok }, "--numa-remap-interval");
    }

    #[test]
    fn modes_and_bindings_round_trip_through_their_names() {
        for m in NumaMode::ALL {
            assert_eq!(NumaMode::parse(m.name()), Some(m));
        }
        assert_eq!(Binding::parse("even"), Some(Binding::Even));
        assert_eq!(Binding::parse("spread"), None);
    }
}
