//! One-shot TPC-C: the five transactions as stored procedures
//! (`tpcc.<type>`) with declared write sets, for deterministic engines.
//!
//! Some keys a TPC-C transaction writes are not in its request: they are
//! found by **reconnaissance** as in Calvin (OLLP) and Caracal. Before an
//! epoch is submitted, [`OneShotWorkload::batch`] runs one read-only
//! transaction on the committed state (the last durable epoch; on
//! nvcaracal through the `Engine` adapter, which reads the committed rows,
//! the ordered primary index and the DRAM secondary indexes) and walks the
//! batch in its serial order, predicting what the earlier transactions of
//! the batch will change:
//!
//! | transaction  | found by reconnaissance                                   | checked by the procedure at its place in the serial order |
//! | ------------ | --------------------------------------------------------- | --------------------------------------------------------- |
//! | New-Order    | its order id: the district's D_NEXT_O_ID, plus the batch's earlier New-Orders of that district that will not roll back (an unused item id, read in ITEM, rolls back; ITEM is never written, so what was read of it is cached across batches in the plan) | D_NEXT_O_ID = the predicted id |
//! | Payment      | a customer by last name (secondary index, midpoint by first name); its C_PAYMENT_CNT after the payment (the HISTORY key), plus the batch's earlier Payments of that customer | the customer's last name; C_PAYMENT_CNT + 1 = the predicted count |
//! | Order-Status | a customer by last name; the customer's latest order (secondary index on ORDERS, or the batch's latest New-Order of that customer) | the order exists and is the customer's |
//! | Delivery     | per district the oldest undelivered order (an ordered scan of NEW-ORDER, past those the batch's earlier Deliveries take, then the batch's New-Orders), its customer and line count (ORDERS) | NEW-ORDER(o) exists and NEW-ORDER(o − 1) does not (the queue is contiguous, condition 3.3.2.3); the order's customer and line count; a district predicted empty has no NEW-ORDER row at D_NEXT_O_ID − 1 |
//! | Stock-Level  | nothing: order ids are dense, so the last 20 orders' lines are point reads (ORDERS for the line count, then ORDER-LINE by key) inside the procedure | — |
//!
//! A procedure whose check fails returns
//! [`zen_engine::Error::StaleReconnaissance`] before it writes: its versions
//! are ignored, it is deterministic (replay reaches the same), and the epoch
//! driver ([`super::run_epochs`]) re-submits it, with a new reconnaissance,
//! in a later epoch (counted as `resubmitted`, not as a cc abort). With the
//! driver's synchronous epochs the prediction is exact, so re-submissions
//! come from reconnaissance done against an older state (a test does that).
//!
//! The procedures do what the interactive form (`tpcc/txn.rs`) does, with
//! the same rows, keys and money, so TPC-C's twelve consistency conditions
//! (`Tpcc::check`) hold after an epoch run. Differences: Delivery counts
//! itself in ledger row (position in the epoch mod 256) instead of the
//! worker's (a one-shot transaction has no worker; the check sums every
//! row); New-Order's order rows are written with `put`, since the id check
//! stands in for the interactive form's duplicate-key check.

use std::collections::{HashMap, VecDeque};
use std::sync::{Mutex, PoisonError};

use zen_engine::schema::row;
use zen_engine::{
    Engine, Error as EngineError, OneShot, OneShotTx, ProcId, ProcedureSet, TableId, Transaction,
    TxnOptions, user_abort,
};

use super::OneShotWorkload;
use crate::error::{Error, Result};
use crate::meta::{self, LEDGER_AMOUNT_AT, LEDGER_EVENTS_AT, LEDGER_ROWS};
use crate::tpcc::random;
use crate::tpcc::schema::*;
use crate::tpcc::txn::{
    CustomerRef, MAX_LINES, NewOrder, Payment, add_i32, add_i64, get_i32 as i32_at,
    prepend_bad_credit_data, read,
};
use crate::tpcc::{TXN_TYPES, Tables, Tpcc, TpccRequest};

type TxResult<T = ()> = zen_engine::Result<T>;

/// Orders Stock-Level looks back over (clause 2.8.2.2).
const STOCK_LEVEL_ORDERS: u64 = 20;
/// "By customer id" in the name word of an input.
const NO_NAME: u64 = u64::MAX;

// ------------------------------------------------------------------ inputs

