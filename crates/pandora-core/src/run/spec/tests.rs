use super::*;

/// A surrounding table as the front ends have it: common keys plus the flattened spec.
#[derive(Debug, Deserialize, Serialize, PartialEq)]
struct Section {
    #[serde(default)]
    seed: u64,
    #[serde(flatten)]
    spec: PolicySpec,
}

fn parse(text: &str) -> std::result::Result<Section, String> {
    toml::from_str(text).map_err(|e| e.to_string())
}

#[test]
fn registry_spec_and_docs_list_the_same_acquisitions() {
    for n in AcquisitionName::ALL {
        let spec = PolicySpec::bare(n, 1e-3);
        assert_eq!(spec.name(), n);
        // The serde tag is the registry's name, in both directions.
        let json = serde_json::to_value(&spec).unwrap();
        assert_eq!(json["acquisition"], n.as_str());
        let text = match n {
            AcquisitionName::Pbgi | AcquisitionName::PbgiPlain => {
                format!("acquisition = \"{n}\"\nlambda = 0.001")
            }
            _ => format!("acquisition = \"{n}\""),
        };
        assert_eq!(parse(&text).unwrap().spec, spec, "{n}");
    }
    let e = parse("acquisition = \"gittins\"").unwrap_err();
    assert!(
        e.contains("unknown variant `gittins`") && e.contains("pbgi_d"),
        "{e}"
    );
    let docs = std::fs::read_to_string(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../docs/acquisitions.md"
    ))
    .unwrap();
    assert_eq!(docs_rows(&docs), registry_rows());
}

/// The registry as docs/acquisitions.md's "Names" table shows it: (name, cost-aware, pointwise).
fn registry_rows() -> Vec<(String, bool, bool)> {
    AcquisitionName::ALL
        .iter()
        .map(|n| (n.as_str().to_string(), n.is_cost_aware(), n.is_pointwise()))
        .collect()
}

/// The rows of the "Names" table of docs/acquisitions.md: `| `name` | what | yes/no | step |`.
fn docs_rows(docs: &str) -> Vec<(String, bool, bool)> {
    let names = docs.split("\n## Names\n").nth(1).unwrap_or_default();
    let names = names.split("\n## ").next().unwrap_or_default();
    names
        .lines()
        .filter(|l| l.starts_with("| `"))
        .map(|l| {
            let cells: Vec<&str> = l.trim_matches('|').split(" | ").map(str::trim).collect();
            let name = cells[0].trim_matches('`').to_string();
            let cost_aware = cells[cells.len() - 2] == "yes";
            (name, cost_aware, cells[cells.len() - 1] == "pointwise")
        })
        .collect()
}

#[test]
fn the_docs_table_parser_sees_a_missing_or_changed_row() {
    let docs = std::fs::read_to_string(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../docs/acquisitions.md"
    ))
    .unwrap();
    let rows = docs_rows(&docs);
    assert_eq!(rows.len(), AcquisitionName::ALL.len());
    let without_kg = docs.replace("| `kg` |", "| kg |");
    assert_ne!(docs_rows(&without_kg), registry_rows());
    let kg_pointwise = docs.replace("no | `kg.rs` |", "no | pointwise |");
    assert_ne!(docs_rows(&kg_pointwise), registry_rows());
}

#[test]
fn every_variant_refuses_unknown_keys_even_when_flattened() {
    for n in AcquisitionName::ALL {
        let extra = match n {
            AcquisitionName::Pbgi | AcquisitionName::PbgiPlain => "lambda = 0.1\n",
            _ => "",
        };
        let text = format!("seed = 3\nacquisition = \"{n}\"\n{extra}bogus = 1\n");
        let e = parse(&text).unwrap_err();
        assert!(e.contains("unknown field `bogus`"), "{n}: {e}");
        // A key of another acquisition is refused too.
        let takes_lambda = matches!(n, AcquisitionName::Pbgi | AcquisitionName::PbgiPlain);
        let other = if takes_lambda { "lambda0" } else { "lambda" };
        let text = format!("acquisition = \"{n}\"\n{extra}{other} = 0.5\n");
        if !takes_lambda || other != "lambda" {
            let e = parse(&text).unwrap_err();
            assert!(e.contains(&format!("unknown field `{other}`")), "{n}: {e}");
        }
    }
    let s = parse("seed = 3\nacquisition = \"ucb\"\nbeta = 2").unwrap();
    assert_eq!(s.seed, 3);
    assert_eq!(s.spec, PolicySpec::Ucb { beta: Some(2.0) });
}

