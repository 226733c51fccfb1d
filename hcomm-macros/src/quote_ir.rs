//! IR values → a Rust expression that rebuilds them (the body of
//! `NAME::SCHEDULE`). Paths go through `::hcomm::__private::hcomm_schedule`,
//! imported as `__ir` at the top of the expression.

use hcomm_schedule::ir;
use proc_macro2::{Literal, TokenStream};
use quote::quote;

/// The expression `{ use ..::ir as __ir; __ir::Schedule { .. } }`.
pub(crate) fn quote_schedule(s: &ir::Schedule) -> TokenStream {
    let value = s.q();
    quote!({
        use ::hcomm::__private::hcomm_schedule::ir as __ir;
        #value
    })
}

/// Tokens rebuilding a value.
trait Q {
    fn q(&self) -> TokenStream;
}

impl Q for String {
    fn q(&self) -> TokenStream {
        let lit = Literal::string(self);
        quote!(::std::string::String::from(#lit))
    }
}

impl Q for bool {
    fn q(&self) -> TokenStream {
        if *self {
            quote!(true)
        } else {
            quote!(false)
        }
    }
}

impl Q for i64 {
    fn q(&self) -> TokenStream {
        let lit = Literal::i64_suffixed(*self);
        quote!(#lit)
    }
}

impl Q for usize {
    fn q(&self) -> TokenStream {
        let lit = Literal::usize_suffixed(*self);
        quote!(#lit)
    }
}

impl<T: Q> Q for Vec<T> {
    fn q(&self) -> TokenStream {
        let items = self.iter().map(Q::q);
        quote!(::std::vec![#(#items),*])
    }
}

impl<T: Q> Q for Option<T> {
    fn q(&self) -> TokenStream {
        if let Some(v) = self {
            let v = v.q();
            quote!(::core::option::Option::Some(#v))
        } else {
            quote!(::core::option::Option::None)
        }
    }
}

impl<T: Q> Q for Box<T> {
    fn q(&self) -> TokenStream {
        let v = (**self).q();
        quote!(::std::boxed::Box::new(#v))
    }
}

impl<A: Q, B: Q> Q for (A, B) {
    fn q(&self) -> TokenStream {
        let (a, b) = (self.0.q(), self.1.q());
        quote!((#a, #b))
    }
}

impl Q for ir::SpanId {
    fn q(&self) -> TokenStream {
        let lit = Literal::u32_suffixed(self.0);
        quote!(__ir::SpanId(#lit))
    }
}

impl Q for ir::Ident {
    fn q(&self) -> TokenStream {
        let (name, span) = (self.name.q(), self.span.q());
        quote!(__ir::Ident { name: #name, span: #span })
    }
}

impl Q for ir::Schedule {
    fn q(&self) -> TokenStream {
        let name = self.name.q();
        let buffers = self.buffers.q();
        let scalars = self.scalars.q();
        let counts = self.counts.q();
        let len_vars = self.len_vars.q();
        let verify = self.verify.q();
        let requires = self.requires.q();
        let postcondition = self.postcondition.q();
        let body = self.body.q();
        let span = self.span.q();
        quote!(__ir::Schedule {
            name: #name,
            buffers: #buffers,
            scalars: #scalars,
            counts: #counts,
            len_vars: #len_vars,
            verify: #verify,
            requires: #requires,
            postcondition: #postcondition,
            body: #body,
            span: #span,
        })
    }
}

impl Q for ir::CountParam {
    fn q(&self) -> TokenStream {
        let (name, matrix, span) = (self.name.q(), self.matrix.q(), self.span.q());
        quote!(__ir::CountParam { name: #name, matrix: #matrix, span: #span })
    }
}

impl Q for ir::CountRef {
    fn q(&self) -> TokenStream {
        let (name, param, span) = (self.name.q(), self.param.q(), self.span.q());
        quote!(__ir::CountRef { name: #name, param: #param, span: #span })
    }
}

impl Q for ir::CountLine {
    fn q(&self) -> TokenStream {
        let count = self.count.q();
        let kind = match &self.kind {
            ir::LineKind::Vector => quote!(__ir::LineKind::Vector),
            ir::LineKind::Row(e) => {
                let e = e.q();
                quote!(__ir::LineKind::Row(#e))
            }
            ir::LineKind::Col(e) => {
                let e = e.q();
                quote!(__ir::LineKind::Col(#e))
            }
        };
        quote!(__ir::CountLine { count: #count, kind: #kind })
    }
}

impl Q for ir::Count {
    fn q(&self) -> TokenStream {
        match self {
            ir::Count::Entry(line, index) => {
                let (l, i) = (line.q(), index.q());
                quote!(__ir::Count::Entry(#l, #i))
            }
            ir::Count::Sum(line, range) => {
                let (l, r) = (line.q(), range.q());
                quote!(__ir::Count::Sum(#l, #r))
            }
        }
    }
}

impl Q for ir::Buffer {
    fn q(&self) -> TokenStream {
        let (name, writable, len, span) = (self.name.q(), self.writable.q(), self.len.q(), self.span.q());
        quote!(__ir::Buffer { name: #name, writable: #writable, len: #len, span: #span })
    }
}

impl Q for ir::Scalar {
    fn q(&self) -> TokenStream {
        let (name, op, span) = (self.name.q(), self.op, self.span.q());
        quote!(__ir::Scalar { name: #name, op: #op, span: #span })
    }
}

impl Q for ir::VerifySpec {
    fn q(&self) -> TokenStream {
        let (world, scalars, span) = (self.world.q(), self.scalars.q(), self.span.q());
        quote!(__ir::VerifySpec { world: #world, scalars: #scalars, span: #span })
    }
}

impl Q for ir::WorldSet {
    fn q(&self) -> TokenStream {
        match self {
            ir::WorldSet::Range { lo, hi, inclusive } => {
                let (lo, hi, inclusive) = (lo.q(), hi.q(), inclusive.q());
                quote!(__ir::WorldSet::Range { lo: #lo, hi: #hi, inclusive: #inclusive })
            }
            ir::WorldSet::List(values) => {
                let values = values.q();
                quote!(__ir::WorldSet::List(#values))
            }
        }
    }
}

impl Q for ir::ScalarRange {
    fn q(&self) -> TokenStream {
        let scalar = self.scalar.q();
        let name = self.name.q();
        let (lo, hi, inclusive, span) = (self.lo.q(), self.hi.q(), self.inclusive.q(), self.span.q());
        quote!(__ir::ScalarRange { scalar: #scalar, name: #name, lo: #lo, hi: #hi, inclusive: #inclusive, span: #span })
    }
}

impl Q for ir::Op {
    fn q(&self) -> TokenStream {
        match self {
            ir::Op::Sum => quote!(__ir::Op::Sum),
            ir::Op::Prod => quote!(__ir::Op::Prod),
            ir::Op::Max => quote!(__ir::Op::Max),
            ir::Op::Min => quote!(__ir::Op::Min),
        }
    }
}

impl Q for ir::OpExpr {
    fn q(&self) -> TokenStream {
        match self {
            ir::OpExpr::Lit(op) => {
                let op = op.q();
                quote!(__ir::OpExpr::Lit(#op))
            }
            ir::OpExpr::Param(i) => quote!(__ir::OpExpr::Param(#i)),
            ir::OpExpr::Name(name) => {
                let name = name.q();
                quote!(__ir::OpExpr::Name(#name))
            }
        }
    }
}

impl Q for ir::Postcondition {
    fn q(&self) -> TokenStream {
        let (kind, span) = (self.kind.q(), self.span.q());
        quote!(__ir::Postcondition { kind: #kind, span: #span })
    }
}

impl Q for ir::PostKind {
    fn q(&self) -> TokenStream {
        match self {
            ir::PostKind::AllGather { input, output } => {
                let (i, o) = (input.q(), output.q());
                quote!(__ir::PostKind::AllGather { input: #i, output: #o })
            }
            ir::PostKind::AllReduce { input, output, op } => {
                let (i, o, op) = (input.q(), output.q(), op.q());
                quote!(__ir::PostKind::AllReduce { input: #i, output: #o, op: #op })
            }
            ir::PostKind::ReduceScatter { input, output, op } => {
                let (i, o, op) = (input.q(), output.q(), op.q());
                quote!(__ir::PostKind::ReduceScatter { input: #i, output: #o, op: #op })
            }
            ir::PostKind::AllToAll { input, output } => {
                let (i, o) = (input.q(), output.q());
                quote!(__ir::PostKind::AllToAll { input: #i, output: #o })
            }
            ir::PostKind::AllGatherV { input, output, counts } => {
                let (i, o, c) = (input.q(), output.q(), counts.q());
                quote!(__ir::PostKind::AllGatherV { input: #i, output: #o, counts: #c })
            }
            ir::PostKind::AllToAllV { input, output, sizes } => {
                let (i, o, c) = (input.q(), output.q(), sizes.q());
                quote!(__ir::PostKind::AllToAllV { input: #i, output: #o, sizes: #c })
            }
            ir::PostKind::Broadcast { buf, root } => {
                let (b, r) = (buf.q(), root.q());
                quote!(__ir::PostKind::Broadcast { buf: #b, root: #r })
            }
            ir::PostKind::Reduce {
                input,
                output,
                op,
                root,
            } => {
                let (i, o, op, r) = (input.q(), output.q(), op.q(), root.q());
                quote!(__ir::PostKind::Reduce { input: #i, output: #o, op: #op, root: #r })
            }
        }
    }
}

impl Q for ir::Stmt {
    fn q(&self) -> TokenStream {
        let (kind, span) = (self.kind.q(), self.span.q());
        quote!(__ir::Stmt { kind: #kind, span: #span })
    }
}

impl Q for ir::StmtKind {
    fn q(&self) -> TokenStream {
        match self {
            ir::StmtKind::Send { region, peer, tag } => {
                let (r, p, t) = (region.q(), peer.q(), tag.q());
                quote!(__ir::StmtKind::Send { region: #r, peer: #p, tag: #t })
            }
            ir::StmtKind::Recv {
                region,
                peer,
                tag,
                reduce,
            } => {
                let (r, p, t, red) = (region.q(), peer.q(), tag.q(), reduce.q());
                quote!(__ir::StmtKind::Recv { region: #r, peer: #p, tag: #t, reduce: #red })
            }
            ir::StmtKind::Isend {
                handle,
                region,
                peer,
                tag,
            } => {
                let (h, r, p, t) = (handle.q(), region.q(), peer.q(), tag.q());
                quote!(__ir::StmtKind::Isend { handle: #h, region: #r, peer: #p, tag: #t })
            }
            ir::StmtKind::Irecv {
                handle,
                region,
                peer,
                tag,
                reduce,
            } => {
                let (h, r, p, t, red) = (handle.q(), region.q(), peer.q(), tag.q(), reduce.q());
                quote!(__ir::StmtKind::Irecv { handle: #h, region: #r, peer: #p, tag: #t, reduce: #red })
            }
            ir::StmtKind::Wait { handles } => {
                let h = handles.q();
                quote!(__ir::StmtKind::Wait { handles: #h })
            }
            ir::StmtKind::Batch { body } => {
                let b = body.q();
                quote!(__ir::StmtKind::Batch { body: #b })
            }
            ir::StmtKind::Copy { src, dst } => {
                let (s, d) = (src.q(), dst.q());
                quote!(__ir::StmtKind::Copy { src: #s, dst: #d })
            }
            ir::StmtKind::Accumulate { src, dst, op } => {
                let (s, d, op) = (src.q(), dst.q(), op.q());
                quote!(__ir::StmtKind::Accumulate { src: #s, dst: #d, op: #op })
            }
            ir::StmtKind::Let { name, value } => {
                let (n, v) = (name.q(), value.q());
                quote!(__ir::StmtKind::Let { name: #n, value: #v })
            }
            ir::StmtKind::Scratch { name, len } => {
                let (n, l) = (name.q(), len.q());
                quote!(__ir::StmtKind::Scratch { name: #n, len: #l })
            }
            ir::StmtKind::For {
                var,
                start,
                end,
                inclusive,
                reverse,
                body,
            } => {
                let (v, s, e) = (var.q(), start.q(), end.q());
                let (i, r, b) = (inclusive.q(), reverse.q(), body.q());
                quote!(__ir::StmtKind::For { var: #v, start: #s, end: #e, inclusive: #i, reverse: #r, body: #b })
            }
            ir::StmtKind::If { branches, else_body } => {
                let (b, e) = (branches.q(), else_body.q());
                quote!(__ir::StmtKind::If { branches: #b, else_body: #e })
            }
            ir::StmtKind::Collective { kind, over } => {
                let (k, o) = (kind.q(), over.q());
                quote!(__ir::StmtKind::Collective { kind: #k, over: #o })
            }
        }
    }
}

impl Q for ir::Collective {
    fn q(&self) -> TokenStream {
        match self {
            ir::Collective::AllReduce { src, dst, op } => {
                let (s, d, op) = (src.q(), dst.q(), op.q());
                quote!(__ir::Collective::AllReduce { src: #s, dst: #d, op: #op })
            }
            ir::Collective::AllGather { src, dst } => {
                let (s, d) = (src.q(), dst.q());
                quote!(__ir::Collective::AllGather { src: #s, dst: #d })
            }
            ir::Collective::ReduceScatter { src, dst, op } => {
                let (s, d, op) = (src.q(), dst.q(), op.q());
                quote!(__ir::Collective::ReduceScatter { src: #s, dst: #d, op: #op })
            }
            ir::Collective::AllToAll { src, dst } => {
                let (s, d) = (src.q(), dst.q());
                quote!(__ir::Collective::AllToAll { src: #s, dst: #d })
            }
            ir::Collective::Broadcast { region, root } => {
                let (r, root) = (region.q(), root.q());
                quote!(__ir::Collective::Broadcast { region: #r, root: #root })
            }
            ir::Collective::Reduce { src, dst, op, root } => {
                let (s, d, op, r) = (src.q(), dst.q(), op.q(), root.q());
                quote!(__ir::Collective::Reduce { src: #s, dst: #d, op: #op, root: #r })
            }
            ir::Collective::AllGatherV { src, dst, counts } => {
                let (s, d, c) = (src.q(), dst.q(), counts.q());
                quote!(__ir::Collective::AllGatherV { src: #s, dst: #d, counts: #c })
            }
            ir::Collective::AllToAllV { src, dst, sizes } => {
                let (s, d, c) = (src.q(), dst.q(), sizes.q());
                quote!(__ir::Collective::AllToAllV { src: #s, dst: #d, sizes: #c })
            }
            ir::Collective::Barrier => quote!(__ir::Collective::Barrier),
        }
    }
}

impl Q for ir::BufRef {
    fn q(&self) -> TokenStream {
        let (name, span) = (self.name.q(), self.span.q());
        let kind = match self.kind {
            ir::BufKind::Param(i) => {
                let i = i.q();
                quote!(__ir::BufKind::Param(#i))
            }
            ir::BufKind::Scratch => quote!(__ir::BufKind::Scratch),
        };
        quote!(__ir::BufRef { name: #name, kind: #kind, span: #span })
    }
}

impl Q for ir::Region {
    fn q(&self) -> TokenStream {
        let span = self.span.q();
        let kind = match &self.kind {
            ir::RegionKind::Whole(buf) => {
                let b = buf.q();
                quote!(__ir::RegionKind::Whole(#b))
            }
            ir::RegionKind::Slice { base, start, end } => {
                let (b, s, e) = (base.q(), start.q(), end.q());
                quote!(__ir::RegionKind::Slice { base: #b, start: #s, end: #e })
            }
            ir::RegionKind::Chunk { base, index, parts } => {
                let (b, i, p) = (base.q(), index.q(), parts.q());
                quote!(__ir::RegionKind::Chunk { base: #b, index: #i, parts: #p })
            }
            ir::RegionKind::Part { base, line, index } => {
                let (b, l, i) = (base.q(), line.q(), index.q());
                quote!(__ir::RegionKind::Part { base: #b, line: #l, index: #i })
            }
        };
        quote!(__ir::Region { kind: #kind, span: #span })
    }
}

impl Q for ir::Expr {
    fn q(&self) -> TokenStream {
        let span = self.span.q();
        let kind = match &self.kind {
            ir::ExprKind::Int(v) => {
                let v = v.q();
                quote!(__ir::ExprKind::Int(#v))
            }
            ir::ExprKind::Name(n) => {
                let text = n.text.q();
                let kind = match n.kind {
                    ir::NameKind::Rank => quote!(__ir::NameKind::Rank),
                    ir::NameKind::World => quote!(__ir::NameKind::World),
                    ir::NameKind::Var => quote!(__ir::NameKind::Var),
                    ir::NameKind::Scalar(i) => {
                        let i = i.q();
                        quote!(__ir::NameKind::Scalar(#i))
                    }
                    ir::NameKind::LenVar(i) => {
                        let i = i.q();
                        quote!(__ir::NameKind::LenVar(#i))
                    }
                };
                quote!(__ir::ExprKind::Name(__ir::Name { kind: #kind, text: #text }))
            }
            ir::ExprKind::Unary(op, x) => {
                let op = match op {
                    ir::UnOp::Neg => quote!(__ir::UnOp::Neg),
                    ir::UnOp::Not => quote!(__ir::UnOp::Not),
                };
                let x = x.q();
                quote!(__ir::ExprKind::Unary(#op, #x))
            }
            ir::ExprKind::Binary(op, a, b) => {
                let op = binop(*op);
                let (a, b) = (a.q(), b.q());
                quote!(__ir::ExprKind::Binary(#op, #a, #b))
            }
            ir::ExprKind::Call(f, args) => {
                let f = match f {
                    ir::Func::Log2 => quote!(__ir::Func::Log2),
                    ir::Func::Pow2 => quote!(__ir::Func::Pow2),
                    ir::Func::IsPow2 => quote!(__ir::Func::IsPow2),
                    ir::Func::Min => quote!(__ir::Func::Min),
                    ir::Func::Max => quote!(__ir::Func::Max),
                };
                let args = args.q();
                quote!(__ir::ExprKind::Call(#f, #args))
            }
            ir::ExprKind::Count(c) => {
                let c = c.q();
                quote!(__ir::ExprKind::Count(#c))
            }
        };
        quote!(__ir::Expr { kind: #kind, span: #span })
    }
}

fn binop(op: ir::BinOp) -> TokenStream {
    match op {
        ir::BinOp::Add => quote!(__ir::BinOp::Add),
        ir::BinOp::Sub => quote!(__ir::BinOp::Sub),
        ir::BinOp::Mul => quote!(__ir::BinOp::Mul),
        ir::BinOp::Div => quote!(__ir::BinOp::Div),
        ir::BinOp::Rem => quote!(__ir::BinOp::Rem),
        ir::BinOp::BitXor => quote!(__ir::BinOp::BitXor),
        ir::BinOp::BitAnd => quote!(__ir::BinOp::BitAnd),
        ir::BinOp::BitOr => quote!(__ir::BinOp::BitOr),
        ir::BinOp::Shl => quote!(__ir::BinOp::Shl),
        ir::BinOp::Shr => quote!(__ir::BinOp::Shr),
        ir::BinOp::Eq => quote!(__ir::BinOp::Eq),
        ir::BinOp::Ne => quote!(__ir::BinOp::Ne),
        ir::BinOp::Lt => quote!(__ir::BinOp::Lt),
        ir::BinOp::Le => quote!(__ir::BinOp::Le),
        ir::BinOp::Gt => quote!(__ir::BinOp::Gt),
        ir::BinOp::Ge => quote!(__ir::BinOp::Ge),
        ir::BinOp::And => quote!(__ir::BinOp::And),
        ir::BinOp::Or => quote!(__ir::BinOp::Or),
    }
}
