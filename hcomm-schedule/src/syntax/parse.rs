//! Syntax of the schedule language: `Parse` impls building the AST.
//!
//! Parsing happens in two stages so that a mistake inside one function body
//! still lets the macro emit that function's signature (the fallback item of
//! `errors.rs`): [`Schedule`] parses every item's attributes and signature and
//! keeps the body as a brace-delimited token group; [`Item::body`] and
//! [`Item::attrs`] parse those later. Every node keeps a [`Sp`] (its first and
//! last token) so errors can underline exactly the user's tokens.

use crate::ir::{BinOp, UnOp};
use proc_macro2::{Delimiter, Group, Punct, Spacing, Span, TokenStream, TokenTree};
use quote::{ToTokens, TokenStreamExt};
use syn::parse::{Parse, ParseStream, Parser};
use syn::{braced, bracketed, parenthesized, Attribute, Ident, LitBool, LitInt, Token, Visibility};

/// Custom keywords of the language.
pub(crate) mod kw {
    syn::custom_keyword!(send);
    syn::custom_keyword!(recv);
    syn::custom_keyword!(isend);
    syn::custom_keyword!(all);
    syn::custom_keyword!(irecv);
    syn::custom_keyword!(wait);
    syn::custom_keyword!(batch);
    syn::custom_keyword!(copy);
    syn::custom_keyword!(accumulate);
    syn::custom_keyword!(scratch);
    syn::custom_keyword!(to);
    syn::custom_keyword!(from);
    syn::custom_keyword!(tag);
    syn::custom_keyword!(reduce);
    syn::custom_keyword!(over);
    syn::custom_keyword!(root);
    syn::custom_keyword!(shift);
    syn::custom_keyword!(chunk);
    syn::custom_keyword!(part);
    syn::custom_keyword!(all_gatherv);
    syn::custom_keyword!(all_to_allv);
    syn::custom_keyword!(world);
    syn::custom_keyword!(rev);
    syn::custom_keyword!(sum);
    syn::custom_keyword!(prod);
    syn::custom_keyword!(max);
    syn::custom_keyword!(min);
    syn::custom_keyword!(all_reduce);
    syn::custom_keyword!(all_gather);
    syn::custom_keyword!(reduce_scatter);
    syn::custom_keyword!(all_to_all);
    syn::custom_keyword!(broadcast);
    syn::custom_keyword!(barrier);
    syn::custom_keyword!(usize);
    syn::custom_keyword!(ReduceOp);
    syn::custom_keyword!(T);
}

/// Deepest nesting of expressions and blocks accepted (keeps recursion bounded).
const MAX_DEPTH: usize = 128;

/// Most binary operators in one flat chain (`a + b + ..`; long chains of
/// one associative operator are regrouped, see `chain`).
const MAX_CHAIN: usize = 1 << 16;

/// Prefix of every parse error (the language reference, section 8: the kind comes first).
const SYNTAX: &str = "syntax error: ";

/// The first and last token of a node; an error on it underlines both and
/// everything between.
#[derive(Clone, Copy, Debug)]
pub struct Sp {
    /// The first token.
    pub start: Span,
    /// The last token.
    pub end: Span,
}

impl Sp {
    /// A node made of one token.
    pub fn one(span: Span) -> Self {
        Sp { start: span, end: span }
    }

    /// From the start of `self` to the end of `last`.
    pub(crate) fn to(self, last: Sp) -> Self {
        Sp {
            start: self.start,
            end: last.end,
        }
    }

    /// An error underlining this node.
    pub fn error(self, message: impl std::fmt::Display) -> syn::Error {
        syn::Error::new_spanned(self, message)
    }
}

impl ToTokens for Sp {
    /// Two placeholder tokens carrying the first and last span, which is all
    /// `syn::Error::new_spanned` looks at.
    fn to_tokens(&self, tokens: &mut TokenStream) {
        let mut start = Punct::new('.', Spacing::Alone);
        start.set_span(self.start);
        let mut end = Punct::new('.', Spacing::Alone);
        end.set_span(self.end);
        tokens.append(start);
        tokens.append(end);
    }
}

/// Prefixes syn's own messages ("expected `;`") with the error kind.
fn syntax(error: syn::Error) -> syn::Error {
    let mut all: Option<syn::Error> = None;
    for e in error {
        let text = e.to_string();
        let e = if text.starts_with(SYNTAX) {
            e
        } else {
            syn::Error::new(e.span(), format!("{SYNTAX}{text}"))
        };
        match &mut all {
            Some(all) => all.combine(e),
            None => all = Some(e),
        }
    }
    all.unwrap_or_else(|| syn::Error::new(Span::call_site(), "syntax error"))
}

// ---------------------------------------------------------------- items

/// A whole input (the macro's, or a text): one or more schedule functions.
pub struct Input {
    /// The items, in order.
    pub items: Vec<Item>,
}

/// One `fn` item; its body is parsed later by `Item::body`.
pub struct Item {
    pub(crate) attrs: Vec<Attribute>,
    /// The item's visibility.
    pub vis: Visibility,
    pub(crate) fn_token: Token![fn],
    /// The function's name.
    pub name: Ident,
    /// The parameters, in order.
    pub params: Vec<Param>,
    /// Whether the item wrote `fn NAME<T>(..)`.
    pub explicit_t: bool,
    /// The `)` closing the parameter list.
    pub(crate) params_close: Span,
    pub(crate) body: Group,
    /// The item's tokens, attributes included.
    pub(crate) tokens: TokenStream,
}

/// A parameter of a schedule function.
pub struct Param {
    /// The parameter's name.
    pub name: Ident,
    /// What it is.
    pub kind: ParamKind,
    /// A buffer's length `LEN`.
    pub(crate) len: Option<Expr>,
    /// The type, from `&` (or `usize`) to `]`.
    pub(crate) ty_sp: Sp,
}

/// What a parameter is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ParamKind {
    /// `&[T; LEN]` or `&mut [T; LEN]`.
    Buffer {
        /// `&mut`.
        mutable: bool,
    },
    /// `usize`.
    Scalar,
    /// `ReduceOp`: an operator parameter.
    Op,
    /// `&[usize; world]` (a count vector) or `&[[usize; world]; world]` (a
    /// count matrix, `matrix == true`).
    Counts {
        /// A `world x world` matrix.
        matrix: bool,
    },
}

