//! The phases of one item, and IR → the generated function and its
//! `NAME::SCHEDULE` static.
//!
//! The generated function reaches the runtime only through `::hcomm::__private`
//! (imported as `__hp`; its signature names `::hcomm::{Comm, Element, Result}`):
//! the body runs inside `Exec::run(comm, &NAME::SCHEDULE, move |__x| { .. })`,
//! one plain call per step. Every local it introduces starts with `__`; the user's `let`s and loop variables
//! become `__v_NAME` (carrying the user's span), handles `__h_NAME`, scratch
//! buffers `__b_NAME`, parameters' buffer indices `__pI`, scalars `__sI`,
//! length variables `__lenI`. Expansion is infallible: everything it relies on
//! was checked by the phases before it.

use hcomm_schedule::ir;
use hcomm_schedule::syntax::{self, Front, Input, Item, Param, ParamKind, SpanTable};
use proc_macro2::{Ident, Literal, Span, TokenStream};
use quote::{format_ident, quote, quote_spanned};

/// Every item of the invocation: its function and static, or its errors and
/// the fallback item.
pub(crate) fn schedule(ast: &Input) -> TokenStream {
    ast.items
        .iter()
        .map(|item| compile(item).unwrap_or_else(|e| fallback(item, &e)))
        .collect()
}

/// [`phases`], with a panic anywhere below (a bug, in this crate or in the
/// checker) turned into a compile error instead of a crashed macro.
pub(crate) fn compile(item: &Item) -> syn::Result<TokenStream> {
    std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| phases(item))).unwrap_or_else(|_| {
        Err(syn::Error::new(
            item.name.span(),
            "internal error: the `comm_schedule!` checker failed on this schedule; please report it",
        ))
    })
}

/// Parse the body and attributes, lower, resolve, check (all in
/// `hcomm_schedule::syntax`), expand.
pub(crate) fn phases(item: &Item) -> syn::Result<TokenStream> {
    let front = syntax::front(item).map_err(|r| r.to_syn())?;
    syntax::check(&front).map_err(|r| r.to_syn())?;
    reparses(item, &front)?;
    Ok(expand(item, &front))
}

/// Checks that the item's source text (`NAME::SOURCE`, which the generated
/// `NAME::SCHEDULE` parses at run time) gives back the IR checked here, so
/// what runs is what was checked.
fn reparses(item: &Item, front: &Front) -> syn::Result<()> {
    let again = syntax::parse_str(&item.source())
        .ok()
        .and_then(|input| input.items.into_iter().next())
        .and_then(|item| syntax::front(&item).ok());
    if again.is_some_and(|again| again.ir == front.ir && again.len_bindings == front.len_bindings) {
        return Ok(());
    }
    Err(syn::Error::new(
        item.name.span(),
        "internal error: the text of this schedule does not parse back into the schedule checked; please report it",
    ))
}

