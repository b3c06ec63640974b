//! Rough cost of MES and discrete KG at d = 8, n = 100 (ignored by default; prints, asserts
//! nothing about time). Run with
//! `cargo test --release -p pandora-core --test lookahead_timing -- --ignored --nocapture`.

use pandora_core::acquisition::OnModel;
use pandora_core::acquisition::kg::DiscreteKnowledgeGradient;
use pandora_core::acquisition::mes::{DEFAULT_NUM_MAX_VALUES, MaxValueEntropy};
use pandora_core::gp::{ExactGp, GpParams, Kernel, KernelKind};
use pandora_core::optim::multistart::{MultiStartOptions, maximize};
use rand::{RngExt, SeedableRng};
use rand_xoshiro::Xoshiro256PlusPlus;
use std::time::Instant;

const D: usize = 8;
const N: usize = 100;

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

fn gp(seed: u64) -> ExactGp {
    let mut rng = Xoshiro256PlusPlus::seed_from_u64(seed);
    let x: Vec<f64> = (0..N * D).map(|_| rng.random::<f64>()).collect();
    let y: Vec<f64> = x
        .chunks_exact(D)
        .map(|p| -p.iter().map(|t| (t - 0.3).powi(2)).sum::<f64>() + (5.0 * p[0]).sin())
        .collect();
    let kernel = Kernel::new(KernelKind::Matern52, vec![0.5; D], 1.0).unwrap();
    ExactGp::new(
        x,
        y,
        GpParams {
            kernel,
            mean: 0.0,
            noise: 1e-4,
        },
    )
    .unwrap()
}

#[test]
#[ignore]
fn mes_and_kg_cost_at_d8_n100() {
    let mut mes_setup = Vec::new();
    let mut mes_opt = Vec::new();
    let mut kg_set = Vec::new();
    let mut kg_opt = Vec::new();
    for rep in 0..5u64 {
        let model = gp(rep);
        let mut rng = Xoshiro256PlusPlus::seed_from_u64(100 + rep);
        // PBGI-paper settings: 1000·d uniform candidates, 10 Gumbel max values.
        let cand: Vec<f64> = (0..1000 * D * D).map(|_| rng.random::<f64>()).collect();
        let t = Instant::now();
        let mes = MaxValueEntropy::from_model(
            &model,
            &cand,
            model.train_x(),
            DEFAULT_NUM_MAX_VALUES,
            rep,
        )
        .unwrap();
        mes_setup.push(t.elapsed().as_secs_f64());
        let t = Instant::now();
        let obj = OnModel::new(&model, mes);
        let r = maximize(&obj, &MultiStartOptions::default(), rep).unwrap();
        mes_opt.push(t.elapsed().as_secs_f64());
        assert!(r.value.is_finite());
        // Discrete KG on 1000 candidates: KG at every candidate, then the argmax.
        let set: Vec<f64> = (0..1000 * D).map(|_| rng.random::<f64>()).collect();
        let t = Instant::now();
        let kg = DiscreteKnowledgeGradient::new(&model, &set).unwrap();
        let v = kg.values_on_set().unwrap();
        kg_set.push(t.elapsed().as_secs_f64());
        assert!(v.iter().all(|x| x.is_finite()));
        // KG at arbitrary points (value only) over a 2000-point Sobol-like batch.
        let t = Instant::now();
        let pts: Vec<f64> = (0..200 * D * D).map(|_| rng.random::<f64>()).collect();
        for p in pts.chunks_exact(D) {
            std::hint::black_box(kg.value_at(p).unwrap());
        }
        kg_opt.push(t.elapsed().as_secs_f64());
    }
    println!(
        "MES Gumbel setup (8000 candidates + 100 training points, 10 max values): median {:.4} s",
        median(mes_setup)
    );
    println!(
        "MES maximization (multistart L-BFGS-B, 200d raw, 10d restarts): median {:.3} s",
        median(mes_opt)
    );
    println!(
        "discrete KG on a 1000-point set (KG at all 1000 points): median {:.3} s",
        median(kg_set)
    );
    println!(
        "discrete KG value_at on 1600 off-set points (set of 1000): median {:.3} s",
        median(kg_opt)
    );
}
