//! `herdsim plot` end to end: files are produced at the expected size, are
//! not blank, text is drawn with the embedded font, and bad input exits 2
//! naming the file and the line or field.

use assert_cmd::Command;
use herdsim::report::plot::{
    self, PlotSpec, TIMELINE_WIDTH, comparison_figure, figure_size, metric_figure, timeline_figure,
    timeline_height,
};
use image::RgbImage;
use predicates::str::contains;
use std::path::{Path, PathBuf};

fn fixtures() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data/plot")
}

/// Copy a fixture directory (or file) into a fresh temp dir so that default
/// outputs, written next to the input, never land in the repository.
fn staged(name: &str) -> (tempfile::TempDir, PathBuf) {
    let dir = tempfile::tempdir().expect("temp dir");
    let src = fixtures().join(name);
    let dst = dir.path().join(name);
    if src.is_dir() {
        std::fs::create_dir_all(&dst).expect("mkdir");
        for e in std::fs::read_dir(&src).expect("read fixture dir") {
            let e = e.expect("entry");
            std::fs::copy(e.path(), dst.join(e.file_name())).expect("copy");
        }
    } else {
        std::fs::copy(&src, &dst).expect("copy");
    }
    (dir, dst)
}

fn herdsim() -> Command {
    Command::cargo_bin("herdsim").expect("binary built")
}

fn load_png(path: &Path) -> RgbImage {
    image::open(path)
        .unwrap_or_else(|e| panic!("{} does not decode as an image: {e}", path.display()))
        .to_rgb8()
}

/// Share of pixels in the rectangle (fractions of width and height) that
/// differ from the white background.
fn inked(img: &RgbImage, x0: f64, y0: f64, x1: f64, y1: f64) -> f64 {
    let (w, h) = img.dimensions();
    let (ax, bx) = ((x0 * w as f64) as u32, (x1 * w as f64) as u32);
    let (ay, by) = ((y0 * h as f64) as u32, (y1 * h as f64) as u32);
    let mut ink = 0u64;
    let mut all = 0u64;
    for y in ay..by {
        for x in ax..bx {
            all += 1;
            if img.get_pixel(x, y).0 != [255, 255, 255] {
                ink += 1;
            }
        }
    }
    ink as f64 / all.max(1) as f64
}

/// Pixels in the rectangle with a clear hue (data, not the grey grid, axes
/// or text).
fn colored(img: &RgbImage, x0: f64, y0: f64, x1: f64, y1: f64) -> usize {
    let (w, h) = img.dimensions();
    let mut n = 0;
    for y in (y0 * h as f64) as u32..(y1 * h as f64) as u32 {
        for x in (x0 * w as f64) as u32..(x1 * w as f64) as u32 {
            let p = img.get_pixel(x, y).0;
            let hi = *p.iter().max().unwrap_or(&0) as i32;
            let lo = *p.iter().min().unwrap_or(&0) as i32;
            if hi - lo > 60 {
                n += 1;
            }
        }
    }
    n
}

/// Pixels close to an RGB colour (a series or bar colour).
fn count_color(img: &RgbImage, c: [u8; 3], tol: i32) -> usize {
    img.pixels()
        .filter(|p| (0..3).all(|i| (p.0[i] as i32 - c[i] as i32).abs() <= tol))
        .count()
}

/// Width and height attributes of an SVG's root element.
fn svg_size(text: &str) -> (u32, u32) {
    let head = &text[..text.find('>').expect("svg tag")];
    let attr = |name: &str| -> u32 {
        let key = format!("{name}=\"");
        let at = head.find(&key).expect("attribute") + key.len();
        head[at..]
            .split('"')
            .next()
            .expect("value")
            .parse()
            .expect("number")
    };
    (attr("width"), attr("height"))
}

fn no_temp_files(dir: &Path) {
    for e in std::fs::read_dir(dir).expect("read dir") {
        let name = e.expect("entry").file_name().to_string_lossy().into_owned();
        assert!(
            !name.contains(".tmp-"),
            "temporary file left behind: {name}"
        );
    }
}

const SPEC_BLUE: [u8; 3] = [0, 114, 178];
const NONE_GREY: [u8; 3] = [110, 110, 110];

