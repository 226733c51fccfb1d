//! `hcomm-viz SCHEDULE --world 4 [--scalar root=0] [--plan] [-o out.svg]`:
//! draws a schedule the tool knows by name (`--list` names them) as SVG.
//! An operator parameter takes the operator's keyword (`--scalar op=max`).
//! With `--file PATH`, the schedule is one of the `fn` items of that text
//! (the language as between the braces of `comm_schedule! { .. }`); the
//! name may be left out when the file holds one.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use clap::Parser;
use hcomm_schedule::ir::Schedule;
use hcomm_viz::catalog;

/// Draws a `comm_schedule!` schedule at one world size as an SVG space-time
/// diagram (a failing check is drawn too).
#[derive(Debug, Parser)]
#[command(name = "hcomm-viz", version)]
struct Args {
    /// The schedule's name (see `--list`; with `--file`, the name of one of
    /// the file's items, optional when it holds one).
    #[arg(required_unless_present_any = ["list", "file"])]
    schedule: Option<String>,
    /// Reads the schedules from this text file instead of the catalog.
    #[arg(long, conflicts_with = "list")]
    file: Option<PathBuf>,
    /// The number of ranks (1 to 4096).
    #[arg(long, short, default_value_t = 4, value_parser = parse_world, allow_negative_numbers = true)]
    world: i64,
    /// A scalar parameter's value, `NAME=VALUE` (repeatable); every scalar
    /// parameter needs one. An operator parameter's value is `sum`, `prod`,
    /// `max` or `min`.
    #[arg(long = "scalar", short, value_parser = parse_scalar)]
    scalars: Vec<(String, String)>,
    /// Output file (standard output when absent).
    #[arg(long, short)]
    output: Option<PathBuf>,
    /// Draws the device plan (the group calls HCCL and NCCL backends issue)
    /// instead of the checker's simulated order.
    #[arg(long)]
    plan: bool,
    /// Lists the known schedules and exits.
    #[arg(long)]
    list: bool,
}

/// The largest world drawn: a drawing has a row per rank.
const MAX_WORLD: i64 = 4096;

fn parse_world(s: &str) -> Result<i64, String> {
    let world: i64 = s
        .trim()
        .parse()
        .map_err(|_| format!("`{s}` is not a number of ranks"))?;
    if (1..=MAX_WORLD).contains(&world) {
        Ok(world)
    } else {
        Err(format!(
            "a world of {world} ranks cannot be drawn: it needs 1 to {MAX_WORLD} ranks"
        ))
    }
}

/// The hint after a message about the unknown `name`, a sentence of its
/// own: ". hint: did you mean `x`?" when a candidate is close to it, then
/// `also`; nothing when there is neither.
fn hint<'a>(name: &str, candidates: impl IntoIterator<Item = &'a str>, also: &str) -> String {
    let close = hcomm_schedule::resolve::suggest(name, candidates).map(|s| format!("did you mean `{s}`?"));
    let parts: Vec<String> = close
        .into_iter()
        .chain((!also.is_empty()).then(|| also.to_owned()))
        .collect();
    if parts.is_empty() {
        String::new()
    } else {
        format!(". hint: {}", parts.join(" "))
    }
}

fn parse_scalar(s: &str) -> Result<(String, String), String> {
    let (name, value) = s
        .split_once('=')
        .ok_or_else(|| format!("expected NAME=VALUE, got `{s}`"))?;
    Ok((name.trim().to_owned(), value.trim().to_owned()))
}

