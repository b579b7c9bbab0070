//! `Dockerfile` and `docker-compose.yml` agree with the binary: every `DEFERHOOK_*`
//! variable and every flag passed to `deferhook` in them is one that
//! `deferhook serve --help` documents, the listen address is loopback unless the same
//! container sets API tokens (the server refuses anything else without them), and the
//! files keep their shape
//! (healthcheck, non-root user, two instances waiting for a healthy PostgreSQL).
//!
//! Both files are read as text, line by line: no YAML parser, and no Docker needed.

use std::collections::BTreeSet;
use std::net::SocketAddr;
use std::path::Path;
use std::process::Command;

/// What `deferhook --help` and `deferhook serve --help` document.
struct Help {
    flags: BTreeSet<String>,
    env: BTreeSet<String>,
    subcommands: BTreeSet<String>,
}

impl Help {
    fn of_the_binary() -> Help {
        let serve = help_text(&["serve", "--help"]);
        let top = help_text(&["--help"]);
        let mut flags = long_flags(&serve);
        flags.extend(long_flags(&top));
        let mut env = BTreeSet::new();
        for text in [&serve, &top] {
            for (start, _) in text.match_indices("[env: ") {
                let name: String = text[start + "[env: ".len()..]
                    .chars()
                    .take_while(|c| c.is_ascii_alphanumeric() || *c == '_')
                    .collect();
                env.insert(name);
            }
        }
        let help = Help {
            flags,
            env,
            subcommands: subcommands(&top),
        };
        // Guard the parsing above: a help format change must not empty the sets and make
        // every check below pass vacuously.
        for flag in ["--database-url", "--listen", "--no-api", "--log-format"] {
            assert!(help.flags.contains(flag), "{flag} not found in:\n{serve}");
        }
        for name in [
            "DEFERHOOK_DATABASE_URL",
            "DEFERHOOK_LISTEN",
            "DEFERHOOK_NO_API",
        ] {
            assert!(help.env.contains(name), "{name} not found in:\n{serve}");
        }
        assert!(help.subcommands.contains("serve"), "{top}");
        help
    }

    fn check_env(&self, file: &str, number: usize, line: &str, problems: &mut Vec<String>) {
        for name in deferhook_variables(line) {
            if !self.env.contains(&name) {
                problems.push(format!(
                    "{file} line {number}: {name} is not an environment variable of \
                     `deferhook serve --help` (known: {})",
                    join(&self.env)
                ));
            }
        }
    }

    /// `args` are what follows `deferhook` on a command line.
    /// `tokens`: whether API tokens are set for this command (by flag or variable).
    fn check_args(
        &self,
        file: &str,
        number: usize,
        args: &[String],
        tokens: bool,
        problems: &mut Vec<String>,
    ) {
        // (A leading global flag, as in `--log-format json serve`, skips this check.)
        if let Some(first) = args.first().filter(|arg| !arg.starts_with('-'))
            && !self.subcommands.contains(first)
        {
            problems.push(format!(
                "{file} line {number}: `{first}` is not a subcommand of deferhook (known: {})",
                join(&self.subcommands)
            ));
        }
        for (i, arg) in args.iter().enumerate() {
            if !arg.starts_with("--") {
                continue;
            }
            let (flag, inline_value) = match arg.split_once('=') {
                Some((flag, value)) => (flag, Some(value)),
                None => (arg.as_str(), None),
            };
            if !self.flags.contains(flag) {
                problems.push(format!(
                    "{file} line {number}: {flag} is not a flag of `deferhook serve --help` \
                     (known: {})",
                    join(&self.flags)
                ));
            }
            if flag == "--listen" {
                let value = inline_value.or(args.get(i + 1).map(String::as_str));
                if !tokens {
                    check_loopback(file, number, "--listen", value.unwrap_or(""), problems);
                }
            }
        }
    }
}

fn help_text(args: &[&str]) -> String {
    let mut command = Command::new(env!("CARGO_BIN_EXE_deferhook"));
    // clap prints the current value of each variable next to it; keep the help generic.
    for (key, _) in std::env::vars_os() {
        if key.to_string_lossy().starts_with("DEFERHOOK_") {
            command.env_remove(key);
        }
    }
    let output = command.args(args).output().expect("the binary runs");
    assert!(output.status.success(), "deferhook {args:?}: {output:?}");
    String::from_utf8(output.stdout).expect("the help is UTF-8")
}

