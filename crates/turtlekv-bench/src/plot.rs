//! `--plot`: a PNG bar chart of throughput per workload and engine.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::OnceLock;

use anyhow::{Context, Result, anyhow, bail};
use plotters::prelude::*;
use plotters::style::{FontStyle, register_font};

use crate::report::PhaseResult;

const WIDTH_PX: u32 = 1200;
const HEIGHT_PX: u32 = 700;
const FONT_FAMILY: &str = "sans-serif";

/// Places a sans-serif font is usually installed when `fc-match` is absent.
const FALLBACK_FONTS: [&str; 3] = [
    "/usr/share/fonts/truetype/dejavu/DejaVuSans.ttf",
    "/usr/share/fonts/TTF/DejaVuSans.ttf",
    "/usr/share/fonts/truetype/liberation/LiberationSans-Regular.ttf",
];

/// The pure-Rust text renderer needs the font's bytes; we take the system's
/// sans-serif font rather than shipping one.
fn register_system_font() -> Result<()> {
    static REGISTERED: OnceLock<Result<(), String>> = OnceLock::new();
    REGISTERED
        .get_or_init(|| {
            let matched = Command::new("fc-match")
                .args(["-f", "%{file}", "sans-serif"])
                .output()
                .ok()
                .filter(|out| out.status.success())
                .map(|out| PathBuf::from(String::from_utf8_lossy(&out.stdout).into_owned()));
            let path = matched
                .into_iter()
                .chain(FALLBACK_FONTS.iter().map(PathBuf::from))
                .find(|p| p.is_file())
                .ok_or("no sans-serif font found (install fonts-dejavu-core)")?;
            let bytes = std::fs::read(&path).map_err(|e| format!("{}: {e}", path.display()))?;
            // Registered fonts live as long as the process.
            let bytes: &'static [u8] = Box::leak(bytes.into_boxed_slice());
            register_font(FONT_FAMILY, FontStyle::Normal, bytes)
                .map_err(|_| format!("{} is not a usable font", path.display()))
        })
        .clone()
        .map_err(|e| anyhow!(e))
}

/// Draws one group of bars per workload, one bar per engine, on a log
/// scale (scans are orders of magnitude slower than point reads).
pub fn plot_throughput(results: &[PhaseResult], path: &Path) -> Result<()> {
    if results.is_empty() {
        bail!("nothing to plot");
    }
    register_system_font()?;
    let mut workloads: Vec<&str> = Vec::new();
    let mut engines: Vec<&str> = Vec::new();
    for r in results {
        if !workloads.contains(&r.workload.as_str()) {
            workloads.push(&r.workload);
        }
        if !engines.contains(&r.engine.as_str()) {
            engines.push(&r.engine);
        }
    }
    let max = results.iter().map(|r| r.ops_per_sec).fold(1.0, f64::max);
    let min = results
        .iter()
        .map(|r| r.ops_per_sec)
        .filter(|v| *v > 0.0)
        .fold(max, f64::min);
    let floor = (min / 2.0).max(1.0);

    let root = BitMapBackend::new(path, (WIDTH_PX, HEIGHT_PX)).into_drawing_area();
    root.fill(&WHITE)?;
    let groups = workloads.len() as f64;
    let mut chart = ChartBuilder::on(&root)
        .caption("YCSB throughput (ops/s, log scale)", (FONT_FAMILY, 28))
        .margin(20)
        .x_label_area_size(40)
        .y_label_area_size(90)
        .build_cartesian_2d(-0.5..groups - 0.5, (floor..max * 2.0).log_scale())?;
    let names = workloads.clone();
    chart
        .configure_mesh()
        .disable_x_mesh()
        .x_labels(workloads.len())
        .x_label_formatter(&|x| {
            let i = x.round();
            if (x - i).abs() < 1e-6 && i >= 0.0 && (i as usize) < names.len() {
                names[i as usize].to_string()
            } else {
                String::new()
            }
        })
        .y_label_formatter(&|v| compact(*v))
        .y_desc("ops/s")
        .label_style((FONT_FAMILY, 16))
        .draw()?;

    let bar_width = 0.8 / engines.len() as f64;
    for (e, engine) in engines.iter().enumerate() {
        let color = Palette99::pick(e).to_rgba();
        let bars = results
            .iter()
            .filter(|r| r.engine == *engine)
            .filter_map(|r| {
                let w = workloads.iter().position(|w| *w == r.workload)? as f64;
                let left = w - 0.4 + e as f64 * bar_width;
                Some(Rectangle::new(
                    [
                        (left, floor),
                        (left + bar_width * 0.9, r.ops_per_sec.max(floor)),
                    ],
                    color.filled(),
                ))
            });
        chart
            .draw_series(bars)?
            .label(*engine)
            .legend(move |(x, y)| Rectangle::new([(x, y - 6), (x + 12, y + 6)], color.filled()));
    }
    chart
        .configure_series_labels()
        .position(SeriesLabelPosition::UpperRight)
        .label_font((FONT_FAMILY, 16))
        .background_style(WHITE.mix(0.8))
        .border_style(BLACK)
        .draw()?;
    root.present()
        .with_context(|| format!("writing {}", path.display()))?;
    Ok(())
}

/// `1500` as "1.5k", `2000000` as "2M": axis labels stay short.
fn compact(value: f64) -> String {
    let (scaled, suffix) = if value >= 1e6 {
        (value / 1e6, "M")
    } else if value >= 1e3 {
        (value / 1e3, "k")
    } else {
        (value, "")
    };
    let text = format!("{scaled:.1}");
    format!("{}{suffix}", text.trim_end_matches(".0"))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::report::Latency;

    fn row(engine: &str, workload: &str, ops_per_sec: f64) -> PhaseResult {
        PhaseResult {
            engine: engine.into(),
            workload: workload.into(),
            records: 10,
            ops: 10,
            threads: 1,
            ops_per_sec,
            p50_us: 1.0,
            p99_us: 1.0,
            p999_us: 1.0,
            write_amp: None,
            space_amp: None,
            peak_rss_bytes: None,
            cpu_us_per_op: None,
            read_kib_per_op: None,
            ratio_to_turtlekv: None,
            settings: None,
            per_op: vec![(
                "read".into(),
                Latency {
                    count: 10,
                    p50_us: 1.0,
                    p99_us: 1.0,
                    p999_us: 1.0,
                },
            )],
        }
    }

    #[test]
    fn compact_axis_labels() {
        assert_eq!(compact(999.0), "999");
        assert_eq!(compact(1500.0), "1.5k");
        assert_eq!(compact(300_000.0), "300k");
        assert_eq!(compact(2_000_000.0), "2M");
    }

    #[test]
    fn writes_a_png() {
        if register_system_font().is_err() {
            // A machine without any font cannot render labels; the error
            // path is what users see there, and it must name the fix.
            let err = plot_throughput(&[row("turtlekv", "a", 1.0)], Path::new("/nonexistent.png"))
                .unwrap_err();
            assert!(err.to_string().contains("font"), "{err}");
            return;
        }
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("plot.png");
        let results = [
            row("turtlekv", "load", 100_000.0),
            row("turtlekv", "e", 2_000.0),
            row("fjall", "load", 50_000.0),
            row("fjall", "e", 4_000.0),
        ];
        plot_throughput(&results, &path).unwrap();
        let bytes = std::fs::read(&path).unwrap();
        assert_eq!(&bytes[1..4], b"PNG");
        assert!(plot_throughput(&[], &path).is_err());
    }
}
