//! The drawings are well-formed SVG with one lane per rank and the expected
//! number of messages, batches, collectives and failure marks.

use hcomm_viz::catalog;

/// The drawing of the named schedule, parsed.
fn drawing(name: &str, world: i64, scalars: &[i64]) -> String {
    let s = catalog::find(name).unwrap_or_else(|| panic!("no schedule {name}"));
    hcomm_viz::draw(s, world, scalars).unwrap()
}

/// How many `<g>` elements have exactly this class.
fn count(doc: &roxmltree::Document<'_>, class: &str) -> usize {
    doc.descendants()
        .filter(|n| n.has_tag_name("g") && n.attribute("class") == Some(class))
        .count()
}

/// The `<title>` texts of the groups of this class, sorted.
fn titles(doc: &roxmltree::Document<'_>, class: &str) -> Vec<String> {
    let mut v: Vec<String> = doc
        .descendants()
        .filter(|n| n.has_tag_name("g") && n.attribute("class") == Some(class))
        .filter_map(|g| g.children().find(|c| c.has_tag_name("title")))
        .filter_map(|t| t.text().map(str::to_owned))
        .collect();
    v.sort();
    v
}

fn failure_text(doc: &roxmltree::Document<'_>) -> Option<String> {
    let t = doc.descendants().find(|n| n.attribute("class") == Some("failure"))?;
    let parts: Vec<&str> = t
        .descendants()
        .filter(roxmltree::Node::is_text)
        .filter_map(|n| n.text())
        .map(str::trim)
        .filter(|x| !x.is_empty())
        .collect();
    Some(parts.join(" "))
}

#[test]
fn ring_all_gather_has_a_message_to_the_right_neighbour_per_step() {
    let svg = drawing("ring_all_gather", 4, &[]);
    let doc = roxmltree::Document::parse(&svg).unwrap();
    assert_eq!(doc.root_element().tag_name().name(), "svg");
    assert_eq!(count(&doc, "lane"), 4);
    assert_eq!(count(&doc, "step batch"), 12);
    assert_eq!(count(&doc, "step copy"), 4);
    assert_eq!(count(&doc, "message"), 12);
    assert_eq!(count(&doc, "collective"), 0);
    assert_eq!(count(&doc, "cycle"), 0);
    assert!(failure_text(&doc).is_none());
    // rank r sends its input to r + 1 at step 1, chunk (r - s) % 4 at
    // step s + 1 after that
    let mut expected = Vec::new();
    for r in 0..4_i64 {
        expected.push(format!("rank {r} -> rank {}: input[0..n] (n)", (r + 1) % 4));
        for s in 1..3_i64 {
            let c = (r - s).rem_euclid(4);
            expected.push(format!(
                "rank {r} -> rank {}: output[{}..{}] (n)",
                (r + 1) % 4,
                lin(c),
                lin(c + 1)
            ));
        }
    }
    expected.sort();
    assert_eq!(titles(&doc, "message"), expected);
}

/// `k * n` as the checker prints it.
fn lin(k: i64) -> String {
    match k {
        0 => "0".to_owned(),
        1 => "n".to_owned(),
        k => format!("{k} * n"),
    }
}

#[test]
fn bruck_all_gather_takes_ceil_log2_steps() {
    for (world, steps) in [(4, 2), (5, 3)] {
        let svg = drawing("bruck_all_gather", world, &[]);
        let doc = roxmltree::Document::parse(&svg).unwrap();
        let w = world as usize;
        assert_eq!(count(&doc, "lane"), w);
        assert_eq!(count(&doc, "step batch"), w * steps, "world {world}");
        assert_eq!(count(&doc, "message"), w * steps, "world {world}");
        // one copy in, `world` copies out, per rank
        assert_eq!(count(&doc, "step copy"), w * (1 + w));
        assert!(failure_text(&doc).is_none());
    }
}

