//! Building a workload from flags (for `bench` and `load`) or from the spec
//! stored in a pool (for `run` and `check`), and dispatching to it.
//!
//! The driver is generic over the workload, so the CLI holds one of three
//! concrete types in [`AnyWorkload`] and [`with_workload!`](crate::with_workload) expands a block
//! once per type.

use zen_workload::{
    CoreWorkload, LongKind, LongTxn, PaperMix, SmallBank, SmallBankConfig, SmallBankSpec, Tpcc,
    TpccConfig, TpccSpec, Workload, WorkloadSpec, Ycsb, YcsbConfig, YcsbSpec,
};

use crate::cli::{WorkloadArgs, WorkloadKind};
use crate::error::{CliError, CliResult};

/// One of the three workloads.
pub enum AnyWorkload {
    Ycsb(Ycsb),
    Tpcc(Tpcc),
    SmallBank(SmallBank),
}

/// Run `$body` with `$w` bound to the concrete workload.
#[macro_export]
macro_rules! with_workload {
    ($any:expr, |$w:ident| $body:expr) => {
        match $any {
            $crate::workloads::AnyWorkload::Ycsb($w) => $body,
            $crate::workloads::AnyWorkload::Tpcc($w) => $body,
            $crate::workloads::AnyWorkload::SmallBank($w) => $body,
        }
    };
}

impl AnyWorkload {
    pub fn name(&self) -> &'static str {
        with_workload!(self, |w| w.name())
    }

    pub fn parameters(&self) -> serde_json::Value {
        with_workload!(self, |w| w.parameters())
    }

    /// Tuples one transaction of the workload may touch beyond the engine's
    /// default access-set limit (YCSB's long transactions), if any.
    pub fn access_set_needed(&self) -> Option<usize> {
        match self {
            // A long update registers each tuple as one read and one write.
            AnyWorkload::Ycsb(y) => y.config().long.map(|l| l.tuples as usize * 2 + 64),
            _ => None,
        }
    }

    /// Rough bytes of the initial population, for the default pool size.
    pub fn estimated_data_bytes(&self) -> u64 {
        match self {
            AnyWorkload::Ycsb(y) => y.config().spec.records * zen_workload::ycsb::ROW_BYTES as u64,
            AnyWorkload::Tpcc(t) => {
                let s = t.spec();
                let per_district = s.customers_per_district * 760 + s.orders_per_district * 700;
                s.items * 90 + s.warehouses * (s.items * 310 + 10 * per_district)
            }
            AnyWorkload::SmallBank(b) => b.spec().accounts * 80,
        }
    }
}

/// Flags that belong to each workload, with their names as typed.
fn foreign_flags(kind: WorkloadKind, p: &WorkloadArgs) -> Vec<(&'static str, &'static str)> {
    let ycsb = [
        ("--records", p.records.is_some()),
        ("--mix", p.mix.is_some()),
        ("--theta", p.theta.is_some()),
        ("-w/--core", p.core.is_some()),
        ("--scramble", p.scramble),
        ("--requests", p.requests.is_some()),
        ("--long-txn", p.long_txn.is_some()),
        ("--long-txn-tuples", p.long_txn_tuples.is_some()),
        ("--long-txn-every", p.long_txn_every.is_some()),
    ];
    let tpcc = [
        ("--warehouses", p.warehouses.is_some()),
        ("--items", p.items.is_some()),
        ("--customers", p.customers.is_some()),
        ("--orders", p.orders.is_some()),
    ];
    let smallbank = [
        ("--accounts", p.accounts.is_some()),
        ("--hotspot-accounts", p.hotspot_accounts.is_some()),
        ("--hotspot-probability", p.hotspot_probability.is_some()),
    ];
    let mut foreign = Vec::new();
    let groups: [(&'static str, &[(&'static str, bool)]); 3] =
        [("ycsb", &ycsb), ("tpcc", &tpcc), ("smallbank", &smallbank)];
    for (owner, flags) in groups {
        if owner != kind.name() {
            foreign.extend(flags.iter().filter(|(_, set)| *set).map(|(flag, _)| (*flag, owner)));
        }
    }
    foreign
}

fn refuse_foreign_flags(kind: WorkloadKind, p: &WorkloadArgs) -> CliResult {
    match foreign_flags(kind, p).first() {
        None => Ok(()),
        Some((flag, owner)) => Err(CliError::usage(format!(
            "{flag} applies to {owner}, not {}; see `zen bench {} --help`",
            kind.name(),
            kind.name()
        ))),
    }
}

/// A workload for a new population (`bench`, `load`).
pub fn from_flags(
    kind: WorkloadKind,
    p: &WorkloadArgs,
    threads: usize,
    seed: u64,
) -> CliResult<AnyWorkload> {
    refuse_foreign_flags(kind, p)?;
    match kind {
        WorkloadKind::Ycsb => ycsb(YcsbSpec { records: p.records.unwrap_or(100_000) }, p),
        WorkloadKind::Tpcc => {
            let full = TpccSpec::full(p.warehouses.unwrap_or(threads.max(1) as u64));
            let spec = TpccSpec {
                items: p.items.unwrap_or(full.items),
                customers_per_district: p.customers.unwrap_or(full.customers_per_district),
                orders_per_district: p.orders.unwrap_or(full.orders_per_district),
                ..full
            };
            Ok(AnyWorkload::Tpcc(Tpcc::new(TpccConfig { spec, load_seed: seed })?))
        }
        WorkloadKind::Smallbank => smallbank(SmallBankSpec::new(p.accounts.unwrap_or(100_000)), p),
    }
}