/// Input bytes: the ten table ids (u32 each), then u64 words.
fn encode(t: &Tables, words: &[u64]) -> Vec<u8> {
    let mut out = Vec::with_capacity(40 + 8 * words.len());
    for id in [
        t.warehouse,
        t.district,
        t.customer,
        t.history,
        t.new_order,
        t.orders,
        t.order_line,
        t.item,
        t.stock,
        t.ledger,
    ] {
        out.extend_from_slice(&id.0.to_le_bytes());
    }
    for w in words {
        out.extend_from_slice(&w.to_le_bytes());
    }
    out
}

/// A decoder of one procedure's input; every shortfall is a typed error.
struct Input<'a> {
    bytes: &'a [u8],
    at: usize,
    proc: &'static str,
}

fn bad_input(proc: &str, detail: impl std::fmt::Display) -> EngineError {
    EngineError::InvalidArgument(format!("tpcc.{proc} one-shot input: {detail}"))
}

impl<'a> Input<'a> {
    fn new(bytes: &'a [u8], proc: &'static str) -> TxResult<(Tables, Input<'a>)> {
        if bytes.len() < 40 || !(bytes.len() - 40).is_multiple_of(8) {
            return Err(bad_input(proc, format!("{} bytes", bytes.len())));
        }
        let id = |i: usize| {
            TableId(u32::from_le_bytes(bytes[4 * i..4 * i + 4].try_into().expect("4 bytes")))
        };
        let t = Tables {
            warehouse: id(0),
            district: id(1),
            customer: id(2),
            history: id(3),
            new_order: id(4),
            orders: id(5),
            order_line: id(6),
            item: id(7),
            stock: id(8),
            ledger: id(9),
        };
        Ok((t, Input { bytes, at: 40, proc }))
    }

    fn words<const N: usize>(&mut self) -> TxResult<[u64; N]> {
        let mut out = [0u64; N];
        for w in &mut out {
            let b = self
                .bytes
                .get(self.at..self.at + 8)
                .ok_or_else(|| bad_input(self.proc, "ends early"))?;
            *w = u64::from_le_bytes(b.try_into().expect("8 bytes"));
            self.at += 8;
        }
        Ok(out)
    }

    fn done(&self) -> TxResult {
        if self.at == self.bytes.len() {
            Ok(())
        } else {
            Err(bad_input(self.proc, format!("{} bytes left over", self.bytes.len() - self.at)))
        }
    }
}

// ------------------------------------------------------------- procedures

fn stale(detail: String) -> EngineError {
    EngineError::StaleReconnaissance { detail }
}

fn must_get(
    tx: &mut dyn OneShotTx,
    table: TableId,
    name: &str,
    key: u64,
    out: &mut [u8],
) -> TxResult {
    if tx.get(table, key, out)? {
        Ok(())
    } else {
        Err(EngineError::KeyNotFound { table: name.to_string(), key })
    }
}

/// The customer of `key` read, its last name checked when the
/// reconnaissance found it by name (`name` ≠ [`NO_NAME`]).
fn customer_row(
    tx: &mut dyn OneShotTx,
    t: &Tables,
    key: u64,
    name: u64,
    out: &mut [u8; customer::BYTES],
) -> TxResult {
    must_get(tx, t.customer, customer::NAME, key, out)?;
    if name != NO_NAME && out[customer::LAST..customer::LAST + 16] != random::last_name(name) {
        return Err(stale(format!("customer {key:#x} does not have last name #{name}")));
    }
    Ok(())
}