#[test]
fn default_comparison_figure_is_written_next_to_the_csv() {
    let (_tmp, dir) = staged("sweep");
    herdsim()
        .args(["plot"])
        .arg(&dir)
        .assert()
        .success()
        .stdout(contains("comparison.png"));
    let out = dir.join("comparison.png");
    let img = load_png(&out);
    assert_eq!(img.dimensions(), figure_size(4));
    assert_eq!(img.dimensions(), (1600, 1200));
    // Each of the four panels has lines and bands in it.
    for (x0, y0) in [(0.05, 0.12), (0.55, 0.12), (0.05, 0.56), (0.55, 0.56)] {
        let ink = inked(&img, x0 + 0.03, y0 + 0.04, x0 + 0.40, y0 + 0.30);
        assert!(ink > 0.02, "panel at ({x0}, {y0}) looks blank: {ink}");
        let data = colored(&img, x0 + 0.02, y0, x0 + 0.42, y0 + 0.36);
        assert!(
            data > 1500,
            "panel at ({x0}, {y0}) has no data drawn: {data}"
        );
    }
    // Policies keep their colours: spec blue and none grey are there.
    assert!(count_color(&img, SPEC_BLUE, 6) > 500);
    assert!(count_color(&img, NONE_GREY, 6) > 500);
    // The title is drawn (dark text pixels at the top centre).
    let title = inked(&img, 0.25, 0.0, 0.75, 0.04);
    assert!(title > 0.01, "no title text: {title}");
    no_temp_files(&dir);
}

#[test]
fn comparison_figure_as_svg() {
    let (_tmp, dir) = staged("sweep");
    let out = dir.join("fig.svg");
    herdsim()
        .args(["plot"])
        .arg(dir.join("summary.csv"))
        .arg("-o")
        .arg(&out)
        .assert()
        .success();
    let text = std::fs::read_to_string(&out).expect("svg written");
    assert!(text.starts_with("<svg"), "not an SVG");
    assert_eq!(svg_size(&text), (1600, 1200));
    for needle in [
        "Duplicate responses",
        "Wasted inference time",
        "p95 time to first response",
        "Unanswered messages",
        "agentchat-0.36",
        "agents.0.csma.max_ms (ms)",
        "csma-window",
    ] {
        assert!(text.contains(needle), "SVG lacks `{needle}`");
    }
    // Not blank: many drawn shapes, and series in the spec colour.
    let shapes = text.matches("<polyline").count()
        + text.matches("<polygon").count()
        + text.matches("<circle").count();
    assert!(shapes > 100, "only {shapes} shapes");
    assert!(text.contains("#0072B2"), "no spec-blue series");
    no_temp_files(&dir);
}

#[test]
fn single_metric_plot_png_and_svg() {
    let (_tmp, dir) = staged("sweep");
    herdsim()
        .args(["plot"])
        .arg(&dir)
        .args(["--metrics", "ttfr_p95_ms"])
        .assert()
        .success();
    let img = load_png(&dir.join("ttfr_p95_ms.png"));
    assert_eq!(img.dimensions(), figure_size(1));
    assert_eq!(img.dimensions(), (1200, 800));
    let ink = inked(&img, 0.15, 0.25, 0.9, 0.8);
    assert!(ink > 0.03, "plot area looks blank: {ink}");
    assert!(colored(&img, 0.15, 0.25, 0.9, 0.8) > 3000, "no data drawn");
    assert!(count_color(&img, SPEC_BLUE, 6) > 300);

    let out = dir.join("p95.svg");
    herdsim()
        .args(["plot"])
        .arg(&dir)
        .args(["--metrics", "ttfr_p95_ms_mean", "--x", "csma.max_ms", "-o"])
        .arg(&out)
        .assert()
        .success();
    let text = std::fs::read_to_string(&out).expect("svg");
    assert_eq!(svg_size(&text), (1200, 800));
    assert!(text.contains("p95 time to first reply (s)"));
    assert!(
        text.matches("<polyline").count() >= 5,
        "one line per policy"
    );
}

