//! SVG rendering of a [`Timeline`]: one horizontal lane per rank, columns of
//! steps left to right.
//!
//! Every drawn item carries a `class` naming what it is, so the drawing can
//! be styled and inspected: `lane`, `step` (with the step kind, e.g.
//! `step batch`), `message` (`message unmatched` when it dangles),
//! `collective`, `pending`, `cycle` (a deadlock's wait-for edge), `wrong`
//! (a wrong postcondition element) and `failure` (the diagnostic's text).
//! Hovering an item shows its details (`<title>`).

use std::fmt::Write as _;

use hcomm_schedule::timeline::{Collective, Mark, Message, Order, Step, StepKind, Timeline};
use svg::node::element::path::Data;
use svg::node::element::{Circle, Definitions, Group, Line, Marker, Path, Rectangle, Text, Title};
use svg::Document;

/// Left margin (lane names).
const LEFT: f64 = 80.0;
/// Top margin (title).
const TOP: f64 = 70.0;
/// Width of a column.
const COL: f64 = 170.0;
/// Height of a lane.
const LANE: f64 = 96.0;
/// Half the height of a step box.
const HALF: f64 = 17.0;
/// Space right of the last column (wrong-output marks).
const RIGHT: f64 = 190.0;
/// The narrowest drawing (room for the title and the failure text).
const MIN_WIDTH: f64 = 680.0;
/// Height of one line of the failure text.
const LINE: f64 = 17.0;

const INK: &str = "#222";
const RED: &str = "#c62828";
const FONT: &str = "DejaVu Sans, Helvetica, Arial, sans-serif";

/// The drawing of `t`.
pub fn render(t: &Timeline) -> Document {
    let cols = f64::from(t.columns.max(1));
    let width = (LEFT + cols * COL + RIGHT).max(MIN_WIDTH);
    let caption = t.failure.as_ref().map_or_else(Vec::new, |f| {
        let mut lines = wrap(&f.diagnostic.headline(), ((width - 40.0) / 7.0) as usize);
        if let Some(h) = &f.diagnostic.hint {
            lines.extend(wrap(&format!("hint: {h}"), ((width - 40.0) / 7.0) as usize));
        }
        lines
    });
    let lanes_bottom = TOP + f64::from(t.world) * LANE;
    let height = lanes_bottom + 20.0 + caption.len() as f64 * LINE + 10.0;
    let mut doc = Document::new()
        .set("viewBox", (0, 0, width, height))
        .set("width", width)
        .set("height", height)
        .set("font-family", FONT)
        .add(defs())
        .add(
            Rectangle::new()
                .set("width", "100%")
                .set("height", "100%")
                .set("fill", "white"),
        )
        .add(title(t));
    doc = doc.add(grid(t, lanes_bottom));
    for r in 0..t.world {
        doc = doc.add(lane(t, r));
    }
    // a rank's pending operations stack below its lane
    let mut stacked = vec![0_u32; t.world as usize];
    for p in &t.pending {
        let x0 = x_mid(p.post_column);
        let x1 = p.wait_column.map_or(LEFT + cols * COL, x_mid);
        let level = stacked.get_mut(p.rank as usize).map_or(0, |k| {
            *k += 1;
            *k - 1
        });
        let y = y_lane(p.rank) + HALF + 4.0 + 8.0 * f64::from(level);
        doc = doc.add(
            Rectangle::new()
                .set("class", "pending")
                .set("x", x0)
                .set("y", y)
                .set("width", (x1 - x0).max(4.0))
                .set("height", 6)
                .set("rx", 3)
                .set("fill", "#8e7cc3")
                .add(Title::new(format!("rank {}: {}", p.rank, p.label))),
        );
    }
    for s in &t.steps {
        if let Some(g) = step(s) {
            doc = doc.add(g);
        }
    }
    doc = collectives(doc, t);
    // labels of messages leaving one step are spread along their arrows
    let mut leaving: Vec<(u32, Option<u32>)> = Vec::new();
    for m in &t.messages {
        let key = (m.from, m.send_column);
        let nth = leaving.iter().filter(|k| **k == key).count();
        leaving.push(key);
        doc = doc.add(message(m, nth));
    }
    if let Some(f) = &t.failure {
        for mark in &f.marks {
            if let Some(g) = failure_mark(t, mark) {
                doc = doc.add(g);
            }
        }
        let mut text = Text::new("")
            .set("class", "failure")
            .set("x", 20)
            .set("y", lanes_bottom + 20.0)
            .set("font-size", 13)
            .set("fill", RED);
        for (i, l) in caption.iter().enumerate() {
            text = text.add(
                svg::node::element::TSpan::new(l.clone())
                    .set("x", 20)
                    .set("dy", if i == 0 { 0.0 } else { LINE }),
            );
        }
        doc = doc.add(text);
    }
    doc
}

