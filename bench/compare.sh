#!/usr/bin/env bash
# hcomm against Open MPI on this machine, side by side and interleaved, so
# that both see the same load: ratios measured in the same run are what
# counts (an absolute figure moves by +-20 % between runs on a shared box).
#
#   bench/compare.sh [RUNS]        RUNS rounds (default 3), each: for 2 and 4
#                                  ranks, hcomm-bench, Open MPI with default
#                                  settings and Open MPI "nommap"; then memcpy
#
# Environment:
#   OUT=dir      results folder (default target/bench-compare)
#   SIZES=list   sizes (default 4K,64K,1M,16M,64M)
#   OPS=list     hcomm-bench ops (default all_reduce,all_gather,reduce_scatter,all_to_all,sendrecv)
#   RANKS=list   world sizes (default "2 4")
#   PROCS=1      hcomm-bench runs one process per rank (hcomm-run): the
#                multi-process host transport instead of in-process ranks
#   CARGO_TARGET_DIR  where cargo builds (default target/): the binaries
#                are taken from its release/ folder
#
# Installs Open MPI with apt-get when mpicc or mpirun is missing, builds the
# baselines in bench/baseline/ and hcomm-bench (release), prints one table
# (hcomm busbw, Open MPI default and nommap, hcomm over the better of them,
# the memcpy ceiling) into $OUT/table.md and draws $OUT/svg/<op>.svg.
#
# Open MPI runs over shared memory only (pml ob1, btl self,vader, CMA single
# copy). 2 ranks: one per core, bound. 4 ranks on fewer cores: oversubscribed,
# unbound, yielding when idle. "nommap" tells glibc malloc never to use mmap
# and never to trim, which removes the page faults of the temporary buffer
# Open MPI allocates per large all-reduce / reduce-scatter call: the stronger
# baseline at large sizes. hcomm-bench runs its ranks as threads of one
# process (with PROCS=1, as processes), bound one per core when they fit
# (HCOMM_BIND=core, the default), else unbound.
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
RUNS=${1:-3}
OUT=${OUT:-$ROOT/target/bench-compare}
SIZES=${SIZES:-4K,64K,1M,16M,64M}
OPS=${OPS:-all_reduce,all_gather,reduce_scatter,all_to_all,sendrecv}
RANKS=${RANKS:-"2 4"}

if ! command -v mpicc >/dev/null || ! command -v mpirun >/dev/null; then
  echo "== installing Open MPI (openmpi-bin, libopenmpi-dev)" >&2
  SUDO=; [ "$(id -u)" = 0 ] || SUDO=sudo
  $SUDO apt-get update
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y openmpi-bin libopenmpi-dev
fi

mkdir -p "$OUT/bin"
rm -f "$OUT"/hcomm_*.jsonl "$OUT"/mpi_*.tsv "$OUT"/memcpy_*.tsv
mpicc -O2 -Wall -o "$OUT/bin/mpi_coll_bench" "$ROOT/bench/baseline/mpi_coll_bench.c"
gcc -O2 -Wall -pthread -o "$OUT/bin/memcpy_bw" "$ROOT/bench/baseline/memcpy_bw.c"
(cd "$ROOT" && cargo build --release -p hcomm-bench -p hcomm-run)
RELEASE=${CARGO_TARGET_DIR:-$ROOT/target}/release
BENCH=$RELEASE/hcomm-bench
hcomm_bench() {  # hcomm_bench <ranks> <args>: JSON rows on stdout
  local n=$1
  shift
  if [ -n "${PROCS:-}" ]; then
    # rank 0 prints the rows, which hcomm-run prefixes with "[0] "
    "$RELEASE/hcomm-run" -n "$n" -- "$BENCH" "$@" | sed -n 's/^\[0\] //p'
  else
    "$BENCH" --ranks "$n" "$@"
  fi
}

