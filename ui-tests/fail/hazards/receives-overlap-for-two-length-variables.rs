use hcomm::comm_schedule;

comm_schedule! {
    // c[m..m + 1] and c[n - 1..n] share an element when n = m + 1 (first at
    // n = 2, m = 1): one message overwrites the other.
    #[verify(world in 3..=3)]
    pub fn f(a: &[T; n], b: &[T; m], c: &mut [T; n + m]) {
        batch {
            send a[0..1] to (rank + 1) % world;
            send b[0..1] to (rank - 1) % world;
            recv c[m..m + 1] from (rank - 1) % world;
            recv c[n - 1..n] from (rank + 1) % world;
        }
    }
}

fn main() {}
