//! The Zen+ NUMA flags (`--numa-*`, `--remote-penalty-ns`) and their mapping
//! to `zen_engine::numa::NumaConfig`. Bad values are refused with the flag,
//! the value and what is allowed; combinations (`--numa-nodes` larger than
//! the worker count, δ out of range, ...) are checked by
//! `NumaConfig::validate`, whose messages name the flags too.

use clap::Args;
use zen_engine::numa::{Binding, NumaConfig, NumaMode};

use crate::error::{CliError, CliResult};

/// Zen+ NUMA options (docs/design/numa.md). On a machine with fewer nodes
/// than `--numa-nodes`, the nodes are virtual: remote accesses are counted
/// and charged `--remote-penalty-ns`, but the memory is physically local.
#[derive(Debug, Clone, Default, Args)]
pub struct NumaArgs {
    /// NUMA nodes to run on (virtual nodes when the machine has fewer); default: the machine's.
    #[arg(long)]
    pub numa_nodes: Option<usize>,
    /// NUMA design: local (all on node 0), remote (workers on node 0, memory on node 1), naive (interleaved memory), local-write, soft-partition (default).
    #[arg(long)]
    pub numa_mode: Option<String>,
    /// Worker-to-node binding: group (fill a node first; default) or even.
    #[arg(long)]
    pub numa_binding: Option<String>,
    /// CPUs (workers `group` puts on a node before the next) per virtual node; default: the machine's CPUs / nodes.
    #[arg(long)]
    pub numa_node_cpus: Option<usize>,
    /// Busy-wait charged per remote tuple access, in ns (default 0: counted only).
    #[arg(long)]
    pub remote_penalty_ns: Option<u64>,
    /// Soft partitions P (default 2048).
    #[arg(long)]
    pub numa_partitions: Option<usize>,
    /// Alg. 3 load-imbalance threshold δ in (0, 1] (default 0.3).
    #[arg(long)]
    pub numa_delta: Option<f64>,
    /// Alg. 4 remap factor η >= 1 (default 1.2).
    #[arg(long)]
    pub numa_eta: Option<f64>,
    /// Period of the dynamic partition mapping (Alg. 4), e.g. 100ms.
    #[arg(long)]
    pub numa_remap_interval: Option<String>,
    /// Do not pin workers to their node's CPUs.
    #[arg(long)]
    pub no_pin: bool,
}

fn bad(flag: &str, value: &str, allowed: &str) -> CliError {
    CliError::usage(format!("invalid value `{value}` for {flag}: {allowed}"))
}

/// Map the flags to a `NumaConfig` for `threads` driver workers.
pub fn numa_config(args: &NumaArgs, threads: usize) -> CliResult<NumaConfig> {
    let mut c =
        NumaConfig { nodes: args.numa_nodes, workers: Some(threads), ..NumaConfig::default() };
    if let Some(m) = &args.numa_mode {
        let names: Vec<&str> = NumaMode::ALL.iter().map(|m| m.name()).collect();
        c.mode = NumaMode::parse(m)
            .ok_or_else(|| bad("--numa-mode", m, &format!("one of {}", names.join(", "))))?;
    }
    if let Some(b) = &args.numa_binding {
        c.binding = Binding::parse(b).ok_or_else(|| bad("--numa-binding", b, "group or even"))?;
    }
    c.node_cpus = args.numa_node_cpus;
    c.remote_penalty_ns = args.remote_penalty_ns.unwrap_or(0);
    c.partitions = args.numa_partitions.unwrap_or(c.partitions);
    c.delta = args.numa_delta.unwrap_or(c.delta);
    c.eta = args.numa_eta.unwrap_or(c.eta);
    if let Some(i) = &args.numa_remap_interval {
        let d = crate::resolve::parse_duration("--numa-remap-interval", i)?;
        c.remap_interval_ms = u64::try_from(d.as_millis()).unwrap_or(u64::MAX);
        if c.remap_interval_ms == 0 {
            return Err(bad("--numa-remap-interval", i, "at least 1ms"));
        }
    }
    c.pin = !args.no_pin;
    let given_without_nodes = args.numa_mode.is_some()
        || args.numa_binding.is_some()
        || args.numa_node_cpus.is_some()
        || args.remote_penalty_ns.is_some();
    if given_without_nodes && args.numa_nodes.is_none() {
        return Err(CliError::usage(
            "--numa-mode, --numa-binding, --numa-node-cpus and --remote-penalty-ns need --numa-nodes N".to_string(),
        ));
    }
    Ok(c)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn numa_flags_map_to_the_config_and_bad_names_are_refused() {
        let args = NumaArgs {
            numa_nodes: Some(2),
            numa_mode: Some("naive".into()),
            numa_binding: Some("even".into()),
            remote_penalty_ns: Some(300),
            numa_remap_interval: Some("50ms".into()),
            ..NumaArgs::default()
        };
        let c = numa_config(&args, 4).unwrap();
        assert_eq!((c.nodes, c.mode, c.binding), (Some(2), NumaMode::Naive, Binding::Even));
        assert_eq!((c.remote_penalty_ns, c.remap_interval_ms, c.workers), (300, 50, Some(4)));
        let err = numa_config(&NumaArgs { numa_mode: Some("far".into()), ..args.clone() }, 4);
        assert!(err.unwrap_err().to_string().contains("--numa-mode"));
        let err = numa_config(&NumaArgs { numa_binding: Some("x".into()), ..args.clone() }, 4);
        assert!(err.unwrap_err().to_string().contains("group or even"));
        let lone = NumaArgs { remote_penalty_ns: Some(5), ..NumaArgs::default() };
        assert!(numa_config(&lone, 4).unwrap_err().to_string().contains("need --numa-nodes"));
    }
}