/// Input: w, d, c, o (predicted), count, all_local, entry_d, then per line
/// item, supply warehouse, quantity. Output: the order's total (cents).
fn new_order_proc(tx: &mut dyn OneShotTx, input: &[u8]) -> TxResult<Vec<u8>> {
    let (t, mut i) = Input::new(input, "new_order")?;
    let [w, d, c, o, count, all_local, entry_d] = i.words()?;
    if count == 0 || count > MAX_LINES as u64 || !(1..=DISTRICTS).contains(&d) {
        return Err(bad_input("new_order", format!("district {d}, {count} lines")));
    }
    let mut wh = [0u8; warehouse::BYTES];
    must_get(tx, t.warehouse, warehouse::NAME, w, &mut wh)?;
    let dk = district_key(w, d);
    let mut dist = [0u8; district::BYTES];
    must_get(tx, t.district, district::NAME, dk, &mut dist)?;
    let next = row::get_i64(&dist, district::NEXT_O_ID) as u64;
    if next != o {
        return Err(stale(format!("district ({w}, {d}): D_NEXT_O_ID {next}, predicted {o}")));
    }
    row::put_i64(&mut dist, district::NEXT_O_ID, (o + 1) as i64);
    tx.put(t.district, dk, &dist)?;
    let mut cust = [0u8; customer::BYTES];
    must_get(tx, t.customer, customer::NAME, customer_key(w, d, c), &mut cust)?;

    let ok = order_key(w, d, o);
    let mut order = [0u8; orders::BYTES];
    for (at, v) in [(orders::ID, o), (orders::D_ID, d), (orders::W_ID, w), (orders::C_ID, c)] {
        row::put_i32(&mut order, at, v as i32);
    }
    row::put_i64(&mut order, orders::ENTRY_D, entry_d as i64);
    row::put_i32(&mut order, orders::CARRIER_ID, 0);
    row::put_i32(&mut order, orders::OL_CNT, count as i32);
    row::put_i32(&mut order, orders::ALL_LOCAL, all_local as i32);
    tx.put(t.orders, ok, &order)?;
    let mut no = [0u8; new_order::BYTES];
    for (at, v) in [(new_order::O_ID, o), (new_order::D_ID, d), (new_order::W_ID, w)] {
        row::put_i32(&mut no, at, v as i32);
    }
    tx.put(t.new_order, ok, &no)?;

    let (mut item, mut stock, mut line) =
        ([0u8; item::BYTES], [0u8; stock::BYTES], [0u8; order_line::BYTES]);
    let mut total = 0i64;
    for number in 1..=count {
        let [item_id, supply_w, quantity] = i.words()?;
        // Clause 2.4.2.3: an unused item id rolls the order back.
        if !tx.get(t.item, item_id, &mut item)? {
            return Err(user_abort());
        }
        let price = row::get_i64(&item, item::PRICE);
        let sk = stock_key(supply_w, item_id);
        must_get(tx, t.stock, stock::NAME, sk, &mut stock)?;
        let have = i32_at(&stock, stock::QUANTITY);
        let left = if have >= quantity + 10 { have - quantity } else { have + 91 - quantity };
        row::put_i32(&mut stock, stock::QUANTITY, left as i32);
        add_i64(&mut stock, stock::YTD, quantity as i64);
        add_i32(&mut stock, stock::ORDER_CNT, 1);
        if supply_w != w {
            add_i32(&mut stock, stock::REMOTE_CNT, 1);
        }
        tx.put(t.stock, sk, &stock)?;
        let amount = quantity as i64 * price;
        for (at, v) in [
            (order_line::O_ID, o),
            (order_line::D_ID, d),
            (order_line::W_ID, w),
            (order_line::NUMBER, number),
            (order_line::I_ID, item_id),
            (order_line::SUPPLY_W_ID, supply_w),
            (order_line::QUANTITY, quantity),
        ] {
            row::put_i32(&mut line, at, v as i32);
        }
        row::put_i64(&mut line, order_line::DELIVERY_D, 0);
        row::put_i64(&mut line, order_line::AMOUNT, amount);
        let dist_info = stock::DIST_01 + (d as usize - 1) * 24;
        line[order_line::DIST_INFO..order_line::DIST_INFO + 24]
            .copy_from_slice(&stock[dist_info..dist_info + 24]);
        tx.put(t.order_line, order_line_key(w, d, o, number), &line)?;
        total += amount;
    }
    i.done()?;
    let discount = row::get_i64(&cust, customer::DISCOUNT);
    let tax = row::get_i64(&wh, warehouse::TAX) + row::get_i64(&dist, district::TAX);
    let total = total * (10_000 - discount) / 10_000 * (10_000 + tax) / 10_000;
    Ok(total.to_le_bytes().to_vec())
}

