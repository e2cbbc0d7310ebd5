//! Statistics over replications (mean and Student-t 95% confidence
//! interval) and per-run percentiles of microsecond durations.

use hdrhistogram::Histogram;
use statrs::distribution::{ContinuousCDF, Normal};

/// Arithmetic mean; NaN for an empty slice.
pub fn mean(xs: &[f64]) -> f64 {
    if xs.is_empty() {
        return f64::NAN;
    }
    xs.iter().sum::<f64>() / xs.len() as f64
}

/// Sample standard deviation (n - 1 denominator); NaN for n < 2.
pub fn sample_sd(xs: &[f64]) -> f64 {
    if xs.len() < 2 {
        return f64::NAN;
    }
    let m = mean(xs);
    let ss: f64 = xs.iter().map(|x| (x - m) * (x - m)).sum();
    (ss / (xs.len() - 1) as f64).sqrt()
}

/// Half-width of the 95% confidence interval of the mean:
/// `t_{0.975, n-1} * sd / sqrt(n)` with the sample standard deviation `sd`.
/// 0 for n < 2 (no spread can be estimated). NaN if any value is NaN.
pub fn ci95_half_width(xs: &[f64]) -> f64 {
    let n = xs.len();
    if n < 2 {
        return 0.0;
    }
    t975(n as u64 - 1) * sample_sd(xs) / (n as f64).sqrt()
}

/// Exact two-sided 95% Student-t quantiles (`t_{0.975, dof}`) for
/// dof = 1..=30, as the nearest f64 (computed with mpmath by
/// inverting the regularised incomplete beta function).
const T975: [f64; 30] = [
    12.706204736174705,
    4.302652729749464,
    3.1824463052837095,
    2.7764451051977943,
    2.5705818356363155,
    2.44691185114497,
    2.3646242515927853,
    2.3060041352041667,
    2.2621571627982053,
    2.228138851986275,
    2.2009851600916397,
    2.178812829667229,
    2.1603686564627926,
    2.144786687917804,
    2.1314495455597755,
    2.1199052992212546,
    2.109815577833317,
    2.1009220402410387,
    2.0930240544083096,
    2.085963447265865,
    2.0796138447276804,
    2.0738730679040263,
    2.0686576104190486,
    2.063898561628026,
    2.0595385527532977,
    2.055529438642873,
    2.0518305164802855,
    2.048407141795245,
    2.0452296421327043,
    2.042272456301238,
];

/// The standard normal 97.5% quantile.
const Z975: f64 = 1.959_963_984_540_054_3;

/// Two-sided two-proportion z test: (z, p). Used by `live --compare` and
/// by `calibrate`'s fit.
pub fn two_proportion(x1: f64, n1: f64, x2: f64, n2: f64) -> (f64, f64) {
    if n1 <= 0.0 || n2 <= 0.0 {
        return (f64::NAN, f64::NAN);
    }
    let p = (x1 + x2) / (n1 + n2);
    let se = (p * (1.0 - p) * (1.0 / n1 + 1.0 / n2)).sqrt();
    let d = x1 / n1 - x2 / n2;
    if se == 0.0 {
        return if d == 0.0 {
            (0.0, 1.0)
        } else {
            (f64::INFINITY, 0.0)
        };
    }
    let z = d / se;
    let p = match Normal::new(0.0, 1.0) {
        Ok(nd) => 2.0 * (1.0 - nd.cdf(z.abs())),
        Err(_) => f64::NAN,
    };
    (z, p)
}

