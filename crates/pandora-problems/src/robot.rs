//! Robot pushing (Wang & Jegelka 2017, as used by the budgeted-MSEI and PBGI papers) on the
//! `rapier2d-f64` physics engine.
//!
//! **World** (units: metres, seconds, kilograms; no gravity; time step 0.01 s): a rectangular
//! "hand" (density 0.1, contact friction 0.1) pushes objects (density 0.05, contact friction
//! 0.01) lying on a table. The table is modelled, as in the reference's Box2D friction joints, by
//! a top-down friction on every body: a linear impulse that opposes the body's velocity, at most
//! `max_force·dt` in norm (objects 5, hands 2), and an angular impulse that opposes its angular
//! velocity, at most `max_torque·dt` (2 for both). While a hand pushes, it receives the force
//! `m·(v_cmd − v)·30` and the torque `m·(ω_cmd − ω)·30` (the reference's controller, mass in both);
//! after its push steps it coasts, and the world runs 100 more steps.
//!
//! **Problems** (inputs `u ∈ [0,1]^d`, maximized; see `docs/problems.md`):
//! - [`Variant::Energy3`] (budgeted-MSEI paper): hand at `r = 10·u[0..2] − 5`, angle
//!   `atan(r_y/r_x)`, push steps `⌊10·(29·u[2] + 1)⌋`, command: speed 5 from the hand toward the
//!   object (a circle of radius 1 at the origin) plus fixed noise. Objective `−‖g − w‖` with `g`
//!   the goal drawn from the seed; cost `‖w‖ + ε` (the distance the object moved).
//! - [`Variant::Push4`] (PBGI paper): as above with speed 10 toward the origin, angle `2π·u[3]`
//!   (the reference's 6.28·u), target `(−4.4185, −4.3709)`; cost = duration `29·u[2] + 1`.
//! - [`Variant::Push14`] (PBGI paper): two hands, two objects (a box of half-extent 0.5 at (0, 2),
//!   a circle of radius 1 at (0, −2)), commands taken from `u`; objective
//!   `−(‖t₁ − o₁‖ + ‖t₂ − o₂‖)`; costs mean or max duration, or the distance the hands travelled.
//!
//! **Noise.** The reference adds `N(0, σ²)` noise to the commanded velocity after
//! `np.random.seed(0)`, so each evaluation uses the same draws: the first four standard normals of
//! numpy's legacy generator with seed 0, which are stored here ([`NUMPY_SEED0_NORMALS`]) so the
//! noise is exactly the reference's.

use std::sync::Mutex;

use rapier2d_f64::prelude::*;

use crate::error::ProblemError;

/// The first four standard normal draws of `numpy.random` (legacy `RandomState`) after
/// `np.random.seed(0)`; the reference draws its command noise from them.
pub const NUMPY_SEED0_NORMALS: [f64; 4] = [
    1.764052345967664,
    0.4001572083672233,
    0.9787379841057392,
    2.240893199201458,
];

/// Simulation time step (s), the reference's 100 Hz.
pub const DT: f64 = 0.01;
/// Steps simulated after the last push step ends.
pub const COAST_STEPS: usize = 100;
/// Controller gain ("force unit") of a rectangular hand.
pub const FORCE_UNIT: f64 = 30.0;
/// Constraint-solver iterations per step (Box2D's reference uses 10 velocity and 10 position
/// iterations; rapier's iterations are soft-constraint substeps).
pub const SOLVER_ITERATIONS: usize = 4;

/// The 4-D problem's angle scale: the reference writes `6.28·u` (not `2π·u`), kept as is.
#[allow(clippy::approx_constant)]
pub const REFERENCE_TWO_PI: f64 = 6.28;

/// Target of the 4-D problem and of the first object in the 14-D problem.
pub const TARGET1: [f64; 2] = [-4.4185, -4.3709];
/// Target of the second object in the 14-D problem.
pub const TARGET2: [f64; 2] = [-3.7641, -4.4742];

/// A body's shape.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Shape {
    /// A circle of this radius.
    Circle(f64),
    /// A rectangle with these half-extents (x, y) in the body frame.
    Box(f64, f64),
}

