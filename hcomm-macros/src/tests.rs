//! Expansion tests and a no-panic property test.

use proc_macro2::TokenStream;
use proptest::prelude::*;
use quote::quote;

use crate::expand;
use hcomm_schedule::syntax::Input as Schedule;

mod fuzz;

/// Parse, check and expand a valid schedule; pretty-print the result.
fn expand(tokens: TokenStream) -> String {
    let out = expand_any(tokens);
    assert!(!out.contains("compile_error!"), "unexpected errors:\n{out}");
    out
}

/// Parse, check and expand; pretty-print the result. Panics (printing the raw
/// tokens) when the expansion is not a valid Rust file.
fn expand_any(tokens: TokenStream) -> String {
    let ast: Schedule = match syn::parse2(tokens) {
        Ok(ast) => ast,
        Err(e) => panic!("parse error: {e}"),
    };
    let out = expand::schedule(&ast);
    match syn::parse2::<syn::File>(out.clone()) {
        Ok(file) => prettyplease::unparse(&file),
        Err(e) => panic!("invalid expansion ({e}):\n{out}"),
    }
}

/// The error messages of an invocation that must fail.
fn errors(tokens: TokenStream) -> Vec<String> {
    let ast: Schedule = match syn::parse2(tokens) {
        Ok(ast) => ast,
        Err(e) => return e.into_iter().map(|e| e.to_string()).collect(),
    };
    let mut messages = Vec::new();
    for item in &ast.items {
        // Unguarded: a panic must fail the test, not become an error.
        if let Err(e) = expand::phases(item) {
            messages.extend(e.into_iter().map(|e| e.to_string()));
        }
    }
    messages
}

/// Asserts that `haystack` contains each needle, ignoring whitespace (the
/// pretty-printer breaks long calls over lines).
#[track_caller]
fn assert_has(haystack: &str, needles: &[&str]) {
    let squash = |s: &str| s.split_whitespace().collect::<String>();
    let flat = squash(haystack);
    for needle in needles {
        assert!(flat.contains(&squash(needle)), "missing `{needle}` in:\n{haystack}");
    }
}

/// Asserts that the first error starts with `prefix`.
#[track_caller]
fn assert_error(tokens: TokenStream, prefix: &str) {
    let errors = errors(tokens);
    assert!(
        errors.first().is_some_and(|e| e.starts_with(prefix)),
        "expected an error starting with `{prefix}`, got {errors:?}"
    );
}

#[test]
fn signature_docs_module_and_prologue() {
    let out = expand(quote! {
        /// Ring all-gather.
        #[verify(world in 1..=4, k in 0..world)]
        pub fn ring(input: &[T; n], output: &mut [T; n * world], k: usize) {
            copy input -> output.chunk(rank);
        }
    });
    assert_has(
        &out,
        &[
            "/// Ring all-gather.",
            "Checked by `comm_schedule!`: `ring::SCHEDULE` is its IR",
            "pub fn ring<T: ::hcomm::Element>(",
            "comm: &::hcomm::Comm,",
            "input: &(impl ::hcomm::Buffer<Elem = T> + ?Sized),",
            "output: &mut (impl ::hcomm::BufferMut<Elem = T> + ?Sized),",
            "k: usize,",
            ") -> ::hcomm::Result<()>",
            "__hp::Exec::<T,>::run(comm, &ring::SCHEDULE, move |__x| {",
            "let __s0: i64 = __hp::int(k)?;",
            "__x.solve_len(\"input\", ::hcomm::Buffer::elems(input), 1i64, 0i64, \"n\")?",
            "__x.check_len(\"output\", ::hcomm::Buffer::elems(output)",
            "let __s0: i64 = __x.scalar(\"k\", k, 0i64, __world)?;",
            "__x.verify(&[__s0])?;",
            "__hp::assert_buffer(input);",
            "let __p0: usize = __x.input(input);",
            "let __p1: usize = __x.output(output);",
            "::core::result::Result::Ok(())",
            "#[doc(hidden)]",
            "pub mod ring {",
            "pub static SCHEDULE: ::std::sync::LazyLock<",
            "pub const SOURCE: &str = \"# [doc = r\\\" Ring all-gather.\\\"] # [verify (world in 1 ..= 4 , k in 0 .. world)] pub fn ring",
            "::hcomm::__private::schedule_from_source(SOURCE)",
        ],
    );
}