/// `t_{0.975, dof}`, the 97.5% quantile of Student's t with `dof` degrees
/// of freedom. Exact table for dof <= 30; above, the Cornish-Fisher
/// expansion in 1/dof to the fourth order (Abramowitz & Stegun 26.7.5),
/// whose absolute error is below 3e-8 at dof = 31 and falls as dof^-5.
/// dof = 0 gives +inf. Not statrs's `StudentsT::inverse_cdf`, whose
/// last digits differ and would change every printed CI (unit test
/// `t_quantiles_agree_with_statrs` pins by how much).
pub fn t975(dof: u64) -> f64 {
    match dof {
        0 => f64::INFINITY,
        1..=30 => T975[(dof - 1) as usize],
        _ => {
            let z = Z975;
            let v = dof as f64;
            let z2 = z * z;
            let g1 = (z2 + 1.0) * z / 4.0;
            let g2 = ((5.0 * z2 + 16.0) * z2 + 3.0) * z / 96.0;
            let g3 = (((3.0 * z2 + 19.0) * z2 + 17.0) * z2 - 15.0) * z / 384.0;
            let g4 =
                ((((79.0 * z2 + 776.0) * z2 + 1482.0) * z2 - 1920.0) * z2 - 945.0) * z / 92160.0;
            z + (g1 + (g2 + (g3 + g4 / v) / v) / v) / v
        }
    }
}

/// Mean and 95% confidence half-width over replications.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Summary {
    pub mean: f64,
    /// Half-width of the 95% CI (0 when n < 2).
    pub ci95: f64,
    pub n: usize,
}

impl Summary {
    /// Summarise replication values (mean is NaN when `xs` is empty).
    pub fn of(xs: &[f64]) -> Summary {
        Summary {
            mean: mean(xs),
            ci95: ci95_half_width(xs),
            n: xs.len(),
        }
    }
}

/// Percentiles of microsecond values over one replication.
///
/// Backed by an auto-resizing `hdrhistogram::Histogram<u64>` with 3
/// significant digits: values below 2048 µs are stored exactly; above, each
/// value shares a bucket with its neighbours within 1/1024 (< 0.1%) of it.
///
/// [`value_at_percentile`](Self::value_at_percentile) is the **nearest-rank**
/// percentile of docs/model.md (modelling choice 13): for `n` recorded values and
/// percentile `p`, the value of rank `ceil(p/100 * n)` (at least 1) in
/// ascending order, except that the histogram reports the highest value of
/// that value's bucket, which is exact below 2048 µs and at most 0.1% above
/// the true sample otherwise.
#[derive(Debug, Clone)]
pub struct Percentiles {
    h: Histogram<u64>,
}

/// The largest value a new [`Percentiles`] has room for before it grows.
const PRESIZED_US: u64 = 60_000_000;

impl Default for Percentiles {
    fn default() -> Self {
        Self::new()
    }
}

impl Percentiles {
    /// An empty recorder.
    pub fn new() -> Self {
        // Room for a minute up front, so a run's first large values do not
        // grow it step by step; it still grows beyond that (auto-resize).
        // The bucket layout depends only on the 3 significant digits and
        // the lowest value (1): the same values give the same answers.
        let mut h = Histogram::new_with_max(PRESIZED_US, 3)
            .or_else(|_| Histogram::new(3))
            .expect("hdrhistogram accepts 3 significant digits");
        h.auto(true);
        Percentiles { h }
    }

    /// Record one value in microseconds. Values above the histogram's
    /// largest trackable value (about 2^62 µs) are clamped to it.
    pub fn record(&mut self, us: u64) {
        if self.h.record(us).is_err() {
            self.h.saturating_record(us);
        }
    }

    /// Number of values recorded.
    pub fn count(&self) -> u64 {
        self.h.len()
    }

    /// Nearest-rank percentile `p` (in percent, clamped to `0..=100`; NaN
    /// counts as 0): the value of rank `max(1, ceil(p/100 * n))`, as the
    /// highest value of its histogram bucket (see the type's docs). 0 when
    /// nothing was recorded.
    ///
    /// The rank is computed so that `p/100 * n` landing on an integer up to
    /// floating-point noise (e.g. `95.0 * 20 / 100`) is not bumped to the
    /// next rank, unlike `Histogram::value_at_percentile`.
    pub fn value_at_percentile(&self, p: f64) -> u64 {
        let n = self.h.len();
        if n == 0 {
            return 0;
        }
        self.h
            .value_at_quantile(rank_quantile(nearest_rank(p, n), n))
    }