fn ycsb(spec: YcsbSpec, p: &WorkloadArgs) -> CliResult<AnyWorkload> {
    let mut config = match (&p.core, &p.mix) {
        (Some(_), Some(_)) => {
            return Err(CliError::usage(
                "--mix selects YCSB paper mode and -w a core workload (a..f); give one of them",
            ));
        }
        (Some(core), None) => YcsbConfig::core(spec.records, CoreWorkload::parse(core)?),
        (None, mix) => {
            let mix = PaperMix::parse(mix.as_deref().unwrap_or("RH"))?;
            YcsbConfig::paper(spec.records, mix, 0.6)
        }
    };
    config.theta = p.theta.unwrap_or(config.theta);
    config.scramble = p.scramble;
    config.requests = p.requests.unwrap_or(config.requests);
    config.long = match &p.long_txn {
        Some(kind) => Some(LongTxn {
            kind: LongKind::parse(kind)?,
            tuples: p.long_txn_tuples.unwrap_or((spec.records / 10).max(1)),
            every: p.long_txn_every.unwrap_or(1000),
        }),
        None if p.long_txn_tuples.is_some() || p.long_txn_every.is_some() => {
            return Err(CliError::usage(
                "--long-txn-tuples and --long-txn-every need --long-txn scan|update",
            ));
        }
        None => None,
    };
    Ok(AnyWorkload::Ycsb(Ycsb::new(config)?))
}

fn smallbank(spec: SmallBankSpec, p: &WorkloadArgs) -> CliResult<AnyWorkload> {
    let mut config = SmallBankConfig::new(spec.accounts);
    config.spec = spec;
    config.hotspot_accounts = p.hotspot_accounts.unwrap_or(config.hotspot_accounts);
    config.hotspot_probability = p.hotspot_probability.unwrap_or(config.hotspot_probability);
    Ok(AnyWorkload::SmallBank(SmallBank::new(config)?))
}

/// A load-time flag given to `run` must agree with the pool.
fn same_as_loaded(flag: &str, given: Option<u64>, loaded: u64) -> CliResult {
    match given {
        Some(v) if v != loaded => Err(CliError::usage(format!(
            "the pool was loaded with {flag} {loaded}; omit {flag} or give the same value (it is fixed at load)"
        ))),
        _ => Ok(()),
    }
}

/// The workload a pool holds, with run-time flags applied (`run`, `check`).
pub fn from_spec(
    spec: WorkloadSpec,
    expected: Option<WorkloadKind>,
    p: &WorkloadArgs,
) -> CliResult<AnyWorkload> {
    let kind = match &spec {
        WorkloadSpec::Ycsb(_) => WorkloadKind::Ycsb,
        WorkloadSpec::Tpcc(_) => WorkloadKind::Tpcc,
        WorkloadSpec::SmallBank(_) => WorkloadKind::Smallbank,
    };
    if let Some(expected) = expected.filter(|e| *e != kind) {
        return Err(CliError::usage(format!(
            "the pool holds a {} population, not {}; run `zen run --pool ...` without a workload to use it",
            kind.name(),
            expected.name()
        )));
    }
    refuse_foreign_flags(kind, p)?;
    match spec {
        WorkloadSpec::Ycsb(s) => {
            same_as_loaded("--records", p.records, s.records)?;
            ycsb(s, p)
        }
        WorkloadSpec::Tpcc(s) => {
            same_as_loaded("--warehouses", p.warehouses, s.warehouses)?;
            same_as_loaded("--items", p.items, s.items)?;
            same_as_loaded("--customers", p.customers, s.customers_per_district)?;
            same_as_loaded("--orders", p.orders, s.orders_per_district)?;
            Ok(AnyWorkload::Tpcc(Tpcc::new(TpccConfig { spec: s, load_seed: 0 })?))
        }
        WorkloadSpec::SmallBank(s) => {
            same_as_loaded("--accounts", p.accounts, s.accounts)?;
            smallbank(s, p)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn flags_of_another_workload_are_refused_by_name() {
        let p = WorkloadArgs { warehouses: Some(2), ..WorkloadArgs::default() };
        let err = from_flags(WorkloadKind::Ycsb, &p, 2, 0).err().unwrap().to_string();
        assert!(err.contains("--warehouses applies to tpcc, not ycsb"), "{err}");
        assert!(from_flags(WorkloadKind::Tpcc, &p, 2, 0).is_ok());
    }

    #[test]
    fn paper_mode_and_core_workloads_exclude_each_other() {
        let p = WorkloadArgs {
            mix: Some("RO".into()),
            core: Some("a".into()),
            ..WorkloadArgs::default()
        };
        assert!(matches!(from_flags(WorkloadKind::Ycsb, &p, 1, 0), Err(CliError::Usage(_))));
    }

    #[test]
    fn run_time_flags_must_agree_with_the_loaded_population() {
        let spec = WorkloadSpec::Ycsb(YcsbSpec { records: 500 });
        let p = WorkloadArgs { records: Some(600), ..WorkloadArgs::default() };
        let err = from_spec(spec.clone(), None, &p).err().unwrap().to_string();
        assert!(err.contains("loaded with --records 500"), "{err}");
        let p = WorkloadArgs { records: Some(500), theta: Some(0.9), ..WorkloadArgs::default() };
        assert!(from_spec(spec.clone(), None, &p).is_ok());
        assert!(from_spec(spec, Some(WorkloadKind::Tpcc), &WorkloadArgs::default()).is_err());
    }
}
