use hcomm::comm_schedule;

comm_schedule! {
    /// `all_gatherv` as a statement, through a scratch buffer laid out by
    /// the same counts; the postcondition holds for every value of them.
    #[verify(world in 1..=8)]
    #[postcondition(all_gatherv(x -> out, counts))]
    pub fn gather_through_scratch(counts: &[usize; world], x: &[T; counts[rank]], out: &mut [T; sum(counts)]) {
        let all = scratch[T; sum(counts)];
        all_gatherv(x -> all, counts);
        copy all -> out;
    }

    /// `all_to_allv` as a statement: rank `r` sends `sizes[r][j]` elements
    /// to rank `j`.
    #[verify(world in 1..=8)]
    #[postcondition(all_to_allv(a -> b, sizes))]
    pub fn exchange(sizes: &[[usize; world]; world], a: &[T; sum(sizes[rank])], b: &mut [T; sum(col(sizes, rank))]) {
        all_to_allv(a -> b, sizes);
    }

    /// The same with bounds written out: a prefix sum of the counts and an
    /// entry, here of a column of a matrix (`col(sizes, rank)[j]` is
    /// `sizes[j][rank]`).
    #[verify(world in 1..=6)]
    #[postcondition(all_to_allv(a -> b, sizes))]
    pub fn exchange_then_own_part(sizes: &[[usize; world]; world], a: &[T; sum(sizes[rank])], b: &mut [T; sum(col(sizes, rank))]) {
        all_to_allv(a -> b, sizes);
        copy a[sum(sizes[rank][0..rank])..sum(sizes[rank][0..rank]) + sizes[rank][rank]]
            -> b[sum(col(sizes, rank)[0..rank])..sum(col(sizes, rank)[0..rank]) + col(sizes, rank)[rank]];
    }

    /// Each rank's own part first, then the others: a part of a part of
    /// counts mixed with a length variable is checked on samples too.
    #[verify(world in 1..=6)]
    pub fn own_part_twice(counts: &[usize; world], out: &mut [T; 2 * sum(counts) + n], tail: &[T; n]) {
        copy out.part(counts, rank) -> out[sum(counts)..2 * sum(counts)].part(counts, rank);
        copy tail -> out[2 * sum(counts)..2 * sum(counts) + n];
    }
}

fn main() -> hcomm::Result<()> {
    let counts = [3, 0, 1, 2];
    let out = hcomm::host::run(4, |comm| {
        let r = comm.rank();
        let x: Vec<u32> = (0..counts[r]).map(|i| (10 * r + i) as u32).collect();
        let mut out = vec![0_u32; 6];
        gather_through_scratch(comm, &counts, &x, &mut out)?;
        Ok(out)
    })?;
    assert!(out.iter().all(|o| *o == [0, 1, 2, 20, 30, 31]), "{out:?}");

    // sizes[i][j] = i + j elements, valued 100 i + j
    let w = 3;
    let sizes: Vec<usize> = (0..w * w).map(|k| k / w + k % w).collect();
    let out = hcomm::host::run(w, |comm| {
        let r = comm.rank();
        let a: Vec<u32> = (0..w).flat_map(|j| vec![(100 * r + j) as u32; r + j]).collect();
        let mut b = vec![0_u32; (0..w).map(|i| i + r).sum()];
        exchange(comm, &sizes, &a, &mut b)?;
        Ok(b)
    })?;
    for (r, b) in out.iter().enumerate() {
        let want: Vec<u32> = (0..w).flat_map(|i| vec![(100 * i + r) as u32; i + r]).collect();
        assert_eq!(*b, want, "rank {r}");
    }
    Ok(())
}
