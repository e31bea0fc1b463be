//! Skewed key generators: Zipf (Gray et al.), YCSB's scrambled Zipfian, and
//! YCSB's `latest`.
//!
//! ZIPF. Rank `r` in `0..n` (0 the most popular) is drawn with probability
//! `(r + 1)^-θ / ζ(n, θ)`. For θ in `[0, 1)` we use the method of Gray et al.,
//! "Quickly generating billion-record synthetic databases" (SIGMOD '94), which
//! the Zen paper, DBx1000 and YCSB use: after `ζ(n, θ)` is known, one uniform
//! draw and one `powf` give a rank. `ζ(n, θ) = Σ_{i=1..n} i^-θ` costs O(n), so
//! it is computed once per `(n, θ)` in the process and cached ([`zeta`]).
//! Gray's closed form is exact for ranks 0 and 1 and an approximation of the
//! tail that is close for the θ this testbed uses (the chi-square tests below
//! bound how close). θ = 1 makes Gray's exponent `1 / (1 - θ)` infinite, so
//! for θ ≥ 1 we sample by rejection-inversion (Hörmann and Derflinger, via
//! `rand_distr::Zipf`) instead, which needs no ζ at all. Negative or non-finite
//! θ is refused.
//!
//! SCRAMBLED. YCSB's `ScrambledZipfianGenerator` hashes the Zipf rank with
//! 64-bit FNV-1a (`fnvhash64`) and takes it modulo `n`, so the popular keys are
//! spread over the key space instead of clustered at its start. Like YCSB,
//! collisions of the hash mean a few keys are never drawn. (YCSB draws the
//! rank from a fixed 10^10-item Zipfian; we draw it over `n` items, which keeps
//! the skew of the requested θ for the actual key count.)
//!
//! LATEST. YCSB's `SkewedLatestGenerator` for workload D: the newest key is
//! the most popular, `newest - zipf(newest + 1)`. Keys are inserted while it
//! runs, so [`Latest`] grows its ζ incrementally (`ζ(m) = ζ(n) + Σ_{n<i≤m}
//! i^-θ`), per worker, instead of recomputing it.

use std::collections::HashMap;
use std::sync::{Mutex, OnceLock};

use rand::Rng;
use rand_distr::Distribution;

use crate::error::{Error, Result};

/// `ζ(n, θ) = Σ_{i=1..n} i^-θ`, computed once per `(n, θ)` per process.
pub fn zeta(n: u64, theta: f64) -> f64 {
    static CACHE: OnceLock<Mutex<HashMap<(u64, u64), f64>>> = OnceLock::new();
    let cache = CACHE.get_or_init(|| Mutex::new(HashMap::new()));
    let key = (n, theta.to_bits());
    if let Some(z) = cache.lock().unwrap_or_else(|e| e.into_inner()).get(&key) {
        return *z;
    }
    let z = zeta_range(0, n, theta);
    cache.lock().unwrap_or_else(|e| e.into_inner()).insert(key, z);
    z
}

/// `Σ_{i=from+1..=to} i^-θ`.
fn zeta_range(from: u64, to: u64, theta: f64) -> f64 {
    (from + 1..=to).map(|i| (i as f64).powf(-theta)).sum()
}

/// YCSB's `fnvhash64`: FNV-1a over the 8 little-endian bytes of `value`.
pub fn fnv64(value: u64) -> u64 {
    const OFFSET_BASIS: u64 = 0xCBF2_9CE4_8422_2325;
    const PRIME: u64 = 1_099_511_628_211;
    let mut hash = OFFSET_BASIS;
    for byte in value.to_le_bytes() {
        hash ^= u64::from(byte);
        hash = hash.wrapping_mul(PRIME);
    }
    // YCSB returns Math.abs of the signed value.
    (hash as i64).wrapping_abs() as u64
}

/// How ranks are drawn; see the module docs.
#[derive(Debug, Clone)]
enum Method {
    /// Gray et al., θ in [0, 1).
    Gray { alpha: f64, zetan: f64, eta: f64, second_threshold: f64 },
    /// Rejection-inversion, θ ≥ 1.
    Inversion(rand_distr::Zipf<f64>),
}

/// Zipf-distributed ranks in `0..n`. See the module docs.
#[derive(Debug, Clone)]
pub struct Zipf {
    n: u64,
    theta: f64,
    method: Method,
}

impl Zipf {
    /// A generator over `n ≥ 1` items with skew `theta ≥ 0`.
    pub fn new(n: u64, theta: f64) -> Result<Zipf> {
        Self::validate(n, theta)?;
        let method = if theta < 1.0 {
            Self::gray(n, theta, zeta(n, theta))
        } else {
            Self::inversion(n, theta)?
        };
        Ok(Zipf { n, theta, method })
    }

