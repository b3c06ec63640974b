//! Lunar Lander (the PBGI paper's d = 12 problem): OpenAI gym's discrete `LunarLander-v2`
//! environment on the `rapier2d-f64` physics engine, flown by the 12-weight heuristic controller.
//!
//! **World** (gym's units: one metre is [`SCALE`] = 30 pixels of the 600×400 viewport, so the
//! world is 20 m × 13.3 m; gravity −10 m/s²; [`FPS`] = 50 steps per second). The terrain is 11
//! points 2 m apart whose heights are drawn uniformly in `[0, H/2]` and smoothed as gym does
//! (`0.33·(h[i−1] + h[i] + h[i+1])`, the first point wrapping to a twelfth draw), with the five
//! central heights set to the helipad height `H/4`; it is a set of static segments plus a floor
//! segment at `y = 0`. The lander is gym's six-vertex polygon ([`LANDER_POLY`], density 5,
//! friction 0.1, restitution 0) starting at the top centre; two legs (boxes of half-extents
//! [`LEG_W`]×[`LEG_H`] pixels, density 1) hang on revolute joints with limits and motors
//! (speed ±0.3 rad/s, torque [`LEG_SPRING_TORQUE`]) that act as springs. At reset the lander
//! receives a random force (each component uniform in ±[`INITIAL_RANDOM`] N) during the first
//! step. Actions ([`Action`]) fire the main engine or a side engine as impulses at gym's offset
//! points with gym's random dispersion.
//!
//! **Observation** (8-D, [`LunarLander::state`]): position relative to the helipad centre
//! (normalized by half the viewport), velocity (scaled as gym), angle, `20·ω/FPS`, and the two
//! legs' ground contacts (0 or 1). **Reward**: the change of the shaping
//! `−100·‖(s₀, s₁)‖ − 100·‖(s₂, s₃)‖ − 100·|s₄| + 10·s₆ + 10·s₇` ([`shaping`]), minus 0.3 per
//! main-engine frame and 0.03 per side-engine frame; the episode ends with reward −100 when the
//! lander's body touches the ground or leaves the screen sideways (`|s₀| ≥ 1`), and with +100
//! when the lander comes to rest (Box2D's "asleep", emulated: see below).
//!
//! **Problem** ([`LunarLanderProblem`]): the weights `w = x ∈ [0,1]^12` of the heuristic
//! controller ([`heuristic_action`]) are flown on 50 episodes (environment seeds 0..49, each cut
//! at 5000 steps); the objective is the mean total reward and the cost is the mean number of
//! steps divided by [`COST_DIVISOR`] = 16.
//!
//! **Emulating Box2D with rapier** (each choice is a named constant or documented below):
//! - the legs hang on rapier *multibody* (reduced-coordinate) revolute joints. A leg (0.07 kg)
//!   is 70 times lighter than the lander (4.8 kg); with rapier's impulse joints the iterative
//!   solver cannot transmit the lander's weight through a leg standing on the ground (the legs
//!   fold toward their far limit until the hull lies on the ground; 8 substeps of 4 iterations
//!   or one substep of 128 iterations do not help, about 1000 iterations per step are needed),
//!   where gym's Box2D, with 180 velocity iterations, holds the legs near their near limit.
//!   The multibody joint is exact, so only the motor, limit and contact rows
//!   are iterated ([`SOLVER_ITERATIONS`]);
//! - one substep per step ([`SUBSTEPS`]): Box2D's integration (`v += dt·(g + F/m)`, then
//!   `x += dt·v`). Engine impulses are applied as the force `impulse·FPS` during the step (a
//!   multibody link's velocity cannot be changed directly), which with one substep is the same
//!   velocity change as Box2D's impulse before the step; likewise the initial force;
//! - every collider gets a contact skin of [`POLYGON_RADIUS`] (Box2D's polygon/edge radius), so
//!   bodies rest about as far from the ground as in Box2D; a body "touches" the ground (Box2D's
//!   `BeginContact`/`EndContact`) while its distance to a ground segment, computed after each
//!   step, is at most [`TOUCH_DISTANCE`]; contact manifolds are recomputed every step (rapier's
//!   contact recycling is off), as in Box2D;
//! - Box2D stops a body hitting the ground within the step (time of impact); here rapier's
//!   speculative "soft CCD" contacts do ([`SOFT_CCD_PREDICTION`]), so fast legs do not sink
//!   into the ground before their contact is solved;
//! - contact friction mixes as Box2D's `sqrt(f₁·f₂)` (rapier's `Multiply` rule on square roots);
//! - "asleep" is Box2D's island rule: the lander and both legs have had `|v| ≤ 0.01 m/s` and
//!   `|ω| ≤ 2°/s` for [`STEPS_TO_SLEEP`] consecutive steps (rapier's own sleeping is disabled on
//!   these bodies);
//! - the legs start in the pose Box2D's position solver gives them during the first step (gym
//!   creates them violating their joints: see [`LunarLander::with_initial_random`]);
//! - the angle is unwrapped (Box2D's body angle is continuous, rapier's is in (−π, π]).
//!
//! The episode generator is Xoshiro256++ seeded with the episode seed (numpy's generator cannot
//! be reproduced), so the terrains, initial forces and engine dispersions differ from gym's for
//! the same seed; they have the same distributions. `docs/problems.md` lists every difference.

use std::sync::Mutex;

use rand::{RngExt, SeedableRng};
use rand_xoshiro::Xoshiro256PlusPlus;
use rapier2d_f64::prelude::*;
use rayon::prelude::*;

use crate::error::ProblemError;

/// Simulation steps per second (gym's `FPS`); the time step is `1/FPS`.
pub const FPS: f64 = 50.0;
/// Pixels per metre (gym's `SCALE`): every length constant below in pixels is divided by it.
pub const SCALE: f64 = 30.0;
/// Vertical gravity (m/s²), gym's `b2World(gravity=(0, -10))`.
pub const GRAVITY: f64 = -10.0;
/// Viewport width in pixels; the world is `VIEWPORT_W / SCALE` = 20 m wide.
pub const VIEWPORT_W: f64 = 600.0;
/// Viewport height in pixels; the world is `VIEWPORT_H / SCALE` ≈ 13.3 m high.
pub const VIEWPORT_H: f64 = 400.0;
/// Main-engine power: the impulse is 13 times the (dispersed) engine offset.
pub const MAIN_ENGINE_POWER: f64 = 13.0;
/// Side-engine power: the impulse is 0.6 times the (dispersed) engine offset.
pub const SIDE_ENGINE_POWER: f64 = 0.6;
/// Bound (N) of each component of the random force applied to the lander at reset.
pub const INITIAL_RANDOM: f64 = 1000.0;
/// The lander's hull in pixels (counter-clockwise), relative to the body origin.
pub const LANDER_POLY: [[f64; 2]; 6] = [
    [-14.0, 17.0],
    [-17.0, 0.0],
    [-17.0, -10.0],
    [17.0, -10.0],
    [17.0, 0.0],
    [14.0, 17.0],
];
/// Horizontal offset (pixels) of a leg's joint anchor from the leg's centre, in the leg's frame
/// (gym also creates each leg this far to the side of the lander's origin).
pub const LEG_AWAY: f64 = 20.0;
/// Vertical distance (pixels) of a leg's joint anchor above the leg's centre; also the height of
/// the lander's origin above the helipad in the observation's `s₁ = 0`.
pub const LEG_DOWN: f64 = 18.0;
/// Half-width of a leg (pixels).
pub const LEG_W: f64 = 2.0;
/// Half-height of a leg (pixels).
pub const LEG_H: f64 = 8.0;
/// Maximal torque (N·m) of a leg's joint motor.
pub const LEG_SPRING_TORQUE: f64 = 40.0;
/// Height (pixels) of the side engines above the lander's origin.
pub const SIDE_ENGINE_HEIGHT: f64 = 14.0;
/// Horizontal offset (pixels) of the side engines from the lander's origin.
pub const SIDE_ENGINE_AWAY: f64 = 12.0;
/// Distance (pixels) of the main engine below the lander's origin, along its axis.
pub const MAIN_ENGINE_OFFSET: f64 = 4.0;
/// Offset (pixels) of the side engines' impulse point along the lander's axis, written `17` in
/// gym's code (subtracted as `tip·17/SCALE` in x only, as gym does).
pub const SIDE_ENGINE_TIP_OFFSET: f64 = 17.0;
/// Number of terrain points.
pub const CHUNKS: usize = 11;
/// Reward charged per frame of main engine.
pub const MAIN_ENGINE_FUEL: f64 = 0.30;
/// Reward charged per frame of side engine.
pub const SIDE_ENGINE_FUEL: f64 = 0.03;
/// Magnitude of the terminal reward: −100 for a crash or leaving the screen, +100 at rest.
pub const TERMINAL_REWARD: f64 = 100.0;

