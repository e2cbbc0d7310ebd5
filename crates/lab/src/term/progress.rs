//! The terminal side of [`Observer`]: a progress bar on stderr (hidden by
//! `--quiet`, or when stderr is not a terminal) and notes that do not tear it.

use crate::progress::Observer;
use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};

pub struct Term {
    bar: ProgressBar,
    quiet: bool,
    /// Whether the bar is drawn once it has a length.
    drawn: bool,
}

impl Term {
    /// A bar for a sweep: points, replications, ETA.
    pub fn sweep(quiet: bool) -> Term {
        Term::new(
            quiet,
            "{spinner} {elapsed_precise} {wide_bar} {msg}, ETA {eta}",
        )
    }

    /// A bar for a tuning search: runs against an estimate.
    pub fn tune(quiet: bool) -> Term {
        let style =
            "{spinner} {elapsed_precise} {wide_bar} {msg}, runs {pos} of about {len}, ETA {eta}";
        Term::new(quiet, style)
    }

    /// A bar for a calibration: the replications of the fitted channel's
    /// simulations (the prediction, then the what-ifs).
    pub fn calibrate(quiet: bool) -> Term {
        let style = "{spinner} {elapsed_precise} {wide_bar} simulations {pos}/{len}, ETA {eta}";
        Term::new(quiet, style)
    }

    /// No bar: the notes only (`quiet`: the warnings only).
    pub fn notes(quiet: bool) -> Term {
        Term {
            bar: ProgressBar::hidden(),
            quiet,
            drawn: false,
        }
    }

    fn new(quiet: bool, template: &str) -> Term {
        // Hidden until it knows how much work there is (`length`): a bar
        // of length 0 would flash full, "0 of 0".
        let bar = ProgressBar::with_draw_target(Some(0), ProgressDrawTarget::hidden());
        if let Ok(style) = ProgressStyle::with_template(template) {
            bar.set_style(style);
        }
        Term {
            bar,
            quiet,
            drawn: !quiet,
        }
    }

    /// The bar (a handle to it), to print around it.
    pub fn bar(&self) -> ProgressBar {
        self.bar.clone()
    }
}

impl Observer for Term {
    fn length(&self, total: u64) {
        self.bar.set_length(total);
        if total > 0 && self.drawn && self.bar.is_hidden() {
            self.bar.set_draw_target(ProgressDrawTarget::stderr());
        }
    }
    fn resumed_at(&self, done: u64) {
        self.bar.reset_elapsed();
        self.bar.set_position(done);
        self.bar.reset_eta();
    }
    fn advance(&self, units: u64) {
        self.bar.inc(units);
    }
    fn message(&self, text: String) {
        self.bar.set_message(text);
    }
    fn finish(&self) {
        self.bar.finish_and_clear();
    }
    fn warn(&self, line: &str) {
        // Around the bar once it is on screen (it has work to show).
        if self.bar.length().is_some_and(|n| n > 0) {
            self.bar.suspend(|| super::note(line));
        } else {
            super::note(line);
        }
    }
    fn info(&self, line: &str) {
        if !self.quiet {
            self.warn(line);
        }
    }
}