fn long_flags(text: &str) -> BTreeSet<String> {
    text.split(|c: char| c.is_whitespace() || c == ',' || c == '`' || c == '[' || c == ']')
        .filter(|word| word.starts_with("--") && word.len() > 2)
        .map(|word| {
            word.chars()
                .take_while(|c| c.is_ascii_alphanumeric() || *c == '-')
                .collect::<String>()
        })
        .collect()
}

/// The names under `Commands:` in the top-level help.
fn subcommands(top: &str) -> BTreeSet<String> {
    top.lines()
        .skip_while(|line| line.trim() != "Commands:")
        .skip(1)
        .take_while(|line| line.starts_with(' '))
        .filter_map(|line| line.split_whitespace().next())
        .filter(|name| *name != "help")
        .map(str::to_owned)
        .collect()
}

fn deferhook_variables(text: &str) -> Vec<String> {
    text.match_indices("DEFERHOOK_")
        .map(|(start, _)| {
            text[start..]
                .chars()
                .take_while(|c| c.is_ascii_alphanumeric() || *c == '_')
                .collect()
        })
        .collect()
}

fn check_loopback(file: &str, number: usize, what: &str, value: &str, problems: &mut Vec<String>) {
    match unquote(value).parse::<SocketAddr>() {
        Ok(address) if address.ip().is_loopback() => {}
        _ => problems.push(format!(
            "{file} line {number}: {what} is `{value}`, but deferhook serve refuses any \
             address that is not loopback without API tokens (set DEFERHOOK_API_TOKENS)"
        )),
    }
}

fn join(names: &BTreeSet<String>) -> String {
    names.iter().cloned().collect::<Vec<_>>().join(", ")
}

fn unquote(value: &str) -> &str {
    let value = value.trim();
    for quote in ['"', '\''] {
        if let Some(inner) = value
            .strip_prefix(quote)
            .and_then(|rest| rest.strip_suffix(quote))
        {
            return inner;
        }
    }
    value
}

/// A command as Docker and Compose write it: a JSON array (exec form) or words.
fn command_words(value: &str) -> Vec<String> {
    let value = value.trim();
    if value.starts_with('[') {
        serde_json::from_str::<Vec<String>>(value)
            .unwrap_or_else(|e| panic!("`{value}` is not a JSON array of strings: {e}"))
    } else {
        value
            .split_whitespace()
            .map(|word| unquote(word).to_owned())
            .collect()
    }
}

