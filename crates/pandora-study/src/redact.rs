//! Secrets in storage URLs: finding the password, hiding it in messages, and taking it out of the
//! URL before a driver sees it.
//!
//! # The problem
//!
//! A PostgreSQL URL `postgresql://USER:PASSWORD@HOST/DB?PARAM=VALUE&...` carries its password in
//! two possible places: the *userinfo* (between `//` and `@`) and a `password=` parameter. The
//! URL syntax (RFC 3986) wants `@ : / ? # & %` percent-encoded inside either, but people paste
//! passwords as they are. A parser that ends the userinfo at the *first* `@` (as the `postgres`
//! crate does) then takes `s3c` for the password of `alice:s3c@r@t@db/opt` and `r@t@db` for part
//! of the host; a redaction that follows it prints `alice:***@r@t@db`, half the password. The same
//! holds for `?password=pa&ss&sslmode=disable` split at every `&`.
//!
//! # The rules used here
//!
//! * **Userinfo.** The userinfo ends at the **last** `@` that can end it: one whose user name
//!   (the text before the userinfo's first `:`) holds no `/ ? #`, and which is followed by a host
//!   list (letters, digits, `. - _ : , [ ] %`) that ends the string or is followed by `/`, `?` or
//!   `#`. So a password may hold raw `@ : / ? # & %`; the user name may hold a raw `@` (as in
//!   `admin@server` user names) but no `:`. An `@` inside a query value (`?application_name=a@b`)
//!   is not taken for the end of the userinfo *when connecting* if the text before it holds
//!   `?KEY=` for a known connection parameter ([`PARAMETERS`]); *when redacting* it is, so that
//!   `postgresql://u:pw@h/db?application_name=me@home` shows as `postgresql://u:***@home`.
//! * **Password parameters.** The value of a parameter whose name ends in `password` (any case)
//!   runs to the next `&KEY=` with `KEY` a known connection parameter, or to the end: a raw `&`
//!   inside it is part of the password.
//! * **Conninfo strings.** In libpq's `key=value` form (`host=h password=secret`), the value of a
//!   `password` key runs to the next white space, or is a single-quoted string.
//!
//! Where these rules guess wrong they hide too much, never too little: every reading of the URL
//! that the `postgres` crate could take puts its password inside the hidden span.
//!
//! # Use
//!
//! * [`redact_url`] hides the password of one URL (`***`), for messages, logs, status output,
//!   exports and the configuration copy stored with a study.
//! * [`redact_text`] hides every password in free text (each line may hold URLs and conninfo
//!   strings anywhere): the last line of defence applied to every error message the `pandora`
//!   binary prints, so that a driver or parser that echoes its input (a TOML error shows the
//!   offending line) cannot leak one.
//! * [`split_password`] returns the URL without its password, and the password (percent-decoded),
//!   so that the PostgreSQL backend hands the driver a URL that holds no secret (its parse errors
//!   cannot echo one) and sets the password separately. This also makes raw special characters
//!   in passwords work.

/// Connection parameters known to libpq or the `postgres` crate, plus Pandora's own (`schema`,
/// `password_file`): a `&` followed by one of these and `=` starts a new parameter even after a
/// password value.
pub const PARAMETERS: &[&str] = &[
    "application_name",
    "channel_binding",
    "connect_timeout",
    "dbname",
    "host",
    "hostaddr",
    "keepalives",
    "keepalives_idle",
    "keepalives_interval",
    "keepalives_retries",
    "load_balance_hosts",
    "options",
    "password",
    "password_file",
    "port",
    "replication",
    "schema",
    "sslcert",
    "sslkey",
    "sslmode",
    "sslnegotiation",
    "sslrootcert",
    "target_session_attrs",
    "tcp_user_timeout",
    "user",
];

/// What replaces a password.
pub const MASK: &str = "***";

