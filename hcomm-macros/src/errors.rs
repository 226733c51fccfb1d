//! The fallback item emitted when a schedule has errors.

use proc_macro2::TokenStream;
use quote::quote;

use crate::expand;
use hcomm_schedule::syntax::Item;

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
