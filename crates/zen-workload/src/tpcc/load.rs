//! The TPC-C initial population (clause 4.3.3), scaled by [`TpccSpec`].
//!
//! The load is split into independent parts that [`meta::load_parallel_by`]
//! spreads over threads: part 0 is ITEM, parts `1..=W` are a warehouse and
//! its STOCK, and the remaining `10 W` parts are one district each with its
//! customers, history, orders, order lines and new orders. A warehouse's
//! parts are loaded by the thread (the worker) that has it as a home
//! warehouse in a run with as many threads. Every part seeds
//! its own generator from the load seed and its part number, so a load is
//! reproducible whatever the thread count.

use rand::Rng;
use rand::SeedableRng;
use rand::rngs::SmallRng;
use rand::seq::SliceRandom;
use zen_engine::Engine;
use zen_engine::schema::row;

use super::random::{self, C_LAST_LOAD, nurand};
use super::schema::*;
use super::{Tables, TpccConfig, TpccSpec};
use crate::error::Result;
use crate::meta::{self, Loader, WorkloadSpec};

/// Initial C_BALANCE, C_YTD_PAYMENT and H_AMOUNT: $10.
pub const INITIAL_PAYMENT_CENTS: i64 = 10 * DOLLAR_CENTS;
/// Cents per dollar: money is integer cents throughout.
pub const DOLLAR_CENTS: i64 = 100;

pub fn load(config: &TpccConfig, engine: &dyn Engine, threads: usize) -> Result<()> {
    meta::create_tables(engine, &tables())?;
    meta::write_spec(engine, &WorkloadSpec::Tpcc(config.spec.clone()))?;
    let t = Tables::resolve(engine)?;
    let spec = &config.spec;
    let w = spec.warehouses as usize;
    let parts = 1 + w + w * DISTRICTS as usize;
    let owner = |part: usize, threads: usize| part_owner(w, part, threads);
    meta::load_parallel_by(engine, threads, parts, &owner, &|loader, part| {
        let mut rng = SmallRng::seed_from_u64(
            config.load_seed ^ (part as u64).wrapping_mul(0x9E37_79B9_7F4A_7C15),
        );
        if part == 0 {
            load_items(spec, &t, loader, &mut rng)
        } else if part <= w {
            load_warehouse(spec, &t, loader, &mut rng, part as u64)
        } else {
            let index = (part - 1 - w) as u64;
            load_district(spec, &t, loader, &mut rng, index / DISTRICTS + 1, index % DISTRICTS + 1)
        }
    })?;
    meta::finish_load(engine)
}

/// The thread (of `threads`) that loads `part` of a population of
/// `warehouses`: a warehouse's parts go to the thread whose worker has it
/// as a home warehouse in a run with as many threads
/// (`Tpcc::home_warehouses`: (w − 1) mod workers), ITEM to thread 0; with
/// more threads than warehouses, round robin.
pub(super) fn part_owner(warehouses: usize, part: usize, threads: usize) -> usize {
    match part {
        _ if threads > warehouses => part % threads,
        0 => 0,
        p if p <= warehouses => (p - 1) % threads,
        p => (p - 1 - warehouses) / DISTRICTS as usize % threads,
    }
}

fn put_i32(row_bytes: &mut [u8], at: usize, v: u64) {
    row::put_i32(row_bytes, at, v as i32);
}

fn load_items(
    spec: &TpccSpec,
    t: &Tables,
    loader: &mut Loader<'_>,
    rng: &mut SmallRng,
) -> Result<()> {
    let mut r = [0u8; item::BYTES];
    for i in 1..=spec.items {
        put_i32(&mut r, item::ID, i);
        put_i32(&mut r, item::IM_ID, rng.random_range(1..=10_000));
        random::a_string(rng, &mut r[item::I_NAME..item::I_NAME + 24], 14, 24);
        row::put_i64(&mut r, item::PRICE, rng.random_range(DOLLAR_CENTS..=100 * DOLLAR_CENTS));
        random::data_with_original(rng, &mut r[item::DATA..item::DATA + 50], 26, 50);
        loader.insert(t.item, i, &r)?;
    }
    Ok(())
}