/// `VIS fn NAME<T: Element>(comm: &Comm, a: &[T], ..) -> Result<()>`, or
/// `VIS fn NAME(comm: &Comm, ..)` without a buffer parameter (see
/// [`Item::is_generic`]).
pub(crate) fn signature(item: &Item) -> TokenStream {
    let vis = &item.vis;
    let name = &item.name;
    let params = item.params.iter().map(|p| {
        let name = &p.name;
        match p.kind {
            ParamKind::Buffer { mutable: true } => quote!(#name: &mut (impl ::hcomm::BufferMut<Elem = T> + ?Sized)),
            ParamKind::Buffer { mutable: false } => quote!(#name: &(impl ::hcomm::Buffer<Elem = T> + ?Sized)),
            ParamKind::Scalar => quote!(#name: usize),
            ParamKind::Op => quote!(#name: ::hcomm::ReduceOp),
            ParamKind::Counts { .. } => quote!(#name: &[usize]),
        }
    });
    let generics = item.is_generic().then(|| quote!(<T: ::hcomm::Element>));
    quote! {
        #vis fn #name #generics (comm: &::hcomm::Comm #(, #params)*) -> ::hcomm::Result<()>
    }
}

/// `VIS mod NAME { pub static SCHEDULE: LazyLock<Schedule> = LazyLock::new(|| INIT); }`,
/// hidden from rustdoc: the function's own page names it ([`companion_doc`]),
/// so a module of schedules documents each schedule once.
pub(crate) fn schedule_module(item: &Item, init: &TokenStream) -> TokenStream {
    let vis = &item.vis;
    let name = &item.name;
    let mod_doc = format!("The checked schedule of `{name}`.");
    let static_doc = format!(
        "The IR of `{name}`, as checked at compile time (parsed from [`SOURCE`] at first use); used for run-time verification, tracing and drawing."
    );
    let source_doc = format!("The source text of `{name}`, which `hcomm::checker::parse_schedules` reads too.");
    let source = item.source();
    quote! {
        #[doc = #mod_doc]
        #[doc(hidden)]
        #vis mod #name {
            #[doc = #source_doc]
            #[allow(dead_code)]
            pub const SOURCE: &str = #source;
            #[doc = #static_doc]
            #[allow(dead_code)]
            pub static SCHEDULE: ::std::sync::LazyLock<::hcomm::__private::hcomm_schedule::ir::Schedule> =
                ::std::sync::LazyLock::new(|| #init);
        }
    }
}

/// The paragraph appended to the function's doc comments that names its
/// companion items (hidden from rustdoc, see [`schedule_module`]).
fn companion_doc(item: &Item) -> String {
    let name = &item.name;
    format!(
        "\n\nChecked by `comm_schedule!`: `{name}::SCHEDULE` is its IR (run-time verification, tracing, drawing) and `{name}::SOURCE` its text."
    )
}

fn expand(item: &Item, front: &Front) -> TokenStream {
    let (ir, docs, len_bindings) = (&front.ir, &front.passthrough, &front.len_bindings);
    let name = &item.name;
    let signature = signature(item);
    // Scalars as i64 (for `#[requires]` and lengths); an operator parameter
    // is its operator's index.
    let scalar_params: Vec<&Param> = item
        .params
        .iter()
        .filter(|p| matches!(p.kind, ParamKind::Scalar | ParamKind::Op))
        .collect();
    let scalar_ints = scalar_params.iter().enumerate().map(|(i, p)| {
        let s = format_ident!("__s{}", i);
        let name = &p.name;
        if matches!(p.kind, ParamKind::Op) {
            quote!(let #s: i64 = __hp::op_index(#name)?;)
        } else {
            quote!(let #s: i64 = __hp::int(#name)?;)
        }
    });
    let mut cx = Expander {
        spans: &front.spans,
        handles: vec![Vec::new()],
        sites: ir::visit::over_sites(&ir.body),
        scalar_params: scalar_params.iter().map(|p| p.name.clone()).collect(),
    };
    let requires = ir
        .requires
        .iter()
        .map(|e| {
            let cond = cx.cond(e);
            let text = e.to_string();
            quote!(__x.requires(#cond, #text)?;)
        })
        .collect::<Vec<_>>();

    // Count parameters: `world` (or `world * world`) entries each; the
    // body reads them through `__c`.
    let count_table = item
        .params
        .iter()
        .any(|p| matches!(p.kind, ParamKind::Counts { .. }))
        .then(|| quote!(let __c = __x.count_table();));
    let counts = item.params.iter().filter_map(|p| {
        let ParamKind::Counts { matrix } = p.kind else {
            return None;
        };
        let name = &p.name;
        let text = name.to_string();
        Some(quote!(__x.counts(#text, #name, #matrix)?;))
    });

    // Length variables, then every other buffer's length.
    let buffer_params: Vec<&Ident> = item
        .params
        .iter()
        .filter(|p| matches!(p.kind, ParamKind::Buffer { .. }))
        .map(|p| &p.name)
        .collect();
    let mut lengths = Vec::new();
    for b in len_bindings {
        let (Some(param), Some(buffer), Some(var)) = (
            buffer_params.get(b.buffer),
            ir.buffers.get(b.buffer),
            ir.len_vars.get(b.var),
        ) else {
            continue;
        };
        let len = format_ident!("__len{}", b.var);
        let coef = cx.int(&b.coef);
        let constant = cx.int(&b.constant);
        let (bname, vname) = (&buffer.name, &var.name);
        lengths.push(
            quote!(let #len: i64 = __x.solve_len(#bname, ::hcomm::Buffer::elems(#param), #coef, #constant, #vname)?;),
        );
    }
    for (i, buffer) in ir.buffers.iter().enumerate() {
        if len_bindings.iter().any(|b| b.buffer == i) {
            continue;
        }
        let Some(param) = buffer_params.get(i) else { continue };
        let expected = cx.int(&buffer.len);
        let bname = &buffer.name;
        lengths.push(quote!(__x.check_len(#bname, ::hcomm::Buffer::elems(#param), #expected)?;));
    }

    // Scalar ranges and run-time verification.
    let ranges = ir
        .verify
        .scalars
        .iter()
        .filter_map(|r| {
            let param = &scalar_params.get(r.scalar)?.name;
            let s = format_ident!("__s{}", r.scalar);
            let lo = cx.int(&r.lo);
            let mut hi = cx.int(&r.hi);
            if r.inclusive {
                hi = quote!(__hp::add(#hi, 1)?);
            }
            let sname = &r.name.name;
            Some(quote!(let #s: i64 = __x.scalar(#sname, #param, #lo, #hi)?;))
        })
        .collect::<Vec<_>>();
    let scalar_list = (0..scalar_params.len()).map(|i| format_ident!("__s{}", i));

    // Buffers: type check at the user's span, length, registration.
    let registration = item
        .params
        .iter()
        .filter(|p| matches!(p.kind, ParamKind::Buffer { .. }))
        .enumerate()
        .map(|(i, p)| {
            let param = &p.name;
            let index = format_ident!("__p{}", i);
            let len = format_ident!("__pn{}", i);
            let register = if let ParamKind::Buffer { mutable: true, .. } = p.kind {
                quote!(__x.output(#param))
            } else {
                quote!(__x.input(#param))
            };
            let check = quote_spanned!(param.span()=> __hp::assert_buffer(#param););
            quote! {
                #check
                let #len: i64 = __hp::int(::hcomm::Buffer::elems(#param))?;
                let #index: usize = #register;
            }
        });

    let body = cx.block(&ir.body, false);
    // without buffer parameters the scratch buffers (the only data) hold bytes
    let elem = if item.is_generic() { quote!(T) } else { quote!(u8) };
    // The item's own text (`NAME::SOURCE`), parsed again by the same
    // `hcomm_schedule::syntax` the first time the static is used.
    let init = quote!(::hcomm::__private::schedule_from_source(SOURCE));
    let module = schedule_module(item, &init);
    let companion = companion_doc(item);
    quote! {
        #(#docs)*
        #[doc = #companion]
        #[allow(
            unused_mut,
            unused_variables,
            unused_parens,
            unused_braces,
            unreachable_code,
            clippy::all,
            clippy::pedantic
        )]
        #signature {
            use ::hcomm::__private as __hp;
            __hp::Exec::<#elem>::run(comm, &#name::SCHEDULE, move |__x| {
                let __rank: i64 = __x.rank();
                let __world: i64 = __x.world();
                #(#scalar_ints)*
                #(#requires)*
                #(#counts)*
                #count_table
                #(#lengths)*
                #(#ranges)*
                __x.verify(&[#(#scalar_list),*])?;
                #(#registration)*
                #body
                ::core::result::Result::Ok(())
            })
        }
        #module
    }
}

struct Expander<'a> {
    spans: &'a SpanTable,
    /// Request handles in scope (a `wait` on another one is unreachable: the
    /// checker rejects every schedule that runs it).
    handles: Vec<Vec<String>>,
    /// Call sites of `over` collectives by statement address, numbered in
    /// source order (`hcomm::checker` numbers them the same way).
    sites: std::collections::HashMap<usize, u32>,
    /// The scalar and operator parameters, in the order of the IR's scalars.
    scalar_params: Vec<Ident>,
}

/// `prefix` + the user's name, at the user's span (raw identifiers lose `r#`).
fn local(prefix: &str, name: &str, span: Span) -> Ident {
    Ident::new(&format!("{prefix}{}", name.trim_start_matches("r#")), span)
}

impl Expander<'_> {
    fn span(&self, id: ir::SpanId) -> Span {
        self.spans.get(id).start
    }

    // ------------------------------------------------------------ expressions

    /// An `i64` expression (may contain `?`).
    fn int(&self, e: &ir::Expr) -> TokenStream {
        match &e.kind {
            ir::ExprKind::Int(v) => {
                let lit = Literal::i64_suffixed(*v);
                quote!(#lit)
            }
            ir::ExprKind::Name(n) => self.name(n, e.span),
            ir::ExprKind::Unary(ir::UnOp::Neg, x) => {
                let x = self.int(x);
                quote!(__hp::neg(#x)?)
            }
            ir::ExprKind::Unary(ir::UnOp::Not, _) => self.bool_to_int(e),
            ir::ExprKind::Binary(op, a, b) => {
                let f = match op {
                    ir::BinOp::Add => quote!(__hp::add),
                    ir::BinOp::Sub => quote!(__hp::sub),
                    ir::BinOp::Mul => quote!(__hp::mul),
                    ir::BinOp::Div => quote!(__hp::div),
                    ir::BinOp::Rem => quote!(__hp::rem),
                    ir::BinOp::Shl => quote!(__hp::shl),
                    ir::BinOp::Shr => quote!(__hp::shr),
                    ir::BinOp::BitAnd | ir::BinOp::BitOr | ir::BinOp::BitXor => {
                        let (a, b) = (self.int(a), self.int(b));
                        return match op {
                            ir::BinOp::BitAnd => quote!((#a & #b)),
                            ir::BinOp::BitOr => quote!((#a | #b)),
                            _ => quote!((#a ^ #b)),
                        };
                    }
                    _ => return self.bool_to_int(e),
                };
                let (a, b) = (self.int(a), self.int(b));
                quote!(#f(#a, #b)?)
            }
            ir::ExprKind::Call(f, args) => {
                let args: Vec<TokenStream> = args.iter().map(|a| self.int(a)).collect();
                match f {
                    ir::Func::Log2 => quote!(__hp::log2(#(#args),*)?),
                    ir::Func::CeilLog2 => quote!(__hp::ceil_log2(#(#args),*)?),
                    ir::Func::Pow2 => quote!(__hp::pow2(#(#args),*)?),
                    ir::Func::IsPow2 => self.bool_to_int(e),
                    ir::Func::Min => quote!(::core::cmp::min(#(#args),*)),
                    ir::Func::Max => quote!(::core::cmp::max(#(#args),*)),
                }
            }
            ir::ExprKind::Count(c) => match c {
                ir::Count::Entry(line, i) => {
                    let (line, i) = (self.line(line), self.int(i));
                    quote!(__c.count(#line, #i)?)
                }
                ir::Count::Sum(line, None) => {
                    let line = self.line(line);
                    quote!(__c.count_sum(#line)?)
                }
                ir::Count::Sum(line, Some((a, b))) => {
                    let (line, a, b) = (self.line(line), self.int(a), self.int(b));
                    quote!(__hp::sub(__c.count_prefix(#line, #b)?, __c.count_prefix(#line, #a)?)?)
                }
            },
        }
    }

    /// A line of counts, as the executor names it.
    fn line(&self, line: &ir::CountLine) -> TokenStream {
        let p = line.count.param;
        match &line.kind {
            ir::LineKind::Vector => quote!(__hp::CountLine::Vector(#p)),
            ir::LineKind::Row(i) => {
                let i = self.int(i);
                quote!(__hp::CountLine::Row(#p, #i))
            }
            ir::LineKind::Col(j) => {
                let j = self.int(j);
                quote!(__hp::CountLine::Col(#p, #j))
            }
        }
    }

    fn bool_to_int(&self, e: &ir::Expr) -> TokenStream {
        let c = self.cond(e);
        quote!(i64::from(#c))
    }

    /// A `bool` expression: the integer is non-zero.
    fn cond(&self, e: &ir::Expr) -> TokenStream {
        match &e.kind {
            ir::ExprKind::Unary(ir::UnOp::Not, x) => {
                let x = self.cond(x);
                quote!((!#x))
            }
            ir::ExprKind::Binary(op, a, b) => {
                let cmp = match op {
                    ir::BinOp::Eq => quote!(==),
                    ir::BinOp::Ne => quote!(!=),
                    ir::BinOp::Lt => quote!(<),
                    ir::BinOp::Le => quote!(<=),
                    ir::BinOp::Gt => quote!(>),
                    ir::BinOp::Ge => quote!(>=),
                    ir::BinOp::And | ir::BinOp::Or => {
                        let (a, b) = (self.cond(a), self.cond(b));
                        return if *op == ir::BinOp::And {
                            quote!((#a && #b))
                        } else {
                            quote!((#a || #b))
                        };
                    }
                    _ => {
                        let x = self.int(e);
                        return quote!((#x != 0));
                    }
                };
                let (a, b) = (self.int(a), self.int(b));
                quote!((#a #cmp #b))
            }
            ir::ExprKind::Call(ir::Func::IsPow2, args) => {
                let args = args.iter().map(|a| self.int(a));
                quote!(__hp::is_pow2(#(#args),*))
            }
            _ => {
                let x = self.int(e);
                quote!((#x != 0))
            }
        }
    }

    fn name(&self, n: &ir::Name, span: ir::SpanId) -> TokenStream {
        match n.kind {
            ir::NameKind::Rank => quote!(__rank),
            ir::NameKind::World => quote!(__world),
            ir::NameKind::Var => {
                let v = local("__v_", &n.text, self.span(span));
                quote!(#v)
            }
            ir::NameKind::Scalar(i) => {
                let s = format_ident!("__s{}", i);
                quote!(#s)
            }
            ir::NameKind::LenVar(i) => {
                let l = format_ident!("__len{}", i);
                quote!(#l)
            }
        }
    }

    // ------------------------------------------------------------ regions

    fn region(&self, r: &ir::Region) -> TokenStream {
        match &r.kind {
            ir::RegionKind::Whole(buf) => {
                let (index, len) = match buf.kind {
                    ir::BufKind::Param(i) => (format_ident!("__p{}", i), format_ident!("__pn{}", i)),
                    ir::BufKind::Scratch => {
                        let span = self.span(buf.span);
                        (local("__b_", &buf.name, span), local("__n_", &buf.name, span))
                    }
                };
                quote!(__hp::region(#index, 0, #len))
            }
            ir::RegionKind::Slice { base, start, end } => {
                let base = self.region(base);
                let (start, end) = (self.int(start), self.int(end));
                quote!({
                    let __r = #base;
                    __hp::region(__r.buf, __hp::add(__r.start, #start)?, __hp::add(__r.start, #end)?)
                })
            }
            ir::RegionKind::Chunk { base, index, parts } => {
                let base = self.region(base);
                let index = self.int(index);
                let parts = parts.as_ref().map_or_else(|| quote!(__world), |p| self.int(p));
                quote!(__hp::chunk(#base, #index, #parts)?)
            }
            ir::RegionKind::Part { base, line, index } => {
                let (base, line, index) = (self.region(base), self.line(line), self.int(index));
                quote!(__c.part(#base, #line, #index)?)
            }
        }
    }

    // ------------------------------------------------------------ statements

    fn block(&mut self, stmts: &[ir::Stmt], batch: bool) -> TokenStream {
        self.handles.push(Vec::new());
        let out: TokenStream = stmts.iter().map(|s| self.stmt(s, batch)).collect();
        self.handles.pop();
        out
    }

    fn tag(&self, tag: Option<&ir::Expr>) -> TokenStream {
        tag.map_or_else(|| quote!(0_i64), |t| self.int(t))
    }

    /// The run-time operator: a `ReduceOp` constant, or the operator
    /// parameter.
    fn op_tokens(&self, op: &ir::OpExpr) -> TokenStream {
        match op {
            ir::OpExpr::Lit(ir::Op::Sum) => quote!(__hp::ReduceOp::Sum),
            ir::OpExpr::Lit(ir::Op::Prod) => quote!(__hp::ReduceOp::Prod),
            ir::OpExpr::Lit(ir::Op::Max) => quote!(__hp::ReduceOp::Max),
            ir::OpExpr::Lit(ir::Op::Min) => quote!(__hp::ReduceOp::Min),
            ir::OpExpr::Param(i) => {
                let p = &self.scalar_params[*i];
                quote!(#p)
            }
            // resolution turns every name into a parameter; as written, it
            // names the same one
            ir::OpExpr::Name(name) => {
                let p = Ident::new(&name.name, self.span(name.span));
                quote!(#p)
            }
        }
    }

    fn reduce(&self, reduce: Option<&ir::OpExpr>) -> TokenStream {
        if let Some(op) = reduce {
            let op = self.op_tokens(op);
            quote!(::core::option::Option::Some(#op))
        } else {
            quote!(::core::option::Option::None)
        }
    }

    fn has_handle(&self, name: &str) -> bool {
        self.handles.iter().flatten().any(|h| h == name)
    }

    fn stmt(&mut self, stmt: &ir::Stmt, batch: bool) -> TokenStream {
        let target = if batch { quote!(__b) } else { quote!(__x) };
        match &stmt.kind {
            ir::StmtKind::Send { region, peer, tag } => {
                let (r, p, t) = (self.region(region), self.int(peer), self.tag(tag.as_ref()));
                quote!(#target.send(#r, #p, #t)?;)
            }
            ir::StmtKind::Recv {
                region,
                peer,
                tag,
                reduce,
            } => {
                let (r, p, t) = (self.region(region), self.int(peer), self.tag(tag.as_ref()));
                let reduce = self.reduce(reduce.as_ref());
                quote!(#target.recv(#r, #p, #t, #reduce)?;)
            }
            ir::StmtKind::Isend {
                handle,
                region,
                peer,
                tag,
            } => {
                let (r, p, t) = (self.region(region), self.int(peer), self.tag(tag.as_ref()));
                let h = local("__h_", &handle.name, self.span(handle.span));
                if let Some(scope) = self.handles.last_mut() {
                    scope.push(handle.name.clone());
                }
                quote!(let #h: __hp::Handle = __x.isend(#r, #p, #t)?;)
            }
            ir::StmtKind::Irecv {
                handle,
                region,
                peer,
                tag,
                reduce,
            } => {
                let (r, p, t) = (self.region(region), self.int(peer), self.tag(tag.as_ref()));
                let reduce = self.reduce(reduce.as_ref());
                let h = local("__h_", &handle.name, self.span(handle.span));
                if let Some(scope) = self.handles.last_mut() {
                    scope.push(handle.name.clone());
                }
                quote!(let #h: __hp::Handle = __x.irecv(#r, #p, #t, #reduce)?;)
            }
            ir::StmtKind::Wait { handles } => {
                if handles.iter().any(|h| !self.has_handle(&h.name)) {
                    // Rejected by the checker wherever it runs (`unknown request`).
                    return quote!(::core::unreachable!("wait on a request that is not in scope"););
                }
                let hs = handles.iter().map(|h| local("__h_", &h.name, self.span(h.span)));
                quote!(__x.wait(&[#(#hs),*])?;)
            }
            ir::StmtKind::WaitAll => quote!(__x.wait_all()?;),
            ir::StmtKind::Batch { body } => {
                let body = self.block(body, true);
                quote!({
                    let mut __b = __x.batch();
                    #body
                    __b.finish()?;
                })
            }
            ir::StmtKind::Copy { src, dst } => {
                let (s, d) = (self.region(src), self.region(dst));
                quote!(__x.copy(#s, #d)?;)
            }
            ir::StmtKind::Accumulate { src, dst, op } => {
                let (s, d, op) = (self.region(src), self.region(dst), self.op_tokens(op));
                quote!(__x.accumulate(#s, #d, #op)?;)
            }
            ir::StmtKind::Let { name, value } => {
                let v = local("__v_", &name.name, self.span(name.span));
                let value = self.int(value);
                quote!(let #v: i64 = #value;)
            }
            ir::StmtKind::Scratch { name, len } => {
                let span = self.span(name.span);
                let (b, n) = (local("__b_", &name.name, span), local("__n_", &name.name, span));
                let len = self.int(len);
                quote! {
                    let #n: i64 = #len;
                    let #b: usize = __x.scratch(#n)?;
                }
            }
            ir::StmtKind::For {
                var,
                start,
                end,
                inclusive,
                reverse,
                body,
            } => {
                let v = local("__v_", &var.name, self.span(var.span));
                let (s, e) = (self.int(start), self.int(end));
                let range = match (*inclusive, *reverse) {
                    (false, false) => quote!(#s..#e),
                    (true, false) => quote!(#s..=#e),
                    (false, true) => quote!((#s..#e).rev()),
                    (true, true) => quote!((#s..=#e).rev()),
                };
                let body = self.block(body, batch);
                quote!(for #v in #range { #body })
            }
            ir::StmtKind::If { branches, else_body } => {
                let mut out = TokenStream::new();
                for (i, (cond, body)) in branches.iter().enumerate() {
                    let c = self.cond(cond);
                    let body = self.block(body, batch);
                    if i > 0 {
                        out.extend(quote!(else));
                    }
                    out.extend(quote!(if #c { #body }));
                }
                if let Some(body) = else_body {
                    let body = self.block(body, batch);
                    out.extend(quote!(else { #body }));
                }
                out
            }
            ir::StmtKind::Collective { kind, over } => {
                let site = self
                    .sites
                    .get(&(std::ptr::from_ref(stmt) as usize))
                    .copied()
                    .unwrap_or(u32::MAX);
                self.collective(kind, over.as_ref(), site)
            }
        }
    }

    fn collective(&mut self, kind: &ir::Collective, over: Option<&ir::Expr>, site: u32) -> TokenStream {
        let (group_def, group) = match over {
            Some(e) => {
                let color = self.int(e);
                (
                    quote! {
                        let __g = __x.group(#site, &|__r: i64| -> ::hcomm::Result<i64> {
                            let __rank: i64 = __r;
                            ::core::result::Result::Ok(#color)
                        })?;
                    },
                    quote!(::core::option::Option::Some(__g)),
                )
            }
            None => (TokenStream::new(), quote!(::core::option::Option::None)),
        };
        let call = match kind {
            ir::Collective::AllReduce { src, dst: None, op } => {
                let (r, op) = (self.region(src), self.op_tokens(op));
                quote! {
                    let __r = #r;
                    __x.all_reduce(__r, __r, #op, #group)?;
                }
            }
            ir::Collective::AllReduce {
                src,
                dst: Some(dst),
                op,
            } => {
                let (s, d, op) = (self.region(src), self.region(dst), self.op_tokens(op));
                quote!(__x.all_reduce(#s, #d, #op, #group)?;)
            }
            ir::Collective::AllGather { src, dst } => {
                let (s, d) = (self.region(src), self.region(dst));
                quote!(__x.all_gather(#s, #d, #group)?;)
            }
            ir::Collective::ReduceScatter { src, dst, op } => {
                let (s, d, op) = (self.region(src), self.region(dst), self.op_tokens(op));
                quote!(__x.reduce_scatter(#s, #d, #op, #group)?;)
            }
            ir::Collective::AllToAll { src, dst } => {
                let (s, d) = (self.region(src), self.region(dst));
                quote!(__x.all_to_all(#s, #d, #group)?;)
            }
            ir::Collective::Broadcast { region, root } => {
                let (r, root) = (self.region(region), self.int(root));
                quote!(__x.broadcast(#r, #root, #group)?;)
            }
            ir::Collective::Reduce { src, dst, op, root } => {
                let (s, d, op, root) = (self.region(src), self.region(dst), self.op_tokens(op), self.int(root));
                quote!(__x.reduce(#s, #d, #op, #root, #group)?;)
            }
            ir::Collective::AllGatherV { src, dst, counts } => {
                let (s, d) = (self.region(src), self.region(dst));
                let p = counts.param;
                quote!(__x.all_gatherv(#s, #d, #p)?;)
            }
            ir::Collective::AllToAllV { src, dst, sizes } => {
                let (s, d) = (self.region(src), self.region(dst));
                let p = sizes.param;
                quote!(__x.all_to_allv(#s, #d, #p)?;)
            }
            ir::Collective::Barrier => quote!(__x.barrier(#group)?;),
        };
        if group_def.is_empty() && !matches!(kind, ir::Collective::AllReduce { dst: None, .. }) {
            call
        } else {
            quote!({ #group_def #call })
        }
    }
}

/// The errors as `compile_error!`s plus an item of the right shape whose body
/// is unreachable, so the caller's uses of the function and of
/// `NAME::SCHEDULE` do not add errors of their own.
fn fallback(item: &Item, error: &syn::Error) -> TokenStream {
    let errors = error.to_compile_error();
    let signature = signature(item);
    let module = schedule_module(item, &quote!(::core::unreachable!()));
    quote! {
        #errors
        #[allow(dead_code, unused_variables, clippy::all, clippy::pedantic)]
        #signature {
            ::core::unreachable!()
        }
        #module
    }
}
