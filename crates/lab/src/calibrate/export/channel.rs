//! "Your channel today": what an export shows of the channel before any
//! fitting (docs/exports.md), each figure with its 95% interval: the
//! duplicate and unanswered rates (Wilson), TTFR p50 and p95
//! (distribution-free order-statistic intervals), answers per question
//! (distinct answering bots) and the bot-to-bot chains' mean length (t
//! intervals on the log scale above their floor, 0 and 2), the
//! share of bots' messages that reply to a bot (Wilson) and the number of
//! chains (exact Poisson).
//!
//! Over complete questions: a question posted later than the longest
//! time any question took to its last answer before the export's end may
//! still be answered and is open (as calibrate's own figures).

use super::{Mapped, Role};
use crate::calibrate::report::{pct, t};
use crate::calibrate::stats;
use statrs::distribution::{ChiSquared, ContinuousCDF};
use std::fmt::Write as _;

/// The file it is written to, beside calibrate's outputs.
pub const FILE: &str = "channel.csv";

/// The channel as the export shows it.
#[derive(Debug, Clone, PartialEq)]
pub struct Today {
    pub questions: u64,
    pub open: u64,
    pub duplicated: u64,
    pub dup_ci: (f64, f64),
    pub unanswered: u64,
    pub unans_ci: (f64, f64),
    /// Times to first answer, ms, sorted.
    pub ttfr: Vec<f64>,
    pub p50: f64,
    pub p50_ci: (f64, f64),
    pub p95: f64,
    pub p95_ci: (f64, f64),
    /// Answers: distinct (question, bot) pairs; one bot's several
    /// messages in a question's thread are one answer.
    pub answers: u64,
    pub answers_per_q: f64,
    pub answers_ci: (f64, f64),
    /// The bots' messages answering complete questions, all counted.
    pub answer_msgs: u64,
    pub bot_msgs: u64,
    pub bot_replies: u64,
    pub bot_reply_ci: (f64, f64),
    /// Each chain's length (bots' messages in its longest line of replies).
    pub chains: Vec<u32>,
    pub chains_ci: (f64, f64),
    pub chain_mean: f64,
    pub chain_ci: (f64, f64),
    /// Messages by role: human replies, bots' posts answering nothing,
    /// replies to messages not in the export, to human replies.
    pub human_replies: u64,
    pub bot_posts: u64,
    pub orphans: u64,
    pub to_human_replies: u64,
    pub bots: u64,
    pub humans: u64,
}

/// Exact 95% interval of a Poisson count.
fn poisson_ci(k: u64) -> (f64, f64) {
    let tail = 0.025;
    let lo = if k == 0 {
        0.0
    } else {
        ChiSquared::new(2.0 * k as f64).map_or(f64::NAN, |c| c.inverse_cdf(tail) / 2.0)
    };
    let hi =
        ChiSquared::new(2.0 * k as f64 + 2.0).map_or(f64::NAN, |c| c.inverse_cdf(1.0 - tail) / 2.0);
    (lo, hi)
}

/// Mean of counts never below `floor` and its 95% interval, within
/// the counts' range ([`stats::floor_mean_ci`]; NaN ends below two
/// counts). It was a percentile bootstrap, which at 10^5 questions cost
/// more than the rest of the channel's figures.
fn mean_ci_u(xs: &[u32], floor: f64) -> (f64, (f64, f64)) {
    let v: Vec<f64> = xs.iter().map(|&x| f64::from(x)).collect();
    let (m, sd) = stats::mean_sd(&v);
    (m, stats::floor_mean_ci(m, sd, v.len(), floor))
}

/// The distinct authors of a question's answers.
fn answerers(answers: &[(i64, u32)]) -> u32 {
    let mut a: Vec<u32> = answers.iter().map(|x| x.1).collect();
    a.sort_unstable();
    a.dedup();
    a.len() as u32
}

