//! TPC-C's random value rules (clause 4.3.2): NURand, a-strings and
//! n-strings, last names from syllables, zip codes, the ORIGINAL marker.
//!
//! NURand's constant C differs between load and run (clause 2.1.6.1): the
//! last-name constants below keep the required distance (65..=119, not 96 or
//! 112) between `C_LAST_LOAD` and `C_LAST_RUN`.

use rand::Rng;
use rand::rngs::SmallRng;

pub const C_LAST_LOAD: u64 = 157;
pub const C_LAST_RUN: u64 = 223;
pub const C_ID: u64 = 259;
pub const OL_I_ID: u64 = 7911;

const _: () = {
    let delta = C_LAST_RUN - C_LAST_LOAD;
    assert!(delta >= 65 && delta <= 119 && delta != 96 && delta != 112);
};

/// NURand(A, x, y) with constant `c`.
pub fn nurand(rng: &mut SmallRng, a: u64, x: u64, y: u64, c: u64) -> u64 {
    ((rng.random_range(0..=a) | rng.random_range(x..=y)) + c) % (y - x + 1) + x
}

const SYLLABLES: [&str; 10] =
    ["BAR", "OUGHT", "ABLE", "PRI", "PRES", "ESE", "ANTI", "CALLY", "ATION", "EING"];

/// The last name of number `n` in 0..=999, zero-padded to 16 bytes.
pub fn last_name(n: u64) -> [u8; 16] {
    let mut out = [0u8; 16];
    let mut at = 0;
    for digit in [n / 100 % 10, n / 10 % 10, n % 10] {
        let s = SYLLABLES[digit as usize].as_bytes();
        out[at..at + s.len()].copy_from_slice(s);
        at += s.len();
    }
    out
}

const ALPHANUMERIC: &[u8] = b"abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789";

/// Random alphanumeric characters of length `min..=max` into `out` (zero-padded).
pub fn a_string(rng: &mut SmallRng, out: &mut [u8], min: usize, max: usize) {
    let len = rng.random_range(min..=max.min(out.len()));
    for b in out[..len].iter_mut() {
        *b = ALPHANUMERIC[rng.random_range(0..ALPHANUMERIC.len())];
    }
    out[len..].fill(0);
}

/// Random digits of length `len` into `out` (zero-padded).
pub fn n_string(rng: &mut SmallRng, out: &mut [u8], len: usize) {
    for b in out[..len].iter_mut() {
        *b = b'0' + rng.random_range(0..10u8);
    }
    out[len..].fill(0);
}

/// A zip code: four random digits then "11111".
pub fn zip(rng: &mut SmallRng, out: &mut [u8]) {
    n_string(rng, &mut out[..4], 4);
    out[4..9].copy_from_slice(b"11111");
}

/// An a-string of `min..=max` with "ORIGINAL" at a random place 10 % of the time.
pub fn data_with_original(rng: &mut SmallRng, out: &mut [u8], min: usize, max: usize) {
    a_string(rng, out, min, max);
    if rng.random_range(0..10) == 0 {
        let len = out.iter().position(|b| *b == 0).unwrap_or(out.len());
        let at = rng.random_range(0..=len - 8);
        out[at..at + 8].copy_from_slice(b"ORIGINAL");
    }
}

/// Nanoseconds since the Unix epoch (TPC-C's "current date/time").
pub fn now_ns() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_nanos() as i64)
        .unwrap_or(1)
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::SeedableRng;

    #[test]
    fn last_names_are_built_from_three_syllables() {
        assert_eq!(&last_name(0)[..9], b"BARBARBAR");
        assert_eq!(&last_name(371)[..12], b"PRICALLYOUGH");
        assert_eq!(last_name(999).iter().position(|b| *b == 0), Some(12));
    }

    #[test]
    fn nurand_stays_in_range() {
        let mut rng = SmallRng::seed_from_u64(1);
        for _ in 0..10_000 {
            let v = nurand(&mut rng, 1023, 1, 30, C_ID);
            assert!((1..=30).contains(&v));
        }
    }

    #[test]
    fn data_strings_have_the_requested_length() {
        let mut rng = SmallRng::seed_from_u64(2);
        let mut out = [0u8; 50];
        for _ in 0..1000 {
            data_with_original(&mut rng, &mut out, 26, 50);
            let len = out.iter().position(|b| *b == 0).unwrap_or(50);
            assert!((26..=50).contains(&len));
        }
    }
}