#[test]
fn send_and_recv() {
    let out = expand(quote! {
        #[verify(world in [2])]
        fn f(a: &mut [T; n]) {
            if rank == 0 {
                send a to 1 tag 7;
            } else {
                recv a from 0 tag 7 reduce sum;
            }
        }
    });
    assert_has(
        &out,
        &[
            "if (__rank == 0i64) {",
            "__x.send(__hp::region(__p0, 0, __pn0), 1i64, 7i64)?;",
            "__x.recv(",
            "::core::option::Option::Some(__hp::ReduceOp::Sum)",
        ],
    );
}

#[test]
fn operator_parameters() {
    let out = expand(quote! {
        #[verify(world in [2])]
        fn f(a: &mut [T; n], op: ReduceOp) {
            let t = scratch[T; n];
            batch {
                send a to (rank + 1) % world;
                recv t from (rank + 1) % world reduce op;
            }
            all_reduce(a, op);
        }
    });
    assert_has(
        &out,
        &[
            "op: ::hcomm::ReduceOp,",
            "let __s0: i64 = __hp::op_index(op)?;",
            "__x.verify(&[__s0])?;",
            "::core::option::Option::Some(op)",
            "__x.all_reduce(__r, __r, op,",
            "fn f (a : & mut [T ; n] , op : ReduceOp)",
        ],
    );
    assert_error(
        quote! {
            #[verify(world in [2])]
            fn f(a: &mut [T; n], op: ReduceOp) {
                accumulate a -> a, opp;
            }
        },
        "unknown name: `opp` is not an operator",
    );
    assert_error(
        quote! {
            #[verify(world in [2], op in 0..4)]
            fn f(a: &mut [T; n], op: ReduceOp) {
                accumulate a -> a, op;
            }
        },
        "syntax error: `op` is an operator parameter and takes no range",
    );
}

#[test]
fn isend_irecv_wait() {
    let out = expand(quote! {
        #[verify(world in [2])]
        fn f(a: &[T; n], b: &mut [T; n]) {
            let s = isend a to (rank + 1) % world;
            let r = irecv b from (rank + 1) % world;
            wait s, r;
        }
    });
    assert_has(
        &out,
        &[
            "let __h_s: __hp::Handle = __x.isend(",
            "__hp::rem(__hp::add(__rank, 1i64)?, __world)?",
            "let __h_r: __hp::Handle = __x.irecv(",
            "__x.wait(&[__h_s, __h_r])?;",
        ],
    );
}

#[test]
fn batch_with_loop() {
    let out = expand(quote! {
        #[verify(world in 1..=4)]
        fn f(a: &[T; n * world], b: &mut [T; n * world]) {
            batch {
                for j in 1..world {
                    send a.chunk(j) to (rank + j) % world;
                    recv b.chunk(j) from (rank - j) % world;
                }
            }
        }
    });
    assert_has(
        &out,
        &[
            "let mut __b = __x.batch();",
            "for __v_j in 1i64..__world {",
            "__b.send(__hp::chunk(__hp::region(__p0, 0, __pn0), __v_j, __world)?, __hp::rem(__hp::add(__rank, __v_j)?, __world)?, 0_i64",
            "__b.recv(",
            "__b.finish()?;",
        ],
    );
}

#[test]
fn copy_accumulate_scratch_slice() {
    let out = expand(quote! {
        #[verify(world in [1])]
        fn f(a: &mut [T; 2 * n]) {
            let t = scratch[T; n];
            copy a[0..n] -> t;
            accumulate t -> a[n..=2 * n - 1], max;
            copy a.chunk(1, 2)[0..n] -> t;
        }
    });
    assert_has(
        &out,
        &[
            "let __n_t: i64 = __len0;",
            "let __b_t: usize = __x.scratch(__n_t)?;",
            "__x.copy(",
            "__hp::region(__r.buf, __hp::add(__r.start, 0i64)?, __hp::add(__r.start, __len0)?",
            "__hp::region(__b_t, 0, __n_t)",
            "__x.accumulate(",
            "__hp::ReduceOp::Max",
        ],
    );
}

