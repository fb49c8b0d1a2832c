//! `--plot` and `turtlekv-bench plot`: an SVG bar chart of throughput per
//! workload, one bar per engine (and per results file, when several are
//! drawn together).
//!
//! SVG only: the viewer draws the text, so no font has to be found on the
//! machine that draws the chart (PNG output needed the system's fonts and
//! was dropped).

use std::collections::HashMap;
use std::path::Path;

use anyhow::{Context, Result, bail};
use plotters::coord::combinators::{BindKeyPoints as _, LogCoord, WithKeyPoints};
use plotters::prelude::*;
use plotters::style::text_anchor::{HPos, Pos, VPos};

use crate::report::{LabelledRun, engine_title, with_columns, workload_columns, workload_title};

const WIDTH_PX: u32 = 1280;
const HEIGHT_PX: u32 = 720;
/// The strip right of the chart that holds the legend.
const LEGEND_PX: u32 = 330;
const FONT_FAMILY: &str = "sans-serif";
/// With this many bars a group or fewer, each bar carries its value.
const MAX_BARS_WITH_VALUES: usize = 3;

/// One engine's bars from one results file.
struct Series {
    engine: String,
    name: String,
    /// ops/s by (workload, repeat).
    values: HashMap<(String, usize), f64>,
}

/// Draws every run's rows to `path` (an SVG file), bars grouped by
/// workload on a log scale (scans are orders of magnitude slower than
/// point reads). `title` replaces the title made from the first run's
/// settings.
pub fn plot_runs(runs: &[LabelledRun], title: Option<&str>, path: &Path) -> Result<()> {
    if runs.iter().all(|run| run.file.results.is_empty()) {
        bail!("nothing to plot: no results");
    }
    let columns = workload_columns(runs.iter().map(|run| run.file.results.as_slice()));
    let series = series_of(runs);
    let title = title.map_or_else(|| default_title(runs), str::to_string);
    let values: Vec<f64> = series
        .iter()
        .flat_map(|s| s.values.values().copied())
        .filter(|v| *v > 0.0)
        .collect();
    let max = values.iter().copied().fold(1.0, f64::max);
    let min = values.iter().copied().fold(max, f64::min);
    // The axis starts on a labelled power of ten, and leaves room above
    // the tallest bar for its value.
    let floor = 10f64.powf((min / 1.5).max(1.0).log10().floor());
    let ceiling = max * 1.6;

    let root = SVGBackend::new(path, (WIDTH_PX, HEIGHT_PX)).into_drawing_area();
    root.fill(&WHITE)?;
    let body = root.titled(&title, (FONT_FAMILY, 22))?;
    let (chart_area, legend_area) = body.split_horizontally(WIDTH_PX - LEGEND_PX);
    let groups = columns.len() as f64;
    let mut chart = ChartBuilder::on(&chart_area)
        .margin(15)
        .x_label_area_size(55)
        .y_label_area_size(85)
        .build_cartesian_2d(-0.5..groups - 0.5, y_axis(floor, ceiling))?;
    let names: Vec<String> = columns
        .iter()
        .map(|(name, nth)| workload_title(name, *nth))
        .collect();
    chart
        .configure_mesh()
        .disable_x_mesh()
        .x_labels(columns.len())
        .x_label_formatter(&|x| {
            let i = x.round();
            if (x - i).abs() < 1e-6 && i >= 0.0 && (i as usize) < names.len() {
                names[i as usize].clone()
            } else {
                String::new()
            }
        })
        .y_label_formatter(&|v| compact(*v))
        .x_desc("YCSB workload")
        .y_desc("throughput, ops/s (log scale)")
        .label_style((FONT_FAMILY, 16))
        .axis_desc_style((FONT_FAMILY, 18))
        .draw()?;

    let colors = series_colors(&series);
    let bar_width = 0.8 / series.len() as f64;
    for (s, one) in series.iter().enumerate() {
        let color = colors[s];
        let bars = columns.iter().enumerate().filter_map(|(g, column)| {
            let value = *one.values.get(column)?;
            let left = g as f64 - 0.4 + s as f64 * bar_width;
            Some(Rectangle::new(
                [(left, floor), (left + bar_width * 0.9, value.max(floor))],
                color.filled(),
            ))
        });
        chart.draw_series(bars)?;
        if series.len() <= MAX_BARS_WITH_VALUES {
            let style = TextStyle::from((FONT_FAMILY, 13).into_font())
                .pos(Pos::new(HPos::Center, VPos::Bottom));
            let labels = columns.iter().enumerate().filter_map(|(g, column)| {
                let value = *one.values.get(column)?;
                let centre = g as f64 - 0.4 + (s as f64 + 0.45) * bar_width;
                Some(Text::new(
                    compact(value),
                    (centre, value.max(floor) * 1.08),
                    style.clone(),
                ))
            });
            chart.draw_series(labels)?;
        }
    }
    draw_legend(&legend_area, &series, &colors, &columns)?;
    root.present()
        .with_context(|| format!("writing {}", path.display()))?;
    Ok(())
}

