//! `herdsim plot`: comparison plots from a results directory or a
//! `summary.csv`, or the timeline of one message from a trace.

use super::CliError;
use crate::report::plot::{self, PlotSpec, XScale};
use std::path::{Path, PathBuf};
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
    #[arg(long, value_name = "auto|linear|even", default_value = "auto", value_parser = parse_scale, conflicts_with = "timeline")]
    pub x_scale: XScale,

    /// Pixel size WIDTHxHEIGHT of a summary plot (e.g. 1600x1200).
    #[arg(long, value_name = "WxH", value_parser = parse_size, conflicts_with = "timeline")]
    pub size: Option<(u32, u32)>,
}

fn parse_scale(s: &str) -> Result<XScale, String> {
    match s {
        "auto" => Ok(XScale::Auto),
        "linear" => Ok(XScale::Linear),
        "even" => Ok(XScale::Even),
        _ => Err(format!("`{s}`: expected auto, linear or even")),
    }
}

fn parse_size(s: &str) -> Result<(u32, u32), String> {
    let (w, h) = s
        .split_once(['x', 'X'])
        .ok_or_else(|| format!("`{s}`: expected WIDTHxHEIGHT, e.g. 1600x1200"))?;
    let w: u32 = w.trim().parse().map_err(|_| format!("`{s}`: bad width"))?;
    let h: u32 = h.trim().parse().map_err(|_| format!("`{s}`: bad height"))?;
    Ok((w, h))
}

fn to_cli(e: anyhow::Error) -> CliError {
    if plot::is_input_error(&e) {
        CliError::BadInput(e.to_string())
    } else {
        CliError::Failure(e)
    }
}

/// Keep an id usable in a file name.
fn file_safe(s: &str) -> String {
    s.chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '-' || c == '_' || c == '.' {
                c
            } else {
                '_'
            }
        })
        .collect()
}

fn beside(path: &Path, name: &str) -> PathBuf {
    match path.parent() {
        Some(p) if !p.as_os_str().is_empty() => p.join(name),
        _ => PathBuf::from(name),
    }
}

/// Whether `path` names a figure file (by its extension) rather than a
/// directory.
fn names_file(path: &Path) -> bool {
    !path.is_dir() && path.extension().is_some()
}

/// Where the figure goes: `--out` as a file (its extension decides the
/// format; an unsupported one is rejected by the figure writer, naming
/// .png and .svg), `--out` as a directory holding the default name (the
/// atomic writer creates missing directories), or the default name beside
/// `input`.
fn target(out: Option<&Path>, input: &Path, default_name: &str) -> PathBuf {
    match out {
        None => beside(input, default_name),
        Some(o) if names_file(o) => o.to_path_buf(),
        Some(dir) => dir.join(default_name),
    }
}

pub fn run(args: Args) -> Result<ExitCode, CliError> {
    if let Some(trace) = &args.timeline {
        if !trace.is_file() {
            return Err(CliError::bad(format!("{}: no such file", trace.display())));
        }
        let id = match &args.msg {
            Some(m) => m.clone(),
            None => {
                let id = plot::most_contested(trace).map_err(to_cli)?;
                super::note(format_args!(
                    "herdsim: drawing the most contested message: {id}"
                ));
                id
            }
        };
        let name = format!("timeline-{}.png", file_safe(&id));
        if !args.out.as_deref().is_some_and(names_file) {
            // The id comes from the trace file: the rule of every name
            // herdsim makes a file name of.
            crate::scenario::validate::check_name(&name).map_err(|m| {
                CliError::bad(format!(
                    "{}: message `{id}`: the figure's file name {m}; name the file with --out FILE.png",
                    trace.display()
                ))
            })?;
        }
        let out = target(args.out.as_deref(), trace, &name);
        plot::timeline_figure(trace, Some(&id), &out, args.title.as_deref()).map_err(to_cli)?;
        super::print_out(&format!("{}\n", out.display()))?;
        return Ok(ExitCode::SUCCESS);
    }

    let Some(input) = &args.input else {
        return Err(CliError::bad(
            "give a results directory or a summary.csv (or --timeline TRACE)",
        ));
    };
    let csv = if input.is_dir() {
        let c = input.join("summary.csv");
        if !c.is_file() {
            return Err(CliError::bad(format!(
                "{}: no summary.csv in this directory",
                input.display()
            )));
        }
        c
    } else if input.is_file() {
        input.clone()
    } else {
        return Err(CliError::bad(format!(
            "{}: no such file or directory",
            input.display()
        )));
    };
    let metrics: Vec<String> = args
        .metrics
        .iter()
        .map(|m| m.trim().to_string())
        .filter(|m| !m.is_empty())
        .collect();
    let name = if metrics.is_empty() {
        "comparison.png".to_string()
    } else {
        let names: Vec<String> = metrics
            .iter()
            .map(|m| file_safe(m.strip_suffix("_mean").unwrap_or(m)))
            .collect();
        format!("{}.png", names.join("-"))
    };
    let out = target(args.out.as_deref(), &csv, &name);
    let spec = PlotSpec {
        x: args.x.clone(),
        metrics,
        by: args.by.clone(),
        title: args.title.clone(),
        size: args.size,
        x_scale: args.x_scale,
    };
    plot::metric_figure(&csv, &out, &spec).map_err(to_cli)?;
    super::print_out(&format!("{}\n", out.display()))?;
    Ok(ExitCode::SUCCESS)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes_parse() {
        assert_eq!(parse_size("1600x1200"), Ok((1600, 1200)));
        assert!(parse_size("1600").is_err());
        assert!(parse_size("ax2").is_err());
    }

    #[test]
    fn ids_become_safe_file_names() {
        assert_eq!(file_safe("m1"), "m1");
        assert_eq!(file_safe("a/b c"), "a_b_c");
    }
}
