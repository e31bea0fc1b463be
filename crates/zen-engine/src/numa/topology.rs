//! Topology and binding: which node each worker runs on, and on which CPU.
//!
//! REAL NODES come from `/sys/devices/system/node/node<N>/cpulist`. When the
//! configuration asks for more nodes than the machine has, the machine's CPUs
//! are split into that many VIRTUAL nodes (contiguous runs; a node may get
//! none on a small machine, and its workers then run unpinned).
//!
//! BINDING (Fig. 30), for `workers` workers over `nodes` nodes of `capacity`
//! CPUs each:
//!
//! ```text
//!   group: fill node 0 up to its capacity, then node 1, ...; once every node
//!          is full, the rest go round-robin (oversubscription)
//!   even:  worker w on node w * nodes / workers (equal blocks)
//!   e.g. 6 workers, 2 nodes of 4 CPUs:  group 0 0 0 0 1 1   even 0 0 0 1 1 1
//! ```
//!
//! The `local` and `remote` modes of Fig. 27 run every worker on node 0.
//! Workers numbered `workers` and above (checkers, spec readers) sit on
//! node 0. A worker is pinned to the k-th CPU of its node when it is the
//! node's k-th worker and that CPU exists.

use super::{Binding, NumaConfig, NumaMode};

/// The machine's NUMA nodes and their CPUs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Topology {
    /// CPUs of each node, in node order.
    pub nodes: Vec<Vec<usize>>,
}

impl Topology {
    /// Read `/sys/devices/system/node`; without it (or when it is unreadable),
    /// one node holding the CPUs this process may use.
    pub fn detect() -> Topology {
        Self::from_sysfs(std::path::Path::new("/sys/devices/system/node")).unwrap_or_else(|| {
            let cpus = zen_pmem::affinity::allowed_cpus().unwrap_or_else(|_| {
                (0..std::thread::available_parallelism().map_or(1, |n| n.get())).collect()
            });
            Topology { nodes: vec![cpus] }
        })
    }

    /// Parse a sysfs node directory (`node0/cpulist`, `node1/cpulist`, ...).
    pub fn from_sysfs(root: &std::path::Path) -> Option<Topology> {
        let nodes: Vec<Vec<usize>> = scan_sysfs(root)?.into_iter().map(|(_, c)| c).collect();
        (!nodes.is_empty()).then_some(Topology { nodes })
    }

    /// The kernel's number of each node of `detect()`, in the same order
    /// (nodes without CPUs are skipped, so index and number may differ);
    /// `[0]` when sysfs cannot be read.
    pub fn detect_node_ids() -> Vec<usize> {
        scan_sysfs(std::path::Path::new("/sys/devices/system/node"))
            .map(|found| found.into_iter().map(|(id, _)| id).collect::<Vec<_>>())
            .filter(|ids| !ids.is_empty())
            .unwrap_or_else(|| vec![0])
    }

    pub fn cpus(&self) -> impl Iterator<Item = usize> + '_ {
        self.nodes.iter().flatten().copied()
    }
}

/// (kernel node number, CPUs) of every node with CPUs, in node order.
fn scan_sysfs(root: &std::path::Path) -> Option<Vec<(usize, Vec<usize>)>> {
    let mut found: Vec<(usize, Vec<usize>)> = Vec::new();
    for entry in std::fs::read_dir(root).ok()? {
        let entry = entry.ok()?;
        let name = entry.file_name().into_string().ok()?;
        let Some(id) = name.strip_prefix("node").and_then(|n| n.parse::<usize>().ok()) else {
            continue;
        };
        let list = std::fs::read_to_string(entry.path().join("cpulist")).ok()?;
        found.push((id, parse_cpulist(&list)?));
    }
    found.sort_by_key(|(id, _)| *id);
    found.retain(|(_, cpus)| !cpus.is_empty());
    Some(found)
}

/// Parse a kernel cpu list such as `0-3,8-11,16`. `None` on malformed text.
pub fn parse_cpulist(text: &str) -> Option<Vec<usize>> {
    let mut cpus = Vec::new();
    for part in text.trim().split(',').filter(|p| !p.is_empty()) {
        match part.split_once('-') {
            Some((a, b)) => {
                let (a, b) = (a.parse::<usize>().ok()?, b.parse::<usize>().ok()?);
                if b < a || b - a > 1 << 16 {
                    return None;
                }
                cpus.extend(a..=b);
            }
            None => cpus.push(part.parse().ok()?),
        }
    }
    Some(cpus)
}

/// The resolved placement of workers on nodes and CPUs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Layout {
    pub nodes: usize,
    /// The nodes are the machine's own (false: virtual nodes).
    pub real: bool,
    pub mode: NumaMode,
    /// Node of each engine worker (length `max_workers`).
    pub worker_node: Vec<u8>,
    /// CPU each worker is pinned to, when pinning applies and the CPU exists.
    pub worker_cpu: Vec<Option<usize>>,
    /// Workers the binding spread (the others sit on node 0).
    pub workers: usize,
}