/// A log axis labelled at 1, 2 and 5 times each power of ten.
fn y_axis(floor: f64, ceiling: f64) -> WithKeyPoints<LogCoord<f64>> {
    let axis: LogCoord<f64> = (floor..ceiling).log_scale().into();
    let mut points = Vec::new();
    let mut decade = floor;
    while decade <= ceiling {
        points.extend(
            [1.0, 2.0, 5.0]
                .iter()
                .map(|m| m * decade)
                .filter(|p| *p <= ceiling),
        );
        decade *= 10.0;
    }
    axis.with_key_points(points)
}

/// One series per (file, engine), the same engine's series side by side.
fn series_of(runs: &[LabelledRun]) -> Vec<Series> {
    let mut engine_order: Vec<String> = Vec::new();
    let mut series: Vec<(usize, Series)> = Vec::new();
    for (r, run) in runs.iter().enumerate() {
        let mut mine: Vec<Series> = Vec::new();
        for (column, row) in with_columns(&run.file.results) {
            if !engine_order.contains(&row.engine) {
                engine_order.push(row.engine.clone());
            }
            let index = match mine.iter().position(|s| s.engine == row.engine) {
                Some(index) => index,
                None => {
                    let mut name = engine_title(&row.engine);
                    if runs.len() > 1 && !run.label.is_empty() {
                        name = format!("{name} ({})", run.label);
                    }
                    mine.push(Series {
                        engine: row.engine.clone(),
                        name,
                        values: HashMap::new(),
                    });
                    mine.len() - 1
                }
            };
            mine[index].values.insert(column, row.ops_per_sec);
        }
        series.extend(mine.into_iter().map(|s| (r, s)));
    }
    series.sort_by_key(|(r, s)| (engine_order.iter().position(|e| *e == s.engine), *r));
    series.into_iter().map(|(_, s)| s).collect()
}

/// A fixed colour per engine, lighter for each further file's series of
/// the same engine.
fn series_colors(series: &[Series]) -> Vec<RGBColor> {
    let mut seen: HashMap<&str, usize> = HashMap::new();
    let mut others = 0;
    series
        .iter()
        .map(|s| {
            let base = match s.engine.as_str() {
                "turtlekv" => RGBColor(0x4E, 0x79, 0xA7),
                "rocksdb" => RGBColor(0xF2, 0x8E, 0x2B),
                "fjall" => RGBColor(0x59, 0xA1, 0x4F),
                "redb" => RGBColor(0xE1, 0x57, 0x59),
                "lmdb" => RGBColor(0xB0, 0x7A, 0xA1),
                _ => {
                    others += 1;
                    [RGBColor(0x9C, 0x75, 0x5F), RGBColor(0x76, 0xB7, 0xB2)][others % 2]
                }
            };
            let nth = seen.entry(&s.engine).or_default();
            let lighten = (*nth as f64 * 0.3).min(0.7);
            *nth += 1;
            let mix = |c: u8| (f64::from(c) + (255.0 - f64::from(c)) * lighten).round() as u8;
            RGBColor(mix(base.0), mix(base.1), mix(base.2))
        })
        .collect()
}

/// What each workload does, for the legend.
fn workload_meaning(name: &str) -> Option<&'static str> {
    Some(match name {
        "load" => "Load: insert every record",
        "a" => "A: 50% read, 50% update",
        "b" => "B: 95% read, 5% update",
        "c" => "C: read only",
        "d" => "D: 95% read latest, 5% insert",
        "e" => "E: 95% scan (1-100), 5% insert",
        "f" => "F: 50% read, 50% read-modify-write",
        _ => return None,
    })
}

fn draw_legend<DB: DrawingBackend>(
    area: &DrawingArea<DB, plotters::coord::Shift>,
    series: &[Series],
    colors: &[RGBColor],
    columns: &[(String, usize)],
) -> Result<()>
where
    DB::ErrorType: 'static,
{
    let text = |size: i32| TextStyle::from((FONT_FAMILY, size).into_font());
    let mut y = 30;
    area.draw(&Text::new("Engine", (10, y), text(16)))?;
    y += 26;
    for (s, color) in series.iter().zip(colors) {
        area.draw(&Rectangle::new([(10, y), (26, y + 16)], color.filled()))?;
        area.draw(&Text::new(s.name.clone(), (34, y), text(15)))?;
        y += 24;
    }
    y += 16;
    area.draw(&Text::new("Workload", (10, y), text(16)))?;
    y += 26;
    let mut listed: Vec<&str> = Vec::new();
    for (name, _) in columns {
        if listed.contains(&name.as_str()) {
            continue;
        }
        listed.push(name);
        if let Some(meaning) = workload_meaning(name) {
            area.draw(&Text::new(meaning, (10, y), text(14)))?;
            y += 20;
        }
    }
    Ok(())
}