fn run(args: &Args) -> Result<(), String> {
    if args.list {
        let mut lines = Vec::new();
        for e in catalog::ALL {
            let s = (e.schedule)();
            let scalars: Vec<String> = s
                .scalars
                .iter()
                .map(|x| {
                    if x.op {
                        format!("{} (operator)", x.name)
                    } else {
                        x.name.clone()
                    }
                })
                .collect();
            lines.push(format!(
                "{:<32} {:<9} scalars: {}",
                e.name,
                e.origin.as_str(),
                if scalars.is_empty() {
                    "none".to_owned()
                } else {
                    scalars.join(", ")
                }
            ));
        }
        return print(&format!("{}\n", lines.join("\n")));
    }
    let from_file;
    let s: &Schedule = if let Some(path) = &args.file {
        from_file = read_file(path, args.schedule.as_deref())?;
        &from_file
    } else {
        let name = args.schedule.as_deref().unwrap_or_default();
        catalog::find(name).ok_or_else(|| {
            let hint = hint(
                name,
                catalog::ALL.iter().map(|e| e.name),
                "`hcomm-viz --list` names them",
            );
            format!("no schedule called `{name}`{hint}")
        })?
    };
    let name = s.name.as_str();
    // an unknown name first: a misspelt one explains the missing one
    if let Some((unknown, _)) = args
        .scalars
        .iter()
        .find(|(n, _)| s.scalars.iter().all(|x| x.name != *n))
    {
        let hint = hint(unknown, s.scalars.iter().map(|x| x.name.as_str()), "");
        return Err(format!("`{name}` has no scalar parameter `{unknown}`{hint}"));
    }
    let mut values = Vec::new();
    for sc in &s.scalars {
        let v = args
            .scalars
            .iter()
            .rev()
            .find(|(n, _)| *n == sc.name)
            .ok_or_else(|| format!("`{name}` needs `--scalar {}=VALUE`", sc.name))?;
        values.push(hcomm_viz::scalar_value(sc, &v.1)?);
    }
    let draw = if args.plan {
        hcomm_viz::draw_plan
    } else {
        hcomm_viz::draw
    };
    let svg = draw(s, args.world, &values).map_err(|d| format!("cannot draw `{name}`: {d}"))?;
    if let Some(p) = &args.output {
        std::fs::write(p, svg).map_err(|e| format!("cannot write {}: {e}", p.display()))
    } else {
        print(&format!("{svg}\n"))
    }
}

/// Writes `text` to standard output; a reader that closed it (a pipe into
/// `head`) ends the output quietly, as it does for other commands.
fn print(text: &str) -> Result<(), String> {
    let mut out = std::io::stdout().lock();
    match out.write_all(text.as_bytes()).and_then(|()| out.flush()) {
        Err(e) if e.kind() != std::io::ErrorKind::BrokenPipe => Err(format!("cannot write to standard output: {e}")),
        _ => Ok(()),
    }
}

/// The schedule called `name` of the text file `path` (its only one when
/// `name` is absent).
fn read_file(path: &Path, name: Option<&str>) -> Result<Schedule, String> {
    let text = std::fs::read_to_string(path).map_err(|e| format!("cannot read {}: {e}", path.display()))?;
    let schedules = hcomm_viz::from_text(&text).map_err(|errors| {
        errors
            .iter()
            .map(|e| format!("{}:{e}", path.display()))
            .collect::<Vec<_>>()
            .join("\n")
    })?;
    let names = || {
        schedules
            .iter()
            .map(|s| format!("`{}`", s.name))
            .collect::<Vec<_>>()
            .join(", ")
    };
    match name {
        Some(name) => schedules.iter().find(|s| s.name == name).cloned().ok_or_else(|| {
            let hint = hint(name, schedules.iter().map(|s| s.name.as_str()), "");
            format!(
                "{} has no schedule called `{name}`; it has {}{hint}",
                path.display(),
                names()
            )
        }),
        None if schedules.len() == 1 => Ok(schedules[0].clone()),
        None => Err(format!(
            "{} holds {} schedules: name one of {}",
            path.display(),
            schedules.len(),
            names()
        )),
    }
}

fn main() -> ExitCode {
    let args = Args::parse();
    match run(&args) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("error: {e}");
            ExitCode::FAILURE
        }
    }
}