impl Layout {
    /// Place `max_workers` workers as `config` says on `topology`.
    /// Assumes `config.validate(max_workers)` passed.
    pub fn resolve(config: &NumaConfig, max_workers: usize, topology: &Topology) -> Layout {
        let nodes = config.nodes.unwrap_or(topology.nodes.len()).max(1);
        let real = nodes == topology.nodes.len();
        let node_cpus: Vec<Vec<usize>> =
            if real { topology.nodes.clone() } else { split_cpus(topology, nodes) };
        let workers = config.workers.unwrap_or(max_workers).min(max_workers);
        let capacity = |n: usize| match config.node_cpus {
            Some(c) if !real => c,
            _ => node_cpus[n].len().max(1),
        };
        let all_on_zero = matches!(config.mode, NumaMode::Local | NumaMode::Remote);
        let spread: Vec<usize> = if all_on_zero {
            vec![0; workers]
        } else {
            match config.binding {
                Binding::Group => group_binding(workers, nodes, capacity),
                Binding::Even => (0..workers).map(|w| w * nodes / workers).collect(),
            }
        };
        let mut worker_node = vec![0u8; max_workers];
        let mut worker_cpu = vec![None; max_workers];
        let mut filled = vec![0usize; nodes];
        for (w, &node) in spread.iter().enumerate() {
            worker_node[w] = node as u8;
            if config.pin {
                worker_cpu[w] = node_cpus[node].get(filled[node]).copied();
            }
            filled[node] += 1;
        }
        Layout { nodes, real, mode: config.mode, worker_node, worker_cpu, workers }
    }

    /// Node of worker `w` (node 0 for workers beyond the layout).
    #[inline]
    pub fn node_of(&self, worker: usize) -> usize {
        self.worker_node.get(worker).map_or(0, |&n| usize::from(n))
    }

    /// The spread workers of each node, in worker order.
    pub fn node_workers(&self) -> Vec<Vec<usize>> {
        let mut out = vec![Vec::new(); self.nodes];
        for w in 0..self.workers {
            out[self.node_of(w)].push(w);
        }
        out
    }
}

fn group_binding(workers: usize, nodes: usize, capacity: impl Fn(usize) -> usize) -> Vec<usize> {
    let mut out = Vec::with_capacity(workers);
    for node in 0..nodes {
        for _ in 0..capacity(node) {
            if out.len() == workers {
                return out;
            }
            out.push(node);
        }
    }
    let mut next = 0;
    while out.len() < workers {
        out.push(next % nodes);
        next += 1;
    }
    out
}

/// The machine's CPUs in `nodes` contiguous runs (empty runs when there are
/// fewer CPUs than nodes).
fn split_cpus(topology: &Topology, nodes: usize) -> Vec<Vec<usize>> {
    let cpus: Vec<usize> = topology.cpus().collect();
    (0..nodes)
        .map(|n| cpus[n * cpus.len() / nodes..(n + 1) * cpus.len() / nodes].to_vec())
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn machine(nodes: &[&[usize]]) -> Topology {
        Topology { nodes: nodes.iter().map(|n| n.to_vec()).collect() }
    }

    fn config(nodes: usize, binding: Binding, workers: usize) -> NumaConfig {
        NumaConfig { nodes: Some(nodes), binding, workers: Some(workers), ..NumaConfig::default() }
    }

    #[test]
    fn cpulists_parse_ranges_and_singletons() {
        assert_eq!(parse_cpulist("0-3,8,10-11\n"), Some(vec![0, 1, 2, 3, 8, 10, 11]));
        assert_eq!(parse_cpulist(""), Some(vec![]));
        assert_eq!(parse_cpulist("3-1"), None);
        assert_eq!(parse_cpulist("a"), None);
    }

    #[test]
    fn sysfs_nodes_are_read_in_node_order() {
        let dir = tempfile::tempdir().unwrap();
        for (n, list) in [(1, "4-7"), (0, "0-3"), (2, "")] {
            let d = dir.path().join(format!("node{n}"));
            std::fs::create_dir(&d).unwrap();
            std::fs::write(d.join("cpulist"), list).unwrap();
        }
        std::fs::create_dir(dir.path().join("power")).unwrap();
        let t = Topology::from_sysfs(dir.path()).unwrap();
        assert_eq!(t, machine(&[&[0, 1, 2, 3], &[4, 5, 6, 7]]));
        assert!(!Topology::detect().nodes.is_empty());
    }

    #[test]
    fn group_fills_a_node_first_and_even_splits_equally() {
        // The paper's example scaled down: 2 nodes of 4 CPUs, 6 workers.
        let m = machine(&[&[0, 1, 2, 3], &[4, 5, 6, 7]]);
        let g = Layout::resolve(&config(2, Binding::Group, 6), 8, &m);
        assert!(g.real);
        assert_eq!(g.worker_node, vec![0, 0, 0, 0, 1, 1, 0, 0]);
        assert_eq!(&g.worker_cpu[..6], &[Some(0), Some(1), Some(2), Some(3), Some(4), Some(5)]);
        assert_eq!(g.worker_cpu[6], None);
        let e = Layout::resolve(&config(2, Binding::Even, 6), 8, &m);
        assert_eq!(&e.worker_node[..6], &[0, 0, 0, 1, 1, 1]);
        assert_eq!(e.node_workers(), vec![vec![0, 1, 2], vec![3, 4, 5]]);
    }

    #[test]
    fn virtual_nodes_split_the_cpus_and_oversubscribe_round_robin() {
        let one = machine(&[&[0, 1]]);
        let v = Layout::resolve(&config(2, Binding::Group, 5), 6, &one);
        assert!(!v.real);
        assert_eq!(&v.worker_node[..5], &[0, 1, 0, 1, 0]);
        assert_eq!(&v.worker_cpu[..5], &[Some(0), Some(1), None, None, None]);
        let wide = NumaConfig { node_cpus: Some(4), ..config(2, Binding::Group, 5) };
        let w = Layout::resolve(&wide, 6, &one);
        assert_eq!(&w.worker_node[..5], &[0, 0, 0, 0, 1]);
        let remote = NumaConfig { mode: NumaMode::Remote, ..config(2, Binding::Even, 4) };
        assert_eq!(Layout::resolve(&remote, 4, &one).worker_node, vec![0; 4]);
    }
}