/// The chart's title from the first run's settings: records, value size,
/// cache, and the commit and date.
fn default_title(runs: &[LabelledRun]) -> String {
    let Some(first) = runs.first() else {
        return "YCSB throughput".to_string();
    };
    let rows = &first.file.results;
    let mut parts: Vec<String> = Vec::new();
    let records = rows.first().map(|r| r.records);
    let cache = match &first.file.metadata {
        Some(meta) => Some(meta.settings.cache_bytes),
        None => rows.iter().find_map(|r| r.settings.map(|s| s.cache_bytes)),
    };
    if let Some(records) = records {
        parts.push(format!("{} records", compact(records as f64)));
    }
    if let Some(meta) = &first.file.metadata {
        parts.push(format!("{}-byte values", meta.settings.value_size));
        let compressibility = meta.settings.value_compressibility;
        if compressibility > 0.0 {
            parts.push(format!("{:.0}% compressible", compressibility * 100.0));
        }
    }
    if let Some(cache) = cache {
        parts.push(format!("{} cache", bytes_title(cache)));
    }
    if runs.len() == 1
        && let Some(meta) = &first.file.metadata
    {
        let date = meta.started_at.get(..10).unwrap_or("");
        parts.push(format!("commit {} {date}", meta.commit).trim().to_string());
    }
    if parts.is_empty() {
        "YCSB throughput".to_string()
    } else {
        format!("YCSB throughput: {}", parts.join(", "))
    }
}

/// `2147483648` as "2.0 GiB", `426666666` as "406.9 MiB".
fn bytes_title(bytes: u64) -> String {
    let gib = bytes as f64 / f64::from(1u32 << 30);
    if gib >= 1.0 {
        format!("{gib:.1} GiB")
    } else {
        format!("{:.1} MiB", bytes as f64 / f64::from(1u32 << 20))
    }
}

/// `1500` as "1.5k", `2000000` as "2M": axis labels stay short.
pub fn compact(value: f64) -> String {
    let (scaled, suffix) = if value >= 1e6 {
        (value / 1e6, "M")
    } else if value >= 1e3 {
        (value / 1e3, "k")
    } else {
        (value, "")
    };
    let digits = if scaled >= 100.0 { 0 } else { 1 };
    let text = format!("{scaled:.digits$}");
    format!("{}{suffix}", text.trim_end_matches(".0"))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::report::{Latency, PhaseResult, ResultsFile};

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
            rmw_retries: None,
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

    fn run(label: &str, rows: Vec<PhaseResult>) -> LabelledRun {
        LabelledRun {
            label: label.into(),
            file: ResultsFile::new(None, rows),
        }
    }

    #[test]
    fn compact_axis_labels() {
        assert_eq!(compact(999.0), "999");
        assert_eq!(compact(1500.0), "1.5k");
        assert_eq!(compact(300_000.0), "300k");
        assert_eq!(compact(612_728.0), "613k");
        assert_eq!(compact(2_000_000.0), "2M");
        assert_eq!(compact(1_056_045.0), "1.1M");
        assert_eq!(bytes_title(2 << 30), "2.0 GiB");
        assert_eq!(bytes_title(426_666_666), "406.9 MiB");
    }

    /// Two files: the same engine's bars sit together, named by file, the
    /// later file's lighter.
    #[test]
    fn series_group_engines_across_files() {
        let runs = [
            run(
                "first",
                vec![row("turtlekv", "a", 2.0), row("rocksdb", "a", 1.0)],
            ),
            run(
                "second",
                vec![row("rocksdb", "a", 3.0), row("turtlekv", "a", 4.0)],
            ),
        ];
        let series = series_of(&runs);
        let names: Vec<&str> = series.iter().map(|s| s.name.as_str()).collect();
        assert_eq!(
            names,
            [
                "TurtleKV (first)",
                "TurtleKV (second)",
                "RocksDB (first)",
                "RocksDB (second)"
            ]
        );
        assert_eq!(series[1].values[&("a".to_string(), 0)], 4.0);
        let colors = series_colors(&series);
        assert_ne!(colors[0], colors[1]);
        assert!(
            colors[1].0 > colors[0].0,
            "the second file's bar is lighter"
        );
        assert_ne!(colors[0], colors[2]);
    }

    #[test]
    fn nothing_to_plot_is_an_error() {
        let dir = tempfile::tempdir().unwrap();
        let err = plot_runs(&[run("", vec![])], None, &dir.path().join("x.svg")).unwrap_err();
        assert!(err.to_string().contains("nothing to plot"), "{err}");
    }
}
