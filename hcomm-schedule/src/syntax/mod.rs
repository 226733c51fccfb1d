//! The schedule language as text: parse `fn` items (from the tokens a macro
//! receives, or from a string) and lower them into the [`crate::ir`], with a
//! table mapping every [`crate::ir::SpanId`] back to the source.
//!
//! `comm_schedule!` and `hcomm::checker` share this module, so a schedule
//! read from a file gets the diagnostics the macro gives, with the same texts
//! at the same places. Phases of one item ([`front`], then [`check`]):
//! `parse` (syntax → AST, `syn` errors) → `lower` (AST → IR, names as text)
//! → [`crate::resolve`] (names, linearity, length binding) → the checker
//! ([`crate::check_static`], [`crate::verify`]). Each phase runs only when the
//! one before it found nothing wrong.
//!
//! Spans are `proc_macro2` spans: inside a proc macro they point at the
//! user's tokens; parsed from a string ([`parse_str`]) they carry the line
//! and column of the text ([`Sp::line_column`]).

mod chain;
mod lower;
mod parse;

use proc_macro2::TokenStream;

use crate::diag::Diagnostic;
use crate::ir;
use crate::resolve::LenBinding;

pub use lower::SpanTable;
pub use parse::{Input, Item, Param, ParamKind, Sp};

/// At most this many errors per schedule (language reference, section 8).
pub const MAX_ERRORS: usize = 8;

/// An item after the phases that do not depend on the world size: its IR
/// with every name resolved, where each node came from, and what the
/// generated function needs besides.
pub struct Front {
    /// The resolved IR.
    pub ir: ir::Schedule,
    /// The source of every [`ir::SpanId`] of `ir`.
    pub spans: SpanTable,
    /// The item's attributes other than `verify`, `requires` and
    /// `postcondition` (doc comments and the like), in order.
    pub passthrough: Vec<syn::Attribute>,
    /// Which buffer's length binds each length variable.
    pub len_bindings: Vec<LenBinding>,
}

/// Why an item was rejected, as errors at places of the source.
#[derive(Debug)]
pub struct Rejection {
    /// Each error: where, and its text (`"{kind}: {message}"`, plus
    /// `"\nhint: .."`), in the order the compiler would print them.
    pub errors: Vec<(Sp, String)>,
    /// The checker's diagnostics behind `errors` (empty for a parse error).
    pub diagnostics: Vec<Diagnostic>,
    /// A parse error as `syn` reported it (its spans cover whole nodes).
    syntax: Option<syn::Error>,
}

impl Rejection {
    fn syntax(error: &syn::Error) -> Self {
        Rejection {
            errors: error
                .clone()
                .into_iter()
                .map(|e| (Sp::one(e.span()), e.to_string()))
                .collect(),
            diagnostics: Vec::new(),
            syntax: Some(error.clone()),
        }
    }

    fn diagnostics(diagnostics: Vec<Diagnostic>, spans: &SpanTable) -> Self {
        Rejection {
            errors: render(&diagnostics, spans),
            diagnostics,
            syntax: None,
        }
    }

    /// The errors as one `syn::Error` (the macro's compile errors).
    pub fn to_syn(&self) -> syn::Error {
        if let Some(e) = &self.syntax {
            return e.clone();
        }
        let mut all: Option<syn::Error> = None;
        for (sp, text) in &self.errors {
            let e = sp.error(text);
            match &mut all {
                Some(all) => all.combine(e),
                None => all = Some(e),
            }
        }
        all.unwrap_or_else(|| syn::Error::new(proc_macro2::Span::call_site(), "syntax error"))
    }
}

/// Checker diagnostics as errors at their spans: each with its notes as extra
/// errors at theirs, at most [`MAX_ERRORS`] primary ones.
pub fn render(diagnostics: &[Diagnostic], spans: &SpanTable) -> Vec<(Sp, String)> {
    let mut out = Vec::new();
    for diag in diagnostics.iter().take(MAX_ERRORS) {
        out.push((spans.get(diag.span), diag.to_string()));
        for (i, (span, note)) in diag.notes.iter().enumerate() {
            // A note at the primary location, or repeated, adds nothing.
            if *span == diag.span || diag.notes[..i].iter().any(|(s, _)| s == span) {
                continue;
            }
            let kind = diag.kind.as_str();
            let text = if note.starts_with(kind) {
                note.clone()
            } else {
                format!("{kind}: {note}")
            };
            out.push((spans.get(*span), text));
        }
    }
    out
}

/// Parses a text of `fn` items (what goes between the braces of
/// `comm_schedule! { .. }`). A token the lexer rejects is a `syntax error`
/// at its place.
pub fn parse_str(src: &str) -> syn::Result<Input> {
    let tokens: TokenStream = src
        .parse()
        .map_err(|e: proc_macro2::LexError| syn::Error::new(e.span(), format!("syntax error: {e}")))?;
    syn::parse2(tokens)
}

/// Parses the attributes and body of `item`, lowers and resolves it.
pub fn front(item: &Item) -> Result<Front, Rejection> {
    let (attrs, attr_errors) = item.attrs();
    let mut syntax: Option<syn::Error> = None;
    let mut push = |e: syn::Error| match &mut syntax {
        Some(all) => all.combine(e),
        None => syntax = Some(e),
    };
    for e in attr_errors {
        push(e);
    }
    let body = item.body().unwrap_or_else(|e| {
        push(e);
        Vec::new()
    });
    if let Some(e) = syntax {
        return Err(Rejection::syntax(&e));
    }
    let mut diags = Vec::new();
    let lower::Lowered { mut ir, spans } = lower::lower(item, &attrs, &body, &mut diags);
    if !diags.is_empty() {
        return Err(Rejection::diagnostics(diags, &spans));
    }
    let resolution = crate::resolve::resolve(&mut ir);
    if !resolution.diagnostics.is_empty() {
        return Err(Rejection::diagnostics(resolution.diagnostics, &spans));
    }
    Ok(Front {
        ir,
        spans,
        passthrough: attrs.passthrough,
        len_bindings: resolution.len_bindings,
    })
}

/// Runs the checker on a resolved item: the world-independent checks, then
/// every world size and scalar combination of its verify set.
pub fn check(front: &Front) -> Result<(), Rejection> {
    let diags = crate::check_static(&front.ir);
    if !diags.is_empty() {
        return Err(Rejection::diagnostics(diags, &front.spans));
    }
    let diags = crate::verify(&front.ir);
    if !diags.is_empty() {
        return Err(Rejection::diagnostics(diags, &front.spans));
    }
    Ok(())
}

impl Item {
    /// The item's source as text (attributes included), which [`parse_str`]
    /// turns back into the same IR.
    pub fn source(&self) -> String {
        self.tokens.to_string()
    }
}

impl Sp {
    /// Line (from 1) and column (from 1, in characters) of the first token,
    /// for a span of a parsed string; `(0, 1)` inside a proc macro, where
    /// the compiler reports places itself.
    pub fn line_column(&self) -> (usize, usize) {
        let start = self.start.start();
        (start.line, start.column + 1)
    }
}
