//! A read-only walk over the IR: [`Visitor`] has one method per kind of
//! node, each defaulting to the matching `walk_*` function, which visits
//! the node's children in source order. Override the methods for the nodes
//! of interest and call the `walk_*` function to go on below them.
//!
//! A new statement or region shape changes the walk here, and the visitors
//! that care about it; the others keep working.
//!
//! ```
//! use hcomm_schedule::ir::visit::{self, Visitor};
//! use hcomm_schedule::ir::{Expr, ExprKind, Schedule};
//!
//! /// The integer literals of a schedule.
//! struct Literals(Vec<i64>);
//!
//! impl Visitor<'_> for Literals {
//!     fn visit_expr(&mut self, e: &Expr) {
//!         if let ExprKind::Int(v) = e.kind {
//!             self.0.push(v);
//!         }
//!         visit::walk_expr(self, e);
//!     }
//! }
//! # let _ = |s: &Schedule| { let mut l = Literals(Vec::new()); l.visit_schedule(s); l.0 };
//! ```

use std::collections::HashMap;

use super::{Collective, Count, CountLine, Expr, ExprKind, LineKind, Region, RegionKind, Schedule, Stmt, StmtKind};

/// Visits IR nodes borrowed for `'a`; every method defaults to its walk.
pub trait Visitor<'a> {
    /// A whole schedule: buffer lengths, `#[requires]`, scalar ranges, then
    /// the body.
    fn visit_schedule(&mut self, s: &'a Schedule) {
        walk_schedule(self, s);
    }

    /// A block (the body, a loop body, a branch, a `batch`).
    fn visit_block(&mut self, body: &'a [Stmt]) {
        walk_block(self, body);
    }

    /// A statement.
    fn visit_stmt(&mut self, stmt: &'a Stmt) {
        walk_stmt(self, stmt);
    }

    /// A collective statement's call (its `over` expression is visited by
    /// [`walk_stmt`] after it).
    fn visit_collective(&mut self, c: &'a Collective) {
        walk_collective(self, c);
    }

    /// A region.
    fn visit_region(&mut self, r: &'a Region) {
        walk_region(self, r);
    }

    /// An integer expression.
    fn visit_expr(&mut self, e: &'a Expr) {
        walk_expr(self, e);
    }
}

/// Visits the buffer lengths, `#[requires]` conditions, scalar ranges and
/// the body of `s`.
pub fn walk_schedule<'a, V: Visitor<'a> + ?Sized>(v: &mut V, s: &'a Schedule) {
    for b in &s.buffers {
        v.visit_expr(&b.len);
    }
    for e in &s.requires {
        v.visit_expr(e);
    }
    for r in &s.verify.scalars {
        v.visit_expr(&r.lo);
        v.visit_expr(&r.hi);
    }
    v.visit_block(&s.body);
}

/// Visits each statement of `body` in order.
pub fn walk_block<'a, V: Visitor<'a> + ?Sized>(v: &mut V, body: &'a [Stmt]) {
    for stmt in body {
        v.visit_stmt(stmt);
    }
}

/// Visits the regions, expressions and blocks of `stmt` in source order.
pub fn walk_stmt<'a, V: Visitor<'a> + ?Sized>(v: &mut V, stmt: &'a Stmt) {
    match &stmt.kind {
        StmtKind::Send { region, peer, tag }
        | StmtKind::Recv { region, peer, tag, .. }
        | StmtKind::Isend { region, peer, tag, .. }
        | StmtKind::Irecv { region, peer, tag, .. } => {
            v.visit_region(region);
            v.visit_expr(peer);
            if let Some(t) = tag {
                v.visit_expr(t);
            }
        }
        StmtKind::Wait { .. } | StmtKind::WaitAll => {}
        StmtKind::Batch { body } => v.visit_block(body),
        StmtKind::Copy { src, dst } | StmtKind::Accumulate { src, dst, .. } => {
            v.visit_region(src);
            v.visit_region(dst);
        }
        StmtKind::Let { value: e, .. } | StmtKind::Scratch { len: e, .. } => v.visit_expr(e),
        StmtKind::For { start, end, body, .. } => {
            v.visit_expr(start);
            v.visit_expr(end);
            v.visit_block(body);
        }
        StmtKind::If { branches, else_body } => {
            for (cond, body) in branches {
                v.visit_expr(cond);
                v.visit_block(body);
            }
            if let Some(body) = else_body {
                v.visit_block(body);
            }
        }
        StmtKind::Collective { kind, over } => {
            v.visit_collective(kind);
            if let Some(o) = over {
                v.visit_expr(o);
            }
        }
    }
}