/// Input: w, d, c_w, c_d, customer key, last name (or NO_NAME), amount,
/// date, C_PAYMENT_CNT after the payment (predicted). Output: C_BALANCE.
fn payment_proc(tx: &mut dyn OneShotTx, input: &[u8]) -> TxResult<Vec<u8>> {
    let (t, mut i) = Input::new(input, "payment")?;
    let [w, d, c_w, c_d, ck, name, amount, date, payments] = i.words()?;
    i.done()?;
    let amount = amount as i64;
    let mut wh = [0u8; warehouse::BYTES];
    must_get(tx, t.warehouse, warehouse::NAME, w, &mut wh)?;
    add_i64(&mut wh, warehouse::YTD, amount);
    tx.put(t.warehouse, w, &wh)?;
    let dk = district_key(w, d);
    let mut dist = [0u8; district::BYTES];
    must_get(tx, t.district, district::NAME, dk, &mut dist)?;
    add_i64(&mut dist, district::YTD, amount);
    tx.put(t.district, dk, &dist)?;

    let mut c = [0u8; customer::BYTES];
    customer_row(tx, &t, ck, name, &mut c)?;
    let count = row::get_i64(&c, customer::PAYMENT_CNT) as u64 + 1;
    if count != payments {
        return Err(stale(format!(
            "customer {ck:#x}: C_PAYMENT_CNT after the payment {count}, predicted {payments}"
        )));
    }
    add_i64(&mut c, customer::BALANCE, -amount);
    add_i64(&mut c, customer::YTD_PAYMENT, amount);
    row::put_i64(&mut c, customer::PAYMENT_CNT, count as i64);
    let c_id = i32_at(&c, customer::ID);
    if &c[customer::CREDIT..customer::CREDIT + 2] == b"BC" {
        prepend_bad_credit_data(&mut c, [c_id, c_d, c_w, d, w], amount);
    }
    tx.put(t.customer, ck, &c)?;

    let mut h = [0u8; history::BYTES];
    for (at, v) in [
        (history::C_ID, c_id),
        (history::C_D_ID, c_d),
        (history::C_W_ID, c_w),
        (history::D_ID, d),
        (history::W_ID, w),
    ] {
        row::put_i32(&mut h, at, v as i32);
    }
    row::put_i64(&mut h, history::DATE, date as i64);
    row::put_i64(&mut h, history::AMOUNT, amount);
    let data = &mut h[history::DATA..history::DATA + 24];
    data[..10].copy_from_slice(&wh[warehouse::W_NAME..warehouse::W_NAME + 10]);
    data[10..14].copy_from_slice(b"    ");
    data[14..24].copy_from_slice(&dist[district::D_NAME..district::D_NAME + 10]);
    tx.put(t.history, history_key(c_w, c_d, c_id, count), &h)?;
    Ok(row::get_i64(&c, customer::BALANCE).to_le_bytes().to_vec())
}

/// Input: w, d, customer key, last name (or NO_NAME), the customer's latest
/// order id (0: none). Output: the order's line count and amount.
fn order_status_proc(tx: &mut dyn OneShotTx, input: &[u8]) -> TxResult<Vec<u8>> {
    let (t, mut i) = Input::new(input, "order_status")?;
    let [w, d, ck, name, o] = i.words()?;
    i.done()?;
    let mut c = [0u8; customer::BYTES];
    customer_row(tx, &t, ck, name, &mut c)?;
    let (mut lines, mut amount) = (0u64, 0i64);
    if o != 0 {
        let ok = order_key(w, d, o);
        let mut order = [0u8; orders::BYTES];
        let c_id = i32_at(&c, customer::ID);
        if !tx.get(t.orders, ok, &mut order)? || i32_at(&order, orders::C_ID) != c_id {
            return Err(stale(format!("order {ok:#x} is not customer {ck:#x}'s")));
        }
        let mut line = [0u8; order_line::BYTES];
        for number in 1..=i32_at(&order, orders::OL_CNT) {
            must_get(tx, t.order_line, order_line::NAME, ok << 4 | number, &mut line)?;
            lines += 1;
            amount += row::get_i64(&line, order_line::AMOUNT);
        }
    }
    let mut out = lines.to_le_bytes().to_vec();
    out.extend_from_slice(&amount.to_le_bytes());
    Ok(out)
}

