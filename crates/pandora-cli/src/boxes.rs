//! `pandora boxes`: solve a Pandora's Box instance exactly. JSON in, JSON out: the index of every
//! box, Weitzman's opening order and the exact expected net utility of the policy; with `--verify`
//! (discrete rewards, at most [`DP_MAX_BOXES`] boxes) also the brute-force DP optimum.

use anyhow::{Context, Result, bail};
use pandora_core::gittins::{Cost, DP_MAX_BOXES, PandoraBox, Problem, Reward, dp_optimum};
use serde::{Deserialize, Serialize};

/// Most boxes in an instance with discrete rewards only. Weitzman's policy then costs
/// `O((n + V) log(n + V))` for `n` boxes with `V` support points in all (sorted sweeps, see
/// `pandora_core::gittins`); at this limit an instance takes seconds. See docs/boxes.md, "Limits".
pub const MAX_BOXES: usize = 1_000_000;

/// Most support points (reward and cost values) over all boxes; see [`MAX_BOXES`].
pub const MAX_VALUES: usize = 10_000_000;

/// Most boxes in an instance with a normal reward: its exact value needs the distribution of the
/// best reward, a product over all boxes, at every quadrature node, `O(n²)` work; at this limit
/// an instance takes seconds.
pub const MAX_NORMAL_BOXES: usize = 5_000;

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct BoxesInput {
    boxes: Vec<BoxSpec>,
    #[serde(default)]
    fallback: Option<f64>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct BoxSpec {
    cost: CostSpec,
    rewards: Option<Discrete>,
    normal: Option<NormalSpec>,
}

#[derive(Debug, Deserialize)]
#[serde(untagged)]
enum CostSpec {
    Fixed(f64),
    Random(Discrete),
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct Discrete {
    values: Vec<f64>,
    probs: Vec<f64>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct NormalSpec {
    mean: f64,
    std: f64,
}

#[derive(Debug, Serialize)]
struct BoxesOutput {
    indices: Vec<f64>,
    order: Vec<usize>,
    expected_utility: f64,
    expected_reward: f64,
    expected_cost: f64,
    #[serde(skip_serializing_if = "Option::is_none")]
    dp_expected_utility: Option<f64>,
}

/// Refuses instances over [`MAX_BOXES`] or [`MAX_VALUES`] before solving them.
fn check_size(input: &BoxesInput) -> Result<()> {
    let n = input.boxes.len();
    if n > MAX_BOXES {
        bail!(
            "boxes: {n} boxes is more than the limit of {MAX_BOXES} (see docs/boxes.md, \"Limits\")"
        );
    }
    if n > MAX_NORMAL_BOXES && input.boxes.iter().any(|b| b.normal.is_some()) {
        bail!(
            "boxes: {n} boxes with a \"normal\" reward among them is more than the limit of \
             {MAX_NORMAL_BOXES} for instances with normal rewards (see docs/boxes.md, \"Limits\")"
        );
    }
    let values: usize = input
        .boxes
        .iter()
        .map(|b| {
            b.rewards.as_ref().map_or(1, |d| d.values.len())
                + match &b.cost {
                    CostSpec::Fixed(_) => 1,
                    CostSpec::Random(d) => d.values.len(),
                }
        })
        .sum();
    if values > MAX_VALUES {
        bail!(
            "boxes: {values} reward and cost values in all is more than the limit of \
             {MAX_VALUES} (see docs/boxes.md, \"Limits\")"
        );
    }
    Ok(())
}

/// Parse, solve and (optionally) verify one request.
fn solve(text: &str, verify: bool) -> Result<BoxesOutput> {
    let input: BoxesInput = crate::input::parse(text)?;
    check_size(&input)?;
    let mut boxes = Vec::with_capacity(input.boxes.len());
    for (i, b) in input.boxes.into_iter().enumerate() {
        let reward = match (b.rewards, b.normal) {
            (Some(d), None) => Reward::Discrete {
                values: d.values,
                probs: d.probs,
            },
            (None, Some(n)) => Reward::Normal {
                mean: n.mean,
                std: n.std,
            },
            _ => bail!("boxes[{i}]: give exactly one of \"rewards\" and \"normal\""),
        };
        let cost = match b.cost {
            CostSpec::Fixed(c) => Cost::Fixed(c),
            CostSpec::Random(d) => Cost::Discrete {
                values: d.values,
                probs: d.probs,
            },
        };
        boxes.push(PandoraBox { reward, cost });
    }
    let problem = Problem::new(boxes, input.fallback)?;
    let pol = problem.weitzman()?;
    let dp_expected_utility = if verify {
        // The DP names the cause: the first box without discrete rewards, or the box count.
        Some(dp_optimum(&problem).with_context(|| {
            format!("--verify (dynamic programming needs discrete rewards and at most {DP_MAX_BOXES} boxes)")
        })?)
    } else {
        None
    };
    Ok(BoxesOutput {
        indices: pol.indices,
        order: pol.order,
        expected_utility: pol.expected_utility,
        expected_reward: pol.expected_reward,
        expected_cost: pol.expected_cost,
        dp_expected_utility,
    })
}

/// Reads the instance from `path` (stdin if `None` or `-`) and prints the solution.
pub fn main(path: Option<&str>, verify: bool) -> Result<()> {
    let text = crate::input::read(path, "boxes instance")?;
    let out = solve(&text, verify)?;
    println!("{}", serde_json::to_string_pretty(&out)?);
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    const EXAMPLE: &str = r#"{"boxes": [{"cost": 0.3, "rewards": {"values": [0.0, 1.0, 4.0], "probs": [0.5, 0.3, 0.2]}},
        {"cost": 0.1, "normal": {"mean": 0.5, "std": 1.0}}], "fallback": null}"#;

    #[test]
    fn example_solves() {
        let out = solve(EXAMPLE, false).unwrap();
        assert_eq!(out.indices.len(), 2);
        assert!(out.expected_utility.is_finite());
        // A normal box: the DP cannot verify, and the error blames that box, not the count.
        let e = format!("{:#}", solve(EXAMPLE, true).unwrap_err());
        assert!(e.contains("--verify"), "{e}");
        assert!(e.contains("boxes[1].normal"), "{e}");
        assert!(!e.contains("got 2 boxes"), "{e}");
    }

    #[test]
    fn verify_accepts_as_many_boxes_as_the_python_package() {
        let one = r#"{"cost": 0.1, "rewards": {"values": [0.0, 1.0], "probs": [0.5, 0.5]}}"#;
        let many = |n: usize| format!(r#"{{"boxes": [{}]}}"#, vec![one; n].join(","));
        let out = solve(&many(DP_MAX_BOXES), true).unwrap();
        let dp = out.dp_expected_utility.unwrap();
        assert!((dp - out.expected_utility).abs() < 1e-12);
        let e = format!("{:#}", solve(&many(DP_MAX_BOXES + 1), true).unwrap_err());
        assert!(e.contains("at most 16 boxes"), "{e}");
    }

    #[test]
    fn errors_name_the_field() {
        let cases = [
            (
                EXAMPLE.replace("0.3, 0.2]", "0.3, 0.3]"),
                "boxes[0].rewards.probs",
            ),
            (
                EXAMPLE.replace("\"std\": 1.0", "\"std\": -1.0"),
                "boxes[1].normal.std",
            ),
            (
                EXAMPLE.replace("\"cost\": 0.1", "\"cost\": -0.1"),
                "boxes[1].cost",
            ),
            (EXAMPLE.replace("\"mean\"", "\"mu\""), "boxes[1].normal"),
            (EXAMPLE.replace("null", "\"x\""), "fallback"),
        ];
        for (text, field) in cases {
            let e = format!("{:#}", solve(&text, false).unwrap_err());
            assert!(e.contains(field), "{field}: {e}");
        }
    }
}