#[test]
fn keys_that_moved_say_their_new_name() {
    let e = parse("acquisition = \"ucb\"\nucb_beta = 2.0").unwrap_err();
    assert!(e.contains("`ucb_beta` is now called `beta`"), "{e}");
    let e = parse("acquisition = \"lcb\"\nucb_beta = 2.0").unwrap_err();
    assert!(e.contains("`ucb_beta` is now called `beta`"), "{e}");
    let e = parse("acquisition = \"pbgi_d\"\nlambda0 = 0.1\nbeta = 4.0").unwrap_err();
    assert!(e.contains("`beta` is now called `decay`"), "{e}");
    // `beta` on an acquisition without it is only unknown, not "moved".
    let e = parse("acquisition = \"ei\"\nbeta = 4.0").unwrap_err();
    assert!(
        e.contains("unknown field `beta`") && !e.contains("now called"),
        "{e}"
    );
}

#[test]
fn round_trips_through_toml_and_json() {
    let tree = FantasyTree::new(&[4, 4, 2]).unwrap();
    for spec in [
        PolicySpec::default(),
        PolicySpec::PbgiD {
            lambda0: 0.01,
            decay: 4.0,
        },
        PolicySpec::Pbgi { lambda: 1e-4 },
        PolicySpec::Ucb { beta: Some(0.5) },
        PolicySpec::LogEipc { alpha: Some(0.5) },
        PolicySpec::BMsEi {
            tree: Some(tree),
            refill: Some(false),
            warm_start: None,
            tree_budget: None,
        },
        PolicySpec::BMsEi {
            tree: None,
            refill: None,
            warm_start: None,
            tree_budget: Some(TreeBudget::RecentCosts),
        },
        PolicySpec::MsEi {
            tree: Some(tree),
            warm_start: Some(false),
        },
    ] {
        let s = Section { seed: 7, spec };
        let text = toml::to_string(&s).unwrap();
        assert_eq!(parse(&text).unwrap(), s, "{text}");
        let json = serde_json::to_string(&s).unwrap();
        assert_eq!(serde_json::from_str::<Section>(&json).unwrap(), s, "{json}");
    }
    // Integers are accepted where a number is expected.
    let s = parse("acquisition = \"pbgi_d\"\nlambda0 = 1\ndecay = 3").unwrap();
    assert_eq!(
        s.spec.decay(),
        Some(DecaySpec {
            lambda0: 1.0,
            decay: 3.0
        })
    );
}

#[test]
fn params_and_decay_carry_the_keys() {
    let p = PolicySpec::Ucb { beta: Some(2.0) }.params();
    assert_eq!((p.beta, p.lambda), (Some(2.0), None));
    let p = PolicySpec::Pbgi { lambda: 1e-3 }.params();
    assert_eq!(p.lambda, Some(1e-3));
    assert_eq!(PolicySpec::Pbgi { lambda: 1e-3 }.fixed_lambda(), Some(1e-3));
    assert_eq!(PolicySpec::default().fixed_lambda(), None);
    assert_eq!(PolicySpec::default().params(), AcquisitionParams::default());
    let p = PolicySpec::BMsEi {
        tree: None,
        refill: Some(false),
        warm_start: Some(true),
        tree_budget: Some(TreeBudget::RecentCosts),
    }
    .params();
    assert_eq!((p.refill, p.warm_start), (Some(false), Some(true)));
    assert_eq!(p.tree_budget, Some(TreeBudget::RecentCosts));
    let s = parse("acquisition = \"b_ms_ei\"\ntree_budget = \"recent_costs\"").unwrap();
    assert_eq!(s.spec.params().tree_budget, Some(TreeBudget::RecentCosts));
    let err = parse("acquisition = \"b_ms_ei\"\ntree_budget = \"last\"").unwrap_err();
    assert!(err.to_string().contains("recent_costs"), "{err}");
    assert_eq!(
        PolicySpec::default().decay(),
        Some(DecaySpec {
            lambda0: 0.1,
            decay: 2.0
        })
    );
    assert_eq!(PolicySpec::Ei {}.decay(), None);
}

#[test]
fn validation_names_the_field() {
    let field = |s: PolicySpec| match s.validate() {
        Err(Error::InvalidInput { what, .. }) => what,
        other => panic!("{s:?}: {other:?}"),
    };
    assert_eq!(field(PolicySpec::Pbgi { lambda: 0.0 }), "lambda");
    assert_eq!(field(PolicySpec::Pbgi { lambda: f64::NAN }), "lambda");
    let d = |lambda0, decay| PolicySpec::PbgiD { lambda0, decay };
    assert_eq!(field(d(-1.0, 2.0)), "lambda0");
    assert_eq!(field(d(0.1, 1.0)), "decay");
    assert_eq!(field(PolicySpec::Ucb { beta: Some(-1.0) }), "beta");
    assert_eq!(
        field(PolicySpec::Eipc {
            alpha: Some(f64::INFINITY)
        }),
        "alpha"
    );
    for n in AcquisitionName::ALL {
        PolicySpec::bare(n, 1e-3).validate().unwrap();
    }
}
