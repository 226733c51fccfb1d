//! Splitting communicators, subgroups, lifetimes and algorithm queries.

mod common;

use common::options;
use hcomm::{Algorithm, Collective, ReduceOp};

#[test]
fn split_groups_by_color_and_orders_by_key() {
    let out = hcomm::host::run_with(6, &options(), |comm| {
        let r = comm.rank();
        // Even and odd ranks, each group ordered by descending global rank.
        let sub = comm
            .split(Some((r % 2) as u32), -(r as i64))?
            .expect("every rank has a color");
        let mut sum = [r as i64];
        sub.all_reduce_in_place(&mut sum, ReduceOp::Sum)?;
        let mut ranks = vec![0i64; sub.world()];
        sub.all_gather(&[r as i64], &mut ranks)?;
        Ok((sub.rank(), sub.world(), sum[0], ranks))
    })
    .unwrap();
    for (r, (sub_rank, sub_world, sum, ranks)) in out.iter().enumerate() {
        assert_eq!(*sub_world, 3);
        if r % 2 == 0 {
            assert_eq!(*sum, 6, "rank {r}");
            assert_eq!(ranks, &[4, 2, 0]);
        } else {
            assert_eq!(*sum, 9, "rank {r}");
            assert_eq!(ranks, &[5, 3, 1]);
        }
        assert_eq!(ranks[*sub_rank], r as i64);
    }
}

#[test]
fn a_rank_without_color_gets_no_communicator_and_splits_of_splits_work() {
    let out = hcomm::host::run_with(5, &options(), |comm| {
        let r = comm.rank();
        let sub = comm.split((r != 4).then_some(0), 0)?;
        let result = match &sub {
            None => None,
            Some(sub) => {
                let pair = sub.split(Some((sub.rank() / 2) as u32), 0)?.expect("colored");
                let mut x = [r as u32];
                pair.all_reduce_in_place(&mut x, ReduceOp::Max)?;
                Some(x[0])
            }
        };
        comm.barrier()?;
        Ok(result)
    })
    .unwrap();
    assert_eq!(out, vec![Some(1), Some(1), Some(3), Some(3), None]);
}

#[test]
fn subgroups_are_created_once_and_outlive_their_parent_handle() {
    let out = hcomm::host::run_with(4, &options(), |comm| {
        let members = if comm.rank() < 2 { vec![0, 1] } else { vec![2, 3] };
        let a = comm.subgroup("pairs", &members)?;
        let b = comm.subgroup("pairs", &members)?;
        let same = a.same_group(&b);
        let whole = comm.subgroup("all", &[0, 1, 2, 3])?;
        assert_eq!(whole.world(), 4);
        let sub = a.clone();
        drop(a);
        let mut x = [comm.rank() as i32 + 1];
        sub.all_reduce_in_place(&mut x, ReduceOp::Prod)?;
        Ok((same, x[0]))
    })
    .unwrap();
    assert_eq!(out, vec![(true, 2), (true, 2), (true, 12), (true, 12)]);
}

#[test]
fn the_policy_choice_is_queryable_and_overridable_per_communicator() {
    hcomm::host::run_with(4, &options(), |comm| {
        assert_eq!(comm.algorithm(Collective::AllReduce, 1 << 24), Algorithm::Direct);
        // Small calls of in-process ranks go through the board.
        assert_eq!(comm.algorithm(Collective::AllReduce, 64), Algorithm::OneShot);
        assert_eq!(comm.algorithm(Collective::AllGather, 64), Algorithm::OneShot);
        assert_eq!(comm.algorithm(Collective::AllGather, 1 << 20), Algorithm::Direct);
        comm.set_algorithm(Collective::AllReduce, Some(Algorithm::ReduceBroadcast))?;
        assert_eq!(
            comm.algorithm(Collective::AllReduce, 1 << 24),
            Algorithm::ReduceBroadcast
        );
        let mut x = [1u8; 3];
        comm.all_reduce_in_place(&mut x, ReduceOp::Sum)?;
        assert_eq!(x, [4; 3]);
        assert_eq!(
            comm.last_algorithm(Collective::AllReduce),
            Some(Algorithm::ReduceBroadcast)
        );
        assert!(comm
            .set_algorithm(Collective::AllReduce, Some(Algorithm::Bruck))
            .is_err());
        Ok(())
    })
    .unwrap();
    let opts = options().with_topology(hcomm::Topology::Ring);
    hcomm::host::run_with(3, &opts, |comm| {
        assert_eq!(comm.algorithm(Collective::AllGather, 64), Algorithm::Ring);
        Ok(())
    })
    .unwrap();
}

#[test]
fn hcomm_algo_is_read_from_the_environment_and_bad_values_are_config_errors() {
    // Only this test in this binary sets the variable.
    std::env::set_var("HCOMM_ALGO", "all_gather=bruck,broadcast=scatter_all_gather");
    let out = hcomm::host::run(4, |comm| {
        Ok((
            comm.algorithm(Collective::AllGather, 8),
            comm.algorithm(Collective::Broadcast, 8),
        ))
    });
    std::env::set_var("HCOMM_ALGO", "all_gather=pairwise");
    let bad = hcomm::host::run(2, |_| Ok(()));
    std::env::remove_var("HCOMM_ALGO");
    assert_eq!(out.unwrap()[0], (Algorithm::Bruck, Algorithm::ScatterAllGather));
    let Err(hcomm::Error::Config { message }) = bad else {
        panic!("{bad:?}")
    };
    assert!(
        message.contains("`pairwise` is not an algorithm of `all_gather`"),
        "{message}"
    );
}