/// The drawing of `t` as SVG text.
pub fn render_string(t: &Timeline) -> String {
    render(t).to_string()
}

fn x_col(c: u32) -> f64 {
    LEFT + f64::from(c) * COL
}

fn x_mid(c: u32) -> f64 {
    x_col(c) + COL / 2.0
}

fn y_lane(r: u32) -> f64 {
    TOP + f64::from(r) * LANE + LANE / 2.0
}

fn arrowhead(id: &str, color: &str, size: f64) -> Marker {
    Marker::new()
        .set("id", id)
        .set("viewBox", "0 0 10 10")
        .set("refX", 9)
        .set("refY", 5)
        .set("markerWidth", size)
        .set("markerHeight", size)
        .set("orient", "auto-start-reverse")
        .add(
            Path::new()
                .set(
                    "d",
                    Data::new().move_to((0, 0)).line_to((10, 5)).line_to((0, 10)).close(),
                )
                .set("fill", color),
        )
}

fn defs() -> Definitions {
    Definitions::new()
        .add(arrowhead("arrow", INK, 7.0))
        .add(arrowhead("arrow-red", RED, 7.0))
        .add(arrowhead("arrow-cycle", RED, 4.0))
}

fn title(t: &Timeline) -> Group {
    let mut head = format!("{}   world = {}", t.name, t.world);
    for (n, v) in &t.scalars {
        let _ = write!(head, ", {n} = {v}");
    }
    let sub = match t.order {
        Order::Simulated => "steps in the checker's simulated order (rendezvous: a step waits for its partners)",
        Order::Program => "steps in each rank's own order (unmatched messages leave nothing to simulate)",
        Order::Plan => {
            "the device plan: each rank's group calls, collectives and local steps in issue order (HCCL, NCCL)"
        }
    };
    Group::new()
        .set("class", "title")
        .add(
            Text::new(head)
                .set("x", 20)
                .set("y", 26)
                .set("font-size", 18)
                .set("font-weight", "bold")
                .set("fill", INK),
        )
        .add(
            Text::new(sub)
                .set("x", 20)
                .set("y", 46)
                .set("font-size", 12)
                .set("fill", "#666"),
        )
}

/// Column separators and numbers.
fn grid(t: &Timeline, bottom: f64) -> Group {
    let mut g = Group::new().set("class", "grid");
    for c in 0..t.columns {
        g = g
            .add(
                Line::new()
                    .set("x1", x_col(c))
                    .set("x2", x_col(c))
                    .set("y1", TOP - 8.0)
                    .set("y2", bottom)
                    .set("stroke", "#e4e4e4"),
            )
            .add(
                Text::new(format!("step {c}"))
                    .set("x", x_mid(c))
                    .set("y", TOP - 10.0)
                    .set("text-anchor", "middle")
                    .set("font-size", 11)
                    .set("fill", "#999"),
            );
    }
    g
}

fn lane(t: &Timeline, r: u32) -> Group {
    let y = y_lane(r);
    Group::new()
        .set("class", "lane")
        .add(
            Line::new()
                .set("x1", LEFT - 8.0)
                .set("x2", x_col(t.columns.max(1)) + 10.0)
                .set("y1", y)
                .set("y2", y)
                .set("stroke", "#9e9e9e")
                .set("stroke-width", 1.5),
        )
        .add(
            Text::new(format!("rank {r}"))
                .set("x", 14)
                .set("y", y + 5.0)
                .set("font-size", 14)
                .set("font-weight", "bold")
                .set("fill", INK),
        )
}