impl Parse for Input {
    fn parse(input: ParseStream) -> syn::Result<Self> {
        let mut items = Vec::new();
        while !input.is_empty() {
            let start = input.cursor();
            let mut item = input.parse::<Item>().map_err(syntax)?;
            item.tokens = tokens_between(start, input.cursor());
            items.push(item);
        }
        if items.is_empty() {
            // There is no token to point at: the invocation is empty.
            return Err(syn::Error::new(
                Span::call_site(),
                format!(
                    "{SYNTAX}expected at least one `fn` item\nhint: write `pub fn name(buf: &mut [T; n]) {{ .. }}`"
                ),
            ));
        }
        Ok(Input { items })
    }
}

/// The tokens from `start` up to (not including) `end`.
fn tokens_between(start: syn::buffer::Cursor<'_>, end: syn::buffer::Cursor<'_>) -> TokenStream {
    let mut out = TokenStream::new();
    let mut cursor = start;
    while cursor != end {
        let Some((tt, next)) = cursor.token_tree() else { break };
        out.append(tt);
        cursor = next;
    }
    out
}

impl Parse for Item {
    fn parse(input: ParseStream) -> syn::Result<Self> {
        let attrs = input.call(Attribute::parse_outer)?;
        let vis: Visibility = input.parse()?;
        let fn_token: Token![fn] = input.parse()?;
        let name: Ident = input.parse()?;
        // An optional `<T>`: it keeps the generated function generic even
        // without buffer parameters.
        let explicit_t = input.peek(Token![<]);
        if explicit_t {
            input.parse::<Token![<]>()?;
            input.parse::<kw::T>()?;
            input.parse::<Token![>]>()?;
        }
        let content;
        let paren = parenthesized!(content in input);
        let params_close = paren.span.close();
        let mut params = Vec::new();
        while !content.is_empty() {
            params.push(content.parse::<Param>()?);
            if content.is_empty() {
                break;
            }
            content.parse::<Token![,]>()?;
        }
        if input.peek(Token![->]) {
            return Err(input.error(format!(
                "{SYNTAX}a schedule function has no return type\nhint: the generated function returns `hcomm::Result<()>`"
            )));
        }
        let body: Group = input.parse()?;
        if body.delimiter() != Delimiter::Brace {
            return Err(syn::Error::new(
                body.span_open(),
                format!("{SYNTAX}expected curly braces"),
            ));
        }
        Ok(Item {
            attrs,
            vis,
            fn_token,
            name,
            params,
            explicit_t,
            params_close,
            body,
            tokens: TokenStream::new(),
        })
    }
}

impl Parse for Param {
    fn parse(input: ParseStream) -> syn::Result<Self> {
        let name: Ident = input.parse()?;
        input.parse::<Token![:]>()?;
        let lookahead = input.lookahead1();
        if lookahead.peek(Token![&]) {
            let and: Token![&] = input.parse()?;
            let mutable = input.parse::<Option<Token![mut]>>()?.is_some();
            let content;
            let bracket = bracketed!(content in input);
            let ty_sp = Sp {
                start: and.span,
                end: bracket.span.close(),
            };
            if content.peek(kw::usize) || content.peek(syn::token::Bracket) {
                let matrix = parse_count_type(&content)?;
                if mutable {
                    return Err(ty_sp.error(format!(
                        "{SYNTAX}a count parameter is read-only\nhint: write `&[usize; world]`"
                    )));
                }
                return Ok(Param {
                    name,
                    kind: ParamKind::Counts { matrix },
                    len: None,
                    ty_sp,
                });
            }
            content.parse::<kw::T>()?;
            content.parse::<Token![;]>()?;
            let len = parse_expr(&content, 0)?;
            Ok(Param {
                name,
                kind: ParamKind::Buffer { mutable },
                len: Some(len),
                ty_sp: Sp {
                    start: and.span,
                    end: bracket.span.close(),
                },
            })
        } else if lookahead.peek(kw::usize) {
            let ty: kw::usize = input.parse()?;
            Ok(Param {
                name,
                kind: ParamKind::Scalar,
                len: None,
                ty_sp: Sp::one(ty.span),
            })
        } else if lookahead.peek(kw::ReduceOp) {
            let ty: kw::ReduceOp = input.parse()?;
            Ok(Param {
                name,
                kind: ParamKind::Op,
                len: None,
                ty_sp: Sp::one(ty.span),
            })
        } else {
            Err(lookahead.error())
        }
    }
}

/// The inside of `[usize; world]` (a vector) or `[[usize; world]; world]` (a
/// matrix); whether it is a matrix.
fn parse_count_type(input: ParseStream) -> syn::Result<bool> {
    let matrix = if input.peek(syn::token::Bracket) {
        let inner;
        bracketed!(inner in input);
        inner.parse::<kw::usize>()?;
        inner.parse::<Token![;]>()?;
        inner.parse::<kw::world>()?;
        if !inner.is_empty() {
            return Err(inner.error(format!("{SYNTAX}expected `]`")));
        }
        true
    } else {
        input.parse::<kw::usize>()?;
        false
    };
    input.parse::<Token![;]>()?;
    input.parse::<kw::world>()?;
    if !input.is_empty() {
        return Err(input.error(format!("{SYNTAX}expected `]`")));
    }
    Ok(matrix)
}

// ---------------------------------------------------------------- attributes

/// The language's attributes of one item, interpreted.
#[derive(Default)]
pub(crate) struct Attrs {
    /// Doc comments and other attributes, copied onto the generated function.
    pub(crate) passthrough: Vec<Attribute>,
    /// `#[verify(..)]` entries, in order, from every `verify` attribute.
    pub(crate) verify: Vec<VerifyEntry>,
    /// `#[requires(..)]` conditions.
    pub(crate) requires: Vec<Expr>,
    /// `#[postcondition(..)]` and the attribute's span.
    pub(crate) postcondition: Option<(Sp, CollCall)>,
}

/// `NAME in SET` inside `#[verify(..)]`.
pub(crate) struct VerifyEntry {
    pub(crate) name: Ident,
    pub(crate) set: ValueSet,
}

/// The values of a verify entry.
pub(crate) enum ValueSet {
    /// `A..B` or `A..=B`; `A..` (no `end`) for a length variable.
    Range {
        start: Expr,
        end: Option<Expr>,
        inclusive: bool,
        sp: Sp,
    },
    /// `[A, B, ..]`.
    List { values: Vec<Expr>, sp: Sp },
}

impl ValueSet {
    /// The set's tokens.
    pub(crate) fn sp(&self) -> Sp {
        match self {
            ValueSet::Range { sp, .. } | ValueSet::List { sp, .. } => *sp,
        }
    }
}

