//! `zen list engines|cc|workloads`: what this build offers, one per line.

use zen_engine::{CcKind, EngineKind};

use crate::cli::{ListArgs, ListWhat};
use crate::error::CliResult;

const WORKLOADS: [(&str, &str); 3] = [
    (
        "ycsb",
        "YCSB: paper mode (16 requests/txn, --mix RO|RH|BA|WH, --theta) or core workloads -w a..f; --scramble",
    ),
    (
        "tpcc",
        "TPC-C: nine tables, five transactions 45/43/4/4/4, --warehouses, scaled-down --items/--customers/--orders",
    ),
    (
        "smallbank",
        "SmallBank: accounts, savings, checking; six transactions; --hotspot-accounts/--hotspot-probability",
    ),
];

pub fn list(args: &ListArgs) -> CliResult {
    let rows: Vec<(&str, &str)> = match args.what {
        ListWhat::Engines => EngineKind::ALL.iter().map(|k| (k.name(), k.describe())).collect(),
        ListWhat::Cc => CcKind::EVERY.iter().map(|k| (k.name(), k.describe())).collect(),
        ListWhat::Workloads => WORKLOADS.to_vec(),
    };
    for (name, description) in rows {
        println!("{name:<10} {description}");
    }
    Ok(())
}
