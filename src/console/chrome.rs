//! What every console page shares: the frame around it (navigation, the session's
//! actor, its logout form, a notice), and how figures are written (instants, ages,
//! durations, path segments).

use askama::Template;

use super::access::Session;
use crate::domain::Timestamp;

/// A link of the navigation.
#[derive(Clone, Debug)]
pub struct NavItem {
    /// Where it goes.
    pub href: &'static str,
    /// What it says.
    pub label: &'static str,
    /// True on its own page.
    pub active: bool,
}

/// The pages the navigation lists.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Section {
    /// `/console/`.
    Overview,
    /// `/console/subscribers…`.
    Subscribers,
    /// `/console/destinations`.
    Destinations,
    /// `/console/events…` and `/console/jobs/…`.
    Events,
    /// `/console/dead-letters`.
    DeadLetters,
    /// `/console/replays`.
    Replays,
    /// None (login, errors).
    None,
}

const NAV: [(Section, &str, &str); 6] = [
    (Section::Overview, "/console/", "Overview"),
    (Section::Subscribers, "/console/subscribers", "Subscribers"),
    (
        Section::Destinations,
        "/console/destinations",
        "Destinations",
    ),
    (Section::Events, "/console/events", "Events"),
    (
        Section::DeadLetters,
        "/console/dead-letters",
        "Dead letters",
    ),
    (Section::Replays, "/console/replays", "Replays"),
];

/// The frame of a page.
#[derive(Clone, Debug)]
pub struct Chrome {
    /// The page's title (also the browser tab's).
    pub title: String,
    /// The navigation, empty on pages without a session.
    pub nav: Vec<NavItem>,
    /// The CSRF token of the page's forms (empty without a session).
    pub csrf: String,
    /// Who is signed in (a token's fingerprint); `None` without tokens.
    pub actor: Option<String>,
    /// A line confirming what the last action did.
    pub notice: Option<String>,
}

impl Chrome {
    /// The frame of a page of `section` seen in `session`.
    pub fn new(title: impl Into<String>, section: Section, session: &Session) -> Self {
        Chrome {
            title: title.into(),
            nav: NAV
                .iter()
                .map(|(s, href, label)| NavItem {
                    href,
                    label,
                    active: *s == section,
                })
                .collect(),
            csrf: session.csrf.clone(),
            actor: session.actor.clone(),
            notice: None,
        }
    }

    /// A frame without navigation (login, errors).
    pub fn bare(title: &str) -> Self {
        Chrome {
            title: title.to_owned(),
            nav: Vec::new(),
            csrf: String::new(),
            actor: None,
            notice: None,
        }
    }

    /// With `notice` shown at the top.
    pub fn with_notice(mut self, notice: Option<String>) -> Self {
        self.notice = notice;
        self
    }
}

/// An error page.
#[derive(Template)]
#[template(path = "console/error.html")]
pub struct ErrorPage {
    /// The frame.
    pub chrome: Chrome,
    /// The title.
    pub title: String,
    /// What happened.
    pub detail: String,
}

/// A page that reloads itself at once: a link followed from another site arrives
/// without the `SameSite=Strict` session cookie, which the reload (from this site)
/// sends.
#[derive(Template)]
#[template(path = "console/reload.html")]
pub struct Reload {
    /// The frame.
    pub chrome: Chrome,
}

/// An instant as pages show it: RFC 3339 (UTC) and how long ago (or ahead) of `now`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct When {
    /// RFC 3339, UTC, milliseconds.
    pub iso: String,
    /// `12 s ago`, `in 3 min`.
    pub relative: String,
}

impl When {
    /// `at` as seen at `now`.
    pub fn of(at: Timestamp, now: Timestamp) -> Self {
        let ms = now.millis_since(at);
        let relative = if ms >= 0 {
            format!("{} ago", age(ms))
        } else {
            format!("in {}", age(-ms))
        };
        When {
            iso: at.to_rfc3339(),
            relative,
        }
    }

    /// [`When::of`] an optional instant.
    pub fn of_opt(at: Option<Timestamp>, now: Timestamp) -> Option<Self> {
        at.map(|at| Self::of(at, now))
    }
}