/// Visits the regions and expressions of a collective call.
pub fn walk_collective<'a, V: Visitor<'a> + ?Sized>(v: &mut V, c: &'a Collective) {
    match c {
        Collective::AllReduce { src, dst, .. } => {
            v.visit_region(src);
            if let Some(d) = dst {
                v.visit_region(d);
            }
        }
        Collective::AllGather { src, dst }
        | Collective::ReduceScatter { src, dst, .. }
        | Collective::AllToAll { src, dst }
        | Collective::AllGatherV { src, dst, .. }
        | Collective::AllToAllV { src, dst, .. } => {
            v.visit_region(src);
            v.visit_region(dst);
        }
        Collective::Broadcast { region, root } => {
            v.visit_region(region);
            v.visit_expr(root);
        }
        Collective::Reduce { src, dst, root, .. } => {
            v.visit_region(src);
            v.visit_region(dst);
            v.visit_expr(root);
        }
        Collective::Barrier => {}
    }
}

/// Visits the base and the bounds of a region.
pub fn walk_region<'a, V: Visitor<'a> + ?Sized>(v: &mut V, r: &'a Region) {
    match &r.kind {
        RegionKind::Whole(_) => {}
        RegionKind::Slice { base, start, end } => {
            v.visit_region(base);
            v.visit_expr(start);
            v.visit_expr(end);
        }
        RegionKind::Chunk { base, index, parts } => {
            v.visit_region(base);
            v.visit_expr(index);
            if let Some(p) = parts {
                v.visit_expr(p);
            }
        }
        RegionKind::Part { base, line, index } => {
            v.visit_region(base);
            walk_line(v, line);
            v.visit_expr(index);
        }
    }
}

/// Visits the operands of an expression (and of its count lines).
pub fn walk_expr<'a, V: Visitor<'a> + ?Sized>(v: &mut V, e: &'a Expr) {
    match &e.kind {
        ExprKind::Int(_) | ExprKind::Name(_) => {}
        ExprKind::Unary(_, a) => v.visit_expr(a),
        ExprKind::Binary(_, a, b) => {
            v.visit_expr(a);
            v.visit_expr(b);
        }
        ExprKind::Call(_, args) => {
            for a in args {
                v.visit_expr(a);
            }
        }
        ExprKind::Count(Count::Entry(line, i)) => {
            walk_line(v, line);
            v.visit_expr(i);
        }
        ExprKind::Count(Count::Sum(line, range)) => {
            walk_line(v, line);
            if let Some((a, b)) = range {
                v.visit_expr(a);
                v.visit_expr(b);
            }
        }
    }
}

/// Visits the row or column expression of a count line.
fn walk_line<'a, V: Visitor<'a> + ?Sized>(v: &mut V, line: &'a CountLine) {
    match &line.kind {
        LineKind::Vector => {}
        LineKind::Row(e) | LineKind::Col(e) => v.visit_expr(e),
    }
}

/// The call site of every `over` collective of `body`, by the statement's
/// address, numbered in source order: the numbering of the generated code
/// and of `hcomm::checker`'s runs, which both key subgroups by it.
pub fn over_sites(body: &[Stmt]) -> HashMap<usize, u32> {
    struct Sites(HashMap<usize, u32>);
    impl<'a> Visitor<'a> for Sites {
        fn visit_stmt(&mut self, stmt: &'a Stmt) {
            if let StmtKind::Collective { over: Some(_), .. } = &stmt.kind {
                let next = u32::try_from(self.0.len()).unwrap_or(u32::MAX);
                self.0.insert(std::ptr::from_ref(stmt) as usize, next);
            }
            walk_stmt(self, stmt);
        }
    }
    let mut sites = Sites(HashMap::new());
    sites.visit_block(body);
    sites.0
}
