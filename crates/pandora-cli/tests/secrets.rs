//! Passwords never reach the output: every study command that can print a storage URL, given a
//! PostgreSQL URL that cannot work (nothing listens, a malformed URL, an unknown option, an
//! unsupported scheme) holding passwords with every special character, raw and percent-encoded,
//! in the userinfo and in `password=`; by `--storage`, by a config file and by the
//! `PANDORA_STORAGE_URL` environment variable. Also: the environment variable path itself.

mod common;
use common::pandora;

use std::path::Path;
use std::process::Command;

/// Passwords as people paste them. Each piece between special characters is distinctive enough
/// not to occur in a normal message.
const PASSWORDS: &[&str] = &[
    "Xq7@Zk:Wv/Rt&Mn?Jb#Lp%Hd",
    "Qw3rtyZx9",
    "Kj8%40Yh%3AQz%2FUv",
];

/// URLs that cannot open a storage, holding `pw`.
fn bad_urls(pw: &str) -> Vec<String> {
    vec![
        // Nothing listens on port 1.
        format!("postgresql://alice:{pw}@127.0.0.1:1/db?connect_timeout=3"),
        format!("postgresql://alice@127.0.0.1:1/db?password={pw}&connect_timeout=3"),
        format!("postgres://alice@127.0.0.1:1/db?connect_timeout=3&password={pw}"),
        // The driver refuses the URL.
        format!("postgresql://alice:{pw}@127.0.0.1:1/db?sslmode=bogus"),
        format!("postgresql://alice@127.0.0.1:1/db?password={pw}&bogus_option=1"),
        format!("postgresql://alice:{pw}@[::1/db"),
        format!("postgresql://alice:{pw}@127.0.0.1:1/db?schema=no-such-schema!"),
        // Not a storage URL at all.
        format!("mysql://alice:{pw}@127.0.0.1/db"),
        format!("host=127.0.0.1 port=1 password={pw} dbname=db"),
    ]
}

/// The commands that open a storage, after the target arguments.
const COMMANDS: &[&[&str]] = &[
    &["run", "--quiet"],
    &["run", "--quiet", "--json"],
    &["ask"],
    &["ask", "--json"],
    &["status"],
    &["status", "--json"],
    &["best"],
    &["best", "--json"],
    &["export"],
    &["export", "--format", "json"],
    &["plot"],
    &["plot", "--json"],
];

/// The strings that must not appear: the password, its percent-decoded form, and every piece of
/// it between special characters that is at least 2 characters long.
fn forbidden(pw: &str) -> Vec<String> {
    let decoded = pw
        .replace("%40", "@")
        .replace("%3A", ":")
        .replace("%2F", "/");
    let mut out = vec![pw.to_string(), decoded.clone()];
    for s in [pw, decoded.as_str()] {
        out.extend(
            s.split(['@', ':', '/', '&', '?', '#', '%'])
                .filter(|p| p.len() >= 2)
                .map(str::to_string),
        );
    }
    out
}

fn assert_hidden(pw: &str, what: &str, out: &str, err: &str) {
    for f in forbidden(pw) {
        assert!(
            !out.contains(&f) && !err.contains(&f),
            "{what}: {f:?} (from password {pw:?}) was printed:\nstdout: {out}\nstderr: {err}"
        );
    }
}