impl Item {
    /// Whether the generated function is generic over the element type `T`:
    /// when a buffer parameter has elements of type `T`, or the item wrote
    /// `fn NAME<T>(..)`. Otherwise it is a plain function (its scratch
    /// buffers, if any, hold bytes) and callers need no turbofish.
    pub fn is_generic(&self) -> bool {
        self.explicit_t || self.params.iter().any(|p| matches!(p.kind, ParamKind::Buffer { .. }))
    }

    /// Interprets the attributes; errors are accumulated, one per attribute.
    pub(crate) fn attrs(&self) -> (Attrs, Vec<syn::Error>) {
        let mut attrs = Attrs::default();
        let mut errors = Vec::new();
        for attr in &self.attrs {
            let path = attr.path();
            let sp = Sp {
                start: attr.pound_token.span,
                end: attr.bracket_token.span.close(),
            };
            if path.is_ident("verify") {
                match attr.parse_args_with(parse_verify) {
                    Ok(entries) => attrs.verify.extend(entries),
                    Err(e) => errors.push(syntax(e)),
                }
            } else if path.is_ident("requires") {
                match attr.parse_args_with(|input: ParseStream| parse_expr(input, 0)) {
                    Ok(e) => attrs.requires.push(e),
                    Err(e) => errors.push(syntax(e)),
                }
            } else if path.is_ident("postcondition") {
                if attrs.postcondition.is_some() {
                    errors.push(sp.error(format!(
                        "{SYNTAX}more than one `#[postcondition]`\nhint: a schedule computes one collective"
                    )));
                    continue;
                }
                match attr.parse_args_with(|input: ParseStream| CollCall::parse_with(input, false)) {
                    Ok(call) => attrs.postcondition = Some((sp, call)),
                    Err(e) => errors.push(syntax(e)),
                }
            } else {
                attrs.passthrough.push(attr.clone());
            }
        }
        (attrs, errors)
    }

    /// Parses the body's statements.
    pub(crate) fn body(&self) -> syn::Result<Vec<Stmt>> {
        let tokens = TokenStream::from(TokenTree::Group(self.body.clone()));
        let parser = |input: ParseStream| {
            let content;
            braced!(content in input);
            parse_block_contents(&content, 0, false)
        };
        parser.parse2(tokens).map_err(syntax)
    }
}

fn parse_verify(input: ParseStream) -> syn::Result<Vec<VerifyEntry>> {
    let mut entries = Vec::new();
    loop {
        let name: Ident = input.parse()?;
        input.parse::<Token![in]>()?;
        let lookahead = input.lookahead1();
        let set = if lookahead.peek(syn::token::Bracket) {
            let content;
            let bracket = bracketed!(content in input);
            let mut values = Vec::new();
            while !content.is_empty() {
                values.push(parse_expr(&content, 0)?);
                if content.is_empty() {
                    break;
                }
                content.parse::<Token![,]>()?;
            }
            ValueSet::List {
                values,
                sp: Sp {
                    start: bracket.span.open(),
                    end: bracket.span.close(),
                },
            }
        } else if lookahead.peek(LitInt)
            || lookahead.peek(Ident)
            || lookahead.peek(syn::token::Paren)
            || lookahead.peek(Token![-])
        {
            let start = parse_expr(input, 0)?;
            let inclusive = parse_range_dots(input)?;
            // `LO..` ends at the entry's end (a length variable's open range)
            let end = if !inclusive && (input.is_empty() || input.peek(Token![,])) {
                None
            } else {
                Some(parse_expr(input, 0)?)
            };
            let sp = end.as_ref().map_or(start.sp(), |e| start.sp().to(e.sp()));
            ValueSet::Range {
                start,
                end,
                inclusive,
                sp,
            }
        } else {
            return Err(lookahead.error());
        };
        entries.push(VerifyEntry { name, set });
        if input.is_empty() {
            return Ok(entries);
        }
        input.parse::<Token![,]>()?;
        if input.is_empty() {
            return Ok(entries);
        }
    }
}

/// `..` (false) or `..=` (true).
fn parse_range_dots(input: ParseStream) -> syn::Result<bool> {
    let lookahead = input.lookahead1();
    if lookahead.peek(Token![..=]) {
        input.parse::<Token![..=]>()?;
        Ok(true)
    } else if lookahead.peek(Token![..]) {
        input.parse::<Token![..]>()?;
        Ok(false)
    } else {
        Err(lookahead.error())
    }
}

// ---------------------------------------------------------------- statements

/// A statement with its span (first keyword to `;` or `}`).
pub(crate) struct Stmt {
    pub(crate) kind: StmtKind,
    pub(crate) sp: Sp,
}

/// The statements of section 3.
pub(crate) enum StmtKind {
    /// `send REGION to EXPR [tag EXPR];`
    Send(P2p),
    /// `recv REGION from EXPR [tag EXPR] [reduce OP];`
    Recv(P2p),
    /// `let H = isend ..;`
    Isend { handle: Ident, op: P2p },
    /// `let H = irecv ..;`
    Irecv { handle: Ident, op: P2p },
    /// `wait H, ..;`
    Wait(Vec<Ident>),
    /// `wait all;`
    WaitAll,
    /// `batch { send ..; recv ..; }`; holds only `Send`, `Recv`, `Let`, and
    /// `For` and `If` whose bodies hold the same.
    Batch(Vec<Stmt>),
    /// `copy SRC -> DST;`
    Copy { src: Region, dst: Region },
    /// `accumulate SRC -> DST, OP;`
    Accumulate { src: Region, dst: Region, op: Op },
    /// `let NAME = EXPR;`
    Let { name: Ident, value: Expr },
    /// `let NAME = scratch[T; LEN];`
    Scratch { name: Ident, len: Expr },
    /// `for VAR in RANGE { .. }`
    For {
        var: Ident,
        range: LoopRange,
        body: Vec<Stmt>,
    },
    /// `if C { .. } else if C { .. } else { .. }`
    If {
        branches: Vec<(Expr, Vec<Stmt>)>,
        otherwise: Option<Vec<Stmt>>,
    },
    /// A collective, optionally `over EXPR`.
    Collective { call: CollCall, over: Option<Expr> },
}

/// The operands of a point-to-point operation.
pub(crate) struct P2p {
    /// `send`, `recv`, `isend` or `irecv`.
    pub(crate) keyword: Sp,
    pub(crate) region: Region,
    pub(crate) peer: Expr,
    pub(crate) tag: Option<Expr>,
    pub(crate) reduce: Option<Op>,
}

/// `sum`, `prod`, `max`, `min`, or the name of an operator parameter.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum Op {
    Sum,
    Prod,
    Max,
    Min,
    Param(Ident),
}

