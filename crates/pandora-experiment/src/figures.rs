//! Figures of an experiment, in the papers' style: regret against cumulative cost per policy,
//! as the median with a band from the first to the third quartile, and as the mean with a band of
//! ± 2 standard errors (the statistics of [`super::summary`], on its cost grid). `pandora cvs`
//! draws its panels with [`panel`] too, as the mean ± 1 standard error of the BOCVS paper.
//!
//! `summary/PROBLEM.png` and `summary/PROBLEM.svg` hold both panels of one problem;
//! `summary/all.png` and `summary/all.svg` the median panels of every problem side by side. The
//! y axis is logarithmic when every plotted value (bands included) is positive, as in the papers;
//! otherwise (a policy reached regret 0) it is linear.

use super::config::{Plan, file_component};
use super::stopping::runtime::RuntimeCurve;
use super::stopping::{Evaluation, StoppingPlan};
use super::summary::{ProblemSummary, Reference, Stats};
use crate::plot::{Figure, Legend, Panel, Series, Style, render};
use anyhow::Result;
use std::path::{Path, PathBuf};

/// Which statistic a panel shows.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Statistic {
    /// Median, band q25–q75.
    Median,
    /// Mean, band ± 2 s.e.
    Mean,
    /// Mean, band ± 1 s.e. (the BOCVS paper's figures).
    MeanSe,
}

impl Statistic {
    fn line_and_band(self, s: &Stats) -> (f64, f64, f64) {
        match self {
            Statistic::Median => (s.median, s.q25, s.q75),
            Statistic::Mean => (s.mean, s.mean - s.se2, s.mean + s.se2),
            Statistic::MeanSe => (s.mean, s.mean - 0.5 * s.se2, s.mean + 0.5 * s.se2),
        }
    }

    /// The legend-free description of the line and its band.
    pub fn label(self) -> &'static str {
        match self {
            Statistic::Median => "median, quartile band",
            Statistic::Mean => "mean ± 2 s.e.",
            Statistic::MeanSe => "mean ± 1 s.e.",
        }
    }
}

fn y_label(s: &ProblemSummary) -> String {
    match s.reference {
        Reference::Optimum => "simple regret".into(),
        Reference::BestObserved => "regret (vs best observed)".into(),
        Reference::Given(r) => format!("regret (vs {r})"),
    }
}

/// The panel of one problem: a line with its band per policy, in palette colors by the
/// policies' order; the y axis is logarithmic when every plotted value is positive.
pub fn panel(s: &ProblemSummary, stat: Statistic, title: String) -> Panel {
    let series: Vec<Series> = s
        .policies
        .iter()
        .enumerate()
        .map(|(k, p)| {
            let (mut y, mut lo, mut hi) = (Vec::new(), Vec::new(), Vec::new());
            for st in &p.stats {
                let (v, l, h) = stat.line_and_band(st);
                y.push(v);
                lo.push(l);
                hi.push(h);
            }
            Series::line(&p.policy, s.grid.clone(), y)
                .with_band(lo, hi)
                .with_color(k)
        })
        .collect();
    let log_y = series.iter().all(|se| {
        let (lo, hi) = se.band.as_ref().expect("every series has a band");
        se.y.iter()
            .chain(lo)
            .chain(hi)
            .all(|v| v.is_finite() && *v > 0.0)
    });
    Panel {
        title,
        x_label: "cumulative cost".into(),
        y_label: y_label(s),
        log_y,
        series,
        legend: Legend::UpperRight,
    }
}

/// The figure of one problem: median and mean panels.
pub fn problem_figure(s: &ProblemSummary) -> Figure {
    Figure {
        title: s.problem.clone(),
        panels: [Statistic::Median, Statistic::Mean]
            .into_iter()
            .map(|st| panel(s, st, st.label().into()))
            .collect(),
    }
}

/// The overview: the median panel of every problem.
pub fn overview_figure(all: &[ProblemSummary]) -> Figure {
    Figure {
        title: format!(
            "regret against cumulative cost ({})",
            Statistic::Median.label()
        ),
        panels: all
            .iter()
            .filter(|s| !s.policies.is_empty())
            .map(|s| panel(s, Statistic::Median, s.problem.clone()))
            .collect(),
    }
}

/// Renders `fig` as `dir/STEM.png` and `dir/STEM.svg` (`stem` used as given) and appends both
/// paths to `written`.
pub fn render_png_svg(
    fig: &Figure,
    dir: &Path,
    stem: &str,
    written: &mut Vec<PathBuf>,
) -> Result<()> {
    for ext in ["png", "svg"] {
        let path = dir.join(format!("{stem}.{ext}"));
        render(fig, &path)?;
        written.push(path);
    }
    Ok(())
}

