//! One way to name and configure acquisitions, shared by `pandora eval`, studies and experiments.
//!
//! Names: `ei`, `log_ei`, `pi`, `log_pi`, `ucb`, `lcb`, `eipc`, `log_eipc`, `eicc`, `log_eicc`,
//! `pbgi`, `pbgi_d`, `ts`, `random`, `budgeted_ei`, `mes`, `mes_cost`, `kg`, `b_ms_ei`.
//! [`build_pointwise`] turns a name and its parameters (the values
//! that depend on the state of a run, such as the incumbent, the iteration, the remaining budget or
//! PBGI-D's current λ, are passed explicitly) into a [`PointwiseAcquisition`].

use super::PointwiseAcquisition;
use super::analytic::{
    CostConvention, ExpectedImprovement, ExpectedImprovementPerCost, LogExpectedImprovement,
    LogExpectedImprovementPerCost, LogProbabilityOfImprovement, LowerConfidenceBound,
    ProbabilityOfImprovement, UpperConfidenceBound, cost_cooling_alpha, gp_ucb_beta,
};
use super::bmsei::FantasyTree;
use super::budgeted::BudgetedExpectedImprovement;
use super::pbgi::Pbgi;
use crate::error::{Error, Result};

/// The acquisitions Pandora knows by name.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum AcquisitionName {
    /// Expected improvement.
    Ei,
    /// Log expected improvement.
    LogEi,
    /// Probability of improvement.
    Pi,
    /// Log probability of improvement.
    LogPi,
    /// Upper confidence bound.
    Ucb,
    /// Lower confidence bound.
    Lcb,
    /// Expected improvement per unit cost.
    Eipc,
    /// Log expected improvement per unit cost.
    LogEipc,
    /// Expected improvement with cost cooling (α = remaining / total budget).
    Eicc,
    /// Log expected improvement with cost cooling.
    LogEicc,
    /// Pandora's Box Gittins index with a fixed λ.
    Pbgi,
    /// PBGI with λ decayed when the Gittins stopping rule fires.
    PbgiD,
    /// Thompson sampling (a pathwise posterior sample).
    Ts,
    /// Uniformly random points.
    Random,
    /// Budget-constrained EI, `EI · P(c ≤ remaining budget)` (B-MS-EI's one-step value).
    BudgetedEi,
    /// Max-value entropy search (Gumbel max values, drawn once per step).
    Mes,
    /// MES per unit (expected) cost.
    MesCost,
    /// Knowledge gradient on a Sobol discretization plus the posterior-mean maximizer.
    Kg,
    /// One-shot knowledge gradient with 64 quasi-random fantasies (BoTorch's `qKnowledgeGradient`).
    OneShotKg,
    /// Budgeted multi-step EI (one-shot scenario tree, unknown costs); the tree is
    /// [`AcquisitionParams::tree`].
    BMsEi,
    /// Multi-step lookahead EI for uniform costs (the same one-shot tree with EI at every stage
    /// and no budget; the PBGI paper's MSEI baseline).
    MsEi,
}

impl AcquisitionName {
    /// Every name, in the documented order.
    pub const ALL: [AcquisitionName; 21] = [
        Self::Ei,
        Self::LogEi,
        Self::Pi,
        Self::LogPi,
        Self::Ucb,
        Self::Lcb,
        Self::Eipc,
        Self::LogEipc,
        Self::Eicc,
        Self::LogEicc,
        Self::Pbgi,
        Self::PbgiD,
        Self::Ts,
        Self::Random,
        Self::BudgetedEi,
        Self::Mes,
        Self::MesCost,
        Self::Kg,
        Self::OneShotKg,
        Self::BMsEi,
        Self::MsEi,
    ];