/// The range of a `for` loop.
pub(crate) struct LoopRange {
    pub(crate) start: Expr,
    pub(crate) end: Expr,
    pub(crate) inclusive: bool,
    pub(crate) rev: bool,
}

/// A collective call (also the shape of a postcondition).
pub(crate) struct CollCall {
    pub(crate) kind: CollKind,
    /// `src` and optional `-> dst`; `None` for `barrier`.
    pub(crate) src: Option<Region>,
    pub(crate) dst: Option<Region>,
    pub(crate) op: Option<Op>,
    pub(crate) root: Option<Expr>,
    /// The count parameter of `all_gatherv` and `all_to_allv`.
    pub(crate) counts: Option<Ident>,
    pub(crate) sp: Sp,
}

/// Which collective.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum CollKind {
    AllReduce,
    AllGather,
    ReduceScatter,
    AllToAll,
    Broadcast,
    Reduce,
    AllGatherV,
    AllToAllV,
    Barrier,
    /// `shift(IN -> OUT, from = EXPR)`: a postcondition only.
    Shift,
}

fn parse_block(input: ParseStream, depth: usize, in_batch: bool) -> syn::Result<(Vec<Stmt>, Span)> {
    let content;
    let brace = braced!(content in input);
    let stmts = parse_block_contents(&content, depth + 1, in_batch)?;
    Ok((stmts, brace.span.close()))
}

/// Statements up to the end of `input`; `in_batch` restricts them to what a
/// `batch` may hold (`send`, `recv`, and `let`, `for`, `if` around them).
fn parse_block_contents(input: ParseStream, depth: usize, in_batch: bool) -> syn::Result<Vec<Stmt>> {
    if depth > MAX_DEPTH {
        return Err(input.error(format!("{SYNTAX}blocks nested too deeply")));
    }
    let mut stmts = Vec::new();
    while !input.is_empty() {
        if input.peek(Token![;]) {
            input.parse::<Token![;]>()?;
            continue;
        }
        stmts.push(if in_batch {
            parse_batch_stmt(input, depth)?
        } else {
            parse_stmt(input, depth)?
        });
    }
    Ok(stmts)
}

const BATCH_HINT: &str = "hint: a `batch` holds `send` and `recv` statements (and `let`, `for`, `if` around them)";

fn parse_batch_stmt(input: ParseStream, depth: usize) -> syn::Result<Stmt> {
    let lookahead = input.lookahead1();
    if lookahead.peek(kw::send) || lookahead.peek(kw::recv) {
        return parse_send_recv(input);
    }
    if lookahead.peek(Token![let]) {
        let stmt = parse_let(input)?;
        let what = match &stmt.kind {
            StmtKind::Isend { .. } => "isend",
            StmtKind::Irecv { .. } => "irecv",
            StmtKind::Scratch { .. } => "scratch",
            _ => return Ok(stmt),
        };
        return Err(stmt
            .sp
            .error(format!("{SYNTAX}`{what}` is not allowed inside `batch`\n{BATCH_HINT}")));
    }
    if lookahead.peek(Token![for]) {
        return parse_for(input, depth, true);
    }
    if lookahead.peek(Token![if]) {
        return parse_if(input, depth, true);
    }
    let e = lookahead.error();
    Err(syn::Error::new(e.span(), format!("{SYNTAX}{e}\n{BATCH_HINT}")))
}

fn parse_for(input: ParseStream, depth: usize, in_batch: bool) -> syn::Result<Stmt> {
    let keyword: Token![for] = input.parse()?;
    let var: Ident = input.parse()?;
    input.parse::<Token![in]>()?;
    let range = parse_loop_range(input)?;
    let (body, close) = parse_block(input, depth, in_batch)?;
    Ok(Stmt {
        kind: StmtKind::For { var, range, body },
        sp: Sp {
            start: keyword.span,
            end: close,
        },
    })
}

fn parse_stmt(input: ParseStream, depth: usize) -> syn::Result<Stmt> {
    let lookahead = input.lookahead1();
    if lookahead.peek(kw::send) || lookahead.peek(kw::recv) {
        return parse_send_recv(input);
    }
    if lookahead.peek(Token![let]) {
        return parse_let(input);
    }
    if lookahead.peek(kw::wait) {
        let keyword: kw::wait = input.parse()?;
        if input.peek(kw::all) && input.peek2(Token![;]) {
            input.parse::<kw::all>()?;
            let semi: Token![;] = input.parse()?;
            return Ok(Stmt {
                kind: StmtKind::WaitAll,
                sp: Sp {
                    start: keyword.span,
                    end: semi.span,
                },
            });
        }
        let mut handles = vec![input.parse::<Ident>()?];
        while input.peek(Token![,]) {
            input.parse::<Token![,]>()?;
            if input.peek(Token![;]) {
                break;
            }
            handles.push(input.parse::<Ident>()?);
        }
        let semi: Token![;] = input.parse()?;
        return Ok(Stmt {
            kind: StmtKind::Wait(handles),
            sp: Sp {
                start: keyword.span,
                end: semi.span,
            },
        });
    }
    if lookahead.peek(kw::batch) {
        let keyword: kw::batch = input.parse()?;
        let content;
        let brace = braced!(content in input);
        let ops = parse_block_contents(&content, depth + 1, true)?;
        return Ok(Stmt {
            kind: StmtKind::Batch(ops),
            sp: Sp {
                start: keyword.span,
                end: brace.span.close(),
            },
        });
    }
    if lookahead.peek(kw::copy) {
        let keyword: kw::copy = input.parse()?;
        let src = parse_region(input)?;
        input.parse::<Token![->]>()?;
        let dst = parse_region(input)?;
        let semi: Token![;] = input.parse()?;
        return Ok(Stmt {
            kind: StmtKind::Copy { src, dst },
            sp: Sp {
                start: keyword.span,
                end: semi.span,
            },
        });
    }
    if lookahead.peek(kw::accumulate) {
        let keyword: kw::accumulate = input.parse()?;
        let src = parse_region(input)?;
        input.parse::<Token![->]>()?;
        let dst = parse_region(input)?;
        input.parse::<Token![,]>()?;
        let op = parse_op(input)?;
        let semi: Token![;] = input.parse()?;
        return Ok(Stmt {
            kind: StmtKind::Accumulate { src, dst, op },
            sp: Sp {
                start: keyword.span,
                end: semi.span,
            },
        });
    }
    if lookahead.peek(Token![for]) {
        return parse_for(input, depth, false);
    }
    if lookahead.peek(Token![if]) {
        return parse_if(input, depth, false);
    }
    if is_collective(&lookahead) {
        let call = CollCall::parse_with(input, true)?;
        let over = if input.peek(kw::over) {
            input.parse::<kw::over>()?;
            Some(parse_expr(input, 0)?)
        } else {
            None
        };
        let semi: Token![;] = input.parse()?;
        let start = call.sp.start;
        return Ok(Stmt {
            kind: StmtKind::Collective { call, over },
            sp: Sp { start, end: semi.span },
        });
    }
    if input.peek(kw::isend) || input.peek(kw::irecv) {
        return Err(input.error(format!(
            "{SYNTAX}a non-blocking operation returns a handle\nhint: write `let h = {} ..;` and later `wait h;`",
            input.cursor().ident().map(|(i, _)| i.to_string()).unwrap_or_default()
        )));
    }
    Err(lookahead.error())
}

