//! The hint of a peer outside `0..world` (reference, section 8): `% world`
//! where a ring is clearly meant, a guard where the statement already stands
//! under one or where wrapping would turn a chain into a ring, a guard or a
//! `#[requires]` for a partner that the world size does not provide.

use crate::ir::visit::{self, Visitor};
use crate::ir::{BinOp, Expr, ExprKind, Func, NameKind, Stmt, StmtKind};
use crate::situation::Situation;

const WRAP: &str = "wrap the peer with `% world` (`%` is Euclidean, so `(rank - 1) % world` wraps too)";

/// How a peer is formed.
#[derive(PartialEq)]
enum PeerShape {
    /// `rank ± k` and the like: a ring's or a chain's neighbour.
    Neighbour,
    /// `rank ^ d`, `rank + pow2(k)`, `.. % m`: a partner that only some
    /// world sizes have (or one already wrapped).
    Partner,
    /// A name: either.
    Unknown,
}

fn peer_shape(e: &Expr) -> PeerShape {
    fn doubling(e: &Expr) -> bool {
        match &e.kind {
            ExprKind::Binary(op, a, b) => {
                matches!(op, BinOp::BitXor | BinOp::Shl | BinOp::Mul | BinOp::Rem) || doubling(a) || doubling(b)
            }
            ExprKind::Unary(_, a) => doubling(a),
            ExprKind::Call(f, args) => matches!(f, Func::Pow2) || args.iter().any(doubling),
            ExprKind::Int(_) | ExprKind::Name(_) | ExprKind::Count(_) => false,
        }
    }
    fn reads_rank(e: &Expr) -> bool {
        match &e.kind {
            ExprKind::Binary(_, a, b) => reads_rank(a) || reads_rank(b),
            ExprKind::Unary(_, a) => reads_rank(a),
            ExprKind::Call(_, args) => args.iter().any(reads_rank),
            ExprKind::Name(n) => n.kind == NameKind::Rank,
            ExprKind::Int(_) | ExprKind::Count(_) => false,
        }
    }
    if doubling(e) {
        PeerShape::Partner
    } else if reads_rank(e) {
        PeerShape::Neighbour
    } else {
        PeerShape::Unknown
    }
}

/// What the schedule says around one peer expression: the conditions of
/// the `if` branches the statement stands in (`None` for an `else`), and
/// whether another point-to-point statement wraps its peer with `% world`.
struct Context<'a> {
    target: &'a Expr,
    stack: Vec<Option<&'a Expr>>,
    guards: Option<Vec<Option<&'a Expr>>>,
    wrapped_elsewhere: bool,
}

fn wraps_with_world(e: &Expr) -> bool {
    matches!(&e.kind, ExprKind::Binary(BinOp::Rem, _, m)
        if matches!(&m.kind, ExprKind::Name(n) if n.kind == NameKind::World))
}

impl<'a> Visitor<'a> for Context<'a> {
    fn visit_stmt(&mut self, stmt: &'a Stmt) {
        match &stmt.kind {
            StmtKind::Send { peer, .. }
            | StmtKind::Recv { peer, .. }
            | StmtKind::Isend { peer, .. }
            | StmtKind::Irecv { peer, .. } => {
                if std::ptr::eq(peer, self.target) {
                    self.guards = Some(self.stack.clone());
                } else if wraps_with_world(peer) {
                    self.wrapped_elsewhere = true;
                }
            }
            StmtKind::If { branches, else_body } => {
                for (cond, body) in branches {
                    self.stack.push(Some(cond));
                    self.visit_block(body);
                    self.stack.pop();
                }
                if let Some(body) = else_body {
                    self.stack.push(None);
                    self.visit_block(body);
                    self.stack.pop();
                }
            }
            _ => visit::walk_stmt(self, stmt),
        }
    }
}

/// A rank or a peer as a user reads it at any world size: `world - 1`,
/// `world`, `world + 1` near the top, the number itself near the bottom.
fn relative(v: i64, world: i64) -> String {
    if v >= world {
        if v == world {
            "world".to_owned()
        } else {
            format!("world + {}", v - world)
        }
    } else if v >= 0 && 2 * v >= world {
        format!("world - {}", world - v)
    } else {
        v.to_string()
    }
}

/// The hint of a peer `peer` outside `0..world` that rank `rank` computed
/// from `written`.
pub(crate) fn peer_hint(sit: &Situation<'_>, rank: u32, send: bool, peer: i64, written: Option<&Expr>) -> String {
    let Some(e) = written else {
        return WRAP.to_owned();
    };
    let mut cx = Context {
        target: e,
        stack: Vec::new(),
        guards: None,
        wrapped_elsewhere: false,
    };
    cx.visit_block(&sit.prog.s.body);
    let w = sit.world;
    let bound = if peer >= w {
        format!("{e} < world")
    } else {
        format!("{e} >= 0")
    };
    let requires = if sit.prog.s.requires.is_empty() {
        "limit the world sizes with `#[requires(..)]` (e.g. `#[requires(is_pow2(world))]`)".to_owned()
    } else {
        format!("tighten the schedule's `#[requires]`, which lets world = {w} through")
    };
    let verb = if send { "sends to" } else { "receives from" };
    let who = format!(
        "rank {} {verb} rank {}",
        relative(i64::from(rank), w),
        relative(peer, w)
    );
    let guards = cx.guards.unwrap_or_default();
    if let Some(&innermost) = guards.last() {
        // the statement is guarded already: the guard is what lets the
        // rank through, so it is what to change
        let guard = innermost.map_or_else(|| "the enclosing `else`".to_owned(), |c| format!("the guard `if {c}`"));
        return format!("{who}, which {guard} lets through: exclude it with `{bound}` in the guard");
    }
    match peer_shape(e) {
        PeerShape::Neighbour if cx.wrapped_elsewhere => WRAP.to_owned(),
        PeerShape::Neighbour => format!(
            "{who}: for a chain or pipeline, guard the statement (`if {bound} {{ .. }}`); for a ring, {WRAP}"
        ),
        PeerShape::Partner => format!(
            "rank {rank} has no partner `{e}` at world = {w}: guard the statement (`if {bound} {{ .. }}`), or {requires}"
        ),
        PeerShape::Unknown => format!(
            "{WRAP}; if rank {rank} has no partner at world = {w}, guard the statement (`if {bound} {{ .. }}`), or {requires}"
        ),
    }
}
