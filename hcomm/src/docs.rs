//! Documentation pages that are not about one item: the language reference of
//! [`comm_schedule!`](crate::comm_schedule) and a guide to writing schedules.
//! Their examples are compiled and run as doc tests.

// Prose pages: product names (MSCCLang, HCCL) are words, not code.
#![allow(clippy::doc_markdown)]

#[doc = include_str!("../docs/language.md")]
pub mod language {}

#[doc = include_str!("../docs/guide.md")]
pub mod guide {}