fn is_collective(lookahead: &syn::parse::Lookahead1) -> bool {
    // Each peek also registers the keyword for the "expected one of" message.
    let mut found = false;
    found |= lookahead.peek(kw::all_reduce);
    found |= lookahead.peek(kw::all_gather);
    found |= lookahead.peek(kw::reduce_scatter);
    found |= lookahead.peek(kw::all_to_all);
    found |= lookahead.peek(kw::broadcast);
    found |= lookahead.peek(kw::reduce);
    found |= lookahead.peek(kw::all_gatherv);
    found |= lookahead.peek(kw::all_to_allv);
    found |= lookahead.peek(kw::barrier);
    found
}

fn parse_send_recv(input: ParseStream) -> syn::Result<Stmt> {
    let send = input.peek(kw::send);
    let op = parse_p2p(input, send)?;
    let semi: Token![;] = input.parse()?;
    let sp = op.keyword.to(Sp::one(semi.span));
    let kind = if send { StmtKind::Send(op) } else { StmtKind::Recv(op) };
    Ok(Stmt { kind, sp })
}

/// `KW REGION to|from EXPR [tag EXPR] [reduce OP]` where `KW` is any of the
/// four point-to-point keywords.
fn parse_p2p(input: ParseStream, send: bool) -> syn::Result<P2p> {
    // The caller has peeked one of the four keywords.
    let keyword = Sp::one(input.parse::<Ident>()?.span());
    let region = parse_region(input)?;
    if send {
        input.parse::<kw::to>()?;
    } else {
        input.parse::<kw::from>()?;
    }
    let peer = parse_expr(input, 0)?;
    let tag = if input.peek(kw::tag) {
        input.parse::<kw::tag>()?;
        Some(parse_expr(input, 0)?)
    } else {
        None
    };
    let reduce = if !send && input.peek(kw::reduce) {
        input.parse::<kw::reduce>()?;
        Some(parse_op(input)?)
    } else {
        None
    };
    Ok(P2p {
        keyword,
        region,
        peer,
        tag,
        reduce,
    })
}

fn parse_let(input: ParseStream) -> syn::Result<Stmt> {
    let let_token: Token![let] = input.parse()?;
    if input.peek(Token![mut]) {
        return Err(input.error(format!(
            "{SYNTAX}bindings of a schedule are immutable\nhint: remove `mut` and write a new `let`"
        )));
    }
    let name: Ident = input.parse()?;
    input.parse::<Token![=]>()?;
    if name == "all" && (input.peek(kw::isend) || input.peek(kw::irecv)) {
        return Err(syn::Error::new(
            name.span(),
            format!("{SYNTAX}`all` cannot name a request\nhint: `wait all;` waits for every request in flight; choose another name"),
        ));
    }
    let kind = if input.peek(kw::isend) {
        let op = parse_p2p(input, true)?;
        StmtKind::Isend { handle: name, op }
    } else if input.peek(kw::irecv) {
        let op = parse_p2p(input, false)?;
        StmtKind::Irecv { handle: name, op }
    } else if input.peek(kw::scratch) && input.peek2(syn::token::Bracket) {
        input.parse::<kw::scratch>()?;
        let content;
        bracketed!(content in input);
        content.parse::<kw::T>()?;
        content.parse::<Token![;]>()?;
        let len = parse_expr(&content, 0)?;
        StmtKind::Scratch { name, len }
    } else {
        StmtKind::Let {
            name,
            value: parse_expr(input, 0)?,
        }
    };
    let semi: Token![;] = input.parse()?;
    Ok(Stmt {
        kind,
        sp: Sp {
            start: let_token.span,
            end: semi.span,
        },
    })
}

fn parse_if(input: ParseStream, depth: usize, in_batch: bool) -> syn::Result<Stmt> {
    let if_token: Token![if] = input.parse()?;
    let mut branches = Vec::new();
    let cond = parse_expr(input, 0)?;
    let (body, mut close) = parse_block(input, depth, in_batch)?;
    branches.push((cond, body));
    let mut otherwise = None;
    while input.peek(Token![else]) {
        input.parse::<Token![else]>()?;
        let lookahead = input.lookahead1();
        if lookahead.peek(Token![if]) {
            input.parse::<Token![if]>()?;
            let cond = parse_expr(input, 0)?;
            let (body, c) = parse_block(input, depth, in_batch)?;
            close = c;
            branches.push((cond, body));
        } else if lookahead.peek(syn::token::Brace) {
            let (body, c) = parse_block(input, depth, in_batch)?;
            close = c;
            otherwise = Some(body);
            break;
        } else {
            return Err(lookahead.error());
        }
    }
    Ok(Stmt {
        kind: StmtKind::If { branches, otherwise },
        sp: Sp {
            start: if_token.span,
            end: close,
        },
    })
}

/// `A..B`, `A..=B`, `(A..B)`, `(A..B).rev()` (and `..=` inside the parentheses).
fn parse_loop_range(input: ParseStream) -> syn::Result<LoopRange> {
    if paren_holds_range(input) {
        let content;
        parenthesized!(content in input);
        let start = parse_expr(&content, 0)?;
        let inclusive = parse_range_dots(&content)?;
        let end = parse_expr(&content, 0)?;
        if !content.is_empty() {
            return Err(content.error(format!("{SYNTAX}expected `)`")));
        }
        let mut rev = false;
        if input.peek(Token![.]) {
            input.parse::<Token![.]>()?;
            input.parse::<kw::rev>()?;
            let content;
            parenthesized!(content in input);
            if !content.is_empty() {
                return Err(content.error(format!("{SYNTAX}`rev()` takes no arguments")));
            }
            rev = true;
        }
        return Ok(LoopRange {
            start,
            end,
            inclusive,
            rev,
        });
    }
    let start = parse_expr(input, 0)?;
    let inclusive = parse_range_dots(input)?;
    let end = parse_expr(input, 0)?;
    Ok(LoopRange {
        start,
        end,
        inclusive,
        rev: false,
    })
}

