//! `HCOMM_TRACE=path`: after `init_from_env` on the calling thread, the
//! launcher's rank threads record too and the guard writes Chrome trace JSON;
//! threads of the program's own call it themselves; without it nothing is
//! recorded; `merge_files` joins trace files.

use std::path::PathBuf;

use serde_json::Value;

/// The complete events of `rank` in the trace at `path`, by name, sorted,
/// without the schedules collectives ran.
fn ops_of(json: &Value, rank: usize) -> Vec<String> {
    let mut names: Vec<String> = json["traceEvents"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|e| e["ph"] == "X" && e["tid"] == rank && e["cat"] != "schedule")
        .map(|e| e["name"].as_str().unwrap().to_owned())
        .collect();
    names.sort_unstable();
    names
}

fn read(path: &PathBuf) -> Value {
    serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap()
}

#[test]
fn hcomm_trace_writes_one_event_per_operation_per_rank() {
    let dir = std::env::temp_dir();
    let pid = std::process::id();
    // the only test of this binary: nothing else reads the environment yet
    std::env::set_var("HCOMM_TRACE", dir.join("hcomm-trace-{pid}-{rank}.json"));
    std::env::set_var("HCOMM_RANK", "7");
    let path = dir.join(format!("hcomm-trace-{pid}-7.json"));

    let ring = |comm: &hcomm::Comm| {
        let mut x = [1.0_f64; 3];
        comm.all_reduce_in_place(&mut x, hcomm::ReduceOp::Max)?;
        if comm.rank() == 0 {
            comm.send(&x, 1)
        } else {
            comm.recv(&mut x, 0)
        }
    };
    // the library installs nothing by itself: a run before `init_from_env`
    // writes no file
    hcomm::host::run(2, ring).unwrap();
    assert!(!path.exists(), "{} written without init_from_env", path.display());

    let guard = hcomm::trace::init_from_env().unwrap();
    hcomm::host::run(2, ring).unwrap();
    guard.finish().unwrap();
    let json = read(&path);
    assert_eq!(ops_of(&json, 0), ["all_reduce", "send"]);
    assert_eq!(ops_of(&json, 1), ["all_reduce", "recv"]);
    let list = json["traceEvents"].as_array().unwrap();
    let all_reduce = list.iter().find(|e| e["name"] == "all_reduce").unwrap();
    assert_eq!(all_reduce["args"]["bytes"], 24);
    assert!(all_reduce["dur"].as_f64().unwrap() >= 0.0);
    let process = list.iter().find(|e| e["name"] == "process_name").unwrap();
    assert_eq!(process["args"]["name"], format!("hcomm rank 7 (pid {pid})"));

    // threads of the program's own record through `init_from_env`; the file
    // then holds both runs
    let comms = hcomm::host::comms(2, &hcomm::CommOptions::default()).unwrap();
    std::thread::scope(|s| {
        for comm in comms {
            s.spawn(move || {
                let guard = hcomm::trace::init_from_env().unwrap();
                comm.barrier().unwrap();
                guard.finish().unwrap();
            });
        }
    });
    let json = read(&path);
    assert_eq!(ops_of(&json, 0), ["all_reduce", "barrier", "send"]);
    assert_eq!(ops_of(&json, 1), ["all_reduce", "barrier", "recv"]);

    // two files (here the same one twice) become one trace
    let merged = dir.join(format!("hcomm-trace-{pid}-merged.json"));
    hcomm::trace::merge_files(&[path.clone(), path.clone()], &merged).unwrap();
    let both = read(&merged);
    assert_eq!(
        both["traceEvents"].as_array().unwrap().len(),
        2 * json["traceEvents"].as_array().unwrap().len()
    );
    let missing = hcomm::trace::merge_files(&[dir.join("hcomm-trace-none.json")], &merged).unwrap_err();
    assert!(missing.to_string().contains("hcomm-trace-none.json"), "{missing}");
    std::fs::remove_file(&path).unwrap();
    std::fs::remove_file(&merged).unwrap();
}
