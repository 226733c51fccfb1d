//! Inputs with known values and the serial reference each rank's result is
//! checked against.

use hcomm::{bf16, f16, DataType, Element, ReduceOp};

use crate::op::Shape;

/// An element type the benchmark can fill with small integers and compare.
pub trait BenchElem: Element {
    /// `v` (below 256) as this type; exact in every type.
    fn small(v: u8) -> Self;
    /// Whether `got` is `want` (the half types, which round every partial
    /// result, within 1 %).
    fn matches(got: Self, want: Self) -> bool {
        got == want
    }
}

macro_rules! exact_elem {
    ($($t:ty),*) => {$(
        impl BenchElem for $t {
            fn small(v: u8) -> Self {
                Self::from(v)
            }
        }
    )*};
}

exact_elem!(u8, i32, u32, i64, u64, f32, f64);

impl BenchElem for i8 {
    fn small(v: u8) -> Self {
        v as i8
    }
}

macro_rules! half_elem {
    ($($t:ty),*) => {$(
        impl BenchElem for $t {
            fn small(v: u8) -> Self {
                <$t>::from_f32(f32::from(v))
            }
            fn matches(got: Self, want: Self) -> bool {
                (got.to_f32() - want.to_f32()).abs() <= 0.01 * want.to_f32().abs()
            }
        }
    )*};
}

half_elem!(f16, bf16);

/// Element `i` of rank `r`'s input to a reduction: 1, 2 or 3, so sums and
/// products stay exact in every type for the worlds a benchmark runs.
fn reduce_input<T: BenchElem>(r: usize, i: usize) -> T {
    T::small(1 + ((r + i) % 3) as u8)
}

/// Element `i` of rank `r`'s data in a data-movement operation: differs
/// between ranks and positions, exact in every type.
fn move_input<T: BenchElem>(r: usize, i: usize) -> T {
    T::small(1 + ((r * 31 + i) % 97) as u8)
}

/// The reduction of element `i` over `world` ranks, in rank order (the
/// mean: the sum, divided once at the end as `ReduceOp::Avg` rounds).
fn reduced<T: BenchElem>(op: ReduceOp, world: usize, i: usize) -> T {
    let mut v = [(1..world).fold(reduce_input(0, i), |acc, r| T::combine(op, acc, reduce_input(r, i)))];
    if op == ReduceOp::Avg {
        T::divide(&mut v, world);
    }
    v[0]
}

/// Rank `rank`'s buffers for one size: `send` (input, never written), and
/// `recv` (the result; for in-place operations also the input).
pub struct Buffers<T> {
    /// The input.
    pub send: Vec<T>,
    /// The output.
    pub recv: Vec<T>,
}

impl<T: BenchElem> Buffers<T> {
    /// Buffers of `count` elements ("size" as the shape defines it) for
    /// `rank` of `world`, inputs filled in.
    pub fn new(shape: Shape, rank: usize, world: usize, count: usize) -> Buffers<T> {
        let block = count / world;
        let fill = |n: usize, f: &dyn Fn(usize) -> T| (0..n).map(f).collect::<Vec<T>>();
        let (send, recv) = match shape {
            Shape::AllReduce(_) | Shape::ReduceScatter(_) | Shape::Reduce(_) => {
                let out = if matches!(shape, Shape::ReduceScatter(_)) {
                    block
                } else {
                    count
                };
                (fill(count, &|i| reduce_input(rank, i)), vec![T::ZERO; out])
            }
            Shape::AllReduceInPlace(_) => {
                let input = fill(count, &|i| reduce_input(rank, i));
                (input.clone(), input)
            }
            Shape::AllGather => (fill(block, &|i| move_input(rank, i)), vec![T::ZERO; count]),
            Shape::AllToAll | Shape::SendRecv => (fill(count, &|i| move_input(rank, i)), vec![T::ZERO; count]),
            Shape::Broadcast => {
                let input = fill(count, &|i| move_input(0, i));
                let buf = if rank == 0 { input.clone() } else { vec![T::ZERO; count] };
                (input, buf)
            }
        };
        Buffers { send, recv }
    }

    /// Puts the input back into `recv` before an in-place operation runs
    /// again (its previous run overwrote it).
    pub fn reset(&mut self, shape: Shape) {
        if matches!(shape, Shape::AllReduceInPlace(_)) {
            self.recv.copy_from_slice(&self.send);
        }
    }