fn step(s: &Step) -> Option<Group> {
    if s.kind == StepKind::Collective && !s.blocked {
        return None; // drawn as the collective's bar
    }
    let (class, fill, w) = match s.kind {
        StepKind::Batch => ("step batch", "#cfe2f3", COL - 36.0),
        StepKind::Send | StepKind::Recv => ("step blocking", "#ffffff", COL - 70.0),
        StepKind::Post | StepKind::Wait => ("step nonblocking", "#e6e0f3", COL - 70.0),
        StepKind::Copy => ("step copy", "#eeeeee", COL - 90.0),
        StepKind::Collective => ("step collective", "#fde3c3", COL - 70.0),
    };
    let x = x_mid(s.column) - w / 2.0;
    let y = y_lane(s.rank);
    let (stroke, sw) = if s.blocked { (RED, 2.5) } else { ("#5b7fa6", 1.2) };
    let label = s.label.clone();
    let detail = match (s.blocked, s.detail.is_empty()) {
        (true, true) => "blocked".to_owned(),
        (true, false) => format!("blocked, {}", s.detail),
        (false, _) => s.detail.clone(),
    };
    let mut tip = format!("rank {}, step {}: {}", s.rank, s.column, s.label);
    if !s.detail.is_empty() {
        let _ = write!(tip, " ({})", s.detail);
    }
    if s.blocked {
        tip.push_str(", stuck here");
    }
    let mut g = Group::new()
        .set(
            "class",
            if s.blocked {
                format!("{class} blocked")
            } else {
                class.to_owned()
            },
        )
        .add(Title::new(tip))
        .add(
            Rectangle::new()
                .set("x", x)
                .set("y", y - HALF)
                .set("width", w)
                .set("height", 2.0 * HALF)
                .set("rx", 5)
                .set("fill", fill)
                .set("stroke", stroke)
                .set("stroke-width", sw),
        )
        .add(
            Text::new(label)
                .set("x", x_mid(s.column))
                .set("y", y - 2.0)
                .set("text-anchor", "middle")
                .set("font-size", 12)
                .set("fill", if s.blocked { RED } else { INK }),
        );
    if !detail.is_empty() {
        g = g.add(
            Text::new(detail)
                .set("x", x_mid(s.column))
                .set("y", y + 11.0)
                .set("text-anchor", "middle")
                .set("font-size", 10)
                .set("font-weight", if s.blocked { "bold" } else { "normal" })
                .set("fill", if s.blocked { RED } else { "#555" }),
        );
    }
    Some(g)
}