    /// The configuration name.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Ei => "ei",
            Self::LogEi => "log_ei",
            Self::Pi => "pi",
            Self::LogPi => "log_pi",
            Self::Ucb => "ucb",
            Self::Lcb => "lcb",
            Self::Eipc => "eipc",
            Self::LogEipc => "log_eipc",
            Self::Eicc => "eicc",
            Self::LogEicc => "log_eicc",
            Self::Pbgi => "pbgi",
            Self::PbgiD => "pbgi_d",
            Self::Ts => "ts",
            Self::Random => "random",
            Self::BudgetedEi => "budgeted_ei",
            Self::Mes => "mes",
            Self::MesCost => "mes_cost",
            Self::Kg => "kg",
            Self::OneShotKg => "one_shot_kg",
            Self::BMsEi => "b_ms_ei",
            Self::MsEi => "ms_ei",
        }
    }

    /// Parses a configuration name.
    pub fn parse(name: &str) -> Result<Self> {
        Self::ALL
            .iter()
            .copied()
            .find(|n| n.as_str() == name)
            .ok_or_else(|| {
                let all: Vec<&str> = Self::ALL.iter().map(|n| n.as_str()).collect();
                Error::invalid(
                    "name",
                    format!(
                        "unknown acquisition '{name}' (available: {})",
                        all.join(", ")
                    ),
                )
            })
    }

    /// Whether the acquisition uses the evaluation cost.
    pub fn is_cost_aware(self) -> bool {
        matches!(
            self,
            Self::Eipc
                | Self::LogEipc
                | Self::Eicc
                | Self::LogEicc
                | Self::Pbgi
                | Self::PbgiD
                | Self::BudgetedEi
                | Self::MesCost
                | Self::BMsEi
        )
    }

    /// Whether [`build_pointwise`] can build it (the others need the model: `ts`, `random`,
    /// `mes`, `mes_cost`, `kg`, `b_ms_ei`, `ms_ei` are handled by [`crate::policy::propose`]).
    pub fn is_pointwise(self) -> bool {
        !matches!(
            self,
            Self::Ts
                | Self::Random
                | Self::Mes
                | Self::MesCost
                | Self::Kg
                | Self::OneShotKg
                | Self::BMsEi
                | Self::MsEi
        )
    }

    /// Whether it optimizes a one-shot scenario tree ([`AcquisitionParams::tree`] applies).
    pub fn uses_tree(self) -> bool {
        matches!(self, Self::BMsEi | Self::MsEi)
    }
}