/// Name, two streets, city, state and zip: five a-strings and a zip.
fn address(rng: &mut SmallRng, out: &mut [u8]) {
    for (at, min, max) in [(0, 10, 20), (20, 10, 20), (40, 10, 20), (60, 2, 2)] {
        random::a_string(rng, &mut out[at..at + max], min, max);
    }
    random::zip(rng, &mut out[62..71]);
}

fn load_warehouse(
    spec: &TpccSpec,
    t: &Tables,
    loader: &mut Loader<'_>,
    rng: &mut SmallRng,
    w: u64,
) -> Result<()> {
    let mut r = [0u8; warehouse::BYTES];
    put_i32(&mut r, warehouse::ID, w);
    random::a_string(rng, &mut r[warehouse::W_NAME..warehouse::W_NAME + 10], 6, 10);
    address(rng, &mut r[warehouse::STREET_1..warehouse::STREET_1 + 71]);
    row::put_i64(&mut r, warehouse::TAX, rng.random_range(0..=2000));
    let ytd = INITIAL_PAYMENT_CENTS * (spec.customers_per_district * DISTRICTS) as i64;
    row::put_i64(&mut r, warehouse::YTD, ytd);
    loader.insert(t.warehouse, w, &r)?;
    let mut s = [0u8; stock::BYTES];
    for i in 1..=spec.items {
        put_i32(&mut s, stock::I_ID, i);
        put_i32(&mut s, stock::W_ID, w);
        put_i32(&mut s, stock::QUANTITY, rng.random_range(10..=100));
        for d in 0..DISTRICTS as usize {
            let at = stock::DIST_01 + d * 24;
            random::a_string(rng, &mut s[at..at + 24], 24, 24);
        }
        random::data_with_original(rng, &mut s[stock::DATA..stock::DATA + 50], 26, 50);
        loader.insert(t.stock, stock_key(w, i), &s)?;
    }
    Ok(())
}

fn load_district(
    spec: &TpccSpec,
    t: &Tables,
    loader: &mut Loader<'_>,
    rng: &mut SmallRng,
    w: u64,
    d: u64,
) -> Result<()> {
    let mut r = [0u8; district::BYTES];
    put_i32(&mut r, district::ID, d);
    put_i32(&mut r, district::W_ID, w);
    random::a_string(rng, &mut r[district::D_NAME..district::D_NAME + 10], 6, 10);
    address(rng, &mut r[district::STREET_1..district::STREET_1 + 71]);
    row::put_i64(&mut r, district::TAX, rng.random_range(0..=2000));
    row::put_i64(&mut r, district::YTD, INITIAL_PAYMENT_CENTS * spec.customers_per_district as i64);
    row::put_i64(&mut r, district::NEXT_O_ID, spec.orders_per_district as i64 + 1);
    loader.insert(t.district, district_key(w, d), &r)?;
    load_customers(spec, t, loader, rng, w, d)?;
    load_orders(spec, t, loader, rng, w, d)
}

/// Last-name number of customer `c` at load (clause 4.3.3.1).
pub fn load_last_name(rng: &mut SmallRng, c: u64) -> u64 {
    if c <= 1000 { c - 1 } else { nurand(rng, 255, 0, 999, C_LAST_LOAD) }
}

