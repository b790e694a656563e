# Session 9, call 1 (x2, about 540 s).
# GPU0: the GPU tier main part on main (first run on the R7 change alone; if it fails in dq/dk/dw or WY-backward
#       outputs, revert febc6f9), then tune_chunk_stages' new K = 100 / bit-identity checks at main, then fla's K64 default.
# GPU1: branch fast-sigmoid (tree dev_scratch/fsig) vs main at the conv anchors, each beside fla; then the conv gather
#       backward's tiles (branch conv-bwd-gather, tree dev_scratch/convg) with what time is left.
set -u
GPU_ENV_NEEDS="fla, xdist" source scripts/gpu_env.sh
T0=$SECONDS; FINAL=$OUT; W=/tmp/w1; rm -rf $W; mkdir -p $W/t $W/s $W/k $W/fm $W/fs $W/c /tmp/tcache
stamp() { echo "[$((SECONDS-T0)) s] $*"; }
export TRITON_CACHE_DIR=/tmp/tcache; tar xzf dev_scratch/autotune.tgz -C /tmp/tcache
for d in convg fsig; do cp -r .site dev_scratch/$d/ 2>/dev/null; done
( export CUDA_VISIBLE_DEVICES=0
  OUT=$W/t PARTS=1 timeout 330 bash scripts/gpu_tier.sh > $W/t/summary.txt 2>&1; stamp "tier rc $?" >> $W/t/summary.txt
  OUT=$W/s timeout 120 python3 benchmarks/tune_chunk_stages.py --stages dqkwg --base-only > $W/s/log.txt 2>&1; stamp "stage checks rc $?" >> $W/s/log.txt
  OUT=$W/k timeout $((530 - (SECONDS - T0))) bash scripts/gpu_bench.sh --ops chunk_gated_delta_rule --shapes fla-b8-t1024-h8-d64 --modes fwdbwd,fwd --providers fla_ascend,fla --timeout 100 > $W/k/log.txt 2>&1; stamp "k64 rc $?" >> $W/k/log.txt ) &
( export CUDA_VISIBLE_DEVICES=1
  OUT=$W/fm timeout 130 bash scripts/gpu_bench.sh --ops causal_conv1d --shapes conv-anchors --modes fwd,fwdbwd --providers fla_ascend,fla --timeout 45 > $W/fm/log.txt 2>&1; stamp "conv main rc $?" >> $W/fm/log.txt
  (cd dev_scratch/fsig && OUT=$W/fs timeout 130 bash scripts/gpu_bench.sh --ops causal_conv1d --shapes conv-anchors --modes fwd,fwdbwd --providers fla_ascend,fla --timeout 45 > $W/fs/log.txt 2>&1); stamp "conv fast-sigmoid rc $?" >> $W/fs/log.txt
  (cd dev_scratch/convg && timeout $((530 - (SECONDS - T0))) python3 benchmarks/tune_tiles.py --op causal_conv1d --out $W/c \
     --variants 32x128w4/32x64w4,32x128w4/64x64w8,32x128w4/32x64w2,32x128w4/16x128w4 > $W/c/log.txt 2>&1); stamp "conv tiles rc $?" >> $W/c/log.txt ) &
wait
stamp done
tail -15 $W/t/summary.txt; grep "^|" $W/s/ab.md 2>/dev/null | cut -c1-300; tail -1 $W/s/log.txt
grep -hE "^\[|exit" $W/fm/log.txt $W/fs/log.txt $W/k/log.txt | cut -c1-200
grep "^|" $W/c/causal_conv1d_tiles.md 2>/dev/null | cut -c1-220 || tail -5 $W/c/log.txt
rm -rf $W/*/parts; (cd /tmp/tcache && find . -name '*.autotune.json' | tar czf $W/autotune.tgz -T -)
(cd $W && tar czf $FINAL/call1.tgz .)