    /// [`value_at_percentile`](Self::value_at_percentile) of each of `ps`,
    /// in one pass over the histogram.
    pub fn values_at_percentiles<const N: usize>(&self, ps: [f64; N]) -> [u64; N] {
        let n = self.h.len();
        let mut out = [0u64; N];
        if n == 0 {
            return out;
        }
        // Ranks in ascending order, with the slot each answer goes to:
        // `value_at_quantiles` answers them in one pass over the counts.
        let mut order: [(u64, usize); N] = std::array::from_fn(|i| (nearest_rank(ps[i], n), i));
        order.sort_unstable();
        let answers = self
            .h
            .value_at_quantiles(order.iter().map(|&(rank, _)| rank_quantile(rank, n)));
        for (&(_, i), v) in order.iter().zip(answers) {
            out[i] = v;
        }
        out
    }

    /// Add every value recorded in `other`.
    pub fn merge(&mut self, other: &Percentiles) {
        if self.h.add(&other.h).is_err() {
            // Only possible if `other` holds values beyond what `self` can
            // grow to, which `record` never produces; re-record clamped.
            for v in other.h.iter_recorded() {
                self.h
                    .saturating_record_n(v.value_iterated_to(), v.count_at_value());
            }
        }
    }
}

/// The quantile that makes hdrhistogram's `value_at_quantile(s)` stop at
/// rank `rank` (of `n >= 1`, `1 <= rank <= n`): it looks for the first
/// count reaching `ceil(q * n)`, and `(rank - 0.5) / n * n` lies within
/// rounding error of `rank - 0.5`, so its ceiling is `rank` exactly. The
/// quantile is never 0 (which would answer a bucket's lowest value), and
/// the answer is the highest value of the bucket holding the value of that
/// rank, as iterating over the recorded values gives it, without visiting
/// each of the histogram's slots through its iterator.
fn rank_quantile(rank: u64, n: u64) -> f64 {
    (rank as f64 - 0.5) / n as f64
}