/// Input: w, carrier, date, ledger row, then per district 1..=10 the
/// predicted oldest undelivered order (0: none), its customer id and line
/// count. Output: districts delivered.
fn delivery_proc(tx: &mut dyn OneShotTx, input: &[u8]) -> TxResult<Vec<u8>> {
    let (t, mut i) = Input::new(input, "delivery")?;
    let [w, carrier, date, ledger_row] = i.words()?;
    let (mut no, mut order, mut line, mut c) = (
        [0u8; new_order::BYTES],
        [0u8; orders::BYTES],
        [0u8; order_line::BYTES],
        [0u8; customer::BYTES],
    );
    let mut delivered = 0u64;
    for d in 1..=DISTRICTS {
        let [o, c_id, ol_cnt] = i.words()?;
        if o == 0 {
            let mut dist = [0u8; district::BYTES];
            must_get(tx, t.district, district::NAME, district_key(w, d), &mut dist)?;
            let next = row::get_i64(&dist, district::NEXT_O_ID) as u64;
            if next > 1 && tx.get(t.new_order, order_key(w, d, next - 1), &mut no)? {
                return Err(stale(format!("district ({w}, {d}) has undelivered orders")));
            }
            continue;
        }
        let ok = order_key(w, d, o);
        let oldest = tx.get(t.new_order, ok, &mut no)?
            && (o == 1 || !tx.get(t.new_order, order_key(w, d, o - 1), &mut no)?);
        if !oldest {
            return Err(stale(format!(
                "order {ok:#x} is not district ({w}, {d})'s oldest new order"
            )));
        }
        tx.delete(t.new_order, ok)?;
        must_get(tx, t.orders, orders::NAME, ok, &mut order)?;
        if i32_at(&order, orders::C_ID) != c_id || i32_at(&order, orders::OL_CNT) != ol_cnt {
            return Err(stale(format!("order {ok:#x}: another customer or line count")));
        }
        row::put_i32(&mut order, orders::CARRIER_ID, carrier as i32);
        tx.put(t.orders, ok, &order)?;
        let mut total = 0;
        for number in 1..=ol_cnt {
            let lk = ok << 4 | number;
            must_get(tx, t.order_line, order_line::NAME, lk, &mut line)?;
            total += row::get_i64(&line, order_line::AMOUNT);
            row::put_i64(&mut line, order_line::DELIVERY_D, date as i64);
            tx.put(t.order_line, lk, &line)?;
        }
        let ck = customer_key(w, d, c_id);
        must_get(tx, t.customer, customer::NAME, ck, &mut c)?;
        add_i64(&mut c, customer::BALANCE, total);
        add_i64(&mut c, customer::DELIVERY_CNT, 1);
        tx.put(t.customer, ck, &c)?;
        delivered += 1;
    }
    i.done()?;
    if delivered > 0 {
        let mut entry = [0u8; 16];
        must_get(tx, t.ledger, meta::LEDGER_TABLE, ledger_row, &mut entry)?;
        add_i64(&mut entry, LEDGER_EVENTS_AT, 1);
        add_i64(&mut entry, LEDGER_AMOUNT_AT, 0);
        tx.put(t.ledger, ledger_row, &entry)?;
    }
    Ok(delivered.to_le_bytes().to_vec())
}

/// Input: w, d, threshold. Output: distinct items of the district's last
/// 20 orders with stock below the threshold.
fn stock_level_proc(tx: &mut dyn OneShotTx, input: &[u8]) -> TxResult<Vec<u8>> {
    let (t, mut i) = Input::new(input, "stock_level")?;
    let [w, d, threshold] = i.words()?;
    i.done()?;
    let mut dist = [0u8; district::BYTES];
    must_get(tx, t.district, district::NAME, district_key(w, d), &mut dist)?;
    let next = row::get_i64(&dist, district::NEXT_O_ID) as u64;
    let first = next.saturating_sub(STOCK_LEVEL_ORDERS).max(1);
    let (mut order, mut line, mut stock) =
        ([0u8; orders::BYTES], [0u8; order_line::BYTES], [0u8; stock::BYTES]);
    let mut items = Vec::with_capacity(STOCK_LEVEL_ORDERS as usize * MAX_LINES);
    for o in first..next {
        let ok = order_key(w, d, o);
        if !tx.get(t.orders, ok, &mut order)? {
            continue;
        }
        for number in 1..=i32_at(&order, orders::OL_CNT) {
            if tx.get(t.order_line, ok << 4 | number, &mut line)? {
                items.push(i32_at(&line, order_line::I_ID));
            }
        }
    }
    items.sort_unstable();
    items.dedup();
    let mut low = 0u64;
    for item_id in items {
        must_get(tx, t.stock, stock::NAME, stock_key(w, item_id), &mut stock)?;
        low += u64::from(i64::from(row::get_i32(&stock, stock::QUANTITY)) < threshold as i64);
    }
    Ok(low.to_le_bytes().to_vec())
}

