//! One way to name and configure acquisitions, shared by `pandora eval`, studies and experiments.
//!
//! ## Definition
//!
//! The registry is one table ([`AcquisitionName`], written with the `acquisitions!` macro): each
//! row is an acquisition's variant, its configuration name, its flags (`cost`: it uses the
//! evaluation cost; `lambda`: its step records a λ) and its step recipe, the
//! [`Acquirer`] a BO step hands the fitted models to. From the table come the enum,
//! [`AcquisitionName::ALL`] (the documented order), [`AcquisitionName::as_str`],
//! [`AcquisitionName::acquirer`], [`AcquisitionName::is_cost_aware`] and
//! [`AcquisitionName::uses_lambda`], so a name cannot be listed without its recipe, and every
//! property the rest of the crate asks of an acquisition (does it need the model, the cost
//! model, may it use a variable-amplitude model, is it pointwise) is asked of its acquirer.
//!
//! The pointwise acquisitions share one acquirer, `Pointwise`: [`build_pointwise`] turns a name
//! and its parameters (the values that depend on the state of a run, such as the incumbent, the
//! iteration, the remaining budget or PBGI-D's current λ, are passed explicitly) into a
//! [`PointwiseAcquisition`], which the step maximizes on the model (and the cost model). The
//! others each have their own file (see [`super::acquirer`]).
//!
//! ## Adding an acquisition
//!
//! One file with its acquirer, one row here, and (for the configuration schema) one variant of
//! [`crate::run::spec::PolicySpec`] with its keys; docs/acquisitions.md ("Adding an
//! acquisition") has a worked example, and a test (`run::spec`,
//! `registry_spec_and_docs_list_the_same_acquisitions`) checks that the registry, the spec and the
//! docs' table list the same names.
//!
//! ## Degenerate cases
//!
//! Unknown names are an error that lists every name; [`build_pointwise`] refuses the names whose
//! acquirer is not pointwise, saying that the policy step runs them.

use super::OnModel;
use super::PointwiseAcquisition;
pub use super::acquirer::AcquisitionParams;
use super::acquirer::{Acquired, Acquirer, StepInputs};
use super::analytic::{
    CostConvention, ExpectedImprovement, ExpectedImprovementPerCost, LogExpectedImprovement,
    LogExpectedImprovementPerCost, LogProbabilityOfImprovement, LogVanillaExpectedImprovement,
    LowerConfidenceBound, ProbabilityOfImprovement, UpperConfidenceBound, cost_cooling_alpha,
    gp_ucb_beta,
};
use super::budgeted::BudgetedExpectedImprovement;
use super::kg::KgStep;
use super::mes::MesStep;
use super::multi_step::{BmseiStep, MseiStep};
use super::one_shot_kg::OneShotKgStep;
use super::pbgi::Pbgi;
use super::pbgi_plain::PbgiPlain;
use super::random::RandomSearch;
use super::ts::ThompsonSampling;
use crate::error::{Error, Result};
use crate::optim::domain::{maximize_in, runners_up};

/// Whether the flag list of a registry row (`[cost, lambda]`) holds `cost` or `lambda`.
macro_rules! has_flag {
    ($want:ident;) => { false };
    (cost; cost $(, $rest:ident)*) => { true };
    (lambda; lambda $(, $rest:ident)*) => { true };
    ($want:ident; $other:ident $(, $rest:ident)*) => { has_flag!($want; $($rest),*) };
}