/// Box2D's polygon radius (`b2_polygonRadius = 2·b2_linearSlop` = 0.01 m): the skin around every
/// polygon and edge. Given to every collider as rapier's contact skin.
pub const POLYGON_RADIUS: f64 = 0.01;
/// Box2D's `b2_linearSlop` (m): the penetration its solver tolerates.
pub const LINEAR_SLOP: f64 = 0.005;
/// Distance between two shapes' cores up to which they touch. Box2D creates contact points while
/// the cores are within the two skins (`2·b2_polygonRadius`) and rests bodies a linear slop
/// inside that; rapier rests bodies about at the skins, so the band is shifted by one linear
/// slop. It is tested on the poses at the end of each step: Box2D reports an impact in the step
/// where it happens (its time-of-impact solver updates the contact), and a slow approach at the
/// next step (when the contact is next updated); here both are reported in the step where they
/// happen.
pub const TOUCH_DISTANCE: f64 = 2.0 * POLYGON_RADIUS + LINEAR_SLOP;
/// rapier's "soft CCD" margin (m) on the lander and legs: contacts are predicted up to the
/// distance the bodies move in a step (at most this), so a fast body stops at the ground within
/// the step instead of sinking into it, as Box2D's time-of-impact solver stops it.
pub const SOFT_CCD_PREDICTION: f64 = 1.0;
/// Box2D's `b2_linearSleepTolerance` (m/s).
pub const LINEAR_SLEEP_TOLERANCE: f64 = 0.01;
/// Box2D's `b2_angularSleepTolerance` (2°/s, in rad/s).
pub const ANGULAR_SLEEP_TOLERANCE: f64 = 2.0 / 180.0 * std::f64::consts::PI;
/// Consecutive resting steps after which the lander's island sleeps: Box2D's
/// `b2_timeToSleep` = 0.5 s, reached (accumulating the f32 step 0.02) at the 25th step.
pub const STEPS_TO_SLEEP: usize = 25;
/// rapier substeps per step: one, so that integration is Box2D's symplectic Euler
/// (`v += dt·(g + F/m)`, then `x += dt·v`) and an engine impulse applied as the force
/// `impulse·FPS` during the step changes the velocity exactly as Box2D's `ApplyLinearImpulse`.
pub const SUBSTEPS: usize = 1;
/// rapier's constraint-solver iterations in the (single) substep. gym asks Box2D for 180 velocity
/// and 60 position iterations. With the legs on multibody joints, 16 iterations leave a landed
/// lander jittering (it rarely falls asleep), and from 48 on the mean episode length of the gym
/// heuristic stops changing (see `docs/problems.md` for the measured sensitivity).
pub const SOLVER_ITERATIONS: usize = 48;
/// Damping factor of rapier's velocity motor on the leg joints: large, so that the motor is the
/// hard velocity constraint of Box2D's joint motor (bounded by [`LEG_SPRING_TORQUE`]).
pub const MOTOR_DAMPING: f64 = 1.0e6;

/// Episodes per evaluation (environment seeds `0..episodes`).
pub const DEFAULT_EPISODES: usize = 50;
/// Step cap of an episode.
pub const DEFAULT_MAX_STEPS: usize = 5000;
/// The cost is the mean number of steps divided by this.
pub const COST_DIVISOR: f64 = 16.0;
/// gym's `heuristic()` as weights of [`heuristic_action`]: angle target `0.5·s₀ + 1.0·s₂`
/// clipped to ±0.4, hover target `0.55·|s₀|`, angle gains 0.5 and 1.0, hover gains 0.5 and 0.5,
/// after contact angle 0 and hover gain 0.5, thresholds 0.05 and 0.05.
pub const GYM_HEURISTIC_WEIGHTS: [f64; 12] = [
    0.5, 1.0, 0.4, 0.55, 0.5, 1.0, 0.5, 0.5, 0.0, 0.5, 0.05, 0.05,
];

/// Friction of the lander's hull.
const LANDER_FRICTION: f64 = 0.1;
/// Density of the lander's hull (kg/m²).
const LANDER_DENSITY: f64 = 5.0;
/// Friction of a leg: gym does not set it, so Box2D's fixture default 0.2 applies.
const LEG_FRICTION: f64 = 0.2;
/// Density of a leg (kg/m²).
const LEG_DENSITY: f64 = 1.0;
/// Friction of the terrain segments.
const TERRAIN_FRICTION: f64 = 0.1;
/// Friction of the floor segment at `y = 0` (Box2D's default: gym does not set it).
const FLOOR_FRICTION: f64 = 0.2;
/// Speed (rad/s) of a leg's motor: `0.3·i` for the leg on side `i = ±1`.
const LEG_MOTOR_SPEED: f64 = 0.3;
/// Joint-angle limit of a leg nearer to the hanging pose (rad; sign `−i`).
const LEG_LIMIT_NEAR: f64 = 0.4;
/// Joint-angle limit of a leg nearer to the folded pose (rad; sign `−i`).
const LEG_LIMIT_FAR: f64 = 0.9;
/// A collider with Box2D's contact conventions: friction mixed as `sqrt(f₁·f₂)` (rapier's
/// `Multiply` rule on square roots), no restitution, a [`POLYGON_RADIUS`] skin, and collisions
/// only between `group` and `filter`.
fn box2d_contacts(
    b: ColliderBuilder,
    friction: f64,
    group: Group,
    filter: Group,
) -> ColliderBuilder {
    b.friction(friction.sqrt())
        .friction_combine_rule(CoefficientCombineRule::Multiply)
        .restitution(0.0)
        .contact_skin(POLYGON_RADIUS)
        .collision_groups(InteractionGroups::new(
            group,
            filter,
            InteractionTestMode::And,
        ))
}

/// Collision group of the terrain.
const GROUND_GROUP: Group = Group::GROUP_1;
/// Collision group of the lander's hull (collides with the ground only).
const LANDER_GROUP: Group = Group::GROUP_2;
/// Collision group of the legs (collide with the ground only).
const LEG_GROUP: Group = Group::GROUP_3;

/// World width in metres.
fn world_w() -> f64 {
    VIEWPORT_W / SCALE
}

/// World height in metres.
fn world_h() -> f64 {
    VIEWPORT_H / SCALE
}

/// A draw from `U[low, high)` as numpy's `uniform`: `low + (high − low)·u`.
fn uniform(rng: &mut Xoshiro256PlusPlus, low: f64, high: f64) -> f64 {
    let u: f64 = rng.random();
    low + (high - low) * u
}