/// An object to be pushed.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct ObjectSpec {
    /// Its shape.
    pub shape: Shape,
    /// Its initial position.
    pub position: [f64; 2],
}

/// A hand (pusher) and its command.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct HandSpec {
    /// Half-extents of the rectangular hand.
    pub half_extents: (f64, f64),
    /// Initial position.
    pub position: [f64; 2],
    /// Initial angle (rad).
    pub angle: f64,
    /// Commanded linear velocity.
    pub velocity: [f64; 2],
    /// Commanded angular velocity.
    pub angular_velocity: f64,
    /// Number of steps during which the controller acts.
    pub steps: usize,
}

/// Final positions after a simulation.
#[derive(Debug, Clone, PartialEq)]
pub struct PushOutcome {
    /// Final object positions, in the order given.
    pub objects: Vec<[f64; 2]>,
    /// Final hand positions, in the order given.
    pub hands: Vec<[f64; 2]>,
}

const OBJECT_DENSITY: f64 = 0.05;
const HAND_DENSITY: f64 = 0.1;
/// Box2D mixes contact friction as `sqrt(f1·f2)`; rapier's `Multiply` rule with the square roots
/// of the coefficients gives exactly that.
const OBJECT_FRICTION: f64 = 0.01;
const HAND_FRICTION: f64 = 0.1;
const OBJECT_MAX_FORCE: f64 = 5.0;
const HAND_MAX_FORCE: f64 = 2.0;
const MAX_TORQUE: f64 = 2.0;

fn norm(v: [f64; 2]) -> f64 {
    v[0].hypot(v[1])
}

fn dist(a: [f64; 2], b: [f64; 2]) -> f64 {
    norm([a[0] - b[0], a[1] - b[1]])
}

/// One body's table friction (the Box2D friction joint solved in isolation): removes up to
/// `max_force·dt` of linear momentum and `max_torque·dt` of angular momentum.
fn table_friction(v: Vector, w: f64, m: f64, inertia: f64, max_force: f64) -> (Vector, f64) {
    let p = m * v.length();
    let lin = if p <= max_force * DT {
        Vector::ZERO
    } else {
        v * (1.0 - max_force * DT / p)
    };
    let l = inertia * w.abs();
    let ang = if l <= MAX_TORQUE * DT {
        0.0
    } else {
        w * (1.0 - MAX_TORQUE * DT / l)
    };
    (lin, ang)
}