/// Runs pandora in `dir` with `envs` set.
fn pandora_env(dir: &Path, args: &[&str], envs: &[(&str, &str)]) -> (i32, String, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_pandora"))
        .args(args)
        .env_remove("PANDORA_STORAGE_URL")
        .env_remove("PGPASSWORD")
        .envs(envs.iter().copied())
        .current_dir(dir)
        .output()
        .expect("run pandora");
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

fn config(storage: Option<&str>) -> String {
    let storage = storage.map_or(String::new(), |s| format!("storage = '{s}'\n"));
    format!(
        "[study]\nname = \"s\"\n{storage}[objective]\nbuiltin = \"ackley\"\ndim = 2\n\
         [budget]\nmax_trials = 3\n"
    )
}

#[test]
fn no_command_prints_a_password_of_a_storage_url() {
    let dir = tempfile::tempdir().unwrap();
    let mut runs = 0;
    for pw in PASSWORDS {
        for url in bad_urls(pw) {
            // --storage URL --study NAME, and PANDORA_STORAGE_URL with --study NAME.
            for cmd in COMMANDS {
                let mut args: Vec<&str> = cmd.to_vec();
                args.extend(["--storage", &url, "--study", "s"]);
                let (code, out, err) = pandora_env(dir.path(), &args, &[]);
                assert_eq!(code, 2, "{args:?}: {out}{err}");
                assert!(!err.is_empty(), "{args:?}: no error message");
                assert_hidden(pw, &format!("{args:?}"), &out, &err);

                let mut args: Vec<&str> = cmd.to_vec();
                args.extend(["--study", "s"]);
                let (code, out, err) =
                    pandora_env(dir.path(), &args, &[("PANDORA_STORAGE_URL", &url)]);
                assert_eq!(
                    code, 2,
                    "{args:?} with PANDORA_STORAGE_URL={url}: {out}{err}"
                );
                assert_hidden(pw, &format!("{args:?} with env {url}"), &out, &err);
                runs += 2;
            }
            // A config file holding the URL; `tell` too.
            std::fs::write(dir.path().join("s.toml"), config(Some(&url))).unwrap();
            for cmd in
                COMMANDS
                    .iter()
                    .map(|c| c.to_vec())
                    .chain([vec!["tell", "0", "--objective", "1"]])
            {
                let mut args = cmd.clone();
                args.insert(1, "s.toml");
                let (code, out, err) = pandora_env(dir.path(), &args, &[]);
                assert_eq!(code, 2, "{args:?} with {url}: {out}{err}");
                assert_hidden(pw, &format!("{args:?} with config {url}"), &out, &err);
                runs += 1;
            }
            let tell = [
                "tell",
                "0",
                "--objective",
                "1",
                "--storage",
                &url,
                "--study",
                "s",
            ];
            let (code, out, err) = pandora_env(dir.path(), &tell, &[]);
            assert_eq!(code, 2, "{out}{err}");
            assert_hidden(pw, &format!("{tell:?}"), &out, &err);
            // A usage error that quotes the misplaced URL.
            let (code, out, err) = pandora_env(dir.path(), &["status", "s.toml", &url], &[]);
            assert_eq!(code, 2, "{out}{err}");
            assert_hidden(pw, "a usage error", &out, &err);
            // A TOML error on the line holding the URL.
            let broken = config(Some(&url))
                .replace(&format!("storage = '{url}'"), &format!("storage = \"{url}"));
            std::fs::write(dir.path().join("broken.toml"), broken).unwrap();
            let (code, out, err) = pandora_env(dir.path(), &["status", "broken.toml"], &[]);
            assert_eq!(code, 2, "{out}{err}");
            assert_hidden(pw, "a TOML error", &out, &err);
        }
    }
    assert!(runs > 300);
}

/// A SQLite study: every command works through `--storage`, a config file and
/// `PANDORA_STORAGE_URL`, and a password given in the environment for PostgreSQL never shows.
#[test]
fn sqlite_studies_work_through_every_route_and_print_no_password() {
    let dir = tempfile::tempdir().unwrap();
    let pw = PASSWORDS[0];
    let env = [("PGPASSWORD", pw)];
    std::fs::write(dir.path().join("s.toml"), config(Some("sqlite:study.db"))).unwrap();
    let (code, out, err) = pandora_env(dir.path(), &["run", "s.toml", "--quiet"], &env);
    assert_eq!(code, 0, "{err}");
    assert_hidden(pw, "run", &out, &err);
    for cmd in COMMANDS.iter().skip(1) {
        let mut by_flag = cmd.to_vec();
        by_flag.extend(["--storage", "sqlite:study.db", "--study", "s"]);
        let mut by_file = cmd.to_vec();
        by_file.insert(1, "s.toml");
        let mut by_env = cmd.to_vec();
        by_env.extend(["--study", "s"]);
        for (args, env) in [
            (by_flag, env.to_vec()),
            (by_file, env.to_vec()),
            (
                by_env,
                vec![
                    ("PGPASSWORD", pw),
                    ("PANDORA_STORAGE_URL", "sqlite:study.db"),
                ],
            ),
        ] {
            let (code, out, err) = pandora_env(dir.path(), &args, &env);
            assert_eq!(code, 0, "{args:?}: {err}");
            assert_hidden(pw, &format!("{args:?}"), &out, &err);
        }
    }
}

/// `PANDORA_STORAGE_URL` names the storage of `--study NAME` commands and of config files without
/// a `storage` key; `--storage` and a config's own `storage` win over it.
#[test]
fn the_storage_url_can_come_from_the_environment() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let env = [("PANDORA_STORAGE_URL", "sqlite:from-env.db")];
    // A config without `storage`: the study goes where the environment says.
    std::fs::write(d.join("s.toml"), config(None)).unwrap();
    let (code, _, err) = pandora_env(d, &["run", "s.toml", "--quiet"], &env);
    assert_eq!(code, 0, "{err}");
    assert!(d.join("from-env.db").exists());
    assert!(
        !d.join("pandora.db").exists(),
        "the default storage was used"
    );
    let (code, out, err) = pandora_env(d, &["status", "--study", "s"], &env);
    assert_eq!(code, 0, "{err}");
    assert!(out.contains(": 3 complete,"), "{out}");
    // --storage wins over the environment.
    let (code, _, err) = pandora_env(
        d,
        &["status", "--storage", "sqlite:other.db", "--study", "s"],
        &env,
    );
    assert_eq!(code, 2);
    assert!(err.contains("other.db"), "{err}");
    // A config's own storage wins over the environment.
    std::fs::write(d.join("t.toml"), config(Some("sqlite:own.db"))).unwrap();
    let (code, _, err) = pandora_env(d, &["run", "t.toml", "--quiet"], &env);
    assert_eq!(code, 0, "{err}");
    assert!(d.join("own.db").exists());
    // Without the variable, --study alone says what is missing.
    let (code, _, err) = pandora(d, &["status", "--study", "s"]);
    assert_eq!(code, 2);
    assert!(err.contains("PANDORA_STORAGE_URL"), "{err}");
}