fn read(name: &str) -> String {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join(name);
    std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

fn assert_no_problems(problems: &[String]) {
    assert!(problems.is_empty(), "\n{}\n", problems.join("\n"));
}

// ---- Dockerfile ------------------------------------------------------------------------

/// One instruction, continuation lines joined, with the number of its first line.
struct Instruction {
    number: usize,
    keyword: String,
    rest: String,
}

fn instructions(text: &str) -> Vec<Instruction> {
    let mut out = Vec::new();
    let mut pending: Option<Instruction> = None;
    for (index, line) in text.lines().enumerate() {
        let trimmed = line.trim();
        if trimmed.starts_with('#') || (trimmed.is_empty() && pending.is_none()) {
            continue;
        }
        let (body, continues) = match trimmed.strip_suffix('\\') {
            Some(body) => (body.trim(), true),
            None => (trimmed, false),
        };
        let instruction = match pending.take() {
            Some(mut open) => {
                open.rest.push(' ');
                open.rest.push_str(body);
                open
            }
            None => {
                let (keyword, rest) = body.split_once(char::is_whitespace).unwrap_or((body, ""));
                Instruction {
                    number: index + 1,
                    keyword: keyword.to_ascii_uppercase(),
                    rest: rest.trim().to_owned(),
                }
            }
        };
        if continues {
            pending = Some(instruction);
        } else {
            out.push(instruction);
        }
    }
    out.extend(pending);
    out
}

/// `ENV A=1 B=2` or `ENV A 1`.
fn env_pairs(rest: &str) -> Vec<(String, String)> {
    if rest
        .split_whitespace()
        .next()
        .is_some_and(|word| word.contains('='))
    {
        rest.split_whitespace()
            .filter_map(|pair| pair.split_once('='))
            .map(|(key, value)| (key.to_owned(), unquote(value).to_owned()))
            .collect()
    } else {
        let (key, value) = rest.split_once(char::is_whitespace).unwrap_or((rest, ""));
        vec![(key.to_owned(), unquote(value).to_owned())]
    }
}

fn dockerfile_problems(text: &str, help: &Help) -> Vec<String> {
    const FILE: &str = "Dockerfile";
    let mut problems = Vec::new();
    for (index, line) in text.lines().enumerate() {
        help.check_env(FILE, index + 1, line, &mut problems);
    }
    let instructions = instructions(text);
    // The runtime stage: everything after the last FROM.
    let runtime_start = instructions
        .iter()
        .rposition(|i| i.keyword == "FROM")
        .map_or(0, |p| p + 1);
    let runtime = &instructions[runtime_start..];
    let last = |keyword: &str| runtime.iter().rev().find(|i| i.keyword == keyword);

    let entrypoint = last("ENTRYPOINT").map(|i| (i.number, command_words(&i.rest)));
    let cmd = last("CMD").map(|i| (i.number, command_words(&i.rest)));
    match &entrypoint {
        Some((_, words)) if words.first().map(String::as_str) == Some("deferhook") => {}
        other => problems.push(format!(
            "{FILE}: the runtime stage's ENTRYPOINT should be [\"deferhook\"], found {other:?}"
        )),
    }
    if let Some((number, words)) = &entrypoint {
        let mut args = words[1.min(words.len())..].to_vec();
        args.extend(cmd.iter().flat_map(|(_, words)| words.iter().cloned()));
        help.check_args(FILE, *number, &args, false, &mut problems);
    }
    if cmd
        .as_ref()
        .and_then(|(_, words)| words.first())
        .map(String::as_str)
        != Some("serve")
    {
        problems.push(format!(
            "{FILE}: CMD should start with \"serve\", found {cmd:?}"
        ));
    }

    for instruction in runtime.iter().filter(|i| i.keyword == "ENV") {
        for (key, value) in env_pairs(&instruction.rest) {
            if key == "DEFERHOOK_LISTEN" {
                check_loopback(FILE, instruction.number, &key, &value, &mut problems);
            }
        }
    }
    if !runtime
        .iter()
        .any(|i| i.keyword == "ENV" && i.rest.contains("DEFERHOOK_LISTEN"))
    {
        problems.push(format!("{FILE}: DEFERHOOK_LISTEN is not set explicitly"));
    }

    match last("HEALTHCHECK") {
        Some(check)
            if check.rest.contains("CMD")
                && check.rest.contains("curl")
                && check.rest.contains("http://127.0.0.1:8080/healthz") => {}
        other => problems.push(format!(
            "{FILE}: expected a HEALTHCHECK running curl on http://127.0.0.1:8080/healthz, \
             found {:?}",
            other.map(|i| &i.rest)
        )),
    }

    match last("USER") {
        Some(user) => {
            let name = user.rest.split(':').next().unwrap_or("").trim();
            if name.is_empty() || name == "root" || name == "0" {
                problems.push(format!(
                    "{FILE} line {}: USER `{}` is root; the service must run as a non-root user",
                    user.number, user.rest
                ));
            }
        }
        None => problems.push(format!(
            "{FILE}: no USER in the runtime stage (it would run as root)"
        )),
    }
    if !runtime
        .iter()
        .any(|i| i.keyword == "EXPOSE" && i.rest.split_whitespace().any(|p| p == "8080"))
    {
        problems.push(format!("{FILE}: no EXPOSE 8080"));
    }
    problems
}

// ---- docker-compose.yml ----------------------------------------------------------------

/// A YAML line that carries content.
#[derive(Debug, Clone, Copy)]
struct Line<'a> {
    number: usize,
    indent: usize,
    text: &'a str,
}

fn yaml_lines(text: &str) -> Vec<Line<'_>> {
    text.lines()
        .enumerate()
        .filter(|(_, line)| {
            let trimmed = line.trim();
            !trimmed.is_empty() && !trimmed.starts_with('#')
        })
        .map(|(index, line)| Line {
            number: index + 1,
            indent: line.len() - line.trim_start().len(),
            text: line.trim(),
        })
        .collect()
}

