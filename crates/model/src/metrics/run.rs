//! Per-run accumulators (memory independent of the number of messages) and
//! the per-run result, as docs/metrics.md defines them.

use super::stats::Percentiles;

/// The metrics that compare schemes (docs/schemes.md): what a choice
/// answers (duplicates, unanswered, the time to the first answer) and what
/// it costs (the inference bill). The schemes figure and calibrate's
/// what-if show these.
pub const SCHEME_METRICS: [&str; 6] = [
    "duplicate_rate",
    "unanswered_rate",
    "ttfr_p50_ms",
    "ttfr_p95_ms",
    "inference_calls_per_msg",
    "inference_s_per_msg",
];

/// Metric names, in CSV column order ([`super::catalogue::CATALOGUE`]'s).
/// Rates are fractions in 0..1.
pub const METRICS: [&str; 21] = {
    let c = &super::catalogue::CATALOGUE;
    let mut names = [""; 21];
    let mut i = 0;
    while i < names.len() {
        names[i] = c[i].name;
        i += 1;
    }
    names
};

/// What one message contributed, handed over when it is finished.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct MessageOutcome {
    /// Agents that wanted to answer it.
    pub wanted: u32,
    /// Replies that reached the server.
    pub responses: u32,
    /// Post (server receipt) to first reply at the server, in µs.
    pub ttfr_us: Option<u64>,
    /// Agents that started inference on it.
    pub starters: u32,
}

/// Accumulates one run. Nothing in it grows with the number of messages
/// except the fixed-size histogram.
#[derive(Debug, Clone)]
pub struct RunAccumulator {
    pub messages: u64,
    pub duplicated: u64,
    pub unanswered: u64,
    pub responses: u64,
    pub ttfr: Percentiles,
    /// All inference time spent, µs (aborted time counts to the abort).
    pub inference_us: u128,
    /// Wasted inference time, µs.
    pub wasted_us: u128,
    /// Inferences started.
    pub started: u64,
    /// Inferences wasted: aborted, crashed, hung, completed after the first, lost replies.
    pub wasted_count: u64,
    pub claims: u64,
    pub lost: u64,
    /// Sum over wanted messages of the agents that started inference.
    pub starters: u64,
    /// Wanted messages on which exactly one agent started inference.
    pub single_starter: u64,
}

impl Default for RunAccumulator {
    fn default() -> Self {
        Self::new()
    }
}

impl RunAccumulator {
    pub fn new() -> Self {
        RunAccumulator {
            messages: 0,
            duplicated: 0,
            unanswered: 0,
            responses: 0,
            ttfr: Percentiles::new(),
            inference_us: 0,
            wasted_us: 0,
            started: 0,
            wasted_count: 0,
            claims: 0,
            lost: 0,
            starters: 0,
            single_starter: 0,
        }
    }

    /// A finished channel message. Messages nobody wanted to answer are
    /// outside every message metric.
    pub fn message(&mut self, m: MessageOutcome) {
        if m.wanted == 0 {
            return;
        }
        self.messages += 1;
        self.responses += u64::from(m.responses);
        self.starters += u64::from(m.starters);
        if m.starters == 1 {
            self.single_starter += 1;
        }
        match m.responses {
            0 => self.unanswered += 1,
            1 => {}
            _ => self.duplicated += 1,
        }
        if let Some(t) = m.ttfr_us {
            self.ttfr.record(t);
        }
    }

    /// An inference was started.
    pub fn started(&mut self) {
        self.started += 1;
    }

    /// Inference time spent usefully (the first reply to reach the server).
    pub fn useful(&mut self, us: u64) {
        self.inference_us += u128::from(us);
    }

    /// Inference time that is neither an answer nor wasted: the
    /// selector's (a selection is part of the bill, not a response).
    pub fn billed(&mut self, us: u64) {
        self.inference_us += u128::from(us);
    }

    /// Inference time (and one inference) wasted.
    pub fn wasted(&mut self, us: u64) {
        self.inference_us += u128::from(us);
        self.wasted_us += u128::from(us);
        self.wasted_count += 1;
    }

