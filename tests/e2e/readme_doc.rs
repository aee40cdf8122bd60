//! The README's command table is checked against the real command line,
//! as docs/protocol.md is run by `protocol_doc`: for each row of the table
//! under "The command line", `writegate <subcommand> --help` runs and must
//! exit 0; the positionals the row's usage shows must be the ones of the
//! help's `Usage:` line (none more, no required one left out, none shown
//! optional that is required); every flag the row names (`--find`, `-v`)
//! must be one of the help's options; and values given as `--flag a|b`
//! must be among the help's possible values. Names of positionals may
//! differ (the README's `FILE` is the help's `<PATH>`): their count, order
//! and optionality must not.

use crate::common::{BIN, Tree};

/// The README, from the package directory (`bin/writegate`).
const README: &str = include_str!(concat!(env!("CARGO_MANIFEST_DIR"), "/../../README.md"));

/// One row of the command table.
struct Row {
    /// 1-based line in the README, for messages.
    line: usize,
    /// The subcommand's words (`["service", "install"]`).
    command: Vec<String>,
    /// The positionals of the usage cell, as written (`FILE`, `[SUBCOMMAND]`).
    positionals: Vec<String>,
    /// Every flag the row names, in either cell.
    flags: Vec<String>,
    /// `(flag, value)` for each value a row gives as `--flag a|b|c`.
    values: Vec<(String, String)>,
}

/// The rows of the first table after the `## The command line` heading.
fn rows(readme: &str) -> Vec<Row> {
    let mut lines = readme.lines().enumerate();
    lines
        .by_ref()
        .find(|(_, l)| l.trim() == "## The command line")
        .expect("README has a \"## The command line\" section");
    let mut out = Vec::new();
    for (i, l) in lines
        .skip_while(|(_, l)| !l.starts_with('|'))
        .take_while(|(_, l)| l.starts_with('|'))
    {
        let cells: Vec<&str> = split_cells(l);
        if cells
            .first()
            .is_some_and(|c| *c == "command" || c.starts_with("---"))
        {
            continue;
        }
        assert_eq!(cells.len(), 2, "README line {}: two cells: {l}", i + 1);
        let usage = cells[0]
            .strip_prefix('`')
            .and_then(|u| u.strip_suffix('`'))
            .unwrap_or_else(|| panic!("README line {}: usage in backticks: {l}", i + 1));
        let mut words = usage.split_whitespace();
        assert_eq!(words.next(), Some("writegate"), "README line {}", i + 1);
        let mut command = Vec::new();
        let mut positionals = Vec::new();
        // Leading lowercase words name the subcommand; a word after a flag
        // is that flag's value; any other word is a positional.
        let mut after_flag = false;
        for w in words {
            if w.starts_with('-') {
                after_flag = true;
            } else if w.chars().all(|c| c.is_ascii_lowercase() || c == '-')
                && positionals.is_empty()
            {
                command.push(w.to_string());
            } else if !after_flag {
                positionals.push(w.to_string());
            } else {
                after_flag = false;
            }
        }
        let (mut flags, mut values) = (Vec::new(), Vec::new());
        for span in cells.iter().flat_map(|c| code_spans(c)) {
            flags_of(&span, &mut flags, &mut values);
        }
        out.push(Row {
            line: i + 1,
            command,
            positionals,
            flags,
            values,
        });
    }
    out
}

/// The cells of a table line; `\|` is a `|` inside a cell.
fn split_cells(line: &str) -> Vec<&str> {
    let inner = line.trim().trim_start_matches('|').trim_end_matches('|');
    let mut cells = Vec::new();
    let mut start = 0;
    let bytes = inner.as_bytes();
    for (i, &b) in bytes.iter().enumerate() {
        if b == b'|' && (i == 0 || bytes[i - 1] != b'\\') {
            cells.push(inner[start..i].trim());
            start = i + 1;
        }
    }
    cells.push(inner[start..].trim());
    cells
}

/// The text of every `code span` of a cell, `\|` read as `|`.
fn code_spans(cell: &str) -> Vec<String> {
    cell.split('`')
        .skip(1)
        .step_by(2)
        .map(|s| s.replace("\\|", "|"))
        .collect()
}