/// Register the five procedures (`tpcc.new_order`, …) in `set`.
pub fn register_tpcc(set: &mut ProcedureSet) -> zen_engine::Result<()> {
    type Proc = fn(&mut dyn OneShotTx, &[u8]) -> TxResult<Vec<u8>>;
    let procs: [Proc; 5] =
        [new_order_proc, payment_proc, order_status_proc, delivery_proc, stock_level_proc];
    for (name, f) in TXN_TYPES.iter().zip(procs) {
        set.register(&format!("tpcc.{name}"), f)?;
    }
    Ok(())
}

// ---------------------------------------------------------- reconnaissance

/// A district's undelivered orders as the reconnaissance predicts them:
/// committed NEW-ORDER rows from `scan_from` on (until the scan finds none),
/// then the batch's own New-Orders (o, customer, lines).
#[derive(Default)]
struct Queue {
    scan_from: u64,
    committed_done: bool,
    appended: VecDeque<(u64, u64, u64)>,
}

/// The batch's reconnaissance: reads of the committed state through `tx`
/// (read-only), and what the batch's earlier transactions will change.
struct Recon<'a> {
    tx: &'a mut dyn Transaction,
    t: Tables,
    next_o: HashMap<u64, u64>,
    payments: HashMap<u64, u64>,
    last_order: HashMap<u64, u64>,
    by_name: HashMap<(u64, u64, u64), u64>,
    /// The plan's ITEM cache (`TpccPlan::items`).
    items: &'a mut HashMap<u64, bool>,
    queues: HashMap<u64, Queue>,
    row: Vec<u8>,
}

