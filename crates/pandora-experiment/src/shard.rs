//! Shards: splitting a grid of runs into `N` deterministic, cost-balanced shares, one per task of
//! a Slurm array (or any other launcher).
//!
//! **Definition.** A shard `K/N` (`0 ≤ K < N`, 0-based like Slurm's array indices) is a set of
//! runs of a grid; the `N` shards partition the grid: every run belongs to exactly one of them.
//! Every task computes the whole assignment from the configuration alone (no coordination, no
//! shared state), so the assignment must be a pure function of the runs' estimated costs and `N`.
//!
//! **Algorithm.** Longest processing time first (LPT, Graham 1969): runs sorted by decreasing
//! estimated cost (ties by their index in the grid), each given to the shard with the least
//! estimated load so far (ties to the lowest shard). It runs in `O(R log R + R N)` for `R` runs.
//!
//! **Accuracy.** As for any greedy list schedule, the largest shard load is at most the mean load
//! plus the largest single run (`Σc/N + max c`); LPT's makespan is moreover within `4/3 − 1/(3N)`
//! of the optimal partition (Graham). The estimates themselves are the limit in practice (see
//! [`super::estimate`]); a shard with a badly underestimated run simply finishes later.
//!
//! **Degenerate cases.** `N = 1` is the whole grid. `N` larger than the number of runs leaves
//! shards empty (a task with nothing to do exits at once). Non-finite or negative estimates are
//! treated as 0, so an assignment always exists.
//!
//! **Where K and N come from.** `--shard K/N`, or, without it, the Slurm array variables:
//! `K = (SLURM_ARRAY_TASK_ID − SLURM_ARRAY_TASK_MIN) / SLURM_ARRAY_TASK_STEP` (the minimum
//! defaults to 0, the step to 1) and `N = SLURM_ARRAY_TASK_COUNT`. Malformed values are refused
//! with the flag or variable named; outside an array task (no `SLURM_ARRAY_TASK_ID`) the whole grid
//! runs.
//!
//! References: R. L. Graham, "Bounds on multiprocessing timing anomalies", SIAM J. Appl. Math.
//! 17 (1969); Slurm's `sbatch` manual, "OUTPUT ENVIRONMENT VARIABLES".

use anyhow::{Context, Result, bail};
use std::fmt;

/// One share of a grid: shard `index` of `count` (0-based).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Shard {
    /// `K`, in `0..count`.
    pub index: usize,
    /// `N ≥ 1`.
    pub count: usize,
}

impl fmt::Display for Shard {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}/{}", self.index, self.count)
    }
}

impl Shard {
    /// Parses `K/N` (the value of `--shard`).
    pub fn parse(s: &str) -> Result<Self> {
        let Some((k, n)) = s.split_once('/') else {
            bail!("--shard {s:?}: expected K/N, e.g. 0/4 (K is 0-based, 0 ≤ K < N)");
        };
        let (Ok(index), Ok(count)) = (k.trim().parse::<usize>(), n.trim().parse::<usize>()) else {
            bail!("--shard {s:?}: K and N must be non-negative integers (K/N, e.g. 0/4)");
        };
        Self::new(index, count).with_context(|| format!("--shard {s:?}"))
    }

    fn new(index: usize, count: usize) -> Result<Self> {
        if count == 0 {
            bail!("the number of shards N must be at least 1");
        }
        if index >= count {
            bail!("the shard index K = {index} must be below N = {count} (K is 0-based)");
        }
        Ok(Self { index, count })
    }