/// Simulates the hands pushing the objects: each hand's controller acts for its `steps`, then
/// the world runs [`COAST_STEPS`] more steps. Deterministic (single-threaded rapier, fixed
/// insertion order). Non-finite inputs give non-finite positions, never a panic.
pub fn simulate(objects: &[ObjectSpec], hands: &[HandSpec]) -> PushOutcome {
    let finite = hands.iter().all(|h| {
        h.position.iter().chain(&h.velocity).all(|v| v.is_finite())
            && h.angle.is_finite()
            && h.angular_velocity.is_finite()
    });
    if !finite {
        return PushOutcome {
            objects: vec![[f64::NAN; 2]; objects.len()],
            hands: vec![[f64::NAN; 2]; hands.len()],
        };
    }
    let mut world = PhysicsWorld::new();
    world.gravity = Vector::ZERO;
    world.integration_parameters.dt = DT;
    world.integration_parameters.num_solver_iterations = SOLVER_ITERATIONS;
    // (handle, mass, inertia, max_force, command)
    let mut bodies = Vec::with_capacity(objects.len() + hands.len());
    for o in objects {
        let collider = match o.shape {
            Shape::Circle(r) => ColliderBuilder::ball(r),
            Shape::Box(hx, hy) => ColliderBuilder::cuboid(hx, hy),
        }
        .density(OBJECT_DENSITY)
        .friction(OBJECT_FRICTION.sqrt())
        .friction_combine_rule(CoefficientCombineRule::Multiply)
        .restitution(0.0);
        let (h, _) = world.insert(
            RigidBodyBuilder::dynamic().translation(Vector::new(o.position[0], o.position[1])),
            collider,
        );
        bodies.push((h, OBJECT_MAX_FORCE, None));
    }
    for hand in hands {
        let collider = ColliderBuilder::cuboid(hand.half_extents.0, hand.half_extents.1)
            .density(HAND_DENSITY)
            .friction(HAND_FRICTION.sqrt())
            .friction_combine_rule(CoefficientCombineRule::Multiply)
            .restitution(0.0);
        let (h, _) = world.insert(
            RigidBodyBuilder::dynamic()
                .translation(Vector::new(hand.position[0], hand.position[1]))
                .rotation(hand.angle),
            collider,
        );
        bodies.push((h, HAND_MAX_FORCE, Some(*hand)));
    }
    let total = hands.iter().map(|h| h.steps).max().unwrap_or(0) + COAST_STEPS;
    for t in 0..total {
        for &(h, max_force, hand) in &bodies {
            let rb = &mut world.bodies[h];
            let driven = hand.filter(|s| t < s.steps);
            if driven.is_none() && rb.is_sleeping() {
                continue;
            }
            let m = rb.mass();
            let inertia = rb.mass_properties().local_mprops.principal_inertia();
            let mut v = rb.linvel();
            let mut w = rb.angvel();
            if let Some(s) = driven {
                // Force m·(v_cmd − v)·k and torque m·(ω_cmd − ω)·30, integrated over one step.
                let cmd = Vector::new(s.velocity[0], s.velocity[1]);
                v += (cmd - v) * (FORCE_UNIT * DT);
                w += m * (s.angular_velocity - w) * FORCE_UNIT * DT / inertia;
            }
            let (v, w) = table_friction(v, w, m, inertia, max_force);
            let wake = driven.is_some();
            rb.set_linvel(v, wake);
            rb.set_angvel(w, wake);
        }
        world.step();
    }
    let pos = |h: RigidBodyHandle| {
        let p = world.bodies[h].translation();
        [p.x, p.y]
    };
    PushOutcome {
        objects: bodies[..objects.len()].iter().map(|b| pos(b.0)).collect(),
        hands: bodies[objects.len()..].iter().map(|b| pos(b.0)).collect(),
    }
}

/// Push steps for a duration, as the reference: `⌊10·duration⌋`.
fn push_steps(duration: f64) -> usize {
    (10.0 * duration).floor().max(0.0) as usize
}

/// Unit vector from `from` to `to`, or zero when they coincide (the reference divides by zero
/// there and produces NaN).
fn unit(from: [f64; 2], to: [f64; 2]) -> [f64; 2] {
    let d = [to[0] - from[0], to[1] - from[1]];
    let n = norm(d);
    if n > 0.0 {
        [d[0] / n, d[1] / n]
    } else {
        [0.0, 0.0]
    }
}

/// Which robot-pushing problem.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Variant {
    /// Energy-aware 3-D pushing (budgeted-MSEI paper).
    Energy3,
    /// 4-D pushing (PBGI paper).
    Push4,
    /// 14-D two-robot pushing (PBGI paper).
    Push14,
}

impl Variant {
    /// The input dimension.
    pub fn dim(self) -> usize {
        match self {
            Self::Energy3 => 3,
            Self::Push4 => 4,
            Self::Push14 => 14,
        }
    }
}

/// The native cost of a robot-pushing problem.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum RobotCost {
    /// `‖w_push‖ + epsilon` (3-D): the distance the object moved.
    ObjectDistance {
        /// Added constant ε keeping the cost positive.
        epsilon: f64,
    },
    /// The push duration `29·u[2] + 1` (4-D).
    Duration,
    /// `(dur₁ + dur₂)/2` (14-D).
    MeanDuration,
    /// `max(dur₁, dur₂)` (14-D).
    MaxDuration,
    /// `‖start₁ − hand₁‖ + ‖start₂ − hand₂‖ + 0.1` (14-D): the distance the hands travelled.
    HandDistance,
}