impl Recon<'_> {
    fn next_o(&mut self, dk: u64) -> TxResult<u64> {
        if let Some(&o) = self.next_o.get(&dk) {
            return Ok(o);
        }
        self.row.resize(district::BYTES, 0);
        read(self.tx, self.t.district, district::NAME, dk, &mut self.row, false)?;
        let o = row::get_i64(&self.row, district::NEXT_O_ID) as u64;
        self.next_o.insert(dk, o);
        Ok(o)
    }

    fn item_exists(&mut self, item_id: u64) -> TxResult<bool> {
        if let Some(&e) = self.items.get(&item_id) {
            return Ok(e);
        }
        self.row.resize(item::BYTES, 0);
        let e = self.tx.get(self.t.item, item_id, &mut self.row)?;
        self.items.insert(item_id, e);
        Ok(e)
    }

    /// Clause 2.5.2.2: customers of the last name by first name, midpoint.
    fn customer(&mut self, w: u64, d: u64, c: CustomerRef) -> TxResult<(u64, u64)> {
        let name = match c {
            CustomerRef::Id(id) => return Ok((customer_key(w, d, id), NO_NAME)),
            CustomerRef::LastName(name) => name,
        };
        if let Some(&ck) = self.by_name.get(&(w, d, name)) {
            return Ok((ck, name));
        }
        let mut prefix = [0u8; 24];
        row::put_i32(&mut prefix, 0, w as i32);
        row::put_i32(&mut prefix, 4, d as i32);
        prefix[8..24].copy_from_slice(&random::last_name(name));
        let mut keys = Vec::new();
        self.tx.lookup_secondary(
            self.t.customer,
            customer::BY_LAST_NAME,
            &prefix,
            usize::MAX,
            &mut keys,
        )?;
        let mut firsts = Vec::with_capacity(keys.len());
        self.row.resize(customer::BYTES, 0);
        for key in keys {
            read(self.tx, self.t.customer, customer::NAME, key, &mut self.row, false)?;
            let first: [u8; 16] =
                self.row[customer::FIRST..customer::FIRST + 16].try_into().expect("16 bytes");
            firsts.push((first, key));
        }
        if firsts.is_empty() {
            return Err(EngineError::KeyNotFound {
                table: "customer (by last name)".into(),
                key: customer_key(w, d, 0),
            });
        }
        firsts.sort_unstable();
        let ck = firsts[(firsts.len() - 1) / 2].1;
        self.by_name.insert((w, d, name), ck);
        Ok((ck, name))
    }

    /// C_PAYMENT_CNT after one more payment of customer `ck`.
    fn next_payment(&mut self, ck: u64) -> TxResult<u64> {
        let count = match self.payments.get(&ck) {
            Some(&n) => n,
            None => {
                self.row.resize(customer::BYTES, 0);
                read(self.tx, self.t.customer, customer::NAME, ck, &mut self.row, false)?;
                row::get_i64(&self.row, customer::PAYMENT_CNT) as u64
            }
        } + 1;
        self.payments.insert(ck, count);
        Ok(count)
    }

    /// The latest order of customer `ck` (0: none).
    fn last_order(&mut self, ck: u64) -> TxResult<u64> {
        if let Some(&o) = self.last_order.get(&ck) {
            return Ok(o);
        }
        let mut prefix = [0u8; 12];
        for (i, v) in [ck >> 16, (ck >> 12) & 0xF, ck & 0xFFF].into_iter().enumerate() {
            row::put_i32(&mut prefix, i * 4, v as i32);
        }
        let mut keys = Vec::new();
        self.tx.lookup_secondary(
            self.t.orders,
            orders::BY_CUSTOMER,
            &prefix,
            usize::MAX,
            &mut keys,
        )?;
        let o = keys.iter().max().map_or(0, |&k| split_order_key(k).2);
        self.last_order.insert(ck, o);
        Ok(o)
    }

    /// The oldest undelivered order of (w, d) not yet taken by the batch.
    fn take_oldest(&mut self, w: u64, d: u64) -> TxResult<Option<(u64, u64, u64)>> {
        let q = self.queues.entry(district_key(w, d)).or_default();
        if !q.committed_done {
            let mut found = None;
            self.tx.scan(
                self.t.new_order,
                order_key(w, d, q.scan_from)..=order_key(w, d, u32::MAX as u64),
                1,
                &mut |key, _| {
                    found = Some(key);
                    false
                },
            )?;
            match found {
                Some(ok) => {
                    q.scan_from = split_order_key(ok).2 + 1;
                    self.row.resize(orders::BYTES, 0);
                    read(self.tx, self.t.orders, orders::NAME, ok, &mut self.row, false)?;
                    let c = i32_at(&self.row, orders::C_ID);
                    let lines = i32_at(&self.row, orders::OL_CNT);
                    return Ok(Some((split_order_key(ok).2, c, lines)));
                }
                None => q.committed_done = true,
            }
        }
        Ok(q.appended.pop_front())
    }

    /// The one-shot form of `r`, the `index`-th of its batch.
    fn plan(&mut self, p: &TpccPlan, r: &TpccRequest, index: usize) -> TxResult<OneShot> {
        let t = self.t;
        Ok(match r {
            TpccRequest::NewOrder(n) => self.new_order(p, n)?,
            TpccRequest::Payment(pay) => self.payment(p, pay)?,
            TpccRequest::OrderStatus { w, d, customer } => {
                let (ck, name) = self.customer(*w, *d, *customer)?;
                let o = self.last_order(ck)?;
                OneShot {
                    proc: p.procs[2],
                    input: encode(&t, &[*w, *d, ck, name, o]),
                    writes: Vec::new(),
                }
            }
            TpccRequest::Delivery { w, carrier, date } => {
                let ledger_row = index as u64 % LEDGER_ROWS;
                let mut words = vec![*w, *carrier, *date as u64, ledger_row];
                let mut writes = vec![(t.ledger, ledger_row)];
                for d in 1..=DISTRICTS {
                    match self.take_oldest(*w, d)? {
                        Some((o, c, lines)) => {
                            let ok = order_key(*w, d, o);
                            words.extend([o, c, lines]);
                            writes.extend([
                                (t.new_order, ok),
                                (t.orders, ok),
                                (t.customer, customer_key(*w, d, c)),
                            ]);
                            writes.extend((1..=lines).map(|n| (t.order_line, ok << 4 | n)));
                        }
                        None => words.extend([0, 0, 0]),
                    }
                }
                OneShot { proc: p.procs[3], input: encode(&t, &words), writes }
            }
            TpccRequest::StockLevel { w, d, threshold } => OneShot {
                proc: p.procs[4],
                input: encode(&t, &[*w, *d, *threshold as u64]),
                writes: Vec::new(),
            },
        })
    }

    fn new_order(&mut self, p: &TpccPlan, n: &NewOrder) -> TxResult<OneShot> {
        let t = self.t;
        let dk = district_key(n.w, n.d);
        let o = self.next_o(dk)?;
        let mut rolls_back = false;
        for l in &n.lines[..n.count] {
            rolls_back |= !self.item_exists(u64::from(l.item))?;
        }
        if !rolls_back {
            self.next_o.insert(dk, o + 1);
            self.last_order.insert(customer_key(n.w, n.d, n.c), o);
            let q = self.queues.entry(dk).or_default();
            q.appended.push_back((o, n.c, n.count as u64));
        }
        let ok = order_key(n.w, n.d, o);
        let mut words =
            vec![n.w, n.d, n.c, o, n.count as u64, u64::from(n.all_local), n.entry_d as u64];
        let mut writes = vec![(t.district, dk), (t.orders, ok), (t.new_order, ok)];
        for (i, l) in n.lines[..n.count].iter().enumerate() {
            let (item_id, supply_w) = (u64::from(l.item), u64::from(l.supply_w));
            words.extend([item_id, supply_w, u64::from(l.quantity)]);
            writes.push((t.stock, stock_key(supply_w, item_id)));
            writes.push((t.order_line, order_line_key(n.w, n.d, o, i as u64 + 1)));
        }
        Ok(OneShot { proc: p.procs[0], input: encode(&t, &words), writes })
    }

    fn payment(&mut self, p: &TpccPlan, pay: &Payment) -> TxResult<OneShot> {
        let t = self.t;
        let (ck, name) = self.customer(pay.c_w, pay.c_d, pay.customer)?;
        let count = self.next_payment(ck)?;
        let words =
            [pay.w, pay.d, pay.c_w, pay.c_d, ck, name, pay.amount as u64, pay.date as u64, count];
        let writes = vec![
            (t.warehouse, pay.w),
            (t.district, district_key(pay.w, pay.d)),
            (t.customer, ck),
            (t.history, history_key(pay.c_w, pay.c_d, ck & 0xFFF, count)),
        ];
        Ok(OneShot { proc: p.procs[1], input: encode(&t, &words), writes })
    }
}

