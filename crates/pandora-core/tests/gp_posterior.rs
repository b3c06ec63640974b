//! The exact GP posterior against the dense textbook formulas (computed here by Gauss–Jordan
//! elimination, independent of faer), finite differences, and refitting.

use pandora_core::gp::{ExactGp, GpParams, Kernel, KernelKind};
use rand::{RngExt, SeedableRng};
use rand_xoshiro::Xoshiro256PlusPlus;

const KINDS: [KernelKind; 4] = [
    KernelKind::Matern12,
    KernelKind::Matern32,
    KernelKind::Matern52,
    KernelKind::Rbf,
];

fn random_points(rng: &mut Xoshiro256PlusPlus, n: usize, d: usize) -> Vec<f64> {
    (0..n * d).map(|_| rng.random::<f64>()).collect()
}

fn model(kind: KernelKind, n: usize, d: usize, seed: u64) -> ExactGp {
    let mut rng = Xoshiro256PlusPlus::seed_from_u64(seed);
    let x = random_points(&mut rng, n, d);
    let y: Vec<f64> = (0..n)
        .map(|i| (x[i * d] * 6.0).sin() + x[i * d + d - 1] + 0.1 * rng.random::<f64>())
        .collect();
    let ls: Vec<f64> = (0..d).map(|k| 0.3 + 0.2 * k as f64).collect();
    let params = GpParams {
        kernel: Kernel::new(kind, ls, 1.3).unwrap(),
        mean: 0.25,
        noise: 1e-3,
    };
    ExactGp::new(x, y, params).unwrap()
}

/// Solves A X = B by Gauss–Jordan elimination with partial pivoting (A is n×n row-major).
fn dense_solve(a: &[f64], b: &[f64], n: usize, cols: usize) -> Vec<f64> {
    let mut a = a.to_vec();
    let mut b = b.to_vec();
    for c in 0..n {
        let p = (c..n)
            .max_by(|&i, &j| a[i * n + c].abs().total_cmp(&a[j * n + c].abs()))
            .unwrap();
        for k in 0..n {
            a.swap(c * n + k, p * n + k);
        }
        for k in 0..cols {
            b.swap(c * cols + k, p * cols + k);
        }
        let piv = a[c * n + c];
        for r in 0..n {
            if r != c {
                let f = a[r * n + c] / piv;
                for k in 0..n {
                    a[r * n + k] -= f * a[c * n + k];
                }
                for k in 0..cols {
                    b[r * cols + k] -= f * b[c * cols + k];
                }
            }
        }
    }
    for r in 0..n {
        for k in 0..cols {
            b[r * cols + k] /= a[r * n + r];
        }
    }
    b
}

#[test]
fn posterior_matches_dense_textbook_formula() {
    for kind in KINDS {
        let (n, d) = (25, 3);
        let gp = model(kind, n, d, 7);
        let p = gp.params().clone();
        let x = gp.train_x();
        let mut kmat = vec![0.0; n * n];
        for i in 0..n {
            for j in 0..n {
                kmat[i * n + j] = p
                    .kernel
                    .eval(&x[i * d..(i + 1) * d], &x[j * d..(j + 1) * d])
                    + if i == j { p.noise } else { 0.0 };
            }
        }
        let mut rng = Xoshiro256PlusPlus::seed_from_u64(99);
        let q = random_points(&mut rng, 300, d);
        let post = gp.posterior(&q, false).unwrap();
        for j in 0..300 {
            let qj = &q[j * d..(j + 1) * d];
            let kq: Vec<f64> = (0..n)
                .map(|i| p.kernel.eval(qj, &x[i * d..(i + 1) * d]))
                .collect();
            let r: Vec<f64> = gp.train_y().iter().map(|y| y - p.mean).collect();
            let alpha = dense_solve(&kmat, &r, n, 1);
            let w = dense_solve(&kmat, &kq, n, 1);
            let mean = p.mean + kq.iter().zip(&alpha).map(|(a, b)| a * b).sum::<f64>();
            let var = p.kernel.eval(qj, qj) - kq.iter().zip(&w).map(|(a, b)| a * b).sum::<f64>();
            assert!((mean - post.mean[j]).abs() < 1e-9, "{kind:?} mean");
            assert!(
                (var - post.var[j]).abs() < 1e-9,
                "{kind:?} var {var} vs {}",
                post.var[j]
            );
        }
    }
}