impl std::fmt::Display for AcquisitionName {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

impl serde::Serialize for AcquisitionName {
    fn serialize<S: serde::Serializer>(&self, s: S) -> std::result::Result<S::Ok, S::Error> {
        s.serialize_str(self.as_str())
    }
}

impl<'de> serde::Deserialize<'de> for AcquisitionName {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> std::result::Result<Self, D::Error> {
        let s = String::deserialize(d)?;
        Self::parse(&s).map_err(serde::de::Error::custom)
    }
}

/// Parameters of an acquisition at one decision (what is not given is an error if needed).
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub struct AcquisitionParams {
    /// Incumbent value (EI, PI, EIPC families).
    pub best_f: Option<f64>,
    /// Fixed UCB/LCB β.
    pub beta: Option<f64>,
    /// UCB/LCB schedule index `t` (cumulative cost + 1); β = [`gp_ucb_beta`]`(d, t)`.
    pub t: Option<f64>,
    /// Cost exponent α of EIPC/LogEIPC (default 1).
    pub alpha: Option<f64>,
    /// Remaining budget (EICC).
    pub remaining_budget: Option<f64>,
    /// Total budget (EICC).
    pub total_budget: Option<f64>,
    /// λ of PBGI (for PBGI-D: its current λ).
    pub lambda: Option<f64>,
    /// Unknown-cost convention of LogEIPC/LogEICC (default inverse) and of cost-weighted MES
    /// (default expected: divide by `E[c]`).
    pub convention: Option<CostConvention>,
    /// B-MS-EI's scenario tree (fantasies per look-ahead stage; default `[1, 1, 1]`).
    pub tree: Option<FantasyTree>,
    /// B-MS-EI: apply the refill rule to the previous step's suggested budget when the step
    /// context carries one (default true, the reference's setting).
    pub refill: Option<bool>,
    /// B-MS-EI: warm-start the tree maximization from the previous step's trees when the step
    /// context carries them (default true, the reference's setting).
    pub warm_start: Option<bool>,
}

fn need(v: Option<f64>, field: &str, name: AcquisitionName) -> Result<f64> {
    match v {
        Some(x) if x.is_finite() => Ok(x),
        Some(x) => Err(Error::invalid(field, format!("must be finite, got {x}"))),
        None => Err(Error::invalid(
            field,
            format!("required by '{}'", name.as_str()),
        )),
    }
}

/// Builds the pointwise acquisition `name` for a problem of dimension `d`. Thompson sampling and
/// random search are not pointwise functions of the posterior and return an error here.
pub fn build_pointwise(
    name: AcquisitionName,
    p: &AcquisitionParams,
    d: usize,
) -> Result<Box<dyn PointwiseAcquisition>> {
    use AcquisitionName as N;
    let conv = p.convention.unwrap_or(CostConvention::Inverse);
    let beta = || -> Result<f64> {
        let b = match (p.beta, p.t) {
            (Some(b), _) => b,
            (None, Some(t)) => gp_ucb_beta(d, t),
            (None, None) => {
                return Err(Error::invalid(
                    "beta",
                    format!("'{}' needs beta or t", name.as_str()),
                ));
            }
        };
        if !(b.is_finite() && b >= 0.0) {
            return Err(Error::invalid(
                "beta",
                format!("must be finite and >= 0, got {b}"),
            ));
        }
        Ok(b)
    };
    let alpha_cc = || -> Result<f64> {
        if let Some(a) = p.alpha {
            return Ok(a);
        }
        let r = need(p.remaining_budget, "remaining_budget", name)?;
        let t = need(p.total_budget, "budget", name)?;
        if t <= 0.0 {
            return Err(Error::invalid("budget", "must be > 0"));
        }
        Ok(cost_cooling_alpha(r, t))
    };
    let lambda = || -> Result<f64> {
        let l = need(p.lambda, "lambda", name)?;
        if l <= 0.0 {
            return Err(Error::invalid("lambda", format!("must be > 0, got {l}")));
        }
        Ok(l)
    };
    Ok(match name {
        N::Ei => Box::new(ExpectedImprovement {
            best_f: need(p.best_f, "best_f", name)?,
        }),
        N::LogEi => Box::new(LogExpectedImprovement {
            best_f: need(p.best_f, "best_f", name)?,
        }),
        N::Pi => Box::new(ProbabilityOfImprovement {
            best_f: need(p.best_f, "best_f", name)?,
        }),
        N::LogPi => Box::new(LogProbabilityOfImprovement {
            best_f: need(p.best_f, "best_f", name)?,
        }),
        N::Ucb => Box::new(UpperConfidenceBound { beta: beta()? }),
        N::Lcb => Box::new(LowerConfidenceBound { beta: beta()? }),
        N::Eipc => Box::new(ExpectedImprovementPerCost {
            best_f: need(p.best_f, "best_f", name)?,
            alpha: p.alpha.unwrap_or(1.0),
        }),
        N::LogEipc => Box::new(LogExpectedImprovementPerCost {
            best_f: need(p.best_f, "best_f", name)?,
            alpha: p.alpha.unwrap_or(1.0),
            convention: conv,
        }),
        N::Eicc => Box::new(ExpectedImprovementPerCost {
            best_f: need(p.best_f, "best_f", name)?,
            alpha: alpha_cc()?,
        }),
        N::LogEicc => Box::new(LogExpectedImprovementPerCost {
            best_f: need(p.best_f, "best_f", name)?,
            alpha: alpha_cc()?,
            convention: conv,
        }),
        N::Pbgi | N::PbgiD => Box::new(Pbgi { lambda: lambda()? }),
        N::BudgetedEi => Box::new(BudgetedExpectedImprovement {
            best_f: need(p.best_f, "best_f", name)?,
            budget: need(p.remaining_budget, "remaining_budget", name)?,
        }),
        N::Mes | N::MesCost | N::Kg | N::OneShotKg | N::BMsEi | N::MsEi => {
            return Err(Error::invalid(
                "name",
                format!(
                    "'{}' needs the model and is built by the policy step, not pointwise",
                    name.as_str()
                ),
            ));
        }
        N::Ts | N::Random => {
            return Err(Error::invalid(
                "name",
                format!(
                    "'{}' is not a function of the posterior mean and variance",
                    name.as_str()
                ),
            ));
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::acquisition::LogCost;
    use crate::acquisition::bmsei::FantasyTree;

    #[test]
    fn names_round_trip_and_unknown_names_list_the_choices() {
        for n in AcquisitionName::ALL {
            assert_eq!(AcquisitionName::parse(n.as_str()).unwrap(), n);
        }
        let e = AcquisitionName::parse("gittins").unwrap_err().to_string();
        assert!(e.contains("pbgi_d") && e.contains("log_eicc"));
    }

    #[test]
    fn builds_each_pointwise_acquisition_and_names_missing_parameters() {
        let full = AcquisitionParams {
            best_f: Some(0.5),
            beta: Some(2.0),
            lambda: Some(1e-3),
            remaining_budget: Some(30.0),
            total_budget: Some(100.0),
            ..Default::default()
        };
        for n in AcquisitionName::ALL {
            let r = build_pointwise(n, &full, 3);
            match n {
                n if !n.is_pointwise() => assert!(r.is_err()),
                _ => {
                    let v = r.unwrap().eval(0.2, 0.4, LogCost::default()).value;
                    assert!(v.is_finite(), "{}", n.as_str());
                }
            }
        }
        let e = build_pointwise(AcquisitionName::Ei, &AcquisitionParams::default(), 3)
            .err()
            .unwrap()
            .to_string();
        assert!(e.contains("best_f"));
        let e = build_pointwise(AcquisitionName::Pbgi, &AcquisitionParams::default(), 3)
            .err()
            .unwrap()
            .to_string();
        assert!(e.contains("lambda"));
        // UCB from the schedule.
        let ucb = build_pointwise(
            AcquisitionName::Ucb,
            &AcquisitionParams {
                t: Some(1.0),
                ..Default::default()
            },
            8,
        )
        .unwrap();
        let v = ucb.eval(0.0, 1.0, LogCost::default()).value;
        assert!((v - 1.951_890_774_86f64.sqrt()).abs() < 1e-10);
        // EICC's α from the budget: 0.3 → EI / c^0.3.
        let eicc = build_pointwise(AcquisitionName::Eicc, &full, 3).unwrap();
        let ei = ExpectedImprovement { best_f: 0.5 }
            .eval(0.2, 0.4, LogCost::default())
            .value;
        let c = LogCost {
            mean: 2f64.ln(),
            var: 0.0,
        };
        assert!((eicc.eval(0.2, 0.4, c).value - ei / 2f64.powf(0.3)).abs() < 1e-15);
    }

    #[test]
    fn names_and_trees_round_trip_through_serde_and_toml() {
        #[derive(serde::Serialize, serde::Deserialize, PartialEq, Debug)]
        struct Policy {
            acquisition: AcquisitionName,
            tree: Option<FantasyTree>,
        }
        for n in AcquisitionName::ALL {
            let json = serde_json::to_string(&n).unwrap();
            assert_eq!(json, format!("\"{}\"", n.as_str()));
            assert_eq!(serde_json::from_str::<AcquisitionName>(&json).unwrap(), n);
            let p = Policy {
                acquisition: n,
                tree: Some(FantasyTree::new(&[4, 4, 2]).unwrap()),
            };
            let text = toml::to_string(&p).unwrap();
            assert!(text.contains(&format!("acquisition = \"{n}\"")), "{text}");
            assert_eq!(toml::from_str::<Policy>(&text).unwrap(), p);
        }
        let p: Policy = toml::from_str("acquisition = \"b_ms_ei\"\ntree = [1, 1]").unwrap();
        assert_eq!(p.acquisition, AcquisitionName::BMsEi);
        assert_eq!(p.tree.unwrap().stages(), vec![1, 1]);
        assert_eq!(p.tree.unwrap().num_points(), 3);
        assert_eq!(FantasyTree::new(&[4, 4, 2]).unwrap().num_points(), 53);
        let e = toml::from_str::<Policy>("acquisition = \"kgg\"").unwrap_err();
        assert!(e.to_string().contains("mes_cost"), "{e}");
        let e = toml::from_str::<Policy>("acquisition = \"kg\"\ntree = [0]").unwrap_err();
        assert!(e.to_string().contains("fantasies"), "{e}");
        assert!(FantasyTree::new(&[]).is_err());
        assert!(FantasyTree::new(&[8, 8, 8]).is_err());
    }
}