/// A discrete action of `LunarLander-v2`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Action {
    /// 0: do nothing.
    Noop,
    /// 1: fire the left orientation engine (turns the lander counter-clockwise).
    FireLeft,
    /// 2: fire the main engine.
    FireMain,
    /// 3: fire the right orientation engine (turns the lander clockwise).
    FireRight,
}

impl Action {
    /// gym's action index (0–3).
    pub fn index(self) -> usize {
        match self {
            Self::Noop => 0,
            Self::FireLeft => 1,
            Self::FireMain => 2,
            Self::FireRight => 3,
        }
    }
}

/// The 12-weight heuristic controller of the PBGI/TuRBO Lunar Lander problem (gym's
/// `heuristic()` with its constants replaced by `w`):
///
/// ```text
/// angle_target = clip(s₀·w₀ + s₂·w₁, ±w₂)        hover_target = w₃·|s₀|
/// angle_todo   = (angle_target − s₄)·w₄ − s₅·w₅   hover_todo   = (hover_target − s₁)·w₆ − s₃·w₇
/// if a leg touches (s₆ or s₇):  angle_todo = w₈,  hover_todo = −s₃·w₉
/// main engine   if hover_todo > |angle_todo| and hover_todo > w₁₀
/// else right    if angle_todo < −w₁₁
/// else left     if angle_todo > w₁₁
/// else nothing
/// ```
///
/// The clip is the reference's two sequential comparisons (upper bound first), and the leg flags
/// are tested as `≠ 0` (Python's truthiness).
pub fn heuristic_action(s: &[f64; 8], w: &[f64; 12]) -> Action {
    let mut angle_targ = s[0] * w[0] + s[2] * w[1];
    if angle_targ > w[2] {
        angle_targ = w[2];
    }
    if angle_targ < -w[2] {
        angle_targ = -w[2];
    }
    let hover_targ = w[3] * s[0].abs();
    let mut angle_todo = (angle_targ - s[4]) * w[4] - s[5] * w[5];
    let mut hover_todo = (hover_targ - s[1]) * w[6] - s[3] * w[7];
    if s[6] != 0.0 || s[7] != 0.0 {
        angle_todo = w[8];
        hover_todo = -s[3] * w[9];
    }
    if hover_todo > angle_todo.abs() && hover_todo > w[10] {
        Action::FireMain
    } else if angle_todo < -w[11] {
        Action::FireRight
    } else if angle_todo > w[11] {
        Action::FireLeft
    } else {
        Action::Noop
    }
}

/// gym's shaping potential of an observation:
/// `−100·‖(s₀, s₁)‖ − 100·‖(s₂, s₃)‖ − 100·|s₄| + 10·s₆ + 10·s₇`.
pub fn shaping(s: &[f64; 8]) -> f64 {
    -100.0 * (s[0] * s[0] + s[1] * s[1]).sqrt()
        - 100.0 * (s[2] * s[2] + s[3] * s[3]).sqrt()
        - 100.0 * s[4].abs()
        + 10.0 * s[6]
        + 10.0 * s[7]
}

/// What one environment step returns.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Step {
    /// The observation after the step.
    pub state: [f64; 8],
    /// The step's reward.
    pub reward: f64,
    /// Whether the episode ended (crash, out of the screen, or at rest).
    pub terminated: bool,
}

/// The discrete `LunarLander-v2` environment, reset with a seed (one episode).
pub struct LunarLander {
    world: PhysicsWorld,
    lander: RigidBodyHandle,
    legs: [RigidBodyHandle; 2],
    lander_collider: ColliderHandle,
    leg_colliders: [ColliderHandle; 2],
    ground_colliders: Vec<ColliderHandle>,
    rng: Xoshiro256PlusPlus,
    terrain: Vec<[f64; 2]>,
    helipad_y: f64,
    initial_force: [f64; 2],
    /// Box2D's continuous body angle (rapier's is wrapped into (−π, π]).
    angle: f64,
    /// rapier's wrapped angle at the last step, to unwrap the next one.
    wrapped_angle: f64,
    /// Consecutive steps in which the lander and both legs were below the sleep tolerances.
    resting_steps: usize,
    game_over: bool,
    leg_contact: [bool; 2],
    prev_shaping: Option<f64>,
    state: [f64; 8],
}

impl std::fmt::Debug for LunarLander {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LunarLander")
            .field("state", &self.state)
            .field("initial_force", &self.initial_force)
            .field("game_over", &self.game_over)
            .field("resting_steps", &self.resting_steps)
            .finish_non_exhaustive()
    }
}

impl LunarLander {
    /// gym's `reset(seed)`: a new terrain and lander with the initial random force, followed by
    /// one no-op step (as gym's `reset` does); [`LunarLander::state`] is the initial observation.
    pub fn new(seed: u64) -> Self {
        Self::with_initial_random(seed, INITIAL_RANDOM)
    }