/// Collective bars; calls of one column whose bars would cross stand side
/// by side.
fn collectives(mut doc: Document, t: &Timeline) -> Document {
    let span = |c: &Collective| (c.ranks.first().copied(), c.ranks.last().copied());
    // per collective: its slot in its column
    let mut slots: Vec<usize> = Vec::with_capacity(t.collectives.len());
    for (i, c) in t.collectives.iter().enumerate() {
        let (lo, hi) = span(c);
        let taken: Vec<usize> = t.collectives[..i]
            .iter()
            .zip(&slots)
            .filter(|(o, _)| o.column == c.column && span(o).0 <= hi && lo <= span(o).1)
            .map(|(_, &k)| k)
            .collect();
        slots.push((0..=taken.len()).find(|k| !taken.contains(k)).unwrap_or(0));
    }
    for (c, &slot) in t.collectives.iter().zip(&slots) {
        let used = t
            .collectives
            .iter()
            .zip(&slots)
            .filter(|(o, _)| o.column == c.column)
            .map(|(_, &k)| k + 1)
            .max()
            .unwrap_or(1);
        let x = x_col(c.column) + COL * (slot as f64 + 1.0) / (used as f64 + 1.0);
        let (Some(lo), Some(hi)) = span(c) else {
            continue;
        };
        let members: Vec<String> = c.ranks.iter().map(ToString::to_string).collect();
        let group = if c.world_group { "all ranks" } else { "`over` group" };
        let mut g = Group::new()
            .set("class", "collective")
            .add(Title::new(format!(
                "{} at step {} over {group}: ranks {}",
                c.kind,
                c.column,
                members.join(", ")
            )))
            .add(
                Rectangle::new()
                    .set("x", x - 5.0)
                    .set("y", y_lane(lo) - HALF)
                    .set("width", 10)
                    .set("height", y_lane(hi) - y_lane(lo) + 2.0 * HALF)
                    .set("rx", 5)
                    .set("fill", "#f6b26b")
                    .set("stroke", "#b45f06"),
            )
            .add(
                Text::new(c.kind.clone())
                    .set("x", x)
                    .set("y", y_lane(lo) - HALF - 5.0)
                    .set("text-anchor", "middle")
                    .set("font-size", 11)
                    .set("fill", "#783f04"),
            );
        for &r in &c.ranks {
            g = g.add(
                Circle::new()
                    .set("cx", x)
                    .set("cy", y_lane(r))
                    .set("r", 7)
                    .set("fill", "#b45f06"),
            );
        }
        doc = doc.add(g);
    }
    doc
}

fn message(m: &Message, nth: usize) -> Group {
    let down = m.to > m.from;
    let dir = if down { 1.0 } else { -1.0 };
    let y0 = y_lane(m.from) + dir * HALF;
    let y1 = y_lane(m.to) - dir * HALF;
    let tip = format!("rank {} -> rank {}: {}", m.from, m.to, m.label());
    let (x0, x1, class, color, marker, dash) = match (m.send_column, m.recv_column) {
        // the data arrives when both sides are posted
        (Some(s), Some(_)) => (
            x_col(s) + COL * 0.38,
            x_col(m.column) + COL * 0.62,
            "message",
            INK,
            "url(#arrow)",
            "none",
        ),
        (Some(s), None) => {
            let x = x_col(s) + COL * 0.38;
            (x, x + COL * 0.2, "message unmatched", RED, "url(#arrow-red)", "6 4")
        }
        (None, Some(r)) => {
            let x = x_col(r) + COL * 0.62;
            (x - COL * 0.2, x, "message unmatched", RED, "url(#arrow-red)", "6 4")
        }
        (None, None) => (0.0, 0.0, "message", INK, "none", "none"),
    };
    // a dangling message stops halfway to the peer it names
    let (ya, yb) = match (m.send_column, m.recv_column) {
        (Some(_), None) => (y0, y0 + (y1 - y0) * 0.55),
        (None, Some(_)) => (y1 - (y1 - y0) * 0.55, y1),
        _ => (y0, y1),
    };
    // the label sits just past the sender's box, where the arrows of one
    // column are apart
    let f = ((24.0 + 13.0 * nth as f64) / (yb - ya).abs().max(1.0)).min(0.5 + 0.1 * nth as f64);
    let (lx, ly) = (x0 + (x1 - x0) * f, ya + (yb - ya) * f);
    let mut label = m.label();
    if m.unmatched {
        label.push_str(if m.recv_column.is_none() {
            ": no recv"
        } else {
            ": no send"
        });
    }
    Group::new()
        .set("class", class)
        .add(Title::new(tip))
        .add(
            Line::new()
                .set("x1", x0)
                .set("y1", ya)
                .set("x2", x1)
                .set("y2", yb)
                .set("stroke", color)
                .set("stroke-width", 1.4)
                .set("stroke-dasharray", dash)
                .set("marker-end", marker),
        )
        .add(
            Text::new(label)
                .set("x", lx + 4.0)
                .set("y", ly + 4.0)
                .set("font-size", 10)
                .set("fill", color)
                .set("stroke", "white")
                .set("stroke-width", 3)
                .set("paint-order", "stroke"),
        )
}

