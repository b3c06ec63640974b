//! `pandora freeze-thaw`: solve a discrete cost-aware freeze-thaw instance exactly. JSON in, JSON
//! out: the Gittins index of every run's current state (and of all its states), the next action
//! of the index policy (start, continue or keep a run, or stop) and the policy's exact expected
//! net utility; with `--verify`, also the brute-force optimum over all policies. See
//! docs/freeze-thaw.md; the format lives in `pandora_core::gittins::freeze_thaw::format`.

use anyhow::Result;
use pandora_core::gittins::freeze_thaw::format::{Instance, Solution};

/// Parse, solve and (optionally) verify one request.
fn solve(text: &str, verify: bool) -> Result<Solution> {
    let input: Instance = crate::input::parse(text)?;
    Ok(pandora_core::gittins::freeze_thaw::format::solve(
        input, verify,
    )?)
}

/// Reads the instance from `path` (stdin if `None` or `-`) and prints the solution.
pub fn main(path: Option<&str>, verify: bool) -> Result<()> {
    let text = crate::input::read(path, "freeze-thaw instance")?;
    let out = solve(&text, verify)?;
    println!("{}", serde_json::to_string_pretty(&out)?);
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The example of docs/freeze-thaw.md.
    const EXAMPLE: &str = include_str!("../../../examples/freeze_thaw.json");

    #[test]
    fn the_documented_example_solves_and_verifies() {
        let out = solve(EXAMPLE, true).unwrap();
        let dp = out.dp_expected_utility.unwrap();
        assert!((dp - out.expected_utility).abs() < 1e-9, "{out:?}");
        assert!((dp - out.dp_index_policy_utility.unwrap()).abs() < 1e-9);
        assert_eq!(out.runs.len(), 4);
    }

    #[test]
    fn errors_name_the_field() {
        let cases = [
            (
                EXAMPLE.replacen("\"prob\": 0.5", "\"prob\": 0.4", 1),
                "runs[0].nodes[0].next",
            ),
            (
                EXAMPLE.replacen("\"node\": 1", "\"node\": 0", 1),
                "runs[0].nodes[0].next[0].node",
            ),
            (EXAMPLE.replacen("\"from\"", "\"form\"", 1), "runs[2].walk"),
            (EXAMPLE.replacen("\"steps\": 3,", "", 1), "runs[2].walk"),
            (
                EXAMPLE.replacen("0.4, 0.3]", "0.4, 0.4]", 1),
                "runs[2].walk.increments.probs",
            ),
            (
                EXAMPLE.replacen("\"points\": 5", "\"points\": 4", 1),
                "runs[3].gaussian.points",
            ),
            (
                EXAMPLE.replacen("\"gaussian\": {", "\"at\": 1, \"gaussian\": {", 1),
                "runs[3].at",
            ),
            (
                EXAMPLE.replacen("\"fallback\": 0.6", "\"fallback\": \"x\"", 1),
                "fallback",
            ),
        ];
        for (text, field) in cases {
            assert_ne!(text, EXAMPLE, "{field}: the replacement did not apply");
            let e = format!("{:#}", solve(&text, false).unwrap_err());
            assert!(e.contains(field), "{field}: {e}");
        }
    }
}