/// `url` with every password (userinfo and `password=` parameters, see the module docs) replaced
/// by `***`; everything else is kept. URLs without a password (e.g. `sqlite:` ones) are returned
/// unchanged.
pub fn redact_url(url: &str) -> String {
    mask(url, &secret_spans(url, false))
}

/// `text` with the password of every URL (`scheme://...`) and every libpq `password=` value
/// replaced by `***`, line by line. A URL is taken to run to the end of its line, so a message
/// that quotes a URL may lose a little more than the password, never less.
pub fn redact_text(text: &str) -> String {
    text.split_inclusive('\n')
        .map(|line| mask(line, &secret_spans(line, true)))
        .collect()
}

/// Splits a URL into the URL without any password and the password, percent-decoded (the last
/// one given if the URL has several, as the `postgres` crate would take it). The user name of the
/// returned URL is percent-encoded where it held a raw `@ / ? #`, so that a parser ending the
/// userinfo at the first `@` reads it right.
pub fn split_password(url: &str) -> (String, Option<Vec<u8>>) {
    let mut password = None;
    let mut out = url.to_owned();
    if let Some(start) = url.find("://").map(|i| i + 3)
        && let Some((colon, at)) = userinfo(&url[start..], false, true)
    {
        let rest = &url[start..];
        let user = &rest[..colon];
        if colon < at {
            password = Some(percent_decode(&rest[colon + 1..at]));
        }
        out = format!("{}{}{}", &url[..start], encode_user(user), &rest[at..]);
    }
    let Some(q) = query_start(&out) else {
        return (out, password);
    };
    let (base, query) = out.split_at(q + 1);
    let mut kept = Vec::new();
    let mut i = 0;
    while i < query.len() {
        let seg = &query[i..];
        let key = "password=";
        if seg
            .get(..key.len())
            .is_some_and(|k| k.eq_ignore_ascii_case(key))
        {
            let value = &seg[key.len()..];
            let end = value_end(value, false);
            password = Some(percent_decode(&value[..end]));
            i += key.len() + end;
        } else {
            let end = seg.find('&').unwrap_or(seg.len());
            kept.push(&seg[..end]);
            i += end;
        }
        i += usize::from(i < query.len()); // the '&'
    }
    let out = if kept.is_empty() {
        base[..base.len() - 1].to_owned()
    } else {
        format!("{base}{}", kept.join("&"))
    };
    (out, password)
}

/// The byte ranges of `s` that hold passwords. `text_mode`: `s` is a line of free text (URLs
/// anywhere in it, ended by white space or quotes too), not one URL.
fn secret_spans(s: &str, text_mode: bool) -> Vec<std::ops::Range<usize>> {
    let mut spans = Vec::new();
    let mut from = 0;
    while let Some(i) = s[from..].find("://").map(|i| from + i) {
        let start = i + 3;
        if let Some((colon, at)) = userinfo(&s[start..], text_mode, false)
            && colon < at
        {
            spans.push(start + colon + 1..start + at);
        }
        from = start;
    }
    spans.extend(password_values(s, text_mode || !s.contains("://")));
    spans
}

/// In `rest` (the text after `scheme://`), the position of the userinfo's first `:` (or of its
/// end if it has none) and of the `@` that ends it; see the module docs. `query_aware`: an `@`
/// whose password would hold `?KEY=` is skipped (to connect); without it the span is the widest
/// reading (to redact).
fn userinfo(rest: &str, text_mode: bool, query_aware: bool) -> Option<(usize, usize)> {
    let bytes = rest.as_bytes();
    for (at, _) in rest.rmatch_indices('@') {
        let info = &rest[..at];
        let colon = info.find(':').unwrap_or(at);
        let user = &info[..colon];
        if user.contains(['/', '?', '#']) || (text_mode && user.contains(char::is_whitespace)) {
            continue;
        }
        let host = bytes[at + 1..]
            .iter()
            .take_while(|&&b| b.is_ascii_alphanumeric() || b".-_:,[]%".contains(&b))
            .count();
        let ends_host = match bytes.get(at + 1 + host) {
            None | Some(b'/' | b'?' | b'#') => true,
            Some(b) => text_mode && (b.is_ascii_whitespace() || b"\"'`)>;".contains(b)),
        };
        if !ends_host || (query_aware && colon < at && holds_query(&info[colon + 1..])) {
            continue;
        }
        return Some((colon, at));
    }
    None
}