#[test]
fn let_for_rev_and_functions() {
    let out = expand(quote! {
        #[verify(world in [1, 2, 4])]
        #[requires(is_pow2(world))]
        fn f(a: &mut [T; n]) {
            let steps = log2(world);
            for s in (0..steps).rev() {
                let peer = rank ^ pow2(s);
                if min(peer, rank) >= 0 && !(peer == rank) {
                    barrier;
                }
            }
        }
    });
    assert_has(
        &out,
        &[
            "__x.requires(__hp::is_pow2(__world), ",
            "let __v_steps: i64 = __hp::log2(__world)?;",
            "for __v_s in (0i64..__v_steps).rev() {",
            "let __v_peer: i64 = (__rank ^ __hp::pow2(__v_s)?);",
            "::core::cmp::min(__v_peer, __rank) >= 0i64",
            "__x.barrier(::core::option::Option::None)?;",
        ],
    );
}

#[test]
fn collectives_and_over() {
    let out = expand(quote! {
        #[verify(world in [2, 4], root in 0..world)]
        fn f(a: &mut [T; n * world], b: &mut [T; n], c: &mut [T; n * world], root: usize) {
            all_reduce(a, sum);
            all_reduce(b -> a.chunk(0), prod);
            all_gather(b -> a.chunk(rank / 2, world / 2)) over rank / 2;
            reduce_scatter(a -> b, min);
            all_to_all(a -> c);
            broadcast(b, root = root);
            reduce(a.chunk(rank) -> b, sum, root = 0);
        }
    });
    assert_has(
        &out,
        &[
            "let __r = __hp::region(__p0, 0, __pn0);",
            "__x.all_reduce(__r, __r, __hp::ReduceOp::Sum, ::core::option::Option::None,)?;",
            "__hp::ReduceOp::Prod",
            "let __g = __x.group(",
            "0u32,",
            "let __rank: i64 = __r;",
            "::core::result::Result::Ok(__hp::div(__rank, 2i64)?)",
            "__x.all_gather(",
            "::core::option::Option::Some(__g)",
            "__x.reduce_scatter(",
            "__x.all_to_all(",
            "__x.broadcast(__hp::region(__p1, 0, __pn1), __s0, ::core::option::Option::None",
            "__x.reduce(",
        ],
    );
}

#[test]
fn without_buffers_the_function_is_not_generic() {
    let out = expand(quote! {
        #[verify(world in 1..=4, root in 0..world)]
        pub fn sync(root: usize) {
            let s = scratch[T; 1];
            broadcast(s, root = root);
        }
        pub fn sync_t<T>() {
            barrier;
        }
    });
    assert_has(
        &out,
        &[
            "pub fn sync(comm: &::hcomm::Comm, root: usize) -> ::hcomm::Result<()>",
            "__hp::Exec::<u8,>::run(comm, &sync::SCHEDULE, move |__x| {",
            "pub fn sync_t<T: ::hcomm::Element>(comm: &::hcomm::Comm) -> ::hcomm::Result<()>",
            "__hp::Exec::<T,>::run(comm, &sync_t::SCHEDULE, move |__x| {",
        ],
    );
}

#[test]
fn several_items_visibility_and_requires_text() {
    let out = expand(quote! {
        #[verify(world in [1, 2, 4])]
        #[requires(is_pow2(world) && world >= 1)]
        pub(crate) fn first(a: &mut [T; n]) {
            barrier();
        }
        fn second<T>(a: &mut [T; n]) {
            barrier;
        }
    });
    assert_has(
        &out,
        &[
            "pub(crate) fn first<T: ::hcomm::Element>(",
            "pub(crate) mod first {",
            r#""is_pow2(world) && world >= 1""#,
            "fn second<T: ::hcomm::Element>(",
            "mod second {",
        ],
    );
}

