//! zen-workload
