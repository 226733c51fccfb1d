//! `HCOMM_TRACE=path`: the launcher records every rank and writes Chrome
//! trace JSON after the run.

#[test]
fn hcomm_trace_writes_one_event_per_operation_per_rank() {
    let path = std::env::temp_dir().join(format!("hcomm-trace-{}.json", std::process::id()));
    // the only test of this binary: nothing else reads the environment yet
    std::env::set_var("HCOMM_TRACE", &path);
    hcomm::host::run(2, |comm| {
        let mut x = [1.0_f64; 3];
        comm.all_reduce_in_place(&mut x, hcomm::ReduceOp::Max)?;
        if comm.rank() == 0 {
            comm.send(&x, 1)
        } else {
            comm.recv(&mut x, 0)
        }
    })
    .unwrap();
    let text = std::fs::read_to_string(&path).unwrap();
    std::fs::remove_file(&path).unwrap();
    let json: serde_json::Value = serde_json::from_str(&text).unwrap();
    let list = json["traceEvents"].as_array().unwrap();
    for (rank, p2p) in [(0, "send"), (1, "recv")] {
        let mut names: Vec<&str> = list
            .iter()
            .filter(|e| e["ph"] == "X" && e["tid"] == rank && e["cat"] != "schedule")
            .map(|e| e["name"].as_str().unwrap())
            .collect();
        names.sort_unstable();
        let mut expected = vec!["all_reduce", p2p];
        expected.sort_unstable();
        assert_eq!(names, expected, "rank {rank}: {text}");
    }
    let all_reduce = list.iter().find(|e| e["name"] == "all_reduce").unwrap();
    assert_eq!(all_reduce["args"]["bytes"], 24);
    assert!(all_reduce["dur"].as_f64().unwrap() >= 0.0);
}