#[test]
fn posterior_gradients_match_finite_differences() {
    for kind in KINDS {
        let d = 4;
        let gp = model(kind, 30, d, 3);
        let mut rng = Xoshiro256PlusPlus::seed_from_u64(5);
        let q = random_points(&mut rng, 20, d);
        let post = gp.posterior(&q, true).unwrap();
        let sg = post.std_grad();
        let h = 1e-6;
        for j in 0..20 {
            for k in 0..d {
                let mut qp = q[j * d..(j + 1) * d].to_vec();
                let mut qm = qp.clone();
                qp[k] += h;
                qm[k] -= h;
                let pp = gp.posterior(&qp, false).unwrap();
                let pm = gp.posterior(&qm, false).unwrap();
                let fd_mean = (pp.mean[0] - pm.mean[0]) / (2.0 * h);
                let fd_std = (pp.var[0].sqrt() - pm.var[0].sqrt()) / (2.0 * h);
                let g_mean = post.mean_grad[j * d + k];
                let g_std = sg[j * d + k];
                let tol = if kind == KernelKind::Matern12 {
                    1e-4
                } else {
                    1e-6
                };
                assert!(
                    (fd_mean - g_mean).abs() < tol * (1.0 + fd_mean.abs()),
                    "{kind:?} mean grad {fd_mean} vs {g_mean}"
                );
                assert!(
                    (fd_std - g_std).abs() < tol * (1.0 + fd_std.abs()),
                    "{kind:?} std grad {fd_std} vs {g_std}"
                );
            }
        }
    }
}

#[test]
fn joint_covariance_is_consistent_with_marginals() {
    let d = 2;
    let gp = model(KernelKind::Matern52, 15, d, 11);
    let q = [0.1, 0.2, 0.5, 0.5, 0.9, 0.1];
    let cov = gp.posterior_covariance(&q).unwrap();
    let post = gp.posterior(&q, false).unwrap();
    for a in 0..3 {
        assert!((cov[a * 3 + a] - post.var[a]).abs() < 1e-12);
        for b in 0..3 {
            assert_eq!(cov[a * 3 + b], cov[b * 3 + a]);
        }
    }
}

#[test]
fn conditioning_equals_refitting() {
    for kind in KINDS {
        let d = 3;
        let full = model(kind, 40, d, 21);
        let x = full.train_x();
        let y = full.train_y();
        let base = ExactGp::new(
            x[..30 * d].to_vec(),
            y[..30].to_vec(),
            full.params().clone(),
        )
        .unwrap();
        let cond = base.condition_on(&x[30 * d..], &y[30..]).unwrap();
        let mut rng = Xoshiro256PlusPlus::seed_from_u64(1);
        let q = random_points(&mut rng, 50, d);
        let a = full.posterior(&q, true).unwrap();
        let b = cond.posterior(&q, true).unwrap();
        for i in 0..50 {
            assert!((a.mean[i] - b.mean[i]).abs() < 1e-10);
            assert!((a.var[i] - b.var[i]).abs() < 1e-10);
        }
        for (u, v) in a.mean_grad.iter().zip(&b.mean_grad) {
            assert!((u - v).abs() < 1e-8);
        }
        assert!((full.log_marginal_likelihood() - cond.log_marginal_likelihood()).abs() < 1e-9);
        // The same once the base model has computed L⁻¹ (a posterior call): the conditioned
        // model then derives its L⁻¹ by the block formula, for a block of 10 and for a chain of
        // one-point appends (the B-MS-EI tree's case).
        base.posterior(&q[..d], false).unwrap();
        let block = base.condition_on(&x[30 * d..], &y[30..]).unwrap();
        let mut chain = base.clone();
        for i in 30..40 {
            chain.posterior(&q[..d], false).unwrap();
            chain = chain
                .condition_on(&x[i * d..(i + 1) * d], &y[i..i + 1])
                .unwrap();
        }
        for m in [&block, &chain] {
            let b = m.posterior(&q, true).unwrap();
            for i in 0..50 {
                assert!((a.mean[i] - b.mean[i]).abs() < 1e-10);
                assert!((a.var[i] - b.var[i]).abs() < 1e-10);
            }
            for (u, v) in a.mean_grad.iter().zip(&b.mean_grad) {
                assert!((u - v).abs() < 1e-8);
            }
            for (u, v) in a.var_grad.iter().zip(&b.var_grad) {
                assert!((u - v).abs() < 1e-8);
            }
        }
    }
}