#[test]
fn two_level_all_gather_draws_one_bar_per_group_and_level() {
    let svg = drawing("two_level_all_gather", 4, &[2]);
    let doc = roxmltree::Document::parse(&svg).unwrap();
    assert_eq!(count(&doc, "lane"), 4);
    assert_eq!(count(&doc, "message"), 0);
    assert_eq!(count(&doc, "step batch"), 0);
    assert_eq!(count(&doc, "collective"), 4);
    assert_eq!(
        titles(&doc, "collective"),
        vec![
            "all_gather at step 0 over `over` group: ranks 0, 1",
            "all_gather at step 0 over `over` group: ranks 2, 3",
            "all_gather at step 1 over `over` group: ranks 0, 2",
            "all_gather at step 1 over `over` group: ranks 1, 3",
        ]
    );
    // every member stands on its bar
    let dots = doc
        .descendants()
        .filter(|n| n.attribute("class") == Some("collective"))
        .flat_map(|g| g.children().filter(|c| c.has_tag_name("circle")))
        .count();
    assert_eq!(dots, 8);
}

#[test]
fn deadlock_draws_its_cycle_in_red() {
    let svg = drawing("shift_by_two", 4, &[]);
    let doc = roxmltree::Document::parse(&svg).unwrap();
    assert_eq!(count(&doc, "lane"), 4);
    assert_eq!(count(&doc, "message"), 0);
    assert_eq!(count(&doc, "step batch"), 0);
    // every rank is stuck at its first step: even ranks in `send`, odd ones
    // in `recv`; the reported cycle is 0 -> 2 -> 0
    assert_eq!(count(&doc, "step blocking blocked"), 4);
    assert_eq!(
        titles(&doc, "cycle"),
        vec!["rank 0 waits for rank 2", "rank 2 waits for rank 0"]
    );
    let red_paths = doc
        .descendants()
        .filter(|n| n.attribute("class") == Some("cycle"))
        .flat_map(|g| g.children().filter(|c| c.has_tag_name("path")))
        .filter(|p| p.attribute("stroke") == Some("#c62828"))
        .count();
    assert_eq!(red_paths, 2);
    let text = failure_text(&doc).unwrap();
    assert!(
        text.starts_with("deadlock: with world = 4, rank 0 blocks in `send` to rank 2"),
        "{text}"
    );
}

#[test]
fn blocking_ring_cycle_passes_every_rank() {
    let svg = drawing("blocking_ring", 3, &[]);
    let doc = roxmltree::Document::parse(&svg).unwrap();
    assert_eq!(
        titles(&doc, "cycle"),
        vec![
            "rank 0 waits for rank 1",
            "rank 1 waits for rank 2",
            "rank 2 waits for rank 0"
        ]
    );
}

#[test]
fn unmatched_send_dangles() {
    let svg = drawing("send_without_recv", 3, &[]);
    let doc = roxmltree::Document::parse(&svg).unwrap();
    assert_eq!(count(&doc, "lane"), 3);
    assert_eq!(count(&doc, "message"), 0);
    assert_eq!(titles(&doc, "message unmatched"), vec!["rank 0 -> rank 1: a[0..n] (n)"]);
    assert!(failure_text(&doc)
        .unwrap()
        .starts_with("unmatched send: with world = 3"));
}

#[test]
fn wrong_postcondition_marks_the_first_wrong_block() {
    let svg = drawing("ring_stops_early", 4, &[]);
    let doc = roxmltree::Document::parse(&svg).unwrap();
    assert_eq!(count(&doc, "message"), 8);
    assert_eq!(titles(&doc, "wrong"), vec!["rank 0 ends with a wrong output block 1"]);
    assert!(failure_text(&doc)
        .unwrap()
        .starts_with("postcondition violated: with world = 4"));
}

#[test]
fn every_catalogued_schedule_draws() {
    for e in catalog::ALL {
        let s = (e.schedule)();
        let scalars = vec![1; s.scalars.len()];
        for world in [3, 4] {
            if !hcomm_schedule::requires_holds(s, world, &scalars).unwrap() {
                continue;
            }
            let svg = hcomm_viz::draw(s, world, &scalars).unwrap_or_else(|d| panic!("{}: {d}", e.name));
            roxmltree::Document::parse(&svg).unwrap_or_else(|err| panic!("{}: {err}", e.name));
        }
    }
}

