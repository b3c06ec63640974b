//! End-to-end tests of `pandora boxes`.

use serde_json::Value;
use std::io::Write;
use std::process::{Command, Stdio};

fn run(args: &[&str], stdin: &str) -> (i32, String, String) {
    let mut child = Command::new(env!("CARGO_BIN_EXE_pandora"))
        .arg("boxes")
        .args(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn pandora");
    child
        .stdin
        .take()
        .expect("stdin")
        .write_all(stdin.as_bytes())
        .expect("write stdin");
    let out = child.wait_with_output().expect("wait");
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

#[test]
fn verify_matches_dp_on_a_discrete_instance() {
    let input = r#"{"boxes": [
        {"cost": 0.3, "rewards": {"values": [0.0, 1.0, 4.0], "probs": [0.5, 0.3, 0.2]}},
        {"cost": {"values": [0.0, 0.4], "probs": [0.5, 0.5]}, "rewards": {"values": [1.0, 2.0], "probs": [0.5, 0.5]}},
        {"cost": 0.05, "rewards": {"values": [1.5], "probs": [1.0]}}],
        "fallback": 0.5}"#;
    let (code, out, err) = run(&["--verify", "-"], input);
    assert_eq!(code, 0, "{err}");
    let v: Value = serde_json::from_str(&out).unwrap();
    let u = v["expected_utility"].as_f64().unwrap();
    let dp = v["dp_expected_utility"].as_f64().unwrap();
    assert!((u - dp).abs() < 1e-12, "{u} vs {dp}");
    assert_eq!(v["indices"].as_array().unwrap().len(), 3);
    // Indices: 0.2(4 − g) = 0.3 → 2.5; 0.5(2 − g) = 0.2 → 1.6; 1.5 − 0.05 = 1.45.
    let order: Vec<u64> = v["order"]
        .as_array()
        .unwrap()
        .iter()
        .map(|x| x.as_u64().unwrap())
        .collect();
    assert_eq!(order, vec![0, 1, 2]);
    assert!((v["indices"][1].as_f64().unwrap() - 1.6).abs() < 1e-12);
}

#[test]
fn normal_boxes_and_errors() {
    let input = r#"{"boxes": [{"cost": 0.3, "rewards": {"values": [0.0, 1.0, 4.0], "probs": [0.5, 0.3, 0.2]}},
        {"cost": 0.1, "normal": {"mean": 0.5, "std": 1.0}}], "fallback": null}"#;
    let (code, out, err) = run(&[], input);
    assert_eq!(code, 0, "{err}");
    let v: Value = serde_json::from_str(&out).unwrap();
    assert!(v["expected_utility"].as_f64().unwrap().is_finite());
    assert!(v.get("dp_expected_utility").is_none());
    let (code, _, err) = run(&["--verify"], input);
    assert_eq!(code, 2);
    assert!(err.contains("--verify"), "{err}");
    let (code, _, err) = run(&[], &input.replace("\"std\": 1.0", "\"std\": -1.0"));
    assert_eq!(code, 2);
    assert!(err.contains("boxes[1].normal.std"), "{err}");
}
