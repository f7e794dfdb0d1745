//! The README's headline table is the lab's own output for the command
//! printed beside it (issue 37): this test reads the command from the
//! README's "The tail under real load" section, runs it (in `--sim`, which
//! repeats exactly), and fails when the table under it differs by a
//! character from the summary the lab prints. To update the README after a
//! change that moves the numbers, run the command and paste the table it
//! ends with.

use tower_lb_lab as lab;

const README: &str = include_str!("../../README.md");
const SECTION: &str = "## The tail under real load";

/// The first fenced block of kind `lang` in `text` after byte `from`: its
/// body and where it ends.
fn block<'a>(text: &'a str, lang: &str, from: usize) -> Option<(&'a str, usize)> {
    let open = format!("```{lang}\n");
    let start = text[from..].find(&open)? + from + open.len();
    let len = text[start..].find("```")?;
    Some((&text[start..start + len], start + len + 3))
}

/// The section's command (its `sh` block's `cargo lab` line, comment
/// removed) and the table in the `text` block after it.
fn command_and_table() -> (Vec<String>, String) {
    let at = README
        .find(SECTION)
        .unwrap_or_else(|| panic!("README.md has no \"{SECTION}\" section"));
    let end = README[at + SECTION.len()..]
        .find("\n## ")
        .map_or(README.len(), |e| at + SECTION.len() + e);
    let section = &README[..end];
    let (sh, after) = block(section, "sh", at).expect("a ```sh block with the command");
    let line = sh
        .lines()
        .find(|l| l.starts_with("cargo lab "))
        .expect("a `cargo lab` line in the ```sh block");
    let line = line.split(" #").next().unwrap_or(line);
    let args: Vec<String> = line
        .trim_start_matches("cargo lab ")
        .split_whitespace()
        .map(String::from)
        .collect();
    let (table, _) = block(section, "text", after).expect("a ```text block after the command");
    (args, table.to_string())
}

#[test]
fn the_readme_headline_table_is_the_labs_output_for_its_command() {
    let (mut args, readme) = command_and_table();
    assert!(
        args.iter().any(|a| a == "--sim"),
        "the headline's command runs in --sim, which repeats exactly: {args:?}"
    );
    args.extend(["--quiet", "--report", "none"].map(String::from));
    let runs = lab::runs(&args).expect("the README's command runs");
    let [one] = runs.as_slice() else {
        panic!("the README's command makes one table, not {}", runs.len());
    };
    let printed = one.summary.table();
    assert!(
        printed == readme,
        "README.md's headline table is not what `cargo lab {}` prints; paste this:\n\n{printed}\nREADME.md has:\n\n{readme}",
        args.join(" ")
    );
}
