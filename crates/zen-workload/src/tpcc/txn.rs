//! The five TPC-C transactions (clause 2) and their input generation.
//!
//! `generate` draws everything random (clause 2.x.1 rules) into a
//! [`TpccRequest`]; `execute` is one attempt and draws nothing, so a retried
//! attempt repeats the same transaction. Buffers live in [`TpccLocal`], so no
//! transaction allocates once the worker's buffers have grown to size.

use std::io::Write;

use rand::Rng;
use rand::rngs::SmallRng;
use zen_engine::schema::row;
use zen_engine::{AbortReason, TableId, Transaction, user_abort};

use super::load::DOLLAR_CENTS;
use super::random::{self, C_ID, C_LAST_RUN, OL_I_ID, nurand};
use super::schema::*;
use super::{MIX, Tables, TpccSpec};
use crate::meta;

/// Most lines of one order.
pub const MAX_LINES: usize = 15;
/// Most customers one last name may match (3,000 customers per district).
const MAX_NAME_MATCHES: usize = 3000;
/// Most orders of one customer Order-Status considers.
const MAX_CUSTOMER_ORDERS: usize = 1 << 20;

/// How a transaction names its customer (clause 2.5.1.2).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CustomerRef {
    Id(u64),
    /// Number of the last name, 0..=999.
    LastName(u64),
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Line {
    pub item: u32,
    pub supply_w: u16,
    pub quantity: u8,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NewOrder {
    pub w: u64,
    pub d: u64,
    pub c: u64,
    pub lines: [Line; MAX_LINES],
    pub count: usize,
    pub all_local: bool,
    pub entry_d: i64,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Payment {
    pub w: u64,
    pub d: u64,
    pub c_w: u64,
    pub c_d: u64,
    pub customer: CustomerRef,
    pub amount: i64,
    pub date: i64,
}

/// One TPC-C transaction and its inputs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum TpccRequest {
    NewOrder(NewOrder),
    Payment(Payment),
    OrderStatus { w: u64, d: u64, customer: CustomerRef },
    Delivery { w: u64, carrier: u64, date: i64 },
    StockLevel { w: u64, d: u64, threshold: i64 },
}

impl TpccRequest {
    pub fn type_index(&self) -> usize {
        match self {
            TpccRequest::NewOrder(_) => 0,
            TpccRequest::Payment(_) => 1,
            TpccRequest::OrderStatus { .. } => 2,
            TpccRequest::Delivery { .. } => 3,
            TpccRequest::StockLevel { .. } => 4,
        }
    }

    pub fn is_read_only(&self) -> bool {
        matches!(self, TpccRequest::OrderStatus { .. } | TpccRequest::StockLevel { .. })
    }
}

/// Per-worker state: table ids, home warehouses, row buffers.
pub struct TpccLocal {
    t: Tables,
    worker: usize,
    home: Vec<u64>,
    warehouse: [u8; warehouse::BYTES],
    district: [u8; district::BYTES],
    customer: [u8; customer::BYTES],
    order: [u8; orders::BYTES],
    line: [u8; order_line::BYTES],
    item: [u8; item::BYTES],
    stock: [u8; stock::BYTES],
    history: [u8; history::BYTES],
    keys: Vec<u64>,
    firsts: Vec<([u8; 16], u64)>,
    items: Vec<u64>,
}

impl TpccLocal {
    pub fn new(t: Tables, worker: usize, home: Vec<u64>) -> TpccLocal {
        TpccLocal {
            t,
            worker,
            home,
            warehouse: [0; warehouse::BYTES],
            district: [0; district::BYTES],
            customer: [0; customer::BYTES],
            order: [0; orders::BYTES],
            line: [0; order_line::BYTES],
            item: [0; item::BYTES],
            stock: [0; stock::BYTES],
            history: [0; history::BYTES],
            keys: Vec::with_capacity(64),
            firsts: Vec::with_capacity(64),
            items: Vec::with_capacity(MAX_LINES * 20),
        }
    }
}

// ---------------------------------------------------------------- generation

fn other_warehouse(rng: &mut SmallRng, spec: &TpccSpec, w: u64) -> u64 {
    let r = rng.random_range(1..spec.warehouses);
    if r >= w { r + 1 } else { r }
}

fn customer_ref(rng: &mut SmallRng, spec: &TpccSpec) -> CustomerRef {
    let customers = spec.customers_per_district;
    if rng.random_range(1..=100) <= 60 {
        CustomerRef::LastName(nurand(rng, 255, 0, 999.min(customers - 1), C_LAST_RUN))
    } else {
        CustomerRef::Id(nurand(rng, 1023, 1, customers, C_ID))
    }
}

fn new_order(rng: &mut SmallRng, spec: &TpccSpec, w: u64) -> NewOrder {
    let count = rng.random_range(5..=MAX_LINES);
    let rollback = rng.random_range(1..=100) == 1;
    let mut order = NewOrder {
        w,
        d: rng.random_range(1..=DISTRICTS),
        c: nurand(rng, 1023, 1, spec.customers_per_district, C_ID),
        lines: [Line::default(); MAX_LINES],
        count,
        all_local: true,
        entry_d: random::now_ns(),
    };
    for i in 0..count {
        let mut item = nurand(rng, 8191, 1, spec.items, OL_I_ID);
        while order.lines[..i].iter().any(|l| u64::from(l.item) == item) {
            item = item % spec.items + 1;
        }
        let remote = spec.warehouses > 1 && rng.random_range(1..=100) == 1;
        let supply_w = if remote { other_warehouse(rng, spec, w) } else { w };
        order.all_local &= !remote;
        // `TpccSpec::validate` bounds items by 2^20 and warehouses by 2^16.
        order.lines[i] = Line {
            item: item as u32,
            supply_w: supply_w as u16,
            quantity: rng.random_range(1..=10),
        };
    }
    if rollback {
        // Clause 2.4.1.4: the last item id is unused, so the order rolls back.
        order.lines[count - 1].item = spec.items as u32 + 1;
    }
    order
}

fn payment(rng: &mut SmallRng, spec: &TpccSpec, w: u64) -> Payment {
    let d = rng.random_range(1..=DISTRICTS);
    let remote = spec.warehouses > 1 && rng.random_range(1..=100) > 85;
    let (c_w, c_d) = if remote {
        (other_warehouse(rng, spec, w), rng.random_range(1..=DISTRICTS))
    } else {
        (w, d)
    };
    Payment {
        w,
        d,
        c_w,
        c_d,
        customer: customer_ref(rng, spec),
        amount: rng.random_range(DOLLAR_CENTS..=5000 * DOLLAR_CENTS),
        date: random::now_ns(),
    }
}

/// Draw the next transaction for `local`'s home warehouses.
pub fn generate(spec: &TpccSpec, local: &TpccLocal, rng: &mut SmallRng) -> TpccRequest {
    let w = local.home[rng.random_range(0..local.home.len())];
    let mut pick = rng.random_range(0..100u32);
    let mut kind = 0;
    while pick >= MIX[kind] {
        pick -= MIX[kind];
        kind += 1;
    }
    match kind {
        0 => TpccRequest::NewOrder(new_order(rng, spec, w)),
        1 => TpccRequest::Payment(payment(rng, spec, w)),
        2 => TpccRequest::OrderStatus {
            w,
            d: rng.random_range(1..=DISTRICTS),
            customer: customer_ref(rng, spec),
        },
        3 => TpccRequest::Delivery { w, carrier: rng.random_range(1..=10), date: random::now_ns() },
        _ => TpccRequest::StockLevel {
            w,
            d: rng.random_range(1..=DISTRICTS),
            threshold: rng.random_range(10..=20),
        },
    }
}

// ---------------------------------------------------------------- execution

type TxResult<T = ()> = zen_engine::Result<T>;

fn missing(table: &str, key: u64) -> zen_engine::Error {
    zen_engine::Error::KeyNotFound { table: table.to_string(), key }
}

pub(crate) fn read(
    tx: &mut dyn Transaction,
    table: TableId,
    name: &str,
    key: u64,
    out: &mut [u8],
    lock: bool,
) -> TxResult {
    let found = if lock { tx.get_for_update(table, key, out)? } else { tx.get(table, key, out)? };
    if found { Ok(()) } else { Err(missing(name, key)) }
}

/// Insert a row whose key was derived from a value this transaction read
/// (D_NEXT_O_ID for orders, C_PAYMENT_CNT for history). If the key already
/// exists, a concurrent transaction committed the same derivation after our
/// read: our read is stale and validation would fail anyway, so this is a
/// retryable conflict, not a duplicate-key error. (A true duplicate would
/// repeat on every retry and end the run with `RetriesExhausted`.)
fn insert_derived(tx: &mut dyn Transaction, table: TableId, key: u64, data: &[u8]) -> TxResult {
    match tx.insert(table, key, data) {
        Err(zen_engine::Error::DuplicateKey { .. }) => {
            Err(zen_engine::Error::Abort(AbortReason::InsertConflict))
        }
        other => other,
    }
}

pub(crate) fn add_i64(r: &mut [u8], at: usize, delta: i64) {
    row::put_i64(r, at, row::get_i64(r, at) + delta);
}

pub(crate) fn add_i32(r: &mut [u8], at: usize, delta: i32) {
    row::put_i32(r, at, row::get_i32(r, at) + delta);
}

pub(crate) fn get_i32(r: &[u8], at: usize) -> u64 {
    row::get_i32(r, at) as u64
}

pub fn execute(l: &mut TpccLocal, tx: &mut dyn Transaction, request: &TpccRequest) -> TxResult {
    match request {
        TpccRequest::NewOrder(order) => new_order_txn(l, tx, order),
        TpccRequest::Payment(p) => payment_txn(l, tx, p),
        TpccRequest::OrderStatus { w, d, customer } => order_status_txn(l, tx, *w, *d, *customer),
        TpccRequest::Delivery { w, carrier, date } => delivery_txn(l, tx, *w, *carrier, *date),
        TpccRequest::StockLevel { w, d, threshold } => stock_level_txn(l, tx, *w, *d, *threshold),
    }
}

/// Clause 2.5.2.2: the customers of a last name sorted by first name; take
/// the one at position ⌈n / 2⌉.
fn customer_by_name(
    l: &mut TpccLocal,
    tx: &mut dyn Transaction,
    w: u64,
    d: u64,
    name: u64,
) -> TxResult<u64> {
    let mut prefix = [0u8; 24];
    row::put_i32(&mut prefix, 0, w as i32);
    row::put_i32(&mut prefix, 4, d as i32);
    prefix[8..24].copy_from_slice(&random::last_name(name));
    l.keys.clear();
    tx.lookup_secondary(
        l.t.customer,
        customer::BY_LAST_NAME,
        &prefix,
        MAX_NAME_MATCHES,
        &mut l.keys,
    )?;
    // The matching customers (about three) are independent reads.
    tx.prefetch(l.t.customer, &l.keys);
    l.firsts.clear();
    for i in 0..l.keys.len() {
        let key = l.keys[i];
        read(tx, l.t.customer, customer::NAME, key, &mut l.customer, false)?;
        let first: [u8; 16] =
            l.customer[customer::FIRST..customer::FIRST + 16].try_into().expect("16 bytes");
        l.firsts.push((first, key));
    }
    if l.firsts.is_empty() {
        return Err(missing("customer (by last name)", customer_key(w, d, 0)));
    }
    l.firsts.sort_unstable();
    Ok(l.firsts[(l.firsts.len() - 1) / 2].1)
}

fn customer_key_of(
    l: &mut TpccLocal,
    tx: &mut dyn Transaction,
    w: u64,
    d: u64,
    c: CustomerRef,
) -> TxResult<u64> {
    match c {
        CustomerRef::Id(c) => Ok(customer_key(w, d, c)),
        CustomerRef::LastName(name) => customer_by_name(l, tx, w, d, name),
    }
}

fn new_order_txn(l: &mut TpccLocal, tx: &mut dyn Transaction, r: &NewOrder) -> TxResult {
    let t = l.t;
    read(tx, t.warehouse, warehouse::NAME, r.w, &mut l.warehouse, false)?;
    let dk = district_key(r.w, r.d);
    read(tx, t.district, district::NAME, dk, &mut l.district, true)?;
    let o = row::get_i64(&l.district, district::NEXT_O_ID) as u64;
    row::put_i64(&mut l.district, district::NEXT_O_ID, (o + 1) as i64);
    tx.update(t.district, dk, &l.district)?;
    // The lines' item and stock reads and the order-line inserts do not
    // depend on each other: ask for all of their rows (and index lines)
    // first, so that their cache misses overlap.
    // The customer, and the index lines where the order's and the new
    // order's inserts look their (new) key up, are single accesses that do
    // not depend on the lines either: announced first, their misses overlap
    // the lines' instead of following them.
    let ck = customer_key(r.w, r.d, r.c);
    let ok = order_key(r.w, r.d, o);
    tx.prefetch(t.customer, &[ck]);
    tx.prefetch(t.orders, &[ok]);
    tx.prefetch(t.new_order, &[ok]);
    let lines = &r.lines[..r.count];
    let mut keys = [0u64; MAX_LINES];
    for (k, line) in keys.iter_mut().zip(lines) {
        *k = u64::from(line.item);
    }
    tx.prefetch(t.item, &keys[..r.count]);
    for (k, line) in keys.iter_mut().zip(lines) {
        *k = stock_key(u64::from(line.supply_w), u64::from(line.item));
    }
    tx.prefetch(t.stock, &keys[..r.count]);
    for (number, k) in keys[..r.count].iter_mut().enumerate() {
        *k = order_line_key(r.w, r.d, o, number as u64 + 1);
    }
    tx.prefetch(t.order_line, &keys[..r.count]);
    read(tx, t.customer, customer::NAME, ck, &mut l.customer, false)?;

    for (at, v) in [(orders::ID, o), (orders::D_ID, r.d), (orders::W_ID, r.w), (orders::C_ID, r.c)]
    {
        row::put_i32(&mut l.order, at, v as i32);
    }
    row::put_i64(&mut l.order, orders::ENTRY_D, r.entry_d);
    row::put_i32(&mut l.order, orders::CARRIER_ID, 0);
    row::put_i32(&mut l.order, orders::OL_CNT, r.count as i32);
    row::put_i32(&mut l.order, orders::ALL_LOCAL, i32::from(r.all_local));
    insert_derived(tx, t.orders, ok, &l.order)?;
    let mut no = [0u8; new_order::BYTES];
    for (at, v) in [(new_order::O_ID, o), (new_order::D_ID, r.d), (new_order::W_ID, r.w)] {
        row::put_i32(&mut no, at, v as i32);
    }
    insert_derived(tx, t.new_order, ok, &no)?;

    let mut total = 0i64;
    for (i, line) in r.lines[..r.count].iter().enumerate() {
        total += order_line(l, tx, r, o, i as u64 + 1, line)?;
    }
    // The total the terminal would display (clause 2.4.2.2), in cents.
    let discount = row::get_i64(&l.customer, customer::DISCOUNT);
    let tax = row::get_i64(&l.warehouse, warehouse::TAX) + row::get_i64(&l.district, district::TAX);
    std::hint::black_box(total * (10_000 - discount) / 10_000 * (10_000 + tax) / 10_000);
    Ok(())
}

/// One line of a New-Order; returns its amount. An unused item rolls back.
fn order_line(
    l: &mut TpccLocal,
    tx: &mut dyn Transaction,
    r: &NewOrder,
    o: u64,
    number: u64,
    line: &Line,
) -> TxResult<i64> {
    let t = l.t;
    let (item_id, supply_w, quantity) =
        (u64::from(line.item), u64::from(line.supply_w), u64::from(line.quantity));
    if !tx.get(t.item, item_id, &mut l.item)? {
        return Err(user_abort());
    }
    let price = row::get_i64(&l.item, item::PRICE);
    let sk = stock_key(supply_w, item_id);
    read(tx, t.stock, stock::NAME, sk, &mut l.stock, true)?;
    let stock_quantity = get_i32(&l.stock, stock::QUANTITY);
    let left = if stock_quantity >= quantity + 10 {
        stock_quantity - quantity
    } else {
        stock_quantity + 91 - quantity
    };
    row::put_i32(&mut l.stock, stock::QUANTITY, left as i32);
    add_i64(&mut l.stock, stock::YTD, quantity as i64);
    add_i32(&mut l.stock, stock::ORDER_CNT, 1);
    if supply_w != r.w {
        add_i32(&mut l.stock, stock::REMOTE_CNT, 1);
    }
    tx.update(t.stock, sk, &l.stock)?;

    let amount = quantity as i64 * price;
    for (at, v) in [
        (order_line::O_ID, o),
        (order_line::D_ID, r.d),
        (order_line::W_ID, r.w),
        (order_line::NUMBER, number),
        (order_line::I_ID, item_id),
        (order_line::SUPPLY_W_ID, supply_w),
        (order_line::QUANTITY, quantity),
    ] {
        row::put_i32(&mut l.line, at, v as i32);
    }
    row::put_i64(&mut l.line, order_line::DELIVERY_D, 0);
    row::put_i64(&mut l.line, order_line::AMOUNT, amount);
    let dist = stock::DIST_01 + (r.d as usize - 1) * 24;
    l.line[order_line::DIST_INFO..order_line::DIST_INFO + 24]
        .copy_from_slice(&l.stock[dist..dist + 24]);
    insert_derived(tx, t.order_line, order_line_key(r.w, r.d, o, number), &l.line)?;
    Ok(amount)
}

fn payment_txn(l: &mut TpccLocal, tx: &mut dyn Transaction, p: &Payment) -> TxResult {
    let t = l.t;
    read(tx, t.warehouse, warehouse::NAME, p.w, &mut l.warehouse, true)?;
    add_i64(&mut l.warehouse, warehouse::YTD, p.amount);
    tx.update(t.warehouse, p.w, &l.warehouse)?;
    let dk = district_key(p.w, p.d);
    read(tx, t.district, district::NAME, dk, &mut l.district, true)?;
    add_i64(&mut l.district, district::YTD, p.amount);
    tx.update(t.district, dk, &l.district)?;

    let ck = customer_key_of(l, tx, p.c_w, p.c_d, p.customer)?;
    read(tx, t.customer, customer::NAME, ck, &mut l.customer, true)?;
    let c = &mut l.customer;
    add_i64(c, customer::BALANCE, -p.amount);
    add_i64(c, customer::YTD_PAYMENT, p.amount);
    let payments = row::get_i64(c, customer::PAYMENT_CNT) + 1;
    row::put_i64(c, customer::PAYMENT_CNT, payments);
    let c_id = get_i32(c, customer::ID);
    if &c[customer::CREDIT..customer::CREDIT + 2] == b"BC" {
        prepend_bad_credit_data(c, [c_id, p.c_d, p.c_w, p.d, p.w], p.amount);
    }
    tx.update(t.customer, ck, &l.customer)?;

    let h = &mut l.history;
    for (at, v) in [
        (history::C_ID, c_id),
        (history::C_D_ID, p.c_d),
        (history::C_W_ID, p.c_w),
        (history::D_ID, p.d),
        (history::W_ID, p.w),
    ] {
        row::put_i32(h, at, v as i32);
    }
    row::put_i64(h, history::DATE, p.date);
    row::put_i64(h, history::AMOUNT, p.amount);
    // H_DATA = W_NAME ‖ 4 spaces ‖ D_NAME, cut to 24 bytes.
    let data = &mut h[history::DATA..history::DATA + 24];
    data[..10].copy_from_slice(&l.warehouse[warehouse::W_NAME..warehouse::W_NAME + 10]);
    data[10..14].copy_from_slice(b"    ");
    data[14..24].copy_from_slice(&l.district[district::D_NAME..district::D_NAME + 10]);
    insert_derived(tx, t.history, history_key(p.c_w, p.c_d, c_id, payments as u64), &l.history)
}

/// Clause 2.5.2.2: prepend the payment's ids and amount to C_DATA, keep 500 bytes.
pub(crate) fn prepend_bad_credit_data(c: &mut [u8], ids: [u64; 5], amount: i64) {
    let mut entry = [0u8; 64];
    let mut cursor = &mut entry[..];
    // 64 bytes hold five ids and an amount; a failed write would only shorten it.
    let _ = write!(cursor, "{} {} {} {} {} {} ", ids[0], ids[1], ids[2], ids[3], ids[4], amount);
    let len = 64 - cursor.len();
    let data = &mut c[customer::DATA..customer::DATA + customer::DATA_BYTES];
    data.copy_within(0..customer::DATA_BYTES - len, len);
    data[..len].copy_from_slice(&entry[..len]);
}

fn order_status_txn(
    l: &mut TpccLocal,
    tx: &mut dyn Transaction,
    w: u64,
    d: u64,
    c: CustomerRef,
) -> TxResult {
    let t = l.t;
    let ck = customer_key_of(l, tx, w, d, c)?;
    read(tx, t.customer, customer::NAME, ck, &mut l.customer, false)?;
    let c_id = get_i32(&l.customer, customer::ID);
    let mut prefix = [0u8; 12];
    for (i, v) in [w, d, c_id].into_iter().enumerate() {
        row::put_i32(&mut prefix, i * 4, v as i32);
    }
    l.keys.clear();
    tx.lookup_secondary(t.orders, orders::BY_CUSTOMER, &prefix, MAX_CUSTOMER_ORDERS, &mut l.keys)?;
    // A scaled population may leave a customer without orders.
    let Some(&last) = l.keys.iter().max() else { return Ok(()) };
    read(tx, t.orders, orders::NAME, last, &mut l.order, false)?;
    let (mut lines, mut amount) = (0u64, 0i64);
    tx.scan(t.order_line, last << 4 | 1..=last << 4 | 15, MAX_LINES, &mut |_, line| {
        lines += 1;
        amount += row::get_i64(line, order_line::AMOUNT);
        true
    })?;
    std::hint::black_box((lines, amount));
    Ok(())
}

fn delivery_txn(
    l: &mut TpccLocal,
    tx: &mut dyn Transaction,
    w: u64,
    carrier: u64,
    date: i64,
) -> TxResult {
    let t = l.t;
    // Each district's oldest new order first; the orders, their lines and
    // their customers are then reads that do not depend on one another, so
    // they are announced together (`Transaction::prefetch`) and their cache
    // misses overlap instead of following one another.
    const D: usize = DISTRICTS as usize;
    let (mut districts, mut order_keys) = ([0u64; D], [0u64; D]);
    let mut n = 0;
    for d in 1..=DISTRICTS {
        let mut oldest = None;
        tx.scan(
            t.new_order,
            order_key(w, d, 0)..=order_key(w, d, u32::MAX as u64),
            1,
            &mut |key, _| {
                oldest = Some(key);
                false
            },
        )?;
        let Some(ok) = oldest else { continue };
        match tx.delete(t.new_order, ok) {
            // A concurrent Delivery of this district committed first and took
            // the order the scan saw: the scan is stale, retry (as validation
            // would abort it anyway), never fail the run.
            Err(zen_engine::Error::KeyNotFound { .. }) => {
                return Err(zen_engine::Error::Abort(zen_engine::AbortReason::Phantom));
            }
            other => other?,
        }
        (districts[n], order_keys[n]) = (d, ok);
        n += 1;
    }
    tx.prefetch(t.orders, &order_keys[..n]);
    let mut customers = [0u64; D];
    let mut lines = [0u64; D];
    l.keys.clear();
    for (i, (&d, &ok)) in districts[..n].iter().zip(&order_keys[..n]).enumerate() {
        read(tx, t.orders, orders::NAME, ok, &mut l.order, true)?;
        row::put_i32(&mut l.order, orders::CARRIER_ID, carrier as i32);
        tx.update(t.orders, ok, &l.order)?;
        let count = get_i32(&l.order, orders::OL_CNT);
        l.keys.extend((1..=count).map(|number| ok << 4 | number));
        lines[i] = count;
        customers[i] = customer_key(w, d, get_i32(&l.order, orders::C_ID));
    }
    tx.prefetch(t.order_line, &l.keys);
    tx.prefetch(t.customer, &customers[..n]);
    let mut at = 0;
    for i in 0..n {
        let mut total = 0;
        for _ in 0..lines[i] {
            let lk = l.keys[at];
            at += 1;
            read(tx, t.order_line, order_line::NAME, lk, &mut l.line, true)?;
            total += row::get_i64(&l.line, order_line::AMOUNT);
            row::put_i64(&mut l.line, order_line::DELIVERY_D, date);
            tx.update(t.order_line, lk, &l.line)?;
        }
        let ck = customers[i];
        read(tx, t.customer, customer::NAME, ck, &mut l.customer, true)?;
        let c = &mut l.customer;
        add_i64(c, customer::BALANCE, total);
        add_i64(c, customer::DELIVERY_CNT, 1);
        tx.update(t.customer, ck, &l.customer)?;
    }
    if n > 0 {
        meta::ledger_add(tx, t.ledger, l.worker, 0, 1)?;
    }
    Ok(())
}

/// Stock rows Stock-Level asks the engine to prefetch at a time.
const PREFETCH_AHEAD: usize = 16;

fn stock_level_txn(
    l: &mut TpccLocal,
    tx: &mut dyn Transaction,
    w: u64,
    d: u64,
    threshold: i64,
) -> TxResult {
    let t = l.t;
    read(tx, t.district, district::NAME, district_key(w, d), &mut l.district, false)?;
    let next = row::get_i64(&l.district, district::NEXT_O_ID) as u64;
    let first = next.saturating_sub(20).max(1);
    l.items.clear();
    let items = &mut l.items;
    let range = order_line_key(w, d, first, 0)..=order_line_key(w, d, next - 1, 15);
    tx.scan(t.order_line, range, 20 * MAX_LINES, &mut |_, line| {
        items.push(get_i32(line, order_line::I_ID));
        true
    })?;
    l.items.sort_unstable();
    l.items.dedup();
    let mut low = 0;
    for i in 0..l.items.len() {
        if i % PREFETCH_AHEAD == 0 {
            let end = (i + PREFETCH_AHEAD).min(l.items.len());
            l.keys.clear();
            l.keys.extend(l.items[i..end].iter().map(|&item| stock_key(w, item)));
            tx.prefetch(t.stock, &l.keys);
        }
        read(tx, t.stock, stock::NAME, stock_key(w, l.items[i]), &mut l.stock, false)?;
        low += u64::from(i64::from(row::get_i32(&l.stock, stock::QUANTITY)) < threshold);
    }
    std::hint::black_box(low);
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::SeedableRng;

    fn local(home: Vec<u64>) -> TpccLocal {
        let id = TableId(0);
        let t = Tables {
            warehouse: id,
            district: id,
            customer: id,
            history: id,
            new_order: id,
            orders: id,
            order_line: id,
            item: id,
            stock: id,
            ledger: id,
        };
        TpccLocal::new(t, 0, home)
    }

    #[test]
    fn generated_inputs_follow_the_clause_two_rules() {
        let spec = TpccSpec {
            warehouses: 4,
            items: 1000,
            customers_per_district: 30,
            orders_per_district: 30,
        };
        let l = local(vec![2]);
        let mut rng = SmallRng::seed_from_u64(8);
        let (mut counts, mut rollbacks, mut remote_lines, mut lines) = ([0u32; 5], 0, 0, 0);
        let (mut remote_payments, mut by_name, mut payments) = (0, 0, 0);
        for _ in 0..50_000 {
            let r = generate(&spec, &l, &mut rng);
            counts[r.type_index()] += 1;
            match r {
                TpccRequest::NewOrder(o) => {
                    assert_eq!(o.w, 2);
                    assert!((5..=15).contains(&o.count));
                    rollbacks += u32::from(u64::from(o.lines[o.count - 1].item) == spec.items + 1);
                    lines += o.count;
                    remote_lines += o.lines[..o.count].iter().filter(|x| x.supply_w != 2).count();
                }
                TpccRequest::Payment(p) => {
                    payments += 1;
                    remote_payments += u32::from(p.c_w != p.w);
                    if let CustomerRef::LastName(n) = p.customer {
                        assert!(n < 30, "last name {n} beyond the scaled population");
                        by_name += 1;
                    }
                }
                _ => {}
            }
        }
        let pct = |part: f64, whole: f64| part / whole * 100.0;
        assert!((pct(f64::from(counts[0]), 50_000.0) - 45.0).abs() < 1.0, "{counts:?}");
        assert!((pct(f64::from(rollbacks), f64::from(counts[0])) - 1.0).abs() < 0.4);
        assert!((pct(remote_lines as f64, lines as f64) - 1.0).abs() < 0.3);
        assert!((pct(f64::from(remote_payments), f64::from(payments)) - 15.0).abs() < 1.5);
        assert!((pct(f64::from(by_name), f64::from(payments)) - 60.0).abs() < 1.5);
    }

    #[test]
    fn one_warehouse_means_no_remote_accesses() {
        let spec = TpccSpec {
            warehouses: 1,
            items: 100,
            customers_per_district: 10,
            orders_per_district: 10,
        };
        let mut rng = SmallRng::seed_from_u64(9);
        for _ in 0..5000 {
            match generate(&spec, &local(vec![1]), &mut rng) {
                TpccRequest::NewOrder(o) => assert!(o.all_local),
                TpccRequest::Payment(p) => assert_eq!(p.c_w, 1),
                _ => {}
            }
        }
    }

    #[test]
    fn bad_credit_data_is_prepended_and_truncated() {
        let mut c = [b'x'; customer::BYTES];
        prepend_bad_credit_data(&mut c, [1, 2, 3, 4, 5], 600);
        let data = &c[customer::DATA..customer::DATA + customer::DATA_BYTES];
        assert!(data.starts_with(b"1 2 3 4 5 600 "));
        assert_eq!(data.len(), 500);
        assert!(data[14..].iter().all(|b| *b == b'x'));
    }
}
