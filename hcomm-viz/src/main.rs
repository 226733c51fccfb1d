//! `hcomm-viz SCHEDULE --world 4 [--scalar root=0] [--plan] [-o out.svg]`:
//! draws a schedule the tool knows by name (`--list` names them) as SVG.
//! An operator parameter takes the operator's keyword (`--scalar op=max`).

use std::path::PathBuf;
use std::process::ExitCode;

use clap::Parser;
use hcomm_viz::catalog;

/// Draws a `comm_schedule!` schedule at one world size as an SVG space-time
/// diagram (a failing check is drawn too).
#[derive(Debug, Parser)]
#[command(name = "hcomm-viz", version)]
struct Args {
    /// The schedule's name (see `--list`).
    #[arg(required_unless_present = "list")]
    schedule: Option<String>,
    /// The number of ranks.
    #[arg(long, short, default_value_t = 4)]
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

fn parse_scalar(s: &str) -> Result<(String, String), String> {
    let (name, value) = s
        .split_once('=')
        .ok_or_else(|| format!("expected NAME=VALUE, got `{s}`"))?;
    Ok((name.trim().to_owned(), value.trim().to_owned()))
}

fn run(args: &Args) -> Result<(), String> {
    if args.list {
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
            println!(
                "{:<32} {:<9} scalars: {}",
                e.name,
                e.origin.as_str(),
                scalars.join(", ")
            );
        }
        return Ok(());
    }
    let name = args.schedule.as_deref().unwrap_or_default();
    let s = catalog::find(name).ok_or_else(|| format!("no schedule called `{name}`; `hcomm-viz --list` names them"))?;
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
    if let Some((unknown, _)) = args
        .scalars
        .iter()
        .find(|(n, _)| s.scalars.iter().all(|x| x.name != *n))
    {
        return Err(format!("`{name}` has no scalar parameter `{unknown}`"));
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
        println!("{svg}");
        Ok(())
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