/// Writes the registry from its rows `(doc) Variant = "name" [flags] => acquirer,`: the enum
/// [`AcquisitionName`], `ALL`, `as_str`, `acquirer`, and from the optional flags
/// `is_cost_aware` (`cost`: the acquisition uses the evaluation cost) and `uses_lambda`
/// (`lambda`: the step records a λ).
macro_rules! acquisitions {
    ($($(#[doc = $doc:literal])* $variant:ident = $name:literal $([$($flag:ident),*])?
        => $acquirer:expr,)*) => {
        /// The acquisitions Pandora knows by name (the registry; see the module docs).
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
        pub enum AcquisitionName {
            $($(#[doc = $doc])* $variant,)*
        }

        impl AcquisitionName {
            /// Every name, in the documented order.
            pub const ALL: [AcquisitionName; [$($name),*].len()] = [$(Self::$variant),*];

            /// The configuration name.
            pub fn as_str(self) -> &'static str {
                match self {
                    $(Self::$variant => $name,)*
                }
            }

            /// The step recipe (see [`Acquirer`]).
            pub fn acquirer(self) -> Box<dyn Acquirer> {
                match self {
                    $(Self::$variant => Box::new($acquirer),)*
                }
            }

            /// Whether the acquisition uses the evaluation cost (its row's `cost` flag).
            pub fn is_cost_aware(self) -> bool {
                match self {
                    $(Self::$variant => has_flag!(cost; $($($flag),*)?),)*
                }
            }

            /// Whether the step records its λ (its row's `lambda` flag: PBGI and PBGI-D).
            pub fn uses_lambda(self) -> bool {
                match self {
                    $(Self::$variant => has_flag!(lambda; $($($flag),*)?),)*
                }
            }
        }
    };
}

acquisitions! {
    /// Expected improvement.
    Ei = "ei" => Pointwise(Self::Ei),
    /// Log expected improvement.
    LogEi = "log_ei" => Pointwise(Self::LogEi),
    /// `log(EI + 1e-6)`, the naive logarithm of the PBGI paper's App. D.1 ablation.
    LogVanillaEi = "log_vanilla_ei" => Pointwise(Self::LogVanillaEi),
    /// Probability of improvement.
    Pi = "pi" => Pointwise(Self::Pi),
    /// Log probability of improvement.
    LogPi = "log_pi" => Pointwise(Self::LogPi),
    /// Upper confidence bound.
    Ucb = "ucb" => Pointwise(Self::Ucb),
    /// Lower confidence bound.
    Lcb = "lcb" => Pointwise(Self::Lcb),
    /// Expected improvement per unit cost.
    Eipc = "eipc" [cost] => Pointwise(Self::Eipc),
    /// Log expected improvement per unit cost.
    LogEipc = "log_eipc" [cost] => Pointwise(Self::LogEipc),
    /// Expected improvement with cost cooling (α = remaining / total budget).
    Eicc = "eicc" [cost] => Pointwise(Self::Eicc),
    /// Log expected improvement with cost cooling.
    LogEicc = "log_eicc" [cost] => Pointwise(Self::LogEicc),
    /// Pandora's Box Gittins index with a fixed λ.
    Pbgi = "pbgi" [cost, lambda] => Pointwise(Self::Pbgi),
    /// PBGI with λ decayed when the Gittins stopping rule fires.
    PbgiD = "pbgi_d" [cost, lambda] => Pointwise(Self::PbgiD),
    /// PBGI computed as the reference code's plain version (linear-scale bisection, naive
    /// ratios): the PBGI paper's App. D.1 comparison with its stable index. Reproduction only.
    PbgiPlain = "pbgi_plain" [cost, lambda] => Pointwise(Self::PbgiPlain),
    /// Thompson sampling (a pathwise posterior sample).
    Ts = "ts" => ThompsonSampling,
    /// Uniformly random points (the design sequence continued).
    Random = "random" => RandomSearch,
    /// Budget-constrained EI, `EI · P(c ≤ remaining budget)` (B-MS-EI's one-step value).
    BudgetedEi = "budgeted_ei" [cost] => Pointwise(Self::BudgetedEi),
    /// Max-value entropy search (Gumbel max values, drawn once per step).
    Mes = "mes" => MesStep { per_cost: false },
    /// MES per unit (expected) cost.
    MesCost = "mes_cost" [cost] => MesStep { per_cost: true },
    /// Knowledge gradient on a Sobol discretization plus the posterior-mean maximizer.
    Kg = "kg" => KgStep,
    /// One-shot knowledge gradient with 64 quasi-random fantasies (BoTorch's `qKnowledgeGradient`).
    OneShotKg = "one_shot_kg" => OneShotKgStep,
    /// Budgeted multi-step EI (one-shot scenario tree, unknown costs); the tree is
    /// [`AcquisitionParams::tree`].
    BMsEi = "b_ms_ei" [cost] => BmseiStep,
    /// Multi-step lookahead EI for uniform costs (the same one-shot tree with EI at every stage
    /// and no budget; the PBGI paper's MSEI baseline).
    MsEi = "ms_ei" => MseiStep,
}

impl AcquisitionName {
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

    /// Whether [`build_pointwise`] can build it (its acquirer is the pointwise one).
    pub fn is_pointwise(self) -> bool {
        self.acquirer().is_pointwise()
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

/// Builds the pointwise acquisition `name` for a problem of dimension `d`. The acquisitions with
/// their own acquirer (Thompson sampling, random search, MES, KG, the trees) are not pointwise
/// functions of the posterior and return an error here.
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
        N::LogVanillaEi => Box::new(LogVanillaExpectedImprovement {
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
        N::PbgiPlain => Box::new(PbgiPlain { lambda: lambda()? }),
        N::BudgetedEi => Box::new(BudgetedExpectedImprovement {
            best_f: need(p.best_f, "best_f", name)?,
            budget: need(p.remaining_budget, "remaining_budget", name)?,
        }),
        _ => {
            return Err(Error::invalid(
                "name",
                format!(
                    "'{}' is not a function of the posterior mean and variance at a point: the \
                     policy step runs it on the model",
                    name.as_str()
                ),
            ));
        }
    })
}

/// The acquirer of the pointwise acquisitions: [`build_pointwise`] with the step's parameters,
/// on the model (divided by the cost model, if any), maximized over the step's domain.
struct Pointwise(AcquisitionName);

impl Acquirer for Pointwise {
    fn is_pointwise(&self) -> bool {
        true
    }

    fn acquire(&self, s: &StepInputs<'_>) -> Result<Acquired> {
        let model = s.model()?;
        let acq = build_pointwise(self.0, &s.params, s.d)?;
        let obj = match s.cost_ref {
            Some(c) => OnModel::with_cost(model, acq, c),
            None => OnModel::new(model, acq),
        };
        let r = maximize_in(&obj, s.d, s.domain, s.ms, s.seed)?;
        let runners_up = runners_up(&r, s.d);
        Ok(Acquired {
            runners_up,
            ..Acquired::point(r.x, r.value)
        })
    }
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
    fn the_rows_flags_say_which_use_the_cost_and_which_record_a_lambda() {
        let with = |f: fn(AcquisitionName) -> bool| -> Vec<&str> {
            AcquisitionName::ALL
                .iter()
                .filter(|n| f(**n))
                .map(|n| n.as_str())
                .collect()
        };
        assert_eq!(
            with(AcquisitionName::uses_lambda),
            ["pbgi", "pbgi_d", "pbgi_plain"]
        );
        assert_eq!(
            with(AcquisitionName::is_cost_aware),
            [
                "eipc",
                "log_eipc",
                "eicc",
                "log_eicc",
                "pbgi",
                "pbgi_d",
                "pbgi_plain",
                "budgeted_ei",
                "mes_cost",
                "b_ms_ei"
            ]
        );
        // Flags are found in any order, and only when listed.
        let found = [
            has_flag!(cost; lambda, cost),
            has_flag!(lambda; cost, lambda),
            has_flag!(lambda; cost),
            has_flag!(cost;),
        ];
        assert_eq!(found, [true, true, false, false]);
    }

    #[test]
    fn acquirers_say_what_the_step_prepares() {
        use super::super::acquirer::Needs;
        use AcquisitionName as N;
        for n in AcquisitionName::ALL {
            let a = n.acquirer();
            let needs = match n {
                N::Random => Needs::Nothing,
                N::Ts => Needs::Objective,
                _ => Needs::ObjectiveAndCost,
            };
            assert_eq!(a.needs(), needs, "{n}");
            let path_based = matches!(n, N::Ts | N::Kg | N::BMsEi);
            assert_eq!(a.supports_output_scale(), !path_based, "{n}");
        }
        let model_level: Vec<&str> = AcquisitionName::ALL
            .iter()
            .filter(|n| !n.is_pointwise())
            .map(|n| n.as_str())
            .collect();
        assert_eq!(
            model_level,
            [
                "ts",
                "random",
                "mes",
                "mes_cost",
                "kg",
                "one_shot_kg",
                "b_ms_ei",
                "ms_ei"
            ]
        );
    }

    #[test]
    fn acquirers_without_a_model_name_it_and_random_search_needs_none() {
        use super::super::CostSetting;
        use crate::optim::domain::Domain;
        use crate::optim::multistart::MultiStartOptions;
        use crate::optim::sobol::design_point;
        let ms = MultiStartOptions::default();
        let s = StepInputs {
            d: 2,
            model: None,
            cost_model: None,
            cost: CostSetting::Uniform,
            cost_ref: None,
            params: AcquisitionParams::default(),
            best_f: 0.0,
            ms: &ms,
            seed: 0,
            domain: Domain::default(),
            train_x: &[],
            last_cost: None,
            costs: &[],
            carry: None,
            ts_features: 16,
            design_seed: 5,
            design_index: 3,
        };
        for n in AcquisitionName::ALL {
            match n.acquirer().acquire(&s) {
                Ok(a) => {
                    assert_eq!(n, AcquisitionName::Random);
                    assert_eq!(a.x, design_point(2, 3, 5).unwrap());
                    assert!(a.value.is_nan() && a.carry.is_none());
                }
                Err(e) => assert!(e.to_string().contains("model"), "{n}: {e}"),
            }
        }
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