fn failure_mark(t: &Timeline, mark: &Mark) -> Option<Group> {
    match mark {
        Mark::Waits {
            rank,
            column,
            waits_for,
        } => {
            let target = t
                .steps
                .iter()
                .find(|s| s.rank == *waits_for && s.blocked)
                .map_or(*column, |s| s.column);
            // from the right edge of one stuck step to the other's, bowing
            // right past the lanes between; upward edges bow further, so a
            // two-rank cycle shows as two arcs
            let (x0, y0) = (x_mid(*column) + 50.0, y_lane(*rank));
            let (x1, y1) = (x_mid(target) + 52.0, y_lane(*waits_for));
            let lanes = f64::from(rank.abs_diff(*waits_for));
            let down = y1 > y0;
            let bulge = if down { 30.0 } else { 60.0 } + 20.0 * lanes;
            let (cx, cy) = (x0.max(x1) + bulge, f64::midpoint(y0, y1));
            let d = Data::new().move_to((x0, y0)).quadratic_curve_to((cx, cy, x1, y1));
            Some(
                Group::new()
                    .set("class", "cycle")
                    .add(Title::new(format!("rank {rank} waits for rank {waits_for}")))
                    .add(
                        Path::new()
                            .set("d", d)
                            .set("fill", "none")
                            .set("stroke", RED)
                            .set("stroke-width", 2.5)
                            .set("marker-end", "url(#arrow-cycle)"),
                    )
                    .add(
                        Text::new(format!("waits for rank {waits_for}"))
                            .set("x", f64::midpoint(x0.max(x1), cx) + 6.0)
                            .set("y", cy + if down { -6.0 } else { 14.0 })
                            .set("font-size", 11)
                            .set("fill", RED)
                            .set("stroke", "white")
                            .set("stroke-width", 3)
                            .set("paint-order", "stroke"),
                    ),
            )
        }
        // the message is drawn dashed and red; its step is circled
        Mark::Unmatched { message } => {
            let m = t.messages.get(*message)?;
            let (rank, column) = match (m.send_column, m.recv_column) {
                (Some(c), None) => (m.from, c),
                (None, Some(c)) => (m.to, c),
                _ => return None,
            };
            Some(
                Group::new()
                    .set("class", "unmatched")
                    .add(Title::new(format!("rank {rank}: {} has no partner", m.label())))
                    .add(circle_step(rank, column)),
            )
        }
        Mark::WrongOutput { rank, column, place } => {
            let y = y_lane(*rank);
            let x = x_col(t.columns.max(1)) + 18.0;
            let mut g = Group::new()
                .set("class", "wrong")
                .add(Title::new(format!("rank {rank} ends with a wrong {place}")))
                .add(Circle::new().set("cx", x).set("cy", y).set("r", 9).set("fill", RED))
                .add(
                    Text::new(format!("wrong {place}"))
                        .set("x", x + 14.0)
                        .set("y", y + 4.0)
                        .set("font-size", 12)
                        .set("fill", RED),
                );
            if let Some(c) = column {
                g = g.add(circle_step(*rank, *c));
            }
            Some(g)
        }
    }
}

/// A dashed red frame around the step of `rank` at `column`.
fn circle_step(rank: u32, column: u32) -> Rectangle {
    Rectangle::new()
        .set("x", x_col(column) + 8.0)
        .set("y", y_lane(rank) - HALF - 6.0)
        .set("width", COL - 16.0)
        .set("height", 2.0 * HALF + 12.0)
        .set("rx", 7)
        .set("fill", "none")
        .set("stroke", RED)
        .set("stroke-width", 2)
        .set("stroke-dasharray", "5 3")
}

/// Splits `s` into lines of at most about `width` characters, at spaces.
fn wrap(s: &str, width: usize) -> Vec<String> {
    let mut lines = Vec::new();
    let mut cur = String::new();
    for word in s.split(' ') {
        if !cur.is_empty() && cur.len() + 1 + word.len() > width {
            lines.push(std::mem::take(&mut cur));
        }
        if !cur.is_empty() {
            cur.push(' ');
        }
        cur.push_str(word);
    }
    if !cur.is_empty() {
        lines.push(cur);
    }
    lines
}