fn load_customers(
    spec: &TpccSpec,
    t: &Tables,
    loader: &mut Loader<'_>,
    rng: &mut SmallRng,
    w: u64,
    d: u64,
) -> Result<()> {
    let now = random::now_ns();
    let (mut r, mut h) = ([0u8; customer::BYTES], [0u8; history::BYTES]);
    for c in 1..=spec.customers_per_district {
        put_i32(&mut r, customer::ID, c);
        put_i32(&mut r, customer::D_ID, d);
        put_i32(&mut r, customer::W_ID, w);
        random::a_string(rng, &mut r[customer::FIRST..customer::FIRST + 16], 8, 16);
        r[customer::MIDDLE..customer::MIDDLE + 2].copy_from_slice(b"OE");
        let last = random::last_name(load_last_name(rng, c));
        r[customer::LAST..customer::LAST + 16].copy_from_slice(&last);
        address(rng, &mut r[customer::STREET_1..customer::STREET_1 + 71]);
        random::n_string(rng, &mut r[customer::PHONE..customer::PHONE + 16], 16);
        row::put_i64(&mut r, customer::SINCE, now);
        let credit = if rng.random_range(0..10) == 0 { b"BC" } else { b"GC" };
        r[customer::CREDIT..customer::CREDIT + 2].copy_from_slice(credit);
        row::put_i64(&mut r, customer::CREDIT_LIM, 50_000 * DOLLAR_CENTS);
        row::put_i64(&mut r, customer::DISCOUNT, rng.random_range(0..=5000));
        row::put_i64(&mut r, customer::BALANCE, -INITIAL_PAYMENT_CENTS);
        row::put_i64(&mut r, customer::YTD_PAYMENT, INITIAL_PAYMENT_CENTS);
        row::put_i64(&mut r, customer::PAYMENT_CNT, 1);
        row::put_i64(&mut r, customer::DELIVERY_CNT, 0);
        random::a_string(rng, &mut r[customer::DATA..customer::DATA + 500], 300, 500);
        loader.insert(t.customer, customer_key(w, d, c), &r)?;

        for (at, v) in [
            (history::C_ID, c),
            (history::C_D_ID, d),
            (history::C_W_ID, w),
            (history::D_ID, d),
            (history::W_ID, w),
        ] {
            put_i32(&mut h, at, v);
        }
        row::put_i64(&mut h, history::DATE, now);
        row::put_i64(&mut h, history::AMOUNT, INITIAL_PAYMENT_CENTS);
        random::a_string(rng, &mut h[history::DATA..history::DATA + 24], 12, 24);
        loader.insert(t.history, history_key(w, d, c, 1), &h)?;
    }
    Ok(())
}

fn load_orders(
    spec: &TpccSpec,
    t: &Tables,
    loader: &mut Loader<'_>,
    rng: &mut SmallRng,
    w: u64,
    d: u64,
) -> Result<()> {
    let now = random::now_ns();
    let orders = spec.orders_per_district;
    let first_new = orders - spec.new_orders_per_district() + 1;
    let mut customers: Vec<u64> =
        (0..orders).map(|k| k % spec.customers_per_district + 1).collect();
    customers.shuffle(rng);
    let (mut r, mut l, mut n) =
        ([0u8; orders::BYTES], [0u8; order_line::BYTES], [0u8; new_order::BYTES]);
    for o in 1..=orders {
        let delivered = o < first_new;
        let lines = rng.random_range(5..=15u64);
        for (at, v) in [
            (orders::ID, o),
            (orders::D_ID, d),
            (orders::W_ID, w),
            (orders::C_ID, customers[o as usize - 1]),
        ] {
            put_i32(&mut r, at, v);
        }
        row::put_i64(&mut r, orders::ENTRY_D, now);
        put_i32(&mut r, orders::CARRIER_ID, if delivered { rng.random_range(1..=10) } else { 0 });
        put_i32(&mut r, orders::OL_CNT, lines);
        put_i32(&mut r, orders::ALL_LOCAL, 1);
        loader.insert(t.orders, order_key(w, d, o), &r)?;
        for number in 1..=lines {
            for (at, v) in [
                (order_line::O_ID, o),
                (order_line::D_ID, d),
                (order_line::W_ID, w),
                (order_line::NUMBER, number),
            ] {
                put_i32(&mut l, at, v);
            }
            put_i32(&mut l, order_line::I_ID, rng.random_range(1..=spec.items));
            put_i32(&mut l, order_line::SUPPLY_W_ID, w);
            row::put_i64(&mut l, order_line::DELIVERY_D, if delivered { now } else { 0 });
            put_i32(&mut l, order_line::QUANTITY, 5);
            let amount =
                if delivered { 0 } else { rng.random_range(1..=10_000 * DOLLAR_CENTS - 1) };
            row::put_i64(&mut l, order_line::AMOUNT, amount);
            random::a_string(
                rng,
                &mut l[order_line::DIST_INFO..order_line::DIST_INFO + 24],
                24,
                24,
            );
            loader.insert(t.order_line, order_line_key(w, d, o, number), &l)?;
        }
        if !delivered {
            for (at, v) in [(new_order::O_ID, o), (new_order::D_ID, d), (new_order::W_ID, w)] {
                put_i32(&mut n, at, v);
            }
            loader.insert(t.new_order, order_key(w, d, o), &n)?;
        }
    }
    Ok(())
}