    /// The index of the first element of `recv` that differs from the
    /// serial reference, if any.
    pub fn first_error(&self, shape: Shape, rank: usize, world: usize) -> Option<usize> {
        if matches!(shape, Shape::Reduce(_)) && rank != 0 {
            return None; // only the root's output is defined
        }
        let block = self.recv.len() / world.max(1);
        let want = |i: usize| -> T {
            match shape {
                Shape::AllReduce(op) | Shape::AllReduceInPlace(op) | Shape::Reduce(op) => reduced(op, world, i),
                Shape::ReduceScatter(op) => reduced(op, world, rank * self.recv.len() + i),
                Shape::AllGather => move_input(i / block, i % block),
                Shape::AllToAll => move_input(i / block, rank * block + i % block),
                Shape::Broadcast => move_input(0, i),
                Shape::SendRecv => move_input((rank + world - 1) % world, i),
            }
        };
        self.recv
            .iter()
            .enumerate()
            .position(|(i, &got)| !T::matches(got, want(i)))
    }
}

/// Parses a `--dtype` name (any of [`DataType::ALL`]: `f32`, `bf16`, ...;
/// also `float`, `half`).
pub fn parse_dtype(name: &str) -> Result<DataType, String> {
    let name = name.trim();
    let alias = match name {
        "float" | "float32" => "f32",
        "double" | "float64" => "f64",
        "half" | "float16" => "f16",
        "bfloat16" => "bf16",
        "int" | "int32" => "i32",
        other => other,
    };
    DataType::ALL.into_iter().find(|d| d.name() == alias).ok_or_else(|| {
        let names: Vec<_> = DataType::ALL.iter().map(|d| d.name()).collect();
        format!("unknown dtype `{name}`; expected one of {}", names.join(", "))
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_correct_result_passes_and_any_wrong_element_is_found() {
        let world = 3;
        for shape in [
            Shape::AllReduce(ReduceOp::Sum),
            Shape::AllReduceInPlace(ReduceOp::Max),
            Shape::ReduceScatter(ReduceOp::Prod),
            Shape::AllGather,
            Shape::AllToAll,
            Shape::Broadcast,
            Shape::SendRecv,
            Shape::Reduce(ReduceOp::Min),
        ] {
            // Compute every rank's result serially from the other ranks' inputs.
            let bufs: Vec<Buffers<f32>> = (0..world).map(|r| Buffers::new(shape, r, world, 12)).collect();
            for (rank, b) in bufs.iter().enumerate() {
                let mut mine = Buffers::<f32>::new(shape, rank, world, 12);
                let block = 12 / world;
                for i in 0..mine.recv.len() {
                    mine.recv[i] = match shape {
                        Shape::AllReduce(op) | Shape::AllReduceInPlace(op) | Shape::Reduce(op) => bufs[1..]
                            .iter()
                            .fold(bufs[0].send[i], |a, o| f32::combine(op, a, o.send[i])),
                        Shape::ReduceScatter(op) => {
                            let g = rank * block + i;
                            bufs[1..]
                                .iter()
                                .fold(bufs[0].send[g], |a, o| f32::combine(op, a, o.send[g]))
                        }
                        Shape::AllGather => bufs[i / block].send[i % block],
                        Shape::AllToAll => bufs[i / block].send[rank * block + i % block],
                        Shape::Broadcast => bufs[0].recv[i],
                        Shape::SendRecv => bufs[(rank + world - 1) % world].send[i],
                    };
                }
                assert_eq!(mine.first_error(shape, rank, world), None, "{shape:?} rank {rank}");
                let last = mine.recv.len() - 1;
                mine.recv[last] += 1.0;
                // Only the root's output of a reduce is defined.
                let root_only = matches!(shape, Shape::Reduce(_)) && rank != 0;
                assert_eq!(
                    mine.first_error(shape, rank, world),
                    (!root_only).then_some(last),
                    "{shape:?} rank {rank}"
                );
                assert!(!b.send.is_empty());
            }
        }
    }

    #[test]
    fn dtypes_parse_with_aliases() {
        assert_eq!(parse_dtype("f32"), Ok(DataType::F32));
        assert_eq!(parse_dtype("float"), Ok(DataType::F32));
        assert_eq!(parse_dtype("bfloat16"), Ok(DataType::Bf16));
        assert!(parse_dtype("f128").unwrap_err().contains("unknown dtype `f128`"));
    }

    #[test]
    fn half_types_compare_within_one_percent() {
        assert!(f16::matches(f16::from_f32(100.0), f16::from_f32(100.5)));
        assert!(!f16::matches(f16::from_f32(100.0), f16::from_f32(103.0)));
        assert!(!f32::matches(100.0, 100.5));
    }
}
