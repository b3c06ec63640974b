//! The figure of `pandora plot`: a study's best value so far against cumulative cost, and the cost
//! of every trial.
//!
//! The best value so far only changes when a trial completes, so it is drawn as a step function:
//! flat until the cost at which a better trial finished, then straight up (or down, when
//! minimizing). A sloped line between two such points would suggest values the study never had.
//! Failed trials get their own markers in the cost panel, and a legend entry only when there are
//! some; so do the paused (or running) runs of a study with steps, whose told steps cost already.

use pandora_experiment::plot;
use pandora_study::space::Direction;
use pandora_study::{Trial, TrialState};

/// The figure of study `name` (optimized in direction `dir`) from its trials.
///
/// Trials are taken in order of their numbers; the cumulative cost adds every evaluated trial's
/// cost (failed ones included, when they consumed any).
pub fn study_figure(name: &str, dir: Direction, trials: &[Trial]) -> plot::Figure {
    let mut sorted: Vec<&Trial> = trials.iter().collect();
    sorted.sort_by_key(|t| t.number);
    let (mut best_x, mut best_y) = (Vec::new(), Vec::new());
    let (mut obs_x, mut obs_y) = (Vec::new(), Vec::new());
    let (mut ok_n, mut ok_c, mut bad_n, mut bad_c) =
        (Vec::new(), Vec::new(), Vec::new(), Vec::new());
    let (mut paused_n, mut paused_c) = (Vec::new(), Vec::new());
    let mut cumulative = 0.0;
    let mut best: Option<f64> = None;
    for t in sorted {
        let Some(c) = t.cost.filter(|c| c.is_finite()) else {
            continue;
        };
        cumulative += c;
        match (t.state, t.objective) {
            (TrialState::Complete, Some(v)) if v.is_finite() => {
                if best.is_none_or(|b| dir.to_internal(v) > dir.to_internal(b)) {
                    best = Some(v);
                }
                obs_x.push(cumulative);
                obs_y.push(v);
                ok_n.push(t.number as f64);
                ok_c.push(c);
            }
            (TrialState::Paused | TrialState::Running, _) => {
                paused_n.push(t.number as f64);
                paused_c.push(c);
            }
            _ => {
                bad_n.push(t.number as f64);
                bad_c.push(c);
            }
        }
        if let Some(b) = best {
            best_x.push(cumulative);
            best_y.push(b);
        }
    }
    let (best_x, best_y) = steps(&best_x, &best_y);
    let mut cost_series = vec![plot::Series::points("complete", ok_n, ok_c)];
    if !bad_n.is_empty() {
        cost_series.push(plot::Series::points("failed", bad_n, bad_c).with_color(3));
    }
    if !paused_n.is_empty() {
        let label = "paused (steps so far)";
        cost_series.push(plot::Series::points(label, paused_n, paused_c).with_color(2));
    }
    let direction = match dir {
        Direction::Maximize => "maximize",
        Direction::Minimize => "minimize",
    };
    plot::Figure {
        title: format!("study {name} ({direction})"),
        panels: vec![
            plot::Panel {
                title: "best value so far".into(),
                x_label: "cumulative cost".into(),
                y_label: "objective".into(),
                log_y: false,
                series: vec![
                    plot::Series::line("best so far", best_x, best_y),
                    plot::Series::points("trials", obs_x, obs_y).with_color(7),
                ],
                legend: match dir {
                    Direction::Maximize => plot::Legend::LowerRight,
                    Direction::Minimize => plot::Legend::UpperRight,
                },
            },
            plot::Panel {
                title: "cost per trial".into(),
                x_label: "trial".into(),
                y_label: "cost".into(),
                log_y: false,
                series: cost_series,
                legend: plot::Legend::UpperRight,
            },
        ],
    }
}