    /// As [`LunarLander::new`], with the initial force's components drawn uniformly in
    /// `±initial_random` instead of ±[`INITIAL_RANDOM`] (0 disables the force; the generator
    /// draws the same numbers either way, so the terrain and dispersions do not change; a
    /// non-finite value makes the simulation non-finite, it does not panic).
    ///
    /// The legs are created in the pose Box2D reaches during gym's first step: gym creates each
    /// leg level with the lander, tilted by `0.05·i`, which violates both its joint's anchor
    /// (by 0.6 m) and its angle limits; Box2D's position solver (60 iterations, full correction
    /// for joints) snaps it during the first step to the nearer limit `∓0.4` rad with coincident
    /// anchors, without changing velocities. A rapier multibody joint cannot start violated,
    /// so that snapped pose is built directly.
    pub fn with_initial_random(seed: u64, initial_random: f64) -> Self {
        let mut rng = Xoshiro256PlusPlus::seed_from_u64(seed);
        let (w, h) = (world_w(), world_h());
        // Terrain, as gym: CHUNKS + 1 heights, the helipad flattened, smoothed with wrap-around
        // at the first point (Python's `height[-1]`).
        let mut height = [0.0; CHUNKS + 1];
        for v in &mut height {
            *v = uniform(&mut rng, 0.0, h / 2.0);
        }
        let helipad_y = h / 4.0;
        for v in &mut height[CHUNKS / 2 - 2..=CHUNKS / 2 + 2] {
            *v = helipad_y;
        }
        let terrain: Vec<[f64; 2]> = (0..CHUNKS)
            .map(|i| {
                let prev = if i == 0 { CHUNKS } else { i - 1 };
                let x = w / (CHUNKS - 1) as f64 * i as f64;
                [x, 0.33 * (height[prev] + height[i] + height[i + 1])]
            })
            .collect();

        let mut world = PhysicsWorld::new();
        world.gravity = Vector::new(0.0, GRAVITY);
        world.integration_parameters.dt = 1.0 / FPS;
        world.integration_parameters.num_solver_iterations = SUBSTEPS;
        world.integration_parameters.num_internal_pgs_iterations = SOLVER_ITERATIONS;
        // Box2D recomputes every contact manifold at every step; rapier's recycling would keep a
        // pair's manifold while it moves less than 5 cm.
        world.integration_parameters.contact_recycling = false;
        let all = Group::ALL;
        let ground = world.insert_body(RigidBodyBuilder::fixed());
        let segment = |a: [f64; 2], b: [f64; 2], friction: f64| {
            box2d_contacts(
                ColliderBuilder::segment(Vector::new(a[0], a[1]), Vector::new(b[0], b[1])),
                friction,
                GROUND_GROUP,
                all,
            )
        };
        let mut ground_colliders = vec![
            world.insert_collider(segment([0.0, 0.0], [w, 0.0], FLOOR_FRICTION), Some(ground)),
        ];
        for p in terrain.windows(2) {
            ground_colliders
                .push(world.insert_collider(segment(p[0], p[1], TERRAIN_FRICTION), Some(ground)));
        }

        let start = Vector::new(w / 2.0, h);
        let hull: Vec<Vector> = LANDER_POLY
            .iter()
            .map(|p| Vector::new(p[0] / SCALE, p[1] / SCALE))
            .collect();
        let hull = box2d_contacts(
            ColliderBuilder::convex_polyline(hull).expect("gym's lander polygon is convex"),
            LANDER_FRICTION,
            LANDER_GROUP,
            GROUND_GROUP,
        )
        .density(LANDER_DENSITY);
        let body = |p: Vector, angle: f64| {
            RigidBodyBuilder::dynamic()
                .translation(p)
                .rotation(angle)
                .can_sleep(false)
                .soft_ccd_prediction(SOFT_CCD_PREDICTION)
        };
        let (lander, lander_collider) = world.insert(body(start, 0.0), hull);
        let initial_force = [
            uniform(&mut rng, -initial_random, initial_random),
            uniform(&mut rng, -initial_random, initial_random),
        ];

        let mut legs = [lander; 2];
        let mut leg_colliders = [lander_collider; 2];
        for (k, i) in [-1.0f64, 1.0].into_iter().enumerate() {
            let angle = -i * LEG_LIMIT_NEAR;
            let anchor = Vector::new(i * LEG_AWAY / SCALE, LEG_DOWN / SCALE);
            // Leg centre such that its anchor, rotated by the leg's angle, meets the lander's.
            let (sin, cos) = angle.sin_cos();
            let rotated = Vector::new(
                anchor.x * cos - anchor.y * sin,
                anchor.x * sin + anchor.y * cos,
            );
            let leg = box2d_contacts(
                ColliderBuilder::cuboid(LEG_W / SCALE, LEG_H / SCALE),
                LEG_FRICTION,
                LEG_GROUP,
                GROUND_GROUP,
            )
            .density(LEG_DENSITY);
            let (handle, collider) = world.insert(body(start - rotated, angle), leg);
            // gym's joint angle (leg angle − lander angle) is limited to [0.4, 0.9] for i = −1
            // and [−0.9, −0.4] for i = +1. A multibody joint's coordinate starts at 0, so the
            // joint frame on the lander is rotated by the starting angle and the limits are
            // measured from it.
            let limits = if i < 0.0 {
                [LEG_LIMIT_NEAR, LEG_LIMIT_FAR]
            } else {
                [-LEG_LIMIT_FAR, -LEG_LIMIT_NEAR]
            };
            let mut joint: GenericJoint = RevoluteJointBuilder::new()
                .local_anchor2(anchor)
                .limits([limits[0] - angle, limits[1] - angle])
                .motor_velocity(LEG_MOTOR_SPEED * i, MOTOR_DAMPING)
                .motor_max_force(LEG_SPRING_TORQUE)
                .contacts_enabled(false)
                .build()
                .into();
            joint.local_frame1 = Pose::new(Vector::ZERO, angle);
            world
                .insert_multibody_joint(lander, handle, joint)
                .expect("two fresh bodies always form a valid multibody joint");
            legs[k] = handle;
            leg_colliders[k] = collider;
        }
        // Box2D's `ApplyForceToCenter` before the first step: the force acts during that step
        // (and is cleared after it, as Box2D clears forces after every step).
        world.bodies[lander].add_force(Vector::new(initial_force[0], initial_force[1]), true);

        let mut env = Self {
            world,
            lander,
            legs,
            lander_collider,
            leg_colliders,
            ground_colliders,
            rng,
            terrain,
            helipad_y,
            initial_force,
            angle: 0.0,
            wrapped_angle: 0.0,
            resting_steps: 0,
            game_over: false,
            leg_contact: [false; 2],
            prev_shaping: None,
            state: [0.0; 8],
        };
        env.step(Action::Noop);
        env
    }

    /// The current observation.
    pub fn state(&self) -> [f64; 8] {
        self.state
    }

    /// The smoothed terrain points `(x, y)` (metres), left to right.
    pub fn terrain(&self) -> &[[f64; 2]] {
        &self.terrain
    }

    /// The helipad's nominal height `H/4` (metres; the flattened terrain lies at `0.99·H/4`).
    pub fn helipad_y(&self) -> f64 {
        self.helipad_y
    }

    /// The random force (N) applied to the lander during the first step.
    pub fn initial_force(&self) -> [f64; 2] {
        self.initial_force
    }

    /// The lander's linear velocity (m/s, of its centre of mass).
    pub fn lander_velocity(&self) -> [f64; 2] {
        let (v, _) = self.body_velocity(self.lander);
        [v.x, v.y]
    }

    /// The current velocity of the lander or a leg: linear (of the centre of mass) and angular.
    /// Read from the multibody's generalized velocities through the link's body Jacobian
    /// (both current after a step): rapier refreshes the velocities stored in a multibody
    /// link's rigid body only at the start of the next step.
    fn body_velocity(&self, body: RigidBodyHandle) -> (Vector, f64) {
        let joints = &self.world.multibody_joints;
        let link = joints
            .rigid_body_link(body)
            .and_then(|l| Some((joints.get_multibody(l.multibody)?, l.id)));
        match link {
            Some((mb, id)) => {
                let j = mb.body_jacobian(id);
                let q = mb.generalized_velocity();
                let row = |r: usize| (0..j.ncols()).map(|c| j[(r, c)] * q[c]).sum::<f64>();
                (Vector::new(row(0), row(1)), row(2))
            }
            None => {
                let b = &self.world.bodies[body];
                (b.linvel(), b.angvel())
            }
        }
    }

    /// The lander's position (m, of its body origin, as gym's `lander.position`).
    pub fn lander_position(&self) -> [f64; 2] {
        let p = self.world.bodies[self.lander].translation();
        [p.x, p.y]
    }

    /// Whether the lander's island is asleep (Box2D's rule: see the module docs).
    pub fn asleep(&self) -> bool {
        self.resting_steps >= STEPS_TO_SLEEP
    }

    /// Whether a body's collider touches the ground at the current poses: its distance to a
    /// ground segment is at most [`TOUCH_DISTANCE`].
    fn touching(&self, body: RigidBodyHandle, collider: ColliderHandle) -> bool {
        let colliders = &self.world.colliders;
        let pose = self.world.bodies[body].position();
        let shape = colliders[collider].shape();
        let aabb = shape.compute_aabb(pose).loosened(TOUCH_DISTANCE);
        self.ground_colliders.iter().any(|&g| {
            let segment = &colliders[g];
            segment.compute_aabb().intersects(&aabb)
                && rapier2d_f64::parry::query::distance(
                    pose,
                    shape,
                    segment.position(),
                    segment.shape(),
                )
                .is_ok_and(|d| d.distance <= TOUCH_DISTANCE)
        })
    }

