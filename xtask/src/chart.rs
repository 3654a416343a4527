//! `docs/benchmarks.svg`: the head-to-head rows of `docs/benchmarks.md` as
//! one picture. Every row in which this crate and at least one peer (rayon,
//! tokio, compio) have a ratio to the raw column becomes a group of bars,
//! one per measured column, drawn from the raw floor (×1) on a log scale:
//! left of it is cheaper than the raw call, right of it dearer. Throughput
//! rows (MB/s, higher is better) are drawn as their inverse, so that left
//! is better everywhere.
//!
//! The chart is made from the markdown tables alone, so `cargo xtask bench
//! --chart` redraws it without running anything, and the headless-browser
//! check of `cargo xtask test` renders it and counts its bars.

/// The columns drawn, in this order: a table column whose header starts
/// with the second field is drawn as the first. `tokio` matches the main
/// table's column and the socket table's `tokio multi-thread`.
const SERIES: [(&str, &str, &str); 4] = [
    ("this crate", "this crate", "#1f77b4"),
    ("rayon", "rayon", "#2ca02c"),
    ("tokio", "tokio", "#d62728"),
    ("compio", "compio", "#9467bd"),
];

/// One drawn row: its label and a ratio to raw per [`SERIES`] entry.
#[derive(Debug, PartialEq)]
pub struct Row {
    pub label: String,
    pub ratios: [Option<f64>; SERIES.len()],
}

impl Row {
    /// The bars the row draws.
    fn bars(&self) -> usize {
        self.ratios.iter().flatten().count()
    }
}

/// A cell's ratio (`… ×1.06`), if it has one.
fn ratio(cell: &str) -> Option<f64> {
    cell.rsplit_once('×')?.1.trim().parse().ok().filter(|r: &f64| *r > 0.0)
}

/// The label of a row: its workload up to the first parenthesis,
/// at most 72 characters.
fn label(workload: &str) -> String {
    let cut = workload.find(" (").unwrap_or(workload.len());
    let short = workload[..cut].trim();
    if short.chars().count() <= 72 {
        short.to_string()
    } else {
        format!("{}…", short.chars().take(71).collect::<String>())
    }
}

/// The head-to-head rows of every table in `doc`, in the tables' order.
pub fn rows(doc: &str) -> Vec<Row> {
    let mut rows = Vec::new();
    // Which table column each series is drawn from, per table.
    let mut columns: [Option<usize>; SERIES.len()] = [None; SERIES.len()];
    for line in doc.lines() {
        let Some(inner) = line.trim().strip_prefix('|').and_then(|l| l.strip_suffix('|')) else {
            columns = [None; SERIES.len()];
            continue;
        };
        let cells: Vec<&str> = inner.split('|').map(str::trim).collect();
        if cells.first() == Some(&"workload") {
            columns = SERIES.map(|(_, prefix, _)| cells.iter().position(|c| c.starts_with(prefix)));
            continue;
        }
        if cells.len() < 3 || cells[0].starts_with("---") {
            continue;
        }
        let inverse = cells[1] == "MB/s";
        let ratios = columns.map(|c| {
            c.and_then(|c| cells.get(c)).and_then(|cell| ratio(cell)).map(|r| if inverse { 1.0 / r } else { r })
        });
        if ratios[0].is_some() && ratios[1..].iter().any(Option::is_some) {
            rows.push(Row { label: label(cells[0]), ratios });
        }
    }
    rows
}

/// Escapes text for SVG.
fn esc(s: &str) -> String {
    s.replace('&', "&amp;").replace('<', "&lt;").replace('>', "&gt;").replace('"', "&quot;")
}

const LABEL_W: f64 = 480.0;
const PLOT_W: f64 = 520.0;
const BAR_H: f64 = 11.0;
const GROUP_GAP: f64 = 9.0;
const TOP: f64 = 62.0;