/// Procedure ids (in [`TXN_TYPES`] order), tables, and what the
/// reconnaissance learnt of ITEM.
pub struct TpccPlan {
    procs: Vec<ProcId>,
    t: Tables,
    /// Whether each item id read so far exists, kept across batches (not
    /// only within one): none of TPC-C's five transactions writes ITEM
    /// (it is fixed at load), so what a reconnaissance read there stays
    /// true for every later one. A wrong entry could only cost a
    /// re-submission, never a wrong result: the New-Order procedure reads
    /// ITEM itself in the epoch, and a mispredicted rollback shifts the
    /// district's next order id, which the procedure's check catches
    /// (`StaleReconnaissance`).
    items: Mutex<HashMap<u64, bool>>,
}

impl OneShotWorkload for Tpcc {
    type Plan = TpccPlan;

    fn plan(&self, engine: &dyn Engine, procedures: &ProcedureSet) -> Result<TpccPlan> {
        let procs = TXN_TYPES
            .iter()
            .map(|name| super::procedure(procedures, &format!("tpcc.{name}")))
            .collect::<Result<Vec<_>>>()?;
        Ok(TpccPlan { procs, t: Tables::resolve(engine)?, items: Mutex::new(HashMap::new()) })
    }

    /// One read-only transaction on the committed state finds every key
    /// the batch's requests do not name (module docs).
    fn batch(
        &self,
        engine: &dyn Engine,
        plan: &TpccPlan,
        requests: &[TpccRequest],
    ) -> Result<Vec<OneShot>> {
        let mut out = Vec::with_capacity(requests.len());
        // A panic elsewhere cannot make the cache wrong: it holds facts
        // about a table no one writes.
        let mut items = plan.items.lock().unwrap_or_else(PoisonError::into_inner);
        let mut worker = engine.worker()?;
        worker.execute(&TxnOptions::read_only(), &mut |tx| {
            out.clear();
            let mut recon = Recon {
                tx,
                t: plan.t,
                next_o: HashMap::new(),
                payments: HashMap::new(),
                last_order: HashMap::new(),
                by_name: HashMap::new(),
                items: &mut items,
                queues: HashMap::new(),
                row: Vec::new(),
            };
            for (index, r) in requests.iter().enumerate() {
                out.push(recon.plan(plan, r, index)?);
            }
            Ok(())
        })?;
        if out.len() != requests.len() {
            return Err(Error::invalid("reconnaissance", out.len(), "one transaction per request"));
        }
        Ok(out)
    }
}