/// `true` if `s` holds `?KEY=` for a known connection parameter (then it is a query, not a
/// password).
fn holds_query(s: &str) -> bool {
    s.match_indices('?')
        .any(|(i, _)| starts_with_parameter(&s[i + 1..]))
}

/// `true` if `s` starts with `KEY=` for a known connection parameter.
fn starts_with_parameter(s: &str) -> bool {
    PARAMETERS
        .iter()
        .any(|k| s.strip_prefix(k).is_some_and(|r| r.starts_with('=')))
}

/// The position of the query's `?` in a URL whose userinfo holds no password.
fn query_start(url: &str) -> Option<usize> {
    let start = url.find("://").map_or(0, |i| i + 3);
    url[start..].find('?').map(|i| start + i)
}

/// Where a password value starting `value` ends: at the next `&KEY=` with a known `KEY`, or (in
/// conninfo form, `space_ends`) at white space; a value starting with `'` runs to the closing
/// quote.
fn value_end(value: &str, space_ends: bool) -> usize {
    if space_ends && value.starts_with('\'') {
        let mut escaped = false;
        for (i, c) in value.char_indices().skip(1) {
            match c {
                '\\' if !escaped => escaped = true,
                '\'' if !escaped => return i + 1,
                _ => escaped = false,
            }
        }
        return value.len();
    }
    let mut end = value.len();
    for (i, _) in value.match_indices('&') {
        if starts_with_parameter(&value[i + 1..]) {
            end = i;
            break;
        }
    }
    if space_ends && let Some(ws) = value.find(char::is_whitespace) {
        end = end.min(ws);
    }
    end
}

/// The byte ranges of the values of `...password=` keys (any case) in `s`: URL parameters (after
/// `?` or `&`) and, when `conninfo`, libpq `key=value` pairs (after white space or at the start).
fn password_values(s: &str, conninfo: bool) -> Vec<std::ops::Range<usize>> {
    let lower = s.to_ascii_lowercase();
    let mut spans = Vec::new();
    for (i, _) in lower.match_indices("password") {
        let key_start = lower[..i]
            .rfind(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
            .map_or(0, |j| j + 1);
        let before = s[..key_start].chars().next_back();
        let url_param = matches!(before, Some('?' | '&'));
        let conninfo_key =
            conninfo && before.is_none_or(|c| c.is_whitespace() || matches!(c, ';' | ',' | '"'));
        if !(url_param || conninfo_key) {
            continue;
        }
        let after = &s[i + "password".len()..];
        let Some(eq) = after.trim_start().strip_prefix('=') else {
            continue;
        };
        let value = if url_param { eq } else { eq.trim_start() };
        let start = s.len() - value.len();
        let end = start + value_end(value, !url_param);
        if end > start {
            spans.push(start..end);
        }
    }
    spans
}

/// `s` with the byte ranges `spans` (possibly overlapping) replaced by [`MASK`].
fn mask(s: &str, spans: &[std::ops::Range<usize>]) -> String {
    let mut spans = spans.to_vec();
    spans.sort_by_key(|r| r.start);
    let mut merged: Vec<std::ops::Range<usize>> = Vec::new();
    for r in spans {
        match merged.last_mut() {
            Some(last) if r.start <= last.end => last.end = last.end.max(r.end),
            _ => merged.push(r),
        }
    }
    let mut out = String::with_capacity(s.len());
    let mut pos = 0;
    for r in merged {
        out.push_str(&s[pos..r.start]);
        out.push_str(MASK);
        pos = r.end;
    }
    out.push_str(&s[pos..]);
    out
}

/// Percent-decodes `s` (sequences that are not `%` and two hex digits are kept as they are).
pub(crate) fn percent_decode(s: &str) -> Vec<u8> {
    let b = s.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        let hex = |c: u8| (c as char).to_digit(16);
        if b[i] == b'%'
            && let (Some(h), Some(l)) = (
                b.get(i + 1).copied().and_then(hex),
                b.get(i + 2).copied().and_then(hex),
            )
        {
            out.push((h * 16 + l) as u8);
            i += 3;
        } else {
            out.push(b[i]);
            i += 1;
        }
    }
    out
}

