//! The parse-and-check entry survives any input: mutated programs (the UI
//! test programs of the repository and the expansion tests' corpus) and
//! random token streams get errors, never a panic, never a hang, each in
//! under a second.
//!
//! The default run is 1000 inputs of each kind from a fixed seed;
//! `HCOMM_MACRO_FUZZ_CASES=200000 HCOMM_MACRO_FUZZ_SEED=7 cargo test -p hcomm-macros fuzz`
//! runs more (about 10 s per 40000 inputs in a debug build).
//!
//! The bound of one second holds for these inputs, not for every input: the
//! checker's limits (2^24 loop iterations, 2^28 steps per rank, 2^16 world
//! sizes) bound its work, but valid schedules near them take minutes
//! ([`large_valid_schedules_take_over_a_second`]), so the words mutations
//! insert stop at 100 ranks.

use std::path::Path;
use std::sync::mpsc;
use std::time::{Duration, Instant};

use proc_macro2::{Delimiter, TokenStream, TokenTree};
use proptest::prelude::*;

use super::{corpus, errors, flatten};

/// The most one input may take.
const LIMIT: Duration = Duration::from_secs(1);

/// Past this, an input counts as a hang (its thread is abandoned).
const HANG: Duration = Duration::from_secs(30);

fn env_or(name: &str, default: u64) -> u64 {
    std::env::var(name).ok().and_then(|v| v.parse().ok()).unwrap_or(default)
}

fn config() -> ProptestConfig {
    ProptestConfig {
        cases: u32::try_from(env_or("HCOMM_MACRO_FUZZ_CASES", 1000)).unwrap_or(u32::MAX),
        rng_seed: proptest::test_runner::RngSeed::Fixed(env_or("HCOMM_MACRO_FUZZ_SEED", 0x00c0_ffee)),
        // the seed is fixed and a failure prints its input
        failure_persistence: None,
        ..ProptestConfig::default()
    }
}

/// The inputs of every `comm_schedule! { .. }` in `tokens`.
fn invocations(tokens: TokenStream, out: &mut Vec<TokenStream>) {
    let tts: Vec<TokenTree> = tokens.into_iter().collect();
    for (i, tt) in tts.iter().enumerate() {
        match tt {
            TokenTree::Ident(id) if id == "comm_schedule" => {
                if let (Some(TokenTree::Punct(p)), Some(TokenTree::Group(g))) = (tts.get(i + 1), tts.get(i + 2)) {
                    if p.as_char() == '!' && g.delimiter() == Delimiter::Brace {
                        out.push(g.stream());
                    }
                }
            }
            TokenTree::Group(g) => invocations(g.stream(), out),
            _ => {}
        }
    }
}

/// Every program to mutate, as words: the expansion tests' corpus and the
/// schedules of the UI tests (those that compile and those that must not).
fn programs() -> &'static [Vec<String>] {
    static PROGRAMS: std::sync::OnceLock<Vec<Vec<String>>> = std::sync::OnceLock::new();
    PROGRAMS.get_or_init(|| {
        let mut streams = corpus();
        let ui = Path::new(env!("CARGO_MANIFEST_DIR")).join("../ui-tests");
        let mut files = Vec::new();
        let mut dirs = vec![ui.join("pass"), ui.join("fail")];
        while let Some(d) = dirs.pop() {
            for entry in std::fs::read_dir(&d).into_iter().flatten().flatten() {
                let p = entry.path();
                if p.is_dir() {
                    dirs.push(p);
                } else if p.extension().is_some_and(|e| e == "rs") {
                    files.push(p);
                }
            }
        }
        files.sort();
        for f in files {
            let text = std::fs::read_to_string(&f).unwrap_or_default();
            if let Ok(tokens) = text.parse::<TokenStream>() {
                invocations(tokens, &mut streams);
            }
        }
        streams
            .into_iter()
            .map(|s| {
                let mut w = Vec::new();
                flatten(s, &mut w);
                w
            })
            .collect()
    })
}