/// A robot-pushing problem instance: the variant, its goal(s) and its cost.
#[derive(Debug)]
pub struct RobotPush {
    variant: Variant,
    goals: Vec<[f64; 2]>,
    cost: RobotCost,
    /// The last simulated input and its outcome (eval and cost of one point share a simulation).
    cache: Mutex<Option<(Vec<f64>, PushOutcome)>>,
}

impl Clone for RobotPush {
    fn clone(&self) -> Self {
        Self {
            variant: self.variant,
            goals: self.goals.clone(),
            cost: self.cost,
            cache: Mutex::new(None),
        }
    }
}

/// The 3-D problem's goal for a goal seed: `g = 10·(U1, U2) − 5` with `U1, U2` the first two
/// uniforms of Xoshiro256++ seeded with `goal_seed` (the reference: `10·torch.rand(2) − 5` under
/// `torch.manual_seed(trial mod 20)`).
pub fn energy_goal(goal_seed: u64) -> [f64; 2] {
    use rand::{RngExt, SeedableRng};
    let mut rng = rand_xoshiro::Xoshiro256PlusPlus::seed_from_u64(goal_seed);
    let a: f64 = rng.random();
    let b: f64 = rng.random();
    [10.0 * a - 5.0, 10.0 * b - 5.0]
}

impl RobotPush {
    /// The energy-aware 3-D problem with goal [`energy_goal`]`(goal_seed)` and cost
    /// `‖w_push‖ + epsilon` (`epsilon > 0`).
    pub fn energy3(goal_seed: u64, epsilon: f64) -> Result<Self, ProblemError> {
        if !(epsilon > 0.0 && epsilon.is_finite()) {
            return Err(ProblemError(format!(
                "cost_epsilon must be positive and finite, got {epsilon}"
            )));
        }
        Ok(Self::with(
            Variant::Energy3,
            vec![energy_goal(goal_seed)],
            RobotCost::ObjectDistance { epsilon },
        ))
    }

    /// The 4-D problem (target [`TARGET1`], cost = duration).
    pub fn push4() -> Self {
        Self::with(Variant::Push4, vec![TARGET1], RobotCost::Duration)
    }

    /// The 14-D problem (targets [`TARGET1`], [`TARGET2`]) with cost `MeanDuration`,
    /// `MaxDuration` or `HandDistance`.
    pub fn push14(cost: RobotCost) -> Result<Self, ProblemError> {
        match cost {
            RobotCost::MeanDuration | RobotCost::MaxDuration | RobotCost::HandDistance => {
                Ok(Self::with(Variant::Push14, vec![TARGET1, TARGET2], cost))
            }
            other => Err(ProblemError(format!(
                "cost {other:?} is not a 14-D robot-pushing cost"
            ))),
        }
    }

    fn with(variant: Variant, goals: Vec<[f64; 2]>, cost: RobotCost) -> Self {
        Self {
            variant,
            goals,
            cost,
            cache: Mutex::new(None),
        }
    }

    /// The variant.
    pub fn variant(&self) -> Variant {
        self.variant
    }

    /// The goal positions of the objects.
    pub fn goals(&self) -> &[[f64; 2]] {
        &self.goals
    }