    /// One step of gym's `step(action)`: the engine impulse of the action (with two fresh
    /// dispersion draws, made whatever the action), one world step, the observation, the reward
    /// and termination. Stepping after termination is allowed and keeps simulating (gym would
    /// warn).
    pub fn step(&mut self, action: Action) -> Step {
        let (sin, cos) = self.angle.sin_cos();
        let tip = [sin, cos];
        let side = [-tip[1], tip[0]];
        let dispersion = [
            uniform(&mut self.rng, -1.0, 1.0) / SCALE,
            uniform(&mut self.rng, -1.0, 1.0) / SCALE,
        ];
        let pos = self.world.bodies[self.lander].translation();
        let mut m_power = 0.0;
        if action == Action::FireMain {
            m_power = 1.0;
            let along = MAIN_ENGINE_OFFSET / SCALE + 2.0 * dispersion[0];
            let ox = tip[0] * along + side[0] * dispersion[1];
            let oy = -tip[1] * along - side[1] * dispersion[1];
            let at = Vector::new(pos.x + ox, pos.y + oy);
            let impulse = Vector::new(
                -ox * MAIN_ENGINE_POWER * m_power,
                -oy * MAIN_ENGINE_POWER * m_power,
            );
            // Applied as a force during the step: the same velocity change (one substep).
            self.world.bodies[self.lander].add_force_at_point(impulse * FPS, at, true);
        }
        let mut s_power = 0.0;
        if matches!(action, Action::FireLeft | Action::FireRight) {
            let direction = action.index() as f64 - 2.0;
            s_power = 1.0;
            let lever = 3.0 * dispersion[1] + direction * SIDE_ENGINE_AWAY / SCALE;
            let ox = tip[0] * dispersion[0] + side[0] * lever;
            let oy = -tip[1] * dispersion[0] - side[1] * lever;
            let at = Vector::new(
                pos.x + ox - tip[0] * SIDE_ENGINE_TIP_OFFSET / SCALE,
                pos.y + oy + tip[1] * SIDE_ENGINE_HEIGHT / SCALE,
            );
            let impulse = Vector::new(
                -ox * SIDE_ENGINE_POWER * s_power,
                -oy * SIDE_ENGINE_POWER * s_power,
            );
            self.world.bodies[self.lander].add_force_at_point(impulse * FPS, at, true);
        }

        self.world.step();
        self.world.bodies[self.lander].reset_forces(false);
        self.world.bodies[self.lander].reset_torques(false);

        // Contacts on the poses at the end of the step (see `TOUCH_DISTANCE`).
        if self.touching(self.lander, self.lander_collider) {
            self.game_over = true;
        }
        for k in 0..2 {
            self.leg_contact[k] = self.touching(self.legs[k], self.leg_colliders[k]);
        }
        let rb = &self.world.bodies[self.lander];
        let wrapped = rb.rotation().angle();
        let mut delta = wrapped - self.wrapped_angle;
        if delta > std::f64::consts::PI {
            delta -= 2.0 * std::f64::consts::PI;
        } else if delta < -std::f64::consts::PI {
            delta += 2.0 * std::f64::consts::PI;
        }
        self.angle += delta;
        self.wrapped_angle = wrapped;
        let resting = [self.lander, self.legs[0], self.legs[1]].iter().all(|&h| {
            let (v, w) = self.body_velocity(h);
            v.length_squared() <= LINEAR_SLEEP_TOLERANCE * LINEAR_SLEEP_TOLERANCE
                && w * w <= ANGULAR_SLEEP_TOLERANCE * ANGULAR_SLEEP_TOLERANCE
        });
        self.resting_steps = if resting { self.resting_steps + 1 } else { 0 };

        let pos = self.world.bodies[self.lander].translation();
        let (vel, angvel) = self.body_velocity(self.lander);
        let (w, h) = (world_w(), world_h());
        let state = [
            (pos.x - w / 2.0) / (w / 2.0),
            (pos.y - (self.helipad_y + LEG_DOWN / SCALE)) / (h / 2.0),
            vel.x * (w / 2.0) / FPS,
            vel.y * (h / 2.0) / FPS,
            self.angle,
            20.0 * angvel / FPS,
            if self.leg_contact[0] { 1.0 } else { 0.0 },
            if self.leg_contact[1] { 1.0 } else { 0.0 },
        ];
        self.state = state;

        let shaping = shaping(&state);
        let mut reward = match self.prev_shaping {
            Some(prev) => shaping - prev,
            None => 0.0,
        };
        self.prev_shaping = Some(shaping);
        reward -= m_power * MAIN_ENGINE_FUEL;
        reward -= s_power * SIDE_ENGINE_FUEL;

        let mut terminated = false;
        if self.game_over || state[0].abs() >= 1.0 {
            terminated = true;
            reward = -TERMINAL_REWARD;
        }
        if self.asleep() {
            terminated = true;
            reward = TERMINAL_REWARD;
        }
        Step {
            state,
            reward,
            terminated,
        }
    }
}

/// The outcome of one episode.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Episode {
    /// Sum of the rewards of the steps taken (the reset's step excluded, as in gym).
    pub total_reward: f64,
    /// Number of steps taken (at most the cap).
    pub steps: usize,
    /// Whether the episode ended by itself (rather than at the step cap).
    pub terminated: bool,
}

/// Flies the heuristic controller with weights `w` on the episode with environment seed `seed`
/// for at most `max_steps` steps.
pub fn run_episode(w: &[f64; 12], seed: u64, max_steps: usize) -> Episode {
    let mut env = LunarLander::new(seed);
    let mut s = env.state();
    let mut out = Episode {
        total_reward: 0.0,
        steps: 0,
        terminated: false,
    };
    while out.steps < max_steps {
        let step = env.step(heuristic_action(&s, w));
        out.total_reward += step.reward;
        out.steps += 1;
        s = step.state;
        if step.terminated {
            out.terminated = true;
            break;
        }
    }
    out
}

/// The objective and cost of one input.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Evaluation {
    /// Mean total reward over the episodes (the objective).
    pub mean_reward: f64,
    /// Mean number of steps per episode (the cost is this over [`COST_DIVISOR`]).
    pub mean_steps: f64,
}

/// The Lunar Lander problem: the heuristic controller with weights `x ∈ [0,1]^12` over a fixed
/// set of episodes. `eval` and `cost` of the same input share one simulation (the last input's
/// evaluation is cached).
#[derive(Debug)]
pub struct LunarLanderProblem {
    episodes: usize,
    max_steps: usize,
    cache: Mutex<Option<(Vec<f64>, Evaluation)>>,
}

impl Clone for LunarLanderProblem {
    fn clone(&self) -> Self {
        Self {
            episodes: self.episodes,
            max_steps: self.max_steps,
            cache: Mutex::new(None),
        }
    }
}

impl Default for LunarLanderProblem {
    /// The paper's setting: [`DEFAULT_EPISODES`] episodes of at most [`DEFAULT_MAX_STEPS`] steps.
    fn default() -> Self {
        Self {
            episodes: DEFAULT_EPISODES,
            max_steps: DEFAULT_MAX_STEPS,
            cache: Mutex::new(None),
        }
    }
}

impl LunarLanderProblem {
    /// The problem over environment seeds `0..episodes`, each cut at `max_steps` steps (both at
    /// least 1).
    pub fn new(episodes: usize, max_steps: usize) -> Result<Self, ProblemError> {
        if episodes == 0 || max_steps == 0 {
            return Err(ProblemError(format!(
                "lunar_lander needs episodes >= 1 and max_steps >= 1, got {episodes} and {max_steps}"
            )));
        }
        Ok(Self {
            episodes,
            max_steps,
            cache: Mutex::new(None),
        })
    }

    /// Number of episodes per evaluation.
    pub fn episodes(&self) -> usize {
        self.episodes
    }

    /// Step cap of an episode.
    pub fn max_steps(&self) -> usize {
        self.max_steps
    }