/// Whether every value of every series is finite and positive (a logarithmic y axis shows them
/// all).
fn all_positive(series: &[Series]) -> bool {
    series
        .iter()
        .all(|s| s.y.iter().all(|v| v.is_finite() && *v > 0.0))
}

/// Writes every figure into `sdir` (PNG and SVG) and returns the paths written.
pub fn write_figures(sdir: &Path, all: &[ProblemSummary]) -> Result<Vec<PathBuf>> {
    let mut written = Vec::new();
    for s in all.iter().filter(|s| !s.policies.is_empty()) {
        let fig = problem_figure(s);
        render_png_svg(&fig, sdir, &file_component(&s.problem), &mut written)?;
    }
    let overview = overview_figure(all);
    if !overview.panels.is_empty() {
        render_png_svg(&overview, sdir, "all", &mut written)?;
    }
    Ok(written)
}

/// The stopping figure of one problem at one λ: a panel per policy with the mean cost-adjusted
/// regret `R_λ(t)` of stopping every run at the same iteration `t` (dashed line, the paper's
/// fixed-iteration stopping) and one marker per rule at (mean stopping iteration, mean `R_λ`),
/// plus the per-run hindsight oracle. The y axis is logarithmic when every value is positive.
pub fn stopping_figure(
    plan: &Plan,
    sp: &StoppingPlan,
    ev: &Evaluation,
    problem: &str,
    lambda: f64,
) -> Figure {
    let mut rules: Vec<String> = sp.rules.iter().map(|r| r.label.clone()).collect();
    rules.push("hindsight".into());
    let mut panels = Vec::new();
    for pol in &plan.policies {
        let Some(curve) = ev
            .curves
            .iter()
            .find(|c| c.problem == problem && c.policy == pol.label && c.lambda == lambda)
        else {
            continue;
        };
        let t: Vec<f64> = (0..curve.mean_r.len()).map(|t| t as f64).collect();
        let mut series = vec![
            Series::line("fixed iteration", t, curve.mean_r.clone())
                .with_style(Style::Dashed)
                .with_color(0),
        ];
        for (k, rule) in rules.iter().enumerate() {
            if let Some(g) = ev.groups.iter().find(|g| {
                g.problem == problem
                    && g.policy == pol.label
                    && g.lambda == lambda
                    && &g.rule == rule
            }) {
                series.push(
                    Series::points(rule.as_str(), vec![g.mean_stop], vec![g.mean_r])
                        .with_color(k + 1),
                );
            }
        }
        let log_y = all_positive(&series);
        panels.push(Panel {
            title: pol.label.clone(),
            x_label: "stopping iteration".into(),
            y_label: format!("cost-adjusted regret (λ = {lambda})"),
            log_y,
            legend: if panels.is_empty() {
                Legend::UpperRight
            } else {
                Legend::Hidden
            },
            series,
        });
    }
    Figure {
        title: format!(
            "{problem}, λ = {lambda}: mean cost-adjusted regret at the stop (markers: rules at their \
             mean stop)"
        ),
        panels,
    }
}

/// Writes `stopping_PROBLEM_lambdaL.png|svg` for every problem and λ with results; returns the
/// paths written.
pub fn write_stopping_figures(
    sdir: &Path,
    plan: &Plan,
    sp: &StoppingPlan,
    ev: &Evaluation,
) -> Result<Vec<PathBuf>> {
    let mut written = Vec::new();
    for prob in &plan.problems {
        for &lambda in &sp.lambdas {
            let fig = stopping_figure(plan, sp, ev, &prob.label, lambda);
            if fig.panels.is_empty() {
                continue;
            }
            let stem = format!(
                "stopping_{}_lambda{}",
                file_component(&prob.label),
                file_component(&lambda.to_string())
            );
            render_png_svg(&fig, sdir, &stem, &mut written)?;
        }
    }
    Ok(written)
}

/// The stopping statistics' runtime of one problem (the stopping paper's Figure 10): a panel per
/// policy with the mean seconds of each statistic at every iteration, on a logarithmic axis when
/// every value is positive.
pub fn stopping_runtime_figure(plan: &Plan, curves: &[RuntimeCurve], problem: &str) -> Figure {
    let mut statistics: Vec<&str> = Vec::new();
    for c in curves.iter().filter(|c| c.problem == problem) {
        if !statistics.contains(&c.statistic) {
            statistics.push(c.statistic);
        }
    }
    let mut panels = Vec::new();
    for pol in &plan.policies {
        let series: Vec<Series> = curves
            .iter()
            .filter(|c| c.problem == problem && c.policy == pol.label)
            .map(|c| {
                let k = statistics
                    .iter()
                    .position(|s| *s == c.statistic)
                    .unwrap_or(0);
                Series::line(
                    c.statistic,
                    c.points.iter().map(|p| p.0 as f64).collect(),
                    c.points.iter().map(|p| p.2).collect(),
                )
                .with_color(k)
            })
            .collect();
        if series.is_empty() {
            continue;
        }
        let log_y = all_positive(&series);
        panels.push(Panel {
            title: pol.label.clone(),
            x_label: "iteration".into(),
            y_label: "seconds per iteration (mean over runs)".into(),
            log_y,
            legend: if panels.is_empty() {
                Legend::UpperLeft
            } else {
                Legend::Hidden
            },
            series,
        });
    }
    Figure {
        title: format!("{problem}: time of the stopping statistics"),
        panels,
    }
}