/// The flags a code span names (`--line`, `-v`, `--end-line` out of
/// `[--end-line M]`), and the values of a `--flag a|b|c`.
fn flags_of(span: &str, flags: &mut Vec<String>, values: &mut Vec<(String, String)>) {
    let words: Vec<&str> = span
        .split(|c: char| c.is_whitespace() || c == '[' || c == ']')
        .filter(|w| !w.is_empty())
        .collect();
    for (k, w) in words.iter().enumerate() {
        let name = w.trim_start_matches('-');
        let dashes = w.len() - name.len();
        let is_flag = matches!(dashes, 1 | 2)
            && name.starts_with(|c: char| c.is_ascii_alphabetic())
            && name.chars().all(|c| c.is_ascii_alphanumeric() || c == '-')
            && (dashes == 2 || name.len() == 1);
        if !is_flag {
            continue;
        }
        flags.push((*w).to_string());
        if let Some(next) = words.get(k + 1).filter(|n| n.contains('|')) {
            for v in next.split('|') {
                values.push(((*w).to_string(), v.to_string()));
            }
        }
    }
}

/// What `writegate <command> --help` says: its positionals (`<PATH>`,
/// `[AGENT]`, `<COMMAND>...`) and its options' flags.
struct Help {
    text: String,
    positionals: Vec<String>,
    flags: Vec<String>,
}

/// `writegate <command> --help`, or what it printed when it failed.
fn help(t: &Tree, command: &[String]) -> Result<Help, String> {
    let out = t.command().args(command).arg("--help").output().unwrap();
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    if !out.status.success() {
        return Err(format!(
            "`writegate {} --help` failed ({:?}): {}{}",
            command.join(" "),
            out.status,
            text,
            String::from_utf8_lossy(&out.stderr).trim_end()
        ));
    }
    let usage = text
        .lines()
        .find_map(|l| l.strip_prefix("Usage: "))
        .unwrap_or_else(|| panic!("no Usage line:\n{text}"));
    let mut words = usage.split_whitespace();
    assert_eq!(words.next(), Some("writegate"), "{usage}");
    for c in command {
        assert_eq!(words.next(), Some(c.as_str()), "{usage}");
    }
    let positionals = words
        .filter(|w| *w != "[OPTIONS]")
        .map(str::to_string)
        .collect();
    // Flags: the lines of the Options section that start with one.
    let mut flags = Vec::new();
    let mut in_options = false;
    for l in text.lines() {
        if !l.is_empty() && !l.starts_with(' ') {
            in_options = l == "Options:";
            continue;
        }
        if !in_options || !l.trim_start().starts_with('-') {
            continue;
        }
        for w in l.split_whitespace().take_while(|w| w.starts_with('-')) {
            flags.push(w.trim_end_matches(',').trim_end_matches("...").to_string());
        }
    }
    Ok(Help {
        text,
        positionals,
        flags,
    })
}

/// Whether a positional is optional: `[X]` in the README, `[<X>]` or
/// `[X]` in a usage line.
fn optional(p: &str) -> bool {
    p.starts_with('[')
}

/// Every row of the README's command table, against its real `--help`.
#[test]
fn every_row_of_the_readme_command_table_is_what_its_help_says() {
    let t = Tree::new(BIN);
    let rows = rows(README);
    assert!(rows.len() >= 5, "the command table has {} rows", rows.len());
    let mut problems = Vec::new();
    for row in &rows {
        let at = format!(
            "README line {} (`writegate {}`)",
            row.line,
            row.command.join(" ")
        );
        let h = match help(&t, &row.command) {
            Ok(h) => h,
            Err(e) => {
                problems.push(format!("{at}: {e}"));
                continue;
            }
        };
        if row.positionals.len() > h.positionals.len() {
            problems.push(format!(
                "{at}: shows positionals {:?}; --help has {:?}",
                row.positionals, h.positionals
            ));
        }
        for (k, hp) in h.positionals.iter().enumerate() {
            match row.positionals.get(k) {
                None if !optional(hp) => problems.push(format!(
                    "{at}: leaves out the required positional {hp} (--help: {:?})",
                    h.positionals
                )),
                Some(rp) if optional(rp) && !optional(hp) => problems.push(format!(
                    "{at}: shows {rp} as optional; --help requires {hp}"
                )),
                _ => {}
            }
        }
        for f in &row.flags {
            if !h.flags.contains(f) {
                problems.push(format!(
                    "{at}: names {f}, which --help does not list (it has {:?})",
                    h.flags
                ));
            }
        }
        for (f, v) in &row.values {
            let listed = h.text.lines().any(|l| {
                let l = l.trim_start();
                l.strip_prefix("- ")
                    .is_some_and(|rest| rest.starts_with(&format!("{v}:")))
                    || l.contains("[possible values:") && l.split([' ', ',', ']']).any(|w| w == v)
            });
            if !listed {
                problems.push(format!(
                    "{at}: gives {f} the value {v}, which is not among --help's possible values"
                ));
            }
        }
    }
    assert!(problems.is_empty(), "{}", problems.join("\n"));
}