/// A span of `ms` milliseconds in words: `850 ms`, `12 s`, `3 min 20 s`, `2 h 5 min`,
/// `3 d 4 h`.
pub fn age(ms: i64) -> String {
    let ms = ms.max(0);
    let s = ms / 1000;
    match ms {
        0..1_000 => format!("{ms} ms"),
        1_000..60_000 => format!("{s} s"),
        60_000..3_600_000 => format!("{} min {} s", s / 60, s % 60),
        3_600_000..86_400_000 => format!("{} h {} min", s / 3600, s / 60 % 60),
        _ => format!("{} d {} h", s / 86_400, s / 3600 % 24),
    }
}

/// `text` as one path segment of a console URL: every byte but ASCII letters, digits,
/// `-`, `_`, `~` percent-encoded, and `.` too, so that `.` and `..` stay segments.
pub fn segment(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for byte in text.bytes() {
        if byte.is_ascii_alphanumeric() || matches!(byte, b'-' | b'_' | b'~') {
            out.push(byte as char);
        } else {
            out.push_str(&format!("%{byte:02X}"));
        }
    }
    out
}

/// `text` when it is a path of this console's pages under `prefix` (`/console/`,
/// `/console/subscribers`) that is safe to redirect to: visible ASCII only (no control
/// character, space or fragment), no `//` or `\\` (another host), not the login form;
/// `None` otherwise (callers then use their default page).
pub fn local_page<'a>(text: &'a str, prefix: &str) -> Option<&'a str> {
    let safe = text.starts_with(prefix)
        && text.starts_with("/console")
        && text
            .bytes()
            .all(|b| b.is_ascii_graphic() && b != b'#' && b != b'\\')
        && !text.contains("//")
        && !text.starts_with("/console/login");
    safe.then_some(text)
}

/// `text` as a query parameter's value.
pub fn query_value(text: &str) -> String {
    url::form_urlencoded::byte_serialize(text.as_bytes()).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ages_read_in_the_largest_units() {
        assert_eq!(age(850), "850 ms");
        assert_eq!(age(12_400), "12 s");
        assert_eq!(age(200_000), "3 min 20 s");
        assert_eq!(age(7_500_000), "2 h 5 min");
        assert_eq!(age(273_600_000), "3 d 4 h");
        assert_eq!(age(-5), "0 ms");
    }

    #[test]
    fn segments_keep_ids_in_one_segment() {
        assert_eq!(segment("acme-1_x~"), "acme-1_x~");
        assert_eq!(segment("a/b c"), "a%2Fb%20c");
        assert_eq!(segment(".."), "%2E%2E");
        assert_eq!(segment("é"), "%C3%A9");
        assert_eq!(query_value("a&b=c d"), "a%26b%3Dc+d");
    }

    #[test]
    fn only_plain_console_paths_are_redirected_to() {
        let ok = "/console/jobs/x?y=1&z=%2F";
        assert_eq!(local_page(ok, "/console/"), Some(ok));
        for bad in [
            "https://evil.example/",
            "//evil.example/console/",
            "/console//evil.example",
            "/console/\\evil",
            "/v1/jobs",
            "/console/login?next=/x",
            "/console/x\u{7f}",
            "/console/x\r\nSet-Cookie: a=b",
            "/console/x y",
            "/console/x#frag",
            "/console/é",
        ] {
            assert_eq!(local_page(bad, "/console/"), None, "{bad:?}");
        }
        assert_eq!(local_page("/console/", "/console/subscribers"), None);
        assert!(local_page("/console/subscribers?health=paused", "/console/subscribers").is_some());
    }

    #[test]
    fn instants_read_relative_to_now() {
        let now = Timestamp::from_millis(1_000_000);
        assert_eq!(
            When::of(Timestamp::from_millis(988_000), now).relative,
            "12 s ago"
        );
        assert_eq!(
            When::of(Timestamp::from_millis(1_180_000), now).relative,
            "in 3 min 0 s"
        );
    }
}
