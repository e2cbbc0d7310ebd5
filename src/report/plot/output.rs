//! Output: the embedded font, the backend chosen by extension, and the
//! atomic write (temporary file in the target directory, then rename).

use super::bad;
use anyhow::{Context, anyhow};
use plotters::coord::Shift;
use plotters::prelude::*;
use plotters::style::{FontStyle, register_font};
use std::path::{Path, PathBuf};
use std::sync::OnceLock;
use std::sync::atomic::{AtomicU64, Ordering};

static REGULAR: &[u8] = include_bytes!("../../../assets/fonts/LiberationSans-Regular.ttf");
static BOLD: &[u8] = include_bytes!("../../../assets/fonts/LiberationSans-Bold.ttf");

/// The family every figure uses, registered from the embedded font. The
/// name is also what an SVG asks its viewer for, so it lists Liberation Sans
/// and its metric twin Arial first: text then keeps the widths it was laid
/// out with.
pub const FAMILY: &str = "Liberation Sans, Arial, Helvetica, sans-serif";

/// Register the embedded font under [`FAMILY`] (once per process).
pub fn ensure_fonts() -> anyhow::Result<()> {
    static DONE: OnceLock<Result<(), String>> = OnceLock::new();
    DONE.get_or_init(|| {
        register_font(FAMILY, FontStyle::Normal, REGULAR)
            .map_err(|_| "the embedded regular font does not parse".to_string())?;
        register_font(FAMILY, FontStyle::Bold, BOLD)
            .map_err(|_| "the embedded bold font does not parse".to_string())?;
        Ok(())
    })
    .clone()
    .map_err(|e| anyhow!(e))
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Format {
    Png,
    Svg,
}

impl Format {
    pub fn from_path(out: &Path) -> anyhow::Result<Format> {
        let ext = out
            .extension()
            .and_then(|e| e.to_str())
            .map(str::to_ascii_lowercase);
        match ext.as_deref() {
            Some("png") => Ok(Format::Png),
            Some("svg") => Ok(Format::Svg),
            _ => Err(bad(format!(
                "{}: output file must end in .png or .svg",
                out.display()
            ))),
        }
    }
}

/// Something that draws itself on any backend.
pub trait Figure {
    fn draw<DB: DrawingBackend>(&self, root: &DrawingArea<DB, Shift>) -> anyhow::Result<()>
    where
        DB::ErrorType: 'static;
}

/// Draw `fig` at `size` pixels into `out`, atomically.
pub fn render<F: Figure>(
    out: &Path,
    format: Format,
    size: (u32, u32),
    fig: &F,
) -> anyhow::Result<()> {
    ensure_fonts()?;
    if size.0 < 200 || size.1 < 150 || size.0 > 20_000 || size.1 > 20_000 {
        return Err(bad(format!(
            "figure size {}x{} is out of range (200x150 to 20000x20000)",
            size.0, size.1
        )));
    }
    let dir = match out.parent() {
        Some(p) if !p.as_os_str().is_empty() => p.to_path_buf(),
        _ => PathBuf::from("."),
    };
    std::fs::create_dir_all(&dir).with_context(|| format!("creating {}", dir.display()))?;
    let tmp = temp_path(&dir, out, format);
    let result = write_to(&tmp, format, size, fig).and_then(|()| {
        std::fs::rename(&tmp, out)
            .with_context(|| format!("renaming {} to {}", tmp.display(), out.display()))
    });
    if result.is_err() {
        let _ = std::fs::remove_file(&tmp);
    }
    result
}

fn temp_path(dir: &Path, out: &Path, format: Format) -> PathBuf {
    static COUNTER: AtomicU64 = AtomicU64::new(0);
    let n = COUNTER.fetch_add(1, Ordering::Relaxed);
    let stem = out
        .file_stem()
        .map(|s| s.to_string_lossy().into_owned())
        .unwrap_or_else(|| "figure".to_string());
    // The bitmap encoder picks the format from the extension, so keep it.
    let ext = match format {
        Format::Png => "png",
        Format::Svg => "svg",
    };
    dir.join(format!(".{stem}.tmp-{}-{n}.{ext}", std::process::id()))
}

fn write_to<F: Figure>(
    tmp: &Path,
    format: Format,
    size: (u32, u32),
    fig: &F,
) -> anyhow::Result<()> {
    match format {
        Format::Png => {
            let root = BitMapBackend::new(tmp, size).into_drawing_area();
            fig.draw(&root)?;
            root.present()
                .map_err(|e| anyhow!("writing {}: {e}", tmp.display()))?;
        }
        Format::Svg => {
            let mut text = String::new();
            {
                let root = SVGBackend::with_string(&mut text, size).into_drawing_area();
                fig.draw(&root)?;
                root.present().map_err(|e| anyhow!("drawing SVG: {e}"))?;
            }
            std::fs::write(tmp, text).with_context(|| format!("writing {}", tmp.display()))?;
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn format_follows_extension() {
        assert_eq!(
            Format::from_path(Path::new("a/b.PNG")).ok(),
            Some(Format::Png)
        );
        assert_eq!(
            Format::from_path(Path::new("b.svg")).ok(),
            Some(Format::Svg)
        );
        let e = Format::from_path(Path::new("b.jpg")).err();
        assert!(e.is_some_and(|e| super::super::is_input_error(&e)));
    }

    #[test]
    fn fonts_register() {
        assert!(ensure_fonts().is_ok());
        assert!(ensure_fonts().is_ok());
    }
}
