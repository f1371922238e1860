//! Draws a [`Timeline`] (plotters): lanes top to bottom, time left to right, a legend below.
//!
//! - publications: a thin green line from the author down or up to the relay;
//! - deliveries: a line from the relay, at publication, to the reader, at arrival (grey in
//!   order, orange reordered, purple duplicate, each ending in a dot);
//! - losses: a red cross where the message vanished; extra datagram copies: a purple `+n`;
//! - outages: a red band on the lane they hit, labelled;
//! - connections: a black square when one drops, a hollow one when it comes back;
//! - calls: a black dot where one starts, green where it completes, a red ring and its cause
//!   where it fails; a failing call's whole life is a red frame on its client's lane.

use super::{MarkKind, Timeline};
use crate::chart::{nice_step, TickedAxis};
use plotters::coord::Shift;
use plotters::prelude::*;
use plotters::style::text_anchor::{HPos, Pos, VPos};
use std::path::Path;

const GREY: RGBColor = RGBColor(120, 120, 120);
const GREEN: RGBColor = RGBColor(0, 158, 115);
const ORANGE: RGBColor = RGBColor(230, 159, 0);
const PURPLE: RGBColor = RGBColor(204, 121, 167);
const RED: RGBColor = RGBColor(213, 94, 0);
const BLUE: RGBColor = RGBColor(0, 114, 178);
/// Reordered by a relay's writer sorting a committed batch (strfry), apart from the rest.
const SKY: RGBColor = RGBColor(86, 180, 233);

/// The name traces give reorderings by a relay writer's batch sort.
const BATCH_SORT: &str = "writer-batch-sort";

/// The longest explanation drawn under a failing call (the words have it whole).
const WHY_CHARS: usize = 150;

/// `text` cut to `max` characters, with an ellipsis when cut.
fn clipped(text: &str, max: usize) -> String {
    match text.char_indices().nth(max) {
        Some((at, _)) => format!("{}…", &text[..at]),
        None => text.to_owned(),
    }
}

fn sorted_by_writer(m: &super::Mark) -> bool {
    m.kind == MarkKind::Reordered && m.label.as_deref() == Some(BATCH_SORT)
}

/// Writes the picture to `svg` and `png`.
pub fn write(timeline: &Timeline, svg: &Path, png: &Path) -> Result<(), String> {
    let size = (1400, 200 + 90 * timeline.lanes.len().max(1) as u32);
    render(timeline, SVGBackend::new(svg, size).into_drawing_area())?;
    render(timeline, BitMapBackend::new(png, size).into_drawing_area())?;
    Ok(())
}

/// The unit time is shown in: ms, s or min, by the span shown.
fn time_unit(span_us: u64) -> (f64, &'static str) {
    if span_us < 10_000_000 {
        (1e3, "ms")
    } else if span_us < 600_000_000 {
        (1e6, "s")
    } else {
        (60e6, "min")
    }
}