/// Whether the next token is a parenthesized group with `..` at its top level
/// (`(0..n).rev()` rather than `(a + 1)..n`).
fn paren_holds_range(input: ParseStream) -> bool {
    let Some((mut inner, _, _)) = input.cursor().group(Delimiter::Parenthesis) else {
        return false;
    };
    while let Some((tt, next)) = inner.token_tree() {
        if let TokenTree::Punct(p) = &tt {
            if p.as_char() == '.' && p.spacing() == Spacing::Joint {
                if let Some((second, _)) = next.punct() {
                    if second.as_char() == '.' {
                        return true;
                    }
                }
            }
        }
        inner = next;
    }
    false
}

fn parse_op(input: ParseStream) -> syn::Result<Op> {
    let lookahead = input.lookahead1();
    if lookahead.peek(kw::sum) {
        input.parse::<kw::sum>()?;
        Ok(Op::Sum)
    } else if lookahead.peek(kw::prod) {
        input.parse::<kw::prod>()?;
        Ok(Op::Prod)
    } else if lookahead.peek(kw::max) {
        input.parse::<kw::max>()?;
        Ok(Op::Max)
    } else if lookahead.peek(kw::min) {
        input.parse::<kw::min>()?;
        Ok(Op::Min)
    } else if lookahead.peek(Ident) && !input.peek(kw::root) {
        Ok(Op::Param(input.parse()?))
    } else {
        Err(lookahead.error())
    }
}

impl CollCall {
    /// A collective call; `barrier` only when `allow_barrier` (statements,
    /// not postconditions).
    fn parse_with(input: ParseStream, allow_barrier: bool) -> syn::Result<Self> {
        let lookahead = input.lookahead1();
        let kinds: [(bool, CollKind); 8] = [
            (lookahead.peek(kw::all_reduce), CollKind::AllReduce),
            (lookahead.peek(kw::all_gather), CollKind::AllGather),
            (lookahead.peek(kw::reduce_scatter), CollKind::ReduceScatter),
            (lookahead.peek(kw::all_to_all), CollKind::AllToAll),
            (lookahead.peek(kw::broadcast), CollKind::Broadcast),
            (lookahead.peek(kw::reduce), CollKind::Reduce),
            (lookahead.peek(kw::all_gatherv), CollKind::AllGatherV),
            (lookahead.peek(kw::all_to_allv), CollKind::AllToAllV),
        ];
        let kind = match kinds.iter().find(|(found, _)| *found) {
            Some((_, kind)) => *kind,
            None if allow_barrier && lookahead.peek(kw::barrier) => CollKind::Barrier,
            None if !allow_barrier && lookahead.peek(kw::shift) => CollKind::Shift,
            None => return Err(lookahead.error()),
        };
        let name = Sp::one(input.parse::<Ident>()?.span());
        if kind == CollKind::Barrier {
            let mut sp = name;
            if input.peek(syn::token::Paren) {
                let content;
                let paren = parenthesized!(content in input);
                if !content.is_empty() {
                    return Err(content.error(format!("{SYNTAX}`barrier` takes no arguments")));
                }
                sp = sp.to(Sp::one(paren.span.close()));
            }
            return Ok(CollCall {
                kind,
                src: None,
                dst: None,
                op: None,
                root: None,
                counts: None,
                sp,
            });
        }
        let content;
        let paren = parenthesized!(content in input);
        let sp = name.to(Sp::one(paren.span.close()));
        let src = parse_region(&content)?;
        // in place: `all_reduce(BUF, OP)`, and `all_gather(BUF)` as a
        // postcondition only
        let may_be_in_place = kind == CollKind::AllReduce || kind == CollKind::AllGather && !allow_barrier;
        let needs_dst = !may_be_in_place && kind != CollKind::Broadcast;
        let dst = if needs_dst || (may_be_in_place && content.peek(Token![->])) {
            content.parse::<Token![->]>()?;
            Some(parse_region(&content)?)
        } else {
            None
        };
        let op = if matches!(kind, CollKind::AllReduce | CollKind::ReduceScatter | CollKind::Reduce) {
            content.parse::<Token![,]>()?;
            Some(parse_op(&content)?)
        } else {
            None
        };
        let root = if matches!(kind, CollKind::Broadcast | CollKind::Reduce) {
            content.parse::<Token![,]>()?;
            content.parse::<kw::root>()?;
            content.parse::<Token![=]>()?;
            Some(parse_expr(&content, 0)?)
        } else if kind == CollKind::Shift {
            // the rank whose input each rank ends with, kept as `root`
            content.parse::<Token![,]>()?;
            content.parse::<kw::from>()?;
            content.parse::<Token![=]>()?;
            Some(parse_expr(&content, 0)?)
        } else {
            None
        };
        let counts = if matches!(kind, CollKind::AllGatherV | CollKind::AllToAllV) {
            content.parse::<Token![,]>()?;
            Some(content.parse::<Ident>()?)
        } else {
            None
        };
        if content.peek(Token![,]) {
            content.parse::<Token![,]>()?;
        }
        if !content.is_empty() {
            return Err(content.error(format!("{SYNTAX}expected `)`")));
        }
        Ok(CollCall {
            kind,
            src: Some(src),
            dst,
            op,
            root,
            counts,
            sp,
        })
    }
}

// ---------------------------------------------------------------- regions

/// `IDENT`, `IDENT[A..B]`, `REGION.chunk(I)`, `REGION.chunk(I, K)`; a slice
/// may also follow a chunk (`a.chunk(i)[0..n]`).
pub(crate) enum Region {
    /// The whole buffer.
    Whole(Ident),
    /// `base[start..end]` (`..=` is accepted and means `end + 1`).
    Slice {
        base: Box<Region>,
        start: Box<Expr>,
        end: Box<Expr>,
        inclusive: bool,
        close: Span,
    },
    /// `base.chunk(index[, parts])`.
    Chunk {
        base: Box<Region>,
        index: Box<Expr>,
        parts: Option<Box<Expr>>,
        close: Span,
    },
    /// `base.part(line, index)`.
    Part {
        base: Box<Region>,
        line: Box<Expr>,
        index: Box<Expr>,
        close: Span,
    },
}

impl Region {
    /// The region's tokens.
    pub(crate) fn sp(&self) -> Sp {
        match self {
            Region::Whole(buf) => Sp::one(buf.span()),
            Region::Slice { base, close, .. }
            | Region::Chunk { base, close, .. }
            | Region::Part { base, close, .. } => Sp {
                start: base.sp().start,
                end: *close,
            },
        }
    }
}

