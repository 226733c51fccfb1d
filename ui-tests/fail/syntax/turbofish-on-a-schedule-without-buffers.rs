use hcomm::comm_schedule;

comm_schedule! {
    #[verify(world in 1..=4)]
    pub fn sync() {
        barrier;
    }
}

fn main() {
    // the function is not generic: a turbofish is rejected by rustc
    let _ = hcomm::host::run(2, |comm| sync::<f32>(comm));
}