    /// Every episode of `x` (seeds `0..episodes` in order), simulated in parallel. `x` must have
    /// 12 finite entries (see [`LunarLanderProblem::evaluate`]).
    pub fn episodes_of(&self, x: &[f64]) -> Option<Vec<Episode>> {
        let w: [f64; 12] = x.try_into().ok()?;
        if !w.iter().all(|v| v.is_finite()) {
            return None;
        }
        Some(
            (0..self.episodes as u64)
                .into_par_iter()
                .map(|seed| run_episode(&w, seed, self.max_steps))
                .collect(),
        )
    }

    /// Mean reward and mean steps at `x` (cached: the last input's evaluation is reused).
    /// Inputs that are not 12 finite numbers give NaN for both. The episodes run in parallel,
    /// and their results are summed in seed order, so the result is bit-for-bit reproducible.
    pub fn evaluate(&self, x: &[f64]) -> Evaluation {
        if let Ok(c) = self.cache.lock()
            && let Some((cx, e)) = c.as_ref()
            && cx.as_slice() == x
        {
            return *e;
        }
        let e = match self.episodes_of(x) {
            Some(eps) => {
                let n = eps.len() as f64;
                Evaluation {
                    mean_reward: eps.iter().map(|e| e.total_reward).sum::<f64>() / n,
                    mean_steps: eps.iter().map(|e| e.steps as f64).sum::<f64>() / n,
                }
            }
            None => Evaluation {
                mean_reward: f64::NAN,
                mean_steps: f64::NAN,
            },
        };
        if let Ok(mut c) = self.cache.lock() {
            *c = Some((x.to_vec(), e));
        }
        e
    }

    /// The objective: the mean total reward.
    pub fn eval(&self, x: &[f64]) -> f64 {
        self.evaluate(x).mean_reward
    }