/// The chart of `rows` as a standalone SVG document; `title` heads it.
pub fn svg(rows: &[Row], title: &str) -> String {
    let all = rows.iter().flat_map(|r| r.ratios.iter().flatten());
    let (lo, hi) = all.fold((1.0f64, 1.0f64), |(lo, hi), &r| (lo.min(r), hi.max(r)));
    let (lo, hi) = (lo.log10().floor().min(-1.0), hi.log10().ceil().max(1.0));
    let x = |r: f64| LABEL_W + (r.log10() - lo) / (hi - lo) * PLOT_W;
    let height: f64 = TOP + rows.iter().map(|r| r.bars() as f64 * BAR_H + GROUP_GAP).sum::<f64>() + 30.0;
    let width = LABEL_W + PLOT_W + 60.0;
    let mut s = format!(
        "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"{width:.0}\" height=\"{height:.0}\" \
         viewBox=\"0 0 {width:.0} {height:.0}\" font-family=\"sans-serif\" font-size=\"11\">\n\
         <rect width=\"100%\" height=\"100%\" fill=\"white\"/>\n\
         <text x=\"10\" y=\"18\" font-size=\"14\" font-weight=\"bold\">{}</text>\n\
         <text x=\"10\" y=\"34\">Cost relative to the raw Win32 call (×1, the line); log scale, left is better. \
         Throughput rows are inverted.</text>\n",
        esc(title)
    );
    for (i, (name, _, colour)) in SERIES.iter().enumerate() {
        let lx = 10.0 + i as f64 * 120.0;
        s.push_str(&format!(
            "<rect x=\"{lx}\" y=\"42\" width=\"10\" height=\"10\" fill=\"{colour}\"/>\
             <text x=\"{}\" y=\"51\">{}</text>\n",
            lx + 14.0,
            esc(name)
        ));
    }
    let bottom = height - 24.0;
    for p in (lo as i32)..=(hi as i32) {
        let gx = x(10f64.powi(p));
        let (stroke, w) = if p == 0 { ("#000", 1.5) } else { ("#ccc", 1.0) };
        let tick = if p >= 0 { format!("×{}", 10u64.pow(p as u32)) } else { format!("×{}", 10f64.powi(p)) };
        s.push_str(&format!(
            "<line x1=\"{gx:.1}\" y1=\"{TOP}\" x2=\"{gx:.1}\" y2=\"{bottom:.1}\" stroke=\"{stroke}\" stroke-width=\"{w}\"/>\
             <text x=\"{gx:.1}\" y=\"{:.1}\" text-anchor=\"middle\">{tick}</text>\n",
            bottom + 14.0
        ));
    }
    let mut y = TOP;
    for row in rows {
        let group_h = row.bars() as f64 * BAR_H;
        s.push_str(&format!(
            "<text x=\"{:.1}\" y=\"{:.1}\" text-anchor=\"end\">{}</text>\n",
            LABEL_W - 8.0,
            y + group_h / 2.0 + 4.0,
            esc(&row.label)
        ));
        for (i, r) in row.ratios.iter().enumerate() {
            let Some(r) = *r else { continue };
            let (name, _, colour) = SERIES[i];
            let (x0, x1) = (x(1.0).min(x(r)), x(1.0).max(x(r)));
            s.push_str(&format!(
                "<rect class=\"bar\" x=\"{x0:.1}\" y=\"{y:.1}\" width=\"{:.1}\" height=\"{:.1}\" fill=\"{colour}\">\
                 <title>{}: {name} ×{r:.2}</title></rect>\
                 <text x=\"{:.1}\" y=\"{:.1}\" font-size=\"9\">×{r:.2}</text>\n",
                (x1 - x0).max(1.0),
                BAR_H - 2.0,
                esc(&row.label),
                x1 + 3.0,
                y + BAR_H - 3.0
            ));
            y += BAR_H;
        }
        y += GROUP_GAP;
    }
    s.push_str("</svg>\n");
    s
}

