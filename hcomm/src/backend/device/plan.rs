//! How in-flight point-to-point operations become library calls.
//!
//! `HcclBatchSendRecv` takes at most one send and one receive per peer per
//! call, and a device stream runs its calls one after another. Operations are
//! therefore split by their position on each channel: the k-th send to and the
//! k-th receive from every peer go in call k. Both ends of a channel count the
//! same messages in the same order, so they agree on the calls, and no call
//! waits on a message that only a later call of the peer would move. NCCL uses
//! the same plan (one `ncclGroupStart..End` per call) so both backends behave
//! alike.

use crate::backend::Dir;

/// The calls for operations `(peer, dir)` in posting order: `calls[k]` holds
/// the indices of the operations that are the k-th on their channel.
pub(crate) fn split_by_channel_position(ops: &[(usize, Dir)]) -> Vec<Vec<usize>> {
    let mut seen: Vec<((usize, Dir), usize)> = Vec::new();
    let mut calls: Vec<Vec<usize>> = Vec::new();
    for (i, &channel) in ops.iter().enumerate() {
        let position = if let Some((_, n)) = seen.iter_mut().find(|(c, _)| *c == channel) {
            *n += 1;
            *n - 1
        } else {
            seen.push((channel, 1));
            0
        };
        if calls.len() <= position {
            calls.resize_with(position + 1, Vec::new);
        }
        calls[position].push(i);
    }
    calls
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::backend::Dir::{Recv, Send};

    #[test]
    fn one_call_when_every_channel_has_one_message() {
        let ops = [(1, Send), (1, Recv), (2, Send), (3, Recv)];
        assert_eq!(split_by_channel_position(&ops), vec![vec![0, 1, 2, 3]]);
    }

    #[test]
    fn kth_message_of_each_channel_goes_to_call_k() {
        // two sends to 1, three receives from 1, one send to 2
        let ops = [(1, Send), (1, Recv), (1, Send), (1, Recv), (2, Send), (1, Recv)];
        assert_eq!(
            split_by_channel_position(&ops),
            vec![vec![0, 1, 4], vec![2, 3], vec![5]]
        );
    }

    #[test]
    fn every_call_has_at_most_one_op_per_peer_and_direction() {
        let ops: Vec<(usize, Dir)> = (0..40)
            .map(|i| ((i * 7) % 5, if i % 3 == 0 { Send } else { Recv }))
            .collect();
        let calls = split_by_channel_position(&ops);
        let mut covered: Vec<usize> = calls.iter().flatten().copied().collect();
        covered.sort_unstable();
        assert_eq!(covered, (0..40).collect::<Vec<_>>());
        for call in &calls {
            for (a, &i) in call.iter().enumerate() {
                for &j in &call[..a] {
                    assert_ne!(ops[i], ops[j], "two ops of one channel in one call");
                }
            }
            // posting order is kept inside a call
            assert!(call.windows(2).all(|w| w[0] < w[1]));
        }
    }

    #[test]
    fn both_ends_agree_on_the_call_of_each_message() {
        // rank A sends m0, m1, m2 to B interleaved with receives from C;
        // B receives them with other traffic in between: message k of the
        // A->B channel is in call k at both ends.
        let a = [(1, Send), (2, Recv), (1, Send), (1, Send), (2, Recv)];
        let b = [(3, Send), (0, Recv), (0, Recv), (3, Send), (0, Recv)];
        let call_of = |ops: &[(usize, Dir)], calls: &[Vec<usize>], want: (usize, Dir), k: usize| {
            let idx = ops
                .iter()
                .enumerate()
                .filter(|(_, o)| **o == want)
                .nth(k)
                .map(|(i, _)| i)
                .unwrap();
            calls.iter().position(|c| c.contains(&idx)).unwrap()
        };
        let (ca, cb) = (split_by_channel_position(&a), split_by_channel_position(&b));
        for k in 0..3 {
            assert_eq!(call_of(&a, &ca, (1, Send), k), call_of(&b, &cb, (0, Recv), k));
        }
    }
}
