//! `herdsim plot`: comparison plots from a results directory or a
//! `summary.csv`, or the timeline of one message from a trace
//! ([`crate::report::plot_summary`] and [`crate::report::plot_timeline`]
//! draw them).

use super::CliError;
use crate::report;
use crate::report::plot::{PlotSpec, XScale, parse_size, parse_x_scale};
use std::path::PathBuf;
use std::process::ExitCode;

#[derive(clap::Args, Debug)]
#[command(
    after_help = "Examples:\n  herdsim plot results/default                 # the standard 2x2 panel, written to results/default/comparison.png\n  herdsim plot results/sweep/summary.csv --metrics ttfr_p95_ms -o p95.svg\n  herdsim plot results/sweep --x ttl_ms --by agents.0.csma.max_ms\n  herdsim plot --timeline trace.jsonl --msg m42 -o m42.png"
)]
pub struct Args {
    /// A results directory (holding summary.csv) or a summary.csv file.
    #[arg(
        value_name = "RESULTS_DIR_OR_CSV",
        required_unless_present = "timeline"
    )]
    pub input: Option<PathBuf>,

    /// The x axis: a swept key (dotted name or its unique last part).
    /// Default: the swept key with the most values.
    #[arg(long, value_name = "KEY", conflicts_with = "timeline")]
    pub x: Option<String>,

    /// Metrics to plot, comma-separated (e.g. duplicate_rate,ttfr_p95_ms).
    /// Default: duplicate_rate, wasted_inference_rate, ttfr_p95_ms, unanswered_rate.
    #[arg(
        long,
        value_name = "M1,M2",
        value_delimiter = ',',
        conflicts_with = "timeline"
    )]
    pub metrics: Vec<String>,

    /// The column that makes one line per value: `policy` (default) or a key.
    #[arg(long, value_name = "policy|KEY", conflicts_with = "timeline")]
    pub by: Option<String>,

    /// Draw the timeline of one message from this trace (JSON Lines).
    #[arg(long, value_name = "TRACE.jsonl", conflicts_with = "input")]
    pub timeline: Option<PathBuf>,

    /// The message whose timeline to draw. Default: the most contested one.
    #[arg(long, value_name = "ID", requires = "timeline")]
    pub msg: Option<String>,

    /// Output directory, as for every subcommand (created if missing; the
    /// figure keeps its default name: comparison.png, <metrics>.png or
    /// timeline-<msg>.png), or a file ending in .png or .svg. Default: the
    /// input's directory.
    #[arg(short = 'o', long = "out", value_name = "DIR|FILE")]
    pub out: Option<PathBuf>,

    /// Figure title (default: names the scenario or the message).
    #[arg(long)]
    pub title: Option<String>,

    /// Spacing of a numeric x key: `linear`, `even` (one step per sweep
    /// point), or `auto` (even when the points are very unevenly spaced).
    #[arg(long, value_name = "auto|linear|even", default_value = "auto", value_parser = parse_x_scale, conflicts_with = "timeline")]
    pub x_scale: XScale,

    /// Pixel size WIDTHxHEIGHT of a summary plot (e.g. 1600x1200).
    #[arg(long, value_name = "WxH", value_parser = parse_size, conflicts_with = "timeline")]
    pub size: Option<(u32, u32)>,

    /// No note on stderr (the file written is still printed on stdout).
    #[arg(long, short)]
    pub quiet: bool,
}

pub fn run(args: Args) -> Result<ExitCode, CliError> {
    let (out, title) = (args.out.as_deref(), args.title.as_deref());
    let written = match (&args.timeline, &args.input) {
        (Some(trace), _) => {
            let term = crate::term::Term::notes(args.quiet);
            report::plot_timeline(trace, args.msg.as_deref(), out, title, &term)?
        }
        (None, Some(input)) => {
            let spec = PlotSpec {
                x: args.x.clone(),
                metrics: args
                    .metrics
                    .iter()
                    .map(|m| m.trim().to_string())
                    .filter(|m| !m.is_empty())
                    .collect(),
                by: args.by.clone(),
                title: args.title.clone(),
                size: args.size,
                x_scale: args.x_scale,
            };
            let term = crate::term::Term::notes(args.quiet);
            report::plot_summary(input, out, &spec, &term)?
        }
        (None, None) => {
            return Err(CliError::bad(
                "give a results directory or a summary.csv (or --timeline TRACE)",
            ));
        }
    };
    super::print_out(&format!("{}\n", written.display()))?;
    Ok(ExitCode::SUCCESS)
}
