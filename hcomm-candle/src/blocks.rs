//! The blocks a split, a gather or a reduce-scatter moves along one
//! dimension, and the strided layouts that reorder them, for storage that
//! collectives see as flat runs (the CUDA halves; the layouts are checked
//! on CPU storage by this module's tests).

use candle_core::{Layout, Shape};
use hcomm::tp::Dim;

/// The blocks of a tensor along `axis`: `outer` runs (the product of the
/// dimensions before it), each of `len` slices of `inner` elements;
/// `part` is one rank's share of `len`.
#[derive(Debug)]
pub(crate) struct Blocks {
    pub(crate) axis: usize,
    pub(crate) outer: usize,
    pub(crate) len: usize,
    pub(crate) inner: usize,
    pub(crate) part: usize,
}

impl Blocks {
    /// The blocks of a tensor of `dims` along `dim`, for `parts` equal
    /// parts; the error names `what` and the cause.
    pub(crate) fn new(dims: &[usize], dim: Dim, parts: usize, what: &str) -> Result<Blocks, String> {
        let axis = dim
            .index(dims.len())
            .ok_or_else(|| format!("{what}: a tensor of no dimensions (a scalar) has no dimension to split or join"))?;
        let len = dims[axis];
        if !len.is_multiple_of(parts) {
            return Err(format!(
                "{what}: dimension {axis} has length {len} (shape {dims:?}), which the group size {parts} does not divide"
            ));
        }
        Ok(Blocks {
            axis,
            outer: dims[..axis].iter().product(),
            len,
            inner: dims[axis + 1..].iter().product(),
            part: len / parts,
        })
    }

    /// `dims` with the blocked dimension's length replaced by `len`.
    pub(crate) fn dims_with(&self, dims: &[usize], len: usize) -> Shape {
        let mut d = dims.to_vec();
        d[self.axis] = len;
        Shape::from(d)
    }

    /// The all-gather's result (`world` tensors of these blocks, one after
    /// another from element 0) read in the order of the tensor joined
    /// along the axis: rank r's slices of run o land in run o after those
    /// of ranks before r.
    pub(crate) fn gathered(&self, world: usize) -> Layout {
        let chunk = self.len * self.inner;
        let n = self.outer * chunk;
        Layout::new(Shape::from((self.outer, world, chunk)), vec![chunk, n, 1], 0)
    }

    /// A contiguous tensor of these blocks from element `start`, read as the
    /// reduce-scatter sends it: rank r's part of every run, as block r.
    pub(crate) fn packed(&self, world: usize, start: usize) -> Layout {
        let chunk = self.part * self.inner;
        Layout::new(
            Shape::from((world, self.outer, chunk)),
            vec![chunk, self.len * self.inner, 1],
            start,
        )
    }
}

#[cfg(test)]
mod tests {
    use candle_core::backend::BackendStorage;
    use candle_core::{CpuStorage, Device, Tensor};

    use hcomm::tp::Dim;

    use super::Blocks;

    /// Rank `r`'s tensor of `dims`: distinct values per rank and element.
    fn rank_tensor(r: usize, dims: &[usize]) -> Tensor {
        let n: usize = dims.iter().product();
        Tensor::from_vec(
            (0..n).map(|i| (r * 1000 + i) as f32).collect::<Vec<_>>(),
            dims,
            &Device::Cpu,
        )
        .unwrap()
    }

    /// `layout` applied to the flat `src`, as the CUDA halves apply it.
    fn reordered(src: Vec<f32>, layout: &candle_core::Layout) -> Vec<f32> {
        let mut dst = CpuStorage::F32(vec![0.0; layout.shape().elem_count()]);
        CpuStorage::F32(src).copy_strided_src(&mut dst, 0, layout).unwrap();
        match dst {
            CpuStorage::F32(v) => v,
            other => panic!("f32 in, {:?} out", other.dtype()),
        }
    }

    fn flat(t: &Tensor) -> Vec<f32> {
        t.flatten_all().unwrap().to_vec1::<f32>().unwrap()
    }

    const SHAPES: [&[usize]; 4] = [&[12], &[12, 12], &[12, 3, 12], &[12, 1, 12]];

    #[test]
    fn the_gathered_layout_joins_every_rank_along_the_axis_as_cat_does() {
        for dims in SHAPES {
            for dim in [Dim::First, Dim::Last] {
                for world in 1..=4 {
                    let b = Blocks::new(dims, dim, 1, "test").unwrap();
                    let xs: Vec<Tensor> = (0..world).map(|r| rank_tensor(r, dims)).collect();
                    let all: Vec<f32> = xs.iter().flat_map(flat).collect();
                    let want = flat(&Tensor::cat(&xs, b.axis).unwrap());
                    assert_eq!(
                        reordered(all, &b.gathered(world)),
                        want,
                        "{dims:?} {dim:?} world {world}"
                    );
                }
            }
        }
    }

    #[test]
    fn the_packed_layout_puts_each_ranks_part_of_every_run_in_its_block() {
        for dims in SHAPES {
            for dim in [Dim::First, Dim::Last] {
                for world in [1, 2, 3, 4] {
                    let b = Blocks::new(dims, dim, world, "test").unwrap();
                    // A tensor from element 7 of its storage, as an offset view.
                    let x = rank_tensor(2, dims);
                    let mut storage = vec![-1.0; 7];
                    storage.extend(flat(&x));
                    let want: Vec<f32> = (0..world)
                        .flat_map(|r| flat(&x.narrow(b.axis, r * b.part, b.part).unwrap()))
                        .collect();
                    assert_eq!(
                        reordered(storage, &b.packed(world, 7)),
                        want,
                        "{dims:?} {dim:?} world {world}"
                    );
                }
            }
        }
    }

    #[test]
    fn blocks_refuse_a_scalar_and_a_length_the_group_does_not_divide() {
        assert_eq!(
            Blocks::new(&[], Dim::Last, 2, "gather_from_tensor_model_parallel_region").unwrap_err(),
            "gather_from_tensor_model_parallel_region: a tensor of no dimensions (a scalar) has no dimension to split or join"
        );
        assert_eq!(
            Blocks::new(&[4, 6], Dim::Last, 4, "scatter_to_tensor_model_parallel_region").unwrap_err(),
            "scatter_to_tensor_model_parallel_region: dimension 1 has length 6 (shape [4, 6]), which the group size 4 does not divide"
        );
        let b = Blocks::new(&[2, 3, 12], Dim::Last, 4, "test").unwrap();
        assert_eq!((b.axis, b.outer, b.len, b.inner, b.part), (2, 6, 12, 1, 3));
        assert_eq!(b.dims_with(&[2, 3, 12], 3).dims(), &[2, 3, 3]);
    }
}
