//! TPC-C's nine tables: column layouts with compile-time offsets, and the
//! packing of composite keys into the engine's u64 keys.
//!
//! Layouts follow clause 1.3 of the TPC-C specification with fixed-width
//! columns: strings are zero-padded `Bytes(n)`, money is i64 cents, tax and
//! discount rates are i64 ten-thousandths (0.1234 = 1234), dates are i64
//! nanoseconds since the Unix epoch and "null" dates and carrier ids are 0.
//! Every offset is a `const` computed from the column list, so a typo in a
//! column name fails the build.
//!
//! KEYS (all below 2^63, as the engine requires):
//!
//! ```text
//! warehouse   w                                 w < 2^16
//! district    w << 4 | d                        d in 1..=10
//! customer    district << 12 | c                c < 2^12 (3000 at full scale)
//! history     customer << 31 | payment_count    the customer's C_PAYMENT_CNT after the payment
//! orders      district << 32 | o                o < 2^32
//! new_order   same as orders
//! order_line  order << 4 | number               number in 1..=15
//! item        i                                 i < 2^20 (100,000 at full scale)
//! stock       w << 20 | i
//! ```
//!
//! HISTORY has no primary key in TPC-C. Keying a row by its customer and the
//! customer's payment count after the payment makes keys unique without a
//! shared counter: the same transaction increments C_PAYMENT_CNT, so two
//! payments of one customer conflict on the customer row anyway.

use zen_engine::ColumnType::{self, Bytes, I32, I64};
use zen_engine::TableSchema;