/// The vertices of the step function through `(x[i], y[i])` that holds each value until the next
/// `x`: a horizontal run to `(x[i], y[i−1])`, then the jump to `(x[i], y[i])`. Points where the
/// value does not change add no vertex of their own beyond the run's end.
fn steps(x: &[f64], y: &[f64]) -> (Vec<f64>, Vec<f64>) {
    let (mut sx, mut sy) = (
        Vec::with_capacity(2 * x.len()),
        Vec::with_capacity(2 * y.len()),
    );
    for (i, (&a, &b)) in x.iter().zip(y).enumerate() {
        if i > 0 && b != y[i - 1] {
            sx.push(a);
            sy.push(y[i - 1]);
        }
        sx.push(a);
        sy.push(b);
    }
    (sx, sy)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn trial(number: u64, state: TrialState, objective: Option<f64>, cost: f64) -> Trial {
        Trial {
            number,
            state,
            params: json!({}),
            x: vec![],
            objective,
            cost: Some(cost),
            worker: None,
            created_at: 0.0,
            finished_at: None,
            heartbeat_at: 0.0,
            decision: pandora_core::run::record::DecisionRecord::new(
                pandora_core::policy::Phase::InitialDesign,
                "test",
            ),
            error: None,
            step_to: None,
            steps: Vec::new(),
        }
    }

    /// Every segment of the best-so-far line is horizontal or vertical, and the line passes
    /// through the best value after each trial at that trial's cumulative cost.
    #[test]
    fn best_so_far_is_a_step_function() {
        let c = TrialState::Complete;
        let trials = vec![
            trial(0, c, Some(1.0), 1.0),
            trial(1, c, Some(0.5), 2.0),
            trial(2, c, Some(3.0), 1.0),
            trial(3, c, Some(2.0), 4.0),
            trial(4, c, Some(5.0), 0.5),
        ];
        let fig = study_figure("s", Direction::Maximize, &trials);
        let best = &fig.panels[0].series[0];
        assert_eq!(best.name, "best so far");
        for i in 1..best.x.len() {
            let (dx, dy) = (best.x[i] - best.x[i - 1], best.y[i] - best.y[i - 1]);
            assert!(dx == 0.0 || dy == 0.0, "sloped segment {i}: {best:?}");
        }
        let pts: Vec<(f64, f64)> = best.x.iter().copied().zip(best.y.iter().copied()).collect();
        for want in [(1.0, 1.0), (3.0, 1.0), (4.0, 3.0), (8.0, 3.0), (8.5, 5.0)] {
            assert!(pts.contains(&want), "{want:?} not in {pts:?}");
        }
        // The jumps: at cost 4 from 1 to 3, at cost 8.5 from 3 to 5.
        assert!(
            pts.contains(&(4.0, 1.0)) && pts.contains(&(8.5, 3.0)),
            "{pts:?}"
        );
        // Minimizing: the best goes down in steps.
        let fig = study_figure("s", Direction::Minimize, &trials);
        let best = &fig.panels[0].series[0];
        assert_eq!(best.y.last(), Some(&0.5));
    }

    #[test]
    fn the_failed_legend_appears_only_with_failures() {
        let ok = vec![
            trial(0, TrialState::Complete, Some(1.0), 1.0),
            trial(1, TrialState::Complete, Some(2.0), 1.0),
        ];
        let names = |fig: &plot::Figure| -> Vec<String> {
            fig.panels[1]
                .series
                .iter()
                .map(|s| s.name.clone())
                .collect()
        };
        let fig = study_figure("s", Direction::Maximize, &ok);
        assert_eq!(names(&fig), ["complete"]);
        let mut with_failure = ok.clone();
        with_failure.push(trial(2, TrialState::Failed, None, 0.5));
        let fig = study_figure("s", Direction::Maximize, &with_failure);
        assert_eq!(names(&fig), ["complete", "failed"]);
        assert_eq!(fig.panels[1].series[1].x, [2.0]);
    }

    #[test]
    fn paused_runs_are_not_failures_and_their_steps_count_in_the_cost() {
        let trials = vec![
            trial(0, TrialState::Paused, None, 2.0),
            trial(1, TrialState::Complete, Some(1.0), 6.0),
            trial(2, TrialState::Failed, None, 0.5),
        ];
        let fig = study_figure("s", Direction::Maximize, &trials);
        let names: Vec<&str> = fig.panels[1]
            .series
            .iter()
            .map(|s| s.name.as_str())
            .collect();
        assert_eq!(names, ["complete", "failed", "paused (steps so far)"]);
        assert_eq!(fig.panels[1].series[2].x, [0.0]);
        // The complete run's value is reached after the paused run's steps: at cost 8.
        let best = &fig.panels[0].series[0];
        assert_eq!((best.x[0], best.y[0]), (8.0, 1.0));
    }
}
