//! The command line described as data: every command with its options
//! (long name, the field it fills, whether it takes a value, repeats or is
//! a switch, its help). The Python package's wrappers are generated from it
//! (`scripts/gen_python_api.py`), so a flag is spelled in one place: the
//! `Args` struct of its command.

use clap::{ArgAction, CommandFactory};
use serde::Serialize;

use crate::Cli;

/// One command of the command line.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct CommandSpec {
    /// Its name as typed (`oom-point`).
    pub name: String,
    /// Its one-line description.
    pub about: String,
    /// Whether `vramlab --help` lists it (developer commands are hidden).
    pub listed: bool,
    /// Its arguments in declaration order, positionals first.
    pub args: Vec<ArgSpec>,
}

/// One argument of a command.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ArgSpec {
    /// The field of the command's `Args` struct it fills (`torch_version`);
    /// the Python keyword is this name unless a wrapper renames it.
    pub id: String,
    /// `--torch-version`, or `None` for a positional argument.
    pub long: Option<String>,
    /// How it is given.
    pub kind: ArgKind,
    /// Whether the command refuses to run without it.
    pub required: bool,
    /// The value's name in the help (`SIZE`), if it takes one.
    pub value_name: Option<String>,
    /// The values it accepts, when they are a fixed list.
    pub choices: Vec<String>,
    /// The type its value parses to: `int`, `float`, `path` or `str`
    /// (`None` for a switch).
    pub value_type: Option<&'static str>,
    /// Its default, as the help shows it.
    pub default: Option<String>,
    /// Its help text (first paragraph).
    pub help: String,
}

/// How an argument is given on the command line.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum ArgKind {
    /// A positional value (or several, for a list).
    Positional,
    /// `--flag VALUE`, once.
    Value,
    /// `--flag VALUE`, repeatable: one value per occurrence.
    Repeated,
    /// `--flag`, no value.
    Switch,
}

/// Every command of the command line, in the order `--help` lists them.
pub fn command_table() -> Vec<CommandSpec> {
    let cli = Cli::command();
    cli.get_subcommands()
        .filter(|c| c.get_name() != "command-table")
        .map(|c| CommandSpec {
            name: c.get_name().to_string(),
            about: c.get_about().map(|s| s.to_string()).unwrap_or_default(),
            listed: !c.is_hide_set(),
            args: c
                .get_arguments()
                .filter(|a| !matches!(a.get_id().as_str(), "help" | "version"))
                .map(arg_spec)
                .collect(),
        })
        .collect()
}

fn arg_spec(a: &clap::Arg) -> ArgSpec {
    let kind = if a.is_positional() {
        ArgKind::Positional
    } else {
        match a.get_action() {
            ArgAction::SetTrue | ArgAction::SetFalse | ArgAction::Count => ArgKind::Switch,
            ArgAction::Append => ArgKind::Repeated,
            _ => ArgKind::Value,
        }
    };
    let takes_value = !matches!(kind, ArgKind::Switch);
    ArgSpec {
        id: a.get_id().to_string(),
        long: a.get_long().map(|l| format!("--{l}")),
        kind,
        required: a.is_required_set(),
        value_name: if takes_value {
            a.get_value_names()
                .and_then(|v| v.first())
                .map(|s| s.to_string())
                .or_else(|| Some(a.get_id().to_string().to_uppercase()))
        } else {
            None
        },
        value_type: takes_value.then(|| value_type(a)),
        choices: if takes_value {
            a.get_possible_values()
                .iter()
                .filter(|v| !v.is_hide_set())
                .map(|v| v.get_name().to_string())
                .collect()
        } else {
            Vec::new()
        },
        default: if takes_value {
            let d: Vec<String> = a
                .get_default_values()
                .iter()
                .map(|v| v.to_string_lossy().into_owned())
                .collect();
            (!d.is_empty()).then(|| d.join(","))
        } else {
            None
        },
        help: a
            .get_help()
            .map(|h| h.to_string())
            .unwrap_or_default()
            .split("\n\n")
            .next()
            .unwrap_or_default()
            .to_string(),
    }
}

/// The Python type of an argument's parsed value.
fn value_type(a: &clap::Arg) -> &'static str {
    use std::any::TypeId;
    let id = a.get_value_parser().type_id();
    let ints = [
        TypeId::of::<u8>(),
        TypeId::of::<u16>(),
        TypeId::of::<u32>(),
        TypeId::of::<u64>(),
        TypeId::of::<usize>(),
        TypeId::of::<i32>(),
        TypeId::of::<i64>(),
    ];
    if ints.iter().any(|t| id == *t) {
        "int"
    } else if id == TypeId::of::<f64>() || id == TypeId::of::<f32>() {
        "float"
    } else if id == TypeId::of::<std::path::PathBuf>() {
        "path"
    } else {
        "str"
    }
}

/// `vramlab command-table` (not listed in `--help`): the table as JSON, for
/// `scripts/gen_python_api.py`.
#[derive(Debug, clap::Args)]
pub struct CommandTableArgs {}

/// The command table as pretty JSON (what `vramlab command-table` prints).
pub fn command_table_json() -> String {
    // A table of strings, bools and lists always serialises.
    serde_json::to_string_pretty(&command_table()).unwrap_or_default()
}

/// Prints the command table as JSON.
pub fn run(_: CommandTableArgs) -> anyhow::Result<()> {
    crate::output::write_stdout(&format!("{}\n", command_table_json()));
    Ok(())
}