fn render<DB: DrawingBackend>(t: &Timeline, root: DrawingArea<DB, Shift>) -> Result<(), String> {
    let err = |e: DrawingAreaErrorKind<DB::ErrorType>| e.to_string();
    root.fill(&WHITE).map_err(err)?;
    let (_, height) = root.dim_in_pixel();
    let root = root.titled(&t.title, ("sans-serif", 20)).map_err(err)?;
    let (chart_area, legend_area) = root.split_vertically(height - 120);
    let (divisor, unit) = time_unit(t.to_us - t.from_us);
    let x0 = t.from_us as f64 / divisor;
    let x1 = t.to_us as f64 / divisor;
    let step = nice_step((x1 - x0) / 10.0);
    let x_ticks: Vec<f64> = ((x0 / step).ceil() as i64..=(x1 / step).floor() as i64)
        .map(|i| i as f64 * step)
        .collect();
    let lanes = t.lanes.len();
    // Lane i is drawn at y = -i, so the first lane is on top.
    let y_of = |lane: usize| -(lane as f64);
    let mut chart = ChartBuilder::on(&chart_area)
        .margin(14)
        .x_label_area_size(44)
        .y_label_area_size(150)
        .build_cartesian_2d(
            TickedAxis {
                lo: x0,
                hi: x1,
                ticks: x_ticks,
            },
            TickedAxis {
                lo: -(lanes as f64 - 1.0) - 0.6,
                hi: 0.6,
                ticks: (0..lanes).map(y_of).collect(),
            },
        )
        .map_err(err)?;
    let lane_name = |y: &f64| {
        let i = (-y).round() as usize;
        t.lanes.get(i).map_or(String::new(), |l| {
            format!(
                "{} ({})",
                l.name,
                match l.kind {
                    super::LaneKind::Client => "client",
                    super::LaneKind::Relay => "relay",
                    super::LaneKind::Peer => "peer",
                }
            )
        })
    };
    chart
        .configure_mesh()
        .x_desc(format!("time ({unit})"))
        .x_label_formatter(&|x| {
            let s = format!("{x:.3}");
            s.trim_end_matches('0').trim_end_matches('.').to_owned()
        })
        .y_label_formatter(&lane_name)
        .label_style(("sans-serif", 14))
        .light_line_style(WHITE)
        .bold_line_style(RGBColor(200, 200, 200))
        .draw()
        .map_err(err)?;
    let x = |us: u64| us as f64 / divisor;
    let band = 0.32;
    // Outages and failing calls first, so marks stay visible on top of them.
    for o in &t.outages {
        let y = y_of(o.lane);
        let (a, b) = (x(o.from_us).max(x0), x(o.to_us).min(x1));
        chart
            .draw_series(std::iter::once(Rectangle::new(
                [(a, y - band), (b, y + band)],
                RED.mix(0.18).filled(),
            )))
            .map_err(err)?;
        chart
            .draw_series(std::iter::once(Text::new(
                o.label.clone(),
                (a, y + band + 0.05),
                ("sans-serif", 13).into_font().color(&RED),
            )))
            .map_err(err)?;
    }
    for f in &t.failing_calls {
        let y = y_of(f.lane);
        let (a, b) = (x(f.from_us).max(x0), x(f.to_us).min(x1));
        chart
            .draw_series(std::iter::once(Rectangle::new(
                [(a, y - band - 0.08), (b, y + band + 0.08)],
                RED.stroke_width(2),
            )))
            .map_err(err)?;
        chart
            .draw_series(std::iter::once(Text::new(
                f.label.clone(),
                (a, y - band - 0.12),
                ("sans-serif", 14).into_font().color(&RED),
            )))
            .map_err(err)?;
        // The cause in words, under the frame: what it awaited, what the relays refused.
        if let Some(why) = &f.why {
            chart
                .draw_series(std::iter::once(Text::new(
                    clipped(why, WHY_CHARS),
                    (a, y - band - 0.3),
                    ("sans-serif", 12).into_font().color(&RED),
                )))
                .map_err(err)?;
        }
    }
    // Lines, thinnest and most common first.
    for kind in [
        MarkKind::Published,
        MarkKind::Delivered,
        MarkKind::Duplicate,
        MarkKind::Reordered,
    ] {
        let (color, width, alpha) = match kind {
            MarkKind::Published => (GREEN, 1, 0.35),
            MarkKind::Delivered => (GREY, 1, 0.45),
            // Copies are common (every relay after the first sends one): thin, so they do
            // not hide the reordered deliveries drawn over them.
            MarkKind::Duplicate => (PURPLE, 1, 0.3),
            _ => (ORANGE, 2, 0.95),
        };
        let color_of = |m: &super::Mark| if sorted_by_writer(m) { SKY } else { color };
        let marks = t.marks.iter().filter(|m| m.kind == kind);
        chart
            .draw_series(marks.clone().filter_map(|m| {
                let (ft, fl) = m.from?;
                Some(PathElement::new(
                    vec![(x(ft), y_of(fl)), (x(m.at.0), y_of(m.at.1))],
                    color_of(m).mix(alpha).stroke_width(width),
                ))
            }))
            .map_err(err)?;
        if kind != MarkKind::Published {
            chart
                .draw_series(marks.map(|m| {
                    Circle::new(
                        (x(m.at.0), y_of(m.at.1)),
                        if kind == MarkKind::Reordered { 3 } else { 2 },
                        color_of(m).mix(alpha).filled(),
                    )
                }))
                .map_err(err)?;
        }
    }
    for m in &t.marks {
        let at = (x(m.at.0), y_of(m.at.1));
        let label_at = (at.0, at.1 - 0.12);
        match m.kind {
            MarkKind::Lost => {
                chart
                    .draw_series(std::iter::once(Cross::new(at, 6, RED.stroke_width(3))))
                    .map_err(err)?;
            }
            MarkKind::Copied => {
                chart
                    .draw_series(std::iter::once(Text::new(
                        m.label.clone().unwrap_or_default(),
                        label_at,
                        ("sans-serif", 12).into_font().color(&PURPLE),
                    )))
                    .map_err(err)?;
            }
            MarkKind::Rejected => {
                chart
                    .draw_series(std::iter::once(TriangleMarker::new(at, 6, RED.filled())))
                    .map_err(err)?;
            }
            MarkKind::Notice => {
                chart
                    .draw_series(std::iter::once(TriangleMarker::new(at, 4, GREY.filled())))
                    .map_err(err)?;
            }
            MarkKind::Disconnected | MarkKind::Connected => {
                let style = if m.kind == MarkKind::Disconnected {
                    BLACK.filled()
                } else {
                    BLACK.stroke_width(2)
                };
                chart
                    .draw_series(std::iter::once(
                        EmptyElement::at(at) + Rectangle::new([(-5, -5), (5, 5)], style),
                    ))
                    .map_err(err)?;
            }
            MarkKind::Called => {
                chart
                    .draw_series(std::iter::once(Circle::new(at, 4, BLUE.filled())))
                    .map_err(err)?;
            }
            MarkKind::Completed => {
                chart
                    .draw_series(std::iter::once(Circle::new(at, 6, GREEN.filled())))
                    .map_err(err)?;
            }
            MarkKind::Answered => {
                chart
                    .draw_series(std::iter::once(Circle::new(at, 6, GREEN.stroke_width(2))))
                    .map_err(err)?;
            }
            MarkKind::Failed => {
                chart
                    .draw_series(std::iter::once(Circle::new(at, 8, RED.stroke_width(3))))
                    .map_err(err)?;
                // Near the right edge the words run leftwards, so they are not cut off.
                let anchor = if at.0 > x0 + 0.6 * (x1 - x0) {
                    Pos::new(HPos::Right, VPos::Top)
                } else {
                    Pos::new(HPos::Left, VPos::Top)
                };
                chart
                    .draw_series(std::iter::once(Text::new(
                        m.label.clone().unwrap_or_default(),
                        (at.0, at.1 + 0.3),
                        ("sans-serif", 13).into_font().color(&RED).pos(anchor),
                    )))
                    .map_err(err)?;
            }
            _ => {}
        }
    }
    legend(t, &legend_area).map_err(err)?;
    root.present().map_err(err)?;
    Ok(())
}