    /// The shard of a Slurm array task, from the environment as read by `var` (`None` outside
    /// an array task).
    pub fn from_slurm(var: impl Fn(&str) -> Option<String>) -> Result<Option<Self>> {
        let Some(id) = var("SLURM_ARRAY_TASK_ID") else {
            return Ok(None);
        };
        let number = |name: &str, value: &str| -> Result<usize> {
            match value.trim().parse::<usize>() {
                Ok(v) => Ok(v),
                Err(_) => bail!("{name}={value:?} is not a non-negative integer"),
            }
        };
        let id = number("SLURM_ARRAY_TASK_ID", &id)?;
        let Some(count) = var("SLURM_ARRAY_TASK_COUNT") else {
            bail!("SLURM_ARRAY_TASK_ID is set but SLURM_ARRAY_TASK_COUNT is not: give --shard K/N");
        };
        let count = number("SLURM_ARRAY_TASK_COUNT", &count)?;
        let min = match var("SLURM_ARRAY_TASK_MIN") {
            Some(v) => number("SLURM_ARRAY_TASK_MIN", &v)?,
            None => 0,
        };
        let step = match var("SLURM_ARRAY_TASK_STEP") {
            Some(v) => number("SLURM_ARRAY_TASK_STEP", &v)?,
            None => 1,
        };
        if step == 0 {
            bail!("SLURM_ARRAY_TASK_STEP=0: the array step must be at least 1");
        }
        if id < min || (id - min) % step != 0 {
            bail!(
                "SLURM_ARRAY_TASK_ID={id} is not SLURM_ARRAY_TASK_MIN={min} plus a multiple of \
                 SLURM_ARRAY_TASK_STEP={step}: submit the array as --array=0-(N-1) or give \
                 --shard K/N"
            );
        }
        let index = (id - min) / step;
        Self::new(index, count)
            .with_context(|| {
                format!(
                    "from SLURM_ARRAY_TASK_ID={id}, SLURM_ARRAY_TASK_MIN={min}, \
                     SLURM_ARRAY_TASK_COUNT={count}"
                )
            })
            .map(Some)
    }

    /// The shard of `--shard` when given, else of the Slurm array task this process runs in.
    pub fn resolve(flag: Option<&str>) -> Result<Option<Self>> {
        match flag {
            Some(s) => Self::parse(s).map(Some),
            None => Self::from_slurm(|k| std::env::var(k).ok()),
        }
    }

    /// The indices (into `costs`) of this shard's runs, in increasing order.
    pub fn select(&self, costs: &[f64]) -> Vec<usize> {
        let owner = assign(costs, self.count);
        (0..costs.len())
            .filter(|&i| owner[i] == self.index)
            .collect()
    }
}

