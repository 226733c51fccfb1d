//! Error accumulation, checker diagnostics on the user's tokens, and the
//! fallback item emitted when a schedule has errors.

use hcomm_schedule::diag::Diagnostic;
use proc_macro2::TokenStream;
use quote::quote;

use crate::expand;
use crate::lower::SpanTable;
use crate::parse::Item;

/// At most this many errors per schedule (language reference, section 8).
pub(crate) const MAX_ERRORS: usize = 8;

/// Errors found so far (accumulate, don't bail).
#[derive(Default)]
pub(crate) struct Errors(Vec<syn::Error>);

impl Errors {
    /// No errors yet.
    pub(crate) fn new() -> Self {
        Self::default()
    }

    /// Records a ready error.
    pub(crate) fn push(&mut self, error: syn::Error) {
        self.0.push(error);
    }

    /// Records checker diagnostics: each at its span, with its notes as extra
    /// errors at theirs, at most [`MAX_ERRORS`] primary ones.
    pub(crate) fn diagnostics(&mut self, diagnostics: &[Diagnostic], spans: &SpanTable) {
        for diag in diagnostics.iter().take(MAX_ERRORS) {
            self.0.push(spans.get(diag.span).error(diag));
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
                self.0.push(spans.get(*span).error(text));
            }
        }
    }

    /// `Err` with every error recorded so far (and forgets them), or `Ok`.
    pub(crate) fn propagate(&mut self) -> syn::Result<()> {
        let mut all: Option<syn::Error> = None;
        for e in self.0.drain(..) {
            match &mut all {
                Some(all) => all.combine(e),
                None => all = Some(e),
            }
        }
        all.map_or(Ok(()), Err)
    }
}

/// The errors as `compile_error!`s plus an item of the right shape whose body
/// is unreachable, so the caller's uses of the function and of
/// `NAME::SCHEDULE` do not add errors of their own.
pub(crate) fn fallback(item: &Item, error: &syn::Error) -> TokenStream {
    let errors = error.to_compile_error();
    let signature = expand::signature(item);
    let module = expand::schedule_module(item, &quote!(::core::unreachable!()));
    quote! {
        #errors
        #[allow(dead_code, unused_variables, clippy::all, clippy::pedantic)]
        #signature {
            ::core::unreachable!()
        }
        #module
    }
}