#[test]
fn timeline_png_and_svg() {
    let (_tmp, trace) = staged("trace.jsonl");
    let dir = trace.parent().expect("dir").to_path_buf();
    let out = dir.join("m1.png");
    herdsim()
        .args(["plot", "--timeline"])
        .arg(&trace)
        .args(["--msg", "m1", "-o"])
        .arg(&out)
        .assert()
        .success();
    let img = load_png(&out);
    // The server lane and five agents.
    assert_eq!(img.dimensions(), (TIMELINE_WIDTH, timeline_height(6)));
    let ink = inked(&img, 0.15, 0.35, 0.6, 0.85);
    assert!(ink > 0.1, "lanes look blank: {ink}");
    assert!(
        colored(&img, 0.15, 0.35, 0.6, 0.85) > 10_000,
        "no bars drawn"
    );
    // Inference bars: the winner's (green), the aborted one (orange), the
    // duplicate (purple), and RESPONDING_TO marks in claim blue.
    assert!(
        count_color(&img, [33, 167, 128], 12) > 1000,
        "no first-reply inference bar"
    );
    assert!(
        count_color(&img, [234, 168, 38], 12) > 200,
        "no aborted inference bar"
    );
    assert!(
        count_color(&img, [157, 117, 195], 12) > 1000,
        "no duplicate inference bar"
    );
    assert!(count_color(&img, SPEC_BLUE, 6) > 100, "no claim marks");

    let out = dir.join("m1.svg");
    herdsim()
        .args(["plot", "--timeline"])
        .arg(&trace)
        .args(["--msg", "m1", "-o"])
        .arg(&out)
        .assert()
        .success();
    let text = std::fs::read_to_string(&out).expect("svg");
    assert_eq!(svg_size(&text), (TIMELINE_WIDTH, timeline_height(6)));
    for needle in [
        "agent-001",
        "agent-005",
        "RESPONDING_TO sent",
        "YIELD received",
        "aborted, yielded to agent-003",
        "duplicate reply",
        "Zoom: the race for the floor",
    ] {
        assert!(text.contains(needle), "SVG lacks `{needle}`");
    }
    no_temp_files(&dir);
}

#[test]
fn timeline_defaults_to_the_most_contested_message() {
    let (_tmp, trace) = staged("trace.jsonl");
    herdsim()
        .args(["plot", "--timeline"])
        .arg(&trace)
        .assert()
        .success()
        .stderr(contains("m1"));
    let out = trace.with_file_name("timeline-m1.png");
    let img = load_png(&out);
    assert_eq!(img.width(), TIMELINE_WIDTH);
}

