//! The metric catalogue: one definition per metric herdsim measures, read
//! by every table, figure and report that shows one (`herdsim run`'s
//! table, the figures' panels, `tune`'s report, `live --compare`), so that
//! a metric is added, named or scaled in one place.

/// Which way a metric is better.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Better {
    Lower,
    Higher,
    /// A count that describes the run (events, messages, claims sent).
    Neither,
}

/// One metric: how it is stored (its CSV name) and how a person reads it.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Metric {
    /// The CSV column (`<name>_mean` in summary.csv).
    pub name: &'static str,
    /// The short column label of the printed tables (`dup`), if it has
    /// one; a table shows the name otherwise.
    pub label: Option<&'static str>,
    /// The unit it is shown in: `%`, `s` or nothing.
    pub unit: &'static str,
    /// Factor from the stored value to the shown one (100 for a share,
    /// 0.001 for a time stored in ms).
    pub scale: f64,
    /// A figure panel's title.
    pub title: &'static str,
    /// A figure's y axis name, without its unit.
    pub axis: &'static str,
    pub better: Better,
    /// A share (a fraction in 0..1 stored, 0..100% shown).
    pub share: bool,
}

const fn share(
    name: &'static str,
    label: Option<&'static str>,
    title: &'static str,
    axis: &'static str,
    better: Better,
) -> Metric {
    Metric {
        name,
        label,
        unit: "%",
        scale: 100.0,
        title,
        axis,
        better,
        share: true,
    }
}

/// A time stored in ms, shown in s.
const fn time(
    name: &'static str,
    label: Option<&'static str>,
    title: &'static str,
    axis: &'static str,
) -> Metric {
    Metric {
        name,
        label,
        unit: "s",
        scale: 0.001,
        title,
        axis,
        better: Better::Lower,
        share: false,
    }
}

/// A number shown as stored.
const fn plain(
    name: &'static str,
    label: Option<&'static str>,
    title: &'static str,
    axis: &'static str,
    better: Better,
) -> Metric {
    Metric {
        name,
        label,
        unit: "",
        scale: 1.0,
        title,
        axis,
        better,
        share: false,
    }
}

/// Every metric, in CSV column order ([`super::METRICS`]).
#[rustfmt::skip]
pub const CATALOGUE: [Metric; 21] = {
    use Better::{Higher, Lower, Neither};
    [
        share("duplicate_rate", Some("dup"), "Duplicate responses", "messages with 2+ replies", Lower),
        plain("responses_per_msg", Some("resp/msg"), "Responses per message", "replies per message", Neither),
        share("unanswered_rate", Some("unans"), "Unanswered messages", "messages with no reply", Lower),
        share("wasted_inference_rate", Some("waste"), "Wasted inference time", "inference time wasted", Lower),
        share("wasted_inference_count_rate", Some("waste n"), "Wasted inferences", "inferences wasted", Lower),
        time("ttfr_p50_ms", Some("p50"), "Median time to first response", "p50 time to first reply"),
        time("ttfr_p95_ms", Some("p95"), "p95 time to first response", "p95 time to first reply"),
        time("ttfr_p99_ms", None, "p99 time to first response", "p99 time to first reply"),
        plain("claims", None, "Claims sent", "RESPONDING_TO per run", Neither),
        plain("yields", None, "YIELDs sent", "YIELDs per run", Neither),
        plain("expired_claims", None, "Expired claims", "claims expired per run", Lower),
        plain("relayed", None, "Server fan-out", "messages relayed per run", Neither),
        plain("lost", None, "Lost messages", "messages lost per run", Lower),
        plain("events", None, "Simulation events", "events per run", Neither),
        plain("messages", None, "messages", "messages", Neither),
        plain("overruled", None, "overruled", "overruled", Neither),
        plain("inferences", None, "inferences", "inferences", Neither),
        plain("starters_per_msg", Some("starters"), "Agents starting per message", "inferences started per message", Lower),
        share("single_starter_rate", Some("1 starter"), "Messages one agent started on", "messages with exactly one starter", Higher),
        plain("inference_calls_per_msg", Some("calls/msg"), "Inference calls per message", "inferences started per message", Lower),
        // "s/msg" is part of the label, not a unit: seconds of inference
        // per question, shown as stored.
        plain("inference_s_per_msg", Some("infer s/msg"), "Inference seconds per message", "inference seconds per message", Lower),
    ]
};

/// The metric named `name`, if herdsim measures it.
pub fn metric(name: &str) -> Option<&'static Metric> {
    CATALOGUE.iter().find(|m| m.name == name)
}