/// `max(1, ceil(p/100 * n))`, clamped to `n`, tolerant of floating-point
/// noise when the product is an integer.
fn nearest_rank(p: f64, n: u64) -> u64 {
    let p = if p.is_nan() { 0.0 } else { p.clamp(0.0, 100.0) };
    let exact = p * n as f64 / 100.0;
    let nearest = exact.round();
    let r = if (exact - nearest).abs() <= 1e-9 * nearest.max(1.0) {
        nearest
    } else {
        exact.ceil()
    };
    (r as u64).clamp(1, n)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn close(a: f64, b: f64, tol: f64) -> bool {
        (a - b).abs() <= tol
    }

    #[test]
    fn mean_basic_and_empty() {
        assert!(mean(&[]).is_nan());
        assert_eq!(mean(&[2.0]), 2.0);
        assert_eq!(mean(&[1.0, 2.0, 3.0, 6.0]), 3.0);
    }

    #[test]
    fn t_quantiles_known_values() {
        assert!(close(t975(1), 12.706, 5e-4));
        assert!(close(t975(4), 2.776, 5e-4));
        assert!(close(t975(19), 2.093, 5e-4));
        assert!(close(t975(1_000_000_000), 1.960, 5e-4));
        assert!(close(t975(u64::MAX), Z975, 1e-12));
        assert_eq!(t975(0), f64::INFINITY);
        // Just past the table: reference values from mpmath.
        assert!(close(t975(31), 2.0395134463964086, 1e-7));
        assert!(close(t975(40), 2.0210753903062733, 1e-8));
        assert!(close(t975(50), 2.008559112100761, 1e-8));
        assert!(close(t975(100), 1.9839715185235522, 1e-9));
        assert!(close(t975(1000), 1.9623390808264085, 1e-12));
    }

    /// The table and the expansion are kept rather than statrs's
    /// `StudentsT::inverse_cdf`: summary.csv prints every f64 to the last
    /// bit, and statrs's quantiles differ from the exact table in the last
    /// digits (up to 1.6e-13 relative for dof <= 30) and from the expansion
    /// by up to 1.3e-8 (dof 31, falling to ~1e-12 by dof 200), so using
    /// them would change results. This pins how close the two are.
    #[test]
    fn t_quantiles_agree_with_statrs() {
        use statrs::distribution::{ContinuousCDF, StudentsT};
        for dof in 1..=2000u64 {
            let st = StudentsT::new(0.0, 1.0, dof as f64)
                .map(|t| t.inverse_cdf(0.975))
                .unwrap_or(f64::NAN);
            let tol = if dof <= 30 { 2e-13 } else { 1.5e-8 };
            assert!(
                close(t975(dof), st, tol * st),
                "dof {dof}: {} vs statrs {st}",
                t975(dof)
            );
        }
    }

    #[test]
    fn t_quantiles_decrease_with_dof() {
        let mut prev = f64::INFINITY;
        for dof in 1..500 {
            let t = t975(dof);
            assert!(t < prev && t > Z975, "dof {dof}: {t}");
            prev = t;
        }
    }

    #[test]
    fn ci95_values() {
        assert_eq!(ci95_half_width(&[]), 0.0);
        assert_eq!(ci95_half_width(&[5.0]), 0.0);
        // 1, 3: mean 2, sd sqrt(2), n = 2, so the half-width is t_{0.975,1}.
        let hw = ci95_half_width(&[1.0, 3.0]);
        assert!(close(hw, 12.706204736174705, 1e-12));
        // n = 5: 1..=5, sd = sqrt(2.5).
        let hw = ci95_half_width(&[1.0, 2.0, 3.0, 4.0, 5.0]);
        assert!(close(
            hw,
            2.7764451051977944 * 2.5f64.sqrt() / 5f64.sqrt(),
            1e-12
        ));
        // Constant data: no spread.
        assert_eq!(ci95_half_width(&[4.0; 20]), 0.0);
    }

    #[test]
    fn summary_of() {
        let s = Summary::of(&[1.0, 2.0, 3.0, 4.0, 5.0]);
        assert_eq!(s.n, 5);
        assert_eq!(s.mean, 3.0);
        assert!(close(s.ci95, 2.7764451051977944 * 0.5f64.sqrt(), 1e-12));
        let e = Summary::of(&[]);
        assert!(e.mean.is_nan());
        assert_eq!((e.ci95, e.n), (0.0, 0));
    }

    /// Nearest rank on a sorted slice: the reference definition.
    fn reference(sorted: &[u64], p: f64) -> u64 {
        let n = sorted.len() as u64;
        sorted[(nearest_rank(p, n) - 1) as usize]
    }

    #[test]
    fn nearest_rank_definition() {
        assert_eq!(nearest_rank(50.0, 1), 1);
        assert_eq!(nearest_rank(0.0, 10), 1);
        assert_eq!(nearest_rank(100.0, 10), 10);
        assert_eq!(nearest_rank(50.0, 10), 5);
        assert_eq!(nearest_rank(50.0, 11), 6);
        assert_eq!(nearest_rank(95.0, 20), 19);
        assert_eq!(nearest_rank(99.0, 100), 99);
        assert_eq!(nearest_rank(7.0, 100), 7); // 0.07 * 100 = 7.000000000000001
        assert_eq!(nearest_rank(95.0, 21), 20);
        assert_eq!(nearest_rank(f64::NAN, 10), 1);
        assert_eq!(nearest_rank(250.0, 10), 10);
    }

    #[test]
    fn percentiles_exact_below_2048() {
        let mut p = Percentiles::new();
        assert_eq!(p.count(), 0);
        assert_eq!(p.value_at_percentile(50.0), 0);
        // 1..=100 shuffled deterministically.
        let vals: Vec<u64> = (0..100u64).map(|i| (i * 37) % 100 + 1).collect();
        for &v in &vals {
            p.record(v);
        }
        assert_eq!(p.count(), 100);
        assert_eq!(p.value_at_percentile(50.0), 50);
        assert_eq!(p.value_at_percentile(95.0), 95);
        assert_eq!(p.value_at_percentile(99.0), 99);
        assert_eq!(p.value_at_percentile(100.0), 100);
        assert_eq!(p.value_at_percentile(0.0), 1);
        assert_eq!(p.value_at_percentile(7.0), 7);
        assert_eq!(p.value_at_percentile(0.5), 1);
        assert_eq!(p.value_at_percentile(50.5), 51);
    }

    #[test]
    fn percentiles_within_tenth_of_percent() {
        let mut p = Percentiles::new();
        let mut vals: Vec<u64> = (0..2000u64)
            .map(|i| 1000 + (i * 7919 % 2000) * 123_457)
            .collect();
        for &v in &vals {
            p.record(v);
        }
        vals.sort_unstable();
        for q in [1.0, 10.0, 50.0, 90.0, 95.0, 99.0, 99.9, 100.0] {
            let want = reference(&vals, q);
            let got = p.value_at_percentile(q);
            assert!(got >= want, "p{q}: {got} < {want}");
            assert!(
                (got - want) as f64 <= want as f64 / 1000.0,
                "p{q}: {got} vs {want}"
            );
        }
    }

    #[test]
    fn merge_equals_recording_all() {
        let mut a = Percentiles::new();
        let mut b = Percentiles::new();
        let mut all = Percentiles::new();
        for i in 0..500u64 {
            let v = i * i * 13 + 5;
            if i % 3 == 0 { &mut a } else { &mut b }.record(v);
            all.record(v);
        }
        a.merge(&b);
        assert_eq!(a.count(), all.count());
        for q in [0.0, 25.0, 50.0, 75.0, 95.0, 99.0, 100.0] {
            assert_eq!(a.value_at_percentile(q), all.value_at_percentile(q));
        }
        a.merge(&Percentiles::new());
        assert_eq!(a.count(), 500);
    }

    #[test]
    fn record_zero_and_huge() {
        let mut p = Percentiles::new();
        p.record(0);
        p.record(u64::MAX);
        assert_eq!(p.count(), 2);
        assert_eq!(p.value_at_percentile(50.0), 0);
        assert!(p.value_at_percentile(100.0) >= (1 << 61));
    }

    proptest::proptest! {
        /// Each percentile is the highest value of the histogram bucket
        /// that holds the value of nearest rank (the type's definition),
        /// for one call and for the one-pass form alike.
        #[test]
        fn percentiles_are_the_bucket_of_the_nearest_rank(
            values in proptest::collection::vec(0u64..(1 << 40), 1..300),
            ps in proptest::array::uniform4(-5.0f64..110.0),
        ) {
            let mut p = Percentiles::new();
            for &v in &values {
                p.record(v);
            }
            let mut sorted = values.clone();
            sorted.sort_unstable();
            let want = ps.map(|x| p.h.highest_equivalent(reference(&sorted, x)));
            proptest::prop_assert_eq!(ps.map(|x| p.value_at_percentile(x)), want);
            proptest::prop_assert_eq!(p.values_at_percentiles(ps), want);
        }

        /// The one-pass form answers what one call per percentile does,
        /// in any order of the requested percentiles.
        #[test]
        fn one_pass_percentiles_agree(
            values in proptest::collection::vec(0u64..10_000_000, 0..300),
            ps in proptest::array::uniform4(-5.0f64..110.0),
        ) {
            let mut p = Percentiles::new();
            for &v in &values {
                p.record(v);
            }
            let want = ps.map(|x| p.value_at_percentile(x));
            proptest::prop_assert_eq!(p.values_at_percentiles(ps), want);
        }
    }
}