#[test]
fn quiet_plot_says_nothing_on_stderr_and_still_names_the_file() {
    let (_tmp, trace) = staged("trace.jsonl");
    let out = herdsim()
        .args(["plot", "--quiet", "--timeline"])
        .arg(&trace)
        .output()
        .expect("runs");
    assert!(out.status.success());
    assert!(
        out.stderr.is_empty(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let written = String::from_utf8_lossy(&out.stdout);
    assert!(written.trim_end().ends_with("timeline-m1.png"), "{written}");
    assert!(trace.with_file_name("timeline-m1.png").is_file());
}

#[test]
fn hung_and_lost_message_timeline() {
    let (_tmp, trace) = staged("trace.jsonl");
    let out = trace.with_file_name("m2.svg");
    herdsim()
        .args(["plot", "--timeline"])
        .arg(&trace)
        .args(["--msg", "m2", "-o"])
        .arg(&out)
        .assert()
        .success();
    let text = std::fs::read_to_string(&out).expect("svg");
    assert_eq!(svg_size(&text), (TIMELINE_WIDTH, timeline_height(3)));
    assert!(text.contains("hung, never ends"));
    assert!(text.contains("lost in transit"));
    // agent-001 crashes later, during another message: not in this lane set.
    assert!(
        !text.contains(">\ncrash\n"),
        "a crash from another message is drawn"
    );
}

#[test]
fn no_swept_key_draws_bars_and_other_layouts_work() {
    for (fixture, args) in [
        ("default", vec![]),
        ("two-keys", vec![]),
        (
            "two-keys",
            vec!["--x", "ttl_ms", "--by", "agents.0.csma.max_ms"],
        ),
        (
            "categorical",
            vec!["--metrics", "duplicate_rate,unanswered_rate,claims"],
        ),
    ] {
        let (_tmp, dir) = staged(fixture);
        let out = dir.join("out.png");
        herdsim()
            .args(["plot"])
            .arg(&dir)
            .args(&args)
            .arg("-o")
            .arg(&out)
            .assert()
            .success();
        let img = load_png(&out);
        let n = if args.contains(&"--metrics") { 3 } else { 4 };
        assert_eq!(img.dimensions(), figure_size(n), "{fixture} {args:?}");
        // The first panel: top left of a 2x2 grid, the left third of a row
        // of three.
        let ink = match n {
            3 => colored(&img, 0.03, 0.2, 0.31, 0.9),
            _ => colored(&img, 0.05, 0.12, 0.48, 0.48),
        };
        assert!(
            ink > 500,
            "{fixture} {args:?}: first panel has no data drawn: {ink}"
        );
    }
    // Bars: one per policy, in the policy colours.
    let (_tmp, dir) = staged("default");
    herdsim().args(["plot"]).arg(&dir).assert().success();
    let img = load_png(&dir.join("comparison.png"));
    assert!(
        count_color(&img, [0, 158, 115], 40) > 2000,
        "no tombstone bars"
    );
}

#[test]
fn size_flag_sets_pixels() {
    let (_tmp, dir) = staged("sweep");
    let out = dir.join("big.png");
    herdsim()
        .args(["plot"])
        .arg(&dir)
        .args(["--size", "2000x1500", "-o"])
        .arg(&out)
        .assert()
        .success();
    assert_eq!(load_png(&out).dimensions(), (2000, 1500));
}

/// Run `herdsim plot ARGS` and expect exit 2 with all `needles` in stderr.
fn bad(args: &[&str], needles: &[&str]) {
    let out = herdsim().arg("plot").args(args).assert().code(2);
    let err = String::from_utf8_lossy(&out.get_output().stderr).into_owned();
    for n in needles {
        assert!(err.contains(n), "stderr for {args:?} lacks `{n}`:\n{err}");
    }
}

#[test]
fn bad_input_exits_2_naming_file_and_field() {
    let fx = fixtures();
    let s = |p: &str| fx.join(p).to_string_lossy().into_owned();
    let sweep = s("sweep/summary.csv");
    let trace = s("trace.jsonl");
    let tmp = tempfile::tempdir().expect("temp dir");
    let out = tmp.path().join("x.png").to_string_lossy().into_owned();

    bad(
        &["/nonexistent/summary.csv"],
        &["/nonexistent/summary.csv", "no such file"],
    );
    bad(&[tmp.path().to_str().expect("utf-8")], &["no summary.csv"]);
    bad(
        &[&sweep, "--metrics", "dup_rate", "-o", &out],
        &["summary.csv", "no metric `dup_rate`", "duplicate_rate"],
    );
    bad(
        &[&sweep, "--x", "nope", "-o", &out],
        &["summary.csv", "--x", "`nope`"],
    );
    bad(
        &[&sweep, "--by", "nope", "-o", &out],
        &["summary.csv", "--by", "`nope`"],
    );
    bad(
        &[&s("bad/ragged.csv"), "-o", &out],
        &["ragged.csv", "line 3"],
    );
    bad(
        &[&s("bad/number.csv"), "-o", &out],
        &["number.csv", "line 3", "responses_per_msg_mean", "`lots`"],
    );
    bad(&[&sweep, "-o", "fig.jpg"], &["fig.jpg", ".png or .svg"]);
    bad(
        &["--timeline", &trace, "--msg", "m404", "-o", &out],
        &["trace.jsonl", "no message `m404`", "m1"],
    );
    bad(
        &["--timeline", "/nonexistent/t.jsonl"],
        &["/nonexistent/t.jsonl"],
    );
    bad(&[], &["RESULTS_DIR_OR_CSV"]);
    bad(&[&sweep, "--size", "big"], &["WIDTHxHEIGHT"]);

    let broken = tmp.path().join("broken.jsonl");
    std::fs::write(
        &broken,
        "{\"t_us\":1,\"ev\":\"post\",\"msg_id\":\"m1\"}\n{oops\n",
    )
    .expect("write");
    bad(
        &[
            "--timeline",
            broken.to_str().expect("utf-8"),
            "--msg",
            "m1",
            "-o",
            &out,
        ],
        &["broken.jsonl", "line 2"],
    );
    // Nothing was written by the failures.
    assert!(!Path::new(&out).exists());
}

#[test]
fn library_api_writes_figures_and_flags_input_errors() {
    let tmp = tempfile::tempdir().expect("temp dir");
    let csv = fixtures().join("sweep/summary.csv");
    let png = tmp.path().join("c.png");
    comparison_figure(&csv, &png, Some("A custom title")).expect("comparison");
    assert_eq!(load_png(&png).dimensions(), (1600, 1200));

    let svg = tmp.path().join("sub/dir/m.svg");
    let spec = PlotSpec {
        metrics: vec!["claims".into(), "yields".into()],
        ..PlotSpec::default()
    };
    metric_figure(&csv, &svg, &spec).expect("metric figure");
    let text = std::fs::read_to_string(&svg).expect("svg");
    assert_eq!(svg_size(&text), figure_size(2));
    assert!(text.contains("RESPONDING_TO per run"));

    let id = timeline_figure(
        &fixtures().join("trace.jsonl"),
        None,
        &tmp.path().join("t.png"),
        None,
    )
    .expect("timeline");
    assert_eq!(id, "m1");

    let e = comparison_figure(Path::new("/nonexistent.csv"), &png, None).expect_err("missing file");
    assert!(plot::is_input_error(&e));
    no_temp_files(tmp.path());
}

#[test]
fn out_dir_keeps_the_default_names() {
    // `--out DIR`, as for every subcommand: missing directories are
    // created and the figure keeps its default name; nothing lands beside
    // the input.
    let (_tmp, dir) = staged("sweep");
    let figs = dir.join("figs/nested");
    herdsim()
        .args(["plot"])
        .arg(&dir)
        .arg("--out")
        .arg(&figs)
        .assert()
        .success()
        .stdout(contains("comparison.png"));
    assert!(load_png(&figs.join("comparison.png")).width() > 0);
    assert!(!dir.join("comparison.png").exists());
    herdsim()
        .args(["plot"])
        .arg(&dir)
        .args(["--metrics", "ttfr_p95_ms_mean", "--out"])
        .arg(&figs)
        .assert()
        .success();
    assert!(figs.join("ttfr_p95_ms.png").is_file());
    no_temp_files(&figs);

    let (_tmp2, trace) = staged("trace.jsonl");
    let tl = trace.parent().expect("dir").join("timelines");
    herdsim()
        .args(["plot", "--timeline"])
        .arg(&trace)
        .args(["--msg", "m1", "--out"])
        .arg(&tl)
        .assert()
        .success();
    assert!(load_png(&tl.join("timeline-m1.png")).width() > 0);
}

/// A sweep of `schemes.scheme` (categorical) draws the schemes figure:
/// six panels (duplicates, unanswered, TTFR p50 and p95, calls and
/// inference seconds per question), every scheme x policy with its
/// whiskers, and says on stderr (and under the panels) what the marks
/// alone do not: `none` lies on `spec` at `mentions` (exactly) and at
/// `owner` (to the printed digits), and `mentions` has no TTFR. The
/// fixture is `herdsim run scenarios/schemes.toml`'s summary.csv.
#[test]
fn a_schemes_sweep_shows_every_series_and_says_which_lie_on_another() {
    let (_tmp, dir) = staged("schemes");
    let out = herdsim()
        .args(["plot"])
        .arg(&dir)
        .assert()
        .success()
        .stdout(contains("comparison.png"))
        .get_output()
        .clone();
    let err = String::from_utf8_lossy(&out.stderr).to_string();
    for needle in [
        "none = spec at mentions: the same numbers in every panel",
        "none = spec at owner: the same in every panel to the digits the table prints",
        "Median time to first response: n/a at mentions",
        "p95 time to first response: n/a at mentions",
    ] {
        assert!(err.contains(needle), "`{needle}` in\n{err}");
    }
    // `open` differs under spec and none: no note for it.
    assert!(!err.contains("at open"), "{err}");
    let img = load_png(&dir.join("comparison.png"));
    assert_eq!(img.dimensions(), figure_size(6));
    assert_eq!(img.dimensions(), (2100, 1200));
    // Both policies are drawn, in their colours, in every panel row.
    for (y0, y1) in [(0.1, 0.5), (0.5, 0.95)] {
        let spec_blue = count_color(&image_rows(&img, y0, y1), SPEC_BLUE, 6);
        let none_grey = count_color(&image_rows(&img, y0, y1), NONE_GREY, 6);
        assert!(
            spec_blue > 200 && none_grey > 200,
            "{spec_blue} {none_grey}"
        );
    }
    // The notes are drawn under the panels.
    let foot = inked(&img, 0.01, 0.93, 0.5, 0.995);
    assert!(foot > 0.002, "no notes under the panels: {foot}");
    // The library returns the same notes.
    let png = dir.join("again.png");
    let notes = comparison_figure(&dir.join("summary.csv"), &png, None).expect("figure");
    assert_eq!(notes.len(), 4, "{notes:?}");
    // `--quiet` drops the notes from stderr, not from the figure.
    herdsim()
        .args(["plot", "--quiet"])
        .arg(&dir)
        .assert()
        .success()
        .stderr("");
}

/// The rows `y0..y1` (fractions of the height) of `img`.
fn image_rows(img: &RgbImage, y0: f64, y1: f64) -> RgbImage {
    let (w, h) = img.dimensions();
    let (a, b) = ((y0 * h as f64) as u32, (y1 * h as f64) as u32);
    image::imageops::crop_imm(img, 0, a, w, b - a).to_image()
}
