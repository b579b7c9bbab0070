//! Flags whose values are secrets say, in `serve --help`, to prefer their environment
//! variable (issue #15 part 5.8): a flag's value shows in the process list.

use std::process::Command;

/// The paragraph of `deferhook serve --help` that documents `flag`.
fn help_of(flag: &str) -> String {
    let output = Command::new(env!("CARGO_BIN_EXE_deferhook"))
        .args(["serve", "--help"])
        .output()
        .expect("the binary runs");
    let text = String::from_utf8(output.stdout).unwrap();
    let start = text
        .find(&format!("      {flag} "))
        .unwrap_or_else(|| panic!("{flag} is documented:\n{text}"));
    let rest = &text[start..];
    let end = ["\n      -", "\n  -"]
        .iter()
        .filter_map(|next| rest[1..].find(next))
        .min()
        .map_or(rest.len(), |at| at + 1);
    rest[..end].to_owned()
}

#[test]
fn secret_flags_say_to_prefer_the_environment() {
    for (flag, variable) in [
        ("--api-token", "DEFERHOOK_API_TOKENS"),
        ("--secret-key", "DEFERHOOK_SECRET_KEY"),
    ] {
        let help = help_of(flag);
        assert!(help.contains("process list"), "{flag}:\n{help}");
        assert!(help.contains(variable), "{flag}:\n{help}");
    }
}