    /// The objects and hands (with their commands) that `u ∈ [0,1]^d` describes.
    pub fn scene(&self, u: &[f64]) -> (Vec<ObjectSpec>, Vec<HandSpec>) {
        let noise =
            |k: usize, sd: f64| [sd * NUMPY_SEED0_NORMALS[k], sd * NUMPY_SEED0_NORMALS[k + 1]];
        match self.variant {
            Variant::Energy3 | Variant::Push4 => {
                let r = [10.0 * u[0] - 5.0, 10.0 * u[1] - 5.0];
                let duration = 29.0 * u[2] + 1.0;
                let (angle, speed) = if self.variant == Variant::Energy3 {
                    let a = if r[0] == 0.0 && r[1] == 0.0 {
                        0.0
                    } else {
                        (r[1] / r[0]).atan()
                    };
                    (a, 5.0)
                } else {
                    (REFERENCE_TWO_PI * u[3], 10.0)
                };
                let dir = unit(r, [0.0, 0.0]);
                let e = noise(0, 0.1);
                let hand = HandSpec {
                    half_extents: (0.3, 1.0),
                    position: r,
                    angle,
                    velocity: [speed * dir[0] + e[0], speed * dir[1] + e[1]],
                    angular_velocity: 0.0,
                    steps: push_steps(duration),
                };
                let object = ObjectSpec {
                    shape: Shape::Circle(1.0),
                    position: [0.0, 0.0],
                };
                (vec![object], vec![hand])
            }
            Variant::Push14 => {
                let hand = |o: usize, k: usize, torque: f64| {
                    let e = noise(k, 0.01);
                    HandSpec {
                        half_extents: (1.0, 0.3),
                        position: [10.0 * u[o] - 5.0, 10.0 * u[o + 1] - 5.0],
                        velocity: [5.0 * u[o + 2] + e[0], 5.0 * u[o + 3] + e[1]],
                        steps: push_steps(29.0 * u[o + 4] + 1.0),
                        angle: 2.0 * std::f64::consts::PI * u[o + 5],
                        angular_velocity: torque,
                    }
                };
                let tau = 2.0 * std::f64::consts::PI;
                let hands = vec![hand(0, 0, tau * u[12]), hand(6, 2, tau * u[13])];
                let objects = vec![
                    ObjectSpec {
                        shape: Shape::Box(0.5, 0.5),
                        position: [0.0, 2.0],
                    },
                    ObjectSpec {
                        shape: Shape::Circle(1.0),
                        position: [0.0, -2.0],
                    },
                ];
                (objects, hands)
            }
        }
    }

    /// Simulates `u` (cached: the last input's outcome is reused).
    pub fn outcome(&self, u: &[f64]) -> PushOutcome {
        if let Ok(c) = self.cache.lock()
            && let Some((x, o)) = c.as_ref()
            && x.as_slice() == u
        {
            return o.clone();
        }
        let (objects, hands) = self.scene(u);
        let out = simulate(&objects, &hands);
        if let Ok(mut c) = self.cache.lock() {
            *c = Some((u.to_vec(), out.clone()));
        }
        out
    }

    /// The objective at `u ∈ [0,1]^d`: minus the summed distances of the objects to their goals.
    pub fn eval(&self, u: &[f64]) -> f64 {
        let o = self.outcome(u);
        -o.objects
            .iter()
            .zip(&self.goals)
            .map(|(p, g)| dist(*p, *g))
            .sum::<f64>()
    }

    /// The native cost at `u`.
    pub fn cost(&self, u: &[f64]) -> f64 {
        match self.cost {
            RobotCost::ObjectDistance { epsilon } => norm(self.outcome(u).objects[0]) + epsilon,
            RobotCost::Duration => 29.0 * u[2] + 1.0,
            RobotCost::MeanDuration => (29.0 * u[4] + 1.0 + 29.0 * u[10] + 1.0) / 2.0,
            RobotCost::MaxDuration => (29.0 * u[4] + 1.0).max(29.0 * u[10] + 1.0),
            RobotCost::HandDistance => {
                let (_, hands) = self.scene(u);
                let o = self.outcome(u);
                hands
                    .iter()
                    .zip(&o.hands)
                    .map(|(h, p)| dist(h.position, *p))
                    .sum::<f64>()
                    + 0.1
            }
        }
    }