    pub(crate) fn validate(n: u64, theta: f64) -> Result<()> {
        if n == 0 {
            return Err(Error::invalid("zipf item count", n, "at least 1 item"));
        }
        if !(theta.is_finite() && theta >= 0.0) {
            return Err(Error::invalid(
                "theta",
                theta,
                "a finite number >= 0 (0 = uniform; YCSB's default is 0.99)",
            ));
        }
        Ok(())
    }

    fn gray(n: u64, theta: f64, zetan: f64) -> Method {
        let zeta2 = 1.0 + 0.5f64.powf(theta);
        let eta = if n <= 2 {
            // Gray's tail formula divides by zero for n ≤ 2; ranks 0 and 1
            // are covered exactly by the two thresholds anyway.
            0.0
        } else {
            (1.0 - (2.0 / n as f64).powf(1.0 - theta)) / (1.0 - zeta2 / zetan)
        };
        Method::Gray { alpha: 1.0 / (1.0 - theta), zetan, eta, second_threshold: zeta2 }
    }

    fn inversion(n: u64, theta: f64) -> Result<Method> {
        rand_distr::Zipf::new(n as f64, theta)
            .map(Method::Inversion)
            .map_err(|e| Error::invalid("theta", theta, format!("rejected by the sampler: {e}")))
    }

    pub fn n(&self) -> u64 {
        self.n
    }

    pub fn theta(&self) -> f64 {
        self.theta
    }

    /// One rank in `0..n`; 0 is the most popular.
    #[inline]
    pub fn sample<R: Rng + ?Sized>(&self, rng: &mut R) -> u64 {
        match &self.method {
            Method::Gray { alpha, zetan, eta, second_threshold } => {
                let u: f64 = rng.random();
                let uz = u * zetan;
                if uz < 1.0 {
                    return 0;
                }
                if uz < *second_threshold {
                    return 1.min(self.n - 1);
                }
                let rank = (self.n as f64 * (eta * u - eta + 1.0).powf(*alpha)) as u64;
                rank.min(self.n - 1)
            }
            Method::Inversion(z) => (z.sample(rng) as u64).clamp(1, self.n) - 1,
        }
    }

    /// The exact probability of `rank` under Zipf(n, θ) (for tests and docs).
    pub fn probability(&self, rank: u64) -> f64 {
        if rank >= self.n {
            return 0.0;
        }
        ((rank + 1) as f64).powf(-self.theta) / zeta(self.n, self.theta)
    }

    /// Grow to `n` items (used by [`Latest`]); ζ is extended, not recomputed.
    fn grow_to(&mut self, n: u64) -> Result<()> {
        if n <= self.n {
            return Ok(());
        }
        self.method = match &self.method {
            Method::Gray { zetan, .. } => {
                let zetan = zetan + zeta_range(self.n, n, self.theta);
                Self::gray(n, self.theta, zetan)
            }
            Method::Inversion(_) => Self::inversion(n, self.theta)?,
        };
        self.n = n;
        Ok(())
    }
}

/// YCSB's scrambled Zipfian: popular keys spread over `0..n` by FNV hashing.
#[derive(Debug, Clone)]
pub struct ScrambledZipf {
    zipf: Zipf,
}

impl ScrambledZipf {
    pub fn new(n: u64, theta: f64) -> Result<ScrambledZipf> {
        Ok(ScrambledZipf { zipf: Zipf::new(n, theta)? })
    }

    #[inline]
    pub fn sample<R: Rng + ?Sized>(&self, rng: &mut R) -> u64 {
        fnv64(self.zipf.sample(rng)) % self.zipf.n
    }
}

/// YCSB's `latest`: recent keys are popular. One per worker (it grows ζ).
#[derive(Debug, Clone)]
pub struct Latest {
    zipf: Zipf,
}

impl Latest {
    /// Starts over `initial_n` keys; grows as newer keys appear.
    pub fn new(initial_n: u64, theta: f64) -> Result<Latest> {
        Ok(Latest { zipf: Zipf::new(initial_n.max(1), theta)? })
    }

