//! Schedules printed in the language's syntax, for failure messages.

use std::fmt::Write as _;

use hcomm_schedule::ir::{Collective as C, Expr, OpExpr, Schedule, Stmt, StmtKind as K};

/// The schedule in the language's syntax (for failure messages).
pub fn render(s: &Schedule) -> String {
    fn tag(t: Option<&Expr>) -> String {
        t.map(|t| format!(" tag {t}")).unwrap_or_default()
    }
    /// Generated schedules write operators as keywords; a parameter is
    /// shown by its scalar index.
    fn op_text(o: &OpExpr) -> String {
        match o {
            OpExpr::Lit(op) => op.as_str().to_owned(),
            OpExpr::Param(i) => format!("scalar{i}"),
            OpExpr::Name(name) => name.name.clone(),
        }
    }
    fn red(r: Option<&OpExpr>) -> String {
        r.map(|o| format!(" reduce {}", op_text(o))).unwrap_or_default()
    }
    fn block(body: &[Stmt], depth: usize, out: &mut String) {
        let pad = "    ".repeat(depth);
        for st in body {
            let line = match &st.kind {
                K::Send { region, peer, tag: t } => format!("send {region} to {peer}{};", tag(t.as_ref())),
                K::Recv {
                    region,
                    peer,
                    tag: t,
                    reduce,
                } => format!("recv {region} from {peer}{}{};", tag(t.as_ref()), red(reduce.as_ref())),
                K::Isend {
                    handle,
                    region,
                    peer,
                    tag: t,
                } => format!("let {} = isend {region} to {peer}{};", handle.name, tag(t.as_ref())),
                K::Irecv {
                    handle,
                    region,
                    peer,
                    tag: t,
                    reduce,
                } => format!(
                    "let {} = irecv {region} from {peer}{}{};",
                    handle.name,
                    tag(t.as_ref()),
                    red(reduce.as_ref())
                ),
                K::Wait { handles } => format!(
                    "wait {};",
                    handles.iter().map(|h| h.name.as_str()).collect::<Vec<_>>().join(", ")
                ),
                K::WaitAll => "wait all;".to_owned(),
                K::Copy { src, dst } => format!("copy {src} -> {dst};"),
                K::Accumulate { src, dst, op } => format!("accumulate {src} -> {dst}, {};", op_text(op)),
                K::Let { name, value } => format!("let {} = {value};", name.name),
                K::Scratch { name, len } => format!("let {} = scratch[T; {len}];", name.name),
                K::Batch { body } => {
                    let _ = writeln!(out, "{pad}batch {{");
                    block(body, depth + 1, out);
                    let _ = writeln!(out, "{pad}}}");
                    continue;
                }
                K::For {
                    var,
                    start,
                    end,
                    inclusive,
                    reverse,
                    body,
                } => {
                    let dots = if *inclusive { "..=" } else { ".." };
                    let range = if *reverse {
                        format!("({start}{dots}{end}).rev()")
                    } else {
                        format!("{start}{dots}{end}")
                    };
                    let _ = writeln!(out, "{pad}for {} in {range} {{", var.name);
                    block(body, depth + 1, out);
                    let _ = writeln!(out, "{pad}}}");
                    continue;
                }
                K::If { branches, else_body } => {
                    for (i, (c, b)) in branches.iter().enumerate() {
                        let kw = if i == 0 { "if" } else { "} else if" };
                        let _ = writeln!(out, "{pad}{kw} {c} {{");
                        block(b, depth + 1, out);
                    }
                    if let Some(b) = else_body {
                        let _ = writeln!(out, "{pad}}} else {{");
                        block(b, depth + 1, out);
                    }
                    let _ = writeln!(out, "{pad}}}");
                    continue;
                }
                K::Collective { kind, over } => {
                    let call = match kind {
                        C::AllReduce { src, dst: None, op } => format!("all_reduce({src}, {})", op_text(op)),
                        C::AllReduce { src, dst: Some(d), op } => format!("all_reduce({src} -> {d}, {})", op_text(op)),
                        C::AllGather { src, dst } => format!("all_gather({src} -> {dst})"),
                        C::ReduceScatter { src, dst, op } => {
                            format!("reduce_scatter({src} -> {dst}, {})", op_text(op))
                        }
                        C::AllToAll { src, dst } => format!("all_to_all({src} -> {dst})"),
                        C::Broadcast { region, root } => format!("broadcast({region}, root = {root})"),
                        C::Reduce { src, dst, op, root } => {
                            format!("reduce({src} -> {dst}, {}, root = {root})", op_text(op))
                        }
                        C::AllGatherV { src, dst, counts } => format!("all_gatherv({src} -> {dst}, {})", counts.name),
                        C::AllToAllV { src, dst, sizes } => format!("all_to_allv({src} -> {dst}, {})", sizes.name),
                        C::Barrier => "barrier".to_owned(),
                    };
                    match over {
                        Some(o) => format!("{call} over {o};"),
                        None => format!("{call};"),
                    }
                }
            };
            let _ = writeln!(out, "{pad}{line}");
        }
    }
    let mut out = format!(
        "fn {}(inp: &[T; n * world], out: &mut [T; n * world], acc: &mut [T; n * world]) {{\n",
        s.name
    );
    block(&s.body, 1, &mut out);
    out.push('}');
    out
}