/// A column: name and type.
pub struct Col(pub &'static str, pub ColumnType);

const fn width(ty: ColumnType) -> usize {
    match ty {
        ColumnType::I32 => 4,
        ColumnType::I64 | ColumnType::U64 | ColumnType::F64 => 8,
        ColumnType::Bytes(n) => n as usize,
    }
}

const fn same(a: &str, b: &str) -> bool {
    let (a, b) = (a.as_bytes(), b.as_bytes());
    if a.len() != b.len() {
        return false;
    }
    let mut i = 0;
    while i < a.len() {
        if a[i] != b[i] {
            return false;
        }
        i += 1;
    }
    true
}

/// Byte offset of column `name`; a missing name fails const evaluation.
pub const fn offset(cols: &[Col], name: &str) -> usize {
    let mut at = 0;
    let mut i = 0;
    while i < cols.len() {
        if same(cols[i].0, name) {
            return at;
        }
        at += width(cols[i].1);
        i += 1;
    }
    panic!("no such column")
}

/// Bytes of a row of `cols`.
pub const fn row_bytes(cols: &[Col]) -> usize {
    let mut at = 0;
    let mut i = 0;
    while i < cols.len() {
        at += width(cols[i].1);
        i += 1;
    }
    at
}

fn schema(name: &str, cols: &[Col]) -> TableSchema {
    cols.iter().fold(TableSchema::new(name), |s, c| s.column(c.0, c.1))
}

pub mod warehouse {
    use super::*;
    pub const NAME: &str = "warehouse";
    pub const COLUMNS: &[Col] = &[
        Col("w_id", I32),
        Col("w_name", Bytes(10)),
        Col("w_street_1", Bytes(20)),
        Col("w_street_2", Bytes(20)),
        Col("w_city", Bytes(20)),
        Col("w_state", Bytes(2)),
        Col("w_zip", Bytes(9)),
        Col("w_tax", I64),
        Col("w_ytd", I64),
    ];
    pub const BYTES: usize = row_bytes(COLUMNS);
    pub const ID: usize = offset(COLUMNS, "w_id");
    pub const W_NAME: usize = offset(COLUMNS, "w_name");
    pub const STREET_1: usize = offset(COLUMNS, "w_street_1");
    pub const TAX: usize = offset(COLUMNS, "w_tax");
    pub const YTD: usize = offset(COLUMNS, "w_ytd");
}

pub mod district {
    use super::*;
    pub const NAME: &str = "district";
    pub const COLUMNS: &[Col] = &[
        Col("d_id", I32),
        Col("d_w_id", I32),
        Col("d_name", Bytes(10)),
        Col("d_street_1", Bytes(20)),
        Col("d_street_2", Bytes(20)),
        Col("d_city", Bytes(20)),
        Col("d_state", Bytes(2)),
        Col("d_zip", Bytes(9)),
        Col("d_tax", I64),
        Col("d_ytd", I64),
        Col("d_next_o_id", I64),
    ];
    pub const BYTES: usize = row_bytes(COLUMNS);
    pub const ID: usize = offset(COLUMNS, "d_id");
    pub const W_ID: usize = offset(COLUMNS, "d_w_id");
    pub const D_NAME: usize = offset(COLUMNS, "d_name");
    pub const STREET_1: usize = offset(COLUMNS, "d_street_1");
    pub const TAX: usize = offset(COLUMNS, "d_tax");
    pub const YTD: usize = offset(COLUMNS, "d_ytd");
    pub const NEXT_O_ID: usize = offset(COLUMNS, "d_next_o_id");
}

pub mod customer {
    use super::*;
    pub const NAME: &str = "customer";
    /// Secondary index 0: (c_w_id, c_d_id, c_last).
    pub const BY_LAST_NAME: usize = 0;
    pub const COLUMNS: &[Col] = &[
        Col("c_id", I32),
        Col("c_d_id", I32),
        Col("c_w_id", I32),
        Col("c_first", Bytes(16)),
        Col("c_middle", Bytes(2)),
        Col("c_last", Bytes(16)),
        Col("c_street_1", Bytes(20)),
        Col("c_street_2", Bytes(20)),
        Col("c_city", Bytes(20)),
        Col("c_state", Bytes(2)),
        Col("c_zip", Bytes(9)),
        Col("c_phone", Bytes(16)),
        Col("c_since", I64),
        Col("c_credit", Bytes(2)),
        Col("c_credit_lim", I64),
        Col("c_discount", I64),
        Col("c_balance", I64),
        Col("c_ytd_payment", I64),
        Col("c_payment_cnt", I64),
        Col("c_delivery_cnt", I64),
        Col("c_data", Bytes(500)),
    ];
    pub const BYTES: usize = row_bytes(COLUMNS);
    pub const ID: usize = offset(COLUMNS, "c_id");
    pub const D_ID: usize = offset(COLUMNS, "c_d_id");
    pub const W_ID: usize = offset(COLUMNS, "c_w_id");
    pub const FIRST: usize = offset(COLUMNS, "c_first");
    pub const MIDDLE: usize = offset(COLUMNS, "c_middle");
    pub const LAST: usize = offset(COLUMNS, "c_last");
    pub const STREET_1: usize = offset(COLUMNS, "c_street_1");
    pub const PHONE: usize = offset(COLUMNS, "c_phone");
    pub const SINCE: usize = offset(COLUMNS, "c_since");
    pub const CREDIT: usize = offset(COLUMNS, "c_credit");
    pub const CREDIT_LIM: usize = offset(COLUMNS, "c_credit_lim");
    pub const DISCOUNT: usize = offset(COLUMNS, "c_discount");
    pub const BALANCE: usize = offset(COLUMNS, "c_balance");
    pub const YTD_PAYMENT: usize = offset(COLUMNS, "c_ytd_payment");
    pub const PAYMENT_CNT: usize = offset(COLUMNS, "c_payment_cnt");
    pub const DELIVERY_CNT: usize = offset(COLUMNS, "c_delivery_cnt");
    pub const DATA: usize = offset(COLUMNS, "c_data");
    pub const DATA_BYTES: usize = 500;
}

pub mod history {
    use super::*;
    pub const NAME: &str = "history";
    pub const COLUMNS: &[Col] = &[
        Col("h_c_id", I32),
        Col("h_c_d_id", I32),
        Col("h_c_w_id", I32),
        Col("h_d_id", I32),
        Col("h_w_id", I32),
        Col("h_date", I64),
        Col("h_amount", I64),
        Col("h_data", Bytes(24)),
    ];
    pub const BYTES: usize = row_bytes(COLUMNS);
    pub const C_ID: usize = offset(COLUMNS, "h_c_id");
    pub const C_D_ID: usize = offset(COLUMNS, "h_c_d_id");
    pub const C_W_ID: usize = offset(COLUMNS, "h_c_w_id");
    pub const D_ID: usize = offset(COLUMNS, "h_d_id");
    pub const W_ID: usize = offset(COLUMNS, "h_w_id");
    pub const DATE: usize = offset(COLUMNS, "h_date");
    pub const AMOUNT: usize = offset(COLUMNS, "h_amount");
    pub const DATA: usize = offset(COLUMNS, "h_data");
}

pub mod new_order {
    use super::*;
    pub const NAME: &str = "new_order";
    pub const COLUMNS: &[Col] = &[Col("no_o_id", I32), Col("no_d_id", I32), Col("no_w_id", I32)];
    pub const BYTES: usize = row_bytes(COLUMNS);
    pub const O_ID: usize = offset(COLUMNS, "no_o_id");
    pub const D_ID: usize = offset(COLUMNS, "no_d_id");
    pub const W_ID: usize = offset(COLUMNS, "no_w_id");
}

pub mod orders {
    use super::*;
    pub const NAME: &str = "orders";
    /// Secondary index 0: (o_w_id, o_d_id, o_c_id).
    pub const BY_CUSTOMER: usize = 0;
    pub const COLUMNS: &[Col] = &[
        Col("o_id", I32),
        Col("o_d_id", I32),
        Col("o_w_id", I32),
        Col("o_c_id", I32),
        Col("o_entry_d", I64),
        Col("o_carrier_id", I32),
        Col("o_ol_cnt", I32),
        Col("o_all_local", I32),
    ];
    pub const BYTES: usize = row_bytes(COLUMNS);
    pub const ID: usize = offset(COLUMNS, "o_id");
    pub const D_ID: usize = offset(COLUMNS, "o_d_id");
    pub const W_ID: usize = offset(COLUMNS, "o_w_id");
    pub const C_ID: usize = offset(COLUMNS, "o_c_id");
    pub const ENTRY_D: usize = offset(COLUMNS, "o_entry_d");
    pub const CARRIER_ID: usize = offset(COLUMNS, "o_carrier_id");
    pub const OL_CNT: usize = offset(COLUMNS, "o_ol_cnt");
    pub const ALL_LOCAL: usize = offset(COLUMNS, "o_all_local");
}

pub mod order_line {
    use super::*;
    pub const NAME: &str = "order_line";
    pub const COLUMNS: &[Col] = &[
        Col("ol_o_id", I32),
        Col("ol_d_id", I32),
        Col("ol_w_id", I32),
        Col("ol_number", I32),
        Col("ol_i_id", I32),
        Col("ol_supply_w_id", I32),
        Col("ol_delivery_d", I64),
        Col("ol_quantity", I32),
        Col("ol_amount", I64),
        Col("ol_dist_info", Bytes(24)),
    ];
    pub const BYTES: usize = row_bytes(COLUMNS);
    pub const O_ID: usize = offset(COLUMNS, "ol_o_id");
    pub const D_ID: usize = offset(COLUMNS, "ol_d_id");
    pub const W_ID: usize = offset(COLUMNS, "ol_w_id");
    pub const NUMBER: usize = offset(COLUMNS, "ol_number");
    pub const I_ID: usize = offset(COLUMNS, "ol_i_id");
    pub const SUPPLY_W_ID: usize = offset(COLUMNS, "ol_supply_w_id");
    pub const DELIVERY_D: usize = offset(COLUMNS, "ol_delivery_d");
    pub const QUANTITY: usize = offset(COLUMNS, "ol_quantity");
    pub const AMOUNT: usize = offset(COLUMNS, "ol_amount");
    pub const DIST_INFO: usize = offset(COLUMNS, "ol_dist_info");
}

pub mod item {
    use super::*;
    pub const NAME: &str = "item";
    pub const COLUMNS: &[Col] = &[
        Col("i_id", I32),
        Col("i_im_id", I32),
        Col("i_name", Bytes(24)),
        Col("i_price", I64),
        Col("i_data", Bytes(50)),
    ];
    pub const BYTES: usize = row_bytes(COLUMNS);
    pub const ID: usize = offset(COLUMNS, "i_id");
    pub const IM_ID: usize = offset(COLUMNS, "i_im_id");
    pub const I_NAME: usize = offset(COLUMNS, "i_name");
    pub const PRICE: usize = offset(COLUMNS, "i_price");
    pub const DATA: usize = offset(COLUMNS, "i_data");
}

pub mod stock {
    use super::*;
    pub const NAME: &str = "stock";
    pub const COLUMNS: &[Col] = &[
        Col("s_i_id", I32),
        Col("s_w_id", I32),
        Col("s_quantity", I32),
        Col("s_dist_01", Bytes(24)),
        Col("s_dist_02", Bytes(24)),
        Col("s_dist_03", Bytes(24)),
        Col("s_dist_04", Bytes(24)),
        Col("s_dist_05", Bytes(24)),
        Col("s_dist_06", Bytes(24)),
        Col("s_dist_07", Bytes(24)),
        Col("s_dist_08", Bytes(24)),
        Col("s_dist_09", Bytes(24)),
        Col("s_dist_10", Bytes(24)),
        Col("s_ytd", I64),
        Col("s_order_cnt", I32),
        Col("s_remote_cnt", I32),
        Col("s_data", Bytes(50)),
    ];
    pub const BYTES: usize = row_bytes(COLUMNS);
    pub const I_ID: usize = offset(COLUMNS, "s_i_id");
    pub const W_ID: usize = offset(COLUMNS, "s_w_id");
    pub const QUANTITY: usize = offset(COLUMNS, "s_quantity");
    /// `s_dist_01`; district `d` is at `DIST_01 + (d - 1) * 24`.
    pub const DIST_01: usize = offset(COLUMNS, "s_dist_01");
    pub const YTD: usize = offset(COLUMNS, "s_ytd");
    pub const ORDER_CNT: usize = offset(COLUMNS, "s_order_cnt");
    pub const REMOTE_CNT: usize = offset(COLUMNS, "s_remote_cnt");
    pub const DATA: usize = offset(COLUMNS, "s_data");
}

/// The nine tables, in the order `Tables` stores their ids.
pub fn tables() -> Vec<TableSchema> {
    vec![
        schema(warehouse::NAME, warehouse::COLUMNS),
        schema(district::NAME, district::COLUMNS),
        schema(customer::NAME, customer::COLUMNS)
            .secondary_index("customer_by_last_name", &["c_w_id", "c_d_id", "c_last"]),
        schema(history::NAME, history::COLUMNS),
        schema(new_order::NAME, new_order::COLUMNS),
        schema(orders::NAME, orders::COLUMNS)
            .secondary_index("orders_by_customer", &["o_w_id", "o_d_id", "o_c_id"]),
        schema(order_line::NAME, order_line::COLUMNS),
        schema(item::NAME, item::COLUMNS),
        schema(stock::NAME, stock::COLUMNS),
    ]
}

/// Most warehouses the key packing allows.
pub const MAX_WAREHOUSES: u64 = (1 << 16) - 1;
/// Most customers per district the key packing allows.
pub const MAX_CUSTOMERS: u64 = (1 << 12) - 1;
/// Most items the key packing allows.
pub const MAX_ITEMS: u64 = (1 << 20) - 1;
pub const DISTRICTS: u64 = 10;

pub fn district_key(w: u64, d: u64) -> u64 {
    debug_assert!(w <= MAX_WAREHOUSES && (1..=DISTRICTS).contains(&d));
    w << 4 | d
}

pub fn customer_key(w: u64, d: u64, c: u64) -> u64 {
    debug_assert!(c <= MAX_CUSTOMERS);
    district_key(w, d) << 12 | c
}

pub fn history_key(w: u64, d: u64, c: u64, payment_count: u64) -> u64 {
    customer_key(w, d, c) << 31 | (payment_count & ((1 << 31) - 1))
}

pub fn order_key(w: u64, d: u64, o: u64) -> u64 {
    debug_assert!(o < 1 << 32);
    district_key(w, d) << 32 | o
}

pub fn order_line_key(w: u64, d: u64, o: u64, number: u64) -> u64 {
    debug_assert!(number < 16);
    order_key(w, d, o) << 4 | number
}

pub fn stock_key(w: u64, i: u64) -> u64 {
    debug_assert!(i <= MAX_ITEMS);
    w << 20 | i
}

/// (w, d) of a district, order or new-order key.
pub fn split_order_key(key: u64) -> (u64, u64, u64) {
    (key >> 36, (key >> 32) & 0xF, key & 0xFFFF_FFFF)
}

#[cfg(test)]
mod tests {
    use super::*;
    use zen_engine::schema::MAX_KEY;

    #[test]
    fn compile_time_offsets_agree_with_the_engine_schema() {
        for s in tables() {
            s.validate().unwrap();
        }
        let c = &tables()[2];
        assert_eq!(c.row_size(), customer::BYTES);
        assert_eq!(c.column_offset("c_balance").unwrap().0, customer::BALANCE);
        assert_eq!(tables()[8].column_offset("s_data").unwrap().0, stock::DATA);
        assert_eq!(tables()[6].row_size(), order_line::BYTES);
    }

    #[test]
    fn the_largest_keys_stay_below_two_to_the_sixty_three() {
        let (w, c) = (MAX_WAREHOUSES, MAX_CUSTOMERS);
        assert!(history_key(w, 10, c, (1 << 31) - 1) <= MAX_KEY);
        assert!(order_line_key(w, 10, u32::MAX as u64, 15) <= MAX_KEY);
        assert!(stock_key(w, MAX_ITEMS) <= MAX_KEY);
    }

    #[test]
    fn packed_keys_order_by_their_components_and_unpack() {
        assert!(order_key(1, 10, 5) < order_key(2, 1, 1));
        assert!(order_line_key(1, 1, 5, 15) < order_line_key(1, 1, 6, 1));
        assert_eq!(split_order_key(order_key(7, 3, 4242)), (7, 3, 4242));
        assert!(customer_key(1, 1, 3000) < customer_key(1, 2, 1));
    }
}
