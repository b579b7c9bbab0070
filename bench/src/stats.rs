//! Exact percentiles over every collected sample (nearest rank on the sorted samples).

/// p50, p99 and max of some samples.
#[derive(Debug, Clone, Copy, Default, serde::Serialize)]
pub struct Spread {
    /// How many samples.
    pub count: usize,
    /// The median (nearest rank).
    pub p50: f64,
    /// The 99th percentile (nearest rank).
    pub p99: f64,
    /// The largest sample.
    pub max: f64,
}

impl Spread {
    /// The spread of `samples`; all zero when there are none.
    pub fn of(mut samples: Vec<f64>) -> Self {
        if samples.is_empty() {
            return Spread::default();
        }
        samples.sort_by(f64::total_cmp);
        Spread {
            count: samples.len(),
            p50: rank(&samples, 50.0),
            p99: rank(&samples, 99.0),
            max: samples[samples.len() - 1],
        }
    }
}

/// The nearest-rank percentile `p` of sorted, non-empty `samples`: the smallest sample
/// with at least `p`% of the samples at or below it.
fn rank(samples: &[f64], p: f64) -> f64 {
    let n = samples.len();
    let at = ((p / 100.0) * n as f64).ceil() as usize;
    samples[at.clamp(1, n) - 1]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nearest_rank_percentiles() {
        let spread = Spread::of((1..=100).rev().map(f64::from).collect());
        assert_eq!((spread.p50, spread.p99, spread.max), (50.0, 99.0, 100.0));
        let one = Spread::of(vec![7.0]);
        assert_eq!((one.p50, one.p99, one.max), (7.0, 7.0, 7.0));
        assert_eq!(Spread::of(Vec::new()).count, 0);
    }
}