impl Today {
    pub fn of(m: &Mapped) -> Today {
        let n = m.msgs.len();
        // Each question's answers' times and authors.
        let mut answers: Vec<Vec<(i64, u32)>> = vec![Vec::new(); n];
        let mut depth = vec![0u32; n];
        let mut root: Vec<usize> = (0..n).collect();
        let count = |r: Role| m.roles.iter().filter(|x| **x == r).count() as u64;
        let human_replies = count(Role::HumanReply);
        let bot_posts = count(Role::BotPost);
        let orphans = count(Role::Orphan);
        let to_human_replies = count(Role::ToHumanReply);
        let mut bot_msgs = 0;
        let mut bot_replies = 0;
        for (i, r) in m.roles.iter().enumerate() {
            if !matches!(r, Role::Question | Role::HumanReply) {
                bot_msgs += 1;
                depth[i] = 1;
            }
            match *r {
                Role::Answer(q) => answers[q].push((m.msgs[i].t_us, m.msgs[i].author)),
                Role::BotReply(p) => {
                    bot_replies += 1;
                    depth[i] = depth[p].max(1) + 1;
                    root[i] = root[p];
                }
                _ => {}
            }
        }
        let mut longest = vec![0u32; n];
        for i in 0..n {
            let r = root[i];
            longest[r] = longest[r].max(depth[i]);
        }
        let chains: Vec<u32> = (0..n)
            .filter(|&i| root[i] == i && longest[i] >= 2)
            .map(|i| longest[i])
            .collect();
        let end = m.msgs.last().map_or(0, |x| x.t_us);
        let settle = m
            .roles
            .iter()
            .enumerate()
            .filter(|(_, r)| **r == Role::Question)
            .flat_map(|(q, _)| answers[q].iter().map(move |a| a.0 - m.msgs[q].t_us))
            .max()
            .unwrap_or(0);
        let mut complete: Vec<u32> = Vec::new();
        let mut answer_msgs = 0u64;
        let mut ttfr = Vec::new();
        let mut open = 0;
        for (q, r) in m.roles.iter().enumerate() {
            if *r != Role::Question {
                continue;
            }
            let tq = m.msgs[q].t_us;
            if end - tq < settle {
                open += 1;
                continue;
            }
            complete.push(answerers(&answers[q]));
            answer_msgs += answers[q].len() as u64;
            if let Some(first) = answers[q].iter().map(|a| a.0).min() {
                ttfr.push((first - tq) as f64 / 1000.0);
            }
        }
        ttfr.sort_by(f64::total_cmp);
        let nq = complete.len() as u64;
        let duplicated = complete.iter().filter(|&&a| a >= 2).count() as u64;
        let unanswered = complete.iter().filter(|&&a| a == 0).count() as u64;
        let total: u64 = complete.iter().map(|&a| u64::from(a)).sum();
        let bots = m.bot.iter().filter(|b| **b).count() as u64;
        // At most every bot answers a question; a chain is two long or more.
        let (_, (lo, hi)) = mean_ci_u(&complete, 0.0);
        let answers_ci = (lo, hi.min(bots as f64));
        let (chain_mean, chain_ci) = mean_ci_u(&chains, 2.0);
        Today {
            questions: nq,
            open,
            duplicated,
            dup_ci: stats::wilson(duplicated, nq),
            unanswered,
            unans_ci: stats::wilson(unanswered, nq),
            p50: stats::quantile(&ttfr, 0.5),
            p50_ci: stats::quantile_ci(&ttfr, 0.5),
            p95: stats::quantile(&ttfr, 0.95),
            p95_ci: stats::quantile_ci(&ttfr, 0.95),
            ttfr,
            answers: total,
            answers_per_q: total as f64 / nq.max(1) as f64,
            answers_ci,
            answer_msgs,
            bot_msgs,
            bot_replies,
            bot_reply_ci: stats::wilson(bot_replies, bot_msgs),
            chains_ci: poisson_ci(chains.len() as u64),
            chain_mean,
            chain_ci,
            chains,
            human_replies,
            bot_posts,
            orphans,
            to_human_replies,
            bots,
            humans: m.bot.len() as u64 - bots,
        }
    }
}

/// `channel.csv`: metric, value, its 95% interval, the samples behind it.
pub fn csv(d: &Today) -> String {
    let num = crate::report::num;
    let mut s = String::from("metric,value,ci_low,ci_high,samples\n");
    let mut row = |metric: &str, v: f64, ci: Option<(f64, f64)>, n: usize| {
        let (lo, hi) = ci.map_or((String::new(), String::new()), |(a, b)| (num(a), num(b)));
        let _ = writeln!(s, "{metric},{},{lo},{hi},{n}", num(v));
    };
    let nq = d.questions as usize;
    let share = |x: u64| x as f64 / d.questions.max(1) as f64;
    row("questions", d.questions as f64, None, nq);
    row("open_questions", d.open as f64, None, d.open as usize);
    row("duplicate_rate", share(d.duplicated), Some(d.dup_ci), nq);
    row("unanswered_rate", share(d.unanswered), Some(d.unans_ci), nq);
    row("ttfr_p50_ms", d.p50, Some(d.p50_ci), d.ttfr.len());
    row("ttfr_p95_ms", d.p95, Some(d.p95_ci), d.ttfr.len());
    row(
        "answers_per_question",
        d.answers_per_q,
        Some(d.answers_ci),
        nq,
    );
    row(
        "answer_messages_per_question",
        share(d.answer_msgs),
        None,
        nq,
    );
    row(
        "bot_to_bot_reply_rate",
        d.bot_replies as f64 / d.bot_msgs.max(1) as f64,
        Some(d.bot_reply_ci),
        d.bot_msgs as usize,
    );
    row(
        "bot_to_bot_chains",
        d.chains.len() as f64,
        Some(d.chains_ci),
        d.chains.len(),
    );
    row(
        "chain_length_mean",
        d.chain_mean,
        Some(d.chain_ci),
        d.chains.len(),
    );
    row(
        "chain_length_max",
        d.chains.iter().copied().max().map_or(f64::NAN, f64::from),
        None,
        d.chains.len(),
    );
    s
}

