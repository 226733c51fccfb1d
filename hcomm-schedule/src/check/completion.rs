//! Step 6: every request is waited exactly once, by name while its handle
//! is in scope or by a later `wait all` (the unroller records the problems;
//! this turns them into diagnostics).

use crate::diag::{stmt_key, DiagKind, Diagnostic, Sink};
use crate::trace::{RequestIssue, Unrolled};

/// Returns the step-6 diagnostics.
pub(crate) fn check(un: &Unrolled<'_, '_>) -> Vec<Diagnostic> {
    let mut sink = Sink::default();
    for (r, t) in un.ranks.iter().enumerate() {
        let r = r as u32;
        for issue in &t.issues {
            match issue {
                RequestIssue::Unknown {
                    stmt,
                    ctx,
                    name,
                    waited,
                } => {
                    let why = if *waited {
                        "which was already waited"
                    } else {
                        "which no `isend` or `irecv` in scope defines"
                    };
                    let d = Diagnostic::new(
                        DiagKind::UnknownRequest,
                        un.span(*stmt),
                        format!("{}, rank {r} waits for `{name}`, {why}", un.at(r, *stmt, *ctx)),
                    )
                    .with_hint(
                        "each `let h = isend ..` / `irecv ..` is waited exactly once: by name in the block that defines it, or by a later `wait all`",
                    );
                    sink.push(stmt_key(*stmt), d);
                }
                RequestIssue::Unwaited { op } => {
                    let Some(o) = t.ops.get(*op as usize) else {
                        continue;
                    };
                    let h = un.prog.handle_names.get(o.handle as usize).copied().unwrap_or("?");
                    let (kw, dir) = if o.send { ("isend", "to") } else { ("irecv", "from") };
                    let d = Diagnostic::new(
                        DiagKind::UnwaitedRequest,
                        un.span(o.stmt),
                        format!(
                            "{}, rank {r}'s `{kw}` {dir} rank {} (`{h}`) is never waited",
                            un.at(r, o.stmt, o.ctx),
                            o.peer
                        ),
                    )
                    .with_hint(format!(
                        "add `wait {h};` before the end of the block that defines `{h}`, or `wait all;` after it"
                    ));
                    sink.push(stmt_key(o.stmt), d);
                }
            }
            if sink.is_full() {
                return sink.into_vec();
            }
        }
    }
    sink.into_vec()
}
