//! The replay bench's SVG plot: read amplification and wire bytes per
//! contender and scenario, one grouped bar chart per broker and measure.

use std::fmt::Write as _;

use crate::contenders::Contender;
use crate::report::{bytes, Row};

/// A power of ten of bytes, for axis ticks: `10 kB`, `1 MB`.
fn decimal_bytes(v: f64) -> String {
    match v {
        v if v >= 1e9 => format!("{} GB", v / 1e9),
        v if v >= 1e6 => format!("{} MB", v / 1e6),
        v if v >= 1e3 => format!("{} kB", v / 1e3),
        v => format!("{v} B"),
    }
}

const COLORS: [&str; 6] = [
    "#9e9e9e", "#ef8a62", "#b2182b", "#67a9cf", "#2166ac", "#1b7837",
];

/// One grouped bar chart (log scale) per broker and measure: read
/// amplification against the floor, and wire bytes (the floor as a black
/// tick).
pub(crate) fn svg(rows: &[Row]) -> String {
    let mut brokers: Vec<&str> = rows.iter().map(|r| r.broker.as_str()).collect();
    brokers.dedup();
    let mut groups_by_broker: Vec<(&str, Vec<Vec<&Row>>)> = Vec::new();
    for broker in &brokers {
        let mut groups: Vec<Vec<&Row>> = Vec::new();
        for r in rows.iter().filter(|r| r.broker == *broker) {
            match groups.last_mut() {
                Some(g) if g[0].scenario_key() == r.scenario_key() => g.push(r),
                _ => groups.push(vec![r]),
            }
        }
        groups_by_broker.push((broker, groups));
    }
    let max_groups = groups_by_broker
        .iter()
        .map(|(_, g)| g.len())
        .max()
        .unwrap_or(1);
    let bar = 9.0;
    let group_w = bar * 5.0 + 12.0;
    let left = 70.0;
    let plot_w = group_w * max_groups as f64;
    let width = left + plot_w + 110.0;
    let chart_h = 220.0;
    let label_h = 140.0;
    let panel_h = chart_h + label_h + 40.0;
    let height = 60.0 + panel_h * 2.0 * brokers.len() as f64;
    let mut s = String::new();
    let _ = writeln!(
        s,
        r#"<svg xmlns="http://www.w3.org/2000/svg" width="{width:.0}" height="{height:.0}" font-family="sans-serif" font-size="11">"#
    );
    let _ = writeln!(
        s,
        r#"<rect width="100%" height="100%" fill="white"/><text x="{left}" y="20" font-size="14">walfetch replay benchmark: read amplification and wire bytes per contender and scenario (log scale)</text>"#
    );
    for (i, c) in Contender::ALL.iter().enumerate() {
        let x = left + i as f64 * 150.0;
        let _ = writeln!(
            s,
            r#"<rect x="{x}" y="32" width="12" height="12" fill="{}"/><text x="{}" y="42">{}</text>"#,
            COLORS[i],
            x + 16.0,
            c.name()
        );
    }
    let mut y0 = 60.0;
    for (broker, groups) in &groups_by_broker {
        for measure in ["amplification vs floor (×)", "wire bytes"] {
            let value = |r: &Row| {
                if measure.starts_with("amp") {
                    r.amp_floor
                } else {
                    r.wire_bytes as f64
                }
            };
            let all: Vec<f64> = groups
                .iter()
                .flatten()
                .map(|r| value(r))
                .chain(
                    groups
                        .iter()
                        .filter(|_| !measure.starts_with("amp"))
                        .map(|g| g[0].floor.kafka_bytes as f64),
                )
                .filter(|v| *v > 0.0)
                .collect();
            let lo = all.iter().copied().fold(f64::INFINITY, f64::min).max(1e-3);
            let hi = all.iter().copied().fold(0.0, f64::max).max(lo * 10.0);
            // Amplification from 1×; bytes from the decade below the least.
            let lo = if measure.starts_with("amp") {
                lo.log10().floor().min(0.0)
            } else {
                lo.log10().floor()
            };
            let hi = hi.log10().ceil().max(lo + 1.0);
            let top = y0 + 20.0;
            let y = |v: f64| top + chart_h * (1.0 - (v.max(1e-9).log10() - lo) / (hi - lo));
            let _ = writeln!(
                s,
                r#"<text x="{left}" y="{}" font-size="13">{broker}: {measure}</text>"#,
                y0 + 12.0
            );
            let mut d = lo as i32;
            while d <= hi as i32 {
                let v = 10f64.powi(d);
                let yy = y(v);
                let label = if measure.starts_with("amp") {
                    format!("{v}×")
                } else {
                    decimal_bytes(v)
                };
                let _ = writeln!(
                    s,
                    r##"<line x1="{left}" x2="{:.1}" y1="{yy:.1}" y2="{yy:.1}" stroke="#ddd"/><text x="{}" y="{:.1}" text-anchor="end">{label}</text>"##,
                    left + plot_w,
                    left - 4.0,
                    yy + 4.0
                );
                d += 1;
            }
            for (gi, g) in groups.iter().enumerate() {
                let gx = left + gi as f64 * group_w + 6.0;
                for r in g {
                    let Some(c) = r.contender_kind else { continue };
                    let ci = Contender::ALL.iter().position(|x| *x == c).unwrap_or(0);
                    let x = gx + ci as f64 * bar;
                    let v = value(r);
                    let yt = y(v);
                    let _ = writeln!(
                        s,
                        r#"<rect x="{x:.1}" y="{yt:.1}" width="{:.1}" height="{:.1}" fill="{}"><title>{} {} {} {}: {}</title></rect>"#,
                        bar - 1.0,
                        (top + chart_h - yt).max(0.0),
                        COLORS[ci],
                        r.workload,
                        r.class,
                        r.index_mode,
                        r.contender,
                        if measure.starts_with("amp") {
                            format!("{v:.3}×")
                        } else {
                            bytes(v as u64)
                        }
                    );
                }
                if measure.starts_with("amp") {
                    let y1 = y(1.0);
                    let _ = writeln!(
                        s,
                        r#"<line x1="{gx:.1}" x2="{:.1}" y1="{y1:.1}" y2="{y1:.1}" stroke="black"/>"#,
                        gx + bar * 5.0
                    );
                } else {
                    let yf = y(g[0].floor.kafka_bytes as f64);
                    let _ = writeln!(
                        s,
                        r#"<line x1="{gx:.1}" x2="{:.1}" y1="{yf:.1}" y2="{yf:.1}" stroke="black" stroke-width="2"><title>floor {}</title></line>"#,
                        gx + bar * 5.0,
                        bytes(g[0].floor.kafka_bytes)
                    );
                }
                let lx = gx + bar * 2.5;
                let ly = top + chart_h + 8.0;
                let _ = writeln!(
                    s,
                    r#"<text x="{lx:.1}" y="{ly:.1}" transform="rotate(60 {lx:.1} {ly:.1})">{} {} {} ({})</text>"#,
                    g[0].workload,
                    g[0].class,
                    g[0].index_mode,
                    g[0].conditions.label()
                );
            }
            let _ = writeln!(
                s,
                r#"<line x1="{left}" x2="{:.1}" y1="{:.1}" y2="{:.1}" stroke="black"/>"#,
                left + plot_w,
                top + chart_h,
                top + chart_h
            );
            y0 += panel_h;
        }
    }
    s.push_str("</svg>\n");
    s
}