/// What the user must know of replies stamped before the message they
/// reply to (one line each, for stderr and the report).
pub fn early_warnings(c: &super::Counts) -> Vec<String> {
    let s = super::EARLY_US as f64 / 1e6;
    let mut w = Vec::new();
    if c.early > 0 {
        w.push(format!(
            "{} replies are stamped before the message they reply to, by at most {s} s (the \
             servers' clocks differ): read as replies at its time (a TTFR of 0)",
            c.early
        ));
    }
    if c.too_early > 0 {
        w.push(format!(
            "{} replies are stamped more than {s} s before the message they reply to: read as \
             stamped, they answer no question (check the export's clocks)",
            c.too_early
        ));
    }
    w
}

fn ci_t(c: (f64, f64)) -> String {
    format!("(95% CI {}..{})", t(c.0), t(c.1))
}

fn ci_pct(c: (f64, f64)) -> String {
    format!("(95% CI {}..{})", pct(c.0), pct(c.1))
}

fn ci_x(c: (f64, f64)) -> String {
    if c.0.is_finite() && c.1.is_finite() {
        format!("(95% CI {:.2}..{:.2})", c.0, c.1)
    } else {
        "(too few for an interval)".into()
    }
}

/// The report's first part: the channel as it is.
pub fn text(d: &Today, m: &Mapped, channel: &str) -> String {
    let mut s = String::new();
    let c = &m.counts;
    let _ = writeln!(
        s,
        "Your channel today ({} export, channel {channel}):",
        m.platform.name()
    );
    let _ = writeln!(
        s,
        "  {} messages by {} humans and {} bots: {} complete questions ({} open at\n    \
         the end), {} answers ({} messages), {} bots' messages",
        m.msgs.len(),
        d.humans,
        d.bots,
        d.questions,
        d.open,
        d.answers,
        d.answer_msgs,
        d.bot_msgs
    );
    let _ = writeln!(
        s,
        "  not read: {} edits, {} deleted, {} joins, {} system, {} encrypted;\n    {} human \
         replies, {} bots' posts answering nothing, {} bots' replies to\n    messages not in \
         the export, {} to human replies",
        c.edits,
        c.deleted,
        c.joins,
        c.system,
        c.encrypted,
        d.human_replies,
        d.bot_posts,
        d.orphans,
        d.to_human_replies
    );
    if c.repeated > 0 || c.outside > 0 {
        let _ = writeln!(
            s,
            "    {} messages whose id an earlier one has (read once), {} outside --since/--until",
            c.repeated, c.outside
        );
    }
    for w in early_warnings(c) {
        let _ = writeln!(s, "  {w}");
    }
    let share = |x: u64| x as f64 / d.questions.max(1) as f64;
    let _ = writeln!(
        s,
        "  duplicate rate        {:>8} {}  {} of {}",
        pct(share(d.duplicated)),
        ci_pct(d.dup_ci),
        d.duplicated,
        d.questions
    );
    let _ = writeln!(
        s,
        "  unanswered rate       {:>8} {}  {} of {}",
        pct(share(d.unanswered)),
        ci_pct(d.unans_ci),
        d.unanswered,
        d.questions
    );
    let _ = writeln!(
        s,
        "  TTFR p50              {:>8} {}",
        t(d.p50),
        ci_t(d.p50_ci)
    );
    let _ = writeln!(
        s,
        "  TTFR p95              {:>8} {}",
        t(d.p95),
        ci_t(d.p95_ci)
    );
    let _ = writeln!(
        s,
        "  answers per question  {:>8.2} {}",
        d.answers_per_q,
        ci_x(d.answers_ci)
    );
    let _ = writeln!(
        s,
        "  bot-to-bot replies    {:>8} {}  {} of {} bots' messages",
        pct(d.bot_replies as f64 / d.bot_msgs.max(1) as f64),
        ci_pct(d.bot_reply_ci),
        d.bot_replies,
        d.bot_msgs
    );
    let longest = d.chains.iter().copied().max().unwrap_or(0);
    let _ = writeln!(
        s,
        "  bot-to-bot chains     {:>8} (95% CI {:.1}..{:.1})\n  chain length          {:>8} {}, longest {longest}",
        d.chains.len(),
        d.chains_ci.0,
        d.chains_ci.1,
        if d.chain_mean.is_finite() {
            format!("{:.2}", d.chain_mean)
        } else {
            "-".into()
        },
        ci_x(d.chain_ci)
    );
    s.push('\n');
    s
}