#[test]
fn nothing_to_draw_is_an_error_naming_the_problem() {
    let s = catalog::find("binomial_broadcast").unwrap();
    let e = hcomm_viz::draw(s, 4, &[]).unwrap_err();
    assert!(e.message.contains("1 scalar values"), "{e}");
}

#[test]
fn device_plan_of_the_ring_draws_one_group_call_per_step() {
    let s = catalog::find("ring_all_gather").unwrap();
    let svg = hcomm_viz::draw_plan(s, 4, &[]).unwrap();
    let doc = roxmltree::Document::parse(&svg).unwrap();
    assert_eq!(count(&doc, "lane"), 4);
    assert_eq!(count(&doc, "step batch"), 12);
    assert_eq!(count(&doc, "message"), 12);
    assert!(svg.contains("the device plan"));
}

#[test]
fn deadlock_through_a_collective_marks_the_members_stuck_in_it() {
    let svg = drawing("send_versus_barrier", 3, &[]);
    let doc = roxmltree::Document::parse(&svg).unwrap();
    assert_eq!(count(&doc, "step collective blocked"), 2);
    assert_eq!(count(&doc, "step blocking blocked"), 1);
    assert_eq!(count(&doc, "collective"), 0, "the barrier never completes");
    assert_eq!(
        titles(&doc, "cycle"),
        vec!["rank 0 waits for rank 1", "rank 1 waits for rank 0"]
    );
}

/// The text of the drawing's title line.
fn title_text(doc: &roxmltree::Document<'_>) -> String {
    let g = doc
        .descendants()
        .find(|n| n.attribute("class") == Some("title"))
        .expect("a title");
    g.descendants()
        .find(|n| n.has_tag_name("text"))
        .and_then(|t| t.text())
        .unwrap_or_default()
        .trim()
        .to_owned()
}

#[test]
fn an_operator_parameter_is_drawn_by_its_name() {
    let s = catalog::find("ring_all_reduce").unwrap();
    for (op, name) in ["sum", "prod", "max", "min"].into_iter().enumerate() {
        let value = hcomm_viz::scalar_value(s.scalars.iter().find(|x| x.op).unwrap(), name).unwrap();
        assert_eq!(value, op as i64);
        let svg = hcomm_viz::draw(s, 3, &[value]).unwrap();
        let doc = roxmltree::Document::parse(&svg).unwrap();
        assert_eq!(title_text(&doc), format!("ring_all_reduce   world = 3, op = {name}"));
        let reduces = titles(&doc, "message")
            .into_iter()
            .filter(|t| t.contains(&format!("reduce {name}")))
            .count();
        // world - 1 reduce-scatter steps, one message per rank each
        assert_eq!(reduces, 3 * 2, "{svg}");
    }
}

#[test]
fn a_plain_scalar_is_drawn_as_a_number() {
    let svg = drawing("binomial_broadcast", 4, &[2]);
    let doc = roxmltree::Document::parse(&svg).unwrap();
    assert_eq!(title_text(&doc), "binomial_broadcast   world = 4, root = 2");
}

#[test]
fn an_operator_parameter_takes_only_an_operator() {
    let s = catalog::find("ring_all_reduce").unwrap();
    let op = s.scalars.iter().find(|x| x.op).unwrap();
    assert_eq!(
        hcomm_viz::scalar_value(op, "2"),
        Err("`op` is an operator parameter: its value is `sum`, `prod`, `max` or `min`, not `2`".to_owned())
    );
    let root = &catalog::find("binomial_broadcast").unwrap().scalars[0];
    assert_eq!(hcomm_viz::scalar_value(root, "3"), Ok(3));
    assert!(hcomm_viz::scalar_value(root, "max")
        .unwrap_err()
        .starts_with("value of `root`"));
}