MPIRUN=(mpirun --allow-run-as-root --mca pml ob1 --mca btl self,vader)
NOMMAP=(-x MALLOC_MMAP_THRESHOLD_=4294967296 -x MALLOC_TRIM_THRESHOLD_=68719476736)
mpi_args() {  # mpi_args <ranks>: placement as described above
  if [ "$1" -le "$(nproc)" ]; then
    printf "%s " -n "$1" --map-by core --bind-to core
  else
    printf "%s " --oversubscribe -n "$1" --bind-to none --mca mpi_yield_when_idle 1
  fi
}
# The memcpy ceiling of n ranks at size S is measured with min(n, cores)
# threads, each copying S * n / threads bytes: the buffers of every rank that
# shares its core (hcomm-bench-compare picks the closest measured size).
to_bytes() {  # 4K -> 4096, 64M -> 67108864
  case $1 in
    *K) echo $((${1%K} << 10)) ;;
    *M) echo $((${1%M} << 20)) ;;
    *G) echo $((${1%G} << 30)) ;;
    *) echo "$1" ;;
  esac
}
CORES=$(nproc)
MEMCPY_THREADS=1
MEMCPY_SIZES=
for n in $RANKS; do
  t=$((n < CORES ? n : CORES))
  MEMCPY_THREADS="$MEMCPY_THREADS,$t"
  for s in ${SIZES//,/ }; do
    MEMCPY_SIZES="$MEMCPY_SIZES,$(($(to_bytes "$s") * n / t))"
  done
done
MEMCPY_THREADS=$(echo "$MEMCPY_THREADS" | tr , '\n' | sort -nu | paste -sd,)
MEMCPY_SIZES=$(echo "${MEMCPY_SIZES#,}" | tr , '\n' | sort -nu | paste -sd,)
MPI_OPS=$(echo "$OPS" | sed 's/all_reduce/allreduce/; s/all_gather/allgather/; s/reduce_scatter/reducescatter/; s/all_to_all/alltoall/')

{
  echo "date: $(date -u +%FT%TZ)"
  echo "cpu: $(lscpu | sed -n 's/^Model name: *//p'), $(nproc) cores"
  echo "memory: $(free -g | awk '/^Mem:/ {print $2}') GiB"
  echo "load average at start: $(cut -d' ' -f1-3 /proc/loadavg)"
  echo "open mpi: $(mpirun --version | head -1)"
  echo "rustc: $(rustc --version)"
  echo "hcomm: $(git -C "$ROOT" rev-parse --short HEAD 2>/dev/null || echo unknown)"
  echo "hcomm ranks: $([ -n "${PROCS:-}" ] && echo "one process each (hcomm-run)" || echo "threads of one process")"
} > "$OUT/machine.txt"

for k in $(seq 1 "$RUNS"); do
  echo "load average before run $k: $(cut -d' ' -f1-3 /proc/loadavg)" >> "$OUT/machine.txt"
  for n in $RANKS; do
    echo "== run $k/$RUNS, $n ranks: hcomm" >&2
    for op in ${OPS//,/ }; do
      hcomm_bench "$n" "$op" --sizes "$SIZES" --json --quiet >> "$OUT/hcomm_n${n}_run${k}.jsonl"
    done
    echo "== run $k/$RUNS, $n ranks: Open MPI" >&2
    # shellcheck disable=SC2046 # mpi_args prints separate words on purpose
    "${MPIRUN[@]}" $(mpi_args "$n") "$OUT/bin/mpi_coll_bench" -o "$MPI_OPS" -s "$SIZES" > "$OUT/mpi_n${n}_run${k}.tsv"
    echo "== run $k/$RUNS, $n ranks: Open MPI nommap" >&2
    # shellcheck disable=SC2046
    "${MPIRUN[@]}" $(mpi_args "$n") "${NOMMAP[@]}" "$OUT/bin/mpi_coll_bench" -o "$MPI_OPS" -s "$SIZES" \
      > "$OUT/mpi_n${n}nommap_run${k}.tsv"
  done
  echo "== run $k/$RUNS: memcpy" >&2
  "$OUT/bin/memcpy_bw" -s "$MEMCPY_SIZES" -t "$MEMCPY_THREADS" > "$OUT/memcpy_run${k}.tsv"
done
echo "load average at end: $(cut -d' ' -f1-3 /proc/loadavg)" >> "$OUT/machine.txt"

"$RELEASE/hcomm-bench-compare" "$OUT" --svg "$OUT/svg" | tee "$OUT/table.md"
cat "$OUT/machine.txt"
