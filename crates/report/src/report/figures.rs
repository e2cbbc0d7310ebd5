//! Where `herdsim plot` draws its figures, and the drawing: the library
//! side of the subcommand. A figure goes to `out` as a file (its extension
//! decides the format), into `out` as a folder under its default name
//! (`comparison.png`, `<metrics>.png`, `timeline-<msg>.png`), or beside
//! its input when `out` is not given.

use super::plot::{self, PlotSpec};
use crate::error::Error;
use crate::progress::Observer;
use std::path::{Path, PathBuf};

fn to_error(e: anyhow::Error) -> Error {
    if plot::is_input_error(&e) {
        Error::Input(e.to_string())
    } else {
        // A refused output path stays bad input (Error::BadInput).
        Error::from(e)
    }
}

/// Keep an id usable in a file name.
pub fn file_safe(s: &str) -> String {
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

/// Whether `path` names a figure file (by its extension) rather than a
/// directory.
fn names_file(path: &Path) -> bool {
    !path.is_dir() && path.extension().is_some()
}

/// Where the figure goes: `out` as a file (an unsupported extension is
/// rejected by the figure writer, naming .png and .svg), `out` as a
/// directory holding the default name (the atomic writer creates missing
/// directories), or the default name beside `input`.
pub fn target(out: Option<&Path>, input: &Path, default_name: &str) -> PathBuf {
    match out {
        None => match input.parent() {
            Some(p) if !p.as_os_str().is_empty() => p.join(default_name),
            _ => PathBuf::from(default_name),
        },
        Some(o) if names_file(o) => o.to_path_buf(),
        Some(dir) => dir.join(default_name),
    }
}

/// Draw the timeline of message `msg` (default: the most contested one,
/// named through `obs`) from `trace`; returns the file written.
pub fn timeline(
    trace: &Path,
    msg: Option<&str>,
    out: Option<&Path>,
    title: Option<&str>,
    obs: &dyn Observer,
) -> Result<PathBuf, Error> {
    if !trace.is_file() {
        return Err(Error::Input(format!("{}: no such file", trace.display())));
    }
    let id = match msg {
        Some(m) => m.to_string(),
        None => {
            let id = plot::most_contested(trace).map_err(to_error)?;
            // Information (`--quiet` hides it): the file's name, printed
            // on stdout, names the message too.
            obs.info(&format!(
                "herdsim: drawing the most contested message: {id}"
            ));
            id
        }
    };
    let name = format!("timeline-{}.png", file_safe(&id));
    if !out.is_some_and(names_file) {
        // The id comes from the trace file: the rule of every name
        // herdsim makes a file name of.
        crate::scenario::validate::check_name(&name).map_err(|m| {
            Error::Input(format!(
                "{}: message `{id}`: the figure's file name {m}; name the file with --out FILE.png",
                trace.display()
            ))
        })?;
    }
    let target = target(out, trace, &name);
    plot::timeline_figure(trace, Some(&id), &target, title).map_err(to_error)?;
    Ok(target)
}

/// Draw the metrics of `spec` from `input` (a results folder holding
/// `summary.csv`, or the file); returns the file written. The figure's
/// notes (a series with the same numbers as another at a category, a
/// value that does not exist) go to `obs` as information.
pub fn summary(
    input: &Path,
    out: Option<&Path>,
    spec: &PlotSpec,
    obs: &dyn Observer,
) -> Result<PathBuf, Error> {
    let csv = if input.is_dir() {
        let c = input.join("summary.csv");
        if !c.is_file() {
            return Err(Error::Input(format!(
                "{}: no summary.csv in this directory",
                input.display()
            )));
        }
        c
    } else if input.is_file() {
        input.to_path_buf()
    } else {
        return Err(Error::Input(format!(
            "{}: no such file or directory",
            input.display()
        )));
    };
    let name = if spec.metrics.is_empty() {
        "comparison.png".to_string()
    } else {
        let names: Vec<String> = spec
            .metrics
            .iter()
            .map(|m| file_safe(m.strip_suffix("_mean").unwrap_or(m)))
            .collect();
        format!("{}.png", names.join("-"))
    };
    let target = target(out, &csv, &name);
    let notes = plot::metric_figure(&csv, &target, spec).map_err(to_error)?;
    for n in notes {
        obs.info(&format!("herdsim: {}: {n}", target.display()));
    }
    Ok(target)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_become_safe_file_names() {
        assert_eq!(file_safe("m1"), "m1");
        assert_eq!(file_safe("a/b c"), "a_b_c");
    }

    #[test]
    fn figures_go_beside_the_input_into_a_folder_or_to_a_file() {
        let input = Path::new("results/x/summary.csv");
        assert_eq!(target(None, input, "c.png"), Path::new("results/x/c.png"));
        assert_eq!(
            target(None, Path::new("t.jsonl"), "c.png"),
            Path::new("c.png")
        );
        assert_eq!(
            target(Some(Path::new("o/f.svg")), input, "c.png"),
            Path::new("o/f.svg")
        );
        assert_eq!(
            target(Some(Path::new("o")), input, "c.png"),
            Path::new("o/c.png")
        );
    }

    #[test]
    fn a_missing_input_is_bad_input() {
        let spec = PlotSpec::default();
        let missing = Path::new("/nonexistent/summary.csv");
        assert!(matches!(
            summary(missing, None, &spec, &()),
            Err(Error::Input(_))
        ));
        let e = timeline(missing, None, None, None, &());
        assert!(matches!(e, Err(Error::Input(m)) if m.ends_with("no such file")));
    }
}