    /// One inference wasted whose time was already billed (a selection:
    /// billed when it started): `us` of it wasted.
    pub fn wasted_billed(&mut self, us: u64) {
        self.wasted_us += u128::from(us);
        self.wasted_count += 1;
    }

    /// Close the run.
    pub fn finish(&self, server: ServerCounts, events: u64) -> RunResult {
        let per = |x: u64| ratio(x as f64, self.messages as f64);
        let [p50, p95, p99] = self.ttfr.values_at_percentiles([50.0, 95.0, 99.0]);
        let ms = |v: u64| {
            if self.ttfr.count() == 0 {
                f64::NAN
            } else {
                v as f64 / 1000.0
            }
        };
        RunResult {
            values: [
                per(self.duplicated),
                per(self.responses),
                per(self.unanswered),
                ratio(self.wasted_us as f64, self.inference_us as f64),
                ratio(self.wasted_count as f64, self.started as f64),
                ms(p50),
                ms(p95),
                ms(p99),
                self.claims as f64,
                server.yields as f64,
                server.expired as f64,
                server.relayed as f64,
                self.lost as f64,
                events as f64,
                self.messages as f64,
                server.overruled as f64,
                self.started as f64,
                per(self.starters),
                per(self.single_starter),
                // The inference bill: every started inference (aborted,
                // crashed, hung and wasted ones too) and all its time.
                per(self.started),
                ratio(self.inference_us as f64 / 1e6, self.messages as f64),
            ],
        }
    }
}

/// The server's counters a run reports.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ServerCounts {
    pub yields: u64,
    pub expired: u64,
    pub relayed: u64,
    pub overruled: u64,
}

fn ratio(a: f64, b: f64) -> f64 {
    if b == 0.0 { 0.0 } else { a / b }
}

/// One replication's metrics, in [`METRICS`] order.
#[derive(Debug, Clone, PartialEq)]
pub struct RunResult {
    pub values: [f64; METRICS.len()],
}

impl RunResult {
    /// A metric by name.
    pub fn get(&self, name: &str) -> Option<f64> {
        METRICS
            .iter()
            .position(|m| *m == name)
            .map(|i| self.values[i])
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shares_sum_to_one() {
        let mut a = RunAccumulator::new();
        for (wanted, responses) in [(1, 0), (2, 1), (3, 2), (0, 0), (1, 1)] {
            a.message(MessageOutcome {
                wanted,
                responses,
                ttfr_us: (responses > 0).then_some(1000),
                starters: responses,
            });
        }
        let r = a.finish(ServerCounts::default(), 10);
        let dup = r.get("duplicate_rate").unwrap_or(f64::NAN);
        let un = r.get("unanswered_rate").unwrap_or(f64::NAN);
        assert_eq!(r.get("messages"), Some(4.0));
        assert!((dup - 0.25).abs() < 1e-12 && (un - 0.25).abs() < 1e-12);
        assert_eq!(r.get("responses_per_msg"), Some(1.0));
    }

    #[test]
    fn wasted_time_is_pooled() {
        let mut a = RunAccumulator::new();
        a.started();
        a.started();
        a.useful(3000);
        a.wasted(1000);
        let r = a.finish(ServerCounts::default(), 0);
        assert_eq!(r.get("wasted_inference_rate"), Some(0.25));
        assert_eq!(r.get("wasted_inference_count_rate"), Some(0.5));
    }

    #[test]
    fn the_bill_counts_every_started_inference() {
        let mut a = RunAccumulator::new();
        a.message(MessageOutcome {
            wanted: 3,
            responses: 1,
            ttfr_us: Some(1000),
            starters: 3,
        });
        for _ in 0..3 {
            a.started();
        }
        a.useful(4_000_000);
        a.wasted(1_000_000); // aborted after 1 s
        a.wasted(0); // hung
        let r = a.finish(ServerCounts::default(), 0);
        assert_eq!(r.get("inference_calls_per_msg"), Some(3.0));
        assert_eq!(r.get("inference_s_per_msg"), Some(5.0));
    }
}