#[test]
fn wait_on_a_handle_out_of_scope_is_unreachable() {
    // Never executed in the verify set, so the checker accepts it; the
    // generated code cannot name the handle and never runs the statement.
    let out = expand(quote! {
        #[verify(world in 1..=2)]
        fn f(a: &mut [T; n]) {
            if world > 100 {
                wait h;
            }
        }
    });
    assert_has(
        &out,
        &["::core::unreachable!(\"wait on a request that is not in scope\")"],
    );
}

#[test]
fn user_names_cannot_capture_generated_ones() {
    let out = expand(quote! {
        #[verify(world in 1..=2)]
        fn f(x: &mut [T; n]) {
            let Ok = 1;
            let __x = Ok + 1;
            for None in 0..__x {}
        }
    });
    assert_has(
        &out,
        &[
            "let __v_Ok: i64 = 1i64;",
            "let __v___x: i64 = __hp::add(__v_Ok, 1i64)?;",
            "for __v_None in",
        ],
    );
}

#[test]
fn errors_fall_back_to_an_unreachable_item() {
    let out = expand_any(quote! {
        pub fn f(a: &mut [T; n]) {
            send a rank + 1;
        }
    });
    assert_has(
        &out,
        &[
            "compile_error!",
            "syntax error: expected `to`",
            "pub fn f<T: ::hcomm::Element>(\n    comm: &::hcomm::Comm,\n    a: &mut (impl ::hcomm::BufferMut<Elem = T> + ?Sized),\n) -> ::hcomm::Result<()> {",
            "::core::unreachable!()",
            "pub mod f {",
        ],
    );
}

#[test]
fn unknown_name_suggests() {
    let e = errors(quote! {
        fn f(a: &mut [T; n]) {
            send a to (rnak + 1) % world;
        }
    });
    assert!(e[0].starts_with("unknown name:"), "{e:?}");
    assert!(e[0].contains("did you mean `rank`?"), "{e:?}");
}

#[test]
fn syntax_errors() {
    assert_error(
        quote!(fn f(a: &mut [T; n]) { frobnicate a; }),
        "syntax error: expected one of",
    );
    assert_error(quote!(fn f(a: &mut [T; n]) { copy a a; }), "syntax error");
    assert_error(quote!(fn f(a: &mut [T; n]) { batch { copy a -> a; } }), "syntax error");
    assert_error(quote!(fn f(a: &mut [T; n]) { isend a to 0; }), "syntax error");
    assert_error(
        quote!(
            fn f(a: &mut [T; n]) {
                barrier
            }
        ),
        "syntax error",
    );
    assert_error(quote!(fn f(a: &mut [T; n]) { let x = 1 < 2 < 3; }), "syntax error");
    assert_error(quote!(), "syntax error");
}

#[test]
fn name_errors() {
    assert_error(
        quote!(
            fn f(a: &mut [T; n]) {
                let x = n;
            }
        ),
        "unknown name",
    );
    assert_error(quote!(fn f(a: &mut [T; n]) { send b to 0; }), "unknown name");
    assert_error(
        quote!(
            fn f(a: &mut [T; n]) {
                let x = frob(1);
            }
        ),
        "unknown name",
    );
    assert_error(
        quote!(
            fn f(a: &mut [T; n]) {
                let x = log2(1, 2);
            }
        ),
        "syntax error",
    );
    assert_error(
        quote!(
            fn f(a: &mut [T; n]) {
                for i in 0..2 {}
                let y = i;
            }
        ),
        "unknown name",
    );
    assert_error(
        quote!(
            fn f(a: &mut [T; n * n]) {}
        ),
        "non-linear length",
    );
    assert_error(
        quote!(
            fn f(a: &mut [T; n + m]) {}
        ),
        "non-linear length",
    );
    assert_error(
        quote!(
            fn f(a: &mut [T; n], k: usize) {}
        ),
        "missing range",
    );
}

