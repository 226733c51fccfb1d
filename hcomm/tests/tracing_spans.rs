//! Every operation opens a `tracing` span carrying rank, peer, bytes and the
//! algorithm that ran.

use std::sync::{Arc, Mutex};

use tracing::field::{Field, Visit};
use tracing::span::{Attributes, Id};
use tracing::Subscriber;
use tracing_subscriber::layer::{Context, Layer, SubscriberExt};

/// A span's name and its fields as text.
type Span = (String, Vec<(String, String)>);

#[derive(Default, Clone)]
struct Recorded(Arc<Mutex<Vec<Span>>>);

struct Fields(Vec<(String, String)>);

impl Visit for Fields {
    fn record_debug(&mut self, field: &Field, value: &dyn std::fmt::Debug) {
        self.0.push((
            field.name().to_owned(),
            format!("{value:?}").trim_matches('"').to_owned(),
        ));
    }
}

impl<S: Subscriber> Layer<S> for Recorded {
    fn on_new_span(&self, attrs: &Attributes<'_>, _id: &Id, _ctx: Context<'_, S>) {
        let mut fields = Fields(Vec::new());
        attrs.record(&mut fields);
        self.0
            .lock()
            .unwrap()
            .push((attrs.metadata().name().to_owned(), fields.0));
    }
}

#[test]
fn spans_name_rank_peer_bytes_and_algorithm() {
    let recorded = Recorded::default();
    let subscriber = tracing_subscriber::registry()
        .with(recorded.clone())
        .with(tracing_subscriber::filter::LevelFilter::TRACE);
    tracing::subscriber::set_global_default(subscriber).unwrap();
    hcomm::host::run(2, |comm| {
        let mut x = [1.0f32; 16];
        comm.all_reduce_in_place(&mut x, hcomm::ReduceOp::Sum)?;
        if comm.rank() == 0 {
            comm.send(&x, 1)
        } else {
            comm.recv(&mut x, 0)
        }
    })
    .unwrap();
    let spans = recorded.0.lock().unwrap().clone();
    let get = |fields: &[(String, String)], name: &str| fields.iter().find(|(k, _)| k == name).map(|(_, v)| v.clone());
    let coll: Vec<_> = spans.iter().filter(|(n, _)| n == "collective").collect();
    assert_eq!(coll.len(), 2, "{spans:?}");
    for (_, f) in &coll {
        assert_eq!(get(f, "op").as_deref(), Some("all_reduce"));
        assert_eq!(get(f, "bytes").as_deref(), Some("64"));
        assert_eq!(get(f, "algorithm").as_deref(), Some("one_shot"));
        assert!(get(f, "comm.rank").is_some());
    }
    let send = spans.iter().find(|(n, _)| n == "send").expect("a send span");
    assert_eq!(get(&send.1, "peer").as_deref(), Some("1"));
    assert_eq!(get(&send.1, "comm.rank").as_deref(), Some("0"));
    assert_eq!(get(&send.1, "bytes").as_deref(), Some("64"));
}