fn legend<DB: DrawingBackend>(
    t: &Timeline,
    area: &DrawingArea<DB, Shift>,
) -> Result<(), DrawingAreaErrorKind<DB::ErrorType>> {
    let font = ("sans-serif", 14);
    let count = |k: MarkKind| t.counts.get(&k).copied().unwrap_or(0);
    let entries: [(RGBColor, &str, MarkKind); 6] = [
        (GREEN, "published", MarkKind::Published),
        (GREY, "delivered in order", MarkKind::Delivered),
        (ORANGE, "reordered", MarkKind::Reordered),
        (PURPLE, "duplicate", MarkKind::Duplicate),
        (RED, "lost", MarkKind::Lost),
        (BLUE, "call made", MarkKind::Called),
    ];
    for (i, (color, words, kind)) in entries.iter().enumerate() {
        let x0 = 20 + 225 * i as i32;
        let y = 24;
        if *kind == MarkKind::Lost {
            area.draw(&Cross::new((x0 + 15, y), 6, color.stroke_width(3)))?;
        } else if *kind == MarkKind::Called {
            area.draw(&Circle::new((x0 + 15, y), 4, color.filled()))?;
        } else {
            area.draw(&PathElement::new(
                vec![(x0, y), (x0 + 30, y)],
                color.stroke_width(3),
            ))?;
        }
        area.draw(&Text::new(
            format!("{words} ({})", count(*kind)),
            (x0 + 38, y - 8),
            font,
        ))?;
    }
    let y = 56;
    area.draw(&Rectangle::new(
        [(20, y - 8), (50, y + 8)],
        RED.mix(0.18).filled(),
    ))?;
    area.draw(&Text::new("outage", (58, y - 8), font))?;
    area.draw(&Rectangle::new(
        [(140, y - 8), (170, y + 8)],
        RED.stroke_width(2),
    ))?;
    area.draw(&Text::new("failing call", (178, y - 8), font))?;
    area.draw(&Circle::new((300, y), 6, GREEN.filled()))?;
    area.draw(&Text::new(
        format!("completed ({})", count(MarkKind::Completed)),
        (312, y - 8),
        font,
    ))?;
    area.draw(&Circle::new((450, y), 8, RED.stroke_width(3)))?;
    area.draw(&Text::new(
        format!("failed ({})", count(MarkKind::Failed)),
        (464, y - 8),
        font,
    ))?;
    area.draw(&Rectangle::new(
        [(580, y - 5), (590, y + 5)],
        BLACK.filled(),
    ))?;
    area.draw(&Text::new("connection down", (598, y - 8), font))?;
    area.draw(&Rectangle::new(
        [(740, y - 5), (750, y + 5)],
        BLACK.stroke_width(2),
    ))?;
    area.draw(&Text::new("connection back", (758, y - 8), font))?;
    area.draw(&TriangleMarker::new((905, y), 6, RED.filled()))?;
    area.draw(&Text::new("refused by relay", (915, y - 8), font))?;
    let sorted = t.marks.iter().filter(|m| sorted_by_writer(m)).count();
    if sorted > 0 {
        // Only traces through a batch-committing relay (strfry) have these.
        area.draw(&PathElement::new(
            vec![(1040, y), (1070, y)],
            SKY.stroke_width(3),
        ))?;
        area.draw(&Text::new(
            format!("reordered by batch sort ({sorted})"),
            (1078, y - 8),
            font,
        ))?;
    }
    let answered = count(MarkKind::Answered);
    if answered > 0 {
        let y = 84;
        area.draw(&Circle::new((35, y), 6, GREEN.stroke_width(2)))?;
        area.draw(&Text::new(
            format!("answered, but the call failed ({answered})"),
            (47, y - 8),
            font,
        ))?;
    }
    if t.elided > 0 {
        let y = if sorted > 0 || answered > 0 { 84 } else { y };
        area.draw(&Text::new(
            format!(
                "{} more marks not drawn (see --from/--to, --call)",
                t.elided
            ),
            (1080, y - 8),
            font,
        ))?;
    }
    Ok(())
}