#[test]
fn prior_and_bad_input() {
    let params = GpParams {
        kernel: Kernel::new(KernelKind::Rbf, vec![0.5, 0.5], 2.0).unwrap(),
        mean: 1.0,
        noise: 0.0,
    };
    let gp = ExactGp::new(vec![], vec![], params.clone()).unwrap();
    let post = gp.posterior(&[0.3, 0.3], true).unwrap();
    assert_eq!(post.mean, vec![1.0]);
    assert_eq!(post.var, vec![2.0]);
    assert!(ExactGp::new(vec![0.1, 0.2, 0.3], vec![1.0], params.clone()).is_err());
    assert!(ExactGp::new(vec![0.1, f64::NAN], vec![1.0], params.clone()).is_err());
    assert!(gp.posterior(&[0.3], false).is_err());
    // Duplicate inputs without noise do not crash.
    let dup = ExactGp::new(
        vec![0.1, 0.1, 0.1, 0.1, 0.7, 0.7],
        vec![1.0, 1.0, 2.0],
        params,
    )
    .unwrap();
    assert!(dup.cholesky().jitter() > 0.0);
    let p = dup.posterior(&[0.1, 0.1, 0.4, 0.4], true).unwrap();
    assert!(
        p.mean
            .iter()
            .chain(&p.var)
            .chain(&p.var_grad)
            .all(|v| v.is_finite())
    );
}

#[test]
fn predictive_variance_adds_the_noise() {
    let gp = model(KernelKind::Matern32, 10, 2, 4);
    let q = [0.3, 0.6, 0.9, 0.1];
    let (m, v) = gp.predict(&q).unwrap();
    let p = gp.posterior(&q, false).unwrap();
    assert_eq!(m, p.mean);
    for (vi, pi) in v.iter().zip(&p.var) {
        assert_eq!(*vi, pi + gp.params().noise);
    }
}

