//! Collects every error of one derive so they are reported together.

use std::cell::RefCell;
use std::fmt::Display;

use quote::ToTokens;

/// Errors found while parsing and checking one input. Must be consumed with
/// [`Ctxt::check`]: dropping it unchecked is a bug in this crate.
pub(crate) struct Ctxt {
    errors: RefCell<Option<Vec<syn::Error>>>,
}

impl Ctxt {
    pub(crate) fn new() -> Self {
        Ctxt { errors: RefCell::new(Some(Vec::new())) }
    }

    /// An error spanned on the smallest tokens that show the mistake.
    pub(crate) fn error_spanned_by<T: ToTokens, M: Display>(&self, tokens: T, message: M) {
        self.push(syn::Error::new_spanned(tokens.into_token_stream(), message));
    }

    pub(crate) fn push(&self, error: syn::Error) {
        self.errors.borrow_mut().as_mut().expect("Ctxt used after check").push(error);
    }

    /// Whether an error was reported: later phases skip their rules, whose findings would
    /// only echo it (a misspelt `#[cai(dat)]` is not also "no data field").
    pub(crate) fn has_errors(&self) -> bool {
        self.errors.borrow().as_ref().is_some_and(|errors| !errors.is_empty())
    }

    /// Every error, combined into one, or `Ok` when there were none.
    pub(crate) fn check(self) -> syn::Result<()> {
        let errors = self.errors.borrow_mut().take().expect("Ctxt checked twice");
        let mut iter = errors.into_iter();
        let Some(mut first) = iter.next() else { return Ok(()) };
        for e in iter {
            first.combine(e);
        }
        Err(first)
    }
}

impl Drop for Ctxt {
    fn drop(&mut self) {
        if !std::thread::panicking() && self.errors.borrow().is_some() {
            panic!("cai-derive: errors were collected but never checked");
        }
    }
}
