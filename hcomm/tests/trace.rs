//! A run traced through `hcomm::trace::layer()` in the program's own
//! subscriber: one event per operation per rank, with its fields, and Chrome
//! trace JSON with one track per rank.

use hcomm::ReduceOp;
use tracing_subscriber::layer::SubscriberExt;

#[test]
fn each_rank_records_each_operation_once() {
    let (layer, trace) = hcomm::trace::layer();
    tracing::subscriber::set_global_default(tracing_subscriber::registry().with(layer)).unwrap();
    let world = 3;
    hcomm::host::run(world, |comm| {
        let (r, w) = (comm.rank(), comm.world());
        let mut x = [r as f32; 4];
        comm.all_reduce_in_place(&mut x, ReduceOp::Sum)?;
        let mut all = vec![0_u32; 2 * w];
        comm.all_gather(&[r as u32; 2], &mut all)?;
        let (mine, mut from_left) = ([r as u8; 8], [0_u8; 8]);
        comm.batch(|b| {
            b.send(&mine, (r + 1) % w)?;
            b.recv(&mut from_left, (r + w - 1) % w)
        })?;
        if r == 0 {
            comm.send(&[1_i64; 5], 1)?;
        } else if r == 1 {
            comm.recv(&mut [0_i64; 5], 0)?;
        }
        comm.barrier()
    })
    .unwrap();
    let events = trace.events();
    for r in 0..world {
        let ops: Vec<(&str, &str)> = {
            let mut mine: Vec<_> = events
                .iter()
                .filter(|e| e.rank == r && e.category != "schedule")
                .collect();
            mine.sort_by(|a, b| a.start_us.total_cmp(&b.start_us));
            mine.iter().map(|e| (e.category.as_str(), e.name.as_str())).collect()
        };
        let mut expected = vec![
            ("collective", "all_reduce"),
            ("collective", "all_gather"),
            ("batch", "batch"),
        ];
        match r {
            0 => expected.push(("send", "send")),
            1 => expected.push(("recv", "recv")),
            _ => {}
        }
        expected.push(("collective", "barrier"));
        assert_eq!(ops, expected, "rank {r}: {events:#?}");
    }
    let send = events.iter().find(|e| e.name == "send").unwrap();
    assert_eq!(send.args["peer"], 1);
    assert_eq!(send.args["bytes"], 40);
    let gather = events.iter().find(|e| e.name == "all_gather" && e.rank == 2).unwrap();
    assert_eq!(gather.args["bytes"], 8);
    assert_eq!(gather.args["comm.world"], 3);
    assert!(gather.args["algorithm"].is_string(), "{gather:?}");
    assert!(events.iter().all(|e| e.duration_us >= 0.0 && e.start_us > 0.0));

    // Chrome trace JSON: a named track per rank and one complete event per
    // operation on it
    let text = serde_json::to_string(&trace.to_chrome_json()).unwrap();
    let json: serde_json::Value = serde_json::from_str(&text).unwrap();
    let list = json["traceEvents"].as_array().unwrap();
    for r in 0..world {
        let named = list.iter().any(|e| {
            e["ph"] == "M" && e["name"] == "thread_name" && e["tid"] == r && e["args"]["name"] == format!("rank {r}")
        });
        assert!(named, "no track name for rank {r}");
        let complete = list.iter().filter(|e| e["ph"] == "X" && e["tid"] == r).count();
        let recorded = events.iter().filter(|e| e.rank == r).count();
        assert_eq!(complete, recorded);
    }
}
