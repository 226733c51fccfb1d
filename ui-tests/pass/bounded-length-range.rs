//! `n in 1..=16` decides a postcondition that every `n` cannot: the scratch
//! buffer is 100 elements longer than a block, so bounds cross at n = 100,
//! past the values the checker runs. The bounded range runs every point of
//! its box; a call with n = 17 is `Err(Precondition)` naming `n`, 17 and the
//! range, before anything moves.

use hcomm::comm_schedule;

comm_schedule! {
    #[verify(world in 2..=2, n in 1..=16)]
    #[postcondition(all_gather(input -> output))]
    pub fn long_scratch(input: &[T; n], output: &mut [T; n * world]) {
        let tmp = scratch[T; n + 100];
        copy input -> tmp[0..n];
        copy tmp[0..n] -> output.chunk(rank);
        batch {
            send output.chunk(rank) to (rank + 1) % world;
            recv output.chunk((rank + 1) % world) from (rank + 1) % world;
        }
    }
}

fn main() -> hcomm::Result<()> {
    let out = hcomm::host::run(2, |comm| {
        let input = [comm.rank() as i32 + 1; 16];
        let mut output = [0_i32; 32];
        long_scratch(comm, &input, &mut output)?;
        let long = [7_i32; 17];
        let mut untouched = [0_i32; 34];
        let err = long_scratch(comm, &long, &mut untouched).unwrap_err();
        Ok((output, err, untouched))
    })?;
    let mut expected = [1_i32; 32];
    expected[16..].fill(2);
    for (rank, (output, err, untouched)) in out.iter().enumerate() {
        assert_eq!(output, &expected, "rank {rank}");
        assert!(matches!(err, hcomm::Error::Precondition { .. }), "rank {rank}: {err}");
        let text = err.to_string();
        assert!(
            text.contains("length variable `n` = 17 (from buffer `input` of 17 elements) is outside its range 1..=16"),
            "rank {rank}: {text}"
        );
        assert_eq!(untouched, &[0; 34], "rank {rank}");
    }
    Ok(())
}