/// A user name with the characters that would end it early for a URL parser percent-encoded.
fn encode_user(user: &str) -> String {
    let mut out = String::with_capacity(user.len());
    for c in user.chars() {
        match c {
            '@' => out.push_str("%40"),
            ':' => out.push_str("%3A"),
            _ => out.push(c),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Passwords as people paste them: every special character, raw and percent-encoded.
    const PASSWORDS: &[&str] = &[
        "hunter22",
        "p@ss",
        "p@ss@word",
        "pa:ss",
        "pa/ss",
        "p@s/s:x",
        "pa&ss",
        "pa?ss",
        "pa#ss",
        "50%off",
        "p%40ss%3Aw%2Fd",
        "a@b:c/d&e?f#g%h",
        "@:/&?#%",
        "sp ace@x",
    ];

    /// Userinfo and parameter forms of a URL holding `pw`.
    fn urls(pw: &str) -> Vec<String> {
        vec![
            format!("postgresql://alice:{pw}@db.example:5432/opt"),
            format!("postgres://alice:{pw}@db.example/opt?sslmode=disable&schema=s1"),
            format!("postgresql://alice:{pw}@h1:5432,h2:5433/opt?connect_timeout=3"),
            format!("postgresql://alice:{pw}@[::1]:5432/opt"),
            format!("postgresql://alice:{pw}@db.example"),
            format!("postgresql://admin@srv:{pw}@db.example/opt"),
            format!("postgresql://alice@db.example/opt?password={pw}"),
            format!("postgresql://alice@db.example/opt?password={pw}&sslmode=disable"),
            format!("postgresql://db.example/opt?user=alice&password={pw}&connect_timeout=3"),
            format!("postgresql://alice@db.example/opt?schema=s&PASSWORD={pw}"),
            format!("mysql://alice:{pw}@db.example/opt"),
        ]
    }

    /// `true` if `shown` (the redaction of `url`, which holds `pw`) shows the password or any
    /// piece of it between special characters: a piece occurs more often than in the URL
    /// without the password.
    fn leaks(url: &str, pw: &str, shown: &str) -> bool {
        let rest = url.replace(pw, "");
        shown.contains(pw)
            || pw
                .split(['@', ':', '/', '&', '?', '#', '%', ' '])
                .filter(|p| p.len() >= 2)
                .any(|p| shown.matches(p).count() > rest.matches(p).count())
    }

    #[test]
    fn no_password_form_survives_redaction() {
        for pw in PASSWORDS {
            for url in urls(pw) {
                let r = redact_url(&url);
                assert!(!leaks(&url, pw, &r), "{url} -> {r}");
                assert!(r.contains(MASK), "{url} -> {r}");
                // Host and database stay readable.
                assert!(r.contains("db.example") || r.contains("h1:5432") || r.contains("::1"));
                // In free text (an error message quoting the URL, a TOML line) too.
                for text in [
                    format!("error: connecting to {url}: connection refused"),
                    format!("storage = \"{url}\"\nnext line"),
                    format!("'{url}'"),
                ] {
                    let r = redact_text(&text);
                    assert!(!leaks(&text, pw, &r), "{text} -> {r}");
                }
            }
        }
    }

    #[test]
    fn exact_redactions() {
        for (url, want) in [
            ("sqlite:pandora.db", "sqlite:pandora.db"),
            ("sqlite:///tmp/a:b@c.db", "sqlite:///tmp/a:b@c.db"),
            ("postgresql://h/db", "postgresql://h/db"),
            ("postgres://alice@db/opt", "postgres://alice@db/opt"),
            (
                "postgresql://bob:s3cret@db.example:5432/studies?schema=a",
                "postgresql://bob:***@db.example:5432/studies?schema=a",
            ),
            ("postgresql://u:a:b@h/db", "postgresql://u:***@h/db"),
            ("postgresql://u:p@ss@h/db", "postgresql://u:***@h/db"),
            // An '@' in a query value: the widest reading is hidden.
            (
                "postgresql://u:pw@h/db?application_name=me@home",
                "postgresql://u:***@home",
            ),
            (
                "postgresql://u:x@h/db?sslmode=disable@db/opt",
                "postgresql://u:***@db/opt",
            ),
            (
                "postgres://bob@host/db?password=hunter2&sslmode=disable",
                "postgres://bob@host/db?password=***&sslmode=disable",
            ),
            (
                "postgres://bob@host/db?password=pa&ss&sslmode=disable",
                "postgres://bob@host/db?password=***&sslmode=disable",
            ),
            (
                "postgresql://bob:pw@h/d?PASSWORD=x",
                "postgresql://bob:***@h/d?PASSWORD=***",
            ),
            (
                "host=db user=bob password=s3cret dbname=opt",
                "host=db user=bob password=*** dbname=opt",
            ),
            (
                "host=db password = 'a b\\' c' dbname=opt",
                "host=db password = *** dbname=opt",
            ),
        ] {
            assert_eq!(redact_url(url), want, "{url}");
            assert_eq!(redact_text(url), want, "{url}");
        }
        // Idempotent, and harmless on text without secrets.
        let once = redact_url("postgresql://u:p@ss@h/db?password=x&y");
        assert_eq!(redact_url(&once), once);
        let plain = "reading s.toml: the password field is optional; user@example.org";
        assert_eq!(redact_text(plain), plain);
    }

    #[test]
    fn split_password_takes_the_whole_password_out() {
        for pw in PASSWORDS {
            let decoded = percent_decode(pw);
            for url in urls(pw) {
                if url.starts_with("mysql") {
                    continue;
                }
                let (rest, got) = split_password(&url);
                assert_eq!(got.as_deref(), Some(&decoded[..]), "{url}");
                assert!(!rest.contains(pw), "{url} -> {rest}");
                assert!(!rest.to_ascii_lowercase().contains("password"), "{rest}");
            }
        }
        assert_eq!(
            split_password("postgresql://alice:p@ss@db/opt?sslmode=disable"),
            (
                "postgresql://alice@db/opt?sslmode=disable".to_owned(),
                Some(b"p@ss".to_vec())
            )
        );
        assert_eq!(
            split_password("postgresql://admin@srv:pw@db/opt"),
            (
                "postgresql://admin%40srv@db/opt".to_owned(),
                Some(b"pw".to_vec())
            )
        );
        assert_eq!(
            split_password("postgresql://db/opt?password=a%26b&schema=s"),
            (
                "postgresql://db/opt?schema=s".to_owned(),
                Some(b"a&b".to_vec())
            )
        );
        // When connecting, an '@' in a query value does not end the userinfo.
        assert_eq!(
            split_password("postgresql://u:pw@h/db?application_name=me@home"),
            (
                "postgresql://u@h/db?application_name=me@home".to_owned(),
                Some(b"pw".to_vec())
            )
        );
        assert_eq!(
            split_password("postgresql://u@db/opt"),
            ("postgresql://u@db/opt".to_owned(), None)
        );
    }
}