/// The bars [`svg`] draws for `doc`'s tables.
pub fn bar_count(doc: &str) -> usize {
    rows(doc).iter().map(Row::bars).sum()
}

#[cfg(test)]
mod tests {
    use super::*;

    const DOC: &str = "# Benchmarks\n\n\
| workload | unit | this crate | raw windows-sys | windows-threading | rayon::spawn | std threads + channel | tokio |\n\
|---|---|---|---|---|---|---|---|\n\
| 1. work throughput (200000 submits + wait) | ns/submit | 9349 (6173..14118) ×1.06 | 8830 (7820..18059) ×1.00 | 17109 (1..2) ×1.94 | 988 (658..1110) ×0.11 | 535 (463..801) ×0.06 | n/a |\n\
| 7. create + drop: work | ns/object | 215 (211..222) ×1.52 | 142 (139..145) ×1.00 | n/a | n/a | n/a | n/a |\n\
| 15a. sleeps, joined | ms wall | 149 (145..162) | n/a | n/a | n/a | n/a | 9954 (7184..11620) |\n\
| 16. spawn + await | ns/task | 17169 (1..2) ×1.00 | 17179 (1..2) ×1.00 | n/a | n/a | n/a | 509 (464..568) ×0.03 |\n\
\n## Sockets\n\n\
| workload | unit | this crate | raw windows-sys TP_IO | compio (IOCP driver) | tokio multi-thread | tokio current-thread | std blocking, two threads |\n\
|---|---|---|---|---|---|---|---|\n\
| N2. stream 256 MiB | MB/s | 216 (170..283) ×0.80 | 284 (167..310) ×1.00 | 325 (178..448) ×1.25 | 237 (166..282) ×0.84 | 231 (1..2) ×0.81 | 307 (1..2) ×1.08 |\n";

    #[test]
    fn head_to_head_rows_are_those_with_a_peer() {
        let rows = rows(DOC);
        let labels: Vec<&str> = rows.iter().map(|r| r.label.as_str()).collect();
        // 7. has no peer, 15a. no ratio to raw.
        assert_eq!(labels, ["1. work throughput", "16. spawn + await", "N2. stream 256 MiB"]);
        assert_eq!(rows[0].ratios, [Some(1.06), Some(0.11), None, None]);
        assert_eq!(rows[1].ratios, [Some(1.00), None, Some(0.03), None]);
        // Throughput inverted: tokio multi-thread (not current-thread) is the tokio series.
        assert_eq!(rows[2].ratios, [Some(1.25), None, Some(1.0 / 0.84), Some(0.8)]);
        assert_eq!(bar_count(DOC), 2 + 2 + 3);
    }

    #[test]
    fn the_svg_draws_one_bar_per_ratio_on_a_log_scale() {
        let rows = rows(DOC);
        let svg = svg(&rows, "t <1>");
        assert_eq!(svg.matches("class=\"bar\"").count(), bar_count(DOC));
        assert!(svg.contains("t &lt;1&gt;"));
        // The axis covers ×0.01 (tokio's 0.03) to ×10 at least, the floor drawn at ×1.
        assert!(svg.contains(">×0.01<") && svg.contains(">×1<") && svg.contains(">×10<"));
        // A bar cheaper than raw ends at the floor; a dearer one starts there.
        let floor = LABEL_W + (0.0 - -2.0) / (1.0 - -2.0) * PLOT_W;
        assert!(svg.contains(&format!("width=\"{:.1}\"", floor - (LABEL_W + (0.11f64.log10() + 2.0) / 3.0 * PLOT_W))));
    }

    #[test]
    fn long_labels_are_cut_at_the_parenthesis_or_shortened() {
        assert_eq!(label("N1. TCP ping-pong (client and server)"), "N1. TCP ping-pong");
        let long = "x".repeat(80);
        assert_eq!(label(&long).chars().count(), 72);
        assert_eq!(ratio("9349 (6173..14118) ×1.06"), Some(1.06));
        assert_eq!(ratio("n/a"), None);
    }
}