    /// A key in `0..=newest`, `newest` the most popular.
    pub fn sample<R: Rng + ?Sized>(&mut self, rng: &mut R, newest: u64) -> u64 {
        // Growing only fails for a θ the constructor already accepted.
        if self.zipf.grow_to(newest + 1).is_err() {
            return newest;
        }
        newest - self.zipf.sample(rng).min(newest)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::SeedableRng;
    use rand::rngs::SmallRng;

    /// Pearson's statistic over rank buckets (each with ≥ 50 expected draws),
    /// divided by its degrees of freedom: ≈ 1 when the draws follow `p`.
    fn chi_square_per_dof(counts: &[u64], p: impl Fn(u64) -> f64, draws: u64) -> f64 {
        let (mut stat, mut buckets) = (0.0, 0usize);
        let (mut observed, mut expected) = (0.0, 0.0);
        for (rank, count) in counts.iter().enumerate() {
            observed += *count as f64;
            expected += p(rank as u64) * draws as f64;
            if expected >= 50.0 || rank + 1 == counts.len() {
                stat += (observed - expected).powi(2) / expected;
                buckets += 1;
                (observed, expected) = (0.0, 0.0);
            }
        }
        stat / (buckets - 1) as f64
    }

    fn draw(zipf: &Zipf, draws: u64, seed: u64) -> Vec<u64> {
        let mut rng = SmallRng::seed_from_u64(seed);
        let mut counts = vec![0u64; zipf.n() as usize];
        for _ in 0..draws {
            counts[zipf.sample(&mut rng) as usize] += 1;
        }
        counts
    }

    #[test]
    fn gray_frequencies_match_theory_by_chi_square() {
        for theta in [0.0, 0.6, 0.95, 0.99] {
            let zipf = Zipf::new(1000, theta).unwrap();
            let draws = 400_000;
            let counts = draw(&zipf, draws, 7);
            let chi = chi_square_per_dof(&counts, |r| zipf.probability(r), draws);
            // A correct sampler gives ≈ 1; Gray's tail approximation adds a
            // little; a wrong θ or an off-by-one rank gives ≫ 10.
            assert!(chi < 3.0, "θ={theta}: chi-square per degree of freedom {chi}");
        }
    }

    #[test]
    fn inversion_frequencies_match_theory_for_theta_at_least_one() {
        for theta in [1.0, 1.5] {
            let zipf = Zipf::new(500, theta).unwrap();
            let draws = 300_000;
            let counts = draw(&zipf, draws, 11);
            let chi = chi_square_per_dof(&counts, |r| zipf.probability(r), draws);
            assert!(chi < 3.0, "θ={theta}: chi-square per degree of freedom {chi}");
        }
    }

    #[test]
    fn a_wrong_theta_is_rejected_by_the_chi_square_test() {
        // Guards the test above: it must be able to fail.
        let zipf = Zipf::new(1000, 0.99).unwrap();
        let other = Zipf::new(1000, 0.9).unwrap();
        let counts = draw(&zipf, 400_000, 3);
        let chi = chi_square_per_dof(&counts, |r| other.probability(r), 400_000);
        assert!(chi > 10.0, "chi-square per degree of freedom {chi}");
    }

    #[test]
    fn negative_or_nan_theta_and_zero_items_are_refused() {
        assert!(matches!(Zipf::new(10, -0.1), Err(Error::InvalidParameter { .. })));
        assert!(matches!(Zipf::new(10, f64::NAN), Err(Error::InvalidParameter { .. })));
        assert!(matches!(Zipf::new(0, 0.5), Err(Error::InvalidParameter { .. })));
    }

    #[test]
    fn tiny_key_spaces_stay_in_range() {
        let mut rng = SmallRng::seed_from_u64(1);
        for n in 1..4 {
            let zipf = Zipf::new(n, 0.99).unwrap();
            assert!((0..1000).all(|_| zipf.sample(&mut rng) < n));
        }
    }

    #[test]
    fn zeta_is_cached_and_matches_the_sum() {
        let direct: f64 = (1..=100u64).map(|i| (i as f64).powf(-0.6)).sum();
        assert!((zeta(100, 0.6) - direct).abs() < 1e-12);
        assert_eq!(zeta(100, 0.6).to_bits(), zeta(100, 0.6).to_bits());
    }

    #[test]
    fn fnv64_is_ycsb_fnvhash64() {
        // Known answers of YCSB's Utils.fnvhash64 (FNV-1a over 8 bytes, then
        // Math.abs), computed independently of this code.
        assert_eq!(fnv64(0), 0x5738_07CD_D7E5_C63B);
        assert_eq!(fnv64(1), 0x7632_CED6_E2D5_105C);
    }

    #[test]
    fn scrambled_keys_stay_in_range_and_are_spread() {
        let s = ScrambledZipf::new(10_000, 0.99).unwrap();
        let mut rng = SmallRng::seed_from_u64(5);
        let keys: Vec<u64> = (0..10_000).map(|_| s.sample(&mut rng)).collect();
        assert!(keys.iter().all(|k| *k < 10_000));
        // Unscrambled, rank 0 would be key 0; scrambled, the hottest key is elsewhere.
        let zeros = keys.iter().filter(|k| **k == 0).count();
        assert!(zeros < 500, "key 0 drawn {zeros} times");
    }

    #[test]
    fn latest_prefers_the_newest_key_and_grows() {
        let mut latest = Latest::new(100, 0.99).unwrap();
        let mut rng = SmallRng::seed_from_u64(9);
        let newest_hits = (0..10_000).filter(|_| latest.sample(&mut rng, 99) == 99).count();
        assert!(newest_hits > 1000, "newest drawn {newest_hits} times");
        let grown: Vec<u64> = (0..1000).map(|_| latest.sample(&mut rng, 199)).collect();
        assert!(grown.iter().all(|k| *k <= 199));
        assert!(grown.iter().filter(|k| **k == 199).count() > 100);
    }
}
