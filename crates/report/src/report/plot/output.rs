//! Output: the embedded font, the format chosen by extension, the figure
//! drawn in memory and written atomically.

use super::bad;
use crate::report::atomic;
use anyhow::{Context, anyhow};
use image::ColorType;
use image::ImageEncoder;
use image::codecs::png::PngEncoder;
use plotters::coord::Shift;
use plotters::prelude::*;
use plotters::style::{FontStyle, register_font};
use std::path::Path;
use std::sync::OnceLock;

static REGULAR: &[u8] = include_bytes!("../../../../../assets/fonts/LiberationSans-Regular.ttf");
static BOLD: &[u8] = include_bytes!("../../../../../assets/fonts/LiberationSans-Bold.ttf");

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

/// Draw `fig` at `size` pixels into `out`, atomically (as every file
/// herdsim writes, through [`crate::report::atomic`]).
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
    let bytes = encode(format, size, fig)?;
    atomic::write(out, &bytes).with_context(|| format!("writing {}", out.display()))
}

/// The figure as the bytes of a PNG or an SVG file.
pub(super) fn encode<F: Figure>(
    format: Format,
    size: (u32, u32),
    fig: &F,
) -> anyhow::Result<Vec<u8>> {
    match format {
        Format::Png => {
            let mut pixels = vec![0u8; size.0 as usize * size.1 as usize * 3];
            {
                let root = BitMapBackend::with_buffer(&mut pixels, size).into_drawing_area();
                fig.draw(&root)?;
                root.present().map_err(|e| anyhow!("drawing PNG: {e}"))?;
            }
            let mut png = Vec::new();
            PngEncoder::new(&mut png)
                .write_image(&pixels, size.0, size.1, ColorType::Rgb8)
                .map_err(|e| anyhow!("encoding PNG: {e}"))?;
            Ok(png)
        }
        Format::Svg => {
            let mut text = String::new();
            {
                let root = SVGBackend::with_string(&mut text, size).into_drawing_area();
                fig.draw(&root)?;
                root.present().map_err(|e| anyhow!("drawing SVG: {e}"))?;
            }
            Ok(text.into_bytes())
        }
    }
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