/// Writes `stopping_runtime_PROBLEM.png|svg` for every problem with timed statistics; returns
/// the paths written.
pub fn write_stopping_runtime_figures(
    sdir: &Path,
    plan: &Plan,
    curves: &[RuntimeCurve],
) -> Result<Vec<PathBuf>> {
    let mut written = Vec::new();
    for prob in &plan.problems {
        let fig = stopping_runtime_figure(plan, curves, &prob.label);
        if fig.panels.is_empty() {
            continue;
        }
        let stem = format!("stopping_runtime_{}", file_component(&prob.label));
        render_png_svg(&fig, sdir, &stem, &mut written)?;
    }
    Ok(written)
}

#[cfg(test)]
mod tests {
    use super::super::summary::{PolicySummary, stats};
    use super::*;

    fn summary(values: &[[f64; 4]]) -> ProblemSummary {
        ProblemSummary {
            problem: "toy".into(),
            grid: (0..values.len()).map(|i| i as f64).collect(),
            reference: Reference::Optimum,
            optimum_missed: 0,
            instances: 1,
            policies: vec![PolicySummary {
                policy: "pbgi".into(),
                stats: values.iter().map(|v| stats(v)).collect(),
                mean_evaluations: 4.0,
                mean_seconds_per_step: 0.01,
            }],
            incomplete: 0,
        }
    }

    #[test]
    fn panels_carry_the_summary_statistics_and_choose_the_axis() {
        let s = summary(&[[4.0, 1.0, 8.0, 2.0], [1.0, 1.0, 1.0, 1.0]]);
        let fig = problem_figure(&s);
        assert_eq!(fig.panels.len(), 2);
        let median = &fig.panels[0].series[0];
        assert_eq!(median.name, "pbgi");
        assert_eq!(median.y, vec![3.0, 1.0]);
        assert_eq!(median.band, Some((vec![1.75, 1.0], vec![5.0, 1.0])));
        assert!(fig.panels[0].log_y);
        let mean = &fig.panels[1].series[0];
        assert_eq!(mean.y, vec![3.75, 1.0]);
        let se2 = 2.0 * (28.75f64 / 3.0 / 4.0).sqrt();
        let (lo, hi) = mean.band.clone().unwrap();
        assert!((lo[0] - (3.75 - se2)).abs() < 1e-12 && (hi[0] - (3.75 + se2)).abs() < 1e-12);
        assert!(fig.panels[1].log_y);
        // A mean band reaching below 0 would be cut off on a log axis: the axis is linear.
        let skewed = summary(&[[0.1, 0.1, 0.1, 20.0], [0.1, 0.1, 0.1, 0.1]]);
        let fig = problem_figure(&skewed);
        assert!(fig.panels[0].log_y && !fig.panels[1].log_y);
        // Zero regret makes the median panel linear too.
        let zero = summary(&[[1.0, 1.0, 1.0, 1.0], [0.0, 0.0, 0.0, 0.0]]);
        assert!(!problem_figure(&zero).panels[0].log_y);
    }

    #[test]
    fn figures_are_written_as_png_and_svg() {
        let dir = tempfile::tempdir().unwrap();
        let s = summary(&[[4.0, 1.0, 8.0, 2.0], [2.0, 1.0, 1.0, 1.0]]);
        let written = write_figures(dir.path(), &[s]).unwrap();
        let names: Vec<String> = written
            .iter()
            .map(|p| p.file_name().unwrap().to_string_lossy().into_owned())
            .collect();
        assert_eq!(names, ["toy.png", "toy.svg", "all.png", "all.svg"]);
        let png = std::fs::read(dir.path().join("toy.png")).unwrap();
        assert_eq!(&png[..8], b"\x89PNG\r\n\x1a\n");
        let svg = std::fs::read_to_string(dir.path().join("toy.svg")).unwrap();
        assert!(
            svg.contains("pbgi") && svg.contains("quartile"),
            "{svg:.200}"
        );
    }
}