/// A password file readable by others is refused before connecting, naming the file; a missing
/// one is an error naming it; a password both in the URL and in a file is refused.
#[cfg(unix)]
#[test]
fn password_files_must_be_private() {
    use std::os::unix::fs::PermissionsExt;
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let file = d.join("pw");
    std::fs::write(&file, format!("{}\n", PASSWORDS[1])).unwrap();
    std::fs::set_permissions(&file, std::fs::Permissions::from_mode(0o644)).unwrap();
    let url = format!(
        "postgresql://alice@127.0.0.1:1/db?connect_timeout=3&password_file={}",
        file.display()
    );
    let (code, out, err) = pandora(d, &["status", "--storage", &url, "--study", "s"]);
    assert_eq!(code, 2);
    assert!(err.contains("chmod 600"), "{err}");
    assert_hidden(PASSWORDS[1], "open password file", &out, &err);
    // Private: read, then the connection fails (nothing listens), without printing it.
    std::fs::set_permissions(&file, std::fs::Permissions::from_mode(0o600)).unwrap();
    let (code, out, err) = pandora(d, &["status", "--storage", &url, "--study", "s"]);
    assert_eq!(code, 2);
    assert!(err.contains("connecting to"), "{err}");
    assert_hidden(PASSWORDS[1], "private password file", &out, &err);
    let missing = url.replace("/pw", "/missing");
    let (code, _, err) = pandora(d, &["status", "--storage", &missing, "--study", "s"]);
    assert_eq!(code, 2);
    assert!(
        err.contains("password_file") && err.contains("missing"),
        "{err}"
    );
    let both = url.replace("alice@", "alice:x@");
    let (code, _, err) = pandora(d, &["status", "--storage", &both, "--study", "s"]);
    assert_eq!(code, 2);
    assert!(err.contains("not both"), "{err}");
}