#[test]
fn posterior_pairs_match_posterior_joint_covariance_and_finite_differences() {
    for kind in KINDS {
        let d = 3;
        for n in [0, 25] {
            let gp = if n == 0 {
                let params = GpParams {
                    kernel: Kernel::new(kind, vec![0.3, 0.5, 0.7], 1.3).unwrap(),
                    mean: 0.25,
                    noise: 1e-3,
                };
                ExactGp::new(Vec::new(), Vec::new(), params).unwrap()
            } else {
                model(kind, n, d, 13)
            };
            let mut rng = Xoshiro256PlusPlus::seed_from_u64(17);
            let m = 6;
            let q = random_points(&mut rng, m, d);
            let pairs = [(0, 1), (2, 0), (3, 5), (4, 4), (5, 1)];
            let pp = gp.posterior_pairs(&q, &pairs, true).unwrap();
            let post = gp.posterior(&q, true).unwrap();
            let cov = gp.posterior_covariance(&q).unwrap();
            for j in 0..m {
                assert!((pp.mean[j] - post.mean[j]).abs() < 1e-12);
                assert!((pp.var[j] - post.var[j]).abs() < 1e-12);
                for k in 0..d {
                    let i = j * d + k;
                    assert!((pp.mean_grad[i] - post.mean_grad[i]).abs() < 1e-10);
                    assert!((pp.var_grad[i] - post.var_grad[i]).abs() < 1e-10);
                }
            }
            let values = gp.posterior_pairs(&q, &pairs, false).unwrap();
            assert!(values.cov_grad.is_empty() && values.mean_grad.is_empty());
            for (p, &(a, b)) in pairs.iter().enumerate() {
                assert!(
                    (pp.cov[p] - cov[a * m + b]).abs() < 1e-12,
                    "{kind:?} pair {p}"
                );
                assert_eq!(values.cov[p], pp.cov[p]);
                if a == b {
                    continue;
                }
                // ∂Σ(a, b)/∂x_a and ∂Σ(a, b)/∂x_b by central differences of the joint covariance.
                let h = 1e-6;
                for (side, row) in [a, b].into_iter().enumerate() {
                    for k in 0..d {
                        let mut up = q.clone();
                        up[row * d + k] += h;
                        let mut down = q.clone();
                        down[row * d + k] -= h;
                        let cu = gp.posterior_covariance(&up).unwrap()[a * m + b];
                        let cd = gp.posterior_covariance(&down).unwrap()[a * m + b];
                        let num = (cu - cd) / (2.0 * h);
                        let ana = pp.cov_grad[p * 2 * d + side * d + k];
                        let tol = if kind == KernelKind::Matern12 {
                            1e-4
                        } else {
                            1e-6
                        };
                        assert!(
                            (num - ana).abs() < tol * (1.0 + num.abs()),
                            "{kind:?} n={n} pair {p} side {side} coordinate {k}: {ana} vs {num}"
                        );
                    }
                }
            }
        }
    }
    let gp = model(KernelKind::Matern52, 5, 2, 1);
    assert!(gp.posterior_pairs(&[0.1, 0.2], &[(0, 1)], false).is_err());
    assert!(gp.posterior_pairs(&[0.1, f64::NAN], &[], false).is_err());
}

/// The block path (matrix products, pooled workspaces) and the point path (matrix–vector
/// products) give the same posterior and gradients, and a model's reused workspaces carry
/// nothing from one call to the next: the same batch gives bit-identical results before and
/// after calls of other sizes, with and without gradients.
#[test]
fn block_and_point_gradients_agree_and_reused_workspaces_carry_nothing() {
    for kind in KINDS {
        let d = 5;
        let gp = model(kind, 60, d, 17);
        let mut rng = Xoshiro256PlusPlus::seed_from_u64(9);
        let q = random_points(&mut rng, 40, d);
        let block = gp.posterior(&q, true).unwrap();
        for j in 0..40 {
            let one = gp.posterior(&q[j * d..(j + 1) * d], true).unwrap();
            assert!((one.mean[0] - block.mean[j]).abs() < 1e-12);
            assert!((one.var[0] - block.var[j]).abs() < 1e-12);
            for k in 0..d {
                let (a, b) = (one.mean_grad[k], block.mean_grad[j * d + k]);
                assert!(
                    (a - b).abs() < 1e-10 * (1.0 + a.abs()),
                    "{kind:?} mean grad {a} vs {b}"
                );
                let (a, b) = (one.var_grad[k], block.var_grad[j * d + k]);
                assert!(
                    (a - b).abs() < 1e-10 * (1.0 + a.abs()),
                    "{kind:?} var grad {a} vs {b}"
                );
            }
        }
        let other = random_points(&mut rng, 300, d);
        gp.posterior(&other, false).unwrap();
        gp.posterior(&other[..8 * d], true).unwrap();
        gp.posterior(&other, true).unwrap();
        assert_eq!(gp.posterior(&q, true).unwrap(), block, "{kind:?}");
    }
}
