//! The overview's chart, drawn on the server as SVG: jobs accepted, delivered and
//! dead per minute, one group of three bars per minute, scaled to the busiest minute.

use crate::store::MinuteCounts;

/// The chart's drawing width, in SVG units.
pub const WIDTH: u32 = 960;
/// The chart's drawing height, in SVG units (bars and the axis labels below them).
pub const HEIGHT: u32 = 180;
/// The height the bars may use.
const PLOT: f64 = 150.0;
/// Room on the left for the scale's label.
const LEFT: f64 = 40.0;

/// One bar.
#[derive(Clone, Debug, PartialEq)]
pub struct Bar {
    /// Left edge.
    pub x: String,
    /// Top edge.
    pub y: String,
    /// Width.
    pub width: String,
    /// Height.
    pub height: String,
    /// `accepted`, `delivered` or `dead` (the style sheet colours them).
    pub class: &'static str,
    /// The tooltip: `12:03 UTC: 40 delivered`.
    pub title: String,
}

/// A label under the axis.
#[derive(Clone, Debug, PartialEq)]
pub struct Tick {
    /// Its centre.
    pub x: String,
    /// `12:00`.
    pub label: String,
}

/// The chart, ready for its template.
#[derive(Clone, Debug, PartialEq)]
pub struct Chart {
    /// Every non-empty bar.
    pub bars: Vec<Bar>,
    /// A label every 10 minutes.
    pub ticks: Vec<Tick>,
    /// The busiest minute's count (the top of the scale).
    pub max: u64,
    /// The totals over the chart: accepted, delivered, dead.
    pub totals: (u64, u64, u64),
}

fn minute_label(counts: &MinuteCounts) -> String {
    let text = counts.minute.to_rfc3339();
    // `2026-11-30T12:03:00.000Z` → `12:03`.
    text.get(11..16).unwrap_or(&text).to_owned()
}

/// The chart of `minutes` (oldest first).
pub fn draw(minutes: &[MinuteCounts]) -> Chart {
    let max = minutes
        .iter()
        .map(|m| m.accepted.max(m.delivered).max(m.dead))
        .max()
        .unwrap_or(0);
    let slot = (f64::from(WIDTH) - LEFT) / minutes.len().max(1) as f64;
    let bar = (slot - 2.0).max(1.0) / 3.0;
    let mut bars = Vec::new();
    let mut ticks = Vec::new();
    let mut totals = (0, 0, 0);
    for (n, counts) in minutes.iter().enumerate() {
        let left = LEFT + n as f64 * slot + 1.0;
        let label = minute_label(counts);
        totals.0 += counts.accepted;
        totals.1 += counts.delivered;
        totals.2 += counts.dead;
        for (k, (class, value)) in [
            ("accepted", counts.accepted),
            ("delivered", counts.delivered),
            ("dead", counts.dead),
        ]
        .into_iter()
        .enumerate()
        {
            if value == 0 {
                continue;
            }
            let height = (value as f64 / max.max(1) as f64 * PLOT).max(1.0);
            bars.push(Bar {
                x: format!("{:.1}", left + k as f64 * bar),
                y: format!("{:.1}", PLOT - height),
                width: format!("{:.1}", bar),
                height: format!("{height:.1}"),
                class,
                title: format!("{label} UTC: {value} {class}"),
            });
        }
        if counts.minute.as_millis() % 600_000 == 0 {
            ticks.push(Tick {
                x: format!("{:.1}", left + slot / 2.0),
                label,
            });
        }
    }
    Chart {
        bars,
        ticks,
        max,
        totals,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::domain::Timestamp;

    fn minute(n: i64, accepted: u64, delivered: u64, dead: u64) -> MinuteCounts {
        MinuteCounts {
            minute: Timestamp::from_millis(1_796_040_000_000 + n * 60_000),
            accepted,
            delivered,
            dead,
        }
    }

    #[test]
    fn bars_are_scaled_to_the_busiest_minute() {
        let chart = draw(&[minute(0, 10, 5, 0), minute(1, 0, 0, 2)]);
        assert_eq!(chart.max, 10);
        assert_eq!(chart.totals, (10, 5, 2));
        let heights: Vec<(&str, &str)> = chart
            .bars
            .iter()
            .map(|b| (b.class, b.height.as_str()))
            .collect();
        assert_eq!(
            heights,
            [
                ("accepted", "150.0"),
                ("delivered", "75.0"),
                ("dead", "30.0")
            ],
            "empty bars are left out"
        );
        assert_eq!(chart.bars[1].title, "12:00 UTC: 5 delivered");
        assert_eq!(chart.ticks.len(), 1, "a label every 10 minutes");
        assert_eq!(chart.ticks[0].label, "12:00");
    }

    #[test]
    fn an_empty_hour_draws_no_bar() {
        let chart = draw(&[minute(0, 0, 0, 0)]);
        assert!(chart.bars.is_empty());
        assert_eq!(chart.max, 0);
        assert!(draw(&[]).bars.is_empty());
    }
}