/// The entries directly in `lines` (those at its smallest indent), each with the lines
/// nested under it.
fn entries<'a, 'b>(lines: &'b [Line<'a>]) -> Vec<(Line<'a>, &'b [Line<'a>])> {
    let Some(indent) = lines.iter().map(|line| line.indent).min() else {
        return Vec::new();
    };
    let starts: Vec<usize> = (0..lines.len())
        .filter(|&i| lines[i].indent == indent)
        .collect();
    starts
        .iter()
        .enumerate()
        .map(|(k, &start)| {
            let end = starts.get(k + 1).copied().unwrap_or(lines.len());
            (lines[start], &lines[start + 1..end])
        })
        .collect()
}

/// The mapping entry `key:` among `lines`: its line, its inline value (may be empty) and
/// the lines nested under it.
fn get<'a, 'b>(lines: &'b [Line<'a>], key: &str) -> Option<(Line<'a>, &'a str, &'b [Line<'a>])> {
    entries(lines).into_iter().find_map(|(line, nested)| {
        let value = line.text.strip_prefix(key)?.strip_prefix(':')?;
        (value.is_empty() || value.starts_with(' ')).then(|| (line, value.trim(), nested))
    })
}

/// The key of a mapping line (`name:` or `name: value`).
fn key_of<'a>(line: &Line<'a>) -> &'a str {
    line.text.split(':').next().unwrap_or("").trim()
}

/// An `environment:` block, as a map (`KEY: value`) or a list (`- KEY=value`).
fn environment<'a>(nested: &[Line<'a>]) -> Vec<(Line<'a>, String, String)> {
    entries(nested)
        .into_iter()
        .map(|(line, _)| {
            let (key, value) = match line.text.strip_prefix("- ") {
                Some(item) => unquote(item).split_once('=').unwrap_or((item, "")),
                None => line.text.split_once(':').unwrap_or((line.text, "")),
            };
            (line, key.trim().to_owned(), unquote(value).to_owned())
        })
        .collect()
}