    /// The cost and its gradient. Durations have closed-form gradients; simulated costs
    /// (`ObjectDistance`, `HandDistance`) use central differences with step 1e-4 (they are only
    /// piecewise smooth; policies should model them as unknown costs).
    pub fn cost_grad(&self, u: &[f64], grad: &mut [f64]) -> f64 {
        grad.fill(0.0);
        match self.cost {
            RobotCost::Duration => grad[2] = 29.0,
            RobotCost::MeanDuration => {
                grad[4] = 14.5;
                grad[10] = 14.5;
            }
            RobotCost::MaxDuration => {
                if u[4] >= u[10] {
                    grad[4] = 29.0;
                } else {
                    grad[10] = 29.0;
                }
            }
            RobotCost::ObjectDistance { .. } | RobotCost::HandDistance => {
                let mut z = u.to_vec();
                for i in 0..u.len() {
                    let h = 1e-4;
                    let lo = (u[i] - h).max(0.0);
                    let hi = (u[i] + h).min(1.0);
                    z[i] = hi;
                    let ch = self.cost(&z);
                    z[i] = lo;
                    let cl = self.cost(&z);
                    z[i] = u[i];
                    grad[i] = (ch - cl) / (hi - lo);
                }
            }
        }
        self.cost(u)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn circle_at_origin() -> ObjectSpec {
        ObjectSpec {
            shape: Shape::Circle(1.0),
            position: [0.0, 0.0],
        }
    }

    fn hand(position: [f64; 2], velocity: [f64; 2], steps: usize) -> HandSpec {
        HandSpec {
            half_extents: (0.3, 1.0),
            position,
            angle: 0.0,
            velocity,
            angular_velocity: 0.0,
            steps,
        }
    }

    /// A hand left of the object pushing toward +x moves the object along +x (and only along x:
    /// the scene is symmetric about the x axis).
    #[test]
    fn pushing_toward_the_object_moves_it_that_way() {
        let o = simulate(&[circle_at_origin()], &[hand([-3.0, 0.0], [5.0, 0.0], 100)]);
        let [x, y] = o.objects[0];
        assert!(x > 0.5, "object moved to {x}");
        assert!(y.abs() < 1e-9, "symmetric push drifted to y = {y}");
        // The hand ends in contact, behind the object: |hand − object| ≈ 0.3 + 1.
        assert!((x - o.hands[0][0] - 1.3).abs() < 0.05, "{o:?}");
        // The 3-D problem from eight directions: the object moves away from the hand's start.
        let p = RobotPush::energy3(0, 0.01).unwrap();
        for k in 0..8 {
            let a = k as f64 * std::f64::consts::PI / 4.0 + 0.1;
            let u = [0.5 + 0.35 * a.cos(), 0.5 + 0.35 * a.sin(), 0.5];
            let w = p.outcome(&u).objects[0];
            let along = -(w[0] * a.cos() + w[1] * a.sin());
            let across = (-w[0] * a.sin() + w[1] * a.cos()).abs();
            assert!(along > 1.0, "direction {k}: {w:?}");
            assert!(across < 0.3 * along, "direction {k}: {w:?}");
        }
    }

    /// With no push steps (or a hand that never reaches it) the object stays exactly where it
    /// was, so the objective is minus the initial distance to the goal.
    #[test]
    fn no_push_leaves_the_object_in_place() {
        let p = RobotPush::energy3(5, 0.01).unwrap();
        let g = p.goals()[0];
        let o = simulate(&[circle_at_origin()], &[hand([-3.0, 0.0], [5.0, 0.0], 0)]);
        assert_eq!(o.objects[0], [0.0, 0.0]);
        assert_eq!(-dist(o.objects[0], g), -norm(g));
        // The shortest 3-D push (1 s = 10 steps) from a corner does not reach the object.
        let u = [0.0, 0.0, 0.0];
        assert_eq!(p.outcome(&u).objects[0], [0.0, 0.0]);
        assert_eq!(p.eval(&u), -norm(g));
        assert_eq!(p.cost(&u), 0.01);
        // 14-D: hands in opposite corners commanding (almost) zero velocity: nothing moves.
        let q = RobotPush::push14(RobotCost::MeanDuration).unwrap();
        let mut u = [0.0; 14];
        u[6] = 1.0;
        u[7] = 1.0;
        let o = q.outcome(&u);
        assert_eq!(o.objects, vec![[0.0, 2.0], [0.0, -2.0]]);
        let expect = dist(TARGET1, [0.0, 2.0]) + dist(TARGET2, [0.0, -2.0]);
        assert_eq!(q.eval(&u), -expect);
    }

    /// The energy cost (distance the object moved) grows with the push duration; the 4-D and
    /// 14-D costs are the stated functions of the durations.
    #[test]
    fn costs_grow_with_push_duration() {
        let p = RobotPush::energy3(1, 0.01).unwrap();
        let costs: Vec<f64> = (0..=6)
            .map(|k| p.cost(&[0.15, 0.3, k as f64 / 6.0]))
            .collect();
        for w in costs.windows(2) {
            assert!(w[1] >= w[0] - 1e-9, "{costs:?}");
        }
        assert!(costs[6] > costs[0] + 3.0, "{costs:?}");
        let q = RobotPush::push4();
        assert_eq!(q.cost(&[0.3, 0.3, 0.5, 0.2]), 15.5);
        let mut g = [0.0; 4];
        q.cost_grad(&[0.3, 0.3, 0.5, 0.2], &mut g);
        assert_eq!(g, [0.0, 0.0, 29.0, 0.0]);
        let mut u = [0.5; 14];
        u[4] = 0.0;
        u[10] = 1.0;
        assert_eq!(
            RobotPush::push14(RobotCost::MeanDuration).unwrap().cost(&u),
            15.5
        );
        assert_eq!(
            RobotPush::push14(RobotCost::MaxDuration).unwrap().cost(&u),
            30.0
        );
        // The hands' travelled distance grows with their duration too.
        let d = RobotPush::push14(RobotCost::HandDistance).unwrap();
        u[10] = 0.0;
        let short = d.cost(&u);
        u[4] = 1.0;
        u[10] = 1.0;
        let long = d.cost(&u);
        assert!(short >= 0.1 && long > short + 1.0, "{short} {long}");
        assert!(RobotPush::push14(RobotCost::Duration).is_err());
        assert!(RobotPush::energy3(0, 0.0).is_err());
    }

    /// Same input, same bits, on fresh instances (no cache) and after other evaluations.
    #[test]
    fn evaluations_are_bit_identical() {
        use rand::{RngExt, SeedableRng};
        let mut rng = rand_xoshiro::Xoshiro256PlusPlus::seed_from_u64(11);
        let make = |v: Variant| match v {
            Variant::Energy3 => RobotPush::energy3(2, 0.01).unwrap(),
            Variant::Push4 => RobotPush::push4(),
            Variant::Push14 => RobotPush::push14(RobotCost::HandDistance).unwrap(),
        };
        for v in [Variant::Energy3, Variant::Push4, Variant::Push14] {
            let a = make(v);
            let n = if v == Variant::Push14 { 4 } else { 8 };
            let xs: Vec<Vec<f64>> = (0..n)
                .map(|_| (0..v.dim()).map(|_| rng.random::<f64>()).collect())
                .collect();
            let first: Vec<(u64, u64)> = xs
                .iter()
                .map(|x| (a.eval(x).to_bits(), a.cost(x).to_bits()))
                .collect();
            let b = make(v);
            for (x, f) in xs.iter().zip(&first).rev() {
                assert_eq!(
                    (b.eval(x).to_bits(), b.cost(x).to_bits()),
                    *f,
                    "{v:?} {x:?}"
                );
                assert!(f64::from_bits(f.0).is_finite() && f64::from_bits(f.1) > 0.0);
                assert!(f64::from_bits(f.1).is_finite());
            }
        }
    }

    /// Random inputs, the box corners and the degenerate centre give finite values.
    #[test]
    fn results_are_finite_everywhere() {
        use rand::{RngExt, SeedableRng};
        let mut rng = rand_xoshiro::Xoshiro256PlusPlus::seed_from_u64(5);
        let p3 = RobotPush::energy3(0, 0.01).unwrap();
        let p4 = RobotPush::push4();
        for _ in 0..20 {
            let u: Vec<f64> = (0..4).map(|_| rng.random::<f64>()).collect();
            for (p, x) in [(&p3, &u[..3]), (&p4, &u[..])] {
                let (f, c) = (p.eval(x), p.cost(x));
                assert!(
                    f.is_finite() && f <= 0.0 && c.is_finite() && c > 0.0,
                    "{x:?}"
                );
            }
        }
        for x in [
            [0.5, 0.5, 0.5],
            [0.5, 1.0, 1.0],
            [1.0, 0.5, 0.0],
            [1.0, 1.0, 1.0],
        ] {
            assert!(p3.eval(&x).is_finite() && p3.cost(&x).is_finite(), "{x:?}");
        }
        let p14 = RobotPush::push14(RobotCost::HandDistance).unwrap();
        for _ in 0..4 {
            let u: Vec<f64> = (0..14).map(|_| rng.random::<f64>()).collect();
            assert!(
                p14.eval(&u).is_finite() && p14.cost(&u).is_finite(),
                "{u:?}"
            );
        }
        // Non-finite commands give NaN, not a panic.
        let o = simulate(
            &[circle_at_origin()],
            &[hand([f64::NAN, 0.0], [1.0, 0.0], 5)],
        );
        assert!(o.objects[0][0].is_nan());
    }

    /// The noise is the reference's: `σ·z` with numpy's seed-0 normals (0.1 for one robot).
    #[test]
    fn commands_follow_the_reference_mapping() {
        let p = RobotPush::energy3(0, 0.01).unwrap();
        let (_, h) = p.scene(&[0.2, 0.5, 0.3]);
        assert_eq!(h[0].position, [-3.0, 0.0]);
        assert_eq!(h[0].steps, 97); // ⌊10·(29·0.3 + 1)⌋ = ⌊97.0⌋
        assert_eq!(
            h[0].velocity,
            [
                5.0 + 0.1 * NUMPY_SEED0_NORMALS[0],
                0.1 * NUMPY_SEED0_NORMALS[1]
            ]
        );
        assert!(h[0].angle.abs() < 1e-15);
        let q = RobotPush::push4();
        let (_, h) = q.scene(&[1.0, 0.5, 0.0, 0.5]);
        assert_eq!(h[0].velocity[0], -10.0 + 0.1 * NUMPY_SEED0_NORMALS[0]);
        assert_eq!(h[0].angle, 0.5 * REFERENCE_TWO_PI);
        assert_eq!(h[0].steps, 10);
        let r = RobotPush::push14(RobotCost::MeanDuration).unwrap();
        let mut u = [0.5; 14];
        u[2] = 1.0;
        let (o, h) = r.scene(&u);
        assert_eq!(o.len(), 2);
        assert_eq!(
            h[0].velocity,
            [
                5.0 + 0.01 * NUMPY_SEED0_NORMALS[0],
                2.5 + 0.01 * NUMPY_SEED0_NORMALS[1]
            ]
        );
        assert_eq!(
            h[1].velocity,
            [
                2.5 + 0.01 * NUMPY_SEED0_NORMALS[2],
                2.5 + 0.01 * NUMPY_SEED0_NORMALS[3]
            ]
        );
        assert_eq!(h[1].angular_velocity, std::f64::consts::PI);
        // Goals cycle with the seed like the reference's `trial mod 20` through the registry.
        assert_ne!(energy_goal(0), energy_goal(1));
        assert!(energy_goal(7).iter().all(|v| (-5.0..=5.0).contains(v)));
    }

    /// Evaluation time (not asserted): median µs per `eval` (one simulation) over random inputs.
    /// Run with `cargo test --release -p pandora-problems --lib robot::tests::timing -- --ignored
    /// --nocapture`.
    #[test]
    #[ignore]
    fn timing() {
        use rand::{RngExt, SeedableRng};
        let mut rng = rand_xoshiro::Xoshiro256PlusPlus::seed_from_u64(1);
        for (name, p, n) in [
            ("robot_push_3d", RobotPush::energy3(0, 0.01).unwrap(), 3),
            ("robot_push_4d", RobotPush::push4(), 4),
            (
                "robot_push_14d",
                RobotPush::push14(RobotCost::MeanDuration).unwrap(),
                14,
            ),
        ] {
            let mut t: Vec<f64> = (0..200)
                .map(|_| {
                    let u: Vec<f64> = (0..n).map(|_| rng.random::<f64>()).collect();
                    let s = std::time::Instant::now();
                    std::hint::black_box(p.eval(&u));
                    s.elapsed().as_secs_f64() * 1e6
                })
                .collect();
            t.sort_by(f64::total_cmp);
            println!(
                "{name}: median {:.0} µs, quartiles {:.0}–{:.0} µs",
                t[100], t[50], t[150]
            );
        }
    }
}