/// Token streams to feed the checker: random tokens, and valid programs with
/// one token removed or replaced.
fn corpus() -> Vec<TokenStream> {
    vec![
        quote! {
            #[verify(world in 1..=4)]
            #[postcondition(all_gather(input -> output))]
            pub fn ring(input: &[T; n], output: &mut [T; n * world]) {
                copy input -> output.chunk(rank);
                for s in 0..world - 1 {
                    batch {
                        send output.chunk((rank - s) % world) to (rank + 1) % world;
                        recv output.chunk((rank - s - 1) % world) from (rank - 1) % world;
                    }
                }
            }
        },
        quote! {
            #[verify(world in [2, 4], root in 0..world)]
            #[requires(is_pow2(world))]
            fn g(a: &mut [T; n * world], b: &mut [T; n], root: usize) {
                let h = irecv b from (rank + 1) % world tag 3 reduce sum;
                wait h;
                let t = scratch[T; 2 * n];
                accumulate b -> t[0..n], max;
                all_gather(b -> a.chunk(rank / 2, world / 2)) over rank / 2;
                broadcast(b, root = root);
                if rank == 0 { barrier; } else if rank > 1 { barrier; } else { barrier; }
                for i in (0..log2(world)).rev() { let p = rank ^ pow2(i); }
            }
        },
    ]
}

/// The words of `tokens`; joint punctuation (`..=`, `->`) stays one word.
fn flatten(tokens: TokenStream, out: &mut Vec<String>) {
    let mut glue = false;
    for tt in tokens {
        let joint = matches!(&tt, proc_macro2::TokenTree::Punct(p) if p.spacing() == proc_macro2::Spacing::Joint);
        match tt {
            proc_macro2::TokenTree::Group(g) => {
                let (open, close) = match g.delimiter() {
                    proc_macro2::Delimiter::Parenthesis => ("(", ")"),
                    proc_macro2::Delimiter::Brace => ("{", "}"),
                    proc_macro2::Delimiter::Bracket => ("[", "]"),
                    proc_macro2::Delimiter::None => ("", ""),
                };
                out.push(open.to_owned());
                flatten(g.stream(), out);
                out.push(close.to_owned());
            }
            tt => match out.last_mut() {
                Some(last) if glue => last.push_str(&tt.to_string()),
                _ => out.push(tt.to_string()),
            },
        }
        glue = joint;
    }
}

/// The source text of a corpus program, as words.
fn words(program: usize) -> Vec<String> {
    let mut flat = Vec::new();
    flatten(corpus()[program % 2].clone(), &mut flat);
    flat
}

/// Runs parse and every phase; must return, never panic.
fn run(text: &str) {
    let Ok(tokens) = text.parse::<TokenStream>() else {
        return;
    };
    let _ = errors(tokens);
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 256, ..ProptestConfig::default() })]

    #[test]
    fn random_tokens_never_panic(words in proptest::collection::vec(
        proptest::sample::select(vec![
            "fn", "f", "(", ")", "{", "}", "[", "]", ";", ",", ":", "&", "mut", "T", "n", "usize",
            "send", "recv", "to", "from", "tag", "reduce", "sum", "let", "h", "=", "isend", "irecv",
            "wait", "batch", "copy", "->", "accumulate", "scratch", "for", "in", "..", "..=", "if",
            "else", "rank", "world", "+", "-", "*", "/", "%", "<<", ">>", "==", "<", "&&", "!", "0",
            "1", "99999999999999999999", "log2", "all_reduce", "barrier", "over", "root", "chunk", ".",
            "#", "verify", "requires", "postcondition", "all_gather", "broadcast",
        ]),
        0..60,
    )) {
        run(&words.join(" "));
    }

    #[test]
    fn mutated_programs_never_panic(
        program in 0usize..2,
        index in 0usize..400,
        replacement in proptest::sample::select(vec![
            "", ";", "rank", "0", "world", "{", "}", "(", ")", "send", "recv", "..", "-", "n", "a",
            "x", "99999999999999999999", "b", "0 - 1", "world * world", "n * n",
        ]),
    ) {
        let mut w = words(program);
        if w.is_empty() {
            return Ok(());
        }
        let i = index % w.len();
        w[i] = replacement.to_owned();
        run(&w.join(" "));
    }
}