/// `command:` or `entrypoint:` as words: inline (JSON array or words) or a block list.
fn words(value: &str, nested: &[Line<'_>]) -> Vec<String> {
    if value.is_empty() {
        nested
            .iter()
            .filter_map(|line| line.text.strip_prefix("- "))
            .map(|word| unquote(word).to_owned())
            .collect()
    } else {
        command_words(value)
    }
}

fn compose_problems(text: &str, help: &Help) -> Vec<String> {
    const FILE: &str = "docker-compose.yml";
    let mut problems = Vec::new();
    for (index, line) in text.lines().enumerate() {
        help.check_env(FILE, index + 1, line, &mut problems);
    }
    let lines = yaml_lines(text);
    let Some((_, _, services)) = get(&lines, "services") else {
        return vec![format!("{FILE}: no `services:`")];
    };

    let mut postgres_healthy = false;
    let mut deferhook_services = Vec::new();
    for (service_line, body) in entries(services) {
        let name = key_of(&service_line);
        let image = get(body, "image").map(|(_, value, _)| unquote(value));
        if image.is_some_and(|image| image.starts_with("postgres")) {
            postgres_healthy = get(body, "healthcheck")
                .and_then(|(_, _, check)| get(check, "test"))
                .is_some_and(|(_, value, nested)| {
                    words(value, nested).join(" ").contains("pg_isready")
                });
            continue;
        }
        // A service built from the Dockerfile runs deferhook unless its entrypoint is
        // replaced by another program (the example receiver).
        if get(body, "build").is_none() {
            continue;
        }
        let entrypoint =
            get(body, "entrypoint").map(|(line, value, nested)| (line, words(value, nested)));
        let runs_deferhook = entrypoint
            .as_ref()
            .is_none_or(|(_, words)| words.first().map(String::as_str) == Some("deferhook"));
        if !runs_deferhook {
            continue;
        }
        deferhook_services.push(name);

        let mut args: Vec<String> = entrypoint
            .as_ref()
            .map(|(_, words)| words[1..].to_vec())
            .unwrap_or_default();
        let mut number = service_line.number;
        if let Some((line, value, nested)) = get(body, "command") {
            number = line.number;
            args.extend(words(value, nested));
        }
        let env = get(body, "environment")
            .map(|(_, _, nested)| environment(nested))
            .unwrap_or_default();
        let value_of = |key: &str| {
            env.iter()
                .find(|(_, k, _)| k == key)
                .map(|(line, _, value)| (line.number, value.as_str()))
        };
        let tokens = value_of("DEFERHOOK_API_TOKENS").is_some()
            || args.iter().any(|arg| arg.starts_with("--api-token"));
        help.check_args(FILE, number, &args, tokens, &mut problems);
        if let Some((number, value)) = value_of("DEFERHOOK_LISTEN")
            && !tokens
        {
            check_loopback(FILE, number, "DEFERHOOK_LISTEN", value, &mut problems);
        }
        match value_of("DEFERHOOK_DATABASE_URL") {
            Some((_, url)) if url.starts_with("postgres://") && url.contains("@postgres:") => {}
            other => problems.push(format!(
                "{FILE}: service {name}: DEFERHOOK_DATABASE_URL should be postgres://...@postgres:5432/..., \
                 found {other:?}"
            )),
        }
        let condition = get(body, "depends_on")
            .and_then(|(_, _, deps)| get(deps, "postgres"))
            .and_then(|(_, _, postgres)| get(postgres, "condition"))
            .map(|(_, value, _)| value);
        if condition != Some("service_healthy") {
            problems.push(format!(
                "{FILE}: service {name} should have depends_on: postgres: condition: \
                 service_healthy, found {condition:?}"
            ));
        }
        // Without the API there is no /healthz: the image's healthcheck would fail.
        let no_api = value_of("DEFERHOOK_NO_API").is_some_and(|(_, v)| v == "true" || v == "1");
        let check_disabled = get(body, "healthcheck")
            .and_then(|(_, _, check)| get(check, "disable"))
            .is_some_and(|(_, value, _)| value == "true");
        if no_api && !check_disabled {
            problems.push(format!(
                "{FILE}: service {name} sets DEFERHOOK_NO_API, so it has no /healthz; \
                 it needs healthcheck: disable: true"
            ));
        }
    }
    if !postgres_healthy {
        problems.push(format!(
            "{FILE}: expected a postgres service with a pg_isready healthcheck"
        ));
    }
    if deferhook_services.len() < 2 {
        problems.push(format!(
            "{FILE}: expected two deferhook services built from the Dockerfile, found \
             {deferhook_services:?}"
        ));
    }
    problems
}

// ---- tests -----------------------------------------------------------------------------

#[test]
fn the_dockerfile_uses_only_documented_flags_and_variables() {
    let help = Help::of_the_binary();
    assert_no_problems(&dockerfile_problems(&read("Dockerfile"), &help));
}

#[test]
fn the_compose_file_uses_only_documented_flags_and_variables() {
    let help = Help::of_the_binary();
    assert_no_problems(&compose_problems(&read("docker-compose.yml"), &help));
}

#[test]
fn the_checks_name_what_is_wrong() {
    let help = Help::of_the_binary();
    let compose: String = read("docker-compose.yml")
        .lines()
        .filter(|line| !line.contains("DEFERHOOK_API_TOKENS:"))
        .map(|line| format!("{line}\n"))
        .collect();
    let compose = compose
        .replacen(
            "DEFERHOOK_LOG_FORMAT: json",
            "DEFERHOOK_LOG_FORMAT: json\n      DEFERHOOK_API_TOKEN: secret",
            1,
        )
        .replacen(
            "command: [\"serve\"]",
            "command: [\"serve\", \"--api-key\", \"x\", \"--listen=0.0.0.0:8080\"]",
            1,
        );
    let problems = compose_problems(&compose, &help).join("\n");
    for expected in [
        "DEFERHOOK_API_TOKEN is not an environment variable",
        "--api-key is not a flag",
        "--listen is `0.0.0.0:8080`",
        "DEFERHOOK_LISTEN is `0.0.0.0:8080`",
    ] {
        assert!(
            problems.contains(expected),
            "{expected:?} not in:\n{problems}"
        );
    }

    let dockerfile = read("Dockerfile")
        .replace("USER 10001:10001", "USER root")
        .replace(
            "ENV DEFERHOOK_LISTEN=127.0.0.1:8080",
            "ENV DEFERHOOK_LISTEN=0.0.0.0:8080 DEFERHOOK_TOKEN=x",
        );
    let problems = dockerfile_problems(&dockerfile, &help).join("\n");
    for expected in [
        "DEFERHOOK_TOKEN is not an environment variable",
        "DEFERHOOK_LISTEN is `0.0.0.0:8080`",
        "USER `root` is root",
    ] {
        assert!(
            problems.contains(expected),
            "{expected:?} not in:\n{problems}"
        );
    }
}
