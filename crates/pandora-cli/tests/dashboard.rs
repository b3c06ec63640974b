//! The dashboard in a real browser: `pandora run` runs a study, `pandora serve` serves its
//! storage on a free loopback port, and Debian's `chromium` in headless mode loads the study's
//! page (`--dump-dom` after the page's script ran, `--virtual-time-budget` letting its fetches
//! finish). The DOM must hold every plot with its points, and the trial count and best value of
//! `pandora status --json`; a second study whose parameter name and choice are HTML must show
//! them as text, never as elements; a third study, with steps, must show each trial's learning
//! curve and its paused or running state. A screenshot of each page is kept in
//! `target/dashboard-test/`.
//!
//! Needs Chromium: `.ci/run` installs it and sets `PANDORA_TEST_CHROMIUM` (its path) before
//! building, which sets `cfg(pandora_chromium)` (build.rs); without it the test is ignored and
//! says why.

mod common;

use common::pandora;
use serde::Deserialize;
use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

const STUDY: &str = r#"
[study]
name = "dash"
storage = "sqlite:dash.db"
direction = "maximize"
[objective]
builtin = "levy"
dim = 2
[cost]
kind = "known"
formula = "linear_mean"
[budget]
total = 300.0
max_trials = 12
[policy]
acquisition = "pbgi_d"
lambda0 = 0.1
initial_design = 4
seed = 0
[policy.stopping]
rule = "pbgi"
lambda = 1e-6
"#;

const EVIL: &str = "<script>window.pwned=1</script>";
const EVIL_STUDY: &str = "<b>evil</b><script>window.pwned=3</script>";
const EVIL_CHOICE: &str = "<img src=x onerror=alert(2)>";

fn evil_study() -> String {
    format!(
        "[study]\nname = {EVIL_STUDY:?}\nstorage = \"sqlite:dash.db\"\ndirection = \"minimize\"\n\
         [objective]\nkind = \"external\"\n\
         [[space]]\nname = {EVIL:?}\ntype = \"categorical\"\nchoices = [{EVIL_CHOICE:?}, \"plain\"]\n\
         [cost]\nkind = \"reported\"\n"
    )
}

/// A study with steps: three configurations of up to 4 steps, 2 per ask.
const STEPS_STUDY: &str = r#"
[study]
name = "ft"
storage = "sqlite:dash.db"
direction = "maximize"
[objective]
kind = "external"
[[space]]
name = "a"
type = "float"
low = 0.0
high = 1.0
[budget]
total = 100.0
max_trials = 3
[policy]
initial_design = 3
seed = 1
[fidelity]
max_steps = 4
lambda = 0.002
steps_per_ask = 2
"#;

/// Runs the study with steps of `ft.toml` a little: three configurations started, the first two
/// run for their two steps (paused), the third told one step (running). Returns the steps told.
fn run_steps_study(d: &Path) -> usize {
    std::fs::write(d.join("ft.toml"), STEPS_STUDY).unwrap();
    let mut told = 0;
    for k in 0..3u32 {
        let (code, out, err) = pandora(d, &["ask", "--json", "ft.toml"]);
        assert_eq!(code, 0, "{err}");
        let asked: serde_json::Value = serde_json::from_str(&out).unwrap();
        let n = asked["number"].to_string();
        let last = if k < 2 { 2 } else { 1 };
        for step in 1..=last {
            let (t, v) = (step.to_string(), format!("{}", 0.2 * f64::from(step + k)));
            let args = ["tell", "ft.toml", &n, "--step", &t, "--objective", &v];
            let (code, _, err) = pandora(d, &args);
            assert_eq!(code, 0, "{err}");
            told += 1;
        }
    }
    told
}

/// `pandora status --json`'s fields the page must repeat.
#[derive(Debug, Deserialize)]
struct Status {
    complete: u64,
    running: u64,
    failed: u64,
    abandoned: u64,
    best: Option<Best>,
}

#[derive(Debug, Deserialize)]
struct Best {
    objective: f64,
}

