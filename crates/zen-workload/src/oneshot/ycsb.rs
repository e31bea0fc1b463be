//! One-shot YCSB (paper mode): reads and read-modify-write updates of one
//! field; the updated keys, and so the write set, come from the request.

use zen_engine::{Engine, OneShot, OneShotTx, ProcId, ProcedureSet, TableId};

use super::OneShotWorkload;
use crate::error::{Error, Result};
use crate::ycsb::{FIELD_BYTES, Op, ROW_BYTES, Ycsb, YcsbRequest, fill_field};

/// Bytes of one logged YCSB operation: kind u8 | field u8 | 6 pad | key | seed.
const OP_BYTES: usize = 24;

/// Register the one-shot YCSB procedure (`ycsb`) in `set`.
pub fn register_ycsb(set: &mut ProcedureSet) -> zen_engine::Result<ProcId> {
    set.register("ycsb", |tx, input| ycsb_procedure(tx, input))
}

/// The procedure: input = table u32 | 0 u32 | operations; reads every key,
/// rewrites one field of each updated key; returns the number of rows read.
fn ycsb_procedure(tx: &mut dyn OneShotTx, input: &[u8]) -> zen_engine::Result<Vec<u8>> {
    let bad = |m: &str| zen_engine::Error::InvalidArgument(format!("ycsb one-shot input: {m}"));
    let head = input.get(..8).ok_or_else(|| bad("no table"))?;
    let table = TableId(u32::from_le_bytes(head[..4].try_into().expect("4 bytes")));
    let ops = &input[8..];
    if !ops.len().is_multiple_of(OP_BYTES) {
        return Err(bad("truncated operation"));
    }
    let mut row = vec![0u8; ROW_BYTES];
    let mut read = 0u64;
    for op in ops.chunks_exact(OP_BYTES) {
        let key = u64::from_le_bytes(op[8..16].try_into().expect("8 bytes"));
        if !tx.get(table, key, &mut row)? {
            return Err(bad(&format!("key {key} is not loaded")));
        }
        read += 1;
        if op[0] == 1 {
            let field = op[1];
            let seed = u64::from_le_bytes(op[16..24].try_into().expect("8 bytes"));
            let at = usize::from(field) * FIELD_BYTES;
            let out = row.get_mut(at..at + FIELD_BYTES).ok_or_else(|| bad("field"))?;
            fill_field(out, key, field, seed);
            tx.put(table, key, &row)?;
        }
    }
    Ok(read.to_le_bytes().to_vec())
}

/// The one-shot form of a YCSB request: its updated keys are the write set.
pub fn ycsb_oneshot(table: TableId, proc: ProcId, request: &YcsbRequest) -> Result<OneShot> {
    let mut input = Vec::with_capacity(8 + request.ops().len() * OP_BYTES);
    input.extend_from_slice(&table.0.to_le_bytes());
    input.extend_from_slice(&0u32.to_le_bytes());
    let mut writes = Vec::new();
    for op in request.ops() {
        let (kind, key, field, seed) = match *op {
            Op::Read { key } => (0u8, key, 0u8, 0u64),
            Op::Update { key, field, seed } | Op::ReadModifyWrite { key, field, seed } => {
                writes.push((table, key));
                (1, key, field, seed)
            }
            Op::Insert { .. } | Op::Scan { .. } => {
                return Err(Error::InvalidParameter {
                    parameter: "ycsb mode",
                    value: "core workload with inserts or scans".into(),
                    allowed: "one-shot YCSB runs reads and updates (paper mode, --mix)".into(),
                });
            }
        };
        input.push(kind);
        input.push(field);
        input.extend_from_slice(&[0; 6]);
        input.extend_from_slice(&key.to_le_bytes());
        input.extend_from_slice(&seed.to_le_bytes());
    }
    Ok(OneShot { proc, input, writes })
}

/// The procedure id and table one-shot YCSB needs.
pub struct YcsbPlan {
    table: TableId,
    proc: ProcId,
}

impl OneShotWorkload for Ycsb {
    type Plan = YcsbPlan;

    fn plan(&self, engine: &dyn Engine, procedures: &ProcedureSet) -> Result<YcsbPlan> {
        Ok(YcsbPlan {
            table: engine.table_id(crate::ycsb::TABLE)?,
            proc: super::procedure(procedures, "ycsb")?,
        })
    }

    fn batch(
        &self,
        _engine: &dyn Engine,
        plan: &YcsbPlan,
        requests: &[YcsbRequest],
    ) -> Result<Vec<OneShot>> {
        requests.iter().map(|r| ycsb_oneshot(plan.table, plan.proc, r)).collect()
    }
}