fn parse_region(input: ParseStream) -> syn::Result<Region> {
    let mut region = Region::Whole(input.parse()?);
    let mut depth = 0;
    loop {
        let slice = input.peek(syn::token::Bracket);
        let chunk = input.peek(Token![.]) && !input.peek(Token![..]);
        if !slice && !chunk {
            return Ok(region);
        }
        depth += 1;
        if depth > MAX_DEPTH {
            return Err(input.error(format!("{SYNTAX}region expression too long")));
        }
        if slice {
            let content;
            let bracket = bracketed!(content in input);
            let start = parse_expr(&content, 0)?;
            let inclusive = parse_range_dots(&content)?;
            let end = parse_expr(&content, 0)?;
            if !content.is_empty() {
                return Err(content.error(format!("{SYNTAX}expected `]`")));
            }
            region = Region::Slice {
                base: Box::new(region),
                start: Box::new(start),
                end: Box::new(end),
                inclusive,
                close: bracket.span.close(),
            };
            continue;
        }
        input.parse::<Token![.]>()?;
        if input.peek(kw::part) {
            input.parse::<kw::part>()?;
            let content;
            let paren = parenthesized!(content in input);
            let line = parse_expr(&content, 0)?;
            content.parse::<Token![,]>()?;
            let index = parse_expr(&content, 0)?;
            if content.peek(Token![,]) {
                content.parse::<Token![,]>()?;
            }
            if !content.is_empty() {
                return Err(content.error(format!("{SYNTAX}expected `)`")));
            }
            region = Region::Part {
                base: Box::new(region),
                line: Box::new(line),
                index: Box::new(index),
                close: paren.span.close(),
            };
            continue;
        }
        let lookahead = input.lookahead1();
        if !lookahead.peek(kw::chunk) {
            return Err(lookahead.error());
        }
        input.parse::<kw::chunk>()?;
        let content;
        let paren = parenthesized!(content in input);
        let index = parse_expr(&content, 0)?;
        let mut parts = None;
        if content.peek(Token![,]) {
            content.parse::<Token![,]>()?;
            if !content.is_empty() {
                parts = Some(Box::new(parse_expr(&content, 0)?));
                if content.peek(Token![,]) {
                    content.parse::<Token![,]>()?;
                }
            }
        }
        if !content.is_empty() {
            return Err(content.error(format!("{SYNTAX}expected `)`")));
        }
        region = Region::Chunk {
            base: Box::new(region),
            index: Box::new(index),
            parts,
            close: paren.span.close(),
        };
    }
}

// ---------------------------------------------------------------- expressions

/// An integer (or boolean) expression of section 4.
pub(crate) enum Expr {
    /// An integer literal; its value is read during lowering.
    Int(LitInt),
    /// `true` or `false`.
    Bool(LitBool),
    /// A name.
    Name(Ident),
    /// `-e` or `!e`.
    Unary { op: UnOp, op_span: Span, expr: Box<Expr> },
    /// `a OP b`.
    Binary { op: BinOp, lhs: Box<Expr>, rhs: Box<Expr> },
    /// `f(a, ..)`.
    Call { func: Ident, args: Vec<Expr>, close: Span },
    /// `(e)`.
    Paren { expr: Box<Expr>, sp: Sp },
    /// `base[index]` or `base[index..end]` (`..=` when `inclusive`): entries
    /// and ranges of count parameters.
    Index {
        base: Box<Expr>,
        index: Box<Expr>,
        end: Option<(bool, Box<Expr>)>,
        close: Span,
    },
}

/// Binding strength, as in Rust (higher binds tighter).
fn precedence(op: BinOp) -> u8 {
    match op {
        BinOp::Or => 1,
        BinOp::And => 2,
        BinOp::Eq | BinOp::Ne | BinOp::Lt | BinOp::Le | BinOp::Gt | BinOp::Ge => 3,
        BinOp::BitOr => 4,
        BinOp::BitXor => 5,
        BinOp::BitAnd => 6,
        BinOp::Shl | BinOp::Shr => 7,
        BinOp::Add | BinOp::Sub => 8,
        BinOp::Mul | BinOp::Div | BinOp::Rem => 9,
    }
}

/// Whether `op` is a comparison (which do not chain, as in Rust).
fn is_comparison(op: BinOp) -> bool {
    precedence(op) == 3
}

impl Expr {
    /// The expression's tokens.
    pub(crate) fn sp(&self) -> Sp {
        match self {
            Expr::Int(lit) => Sp::one(lit.span()),
            Expr::Bool(lit) => Sp::one(lit.span),
            Expr::Name(name) => Sp::one(name.span()),
            Expr::Unary { op_span, expr, .. } => Sp::one(*op_span).to(expr.sp()),
            Expr::Binary { lhs, rhs, .. } => lhs.sp().to(rhs.sp()),
            Expr::Call { func, close, .. } => Sp {
                start: func.span(),
                end: *close,
            },
            Expr::Paren { sp, .. } => *sp,
            Expr::Index { base, close, .. } => Sp {
                start: base.sp().start,
                end: *close,
            },
        }
    }
}

/// Peeks a binary operator without consuming it; longest tokens first.
fn peek_binop(input: ParseStream) -> Option<BinOp> {
    let op = if input.peek(Token![||]) {
        BinOp::Or
    } else if input.peek(Token![&&]) {
        BinOp::And
    } else if input.peek(Token![==]) {
        BinOp::Eq
    } else if input.peek(Token![!=]) {
        BinOp::Ne
    } else if input.peek(Token![<<]) {
        BinOp::Shl
    } else if input.peek(Token![>>]) {
        BinOp::Shr
    } else if input.peek(Token![<=]) {
        BinOp::Le
    } else if input.peek(Token![>=]) {
        BinOp::Ge
    } else if input.peek(Token![<]) {
        BinOp::Lt
    } else if input.peek(Token![>]) {
        BinOp::Gt
    } else if input.peek(Token![|]) {
        BinOp::BitOr
    } else if input.peek(Token![^]) {
        BinOp::BitXor
    } else if input.peek(Token![&]) {
        BinOp::BitAnd
    } else if input.peek(Token![+]) {
        BinOp::Add
    } else if input.peek(Token![->]) {
        return None;
    } else if input.peek(Token![-]) {
        BinOp::Sub
    } else if input.peek(Token![*]) {
        BinOp::Mul
    } else if input.peek(Token![/]) {
        BinOp::Div
    } else if input.peek(Token![%]) {
        BinOp::Rem
    } else {
        return None;
    };
    // `a += b`, `a <<= b`, ...: not operators of the language.
    Some(op)
}