/// `pandora serve` on a free loopback port; killed when dropped.
struct Server {
    child: Child,
    url: String,
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn serve(dir: &Path) -> Server {
    let mut child = Command::new(env!("CARGO_BIN_EXE_pandora"))
        .args([
            "serve",
            "--storage",
            "sqlite:dash.db",
            "--bind",
            "127.0.0.1:0",
        ])
        .current_dir(dir)
        .stderr(Stdio::piped())
        .spawn()
        .expect("start pandora serve");
    let stderr = child.stderr.take().unwrap();
    let mut line = String::new();
    BufReader::new(stderr).read_line(&mut line).unwrap();
    let url = line
        .split("listening on ")
        .nth(1)
        .and_then(|s| s.split_whitespace().next())
        .unwrap_or_else(|| panic!("no address in {line:?}"))
        .to_string();
    Server { child, url }
}

/// Runs Chromium headless with `args` on `url`, killing it after a minute; returns stdout.
fn chromium(bin: &str, profile: &Path, args: &[&str], url: &str) -> String {
    let mut child = Command::new(bin)
        .args([
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--disable-dev-shm-usage",
            "--no-first-run",
            "--hide-scrollbars",
            "--virtual-time-budget=5000",
        ])
        .arg(format!("--user-data-dir={}", profile.display()))
        .args(args)
        .arg(url)
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap_or_else(|e| panic!("start {bin}: {e}"));
    let mut out = child.stdout.take().unwrap();
    let reader = std::thread::spawn(move || {
        let mut s = String::new();
        std::io::Read::read_to_string(&mut out, &mut s).map(|_| s)
    });
    let started = Instant::now();
    while child.try_wait().unwrap().is_none() {
        if started.elapsed() > Duration::from_secs(60) {
            let _ = child.kill();
            panic!("{bin} did not finish within a minute on {url}");
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    reader.join().unwrap().unwrap()
}

/// The `data-value` of the element with `id` in `dom`.
fn value_of(dom: &str, id: &str) -> String {
    let at = dom
        .find(&format!("id=\"{id}\""))
        .unwrap_or_else(|| panic!("no #{id} in the page"));
    let tag_end = at + dom[at..].find('>').unwrap();
    let tag = &dom[..tag_end];
    let start = tag.rfind('<').unwrap();
    let attr = tag[start..]
        .split("data-value=\"")
        .nth(1)
        .unwrap_or_else(|| panic!("#{id} has no data-value: {}", &tag[start..]));
    attr[..attr.find('"').unwrap()].to_string()
}

/// The `data-points` of the plot `id` (the first, if several).
fn points_of(dom: &str, id: &str) -> usize {
    let key = format!("data-plot=\"{id}\" data-points=\"");
    let at = dom
        .find(&key)
        .unwrap_or_else(|| panic!("no plot {id} in the page"))
        + key.len();
    dom[at..at + dom[at..].find('"').unwrap()].parse().unwrap()
}

/// `s` percent-encoded for a query value.
fn encode(s: &str) -> String {
    s.bytes()
        .map(|b| {
            if b.is_ascii_alphanumeric() {
                (b as char).to_string()
            } else {
                format!("%{b:02X}")
            }
        })
        .collect()
}

fn out_dir() -> PathBuf {
    let d = Path::new(env!("CARGO_TARGET_TMPDIR")).join("../dashboard-test");
    std::fs::create_dir_all(&d).unwrap();
    d
}

#[test]
#[cfg_attr(
    not(pandora_chromium),
    ignore = "PANDORA_TEST_CHROMIUM is not set: this test needs Chromium (.ci/run installs it)"
)]
fn the_dashboard_shows_a_study_that_just_ran() {
    let bin = std::env::var("PANDORA_TEST_CHROMIUM")
        .ok()
        .filter(|s| !s.is_empty())
        .expect("PANDORA_TEST_CHROMIUM: the path of chromium (set at build time, unset now)");
    let dir = tempfile::tempdir().unwrap();
    let (d, profile) = (dir.path(), dir.path().join("profile"));
    std::fs::write(d.join("dash.toml"), STUDY).unwrap();
    let (code, _, err) = pandora(d, &["run", "--quiet", "dash.toml"]);
    assert_eq!(code, 0, "{err}");
    let (code, out, err) = pandora(d, &["status", "--json", "dash.toml"]);
    assert_eq!(code, 0, "{err}");
    let status: Status = serde_json::from_str(&out).unwrap();
    std::fs::write(d.join("evil.toml"), evil_study()).unwrap();
    for (k, obj) in [(0, "1.0"), (1, "0.5")] {
        let (code, _, err) = pandora(d, &["ask", "--json", "evil.toml"]);
        assert_eq!(code, 0, "{err}");
        let n = k.to_string();
        let args = ["tell", "evil.toml", &n, "--objective", obj, "--cost", "2"];
        let (code, _, err) = pandora(d, &args);
        assert_eq!(code, 0, "{err}");
    }

    let server = serve(d);
    let page = format!("{}/?study=dash", server.url);
    let dom = chromium(&bin, &profile, &["--dump-dom"], &page);
    let trials = status.complete + status.running + status.failed + status.abandoned;
    assert_eq!(value_of(&dom, "trial-count"), trials.to_string(), "{dom}");
    assert_eq!(
        value_of(&dom, "complete-count"),
        status.complete.to_string()
    );
    let best: f64 = value_of(&dom, "best-value").parse().unwrap();
    assert_eq!(best, status.best.unwrap().objective);
    assert_eq!(points_of(&dom, "best-vs-cost"), status.complete as usize);
    assert_eq!(points_of(&dom, "cost-per-trial"), trials as usize);
    assert_eq!(points_of(&dom, "budget-remaining"), trials as usize + 1);
    let model_steps = trials as usize - 4;
    assert_eq!(points_of(&dom, "lambda"), model_steps);
    assert!(points_of(&dom, "stopping") >= model_steps, "{dom}");
    // Known costs: every decision, the initial design's too, records its (exact) cost.
    assert_eq!(points_of(&dom, "cost-model"), trials as usize);
    assert_eq!(dom.matches("data-plot=\"param\"").count(), 2);
    assert_eq!(
        dom.matches("<tr data-number=").count(),
        trials as usize,
        "one table row per trial"
    );
    let shots = out_dir();
    let shot = shots.join("study.png");
    let arg = format!("--screenshot={}", shot.display());
    chromium(&bin, &profile, &[&arg, "--window-size=1400,1900"], &page);
    assert!(std::fs::metadata(&shot).unwrap().len() > 10_000, "{shot:?}");

    // HTML in a parameter name and a choice is shown as text: escaped in the serialized DOM,
    // never an element.
    let evil_page = format!("{}/?study={}", server.url, encode(EVIL_STUDY));
    let evil = chromium(&bin, &profile, &["--dump-dom"], &evil_page);
    assert_eq!(value_of(&evil, "trial-count"), "2", "{evil}");
    assert!(
        evil.contains("&lt;script&gt;window.pwned=1&lt;/script&gt;"),
        "{evil}"
    );
    assert!(
        evil.contains("&lt;img src=x onerror=alert(2)&gt;"),
        "{evil}"
    );
    let shown = "&lt;b&gt;evil&lt;/b&gt;&lt;script&gt;window.pwned=3&lt;/script&gt;";
    assert!(
        evil.contains(&format!("id=\"study-name\">{shown}<")),
        "{evil}"
    );
    for element in ["<script>window", "<img", "<b>"] {
        assert!(
            !evil.contains(element),
            "{element} became an element: {evil}"
        );
    }
    let arg = format!("--screenshot={}", shots.join("evil.png").display());
    chromium(
        &bin,
        &profile,
        &[&arg, "--window-size=1400,1200"],
        &evil_page,
    );

    // A study with steps: the learning curves and the table of paused and running trials.
    let steps_told = run_steps_study(d);
    let ft_page = format!("{}/?study=ft", server.url);
    let ft = chromium(&bin, &profile, &["--dump-dom"], &ft_page);
    assert_eq!(value_of(&ft, "trial-count"), "3", "{ft}");
    assert_eq!(value_of(&ft, "paused-count"), "2", "{ft}");
    assert_eq!(value_of(&ft, "running-count"), "1", "{ft}");
    assert_eq!(points_of(&ft, "learning-curves"), steps_told);
    assert_eq!(ft.matches("data-state=\"paused\"").count(), 2, "{ft}");
    assert_eq!(ft.matches("data-state=\"running\"").count(), 1, "{ft}");
    let arg = format!("--screenshot={}", shots.join("steps.png").display());
    chromium(&bin, &profile, &[&arg, "--window-size=1400,1900"], &ft_page);
    // A study without steps has no such panel.
    assert!(!dom.contains("data-panel=\"steps\""), "{dom}");

    // The list of studies links both.
    let list = chromium(&bin, &profile, &["--dump-dom"], &format!("{}/", server.url));
    assert!(list.contains("href=\"?study=dash\""), "{list}");
    assert!(list.contains(&format!(">{shown}</a>")), "{list}");
    assert!(
        !list.contains("<b>") && !list.contains("<script>window"),
        "{list}"
    );
}