/// Runs parse and every phase on `text` in a thread of its own: a panic
/// fails, an input past [`LIMIT`] fails, one past [`HANG`] fails without
/// waiting for it.
fn survive(text: &str) -> Result<(), TestCaseError> {
    let Ok(tokens) = text.parse::<TokenStream>() else {
        return Ok(());
    };
    // token streams are not `Send`: the thread parses the text again
    let owned = tokens.to_string();
    let (tx, rx) = mpsc::channel();
    let started = Instant::now();
    std::thread::spawn(move || {
        let outcome = std::panic::catch_unwind(|| {
            if let Ok(t) = owned.parse::<TokenStream>() {
                let _ = errors(t);
            }
        });
        let _ = tx.send(outcome.is_ok());
    });
    match rx.recv_timeout(HANG) {
        Ok(true) => {}
        Ok(false) => return Err(TestCaseError::fail(format!("panicked on:\n{text}"))),
        Err(_) => return Err(TestCaseError::fail(format!("no answer after {HANG:?} on:\n{text}"))),
    }
    let took = started.elapsed();
    prop_assert!(took < LIMIT, "took {took:?} on:\n{text}");
    Ok(())
}

/// Words mutations insert: the language's keywords and punctuation, and
/// values at the edges of the integer rules.
fn vocabulary() -> Vec<&'static str> {
    vec![
        "",
        ";",
        ",",
        ":",
        "(",
        ")",
        "{",
        "}",
        "[",
        "]",
        ".",
        "..",
        "..=",
        "->",
        "=",
        "#",
        "!",
        "&",
        "mut",
        "fn",
        "T",
        "usize",
        "n",
        "m",
        "a",
        "b",
        "x",
        "h",
        "rank",
        "world",
        "send",
        "recv",
        "isend",
        "irecv",
        "wait",
        "batch",
        "copy",
        "accumulate",
        "scratch",
        "let",
        "for",
        "in",
        "if",
        "else",
        "to",
        "from",
        "tag",
        "reduce",
        "over",
        "root",
        "chunk",
        "rev",
        "sum",
        "max",
        "barrier",
        "all_reduce",
        "all_gather",
        "reduce_scatter",
        "all_to_all",
        "broadcast",
        "verify",
        "requires",
        "postcondition",
        "log2",
        "pow2",
        "is_pow2",
        "min",
        "+",
        "-",
        "*",
        "/",
        "%",
        "<<",
        ">>",
        "^",
        "&&",
        "||",
        "==",
        "<",
        ">=",
        "0",
        "1",
        "2",
        "-1",
        "63",
        "64",
        "65",
        "100",
        "9223372036854775807",
        "99999999999999999999",
        "0 - 1",
        "world * world",
        "n * n",
        "rank / 0",
        "1 << 63",
        "pow2(62)",
        "log2(0)",
        "i64",
        "true",
        "false",
    ]
}

/// Words that can stand for one another without breaking the syntax.
const CLASSES: &[&[&str]] = &[
    &[
        "0",
        "1",
        "2",
        "3",
        "-1",
        "4",
        "7",
        "63",
        "64",
        "100",
        "9223372036854775807",
        "99999999999999999999",
    ],
    &[
        "+", "-", "*", "/", "%", "<<", ">>", "^", "&", "|", "==", "!=", "<", "<=", ">", ">=", "&&", "||",
    ],
    &[
        "rank", "world", "n", "s", "i", "p", "a", "b", "h", "input", "output", "root", "k", "local",
    ],
    &["send", "recv"],
    &["isend", "irecv"],
    &["to", "from"],
    &[
        "all_reduce",
        "all_gather",
        "reduce_scatter",
        "all_to_all",
        "broadcast",
        "reduce",
    ],
    &["sum", "prod", "max", "min"],
    &["..", "..="],
    &["log2", "pow2", "is_pow2"],
];