/// Consumes the operator `op` (already peeked).
fn take_binop(input: ParseStream, op: BinOp) -> syn::Result<()> {
    match op {
        BinOp::Or => input.parse::<Token![||]>().map(drop),
        BinOp::And => input.parse::<Token![&&]>().map(drop),
        BinOp::Eq => input.parse::<Token![==]>().map(drop),
        BinOp::Ne => input.parse::<Token![!=]>().map(drop),
        BinOp::Shl => input.parse::<Token![<<]>().map(drop),
        BinOp::Shr => input.parse::<Token![>>]>().map(drop),
        BinOp::Le => input.parse::<Token![<=]>().map(drop),
        BinOp::Ge => input.parse::<Token![>=]>().map(drop),
        BinOp::Lt => input.parse::<Token![<]>().map(drop),
        BinOp::Gt => input.parse::<Token![>]>().map(drop),
        BinOp::BitOr => input.parse::<Token![|]>().map(drop),
        BinOp::BitXor => input.parse::<Token![^]>().map(drop),
        BinOp::BitAnd => input.parse::<Token![&]>().map(drop),
        BinOp::Add => input.parse::<Token![+]>().map(drop),
        BinOp::Sub => input.parse::<Token![-]>().map(drop),
        BinOp::Mul => input.parse::<Token![*]>().map(drop),
        BinOp::Div => input.parse::<Token![/]>().map(drop),
        BinOp::Rem => input.parse::<Token![%]>().map(drop),
    }
}

/// Precedence climbing; `depth` bounds the recursion.
fn parse_expr(input: ParseStream, depth: usize) -> syn::Result<Expr> {
    parse_binary(input, 0, depth)
}

fn parse_binary(input: ParseStream, min_prec: u8, depth: usize) -> syn::Result<Expr> {
    if depth > MAX_DEPTH {
        return Err(input.error(format!("{SYNTAX}expression nested too deeply")));
    }
    let lhs = parse_unary(input, depth + 1)?;
    let mut rest = Vec::new();
    let mut last_comparison = false;
    // A flat chain `a + b + ..` is read in this loop, not by recursion (the
    // operand on the right binds tighter, so that recursion is bounded by
    // the number of precedence levels); `chain` keeps its tree shallow.
    while let Some(op) = peek_binop(input) {
        let prec = precedence(op);
        if prec < min_prec {
            break;
        }
        if rest.len() >= MAX_CHAIN {
            return Err(input.error(format!(
                "{SYNTAX}expression too long: more than {MAX_CHAIN} operators in one chain\nhint: bind parts of it with `let`"
            )));
        }
        if is_comparison(op) && last_comparison {
            return Err(input.error(format!(
                "{SYNTAX}comparison operators cannot be chained\nhint: use parentheses or `&&`"
            )));
        }
        take_binop(input, op)?;
        let rhs = parse_binary(input, prec + 1, depth + 1)?;
        last_comparison = is_comparison(op);
        rest.push((op, rhs));
    }
    if depth + super::chain::depth(&rest) > MAX_DEPTH + super::chain::KEEP {
        return Err(input.error(format!(
            "{SYNTAX}expression nested too deeply: its operators fold into a tree more than {} levels deep\nhint: \
             long chains of `+`/`-`, `*`, `&`, `|`, `^`, `&&` or `||` are fine; bind parts of others with `let`",
            MAX_DEPTH + super::chain::KEEP
        )));
    }
    Ok(super::chain::fold(lhs, rest))
}

fn parse_unary(input: ParseStream, depth: usize) -> syn::Result<Expr> {
    if depth > MAX_DEPTH {
        return Err(input.error(format!("{SYNTAX}expression nested too deeply")));
    }
    let lookahead = input.lookahead1();
    if lookahead.peek(Token![-]) {
        let op_span = input.parse::<Token![-]>()?.span;
        let expr = parse_unary(input, depth + 1)?;
        return Ok(Expr::Unary {
            op: UnOp::Neg,
            op_span,
            expr: Box::new(expr),
        });
    }
    if lookahead.peek(Token![!]) {
        let op_span = input.parse::<Token![!]>()?.span;
        let expr = parse_unary(input, depth + 1)?;
        return Ok(Expr::Unary {
            op: UnOp::Not,
            op_span,
            expr: Box::new(expr),
        });
    }
    if lookahead.peek(LitInt) {
        return Ok(Expr::Int(input.parse()?));
    }
    if lookahead.peek(LitBool) {
        return Ok(Expr::Bool(input.parse()?));
    }
    if lookahead.peek(syn::token::Paren) {
        let content;
        let paren = parenthesized!(content in input);
        let expr = parse_binary(&content, 0, depth + 1)?;
        if !content.is_empty() {
            return Err(content.error(format!("{SYNTAX}expected `)`")));
        }
        return Ok(Expr::Paren {
            expr: Box::new(expr),
            sp: Sp {
                start: paren.span.open(),
                end: paren.span.close(),
            },
        });
    }
    if lookahead.peek(Ident) {
        let mut e = parse_name_or_call(input, depth)?;
        while input.peek(syn::token::Bracket) {
            let content;
            let bracket = bracketed!(content in input);
            let index = parse_binary(&content, 0, depth + 1)?;
            let end = if content.peek(Token![..]) || content.peek(Token![..=]) {
                let inclusive = parse_range_dots(&content)?;
                Some((inclusive, Box::new(parse_binary(&content, 0, depth + 1)?)))
            } else {
                None
            };
            if !content.is_empty() {
                return Err(content.error(format!("{SYNTAX}expected `]`")));
            }
            e = Expr::Index {
                base: Box::new(e),
                index: Box::new(index),
                end,
                close: bracket.span.close(),
            };
        }
        return Ok(e);
    }
    Err(lookahead.error())
}

/// A name, or a call `f(a, ..)`.
fn parse_name_or_call(input: ParseStream, depth: usize) -> syn::Result<Expr> {
    let name: Ident = input.parse()?;
    if !input.peek(syn::token::Paren) {
        return Ok(Expr::Name(name));
    }
    let content;
    let paren = parenthesized!(content in input);
    let mut args = Vec::new();
    while !content.is_empty() {
        args.push(parse_binary(&content, 0, depth + 1)?);
        if content.is_empty() {
            break;
        }
        content.parse::<Token![,]>()?;
    }
    Ok(Expr::Call {
        func: name,
        args,
        close: paren.span.close(),
    })
}