    /// The native cost: mean steps / [`COST_DIVISOR`].
    pub fn cost(&self, x: &[f64]) -> f64 {
        self.evaluate(x).mean_steps / COST_DIVISOR
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const W_GYM: [f64; 12] = GYM_HEURISTIC_WEIGHTS;

    fn state(s: [f64; 8]) -> [f64; 8] {
        s
    }

    /// The controller against actions worked out by hand from the rule.
    #[test]
    fn controller_matches_hand_computed_actions() {
        use Action::*;
        // In flight, gym weights. angle_targ = 0.2·0.5 − 0.1 = 0; hover_targ = 0.11;
        // angle_todo = −0.05·0.5 − 0.02 = −0.045; hover_todo = −0.39·0.5 + 0.15 = −0.045:
        // nothing exceeds the 0.05 thresholds.
        let s = state([0.2, 0.5, -0.1, -0.3, 0.05, 0.02, 0.0, 0.0]);
        assert_eq!(heuristic_action(&s, &W_GYM), Noop);
        // Falling above the pad: hover_todo = −0.2·0.5 + 0.5·0.5 = 0.15 > |0| and > 0.05.
        let s = state([0.0, 0.2, 0.0, -0.5, 0.0, 0.0, 0.0, 0.0]);
        assert_eq!(heuristic_action(&s, &W_GYM), FireMain);
        // Right of the pad, drifting right: angle_targ = 0.25 + 0.3 = 0.55, clipped to 0.4;
        // angle_todo = 0.2 > 0.05 (tilt left, counter-clockwise); hover_todo = −0.3625.
        let s = state([0.5, 1.0, 0.3, 0.0, 0.0, 0.0, 0.0, 0.0]);
        assert_eq!(heuristic_action(&s, &W_GYM), FireLeft);
        // The mirror image: angle_targ clipped to −0.4, angle_todo = −0.2 < −0.05.
        let s = state([-0.5, 1.0, -0.3, 0.0, 0.0, 0.0, 0.0, 0.0]);
        assert_eq!(heuristic_action(&s, &W_GYM), FireRight);
        // Main engine only when hover_todo beats |angle_todo|: hover_todo = −0.3·0.5 + 0.8·0.5
        // = 0.25, angle_todo = (0 − (−0.6))·0.5 = 0.3.
        let s = state([0.0, 0.3, 0.0, -0.8, -0.6, 0.0, 0.0, 0.0]);
        assert_eq!(heuristic_action(&s, &W_GYM), FireLeft);
        // A leg touches: angle_todo = w₈ = 0 whatever the tilt; hover_todo = 0.2·0.5 = 0.1.
        let s = state([0.1, 0.0, 0.0, -0.2, 0.3, 0.5, 1.0, 0.0]);
        assert_eq!(heuristic_action(&s, &W_GYM), FireMain);
        // ... and hover_todo = 0.025 ≤ 0.05: nothing, despite the tilt.
        let s = state([0.1, 0.0, 0.0, -0.05, 0.3, 0.5, 0.0, 1.0]);
        assert_eq!(heuristic_action(&s, &W_GYM), Noop);
        // Other weights: w₀ = 1, clip w₂ = 0.3, w₄ = 1, contact angle w₈ = 0.9, thresholds
        // w₁₀ = 0.5, w₁₁ = 0.2; hover gains w₆ = w₇ = w₉ = 0.
        let w = [1.0, 0.0, 0.3, 0.0, 1.0, 0.0, 0.0, 0.0, 0.9, 0.0, 0.5, 0.2];
        // angle_targ = min(0.5, 0.3) = 0.3, angle_todo = 0.3 > 0.2.
        let s = state([0.5, 0.4, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0]);
        assert_eq!(heuristic_action(&s, &w), FireLeft);
        // Tilted past the target: angle_todo = 0.3 − 0.6 = −0.3 < −0.2.
        let s = state([0.5, 0.4, 0.0, 0.0, 0.6, 0.0, 0.0, 0.0]);
        assert_eq!(heuristic_action(&s, &w), FireRight);
        // Same tilt with a leg down: angle_todo = w₈ = 0.9 > 0.2.
        let s = state([0.5, 0.4, 0.0, 0.0, 0.6, 0.0, 0.0, 1.0]);
        assert_eq!(heuristic_action(&s, &w), FireLeft);
        // Within the thresholds: angle_todo = 0.3 − 0.15 = 0.15 ≤ 0.2.
        let s = state([0.5, 0.4, 0.0, 0.0, 0.15, 0.0, 0.0, 0.0]);
        assert_eq!(heuristic_action(&s, &w), Noop);
        // hover_todo = 0.4 ≤ w₁₀ = 0.5 with w₆ = 1: no main engine; angle_todo = 0 → nothing.
        let mut w2 = w;
        w2[6] = 1.0;
        let s = state([0.0, -0.4, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0]);
        assert_eq!(heuristic_action(&s, &w2), Noop);
        // hover_todo = 0.6 > 0.5 and > |0|: main engine.
        let s = state([0.0, -0.6, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0]);
        assert_eq!(heuristic_action(&s, &w2), FireMain);
        // All-zero weights never fire (every comparison is against 0 with 0).
        let s = state([0.7, -0.6, 0.4, -1.0, 0.5, 0.3, 1.0, 1.0]);
        assert_eq!(heuristic_action(&s, &[0.0; 12]), Noop);
        // NaN observations: the flags count as contact (as in Python); hover_todo is NaN and
        // angle_todo = w₈ = 0, so nothing fires.
        assert_eq!(heuristic_action(&[f64::NAN; 8], &W_GYM), Noop);
        assert_eq!(
            [Noop, FireLeft, FireMain, FireRight].map(Action::index),
            [0, 1, 2, 3]
        );
    }

    /// The world as gym builds it: flattened helipad, smoothing with wrap-around, the legs at
    /// their near limits with coincident anchors, the lander at the top centre.
    #[test]
    fn reset_builds_gyms_world() {
        let (w, h) = (world_w(), world_h());
        for seed in 0..5 {
            let env = LunarLander::with_initial_random(seed, 0.0);
            let t = env.terrain();
            assert_eq!(t.len(), CHUNKS);
            for (i, p) in t.iter().enumerate() {
                assert_eq!(p[0], w / 10.0 * i as f64);
                assert!(p[1] >= 0.0 && p[1] <= 0.99 * h / 2.0, "{p:?}");
            }
            // The helipad (x = 8..12) lies at 0.33·3·H/4, slightly below H/4.
            for p in &t[4..=6] {
                assert_eq!(p[1], 0.33 * (h / 4.0 + h / 4.0 + h / 4.0));
            }
            assert_eq!(env.helipad_y(), h / 4.0);
            // The reset's step started from rest at the top centre: x = W/2 exactly, y fell by
            // one step of gravity.
            let [x, y] = env.lander_position();
            assert!((x - w / 2.0).abs() < 1e-12, "{x}");
            assert!((y - (h - 0.2 / FPS)).abs() < 1e-12, "{y}");
            let s = env.state();
            assert_eq!(s[0], 0.0);
            assert_eq!(&s[6..], &[0.0, 0.0]);
            let lander = &env.world.bodies[env.lander];
            // The hull's mass: 867 px² at density 5.
            assert!((lander.mass() - 5.0 * 867.0 / (SCALE * SCALE)).abs() < 1e-12);
            for (k, i) in [-1.0, 1.0].into_iter().enumerate() {
                let leg = &env.world.bodies[env.legs[k]];
                let rel = leg.rotation().angle() - lander.rotation().angle();
                assert!((rel + i * LEG_LIMIT_NEAR).abs() < 1e-6, "leg {k}: {rel}");
                let anchor = leg.position() * Vector::new(i * LEG_AWAY / SCALE, LEG_DOWN / SCALE);
                let origin = lander.translation();
                assert!(
                    (anchor - origin).length() < 1e-6,
                    "leg {k}: {anchor:?} {origin:?}"
                );
                assert!((leg.mass() - 4.0 * LEG_W * LEG_H / (SCALE * SCALE)).abs() < 1e-12);
            }
        }
        // The force is drawn after the terrain from the same stream: the terrain does not depend
        // on it, and the force is in range.
        let a = LunarLander::new(3);
        let b = LunarLander::with_initial_random(3, 0.0);
        assert_eq!(a.terrain(), b.terrain());
        assert!(a.initial_force().iter().all(|f| f.abs() <= INITIAL_RANDOM));
        assert_eq!(b.initial_force(), [0.0, 0.0]);
        assert_ne!(LunarLander::new(4).terrain(), a.terrain());
    }

    /// With no engine and no initial force the lander falls freely: after the reset's step and
    /// `k` more, its vertical velocity is `−10·(k + 1)/50` (the legs fall with it), and the
    /// observation's `s₃` is that velocity scaled by `(H/2)/FPS`. With the initial force, the
    /// momentum of lander and legs after the reset's step is `(F + M·g)/FPS`: the force acted
    /// once, for one step, and gravity keeps acting alone afterwards.
    #[test]
    fn free_fall_matches_gravity() {
        let h = world_h();
        let mut env = LunarLander::with_initial_random(7, 0.0);
        for k in 0..=40 {
            if k > 0 {
                let step = env.step(Action::Noop);
                assert!(!step.terminated);
                assert_eq!(step.state[3], env.lander_velocity()[1] * (h / 2.0) / FPS);
            }
            let v = env.lander_velocity();
            let expect = GRAVITY * (k + 1) as f64 / FPS;
            assert!(
                (v[1] - expect).abs() < 1e-9,
                "step {k}: {} vs {expect}",
                v[1]
            );
            assert!(
                v[0].abs() < 1e-9 && env.state()[4].abs() < 1e-9,
                "step {k}: {v:?}"
            );
        }
        let momentum = |env: &LunarLander| {
            let mut p = Vector::ZERO;
            let mut m = 0.0;
            for h in [env.lander, env.legs[0], env.legs[1]] {
                let b = &env.world.bodies[h];
                p += env.body_velocity(h).0 * b.mass();
                m += b.mass();
            }
            (p, m)
        };
        let mut env = LunarLander::new(7);
        let f = env.initial_force();
        assert!(f[0].abs() > 10.0 && f[1].abs() > 10.0, "{f:?}");
        for k in 0..=10 {
            if k > 0 {
                env.step(Action::Noop);
            }
            let (p, m) = momentum(&env);
            let expect = Vector::new(f[0], f[1] + m * GRAVITY * (k + 1) as f64) / FPS;
            // rapier's multibody integrates the legs' swing semi-implicitly: momentum is kept to
            // about 1e-6 (relative), not to rounding.
            assert!(
                (p - expect).length() < 1e-5 * expect.length(),
                "step {k}: {p:?} vs {expect:?}"
            );
        }
    }

    /// The engines push the lander as gym's: the main engine (below the origin) pushes it up,
    /// the left engine (action 1) turns it counter-clockwise and pushes it left, the right
    /// engine clockwise and right; the fuel is charged.
    #[test]
    fn engines_push_the_expected_way() {
        let base = |a: Action| {
            let mut env = LunarLander::with_initial_random(2, 0.0);
            let before = env.lander_velocity();
            let step = env.step(a);
            let after = env.lander_velocity();
            (
                [after[0] - before[0], after[1] - before[1] - GRAVITY / FPS],
                step.state[5],
                step.reward,
            )
        };
        let (dv, w, _) = base(Action::Noop);
        assert!(dv[0].abs() < 1e-12 && dv[1].abs() < 1e-12 && w.abs() < 1e-12);
        // Main engine: impulse 13·(4/30 ± dispersion) on ~5 kg: about +0.35 m/s.
        let (dv, _, _) = base(Action::FireMain);
        assert!(dv[1] > 0.2 && dv[1] < 0.5, "{dv:?}");
        let (dv, w, _) = base(Action::FireLeft);
        assert!(dv[0] < 0.0 && w > 0.0, "{dv:?} {w}");
        let (dv, w, _) = base(Action::FireRight);
        assert!(dv[0] > 0.0 && w < 0.0, "{dv:?} {w}");
    }

    fn fuel(a: Action) -> f64 {
        match a {
            Action::FireMain => MAIN_ENGINE_FUEL,
            Action::FireLeft | Action::FireRight => SIDE_ENGINE_FUEL,
            Action::Noop => 0.0,
        }
    }

    /// Reward bookkeeping on whole episodes: every step's reward is the shaping difference
    /// minus the fuel, except the terminal step, whose reward is exactly ±100 (gym replaces
    /// that step's shaping difference and fuel by it). Hence the total is the last
    /// non-terminal shaping minus the initial shaping, minus the fuel of the non-terminal steps,
    /// plus the terminal ±100 (+100 at rest, −100 for a crash).
    #[test]
    fn rewards_add_up_to_shaping_fuel_and_terminal() {
        let mut seen = [false; 2];
        for (w, seed) in [(W_GYM, 0), (W_GYM, 1), (W_GYM, 2), ([0.0; 12], 0)] {
            let mut env = LunarLander::new(seed);
            let s0 = env.state();
            let (mut prev, mut total, mut fuel_sum) = (s0, 0.0, 0.0);
            let mut terminal = None;
            for _ in 0..DEFAULT_MAX_STEPS {
                let a = heuristic_action(&prev, &w);
                let step = env.step(a);
                total += step.reward;
                if step.terminated {
                    terminal = Some(step.reward);
                    if step.reward > 0.0 {
                        assert!(env.asleep());
                    } else {
                        assert!(env.game_over || step.state[0].abs() >= 1.0);
                    }
                    break;
                }
                let expect = shaping(&step.state) - shaping(&prev) - fuel(a);
                assert!(
                    (step.reward - expect).abs() < 1e-12,
                    "{} {expect}",
                    step.reward
                );
                fuel_sum += fuel(a);
                prev = step.state;
            }
            let t = terminal.expect("the episode ends");
            assert!(t == TERMINAL_REWARD || t == -TERMINAL_REWARD);
            seen[usize::from(t > 0.0)] = true;
            let expect = shaping(&prev) - shaping(&s0) - fuel_sum + t;
            assert!((total - expect).abs() < 1e-9, "{total} vs {expect}");
            let episode = run_episode(&w, seed, DEFAULT_MAX_STEPS);
            assert_eq!(episode.total_reward.to_bits(), total.to_bits());
            assert!(episode.terminated);
        }
        assert_eq!(seen, [true, true], "both a crash and a landing at rest");
    }

    /// The cost is the mean number of steps simulated over 16 and the objective the mean total
    /// reward, episode by episode; the step cap is honoured.
    #[test]
    fn cost_is_mean_steps_over_16() {
        let x = W_GYM;
        let p = LunarLanderProblem::new(5, DEFAULT_MAX_STEPS).unwrap();
        let eps: Vec<Episode> = (0..5)
            .map(|s| run_episode(&x, s, DEFAULT_MAX_STEPS))
            .collect();
        assert_eq!(p.episodes_of(&x).unwrap(), eps);
        let steps: usize = eps.iter().map(|e| e.steps).sum();
        let reward: f64 = eps.iter().map(|e| e.total_reward).sum();
        assert_eq!(p.cost(&x), steps as f64 / 5.0 / COST_DIVISOR);
        assert_eq!(p.eval(&x), reward / 5.0);
        assert!(eps.iter().all(|e| e.terminated && e.steps > 50));
        // Cut at 30 steps (no episode ends that early): cost 30/16 exactly.
        let q = LunarLanderProblem::new(4, 30).unwrap();
        assert_eq!(q.cost(&x), 30.0 / COST_DIVISOR);
        assert!(
            q.episodes_of(&x)
                .unwrap()
                .iter()
                .all(|e| !e.terminated && e.steps == 30)
        );
        // The cache returns the same evaluation, and another input replaces it.
        let e = q.evaluate(&x);
        assert_eq!(q.evaluate(&x), e);
        let y = [0.3; 12];
        assert_ne!(q.evaluate(&y), e);
        assert_eq!(q.evaluate(&x), e);
    }

    /// Same input, same bits: repeated, on fresh instances, in another order, after other
    /// inputs (the episodes run in parallel and are summed in seed order).
    #[test]
    fn evaluations_are_bit_identical() {
        use rand::RngExt;
        let mut rng = Xoshiro256PlusPlus::seed_from_u64(17);
        let mut xs: Vec<Vec<f64>> = (0..3)
            .map(|_| (0..12).map(|_| rng.random::<f64>()).collect())
            .collect();
        xs.push(W_GYM.to_vec());
        let a = LunarLanderProblem::new(6, 600).unwrap();
        let first: Vec<(u64, u64)> = xs
            .iter()
            .map(|x| (a.eval(x).to_bits(), a.cost(x).to_bits()))
            .collect();
        let b = LunarLanderProblem::new(6, 600).unwrap();
        for (x, f) in xs.iter().zip(&first).rev() {
            assert_eq!((b.eval(x).to_bits(), b.cost(x).to_bits()), *f, "{x:?}");
            assert_eq!((a.eval(x).to_bits(), a.cost(x).to_bits()), *f, "{x:?}");
            assert!(f64::from_bits(f.0).is_finite() && f64::from_bits(f.1) > 0.0);
        }
        let e1 = run_episode(&W_GYM, 9, 5000);
        let e2 = run_episode(&W_GYM, 9, 5000);
        assert_eq!(e1.total_reward.to_bits(), e2.total_reward.to_bits());
        assert_eq!(e1.steps, e2.steps);
    }

    /// gym's heuristic, as weights, lands: a clearly positive mean over the paper's 50
    /// episodes (about 245; gym's heuristic averages above 200 on Box2D), while doing nothing
    /// (all-zero weights) crashes every time and random weights score far lower.
    #[test]
    fn gym_heuristic_weights_land_and_others_do_worse() {
        use rand::RngExt;
        let p = LunarLanderProblem::default();
        let good = p.evaluate(&W_GYM);
        assert!(good.mean_reward > 150.0, "{good:?}");
        let eps = p.episodes_of(&W_GYM).unwrap();
        let landed = eps.iter().filter(|e| e.total_reward > 100.0).count();
        assert!(landed >= 40, "{landed} of 50 episodes landed");
        let zero = p.evaluate(&[0.0; 12]);
        assert!(zero.mean_reward < -50.0, "{zero:?}");
        let eps = p.episodes_of(&[0.0; 12]).unwrap();
        assert!(
            eps.iter()
                .all(|e| e.terminated && e.steps < 200 && e.total_reward < 0.0)
        );
        let mut rng = Xoshiro256PlusPlus::seed_from_u64(3);
        for _ in 0..4 {
            let x: Vec<f64> = (0..12).map(|_| rng.random::<f64>()).collect();
            let r = p.eval(&x);
            assert!(r < good.mean_reward - 150.0, "{x:?}: {r}");
        }
    }

    /// Invalid settings and inputs.
    #[test]
    fn invalid_inputs_give_nan_and_settings_errors() {
        assert!(LunarLanderProblem::new(0, 10).is_err());
        assert!(LunarLanderProblem::new(3, 0).is_err());
        let p = LunarLanderProblem::new(2, 50).unwrap();
        assert_eq!((p.episodes(), p.max_steps()), (2, 50));
        assert!(p.eval(&[0.5; 11]).is_nan() && p.cost(&[0.5; 13]).is_nan());
        let mut x = [0.5; 12];
        x[3] = f64::NAN;
        assert!(p.eval(&x).is_nan() && p.cost(&x).is_nan());
        x[3] = f64::INFINITY;
        assert!(p.episodes_of(&x).is_none());
        let d = LunarLanderProblem::default();
        assert_eq!((d.episodes(), d.max_steps()), (50, 5000));
    }

    /// Evaluation time (not asserted): one `eval` (50 episodes) for the gym heuristic, zero
    /// weights and random weights. Run with `cargo test --release -p pandora-problems --lib
    /// lunar::tests::timing -- --ignored --nocapture`.
    #[test]
    #[ignore]
    fn timing() {
        use rand::RngExt;
        let mut rng = Xoshiro256PlusPlus::seed_from_u64(1);
        let mut cases = vec![("gym heuristic".to_string(), W_GYM.to_vec())];
        cases.push(("zero".to_string(), vec![0.0; 12]));
        for k in 0..40 {
            cases.push((
                format!("random {k}"),
                (0..12).map(|_| rng.random::<f64>()).collect(),
            ));
        }
        for (name, x) in cases {
            let p = LunarLanderProblem::default();
            let t = std::time::Instant::now();
            let e = p.evaluate(&x);
            let par = t.elapsed().as_secs_f64();
            let t = std::time::Instant::now();
            let n: usize = (0..50)
                .map(|s| run_episode(&x.clone().try_into().unwrap(), s, DEFAULT_MAX_STEPS).steps)
                .sum();
            let seq = t.elapsed().as_secs_f64();
            println!(
                "{name}: mean reward {:.2}, mean steps {:.1}, eval {:.3} s (sequential {:.3} s, {:.1} µs/step)",
                e.mean_reward,
                e.mean_steps,
                par,
                seq,
                seq / n as f64 * 1e6
            );
        }
    }
}