/// One edit of a program's words.
#[derive(Clone, Debug)]
enum Edit {
    /// Word `i` becomes member `k` of its class in [`CLASSES`] (unchanged
    /// when it is in none).
    Similar(usize, usize),
    Replace(usize, &'static str),
    Insert(usize, &'static str),
    Delete(usize),
    /// Copies the words `[at, at + len)` to just after them.
    Duplicate(usize, usize),
    Swap(usize, usize),
}

fn edit() -> impl Strategy<Value = Edit> {
    let word = proptest::sample::select(vocabulary());
    prop_oneof![
        6 => (any::<usize>(), any::<usize>()).prop_map(|(i, k)| Edit::Similar(i, k)),
        2 => (any::<usize>(), word.clone()).prop_map(|(i, w)| Edit::Replace(i, w)),
        2 => (any::<usize>(), word).prop_map(|(i, w)| Edit::Insert(i, w)),
        2 => any::<usize>().prop_map(Edit::Delete),
        1 => (any::<usize>(), 1_usize..24).prop_map(|(i, n)| Edit::Duplicate(i, n)),
        1 => (any::<usize>(), any::<usize>()).prop_map(|(i, j)| Edit::Swap(i, j)),
    ]
}

fn apply(words: &mut Vec<String>, e: &Edit) {
    if words.is_empty() {
        return;
    }
    let at = |i: usize| i % words.len();
    match *e {
        Edit::Similar(i, k) => {
            let i = at(i);
            if let Some(class) = CLASSES.iter().find(|c| c.contains(&words[i].as_str())) {
                class[k % class.len()].clone_into(&mut words[i]);
            }
        }
        Edit::Replace(i, w) => {
            let i = at(i);
            w.clone_into(&mut words[i]);
        }
        Edit::Insert(i, w) => {
            let i = at(i);
            words.insert(i, w.to_owned());
        }
        Edit::Delete(i) => {
            let i = at(i);
            words.remove(i);
        }
        Edit::Duplicate(i, n) => {
            let i = at(i);
            let end = (i + n).min(words.len());
            let copy: Vec<String> = words[i..end].to_vec();
            words.splice(end..end, copy);
        }
        Edit::Swap(i, j) => {
            let (i, j) = (at(i), at(j));
            words.swap(i, j);
        }
    }
}

proptest! {
    #![proptest_config(config())]

    /// Valid and near-valid programs with one to four edits.
    #[test]
    fn fuzz_mutated_programs_get_errors_in_time(
        program in any::<usize>(),
        edits in proptest::collection::vec(edit(), 1..=4),
    ) {
        let programs = programs();
        let mut words = programs[program % programs.len()].clone();
        for e in &edits {
            apply(&mut words, e);
        }
        survive(&words.join(" "))?;
    }

    /// Random streams of the language's words, and random fragments of
    /// the programs glued together.
    #[test]
    fn fuzz_random_token_streams_get_errors_in_time(
        words in proptest::collection::vec(proptest::sample::select(vocabulary()), 0..120),
        pieces in proptest::collection::vec((any::<usize>(), any::<usize>(), 1_usize..40), 0..6),
    ) {
        let programs = programs();
        let mut text = words.join(" ");
        for (p, start, len) in pieces {
            let w = &programs[p % programs.len()];
            let s = start % w.len().max(1);
            text.push(' ');
            text.push_str(&w[s..(s + len).min(w.len())].join(" "));
        }
        survive(&text)?;
    }
}

#[test]
fn fuzz_corpus_holds_the_ui_programs() {
    // the expansion tests' two programs and at least one per UI test file
    assert!(programs().len() > 40, "{} programs", programs().len());
}

/// Valid schedules near the checker's limits: bounded, but far over a
/// second (a ring over 256 world sizes; ten million loop iterations; a
/// scalar over every rank of 1000 ranks, found by the fuzzer).
#[test]
#[ignore = "the checker has no overall work budget: these take seconds to minutes"]
fn large_valid_schedules_take_over_a_second() {
    for text in [
        "#[verify(world in 1..=256)] fn ring(input: &[T; n], output: &mut [T; n * world]) { \
         copy input -> output.chunk(rank); for s in 0..world - 1 { batch { \
         send output.chunk((rank - s) % world) to (rank + 1) % world; \
         recv output.chunk((rank - s - 1) % world) from (rank - 1) % world; } } }",
        "#[verify(world in 1..=4)] fn many(input: &[T; n], output: &mut [T; n * world]) { \
         for i in 0..10000000 { copy input -> output.chunk(rank); } }",
        "#[verify(world in [1000, 4, 6], root in 0..world)] #[requires(world % 2 == 0)] \
         fn pairs_then_broadcast(a: &mut [T; n], b: &mut [T; n], root: usize) { \
         all_reduce(a, sum) over rank / 2; copy a -> b; broadcast(b, root = root); }",
    ] {
        survive(text).unwrap();
    }
}