/// The LPT assignment of runs with estimated costs `costs` to `n ≥ 1` shards: the shard of every
/// run.
pub fn assign(costs: &[f64], n: usize) -> Vec<usize> {
    let n = n.max(1);
    let clean = |c: f64| if c.is_finite() && c > 0.0 { c } else { 0.0 };
    let mut order: Vec<usize> = (0..costs.len()).collect();
    order.sort_by(|&a, &b| clean(costs[b]).total_cmp(&clean(costs[a])).then(a.cmp(&b)));
    let mut load = vec![0.0f64; n];
    let mut owner = vec![0; costs.len()];
    for i in order {
        let s = (0..n)
            .min_by(|&a, &b| load[a].total_cmp(&load[b]).then(a.cmp(&b)))
            .expect("n ≥ 1");
        load[s] += clean(costs[i]);
        owner[i] = s;
    }
    owner
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use std::collections::HashMap;

    /// The estimated load of every shard under [`assign`].
    fn loads(costs: &[f64], n: usize) -> Vec<f64> {
        let mut load = vec![0.0; n.max(1)];
        for (i, s) in assign(costs, n).into_iter().enumerate() {
            load[s] += costs[i];
        }
        load
    }

    fn env(pairs: &[(&str, &str)]) -> impl Fn(&str) -> Option<String> {
        let m: HashMap<String, String> = pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        move |k| m.get(k).cloned()
    }

    #[test]
    fn parses_the_flag_and_names_it_in_errors() {
        assert_eq!(Shard::parse("2/3").unwrap(), Shard { index: 2, count: 3 });
        for (bad, needle) in [
            ("3/3", "must be below N = 3"),
            ("1/0", "at least 1"),
            ("1", "expected K/N"),
            ("a/3", "non-negative integers"),
            ("-1/3", "non-negative integers"),
        ] {
            let e = format!("{:#}", Shard::parse(bad).unwrap_err());
            assert!(e.contains("--shard") && e.contains(needle), "{bad}: {e}");
        }
    }

    #[test]
    fn reads_slurm_array_variables_with_their_offset() {
        assert_eq!(Shard::from_slurm(env(&[])).unwrap(), None);
        let s = Shard::from_slurm(env(&[
            ("SLURM_ARRAY_TASK_ID", "12"),
            ("SLURM_ARRAY_TASK_MIN", "10"),
            ("SLURM_ARRAY_TASK_COUNT", "4"),
        ]))
        .unwrap();
        assert_eq!(s, Some(Shard { index: 2, count: 4 }));
        let s = Shard::from_slurm(env(&[
            ("SLURM_ARRAY_TASK_ID", "4"),
            ("SLURM_ARRAY_TASK_STEP", "2"),
            ("SLURM_ARRAY_TASK_COUNT", "3"),
        ]))
        .unwrap();
        assert_eq!(s, Some(Shard { index: 2, count: 3 }));
        for (vars, needle) in [
            (
                vec![("SLURM_ARRAY_TASK_ID", "1")],
                "SLURM_ARRAY_TASK_COUNT is not",
            ),
            (
                vec![
                    ("SLURM_ARRAY_TASK_ID", "x"),
                    ("SLURM_ARRAY_TASK_COUNT", "2"),
                ],
                "SLURM_ARRAY_TASK_ID=\"x\"",
            ),
            (
                vec![
                    ("SLURM_ARRAY_TASK_ID", "2"),
                    ("SLURM_ARRAY_TASK_COUNT", "2"),
                ],
                "must be below N = 2",
            ),
            (
                vec![
                    ("SLURM_ARRAY_TASK_ID", "1"),
                    ("SLURM_ARRAY_TASK_MIN", "3"),
                    ("SLURM_ARRAY_TASK_COUNT", "2"),
                ],
                "SLURM_ARRAY_TASK_MIN=3",
            ),
            (
                vec![("SLURM_ARRAY_TASK_ID", "0"), ("SLURM_ARRAY_TASK_COUNT", "")],
                "SLURM_ARRAY_TASK_COUNT=\"\"",
            ),
        ] {
            let e = format!("{:#}", Shard::from_slurm(env(&vars)).unwrap_err());
            assert!(e.contains(needle), "{vars:?}: {e}");
        }
    }

    #[test]
    fn lpt_balances_a_known_case() {
        // 5 + 4 | 3 + 3 + 3 is optimal (9, 9): LPT gives 5+3 and 4+3+3 (8, 10) — the textbook
        // case where it misses the optimum but stays within 4/3.
        let costs = [3.0, 3.0, 5.0, 4.0, 3.0];
        let owner = assign(&costs, 2);
        assert_eq!(owner, vec![1, 0, 0, 1, 1]);
        assert_eq!(loads(&costs, 2), vec![8.0, 10.0]);
        // A run with 500 cheap steps is not the size of one with 50: two big runs go to
        // different shards whatever their order in the grid.
        let costs = [1.0, 1.0, 100.0, 1.0, 100.0, 1.0];
        let owner = assign(&costs, 2);
        assert_ne!(owner[2], owner[4]);
    }

    proptest! {
        #[test]
        fn every_run_is_in_exactly_one_shard_and_loads_are_bounded(
            costs in proptest::collection::vec(0.0f64..1e3, 0..60),
            n in 1usize..9,
        ) {
            let shards: Vec<Vec<usize>> =
                (0..n).map(|k| Shard { index: k, count: n }.select(&costs)).collect();
            let mut seen = vec![0usize; costs.len()];
            for s in &shards {
                for &i in s {
                    seen[i] += 1;
                }
            }
            prop_assert!(seen.iter().all(|&c| c == 1), "{seen:?}");
            // Deterministic.
            prop_assert_eq!(assign(&costs, n), assign(&costs, n));
            // The list-scheduling bound: max load ≤ mean load + the largest run.
            let total: f64 = costs.iter().sum();
            let largest = costs.iter().copied().fold(0.0, f64::max);
            let max_load = loads(&costs, n).into_iter().fold(0.0, f64::max);
            prop_assert!(max_load <= total / n as f64 + largest + 1e-9 * (1.0 + total));
        }
    }
}
